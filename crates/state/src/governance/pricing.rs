//! Groups' pricing for chargeback: each group's markup and rate card of
//! its own, read from its record whenever the groups load (the card is
//! kept as its entries are written and compiled here once, never on a
//! request), and what a settled request is charged along its group's chain
//! ([`switchyard_governance::card::resolve`]).

use std::sync::Arc;

use switchyard_governance::card::{resolve, Pricing, Served};
use switchyard_governance::{NanoUsd, Tokens};
use switchyard_store::GroupRecord;

use super::HashMap;

/// Each group's parent and pricing, by name.
pub(crate) type GroupPrices = HashMap<String, (Option<String>, Pricing)>;

/// The deepest chain walked (a parent chain is proven to end; a guard all the same).
const MAX_DEPTH: usize = 64;

/// Reads every group's pricing from its record. A stored card entry that
/// no longer reads (written by another version) is left out, warned of:
/// that lane falls to the group's markup, else its parent's pricing.
pub(crate) fn compile<'a>(groups: impl IntoIterator<Item = &'a GroupRecord>) -> GroupPrices {
    groups
        .into_iter()
        .map(|group| {
            let cards = group
                .rate_card
                .iter()
                .filter_map(|(lane, entry)| match switchyard_config::card::stored_entry(entry) {
                    Ok(rate) => Some((Arc::from(lane.as_str()), rate.card())),
                    Err(issues) => {
                        let problem = issues.first().map(ToString::to_string).unwrap_or_default();
                        tracing::warn!(group = %group.name, lane = %lane, %problem, "a group's rate card entry does not read; its lane is priced without it");
                        None
                    }
                })
                .collect();
            (group.name.clone(), (group.parent.clone(), Pricing { markup: group.markup, cards }))
        })
        .collect()
}

/// What a request of `group`'s that cost `cost` is charged: on lane
/// `lane` (its name and provider; `None`: an MCP tool call), `tokens`
/// served as `served`, priced by the nearest group of the chain that names
/// the lane in its card or sets a markup (none: its cost).
pub(crate) fn charge(
    prices: &GroupPrices,
    group: Option<&str>,
    lane: Option<(&str, &str)>,
    tokens: &Tokens,
    served: Served,
    cost: NanoUsd,
) -> NanoUsd {
    let first = group.and_then(|name| prices.get(name));
    let chain = std::iter::successors(first, |(parent, _)| parent.as_deref().and_then(|p| prices.get(p)));
    resolve(chain.take(MAX_DEPTH).map(|(_, pricing)| pricing), lane).charge(tokens, served, cost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use switchyard_governance::card::Markup;

    fn group(name: &str, parent: Option<&str>, markup: Option<u32>, card: serde_json::Value) -> GroupRecord {
        GroupRecord {
            name: name.into(),
            parent: parent.map(str::to_owned),
            budget: None,
            limits: Default::default(),
            retention: None,
            end_users: None,
            markup: markup.map(Markup),
            rate_card: serde_json::from_value(card).unwrap_or_default(),
            from_config: false,
            created_at: 0,
        }
    }

    #[test]
    fn a_request_is_charged_at_the_nearest_card_naming_its_lane_else_the_nearest_markup() {
        let groups = [
            group("acme", None, Some(150_000), json!({"sonnet": {"input_utok": 4, "output_utok": 20}})),
            group("acme-eu", Some("acme"), None, json!({})),
            group("acme-lab", Some("acme"), Some(0), json!({"gpt": {"input_utok": 1, "output_utok": 2, "bad": 1}})),
            group("globex", None, None, json!({"claude/*": {"input_utok": 10, "output_utok": 50}})),
        ];
        let prices = compile(&groups);
        let tokens = Tokens { input: 1_000, output: 100, ..Tokens::default() };
        let at = |group: Option<&str>, lane: Option<(&str, &str)>| {
            charge(&prices, group, lane, &tokens, Served::default(), 1_000_000)
        };
        // acme's card: 1,000 × 4 + 100 × 20 µUSD, whatever it cost; a
        // subgroup that sets nothing inherits it.
        assert_eq!(at(Some("acme"), Some(("sonnet", "claude"))), 6_000_000);
        assert_eq!(at(Some("acme-eu"), Some(("sonnet", "claude"))), 6_000_000);
        // A lane acme's card does not name: its markup over cost.
        assert_eq!(at(Some("acme-eu"), Some(("haiku", "claude"))), 1_150_000);
        // A subgroup's own markup (even 0) stands before acme's card; its
        // entry that does not read is left out, not the group.
        assert_eq!(at(Some("acme-lab"), Some(("sonnet", "claude"))), 1_000_000);
        assert_eq!(at(Some("acme-lab"), Some(("gpt", "openai"))), 1_000_000);
        // `provider/*` prices every lane of the provider; an unknown group,
        // no group, or an MCP call on a group with no markup: the cost.
        assert_eq!(at(Some("globex"), Some(("opus", "claude"))), 15_000_000);
        assert_eq!(at(Some("globex"), None), 1_000_000);
        assert_eq!(at(Some("nosuch"), Some(("sonnet", "claude"))), 1_000_000);
        assert_eq!(at(None, Some(("sonnet", "claude"))), 1_000_000);
    }
}

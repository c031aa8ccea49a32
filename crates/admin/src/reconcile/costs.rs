//! The providers' cost reports, read per model and UTC day:
//!
//! - OpenAI's `GET /v1/organization/costs` (`group_by=line_item`): a
//!   result's `amount.value` is dollars and its `line_item` names the model
//!   and the kind billed (`gpt-4o-2024-08-06, input`); a line item without
//!   that form (`assistants api | file search`) is a line of its own.
//! - Anthropic's `GET /v1/organizations/cost_report`
//!   (`group_by[]=description`): a result's `amount` is cents as a decimal
//!   string, its `model` the model (null for costs not of tokens, which go
//!   under their `cost_type`). It has no workspace filter: with
//!   `workspace:` the report is grouped by workspace too and the other
//!   workspaces' rows are left out.
//!
//! Amounts are read from their decimal text, never as floats
//! (`reconcile::amount`); a row whose amount is negative, not a number,
//! past a billion USD or not in USD is left out and counted by reason.

use serde::Deserialize;
use serde_json::value::RawValue;
use switchyard_config::proof::{Account, AccountKind};
use switchyard_governance::reconcile::amount::{self, PicoUsd, Skip, Skipped, Unit};
use switchyard_governance::reconcile::day_of;
use switchyard_state::Gateway;

use super::{pages, query_value, rfc3339, AnthropicBucket, OpenAiBucket, Page, ReportPage, DAY_MS};

/// A cost report's row: day, model, and its amount or why it is left out.
type CostRow = (String, String, Result<PicoUsd, Skip>);

/// The account's cost report over `[from_ms, to_ms)` as (day, model,
/// pico-USD), every page, and the rows left out.
pub(super) async fn report(
    gateway: &Gateway,
    account: &Account,
    from_ms: i64,
    to_ms: i64,
) -> Result<(Vec<(String, String, PicoUsd)>, Skipped), String> {
    let scope = account.scope.as_deref();
    let rows = pages(
        gateway,
        account,
        "cost",
        |page| url(account, from_ms, to_ms, page),
        |body| match account.kind {
            AccountKind::OpenAi => read_openai(body),
            AccountKind::Anthropic => read_anthropic(body, scope),
        },
    )
    .await?;
    let mut skipped = Skipped::default();
    let mut kept = Vec::with_capacity(rows.len());
    for (day, model, amount) in rows {
        match amount {
            Ok(pico) => kept.push((day, model, pico)),
            Err(skip) => skipped.count(skip),
        }
    }
    Ok((kept, skipped))
}

/// The cost report's URL for `[from_ms, to_ms)`: one bucket a day, by
/// line item (OpenAI) or description (Anthropic: model, kind of cost).
fn url(account: &Account, from_ms: i64, to_ms: i64, page: Option<&str>) -> String {
    let days = (to_ms - from_ms).div_euclid(DAY_MS).max(1);
    let mut url = match account.kind {
        AccountKind::OpenAi => format!(
            "{}/v1/organization/costs?start_time={}&end_time={}&bucket_width=1d&group_by=line_item&limit={days}",
            account.base_url,
            from_ms / 1000,
            to_ms / 1000
        ),
        AccountKind::Anthropic => format!(
            "{}/v1/organizations/cost_report?starting_at={}&ending_at={}&bucket_width=1d&group_by[]=description&limit={days}",
            account.base_url,
            rfc3339(from_ms),
            rfc3339(to_ms)
        ),
    };
    match (&account.scope, account.kind) {
        (Some(project), AccountKind::OpenAi) => url.push_str(&format!("&project_ids={}", query_value(project))),
        (Some(_), AccountKind::Anthropic) => url.push_str("&group_by[]=workspace_id"),
        (None, _) => {}
    }
    if let Some(page) = page {
        url.push_str(&format!("&page={}", query_value(page)));
    }
    url
}

/// An amount's JSON (`amount.value`'s number, or a cost report's string)
/// in `unit`, if it is in USD.
fn amount_of(value: Option<&RawValue>, currency: Option<&str>, unit: Unit) -> Result<PicoUsd, Skip> {
    if !currency.is_some_and(amount::is_usd) {
        return Err(Skip::Currency);
    }
    let text = value.ok_or(Skip::Malformed)?.get();
    match text.starts_with('"') {
        true => amount::parse(&serde_json::from_str::<String>(text).map_err(|_| Skip::Malformed)?, unit),
        false => amount::parse(text, unit),
    }
}

#[derive(Deserialize)]
struct OpenAiResult {
    /// `{ value, currency }`, read apart so that a hostile one is a row
    /// left out, not a page refused.
    amount: Option<Box<RawValue>>,
    line_item: Option<String>,
}

#[derive(Deserialize)]
struct OpenAiAmount {
    value: Option<Box<RawValue>>,
    currency: Option<String>,
}

/// The model an OpenAI line item bills: the text before its last `, `
/// (`gpt-4o-2024-08-06, input`), else the whole item (a service's line).
fn line_item_model(item: Option<&str>) -> String {
    match item {
        None => "(all models)".to_owned(),
        Some(item) => item.rsplit_once(", ").map_or(item, |(model, _)| model).trim().to_owned(),
    }
}

/// A page of OpenAI's `GET /v1/organization/costs`, by line item.
fn read_openai(body: &[u8]) -> Result<Page<CostRow>, serde_json::Error> {
    let page: ReportPage<OpenAiBucket<OpenAiResult>> = serde_json::from_slice(body)?;
    let rows = page
        .data
        .into_iter()
        .flat_map(|bucket| {
            let (day, _) = day_of(bucket.start_time.saturating_mul(1000));
            bucket.results.into_iter().map(move |r| {
                let read = r.amount.as_deref().map(|raw| serde_json::from_str::<OpenAiAmount>(raw.get()));
                let amount = match read {
                    Some(Ok(a)) => amount_of(a.value.as_deref(), a.currency.as_deref(), Unit::Usd),
                    _ => Err(Skip::Malformed),
                };
                (day.clone(), line_item_model(r.line_item.as_deref()), amount)
            })
        })
        .collect();
    Ok(Page { rows, has_more: page.has_more, next_page: page.next_page })
}

#[derive(Deserialize)]
struct AnthropicResult {
    /// Cents as a decimal string.
    amount: Option<Box<RawValue>>,
    currency: Option<String>,
    model: Option<String>,
    cost_type: Option<String>,
    workspace_id: Option<String>,
}

/// A page of Anthropic's `GET /v1/organizations/cost_report`, by
/// description; with `workspace`, only that workspace's rows.
fn read_anthropic(body: &[u8], workspace: Option<&str>) -> Result<Page<CostRow>, serde_json::Error> {
    let page: ReportPage<AnthropicBucket<AnthropicResult>> = serde_json::from_slice(body)?;
    let rows = page
        .data
        .into_iter()
        .flat_map(|bucket| {
            let day = bucket.starting_at.get(..10).unwrap_or_default().to_owned();
            bucket
                .results
                .into_iter()
                .filter(move |r| workspace.is_none_or(|w| r.workspace_id.as_deref() == Some(w)))
                .map(move |r| {
                    let amount = amount_of(r.amount.as_deref(), r.currency.as_deref(), Unit::Cents);
                    let model = match (r.model, r.cost_type) {
                        (Some(model), _) => model,
                        (None, Some(kind)) => format!("({kind})"),
                        (None, None) => "(all models)".to_owned(),
                    };
                    (day.clone(), model, amount)
                })
        })
        .collect();
    Ok(Page { rows, has_more: page.has_more, next_page: page.next_page })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The example of OpenAI's costs reference (ungrouped), and rows
    /// grouped by line item as the Cost API cookbook prints them.
    const OPENAI_PAGE: &str = r#"{
      "object": "page",
      "data": [{
        "object": "bucket", "start_time": 1730419200, "end_time": 1730505600,
        "results": [
          { "object": "organization.costs.result", "amount": { "value": 0.06, "currency": "usd" }, "line_item": null, "project_id": null },
          { "object": "organization.costs.result", "amount": { "value": 0.12744, "currency": "usd" }, "line_item": "ft-gpt-4o-2024-08-06, input", "project_id": "proj_abc" },
          { "object": "organization.costs.result", "amount": { "value": 3e-06, "currency": "usd" }, "line_item": "assistants api | file search", "project_id": null },
          { "object": "organization.costs.result", "amount": { "value": 0.028607, "currency": "usd" }, "line_item": "evals | gpt-4o-mini-2024-07-18, input", "project_id": null }
        ]
      }],
      "has_more": true,
      "next_page": "page_AAAAAGdGxdEiJdKOAAAAAGcqsYA="
    }"#;

    /// The example of Anthropic's cost report reference.
    const ANTHROPIC_PAGE: &str = r#"{
      "data": [{
        "starting_at": "2025-08-01T00:00:00Z", "ending_at": "2025-08-02T00:00:00Z",
        "results": [{
          "currency": "USD", "amount": "123.78912", "workspace_id": "wrkspc_01JwQvzr7rXLA5AGx3HKfFUJ",
          "description": "Claude Sonnet 4 Usage - Input Tokens", "cost_type": "tokens", "context_window": "0-200k",
          "model": "claude-sonnet-4-20250514", "service_tier": "standard", "token_type": "uncached_input_tokens"
        }, {
          "currency": "USD", "amount": "1000", "workspace_id": null, "description": "Web Search",
          "cost_type": "web_search", "context_window": null, "model": null, "service_tier": null, "token_type": null
        }]
      }],
      "has_more": true,
      "next_page": "page_MjAyNS0wNS0xNFQwMDowMDowMFo="
    }"#;

    fn account(kind: AccountKind, scope: Option<&str>) -> Account {
        Account {
            kind,
            base_url: "https://api.example".into(),
            admin_key: "k".into(),
            scope: scope.map(str::to_owned),
            providers: Vec::new(),
        }
    }

    #[test]
    fn openai_s_line_items_are_read_by_day_and_model_in_dollars() {
        let page = read_openai(OPENAI_PAGE.as_bytes()).unwrap();
        assert!(page.has_more);
        assert_eq!(page.next_page.as_deref(), Some("page_AAAAAGdGxdEiJdKOAAAAAGcqsYA="));
        let rows: Vec<(&str, &str, Result<PicoUsd, Skip>)> =
            page.rows.iter().map(|(d, m, a)| (d.as_str(), m.as_str(), *a)).collect();
        assert_eq!(
            rows,
            [
                ("2024-11-01", "(all models)", Ok(60_000_000_000)),
                ("2024-11-01", "ft-gpt-4o-2024-08-06", Ok(127_440_000_000)),
                ("2024-11-01", "assistants api | file search", Ok(3_000_000)),
                ("2024-11-01", "evals | gpt-4o-mini-2024-07-18", Ok(28_607_000_000)),
            ]
        );
        // The schema's `result` is read as the example's `results`.
        let schema = r#"{"object":"page","data":[{"object":"bucket","start_time":0,"end_time":86400,
            "result":[{"object":"organization.costs.result","amount":{"value":1,"currency":"usd"},"line_item":"o3, output"}]}],
            "has_more":false,"next_page":null}"#;
        let page = read_openai(schema.as_bytes()).unwrap();
        assert_eq!(page.rows, [("1970-01-01".to_owned(), "o3".to_owned(), Ok(1_000_000_000_000))]);
        assert!(!page.has_more);
    }

    #[test]
    fn anthropic_s_documented_page_is_read_in_cents_by_model() {
        let page = read_anthropic(ANTHROPIC_PAGE.as_bytes(), None).unwrap();
        assert!(page.has_more);
        assert_eq!(page.next_page.as_deref(), Some("page_MjAyNS0wNS0xNFQwMDowMDowMFo="));
        assert_eq!(
            page.rows,
            [
                // "123.78912" cents is $1.2378912.
                ("2025-08-01".to_owned(), "claude-sonnet-4-20250514".to_owned(), Ok(1_237_891_200_000)),
                ("2025-08-01".to_owned(), "(web_search)".to_owned(), Ok(10_000_000_000_000)),
            ]
        );
        // Scoped to a workspace: the others' rows (the default's is null) are not its.
        let scoped = read_anthropic(ANTHROPIC_PAGE.as_bytes(), Some("wrkspc_01JwQvzr7rXLA5AGx3HKfFUJ")).unwrap();
        assert_eq!(scoped.rows.len(), 1);
        assert!(read_anthropic(ANTHROPIC_PAGE.as_bytes(), Some("wrkspc_other")).unwrap().rows.is_empty());
    }

    #[test]
    fn hostile_amounts_are_rows_left_out_with_their_reason_never_a_refused_page() {
        let openai = r#"{"object":"page","data":[{"object":"bucket","start_time":0,"end_time":86400,"results":[
            {"amount":{"value":-0.5,"currency":"usd"},"line_item":"gpt-4o, input"},
            {"amount":{"value":"NaN","currency":"usd"},"line_item":"gpt-4o, input"},
            {"amount":{"value":1e300,"currency":"usd"},"line_item":"gpt-4o, input"},
            {"amount":{"value":0.5,"currency":"eur"},"line_item":"gpt-4o, input"},
            {"amount":{"value":0.5},"line_item":"gpt-4o, input"},
            {"amount":{"value":null,"currency":"usd"},"line_item":"gpt-4o, input"},
            {"amount":{"value":{"cents":5},"currency":"usd"},"line_item":"gpt-4o, input"},
            {"amount":"0.5","line_item":"gpt-4o, input"},
            {"line_item":"gpt-4o, input"},
            {"amount":{"value":"0.25","currency":"USD"},"line_item":"gpt-4o, output"}
        ]}],"has_more":false,"next_page":null}"#;
        let amounts: Vec<Result<PicoUsd, Skip>> =
            read_openai(openai.as_bytes()).unwrap().rows.into_iter().map(|(_, _, a)| a).collect();
        use Skip::*;
        assert_eq!(
            amounts,
            [
                Err(Negative),
                Err(Malformed),
                Err(Huge),
                Err(Currency),
                Err(Currency),
                Err(Malformed),
                Err(Malformed),
                Err(Malformed),
                Err(Malformed),
                Ok(250_000_000_000)
            ]
        );
        let anthropic = r#"{"data":[{"starting_at":"2025-08-01T00:00:00Z","ending_at":"2025-08-02T00:00:00Z","results":[
            {"currency":"USD","amount":"-12","model":"claude-sonnet-4-20250514"},
            {"currency":"USD","amount":"Infinity","model":"claude-sonnet-4-20250514"},
            {"currency":"USD","amount":"99999999999999999999999","model":"claude-sonnet-4-20250514"},
            {"currency":"EUR","amount":"12","model":"claude-sonnet-4-20250514"},
            {"currency":"USD","amount":"","model":"claude-sonnet-4-20250514"},
            {"currency":"USD","amount":"12.5","model":"claude-sonnet-4-20250514"}
        ]}],"has_more":false,"next_page":null}"#;
        let amounts: Vec<Result<PicoUsd, Skip>> =
            read_anthropic(anthropic.as_bytes(), None).unwrap().rows.into_iter().map(|(_, _, a)| a).collect();
        assert_eq!(
            amounts,
            [Err(Negative), Err(Malformed), Err(Huge), Err(Currency), Err(Malformed), Ok(125_000_000_000)]
        );
        // A body that is no report at all is the page's error, not a panic.
        assert!(read_openai(b"{\"data\": 5}").is_err());
        assert!(read_anthropic(b"NaN", None).is_err());
    }

    #[test]
    fn cost_urls_ask_for_days_by_line_item_or_description() {
        let day = 1_765_065_600_000; // 2025-12-07
        let openai = url(&account(AccountKind::OpenAi, Some("proj 1")), day, day + 2 * DAY_MS, Some("p/1"));
        assert_eq!(
            openai,
            "https://api.example/v1/organization/costs?start_time=1765065600&end_time=1765238400&bucket_width=1d&group_by=line_item&limit=2&project_ids=proj%201&page=p%2F1"
        );
        let anthropic = url(&account(AccountKind::Anthropic, None), day, day + DAY_MS, None);
        assert_eq!(
            anthropic,
            "https://api.example/v1/organizations/cost_report?starting_at=2025-12-07T00:00:00Z&ending_at=2025-12-08T00:00:00Z&bucket_width=1d&group_by[]=description&limit=1"
        );
        let scoped = url(&account(AccountKind::Anthropic, Some("wrkspc_1")), day, day + DAY_MS, Some("n"));
        assert!(scoped.ends_with("&group_by[]=description&limit=1&group_by[]=workspace_id&page=n"), "{scoped}");
    }

    #[test]
    fn a_line_item_names_its_model_before_the_kind() {
        assert_eq!(line_item_model(Some("gpt-4o-2024-08-06, input")), "gpt-4o-2024-08-06");
        assert_eq!(line_item_model(Some("gpt-4o-2024-08-06, cached input")), "gpt-4o-2024-08-06");
        assert_eq!(line_item_model(Some("Image models")), "Image models");
        assert_eq!(line_item_model(None), "(all models)");
    }
}

//! `agents:`: the A2A agents the gateway fronts at `/a2a/{agent}`. Each is
//! an HTTP endpoint (`url`) speaking A2A's JSON-RPC binding, or its
//! HTTP+JSON binding when its card offers only that, whose agent
//! card is read from `card` (by default `<url>/.well-known/agent-card.json`,
//! where the A2A SDKs serve it). Both are operator URLs, checked as every
//! outbound URL is (http only to loopback) and resolved again through the
//! SSRF guard when called. Names are path segments callers use and keys'
//! `a2a:` grants name, so they are lower-case letters, digits and `-`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::ssrf::check_outbound_url;
use crate::{duration_or, Issue};

/// The most USD an agent's task may be priced at (or report).
pub const MAX_TASK_USD: f64 = 1000.0;

/// `agents.<name>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Agent {
    /// The name callers reach it by (`/a2a/<name>`).
    pub name: Arc<str>,
    /// Its endpoint: JSON-RPC's, or HTTP+JSON's base when its card offers
    /// only that binding.
    pub url: String,
    /// Where its agent card is read.
    pub card: String,
    /// `Authorization: Bearer` sent to it, when it wants one.
    pub bearer: Option<String>,
    /// Nano-USD held per message before the agent answers, and charged
    /// when it reports no cost of its own.
    pub price_nano: Option<u64>,
    /// Guardrail policies applied to text parts both ways (indexes into
    /// the config's policies).
    pub policies: Vec<usize>,
    /// How long one call (a whole stream included) may take.
    pub timeout: Duration,
    /// Messages per minute the whole gateway sends it (`None`: no cap).
    pub rpm: Option<u32>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The bearer never reaches logs.
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("url", &crate::shown_url(&self.url))
            .field("card", &crate::shown_url(&self.card))
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("price_nano", &self.price_nano)
            .field("policies", &self.policies)
            .field("timeout", &self.timeout)
            .field("rpm", &self.rpm)
            .finish()
    }
}

/// `agents:`, in name order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Agents {
    /// Every agent.
    pub agents: Vec<Agent>,
}

impl Agents {
    /// Agent `name`, if declared.
    pub fn get(&self, name: &str) -> Option<&Agent> {
        self.agents.iter().find(|agent| &*agent.name == name)
    }
}

#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAgent {
    pub url: Option<String>,
    pub card: Option<String>,
    pub bearer: Option<String>,
    pub price_per_task: Option<f64>,
    #[serde(default)]
    pub policies: Vec<String>,
    pub timeout: Option<String>,
    pub rpm: Option<u32>,
}

/// A name an agent may have (a path segment and a grant).
pub fn valid_name(name: &str) -> bool {
    crate::mcp::valid_name(name)
}

/// The card URL of an agent served at `url` when `card:` names none.
pub fn default_card(url: &str) -> String {
    format!("{}/.well-known/agent-card.json", url.trim_end_matches('/'))
}

pub(crate) fn validate(
    raw: Option<&BTreeMap<String, RawAgent>>,
    policies: &[switchyard_guard::PolicySpec],
    issues: &mut Vec<Issue>,
) -> Option<Agents> {
    let raw = raw?;
    let mut agents = Vec::new();
    for (name, agent) in raw {
        let at = format!("agents.{name}");
        if !valid_name(name) {
            issues.push(Issue::new(
                &at,
                format!("`{name}` cannot name an agent (`/a2a/<name>`)"),
                "use lower-case letters, digits and `-` (at most 64)",
            ));
        }
        let Some(url) = agent.url.as_deref().map(|u| u.trim_end_matches('/').to_owned()) else {
            issues.push(Issue::new(&at, "an agent needs its url", "write `url:` (its A2A endpoint)"));
            continue;
        };
        if let Err(message) = check_outbound_url(&url) {
            issues.push(Issue::new(&format!("{at}.url"), message, "name the agent's A2A endpoint"));
        }
        let card = agent.card.clone().unwrap_or_else(|| default_card(&url));
        if let Err(message) = check_outbound_url(&card) {
            issues.push(Issue::new(&format!("{at}.card"), message, "name the agent card's URL"));
        }
        if agent.bearer.as_deref().is_some_and(|b| b.trim().is_empty()) {
            issues.push(Issue::new(&format!("{at}.bearer"), "is empty (a `${VAR}` set to nothing?)", "set the token"));
        }
        let price_nano = agent.price_per_task.and_then(|usd| {
            if !usd.is_finite() || !(0.0..=MAX_TASK_USD).contains(&usd) {
                issues.push(Issue::new(&format!("{at}.price_per_task"), "must be 0 to 1000 (USD)", "write e.g. 0.05"));
                return None;
            }
            Some((usd * 1e9).round() as u64)
        });
        if agent.rpm == Some(0) {
            issues.push(Issue::new(
                &format!("{at}.rpm"),
                "0 would refuse every message",
                "remove it, or write 1 or more",
            ));
        }
        let timeout = duration_or(agent.timeout.as_deref(), Duration::from_secs(300), &format!("{at}.timeout"), issues)
            .clamp(Duration::from_millis(100), Duration::from_secs(3600));
        let policies = crate::guard::attached(&format!("{at}.policies"), &agent.policies, policies, issues);
        agents.push(Agent {
            name: Arc::from(name.as_str()),
            url,
            card,
            bearer: agent.bearer.clone(),
            price_nano,
            policies,
            timeout,
            rpm: agent.rpm.filter(|&n| n > 0),
        });
    }
    Some(Agents { agents })
}

/// A key's `a2a:` grants (admin API or a template at `path`): agent names,
/// or `*` for every agent. `Err` names the first that is neither.
pub fn check_grants(grants: &[String]) -> Result<(), String> {
    if grants.len() > MAX_GRANTS {
        return Err(format!("at most {MAX_GRANTS} agents"));
    }
    match grants.iter().find(|g| g.as_str() != "*" && !valid_name(g)) {
        Some(bad) => Err(format!("`{bad}` is not an agent name (lower-case letters, digits, `-`) nor `*`")),
        None => Ok(()),
    }
}

/// The most agents one key may be granted by name.
pub const MAX_GRANTS: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn load(yaml: &str) -> (Option<Agents>, Vec<Issue>) {
        let raw: BTreeMap<String, RawAgent> = serde_yaml_ng::from_str(yaml).unwrap_or_default();
        let mut issues = Vec::new();
        (validate(Some(&raw), &[], &mut issues), issues)
    }

    #[test]
    fn an_agent_has_a_card_by_default_and_a_bounded_timeout() {
        let (agents, issues) = load("research: { url: \"http://127.0.0.1:9100/\", price_per_task: 0.05 }\n");
        assert!(issues.is_empty(), "{issues:?}");
        let agents = agents.unwrap_or_default();
        let research = agents.get("research").cloned().unwrap_or_else(|| unreachable!());
        assert_eq!(research.url, "http://127.0.0.1:9100");
        assert_eq!(research.card, "http://127.0.0.1:9100/.well-known/agent-card.json");
        assert_eq!(research.price_nano, Some(50_000_000));
        assert_eq!(research.timeout, Duration::from_secs(300));
    }

    #[test]
    fn private_and_plain_http_addresses_are_refused() {
        let (_, issues) = load(
            "a: { url: \"http://10.0.0.5:9100\" }\nb: { url: \"https://127.0.0.1:9\", card: \"http://169.254.169.254/card\" }\nBad: { url: \"https://agent.example\" }\nc: { card: \"https://agent.example/c\" }\nd: { url: \"https://agent.example\", price_per_task: -1, rpm: 0 }\n",
        );
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "agents.Bad",
                "agents.a.url",
                "agents.a.card",
                "agents.b.card",
                "agents.c",
                "agents.d.price_per_task",
                "agents.d.rpm"
            ]
        );
    }

    #[test]
    fn grants_are_names_or_a_star() {
        assert!(check_grants(&["research".into(), "*".into()]).is_ok());
        assert!(check_grants(&["Research".into()]).is_err());
        assert!(check_grants(&["re*".into()]).is_err());
        assert!(check_grants(&vec!["a".to_owned(); MAX_GRANTS + 1]).is_err());
    }
}

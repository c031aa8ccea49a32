//! What proves the ledger's money afterwards: `reconcile:` (the providers'
//! own usage and cost reports, read with the operator's admin keys and compared
//! with the ledger) and `receipts:` (signed, hash-chained receipts of
//! settled requests).

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;
use switchyard_ir::Protocol;

use crate::{duration_or, ssrf, Endpoint, Issue, Provider};

/// `reconcile:`.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconcile {
    /// The largest drift (a fraction: 0.02) that does not alert.
    pub tolerance: f64,
    /// How often the job runs.
    pub every: Duration,
    /// Days read each run: today and the ones before it.
    pub days: u32,
    /// The provider accounts read.
    pub accounts: Vec<Account>,
}

/// Whose usage and cost reports an account reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccountKind {
    /// OpenAI's organization usage and costs API.
    OpenAi,
    /// Anthropic's Usage & Cost Admin API.
    Anthropic,
}

impl AccountKind {
    /// Its config name.
    pub fn as_str(self) -> &'static str {
        match self {
            AccountKind::OpenAi => "openai",
            AccountKind::Anthropic => "anthropic",
        }
    }

    fn default_url(self) -> &'static str {
        match self {
            AccountKind::OpenAi => "https://api.openai.com",
            AccountKind::Anthropic => "https://api.anthropic.com",
        }
    }

    fn protocol(self) -> Protocol {
        match self {
            AccountKind::OpenAi => Protocol::OpenAi,
            AccountKind::Anthropic => Protocol::Anthropic,
        }
    }
}

/// One provider account whose usage and cost reports are read.
#[derive(Debug, Clone, PartialEq)]
pub struct Account {
    /// Which API.
    pub kind: AccountKind,
    /// Its base URL (SSRF-guarded: https, or http on loopback).
    pub base_url: String,
    /// The admin key the report is read with.
    pub admin_key: String,
    /// Only this project's (OpenAI) or workspace's (Anthropic) usage.
    pub scope: Option<String>,
    /// The config providers whose lanes this account bills (indexes).
    pub providers: Vec<usize>,
}

/// `receipts:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipts {
    /// The secret the signing key is drawn from.
    pub key: String,
    /// The chain file (JSON lines, appended).
    pub path: PathBuf,
    /// This instance's chain's name.
    pub chain: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReconcile {
    pub tolerance: Option<crate::spend::RawShare>,
    pub every: Option<String>,
    pub days: Option<u32>,
    pub openai: Option<RawAccount>,
    pub anthropic: Option<RawAccount>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAccount {
    pub admin_key: String,
    pub base_url: Option<String>,
    /// OpenAI: a project id; Anthropic: a workspace id.
    pub project: Option<String>,
    pub workspace: Option<String>,
    pub providers: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawReceipts {
    pub key: String,
    pub path: Option<String>,
    pub chain: Option<String>,
}

/// Validates `reconcile:` against the providers it names.
pub(crate) fn reconcile(
    raw: Option<&RawReconcile>,
    providers: &[Provider],
    issues: &mut Vec<Issue>,
    warnings: &mut Vec<Issue>,
) -> Option<Reconcile> {
    let raw = raw?;
    let tolerance = match &raw.tolerance {
        None => 0.02,
        Some(share) => crate::spend::share(share, "reconcile.tolerance", issues).unwrap_or(2.0) / 100.0,
    };
    let every = duration_or(raw.every.as_deref(), Duration::from_secs(3_600), "reconcile.every", issues);
    if every < Duration::from_secs(60) {
        issues.push(Issue::new(
            "reconcile.every",
            "shorter than a minute",
            "write e.g. 1h (reports are hourly at best)",
        ));
    }
    let days = raw.days.unwrap_or(2);
    if !(1..=31).contains(&days) {
        issues.push(Issue::new("reconcile.days", format!("{days} is out of range"), "write 1 to 31"));
    }
    let mut accounts = Vec::new();
    for (kind, account) in [(AccountKind::OpenAi, &raw.openai), (AccountKind::Anthropic, &raw.anthropic)] {
        let Some(account) = account else { continue };
        let path = format!("reconcile.{}", kind.as_str());
        let base_url = account.base_url.as_deref().unwrap_or(kind.default_url()).trim_end_matches('/').to_owned();
        if let Err(message) = ssrf::check_outbound_url(&base_url) {
            issues.push(Issue::new(&format!("{path}.base_url"), message, "use https://, or http:// on loopback"));
        }
        if account.admin_key.trim().is_empty() {
            issues.push(Issue::new(&format!("{path}.admin_key"), "empty", "give the account's admin key"));
        }
        let scope = match kind {
            AccountKind::OpenAi => {
                if account.workspace.is_some() {
                    issues.push(Issue::new(&format!("{path}.workspace"), "OpenAI has projects", "write project:"));
                }
                account.project.clone()
            }
            AccountKind::Anthropic => {
                if account.project.is_some() {
                    issues.push(Issue::new(&format!("{path}.project"), "Anthropic has workspaces", "write workspace:"));
                }
                account.workspace.clone()
            }
        };
        let billed = match &account.providers {
            Some(names) => names
                .iter()
                .enumerate()
                .filter_map(|(at, name)| {
                    let found = providers.iter().position(|p| *p.name == **name);
                    if found.is_none() {
                        issues.push(Issue::new(
                            &format!("{path}.providers[{at}]"),
                            format!("provider `{name}` is not defined"),
                            "name a provider under providers:",
                        ));
                    }
                    found
                })
                .collect(),
            // The providers that reach this vendor's own API.
            None => {
                let host = kind.default_url();
                let found: Vec<usize> = providers
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| {
                        p.protocol == kind.protocol()
                            && matches!(&p.endpoint, Endpoint::Http(url) if url.trim_end_matches('/') == host || url.starts_with(&format!("{host}/")))
                    })
                    .map(|(at, _)| at)
                    .collect();
                if found.is_empty() {
                    warnings.push(Issue::new(
                        &format!("{path}.providers"),
                        format!("no provider reaches {host}: every model the report names counts as traffic the gateway did not carry"),
                        "name the providers this account bills: providers: [name]",
                    ));
                }
                found
            }
        };
        accounts.push(Account { kind, base_url, admin_key: account.admin_key.clone(), scope, providers: billed });
    }
    if accounts.is_empty() {
        issues.push(Issue::new("reconcile", "names no account", "add openai: or anthropic: with an admin_key"));
    }
    Some(Reconcile { tolerance, every, days, accounts })
}

/// Validates `receipts:`.
pub(crate) fn receipts(raw: Option<&RawReceipts>, issues: &mut Vec<Issue>) -> Option<Receipts> {
    let raw = raw?;
    if raw.key.len() < 16 {
        issues.push(Issue::new(
            "receipts.key",
            "shorter than 16 bytes",
            "give a long random secret, e.g. `openssl rand -hex 32`",
        ));
    }
    let chain = raw.chain.clone().unwrap_or_else(|| "switchyard".to_owned());
    if chain.is_empty() || chain.len() > 128 {
        issues.push(Issue::new("receipts.chain", "empty or longer than 128 bytes", "name this instance's chain"));
    }
    let path = PathBuf::from(raw.path.as_deref().unwrap_or("switchyard-receipts.jsonl"));
    Some(Receipts { key: raw.key.clone(), path, chain })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROVIDERS: &str = "providers:\n  openai: { protocol: openai, base_url: https://api.openai.com }\n  \
        claude: { protocol: anthropic, base_url: https://api.anthropic.com }\n  \
        local: { protocol: openai, base_url: \"http://127.0.0.1:9000\" }\n";

    fn load(extra: &str) -> Result<crate::Config, crate::ConfigError> {
        crate::load(&format!("{PROVIDERS}{extra}"), &|_| None)
    }

    #[test]
    fn the_contract_s_shape_reads_with_the_vendors_own_providers() {
        let config = load(
            "reconcile:\n  tolerance: 2%\n  openai: { admin_key: sk-admin-1 }\n  anthropic: { admin_key: sk-ant-admin-1 }\n\
             receipts: { key: a-long-receipts-secret }\n",
        )
        .unwrap();
        let reconcile = config.reconcile.unwrap();
        assert!((reconcile.tolerance - 0.02).abs() < 1e-12);
        assert_eq!(reconcile.every, Duration::from_secs(3_600));
        let names =
            |account: &Account| account.providers.iter().map(|&p| &*config.providers[p].name).collect::<Vec<_>>();
        assert_eq!(reconcile.accounts[0].kind, AccountKind::OpenAi);
        assert_eq!(reconcile.accounts[0].base_url, "https://api.openai.com");
        assert_eq!(names(&reconcile.accounts[0]), ["openai"]);
        assert_eq!(names(&reconcile.accounts[1]), ["claude"]);
        let receipts = config.receipts.unwrap();
        assert_eq!(
            (receipts.chain.as_str(), receipts.path.to_str()),
            ("switchyard", Some("switchyard-receipts.jsonl"))
        );
        // The admin key is a secret wherever the config is shown.
        let shown = crate::redacted(&config.source).unwrap();
        assert!(!shown.contains("sk-admin-1") && shown.contains("admin_key"), "{shown}");
    }

    #[test]
    fn an_internal_url_a_missing_provider_and_a_short_key_are_refused() {
        let err = load(
            "reconcile:\n  openai: { admin_key: k, base_url: \"https://10.0.0.5\", providers: [nope] }\n\
             receipts: { key: short }\n",
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("reconcile.openai.base_url"), "{err}");
        assert!(err.contains("reconcile.openai.providers[0]"), "{err}");
        assert!(err.contains("receipts.key"), "{err}");
        // Loopback over http is an operator's own fake.
        let config =
            load("reconcile:\n  openai: { admin_key: k, base_url: \"http://127.0.0.1:9000\", providers: [local] }\n")
                .unwrap();
        let billed = &config.reconcile.as_ref().unwrap().accounts[0].providers;
        assert_eq!(billed.iter().map(|&p| &*config.providers[p].name).collect::<Vec<_>>(), ["local"]);
    }
}

//! Validation of a pool's `hooks:` list and of `global_hooks`: at most one
//! built-in strategy, plus external gates (`module: webrequest`) with their
//! grants, timeouts and `on_error` chains, proven at boot to terminate.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use crate::{Issue, Strategy};

/// An external hook reference in a `hooks:` list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawHookRef {
    pub module: String,
    pub name: Option<String>,
    #[serde(default)]
    pub settings: BTreeMap<String, String>,
    pub kind: Option<String>,
    pub timeout_ms: Option<u64>,
    pub on_error: Option<String>,
    pub prompt: Option<String>,
    pub user: Option<String>,
    pub priority: Option<i32>,
    /// The hook may answer with the `rewrite` arm (needs `prompt: rw`).
    pub rewrite: Option<bool>,
}

/// What a gate may read of the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptAccess {
    /// Shapes only.
    No,
    /// The text.
    ReadOnly,
    /// The text, and it may replace the request body.
    ReadWrite,
}

/// What happens when a gate times out, fails or answers garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// The gate drops out of the decision.
    Nothing,
    /// The weighted floor (the same as `Nothing`, named for ordering hooks).
    Weighted,
    /// Config order.
    First,
    /// Refuse the request with a 503 (for security gates).
    Reject,
    /// A built-in strategy decides instead.
    Strategy(Strategy),
    /// Another hook (index into `Config::hooks`) fires in its place.
    Hook(usize),
}

/// An external gate: an operator-run sidecar reached over HTTP(S).
#[derive(Debug, Clone)]
pub struct Hook {
    /// Name (given, or derived from where it is defined).
    pub name: Arc<str>,
    /// The sidecar URL (operator config only, SSRF-checked).
    pub url: Arc<str>,
    /// Deadline for its reply.
    pub timeout: Duration,
    /// Fallback on failure.
    pub on_error: OnError,
    /// Prompt grant.
    pub prompt: PromptAccess,
    /// Caller-identity grant.
    pub user: bool,
    /// Position in the reconcile chain (higher wins for `order`).
    pub priority: i32,
    /// Attached to every request.
    pub global: bool,
}

/// An `on_error` naming a hook, resolved once every hook is known.
pub(crate) struct PendingFallback {
    hook: usize,
    name: String,
    path: String,
}

/// Parses one `hooks:` list: returns the strategy and the gates (indexes
/// into `hooks`, which this appends to).
pub(crate) fn parse_list(
    path: &str,
    values: &[serde_yaml_ng::Value],
    global: bool,
    hooks: &mut Vec<Hook>,
    pending: &mut Vec<PendingFallback>,
    issues: &mut Vec<Issue>,
) -> (Strategy, Vec<usize>) {
    let names: Vec<&str> = Strategy::ALL.iter().map(|s| s.as_str()).collect();
    let mut chosen: Option<Strategy> = None;
    let mut gates = Vec::new();
    for (index, value) in values.iter().enumerate() {
        let hook_path = format!("{path}[{index}]");
        if let Some(name) = value.as_str() {
            let Some(strategy) = Strategy::from_name(name) else {
                issues.push(Issue::new(
                    &hook_path,
                    format!("`{name}` is not a strategy"),
                    format!("use one of: {}", names.join(", ")),
                ));
                continue;
            };
            if global {
                issues.push(Issue::new(
                    &hook_path,
                    "a strategy cannot be global",
                    "name strategies in a pool's hooks list",
                ));
            }
            if let Some(previous) = chosen {
                issues.push(Issue::new(
                    &hook_path,
                    format!("a second strategy `{name}` after `{}`", previous.as_str()),
                    "keep one strategy per pool",
                ));
            }
            chosen = Some(strategy);
            continue;
        }
        let raw: RawHookRef = match serde_yaml_ng::from_value(value.clone()) {
            Ok(raw) => raw,
            Err(err) => {
                issues.push(Issue::new(
                    &hook_path,
                    err.to_string(),
                    "write a strategy name or { module: webrequest, settings: { url: ... } }",
                ));
                continue;
            }
        };
        if let Some(hook) = parse_ref(&hook_path, &raw, global, hooks.len(), pending, issues) {
            gates.push(hooks.len());
            hooks.push(hook);
        }
    }
    (chosen.unwrap_or(Strategy::Weighted), gates)
}

fn parse_ref(
    path: &str,
    raw: &RawHookRef,
    global: bool,
    index: usize,
    pending: &mut Vec<PendingFallback>,
    issues: &mut Vec<Issue>,
) -> Option<Hook> {
    if raw.module != "webrequest" {
        issues.push(Issue::new(
            &format!("{path}.module"),
            format!("`{}` is not a hook module", raw.module),
            "use module: webrequest (an HTTP sidecar)",
        ));
        return None;
    }
    match raw.kind.as_deref() {
        None | Some("gate") => {}
        Some("tap") => issues.push(Issue::new(
            &format!("{path}.kind"),
            "taps only observe and cannot sit in a hooks list",
            "use kind: gate",
        )),
        Some(other) => {
            issues.push(Issue::new(&format!("{path}.kind"), format!("`{other}` is not a hook kind"), "use kind: gate"))
        }
    }
    for key in raw.settings.keys().filter(|k| k.as_str() != "url") {
        issues.push(Issue::new(
            &format!("{path}.settings.{key}"),
            format!("unknown setting `{key}`"),
            "webrequest takes settings: { url: ... }",
        ));
    }
    let Some(url) = raw.settings.get("url") else {
        issues.push(Issue::new(
            &format!("{path}.settings.url"),
            "a webrequest hook needs a url",
            "add settings: { url: https://... } (or http://127.0.0.1:PORT/...)",
        ));
        return None;
    };
    if let Err(message) = crate::ssrf::check_outbound_url(url) {
        issues.push(Issue::new(
            &format!("{path}.settings.url"),
            message,
            "use http(s) on loopback, or https to a public host",
        ));
    }
    let prompt = match raw.prompt.as_deref() {
        None | Some("no") => PromptAccess::No,
        Some("ro") => PromptAccess::ReadOnly,
        Some("rw") => PromptAccess::ReadWrite,
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.prompt"),
                format!("`{other}` is not a prompt grant"),
                "use no, ro or rw",
            ));
            PromptAccess::No
        }
    };
    let user = match raw.user.as_deref() {
        None | Some("no") => false,
        Some("ro") => true,
        Some(other) => {
            issues.push(Issue::new(&format!("{path}.user"), format!("`{other}` is not a user grant"), "use no or ro"));
            false
        }
    };
    if raw.rewrite == Some(true) && prompt != PromptAccess::ReadWrite {
        issues.push(Issue::new(
            &format!("{path}.rewrite"),
            "a rewriting hook needs to read and write the prompt",
            "set prompt: rw, or drop rewrite: true",
        ));
    }
    let timeout_ms = raw.timeout_ms.unwrap_or(250);
    if timeout_ms == 0 || timeout_ms > 60_000 {
        issues.push(Issue::new(
            &format!("{path}.timeout_ms"),
            format!("{timeout_ms} ms is out of range"),
            "use 1 to 60000",
        ));
    }
    let on_error = match raw.on_error.as_deref() {
        None | Some("nothing") => OnError::Nothing,
        Some("weighted") => OnError::Weighted,
        Some("first") => OnError::First,
        Some("reject") => OnError::Reject,
        Some(name) => match Strategy::from_name(name) {
            Some(strategy) => OnError::Strategy(strategy),
            None => {
                pending.push(PendingFallback { hook: index, name: name.to_owned(), path: format!("{path}.on_error") });
                OnError::Nothing
            }
        },
    };
    Some(Hook {
        name: Arc::from(raw.name.clone().unwrap_or_else(|| path.to_owned()).as_str()),
        url: Arc::from(url.as_str()),
        timeout: Duration::from_millis(timeout_ms.max(1)),
        on_error,
        prompt,
        user,
        priority: raw.priority.unwrap_or(0),
        global,
    })
}

/// Resolves `on_error` names to hooks, then proves every chain ends.
pub(crate) fn resolve_fallbacks(hooks: &mut [Hook], pending: Vec<PendingFallback>, issues: &mut Vec<Issue>) {
    for fallback in pending {
        match hooks.iter().position(|h| *h.name == *fallback.name) {
            Some(target) => hooks[fallback.hook].on_error = OnError::Hook(target),
            None => {
                let known: Vec<&str> = hooks.iter().map(|h| &*h.name).collect();
                issues.push(Issue::new(
                    &fallback.path,
                    format!(
                        "`{}` is neither nothing, weighted, first, reject, a strategy nor a hook name",
                        fallback.name
                    ),
                    format!(
                        "name a hook (defined with name:) or a strategy; hooks: {}",
                        if known.is_empty() { "(none)".to_owned() } else { known.join(", ") }
                    ),
                ));
            }
        }
    }
    for start in 0..hooks.len() {
        let mut seen = vec![start];
        let mut at = start;
        while let OnError::Hook(next) = hooks[at].on_error {
            if seen.contains(&next) {
                let chain: Vec<&str> = seen.iter().chain(std::iter::once(&next)).map(|&h| &*hooks[h].name).collect();
                issues.push(Issue::new(
                    &format!("hooks.{}.on_error", hooks[start].name),
                    format!("on_error chain never ends: {}", chain.join(" -> ")),
                    "end the chain with nothing, weighted, first, reject or a strategy",
                ));
                break;
            }
            seen.push(next);
            at = next;
        }
    }
}

//! The `policies:` block (guardrails) and the lists that attach them to
//! pools and groups. Each policy is compiled once here to report a rule
//! that cannot be used (an invalid or unbounded regex, an unknown
//! detector) at boot, with its key path.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use switchyard_guard::{Action, PolicySpec, Screen};

use crate::Issue;

/// One policy as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPolicy {
    #[serde(default)]
    pub detect: Vec<String>,
    #[serde(default)]
    pub literal: Vec<String>,
    #[serde(default)]
    pub regex: BTreeMap<String, String>,
    pub action: Option<String>,
    pub direction: Option<String>,
    pub moderator: Option<RawModerator>,
    /// A mask's placeholders are restored in the reply.
    pub reversible: Option<bool>,
}

/// An external moderator as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawModerator {
    pub url: Option<String>,
    pub bedrock_guardrail: Option<RawBedrockGuardrail>,
    pub model: Option<String>,
    pub timeout: Option<String>,
    pub on_error: Option<String>,
}

/// An AWS Bedrock guardrail as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBedrockGuardrail {
    pub provider: String,
    pub id: String,
    pub version: Option<String>,
}

/// The policies, in name order, each with its rules' place in the catalog
/// of every policy's rules.
pub(crate) fn policies(raw: &BTreeMap<String, RawPolicy>, issues: &mut Vec<Issue>) -> Vec<PolicySpec> {
    let mut specs = Vec::new();
    let mut next_rule = 0;
    for (name, policy) in raw {
        let path = format!("policies.{name}");
        let action = match policy.action.as_deref() {
            Some("block") => Action::Block,
            Some("mask") => Action::Mask,
            Some("flag") => Action::Flag,
            other => {
                issues.push(Issue::new(
                    &format!("{path}.action"),
                    match other {
                        Some(other) => format!("`{other}` is not an action"),
                        None => "a policy needs an action".to_owned(),
                    },
                    "use block (refuse), mask (replace with a placeholder) or flag (record only)",
                ));
                Action::Flag
            }
        };
        let (request, response) = match policy.direction.as_deref() {
            None | Some("both") => (true, true),
            Some("request") => (true, false),
            Some("response") => (false, true),
            Some(other) => {
                issues.push(Issue::new(
                    &format!("{path}.direction"),
                    format!("`{other}` is not a direction"),
                    "use request, response or both (the default)",
                ));
                (true, true)
            }
        };
        for (at, detector) in policy.detect.iter().enumerate() {
            if switchyard_guard::detect::named(detector).is_none() {
                issues.push(Issue::new(
                    &format!("{path}.detect[{at}]"),
                    format!("no detector is called `{detector}`"),
                    format!("use {}", switchyard_guard::detect::NAMES.join(", ")),
                ));
            }
        }
        let has_rules = !(policy.detect.is_empty() && policy.literal.is_empty() && policy.regex.is_empty());
        if !has_rules && policy.moderator.is_none() {
            issues.push(Issue::new(
                &path,
                "the policy has no rules",
                "add detect, literal or regex rules, or a moderator",
            ));
        }
        let moderator = policy.moderator.as_ref().map(|raw| moderator(&path, raw, action, issues));
        if policy.reversible == Some(true) && action != Action::Mask {
            issues.push(Issue::new(
                &format!("{path}.reversible"),
                "only a mask can be reversed",
                "set action: mask, or remove reversible",
            ));
        }
        // A moderator screens requests; a policy of a moderator alone never
        // holds a reply's stream back.
        let response = response && has_rules;
        if policy.literal.iter().any(String::is_empty) {
            issues.push(Issue::new(&format!("{path}.literal"), "an empty phrase matches everywhere", "remove it"));
        }
        let spec = PolicySpec {
            name: Arc::from(name.as_str()),
            action,
            request,
            response,
            literals: policy.literal.clone(),
            regexes: policy.regex.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            detect: policy.detect.iter().filter(|d| switchyard_guard::detect::named(d).is_some()).cloned().collect(),
            first_rule: next_rule,
            moderator,
            reversible: policy.reversible.unwrap_or(false),
        };
        match Screen::compile(std::slice::from_ref(&spec)) {
            Ok(screen) => next_rule += screen.rules.len(),
            Err((rule, err)) => {
                let rule = rule.strip_prefix(&format!("{name}.")).unwrap_or(&rule).to_owned();
                issues.push(Issue::new(&format!("{path}.regex.{rule}"), err.to_string(), "fix the pattern"));
                continue;
            }
        }
        specs.push(spec);
    }
    // Moderators take the catalog's places after every regex rule.
    let mut next = next_rule;
    for spec in &mut specs {
        if let Some(moderator) = spec.moderator.as_mut() {
            moderator.id = next;
            next += 1;
        }
    }
    specs
}

/// A policy's moderator; `action` must be one a verdict can take.
fn moderator(path: &str, raw: &RawModerator, action: Action, issues: &mut Vec<Issue>) -> switchyard_guard::Moderator {
    let bedrock = raw.bedrock_guardrail.as_ref().map(|g| switchyard_guard::BedrockGuardrail {
        provider: Arc::from(g.provider.as_str()),
        id: Arc::from(g.id.as_str()),
        version: Arc::from(g.version.as_deref().unwrap_or("DRAFT")),
    });
    match (&raw.url, &bedrock) {
        (Some(url), None) => {
            if let Err(message) = crate::ssrf::check_outbound_url(url) {
                issues.push(Issue::new(
                    &format!("{path}.moderator.url"),
                    message,
                    "use an http(s) URL of a moderation endpoint",
                ));
            }
        }
        (None, Some(guardrail)) => {
            let plain = |text: &str| !text.is_empty() && text.chars().all(|c| c.is_ascii_alphanumeric() || "-_:/.".contains(c));
            if !plain(&guardrail.id) || !plain(&guardrail.version) {
                issues.push(Issue::new(
                    &format!("{path}.moderator.bedrock_guardrail"),
                    "the guardrail's id and version are letters, digits, `-`, `_`, `:`, `/` or `.`",
                    "copy the guardrail's id (or ARN) and version from the Bedrock console",
                ));
            }
        }
        _ => issues.push(Issue::new(
            &format!("{path}.moderator"),
            "a moderator needs exactly one of url and bedrock_guardrail",
            "set url (an OpenAI-moderation-shaped endpoint or a webhook) or bedrock_guardrail { provider, id, version }",
        )),
    }
    if action == Action::Mask {
        issues.push(Issue::new(
            &format!("{path}.action"),
            "a moderator's verdict cannot mask",
            "use block or flag with a moderator (mask with detect, literal or regex rules)",
        ));
    }
    let timeout = crate::duration_or(
        raw.timeout.as_deref(),
        std::time::Duration::from_secs(2),
        &format!("{path}.moderator.timeout"),
        issues,
    );
    let block_on_error = match raw.on_error.as_deref() {
        None | Some("allow") => false,
        Some("block") => true,
        Some(other) => {
            issues.push(Issue::new(
                &format!("{path}.moderator.on_error"),
                format!("`{other}` is not what to do without a verdict"),
                "use allow (the default: the request passes) or block (it is refused)",
            ));
            false
        }
    };
    switchyard_guard::Moderator {
        // A Bedrock guardrail's URL is its provider's, set once providers are read.
        url: Arc::from(raw.url.as_deref().unwrap_or_default()),
        model: raw.model.as_deref().map(Arc::from),
        timeout,
        block_on_error,
        // Set once every policy's rules are counted.
        id: 0,
        bedrock,
    }
}

/// The indexes of the policies `names` (at `path`) attaches.
pub(crate) fn attached(path: &str, names: &[String], specs: &[PolicySpec], issues: &mut Vec<Issue>) -> Vec<usize> {
    let mut found = Vec::new();
    for (at, name) in names.iter().enumerate() {
        match specs.iter().position(|s| &*s.name == name.as_str()) {
            Some(index) => found.push(index),
            None => issues.push(Issue::new(
                &format!("{path}[{at}]"),
                format!("policy `{name}` is not defined"),
                "define it under policies:, or remove it",
            )),
        }
    }
    found
}

/// Points each Bedrock-guardrail moderator at its provider's runtime
/// endpoint (`{base_url}/guardrail/{id}/version/{version}/apply`); the
/// provider must be a Bedrock one.
pub(crate) fn bedrock_moderators(specs: &mut [PolicySpec], providers: &[crate::Provider], issues: &mut Vec<Issue>) {
    for spec in specs {
        let Some(moderator) = spec.moderator.as_mut() else { continue };
        let Some(guardrail) = &moderator.bedrock else { continue };
        let path = format!("policies.{}.moderator.bedrock_guardrail.provider", spec.name);
        let Some(provider) = providers.iter().find(|p| p.name == guardrail.provider) else {
            issues.push(Issue::new(
                &path,
                format!("provider `{}` is not defined", guardrail.provider),
                "name a provider with protocol: bedrock (its endpoint and AWS keys are used)",
            ));
            continue;
        };
        match (&provider.endpoint, provider.protocol) {
            (crate::Endpoint::Http(base), switchyard_ir::Protocol::Bedrock) => {
                moderator.url = Arc::from(format!(
                    "{base}/guardrail/{}/version/{}/apply",
                    switchyard_codec::path_segment(&guardrail.id),
                    switchyard_codec::path_segment(&guardrail.version)
                ));
            }
            _ => issues.push(Issue::new(
                &path,
                format!("provider `{}` is not a Bedrock provider with an http(s) base_url", guardrail.provider),
                "name a provider with protocol: bedrock and its runtime endpoint (https://bedrock-runtime.<region>.amazonaws.com)",
            )),
        }
    }
}

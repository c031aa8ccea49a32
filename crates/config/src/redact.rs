//! The running config as an operator may see it: the file's own text with
//! every secret replaced. A `${VAR}` reference is not a secret (the value
//! lives in the environment) and stays as written; a literal key, token,
//! password or credential-bearing header and the password of a URL are
//! replaced by [`REDACTED`]. Comments and layout are not kept: the tree is
//! written out again.

use serde_yaml_ng::Value;

use crate::interpolate;

/// What a secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// Members whose string value is a secret.
const SECRET_MEMBERS: [&str; 6] = ["api_key", "secret_access_key", "session_token", "token", "password", "secret"];
/// Members holding a list of secrets (or of `{name, token, scope}`).
const SECRET_LISTS: [&str; 2] = ["tokens", "read_only_tokens"];
/// Header names whose value is a credential (matched as parts of the name).
const SECRET_HEADER_PARTS: [&str; 6] = ["authorization", "key", "token", "secret", "cookie", "signature"];

/// `text` (a config file) with its secrets replaced; `None` when it is not
/// YAML (it could not have been loaded then).
pub fn redacted(text: &str) -> Option<String> {
    let mut tree: Value = serde_yaml_ng::from_str(&interpolate::protect(text)).ok()?;
    redact(&mut tree, None);
    let written = serde_yaml_ng::to_string(&tree).ok()?;
    Some(interpolate::unprotect(&written))
}

fn redact(value: &mut Value, member: Option<&str>) {
    match value {
        Value::String(text) => {
            if member.is_some_and(|m| SECRET_MEMBERS.contains(&m)) {
                hide(text);
            } else {
                hide_url_password(text);
            }
        }
        Value::Sequence(items) => {
            let list_of_secrets = member.is_some_and(|m| SECRET_LISTS.contains(&m));
            for item in items {
                match item {
                    Value::String(text) if list_of_secrets => hide(text),
                    other => redact(other, None),
                }
            }
        }
        Value::Mapping(map) => {
            let headers = member == Some("headers");
            for (key, item) in map.iter_mut() {
                let name = key.as_str().unwrap_or_default();
                match item {
                    Value::String(text) if headers && is_secret_header(name) => hide(text),
                    other => redact(other, Some(name)),
                }
            }
        }
        Value::Tagged(tagged) => redact(&mut tagged.value, member),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn is_secret_header(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_HEADER_PARTS.iter().any(|part| name.contains(part))
}

/// Replaces a literal secret; a lone `${VAR}` reference stays.
fn hide(text: &mut String) {
    if !interpolate::is_reference(text) {
        *text = REDACTED.to_owned();
    }
}

/// `scheme://user:password@host…` loses its password.
fn hide_url_password(text: &mut String) {
    let Some(scheme_end) = text.find("://") else { return };
    let authority_start = scheme_end + 3;
    let authority_end = text[authority_start..].find(['/', '?', '#']).map_or(text.len(), |i| authority_start + i);
    let Some(at) = text[authority_start..authority_end].rfind('@').map(|i| authority_start + i) else { return };
    let Some(colon) = text[authority_start..at].find(':').map(|i| authority_start + i) else { return };
    if !interpolate::is_reference(&text[colon + 1..at]) {
        text.replace_range(colon + 1..at, REDACTED);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_secrets_go_and_references_stay() {
        let text = r#"
admin:
  tokens: [${ADMIN_TOKEN}, literal-admin-token-123, { name: ops, token: ops-secret-xyz, scope: read }]
providers:
  openai: { protocol: openai, base_url: "https://api.openai.com", api_key: sk-live-abc }
  anthropic: { protocol: anthropic, base_url: "https://api.anthropic.com", api_key: "${ANTHROPIC_KEY}",
               headers: { anthropic-version: "2023-06-01", x-api-key: hdr-secret, Authorization: "Bearer b" } }
  bedrock: { protocol: bedrock, base_url: "https://bedrock-runtime.us-east-1.amazonaws.com",
             api_key: { access_key_id: AKIAEXAMPLE, secret_access_key: aws-secret } }
storage:
  postgres_url: postgres://sy:pg-password@db:5432/sy
  redis_url: redis://${REDIS_HOST}:6379
"#;
        let out = redacted(text).unwrap_or_default();
        for secret in [
            "literal-admin-token-123",
            "ops-secret-xyz",
            "sk-live-abc",
            "hdr-secret",
            "Bearer b",
            "aws-secret",
            "pg-password",
        ] {
            assert!(!out.contains(secret), "{secret} leaked:\n{out}");
        }
        for kept in [
            "${ADMIN_TOKEN}",
            "${ANTHROPIC_KEY}",
            "${REDIS_HOST}",
            "2023-06-01",
            "AKIAEXAMPLE",
            "name: ops",
            "scope: read",
            "postgres://sy:<redacted>@db:5432/sy",
        ] {
            assert!(out.contains(kept), "{kept} missing:\n{out}");
        }
    }

    #[test]
    fn what_is_not_yaml_has_no_redacted_form() {
        assert_eq!(redacted("a: [unclosed"), None);
    }
}

//! The running config as an operator may see it: the file's own text with
//! every secret replaced. A `${VAR}` reference is not a secret (the value
//! lives in the environment) and stays as written; a literal key, token,
//! password or credential-bearing header and the password of a URL are
//! replaced by [`REDACTED`]. `round_trip` applies these rules to the
//! file's own text.

use serde_yaml_ng::Value;

use crate::interpolate;

/// What a secret is replaced by.
pub const REDACTED: &str = "<redacted>";

/// How a member's value holds a secret.
#[derive(Debug, Clone, Copy)]
enum Secret {
    /// Its string is one (each string of a list of them; a mapping is read
    /// member by member).
    Value,
    /// Each value of its mapping is one, but for the members named here
    /// (read as any other member; names compared without case).
    Values(&'static [&'static str]),
    /// A URL whose path may itself be the secret (a chat webhook's): the
    /// path goes too. Any other URL loses only its userinfo and query.
    Url,
}

/// Every member whose value is or holds a secret, wherever it sits in the
/// file: the one list of what the admin API's views of the config (the
/// running config, its versions and their diffs) never show.
const SECRETS: [(&str, Secret); 18] = [
    ("key", Secret::Value),
    // A provider account's admin key (`reconcile.openai.admin_key`).
    ("admin_key", Secret::Value),
    ("api_key", Secret::Value),
    ("secret_access_key", Secret::Value),
    ("session_token", Secret::Value),
    ("token", Secret::Value),
    ("password", Secret::Value),
    ("secret", Secret::Value),
    ("client_secret", Secret::Value),
    // Admin tokens, as strings or `{ name, token, scope }`.
    ("tokens", Secret::Value),
    ("read_only_tokens", Secret::Value),
    // An MCP server's static credential (`mcp.servers.*.auth.bearer`).
    ("bearer", Secret::Value),
    // A stdio MCP server's arguments and environment carry its credentials.
    ("args", Secret::Values(&[])),
    ("env", Secret::Values(&[])),
    // A gate's settings (`module: webrequest`): its `url` read as a URL.
    ("settings", Secret::Values(&["url"])),
    // A vendor's credential header can have any name.
    ("headers", Secret::Values(&PLAIN_HEADERS)),
    ("url", Secret::Url),
    ("webhook", Secret::Url),
];

/// How `member`'s value holds a secret, if it does.
fn secret(member: Option<&str>) -> Option<Secret> {
    let member = member?;
    SECRETS.iter().find(|(name, _)| *name == member).map(|(_, how)| *how)
}

/// Headers whose value is shown; every other header's value is hidden.
const PLAIN_HEADERS: [&str; 9] = [
    "anthropic-version",
    "anthropic-beta",
    "openai-organization",
    "openai-project",
    "openai-beta",
    "api-version",
    "user-agent",
    "http-referer",
    "x-title",
];
/// Query parameters whose value is shown; every other one is hidden.
const PLAIN_QUERY: [&str; 3] = ["api-version", "alt", "version"];

/// `text` (a config file) with its secrets replaced, written out again
/// from the tree (comments and layout gone: `round_trip::redacted` keeps
/// them where it can); `None` when it is not YAML.
pub(crate) fn rewritten(text: &str) -> Option<String> {
    let mut tree: Value = serde_yaml_ng::from_str(&interpolate::protect(text)).ok()?;
    redact_tree(&mut tree);
    let written = serde_yaml_ng::to_string(&tree).ok()?;
    Some(interpolate::unprotect(&written))
}

/// A parsed config (with protected references) with its secrets replaced.
pub(crate) fn redact_tree(tree: &mut Value) {
    redact(tree, None);
}

/// An operator's URL as logs and errors may name it: scheme and host, with
/// its credentials, path and query values hidden (a webhook's path is often
/// its secret). Every log line that names a sink, hook or exporter URL
/// writes it through here.
pub fn shown_url(url: &str) -> String {
    let mut text = url.to_owned();
    hide_in_url(&mut text, true);
    text
}

fn redact(value: &mut Value, member: Option<&str>) {
    let how = secret(member);
    match value {
        Value::String(text) => match how {
            Some(Secret::Value | Secret::Values(_)) => hide(text),
            Some(Secret::Url) => hide_in_url(text, true),
            None => hide_in_url(text, false),
        },
        Value::Sequence(items) => {
            for item in items {
                match (item, how) {
                    (Value::String(text), Some(Secret::Value)) => hide(text),
                    (item, Some(Secret::Values(_))) => hide_all(item),
                    (other, _) => redact(other, None),
                }
            }
        }
        Value::Mapping(map) => {
            for (key, item) in map.iter_mut() {
                let name = key.as_str().unwrap_or_default();
                match how {
                    Some(Secret::Values(shown)) if !shown.iter().any(|s| s.eq_ignore_ascii_case(name)) => {
                        hide_all(item)
                    }
                    _ => redact(item, Some(name)),
                }
            }
        }
        Value::Tagged(tagged) => redact(&mut tagged.value, member),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Every string in `value` hidden.
fn hide_all(value: &mut Value) {
    match value {
        Value::String(text) => hide(text),
        Value::Sequence(items) => items.iter_mut().for_each(hide_all),
        Value::Mapping(map) => map.iter_mut().for_each(|(_, item)| hide_all(item)),
        Value::Tagged(tagged) => hide_all(&mut tagged.value),
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Replaces a literal secret; a lone `${VAR}` reference stays.
fn hide(text: &mut String) {
    if !interpolate::is_reference(text) {
        *text = REDACTED.to_owned();
    }
}

/// A URL loses what can carry a credential: the password of its userinfo
/// (all of a userinfo without one: `https://TOKEN@host`), every query value
/// but a few plain ones, and (for a webhook's `url`) its path.
fn hide_in_url(text: &mut String, hide_path: bool) {
    let Some(scheme_end) = text.find("://") else { return };
    let authority_start = scheme_end + 3;
    let authority_end = text[authority_start..].find(['/', '?', '#']).map_or(text.len(), |i| authority_start + i);
    let (head, rest) = text.split_at(authority_end);
    let mut out = String::with_capacity(text.len());
    match head[authority_start..].rfind('@') {
        Some(at) => {
            let userinfo = &head[authority_start..authority_start + at];
            out.push_str(&head[..authority_start]);
            match userinfo.split_once(':') {
                Some((user, password)) if !interpolate::is_reference(password) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(REDACTED);
                }
                None if !interpolate::is_reference(userinfo) => out.push_str(REDACTED),
                _ => out.push_str(userinfo),
            }
            out.push_str(&head[authority_start + at..]);
        }
        None => out.push_str(head),
    }
    let (path, query) = match rest.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (rest, None),
    };
    if hide_path && !path.is_empty() && path != "/" {
        out.push('/');
        out.push_str(REDACTED);
    } else {
        out.push_str(path);
    }
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, value))
                    if !PLAIN_QUERY.contains(&name.to_ascii_lowercase().as_str())
                        && !interpolate::is_reference(value) =>
                {
                    format!("{name}={REDACTED}")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    *text = out;
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
  gemini: { protocol: gemini, base_url: "https://generativelanguage.googleapis.com?key=AIzaQuery&alt=sse",
            headers: { Helicone-Auth: helicone-secret } }
  proxied: { protocol: openai, base_url: "https://tok3n@proxy.example", api_key: "${PROXIED_KEY}" }
  azure: { protocol: openai, base_url: "https://x.openai.azure.com/openai",
           auth: { oauth_client_credentials: { token_url: "https://login.example/t", client_id: app, client_secret: entra-secret } } }
storage:
  postgres_url: postgres://sy:pg-password@db:5432/sy?password=qpass
  redis_url: redis://${REDIS_HOST}:6379
telemetry:
  request_log: { webhook: { url: "https://hooks.slack.com/services/T000/B000/XXXX" } }
pools:
  gated: { members: [{ model: m }], hooks: [{ module: webrequest, settings: { url: "https://gate.example/check?sig=gate-sig", extra: gate-extra } }] }
mcp:
  servers:
    files: { command: /usr/local/bin/mcp-files, args: [--token, argv-token, "--key=argv-key"], env: { API_TOKEN: env-literal, HOME: /srv, FROM_ENV: "${FILES_TOKEN}" } }
    tickets: { url: "https://tickets.example/mcp", auth: { bearer: mcp-bearer-literal } }
    wiki: { url: "https://wiki.example/mcp", auth: { bearer: "${WIKI_TOKEN}" } }
"#;
        let out = rewritten(text).unwrap_or_default();
        let secrets = [
            "literal-admin-token-123",
            "ops-secret-xyz",
            "sk-live-abc",
            "hdr-secret",
            "Bearer b",
            "aws-secret",
            "pg-password",
            "qpass",
            "AIzaQuery",
            "helicone-secret",
            "tok3n",
            "T000/B000/XXXX",
            "entra-secret",
            "gate-sig",
            "gate-extra",
            "argv-token",
            "argv-key",
            "env-literal",
            "/srv",
            "mcp-bearer-literal",
        ];
        for secret in secrets {
            assert!(!out.contains(secret), "{secret} leaked:\n{out}");
        }
        let kept = [
            "${ADMIN_TOKEN}",
            "${ANTHROPIC_KEY}",
            "${REDIS_HOST}",
            "${PROXIED_KEY}",
            "2023-06-01",
            "AKIAEXAMPLE",
            "name: ops",
            "scope: read",
            "postgres://sy:<redacted>@db:5432/sy?password=<redacted>",
            "alt=sse",
            "https://<redacted>@proxy.example",
            "https://hooks.slack.com/<redacted>",
            "https://api.openai.com",
            "client_id: app",
            "${FILES_TOKEN}",
            "${WIKI_TOKEN}",
            "command: /usr/local/bin/mcp-files",
            "https://gate.example/<redacted>?sig=<redacted>",
            "https://tickets.example/<redacted>",
        ];
        for kept in kept {
            assert!(out.contains(kept), "{kept} missing:\n{out}");
        }
    }

    #[test]
    fn what_is_not_yaml_has_no_redacted_form() {
        assert_eq!(rewritten("a: [unclosed"), None);
    }

    #[test]
    fn a_url_in_a_log_line_names_only_its_host() {
        let shown = shown_url("https://user:pw@hooks.example.com/services/T0/B0/SECRETPATH?token=abc&alt=json");
        assert_eq!(shown, "https://user:<redacted>@hooks.example.com/<redacted>?token=<redacted>&alt=json");
        assert_eq!(shown_url("http://127.0.0.1:9000/"), "http://127.0.0.1:9000/");
    }
}

//! `providers.<p>.passthrough`: the raw route to the rest of a vendor's API
//! (`/passthrough/{provider}/{path}`), closed unless the operator lists the
//! paths and methods it may reach. An allow-list, never a deny-list: the
//! operator's upstream key usually opens the provider's admin endpoints
//! too (OpenAI's `/v1/organization/*`, Anthropic's `/v1/organizations/*`),
//! and no list of what to hide keeps up with a vendor's new endpoints.
//!
//! A pattern is a path of plain segments; `*` inside a segment matches any
//! characters of that one segment, and a last segment that is exactly `*`
//! matches one or more segments below (`/v1/fine_tuning/*` reaches
//! `/v1/fine_tuning/jobs/ftjob-1/events`, not `/v1/fine_tuning` itself).
//!
//! [`check_path`] is what a caller's path must pass before it is matched:
//! the path is matched as it came (still percent-encoded) and sent upstream
//! as it came, so everything that could make the upstream read another path
//! than the one matched is refused — dot segments, empty segments,
//! backslashes, `;` and an encoded `/`, `\`, `.`, `%`, `;`, `?`, `#` or
//! control byte. Pure.

use std::sync::Arc;

use serde::Deserialize;

use crate::Issue;

/// `providers.<p>.passthrough` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawPassthrough {
    /// The path patterns it may reach.
    pub paths: Vec<String>,
    /// The methods (default `GET` and `POST`).
    pub methods: Option<Vec<String>>,
}

/// The raw route of a provider, open to these paths and methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passthrough {
    /// The path patterns, as written.
    pub paths: Vec<Arc<str>>,
    /// The methods, upper-case.
    pub methods: Vec<Arc<str>>,
}

/// The methods the route may open (a tunnel, a trace or a preflight never).
pub const METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// The most patterns one provider lists.
pub const MAX_PATTERNS: usize = 256;
/// The longest path a caller may send (and pattern an operator may write).
pub const MAX_PATH: usize = 2048;

impl Passthrough {
    /// Whether `path` (checked by [`check_path`]) matches one of the patterns.
    pub fn allows_path(&self, path: &str) -> bool {
        self.paths.iter().any(|pattern| matches(pattern, path))
    }

    /// Whether `method` (upper-case, as HTTP writes it) is open.
    pub fn allows_method(&self, method: &str) -> bool {
        self.methods.iter().any(|m| &**m == method)
    }
}

/// Whether `path` matches `pattern`, segment by segment.
fn matches(pattern: &str, path: &str) -> bool {
    let mut wanted = pattern.split('/').peekable();
    let mut given = path.split('/');
    while let Some(want) = wanted.next() {
        let last = wanted.peek().is_none();
        match given.next() {
            // A last `*` takes this segment and every one after it.
            Some(segment) if last && want == "*" && !segment.is_empty() => return true,
            Some(segment) if switchyard_governance::key::glob(want.as_bytes(), segment.as_bytes()) => {
                // A `*` inside a segment may match an empty run, never an
                // empty segment (`/v1/models/` is not `/v1/models/*`).
                if segment.is_empty() && !want.is_empty() {
                    return false;
                }
            }
            _ => return false,
        }
    }
    given.next().is_none()
}

/// Why a caller's path is refused before it is matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathRefusal {
    /// Empty, not starting with `/`, or too long.
    #[error("the path must start with `/` and be at most {MAX_PATH} bytes")]
    Shape,
    /// A `.` or `..` segment, or an empty one (`//`).
    #[error("the path holds a `.`, `..` or empty segment")]
    DotOrEmpty,
    /// A byte a path may not hold as it is (a backslash, `;`, a space, a
    /// control or non-ASCII byte).
    #[error("the path holds a character that must not appear in it")]
    Character,
    /// A percent-encoding that hides a separator, a dot, another encoding
    /// or a control byte, or a `%` not followed by two hex digits.
    #[error("the path holds an encoded separator, dot or control character")]
    Encoded,
}

/// Whether a caller's path (the part after `/passthrough/{provider}`, as it
/// came, without its query) may be matched and sent upstream as it is.
pub fn check_path(path: &str) -> Result<(), PathRefusal> {
    if !path.starts_with('/') || path.len() > MAX_PATH {
        return Err(PathRefusal::Shape);
    }
    let bytes = path.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let byte = bytes[at];
        if byte == b'%' {
            let hex = |b: Option<&u8>| b.and_then(|b| (*b as char).to_digit(16));
            let (Some(high), Some(low)) = (hex(bytes.get(at + 1)), hex(bytes.get(at + 2))) else {
                return Err(PathRefusal::Encoded);
            };
            let decoded = (high * 16 + low) as u8;
            if !(0x20..0x7f).contains(&decoded) || b"/\\.%;?#".contains(&decoded) {
                return Err(PathRefusal::Encoded);
            }
            at += 3;
            continue;
        }
        // RFC 3986 pchar and `/`, but `;` (a path parameter some servers
        // strip, `..;` read as `..`).
        let plain = byte.is_ascii_alphanumeric() || b"-._~!$&'()*+,=:@/".contains(&byte);
        if !plain {
            return Err(PathRefusal::Character);
        }
        at += 1;
    }
    // A trailing `/` is a path of its own some APIs use; `//`, `.` and `..` never.
    let inner = path.strip_suffix('/').filter(|p| !p.is_empty()).unwrap_or(path);
    if inner[1..].split('/').any(|segment| segment.is_empty() || segment == "." || segment == "..") {
        return Err(PathRefusal::DotOrEmpty);
    }
    Ok(())
}

/// The vendor paths Switchyard models (chat, embeddings, rerank, counting
/// and their kin): on the raw route they would skip what the modelled
/// route does (guardrails, the response cache, routing and failover,
/// retention), so a pattern that opens one is warned of at boot.
const MODELLED: [&str; 9] = [
    "/v1/chat/completions",
    "/v1/completions",
    "/v1/responses",
    "/v1/messages",
    "/v1/embeddings",
    "/v2/chat",
    "/v2/embed",
    "/v2/rerank",
    "/v1/messages/count_tokens",
];

/// Reads `providers.<name>.passthrough` (`at`); `mock` says the provider is
/// the in-process fake, `callers_key` that callers bring their own key
/// (neither can take the raw route).
pub(crate) fn read(
    raw: &RawPassthrough,
    at: &str,
    mock: bool,
    callers_key: bool,
    issues: &mut Vec<Issue>,
    warnings: &mut Vec<Issue>,
) -> Passthrough {
    if mock {
        issues.push(Issue::new(
            at,
            "the raw route forwards to a real upstream; mock:// answers only the operations Switchyard models",
            "remove passthrough, or point base_url at the provider",
        ));
    }
    if callers_key {
        issues.push(Issue::new(
            at,
            "the raw route sends the provider's own credential, and this provider's callers bring their own \
             (upstream_credentials: passthrough)",
            "remove passthrough here, or use upstream_credentials: own",
        ));
    }
    if raw.paths.is_empty() || raw.paths.len() > MAX_PATTERNS {
        issues.push(Issue::new(
            &format!("{at}.paths"),
            format!("{} patterns: the route opens only the paths listed", raw.paths.len()),
            format!("list 1 to {MAX_PATTERNS} path patterns, e.g. paths: [\"/v1/fine_tuning/*\"]"),
        ));
    }
    let mut paths = Vec::with_capacity(raw.paths.len());
    for (index, pattern) in raw.paths.iter().enumerate() {
        if let Err(why) = check_pattern(pattern) {
            issues.push(Issue::new(
                &format!("{at}.paths[{index}]"),
                format!("`{pattern}`: {why}"),
                "write a path from `/` of plain segments; `*` matches within a segment, a last `/*` everything below",
            ));
        } else if let Some(modelled) = MODELLED.iter().find(|path| matches(pattern, path)) {
            warnings.push(Issue::new(
                &format!("{at}.paths[{index}]"),
                format!(
                    "`{pattern}` opens {modelled}, which the raw route passes without guardrails, cache or failover"
                ),
                "send it to the modelled route instead, or keep the pattern if skipping them is meant",
            ));
        }
        paths.push(Arc::from(pattern.as_str()));
    }
    let written = raw.methods.clone().unwrap_or_else(|| vec!["GET".to_owned(), "POST".to_owned()]);
    if written.is_empty() {
        issues.push(Issue::new(
            &format!("{at}.methods"),
            "no method: nothing could pass",
            "list methods, e.g. methods: [GET, POST], or remove it (GET and POST)",
        ));
    }
    let mut methods: Vec<Arc<str>> = Vec::with_capacity(written.len());
    for (index, method) in written.iter().enumerate() {
        let upper = method.to_ascii_uppercase();
        if !METHODS.contains(&upper.as_str()) {
            issues.push(Issue::new(
                &format!("{at}.methods[{index}]"),
                format!("`{method}` is not a method the raw route opens"),
                format!("use {}", METHODS.join(", ")),
            ));
        } else if !methods.iter().any(|m| **m == *upper) {
            methods.push(Arc::from(upper));
        }
    }
    Passthrough { paths, methods }
}

/// Why an operator's pattern cannot be one.
fn check_pattern(pattern: &str) -> Result<(), String> {
    if !pattern.starts_with('/') {
        return Err("a pattern starts with `/`".to_owned());
    }
    if pattern.len() > MAX_PATH {
        return Err(format!("a pattern is at most {MAX_PATH} bytes"));
    }
    if pattern.bytes().any(|b| b == b'%') {
        return Err("a pattern holds no percent-encoding (callers' encoded paths are refused)".to_owned());
    }
    if pattern == "/" || pattern == "/*" {
        return Err("a pattern this wide opens the provider's whole API, admin endpoints included".to_owned());
    }
    // What a caller may send, but with `*` (which a caller's path may hold too).
    match check_path(pattern) {
        Ok(()) if pattern.ends_with('/') => Err("a pattern does not end with `/`".to_owned()),
        Ok(()) => Ok(()),
        Err(why) => Err(why.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(paths: &[&str]) -> Passthrough {
        Passthrough { paths: paths.iter().map(|p| Arc::from(*p)).collect(), methods: vec![Arc::from("GET")] }
    }

    #[test]
    fn a_last_star_reaches_below_and_an_inner_star_one_segment() {
        let route = open(&["/v1/fine_tuning/*", "/v1/models/*", "/v1beta/models/*:countTokens", "/v1/files"]);
        assert!(route.allows_path("/v1/fine_tuning/jobs"));
        assert!(route.allows_path("/v1/fine_tuning/jobs/ftjob-1/events"));
        assert!(!route.allows_path("/v1/fine_tuning"));
        assert!(!route.allows_path("/v1/fine_tuningX/jobs"));
        assert!(route.allows_path("/v1/models/gpt-4o"));
        assert!(!route.allows_path("/v1/models/"), "an empty segment is not a model");
        assert!(route.allows_path("/v1beta/models/gemini-2.5-flash:countTokens"));
        assert!(!route.allows_path("/v1beta/models/gemini-2.5-flash:generateContent"));
        assert!(!route.allows_path("/v1beta/models/a/b:countTokens"), "an inner star stays in its segment");
        assert!(route.allows_path("/v1/files"));
        assert!(!route.allows_path("/v1/files/file-1"));
        assert!(!route.allows_path("/v1/organization/admin_api_keys"));
        assert!(!route.allows_path("/V1/models/gpt-4o"), "paths are matched as written");
    }

    #[test]
    fn a_path_that_could_be_read_as_another_is_refused() {
        for ok in ["/v1/models/gpt-4o", "/v1/models/a%3Ab", "/model/arn%3Aaws%3Abedrock/invoke", "/v1/x/", "/v1/a:b@c"]
        {
            assert_eq!(check_path(ok), Ok(()), "{ok}");
        }
        let refused = [
            ("", PathRefusal::Shape),
            ("v1/models", PathRefusal::Shape),
            ("/v1/models/../organization", PathRefusal::DotOrEmpty),
            ("/v1/models/..", PathRefusal::DotOrEmpty),
            ("/v1/./models", PathRefusal::DotOrEmpty),
            ("/v1//models", PathRefusal::DotOrEmpty),
            ("//v1/models", PathRefusal::DotOrEmpty),
            ("/v1/models/%2e%2e/organization", PathRefusal::Encoded),
            ("/v1/models/%2E%2E/organization", PathRefusal::Encoded),
            ("/v1/models/.%2e/organization", PathRefusal::Encoded),
            ("/v1/models/x%2F..%2F..%2Forganization", PathRefusal::Encoded),
            ("/v1/models/x%2fy", PathRefusal::Encoded),
            ("/v1/models/x%5c..", PathRefusal::Encoded),
            ("/v1/models/%252e%252e", PathRefusal::Encoded),
            ("/v1/models/x%00", PathRefusal::Encoded),
            ("/v1/models/x%3f", PathRefusal::Encoded),
            ("/v1/models/x%", PathRefusal::Encoded),
            ("/v1/models/x%zz", PathRefusal::Encoded),
            ("/v1/models/..;/organization", PathRefusal::Character),
            ("/v1/models/x;y", PathRefusal::Character),
            ("/v1/models\\..\\organization", PathRefusal::Character),
            ("/v1/models/a b", PathRefusal::Character),
            ("/v1/models/é", PathRefusal::Character),
        ];
        for (path, why) in refused {
            assert_eq!(check_path(path), Err(why), "{path}");
        }
        assert_eq!(check_path(&format!("/{}", "a".repeat(MAX_PATH))), Err(PathRefusal::Shape));
    }

    #[test]
    fn patterns_and_methods_are_checked_at_boot() {
        let mut issues = Vec::new();
        let raw = RawPassthrough {
            paths: vec![
                "/v1/models/*".into(),
                "v1/files".into(),
                "/v1/../organization/*".into(),
                "/v1/%2e%2e/x".into(),
                "/*".into(),
                "/v1//x".into(),
                "/v1/files/".into(),
            ],
            methods: Some(vec!["get".into(), "CONNECT".into(), "GET".into()]),
        };
        let mut warnings = Vec::new();
        let read = read(&raw, "providers.openai.passthrough", false, false, &mut issues, &mut warnings);
        assert!(warnings.is_empty(), "{warnings:?}");
        let paths: Vec<&str> = issues.iter().map(|i| i.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "providers.openai.passthrough.paths[1]",
                "providers.openai.passthrough.paths[2]",
                "providers.openai.passthrough.paths[3]",
                "providers.openai.passthrough.paths[4]",
                "providers.openai.passthrough.paths[5]",
                "providers.openai.passthrough.paths[6]",
                "providers.openai.passthrough.methods[1]",
            ]
        );
        assert_eq!(read.methods, vec![Arc::<str>::from("GET")]);
        let mut issues = Vec::new();
        let raw = RawPassthrough { paths: vec![], methods: None };
        let read = super::read(&raw, "p", true, true, &mut issues, &mut warnings);
        assert_eq!(issues.len(), 3, "{issues:?}");
        let raw = RawPassthrough { paths: vec!["/v1/*".into(), "/v1/models/*".into()], methods: None };
        super::read(&raw, "p", false, false, &mut issues, &mut warnings);
        let warned: Vec<&str> = warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(warned, ["p.paths[0]"], "a pattern that opens a modelled route is warned of");
        assert_eq!(read.methods, vec![Arc::<str>::from("GET"), Arc::<str>::from("POST")]);
    }

    #[test]
    fn the_route_needs_keys_and_a_token_issuer_may_grant_only_open_routes() {
        let config = |auth: &str, grant: &str| {
            format!(
                "{auth}providers:\n  openai:\n    protocol: openai\n    base_url: https://api.openai.com\n    api_key: k\n    \
                 passthrough: {{ paths: [\"/v1/fine_tuning/*\"], methods: [GET, POST, DELETE] }}\n  \
                 claude: {{ protocol: anthropic, base_url: https://api.anthropic.com, api_key: k }}\n\
                 models:\n  gpt: {{ provider: openai }}\n{grant}"
            )
        };
        let paths = |text: &str| -> Vec<String> {
            match crate::load(text, &|_| None) {
                Ok(_) => Vec::new(),
                Err(err) => err.0.into_iter().map(|issue| issue.path).collect(),
            }
        };
        assert_eq!(paths(&config("", "")), ["providers.openai.passthrough"], "an open gateway knows no callers");
        let keys = "auth:\n  mode: keys\n  jwt:\n    - { name: corp, issuer: https://idp.example, \
                    jwks_url: https://idp.example/jwks, audience: sy, group_claim: team, passthrough: [GRANTS] }\n";
        assert!(paths(&config(&keys.replace("GRANTS", "openai"), "")).is_empty());
        assert_eq!(paths(&config(&keys.replace("GRANTS", "openai, claude"), "")), ["auth.jwt[0].passthrough[1]"]);
        let loaded =
            crate::load(&config(&keys.replace("GRANTS", "openai"), ""), &|_| None).unwrap_or_else(|e| panic!("{e}"));
        let route = loaded.providers[1].passthrough.as_ref().unwrap_or_else(|| panic!("openai opens its route"));
        assert!(route.allows_method("DELETE") && !route.allows_method("PUT"));
        assert!(loaded.providers[0].passthrough.is_none(), "closed by default");
    }
}

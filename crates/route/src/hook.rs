//! The external routing hook's contract, as pure functions: the payload a
//! gate is sent, the parsing of its reply into a [`Decision`] (size-capped,
//! depth-limited, fail-closed for `reject`), and the deterministic
//! reconciliation of several gates' decisions.

use serde_json::{json, Map, Value};

/// Largest reply body accepted from a hook.
pub const MAX_REPLY_BYTES: usize = 64 << 10;
/// Deepest JSON nesting accepted in a reply.
pub const MAX_REPLY_DEPTH: usize = 16;

/// What a hook was granted to see and do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Grants {
    /// Sees the request's text (`ro`), and may also rewrite it (`rw`).
    pub prompt: Access,
    /// Sees who is calling.
    pub user: bool,
}

/// Prompt access level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Access {
    /// Shapes only (the default).
    #[default]
    No,
    /// Read the text.
    ReadOnly,
    /// Read the text and replace the request body.
    ReadWrite,
}

/// A candidate as a hook sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CandidateView<'a> {
    /// The model (lane) name.
    pub model: &'a str,
    /// Free-form size label.
    pub tier: Option<&'a str>,
    /// Rate-card cost per million tokens (input plus output).
    pub cost_per_mtok: Option<f64>,
    /// Rolling latency.
    pub latency_ms: Option<f64>,
    /// Free concurrency permits (`None` = uncapped).
    pub available_concurrency: Option<u64>,
    /// Remaining budget on the caller's chain (`None` = unlimited).
    pub budget_remaining: Option<f64>,
    /// Remaining rate headroom (`None` without governance).
    pub rate_headroom: Option<f64>,
    /// Operator labels.
    pub tags: &'a [std::sync::Arc<str>],
}

/// The request as a hook sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestView<'a> {
    /// Pool name.
    pub pool: &'a str,
    /// Caller protocol.
    pub ingress_protocol: &'a str,
    /// Shape.
    pub projection: &'a crate::Projection,
    /// System text, for `prompt` grants.
    pub system: Option<String>,
    /// `(role, text)` per message, for `prompt` grants.
    pub messages: Vec<(&'static str, String)>,
    /// The end-user id the body named, for `user` grants.
    pub end_user: Option<&'a str>,
    /// The virtual key's id and name, when the caller authenticated with one
    /// (built from the key's record, never from the secret).
    pub key: Option<(&'a str, &'a str)>,
    /// The caller's request body, for `prompt: rw` grants (what a rewrite replaces).
    pub body: Option<Value>,
}

/// Builds the JSON payload a gate receives, honouring its grants.
pub fn payload(request: &RequestView<'_>, candidates: &[CandidateView<'_>], grants: Grants) -> Value {
    let projection = request.projection;
    let mut req = Map::new();
    req.insert("pool".into(), json!(request.pool));
    req.insert("ingress_protocol".into(), json!(request.ingress_protocol));
    req.insert("message_count".into(), json!(projection.message_count));
    req.insert("has_tools".into(), json!(projection.has_tools));
    req.insert("total_chars".into(), json!(projection.total_chars));
    req.insert("max_tokens".into(), json!(projection.max_tokens));
    req.insert("stream".into(), json!(projection.stream));
    if grants.prompt != Access::No {
        if let Some(system) = &request.system {
            req.insert("system".into(), json!(system));
        }
        let messages: Vec<Value> =
            request.messages.iter().map(|(role, text)| json!({"role": role, "text": text})).collect();
        req.insert("messages".into(), Value::Array(messages));
    }
    if grants.prompt == Access::ReadWrite {
        if let Some(body) = &request.body {
            req.insert("body".into(), body.clone());
        }
    }
    if grants.user {
        let mut user = Map::new();
        if let Some(end_user) = request.end_user {
            user.insert("end_user".into(), json!(end_user));
        }
        if let Some((id, name)) = request.key {
            user.insert("id".into(), json!(id));
            user.insert("name".into(), json!(name));
        }
        req.insert("user".into(), Value::Object(user));
    }
    let candidates: Vec<Value> = candidates
        .iter()
        .enumerate()
        .map(|(idx, c)| {
            let mut out = json!({
                "idx": idx,
                "model": c.model,
                "tier": c.tier,
                "cost_per_mtok": c.cost_per_mtok,
                "latency_ms": c.latency_ms,
                "available_concurrency": c.available_concurrency,
                "budget_remaining": c.budget_remaining,
                "rate_headroom": c.rate_headroom,
            });
            if !c.tags.is_empty() {
                let tags: Vec<&str> = c.tags.iter().map(|t| &**t).collect();
                out["tags"] = json!(tags);
            }
            out
        })
        .collect();
    json!({"request": Value::Object(req), "candidates": candidates})
}

/// One gate's verdict.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Refuse the request with this status (400–499) and message.
    pub reject: Option<(u16, String)>,
    /// Ranked candidate indexes, most preferred first.
    pub order: Option<Vec<usize>>,
    /// Keep only candidates carrying one of these tags.
    pub restrict: Option<Vec<String>>,
    /// Replacement request body (needs `prompt: rw`).
    pub rewrite: Option<Value>,
}

impl Decision {
    /// No opinion.
    pub fn abstain() -> Decision {
        Decision::default()
    }
}

/// Why a reply counts as a hook failure (its `on_error` applies).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReplyError {
    /// Larger than [`MAX_REPLY_BYTES`].
    #[error("reply larger than {MAX_REPLY_BYTES} bytes")]
    TooLarge,
    /// Nested deeper than [`MAX_REPLY_DEPTH`].
    #[error("reply nested deeper than {MAX_REPLY_DEPTH} levels")]
    TooDeep,
    /// Not a JSON object.
    #[error("reply is not a json object: {0}")]
    Malformed(String),
    /// An arm the hook was not granted.
    #[error("hook returned `{0}` without the grant for it")]
    NotGranted(&'static str),
}

/// Parses a gate's reply. `reject` is fail-closed: any value but `false` or
/// `null` rejects, and a malformed detail degrades to 403 with a generic
/// message, never to routing the request.
pub fn parse_reply(bytes: &[u8], grants: Grants) -> Result<Decision, ReplyError> {
    if bytes.len() > MAX_REPLY_BYTES {
        return Err(ReplyError::TooLarge);
    }
    if nesting_depth(bytes) > MAX_REPLY_DEPTH {
        return Err(ReplyError::TooDeep);
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|err| ReplyError::Malformed(err.to_string()))?;
    let Value::Object(reply) = value else {
        return Err(ReplyError::Malformed("expected an object".into()));
    };
    let mut decision = Decision::default();
    match reply.get("reject") {
        None | Some(Value::Null) | Some(Value::Bool(false)) => {}
        Some(detail) => {
            let status = detail.get("status").and_then(Value::as_u64).map_or(403, |s| s.clamp(400, 499) as u16);
            let message = detail.get("message").and_then(Value::as_str).map(sanitize).filter(|m| !m.is_empty());
            decision.reject =
                Some((status, message.unwrap_or_else(|| "request rejected by a routing hook".to_owned())));
            return Ok(decision);
        }
    }
    if reply.get("abstain").and_then(Value::as_bool) == Some(true) {
        return Ok(decision);
    }
    if let Some(order) = reply.get("order").and_then(Value::as_array) {
        let order: Vec<usize> = order.iter().filter_map(Value::as_u64).map(|i| i as usize).collect();
        if !order.is_empty() {
            decision.order = Some(order);
        }
    }
    if let Some(restrict) = reply.get("restrict") {
        let tags = restrict.get("tags").unwrap_or(restrict);
        let tags: Vec<String> = tags
            .as_array()
            .map(|t| t.iter().filter_map(Value::as_str).map(str::to_owned).collect())
            .unwrap_or_default();
        if !tags.is_empty() {
            decision.restrict = Some(tags);
        }
    }
    if let Some(rewrite) = reply.get("rewrite").filter(|v| !v.is_null()) {
        if grants.prompt != Access::ReadWrite {
            return Err(ReplyError::NotGranted("rewrite"));
        }
        let body = rewrite.get("body").unwrap_or(rewrite);
        if !body.is_object() {
            return Err(ReplyError::Malformed("rewrite must carry a json object body".into()));
        }
        decision.rewrite = Some(body.clone());
    }
    Ok(decision)
}

/// Printable text only, at most 500 characters: a hook's message reaches
/// the caller and the logs.
fn sanitize(message: &str) -> String {
    message.chars().filter(|c| !c.is_control()).take(500).collect::<String>().trim().to_owned()
}

/// Deepest bracket nesting outside strings.
fn nesting_depth(bytes: &[u8]) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in bytes {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                max = max.max(depth);
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Several gates' decisions, in priority order (lowest first), folded into
/// one: any reject wins (the first in the chain), restricts intersect, and
/// the last order and the last rewrite in the chain win.
pub fn reconcile(decisions: impl IntoIterator<Item = Decision>) -> Decision {
    let mut out = Decision::default();
    let mut restricts: Vec<Vec<String>> = Vec::new();
    for decision in decisions {
        if out.reject.is_none() {
            out.reject = decision.reject;
        }
        if decision.order.is_some() {
            out.order = decision.order;
        }
        if decision.rewrite.is_some() {
            out.rewrite = decision.rewrite;
        }
        restricts.extend(decision.restrict);
    }
    if out.reject.is_some() {
        return Decision { reject: out.reject, ..Decision::default() };
    }
    if !restricts.is_empty() {
        // Kept as a list of tag sets; a candidate must match each set.
        out.restrict = Some(restricts.iter().map(|set| set.join("\u{1f}")).collect());
    }
    out
}

/// True when a candidate with `tags` passes a reconciled restrict (it
/// carries at least one tag of every gate's set).
pub fn passes_restrict(restrict: &[String], tags: &[std::sync::Arc<str>]) -> bool {
    restrict.iter().all(|set| set.split('\u{1f}').any(|wanted| tags.iter().any(|t| &**t == wanted)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn reject_is_fail_closed_and_clamped() {
        let d =
            parse_reply(br#"{"reject": {"status": 200, "message": "no\u0007pe"}, "order": [1]}"#, Grants::default())
                .unwrap();
        assert_eq!(d.reject, Some((400, "nope".into())));
        assert_eq!(d.order, None);
        let d = parse_reply(br#"{"reject": "yes please"}"#, Grants::default()).unwrap();
        assert_eq!(d.reject, Some((403, "request rejected by a routing hook".into())));
        let d = parse_reply(br#"{"reject": {"status": 599}}"#, Grants::default()).unwrap();
        assert_eq!(d.reject.unwrap().0, 499);
        let d = parse_reply(br#"{"reject": false, "order": [1, 0]}"#, Grants::default()).unwrap();
        assert_eq!((d.reject, d.order), (None, Some(vec![1, 0])));
    }

    #[test]
    fn abstain_empty_and_garbage() {
        assert_eq!(parse_reply(b"{}", Grants::default()).unwrap(), Decision::abstain());
        assert_eq!(parse_reply(br#"{"order": []}"#, Grants::default()).unwrap(), Decision::abstain());
        assert_eq!(parse_reply(br#"{"abstain": true, "order": [1]}"#, Grants::default()).unwrap(), Decision::abstain());
        assert!(matches!(parse_reply(b"[1]", Grants::default()), Err(ReplyError::Malformed(_))));
        assert!(matches!(parse_reply(b"nope", Grants::default()), Err(ReplyError::Malformed(_))));
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(40), "]".repeat(40));
        assert_eq!(parse_reply(deep.as_bytes(), Grants::default()), Err(ReplyError::TooDeep));
        assert_eq!(parse_reply(&vec![b' '; MAX_REPLY_BYTES + 1], Grants::default()), Err(ReplyError::TooLarge));
    }

    #[test]
    fn rewrite_needs_the_grant() {
        let reply = br#"{"rewrite": {"body": {"model": "x"}}}"#;
        assert_eq!(parse_reply(reply, Grants::default()), Err(ReplyError::NotGranted("rewrite")));
        let grants = Grants { prompt: Access::ReadWrite, user: false };
        assert_eq!(parse_reply(reply, grants).unwrap().rewrite, Some(json!({"model": "x"})));
    }

    #[test]
    fn reconcile_reject_wins_restricts_intersect_last_order_wins() {
        let a =
            Decision { order: Some(vec![0]), restrict: Some(vec!["us".into(), "eu".into()]), ..Decision::default() };
        let b = Decision { order: Some(vec![1]), restrict: Some(vec!["eu".into()]), ..Decision::default() };
        let merged = reconcile([a.clone(), b.clone()]);
        assert_eq!(merged.order, Some(vec![1]));
        let restrict = merged.restrict.unwrap();
        let tags = |list: &[&str]| list.iter().map(|t| Arc::<str>::from(*t)).collect::<Vec<_>>();
        assert!(passes_restrict(&restrict, &tags(&["eu"])));
        assert!(!passes_restrict(&restrict, &tags(&["us"])));
        let reject = Decision { reject: Some((451, "pii".into())), ..Decision::default() };
        assert_eq!(reconcile([a, reject.clone(), b]), reject);
    }

    #[test]
    fn payload_honours_grants() {
        let projection = crate::Projection { message_count: 2, total_chars: 10, ..crate::Projection::default() };
        let request = RequestView {
            pool: "smart",
            ingress_protocol: "openai",
            projection: &projection,
            system: Some("be nice".into()),
            messages: vec![("user", "hello".into())],
            end_user: Some("u-1"),
            key: Some(("key_01", "ci")),
            body: Some(json!({"model": "smart"})),
        };
        let tags = [Arc::<str>::from("eu")];
        let candidates = [CandidateView {
            model: "m",
            tier: Some("small"),
            cost_per_mtok: Some(1.0),
            latency_ms: None,
            available_concurrency: Some(3),
            budget_remaining: None,
            rate_headroom: None,
            tags: &tags,
        }];
        let shapes = payload(&request, &candidates, Grants::default());
        assert!(shapes["request"].get("messages").is_none() && shapes["request"].get("user").is_none());
        assert_eq!(shapes["candidates"][0]["tags"], json!(["eu"]));
        let all = payload(&request, &candidates, Grants { prompt: Access::ReadWrite, user: true });
        assert_eq!(all["request"]["messages"][0]["text"], "hello");
        assert_eq!(all["request"]["user"]["end_user"], "u-1");
        assert_eq!(all["request"]["user"]["id"], "key_01");
        assert_eq!(all["request"]["user"]["name"], "ci");
        assert_eq!(all["request"]["body"]["model"], "smart");
    }
}

//! What of the caller's headers goes upstream on the raw route, and what
//! of the upstream's comes back. The caller's headers pass (a vendor's
//! endpoints read their own: `OpenAI-Beta`, `anthropic-beta`,
//! `Idempotency-Key`, ...), but never a hop-by-hop header, a credential of
//! any scheme (the caller's key is for the gateway; the provider's own is
//! added after), an account or project selector (the operator's key may
//! belong to several: the operator's `headers` choose), forwarding headers,
//! the gateway's own, or `accept-encoding` (a reply is metered as it
//! passes, so it comes back as it is). The reply's headers come back but
//! for hop-by-hop ones, cookies and the account the operator's key is of.

use http::{HeaderMap, HeaderName};

/// Caller headers that never go upstream (lower-case).
const REQUEST_DROPPED: [&str; 29] = [
    // Hop-by-hop, framing and the host (the transport writes them).
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "content-length",
    "expect",
    "accept-encoding",
    // Credentials of every scheme a caller or a vendor uses.
    "authorization",
    "proxy-authorization",
    "x-api-key",
    "api-key",
    "x-goog-api-key",
    "cookie",
    // What would choose another account, project or region of the operator's key.
    "openai-organization",
    "openai-project",
    "x-goog-user-project",
    "anthropic-workspace",
    "anthropic-workspace-id",
    "anthropic-user-profile-id",
    // Forwarding: the upstream sees the gateway.
    "forwarded",
    "x-forwarded-for",
    "x-forwarded-host",
    "x-forwarded-proto",
    "x-real-ip",
    // The gateway's own trace context is not the caller's business upstream.
    "traceparent",
];

/// Caller header prefixes that never go upstream: AWS signing headers
/// (`x-amz-date`, `x-amz-security-token`, `x-amz-content-sha256`), proxies',
/// the gateway's own.
const REQUEST_DROPPED_PREFIXES: [&str; 3] = ["x-amz-", "proxy-", "x-switchyard-"];

/// Upstream reply headers that never reach the caller.
const REPLY_DROPPED: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    // The body streams: its length is the transport's to write.
    "content-length",
    "set-cookie",
    // The operator's account.
    "openai-organization",
    "openai-project",
];

/// The caller's headers that may go upstream: all but those above, those
/// its `Connection` header names, and the operator's end-user header
/// (`end_user`).
pub(super) fn request(caller: &HeaderMap, end_user: &HeaderName) -> HeaderMap {
    let listed = listed_in_connection(caller);
    let mut headers = HeaderMap::with_capacity(caller.len() + 6);
    for (name, value) in caller {
        let lower = name.as_str();
        let dropped = REQUEST_DROPPED.contains(&lower)
            || REQUEST_DROPPED_PREFIXES.iter().any(|prefix| lower.starts_with(prefix))
            || name == end_user
            || listed.iter().any(|l| l.eq_ignore_ascii_case(lower));
        if !dropped {
            headers.append(name.clone(), value.clone());
        }
    }
    headers
}

/// The upstream's reply headers as the caller gets them.
pub(super) fn reply(headers: &mut HeaderMap) {
    let listed = listed_in_connection(headers);
    for name in REPLY_DROPPED.iter().map(|n| n.to_string()).chain(listed) {
        headers.remove(name.as_str());
    }
}

/// The headers a `Connection` header names (hop-by-hop by RFC 9110 §7.6.1).
fn listed_in_connection(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all(http::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|name| name.trim().to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_selectors_and_hops_stay_behind() {
        let mut caller = HeaderMap::new();
        for (name, value) in [
            ("authorization", "Bearer sy-caller"),
            ("x-api-key", "sy-caller"),
            ("x-goog-api-key", "sy-caller"),
            ("api-key", "sy-caller"),
            ("x-amz-date", "20260101T000000Z"),
            ("x-amz-security-token", "t"),
            ("openai-organization", "org-other"),
            ("openai-project", "proj-other"),
            // The SDKs' `workspace_id` and `user_profile_id`.
            ("anthropic-workspace-id", "wrkspc_other"),
            ("anthropic-user-profile-id", "prof_other"),
            ("cookie", "a=b"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "1"),
            ("host", "gateway"),
            ("content-length", "3"),
            ("accept-encoding", "gzip"),
            ("x-switchyard-user", "ana"),
            ("x-end-user", "ana"),
            ("x-forwarded-for", "10.0.0.1"),
            ("content-type", "application/json"),
            ("openai-beta", "assistants=v2"),
            ("anthropic-version", "2023-06-01"),
            ("idempotency-key", "k1"),
        ] {
            caller.append(name, value.parse().unwrap_or_else(|_| unreachable!()));
        }
        let sent = request(&caller, &HeaderName::from_static("x-end-user"));
        let names: Vec<&str> = sent.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "openai-beta", "anthropic-version", "idempotency-key"]);
    }

    #[test]
    fn a_reply_keeps_its_own_headers_but_hops_and_cookies() {
        let mut reply = HeaderMap::new();
        for (name, value) in [
            ("content-type", "text/event-stream"),
            ("content-length", "10"),
            ("set-cookie", "__cf_bm=x"),
            ("openai-organization", "org-operator"),
            ("connection", "close, x-hop"),
            ("x-hop", "1"),
            ("x-ratelimit-remaining-requests", "99"),
        ] {
            reply.append(name, value.parse().unwrap_or_else(|_| unreachable!()));
        }
        super::reply(&mut reply);
        let names: Vec<&str> = reply.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["content-type", "x-ratelimit-remaining-requests"]);
    }
}

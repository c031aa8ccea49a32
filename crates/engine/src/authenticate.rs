//! The authenticate stage: who is calling, from the credential its SDK
//! sends (a virtual key in `Authorization: Bearer`, `x-api-key`,
//! `x-goog-api-key` or `?key=`; or a SigV4 signature by a minted AWS
//! pair). A key carried in a header is checked before the body is read;
//! only a signature, which covers the body, waits for it. `None` on an open
//! data plane.

use http::{HeaderMap, Uri};
use switchyard_governance::sigv4::Inbound;
use switchyard_ir::{ErrorInfo, Protocol};
use switchyard_state::governance::{Caller, Presented};
use switchyard_state::{ClientName, Gateway};

/// Whether the request is signed with SigV4 (its key is checked against
/// the body, so only after the body is read).
pub fn is_signed(headers: &HeaderMap) -> bool {
    headers.get(http::header::AUTHORIZATION).is_some_and(|v| v.as_bytes().starts_with(b"AWS4-HMAC-SHA256"))
}

/// Who is calling (governance's "authenticate" stage): `None` on an open
/// data plane. `client`: the verified client certificate, when the
/// listener names callers by it.
pub fn caller(
    gateway: &Gateway,
    protocol: Protocol,
    uri: &Uri,
    headers: &HeaderMap,
    client: Option<&ClientName>,
    body: &[u8],
) -> Result<Option<Caller>, ErrorInfo> {
    caller_of(gateway, protocol, "POST", uri, headers, client, body)
}

/// [`caller`] of a request made with `method` (a signature covers it; the
/// raw route takes any method).
pub fn caller_of(
    gateway: &Gateway,
    protocol: Protocol,
    method: &str,
    uri: &Uri,
    headers: &HeaderMap,
    client: Option<&ClientName>,
    body: &[u8],
) -> Result<Option<Caller>, ErrorInfo> {
    let Some(governance) = &gateway.governance else {
        return Ok(None);
    };
    let signed = is_signed(headers);
    let pairs: Vec<(&str, &[u8])> =
        if signed { headers.iter().map(|(n, v)| (n.as_str(), v.as_bytes())).collect() } else { Vec::new() };
    let inbound = signed.then(|| Inbound {
        method,
        path: uri.path(),
        query: uri.query(),
        headers: &pairs,
        authority: uri.authority().map(|a| a.as_str()),
        body,
    });
    let key_hint = gateway.codec(protocol).ingress().key.hint;
    governance.authenticate(&Presented { key_hint, headers, query: uri.query(), inbound, client })
}

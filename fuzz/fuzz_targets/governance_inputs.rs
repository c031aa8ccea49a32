//! What governance reads from callers: SigV4 `Authorization` headers and
//! whole signed requests, the prompt estimate over request bodies, and
//! stored key hashes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_governance::sigv4::{parse_authorization, verify, Inbound};
use switchyard_governance::{estimate, KeyHash};

fuzz_target!(|data: &[u8]| {
    let _ = estimate::input_tokens(data, &["data", "url", "bytes"]);
    let text = String::from_utf8_lossy(data);
    let _ = parse_authorization(&text);
    let _ = KeyHash::from_hex(&text);
    // A request whose every part comes from the input.
    let mut parts = text.splitn(4, '\n');
    let (authorization, date, path, body) =
        (parts.next().unwrap_or(""), parts.next().unwrap_or(""), parts.next().unwrap_or("/"), parts.next().unwrap_or(""));
    let headers = [("authorization", authorization.as_bytes()), ("x-amz-date", date.as_bytes()), ("host", &b"h"[..])];
    let inbound = Inbound { method: "POST", path, query: Some(path), headers: &headers, authority: None, body: body.as_bytes() };
    let _ = verify(&inbound, |_| Some("secret".to_owned()), 1_796_067_065);
});

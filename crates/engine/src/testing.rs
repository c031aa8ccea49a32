//! The engine's test fixture: a gateway built in-process from a config
//! (its lanes `mock://`, answered by the vendor fake without a socket),
//! calls framed as an ingress frames them, and requests driven through
//! [`crate::forward`] with no listener. Filters are tested against the
//! same gateway's [`Env`](crate::env::Env).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use http_body_util::BodyExt;
use switchyard_codec::{scan, Framing};
use switchyard_ir::{Operation, Protocol};
use switchyard_state::call::Call;
use switchyard_state::Gateway;

use crate::settle::Record;

/// A gateway for `yaml`, not serving.
pub(crate) fn gateway(yaml: &str) -> Arc<Gateway> {
    let config = switchyard_config::load(yaml, &|_| None).unwrap_or_else(|err| panic!("{err}"));
    Arc::new(Gateway::new(config, switchyard_protocol::codec).unwrap_or_else(|err| panic!("{err}")))
}

/// A governed gateway for `yaml` (in-memory stores, its ledger writer
/// running for the test's life).
pub(crate) async fn governed(yaml: &str) -> Arc<Gateway> {
    let config = switchyard_config::load(yaml, &|_| None).unwrap_or_else(|err| panic!("{err}"));
    let gateway = Gateway::new(config, switchyard_protocol::codec).unwrap_or_else(|err| panic!("{err}"));
    let (governance, writer) = switchyard_state::governance::from_config(&gateway.config, gateway.prices())
        .await
        .unwrap_or_else(|err| panic!("{err}"))
        .unwrap_or_else(|| panic!("the config has no governance"));
    std::mem::forget(writer);
    Arc::new(gateway.with_governance(governance))
}

/// A chat call in `protocol`'s body shape, named by its body's `model`
/// (OpenAI, Anthropic, Cohere, Responses) as the ingress frames it.
pub(crate) fn call(protocol: Protocol, body: &str, headers: HeaderMap) -> Call {
    let body = Bytes::from(body.to_owned());
    let top = scan::scan_request(&body, &[]).unwrap_or_else(|err| panic!("{err}"));
    Call {
        ingress: protocol,
        operation: Operation::Chat,
        route: None,
        name: top.model.as_deref().unwrap_or_default().to_owned(),
        wire_model: None,
        model_span: top.model_span.clone(),
        metered: top.found,
        stream: top.stream.unwrap_or(false),
        framing: if protocol == Protocol::Bedrock { Framing::EventStream } else { Framing::Sse },
        request_id: HeaderValue::from_static("req-test"),
        session: None,
        caller: None,
        headers,
        body,
    }
}

/// An OpenAI chat body for `model` asking `text`.
pub(crate) fn openai(model: &str, text: &str, stream: bool) -> String {
    serde_json::json!({ "model": model, "stream": stream, "messages": [{ "role": "user", "content": text }] })
        .to_string()
}

/// A record for a request in `protocol`.
pub(crate) fn record(gateway: &Arc<Gateway>, protocol: Protocol) -> Box<Record> {
    Record::begin(gateway, protocol, HeaderValue::from_static("req-test"), &HeaderMap::new())
}

/// What a request came to: its status, headers and whole body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

/// Drives `call` through the engine, with no listener.
pub(crate) async fn send(gateway: &Arc<Gateway>, call: Call) -> Answer {
    let record = record(gateway, call.ingress);
    let response = crate::forward(gateway.clone(), call, record).await;
    let (parts, body) = response.into_parts();
    let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
    Answer { status: parts.status.as_u16(), headers: parts.headers, body: String::from_utf8_lossy(&body).into_owned() }
}

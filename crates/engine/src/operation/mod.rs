//! The operations a request may ask for, each one spec ([`Spec`]) the
//! request path calls where operations differ: what admission reserves
//! (its bounded worst case in tokens and units), the request made for a
//! lane, the lane's whole reply read for the caller, what the response
//! cache keys it by (when its answers may be kept), and an answer the
//! gateway gives itself where the lane cannot (a token count). Everything
//! else (keys, admission, routing, breakers, failover, the filters,
//! settlement) is the same path for all of them.
//!
//! An operation is one module here implementing [`Spec`], a line in
//! [`of`], a codec capability where it translates (`Codec::embed`,
//! `Codec::rerank`, `Codec::image`, `Codec::count`) and its ingress routes per protocol.

mod chat;
pub(crate) mod count;
pub(crate) mod embed;
mod image;
mod media;
pub(crate) mod rerank;

use bytes::Bytes;
use http::HeaderMap;
use switchyard_governance::money::Price;
use switchyard_governance::Estimate;
use switchyard_ir::{ErrorInfo, Operation, Response};
use switchyard_state::call::Call;
use switchyard_state::Gateway;
use tokio::time::Instant;

use crate::candidate::Candidate;
use crate::exchange::Progress;
use crate::render::{ResponseBody, Whole};
use crate::send::Prepared;
use crate::settle::Record;

/// What an operation says where operations differ.
pub(crate) trait Spec: Sync {
    /// Whether it is billed (a token count is not: it reserves nothing).
    fn billed(&self) -> bool {
        true
    }

    /// The most the call may cost, bounded (what admission holds on every
    /// bucket of the key's chain): `input` prompt tokens (the gateway's
    /// estimate), its output or units, at `price`.
    fn worst_case(
        &self,
        gateway: &Gateway,
        call: &Call,
        input: u64,
        price: &Price,
        default_max_tokens: u64,
    ) -> Result<Estimate, ErrorInfo>;

    /// The request for `candidate`'s lane.
    fn prepare(
        &self,
        gateway: &Gateway,
        call: &Call,
        candidate: &Candidate<'_>,
        progress: &mut Progress<'_>,
    ) -> Result<Prepared, ErrorInfo>;

    /// The lane's whole reply, read for the caller (its usage and units on
    /// the record). `Err`: the reply could not be read (the lane's fault).
    fn read(&self, reading: Reading<'_>, record: &mut Record) -> Result<Read, String>;

    /// Whether the response cache may keep its answers.
    fn cached(&self) -> bool {
        false
    }

    /// What the response cache keys the call by (its request read and
    /// normalised); `None`: it cannot be read.
    fn cache_material(&self, gateway: &Gateway, call: &Call) -> Option<Vec<u8>> {
        let _ = (gateway, call);
        None
    }

    /// The gateway's own answer when `candidate`'s lane cannot give one.
    fn local(
        &self,
        gateway: &Gateway,
        call: &Call,
        candidate: &Candidate<'_>,
        record: &mut Record,
    ) -> Option<http::Response<ResponseBody>> {
        let _ = (gateway, call, candidate, record);
        None
    }
}

/// A lane's whole reply, to be read for the caller.
pub(crate) struct Reading<'a> {
    pub(crate) gateway: &'a Gateway,
    pub(crate) call: &'a Call,
    pub(crate) candidate: &'a Candidate<'a>,
    pub(crate) headers: &'a HeaderMap,
    pub(crate) body: Bytes,
    /// The bodies of a split request's other parts, in order.
    pub(crate) more: Vec<(HeaderMap, Bytes)>,
    /// The reply passes back as it came (same protocol, nothing to write).
    pub(crate) same: bool,
    pub(crate) started: Instant,
}

/// What reading a reply came to.
pub(crate) enum Read {
    /// The caller's reply.
    Whole(Whole),
    /// A chat reply read into the IR, to pass the filters' `on_reply` and
    /// be written for the caller.
    Translated(Response),
}

/// The request for a lane written in parts (more inputs or images than
/// one call takes): every part drops the same fields, so the first part's
/// are counted and told once, and checked against the caller's strictness.
fn in_parts(
    gateway: &Gateway,
    call: &Call,
    candidate: &Candidate<'_>,
    path: Option<String>,
    parts: impl IntoIterator<Item = switchyard_codec::Encoded>,
) -> Result<Prepared, ErrorInfo> {
    let mut dropped = Vec::new();
    let mut bodies = Vec::new();
    for (position, encoded) in parts.into_iter().enumerate() {
        if position == 0 {
            dropped = encoded.dropped;
        }
        bodies.push(Bytes::from(encoded.body));
    }
    if let Some(metrics) = gateway.metrics() {
        metrics.translation(call.ingress, candidate.lane.protocol, &dropped);
    }
    let dropped_header = crate::translation::check(gateway, call, candidate, &dropped)?;
    let mut bodies = bodies.into_iter();
    let body = bodies.next().unwrap_or_default();
    Ok(Prepared { body, dropped_header, path, content_type: None, more: bodies.collect() })
}

/// The spec of `operation`.
pub(crate) fn of(operation: Operation) -> &'static dyn Spec {
    match operation {
        // A legacy completion is a chat in another shape: its codecs
        // (`Gateway::codec_for`) are all that differ.
        // A Realtime or Live pool is never reached over HTTP (the route's
        // operation differs: `lib.rs` refuses it); its sessions admit and
        // settle each generation themselves (duplex::realtime, duplex::live).
        Operation::Chat | Operation::Completion | Operation::Realtime | Operation::Live => &chat::Chat,
        Operation::CountTokens => &count::Count,
        Operation::Embed => &embed::Embed,
        Operation::Rerank => &rerank::Rerank,
        Operation::Image => &image::Images,
        Operation::Moderation | Operation::Speech | Operation::Transcription => &media::Media,
    }
}

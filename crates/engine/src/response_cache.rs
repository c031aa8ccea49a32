//! The response cache (`pools.<p>.cache: { ttl }`, the store's bound and
//! scope under the top-level `cache:`). A chat request is keyed on its IR,
//! normalised (no stream flag, no caller-given model name, user or
//! metadata), with its pool and its partition (the caller's key, or its
//! group when the operator says so; one partition in an open gateway):
//! callers of any protocol share an entry, and no tenant reads another's.
//! A hit is answered in the caller's protocol (a stream replayed event by
//! event, as it came), costs nothing against budgets, and says
//! `x-switchyard-cache: hit` with its `Age`; a miss is stored when it ends
//! whole (a cut stream never is); `Cache-Control: no-cache` or `no-store`
//! bypasses. A pool without `cache` never reaches this module.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use http::{HeaderName, HeaderValue, Response, StatusCode};
use sha2::{Digest, Sha256};
use switchyard_ir::{StreamEvent, Usage};
use switchyard_state::call::{CacheState, Call};
use switchyard_state::response_cache::{CacheKey, CacheKeys, Cached, OperationReply, StoredWhole};
use switchyard_state::Gateway;
use switchyard_telemetry::metrics::CacheOutcome;

use crate::render::{common_headers, lane_headers, ResponseBody, X_SWITCHYARD_BILLING};
use crate::settle::Record;

/// `x-switchyard-cache`.
pub(crate) const X_SWITCHYARD_CACHE: HeaderName = HeaderName::from_static("x-switchyard-cache");

/// The cached answer for `call` in `pool`, if one is fresh (from the
/// fleet's Redis when there is one, else this instance's store). On a miss
/// the call carries its key, for the answer to be stored under.
pub(crate) async fn lookup(
    gateway: &Gateway,
    call: &mut Call,
    pool: usize,
    record: &mut Record,
) -> Option<Response<ResponseBody>> {
    let (Some(store), Some(_)) = (&gateway.response_cache, gateway.pools[pool].cache_ttl) else { return None };
    let chat = call.operation == switchyard_ir::Operation::Chat;
    let cacheable = matches!(call.operation, switchyard_ir::Operation::Embed | switchyard_ir::Operation::Rerank);
    if !(chat || cacheable) || call.count_tokens {
        return None;
    }
    let bypass = call.headers.get_all(http::header::CACHE_CONTROL).iter().any(|value| {
        value
            .to_str()
            .is_ok_and(|v| v.to_ascii_lowercase().split(',').any(|d| matches!(d.trim(), "no-cache" | "no-store")))
    });
    // A request whose values were swapped for reversible placeholders has
    // a reply only it may read: another with other values behind the same
    // placeholders would be answered with this one's.
    let pseudonymised = call
        .guard
        .as_ref()
        .is_some_and(|guarding| guarding.masks.lock().unwrap_or_else(std::sync::PoisonError::into_inner).restores());
    if bypass || pseudonymised {
        count(gateway, pool, CacheOutcome::Bypass);
        call.cache = CacheState::Bypass;
        return None;
    }
    // The same bytes again are found without reading the request; the same
    // request in another protocol (or another spelling) by its IR.
    let material = raw_material(gateway, call, pool);
    let raw = raw_key(&material);
    // The raw key is a fast hash: its entry must hold these very bytes.
    let mut found = find(gateway, store, &raw).await.filter(|cached| cached.raw == material);
    let by_bytes = found.is_some();
    let mut ir = None;
    if found.is_none() {
        let Some(key) = key(gateway, call, pool) else {
            count(gateway, pool, CacheOutcome::Bypass);
            call.cache = CacheState::Bypass;
            return None;
        };
        found = find(gateway, store, &key).await;
        ir = Some(key);
    }
    // An operation's reply found by its IR is written for this caller from
    // the IR; one that cannot be (never read back) is no answer for it.
    let mut written = None;
    if let (Some(cached), false) = (&found, by_bytes) {
        if cached.whole.is_some() {
            written = operation_reply(gateway, call, cached);
            if written.is_none() {
                found = None;
            }
        }
    }
    let Some(cached) = found else {
        count(gateway, pool, CacheOutcome::Miss);
        call.cache = CacheState::Miss(CacheKeys { raw, ir: ir.unwrap_or(raw) });
        call.cache_material = material;
        return None;
    };
    count(gateway, pool, CacheOutcome::Hit);
    call.cache = CacheState::Hit;
    if let Some(metrics) = gateway.metrics() {
        metrics.cache_saved(metrics.place(Some(pool), None), cached.cost);
    }
    let lane = gateway.lanes.iter().position(|l| *l.name == *cached.lane);
    if let Some(lane) = lane {
        record.cache_hit(pool, lane, cached.cost);
    }
    Some(answer(gateway, call, &cached, lane, written))
}

/// The answer under `key`: in the fleet's Redis, or this instance's store.
async fn find(
    gateway: &Gateway,
    store: &switchyard_state::response_cache::ResponseCache,
    key: &CacheKey,
) -> Option<Arc<Cached>> {
    match &gateway.fleet_state {
        Some(fleet) => fleet
            .cache_get(&hex(key))
            .await
            .and_then(|bytes| serde_json::from_slice::<Cached>(&bytes).ok())
            .map(Arc::new),
        None => store.get(key, Instant::now()),
    }
}

/// What the raw key is made of: the partition, the pool, the caller's
/// protocol and stream flag, and the body's bytes as they came.
fn raw_material(gateway: &Gateway, call: &Call, pool: usize) -> Vec<u8> {
    let partition = partition(gateway, call);
    let name = &gateway.pools[pool].name;
    let mut material = Vec::with_capacity(partition.len() + name.len() + call.body.len() + 4);
    material.extend_from_slice(partition.as_bytes());
    material.push(0);
    material.extend_from_slice(name.as_bytes());
    material.extend_from_slice(&[0, call.ingress.index() as u8, u8::from(call.stream)]);
    material.extend_from_slice(&call.body);
    material
}

/// The raw key: two seeded SipHashes of the material, tagged apart from
/// the IR's SHA-256 keys. A fast hash, not a digest: a hit is checked
/// against the material it was stored with.
fn raw_key(material: &[u8]) -> CacheKey {
    use std::hash::{BuildHasher, Hasher};
    let mut key = [0u8; 32];
    key[0] = b'r';
    for (seed, at) in [(0x5357_4954_4348_5941u64, 8), (0x5244_4341_4348_4531u64, 16)] {
        let mut hasher =
            std::hash::BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().build_hasher();
        hasher.write_u64(seed);
        hasher.write(material);
        key[at..at + 8].copy_from_slice(&hasher.finish().to_le_bytes());
    }
    key
}

/// Whose entries a call reads: its key's, its group's (`scope: group`),
/// or, on a gateway without keys, everyone's.
fn partition(gateway: &Gateway, call: &Call) -> String {
    match (gateway.config.cache.by_group, call.caller.as_ref()) {
        (_, None) => String::new(),
        (true, Some(caller)) => match &caller.key.record.group {
            Some(group) => format!("group:{group}"),
            None => format!("key:{}", caller.key.id),
        },
        (false, Some(caller)) => format!("key:{}", caller.key.id),
    }
}

fn hex(key: &CacheKey) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

/// The key of `call`: its partition, its pool, its request read to IR and
/// normalised (an operation's by its own reader). `None` when the body
/// cannot be read (the path reports it).
fn key(gateway: &Gateway, call: &Call, pool: usize) -> Option<CacheKey> {
    let request = match call.operation {
        switchyard_ir::Operation::Embed => crate::embed::cache_material(gateway, call)?,
        switchyard_ir::Operation::Rerank => crate::rerank::cache_material(gateway, call)?,
        _ => {
            let mut request = gateway.codec(call.ingress).read_request(&call.body).ok()?;
            request.stream = false;
            request.model.clear();
            request.user = None;
            request.metadata.clear();
            serde_json::to_vec(&request).ok()?
        }
    };
    let mut hash = Sha256::new();
    hash.update(partition(gateway, call).as_bytes());
    hash.update([0]);
    hash.update(gateway.pools[pool].name.as_bytes());
    hash.update([0, call.operation as u8, 0]);
    hash.update(request);
    Some(hash.finalize().into())
}

/// An operation's cached reply for a caller that asked the same in
/// another protocol (or other bytes): written from its IR.
fn operation_reply(gateway: &Gateway, call: &Call, cached: &Cached) -> Option<crate::render::Whole> {
    match cached.operation.as_ref()? {
        OperationReply::Embed(response) => crate::embed::write_cached(gateway, call, response),
        OperationReply::Rerank(response) => crate::rerank::write_cached(gateway, call, response),
    }
}

/// A hit, in the caller's protocol (`written`: an operation's reply
/// written for this caller from its IR, in place of the reply as sent).
fn answer(
    gateway: &Gateway,
    call: &Call,
    cached: &Cached,
    lane: Option<usize>,
    written: Option<crate::render::Whole>,
) -> Response<ResponseBody> {
    let codec = gateway.codec(call.ingress);
    let lane = lane.and_then(|lane| gateway.lanes.get(lane));
    let mut builder = Response::builder().status(StatusCode::OK);
    if let Some(headers) = builder.headers_mut() {
        common_headers(headers, call);
        if let Some(lane) = lane {
            lane_headers(headers, &lane.lane_header, &lane.provider_header);
            headers.insert(X_SWITCHYARD_BILLING, HeaderValue::from_static(lane.billing.as_str()));
        }
        headers.insert(X_SWITCHYARD_CACHE, HeaderValue::from_static("hit"));
        let age = switchyard_state::clock::now_ms().saturating_sub(cached.stored_ms) / 1000;
        headers.insert(http::header::AGE, HeaderValue::from(age));
        let content_type = if call.stream { call.framing.content_type() } else { "application/json" };
        headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    let body = if let Some(written) = written {
        if let Some(headers) = builder.headers_mut() {
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            headers.extend(written.headers);
        }
        switchyard_transport::full_body(written.body)
    } else if let Some(whole) = &cached.whole {
        if let Some(headers) = builder.headers_mut() {
            headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            for (name, value) in &whole.headers {
                if let (Ok(name), Ok(value)) =
                    (HeaderName::try_from(name.as_str()), HeaderValue::try_from(value.as_str()))
                {
                    headers.insert(name, value);
                }
            }
        }
        switchyard_transport::full_body(Bytes::from(whole.body.clone()))
    } else if call.stream {
        let mut encoder = codec.stream_encoder_for(call.framing, &call.body);
        let events = cached.events.clone().unwrap_or_else(|| switchyard_ir::events_from_response(&cached.response));
        // One chunk per event, as the stream first came.
        let mut chunks: Vec<Result<http_body::Frame<Bytes>, switchyard_transport::BoxError>> = Vec::new();
        for event in &events {
            let mut out = Vec::new();
            encoder.encode(event, &mut out);
            if !out.is_empty() {
                chunks.push(Ok(http_body::Frame::data(Bytes::from(out))));
            }
        }
        let mut tail = Vec::new();
        encoder.finish(&mut tail);
        if !tail.is_empty() {
            chunks.push(Ok(http_body::Frame::data(Bytes::from(tail))));
        }
        http_body_util::BodyExt::boxed_unsync(http_body_util::StreamBody::new(futures_util::stream::iter(chunks)))
    } else {
        let written = cached.encoded[call.ingress.index()]
            .get_or_init(|| Bytes::from(codec.write_response(&cached.response).body))
            .clone();
        switchyard_transport::full_body(written)
    };
    builder.body(body).unwrap_or_else(|_| crate::render::internal_error())
}

/// Stores a whole reply served by `lane` under the call's key, when it
/// has one.
pub(crate) fn store_whole(gateway: &Gateway, call: &Call, lane: usize, response: switchyard_ir::Response) {
    let CacheState::Miss(key) = &call.cache else { return };
    let Some(pool) = gateway.resolve(&call.name) else { return };
    keep(gateway, key, &call.cache_material, pool, lane, response, None, None);
}

/// Stores an operation's reply (embeddings, rerank) as its caller got it,
/// with what it used.
pub(crate) fn store_operation(gateway: &Gateway, call: &Call, lane: usize, whole: &crate::render::Whole, usage: Usage) {
    let CacheState::Miss(key) = &call.cache else { return };
    let Some(pool) = gateway.resolve(&call.name) else { return };
    let headers = whole
        .headers
        .iter()
        .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
        .collect();
    let stored = StoredWhole { body: whole.body.to_vec(), headers };
    let response = switchyard_ir::Response { usage, ..switchyard_ir::Response::default() };
    // Read back to IR too, for callers of other protocols.
    let operation = match call.operation {
        switchyard_ir::Operation::Embed => crate::embed::read_back(gateway, call, whole).map(OperationReply::Embed),
        switchyard_ir::Operation::Rerank => crate::rerank::read_back(gateway, call, whole).map(OperationReply::Rerank),
        _ => None,
    };
    keep(gateway, key, &call.cache_material, pool, lane, response, None, Some((stored, operation)));
}

/// Stores a stream that ended whole, its events as they came.
pub(crate) fn store_stream(
    gateway: &Gateway,
    key: &CacheKeys,
    raw: &[u8],
    pool: usize,
    lane: usize,
    events: Vec<StreamEvent>,
) {
    let mut accumulator = switchyard_ir::Accumulator::new();
    for event in &events {
        accumulator.push(event);
    }
    keep(gateway, key, raw, pool, lane, accumulator.into_response(), Some(events), None);
}

/// Puts an answer in this instance's store, or (in a fleet) in Redis on a
/// task of its own: the caller never waits for it.
#[expect(clippy::too_many_arguments, reason = "an answer's every part")]
fn keep(
    gateway: &Gateway,
    keys: &CacheKeys,
    raw: &[u8],
    pool: usize,
    lane: usize,
    response: switchyard_ir::Response,
    events: Option<Vec<StreamEvent>>,
    whole: Option<(StoredWhole, Option<OperationReply>)>,
) {
    let (Some(store), Some(ttl), Some(name)) = (
        &gateway.response_cache,
        gateway.pools.get(pool).and_then(|p| p.cache_ttl),
        gateway.lanes.get(lane).map(|l| l.name.to_string()),
    ) else {
        return;
    };
    let cost = cost(gateway, lane, &response.usage);
    let cached = Cached {
        response,
        events,
        lane: name,
        cost,
        stored_ms: switchyard_state::clock::now_ms(),
        raw: raw.to_vec(),
        encoded: Default::default(),
        operation: whole.as_ref().and_then(|(_, operation)| operation.clone()),
        whole: whole.map(|(whole, _)| whole),
    };
    let mut under = vec![keys.ir];
    if keys.raw != keys.ir {
        under.push(keys.raw);
    }
    match &gateway.fleet_state {
        Some(fleet) => {
            let (fleet, under) = (fleet.clone(), under.iter().map(hex).collect::<Vec<_>>());
            if let (Ok(bytes), Ok(runtime)) = (serde_json::to_vec(&cached), tokio::runtime::Handle::try_current()) {
                runtime.spawn(async move {
                    for key in under {
                        if let Err(err) = fleet.cache_put(&key, bytes.clone(), ttl).await {
                            tracing::warn!(error = %err, "the response cache could not store an answer in redis");
                        }
                    }
                });
            }
        }
        None => store.put(&under, cached, ttl, Instant::now()),
    }
}

/// What `usage` cost at `lane`'s price: what a hit saves.
fn cost(gateway: &Gateway, lane: usize, usage: &Usage) -> u64 {
    let tokens = crate::settle::billed(usage, 0);
    gateway.lanes.get(lane).and_then(|l| l.price).map_or(0, |price| price.cost(&tokens))
}

fn count(gateway: &Gateway, pool: usize, outcome: CacheOutcome) {
    if let Some(metrics) = gateway.metrics() {
        metrics.cache(metrics.place(Some(pool), None), outcome);
    }
}

/// The `x-switchyard-cache` value of a call that was not a hit: `miss`
/// (stored when whole) or `bypass`; `None` outside a caching pool.
pub(crate) fn status(call: &Call) -> Option<HeaderValue> {
    match &call.cache {
        CacheState::Miss(_) => Some(HeaderValue::from_static("miss")),
        CacheState::Bypass => Some(HeaderValue::from_static("bypass")),
        CacheState::Hit => Some(HeaderValue::from_static("hit")),
        CacheState::Off => None,
    }
}

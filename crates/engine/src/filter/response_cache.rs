//! The response cache as a filter (`pools.<p>.cache: { ttl }`; the store's
//! bound and scope under the top-level `cache:`). A chat request is found
//! by its bytes, else by its IR normalised, in its pool and partition
//! (`key`): callers of any protocol share an entry, and no tenant reads
//! another's. A hit answers in place of the upstream, in the caller's
//! protocol (a stream replayed event by event, as it came), through the
//! filters before this one (the reply guardrails screen it for this
//! caller), costs nothing against budgets, and says `x-switchyard-cache:
//! hit` with its `Age`. A miss keeps the upstream's answer as it came
//! (before any reply policy: each caller's own is applied on its hit) when
//! it ends whole; a cut stream never is. `Cache-Control: no-cache` or
//! `no-store` bypasses, and so does a request whose values reversible
//! placeholders stand for (its reply is for it alone). A pool without
//! `cache` never builds this filter.
//!
//! Reads: the call, the record's serving lane and usage, the reply (before
//! the reply guardrails). Writes: the record's cache hit, the store, the
//! head's `x-switchyard-cache`.

mod hit;
mod key;

use std::sync::Arc;
use std::time::Instant;

use http::{HeaderMap, HeaderName, HeaderValue};
use switchyard_ir::{ErrorInfo, StreamEvent, Usage};
use switchyard_state::call::Call;
use switchyard_state::response_cache::{CacheKey, CacheKeys, Cached, OperationReply, StoredWhole};
use switchyard_state::Gateway;
use switchyard_telemetry::metrics::CacheOutcome;

use super::{Ended, Filter, FilterFuture, Flow, ReplyCx, RequestCx};
use crate::render::Whole;

/// `x-switchyard-cache`.
pub(crate) const X_SWITCHYARD_CACHE: HeaderName = HeaderName::from_static("x-switchyard-cache");

/// Where a request stands with its pool's response cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CacheState {
    /// The caller asked not to use it, or the request was refused or
    /// unreadable before its lookup.
    Bypass,
    /// Answered from it.
    Hit,
    /// Not found: the answer is stored under these keys when it ends whole.
    Miss(CacheKeys),
}

/// A request's response cache.
pub(crate) struct ResponseCache {
    gateway: Arc<Gateway>,
    pool: usize,
    state: CacheState,
    /// What the raw key was made of (kept with the answer).
    material: Vec<u8>,
    /// A stream's events as the upstream sent them.
    events: Vec<StreamEvent>,
}

impl ResponseCache {
    /// The cache of `pool`, when it caches and `call` may be cached.
    pub(crate) fn of(gateway: &Arc<Gateway>, call: &Call, pool: usize) -> Option<ResponseCache> {
        gateway.response_cache.as_ref()?;
        gateway.pools[pool].cache_ttl?;
        let _ = call;
        // Every reply of a caching pool says what the cache did: a request
        // refused before its lookup did not use it.
        Some(ResponseCache {
            gateway: gateway.clone(),
            pool,
            state: CacheState::Bypass,
            material: Vec::new(),
            events: Vec::new(),
        })
    }

    /// The cached answer for the call, if one is fresh. On a miss the
    /// filter keeps its key, for the answer to be stored under.
    async fn lookup(&mut self, cx: &mut RequestCx<'_>) -> Flow {
        let (gateway, call, pool) = (&*self.gateway, &*cx.call, self.pool);
        // Only an operation whose spec keys its requests keeps answers.
        if !crate::operation::of(call.operation).cached() {
            return Flow::Continue;
        }
        let bypass = call.headers.get_all(http::header::CACHE_CONTROL).iter().any(|value| {
            value
                .to_str()
                .is_ok_and(|v| v.to_ascii_lowercase().split(',').any(|d| matches!(d.trim(), "no-cache" | "no-store")))
        });
        // A request whose values were swapped for reversible placeholders
        // has a reply only it may read: another with other values behind
        // the same placeholders would be answered with this one's.
        if bypass || cx.marks.pseudonymised {
            count(cx.env, pool, CacheOutcome::Bypass);
            return Flow::Continue;
        }
        // The same bytes again are found without reading the request; the
        // same request in another protocol (or another spelling) by its IR.
        let material = key::raw_material(gateway, call, pool);
        let raw = key::raw_key(&material);
        // The raw key is a fast hash: its entry must hold these very bytes.
        let mut found = find(gateway, &raw).await.filter(|cached| cached.raw == material);
        let by_bytes = found.is_some();
        let mut ir = None;
        if found.is_none() {
            let Some(key) = key::key(gateway, call, pool) else {
                count(cx.env, pool, CacheOutcome::Bypass);
                return Flow::Continue;
            };
            found = find(gateway, &key).await;
            ir = Some(key);
        }
        // An operation's reply found by its IR is written for this caller
        // from the IR; one that cannot be (never read back) is no answer.
        let mut written = None;
        if let (Some(cached), false) = (&found, by_bytes) {
            if cached.whole.is_some() {
                written = hit::operation_reply(gateway, call, cached);
                if written.is_none() {
                    found = None;
                }
            }
        }
        let Some(cached) = found else {
            count(cx.env, pool, CacheOutcome::Miss);
            self.state = CacheState::Miss(CacheKeys { raw, ir: ir.unwrap_or(raw) });
            self.material = material;
            return Flow::Continue;
        };
        count(cx.env, pool, CacheOutcome::Hit);
        self.state = CacheState::Hit;
        if let Some(metrics) = cx.env.metrics() {
            metrics.cache_saved(metrics.place(Some(pool), None), cached.cost);
        }
        let lane = gateway.lanes.iter().position(|l| *l.name == *cached.lane);
        if let Some(lane) = lane {
            cx.record.cache_hit(pool, lane, cached.cost);
        }
        Flow::Answer(hit::answer(gateway, cx.call, &cached, lane, written, cx.env.now_ms()))
    }

    /// Keeps an answer when the request missed (in a fleet, in Redis on a
    /// task of its own: the caller never waits for it).
    fn keep(&self, lane: Option<usize>, response: switchyard_ir::Response, stored: Stored) {
        let CacheState::Miss(keys) = &self.state else { return };
        let gateway = &*self.gateway;
        let (Some(store), Some(ttl), Some(lane)) =
            (&gateway.response_cache, gateway.pools.get(self.pool).and_then(|p| p.cache_ttl), lane)
        else {
            return;
        };
        let Some(name) = gateway.lanes.get(lane).map(|l| l.name.to_string()) else { return };
        let cost = cost(gateway, lane, &response.usage);
        let (events, whole, operation) = match stored {
            Stored::Reply => (None, None, None),
            Stored::Stream(events) => (Some(events), None, None),
            Stored::Operation(whole, operation) => (None, Some(whole), operation),
        };
        let cached = Cached {
            response,
            events,
            lane: name,
            cost,
            stored_ms: switchyard_state::clock::now_ms(),
            raw: self.material.clone(),
            encoded: Default::default(),
            operation,
            whole,
        };
        // The request's bytes first: a fleet stores the answer once, there,
        // and a pointer under its read request's key.
        let mut under = vec![keys.raw];
        if keys.raw != keys.ir {
            under.push(keys.ir);
        }
        match &gateway.fleet_state {
            Some(fleet) => {
                let (fleet, under) = (fleet.clone(), under.iter().map(key::hex).collect::<Vec<_>>());
                let max_bytes = store.max_bytes() as u64;
                if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                    let bytes = cached.to_bytes();
                    switchyard_tasks::work_on(&runtime, async move {
                        if let Err(err) = fleet.cache_put(&under, bytes, ttl, max_bytes).await {
                            tracing::warn!(error = %err, "the response cache could not store an answer in redis");
                        }
                    });
                }
            }
            None => store.put(&under, cached, ttl, Instant::now()),
        }
    }
}

/// What an entry keeps besides the reply's IR.
enum Stored {
    /// A whole chat reply (its IR is all).
    Reply,
    /// A stream's events as they came.
    Stream(Vec<StreamEvent>),
    /// An operation's reply as its caller got it, and read back to IR.
    Operation(StoredWhole, Option<OperationReply>),
}

impl Filter for ResponseCache {
    fn name(&self) -> &'static str {
        "response_cache"
    }

    fn on_request<'a>(&'a mut self, cx: &'a mut RequestCx<'_>) -> Option<FilterFuture<'a, Flow>> {
        Some(Box::pin(self.lookup(cx)))
    }

    fn reads_events(&self) -> bool {
        matches!(self.state, CacheState::Miss(_))
    }

    fn on_head(&mut self, headers: &mut HeaderMap) {
        let status = match self.state {
            CacheState::Miss(_) => "miss",
            CacheState::Bypass => "bypass",
            CacheState::Hit => "hit",
        };
        headers.insert(X_SWITCHYARD_CACHE, HeaderValue::from_static(status));
    }

    fn on_events(&mut self, events: &mut Vec<StreamEvent>, _cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        if matches!(self.state, CacheState::Miss(_)) {
            self.events.extend(events.iter().cloned());
        }
        Ok(())
    }

    fn on_whole(&mut self, whole: &mut Whole, cx: &mut ReplyCx<'_>) -> Result<(), ErrorInfo> {
        if !matches!(self.state, CacheState::Miss(_)) {
            return Ok(());
        }
        let lane = cx.record.serving_lane();
        let call = cx.call;
        if call.operation.is_chat() {
            // Read back from the caller's own bytes: one reader for a
            // passthrough and a translation alike.
            if let Ok(response) = cx.env.codec_for(call.operation, call.ingress).read_response(&whole.body) {
                self.keep(lane, response, Stored::Reply);
            }
            return Ok(());
        }
        let headers = whole
            .headers
            .iter()
            .filter_map(|(name, value)| Some((name.as_str().to_owned(), value.to_str().ok()?.to_owned())))
            .collect();
        let stored = StoredWhole { body: whole.body.to_vec(), headers };
        let usage = cx.record.usage();
        let response = switchyard_ir::Response { usage, ..switchyard_ir::Response::default() };
        // Read back to IR too, for callers of other protocols.
        let gateway = &*self.gateway;
        let operation = match call.operation {
            switchyard_ir::Operation::Embed => {
                crate::operation::embed::read_back(gateway, call, whole).map(OperationReply::Embed)
            }
            switchyard_ir::Operation::Rerank => {
                crate::operation::rerank::read_back(gateway, call, whole).map(OperationReply::Rerank)
            }
            _ => None,
        };
        self.keep(lane, response, Stored::Operation(stored, operation));
        Ok(())
    }

    fn on_end<'a>(&'a mut self, ended: Ended, cx: &mut ReplyCx<'_>) -> Option<FilterFuture<'a, ()>> {
        // A stream that ended whole is kept; a cut or refused one never is.
        if ended != Ended::Whole || !matches!(self.state, CacheState::Miss(_)) {
            return None;
        }
        let events = std::mem::take(&mut self.events);
        let mut accumulator = switchyard_ir::Accumulator::new();
        for event in &events {
            accumulator.push(event);
        }
        self.keep(cx.record.serving_lane(), accumulator.into_response(), Stored::Stream(events));
        None
    }

    fn on_restart(&mut self, _part: &Usage) {}
}

/// The answer under `key`: in the fleet's Redis, or this instance's store.
async fn find(gateway: &Gateway, key: &CacheKey) -> Option<Arc<Cached>> {
    match &gateway.fleet_state {
        Some(fleet) => fleet.cache_get(&key::hex(key)).await.and_then(|bytes| Cached::from_bytes(&bytes)).map(Arc::new),
        None => gateway.response_cache.as_ref()?.get(key, Instant::now()),
    }
}

/// What `usage` cost at `lane`'s price: what a hit saves.
fn cost(gateway: &Gateway, lane: usize, usage: &Usage) -> u64 {
    let tokens = crate::settle::billed(usage, 0);
    gateway.lanes.get(lane).and_then(|l| l.price).map_or(0, |price| price.cost(&tokens))
}

fn count(env: crate::env::Env<'_>, pool: usize, outcome: CacheOutcome) {
    if let Some(metrics) = env.metrics() {
        metrics.cache(metrics.place(Some(pool), None), outcome);
    }
}

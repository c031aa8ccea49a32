//! The response cache's store: exact-match answers, each under a key that
//! already names its partition (the caller's key or group), its pool and
//! its normalised request (`engine::filter::response_cache` builds it). Bounded in
//! bytes, not entries: past `max_bytes` the least recently used answers go
//! first; each entry lives for its pool's `ttl`. In memory, one node; a
//! fleet keeps entries in Redis (`switchyard_fleet::cache`), each as
//! [`Cached::to_bytes`] writes it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use switchyard_ir::{Response, StreamEvent};

/// A cache key: a SHA-256 of the partition, the pool and the request.
pub type CacheKey = [u8; 32];

/// The two keys an answer is stored under: its request's bytes as they
/// came (found again without reading the request), and its request read to
/// IR (found from any protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheKeys {
    /// The partition, the pool, the caller's protocol and its body's bytes.
    pub raw: CacheKey,
    /// The partition, the pool and the normalised IR.
    pub ir: CacheKey,
}

/// One cached answer: the reply as IR (so a caller of any protocol can be
/// answered), the stream's events as they came when it was streamed, and
/// what it cost. A fleet's Redis keeps it as [`Cached::to_bytes`] writes
/// it: the bytes it holds (the request's, an operation's body) as bytes,
/// beside the rest as JSON.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct Cached {
    /// The whole reply.
    pub response: Response,
    /// A streamed answer's events, to replay its chunking.
    pub events: Option<Vec<StreamEvent>>,
    /// The lane that served it, by name (instances index lanes alike only
    /// when their configs agree).
    pub lane: String,
    /// What it cost when it was served (nano-USD): what a hit saves.
    pub cost: u64,
    /// When it was stored (Unix ms).
    pub stored_ms: u64,
    /// What its raw key was made of: a hit by that key is checked against
    /// it byte for byte (the raw key is a fast hash, not a digest).
    #[serde(skip)]
    pub raw: Vec<u8>,
    /// The whole reply as each protocol's caller gets it, written once.
    #[serde(skip)]
    pub encoded: [std::sync::OnceLock<bytes::Bytes>; 6],
    /// An operation's reply (embeddings, rerank) as its caller got it:
    /// answered as it is to the same bytes in the same protocol.
    #[serde(default)]
    pub whole: Option<StoredWhole>,
    /// The same reply read back to IR: written for a caller of any protocol
    /// that asks the same.
    #[serde(default)]
    pub operation: Option<OperationReply>,
}

/// An operation's reply as IR.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum OperationReply {
    /// Embeddings.
    Embed(switchyard_ir::EmbedResponse),
    /// A ranking.
    Rerank(switchyard_ir::RerankResponse),
}

/// An operation's reply kept as it was sent: its body and the headers the
/// operation added.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct StoredWhole {
    /// The body (kept as bytes beside the JSON, see [`Cached::to_bytes`]).
    #[serde(skip)]
    pub body: Vec<u8>,
    /// The headers it added (name, value).
    pub headers: Vec<(String, String)>,
}

/// The first bytes of a cached answer as a fleet keeps it.
const MAGIC: &[u8; 4] = b"SYC1";

impl Cached {
    /// The answer as a fleet keeps it: a tag, then its JSON (without the
    /// request's bytes and an operation's body), the request's bytes and the
    /// body, each after its length (4 bytes, little-endian). Bytes stay
    /// bytes (as JSON each was an array of numbers, four times its size).
    pub fn to_bytes(&self) -> Vec<u8> {
        let json = serde_json::to_vec(self).unwrap_or_default();
        let body: &[u8] = self.whole.as_ref().map_or(&[], |whole| &whole.body);
        let mut bytes = Vec::with_capacity(MAGIC.len() + 12 + json.len() + self.raw.len() + body.len());
        bytes.extend_from_slice(MAGIC);
        for part in [&json[..], &self.raw, body] {
            bytes.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_le_bytes());
            bytes.extend_from_slice(part);
        }
        bytes
    }

    /// An answer [`Cached::to_bytes`] wrote (`None`: anything else).
    pub fn from_bytes(bytes: &[u8]) -> Option<Cached> {
        let mut rest = bytes.strip_prefix(MAGIC)?;
        let mut part = || {
            let (length, after) = rest.split_first_chunk::<4>()?;
            let length = usize::try_from(u32::from_le_bytes(*length)).ok()?;
            let (part, after) = (after.get(..length)?, after.get(length..)?);
            rest = after;
            Some(part)
        };
        let (json, raw, body) = (part()?, part()?, part()?);
        let mut cached: Cached = serde_json::from_slice(json).ok()?;
        cached.raw = raw.to_vec();
        if let Some(whole) = cached.whole.as_mut() {
            whole.body = body.to_vec();
        }
        Some(cached)
    }

    /// Roughly the bytes it holds (what the cache's bound counts).
    pub fn size(&self) -> usize {
        let whole = self.whole.as_ref().map_or(0, |w| w.body.len())
            + self.operation.as_ref().map_or(0, |o| serde_json::to_vec(o).map_or(0, |v| v.len()));
        let text: usize = serde_json::to_vec(&self.response).map_or(0, |v| v.len()) + whole;
        // The reply, its events when streamed, a written copy or two, the request.
        text * if self.events.is_some() { 4 } else { 3 } + self.raw.len() + 256
    }
}

struct Entry {
    value: Arc<Cached>,
    expires: Instant,
    size: usize,
    /// Its place in the use order.
    used: u64,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<CacheKey, Entry>,
    /// Use order: tick → key (the first is the least recently used).
    order: BTreeMap<u64, CacheKey>,
    tick: u64,
    bytes: usize,
}

/// The bounded store.
pub struct ResponseCache {
    max_bytes: usize,
    inner: Mutex<Inner>,
}

impl ResponseCache {
    /// An empty store of at most `max_bytes`.
    pub fn new(max_bytes: usize) -> ResponseCache {
        ResponseCache { max_bytes, inner: Mutex::new(Inner::default()) }
    }

    /// The answer under `key`, fresh at `now`.
    pub fn get(&self, key: &CacheKey, now: Instant) -> Option<Arc<Cached>> {
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let expired = inner.entries.get(key).map(|e| e.expires <= now)?;
        if expired {
            inner.remove(key);
            return None;
        }
        inner.tick += 1;
        let tick = inner.tick;
        let entry = inner.entries.get_mut(key)?;
        let old = std::mem::replace(&mut entry.used, tick);
        let value = entry.value.clone();
        inner.order.remove(&old);
        inner.order.insert(tick, *key);
        Some(value)
    }

    /// Keeps `value` under each of `keys` for `ttl` from `now`, evicting the
    /// least recently used answers past the bound (an answer larger than
    /// the whole bound is not kept; each key counts its size).
    pub fn put(&self, keys: &[CacheKey], value: Cached, ttl: Duration, now: Instant) {
        let size = value.size();
        if size.saturating_mul(keys.len()) > self.max_bytes {
            return;
        }
        let value = Arc::new(value);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        for key in keys {
            inner.remove(key);
            while inner.bytes + size > self.max_bytes {
                let Some((_, oldest)) = inner.order.pop_first() else { break };
                inner.remove(&oldest);
            }
            inner.tick += 1;
            let used = inner.tick;
            inner.order.insert(used, *key);
            inner.bytes += size;
            inner.entries.insert(*key, Entry { value: value.clone(), expires: now + ttl, size, used });
        }
    }

    /// The bound, in bytes.
    pub fn max_bytes(&self) -> usize {
        self.max_bytes
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

impl Inner {
    fn remove(&mut self, key: &CacheKey) {
        if let Some(entry) = self.entries.remove(key) {
            self.order.remove(&entry.used);
            self.bytes -= entry.size;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(text: &str) -> Cached {
        let response = Response { content: vec![switchyard_ir::Block::text(text)], ..Response::default() };
        Cached {
            response,
            events: None,
            lane: "lane".to_owned(),
            cost: 0,
            stored_ms: 0,
            raw: Vec::new(),
            encoded: Default::default(),
            whole: None,
            operation: None,
        }
    }

    #[test]
    fn a_fleet_entry_keeps_bytes_as_bytes() {
        let mut cached = answer("the reply");
        cached.raw = vec![7u8; 100_000];
        cached.whole = Some(StoredWhole { body: b"{\"data\":[]}".to_vec(), headers: vec![("x-a".into(), "1".into())] });
        let bytes = cached.to_bytes();
        // The request's 100 kB once, not as JSON numbers (two bytes each and more).
        assert!(bytes.len() < 101_000, "{} bytes", bytes.len());
        let back = Cached::from_bytes(&bytes).unwrap();
        assert_eq!(back.raw, cached.raw);
        assert_eq!(back.whole.as_ref().unwrap().body, b"{\"data\":[]}");
        assert_eq!(back.whole.unwrap().headers, [("x-a".to_owned(), "1".to_owned())]);
        assert_eq!(back.response.content, cached.response.content);
        assert!(Cached::from_bytes(&bytes[..bytes.len() - 1]).is_none(), "cut short");
        assert!(Cached::from_bytes(b"{}").is_none());
    }

    #[test]
    fn entries_expire_and_the_least_recently_used_go_first() {
        let now = Instant::now();
        let one = answer("x").size();
        let cache = ResponseCache::new(one * 2);
        let ttl = Duration::from_secs(60);
        cache.put(&[[1; 32]], answer("x"), ttl, now);
        cache.put(&[[2; 32]], answer("y"), ttl, now);
        assert!(cache.get(&[1; 32], now).is_some(), "touching 1 makes 2 the oldest");
        cache.put(&[[3; 32]], answer("z"), ttl, now);
        assert!(cache.get(&[2; 32], now).is_none(), "evicted");
        assert!(cache.get(&[1; 32], now).is_some() && cache.get(&[3; 32], now).is_some());
        assert!(cache.bytes() <= one * 2);
        assert!(cache.get(&[1; 32], now + ttl).is_none(), "expired");
    }
}

//! The response cache of a fleet, in Redis: each answer stored once, under
//! the key of the request's bytes, and found from its read request's key
//! by a pointer; all entries together bounded by `cache.max_bytes` (an
//! index of entries by expiry and their sizes, kept by one script: the
//! expired ones are forgotten first, then the soonest to expire until the
//! new one fits; an answer larger than the bound is not kept).
//!
//! The scripts reach keys they find in the index and in pointers, beyond
//! those they are passed: a single Redis (or a replicated one), not a
//! cluster.

use std::time::Duration;

use redis::Script;

use crate::shared::FleetState;

/// Entries by the end of their life (ms), a sorted set.
const INDEX: &str = "switchyard:cache:index";
/// Each entry's size and the pointers to it (`size|pointer|...`).
const SIZES: &str = "switchyard:cache:sizes";
/// The bytes all entries hold.
const BYTES: &str = "switchyard:cache:bytes";

/// What a pointer and an entry's index line count beside the value.
const OVERHEAD: usize = 160;

/// An entry's value, or the value a pointer names (`@<key>`).
const GET_SCRIPT: &str = "local v = redis.call('GET', KEYS[1]) \
    if v and string.sub(v, 1, 1) == '@' then return redis.call('GET', string.sub(v, 2)) end return v";

/// Stores ARGV[4] under KEYS[4] and a pointer to it under KEYS[5..], for
/// ARGV[2] ms from ARGV[1], within ARGV[3] bytes (KEYS[1] the index,
/// KEYS[2] the sizes, KEYS[3] the total). Returns 1 stored, 0 too large.
const PUT_SCRIPT: &str = r"
local now, ttl, max = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local size = #ARGV[4] + tonumber(ARGV[5]) * (#KEYS - 3)
if size > max then
  return 0
end
local function forget(entry)
  local line = redis.call('HGET', KEYS[2], entry)
  if line then
    for pointer in string.gmatch(line, '|([^|]+)') do
      if redis.call('GET', pointer) == '@' .. entry then
        redis.call('DEL', pointer)
      end
    end
    redis.call('DECRBY', KEYS[3], tonumber(string.match(line, '^(%d+)')))
    redis.call('HDEL', KEYS[2], entry)
  end
  redis.call('DEL', entry)
  redis.call('ZREM', KEYS[1], entry)
end
for _, entry in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now)) do
  forget(entry)
end
forget(KEYS[4])
while tonumber(redis.call('GET', KEYS[3]) or 0) + size > max do
  local first = redis.call('ZRANGE', KEYS[1], 0, 0)[1]
  if not first then
    redis.call('SET', KEYS[3], 0)
    break
  end
  forget(first)
end
redis.call('SET', KEYS[4], ARGV[4], 'PX', ttl)
local line = tostring(size)
for i = 5, #KEYS do
  redis.call('SET', KEYS[i], '@' .. KEYS[4], 'PX', ttl)
  line = line .. '|' .. KEYS[i]
end
redis.call('HSET', KEYS[2], KEYS[4], line)
redis.call('ZADD', KEYS[1], now + ttl, KEYS[4])
redis.call('INCRBY', KEYS[3], size)
return 1
";

static GET: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(GET_SCRIPT));
static PUT: std::sync::LazyLock<Script> = std::sync::LazyLock::new(|| Script::new(PUT_SCRIPT));

/// Where an entry (or a pointer) under `key` (hex) is kept.
pub fn cache_key(key: &str) -> String {
    format!("switchyard:cache:{key}")
}

impl FleetState {
    /// The response cache's entry under `key` (hex), whether stored there
    /// or pointed to from there. A Redis that cannot answer is a miss.
    pub async fn cache_get(&self, key: &str) -> Option<Vec<u8>> {
        let mut redis = self.redis.clone();
        let mut get = GET.prepare_invoke();
        get.key(cache_key(key));
        get.invoke_async::<Option<Vec<u8>>>(&mut redis).await.ok().flatten()
    }

    /// Keeps `value` once, under the first of `keys` (hex), with a pointer
    /// to it under each other, for `ttl`, all entries together within
    /// `max_bytes`. `Ok(false)`: larger than the bound, not kept.
    pub async fn cache_put(
        &self,
        keys: &[String],
        value: Vec<u8>,
        ttl: Duration,
        max_bytes: u64,
    ) -> Result<bool, redis::RedisError> {
        let Some((entry, pointers)) = keys.split_first() else { return Ok(false) };
        let millis = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).clamp(1, i64::MAX as u64 / 2);
        let now =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        let mut put = PUT.prepare_invoke();
        put.key(INDEX).key(SIZES).key(BYTES).key(cache_key(entry));
        for pointer in pointers {
            put.key(cache_key(pointer));
        }
        put.arg(now).arg(millis).arg(max_bytes.min(i64::MAX as u64)).arg(value).arg(OVERHEAD);
        let mut redis = self.redis.clone();
        Ok(put.invoke_async::<i64>(&mut redis).await? == 1)
    }
}

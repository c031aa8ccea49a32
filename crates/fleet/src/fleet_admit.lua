-- Admission over a key's whole chain, atomically for the whole fleet: the
-- same rules as governance::admission::Governor::admit, on counters every
-- instance shares. One call per request (EVALSHA: one round trip).
--
-- KEYS[2i-1] bucket i's counters (key first, then its groups upward)
-- KEYS[2i]   bucket i's holds: a sorted set of `id|cost`, scored by the
--            end of their lease (ms)
-- ARGV[1]   now (ms)        ARGV[2] estimated cost (nano-USD)
-- ARGV[3]   estimated tokens
-- ARGV[4]   the end of the hold's lease (ms)
-- then 7 per bucket: budget cap (-1: none), window start (s), ms until the
-- next window (-1: never), rpm (0: none), tpm (0: none), concurrency cap
-- (0: none), spend to seed a bucket Redis has never seen (nano-USD)
-- and last, the hold's member (`id|cost`)
--
-- Every number is an integer the gateway bounded (estimate::MAX_REQUEST_*).
-- Returns {0} admitted, or {why, bucket index, retry ms (-1: none)} with
-- why = 1 budget, 2 requests per minute, 3 tokens per minute, 4 concurrency.
-- Bucket hash fields: ws (window start), spent, reserved, rtat, ttat,
-- inflight. Each bucket's are read in one HMGET and written in one HSET
-- (money, `reserved`, by HINCRBY: exact past 2^53): the script's time is
-- the fleet's admission latency and Redis's CPU per request.

local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local buckets = #KEYS / 2
local function arg(i, j)
  return tonumber(ARGV[4 + (i - 1) * 7 + j])
end

-- What dead instances held comes back first; then each bucket's fields.
local state = {}
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  reclaim(key, KEYS[2 * i], now)
  local f = redis.call('HMGET', key, 'ws', 'spent', 'reserved', 'rtat', 'ttat', 'inflight')
  state[i] = {
    ws = f[1], spent = tonumber(f[2] or 0), reserved = tonumber(f[3] or 0),
    rtat = tonumber(f[4] or 0), ttat = tonumber(f[5] or 0), inflight = tonumber(f[6] or 0),
  }
end

-- Budgets, anywhere on the chain.
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local s = state[i]
  local cap = arg(i, 1)
  if cap >= 0 then
    local ws = arg(i, 2)
    if not s.ws then
      local seed = ARGV[4 + (i - 1) * 7 + 7]
      redis.call('HSET', key, 'ws', int(ws), 'spent', seed)
      s.spent = tonumber(seed)
    elseif tonumber(s.ws) ~= ws then
      redis.call('HSET', key, 'ws', int(ws), 'spent', 0)
      s.spent = 0
    end
    local left = cap - s.spent - s.reserved
    if left < 0 then
      left = 0
    end
    if cost > left or left == 0 then
      return {1, i, arg(i, 3)}
    end
  end
end

-- Then rates and concurrency.
for i = 1, buckets do
  local s = state[i]
  local rpm = arg(i, 4)
  if rpm > 0 then
    local later = math.max(s.rtat, now) + PERIOD / rpm
    if later - now > PERIOD then
      return {2, i, math.ceil(later - now - PERIOD)}
    end
  end
  local tpm = arg(i, 5)
  if tpm > 0 then
    if tokens > tpm then
      return {3, i, -1}
    end
    local later = math.max(s.ttat, now) + tokens * PERIOD / tpm
    if later - now > PERIOD then
      return {3, i, math.ceil(later - now - PERIOD)}
    end
  end
  local cap = arg(i, 6)
  if cap > 0 and s.inflight >= cap then
    return {4, i, -1}
  end
end

-- Every bucket has room: hold the reservation on all of them, under a lease.
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local s = state[i]
  redis.call('HINCRBY', key, 'reserved', ARGV[2])
  local fields = {'inflight', int(s.inflight + 1)}
  local rpm = arg(i, 4)
  if rpm > 0 then
    local tat = math.max(s.rtat, now) + PERIOD / rpm
    fields[#fields + 1] = 'rtat'
    fields[#fields + 1] = string.format('%.3f', tat)
  end
  local tpm = arg(i, 5)
  if tpm > 0 then
    local tat = math.max(s.ttat, now) + tokens * PERIOD / tpm
    fields[#fields + 1] = 'ttat'
    fields[#fields + 1] = string.format('%.3f', tat)
  end
  redis.call('HSET', key, unpack(fields))
  redis.call('ZADD', KEYS[2 * i], ARGV[4], ARGV[#ARGV])
end
return {0}

-- Admission over a key's whole chain, atomically for the whole fleet: the
-- same rules as governance::admission::Governor::admit_with, on counters
-- every instance shares. One call per request (EVALSHA: one round trip).
--
-- KEYS[2i-1] bucket i's counters (key first, then its groups upward)
-- KEYS[2i]   bucket i's holds: a sorted set of `id|tokens|cost`, scored by
--            the end of their lease (ms)
-- ARGV[1]   now (ms)        ARGV[2] estimated cost (nano-USD)
-- ARGV[3]   estimated tokens
-- ARGV[4]   the end of the hold's lease (ms)
-- then per bucket 12: budget cap (-1: none), window start (s), ms until
-- the next window (-1: never), rpm (0: none), tpm (0: none), concurrency
-- cap (0: none), spend to seed a bucket Redis has never seen (nano-USD),
-- rps (0: none), tps (0: none), the spend from which a downgrade is
-- offered (-1: none), why before the budget is spent (2: past its share,
-- 3: forecast to run out), and its number of quotas; then 5 per quota:
-- its code (1 + metric * 3 + window), cap, window start (s), ms until the
-- next window, use to seed it with
-- and last, the hold's member (`id|tokens|cost`)
--
-- Every number is an integer the gateway bounded (estimate::MAX_REQUEST_*).
-- Returns {why, bucket index, retry ms (-1: none), detail, detail, seeded,
-- spent...}: why = 0 admitted (index 0), 1 budget (detail: the downgrade's
-- trigger, 0 none, 1 spent, 2 share, 3 forecast), 2 requests (detail: 0 a
-- minute, 1 a second), 3 tokens (likewise), 4 concurrency, 5 a quota
-- (details: its code and cap); seeded, the buckets (bit i-1 for bucket i)
-- this call found unknown to Redis and seeded; then each bucket's settled
-- spend in its window (-1: no budget, or not read before a refusal), which
-- the instance's own counters learn (what they admit on while Redis is
-- away).
-- Bucket hash fields: ws (window start), spent, reserved, rtat, ttat,
-- srtat, sttat (per second), inflight, and per quota q<code>ws, q<code>used,
-- q<code>held. Each bucket's are read in one HMGET and its rates written
-- in one HSET (money and quotas by HINCRBY: exact past 2^53): the
-- script's time is the fleet's admission latency and Redis's CPU per
-- request.

local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local buckets = #KEYS / 2

local seeded = 0
local spent = {}
for i = 1, buckets do
  spent[i] = -1
end
local function answer(why, index, retry, first, second)
  local reply = {why, index, retry, first or 0, second or 0, seeded}
  for i = 1, buckets do
    reply[6 + i] = spent[i]
  end
  return reply
end

-- Each bucket's arguments and fields.
local b = {}
local at = 5
local function nxt()
  local v = tonumber(ARGV[at])
  at = at + 1
  return v
end
for i = 1, buckets do
  local x = {}
  x.cap = nxt()
  x.ws = nxt()
  x.retry = nxt()
  x.rpm = nxt()
  x.tpm = nxt()
  x.conc = nxt()
  x.seed = ARGV[at]
  at = at + 1
  x.rps = nxt()
  x.tps = nxt()
  x.dg_from = nxt()
  x.dg_why = nxt()
  x.quotas = {}
  local fields = {'ws', 'spent', 'reserved', 'rtat', 'ttat', 'inflight', 'srtat', 'sttat'}
  for q = 1, nxt() do
    local quota = {}
    quota.code = nxt()
    quota.cap = nxt()
    quota.ws = nxt()
    quota.retry = nxt()
    quota.seed = ARGV[at]
    at = at + 1
    quota.f = 'q' .. quota.code
    x.quotas[q] = quota
    fields[#fields + 1] = quota.f .. 'ws'
    fields[#fields + 1] = quota.f .. 'used'
    fields[#fields + 1] = quota.f .. 'held'
  end
  b[i] = x
  local key = KEYS[2 * i - 1]
  -- What dead instances held comes back first.
  reclaim(key, KEYS[2 * i], now, x.quotas)
  local f = redis.call('HMGET', key, unpack(fields))
  x.has_ws = f[1]
  x.spent = tonumber(f[2] or 0)
  x.reserved = tonumber(f[3] or 0)
  x.rtat = tonumber(f[4] or 0)
  x.ttat = tonumber(f[5] or 0)
  x.inflight = tonumber(f[6] or 0)
  x.srtat = tonumber(f[7] or 0)
  x.sttat = tonumber(f[8] or 0)
  for q, quota in ipairs(x.quotas) do
    quota.has_ws = f[6 + 3 * q]
    quota.used = tonumber(f[7 + 3 * q] or 0)
    quota.held = tonumber(f[8 + 3 * q] or 0)
  end
end

-- Budgets, anywhere on the chain. One that refuses outright wins; then
-- one that cannot pay and downgrades; then one past its share.
local offer = nil
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local s = b[i]
  if s.cap >= 0 then
    if not s.has_ws then
      -- Never seen, or lost (a restart without persistence, an eviction):
      -- seeded from what the instance knows, and reported.
      redis.call('HSET', key, 'ws', int(s.ws), 'spent', s.seed)
      s.spent = tonumber(s.seed)
      seeded = seeded + 2 ^ (i - 1)
    elseif tonumber(s.has_ws) ~= s.ws then
      redis.call('HSET', key, 'ws', int(s.ws), 'spent', 0)
      s.spent = 0
    end
    spent[i] = s.spent
    local left = s.cap - s.spent - s.reserved
    if left < 0 then
      left = 0
    end
    local fits = cost <= left and left > 0
    local trigger = 0
    if s.dg_from >= 0 then
      if not fits then
        trigger = 1
      elseif s.spent + s.reserved >= s.dg_from then
        trigger = s.dg_why
      end
    end
    if not fits and trigger == 0 then
      return answer(1, i, s.retry, 0)
    end
    if trigger ~= 0 and (offer == nil or (trigger == 1 and offer[2] ~= 1)) then
      offer = {i, trigger}
    end
  end
end
if offer then
  return answer(1, offer[1], b[offer[1]].retry, offer[2])
end

-- Then rates, quotas and concurrency. (Plain calls, no tables or
-- closures made per request: the script's time is every admission's.)
local function amount(code)
  return quota_amount(code, tokens, cost)
end
-- Ms until `units` more fit a GCRA of `limit` a `period` whose next unit
-- is due at `tat` (0: room now; -1: never, more than the limit).
local function wait(limit, tat, units, period)
  if units > limit then
    return -1
  end
  local later = math.max(tat, now) + units * period / limit
  if later - now > period then
    return math.ceil(later - now - period)
  end
  return 0
end
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local s = b[i]
  if s.rps > 0 then
    local ms = wait(s.rps, s.srtat, 1, 1000)
    if ms ~= 0 then
      return answer(2, i, ms, 1)
    end
  end
  if s.rpm > 0 then
    local ms = wait(s.rpm, s.rtat, 1, PERIOD)
    if ms ~= 0 then
      return answer(2, i, ms, 0)
    end
  end
  if s.tps > 0 then
    local ms = wait(s.tps, s.sttat, tokens, 1000)
    if ms ~= 0 then
      return answer(3, i, ms, 1)
    end
  end
  if s.tpm > 0 then
    local ms = wait(s.tpm, s.ttat, tokens, PERIOD)
    if ms ~= 0 then
      return answer(3, i, ms, 0)
    end
  end
  for _, q in ipairs(s.quotas) do
    if not q.has_ws then
      redis.call('HSET', key, q.f .. 'ws', int(q.ws), q.f .. 'used', q.seed)
      q.used = tonumber(q.seed)
    elseif tonumber(q.has_ws) ~= q.ws then
      redis.call('HSET', key, q.f .. 'ws', int(q.ws), q.f .. 'used', 0)
      q.used = 0
    end
    local need = amount(q.code)
    if need > q.cap then
      return answer(5, i, -1, q.code, q.cap)
    end
    if q.used + q.held + need > q.cap then
      return answer(5, i, q.retry, q.code, q.cap)
    end
  end
  if s.conc > 0 and s.inflight >= s.conc then
    return answer(4, i, -1)
  end
end

-- Every bucket has room: hold the reservation on all of them, under a lease.
local function tat(fields, name, limit, current, units, period)
  if limit > 0 then
    fields[#fields + 1] = name
    fields[#fields + 1] = string.format('%.3f', math.max(current, now) + units * period / limit)
  end
end
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local s = b[i]
  redis.call('HINCRBY', key, 'reserved', ARGV[2])
  local fields = {'inflight', int(s.inflight + 1)}
  tat(fields, 'rtat', s.rpm, s.rtat, 1, PERIOD)
  tat(fields, 'ttat', s.tpm, s.ttat, tokens, PERIOD)
  tat(fields, 'srtat', s.rps, s.srtat, 1, 1000)
  tat(fields, 'sttat', s.tps, s.sttat, tokens, 1000)
  redis.call('HSET', key, unpack(fields))
  for _, q in ipairs(s.quotas) do
    redis.call('HINCRBY', key, q.f .. 'held', int(amount(q.code)))
  end
  redis.call('ZADD', KEYS[2 * i], ARGV[4], ARGV[#ARGV])
end
return answer(0, 0, -1)

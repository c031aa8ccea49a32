-- A lease of slices of a chain's budgets and rates, atomically for the
-- whole fleet (crates/governance/src/lease.rs is its arithmetic, mirrored
-- here: usd_slice, rate_slice, gcra_room). One call takes a lease, renews
-- it (moving what it spent into `spent` and topping its hold up) or
-- returns it (the hold keeps only what its requests in flight reserve,
-- and the unused rate units go back).
--
-- A lease is one hold per bucket, member `L<id>|0|<usd>` in the bucket's
-- holds, its USD in `reserved` and counted once in `inflight` and in
-- `leases` (the live leases a slice is divided between): a lease its
-- instance stopped renewing is reclaimed like any hold (the prelude).
--
-- KEYS[2i-1] bucket i's counters   KEYS[2i] bucket i's holds
-- ARGV[1]  now (ms)                ARGV[2] the lease's end (ms)
-- ARGV[3]  1 renew (or take) in the background, 2 return, 3 take or
--          renew for a request waiting on it (refused if it does not fit)
-- ARGV[4]  the USD that request needs
-- ARGV[5]  the tokens it needs     ARGV[6] the share (thousandths)
-- ARGV[7]  the most USD a slice holds
-- ARGV[8]  the most requests       ARGV[9] the most tokens
-- ARGV[10] the lease's id (hex)
-- then per bucket 11: budget cap (-1: none), window start (s), ms until
-- the next window (-1: never), rpm (0: none), tpm (0: none), spend to
-- seed a bucket Redis has never seen, the hold Redis has for this lease
-- (-1: none yet), spend settled since the last report, the hold to keep
-- (that hold less that spend), requests the lease has left, tokens it has
-- left (below zero: owed).
--
-- Every number is an integer the gateway bounded (fleet::SCRIPT_MAX).
-- Returns {why, bucket index, retry ms, 0, 0, seeded, spent...} as the
-- admission script does (why 0: granted; 1 budget, 2 requests, 3 tokens
-- refuse the waiting request, and nothing fresh is granted), then per
-- bucket 3: the fresh USD, requests and tokens granted.

local now = tonumber(ARGV[1])
local take = ARGV[3] ~= '2'
local waiting = ARGV[3] == '3'
local need_cost = tonumber(ARGV[4])
local need_tokens = tonumber(ARGV[5])
local share = tonumber(ARGV[6])
local max_usd = tonumber(ARGV[7])
local max_requests = tonumber(ARGV[8])
local max_tokens = tonumber(ARGV[9])
local buckets = #KEYS / 2

local seeded = 0
local b = {}
local at = 11
local function nxt()
  local v = tonumber(ARGV[at])
  at = at + 1
  return v
end
local function member(hold)
  return 'L' .. ARGV[10] .. '|0|' .. hold
end
-- `share` thousandths of `amount` divided between `live` leases.
local function share_of(amount, live)
  return math.floor(amount * share / 1000 / live)
end
-- Units of a GCRA of `limit` a minute due next at `tat` that fit now.
local function room(limit, tat)
  local busy = math.max(tat - now, 0)
  return math.floor(math.max(PERIOD - busy, 0) * limit / PERIOD)
end
-- Ms until `units` fit (-1: never, more than the limit).
local function wait(limit, tat, units)
  if units > limit then
    return -1
  end
  return math.max(math.ceil(math.max(tat, now) + units * PERIOD / limit - now - PERIOD), 1)
end

-- First, on every bucket: dead leases come back, this lease's hold is
-- taken off, what it spent is added to `spent`, what it owes its rates is
-- paid, and (returning) what it did not use goes back.
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local holds = KEYS[2 * i]
  local x = {}
  x.cap = nxt()
  x.ws = nxt()
  x.retry = nxt()
  x.rpm = nxt()
  x.tpm = nxt()
  x.seed = ARGV[at]
  at = at + 1
  x.held_arg = ARGV[at]
  x.held = nxt()
  x.spent_arg = ARGV[at]
  x.report = nxt()
  x.keep = nxt()
  x.requests = nxt()
  x.tokens = nxt()
  b[i] = x
  reclaim(key, holds, now, nil)
  if x.held >= 0 and redis.call('ZREM', holds, member(x.held_arg)) == 1 then
    lower(key, 'reserved', int(x.held))
    lower(key, 'inflight', 1)
    lower(key, 'leases', 1)
  end
  local f = redis.call('HMGET', key, 'ws', 'spent', 'reserved', 'rtat', 'ttat', 'leases')
  x.spent = tonumber(f[2] or 0)
  x.reserved = tonumber(f[3] or 0)
  x.rtat = tonumber(f[4] or 0)
  x.ttat = tonumber(f[5] or 0)
  x.leases = tonumber(f[6] or 0)
  if x.cap >= 0 then
    if not f[1] then
      redis.call('HSET', key, 'ws', int(x.ws), 'spent', x.seed)
      x.spent = tonumber(x.seed)
      seeded = seeded + 2 ^ (i - 1)
    elseif tonumber(f[1]) ~= x.ws then
      redis.call('HSET', key, 'ws', int(x.ws), 'spent', 0)
      x.spent = 0
    end
    if x.report > 0 then
      x.spent = redis.call('HINCRBY', key, 'spent', x.spent_arg)
    end
  else
    x.keep = 0
  end
  local rates = {}
  if x.rpm > 0 and not take and x.requests > 0 then
    x.rtat = math.max(x.rtat - x.requests * PERIOD / x.rpm, now - PERIOD, 0)
    rates[#rates + 1] = 'rtat'
    rates[#rates + 1] = string.format('%.3f', x.rtat)
  end
  if x.tpm > 0 and (x.tokens < 0 or (not take and x.tokens > 0)) then
    -- Owed tokens are taken whatever the room (they were used); unused
    -- ones go back on a return.
    x.ttat = math.max(math.max(x.ttat, now) - x.tokens * PERIOD / x.tpm, now - PERIOD, 0)
    rates[#rates + 1] = 'ttat'
    rates[#rates + 1] = string.format('%.3f', x.ttat)
  end
  if #rates > 0 then
    redis.call('HSET', key, unpack(rates))
  end
  x.fresh_usd = 0
  x.fresh_requests = 0
  x.fresh_tokens = 0
end

-- Then, taking: each bucket's fresh slice, or the waiting request's
-- refusal (and nothing fresh anywhere).
local why, index, retry = 0, 0, -1
if take then
  for i = 1, buckets do
    local x = b[i]
    local live = x.leases + 1
    if x.cap >= 0 then
      local left = math.max(x.cap - x.spent - x.reserved - x.keep, 0)
      if waiting and need_cost > left then
        why, index, retry = 1, i, x.retry
        break
      end
      local need = 0
      if waiting then
        need = need_cost
      end
      x.fresh_usd = math.min(math.max(math.min(share_of(left, live), max_usd), need), left)
    end
    if x.rpm > 0 then
      local have = math.max(x.requests, 0)
      local missing = 0
      if waiting then
        missing = math.max(1 - have, 0)
      end
      local available = room(x.rpm, x.rtat)
      if missing > available then
        why, index, retry = 2, i, wait(x.rpm, x.rtat, 1)
        break
      end
      local target = math.min(math.max(share_of(x.rpm, live), 1), max_requests)
      x.fresh_requests = math.min(math.max(target - have, missing), available)
    end
    if x.tpm > 0 then
      local have = math.max(x.tokens, 0)
      local missing = 0
      if waiting then
        missing = math.max(need_tokens - have, 0)
      end
      local available = room(x.tpm, x.ttat)
      if missing > available then
        why, index, retry = 3, i, wait(x.tpm, x.ttat, missing)
        break
      end
      local target = math.min(math.max(share_of(x.tpm, live), 1), max_tokens)
      x.fresh_tokens = math.min(math.max(target - have, missing), available)
    end
  end
  if why ~= 0 then
    for i = 1, buckets do
      b[i].fresh_usd = 0
      b[i].fresh_requests = 0
      b[i].fresh_tokens = 0
    end
  end
end

-- Last, the hold: what is kept plus the fresh slice, under the lease's
-- end (a return with nothing in flight holds nothing), and the fresh
-- rate units taken.
local reply = {why, index, retry, 0, 0, seeded}
for i = 1, buckets do
  local key = KEYS[2 * i - 1]
  local x = b[i]
  local hold = x.keep + x.fresh_usd
  if take or hold > 0 then
    redis.call('ZADD', KEYS[2 * i], ARGV[2], member(int(hold)))
    redis.call('HINCRBY', key, 'reserved', int(hold))
    redis.call('HINCRBY', key, 'inflight', 1)
    redis.call('HINCRBY', key, 'leases', 1)
  end
  local rates = {}
  if x.fresh_requests > 0 then
    rates[#rates + 1] = 'rtat'
    rates[#rates + 1] = string.format('%.3f', math.max(x.rtat, now) + x.fresh_requests * PERIOD / x.rpm)
  end
  if x.fresh_tokens > 0 then
    rates[#rates + 1] = 'ttat'
    rates[#rates + 1] = string.format('%.3f', math.max(x.ttat, now) + x.fresh_tokens * PERIOD / x.tpm)
  end
  if #rates > 0 then
    redis.call('HSET', key, unpack(rates))
  end
  if x.cap >= 0 then
    reply[6 + i] = x.spent
  else
    reply[6 + i] = -1
  end
  reply[6 + buckets + 3 * i - 2] = x.fresh_usd
  reply[6 + buckets + 3 * i - 1] = x.fresh_requests
  reply[6 + buckets + 3 * i] = x.fresh_tokens
end
return reply

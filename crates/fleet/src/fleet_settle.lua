-- Settlement of one request on the fleet's counters, atomically and once:
-- its reservation (when Redis holds one) is replaced by what it cost.
--
-- KEYS[1]    the settlement's marker (set once: a settlement sent again,
--            after a lost answer or in a retried batch, changes nothing)
-- KEYS[2i]   bucket i's counters     KEYS[2i+1] bucket i's holds
-- ARGV[1]   now (ms)            ARGV[2] reserved cost (nano-USD)
-- ARGV[3]   reserved tokens     ARGV[4] actual cost (nano-USD)
-- ARGV[5]   actual tokens       ARGV[6] how long the marker is kept (ms)
-- ARGV[7]   1 for a response-cache hit (no request to count), else 0
-- then per bucket 8: budget cap (-1: none), window start (s), tpm (0:
-- none), the rpm whose count gives this request back (0: none; a cache
-- hit), tps (0: none), the rps likewise, the spend to seed a bucket Redis
-- does not know (lost in a restart without persistence: a settlement kept
-- while it was away can come first), and its number of quotas; then 3 per
-- quota: its code, its current window's start (s) and the use to seed it
-- with likewise
-- and last, the hold's member (`id|tokens|cost`), or `-` when the request
-- was admitted on local counters while Redis was away (only its cost and
-- tokens are added now)
--
-- Returns 1 settled, 2 settled and a bucket seeded, 0 already settled.

if not redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[6]) then
  return 0
end
local now = tonumber(ARGV[1])
local reserved_cost = tonumber(ARGV[2])
local reserved_tokens = tonumber(ARGV[3])
local actual_cost = tonumber(ARGV[4])
local actual_tokens = tonumber(ARGV[5])
local member = ARGV[#ARGV]
local buckets = (#KEYS - 1) / 2
local hit = ARGV[7] == '1'
local settled = 1
local at = 8
local function nxt()
  local v = tonumber(ARGV[at])
  at = at + 1
  return v
end

-- Each bucket's fields are read in one HMGET and written in one HSET
-- (money, `spent` and `reserved`, and quotas by HINCRBY: exact past 2^53).
for i = 1, buckets do
  local key = KEYS[2 * i]
  local cap = nxt()
  local ws = nxt()
  local tpm = nxt()
  local refund_rpm = nxt()
  local tps = nxt()
  local refund_rps = nxt()
  local seed = nxt()
  local quotas = {}
  local names = {'ws', 'inflight', 'ttat', 'rtat', 'sttat', 'srtat'}
  for q = 1, nxt() do
    local quota = {}
    quota.code = nxt()
    quota.ws = nxt()
    quota.seed = nxt()
    quota.f = 'q' .. quota.code
    quotas[q] = quota
    names[#names + 1] = quota.f .. 'ws'
  end
  -- A hold whose lease ran out was already given back by a reclaim.
  local held = member ~= '-' and redis.call('ZREM', KEYS[2 * i + 1], member) == 1
  if held then
    lower(key, 'reserved', reserved_cost)
  end
  local f = redis.call('HMGET', key, unpack(names))
  local fields = {}
  local function put(name, value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if held then
    put('inflight', int(math.max(tonumber(f[2] or 0) - 1, 0)))
  end
  if cap >= 0 then
    if not f[1] then
      -- Unknown to Redis: seeded, then this cost added.
      put('ws', int(ws))
      put('spent', int(seed + actual_cost))
      settled = 2
    elseif tonumber(f[1]) ~= ws then
      -- A new window: this cost is its first spend.
      put('ws', int(ws))
      put('spent', ARGV[4])
    else
      redis.call('HINCRBY', key, 'spent', ARGV[4])
    end
  end
  local function tokens_back(name, limit, current, period)
    if limit > 0 then
      local delta = actual_tokens
      if member ~= '-' then
        delta = actual_tokens - reserved_tokens
      end
      local tat = math.max(tonumber(current or 0) + delta * period / limit, now - period, 0)
      put(name, string.format('%.3f', tat))
    end
  end
  tokens_back('ttat', tpm, f[3], PERIOD)
  tokens_back('sttat', tps, f[5], 1000)
  local function request_back(name, limit, current, period)
    if limit > 0 then
      local tat = math.max(tonumber(current or 0) - period / limit, now - period, 0)
      put(name, string.format('%.3f', tat))
    end
  end
  request_back('rtat', refund_rpm, f[4], PERIOD)
  request_back('srtat', refund_rps, f[6], 1000)
  for q, quota in ipairs(quotas) do
    if held then
      lower(key, quota.f .. 'held', int(quota_amount(quota.code, reserved_tokens, reserved_cost)))
    end
    local used = quota_amount(quota.code, actual_tokens, actual_cost)
    if quota.code <= 3 and hit then
      -- A cache hit is no request.
      used = 0
    end
    local seen = f[6 + q]
    if not seen then
      put(quota.f .. 'ws', int(quota.ws))
      put(quota.f .. 'used', int(quota.seed + used))
      settled = 2
    elseif tonumber(seen) ~= quota.ws then
      put(quota.f .. 'ws', int(quota.ws))
      put(quota.f .. 'used', int(used))
    else
      redis.call('HINCRBY', key, quota.f .. 'used', int(used))
    end
  end
  if #fields > 0 then
    redis.call('HSET', key, unpack(fields))
  end
end
return settled

-- Settlement of one request on the fleet's counters, atomically and once:
-- its reservation (when Redis holds one) is replaced by what it cost.
--
-- KEYS[1]    the settlement's marker (set once: a settlement sent again,
--            after a lost answer or in a retried batch, changes nothing)
-- KEYS[2i]   bucket i's counters     KEYS[2i+1] bucket i's holds
-- ARGV[1]   now (ms)            ARGV[2] reserved cost (nano-USD)
-- ARGV[3]   reserved tokens     ARGV[4] actual cost (nano-USD)
-- ARGV[5]   actual tokens       ARGV[6] how long the marker is kept (ms)
-- then 4 per bucket: budget cap (-1: none), window start (s), tpm (0: none),
-- and the rpm whose count gives this request back (0: none; a cache hit)
-- and last, the hold's member (`id|cost`), or `-` when the request was
-- admitted on local counters while Redis was away (only its cost and
-- tokens are added now)
--
-- Returns 1 settled, 0 already settled.

if not redis.call('SET', KEYS[1], 1, 'NX', 'PX', ARGV[6]) then
  return 0
end
local now = tonumber(ARGV[1])
local reserved_cost = tonumber(ARGV[2])
local reserved_tokens = tonumber(ARGV[3])
local actual_tokens = tonumber(ARGV[5])
local member = ARGV[#ARGV]
local buckets = (#KEYS - 1) / 2
local function arg(i, j)
  return tonumber(ARGV[6 + (i - 1) * 4 + j])
end

-- Each bucket's fields are read in one HMGET and written in one HSET
-- (money, `spent` and `reserved`, by HINCRBY: exact past 2^53).
for i = 1, buckets do
  local key = KEYS[2 * i]
  -- A hold whose lease ran out was already given back by a reclaim.
  local held = member ~= '-' and redis.call('ZREM', KEYS[2 * i + 1], member) == 1
  if held then
    lower(key, 'reserved', reserved_cost)
  end
  local f = redis.call('HMGET', key, 'ws', 'inflight', 'ttat', 'rtat')
  local fields = {}
  local function put(name, value)
    fields[#fields + 1] = name
    fields[#fields + 1] = value
  end
  if held then
    put('inflight', int(math.max(tonumber(f[2] or 0) - 1, 0)))
  end
  if arg(i, 1) >= 0 then
    local ws = arg(i, 2)
    if not f[1] or tonumber(f[1]) ~= ws then
      -- A new window: this cost is its first spend.
      put('ws', int(ws))
      put('spent', ARGV[4])
    else
      redis.call('HINCRBY', key, 'spent', ARGV[4])
    end
  end
  local tpm = arg(i, 3)
  if tpm > 0 then
    local delta = actual_tokens
    if member ~= '-' then
      delta = actual_tokens - reserved_tokens
    end
    local tat = tonumber(f[3] or 0) + delta * PERIOD / tpm
    tat = math.max(tat, now - PERIOD, 0)
    put('ttat', string.format('%.3f', tat))
  end
  local refund_rpm = arg(i, 4)
  if refund_rpm > 0 then
    local tat = math.max(tonumber(f[4] or 0) - PERIOD / refund_rpm, now - PERIOD, 0)
    put('rtat', string.format('%.3f', tat))
  end
  if #fields > 0 then
    redis.call('HSET', key, unpack(fields))
  end
end
return 1

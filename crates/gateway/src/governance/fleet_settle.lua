-- Settlement of one request on the fleet's counters, atomically: its
-- reservation (when Redis holds one) is replaced by what it cost.
--
-- KEYS[i]   the chain's bucket hashes
-- ARGV[1]   now (ms)            ARGV[2] reserved cost (nano-USD)
-- ARGV[3]   reserved tokens     ARGV[4] actual cost (nano-USD)
-- ARGV[5]   actual tokens       ARGV[6] 1: Redis holds the reservation;
--           0: the request was admitted on local counters while Redis was
--           away, and only its cost and tokens are added now
-- then 3 per bucket: budget cap (-1: none), window start (s), tpm (0: none)

local now = tonumber(ARGV[1])
local reserved_cost = tonumber(ARGV[2])
local reserved_tokens = tonumber(ARGV[3])
local actual_cost = tonumber(ARGV[4])
local actual_tokens = tonumber(ARGV[5])
local held = ARGV[6] == '1'
local function arg(i, j)
  return tonumber(ARGV[6 + (i - 1) * 3 + j])
end

for i = 1, #KEYS do
  if held then
    redis.call('HSET', KEYS[i], 'reserved', math.max(field(KEYS[i], 'reserved') - reserved_cost, 0))
    redis.call('HSET', KEYS[i], 'inflight', math.max(field(KEYS[i], 'inflight') - 1, 0))
  end
  if arg(i, 1) >= 0 then
    local ws = arg(i, 2)
    local stored = redis.call('HGET', KEYS[i], 'ws')
    if not stored or tonumber(stored) ~= ws then
      redis.call('HSET', KEYS[i], 'ws', ws, 'spent', 0)
    end
    redis.call('HINCRBY', KEYS[i], 'spent', actual_cost)
  end
  local tpm = arg(i, 3)
  if tpm > 0 then
    local delta = actual_tokens
    if held then
      delta = actual_tokens - reserved_tokens
    end
    local tat = field(KEYS[i], 'ttat') + delta * PERIOD / tpm
    tat = math.max(tat, now - PERIOD, 0)
    redis.call('HSET', KEYS[i], 'ttat', string.format('%.3f', tat))
  end
end
return 1

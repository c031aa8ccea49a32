-- Admission over a key's whole chain, atomically for the whole fleet: the
-- same rules as governance::admission::Governor::admit, on counters every
-- instance shares. One call per request (EVALSHA: one round trip).
--
-- KEYS[i]   the chain's bucket hashes, key first, then its groups upward
-- ARGV[1]   now (ms)        ARGV[2] estimated cost (nano-USD)
-- ARGV[3]   estimated tokens
-- then 7 per bucket: budget cap (-1: none), window start (s), ms until the
-- next window (-1: never), rpm (0: none), tpm (0: none), concurrency cap
-- (0: none), spend to seed a bucket Redis has never seen (nano-USD)
--
-- Returns {0} admitted, or {why, bucket index, retry ms (-1: none)} with
-- why = 1 budget, 2 requests per minute, 3 tokens per minute, 4 concurrency.
-- Bucket hash fields: ws (window start), spent, reserved, rtat, ttat,
-- inflight.

local now = tonumber(ARGV[1])
local cost = tonumber(ARGV[2])
local tokens = tonumber(ARGV[3])
local function arg(i, j)
  return tonumber(ARGV[3 + (i - 1) * 7 + j])
end

-- Budgets first, anywhere on the chain.
for i = 1, #KEYS do
  local cap = arg(i, 1)
  if cap >= 0 then
    local ws = arg(i, 2)
    local stored = redis.call('HGET', KEYS[i], 'ws')
    if not stored then
      redis.call('HSET', KEYS[i], 'ws', ws, 'spent', arg(i, 7))
    elseif tonumber(stored) ~= ws then
      redis.call('HSET', KEYS[i], 'ws', ws, 'spent', 0)
    end
    local left = cap - field(KEYS[i], 'spent') - field(KEYS[i], 'reserved')
    if left < 0 then
      left = 0
    end
    if cost > left or left == 0 then
      return {1, i, arg(i, 3)}
    end
  end
end

-- Then rates and concurrency.
for i = 1, #KEYS do
  local rpm = arg(i, 4)
  if rpm > 0 then
    local later = math.max(field(KEYS[i], 'rtat'), now) + PERIOD / rpm
    if later - now > PERIOD then
      return {2, i, math.ceil(later - now - PERIOD)}
    end
  end
  local tpm = arg(i, 5)
  if tpm > 0 then
    if tokens > tpm then
      return {3, i, -1}
    end
    local later = math.max(field(KEYS[i], 'ttat'), now) + tokens * PERIOD / tpm
    if later - now > PERIOD then
      return {3, i, math.ceil(later - now - PERIOD)}
    end
  end
  local cap = arg(i, 6)
  if cap > 0 and field(KEYS[i], 'inflight') >= cap then
    return {4, i, -1}
  end
end

-- Every bucket has room: hold the reservation on all of them.
for i = 1, #KEYS do
  redis.call('HINCRBY', KEYS[i], 'reserved', cost)
  redis.call('HINCRBY', KEYS[i], 'inflight', 1)
  local rpm = arg(i, 4)
  if rpm > 0 then
    local tat = math.max(field(KEYS[i], 'rtat'), now) + PERIOD / rpm
    redis.call('HSET', KEYS[i], 'rtat', string.format('%.3f', tat))
  end
  local tpm = arg(i, 5)
  if tpm > 0 then
    local tat = math.max(field(KEYS[i], 'ttat'), now) + tokens * PERIOD / tpm
    redis.call('HSET', KEYS[i], 'ttat', string.format('%.3f', tat))
  end
end
return {0}

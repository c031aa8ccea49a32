-- Settlement of one call on an agent run (governance::run::Run::settle on
-- the fleet's hash): its reservation is replaced by what it cost, and a
-- run past its spend or tokens is stopped for the next call.
--
-- KEYS[1] the run's hash
-- ARGV[1] now (ms)   ARGV[2] reserved   ARGV[3] cost (nano-USD)
-- ARGV[4] tokens   ARGV[5] time to live (ms)   ARGV[6] usd cap
-- ARGV[7] tokens cap (-1 when unset)
--
-- Returns 1 settled, 0 when the hash expired meanwhile (nothing to settle).

if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local function lower(name, by)
  if redis.call('HINCRBY', KEYS[1], name, -by) < 0 then
    redis.call('HSET', KEYS[1], name, 0)
  end
end
lower('reserved', ARGV[2])
lower('inflight', 1)
local spent = redis.call('HINCRBY', KEYS[1], 'spent', ARGV[3])
local tokens = redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[4])
local fields = {'last', ARGV[1]}
local state = redis.call('HGET', KEYS[1], 'state')
if not state or state == '' then
  local usd, cap = tonumber(ARGV[6]), tonumber(ARGV[7])
  if usd >= 0 and spent >= usd then
    fields[3], fields[4] = 'state', 'usd'
  elseif cap >= 0 and tokens >= cap then
    fields[3], fields[4] = 'state', 'tokens'
  end
end
redis.call('HSET', KEYS[1], unpack(fields))
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return 1

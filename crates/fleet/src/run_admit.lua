-- Admission of one call on an agent run, atomically for the whole fleet:
-- the same rules as governance::run::Run::admit, on a hash every instance
-- shares. One call per request (one round trip).
--
-- KEYS[1] the run's hash   KEYS[2] the runs' index (a sorted set of hash
--                           names scored by when each was last seen, ms)
-- ARGV[1] now (ms)   ARGV[2] kind (0 model, 1 tool)   ARGV[3] reservation
-- (nano-USD)   ARGV[4] the hash's time to live (ms)   ARGV[5..9] the caps
-- usd, calls, tool_calls, tokens, wall (ms), -1 when unset
-- ARGV[10] the run's group   ARGV[11] its limits (JSON, for listing)
--
-- Returns '' admitted, else the state that stops the run.
-- Hash fields: started, last, spent, reserved, tokens, calls, tools,
-- inflight, state, group, limits.

local now = tonumber(ARGV[1])
local tool = ARGV[2] == '1'
local reserve = tonumber(ARGV[3])
local usd, calls, tools, tokens, wall =
  tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])
local f = redis.call('HMGET', KEYS[1], 'started', 'spent', 'reserved', 'tokens', 'calls', 'tools', 'state')
local started = tonumber(f[1] or now)
local function keep(state)
  local fields = {'last', ARGV[1], 'group', ARGV[10], 'limits', ARGV[11]}
  if not f[1] then
    fields[#fields + 1] = 'started'
    fields[#fields + 1] = ARGV[1]
  end
  if state then
    fields[#fields + 1] = 'state'
    fields[#fields + 1] = state
  end
  redis.call('HSET', KEYS[1], unpack(fields))
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  redis.call('ZADD', KEYS[2], now, KEYS[1])
  -- The index forgets runs whose hash has surely expired.
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[4]))
end
-- A stopped run stays stopped.
if f[7] and f[7] ~= '' then
  keep(nil)
  return f[7]
end
local spent = tonumber(f[2] or 0)
local held = tonumber(f[3] or 0)
local reached = nil
if wall >= 0 and now - started >= wall then
  reached = 'wall'
elseif usd >= 0 and (spent + held + reserve > usd or spent >= usd) then
  -- As a budget: the call's worst case must fit beside what is spent and
  -- held by calls in flight on every instance.
  reached = 'usd'
elseif tokens >= 0 and tonumber(f[4] or 0) >= tokens then
  reached = 'tokens'
elseif not tool and calls >= 0 and tonumber(f[5] or 0) >= calls then
  reached = 'calls'
elseif tool and tools >= 0 and tonumber(f[6] or 0) >= tools then
  reached = 'tool_calls'
end
if reached then
  keep(reached)
  return reached
end
if tool then
  redis.call('HINCRBY', KEYS[1], 'tools', 1)
else
  redis.call('HINCRBY', KEYS[1], 'calls', 1)
end
redis.call('HINCRBY', KEYS[1], 'reserved', ARGV[3])
redis.call('HINCRBY', KEYS[1], 'inflight', 1)
keep(nil)
return ''

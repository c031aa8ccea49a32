-- Prepended to both fleet scripts: the GCRA period (ms) and a bucket hash
-- field read as a number (0 when absent).
local PERIOD = 60000
local function field(key, name)
  return tonumber(redis.call('HGET', key, name) or 0)
end


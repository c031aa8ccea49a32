-- Prepended to the fleet's admission, settlement and lease scripts: the GCRA period (ms) and an integer
-- written so Redis reads it back as one (Lua prints numbers of 10^14 and
-- more with an exponent, which HINCRBY refuses). The scripts read a
-- bucket's fields with one HMGET each.
local PERIOD = 60000
local function int(n)
  return string.format('%d', n)
end
-- Lowers a counter by `by`, never below zero. (Lowering by nothing is
-- skipped: Lua writes minus zero as `-0`, which HINCRBY refuses.)
local function lower(key, name, by)
  if tonumber(by) == 0 then
    return
  end
  if redis.call('HINCRBY', key, name, -by) < 0 then
    redis.call('HSET', key, name, 0)
  end
end
-- What a request holding `tokens` and `cost` holds of quota `code`
-- (1 + metric * 3 + window; metric 0 requests, 1 tokens, 2 USD).
local function quota_amount(code, tokens, cost)
  local metric = math.floor((code - 1) / 3)
  if metric == 0 then
    return 1
  elseif metric == 1 then
    return tokens
  end
  return cost
end
-- Gives back the holds of `holds` whose lease ran out before `now` (their
-- instance stopped renewing them: it died): each member is
-- `id|tokens|cost` (`id|cost` from before quotas), and what it held of
-- each of `quotas` ({code = ...}) comes back too.
local function reclaim(bucket, holds, now, quotas)
  local expired = redis.call('ZRANGEBYSCORE', holds, '-inf', now)
  for _, member in ipairs(expired) do
    local cost = tonumber(string.match(member, '|(%d+)$') or 0)
    local tokens = tonumber(string.match(member, '|(%d+)|%d+$') or 0)
    lower(bucket, 'reserved', cost)
    lower(bucket, 'inflight', 1)
    -- A lease (`L<id>|0|<usd>`, fleet_lease.lua) is one live lease less.
    if string.sub(member, 1, 1) == 'L' then
      lower(bucket, 'leases', 1)
    end
    for _, q in ipairs(quotas or {}) do
      lower(bucket, 'q' .. q.code .. 'held', int(quota_amount(q.code, tokens, cost)))
    end
  end
  if #expired > 0 then
    redis.call('ZREMRANGEBYSCORE', holds, '-inf', now)
  end
end

-- wrk script: POST a fixed JSON body and write a JSON summary.
--
-- wrk runs the top level of this file in every thread state and in the main
-- state, but passes command-line arguments only to the threads' init(), so
-- everything comes from the environment instead:
--   BENCH_BODY  file holding the request body (sent with content-type json)
--   BENCH_OUT   file the JSON summary is written to by done()
--   BENCH_HEADERS  optional extra headers, "name: value" separated by "\n"

local function read_file(path)
  local f = assert(io.open(path, "rb"), "cannot open " .. tostring(path))
  local data = f:read("*a")
  f:close()
  return data
end

wrk.method = "POST"
wrk.body = read_file(os.getenv("BENCH_BODY"))
wrk.headers["Content-Type"] = "application/json"
local extra = os.getenv("BENCH_HEADERS")
if extra and extra ~= "" then
  for line in extra:gmatch("[^\n]+") do
    local name, value = line:match("^([^:]+):%s*(.*)$")
    if name then wrk.headers[name] = value end
  end
end

function done(summary, latency, requests)
  local out = assert(io.open(os.getenv("BENCH_OUT"), "w"))
  local e = summary.errors
  local p = {}
  for _, q in ipairs({ 50, 90, 99, 99.9 }) do
    p[#p + 1] = string.format('"%s": %d', tostring(q), latency:percentile(q))
  end
  out:write(string.format(
    '{"requests": %d, "duration_us": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"mean": %.2f, "stdev": %.2f, "min": %d, "max": %d, "percentiles": {%s}}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency.stdev, latency.min, latency.max, table.concat(p, ", ")))
  out:close()
end

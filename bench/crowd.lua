-- wrk's script for bench.crowd: every request one stateless `tools/call get_wagers` (protocol
-- 2025-11-25, no initialize: each POST stands alone, as Cloud Run's traffic arrives), the member's
-- bearer in Authorization. Each answer is checked: HTTP 200 with a JSON-RPC result that is not a
-- tool error counts as answered, anything else as failed. At the end one JSON line on stdout,
-- prefixed "crowd-json ", carries the counts and the latency percentiles (microseconds).
--
--   CROWD_TOKEN=fw1.… wrk -c 1000 -d 10s --latency -s bench/crowd.lua http://127.0.0.1:PORT/mcp
--   CROWD_METHOD=GET wrk … -s bench/crowd.lua http://127.0.0.1:PORT/v1/member/wagers   (the double alone)

local ffi = require("ffi")  -- LuaJIT's: the wall clock, to count the answers inside the measured window
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } crowd_timespec;
int clock_gettime(int clk, crowd_timespec *ts);
]]
local timespec = ffi.new("crowd_timespec")
local function now()
  ffi.C.clock_gettime(0, timespec)  -- CLOCK_REALTIME: the harness names the window in time.time()
  return tonumber(timespec.tv_sec) + tonumber(timespec.tv_nsec) * 1e-9
end

local method = os.getenv("CROWD_METHOD") or "POST"
-- CROWD_WINDOW="FROM TO" (seconds since the epoch): answers that arrive in it are counted apart,
-- so that a run's first seconds (the crowd connecting, the first burst) are load, not measurement.
local window_from, window_to = (os.getenv("CROWD_WINDOW") or ""):match("^(%S+) (%S+)$")
window_from, window_to = tonumber(window_from) or 0, tonumber(window_to) or math.huge
local token = os.getenv("CROWD_TOKEN") or ""
local threads = {}

if method == "POST" then
  wrk.method = "POST"
  wrk.body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_wagers","arguments":{}}}'
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Accept"] = "application/json, text/event-stream"
  wrk.headers["MCP-Protocol-Version"] = "2025-11-25"
else
  wrk.method = "GET"
  wrk.headers["Accept"] = "application/json"
end
if token ~= "" then
  wrk.headers["Authorization"] = "Bearer " .. token
end

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  answered = 0
  failed = 0
  in_window = 0
  first_failure = ""
end

function response(status, headers, body)
  local good = status == 200
  if good and method == "POST" then
    good = body:find('"result"', 1, true) ~= nil and body:find('"isError"%s*:%s*true') == nil
  end
  if good then
    answered = answered + 1
    local t = now()
    if t >= window_from and t < window_to then
      in_window = in_window + 1
    end
  else
    failed = failed + 1
    if first_failure == "" then
      first_failure = tostring(status) .. " " .. string.sub(body or "", 1, 200)
    end
  end
end

local function quote(text)
  return '"' .. text:gsub('[%c"\\]', function(c) return string.format("\\u%04x", c:byte()) end) .. '"'
end

function done(summary, latency, requests)
  local ok, bad, sample, windowed = 0, 0, "", 0
  for _, thread in ipairs(threads) do
    ok = ok + thread:get("answered")
    bad = bad + thread:get("failed")
    windowed = windowed + thread:get("in_window")
    if sample == "" then sample = thread:get("first_failure") end
  end
  local e = summary.errors
  io.write(string.format(
    'crowd-json {"requests":%d,"duration_us":%d,"bytes":%d,"answered":%d,"in_window":%d,"failed":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f,"first_failure":%s}\n',
    summary.requests, summary.duration, summary.bytes, ok, windowed, bad,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean, quote(sample)))
end

-- wrk's script for bench.crowd: every request one stateless `tools/call get_wagers` (protocol
-- 2025-11-25, no initialize: each POST stands alone, as Cloud Run's traffic arrives), the member's
-- bearer in Authorization. Each answer is checked: HTTP 200 with a JSON-RPC result that is not a
-- tool error counts as answered, anything else as failed. At the end one JSON line on stdout,
-- prefixed "crowd-json ", carries the counts and the latency percentiles (microseconds): wrk's
-- over the whole run, and with CROWD_WINDOW those of the answers inside the window alone.
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
  window_us = {}  -- the latency of each answer inside the window, in microseconds
  first_failure = ""
end

-- With a window, each POST carries the time it was sent in its JSON-RPC id ("crowd-<us>"), which
-- every server echoes: an answer's latency is then its own, so the window's percentiles leave out
-- the crowd's arrival (wrk's own histogram covers the whole run). The id is a string, so a number
-- in the answer's data can never be taken for it.
if method == "POST" and window_to ~= math.huge then
  local base = window_from - 3600
  local before = '{"jsonrpc":"2.0","id":"crowd-'
  local after = '","method":"tools/call","params":{"name":"get_wagers","arguments":{}}}'
  function request()
    return wrk.format(nil, nil, nil, before .. string.format("%d", (now() - base) * 1e6) .. after)
  end
  function sent_at(body)
    local us = body:match('"id"%s*:%s*"crowd%-(%d+)"')
    return us and base + tonumber(us) * 1e-6
  end
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
      local sent = sent_at and sent_at(body)
      if sent then
        window_us[#window_us + 1] = (t - sent) * 1e6
      end
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
  local ok, bad, sample, windowed, timed = 0, 0, "", 0, {}
  for _, thread in ipairs(threads) do
    ok = ok + thread:get("answered")
    bad = bad + thread:get("failed")
    windowed = windowed + thread:get("in_window")
    for _, us in ipairs(thread:get("window_us") or {}) do
      timed[#timed + 1] = us
    end
    if sample == "" then sample = thread:get("first_failure") end
  end
  table.sort(timed)
  local function at(p)  -- nearest-rank percentile of the window's latencies; -1 when none was timed
    if #timed == 0 then return -1 end
    return timed[math.max(1, math.ceil(#timed * p / 100))]
  end
  local e = summary.errors
  io.write(string.format(
    'crowd-json {"requests":%d,"duration_us":%d,"bytes":%d,"answered":%d,"in_window":%d,"failed":%d,' ..
    '"connect_errors":%d,"read_errors":%d,"write_errors":%d,"status_errors":%d,"timeouts":%d,' ..
    '"p50_us":%d,"p90_us":%d,"p99_us":%d,"p999_us":%d,"max_us":%d,"mean_us":%.1f,' ..
    '"window_timed":%d,"window_p50_us":%d,"window_p90_us":%d,"window_p99_us":%d,"window_max_us":%d,' ..
    '"first_failure":%s}\n',
    summary.requests, summary.duration, summary.bytes, ok, windowed, bad,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean,
    #timed, at(50), at(90), at(99), at(100),
    quote(sample)))
end

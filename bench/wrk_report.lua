-- Shared by every wrk scenario of bench/api.py: numbers each thread (one connection per
-- thread, so per-thread state is per-connection state) and prints one machine-readable
-- result line that bench/api.py parses instead of scraping wrk's human summary.
--
-- A scenario script may set `counters` to a list of per-thread global names to add up.

local threads = {}
local next_id = 0

function setup(thread)
   thread:set("id", next_id)
   next_id = next_id + 1
   table.insert(threads, thread)
end

local function json_number(v)
   return string.format("%.3f", v or 0)
end

function done(summary, latency, requests)
   local e = summary.errors
   local parts = {
      '"duration_us":' .. summary.duration,
      '"requests":' .. summary.requests,
      '"bytes":' .. summary.bytes,
      '"err_connect":' .. e.connect,
      '"err_read":' .. e.read,
      '"err_write":' .. e.write,
      '"err_status":' .. e.status,   -- responses with status > 399
      '"err_timeout":' .. e.timeout,
      '"lat_mean_us":' .. json_number(latency.mean),
      '"lat_max_us":' .. json_number(latency.max),
      '"lat_p50_us":' .. json_number(latency:percentile(50)),
      '"lat_p90_us":' .. json_number(latency:percentile(90)),
      '"lat_p99_us":' .. json_number(latency:percentile(99)),
   }
   for _, name in ipairs(counters or {}) do
      local total = 0
      for _, t in ipairs(threads) do
         total = total + (tonumber(t:get(name)) or 0)
      end
      table.insert(parts, '"' .. name .. '":' .. total)
   end
   io.write("BENCH_JSON {" .. table.concat(parts, ",") .. "}\n")
end

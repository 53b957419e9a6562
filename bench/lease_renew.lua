-- Kubelet-style Lease heartbeat: each wrk thread has exactly one connection and owns one
-- Lease (<prefix><thread id>). It GETs the Lease once, then loops: PUT the last object it
-- saw with a fresh spec.renewTime; the body keeps metadata.resourceVersion from the previous
-- response, so a 409 Conflict means this script (or the server) is wrong, never contention --
-- except on the run's first PUT (stale_start, below). BENCH_LEASE_DEBUG=1: each non-200 on stderr.
--
-- Environment: BENCH_LEASE_PATH  collection path, e.g. /apis/coordination.k8s.io/v1/namespaces/x/leases
--              BENCH_LEASE_PREFIX  name prefix (default "renew-")

dofile("wrk_report.lua")

counters = { "gets", "puts", "renewed", "conflicts", "stale_start", "other_status", "rv_unchanged" }

function init(args)
   path = os.getenv("BENCH_LEASE_PATH") .. "/" .. (os.getenv("BENCH_LEASE_PREFIX") or "renew-") .. id
   put_headers = { ["Content-Type"] = "application/json" }
   for k, v in pairs(wrk.headers) do put_headers[k] = v end
   last = nil            -- body of the last object seen (nil: fetch it first)
   last_rv = nil
   seq = 0
   gets, puts, renewed, conflicts, stale_start, other_status, rv_unchanged = 0, 0, 0, 0, 0, 0, 0
   first_put = false   -- the next PUT is the first after a GET
   pending = nil
end

-- MicroTime as the kubelet writes it; the sequence number in the fraction makes every
-- renewal a real change (an identical PUT would be a no-op keeping the resourceVersion).
local function micro_time()
   seq = seq + 1
   return os.date("!%Y-%m-%dT%H:%M:%S", os.time()) .. string.format(".%06dZ", seq % 1000000)
end

function request()
   if last == nil then
      pending = "GET"
      gets = gets + 1
      first_put = true
      return wrk.format("GET", path)
   end
   pending = "PUT"
   puts = puts + 1
   this_first = first_put
   first_put = false
   local body = last:gsub('"renewTime":"[^"]*"', '"renewTime":"' .. micro_time() .. '"', 1)
   return wrk.format("PUT", path, put_headers, body)
end

function response(status, headers, body)
   if status == 200 then
      local rv = body:match('"resourceVersion":"(%d+)"')
      if pending == "PUT" then
         renewed = renewed + 1
         if rv == last_rv then rv_unchanged = rv_unchanged + 1 end
      end
      last, last_rv = body, rv
   else
      if os.getenv("BENCH_LEASE_DEBUG") then
         io.stderr:write(string.format("thread %s: %s %d first=%s rv=%s %s\n", id, pending, status,
                                       tostring(this_first), tostring(last_rv), body:sub(1, 300)))
      end
      if status == 409 and this_first and gets == 1 then
         -- The run's first PUT, on what its first GET read: the previous wrk run's last PUT of
         -- this Lease (wrk closed its connection mid-request) may commit after that GET. The
         -- server is right to refuse; not a fault (measured: every 409 of the capacity runs).
         stale_start = stale_start + 1
      elseif status == 409 then conflicts = conflicts + 1 else other_status = other_status + 1 end
      last = nil   -- re-read the Lease and carry on
   end
end

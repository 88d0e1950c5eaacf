-- wrk -s wrk_search.lua URL -- BODIES: POST each line of BODIES (a search's JSON) in
-- turn, each wrk thread from its own place; the requests are formatted once, in init.
-- done() prints one line "WRK {json}" for varvedb_bench/server.py (VarveWrk).
local requests = {}
local i = 0
init = function(args)
  for line in io.lines(args[1]) do
    requests[#requests + 1] = wrk.format("POST", wrk.path,
                                         {["Content-Type"] = "application/json"}, line)
  end
  i = math.random(#requests)
end
request = function()
  i = i % #requests + 1
  return requests[i]
end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRK {"requests": %d, "duration_us": %d, "p50_us": %d, ' ..
    '"p99_us": %d, "non2xx": %d, "errors": %d}\n', summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), e.status,
    e.connect + e.read + e.write + e.timeout))
end

-- wrk script for bench/run.sh: POST one body file (made by bench/bodies.py) on every request
-- and print one parseable RESULT line at the end.
--
--   wrk -t2 -c32 -d5s --timeout 10s -s bench/post.lua http://127.0.0.1:PORT/v1/chat/completions -- BODY.json
--
-- The request is built once per thread and is static (no request()/response() callbacks), so
-- wrk stays on its fast path; the body is read in init(), before wrk formats the request.

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Accept"] = "application/json, text/event-stream"

function init(args)
   local path = args[1]
   if not path then
      error("usage: wrk ... -s post.lua URL -- BODY_FILE")
   end
   local f = assert(io.open(path, "rb"))
   wrk.body = f:read("*a")
   f:close()
end

function done(summary, latency, requests)
   local e = summary.errors
   io.write(string.format(
      "RESULT requests=%d duration_us=%d bytes=%d connect=%d read=%d write=%d status=%d timeout=%d p50_us=%d p90_us=%d p99_us=%d mean_us=%.1f max_us=%d\n",
      summary.requests, summary.duration, summary.bytes,
      e.connect, e.read, e.write, e.status, e.timeout,
      latency:percentile(50), latency:percentile(90), latency:percentile(99),
      latency.mean, latency.max))
end

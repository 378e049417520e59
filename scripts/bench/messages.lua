-- wrk request of the Messages benchmark: the conversation of chat.lua as an Anthropic Messages
-- request (`POST /v1/messages`), which `src serve` translates for the OpenAI upstream.
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["anthropic-version"] = "2023-06-01"
wrk.body = '{"model":"auto","system":"You are helpful.","messages":['
  .. '{"role":"user","content":"my build fails with a compile error in the parser, what should I check first?"}],'
  .. '"temperature":0.2,"max_tokens":16}'

-- The mean of the latency percentiles 10 to 90: a mean without the tails, steadier than the
-- median where a run's latencies fall in two modes (a loaded shared machine), and blind to
-- the stalls a plain mean would average in.
function done(summary, latency, requests)
  local sum = 0
  for p = 10, 90 do
    sum = sum + latency:percentile(p)
  end
  io.write(string.format("trimmed_mean_ms %.4f\n", sum / 81 / 1000))
end

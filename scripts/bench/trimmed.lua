-- Shared by the wrk scripts of the benchmarks (loaded with dofile from beside them): prints the
-- mean of the latency percentiles 10 to 90, a mean without the tails, steadier than the median
-- where a run's latencies fall in two modes (a loaded shared machine), and blind to the stalls
-- a plain mean would average in.
function done(summary, latency, requests)
  local sum = 0
  for p = 10, 90 do
    sum = sum + latency:percentile(p)
  end
  io.write(string.format("trimmed_mean_ms %.4f\n", sum / 81 / 1000))
end

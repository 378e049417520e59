#!/usr/bin/env bash
# What one open console costs the request path: the proxy benchmark's load (wrk, one fast nginx
# upstream, scripts/bench/chat.lua) through `src serve` with no console page connected, then
# with one live stream open (`GET /v1/console/live` on the admin listener, read the whole time),
# alternating for BENCH_ROUNDS rounds and ending without, in one run on loopback. Prints req/s
# and p50/p99 of each run, each streamed run's ratio against the mean of the two runs around it,
# and their median; fails if a stream did not see the requests. Figures: docs/benchmarks.md,
# "The operator console".
#
# Knobs (environment): BENCH_CONNECTIONS (16), BENCH_DURATION seconds (10), BENCH_THREADS (2),
# BENCH_WARMUP seconds (2), BENCH_ROUNDS (3 pairs of runs, without and with a stream),
# BENCH_SRC (a `src` binary; default: `cargo build --release`), BENCH_KEEP=1 to keep the run
# folder. CARGO_TARGET_DIR is honoured; SRC_CONSOLE_LIVE_RATE reaches `src serve`.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

connections=${BENCH_CONNECTIONS:-16}
duration=${BENCH_DURATION:-10}
threads=${BENCH_THREADS:-2}
warmup=${BENCH_WARMUP:-2}
rounds=${BENCH_ROUNDS:-3}

bench_name=console.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

ensure_apt nginx wrk
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

built_src

start_run src-bench-console

start_upstream

mkdir "$run_dir/policy"
sed -E "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" "$here/policy/policy.sr" >"$run_dir/policy/policy.sr"
src_port=$(free_port)
admin_port=$(free_port)
"$src_bin" serve "$run_dir/policy" --listen "127.0.0.1:$src_port" --admin "127.0.0.1:$admin_port" \
  --no-watch >"$run_dir/src.out" 2>"$run_dir/src.log" &
src_pid=$!
pids+=("$src_pid")
wait_http "src serve" "$src_pid" "http://127.0.0.1:$src_port/readyz" 30
src_url=http://127.0.0.1:$src_port/v1/chat/completions
admin_url=http://127.0.0.1:$admin_port

# load NAME: sets rps, p50, p99 (ms), errors.
load() {
  local name=$1 out
  say "wrk $name: warm-up ${warmup}s, then -t$threads -c$connections -d${duration}s"
  wrk -t"$threads" -c"$connections" -d"${warmup}s" -s "$here/chat.lua" "$src_url" >/dev/null
  out=$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$here/chat.lua" "$src_url")
  printf '%s\n' "$out" >"$run_dir/wrk-$name.txt"
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF }
    /Socket errors:/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' <<<"$out")
  [[ -n $rps && -n $p50 && -n $p99 ]] || die "cannot read wrk's output for $name: $out"
}

watchers() { curl -fsS "$admin_url/v1/console/health" | python3 -c 'import json, sys; print(json.load(sys.stdin)["live_watchers"])'; }

# One round: a run with no page, then one with a stream open. The runs alternate so that a
# drift of the host's speed (which moves whole runs by 20 % here) falls on both sides alike; a
# last run without closes the series, and each streamed run is set against the two around it.
streamed=0
paced=0
no_console=()
with_stream=()
ratios=()
for round in $(seq "$rounds"); do
  [[ $(watchers) == 0 ]] || die "a live stream is open before round $round's first run"
  load "without-$round"
  no_console+=("$rps $p50 $p99 $errors")

  curl -sS -N "$admin_url/v1/console/live" >"$run_dir/live-$round.txt" &
  stream_pid=$!
  pids+=("$stream_pid")
  for _ in $(seq 50); do [[ $(watchers) == 1 ]] && break; sleep 0.1; done
  [[ $(watchers) == 1 ]] || die "the live stream did not open"
  load "with-stream-$round"
  with_stream+=("$rps $p50 $p99 $errors")
  kill "$stream_pid" 2>/dev/null || true
  wait "$stream_pid" 2>/dev/null || true
  lines=$(grep -c '^data: ' "$run_dir/live-$round.txt" || true)
  ((lines > 0)) || die "the live stream saw no request in round $round"
  streamed=$((streamed + lines))
  # Requests the stream's pace left out (each line's `skipped`): shown + left out = answered.
  left=$(sed -n 's/^data: //p' "$run_dir/live-$round.txt" | python3 -c '
import json, sys
print(sum(json.loads(l).get("skipped", 0) for l in sys.stdin if l.strip()))')
  paced=$((paced + left))
  for _ in $(seq 50); do [[ $(watchers) == 0 ]] && break; sleep 0.1; done
done
load "without-last"
no_console+=("$rps $p50 $p99 $errors")

for round in $(seq "$rounds"); do
  read -r before _ <<<"${no_console[$((round - 1))]}"
  read -r after _ <<<"${no_console[$round]}"
  read -r with _ <<<"${with_stream[$((round - 1))]}"
  ratios+=("$(awk -v w="$with" -v a="$before" -v b="$after" 'BEGIN { printf "%.3f", 2 * w / (a + b) }')")
done
median=$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')

echo
echo "console benchmark: wrk -t$threads -c$connections -d${duration}s (after ${warmup}s warm-up), $rounds round(s), $(nproc) cores, loopback, $src_bin"
printf '%-26s %10s %9s %9s %7s\n' run req/s p50_ms p99_ms errors
for round in $(seq "$rounds"); do
  # shellcheck disable=SC2086 # the fields are meant to split
  printf '%-26s %10s %9s %9s %7s\n' "no console" ${no_console[$((round - 1))]}
  # shellcheck disable=SC2086
  printf '%-26s %10s %9s %9s %7s\n' "one live stream open" ${with_stream[$((round - 1))]}
done
# shellcheck disable=SC2086
printf '%-26s %10s %9s %9s %7s\n' "no console" ${no_console[$rounds]}
echo "lines the streams received: $streamed; requests the pace left out: $paced (SRC_CONSOLE_LIVE_RATE=${SRC_CONSOLE_LIVE_RATE:-100})"
echo "throughput with one stream / without (the runs around it), per round: ${ratios[*]}"
echo "median ratio: $median"

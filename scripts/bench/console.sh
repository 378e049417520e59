#!/usr/bin/env bash
# What one open console costs the request path: the proxy benchmark's load (wrk, one fast nginx
# upstream, scripts/bench/chat.lua) through `src serve` with no console page connected, then
# with one live stream open (`GET /v1/console/live` on the admin listener, read the whole time),
# then without again, in one run on loopback. Prints req/s and p50/p99 of each and the ratio of
# the streamed run against the mean of the two runs around it; fails if the stream did not see
# the requests. Figures: docs/benchmarks.md, "The operator console".
#
# Knobs (environment): BENCH_CONNECTIONS (16), BENCH_DURATION seconds (10), BENCH_THREADS (2),
# BENCH_WARMUP seconds (2), BENCH_SRC (a `src` binary; default: `cargo build --release`),
# BENCH_KEEP=1 to keep the run folder. CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

connections=${BENCH_CONNECTIONS:-16}
duration=${BENCH_DURATION:-10}
threads=${BENCH_THREADS:-2}
warmup=${BENCH_WARMUP:-2}

bench_name=console.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

ensure_apt nginx wrk
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

if [[ -n ${BENCH_SRC:-} ]]; then
  src_bin=$BENCH_SRC
else
  say "cargo build --release --bin src"
  cargo build --release --quiet --bin src
  src_bin=${CARGO_TARGET_DIR:-$root/target}/release/src
fi
[[ -x $src_bin ]] || die "no binary at $src_bin"

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

[[ $(watchers) == 0 ]] || die "a live stream is open before the first run"
load without
before=("$rps" "$p50" "$p99" "$errors")

curl -sS -N "$admin_url/v1/console/live" >"$run_dir/live.txt" &
stream_pid=$!
pids+=("$stream_pid")
for _ in $(seq 50); do [[ $(watchers) == 1 ]] && break; sleep 0.1; done
[[ $(watchers) == 1 ]] || die "the live stream did not open"
load with-stream
with=("$rps" "$p50" "$p99" "$errors")
kill "$stream_pid" 2>/dev/null || true
wait "$stream_pid" 2>/dev/null || true
streamed=$(grep -c '^data: ' "$run_dir/live.txt" || true)
((streamed > 0)) || die "the live stream saw no request"

load without-again
after=("$rps" "$p50" "$p99" "$errors")

baseline=$(awk -v a="${before[0]}" -v b="${after[0]}" 'BEGIN { printf "%.1f", (a + b) / 2 }')
ratio=$(awk -v w="${with[0]}" -v b="$baseline" 'BEGIN { printf "%.3f", w / b }')
echo
echo "console benchmark: wrk -t$threads -c$connections -d${duration}s (after ${warmup}s warm-up), $(nproc) cores, loopback, $src_bin"
printf '%-26s %10s %9s %9s %7s\n' run req/s p50_ms p99_ms errors
printf '%-26s %10s %9s %9s %7s\n' "no console" "${before[@]}"
printf '%-26s %10s %9s %9s %7s\n' "one live stream open" "${with[@]}"
printf '%-26s %10s %9s %9s %7s\n' "no console, again" "${after[@]}"
echo "lines the stream received: $streamed"
echo "throughput with one stream / without (mean of the runs around it): $ratio"

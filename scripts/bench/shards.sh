#!/usr/bin/env bash
# Serving shards against the shared runtime: the fixed-answer nginx upstream of proxy.sh, nginx
# `proxy_pass` in front of it (the pass-through floor), and two `src serve` of the same binary
# and bench policy, one with `--shards 0` (HTTP/1.1 on the shared work-stealing runtime) and one
# with the default shards (one single-threaded runtime per core). Rounds alternate which `src`
# goes first, so a drift of a shared machine's speed favours neither; the medians of the rounds
# are reported, with the ratios of shards over shared and of each over nginx `proxy_pass`. Where
# `perf` is installed, each `src serve` load is also counted by `perf stat` (CPU time and context
# switches of the process, per request), which other work on a shared machine moves less than it
# moves throughput.
# Every process it starts is stopped on exit. Figures: docs/benchmarks.md.
#
# Knobs (environment): BENCH_ROUNDS (5), BENCH_DURATION seconds per load (5), BENCH_WARMUP
# seconds (2), BENCH_CONNECTIONS (16), BENCH_SRC a built `src` to measure instead of building
# this checkout's release binary, BENCH_KEEP=1 to keep the run folder. CARGO_TARGET_DIR is
# honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

rounds=${BENCH_ROUNDS:-5}
duration=${BENCH_DURATION:-5}
warmup=${BENCH_WARMUP:-2}
connections=${BENCH_CONNECTIONS:-16}

bench_name=shards.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

command -v wrk >/dev/null || die "wrk is missing (scripts/bench/peers.sh installs it)"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx_bin ]] || die "nginx is missing (scripts/bench/peers.sh installs it)"
built_src

start_run src-bench-shards
say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start_upstream

proxy_port=$(free_port)
sed -e "s|@RUN_DIR@|$run_dir|g" -e "s|@LISTEN@|127.0.0.1:$proxy_port|" \
  -e "s|@UPSTREAM@|127.0.0.1:$nginx_port|" -e "s|@STREAM_LISTEN@|127.0.0.1:$(free_port)|" \
  -e "s|@STREAM_UPSTREAM@|127.0.0.1:$nginx_port|" "$here/nginx-proxy.conf.in" >"$run_dir/nginx-proxy.conf"
"$nginx_bin" -c "$run_dir/nginx-proxy.conf" -e "$run_dir/nginx-proxy-error.log" >"$run_dir/nginx-proxy.out" 2>&1 &
pids+=($!)
wait_http "nginx proxy_pass" "${pids[-1]}" "http://127.0.0.1:$proxy_port/v1/models" 10

mkdir "$run_dir/policy"
sed -E "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" "$here/policy/policy.sr" >"$run_dir/policy/policy.sr"
# start_src NAME ARGS...: `src serve` with ARGS; sets url_NAME.
start_src() {
  local name=$1 port
  shift
  port=$(free_port)
  "$src_bin" serve "$run_dir/policy" --listen "127.0.0.1:$port" --admin "127.0.0.1:$(free_port)" \
    --no-watch "$@" >"$run_dir/src-$name.out" 2>"$run_dir/src-$name.log" &
  pids+=($!)
  printf -v "pid_$name" '%s' "${pids[-1]}"
  wait_http "src serve ($name)" "${pids[-1]}" "http://127.0.0.1:$port/readyz" 30
  printf -v "url_$name" '%s' "http://127.0.0.1:$port/v1/chat/completions"
}
start_src shared --shards 0
start_src shards
url_direct=http://127.0.0.1:$nginx_port/v1/chat/completions
url_nginx=http://127.0.0.1:$proxy_port/v1/chat/completions

# Every target answers the benchmark request with a chat completion, or the figures would
# measure an error path.
body=$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p; s/^  \.\. '\(.*\)'$/\1/p" "$here/chat.lua" | tr -d '\n')
for name in direct nginx shared shards; do
  url_var=url_$name
  out=$(curl -sS --max-time 30 -w '\n%{http_code}' -H 'Content-Type: application/json' -d "$body" "${!url_var}") ||
    die "$name: request failed"
  [[ ${out##*$'\n'} == 200 && $out == *chat.completion* ]] || die "$name answered: $out"
done

# load NAME ARGS...: wrk against NAME's URL; prints "req/s p50_ms cpu_us switches": the last
# two per request, of NAME's process (`perf stat` over the load; 0 without perf or a process),
# which a machine shared with other work moves less than it moves throughput.
load() {
  local name=$1 out url_var=url_$1 pid_var=pid_$1 stat=$run_dir/stat-$1.txt perf_pid=""
  shift
  if [[ -n ${!pid_var:-} ]] && command -v perf >/dev/null; then
    perf stat -e task-clock,context-switches -x, -o "$stat" -p "${!pid_var}" -- sleep "$duration" &
    perf_pid=$!
  fi
  out=$(wrk "$@" -d"${duration}s" --latency -s "$here/chat.lua" "${!url_var}")
  printf '%s\n' "$out" >>"$run_dir/wrk-$name.txt"
  grep -qE 'Non-2xx|Socket errors' <<<"$out" && die "$name: some requests failed: $out"
  local requests cpu=0 switches=0
  requests=$(awk '/requests in/ { print $1 }' <<<"$out")
  if [[ -n $perf_pid ]]; then
    wait "$perf_pid" || true
    read -r cpu switches < <(awk -F, -v n="$requests" '
      $3 == "task-clock" { t = $1 } $3 == "context-switches" { s = $1 }
      END { printf "%.1f %.2f\n", t * 1000 / n, s / n }' "$stat")
  fi
  echo "$(awk '/^Requests\/sec/ { print $2 }' <<<"$out") $(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")") $cpu $switches"
}
# measure NAME: warm-up, then 16 connections (throughput) and one (latency); prints
# "req/s p50_ms cpu16 switches16 cpu1 switches1".
measure() {
  local rps p50 cpu16 sw16 cpu1 sw1 url_var=url_$1
  wrk -t2 -c"$connections" -d"${warmup}s" -s "$here/chat.lua" "${!url_var}" >/dev/null
  read -r rps _ cpu16 sw16 < <(load "$1" -t2 -c"$connections")
  read -r _ p50 cpu1 sw1 < <(load "$1" -t1 -c1)
  echo "$rps $p50 $cpu16 $sw16 $cpu1 $sw1"
}

: >"$run_dir/rounds"
for ((r = 1; r <= rounds; r++)); do
  read -r d_rps d_p50 _ < <(measure direct)
  read -r n_rps n_p50 _ < <(measure nginx)
  if ((r % 2)); then
    read -r a_rps a_p50 a_stat < <(measure shared)
    read -r b_rps b_p50 b_stat < <(measure shards)
  else
    read -r b_rps b_p50 b_stat < <(measure shards)
    read -r a_rps a_p50 a_stat < <(measure shared)
  fi
  echo "$d_rps $d_p50 $n_rps $n_p50 $a_rps $a_p50 $b_rps $b_p50 $a_stat $b_stat" >>"$run_dir/rounds"
  say "round $r of $rounds: req/s direct $d_rps, nginx $n_rps, shared $a_rps, shards $b_rps; one-connection p50 $d_p50, $n_p50, $a_p50, $b_p50 ms; CPU µs and switches a request (16, 1): shared $a_stat, shards $b_stat"
done

echo
echo "shards benchmark: wrk -t2 -c$connections and -t1 -c1, ${duration}s loads after ${warmup}s warm-up, median of $rounds rounds, $(nproc) cores, loopback"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
# Columns of a round: 1-8 req/s and p50 of direct, nginx, shared, shards; 9-12 shared's CPU µs
# and switches a request at 16 and at one connection; 13-16 the same of shards.
awk '
  function median(c,   n, i, j, t, v) {
    n = 0
    for (i = 1; i <= NR; i++) v[++n] = row[i, c]
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return v[int((n + 1) / 2)]
  }
  { for (c = 1; c <= NF; c++) row[NR, c] = $c
    # Per round, so each ratio pairs loads run minutes apart at most.
    row[NR, 21] = $7 / $5; row[NR, 22] = ($6 - $2) / (($8 - $2 > 0.001) ? $8 - $2 : 0.001)
    row[NR, 23] = $5 / $3; row[NR, 24] = $7 / $3
    row[NR, 25] = ($13 > 0) ? $9 / $13 : 0; row[NR, 26] = ($15 > 0) ? $11 / $15 : 0 }
  END {
    printf "| target | req/s (16) | one-connection p50 ms | added p50 ms | CPU µs / switches a request (16) | (1) |\n| --- | ---: | ---: | ---: | ---: | ---: |\n"
    printf "| nginx direct | %.0f | %.3f | — | | |\n", median(1), median(2)
    printf "| nginx proxy_pass | %.0f | %.3f | +%.3f | | |\n", median(3), median(4), median(4) - median(2)
    printf "| src serve --shards 0 (shared runtime) | %.0f | %.3f | +%.3f | %.1f / %.2f | %.1f / %.2f |\n", median(5), median(6), median(6) - median(2), median(9), median(10), median(11), median(12)
    printf "| src serve (shards) | %.0f | %.3f | +%.3f | %.1f / %.2f | %.1f / %.2f |\n", median(7), median(8), median(8) - median(2), median(13), median(14), median(15), median(16)
    printf "\nmedians of the per-round ratios: shards / shared throughput %.3f×; shared / shards added p50 %.3f×; shared / shards CPU a request %.3f× (16), %.3f× (1); × nginx proxy_pass throughput: shared %.3f, shards %.3f\n",
      median(21), median(22), median(25), median(26), median(23), median(24) }' "$run_dir/rounds"

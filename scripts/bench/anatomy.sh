#!/usr/bin/env bash
# The proxy's wall-clock anatomy: where a request's microseconds go, for `src serve`, nginx
# `proxy_pass` and Envoy, and for the external processor behind Envoy. The targets and the load
# are proxy.sh's and extproc.sh's (the fixed-answer nginx upstream, chat.lua, the bench policy);
# what this adds is a count of every process on the request's path while the load runs:
#
#   - CPU time (task-clock), context switches, CPU migrations and the wake-ups each process
#     issues (sched:sched_wakeup), from `perf stat` attached to the proxy, to the upstream nginx
#     and to wrk itself, divided by the requests wrk counted. Hardware counters (instructions,
#     cycles) are not offered in this project's VM; callgrind's counts (instructions.sh) stand
#     in for them.
#   - system calls a request by kind, from perf's syscall tracepoints counted on the same
#     processes (all calls from raw_syscalls:sys_enter; the kinds listed in `kinds` below, the
#     rest as "other"). Counting tracepoints costs the counted processes far less than strace,
#     which stops each one at every call.
#
# Each target is loaded twice at each of 16 and 1 connections: a plain wrk run (the throughput
# and latency figures) and a counted one (the per-request counts); both after a warm-up. The
# report (scripts/bench/anatomy_report.py) sets the counts beside the measured ratios: at 16
# connections the two cores are busy, so throughput ≈ 2 cores / the CPU a request costs in all
# processes together, and the ratios of those sums predict the throughput ratios; at one
# connection the added latency is the proxy's CPU a request plus what is not CPU (the extra
# loopback hops and the wake-ups of a sleeping process), the difference of the two.
#
# Targets: direct (wrk → nginx), nginx proxy_pass (2 workers), Envoy (--concurrency 2), `src
# serve` with its defaults and each variant of ANAT_SRC_VARIANTS; then Envoy alone, Envoy with
# crates/extproc-null and Envoy with `src serve --extproc` (--concurrency 1, as in extproc.sh).
#
# Knobs (environment): BENCH_DURATION seconds per run (5), BENCH_WARMUP seconds (2),
# BENCH_CONNECTIONS (16), BENCH_THREADS wrk threads at BENCH_CONNECTIONS (2), BENCH_SRC and
# BENCH_NULL_BIN built binaries to measure instead of this checkout's release build,
# ANAT_SRC_VARIANTS more `src serve` rows as `name=serve flags;name=flags` (e.g.
# `log-off=--request-log off;one-shard=--shards 1`), ANAT_EXTPROC_VARIANTS the same for
# `src serve --extproc` behind Envoy, ANAT_NULL_VARIANTS the same for `extproc-null` (which
# takes `--workers N`), ANAT_SRC_BEFORE a second `src` binary whose processor rows (the plain one
# and each ANAT_EXTPROC_VARIANTS row) run just before this one's, for a before/after in one run,
# ANAT_EXTPROC=0 to leave the external processor out, ANAT_PASS=0 to
# leave the pass-through rows out, BENCH_KEEP=1 to keep the run folder. CARGO_TARGET_DIR is
# honoured. Figures: docs/benchmarks.md, "Where a request's microseconds go".
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

duration=${BENCH_DURATION:-5}
warmup=${BENCH_WARMUP:-2}
connections=${BENCH_CONNECTIONS:-16}
threads=${BENCH_THREADS:-2}
variants=${ANAT_SRC_VARIANTS:-}
extproc_variants=${ANAT_EXTPROC_VARIANTS:-}
null_variants=${ANAT_NULL_VARIANTS:-}
with_extproc=${ANAT_EXTPROC:-1}
with_pass=${ANAT_PASS:-1}
envoy_bin=${ENVOY:-$root/.cache/venv-envoy/bin/envoy}

bench_name=anatomy.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

command -v perf >/dev/null || die "perf is missing (Debian: linux-perf)"
command -v wrk >/dev/null || die "wrk is missing (scripts/bench/peers.sh installs it)"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx_bin ]] || die "nginx is missing (scripts/bench/peers.sh installs it)"
[[ -x $envoy_bin ]] || die "no Envoy at $envoy_bin (scripts/bench/peers.sh installs it)"
perf stat -e task-clock,raw_syscalls:sys_enter,sched:sched_wakeup true >/dev/null 2>&1 ||
  die "perf cannot count software events and tracepoints here (perf_event_paranoid, tracefs)"

if [[ -n ${BENCH_SRC:-} ]]; then
  src_bin=$BENCH_SRC
  null_bin=${BENCH_NULL_BIN:-}
  [[ $with_extproc == 0 || -n $null_bin ]] || die "BENCH_SRC needs BENCH_NULL_BIN (or ANAT_EXTPROC=0)"
else
  say "cargo build --release --bin src --bin extproc-null"
  cargo build --release --quiet --bin src --bin extproc-null
  src_bin=${CARGO_TARGET_DIR:-$root/target}/release/src
  null_bin=${CARGO_TARGET_DIR:-$root/target}/release/extproc-null
fi
[[ -x $src_bin ]] || die "no binary at $src_bin"

# The system calls counted by kind: those a proxy makes per request (socket reads and writes,
# the poller, cross-thread wake-ups) and the usual suspects of a per-request cost (memory
# mapping, clocks outside the vDSO, randomness). Kinds the kernel has no tracepoint for are
# dropped; everything else is "other".
kinds=()
for k in read write readv writev recvfrom sendto recvmsg sendmsg epoll_wait epoll_pwait \
  epoll_pwait2 epoll_ctl futex accept4 close sched_yield mmap munmap madvise mprotect brk ioctl \
  getrandom clock_gettime io_uring_enter poll ppoll timerfd_settime eventfd2 setsockopt; do
  [[ -d /sys/kernel/tracing/events/syscalls/sys_enter_$k || -d /sys/kernel/debug/tracing/events/syscalls/sys_enter_$k ]] &&
    kinds+=("$k")
done
events=task-clock,context-switches,cpu-migrations,sched:sched_wakeup,raw_syscalls:sys_enter
for k in "${kinds[@]}"; do events+=",syscalls:sys_enter_$k"; done

start_run src-bench-anatomy
manifest=$run_dir/manifest.txt
: >"$manifest"
say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start_upstream
upstream_pids=$(ps -o pid= --ppid "$nginx_pid" | tr -d ' ' | paste -sd, -)
upstream_pids="$nginx_pid${upstream_pids:+,$upstream_pids}"

# all_pids PID: a process and its children, comma-separated (nginx's workers).
all_pids() {
  local kids
  kids=$(ps -o pid= --ppid "$1" | tr -d ' ' | paste -sd, -)
  echo "$1${kids:+,$kids}"
}

# counted PREFIX THREADS CONNS URL PIDS...: one wrk run with perf stat on each comma-separated
# PID set (one file each, PREFIX-N.csv) and on wrk itself (PREFIX-wrk.csv); wrk's output in
# PREFIX-wrk.txt. The attached counters start a second before wrk and stop once it ends, so they
# see a second of the idle process too (a few timer wake-ups, against tens of thousands of
# requests).
counted() {
  local prefix=$1 t=$2 c=$3 url=$4 n=0 set stats=()
  shift 4
  for set in "$@"; do
    if [[ -n $set ]]; then
      perf stat -x, -e "$events" -p "$set" -o "$prefix-$n.csv" &
      stats+=($!)
    else
      : >"$prefix-$n.csv"
    fi
    n=$((n + 1))
  done
  sleep 1
  n=0
  for set in "$@"; do
    ticks "$set" >"$prefix-$n.ticks"
    n=$((n + 1))
  done
  perf stat -x, -e "$events" -o "$prefix-wrk.csv" -- \
    wrk -t"$t" -c"$c" -d"${duration}s" --latency -s "$here/chat.lua" "$url" >"$prefix-wrk.txt"
  n=0
  for set in "$@"; do
    ticks "$set" >>"$prefix-$n.ticks"
    n=$((n + 1))
  done
  kill -INT "${stats[@]}" 2>/dev/null || true
  wait "${stats[@]}" 2>/dev/null || true
}

# ticks PIDS: "user system" clock ticks of a comma-separated set of processes (all their
# threads), from /proc/PID/stat; read before and after wrk, for the split of a request's CPU
# between the process's own code and the kernel's.
ticks() {
  local pid user=0 system=0 fields
  [[ -n $1 ]] || return 0
  for pid in ${1//,/ }; do
    read -ra fields <<<"$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null || echo)"
    ((${#fields[@]} > 12)) || continue
    user=$((user + fields[11]))
    system=$((system + fields[12]))
  done
  echo "$user $system"
}

# anatomy GROUP NAME LABEL URL PIDS...: the target's four runs (plain and counted, at
# $connections and at one), each after a warm-up. PIDS: comma-separated sets, the proxy's
# first (empty for direct), then the others on the path (the upstream, a processor).
anatomy() {
  local group=$1 name=$2 label=$3 url=$4 c t load
  shift 4
  for c in "$connections" 1; do
    t=$threads
    ((c == 1)) && t=1
    load=$(cut -d' ' -f1 /proc/loadavg)
    say "$label: -c$c warm-up ${warmup}s, plain ${duration}s, counted ${duration}s (load $load)"
    wrk -t"$t" -c"$c" -d"${warmup}s" -s "$here/chat.lua" "$url" >/dev/null
    wrk -t"$t" -c"$c" -d"${duration}s" --latency -s "$here/chat.lua" "$url" >"$run_dir/$name-$c-plain.txt"
    counted "$run_dir/$name-$c" "$t" "$c" "$url" "$@"
    printf '%s %s %s %s %s %s\n' "$group" "$name" "$c" "$load" "$#" "$label" >>"$manifest"
  done
}

check_chat() {
  local out
  out=$(curl -sS --max-time 30 -H 'Content-Type: application/json' \
    -d '{"model":"auto","messages":[{"role":"user","content":"my build fails with a compile error"}],"max_tokens":16}' \
    "$2") || die "$1: request failed"
  [[ $out == *chat.completion* ]] || die "$1 answered: $out"
}

policy_dir=$run_dir/policy
mkdir -p "$policy_dir"
sed -E "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" "$here/policy/policy.sr" >"$policy_dir/policy.sr"

# start_src FLAGS...: `src serve` on the bench policy; sets src_pid and src_port.
start_src() {
  local admin
  src_port=$(free_port)
  admin=$(free_port)
  "${src_use:-$src_bin}" serve "$policy_dir" --listen "127.0.0.1:$src_port" --admin "127.0.0.1:$admin" \
    --no-watch "$@" >"$run_dir/src.out" 2>>"$run_dir/src.log" &
  src_pid=$!
  pids+=("$src_pid")
  wait_http "src serve" "$src_pid" "http://127.0.0.1:$src_port/readyz" 60
}

stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

url_of() { echo "http://127.0.0.1:$1/v1/chat/completions"; }

# ---- pass-through: direct, nginx, Envoy, src ---------------------------------------------
if [[ $with_pass == 1 ]]; then
  check_chat direct "$(url_of "$nginx_port")"
  anatomy pass direct "direct (nginx)" "$(url_of "$nginx_port")" "" "$upstream_pids"

  port=$(free_port)
  sed -e "s|@RUN_DIR@|$run_dir|g" -e "s|@LISTEN@|127.0.0.1:$port|" \
    -e "s|@UPSTREAM@|127.0.0.1:$nginx_port|" -e "s|@STREAM_LISTEN@|127.0.0.1:$(free_port)|" \
    -e "s|@STREAM_UPSTREAM@|127.0.0.1:$nginx_port|" "$here/nginx-proxy.conf.in" >"$run_dir/nginx-proxy.conf"
  "$nginx_bin" -c "$run_dir/nginx-proxy.conf" -e "$run_dir/nginx-proxy-error.log" >/dev/null 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_http "nginx proxy_pass" "$pid" "http://127.0.0.1:$port/v1/models" 10
  check_chat nginx "$(url_of "$port")"
  anatomy pass nginx "nginx proxy_pass (2 workers)" "$(url_of "$port")" "$(all_pids "$pid")" "$upstream_pids"
  stop "$pid"

  port=$(free_port)
  admin=$(free_port)
  sed -e "s|@ADMIN@|$admin|" -e "s|@LISTEN@|$port|" -e "s|@UPSTREAM_PORT@|$nginx_port|" \
    -e "s|@STREAM_LISTEN@|$(free_port)|" -e "s|@STREAM_PORT@|$nginx_port|" \
    "$here/envoy-proxy.yaml.in" >"$run_dir/envoy.yaml"
  "$envoy_bin" -c "$run_dir/envoy.yaml" --concurrency 2 --disable-hot-restart -l warning \
    >"$run_dir/envoy.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  wait_http Envoy "$pid" "http://127.0.0.1:$port/v1/models" 30
  check_chat Envoy "$(url_of "$port")"
  anatomy pass envoy "Envoy (--concurrency 2)" "$(url_of "$port")" "$pid" "$upstream_pids"
  stop "$pid"

  start_src
  check_chat "src serve" "$(url_of "$src_port")"
  anatomy pass src "src serve" "$(url_of "$src_port")" "$src_pid" "$upstream_pids"
  stop "$src_pid"

  IFS=';' read -ra vs <<<"$variants"
  for v in "${vs[@]}"; do
    [[ -n ${v// /} ]] || continue
    name=${v%%=*}
    read -ra flags <<<"${v#*=}"
    start_src "${flags[@]}"
    check_chat "src serve $name" "$(url_of "$src_port")"
    anatomy pass "src-$name" "src serve ${v#*=}" "$(url_of "$src_port")" "$src_pid" "$upstream_pids"
    stop "$src_pid"
  done
fi

# ---- the external processor: Envoy alone, with the null processor, with src ----------------
if [[ $with_extproc == 1 ]]; then
  [[ -x $null_bin ]] || die "no binary at $null_bin"
  # envoy_config FILE LISTEN ADMIN PROCESSOR [plain]: extproc.sh's configuration on these ports.
  envoy_config() {
    local out=$1
    sed -e "s|port_value: 10000|port_value: $2|" -e "s|port_value: 9901|port_value: $3|" \
      -e "s|port_value: 8803|port_value: $4|" -e "s|port_value: 8000|port_value: $nginx_port|" \
      -e "s|address: 0.0.0.0|address: 127.0.0.1|" "$here/envoy-extproc.yaml" >"$out"
    if [[ ${5:-} == plain ]]; then
      awk '/- name: envoy.filters.http.ext_proc/ { skip = 1 }
           /- name: envoy.filters.http.router/ { skip = 0 }
           !skip' "$out" >"$out.tmp" && mv "$out.tmp" "$out"
    fi
  }
  # behind_envoy NAME LABEL PROCESSOR_PORT PROCESSOR_PID [plain]
  behind_envoy() {
    local port admin pid
    port=$(free_port)
    admin=$(free_port)
    envoy_config "$run_dir/envoy-$1.yaml" "$port" "$admin" "$3" "${5:-}"
    "$envoy_bin" -c "$run_dir/envoy-$1.yaml" --concurrency 1 --disable-hot-restart -l warning \
      >"$run_dir/envoy-$1.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    wait_http "Envoy ($1)" "$pid" "http://127.0.0.1:$admin/ready" 30
    check_chat "Envoy ($1)" "$(url_of "$port")"
    if [[ -n $4 ]]; then
      anatomy extproc "$1" "$2" "$(url_of "$port")" "$pid" "$upstream_pids" "$4"
    else
      anatomy extproc "$1" "$2" "$(url_of "$port")" "$pid" "$upstream_pids"
    fi
    stop "$pid"
  }
  behind_envoy alone "Envoy alone (--concurrency 1)" 1 "" plain

  null_port=$(free_port)
  "$null_bin" "127.0.0.1:$null_port" >"$run_dir/null.out" 2>&1 &
  null_pid=$!
  pids+=("$null_pid")
  wait_tcp extproc-null "$null_pid" "$null_port" 10
  behind_envoy null "Envoy + the null processor" "$null_port" "$null_pid"
  stop "$null_pid"

  IFS=';' read -ra vs <<<"$null_variants"
  for v in "${vs[@]}"; do
    [[ -n ${v// /} ]] || continue
    name=${v%%=*}
    read -ra flags <<<"${v#*=}"
    null_port=$(free_port)
    "$null_bin" "127.0.0.1:$null_port" "${flags[@]}" >"$run_dir/null-$name.out" 2>&1 &
    null_pid=$!
    pids+=("$null_pid")
    wait_tcp "extproc-null $name" "$null_pid" "$null_port" 10
    behind_envoy "null-$name" "Envoy + the null processor ${v#*=}" "$null_port" "$null_pid"
    stop "$null_pid"
  done

  # src_rows SUFFIX LABEL BINARY: `src serve --extproc` behind Envoy, plain and each variant.
  src_rows() {
    local v name flags
    src_use=$3
    extproc_port=$(free_port)
    start_src --extproc "127.0.0.1:$extproc_port"
    wait_tcp "src --extproc$2" "$src_pid" "$extproc_port" 10
    behind_envoy "src-extproc$1" "Envoy + src serve --extproc$2" "$extproc_port" "$src_pid"
    stop "$src_pid"

    IFS=';' read -ra vs <<<"$extproc_variants"
    for v in "${vs[@]}"; do
      [[ -n ${v// /} ]] || continue
      name=${v%%=*}
      read -ra flags <<<"${v#*=}"
      extproc_port=$(free_port)
      start_src --extproc "127.0.0.1:$extproc_port" "${flags[@]}"
      wait_tcp "src --extproc $name$2" "$src_pid" "$extproc_port" 10
      behind_envoy "src-extproc-$name$1" "Envoy + src serve --extproc ${v#*=}$2" \
        "$extproc_port" "$src_pid"
      stop "$src_pid"
    done
    src_use=
  }
  if [[ -n ${ANAT_SRC_BEFORE:-} ]]; then
    [[ -x $ANAT_SRC_BEFORE ]] || die "no binary at $ANAT_SRC_BEFORE"
    src_rows -before " (before)" "$ANAT_SRC_BEFORE"
  fi
  src_rows "" "" "$src_bin"
fi

say "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$here/anatomy_report.py" "$run_dir" "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"

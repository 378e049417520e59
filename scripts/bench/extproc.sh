#!/usr/bin/env bash
# The external processor benchmark: what Envoy's ext_proc call to `src serve --extproc` adds.
# One fast upstream (proxy.sh's nginx answering a fixed chat completion), the same wrk load
# (proxy.sh's chat.lua) sent in one run through Envoy alone, through Envoy calling a processor
# that changes nothing (crates/extproc-null: the filter's own floor) and through Envoy calling
# the router (scripts/bench/envoy-extproc.yaml: the generated filter's mode, one catch-all
# route), on loopback. Prints p50/p99 at one connection, req/s at BENCH_CONNECTIONS
# connections, and the differences and ratios. Every process it starts is stopped on exit.
# Figures and targets: docs/benchmarks.md.
#
# Knobs (environment): BENCH_CONNECTIONS (16), BENCH_DURATION seconds (10), BENCH_THREADS (2),
# BENCH_WARMUP seconds (2), BENCH_SINGLE_DURATION seconds of the one-connection load (10),
# BENCH_ENVOY_CONCURRENCY Envoy worker threads (1), BENCH_ROUNDS alternating rounds (2),
# BENCH_KEEP=1 to keep the run folder, BENCH_SRC a built `src` binary to measure instead of
# building this checkout's, BENCH_ENVOY_CONFIG another ext_proc config in the form of
# scripts/bench/envoy-extproc.yaml (ports 10000, 9901, 8803, 8000), BENCH_GRPC_CLIENT=google
# for Envoy's `google_grpc` client instead of `envoy_grpc`, BENCH_NULL=0 to leave out the null
# processor's row, BENCH_NULL_BIN a built `extproc-null` (with BENCH_SRC), BENCH_PERF=DIR to
# profile the router and its Envoy (`perf record -e cpu-clock -g`) through the first round's
# load at BENCH_CONNECTIONS, reports written to DIR, BENCH_SRC_FLAGS and BENCH_NULL_FLAGS more
# flags for `src serve` and `extproc-null` (e.g. `--workers 1` for both: docs/operations.md).
# CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

connections=${BENCH_CONNECTIONS:-16}
duration=${BENCH_DURATION:-10}
threads=${BENCH_THREADS:-2}
warmup=${BENCH_WARMUP:-2}
single_duration=${BENCH_SINGLE_DURATION:-10}
envoy_concurrency=${BENCH_ENVOY_CONCURRENCY:-1}
rounds=${BENCH_ROUNDS:-2}
envoy_bin=${ENVOY:-$root/.cache/venv-envoy/bin/envoy}
envoy_source=${BENCH_ENVOY_CONFIG:-$here/envoy-extproc.yaml}
grpc_client=${BENCH_GRPC_CLIENT:-envoy}
with_null=${BENCH_NULL:-1}

bench_name=extproc.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

# ---- install -------------------------------------------------------------------------------
[[ -x $envoy_bin ]] || die "no Envoy at $envoy_bin: run scripts/setup.sh (or set ENVOY)"
ensure_apt nginx wrk
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

# ---- build ---------------------------------------------------------------------------------
if [[ -n ${BENCH_SRC:-} ]]; then
  src_bin=$BENCH_SRC
  null_bin=${BENCH_NULL_BIN:-}
  [[ $with_null == 0 || -n $null_bin ]] || die "BENCH_SRC needs BENCH_NULL_BIN (or BENCH_NULL=0)"
else
  # One cargo invocation, so both binaries share one build of their dependencies.
  say "cargo build --release --bin src --bin extproc-null"
  cargo build --release --quiet --bin src --bin extproc-null
  src_bin=${CARGO_TARGET_DIR:-$root/target}/release/src
  null_bin=${CARGO_TARGET_DIR:-$root/target}/release/extproc-null
fi
[[ -x $src_bin ]] || die "no binary at $src_bin"
[[ $with_null == 0 || -x $null_bin ]] || die "no binary at $null_bin"

# ---- processes -----------------------------------------------------------------------------
start_run src-bench-extproc


# check_chat NAME URL WANT: the benchmark request must be answered by the upstream's chat
# completion, and through the router it must carry the router's decision header.
check_chat() {
  local name=$1 url=$2 want=$3 out
  out=$(curl -sS -i --max-time 30 -H 'Content-Type: application/json' \
    -d '{"model":"auto","messages":[{"role":"user","content":"my build fails with a compile error"}],"max_tokens":16}' \
    "$url") || die "$name: request failed"
  [[ $out == *"200 OK"* && $out == *chat.completion* ]] || die "$name answered: $out"
  [[ -z $want || ${out,,} == *"$want"* ]] || die "$name: no \`$want\` in: $out"
}

say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

start_upstream

mkdir "$run_dir/policy"
sed -E "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" "$here/policy/policy.sr" >"$run_dir/policy/policy.sr"
src_port=$(free_port)
admin_port=$(free_port)
extproc_port=$(free_port)
read -ra src_flags <<<"${BENCH_SRC_FLAGS:-}"
read -ra null_flags <<<"${BENCH_NULL_FLAGS:-}"
"$src_bin" serve "$run_dir/policy" --listen "127.0.0.1:$src_port" --admin "127.0.0.1:$admin_port" \
  --extproc "127.0.0.1:$extproc_port" --no-watch ${src_flags[@]+"${src_flags[@]}"} >"$run_dir/src.out" 2>"$run_dir/src.log" &
src_pid=$!
pids+=("$src_pid")
wait_http "src serve" "$src_pid" "http://127.0.0.1:$src_port/readyz" 30

# envoy_config FILE LISTEN ADMIN PROCESSOR [plain]: the benchmark's config (or
# BENCH_ENVOY_CONFIG) on these ports, calling the processor on port PROCESSOR; `plain` drops
# the ext_proc filter (Envoy alone, same listener, routes and cluster).
envoy_config() {
  local out=$1 listen=$2 admin=$3 processor=$4 plain=${5:-}
  sed -e "s|port_value: 10000|port_value: $listen|" -e "s|port_value: 9901|port_value: $admin|" \
    -e "s|port_value: 8803|port_value: $processor|" -e "s|port_value: 8000|port_value: $nginx_port|" \
    -e "s|address: 0.0.0.0|address: 127.0.0.1|" \
    "$envoy_source" >"$out"
  if [[ $grpc_client == google ]]; then
    sed -i -e "s|envoy_grpc: { cluster_name: src_extproc }|google_grpc: { target_uri: \"127.0.0.1:$processor\", stat_prefix: src_extproc }|" "$out"
    grep -q google_grpc "$out" || die "no envoy_grpc client to replace in $out"
  fi
  if [[ $plain == plain ]]; then
    awk '/- name: envoy.filters.http.ext_proc/ { skip = 1 }
         /- name: envoy.filters.http.router/ { skip = 0 }
         !skip' "$out" >"$out.tmp" && mv "$out.tmp" "$out"
    ! grep -q ext_proc.v3 "$out" || die "the ext_proc filter is still in $out"
  fi
}

declare -A envoy_pid
start_envoy() {
  local name=$1 cfg=$2 admin=$3
  "$envoy_bin" -c "$cfg" --concurrency "$envoy_concurrency" --disable-hot-restart -l warning \
    >"$run_dir/envoy-$name.log" 2>&1 &
  pids+=($!)
  envoy_pid[$name]=$!
  wait_http "Envoy ($name)" "${pids[-1]}" "http://127.0.0.1:$admin/ready" 30
}

alone_port=$(free_port)
alone_admin=$(free_port)
envoy_config "$run_dir/envoy-alone.yaml" "$alone_port" "$alone_admin" "$extproc_port" plain
start_envoy alone "$run_dir/envoy-alone.yaml" "$alone_admin"
with_port=$(free_port)
with_admin=$(free_port)
envoy_config "$run_dir/envoy-extproc.yaml" "$with_port" "$with_admin" "$extproc_port"
start_envoy extproc "$run_dir/envoy-extproc.yaml" "$with_admin"

alone_url=http://127.0.0.1:$alone_port/v1/chat/completions
with_url=http://127.0.0.1:$with_port/v1/chat/completions
check_chat "Envoy alone" "$alone_url" ""
check_chat "Envoy + ext_proc" "$with_url" "x-sr-route"

targets=(alone extproc)
urls=("$alone_url" "$with_url")
if [[ $with_null != 0 ]]; then
  null_port=$(free_port)
  "$null_bin" "127.0.0.1:$null_port" ${null_flags[@]+"${null_flags[@]}"} >"$run_dir/null.out" 2>&1 &
  null_pid=$!
  pids+=("$null_pid")
  wait_tcp "extproc-null" "${pids[-1]}" "$null_port" 10
  null_envoy_port=$(free_port)
  null_admin=$(free_port)
  envoy_config "$run_dir/envoy-null.yaml" "$null_envoy_port" "$null_admin" "$null_port"
  start_envoy null "$run_dir/envoy-null.yaml" "$null_admin"
  null_url=http://127.0.0.1:$null_envoy_port/v1/chat/completions
  check_chat "Envoy + null processor" "$null_url" ""
  targets=(alone null extproc)
  urls=("$alone_url" "$null_url" "$with_url")
fi

# ---- load ----------------------------------------------------------------------------------
# profile NAME PID...: perf records PIDs for the load's duration (BENCH_PERF), in the background.
profile() {
  local name=$1 pid
  shift
  [[ -n ${BENCH_PERF:-} ]] || return 0
  mkdir -p "$BENCH_PERF"
  for pid in "$@"; do
    perf record -q -e cpu-clock -F 1999 -g -p "$pid" -o "$BENCH_PERF/$name-$pid.data" \
      -- sleep "$duration" >/dev/null 2>&1 &
    perfs+=($!)
  done
}
perfs=()

# load NAME URL [PID...]: a warm-up, then the measured run at $connections (PIDs profiled through
# it with BENCH_PERF); sets rps and errors.
load() {
  local name=$1 url=$2 out
  shift 2
  say "wrk $name: warm-up ${warmup}s, then -t$threads -c$connections -d${duration}s"
  wrk -t"$threads" -c"$connections" -d"${warmup}s" -s "$here/chat.lua" "$url" >/dev/null
  profile "$name" "$@"
  out=$(wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$here/chat.lua" "$url")
  printf '%s\n' "$out" >>"$run_dir/wrk-$name.txt"
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF }
    /Socket errors:/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' <<<"$out")
  [[ -n $rps ]] || die "cannot read wrk's output for $name: $out"
}

# single NAME URL: one connection, one request at a time; sets p50_1 and p99_1 (ms).
single() {
  local name=$1 url=$2 out
  say "wrk $name: one connection, ${single_duration}s"
  out=$(wrk -t1 -c1 -d"${single_duration}s" --latency -s "$here/chat.lua" "$url")
  printf '%s\n' "$out" >>"$run_dir/wrk-$name-single.txt"
  p50_1=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99_1=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  [[ -n $p50_1 && -n $p99_1 ]] || die "cannot read wrk's output for $name: $out"
}

# Alternating rounds, so that drift of the shared machine falls on every target alike. A row:
# round, then per target p50 p99 (one connection) rps errors (BENCH_CONNECTIONS).
rows=()
for ((round = 1; round <= rounds; round++)); do
  row=$round
  singles=()
  for i in "${!targets[@]}"; do
    single "${targets[i]}" "${urls[i]}"
    singles+=("$p50_1 $p99_1")
  done
  for i in "${!targets[@]}"; do
    profiled=()
    if ((round == 1)); then
      case ${targets[i]} in
        extproc) profiled=("$src_pid" "${envoy_pid[extproc]}") ;;
        null) profiled=("$null_pid" "${envoy_pid[null]}") ;;
      esac
    fi
    load "${targets[i]}" "${urls[i]}" "${profiled[@]}"
    row+=" ${singles[i]} $rps $errors"
  done
  rows+=("$row")
done

# ---- report --------------------------------------------------------------------------------
if ((${#perfs[@]})); then
  wait "${perfs[@]}" 2>/dev/null || true
  for data in "$BENCH_PERF"/*.data; do
    perf report -i "$data" --no-children --stdio -g none --sort dso,sym --percent-limit 0.3 >"${data%.data}.txt" 2>/dev/null || true
  done
  say "profiles in $BENCH_PERF"
fi
echo
echo "ext_proc benchmark: Envoy 1.40 --concurrency $envoy_concurrency, nginx upstream, $(nproc) cores, loopback"
echo "router: $src_bin; config: ${envoy_source#"$root/"}, ${grpc_client}_grpc client"
echo "one connection ${single_duration}s; wrk -t$threads -c$connections -d${duration}s after ${warmup}s warm-up"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-6s %-8s %10s %10s %10s %8s\n' round target p50_ms p99_ms req/s errors
for row in "${rows[@]}"; do
  read -r -a f <<<"$row"
  for i in "${!targets[@]}"; do
    printf '%-6s %-8s %10s %10s %10s %8s\n' "${f[0]}" "${targets[i]}" "${f[1 + 4 * i]}" "${f[2 + 4 * i]}" "${f[3 + 4 * i]}" "${f[4 + 4 * i]}"
  done
done
echo
# compare A B: what B adds over A at one connection, and B's throughput as a share of A's.
compare() {
  local a=$1 b=$2 label=$3 targets50=$4 targets99=$5 targetr=$6
  printf '%s\n' "${rows[@]}" | awk -v a="$a" -v b="$b" -v label="$label" \
    -v t50="$targets50" -v t99="$targets99" -v tr="$targetr" '{
      n++; d50 = $(2 + 4 * b) - $(2 + 4 * a); d99 += $(3 + 4 * b) - $(3 + 4 * a)
      s50 += d50; if (n == 1 || d50 < lo50) lo50 = d50; if (n == 1 || d50 > hi50) hi50 = d50
      ra += $(4 + 4 * a); rb += $(4 + 4 * b)
      r = $(4 + 4 * b) / $(4 + 4 * a); if (n == 1 || r < lor) lor = r; if (n == 1 || r > hir) hir = r
    } END {
      printf "%-22s added p50 %.3f ms (rounds %.3f..%.3f%s), added p99 %.3f ms%s, throughput %.3f (rounds %.3f..%.3f%s)\n",
        label, s50 / n, lo50, hi50, t50, d99 / n, t99, rb / ra, lor, hir, tr
    }'
}
index_of() {
  local i
  for i in "${!targets[@]}"; do [[ ${targets[i]} == "$1" ]] && echo "$i"; done
}
targets_note="; target <= 0.15 ms"
compare 0 "$(index_of extproc)" "src over alone:" "$targets_note" " (target <= 1 ms)" "; target >= 0.6"
if [[ $with_null != 0 ]]; then
  compare 0 "$(index_of null)" "null over alone:" "$targets_note" " (target <= 1 ms)" "; target >= 0.6"
  compare "$(index_of null)" "$(index_of extproc)" "src over null:" "" "" ""
fi

#!/usr/bin/env bash
# The external processor benchmark: what Envoy's ext_proc call to `src serve --extproc` adds.
# One fast upstream (proxy.sh's nginx answering a fixed chat completion), the same wrk load
# (proxy.sh's chat.lua) sent in one run through Envoy alone and through Envoy calling the router
# (the shipped deploy/envoy/fail-closed.yaml), on loopback. Prints p50/p99 at one connection,
# req/s at BENCH_CONNECTIONS connections, and the differences and ratio. Every process it starts
# is stopped on exit. Figures and targets: docs/benchmarks.md.
#
# Knobs (environment): BENCH_CONNECTIONS (16), BENCH_DURATION seconds (10), BENCH_THREADS (2),
# BENCH_WARMUP seconds (2), BENCH_SINGLE_DURATION seconds of the one-connection load (10),
# BENCH_ENVOY_CONCURRENCY Envoy worker threads (1), BENCH_ROUNDS alternating rounds (2),
# BENCH_KEEP=1 to keep the run folder, BENCH_SRC a built `src` binary to measure instead of
# building this checkout's, BENCH_ENVOY_CONFIG another ext_proc config in the shipped one's
# form (ports 10000, 9901, 8803, 8000), BENCH_GRPC_CLIENT=google for Envoy's `google_grpc`
# client instead of `envoy_grpc`. CARGO_TARGET_DIR is honoured.
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
envoy_source=${BENCH_ENVOY_CONFIG:-$root/deploy/envoy/fail-closed.yaml}
grpc_client=${BENCH_GRPC_CLIENT:-envoy}

bench_name=extproc.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

# ---- install -------------------------------------------------------------------------------
[[ -x $envoy_bin ]] || die "no Envoy at $envoy_bin: run scripts/setup.sh (or set ENVOY)"
need_apt=()
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || need_apt+=(nginx)
command -v wrk >/dev/null || need_apt+=(wrk)
if ((${#need_apt[@]})); then
  say "apt-get install ${need_apt[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)

# ---- build ---------------------------------------------------------------------------------
if [[ -n ${BENCH_SRC:-} ]]; then
  src_bin=$BENCH_SRC
else
  say "cargo build --release --bin src"
  cargo build --release --quiet --bin src
  src_bin=${CARGO_TARGET_DIR:-$root/target}/release/src
fi
[[ -x $src_bin ]] || die "no binary at $src_bin"

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

nginx_port=$(free_port)
sed -e "s|@RUN_DIR@|$run_dir|g" -e "s|@PORT@|$nginx_port|g" "$here/nginx.conf.in" >"$run_dir/nginx.conf"
"$nginx_bin" -c "$run_dir/nginx.conf" -e "$run_dir/nginx-error.log" >"$run_dir/nginx.out" 2>&1 &
pids+=($!)
wait_http nginx "${pids[-1]}" "http://127.0.0.1:$nginx_port/v1/models" 10

mkdir "$run_dir/policy"
sed -E "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" "$here/policy/policy.sr" >"$run_dir/policy/policy.sr"
src_port=$(free_port)
admin_port=$(free_port)
extproc_port=$(free_port)
"$src_bin" serve "$run_dir/policy" --listen "127.0.0.1:$src_port" --admin "127.0.0.1:$admin_port" \
  --extproc "127.0.0.1:$extproc_port" --no-watch >"$run_dir/src.out" 2>"$run_dir/src.log" &
src_pid=$!
pids+=("$src_pid")
wait_http "src serve" "$src_pid" "http://127.0.0.1:$src_port/readyz" 30

# envoy_config FILE LISTEN ADMIN [plain]: the shipped fail-closed config (or
# BENCH_ENVOY_CONFIG) on these ports; `plain` drops the ext_proc filter (Envoy alone, same
# listener, routes and cluster).
envoy_config() {
  local out=$1 listen=$2 admin=$3 plain=${4:-}
  sed -e "s|port_value: 10000|port_value: $listen|" -e "s|port_value: 9901|port_value: $admin|" \
    -e "s|port_value: 8803|port_value: $extproc_port|" -e "s|port_value: 8000|port_value: $nginx_port|" \
    -e "s|address: 0.0.0.0|address: 127.0.0.1|" \
    "$envoy_source" >"$out"
  if [[ $grpc_client == google ]]; then
    sed -i -e "s|envoy_grpc: { cluster_name: src_extproc }|google_grpc: { target_uri: \"127.0.0.1:$extproc_port\", stat_prefix: src_extproc }|" "$out"
    grep -q google_grpc "$out" || die "no envoy_grpc client to replace in $out"
  fi
  if [[ $plain == plain ]]; then
    awk '/- name: envoy.filters.http.ext_proc/ { skip = 1 }
         /- name: envoy.filters.http.router/ { skip = 0 }
         !skip' "$out" >"$out.tmp" && mv "$out.tmp" "$out"
    ! grep -q ext_proc.v3 "$out" || die "the ext_proc filter is still in $out"
  fi
}

start_envoy() {
  local name=$1 cfg=$2 admin=$3
  "$envoy_bin" -c "$cfg" --concurrency "$envoy_concurrency" --disable-hot-restart -l warning \
    >"$run_dir/envoy-$name.log" 2>&1 &
  pids+=($!)
  wait_http "Envoy ($name)" "${pids[-1]}" "http://127.0.0.1:$admin/ready" 30
}

alone_port=$(free_port)
alone_admin=$(free_port)
envoy_config "$run_dir/envoy-alone.yaml" "$alone_port" "$alone_admin" plain
start_envoy alone "$run_dir/envoy-alone.yaml" "$alone_admin"
with_port=$(free_port)
with_admin=$(free_port)
envoy_config "$run_dir/envoy-extproc.yaml" "$with_port" "$with_admin"
start_envoy extproc "$run_dir/envoy-extproc.yaml" "$with_admin"

alone_url=http://127.0.0.1:$alone_port/v1/chat/completions
with_url=http://127.0.0.1:$with_port/v1/chat/completions
check_chat "Envoy alone" "$alone_url" ""
check_chat "Envoy + ext_proc" "$with_url" "x-sr-route"

# ---- load ----------------------------------------------------------------------------------
# load NAME URL: a warm-up, then the measured run at $connections; sets rps and errors.
load() {
  local name=$1 url=$2 out
  say "wrk $name: warm-up ${warmup}s, then -t$threads -c$connections -d${duration}s"
  wrk -t"$threads" -c"$connections" -d"${warmup}s" -s "$here/chat.lua" "$url" >/dev/null
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

# Alternating rounds, so that drift of the shared machine falls on both targets alike.
rows=()
for ((round = 1; round <= rounds; round++)); do
  single alone "$alone_url"
  a1=("$p50_1" "$p99_1")
  single extproc "$with_url"
  w1=("$p50_1" "$p99_1")
  load alone "$alone_url"
  a=("$rps" "$errors")
  load extproc "$with_url"
  w=("$rps" "$errors")
  rows+=("$round ${a1[*]} ${w1[*]} ${a[*]} ${w[*]}")
done

# ---- report --------------------------------------------------------------------------------
echo
echo "ext_proc benchmark: Envoy 1.40 --concurrency $envoy_concurrency, nginx upstream, $(nproc) cores, loopback"
echo "router: $src_bin; config: ${envoy_source#"$root/"}, ${grpc_client}_grpc client"
echo "one connection ${single_duration}s; wrk -t$threads -c$connections -d${duration}s after ${warmup}s warm-up"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-6s %12s %12s %12s %12s %12s %12s %8s\n' round alone_p50 alone_p99 extproc_p50 extproc_p99 alone_rps extproc_rps errors
for row in "${rows[@]}"; do
  read -r n ap50 ap99 wp50 wp99 arps aerr wrps werr <<<"$row"
  printf '%-6s %12s %12s %12s %12s %12s %12s %8s\n' "$n" "$ap50" "$ap99" "$wp50" "$wp99" "$arps" "$wrps" "$((aerr + werr))"
done
echo
printf '%s\n' "${rows[@]}" | awk '{
    n++; ap50 += $2; ap99 += $3; wp50 += $4; wp99 += $5; arps += $6; wrps += $8
    if (n == 1 || $4 - $2 < lo50) lo50 = $4 - $2; if (n == 1 || $4 - $2 > hi50) hi50 = $4 - $2
    r = $8 / $6; if (n == 1 || r < lor) lor = r; if (n == 1 || r > hir) hir = r
  } END {
    printf "added p50, one connection  %.3f ms (rounds %.3f..%.3f; target <= 0.15 ms)\n", (wp50 - ap50) / n, lo50, hi50
    printf "added p99, one connection  %.3f ms (target <= 1 ms)\n", (wp99 - ap99) / n
    printf "throughput extproc/alone   %.3f (rounds %.3f..%.3f; target >= 0.6)\n", wrps / arps, lor, hir
  }'

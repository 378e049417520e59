#!/usr/bin/env bash
# The proxy load benchmark: one fast upstream (nginx answering a fixed chat completion), the same
# wrk load sent to it directly, through `src serve`, and through LiteLLM's proxy, in one run on
# loopback. Prints req/s, p50 and p99 for each, the ratios against the direct baseline of the
# same run, and `src serve`'s resident memory when idle. Every process it starts is stopped on
# exit. Figures and targets: docs/benchmarks.md.
#
# Two loads per target: a saturating one (BENCH_CONNECTIONS connections: throughput, and the
# latency that queueing behind it adds) and one connection at a time (the latency the proxy adds
# to a request, without queueing).
#
# Knobs (environment): BENCH_CONNECTIONS (16), BENCH_DURATION seconds (10), BENCH_THREADS (2),
# BENCH_WARMUP seconds (2), BENCH_SINGLE_DURATION seconds of the one-connection load (5),
# BENCH_LITELLM=0 to leave LiteLLM out, BENCH_LITELLM_WORKERS (1),
# BENCH_KEEP=1 to keep the run folder (configs and server logs). CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

connections=${BENCH_CONNECTIONS:-16}
duration=${BENCH_DURATION:-10}
threads=${BENCH_THREADS:-2}
warmup=${BENCH_WARMUP:-2}
single_duration=${BENCH_SINGLE_DURATION:-5}
with_litellm=${BENCH_LITELLM:-1}
litellm_workers=${BENCH_LITELLM_WORKERS:-1}
# A release whose `proxy` extra resolves on PyPI (the 1.108 to 1.110 releases tried pin companion
# packages PyPI does not have; 1.107.0 was withdrawn after a compromised upload).
litellm_version=1.106.12
venv=$root/.cache/venv-litellm

bench_name=proxy.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

# ---- install -------------------------------------------------------------------------------
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

if [[ $with_litellm == 1 ]]; then
  if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('litellm') != '$litellm_version')" 2>/dev/null; then
    say "LiteLLM proxy $litellm_version ($venv)"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "litellm[proxy]==$litellm_version"
  fi
fi

# ---- build ---------------------------------------------------------------------------------
say "cargo build --release --bin src"
cargo build --release --quiet --bin src
src_bin=${CARGO_TARGET_DIR:-$root/target}/release/src
[[ -x $src_bin ]] || die "no binary at $src_bin"

# ---- processes -----------------------------------------------------------------------------
start_run src-bench


# check_chat NAME URL [KEY]: the benchmark request must be answered with a chat completion, or
# the figures would measure an error path.
check_chat() {
  local name=$1 url=$2 key=${3:-} out
  local auth=()
  [[ -n $key ]] && auth=(-H "Authorization: Bearer $key")
  out=$(curl -sS --max-time 30 -w '\n%{http_code}' "${auth[@]}" -H 'Content-Type: application/json' \
    -d '{"model":"auto","messages":[{"role":"user","content":"my build fails with a compile error"}],"max_tokens":16}' \
    "$url") || die "$name: request failed"
  [[ ${out##*$'\n'} == 200 && $out == *chat.completion* ]] || die "$name answered: $out"
}

rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }

# The resident memory of a process and its children (LiteLLM's workers are children).
tree_rss_kib() {
  local total=0 pid
  for pid in $1 $(ps -o pid= --ppid "$1"); do
    total=$((total + $(rss_kib "$pid" 2>/dev/null || echo 0)))
  done
  echo "$total"
}

say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"

nginx_port=$(free_port)
sed -e "s|@RUN_DIR@|$run_dir|g" -e "s|@PORT@|$nginx_port|g" "$here/nginx.conf.in" >"$run_dir/nginx.conf"
"$nginx_bin" -c "$run_dir/nginx.conf" -e "$run_dir/nginx-error.log" >"$run_dir/nginx.out" 2>&1 &
pids+=($!)
wait_http nginx "${pids[-1]}" "http://127.0.0.1:$nginx_port/v1/models" 10
direct_url=http://127.0.0.1:$nginx_port/v1/chat/completions
check_chat nginx "$direct_url"

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
sleep 1
src_idle_rss=$(rss_kib "$src_pid")
check_chat "src serve" "$src_url"

litellm_key=""
if [[ $with_litellm == 1 ]]; then
  litellm_port=$(free_port)
  sed -e "s|@PORT@|$nginx_port|g" "$here/litellm.yaml.in" >"$run_dir/litellm.yaml"
  litellm_key="sk-bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
  LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_MASTER_KEY=$litellm_key \
    "$venv/bin/litellm" --config "$run_dir/litellm.yaml" --host 127.0.0.1 --port "$litellm_port" \
    --num_workers "$litellm_workers" >"$run_dir/litellm.log" 2>&1 &
  litellm_pid=$!
  pids+=("$litellm_pid")
  wait_http LiteLLM "$litellm_pid" "http://127.0.0.1:$litellm_port/health/liveliness" 180
  litellm_url=http://127.0.0.1:$litellm_port/v1/chat/completions
  check_chat LiteLLM "$litellm_url" "$litellm_key"
  litellm_idle_rss=$(tree_rss_kib "$litellm_pid")
fi

# ---- load ----------------------------------------------------------------------------------
# load NAME URL [KEY]: a warm-up, then the measured run; sets rps, p50, p99 (ms) and errors.
load() {
  local name=$1 url=$2 key=${3:-} out
  say "wrk $name: warm-up ${warmup}s, then -t$threads -c$connections -d${duration}s"
  BENCH_AUTH=$key wrk -t"$threads" -c"$connections" -d"${warmup}s" -s "$here/chat.lua" "$url" >/dev/null
  out=$(BENCH_AUTH=$key wrk -t"$threads" -c"$connections" -d"${duration}s" --latency -s "$here/chat.lua" "$url")
  printf '%s\n' "$out" >"$run_dir/wrk-$name.txt"
  rps=$(awk '/^Requests\/sec:/ { print $2 }' <<<"$out")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF }
    /Socket errors:/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' <<<"$out")
  [[ -n $rps && -n $p50 && -n $p99 ]] || die "cannot read wrk's output for $name: $out"
}

# single NAME URL: one connection, one request at a time; sets p50_1 and p99_1 (ms).
single() {
  local name=$1 url=$2 out
  say "wrk $name: one connection, ${single_duration}s"
  out=$(wrk -t1 -c1 -d"${single_duration}s" --latency -s "$here/chat.lua" "$url")
  printf '%s\n' "$out" >"$run_dir/wrk-$name-single.txt"
  p50_1=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
  p99_1=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
  [[ -n $p50_1 && -n $p99_1 ]] || die "cannot read wrk's output for $name: $out"
}

load direct "$direct_url"
direct=("$rps" "$p50" "$p99" "$errors")
single direct "$direct_url"
direct_single=("$p50_1" "$p99_1")
load src "$src_url"
src=("$rps" "$p50" "$p99" "$errors")
single src "$src_url"
src_single=("$p50_1" "$p99_1")
src_peak_rss=$(hwm_kib "$src_pid")
if [[ $with_litellm == 1 ]]; then
  load litellm "$litellm_url" "$litellm_key"
  litellm=("$rps" "$p50" "$p99" "$errors")
fi

# ---- report --------------------------------------------------------------------------------
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
echo
echo "proxy benchmark: wrk -t$threads -c$connections -d${duration}s (after ${warmup}s warm-up), $(nproc) cores, loopback"
echo "load average after: $load_after"
echo
printf '%-22s %12s %10s %10s %8s\n' target req/s p50_ms p99_ms errors
printf '%-22s %12s %10s %10s %8s\n' "nginx direct" "${direct[@]}"
printf '%-22s %12s %10s %10s %8s\n' "src serve" "${src[@]}"
[[ $with_litellm == 1 ]] && printf '%-22s %12s %10s %10s %8s\n' "LiteLLM proxy" "${litellm[@]}"
echo
echo "one connection:            p50_ms     p99_ms"
printf '%-22s %10s %10s\n' "nginx direct" "${direct_single[@]}"
printf '%-22s %10s %10s\n' "src serve" "${src_single[@]}"
echo
awk -v d="${direct[0]}" -v s="${src[0]}" -v dp50="${direct[1]}" -v sp50="${src[1]}" \
  -v dp99="${direct[2]}" -v sp99="${src[2]}" -v d1p50="${direct_single[0]}" \
  -v s1p50="${src_single[0]}" -v d1p99="${direct_single[1]}" -v s1p99="${src_single[1]}" 'BEGIN {
    printf "src/direct throughput      %.3f   (target >= 0.3)\n", s / d
    printf "added p50, one connection  %.3f ms (target <= 0.2 ms)\n", s1p50 - d1p50
    printf "added p99, one connection  %.3f ms (target <= 1 ms)\n", s1p99 - d1p99
    printf "added p50, saturated       %.3f ms\n", sp50 - dp50
    printf "added p99, saturated       %.3f ms\n", sp99 - dp99 }'
if [[ $with_litellm == 1 ]]; then
  awk -v s="${src[0]}" -v l="${litellm[0]}" -v dp50="${direct[1]}" -v lp50="${litellm[1]}" \
    -v dp99="${direct[2]}" -v lp99="${litellm[2]}" 'BEGIN {
    printf "src/LiteLLM throughput     %.1f   (target >= 100)\n", s / l
    printf "LiteLLM added p50, p99     %.3f ms, %.3f ms\n", lp50 - dp50, lp99 - dp99 }'
fi
awk -v i="$src_idle_rss" -v p="$src_peak_rss" 'BEGIN {
  printf "src serve idle RSS         %.1f MiB (target <= 30 MiB); peak under load %.1f MiB\n", i / 1024, p / 1024 }'
[[ $with_litellm == 1 ]] && awk -v l="$litellm_idle_rss" 'BEGIN {
  printf "LiteLLM idle RSS           %.1f MiB\n", l / 1024 }'
if ((direct[3] + src[3] > 0)) || [[ $with_litellm == 1 && ${litellm[3]} != 0 ]]; then
  echo "warning: some requests failed (errors column); the figures above count them" >&2
fi

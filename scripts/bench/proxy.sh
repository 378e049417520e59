#!/usr/bin/env bash
# The proxy load benchmark: `src serve` side by side with every proxy a user would put in its
# slot, in one run on loopback. One fast upstream (nginx answering a fixed chat completion), one
# streaming upstream (the built-in simulator with a fixed chunk schedule, `src sim`), the same
# wrk load sent, in this order, to:
#
#   direct (nginx itself; for streaming, the simulator itself)
#   nginx proxy_pass (2 workers, upstream keep-alive)     } the pass-through floor
#   Envoy pass-through (router filter only, --concurrency 2) }
#   src serve, the bench policy (scripts/bench/policy/policy.sr)
#   src serve, the bench policy with sessions on the memory store (a session id per wrk thread)
#   src serve, the same with sessions on Redis (a redis-server the script starts)
#   src serve, the bench policy with an ONNX guard model as a block (the model's own cost)
#   the Portkey gateway (npm @portkey-ai/gateway, Node)   } the peers users run today
#   LiteLLM's proxy (litellm[proxy])                      }
#
# Per target: req/s, p50/p99 and errors at BENCH_CONNECTIONS connections; p50/p99 at one
# connection; resident memory of all its processes when idle (VmRSS before the first request)
# and at peak (VmHWM after the loads); and on the streaming upstream the time to first token and
# the gaps between chunks (scripts/bench/sse.py), as added over the simulator direct. Then a soak
# of `src serve` (RSS sampled under load), optionally a perf profile of it under load attributed
# to kernel TCP / hyper / JSON / decision / logging (scripts/bench/perf_attrib.py), and one
# markdown table with the ratios against direct, nginx and Envoy and the targets
# (scripts/bench/proxy_report.py). Every process it starts is stopped on exit. Figures and
# targets: docs/benchmarks.md.
#
# Knobs (environment): BENCH_CONNECTIONS (16), BENCH_THREADS (2), BENCH_DURATION seconds per
# loaded run (5), BENCH_SINGLE_DURATION seconds of the one-connection run (5), BENCH_WARMUP
# seconds (2), BENCH_STREAMS streamed answers per target (30), BENCH_SOAK seconds (60; 0 skips),
# BENCH_PERF=0 to skip the profile, BENCH_PORTKEY=0 / BENCH_LITELLM=0 / BENCH_GUARD=0 to leave
# those rows out (a peer that cannot start is left out too, and the output says why),
# BENCH_LITELLM_WORKERS (1), BENCH_INSTALL=0 to skip scripts/bench/peers.sh (the idempotent
# install of nginx, wrk, redis-server, Envoy, Portkey, LiteLLM), BENCH_SRC a built `src` to
# measure instead of building this checkout's, BENCH_PROFILE the cargo profile to build it with
# (release; `dist` is the deployable build of docs/operations.md), BENCH_KEEP=1 to keep the run folder (configs,
# logs, wrk output, the profile). CARGO_TARGET_DIR is honoured; ORT_DYLIB_PATH defaults to the
# ONNX Runtime of scripts/models.sh. BENCH_PIN=0 not to pin the streaming probe (below).
#
# The streaming probe is pinned by default (two CPUs or more): the simulator alone on CPU 1, the
# target and the client on CPU 0, for every target alike. On a small shared host an unpinned
# probe measures where the scheduler put three processes more than the proxy: a target alone on
# a CPU that idles between events pays that CPU's wake-up twice a request, and on this project's
# 2-core VM that moved one build's added TTFT between +0.05 and +0.45 ms by placement alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

connections=${BENCH_CONNECTIONS:-16}
threads=${BENCH_THREADS:-2}
duration=${BENCH_DURATION:-5}
single_duration=${BENCH_SINGLE_DURATION:-5}
warmup=${BENCH_WARMUP:-2}
streams=${BENCH_STREAMS:-30}
soak=${BENCH_SOAK:-60}
with_perf=${BENCH_PERF:-1}
with_portkey=${BENCH_PORTKEY:-1}
with_litellm=${BENCH_LITELLM:-1}
with_guard=${BENCH_GUARD:-1}
litellm_workers=${BENCH_LITELLM_WORKERS:-1}
pin=${BENCH_PIN:-$(($(nproc) >= 2 ? 1 : 0))}
# The gateway listens on 8787 whatever its `--port` says.
portkey_port=8787

bench_name=proxy.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

# ---- install and build ---------------------------------------------------------------------
if [[ ${BENCH_INSTALL:-1} == 1 ]]; then
  BENCH_PORTKEY=$with_portkey BENCH_LITELLM=$with_litellm "$here/peers.sh"
fi
command -v wrk >/dev/null || die "wrk is missing (scripts/bench/peers.sh installs it)"
command -v redis-server >/dev/null || die "redis-server is missing (scripts/bench/peers.sh installs it)"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx_bin ]] || die "nginx is missing (scripts/bench/peers.sh installs it)"
envoy_bin=${ENVOY:-$root/.cache/venv-envoy/bin/envoy}
[[ -x $envoy_bin ]] || die "no Envoy at $envoy_bin (scripts/bench/peers.sh installs it)"
portkey_js=$root/.cache/portkey/node_modules/@portkey-ai/gateway/build/start-server.js
litellm_bin=$root/.cache/venv-litellm/bin/litellm
export ORT_DYLIB_PATH=${ORT_DYLIB_PATH:-$root/.cache/ort/lib/libonnxruntime.so.1.31.1}

built_src "${BENCH_PROFILE:-release}"

start_run src-bench
results=$run_dir/results.jsonl
notes=$run_dir/notes.txt
: >"$results"
: >"$notes"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
say "load average before: $load_before"

# note TEXT: a line for the report (skipped rows, extra figures).
note() { printf '%s\n' "$*" >>"$notes"; }

# skip NAME REASON: a row left out, said in the output.
skip() {
  say "skipping $1: $2"
  note "skipped: $1 — $2"
}

# stop PID: stops one process this script started and waits for it.
stop() {
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# tree_pids PID: a process and its children (nginx's and LiteLLM's workers).
tree_pids() {
  echo "$1" $(ps -o pid= --ppid "$1")
}

# tree_kib FIELD PID: the sum of a /proc status field (VmRSS, VmHWM) over tree_pids PID.
tree_kib() {
  local field=$1 total=0 pid value
  for pid in $(tree_pids "$2"); do
    value=$(awk -v f="$field:" '$1 == f { print $2 }' "/proc/$pid/status" 2>/dev/null || true)
    total=$((total + ${value:-0}))
  done
  echo "$total"
}

# pin_tree CPUS PID: every thread of a process and of its children onto CPUS.
pin_tree() {
  local cpus=$1 pid
  for pid in $(tree_pids "$2"); do
    taskset -a -p -c "$cpus" "$pid" >/dev/null 2>&1 || true
  done
}

# check_chat NAME URL: the benchmark request must be answered with a chat completion, or the
# figures would measure an error path. Sends $auth and $extra_headers like the loads do.
check_chat() {
  local name=$1 url=$2 out args=() hs header
  [[ -n $auth ]] && args+=(-H "Authorization: Bearer $auth")
  IFS=';' read -ra hs <<<"$extra_headers"
  for header in "${hs[@]}"; do
    [[ -n ${header// /} ]] && args+=(-H "${header# }")
  done
  out=$(curl -sS --max-time 30 -w '\n%{http_code}' "${args[@]}" -H 'Content-Type: application/json' \
    -d '{"model":"auto","messages":[{"role":"user","content":"my build fails with a compile error"}],"max_tokens":16}' \
    "$url") || die "$name: request failed"
  [[ ${out##*$'\n'} == 200 && $out == *chat.completion* ]] || die "$name answered: $out"
}

# wrk_run FILE ARGS...: wrk with the benchmark request and this target's headers.
wrk_run() {
  local file=$1
  shift
  BENCH_AUTH=$auth BENCH_HEADERS=$extra_headers BENCH_SESSION=$session \
    wrk "$@" --latency -s "$here/chat.lua" >"$file"
}

# wrk_figures FILE: "req/s p50_ms p99_ms errors requests" of a wrk output.
wrk_figures() {
  local rps p50 p99 errors requests
  rps=$(awk '/^Requests\/sec:/ { print $2 }' "$1")
  p50=$(to_ms "$(awk '$1 == "50%" { print $2 }' "$1")")
  p99=$(to_ms "$(awk '$1 == "99%" { print $2 }' "$1")")
  errors=$(awk '/Non-2xx or 3xx responses:/ { n += $NF }
    /Socket errors:/ { gsub(/,/, ""); n += $4 + $6 + $8 + $10 } END { print n + 0 }' "$1")
  requests=$(awk '/requests in/ { print $1 }' "$1")
  [[ -n $rps && -n $requests ]] || die "cannot read wrk's output $1: $(cat "$1")"
  echo "$rps $p50 $p99 $errors $requests"
}

# measure NAME LABEL URL STREAM_URL STREAM_MODEL PID: one row. Uses $auth, $extra_headers,
# $session and $stream_headers (an array of `name: value`).
measure() {
  local name=$1 label=$2 url=$3 stream_url=$4 stream_model=$5 pid=$6 idle peak many one args=()
  sleep 1
  idle=$(tree_kib VmRSS "$pid")
  check_chat "$label" "$url"
  say "$label: warm-up ${warmup}s, then wrk -t$threads -c$connections -d${duration}s and -t1 -c1 -d${single_duration}s"
  wrk_run "$run_dir/wrk-$name-warmup.txt" -t"$threads" -c"$connections" -d"${warmup}s" "$url"
  wrk_run "$run_dir/wrk-$name.txt" -t"$threads" -c"$connections" -d"${duration}s" "$url"
  many=$(wrk_figures "$run_dir/wrk-$name.txt")
  wrk_run "$run_dir/wrk-$name-single.txt" -t1 -c1 -d"${single_duration}s" "$url"
  one=$(wrk_figures "$run_dir/wrk-$name-single.txt")
  local header
  for header in "${stream_headers[@]}"; do
    args+=(--header "$header")
  done
  say "$label: $streams streamed answers"
  local client=()
  if [[ $pin == 1 ]]; then
    pin_tree 0 "$pid"
    client=(taskset -c 0)
  fi
  "${client[@]}" python3 "$here/sse.py" "$stream_url" --streams "$streams" --model "$stream_model" \
    "${args[@]}" >"$run_dir/sse-$name.json"
  if [[ $pin == 1 ]]; then
    pin_tree "0-$(($(nproc) - 1))" "$pid"
  fi
  peak=$(tree_kib VmHWM "$pid")
  read -r rps p50 p99 errors requests <<<"$many"
  read -r _ p50_1 p99_1 errors_1 requests_1 <<<"$one"
  printf '{"name":"%s","label":"%s","rps":%s,"p50":%s,"p99":%s,"errors":%s,"requests":%s,"p50_1":%s,"p99_1":%s,"errors_1":%s,"requests_1":%s,"idle_kib":%s,"peak_kib":%s,"stream":"%s"}\n' \
    "$name" "$label" "$rps" "$p50" "$p99" "$errors" "$requests" "$p50_1" "$p99_1" "$errors_1" \
    "$requests_1" "$idle" "$peak" "$run_dir/sse-$name.json" >>"$results"
  last_requests=$((requests + requests_1))
}

auth=""
extra_headers=""
session=0
stream_headers=()

# ---- upstreams -----------------------------------------------------------------------------
start_upstream

sim_port=$(free_port)
"$src_bin" sim --listen "127.0.0.1:$sim_port" --config "$here/sim.json" >"$run_dir/sim.log" 2>&1 &
pids+=($!)
wait_http "src sim" "${pids[-1]}" "http://127.0.0.1:$sim_port/v1/models" 30
if [[ $pin == 1 ]]; then
  command -v taskset >/dev/null || die "BENCH_PIN=1 needs taskset (util-linux)"
  pin_tree 1 "${pids[-1]}"
fi
sim_url=http://127.0.0.1:$sim_port/v1/chat/completions

# ---- direct --------------------------------------------------------------------------------
measure direct "direct (nginx; streaming: the simulator)" "http://127.0.0.1:$nginx_port/v1/chat/completions" \
  "$sim_url" bench-model "$nginx_pid"

# ---- nginx proxy_pass ----------------------------------------------------------------------
proxy_port=$(free_port)
proxy_stream_port=$(free_port)
sed -e "s|@RUN_DIR@|$run_dir|g" -e "s|@LISTEN@|127.0.0.1:$proxy_port|" \
  -e "s|@UPSTREAM@|127.0.0.1:$nginx_port|" -e "s|@STREAM_LISTEN@|127.0.0.1:$proxy_stream_port|" \
  -e "s|@STREAM_UPSTREAM@|127.0.0.1:$sim_port|" "$here/nginx-proxy.conf.in" >"$run_dir/nginx-proxy.conf"
"$nginx_bin" -c "$run_dir/nginx-proxy.conf" -e "$run_dir/nginx-proxy-error.log" >"$run_dir/nginx-proxy.out" 2>&1 &
pid=$!
pids+=("$pid")
wait_http "nginx proxy_pass" "$pid" "http://127.0.0.1:$proxy_port/v1/models" 10
measure nginx "nginx proxy_pass (2 workers)" "http://127.0.0.1:$proxy_port/v1/chat/completions" \
  "http://127.0.0.1:$proxy_stream_port/v1/chat/completions" bench-model "$pid"
stop "$pid"

# ---- Envoy ---------------------------------------------------------------------------------
envoy_port=$(free_port)
envoy_stream_port=$(free_port)
envoy_admin=$(free_port)
sed -e "s|@ADMIN@|$envoy_admin|" -e "s|@LISTEN@|$envoy_port|" -e "s|@UPSTREAM_PORT@|$nginx_port|" \
  -e "s|@STREAM_LISTEN@|$envoy_stream_port|" -e "s|@STREAM_PORT@|$sim_port|" \
  "$here/envoy-proxy.yaml.in" >"$run_dir/envoy.yaml"
"$envoy_bin" -c "$run_dir/envoy.yaml" --concurrency 2 --disable-hot-restart -l warning \
  >"$run_dir/envoy.log" 2>&1 &
pid=$!
pids+=("$pid")
wait_http Envoy "$pid" "http://127.0.0.1:$envoy_port/v1/models" 30
measure envoy "Envoy pass-through (--concurrency 2)" "http://127.0.0.1:$envoy_port/v1/chat/completions" \
  "http://127.0.0.1:$envoy_stream_port/v1/chat/completions" bench-model "$pid"
stop "$pid"

# ---- src serve -----------------------------------------------------------------------------
# policy DIR EXTRA: the bench policy bound to this run's upstreams (its `small` model, where the
# streaming request's default route goes, on the simulator), plus EXTRA declarations.
policy() {
  mkdir -p "$1"
  sed -E -e "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" \
    -e 's|^(model small +\{ backend = )upstream|\1stream|' "$here/policy/policy.sr" >"$1/policy.sr"
  grep -q 'backend = stream' "$1/policy.sr" || die "the bench policy has no \`model small\` to move"
  printf 'backend stream { url = "http://127.0.0.1:%s/v1" }\n%s\n' "$sim_port" "$2" >>"$1/policy.sr"
}

# start_src NAME: `src serve` on $run_dir/policy-NAME; sets src_pid and src_url.
start_src() {
  local port admin
  port=$(free_port)
  admin=$(free_port)
  "$src_bin" serve "$run_dir/policy-$1" --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" \
    --no-watch >"$run_dir/src-$1.out" 2>"$run_dir/src-$1.log" &
  src_pid=$!
  pids+=("$src_pid")
  wait_http "src serve ($1)" "$src_pid" "http://127.0.0.1:$port/readyz" 60
  src_url=http://127.0.0.1:$port/v1/chat/completions
}

policy "$run_dir/policy-bench" ""
start_src bench
measure src "src serve, bench policy" "$src_url" "$src_url" auto "$src_pid"

if ((soak > 0)); then
  say "src serve soak: wrk -c$connections for ${soak}s, RSS every 5 s"
  wrk_run "$run_dir/wrk-soak.txt" -t"$threads" -c"$connections" -d"${soak}s" "$src_url" &
  soak_wrk=$!
  samples=()
  for ((t = 0; t <= soak; t += 5)); do
    samples+=("$(tree_kib VmRSS "$src_pid")")
    ((t + 5 <= soak)) && sleep 5
  done
  wait "$soak_wrk"
  read -r soak_rps _ _ soak_errors _ <<<"$(wrk_figures "$run_dir/wrk-soak.txt")"
  note "soak: ${samples[*]}"
  note "soak_rps: $soak_rps"
  note "soak_errors: $soak_errors"
fi

if [[ $with_perf == 1 ]]; then
  if ! command -v perf >/dev/null; then
    skip "perf profile" "perf is not installed (Debian: linux-perf)"
  else
    say "perf record -e cpu-clock -F 1999 -g of src serve under wrk -c$connections for ${duration}s"
    # The load runs until the recording ends: perf takes seconds to start on a busy machine, and
    # a recording that outlived its load would profile an idle server.
    wrk -t"$threads" -c"$connections" -d"$((duration * 10 + 60))s" -s "$here/chat.lua" "$src_url" \
      >"$run_dir/wrk-perf.txt" &
    perf_wrk=$!
    sleep 1
    if perf record -e cpu-clock -F 1999 -g -p "$src_pid" -o "$run_dir/perf.data" -- sleep "$duration" \
      >"$run_dir/perf-record.log" 2>&1; then
      stop "$perf_wrk"
      perf script -i "$run_dir/perf.data" -F comm,ip,sym,dso 2>/dev/null |
        python3 "$here/perf_attrib.py" >"$run_dir/perf-attribution.md"
    else
      stop "$perf_wrk"
      skip "perf profile" "perf record failed: $(tail -1 "$run_dir/perf-record.log")"
    fi
  fi
fi
stop "$src_pid"

policy "$run_dir/policy-memory" 'session { store = memory }'
start_src memory
session=1
measure src_memory "src serve, sessions on memory" "$src_url" "$src_url" auto "$src_pid"
session=0
stop "$src_pid"

redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no \
  >"$run_dir/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 50); do
  redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break
  sleep 0.1
done
policy "$run_dir/policy-redis" "session { store = redis(\"redis://127.0.0.1:$redis_port\") }"
start_src redis
session=1
measure src_redis "src serve, sessions on Redis" "$src_url" "$src_url" auto "$src_pid"
session=0
redis-cli -p "$redis_port" info commandstats >"$run_dir/redis-commandstats.txt"
# Round trips per session call: Redis's MONITOR shows each command a client sent (`[0 ADDR]`)
# apart from those its scripts ran (`[0 lua]`), during a short one-connection load.
redis-cli -p "$redis_port" monitor >"$run_dir/redis-monitor.txt" &
monitor_pid=$!
sleep 0.5
session=1
wrk_run "$run_dir/wrk-src_redis-monitor.txt" -t1 -c1 -d2s "$src_url"
session=0
sleep 0.2
stop "$monitor_pid"
monitored=$(awk '/requests in/ { print $1 }' "$run_dir/wrk-src_redis-monitor.txt")
sent=$(grep -c '^[0-9.]* \[[0-9]* 127\.0\.0\.1:' "$run_dir/redis-monitor.txt" || true)
note "redis_round_trips_per_request: $(awk -v c="$sent" -v r="$monitored" 'BEGIN { printf "%.3f", c / r }')"
note "redis_rtt: $(python3 - "$redis_port" <<'EOF'
import socket, statistics, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
times = []
for _ in range(2000):
    start = time.perf_counter()
    s.sendall(b"PING\r\n")
    assert s.recv(64) == b"+PONG\r\n"
    times.append((time.perf_counter() - start) * 1000)
times.sort()
print(f"{times[len(times) // 2]:.4f} {times[int(len(times) * 0.99)]:.4f}")
EOF
)"
stop "$src_pid"
stop "$redis_pid"

if [[ $with_guard != 1 ]]; then
  skip "src serve, guard model" "BENCH_GUARD=0"
elif [[ ! -f $root/models/prompt_guard/model.onnx || ! -f $ORT_DYLIB_PATH ]]; then
  skip "src serve, guard model" "no models/prompt_guard or ONNX Runtime (run scripts/models.sh)"
else
  policy "$run_dir/policy-guard" "guard prompt_guard { path = \"$root/models/prompt_guard\" }
signal attack = prompt_guard(prompt)
block injection { when attack > 0.99  message = \"blocked by the prompt guard\" }"
  start_src guard
  measure src_guard "src serve, guard model (ONNX)" "$src_url" "$src_url" auto "$src_pid"
  stop "$src_pid"
fi

# ---- peers ---------------------------------------------------------------------------------
if [[ $with_portkey != 1 ]]; then
  skip "Portkey gateway" "BENCH_PORTKEY=0"
elif [[ ! -f $portkey_js ]]; then
  skip "Portkey gateway" "not installed at $portkey_js (scripts/bench/peers.sh)"
elif curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$portkey_port/"; then
  skip "Portkey gateway" "port $portkey_port, which it always listens on, is taken"
else
  node "$portkey_js" >"$run_dir/portkey.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  if ! ready_http "Portkey gateway" "$pid" "http://127.0.0.1:$portkey_port/" 60; then
    skip "Portkey gateway" "$not_ready"
  else
    auth=sk-bench-upstream
    extra_headers="x-portkey-provider: openai; x-portkey-custom-host: http://127.0.0.1:$nginx_port/v1"
    stream_headers=("Authorization: Bearer $auth" "x-portkey-provider: openai"
      "x-portkey-custom-host: http://127.0.0.1:$sim_port/v1")
    measure portkey "Portkey gateway 1.15.2" "http://127.0.0.1:$portkey_port/v1/chat/completions" \
      "http://127.0.0.1:$portkey_port/v1/chat/completions" bench-model "$pid"
    auth=""
    extra_headers=""
    stream_headers=()
  fi
  stop "$pid"
fi

if [[ $with_litellm != 1 ]]; then
  skip "LiteLLM proxy" "BENCH_LITELLM=0"
elif [[ ! -x $litellm_bin ]]; then
  skip "LiteLLM proxy" "not installed at $litellm_bin (scripts/bench/peers.sh)"
else
  litellm_port=$(free_port)
  sed -e "s|@PORT@|$nginx_port|g" -e "s|@STREAM_PORT@|$sim_port|g" "$here/litellm.yaml.in" \
    >"$run_dir/litellm.yaml"
  auth="sk-bench-$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')"
  LITELLM_LOCAL_MODEL_COST_MAP=True LITELLM_MASTER_KEY=$auth \
    "$litellm_bin" --config "$run_dir/litellm.yaml" --host 127.0.0.1 --port "$litellm_port" \
    --num_workers "$litellm_workers" >"$run_dir/litellm.log" 2>&1 &
  pid=$!
  pids+=("$pid")
  if ! ready_http LiteLLM "$pid" "http://127.0.0.1:$litellm_port/health/liveliness" 180; then
    skip "LiteLLM proxy" "$not_ready"
  else
    stream_headers=("Authorization: Bearer $auth")
    measure litellm "LiteLLM proxy" "http://127.0.0.1:$litellm_port/v1/chat/completions" \
      "http://127.0.0.1:$litellm_port/v1/chat/completions" stream "$pid"
    stream_headers=()
  fi
  auth=""
  stop "$pid"
fi

# ---- report --------------------------------------------------------------------------------
note "load_before: $load_before"
note "load_after: $(cut -d' ' -f1-3 /proc/loadavg)"
note "setup: wrk -t$threads -c$connections -d${duration}s and -t1 -c1 -d${single_duration}s after ${warmup}s warm-up; $streams streams$([[ $pin == 1 ]] && echo ' (pinned: simulator on CPU 1, target and client on CPU 0)'); $(nproc) cores; loopback"
python3 "$here/proxy_report.py" "$results" "$notes"
if [[ -f $run_dir/perf-attribution.md ]]; then
  echo
  echo "Where \`src serve\` (bench policy) spends its CPU under wrk -c$connections (perf, cpu-clock at 1999 Hz):"
  echo
  cat "$run_dir/perf-attribution.md"
fi

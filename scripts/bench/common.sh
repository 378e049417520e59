# Helpers the benchmark scripts share (sourced, not run): messages, the run folder with the
# processes started in it (all stopped on exit), free ports, readiness, and wrk's units.
# The sourcing script sets `bench_name` (its file name, for errors) first.

say() { printf '== %s\n' "$*" >&2; }
die() {
  printf '%s: %s\n' "$bench_name" "$*" >&2
  exit 1
}

# start_run PREFIX: a fresh run folder in $run_dir; every pid added to `pids` is stopped (and the
# folder removed unless BENCH_KEEP=1) when the script exits.
start_run() {
  run_dir=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  pids=()
  trap cleanup EXIT
  trap 'exit 130' INT TERM
}

cleanup() {
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  if [[ ${BENCH_KEEP:-0} == 1 ]]; then
    say "run folder kept: $run_dir"
  else
    rm -rf "$run_dir"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# wait_http NAME PID URL SECONDS: until URL answers 2xx, failing early if PID has exited.
wait_http() {
  ready_http "$@" || die "$not_ready"
}

# ready_http NAME PID URL SECONDS: wait_http for an optional peer, which a benchmark skips
# rather than stopping for: returns 1 with the reason in $not_ready.
ready_http() {
  local name=$1 pid=$2 url=$3 limit=$4 waited=0
  not_ready=""
  until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
    if ! kill -0 "$pid" 2>/dev/null; then
      not_ready="$name exited during start; its log is in $run_dir (BENCH_KEEP=1 keeps it)"
      return 1
    fi
    if ((waited++ >= limit * 5)); then
      not_ready="$name not ready after ${limit}s ($url)"
      return 1
    fi
    sleep 0.2
  done
}

# to_ms VALUE: wrk's latency (`93.00us`, `1.20ms`, `2.01s`) in milliseconds.
to_ms() {
  awk -v v="$1" 'BEGIN {
    n = v + 0; u = v; sub(/^[0-9.]+/, "", u)
    if (u == "us") n /= 1000; else if (u == "s") n *= 1000; else if (u == "m") n *= 60000
    printf "%.3f", n }'
}

# wait_tcp NAME PID PORT SECONDS: until 127.0.0.1:PORT accepts a connection, failing early if PID
# has exited.
wait_tcp() {
  local name=$1 pid=$2 port=$3 limit=$4 waited=0
  until python3 -c 'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 1).close()' "$port" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || die "$name exited during start; its log is in $run_dir (BENCH_KEEP=1 keeps it)"
    ((waited++ < limit * 5)) || die "$name not ready after ${limit}s (port $port)"
    sleep 0.2
  done
}

# ensure_apt PACKAGE...: installs, with apt-get, each package whose command of the same name is
# missing (on the PATH or in /usr/sbin).
ensure_apt() {
  local need=() p sudo_cmd=""
  for p in "$@"; do
    command -v "$p" >/dev/null || [[ -x /usr/sbin/$p ]] || need+=("$p")
  done
  ((${#need[@]})) || return 0
  say "apt-get install ${need[*]}"
  [[ $(id -u) -ne 0 ]] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need[@]}" >/dev/null
}

# start_upstream: the fixed-answer nginx of nginx.conf.in ($nginx_bin) on a free port; sets
# $nginx_port and $nginx_pid and waits until it answers.
start_upstream() {
  nginx_port=$(free_port)
  sed -e "s|@RUN_DIR@|$run_dir|g" -e "s|@PORT@|$nginx_port|g" "$here/nginx.conf.in" >"$run_dir/nginx.conf"
  "$nginx_bin" -c "$run_dir/nginx.conf" -e "$run_dir/nginx-error.log" >"$run_dir/nginx.out" 2>&1 &
  nginx_pid=$!
  pids+=("$nginx_pid")
  wait_http nginx "$nginx_pid" "http://127.0.0.1:$nginx_port/v1/models" 10
}

# built_src [PROFILE]: sets $src_bin to the `src` binary to measure: BENCH_SRC when set, else
# this checkout's, built with the cargo PROFILE (release; `debug` is cargo's dev profile).
built_src() {
  local profile=${1:-release} cargo_profile dir
  if [[ -n ${BENCH_SRC:-} ]]; then
    src_bin=$BENCH_SRC
  else
    cargo_profile=$profile dir=$profile
    [[ $profile == debug ]] && cargo_profile=dev
    say "cargo build --profile $cargo_profile --bin src"
    cargo build --profile "$cargo_profile" --quiet --bin src
    src_bin=${CARGO_TARGET_DIR:-$root/target}/$dir/src
  fi
  [[ -x $src_bin ]] || die "no binary at $src_bin"
}

#!/usr/bin/env bash
# The Messages translation benchmark: one fast OpenAI upstream (nginx answering a fixed chat
# completion, as in proxy.sh) behind one `src serve`, and the same conversation sent to it as a
# chat completion and as an Anthropic Messages request (translated to chat and back), one
# connection at a time, in one run on loopback. Prints p50 and p99 of each, of the upstream
# direct, and translation's share: per round, what Messages adds over chat as a share of what
# chat adds over direct (the medians of the rounds are reported). Every process it starts is
# stopped on exit.
# Figures and targets: docs/benchmarks.md.
#
# Knobs (environment): BENCH_SINGLE_DURATION seconds per load (1), BENCH_WARMUP seconds (1),
# BENCH_ROUNDS paired chat/Messages rounds (21; the medians are reported),
# BENCH_PROFILE (release; `debug` measures the debug build, for a machine without time for a
# release build), BENCH_SRC a built `src` binary to measure instead of building this checkout's,
# BENCH_PIN=0 not to pin the processes to CPUs (below), BENCH_KEEP=1 to keep the run folder.
# CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
here=$root/scripts/bench

duration=${BENCH_SINGLE_DURATION:-1}
warmup=${BENCH_WARMUP:-1}
rounds=${BENCH_ROUNDS:-21}

bench_name=messages.sh
# shellcheck source=scripts/bench/common.sh
source "$here/common.sh"

command -v wrk >/dev/null || die "wrk is missing (scripts/bench/proxy.sh installs it)"
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx_bin ]] || die "nginx is missing (scripts/bench/proxy.sh installs it)"

profile=${BENCH_PROFILE:-release}
built_src "$profile"

start_run src-bench-messages

# Pinned (the default with two CPUs or more; BENCH_PIN=0 turns it off): `src serve` on the
# second CPU, wrk and nginx on the first, so the scheduler does not move the three between
# cores from one round to the next, which on a small machine moves the figures more than
# translation does.
pin_src=()
if [[ ${BENCH_PIN:-$(($(nproc) >= 2 ? 1 : 0))} == 1 ]]; then
  command -v taskset >/dev/null || die "BENCH_PIN=1 needs taskset (util-linux)"
  (($(nproc) >= 2)) || die "BENCH_PIN=1 needs two CPUs"
  taskset -pc 0 $$ >/dev/null
  pin_src=(taskset -c 1)
fi


# check NAME URL SCRIPT EXPECT: the benchmark request is answered 200 with EXPECT in the body,
# or the figures would measure an error path.
check() {
  local name=$1 url=$2 script=$3 expect=$4 body out
  body=$(sed -n "s/^wrk.body = '\(.*\)'$/\1/p; s/^  \.\. '\(.*\)'$/\1/p" "$here/$script" | tr -d '\n')
  out=$(curl -sS --max-time 30 -w '\n%{http_code}' -H 'Content-Type: application/json' -d "$body" "$url") ||
    die "$name: request failed"
  [[ ${out##*$'\n'} == 200 && $out == *"$expect"* ]] || die "$name answered: $out"
}

# single NAME URL SCRIPT: one connection, one request at a time; prints "p50 p99 trimmed" (ms;
# trimmed: the mean of the percentiles 10 to 90, which the wrk scripts print through
# trimmed.lua).
single() {
  local name=$1 url=$2 script=$3 out
  wrk -t1 -c1 -d"${warmup}s" -s "$here/$script" "$url" >/dev/null
  out=$(wrk -t1 -c1 -d"${duration}s" --latency -s "$here/$script" "$url")
  printf '%s\n' "$out" >>"$run_dir/wrk-$name.txt"
  grep -q 'Non-2xx' <<<"$out" && die "$name: some requests failed: $out"
  echo "$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")") $(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")") $(awk '$1 == "trimmed_mean_ms" { print $2 }' <<<"$out")"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

say "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
start_upstream
direct_url=http://127.0.0.1:$nginx_port/v1/chat/completions

mkdir "$run_dir/policy"
sed -E "s|http://127\.0\.0\.1:[0-9]+/v1|http://127.0.0.1:$nginx_port/v1|" "$here/policy/policy.sr" >"$run_dir/policy/policy.sr"
src_port=$(free_port)
admin_port=$(free_port)
${pin_src[@]+"${pin_src[@]}"} "$src_bin" serve "$run_dir/policy" --listen "127.0.0.1:$src_port" --admin "127.0.0.1:$admin_port" \
  --no-watch >"$run_dir/src.out" 2>"$run_dir/src.log" &
pids+=($!)
wait_http "src serve" "${pids[-1]}" "http://127.0.0.1:$src_port/readyz" 30
chat_url=http://127.0.0.1:$src_port/v1/chat/completions
messages_url=http://127.0.0.1:$src_port/v1/messages
check "nginx" "$direct_url" chat.lua chat.completion
check "src chat" "$chat_url" chat.lua chat.completion
check "src messages" "$messages_url" messages.lua '"type":"message"'

: >"$run_dir/rounds"
for ((r = 1; r <= rounds; r++)); do
  say "round $r of $rounds: direct, chat, Messages (${duration}s each, one connection)"
  read -r d50 d99 dt < <(single direct "$direct_url" chat.lua)
  # Which of chat and Messages runs first alternates, so a drift of the machine's speed within
  # a round favours neither.
  if ((r % 2)); then
    read -r c50 c99 ct < <(single chat "$chat_url" chat.lua)
    read -r m50 m99 mt < <(single messages "$messages_url" messages.lua)
  else
    read -r m50 m99 mt < <(single messages "$messages_url" messages.lua)
    read -r c50 c99 ct < <(single chat "$chat_url" chat.lua)
  fi
  share() { awk -v d="$1" -v c="$2" -v m="$3" 'BEGIN { printf "%.4f", (c > d) ? (m - c) / (c - d) : 0 }'; }
  share50=$(share "$d50" "$c50" "$m50") share_t=$(share "$dt" "$ct" "$mt")
  echo "$d50 $d99 $c50 $c99 $m50 $m99 $share50 $dt $ct $mt $share_t" >>"$run_dir/rounds"
  say "round $r: p50 direct $d50, chat $c50, Messages $m50 ms (translation adds $share50 of what chat adds); trimmed mean $dt, $ct, $mt ms ($share_t)"
done
col() { awk -v c="$1" '{ print $c }' "$run_dir/rounds" | median; }
d50=$(col 1) d99=$(col 2) c50=$(col 3) c99=$(col 4) m50=$(col 5) m99=$(col 6) share=$(col 7)
dt=$(col 8) ct=$(col 9) mt=$(col 10) share_t=$(col 11)

echo
echo "Messages benchmark (${BENCH_SRC:-$profile build}): one connection, ${duration}s per load, median of $rounds rounds, $(nproc --all) cores${pin_src[0]:+ (src serve pinned to CPU 1, the rest to CPU 0)}, loopback"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
printf '%-26s %10s %10s %12s\n' target p50_ms p99_ms trimmed_ms
printf '%-26s %10s %10s %12s\n' "nginx direct" "$d50" "$d99" "$dt"
printf '%-26s %10s %10s %12s\n' "src serve, chat" "$c50" "$c99" "$ct"
printf '%-26s %10s %10s %12s\n' "src serve, Messages" "$m50" "$m99" "$mt"
echo
awk -v d50="$d50" -v c50="$c50" -v m50="$m50" -v c99="$c99" -v m99="$m99" -v share="$share" \
  -v share_t="$share_t" 'BEGIN {
  printf "added over direct p50      chat %.3f ms, Messages %.3f ms\n", c50 - d50, m50 - d50
  printf "translation share, p50     %+.3f of what chat adds (median of the rounds; target <= +0.10)\n", share
  printf "translation share, trimmed %+.3f of what chat adds (median of the rounds; target <= +0.10)\n", share_t
  printf "Messages/chat p50          %.3f\n", m50 / c50
  printf "Messages/chat p99          %.3f\n", m99 / c99 }'

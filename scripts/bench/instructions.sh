#!/usr/bin/env bash
# Instructions per routed request, counted by valgrind's callgrind: a figure that does not move
# with the load of a shared machine, for comparing two builds of the router when wall-clock
# medians are too noisy to tell a few microseconds apart (docs/benchmarks.md).
#
# Usage: scripts/bench/instructions.sh [BENCH_BINARY...]
#   Each argument is a built `proxy` criterion bench of src-runtime (for another commit: build it
#   in a worktree with `cargo bench -p src-runtime --bench proxy --no-run` and pass the
#   executable it prints). Without arguments the bench of this checkout is built and measured.
#
# BENCH_ID picks another bench of the same binary (`redact_five_entities/through_router`,
# `redact_five_entities/redacted_through_router`: docs/benchmarks.md, "Redaction's share";
# `chat_completion/messages_through_router`: a Messages request translated for a chat backend;
# `chat_completion/responses_through_router`: the same conversation as a Responses request from a
# client without a key; `chat_completion/responses_kept_through_router`: from one with a key, its
# answer kept in the response store).
#
# BENCH_FUNCTIONS names functions (comma-separated, as callgrind_annotate prints them, a regex
# each) whose inclusive count per request is reported after the router's: parts of a request
# that run outside its handler, such as the request's report when its answer ends
# (`src_runtime::relay::completion::Completion::report`).
#
# BENCH_EXCLUDE names functions (comma-separated regexes) whose inclusive count is taken out of
# the handler's before it is divided: work the bench does once, outside what it measures. For
# the `chat_completion` benches it defaults to the redaction of the bench's own check of the
# redacting routes, which runs once after the measured bench and whose first call builds
# libphonenumber's database (about 620 million instructions, otherwise spread over however many
# requests the run made).
#
# BENCH_KEEP names a folder that keeps each run's callgrind output (`NAME.RUN.out`), for
# `callgrind_annotate --inclusive=yes --tree=calling` to show where the instructions go.
#
# For each binary the chat `through_router` bench (alone: a plain filter would also match
# `messages_through_router`, whose requests cost more and would mix into the average in
# proportions that differ from run to run) runs under callgrind for BENCH_PROFILE_SECONDS (20)
# of its own time. The router's share is the inclusive count of its request handler, divided by
# the requests the simulator behind it parsed; the whole process (client, router, simulator) is
# reported too, setup included.
set -euo pipefail
# shellcheck source=scripts/bench/callgrind.sh
. "$(dirname "$0")/callgrind.sh"
seconds=${BENCH_PROFILE_SECONDS:-20}
id=${BENCH_ID:-chat_completion/through_router}

bench_binaries proxy "$@"

IFS=, read -r -a functions <<<"${BENCH_FUNCTIONS:-}"
case $id in
  chat_completion/*) default_exclude='src_runtime::pipeline::redact::redact_body' ;;
  *) default_exclude='' ;;
esac
IFS=, read -r -a excluded <<<"${BENCH_EXCLUDE-$default_exclude}"
printf '%-60s %12s %14s %14s' binary requests 'router/req' 'process/req'
for f in "${functions[@]}"; do printf ' %14s' "$(basename "${f//:://}")"; done
printf '\n'
run=0
for bin in "${binaries[@]}"; do
  run=$((run + 1))
  profile "$bin" "$run" "$id" "$seconds"
  # One upstream request per routed request: the simulator parses each once.
  requests=$(calls 'sim::request::GenerateRequest::parse')
  # The API listener's handler future, polled from the server's connection task: the route
  # match and everything a proxied request does (the door driver is inlined into it). Builds
  # without that function are measured at their request handler (`pipeline::handle`, or
  # `proxy::handle` in the oldest).
  router=$(count 'src_runtime::server::routes::api::\{\{closure\}\}')
  [ -n "$router" ] || router=$(count 'src_runtime::(pipeline|proxy)::handle::\{\{closure\}\}')
  if [ "${requests:-0}" -eq 0 ] || [ -z "$router" ]; then
    echo "$bin: no routed requests counted" >&2
    exit 1
  fi
  for f in "${excluded[@]}"; do
    spent=$(count "$f")
    router=$((router - ${spent:-0}))
  done
  printf '%-60s %12d %14d %14d' "$(basename "$bin")" "$requests" "$(per "$router" "$requests")" "$(per "$total" "$requests")"
  for f in "${functions[@]}"; do
    printf ' %14d' "$(per "$(count "$f")" "$requests")"
  done
  printf '\n'
  keep
done

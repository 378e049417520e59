#!/usr/bin/env bash
# Instructions per external-processing exchange, counted by valgrind's callgrind: the
# `extproc_exchange/routed` bench of src-runtime (a tonic client speaking to an in-process
# `src serve --extproc` as Envoy does: request headers, the buffered body, the response's
# headers, one stream per request), for comparing two builds when wall-clock figures are too
# noisy (docs/benchmarks.md, "Instructions a request, round 3").
#
# Usage: scripts/bench/extproc_instructions.sh [BENCH_BINARY...]
#   Each argument is a built `extproc` criterion bench of src-runtime (`cargo bench -p
#   src-runtime --bench extproc --no-run` prints it). Without arguments this checkout's is built.
#
# For each binary, per exchange (the exchanges are counted by the processor's answers to the
# response's headers, one an exchange): the whole process (the client included, set-up spread
# over the exchanges), the processor's stream of answers (reading each message, deciding,
# answering; `Answers::poll_next` and the stream's start), the protobuf decoding of Envoy's
# messages, the gRPC encoding of the answers (which polls the stream of answers, so it includes
# it), the decision, and the bytes the process copies (`memcpy`). BENCH_ID picks another bench
# of the binary (`extproc_exchange/full_duplex`); BENCH_KEEP keeps the callgrind outputs.
set -euo pipefail
# shellcheck source=scripts/bench/callgrind.sh
. "$(dirname "$0")/callgrind.sh"
seconds=${BENCH_PROFILE_SECONDS:-10}
id=${BENCH_ID:-extproc_exchange/routed}

bench_binaries extproc "$@"

printf '%-32s %9s %10s %10s %10s %10s %10s %10s\n' binary exchanges process stream decode encode decision memcpy
run=0
for bin in "${binaries[@]}"; do
  run=$((run + 1))
  profile "$bin" "$run" "$id" "$seconds" --threshold=100
  exchanges=$(calls 'extproc::exchange::Exchange::response_headers')
  if [ "${exchanges:-0}" -eq 0 ]; then
    echo "$bin: no exchanges counted" >&2
    exit 1
  fi
  stream=$(( $(count 'src_runtime::extproc::Answers as futures_core::stream::Stream>::poll_next') +
    $(count 'ExternalProcessor>::process::\{\{closure\}\}') ))
  decode=$(count 'ProstDecoder<U> as tonic::codec::Decoder>::decode')
  encode=$(count 'tonic::codec::encode::EncodeBody<T,U> as http_body::Body>::poll_frame')
  decision=$(count 'src_runtime::extproc::exchange::Exchange::decided::\{\{closure\}\}')
  copied=$(count '__memcpy_avx_unaligned_erms')
  printf '%-32s %9d %10d %10d %10d %10d %10d %10d\n' "$(basename "$bin")" "$exchanges" \
    "$(per "$total" "$exchanges")" "$(per "$stream" "$exchanges")" "$(per "$decode" "$exchanges")" \
    "$(per "$encode" "$exchanges")" "$(per "$decision" "$exchanges")" "$(per "$copied" "$exchanges")"
  keep
done

#!/usr/bin/env bash
# Fuzzing the readers of untrusted input: `.sr` text (policy), request bodies (request),
# upstream event streams (sse), Envoy's `ext_proc` messages (extproc) and text folding (text). The properties live in the workspace's tests and are shared
# with the coverage-guided targets under fuzz/ (see docs/operations.md, "Fuzzing").
#
# Usage:
#   scripts/fuzz.sh replay            stable, seconds: the property tests, which also replay every
#                                     committed input under fuzz/corpus/ (cargo test runs them too)
#   scripts/fuzz.sh run [RUNS] [T..]  nightly + cargo-fuzz: each target (default all) for RUNS
#                                     inputs (default 1000000); new inputs go to fuzz/corpus/T/,
#                                     a crash to fuzz/artifacts/T/
#   scripts/fuzz.sh merge [T..]       shrink each committed corpus to a set with the same coverage
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(policy request sse extproc text)
target_dir="${CARGO_TARGET_DIR:-target}/fuzz"
bin="$target_dir/x86_64-unknown-linux-gnu/release"

# Seeds besides a target's own corpus, read but never written.
seeds() {
  case "$1" in
    policy) echo policies examples tests/corpus ;;
    *) ;;
  esac
}

build() {
  (cd fuzz && cargo +nightly fuzz build --sanitizer none --debug-assertions \
    --target-dir "../$target_dir" "$@")
}

case "${1:-replay}" in
  replay)
    cargo test --locked -p src-compiler --test fuzz_policy --test fuzz_request --test fuzz_text
    cargo test --locked -p src-runtime --test fuzz_readers
    ;;
  run)
    runs="${2:-1000000}"
    shift $(($# < 2 ? $# : 2))
    [ $# -gt 0 ] && targets=("$@")
    build
    for t in "${targets[@]}"; do
      echo "== $t: $runs inputs"
      mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t"
      # shellcheck disable=SC2046
      "$bin/$t" -runs="$runs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="fuzz/artifacts/$t/" "fuzz/corpus/$t" $(seeds "$t")
    done
    ;;
  merge)
    shift
    [ $# -gt 0 ] && targets=("$@")
    build
    for t in "${targets[@]}"; do
      kept="$(mktemp -d)"
      "$bin/$t" -set_cover_merge=1 -max_len=8192 "$kept" "fuzz/corpus/$t"
      rm -rf "fuzz/corpus/$t"
      mv "$kept" "fuzz/corpus/$t"
    done
    ;;
  *)
    sed -n '2,13p' "$0"
    exit 2
    ;;
esac

#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine and runs all of them.
# Usage: scripts/test.sh   (CI runs exactly this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== build"
cargo build --workspace --locked --all-targets

echo "== unit, corpus, property and end-to-end tests"
cargo test --workspace --locked

echo "== shipped policies and examples"
src=target/debug/src
for policy in policies/*/ examples/*/; do
  "$src" check "$policy"
  "$src" test "$policy"
done
"$src" fmt --check policies examples

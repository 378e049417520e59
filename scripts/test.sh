#!/usr/bin/env bash
# Sets up everything the tests need on a fresh machine and runs all of them.
# Usage: scripts/test.sh   (CI runs exactly this through .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/setup.sh
# ONNX Runtime from the PyPI wheel that scripts/models.sh unpacked (see docs/models.md).
export ORT_DYLIB_PATH="$PWD/.cache/ort/lib/libonnxruntime.so.1.31.1"

echo "== build"
# Benchmarks are type-checked by clippy (--all-targets) and built by `cargo bench`; linking them
# here too would add a dozen large binaries that no test runs.
cargo build --workspace --locked --bins --tests --examples

echo "== unit, corpus, property and end-to-end tests"
# This includes the short fuzz run: the fuzz properties with small case counts and every input
# kept under fuzz/corpus/ (`scripts/fuzz.sh replay` runs just those; `run` is the long search).
cargo test --workspace --locked

src="${CARGO_TARGET_DIR:-target}/debug/src"
echo "== shipped policies and examples"
# Every directory that holds `.sr` files is a policy (examples nest some, e.g. eval arms).
while read -r policy; do
  "$src" check "$policy"
  "$src" test "$policy"
done < <(find policies examples -name '*.sr' -printf '%h\n' | sort -u)
"$src" fmt --check policies examples
# The calibration example (docs/calibrate.md) on the real models; a few seconds, nothing written.
"$src" calibrate examples/calibrate --labelled examples/calibrate/labelled.jsonl --holdout 0.4 >/dev/null
# The cache threshold fitted on the shipped question pairs (docs/calibrate.md, `--pairs`).
"$src" calibrate examples/cache --pairs examples/cache/pairs.jsonl >/dev/null

echo "== the official openai client against src serve"
tests/e2e/openai_client.sh "$src" .cache/venv-e2e/bin/python

echo "== the official openai client continuing a conversation across a model switch"
tests/e2e/responses_client.sh "$src" .cache/venv-e2e/bin/python

echo "== schemathesis against src serve, from docs/openapi.yaml"
tests/e2e/schemathesis.sh "$src" .cache/venv-schemathesis/bin/schemathesis

echo "== the official anthropic client against src serve (/v1/messages)"
tests/e2e/anthropic_client.sh "$src" .cache/venv-anthropic/bin/python

echo "== the operator console in headless Chromium against src serve"
# Screenshots of each view are kept as CI artifacts under target/console/.
tests/e2e/console.sh "$src" target/console

echo "== src serve in front of a real NVIDIA Dynamo frontend"
tests/e2e/dynamo/run.sh "$src"

echo "== Neovim as a real editor client of src lsp"
SRC_BIN="$src" tests/e2e/nvim/run.sh

echo "== src serve with ONNX models agrees with the Python reference"
.cache/venv-models/bin/python tests/e2e/parity.py "$src"

echo "== disk used by the build and the test tools"
du -sh "${CARGO_TARGET_DIR:-target}" .cache 2>/dev/null || true

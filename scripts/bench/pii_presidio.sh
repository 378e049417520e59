#!/usr/bin/env bash
# Personal data detection quality and speed against Presidio: scores the built-in recognizers
# (the `pii_labelled` example of src-compiler, every type on) and Presidio's pattern
# recognizers on the labelled set tests/data/pii/labelled.jsonl, per type, span-exact, and
# times both over the set in the same run. Prints a Markdown table, the speed ratio and the
# machine's load. Figures: docs/benchmarks.md, "Personal data detection quality".
#
# `presidio-analyzer` (pinned) is installed on first use into its own environment
# ($PRESIDIO_VENV, default .cache/venv-presidio): it pulls in spaCy and weighs about 400 MB, so
# scripts/setup.sh leaves it out and CI does not run this. No spaCy model is needed (see
# pii_presidio.py).
#
# Knobs (environment): BENCH_PASSES timed passes of ours (200), BENCH_PRESIDIO_PASSES of
# Presidio's (5), BENCH_OVERLAP=1 for overlap-matched columns too, BENCH_MISTAKES=1 to list
# Presidio's mistakes. CARGO_TARGET_DIR is honoured.
set -euo pipefail
cd "$(dirname "$0")/../.."

venv=${PRESIDIO_VENV:-.cache/venv-presidio}
set_file=tests/data/pii/labelled.jsonl

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import presidio_analyzer' 2>/dev/null; then
  echo "== Presidio environment ($venv)" >&2
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check 'presidio-analyzer==2.2.366'
fi

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
echo "== building the recognizers' example (release)" >&2
cargo build --quiet --release -p src-compiler --example pii_labelled
target=${CARGO_TARGET_DIR:-target}
ours=$(mktemp "${TMPDIR:-/tmp}/pii_ours.XXXXXX.json")
trap 'rm -f "$ours"' EXIT
"$target/release/examples/pii_labelled" "$set_file" "${BENCH_PASSES:-200}" >"$ours"

args=(--set "$set_file" --ours "$ours" --passes "${BENCH_PRESIDIO_PASSES:-5}")
[[ ${BENCH_OVERLAP:-0} == 1 ]] && args+=(--overlap)
[[ ${BENCH_MISTAKES:-0} == 1 ]] && args+=(--mistakes)
"$venv/bin/python" scripts/bench/pii_presidio.py "${args[@]}"
echo
echo "Machine: $(nproc) cores; load average $load_before at the start, $(cut -d' ' -f1-3 /proc/loadavg) at the end."

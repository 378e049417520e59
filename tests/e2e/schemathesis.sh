#!/usr/bin/env bash
# Runs schemathesis against a fresh `src serve examples/quickstart` (the built-in simulator
# answers) with the OpenAPI description in docs/openapi.yaml, then stops the server.
# Usage: tests/e2e/schemathesis.sh [SRC_BINARY] [SCHEMATHESIS]
#        (defaults: target/debug/src, and the environment scripts/setup.sh makes)
#
# Checks: every check but `positive_data_acceptance`, i.e. no 5xx answer, every status, content
# type, header and body as described, schema-invalid input refused with a 4xx, and the
# unsupported methods of each path refused with 405. `positive_data_acceptance` (every
# schema-valid request is a 2xx) is left out: the router also refuses requests its policy
# refuses (a `block`, an unknown `model`), which a schema cannot say. Bounded: 30 examples per
# operation.
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/e2e/lib.sh
src=${1:-target/debug/src}
st=${2:-.cache/venv-schemathesis/bin/schemathesis}
python=$(dirname "$st")/python

read -r api admin < <(free_ports "$python" 2)

log=$(mktemp)
report=$(mktemp -d)
"$src" serve examples/quickstart --listen "127.0.0.1:$api" --admin "127.0.0.1:$admin" \
  --no-watch 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$log" "$report"' EXIT

wait_ready "$python" "$api"

if ! "$st" run docs/openapi.yaml --url "http://127.0.0.1:$api" \
  --checks all --exclude-checks positive_data_acceptance \
  --max-examples 30 --seed 1 --workers 1 --report-dir "$report" \
  --suppress-health-check all; then
  echo "--- src serve log (last 40 lines)" >&2
  tail -n 40 "$log" >&2
  exit 1
fi

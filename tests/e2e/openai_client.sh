#!/usr/bin/env bash
# Runs the official `openai` Python client (tests/e2e/openai_client.py) against a fresh
# `src serve examples/quickstart` on free loopback ports, then stops the server.
# Usage: tests/e2e/openai_client.sh [SRC_BINARY] [PYTHON]
#        (defaults: target/debug/src, and the client environment scripts/setup.sh makes)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/e2e/lib.sh
src=${1:-target/debug/src}
python=${2:-.cache/venv-e2e/bin/python}

read -r api admin < <(free_ports "$python" 2)

log=$(mktemp)
"$src" serve examples/quickstart --listen "127.0.0.1:$api" --admin "127.0.0.1:$admin" \
  --no-watch 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT

wait_ready "$python" "$api"

if ! "$python" tests/e2e/openai_client.py "http://127.0.0.1:$api/v1"; then
  echo "--- src serve log (last 40 lines)" >&2
  tail -n 40 "$log" >&2
  exit 1
fi

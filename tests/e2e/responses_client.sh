#!/usr/bin/env bash
# Runs the official `openai` Python client (tests/e2e/responses_client.py) against a fresh
# `src serve` in front of two `src sim` backends on free loopback ports, with a policy that moves
# a conversation to the second backend on `x-move: yes`; then stops all three.
# Usage: tests/e2e/responses_client.sh [SRC_BINARY] [PYTHON]
#        (defaults: target/debug/src, and the client environment scripts/setup.sh makes)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/e2e/lib.sh
src=${1:-target/debug/src}
python=${2:-.cache/venv-e2e/bin/python}

read -r api admin sim_a sim_b < <(free_ports "$python" 4)

dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

"$src" sim --listen "127.0.0.1:$sim_a" --model model-a 2>"$dir/sim-a.log" &
pids+=($!)
"$src" sim --listen "127.0.0.1:$sim_b" --model model-b 2>"$dir/sim-b.log" &
pids+=($!)
mkdir "$dir/policy"
cat >"$dir/policy/policy.sr" <<EOF_SR
backend a { url = "http://127.0.0.1:$sim_a/v1" }
backend b { url = "http://127.0.0.1:$sim_b/v1" }
model first  { backend = a  serves = "model-a" }
model second { backend = b  serves = "model-b" }
route moved priority 10 { when header("x-move") == "yes"  to second }
route default { to first }
EOF_SR
"$src" serve "$dir/policy" --listen "127.0.0.1:$api" --admin "127.0.0.1:$admin" \
  --no-watch 2>"$dir/serve.log" &
pids+=($!)

wait_ready "$python" "$api"

if ! "$python" tests/e2e/responses_client.py "http://127.0.0.1:$api/v1" \
  "http://127.0.0.1:$sim_a" "http://127.0.0.1:$sim_b"; then
  echo "--- src serve log (last 40 lines)" >&2
  tail -n 40 "$dir/serve.log" >&2
  exit 1
fi

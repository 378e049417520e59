#!/usr/bin/env bash
# Runs the official `openai` Python client against a real `src serve` of the quickstart policy.
# Usage: tests/e2e/openai.sh SRC_BINARY PYTHON
set -euo pipefail
src=$1
python=$2
cd "$(dirname "$0")/../.."

free_port() { "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
port=$(free_port)
admin=$(free_port)
log=$(mktemp)
"$src" serve examples/quickstart --listen "127.0.0.1:$port" --admin "127.0.0.1:$admin" --no-watch 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -f "$log"' EXIT

for _ in $(seq 1 100); do
  if "$python" -c "import urllib.request,sys; urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=1)" 2>/dev/null; then
    break
  fi
  if ! kill -0 $pid 2>/dev/null; then
    echo "src serve exited early:"; cat "$log"; exit 1
  fi
  sleep 0.1
done

"$python" tests/e2e/openai_client.py "http://127.0.0.1:$port/v1"

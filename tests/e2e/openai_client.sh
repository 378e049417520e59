#!/usr/bin/env bash
# Runs the official `openai` Python client (tests/e2e/openai_client.py) against a fresh
# `src serve examples/quickstart` on free loopback ports, then stops the server.
# Usage: tests/e2e/openai_client.sh [SRC_BINARY] [PYTHON]
#        (defaults: target/debug/src, and the client environment scripts/setup.sh makes)
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${1:-target/debug/src}
python=${2:-.cache/venv-e2e/bin/python}

read -r api admin < <("$python" - <<'EOF'
import socket
ports = []
sockets = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    sockets.append(s)
    ports.append(s.getsockname()[1])
print(*ports)
EOF
)

log=$(mktemp)
"$src" serve examples/quickstart --listen "127.0.0.1:$api" --admin "127.0.0.1:$admin" \
  --no-watch 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -f "$log"' EXIT

"$python" - "$api" <<'EOF'
import sys, time, urllib.request
url = f"http://127.0.0.1:{sys.argv[1]}/readyz"
for _ in range(300):
    try:
        with urllib.request.urlopen(url, timeout=1) as r:
            if r.status == 200:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.1)
print("src serve never became ready", file=sys.stderr)
sys.exit(1)
EOF

if ! "$python" tests/e2e/openai_client.py "http://127.0.0.1:$api/v1"; then
  echo "--- src serve log (last 40 lines)" >&2
  tail -n 40 "$log" >&2
  exit 1
fi

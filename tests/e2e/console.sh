#!/usr/bin/env bash
# Opens the operator console in headless Chromium against a fresh `src serve` of a copy of
# examples/quickstart (simulated backends), sends traffic, and asserts on the page
# (tests/e2e/console.py). Screenshots of each view land in SHOTS.
# Usage: tests/e2e/console.sh [SRC_BINARY] [SHOTS]
#        (defaults: target/debug/src, target/console)
set -euo pipefail
cd "$(dirname "$0")/../.."
source tests/e2e/lib.sh
src=$(realpath "${1:-target/debug/src}")
shots=${2:-target/console}
python=python3

read -r api admin driver < <(free_ports "$python" 3)
work=$(mktemp -d)
cp examples/quickstart/policy.sr "$work/policy.sr"
# Budgets for the console's budgets view.
cat >>"$work/policy.sr" <<'SR'

budget per_key { per = tenant  window = 1h  requests = 50 }
budget tokens_seen { per = tenant  window = 1d  tokens = 1M  exceeded = observe }
SR

log="$work/serve.log"
"$src" serve "$work" --listen "127.0.0.1:$api" --admin "127.0.0.1:$admin" 2>"$log" &
pid=$!
chromedriver --port="$driver" >"$work/driver.log" 2>&1 &
driver_pid=$!
trap 'kill "$pid" "$driver_pid" 2>/dev/null || true; wait "$pid" "$driver_pid" 2>/dev/null || true; rm -rf "$work"' EXIT

wait_ready "$python" "$api"
"$python" - "$driver" <<'PY'
import sys, time, urllib.request
for _ in range(300):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/status", timeout=1):
            sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit("chromedriver never answered")
PY

if ! "$python" tests/e2e/console.py "$src" "$api" "$admin" "$driver" "$work" "$pid" "$shots"; then
  echo "--- src serve log (last 40 lines)" >&2
  tail -n 40 "$log" >&2
  echo "--- chromedriver log (last 20 lines)" >&2
  tail -n 20 "$work/driver.log" >&2
  exit 1
fi

#!/usr/bin/env bash
# `src serve` in front of a real NVIDIA Dynamo frontend (ai-dynamo 1.6.1, no GPU, offline).
#
# Starts, on free loopback ports, a Dynamo frontend (round-robin, session affinity, file
# discovery: no etcd, no NATS), two mocker processes serving a tiny generated model directory as
# `tiny-a` (two workers) and `tiny-b` (one worker), checks a policy against the frontend's live
# `GET /v1/models` answer, runs `src doctor` on it (and on a policy naming a model the
# frontend lacks), starts `src serve` on it, and runs tests/e2e/dynamo/client.py (the
# official `openai` client: routing, streaming, session affinity down to the Dynamo worker,
# fallback when tiny-b's worker dies, request lines) with, before it, the official `anthropic`
# client's Messages requests translated for Dynamo (tests/e2e/dynamo/anthropic_client.py), and
# the same frontend behind Envoy asking
# `src serve --extproc` (tests/e2e/dynamo/envoy_client.py: routing, session affinity down to the
# worker). Stops every process it started on exit and
# prints the logs' tails when something failed. About 15 s once the environment exists.
#
# Usage: tests/e2e/dynamo/run.sh [SRC_BINARY]
#        (default: $CARGO_TARGET_DIR or target, then debug/src; the Python environment is
#        .cache/venv-dynamo, made by scripts/setup.sh)
#
# How Dynamo 1.6.1 behaves here, which the checks rely on:
# - `pip install ai-dynamo==1.6.1` cannot resolve `aisimulate`; scripts/setup.sh installs
#   ai-dynamo-runtime, then ai-dynamo without dependencies, then what the frontend and the
#   mocker import.
# - Each served model needs its own mocker process on its own `--endpoint`. Workers register
#   within seconds; the runner polls `/v1/models` instead of sleeping.
# - The mocker emits random token ids in [1000, 2000), so the generated tokenizer is padded to
#   4,096 tokens (model_fixture.py).
# - `nvext.extra_fields: ["worker_id"]` in a request makes the answer name its worker; with
#   `x-dynamo-session-id` and `--router-session-affinity-ttl-secs` a session stays on one worker,
#   and a repeated long prompt then reports `cached_tokens` > 0 (the mocker models a prefix cache).
# - A SIGKILLed worker: the frontend answers 503 for its model for about 10 s, then 404 once the
#   model is deregistered (a SIGTERMed worker deregisters at once: straight to 404). The router
#   moves on to the `else` model on both; a 404 from the last model left passes through.
set -euo pipefail
cd "$(dirname "$0")/../../.."
src=$(realpath "${1:-${CARGO_TARGET_DIR:-target}/debug/src}")
python=.cache/venv-dynamo/bin/python
if [[ ! -x $python ]]; then
  echo "missing .cache/venv-dynamo: run scripts/setup.sh" >&2
  exit 1
fi
started=$SECONDS

work=$(mktemp -d)
pids=()
cleanup() {
  local status=$?
  local pid
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in {1..50}; do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if ((status != 0)); then
    local log
    for log in frontend mocker-a mocker-b src envoy; do
      [[ -f $work/$log.log ]] || continue
      echo "--- $log log (last 30 lines)" >&2
      tail -n 30 "$work/$log.log" | sed 's/\x1b\[[0-9;]*m//g' >&2
    done
  fi
  rm -rf "$work"
  exit "$status"
}
trap cleanup EXIT

# Polls until URL answers 200 (and, when IDS are given, lists them all as models), failing
# early when one of the processes in $watch has exited.
wait_for() { # URL TIMEOUT_S [ID...]
  watch="${pids[*]}" "$python" - "$@" <<'EOF'
import json, os, sys, time, urllib.request
url, timeout, ids = sys.argv[1], float(sys.argv[2]), set(sys.argv[3:])
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
deadline = time.monotonic() + timeout
while time.monotonic() < deadline:
    dead = [p for p in os.environ["watch"].split() if not alive(p)]
    if dead:
        sys.exit(f"process {' '.join(dead)} exited while waiting for {url}")
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            served = {m["id"] for m in json.load(r)["data"]} if ids else set()
            if r.status == 200 and ids <= served:
                sys.exit(0)
    except Exception:
        pass
    time.sleep(0.2)
listing = f" listing {', '.join(sorted(ids))}" if ids else ""
sys.exit(f"{url} did not answer{listing} within {timeout:.0f} s")
EOF
}

read -r frontend api admin extproc gateway gateway_admin < <("$python" - <<'EOF'
import socket
sockets = [socket.socket() for _ in range(6)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))
EOF
)

model=$work/model
"$python" tests/e2e/dynamo/model_fixture.py "$model"

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 HF_HOME=$work/hf
export DYN_FILE_KV=$work/discovery DYN_TCP_RPC_HOST=127.0.0.1 DYN_EVENT_PLANE_HOST=127.0.0.1
"$python" -m dynamo.frontend --http-host 127.0.0.1 --http-port "$frontend" \
  --discovery-backend file --router-mode round-robin --router-session-affinity-ttl-secs 600 \
  >"$work/frontend.log" 2>&1 &
pids+=($!)
"$python" -m dynamo.mocker --model-path "$model" --model-name tiny-a --discovery-backend file \
  --endpoint dyn://dynamo.tiny_a.generate --speedup-ratio 10 --num-workers 2 \
  >"$work/mocker-a.log" 2>&1 &
pids+=($!)
"$python" -m dynamo.mocker --model-path "$model" --model-name tiny-b --discovery-backend file \
  --endpoint dyn://dynamo.tiny_b.generate --speedup-ratio 10 \
  >"$work/mocker-b.log" 2>&1 &
pids+=($!)
tiny_b=$!
disown "$tiny_b" # client.py kills it; no job notice for that
dynamo=http://127.0.0.1:$frontend/v1
wait_for "$dynamo/models" 90 tiny-a tiny-b
echo "== Dynamo serves tiny-a and tiny-b ($((SECONDS - started)) s)"

mkdir "$work/policy"
cat >"$work/policy/policy.sr" <<EOF
backend dynamo { url = "$dynamo" }

model small { backend = dynamo  serves = "tiny-a"  cost = 0.1 }
model strong { backend = dynamo  serves = "tiny-b"  cost = 1.0 }

signal code_talk = contains(prompt, ["stack trace", "segfault", "compile error"])

route coding priority 20 {
  when code_talk
  to strong else small
}
route default { to small }

session { }

test crash_goes_strong {
  prompt = "here is the stack trace"
  expect coding model strong
}
test plain_goes_small {
  prompt = "hello there"
  expect default model small
}
EOF
# The live catalog: `src check --live` asks the frontend what it serves right now.
"$src" check "$work/policy" --live --deny-warnings
# ... and the same check refuses a served id the frontend does not have.
mkdir "$work/stale"
sed 's/"tiny-b"/"tiny-c"/' "$work/policy/policy.sr" >"$work/stale/policy.sr"
if "$src" check "$work/stale" --live >"$work/stale.out" 2>&1; then
  echo "src check accepted a model Dynamo does not serve:" >&2
  cat "$work/stale.out" >&2
  exit 1
fi
grep -q tiny-c "$work/stale.out" || { cat "$work/stale.out" >&2; exit 1; }
# The live contract: every model served, answering directly, and each route's test reaching
# its model through the frontend.
"$src" doctor "$work/policy" --timeout 30s | tee "$work/doctor.out"
grep -q 'reached `tiny-b` (model `strong`)' "$work/doctor.out"
grep -q 'reached `tiny-a` (model `small`)' "$work/doctor.out"
# ... and it fails, naming the id, for a policy binding a model the frontend does not serve.
set +e
"$src" doctor "$work/stale" --format json >"$work/doctor-stale.json"
status=$?
set -e
if ((status != 1)); then
  echo "src doctor exited $status (expected 1) for a model Dynamo does not serve:" >&2
  cat "$work/doctor-stale.json" >&2
  exit 1
fi
"$python" - "$work/doctor-stale.json" <<'PY'
import json, sys
report = json.load(open(sys.argv[1]))
failed = [c for c in report["checks"] if c["status"] == "fail"]
assert any(c["served"] == "tiny-c" and "`tiny-c` is not served" in c["detail"]
           and "`tiny-a`" in c["detail"] for c in failed), report
PY
echo "== src doctor passes, and names tiny-c when it is not served ($((SECONDS - started)) s)"

"$src" serve "$work/policy" --listen "127.0.0.1:$api" --admin "127.0.0.1:$admin" --no-watch \
  --extproc "127.0.0.1:$extproc" 2>"$work/src.log" &
pids+=($!)
wait_for "http://127.0.0.1:$api/readyz" 30
echo "== src serve is ready ($((SECONDS - started)) s)"

# Envoy (the fail-closed configuration `src manifest` writes for the policy) in front of the
# frontend, asking the router per request.
"$src" manifest "$work/policy" --format envoy --listen "127.0.0.1:$gateway" \
  --extproc-address "127.0.0.1:$extproc" --router-address "127.0.0.1:$api" |
  sed -e "s|port_value: 9901|port_value: $gateway_admin|" >"$work/envoy.yaml"
.cache/venv-envoy/bin/envoy -c "$work/envoy.yaml" --concurrency 1 --disable-hot-restart -l warning \
  >"$work/envoy.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$gateway_admin/ready" 30
"$python" tests/e2e/dynamo/envoy_client.py "http://127.0.0.1:$gateway/v1"

# Anthropic's Messages API through the same router, translated to chat completions for Dynamo.
.cache/venv-anthropic/bin/python tests/e2e/dynamo/anthropic_client.py "http://127.0.0.1:$api"

"$python" tests/e2e/dynamo/client.py "http://127.0.0.1:$api/v1" "$dynamo" "$work/src.log" "$tiny_b"
echo "== done in $((SECONDS - started)) s"

# Helpers the end-to-end scripts share (sourced, not run): free loopback ports, and waiting for
# a `src serve` to be ready. Both use the script's own Python, so they need nothing else.

# free_ports PYTHON N: N distinct free loopback ports, on one line.
free_ports() {
  "$1" - "$2" <<'PY'
import socket, sys
sockets = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))
PY
}

# wait_ready PYTHON PORT: returns once `GET /readyz` on PORT answers 200; fails after 30 s.
wait_ready() {
  "$1" - "$2" <<'PY'
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
PY
}

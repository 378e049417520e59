#!/usr/bin/env python3
"""The official `openai` client through Envoy, which asks `src serve --extproc`, to a real NVIDIA
Dynamo frontend.

Usage: python3 tests/e2e/dynamo/envoy_client.py ENVOY_URL
       (like http://127.0.0.1:10000/v1; tests/e2e/dynamo/run.sh starts everything)

The router decides and Envoy forwards: a coding prompt must reach Dynamo as `tiny-b`, and one
session (`x-session-id`) must stay on one tiny-a worker through the `x-dynamo-session-id` the
router sets, where round-robin alone spreads calls over both. Exits non-zero on the first failed
check; prints `N passed, 0 failed` at the end.
"""

import json
import sys
import uuid

import openai

CODING = "my program segfaults with this stack trace"
PLAIN = "hello there, how are you today?"
WORKER = {"nvext": {"extra_fields": ["worker_id"]}}

passed = 0


def check(name, condition, detail=""):
    global passed
    if not condition:
        print(f"FAIL {name}: {detail}", file=sys.stderr)
        print(f"{passed} passed, 1 failed")
        sys.exit(1)
    passed += 1
    print(f"ok   envoy: {name}")


def chat(client, content, session=None):
    headers = {"x-session-id": session} if session else {}
    raw = client.chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": content}],
        max_tokens=4,
        extra_headers=headers,
        extra_body=WORKER,
    )
    return raw.parse(), json.loads(raw.text), raw.headers


def worker_of(body):
    worker = (body.get("nvext") or {}).get("worker_id") or {}
    return worker.get("decode_worker_id")


def main(envoy_url):
    client = openai.OpenAI(base_url=envoy_url, api_key="unused", max_retries=0)

    completion, _, headers = chat(client, CODING)
    check("a coding prompt reaches Dynamo as tiny-b",
          completion.model == "tiny-b" and headers.get("x-sr-model") == "strong",
          f"{completion.model} / {dict(headers)}")

    free = [worker_of(chat(client, PLAIN)[1]) for _ in range(4)]
    check("calls without a session spread over both tiny-a workers", len(set(free)) == 2,
          repr(free))

    session = f"envoy-{uuid.uuid4()}"
    workers, states = [], []
    for _ in range(6):
        completion, body, headers = chat(client, PLAIN, session=session)
        workers.append(worker_of(body))
        states.append(headers.get("x-sr-session"))
    check("the router pins the session", states == ["new"] + ["pinned"] * 5, repr(states))
    check("one session is served by one Dynamo worker",
          len(set(workers)) == 1 and workers[0] is not None, repr(workers))
    print(f"{passed} passed, 0 failed")


if __name__ == "__main__":
    main(sys.argv[1])

#!/usr/bin/env python3
"""The official `openai` client through `src serve` to a real NVIDIA Dynamo frontend.

Usage: python3 tests/e2e/dynamo/client.py ROUTER_URL DYNAMO_URL SRC_LOG TINY_B_PID
       (URLs like http://127.0.0.1:8801/v1; tests/e2e/dynamo/run.sh starts everything)

The router serves tests/e2e/dynamo/run.sh's policy: `small` is Dynamo's `tiny-a` (two mocker
workers), `strong` is `tiny-b` (one worker, process TINY_B_PID), coding prompts go to `strong
else small`, everything else to `small`, and sessions use the default identity headers. The
frontend runs round-robin with session affinity. SRC_LOG is the router's standard error, read
for its request lines. The last step kills TINY_B_PID. Exits non-zero on the first failed check
after printing what was expected and what came back; prints `N passed, 0 failed` at the end.
"""

import json
import os
import signal
import sys
import time
import urllib.error
import urllib.request
import uuid

import openai

CODING = "my program segfaults with this stack trace"
PLAIN = "hello there, how are you today?"
# Long enough (hundreds of tokens) that Dynamo's mocker caches whole KV blocks of it.
LONG = " ".join(["the quick brown fox jumps over the lazy dog"] * 40)
# Asks Dynamo to report the worker that served the call, in the answer's `nvext`.
WORKER = {"nvext": {"extra_fields": ["worker_id"]}}

passed = 0


def check(name, condition, detail=""):
    global passed
    if not condition:
        print(f"FAIL {name}: {detail}", file=sys.stderr)
        print(f"{passed} passed, 1 failed")
        sys.exit(1)
    passed += 1
    print(f"ok   {name}")


def chat(client, content, session=None, **kwargs):
    """One non-streaming call; returns (parsed completion, raw JSON body, response headers)."""
    headers = {"x-session-id": session} if session else {}
    raw = client.chat.completions.with_raw_response.create(
        model=kwargs.pop("model", "auto"),
        messages=[{"role": "user", "content": content}],
        max_tokens=kwargs.pop("max_tokens", 8),
        extra_headers=headers,
        extra_body=WORKER,
        **kwargs,
    )
    return raw.parse(), json.loads(raw.text), raw.headers


def worker_of(body):
    """The Dynamo worker that decoded the answer, as `nvext.worker_id` reports it."""
    worker = (body.get("nvext") or {}).get("worker_id") or {}
    return worker.get("decode_worker_id")


def reported_cached(body):
    """`usage.prompt_tokens_details.cached_tokens` as the answer carries it (None if absent)."""
    usage = body.get("usage") or {}
    return (usage.get("prompt_tokens_details") or {}).get("cached_tokens")


def dynamo_status(dynamo_url, model):
    """The status Dynamo itself answers for a one-token chat with `model`."""
    body = json.dumps(
        {"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}
    ).encode()
    request = urllib.request.Request(
        f"{dynamo_url}/chat/completions", body, {"content-type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


class RequestLog:
    """The router's JSON request lines (target `src::request`), read from its stderr file."""

    def __init__(self, path):
        self.path = path

    def line(self, request_id, timeout=5.0):
        deadline = time.monotonic() + timeout
        while True:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                for text in f:
                    try:
                        line = json.loads(text)
                    except ValueError:
                        continue
                    fields = line.get("fields") or {}
                    if line.get("target") != "src::request":
                        continue
                    if fields.get("request_id") == request_id:
                        return fields
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)  # lines are written in batches every 50 ms


def main(router_url, dynamo_url, log_path, tiny_b_pid):
    client = openai.OpenAI(base_url=router_url, api_key="unused", max_retries=0, timeout=30)
    log = RequestLog(log_path)
    seen = []  # (request id, what the answer reported as cached tokens), checked against the log

    # Routing: a coding prompt goes to `strong`, served by Dynamo as `tiny-b`, with the body's
    # `model` rewritten from `auto` to the served id; `nvext` survives the rewrite.
    completion, body, headers = chat(client, CODING)
    check("coding prompt routes to strong", headers.get("x-sr-model") == "strong", dict(headers))
    check("coding prompt takes the coding route", headers.get("x-sr-route") == "coding",
          dict(headers))
    check("strong is answered by tiny-b", completion.model == "tiny-b", completion.model)
    check("answer has text", bool(completion.choices[0].message.content), repr(completion))
    check("usage is reported",
          completion.usage is not None and completion.usage.prompt_tokens > 0
          and completion.usage.completion_tokens > 0, repr(completion.usage))
    check("nvext survives the router's rewrite", worker_of(body) is not None, repr(body))
    seen.append((headers["x-sr-request-id"], reported_cached(body), "tiny-b", "strong"))

    completion, body, headers = chat(client, PLAIN)
    check("plain prompt routes to small", headers.get("x-sr-model") == "small", dict(headers))
    check("plain prompt takes the default route", headers.get("x-sr-route") == "default",
          dict(headers))
    check("small is answered by tiny-a", completion.model == "tiny-a", completion.model)
    check("plain answer reports usage",
          completion.usage is not None and completion.usage.total_tokens > 0,
          repr(completion.usage))
    check("no session header: the call routes on its own",
          headers.get("x-sr-session") == "missing-identity", dict(headers))
    seen.append((headers["x-sr-request-id"], reported_cached(body), "tiny-a", "small"))

    # A client may name a logical model; the router still sends Dynamo the served id.
    completion, body, headers = chat(client, PLAIN, model="strong")
    check("named model is rewritten to its served id",
          completion.model == "tiny-b" and headers.get("x-sr-model") == "strong",
          f"{completion.model} / {dict(headers)}")

    # Streaming, raw: Dynamo's server-sent events pass through one by one, ending with [DONE].
    with client.chat.completions.with_streaming_response.create(
        model="auto",
        messages=[{"role": "user", "content": PLAIN}],
        max_tokens=12,
        stream=True,
        stream_options={"include_usage": True},
    ) as response:
        check("stream is an event stream",
              response.headers.get("content-type", "").startswith("text/event-stream"),
              dict(response.headers))
        check("stream routes to small", response.headers.get("x-sr-model") == "small",
              dict(response.headers))
        stream_id = response.headers.get("x-sr-request-id")
        events = [
            line[len("data: "):] for line in response.iter_lines() if line.startswith("data: ")
        ]
    check("stream ends with [DONE]", events and events[-1] == "[DONE]", repr(events[-3:]))
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks if c.get("choices")]
    deltas = [d for d in deltas if d]
    check("stream arrives as one event per token", len(deltas) == 12, repr(deltas))
    check("stream chunks come from tiny-a", all(c.get("model") == "tiny-a" for c in chunks),
          repr({c.get("model") for c in chunks}))
    usage = [c["usage"] for c in chunks if c.get("usage")]
    check("stream_options.include_usage brings one usage chunk",
          len(usage) == 1 and usage[0]["completion_tokens"] == 12, repr(usage))
    cached = (usage[0].get("prompt_tokens_details") or {}).get("cached_tokens") if usage else None
    seen.append((stream_id, cached, "tiny-a", "small"))

    # Streaming through the client's own parser, without usage: the router invents none.
    stream = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": CODING}], max_tokens=6, stream=True
    )
    no_usage_id = stream.headers.get("x-sr-request-id")
    parts, usages = [], []
    for chunk in stream.parse():
        if chunk.usage is not None:
            usages.append(chunk.usage)
        if chunk.choices and chunk.choices[0].delta.content:
            parts.append(chunk.choices[0].delta.content)
    check("client parses the streamed chunks", len(parts) == 6, repr(parts))
    check("a stream without include_usage has no usage chunk", not usages, repr(usages))
    seen.append((no_usage_id, None, "tiny-b", "strong"))

    # Round-robin: calls without a session spread over both tiny-a workers.
    free = []
    for i in range(6):
        _, body, headers = chat(client, f"{PLAIN} ({i})")
        free.append(worker_of(body))
    check("every answer names its worker", all(w is not None for w in free), repr(free))
    check("calls without a session spread over both tiny-a workers", len(set(free)) == 2,
          repr(free))

    # Session affinity: one `x-session-id` is pinned to `small` by the router and, through the
    # `x-dynamo-session-id` the router forwards, to one worker by Dynamo, which then reuses the
    # KV blocks of the repeated prompt. Round-robin alone would alternate the workers.
    session = f"e2e-{uuid.uuid4()}"
    pinned, states, models, cached = [], [], [], []
    for _ in range(6):
        _, body, headers = chat(client, LONG, session=session, max_tokens=4)
        pinned.append(worker_of(body))
        states.append(headers.get("x-sr-session"))
        models.append(headers.get("x-sr-model"))
        cached.append(reported_cached(body))
        seen.append((headers["x-sr-request-id"], reported_cached(body), "tiny-a", "small"))
    check("session calls stay on small", models == ["small"] * 6, repr(models))
    check("the router pins the session", states == ["new"] + ["pinned"] * 5, repr(states))
    check("one session is served by one Dynamo worker",
          len(set(pinned)) == 1 and pinned[0] is not None, repr(pinned))
    check("the pinned worker reuses the session's KV blocks",
          all(isinstance(c, int) and c > 0 for c in cached[1:]), repr(cached))

    other = f"e2e-{uuid.uuid4()}"
    workers = {worker_of(chat(client, PLAIN, session=other)[1]) for _ in range(4)}
    check("a second session is also kept on one worker", len(workers) == 1, repr(workers))

    # Fallback: with tiny-b's only worker gone, a coding prompt gets the `else` model. Dynamo
    # first answers 503 (the worker is still registered, it cannot be reached), then 404 once
    # the model is deregistered; both must move on to `small`.
    os.kill(tiny_b_pid, signal.SIGKILL)
    status = dynamo_status(dynamo_url, "tiny-b")
    check("Dynamo answers 503 for a model whose worker just died", status == 503, status)
    completion, body, headers = chat(client, CODING)
    check("503: the coding prompt falls back to small",
          headers.get("x-sr-model") == "small" and completion.model == "tiny-a",
          f"{completion.model} / {dict(headers)}")
    check("503: x-sr-fallbacks names strong",
          headers.get("x-sr-fallbacks", "").startswith("strong:"), dict(headers))
    fallback_503 = headers["x-sr-request-id"]
    seen.append((fallback_503, reported_cached(body), "tiny-a", "small"))

    deadline = time.monotonic() + 45
    while (status := dynamo_status(dynamo_url, "tiny-b")) == 503 and time.monotonic() < deadline:
        time.sleep(0.5)
    check("Dynamo answers 404 once the model is deregistered", status == 404, status)
    completion, body, headers = chat(client, CODING)
    check("404: the coding prompt falls back to small",
          headers.get("x-sr-model") == "small" and completion.model == "tiny-a",
          f"{completion.model} / {dict(headers)}")
    check("404: x-sr-fallbacks names strong",
          headers.get("x-sr-fallbacks", "").startswith("strong:"), dict(headers))
    fallback_404 = headers["x-sr-request-id"]
    seen.append((fallback_404, reported_cached(body), "tiny-a", "small"))

    # A client that names `strong` itself asked for that model: Dynamo's 404 reaches it.
    try:
        chat(client, PLAIN, model="strong")
        check("named strong without a worker is an error", False, "no exception")
    except openai.NotFoundError as err:
        check("named strong without a worker passes Dynamo's 404 through",
              err.status_code == 404, repr(err))

    # The router's request lines: the backend, the served id and the KV evidence exactly as
    # Dynamo reported it (a number, or null when the answer carried none).
    lines = {request_id: log.line(request_id) for request_id, _, _, _ in seen}
    missing = [request_id for request_id, fields in lines.items() if fields is None]
    check(f"every call has its request line ({len(seen)})", not missing, repr(missing))
    wrong = [f for f in lines.values() if f.get("backend") != "dynamo"]
    check("request lines name the dynamo backend", not wrong, repr(wrong))
    wrong = [
        (lines[request_id], model, served)
        for request_id, _, served, model in seen
        if (lines[request_id].get("model"), lines[request_id].get("served")) != (model, served)
    ]
    check("request lines name the logical model and its served id", not wrong, repr(wrong))
    wrong = [
        (request_id, lines[request_id].get("cached_tokens", "absent"), cached)
        for request_id, cached, _, _ in seen
        if "cached_tokens" not in lines[request_id] or lines[request_id]["cached_tokens"] != cached
    ]
    check("request lines carry cached_tokens exactly as Dynamo reported it", not wrong,
          repr(wrong))
    reported = [cached for _, cached, _, _ in seen]
    check("the lines hold zero, non-zero and unknown (null) cached_tokens",
          0 in reported and None in reported and any(c for c in reported), repr(reported))
    wrong = [
        lines[request_id] for request_id in (fallback_503, fallback_404)
        if lines[request_id].get("fallbacks") != ["strong:status"]
    ]
    check("the fallback calls' lines list strong", not wrong, repr(wrong))

    print(f"{passed} passed, 0 failed")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3], int(sys.argv[4]))

#!/usr/bin/env python3
"""The official `openai` Python client against a running `src serve`.

Usage: python3 tests/e2e/openai_client.py BASE_URL
       (BASE_URL like http://127.0.0.1:8801/v1)

The served policy must route `auto`, know no model called `no-such-model`, and send prompts
about a segfault or a stack trace to a different model than a greeting (the quickstart example
does: `src serve examples/quickstart`). Exits non-zero on the first failed check, after printing
what was expected and what came back. Prints `N passed, 0 failed` at the end.
"""

import sys
import uuid

try:
    import openai
except ImportError:  # pragma: no cover - the CI step installs it
    print("the `openai` package is missing: pip install openai", file=sys.stderr)
    sys.exit(2)

passed = 0


def check(name, condition, detail=""):
    global passed
    if not condition:
        print(f"FAIL {name}: {detail}", file=sys.stderr)
        print(f"{passed} passed, 1 failed")
        sys.exit(1)
    passed += 1
    print(f"ok   {name}")


def main(base_url):
    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=30)

    # Plain chat, through the router: the answer says which served model produced it, and the
    # routing headers say which route and logical model decided.
    raw = client.chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": "my program segfaults with this stack trace"}],
    )
    completion = raw.parse()
    text = completion.choices[0].message.content or ""
    check("chat answers", bool(text), repr(completion))
    check("chat reports usage", completion.usage is not None and completion.usage.prompt_tokens > 0,
          repr(completion.usage))
    route = raw.headers.get("x-sr-route")
    model = raw.headers.get("x-sr-model")
    check("route header", route not in (None, "", "-"), repr(dict(raw.headers)))
    check("model header", model not in (None, "", "-"), repr(dict(raw.headers)))
    check("path header", raw.headers.get("x-sr-path") == "upstream", repr(dict(raw.headers)))
    check("answer comes from the served id", completion.model in text, f"{completion.model!r} / {text!r}")

    greeting = client.chat.completions.with_raw_response.create(
        model="auto", messages=[{"role": "user", "content": "hello there"}]
    )
    check("different prompts route differently",
          greeting.headers.get("x-sr-model") != model,
          f"{greeting.headers.get('x-sr-model')} == {model}")

    # Streaming: chunks arrive as a stream and join into one answer.
    chunks = []
    usage = None
    stream = client.chat.completions.create(
        model="auto",
        messages=[{"role": "user", "content": "hello there, tell me a story"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks.append(chunk.choices[0].delta.content)
        if chunk.usage is not None:
            usage = chunk.usage
    check("stream has several chunks", len(chunks) > 1, repr(chunks))
    check("stream ends with usage", usage is not None and usage.completion_tokens > 0, repr(usage))

    # extra_headers reach the router: our request id comes back.
    request_id = f"e2e-{uuid.uuid4()}"
    raw = client.chat.completions.with_raw_response.create(
        model="auto",
        messages=[{"role": "user", "content": "hello"}],
        extra_headers={"x-request-id": request_id},
    )
    check("request id echoed", raw.headers.get("x-sr-request-id") == request_id,
          repr(raw.headers.get("x-sr-request-id")))

    # Errors are OpenAI-shaped, so the client raises its own exception types.
    try:
        client.chat.completions.create(
            model="no-such-model", messages=[{"role": "user", "content": "hi"}]
        )
        check("unknown model raises", False, "no exception")
    except openai.NotFoundError as err:
        check("unknown model raises NotFoundError", err.status_code == 404, repr(err))
        body = err.body if isinstance(err.body, dict) else {}
        check("error names the model", "no-such-model" in str(body.get("message", "")), repr(err.body))

    try:
        client.chat.completions.create(model="auto", messages="not a list")
        check("malformed request raises", False, "no exception")
    except openai.BadRequestError as err:
        check("malformed request raises BadRequestError", err.status_code == 400, repr(err))

    models = client.models.list()
    ids = [m.id for m in models.data]
    check("models list has the router name", "auto" in ids, repr(ids))
    for listed in models.data:
        one = client.models.retrieve(listed.id)
        check(f"models.retrieve({listed.id!r}) answers its entry", one.id == listed.id, repr(one))
    try:
        client.models.retrieve("no-such-model")
        check("retrieving an unknown model raises", False, "no exception")
    except openai.NotFoundError as err:
        check("retrieving an unknown model raises NotFoundError", err.status_code == 404, repr(err))
    try:
        client.embeddings.create(model="auto", input="hello")
        check("embeddings raise", False, "no exception")
    except openai.NotFoundError as err:
        check("embeddings raise NotFoundError saying they are not served",
              "does not serve" in str(err), repr(err))

    print(f"{passed} passed, 0 failed")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])

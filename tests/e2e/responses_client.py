#!/usr/bin/env python3
"""The official `openai` Python client continuing a conversation across a forced model switch,
and its stream helpers (`responses.stream()`, `chat.completions.stream()`) reading the streams.

Usage: python3 tests/e2e/responses_client.py BASE_URL SIM_A SIM_B
       (BASE_URL like http://127.0.0.1:8801/v1; SIM_A and SIM_B the two `src sim` backends)

The served policy (tests/e2e/responses_client.sh writes it) routes `auto` to `first` on SIM_A
(served as `model-a`) and, with `x-move: yes`, to `second` on SIM_B (`model-b`). What each
backend was really sent is read back from its `GET /sim/requests`. Exits non-zero on the first
failed check; prints `N passed, 0 failed` at the end.
"""

import json
import sys
import urllib.request

try:
    import openai
except ImportError:  # pragma: no cover - the CI step installs it
    print("the `openai` package is missing: pip install openai", file=sys.stderr)
    sys.exit(2)

passed = 0
MOVE = {"x-move": "yes"}


def check(name, condition, detail=""):
    global passed
    if not condition:
        print(f"FAIL {name}: {detail}", file=sys.stderr)
        print(f"{passed} passed, 1 failed")
        sys.exit(1)
    passed += 1
    print(f"ok   {name}")


def last_sent(sim):
    """The last `/v1/responses` body a simulated backend received."""
    with urllib.request.urlopen(f"{sim}/sim/requests", timeout=10) as answer:
        received = json.load(answer)
    bodies = [r["body"] for r in received if r["path"] == "/v1/responses"]
    return bodies[-1] if bodies else {}


def texts(items):
    """The text of each input item, in order (a string input is one)."""
    if isinstance(items, str):
        return [items]
    out = []
    for item in items:
        content = item.get("content")
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(part.get("text", "") for part in content or []))
    return out


def main(base_url, sim_a, sim_b):
    client = openai.OpenAI(base_url=base_url, api_key="sk-tenant-one", max_retries=0, timeout=30)
    other = openai.OpenAI(base_url=base_url, api_key="sk-tenant-two", max_retries=0, timeout=30)

    one = client.responses.create(model="auto", input="turn one")
    check("the first turn is answered by the first model", one.output_text.startswith("[model-a]"),
          repr(one.output_text))

    raw = client.responses.with_raw_response.create(
        model="auto", input="turn two", previous_response_id=one.id)
    two = raw.parse()
    check("the owner continues its own conversation",
          raw.headers.get("x-sr-previous") == "continued", repr(dict(raw.headers)))
    sent = last_sent(sim_a)
    check("the owner is sent the turn as written",
          sent.get("previous_response_id") == one.id and texts(sent["input"]) == ["turn two"],
          repr(sent))

    raw = client.responses.with_raw_response.create(
        model="auto", input="turn three", previous_response_id=two.id, extra_headers=MOVE)
    three = raw.parse()
    check("the switch moves the conversation", raw.headers.get("x-sr-model") == "second"
          and raw.headers.get("x-sr-previous") == "expanded", repr(dict(raw.headers)))
    check("the second model answers", three.output_text.startswith("[model-b]"),
          repr(three.output_text))
    sent = last_sent(sim_b)
    expected = ["turn one", one.output_text, "turn two", two.output_text, "turn three"]
    check("the second backend is sent the whole history",
          texts(sent.get("input", [])) == expected and "previous_response_id" not in sent,
          f"{sent!r} != {expected!r}")

    stream = client.responses.create(model="auto", input="turn four", previous_response_id=three.id,
                                     stream=True)
    completed = [e for e in stream if e.type == "response.completed"]
    check("a streamed turn completes", len(completed) == 1, repr(completed))
    four = completed[0].response
    sent = last_sent(sim_a)
    check("moving back sends what the second model added",
          texts(sent.get("input", [])) == expected + [three.output_text, "turn four"], repr(sent))

    kept = client.responses.retrieve(four.id)
    check("a streamed response is kept", kept.id == four.id and kept.output_text == four.output_text,
          repr(kept))
    items = client.responses.input_items.list(three.id, order="asc")
    check("input items list the conversation", texts(i.model_dump() for i in items.data) == expected,
          repr(items))

    try:
        other.responses.retrieve(one.id)
        check("another tenant cannot read it", False, "it could")
    except openai.NotFoundError:
        check("another tenant cannot read it", True)

    client.responses.delete(one.id)
    try:
        client.responses.retrieve(one.id)
        check("a deleted response is gone", False, "it is still there")
    except openai.NotFoundError:
        check("a deleted response is gone", True)

    stream_helpers(client)
    print(f"{passed} passed, 0 failed")


WEATHER = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
           "additionalProperties": False}


def stream_helpers(client):
    """The SDK's own stream accumulators over the simulator's streams, through the router: they
    refuse any event out of the published sequence."""
    with client.responses.stream(model="auto", input="stream helper") as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    check("responses.stream() accumulates the answer",
          final.output_text == deltas and deltas.startswith("[model-a]"), repr(final))

    tools = [{"type": "function", "name": "weather", "parameters": WEATHER, "strict": True}]
    with client.responses.stream(model="auto", input="weather in Paris?", tools=tools,
                                 tool_choice="required") as stream:
        final = stream.get_final_response()
    call = final.output[0]
    check("responses.stream() accumulates a forced tool call",
          call.type == "function_call" and call.name == "weather"
          and isinstance(json.loads(call.arguments).get("city"), str), repr(final.output))

    with client.chat.completions.stream(
            model="auto", messages=[{"role": "user", "content": "chat helper"}],
            stop=[" zulu"], stream_options={"include_usage": True}) as stream:
        text = "".join(e.delta for e in stream if e.type == "content.delta")
        completion = stream.get_final_completion()
    message = completion.choices[0].message
    check("chat.completions.stream() accumulates the answer",
          message.content == text and text.startswith("[model-a]") and " zulu" not in text
          and completion.usage is not None and completion.usage.completion_tokens > 0,
          repr(completion))

    chat_tools = [{"type": "function",
                   "function": {"name": "weather", "parameters": WEATHER, "strict": True}}]
    with client.chat.completions.stream(
            model="auto", messages=[{"role": "user", "content": "weather in Paris?"}],
            tools=chat_tools, tool_choice={"type": "function", "function": {"name": "weather"}},
            n=2) as stream:
        completion = stream.get_final_completion()
    calls = [c.message.tool_calls[0] for c in completion.choices]
    check("chat.completions.stream() accumulates the calls of every choice",
          len(calls) == 2 and all(c.function.name == "weather"
                                  and isinstance(c.function.parsed_arguments["city"], str)
                                  for c in calls), repr(completion))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2], sys.argv[3])

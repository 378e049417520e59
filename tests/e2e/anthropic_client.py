"""The official `anthropic` Python client against `src serve` on `POST /v1/messages`.

Serves a policy with two backends: the built-in simulator (OpenAI-only, reached through
translation) and a small OpenAI-compatible backend here that calls a `get_weather` tool, so the
tool-use round trip runs through the translation both ways. Checks a plain message, a stream
(the client's own event accumulation), tool use whole and streamed, and errors.
Usage: python anthropic_client.py SRC_BINARY
"""

import json
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anthropic

SEEN = []


def chunk(delta, finish=None):
    return {"id": "chatcmpl-e2e", "object": "chat.completion.chunk", "model": "tool-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


class ToolBackend(BaseHTTPRequestHandler):
    """Chat completions that ask for the weather, then report what the tool said."""

    def log_message(self, *args):
        pass

    def send(self, status, content_type, body):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.send(200, "application/json",
                  json.dumps({"object": "list", "data": [{"id": "tool-model", "object": "model"}]}))

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        SEEN.append(body)
        last = body["messages"][-1]
        usage = {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
        if last["role"] == "tool":
            deltas = [{"role": "assistant", "content": f"It is {last['content']} in Paris."}]
            message = {"role": "assistant", "content": deltas[0]["content"]}
            finish = "stop"
        else:
            call = {"id": "call_e2e", "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}
            deltas = [
                {"role": "assistant", "content": None, "tool_calls": [
                    {"index": 0, "id": "call_e2e", "type": "function",
                     "function": {"name": "get_weather", "arguments": ""}}]},
                {"tool_calls": [{"index": 0, "function": {"arguments": '{"city": '}}]},
                {"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]},
            ]
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
            finish = "tool_calls"
        if body.get("stream"):
            events = [chunk(d) for d in deltas] + [chunk({}, finish)]
            events.append({"id": "chatcmpl-e2e", "object": "chat.completion.chunk",
                           "model": "tool-model", "choices": [], "usage": usage})
            text = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
            self.send(200, "text/event-stream", text)
        else:
            answer = {"id": "chatcmpl-e2e", "object": "chat.completion", "model": "tool-model",
                      "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                      "usage": usage}
            self.send(200, "application/json", json.dumps(answer))


POLICY = """
backend sim   {{ url = "http://127.0.0.1:9/v1"  simulated = true }}
backend tools {{ url = "http://127.0.0.1:{port}/v1" }}
model small  {{ backend = sim    serves = "Qwen/Qwen3-0.6B" }}
model caller {{ backend = tools  serves = "tool-model" }}
block secret {{ when matches(prompt, "password\\\\s*=")  status = 422  message = "remove the credential" }}
route tools priority 10 {{ when request.tools > 0  to caller }}
route default {{ to small }}
"""

WEATHER = [{"name": "get_weather", "description": "the weather in a city",
            "input_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                             "required": ["city"]}}]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url):
    for _ in range(300):
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status == 200:
                    return
        except Exception:
            pass
        time.sleep(0.1)
    raise SystemExit("src serve never became ready")


def check(client):
    # A plain message, translated to the simulator and back, with the router's headers.
    raw = client.messages.with_raw_response.create(
        model="auto", max_tokens=64, system="be brief",
        messages=[{"role": "user", "content": "hello there"}])
    assert raw.headers.get("x-sr-route") == "default", dict(raw.headers)
    assert raw.headers.get("x-sr-model") == "small", dict(raw.headers)
    message = raw.parse()
    assert message.type == "message" and message.role == "assistant", message
    assert message.content[0].type == "text", message
    assert message.content[0].text.startswith("[Qwen/Qwen3-0.6B]"), message
    assert message.stop_reason in ("end_turn", "max_tokens"), message
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0, message.usage
    print("plain message: ok")

    # Streaming: the client's own accumulator builds the message from the events.
    with client.messages.stream(model="auto", max_tokens=64,
                                messages=[{"role": "user", "content": "tell me a story"}]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert len(pieces) > 1, pieces
    assert "".join(pieces) == final.content[0].text, (pieces, final)
    assert final.content[0].text.startswith("[Qwen/Qwen3-0.6B]"), final
    assert final.stop_reason in ("end_turn", "max_tokens"), final
    assert final.usage.output_tokens > 0, final.usage
    kinds = [e.type for e in client.messages.create(
        model="auto", max_tokens=32, stream=True,
        messages=[{"role": "user", "content": "hi"}])]
    assert kinds[0] == "message_start" and kinds[1] == "content_block_start", kinds
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"], kinds
    print("streamed message: ok")

    # Tool use: the backend calls the tool, the client answers with its result.
    question = [{"role": "user", "content": "What is the weather in Paris?"}]
    called = client.messages.create(model="auto", max_tokens=64, tools=WEATHER, messages=question)
    assert called.stop_reason == "tool_use", called
    use = [b for b in called.content if b.type == "tool_use"]
    assert len(use) == 1 and use[0].name == "get_weather", called
    assert use[0].input == {"city": "Paris"}, use[0]
    sent = SEEN[-1]
    assert sent["model"] == "tool-model" and sent["tools"][0]["function"]["name"] == "get_weather", sent
    follow_up = question + [
        {"role": "assistant", "content": [b.model_dump() for b in called.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use[0].id, "content": "sunny"}]},
    ]
    answered = client.messages.create(model="auto", max_tokens=64, tools=WEATHER, messages=follow_up)
    assert answered.stop_reason == "end_turn", answered
    assert answered.content[0].text == "It is sunny in Paris.", answered
    sent = SEEN[-1]
    assert sent["messages"][-1] == {"role": "tool", "tool_call_id": "call_e2e", "content": "sunny"}, sent
    with client.messages.stream(model="auto", max_tokens=64, tools=WEATHER, messages=question) as stream:
        streamed = stream.get_final_message()
    use = [b for b in streamed.content if b.type == "tool_use"]
    assert streamed.stop_reason == "tool_use" and use and use[0].input == {"city": "Paris"}, streamed
    print("tool use round trip: ok")

    # Errors come in Anthropic's shape, so the client raises its own exceptions.
    try:
        client.messages.create(model="no-such-model", max_tokens=8,
                               messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("an unknown model was answered")
    except anthropic.NotFoundError as e:
        assert e.body["error"]["type"] == "not_found_error", e.body
    try:
        client.messages.create(model="auto", max_tokens=8,
                               messages=[{"role": "user", "content": "my password = hunter2hunter2"}])
        raise AssertionError("a blocked prompt was answered")
    except anthropic.UnprocessableEntityError as e:
        assert e.body["error"]["message"] == "remove the credential", e.body
        assert e.response.headers.get("x-sr-block") == "secret"
    print("errors: ok")


def main():
    src = sys.argv[1]
    backend = ThreadingHTTPServer(("127.0.0.1", 0), ToolBackend)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as policy_dir:
        Path(policy_dir, "policy.sr").write_text(POLICY.format(port=backend.server_address[1]))
        api, admin = free_port(), free_port()
        log = open(Path(policy_dir, "serve.log"), "w")
        server = subprocess.Popen(
            [src, "serve", policy_dir, "--listen", f"127.0.0.1:{api}",
             "--admin", f"127.0.0.1:{admin}", "--no-watch"],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_ready(f"http://127.0.0.1:{api}/readyz")
            check(anthropic.Anthropic(base_url=f"http://127.0.0.1:{api}", api_key="sk-e2e",
                                      max_retries=0))
        except BaseException:
            log.flush()
            print("--- src serve log (last 40 lines)", file=sys.stderr)
            print("".join(Path(policy_dir, "serve.log").read_text().splitlines(True)[-40:]),
                  file=sys.stderr)
            raise
        finally:
            server.terminate()
            server.wait(timeout=10)
            backend.shutdown()


if __name__ == "__main__":
    main()

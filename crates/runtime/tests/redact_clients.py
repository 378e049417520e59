"""The official `openai` and `anthropic` Python clients against a router that redacts.

Sends one prompt carrying an email address and a phone number through every door, whole and
streamed, and prints what each client made of the answer as one JSON object: the texts and
tool-call arguments as the client's own parsing and stream accumulation built them.
Usage: python redact_clients.py BASE_URL openai|anthropic PROMPT
"""

import json
import sys


def openai_doors(base, prompt):
    from openai import OpenAI

    client = OpenAI(base_url=base + "/v1", api_key="test-key", max_retries=0)
    messages = [{"role": "user", "content": prompt}]
    out = {}

    whole = client.chat.completions.create(model="auto", messages=messages)
    out["chat"] = whole.choices[0].message.content
    out["chat_arguments"] = whole.choices[0].message.tool_calls[0].function.arguments

    text, arguments = "", ""
    for chunk in client.chat.completions.create(model="auto", messages=messages, stream=True):
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for call in choice.delta.tool_calls or []:
                arguments += call.function.arguments or ""
    out["chat_stream"] = text
    out["chat_stream_arguments"] = arguments

    out["responses"] = client.responses.create(model="auto", input=prompt).output_text

    deltas, final = "", None
    for event in client.responses.create(model="auto", input=prompt, stream=True):
        if event.type == "response.output_text.delta":
            deltas += event.delta
        elif event.type == "response.completed":
            final = event.response.output_text
    out["responses_stream"] = deltas
    out["responses_stream_final"] = final
    return out


def anthropic_doors(base, prompt):
    import anthropic

    client = anthropic.Anthropic(base_url=base, api_key="test-key", max_retries=0)
    messages = [{"role": "user", "content": prompt}]
    out = {}
    # Translated to the chat backend (with a tool call), then a native Messages backend.
    for name, headers in (("translated", {}), ("native", {"x-want": "claude"})):
        whole = client.messages.create(model="auto", max_tokens=64, messages=messages,
                                       extra_headers=headers)
        out[name] = whole.content[0].text
        tools = [b.input for b in whole.content if b.type == "tool_use"]
        out[name + "_tool"] = tools[0] if tools else None
        with client.messages.stream(model="auto", max_tokens=64, messages=messages,
                                    extra_headers=headers) as stream:
            out[name + "_stream"] = "".join(stream.text_stream)
            final = stream.get_final_message()
        tools = [b.input for b in final.content if b.type == "tool_use"]
        out[name + "_stream_tool"] = tools[0] if tools else None
    return out


def main():
    base, door, prompt = sys.argv[1], sys.argv[2], sys.argv[3]
    run = openai_doors if door == "openai" else anthropic_doors
    print(json.dumps(run(base, prompt)))


if __name__ == "__main__":
    main()

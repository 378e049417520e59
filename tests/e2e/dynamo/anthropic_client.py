"""The official `anthropic` client through `src serve` to a real NVIDIA Dynamo frontend: a
Messages request, whole and streamed, translated to chat completions for Dynamo and back.
Usage: python anthropic_client.py ROUTER_URL   (the router's base URL, without `/v1`)
"""

import sys

import anthropic


def main(router_url):
    client = anthropic.Anthropic(base_url=router_url, api_key="unused", max_retries=0, timeout=60)
    raw = client.messages.with_raw_response.create(
        model="auto", max_tokens=16, system="be brief",
        messages=[{"role": "user", "content": "hello there"}])
    message = raw.parse()
    assert raw.headers.get("x-sr-model") == "small", dict(raw.headers)
    assert message.type == "message" and message.model == "tiny-a", message
    assert message.content and message.content[0].type == "text" and message.content[0].text, message
    assert message.stop_reason in ("end_turn", "max_tokens"), message
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0, message.usage
    print("messages through Dynamo: ok")

    with client.messages.stream(model="auto", max_tokens=16,
                                messages=[{"role": "user", "content": "here is the stack trace"}]) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()
    assert final.model == "tiny-b", final
    assert pieces and "".join(pieces) == final.content[0].text, (pieces, final)
    assert final.stop_reason in ("end_turn", "max_tokens"), final
    assert final.usage.output_tokens > 0, final.usage
    print("streamed messages through Dynamo: ok")


if __name__ == "__main__":
    main(sys.argv[1])

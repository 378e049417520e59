"""The official `openai` Python client continuing a Responses chain, streamed.

Sends one turn with `previous_response_id` and `stream=True`, and prints as one JSON object the
text the client built from the deltas, the text of its final response, and that response's id.
Usage: python redact_chain_client.py BASE_URL API_KEY PREVIOUS_RESPONSE_ID INPUT
"""

import json
import sys


def main():
    from openai import OpenAI

    base, key, previous, text = sys.argv[1:5]
    client = OpenAI(base_url=base + "/v1", api_key=key, max_retries=0)
    deltas, final, rid = "", None, None
    for event in client.responses.create(model="auto", input=text, previous_response_id=previous,
                                         stream=True):
        if event.type == "response.output_text.delta":
            deltas += event.delta
        elif event.type == "response.completed":
            final = event.response.output_text
            rid = event.response.id
    print(json.dumps({"deltas": deltas, "final": final, "id": rid}))


if __name__ == "__main__":
    main()

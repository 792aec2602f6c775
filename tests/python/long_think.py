"""The official OpenAI and Anthropic SDKs stream through the gateway from a
provider that sends its preamble, then thinks longer than the SDKs' read
timeout allows a silence to last. Started by tests/tests/long_turns.rs,
which sets SWITCHYARD_URL (a relay that keeps the bytes the SDKs got) and
READ_TIMEOUT (seconds, shortened as the provider's pause is). Prints, as
JSON, what each stream said and how it ended, or the error it raised."""

import json
import os

import anthropic
import openai

URL = os.environ["SWITCHYARD_URL"]
# Connect, write and pool as usual; a read may wait this long for a byte.
READ = float(os.environ["READ_TIMEOUT"])
MESSAGES = [{"role": "user", "content": "Think hard, then say hello"}]

# No retries: a timed-out stream must show as the error it is.
oa = openai.OpenAI(base_url=f"{URL}/v1", api_key="sk-local-client", timeout=openai.Timeout(10.0, read=READ), max_retries=0)
an = anthropic.Anthropic(base_url=URL, api_key="sk-local-client", timeout=anthropic.Timeout(10.0, read=READ), max_retries=0)


def chat():
    text, end = "", None
    for chunk in oa.chat.completions.create(model="gpt", messages=MESSAGES, stream=True):
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
            end = chunk.choices[0].finish_reason or end
    return {"text": text, "end": end}


def responses():
    text, end = "", None
    for event in oa.responses.create(model="gpt", input="Think hard, then say hello", stream=True):
        if event.type == "response.output_text.delta":
            text += event.delta
        if event.type in ("response.completed", "response.failed", "response.incomplete"):
            end = event.type
    return {"text": text, "end": end}


def messages():
    with an.messages.stream(model="claude", max_tokens=64, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        return {"text": text, "end": stream.get_final_message().stop_reason}


said = {}
for name, run in [("chat", chat), ("responses", responses), ("messages", messages)]:
    try:
        said[name] = run()
    except Exception as e:  # the test reports it: a read timeout is the failure looked for
        said[name] = {"error": f"{type(e).__name__}: {e}"}
print(json.dumps(said))

"""The official OpenAI and Anthropic Python SDKs, pointed at a running
Switchyard gateway by base URL only. Started by tests/tests/real_clients.rs,
which sets SWITCHYARD_URL and owns the simulated providers behind it."""

import os

import anthropic
import openai
import pytest

URL = os.environ["SWITCHYARD_URL"]
TIMEOUT = 10.0


@pytest.fixture
def oa():
    return openai.OpenAI(base_url=f"{URL}/v1", api_key="sk-local-client", timeout=TIMEOUT)


@pytest.fixture(params=["x-api-key", "bearer"])
def an(request):
    # Claude Code sends x-api-key; the SDK with auth_token sends a Bearer header.
    if request.param == "x-api-key":
        return anthropic.Anthropic(base_url=URL, api_key="sk-local-client", timeout=TIMEOUT)
    return anthropic.Anthropic(base_url=URL, auth_token="sk-local-client", timeout=TIMEOUT)


MESSAGES = [{"role": "user", "content": "Say hello"}]


def test_chat(oa):
    raw = oa.chat.completions.with_raw_response.create(model="gpt-test", messages=MESSAGES)
    assert raw.headers["x-switchyard-provider"] == "oa"
    completion = raw.parse()
    assert completion.choices[0].message.content.startswith("Hello from oa.")
    assert completion.usage.completion_tokens == 5


def test_chat_stream(oa):
    stream = oa.chat.completions.create(model="gpt-test", messages=MESSAGES, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    assert text == "Hello from oa. w3 w4"


def test_chat_stream_with_usage(oa):
    chunks = list(
        oa.chat.completions.create(
            model="gpt-test", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    assert chunks[-1].usage.completion_tokens == 5


def test_completions(oa):
    completion = oa.completions.create(model="gpt-test", prompt="Say hello")
    assert completion.choices[0].text.startswith("Hello from oa.")


def test_embeddings(oa):
    result = oa.embeddings.create(model="embed-test", input=["a", "b"])
    assert len(result.data) == 2
    assert len(result.data[0].embedding) == 8


def test_responses(oa):
    response = oa.responses.create(model="gpt-test", input="Say hello")
    assert response.output_text.startswith("Hello from oa.")
    assert response.usage.output_tokens == 5


def test_responses_stream(oa):
    events = list(oa.responses.create(model="gpt-test", input="Say hello", stream=True))
    deltas = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert deltas == "Hello from oa. w3 w4"
    assert events[-1].type == "response.completed"


def test_openai_models_list(oa):
    ids = [m.id for m in oa.models.list()]
    assert "gpt-test" in ids and "embed-test" in ids
    assert oa.models.retrieve("gpt-test").owned_by == "oa"


def test_openai_unknown_model_is_not_found(oa):
    with pytest.raises(openai.NotFoundError) as err:
        oa.chat.completions.create(model="no-such-model", messages=MESSAGES)
    assert err.value.code == "model_not_found"
    assert "no-such-model" in err.value.message


def test_messages(an):
    raw = an.messages.with_raw_response.create(model="claude-test", max_tokens=64, messages=MESSAGES)
    assert raw.headers["x-switchyard-provider"] == "an"
    message = raw.parse()
    assert message.content[0].text.startswith("Hello from an.")
    assert message.usage.output_tokens == 5


def test_messages_stream(an):
    with an.messages.stream(model="claude-test", max_tokens=64, messages=MESSAGES) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Hello from an. w3 w4"
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens == 5


def test_count_tokens(an):
    assert an.messages.count_tokens(model="claude-test", messages=MESSAGES).input_tokens > 0


def test_anthropic_models_list(an):
    ids = [m.id for m in an.models.list()]
    # Every routable model, the OpenAI-kind provider's too (served translated).
    assert "claude-test" in ids and "doomed" in ids and "gpt-test" in ids


def test_anthropic_malformed_request_is_invalid(an):
    with pytest.raises(anthropic.BadRequestError) as err:
        an.post("/v1/messages", body={"messages": MESSAGES}, cast_to=object)
    assert err.value.body["error"]["type"] == "invalid_request_error"


def test_exhausted_gateway_is_not_retried_by_the_sdk():
    # The SDK would retry a 502 twice, but the gateway says x-should-retry: false.
    # The Rust side checks that the failing provider saw exactly one call.
    client = anthropic.Anthropic(base_url=URL, api_key="sk-local-client", timeout=TIMEOUT, max_retries=2)
    with pytest.raises(anthropic.APIStatusError) as err:
        client.messages.create(model="doomed", max_tokens=16, messages=MESSAGES)
    assert err.value.status_code == 502
    assert err.value.response.headers["x-should-retry"] == "false"

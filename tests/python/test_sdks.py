"""The official OpenAI, Anthropic and Google Gen AI Python SDKs, pointed at
a running Switchyard gateway by base URL only. Started by tests/tests/real_clients.rs,
which sets SWITCHYARD_URL and owns the simulated providers behind it."""

import json
import os
import re

import anthropic
import openai
import pytest
from google import genai
from google.genai import types

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


# Tool-call round trips across wire formats: each SDK talks to a provider
# that speaks only the other format, which asks for a tool; the test runs the
# tool and sends its result back, and the provider answers quoting it.
# (real_clients.rs plans the call: get_weather {"city": "Paris"}.)

WEATHER = "18C and sunny in Paris"
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def test_anthropic_sdk_tool_round_trip_on_a_chat_only_provider(an):
    tools = [{"name": "get_weather", "description": "Today's weather in a city", "input_schema": WEATHER_SCHEMA}]
    first = an.messages.create(model="claude-agent", max_tokens=256, messages=ASK, tools=tools)
    assert first.stop_reason == "tool_use"
    call = next(b for b in first.content if b.type == "tool_use")
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    assert re.fullmatch(r"[A-Za-z0-9_-]+", call.id), call.id
    follow = ASK + [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": WEATHER}]},
    ]
    final = an.messages.create(model="claude-agent", max_tokens=256, messages=follow, tools=tools)
    assert final.stop_reason == "end_turn"
    assert WEATHER in "".join(b.text for b in final.content if b.type == "text")


def test_anthropic_sdk_streamed_tool_round_trip_on_a_chat_only_provider(an):
    tools = [{"name": "get_weather", "description": "Today's weather in a city", "input_schema": WEATHER_SCHEMA}]
    # The SDK's stream helper folds the translated events into a message:
    # it rejects a delta before its block starts, and parses the joined
    # partial_json of the tool call.
    with an.messages.stream(model="claude-agent", max_tokens=256, messages=ASK, tools=tools) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_message()
    assert "input_json" in kinds and kinds[-1] == "message_stop", kinds
    assert first.stop_reason == "tool_use"
    call = next(b for b in first.content if b.type == "tool_use")
    assert (call.name, call.input) == ("get_weather", {"city": "Paris"})
    follow = ASK + [
        {"role": "assistant", "content": first.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": WEATHER}]},
    ]
    with an.messages.stream(model="claude-agent", max_tokens=256, messages=follow, tools=tools) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert WEATHER in text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 0


CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": "get_weather", "description": "Today's weather in a city", "parameters": WEATHER_SCHEMA},
    }
]


def chat_follow_up(call):
    return ASK + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.function.name, "arguments": call.function.arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call.id, "content": WEATHER},
    ]


def test_openai_chat_tool_round_trip_on_an_anthropic_provider(oa):
    first = oa.chat.completions.create(model="gpt-agent", messages=ASK, tools=CHAT_TOOLS)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    final = oa.chat.completions.create(model="gpt-agent", messages=chat_follow_up(call), tools=CHAT_TOOLS)
    assert final.choices[0].finish_reason == "stop"
    assert WEATHER in final.choices[0].message.content


def test_openai_chat_streamed_tool_round_trip_on_an_anthropic_provider(oa):
    # The SDK's stream helper joins the argument deltas by index and fails
    # on a delta for a call it has not seen start.
    with oa.chat.completions.stream(model="gpt-agent", messages=ASK, tools=CHAT_TOOLS) as stream:
        argument_deltas = [e for e in stream if e.type == "tool_calls.function.arguments.delta"]
        first = stream.get_final_completion()
    assert argument_deltas
    assert first.choices[0].finish_reason == "tool_calls"
    call = first.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    stream = oa.chat.completions.create(
        model="gpt-agent", messages=chat_follow_up(call), tools=CHAT_TOOLS, stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert WEATHER in text
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    assert chunks[-1].usage.completion_tokens > 0


RESPONSES_TOOLS = [
    {
        "type": "function",
        "name": "get_weather",
        "description": "Today's weather in a city",
        "parameters": WEATHER_SCHEMA,
        "strict": False,
    }
]


def responses_follow_up(first):
    call = next(item for item in first.output if item.type == "function_call")
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris"}
    # As the SDK's docs do it: the output items go back as input, then the result.
    return ASK + list(first.output) + [{"type": "function_call_output", "call_id": call.call_id, "output": WEATHER}]


def test_openai_responses_tool_round_trip_on_an_anthropic_provider(oa):
    first = oa.responses.create(model="gpt-agent", input=ASK, tools=RESPONSES_TOOLS)
    assert first.status == "completed"
    final = oa.responses.create(model="gpt-agent", input=responses_follow_up(first), tools=RESPONSES_TOOLS)
    assert final.status == "completed"
    assert WEATHER in final.output_text
    assert final.usage.output_tokens > 0


def test_openai_responses_streamed_tool_round_trip_on_an_anthropic_provider(oa):
    # The SDK's stream helper checks each event against the items it has seen.
    with oa.responses.stream(model="gpt-agent", input=ASK, tools=RESPONSES_TOOLS) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert "response.function_call_arguments.delta" in kinds and kinds[-1] == "response.completed", kinds
    follow = responses_follow_up(first)
    events = list(oa.responses.create(model="gpt-agent", input=follow, tools=RESPONSES_TOOLS, stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert WEATHER in text
    assert events[-1].type == "response.completed"
    assert WEATHER in events[-1].response.output_text


@pytest.fixture
def gem():
    # The SDK defaults to API version v1; Gemini CLI and the gateway speak v1beta.
    # The test keeps the client while it streams (a collected client closes its pool).
    options = types.HttpOptions(base_url=URL, api_version="v1beta", timeout=int(TIMEOUT * 1000))
    return genai.Client(api_key="sk-local-client", http_options=options)


def test_google_genai_runs_a_function_for_an_anthropic_provider(gem):
    ran = []

    def get_weather(city: str) -> str:
        """Today's weather in a city."""
        ran.append(city)
        return WEATHER

    # Automatic function calling: the SDK runs the function the provider
    # asks for and sends its result back itself.
    config = types.GenerateContentConfig(tools=[get_weather])
    response = gem.models.generate_content(model="gemini-agent", contents=ASK[0]["content"], config=config)
    assert ran == ["Paris"]
    assert WEATHER in response.text
    assert response.candidates[0].finish_reason == types.FinishReason.STOP
    assert response.usage_metadata.candidates_token_count > 0


def test_google_genai_streamed_function_call_for_an_anthropic_provider(gem):
    declaration = types.FunctionDeclaration(
        name="get_weather", description="Today's weather in a city", parameters_json_schema=WEATHER_SCHEMA
    )
    config = types.GenerateContentConfig(
        tools=[types.Tool(function_declarations=[declaration])],
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    ask = types.Content(role="user", parts=[types.Part(text=ASK[0]["content"])])
    chunks = list(gem.models.generate_content_stream(model="gemini-agent", contents=[ask], config=config))
    # The gateway's last chunk carries the finish reason and usage, no content.
    calls = [call for c in chunks for call in (c.function_calls or [])]
    assert len(calls) == 1, chunks
    assert (calls[0].name, calls[0].args) == ("get_weather", {"city": "Paris"})
    follow = [
        ask,
        types.Content(role="model", parts=[types.Part(function_call=calls[0])]),
        types.Content(role="user", parts=[types.Part.from_function_response(name="get_weather", response={"output": WEATHER})]),
    ]
    chunks = list(gem.models.generate_content_stream(model="gemini-agent", contents=follow, config=config))
    text = "".join(c.text or "" for c in chunks)
    assert WEATHER in text
    assert chunks[-1].candidates[0].finish_reason == types.FinishReason.STOP


def test_a_blocking_budget_is_budget_exceeded_and_neither_sdk_retries(oa, an):
    # tests/tests/real_clients.rs spent the "over-budget" model's budget
    # first, and counts afterwards that each SDK asked once: no retry.
    with pytest.raises(openai.RateLimitError) as refused:
        oa.chat.completions.create(model="over-budget", messages=MESSAGES)
    assert refused.value.code == "budget_exceeded"
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert int(refused.value.response.headers["retry-after"]) > 0
    with pytest.raises(anthropic.RateLimitError) as refused:
        an.messages.create(model="over-budget", max_tokens=8, messages=MESSAGES)
    assert refused.value.body["error"]["code"] == "budget_exceeded"


def test_prompt_too_long_from_an_openai_provider_is_the_anthropic_sdk_s_own_error(an):
    # Claude Code compacts on exactly this error; the provider said it in OpenAI's words.
    with pytest.raises(anthropic.BadRequestError) as raised:
        an.messages.create(model="too-long", max_tokens=8, messages=MESSAGES)
    assert raised.value.status_code == 400
    error = raised.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"] == "prompt is too long: 130532 tokens > 128000 maximum"


def test_prompt_too_long_from_an_anthropic_provider_is_context_length_exceeded_for_openai(oa):
    # Codex and the OpenAI SDK act on the code; the provider said it in Anthropic's words.
    with pytest.raises(openai.BadRequestError) as raised:
        oa.chat.completions.create(model="too-long-an", messages=MESSAGES)
    assert raised.value.status_code == 400
    assert raised.value.code == "context_length_exceeded"
    assert "maximum context length is 200000 tokens" in raised.value.message

"""What the official OpenAI, Anthropic and Google Gen AI Python SDKs send, for
the request corpus. Run by `capture-corpus` (tests/src/bin/capture-corpus),
pointed straight at a simulated provider, one scenario per run:

    corpus_sdks.py SCENARIO BASE_URL    # sends that scenario's requests
    corpus_sdks.py version PACKAGE      # prints an SDK's version

The provider plays an agent: offered tools, it calls the first one; given a
tool result, it answers with text. Tool scenarios run that whole loop, so the
corpus holds a request with a tool result too. Only the requests matter here:
the replies are not checked.
"""

import sys

GET_WEATHER = {
    "name": "get_weather",
    "description": "The current weather in a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "City name"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
}
KEY = "sk-local-client"
ASK = "What is the weather in Paris?"


def openai_client(url):
    import openai

    return openai.OpenAI(base_url=f"{url}/v1", api_key=KEY, max_retries=0)


def openai_chat(url):
    openai_client(url).chat.completions.create(
        model="gpt-4.1",
        messages=[
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Say hello"},
        ],
        temperature=0.2,
        max_completion_tokens=64,
    )


def openai_chat_stream(url):
    stream = openai_client(url).chat.completions.create(
        model="gpt-4.1",
        messages=[{"role": "user", "content": "Say hello"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    for _ in stream:
        pass


def openai_chat_tools(url):
    client = openai_client(url)
    tools = [{"type": "function", "function": GET_WEATHER}]
    messages = [{"role": "user", "content": ASK}]
    first = client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools, tool_choice="auto")
    call = first.choices[0].message.tool_calls[0]
    messages.append(first.choices[0].message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id, "content": "18 degrees, clear"})
    client.chat.completions.create(model="gpt-4.1", messages=messages, tools=tools)


def openai_responses(url):
    openai_client(url).responses.create(
        model="gpt-5", instructions="You are terse.", input="Say hello", reasoning={"effort": "low"}
    )


def openai_responses_stream(url):
    with openai_client(url).responses.stream(model="gpt-5", input="Say hello") as stream:
        for _ in stream:
            pass


def openai_responses_tools(url):
    client = openai_client(url)
    tools = [{"type": "function", **GET_WEATHER, "strict": False}]
    first = client.responses.create(model="gpt-5", input=ASK, tools=tools, store=False)
    call = next(item for item in first.output if item.type == "function_call")
    history = [{"role": "user", "content": ASK}, call.model_dump(exclude_none=True)]
    history.append({"type": "function_call_output", "call_id": call.call_id, "output": "18 degrees, clear"})
    client.responses.create(model="gpt-5", input=history, tools=tools, store=False)


def anthropic_client(url):
    import anthropic

    return anthropic.Anthropic(base_url=url, api_key=KEY, max_retries=0)


def anthropic_messages(url):
    anthropic_client(url).messages.create(
        model="claude-sonnet-4-5",
        max_tokens=256,
        system="You are terse.",
        messages=[{"role": "user", "content": "Say hello"}],
        stop_sequences=["\n\n"],
    )


def anthropic_messages_stream(url):
    with anthropic_client(url).messages.stream(
        model="claude-sonnet-4-5", max_tokens=256, messages=[{"role": "user", "content": "Say hello"}]
    ) as stream:
        for _ in stream.text_stream:
            pass


def anthropic_messages_tools(url):
    client = anthropic_client(url)
    tools = [{"name": GET_WEATHER["name"], "description": GET_WEATHER["description"],
              "input_schema": GET_WEATHER["parameters"]}]
    messages = [{"role": "user", "content": ASK}]
    first = client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=tools)
    call = next(block for block in first.content if block.type == "tool_use")
    messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]})
    result = {"type": "tool_result", "tool_use_id": call.id, "content": "18 degrees, clear"}
    messages.append({"role": "user", "content": [result]})
    client.messages.create(model="claude-sonnet-4-5", max_tokens=256, messages=messages, tools=tools)


def genai_client(url):
    from google import genai

    # The SDK's default API version is v1; the gateway and Gemini CLI speak v1beta.
    return genai.Client(api_key=KEY, http_options={"base_url": url, "api_version": "v1beta"})


def genai_generate(url):
    from google.genai import types

    # Kept in a variable: a client nothing refers to closes its connections.
    client = genai_client(url)
    client.models.generate_content(
        model="gemini-2.5-flash",
        contents="Say hello",
        config=types.GenerateContentConfig(system_instruction="You are terse.", temperature=0.2),
    )


def genai_stream(url):
    client = genai_client(url)
    for _ in client.models.generate_content_stream(model="gemini-2.5-flash", contents="Say hello"):
        pass


def genai_tools(url):
    from google.genai import types

    client = genai_client(url)
    tool = types.Tool(function_declarations=[types.FunctionDeclaration(**GET_WEATHER)])
    # Calls are handed back by hand, as an agent loop does: no automatic calling.
    config = types.GenerateContentConfig(
        tools=[tool], automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True)
    )
    contents = [types.Content(role="user", parts=[types.Part(text=ASK)])]
    first = client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)
    call = first.candidates[0].content.parts[0].function_call
    contents.append(first.candidates[0].content)
    answer = types.Part.from_function_response(name=call.name, response={"result": "18 degrees, clear"})
    contents.append(types.Content(role="user", parts=[answer]))
    client.models.generate_content(model="gemini-2.5-flash", contents=contents, config=config)


SCENARIOS = {
    "openai-chat": openai_chat,
    "openai-chat-stream": openai_chat_stream,
    "openai-chat-tools": openai_chat_tools,
    "openai-responses": openai_responses,
    "openai-responses-stream": openai_responses_stream,
    "openai-responses-tools": openai_responses_tools,
    "anthropic-messages": anthropic_messages,
    "anthropic-messages-stream": anthropic_messages_stream,
    "anthropic-messages-tools": anthropic_messages_tools,
    "genai-generate": genai_generate,
    "genai-stream": genai_stream,
    "genai-tools": genai_tools,
}


def version(package):
    import importlib.metadata

    print(importlib.metadata.version(package))


if __name__ == "__main__":
    if sys.argv[1] == "version":
        version(sys.argv[2])
    else:
        SCENARIOS[sys.argv[1]](sys.argv[2])

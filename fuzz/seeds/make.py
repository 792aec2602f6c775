#!/usr/bin/env python3
"""Writes the seed corpus: fuzz/corpus/<target>/seed-*.

Each seed is a real-shaped input of its target, with the target's leading
control bytes (see each target's module docs). Run from the repository top:
`python3 fuzz/seeds/make.py`. Inputs libFuzzer finds on a run are written
beside the seeds and ignored by git; only seeds are kept.
"""
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "corpus"
# The order of switchyard_core::protocol::Endpoint::ALL.
CHAT, COMPLETIONS, EMBEDDINGS, RESPONSES, MESSAGES, COUNT_TOKENS = range(6)


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    (d / f"seed-{name}").write_bytes(data if isinstance(data, bytes) else data.encode())


def j(value):
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def sse(*events):
    return "".join(events)


def data(value):
    return f"data: {j(value)}\n\n"


def named(name, value):
    return f"event: {name}\ndata: {j(value)}\n\n"


# --- request bodies: a byte that picks the upstream name, then the body ---
chat = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi \u00e9 \"quoted\""}],
    "temperature": 0.2,
    "max_tokens": 64,
}
write("request_body", "chat", b"\x00" + json.dumps(chat, indent=2, ensure_ascii=False).encode())
write("request_body", "chat-stream", b"\x01" + j({**chat, "stream": True}).encode())
write("request_body", "chat-stream-options",
      b"\x02" + j({**chat, "stream": True, "stream_options": {"include_usage": True}}).encode())
write("request_body", "chat-tools", b"\x03" + j({
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "model": "inner"}}}],
    "model": "openai/gpt-4o", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}]}],
    "stream": False, "stream_options": None}).encode())
write("request_body", "messages", b"\x04" + j({
    "model": "claude-sonnet-4-5", "max_tokens": 1024, "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "Hello"}], "stream": True}).encode())
write("request_body", "responses", b"\x05" + j({
    "model": "gpt-5", "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
    "reasoning": {"effort": "low"}, "stream": True}).encode())
write("request_body", "embeddings", b"\x00" + j({"input": ["a", "b"], "model": "text-embedding-3-small", "dimensions": 256}).encode())
write("request_body", "escapes", b"\x01" + "{ \"mod\\u0065l\" :\t\"a\\u0062c\\n\\ud83d\\ude00\" ,\r\n \"stream\":true }\n".encode())
write("request_body", "not-object", b"\x00" + b'[{"model":"m"}]')
write("request_body", "model-number", b"\x00" + b'{"model":7,"stream":"true"}')

# --- SSE streams: endpoint byte, cut byte, then the stream ---
def stream_seed(name, endpoint, text, cut=128):
    write("sse_stream", name, bytes([endpoint, cut]) + text.encode())


def chunk(delta, finish=None, usage=False):
    c = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        c["usage"] = None
    return c


chat_stream = sse(
    ": keep-alive\n\n",
    data(chunk({"role": "assistant", "content": ""})),
    data(chunk({"content": "Hel"})),
    data(chunk({"content": "lo"})),
    data(chunk({}, "stop")),
    data({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2,
                                                      "prompt_tokens_details": {"cached_tokens": 0}}}),
    "data: [DONE]\n\n",
)
stream_seed("chat", CHAT, chat_stream)
stream_seed("chat-crlf", CHAT, chat_stream.replace("\n", "\r\n"), cut=77)
stream_seed("chat-tool-calls", CHAT, sse(
    data(chunk({"role": "assistant", "tool_calls": [{"index": 0, "id": "c", "type": "function",
                                                     "function": {"name": "f", "arguments": ""}}]})),
    data(chunk({}, "tool_calls")), "data: [DONE]\n\n"))
stream_seed("chat-error", CHAT, sse(
    data(chunk({"role": "assistant"})),
    data({"error": {"message": "The server is overloaded", "type": "server_error", "code": None}})))
stream_seed("completions", COMPLETIONS, sse(
    data({"id": "cmpl", "object": "text_completion", "choices": [{"text": "", "index": 0, "finish_reason": None}]}),
    data({"id": "cmpl", "choices": [{"text": " world", "index": 0, "finish_reason": "length"}]}), "data: [DONE]\n\n"))
messages_stream = sse(
    named("message_start", {"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                                                  "content": [], "model": "claude-sonnet-4-5",
                                                                  "usage": {"input_tokens": 25, "cache_read_input_tokens": 100,
                                                                            "cache_creation_input_tokens": 0, "output_tokens": 1}}}),
    named("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    named("ping", {"type": "ping"}),
    named("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}}),
    named("content_block_stop", {"type": "content_block_stop", "index": 0}),
    named("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 15}}),
    named("message_stop", {"type": "message_stop"}),
)
stream_seed("messages", MESSAGES, messages_stream)
stream_seed("messages-error", MESSAGES, sse(
    named("message_start", {"type": "message_start", "message": {"usage": {"input_tokens": 3}}}),
    named("ping", {"type": "ping"}),
    named("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})))
responses_stream = sse(
    named("response.created", {"type": "response.created", "sequence_number": 0,
                               "response": {"id": "resp_1", "status": "in_progress", "error": None, "usage": None}}),
    named("response.in_progress", {"type": "response.in_progress", "response": {"id": "resp_1"}}),
    named("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                         "item": {"type": "message", "content": []}}),
    named("response.content_part.added", {"type": "response.content_part.added", "part": {"type": "output_text", "text": ""}}),
    named("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Hi"}),
    named("response.completed", {"type": "response.completed", "response": {
        "id": "resp_1", "status": "completed", "error": None,
        "usage": {"input_tokens": 12, "input_tokens_details": {"cached_tokens": 4}, "output_tokens": 3,
                  "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}}}),
)
stream_seed("responses", RESPONSES, responses_stream)
stream_seed("responses-failed", RESPONSES, sse(
    named("response.created", {"type": "response.created", "response": {"id": "r"}}),
    named("response.failed", {"type": "response.failed", "response": {"error": {"code": "server_error", "message": "boom"}}})))
stream_seed("responses-error", RESPONSES, sse(
    named("error", {"type": "error", "code": "rate_limit_exceeded", "message": "slow down", "param": None})))
stream_seed("bare-cr", CHAT, "event: x\rdata: {\"choices\":[]}\r\r: c\r\rdata: [DONE]\r\r")
stream_seed("unterminated", MESSAGES, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\"")

# --- usage: endpoint+mode byte (mode = byte / 6 % 3: body, stream, stripped stream), cut byte, bytes ---
def usage_seed(name, endpoint, mode, text, at=100):
    write("usage", name, bytes([endpoint + 6 * mode, at]) + text.encode())


usage_seed("chat-body", CHAT, 0, j({
    "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "say \"usage\": {}"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 19, "completion_tokens": 10, "total_tokens": 29,
              "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
              "completion_tokens_details": {"reasoning_tokens": 0}}}))
usage_seed("embeddings-body", EMBEDDINGS, 0, j({
    "object": "list", "data": [{"object": "embedding", "index": 0, "embedding": [0.1, -0.2]}],
    "model": "text-embedding-3-small", "usage": {"prompt_tokens": 8, "total_tokens": 8}}))
usage_seed("responses-body", RESPONSES, 0, json.dumps({
    "id": "resp_1", "object": "response", "output": [{"type": "message", "content": [{"type": "output_text", "text": "Hi"}]}],
    "usage": {"input_tokens": 36, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 87,
              "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 123}}, indent=1))
usage_seed("messages-body", MESSAGES, 0, j({
    "id": "msg_1", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "Hi"}],
    "stop_reason": "end_turn", "usage": {"input_tokens": 2095, "cache_creation_input_tokens": 0,
                                         "cache_read_input_tokens": 1800, "output_tokens": 503}}))
usage_seed("count-tokens-body", COUNT_TOKENS, 0, j({"input_tokens": 14}))
usage_seed("odd-counts-body", CHAT, 0,
           '{"usage":{"prompt_tokens":"12","completion_tokens":-1,"prompt_tokens_details":null,"x":[1,{"b":"}]\\\\"}]},'
           '"usage":{"prompt_tokens":1}}')
usage_seed("nested-body", CHAT, 0, '{"choices":[{"usage":{"prompt_tokens":99}}],"usage":null}')
usage_seed("chat-stream", CHAT, 1, chat_stream)
usage_seed("chat-stream-stripped", CHAT, 2, sse(
    data(chunk({"role": "assistant", "content": ""}, usage=True)),
    data(chunk({"content": "Hi"}, usage=True)),
    data({"id": "chatcmpl-1", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}),
    "data: [DONE]\n\n"), at=33)
usage_seed("messages-stream", MESSAGES, 1, messages_stream, at=200)
usage_seed("responses-stream", RESPONSES, 1, responses_stream, at=50)

# --- config: TOML text ---
core = pathlib.Path(__file__).resolve().parents[2] / "crates" / "core" / "src"
write("config", "default", (core / "default.toml").read_text())
write("config", "full", """\
[server]
listen = "127.0.0.1:4141"
max_body_bytes = 33554432
allowed_hosts = ["switchyard.localhost"]
allowed_origins = ["http://localhost:5173"]
access_token = false
max_header_bytes = 65536
max_connections = 64
rate_limit_per_minute = 600
header_timeout = "10s"
body_timeout = "30s"

[policy]
deadline = "300s"
attempt_timeout = "120s"
max_retries = 1
retry_timeouts = false
backoff_base = "250ms"
backoff_cap = "5s"
breaker_failure_rate = 0.5
max_concurrency = 8

[[providers]]
name = "openai"
kind = "openai"
base_url = "https://api.openai.com/v1"
models = ["gpt-4o-mini", "gpt-4.1"]
policy = { requests_per_minute = 500, tokens_per_minute = 200000 }

[[providers]]
name = "groq"
kind = "openai"
base_url = "https://api.groq.com/openai/v1/"
models = { "gpt-4o-mini" = "llama-3.1-8b-instant", "*" = "*" }
stream_usage = false

[[providers]]
name = "local"
kind = "anthropic"
base_url = "http://[::1]:11434/v1"
auth = "none"
enabled = false
probe = true

[[routes]]
model = "gpt-4o-mini"
chain = ["openai", "groq"]
policy = { deadline = "20s", retry_timeouts = true }

[history]
enabled = true
retention = "30days"
max_size_mb = 512
store_bodies = true
body_limit = 16384

[[prices]]
provider = "groq"
model = "llama-3.1-8b-instant"
input = 0.05
output = 0.08
cached = 0.025
""")
write("config", "off-loopback", '[server]\nlisten = "0.0.0.0:4141"\naccess_token = true\n')
write("config", "bad-kind", '[[providers]]\nname = "a"\nkind = "openia"\nbase_url = "http://x/v1"\n')
write("config", "bad-syntax", '[server]\nlisten = \n[[routes]\nmodel = "m"\n')
write("config", "unknown-field", '[server]\nlisen = "127.0.0.1:1"\n\n[history]\nmax_size_mb = 0\n')
write("config", "bad-chain", '[[providers]]\nname = "a"\nkind = "openai"\nbase_url = "http://x/v1"\n\n'
      '[[routes]]\nmodel = "m"\nchain = ["a", "b"]\npolicy = { max_concurrency = 1 }\n')
write("config", "unicode", '# é\n[server]\nlisten = "127.0.0.1:４１４１"\n')

# --- redis_replies: a byte that picks what is read (see the target's docs), then its bytes ---
ANNOUNCEMENT, EVENT, CACHE_ENTRY, MEMBER, REPLY = range(5)
OWN_ID = "0197a5c0-0000-7000-8000-000000000001"
OTHER_ID = "0197a5c0-0000-7000-8000-000000000002"


def redis_seed(name, what, data):
    write("redis_replies", name, bytes([what]) + (data if isinstance(data, bytes) else data.encode()))


def fields(*pairs):
    """Fields as XREAD and HGETALL give them: field NUL value NUL ..."""
    return b"\0".join(p if isinstance(p, bytes) else p.encode() for kv in pairs for p in kv)


def resp(value):
    """RESP2, as Redis writes a reply."""
    if isinstance(value, list):
        return b"*%d\r\n" % len(value) + b"".join(resp(v) for v in value)
    if isinstance(value, int):
        return b":%d\r\n" % value
    if value is None:
        return b"$-1\r\n"
    value = value if isinstance(value, bytes) else value.encode()
    return b"$%d\r\n%s\r\n" % (len(value), value)


def announced(change, by="gw-2", id=OTHER_ID):
    return j({"by": by, "id": id, "change": change})


redis_seed("announcement-tripped", ANNOUNCEMENT, announced(
    {"change": "breaker_tripped", "provider": "openai", "for_ms": 30000, "reason": "5 failures in a row; open for 30s", "local": True}))
redis_seed("announcement-closed", ANNOUNCEMENT, announced(
    {"change": "breaker_closed", "provider": "openai", "reason": "2 probes succeeded"}))
redis_seed("announcement-forced", ANNOUNCEMENT, announced({"change": "breaker_forced", "provider": "openai", "open": True}))
redis_seed("announcement-cooling", ANNOUNCEMENT, announced(
    {"change": "cooling", "provider": "anthropic", "key": "0123456789abcdef0123456789abcdef", "for_ms": 1500}))
redis_seed("announcement-revoked", ANNOUNCEMENT, announced(
    {"change": "revoked", "provider": "groq", "key": "fedcba9876543210fedcba9876543210", "reason": "HTTP 401 Unauthorized: invalid key \u00e9"}))
redis_seed("announcement-toggled", ANNOUNCEMENT, announced({"change": "toggled", "provider": "local", "enabled": False}))
redis_seed("announcement-own", ANNOUNCEMENT, announced({"change": "cooling", "provider": "p", "key": None, "for_ms": 1}, "gw-1", OWN_ID))
redis_seed("announcement-years", ANNOUNCEMENT, announced(
    {"change": "cooling", "provider": "openai", "key": None, "for_ms": 18446744073709551615}))

brief = {"id": "0197a5c1-aaaa-7bbb-8ccc-dddddddddddd", "endpoint": "/v1/chat/completions", "model": "gpt-4o-mini",
         "provider": "openai", "outcome": "ok", "status": 200, "duration_ms": 812.5, "ttft_ms": 201.0,
         "input_tokens": 19, "output_tokens": 10, "cost_usd": 0.000123, "cache": "miss",
         "attempts": ["groq:429", "openai:200"], "member": None, "session": "claude-code-1234"}
redis_seed("event-finished", EVENT, fields(
    ("i", OTHER_ID), ("n", "gw-2"), ("a", "1750000000123"), ("e", j({"type": "request_finished", "request": brief}))))
redis_seed("event-breaker", EVENT, fields(
    ("i", OTHER_ID), ("n", "gw-2"), ("a", "1750000000456"),
    ("e", j({"type": "breaker", "provider": "openai", "from": "closed", "to": "open", "reason": "5 failures in a row"}))))
redis_seed("event-alert", EVENT, fields(
    ("i", OTHER_ID), ("n", "host.example:4141"), ("a", "1750000000789"),
    ("e", j({"type": "alert", "kind": "budget_threshold", "subject": "daily", "title": "Budget at 80%", "message": "$8.00 of $10.00", "suppressed": 0}))))
redis_seed("event-own", EVENT, fields(("i", OWN_ID), ("n", "gw-1"), ("a", "1"), ("e", "{}")))
redis_seed("event-odd-fields", EVENT, fields(
    (b"\xff", b"x"), ("i", OTHER_ID), ("n", "gw-2"), ("a", "-5"), ("e", j({"type": "provider_toggled", "provider": "p", "enabled": True}))))


def cache_entry(form, body, **head):
    h = {"v": 1, "endpoint": "/v1/chat/completions", "model": "gpt-4o-mini", "provider": "openai", "status": 200,
         "content_type": "text/event-stream" if form == "sse" else "application/json", "form": form,
         "input_tokens": 12, "output_tokens": 3, "cached_tokens": None, "cost_usd": 0.25, "created_at_ms": 1749999999000}
    h.update(head)
    return j(h).encode() + b"\n" + body.encode()


json_answer = cache_entry("json", j({"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
                                      "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi"}, "finish_reason": "stop"}],
                                      "usage": {"prompt_tokens": 12, "completion_tokens": 3}}))
sse_answer = cache_entry("sse", chat_stream)
redis_seed("cache-json", CACHE_ENTRY, json_answer)
redis_seed("cache-sse", CACHE_ENTRY, sse_answer)
redis_seed("cache-future", CACHE_ENTRY, cache_entry("json", "{}", created_at_ms=9999999999999, cost_usd=-1, status=500))
redis_seed("cache-no-body-line", CACHE_ENTRY, j({"v": 1}))
# A cost serde_json does not read back exactly once written (it reads floats to about an ULP).
redis_seed("cache-long-cost", CACHE_ENTRY, cache_entry("sse", chat_stream).replace(
    b'"cost_usd":0.25', b'"cost_usd":0.233333333333333333333333333333333333333333333333333333335'))

heartbeat = (("name", "gw-2"), ("id", OTHER_ID), ("started_at", "1749999999000"), ("version", "0.1.0"),
             ("address", "[::1]:4141"), ("requests", "42"), ("seen_at", "1750000000123"))
redis_seed("member", MEMBER, fields(*heartbeat))
redis_seed("member-older", MEMBER, fields(("name", "gw-3"), ("id", OTHER_ID)))
redis_seed("member-odd", MEMBER, fields(("name", "gw\n2"), ("id", OTHER_ID), ("requests", "-1"), ("requests", "2")))

event_fields = ["i", OTHER_ID, "n", "gw-2", "a", "1750000000456", "e", j({"type": "provider_toggled", "provider": "p", "enabled": True})]
redis_seed("reply-xread", REPLY, resp([["ns:events", [["1750000000456-0", event_fields],
                                                      ["1750000000457-0", [b"\xff", "x"] + event_fields]]]]))
redis_seed("reply-xread-resp3", REPLY, b"%1\r\n" + resp("ns:events") + resp([["1-0", event_fields]]))
redis_seed("reply-xread-none", REPLY, b"*-1\r\n")
redis_seed("reply-fill-found", REPLY, resp([1, json_answer]))
redis_seed("reply-fill-lock", REPLY, resp([2]))
redis_seed("reply-fill-wait", REPLY, resp([3]))

# --- inputs that broke a parser once (see the fixes' tests) ---
write("request_body", "stream-options-null", b"\x01" + b'{"model":"m","stream":true,"stream_options":null}')
write("request_body", "unbuildable-values", b"\x02" + b'{"model":"m","n":1e999,"s":"\\udc00"}')
usage_seed("messages-huge-counts", MESSAGES, 0,
           '{"usage":{"input_tokens":18446744073709551615,"cache_read_input_tokens":1,"cache_creation_input_tokens":2}}')
write("config", "huge-numbers", "[server]\nrate_limit_per_minute = 4294967296\n\n[history]\nmax_size_mb = 17592186044416\n")

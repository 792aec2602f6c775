use serde_json::{json, Value};

use super::*;
use crate::protocol::sse::Splitter;
use crate::protocol::Usage;

/// A Chat answer as the cache holds it, in `form`.
pub(in crate::cache) fn entry(form: Form, body: &str) -> Entry {
    Entry {
        endpoint: "/v1/chat/completions".into(),
        model: "m".into(),
        provider: None,
        status: 200,
        content_type: match form {
            Form::Json => "application/json".into(),
            Form::Sse => "text/event-stream; charset=utf-8".into(),
        },
        form,
        body: Bytes::from(body.to_string()),
        usage: Usage::default(),
        cost_usd: None,
        created_at_ms: 0,
    }
}

fn ask(wire: Wire, stream: bool) -> Ask {
    Ask { wire, stream, include_usage: true }
}

fn json_of(r: &Replay) -> Value {
    assert!(!r.stream);
    assert_eq!(r.content_type, "application/json");
    serde_json::from_slice(&r.body).unwrap()
}

/// Each event's name (or `type`, or `[DONE]`) in order.
fn event_names(stream: &[u8]) -> Vec<String> {
    let mut s = Splitter::default();
    s.push(stream)
        .iter()
        .map(|e| {
            let (name, data) = crate::protocol::sse::parse(e);
            name.unwrap_or_else(|| {
                serde_json::from_str::<Value>(&data)
                    .ok()
                    .and_then(|v| v.get("type").and_then(Value::as_str).map(str::to_string))
                    .unwrap_or(data)
            })
        })
        .collect()
}

/// A stored answer told as a stream, then that stream folded again.
fn round_trip(wire: Wire, answer: &Value) -> (Vec<u8>, Value) {
    let stream = replay(&entry(Form::Json, &answer.to_string()), ask(wire, true)).unwrap();
    assert!(stream.stream);
    assert_eq!(stream.content_type, "text/event-stream");
    assert!(fold::is_whole(wire, &stream.body), "{}", String::from_utf8_lossy(&stream.body));
    let folded = replay(&entry(Form::Sse, std::str::from_utf8(&stream.body).unwrap()), ask(wire, false)).unwrap();
    (stream.body.to_vec(), json_of(&folded))
}

fn chat_answer() -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-mini",
        "system_fingerprint": "fp_1",
        "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Let me look.", "refusal": null,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{\"dir\":\".\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "cat", "arguments": "{}"}}
            ]}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29}
    })
}

#[test]
fn a_stored_chat_answer_streams_in_chunks_and_folds_back_whole() {
    let answer = chat_answer();
    let (stream, folded) = round_trip(Wire::Chat, &answer);
    let text = String::from_utf8(stream.clone()).unwrap();
    assert!(text.ends_with("data: [DONE]\n\n"), "{text}");
    let chunks: Vec<Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .filter(|d| *d != "[DONE]")
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(chunks[0]["choices"][0]["delta"], json!({"role": "assistant", "content": ""}));
    assert!(chunks.iter().all(|c| c["object"] == "chat.completion.chunk" && c["id"] == "chatcmpl-1"));
    let last = chunks.last().unwrap();
    assert_eq!(last["choices"], json!([]), "usage comes last, alone");
    assert_eq!(last["usage"], answer["usage"]);
    // The fold gives the answer back.
    assert_eq!(folded, answer);
}

#[test]
fn a_stored_chat_stream_is_replayed_as_is_or_folded() {
    let stream = concat!(
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_a\",\"type\":\"function\",\"function\":{\"name\":\"ls\",\"arguments\":\"\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"{\\\"a\\\":\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"function\":{\"arguments\":\"1}\"}}]},\"finish_reason\":null}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}],\"usage\":null}\n\n",
        "data: {\"id\":\"c9\",\"object\":\"chat.completion.chunk\",\"created\":5,\"model\":\"m\",\"choices\":[],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2,\"total_tokens\":5}}\n\n",
        "data: [DONE]\n\n",
    );
    let stored = entry(Form::Sse, stream);
    let again = replay(&stored, ask(Wire::Chat, true)).unwrap();
    assert_eq!(again.body, stream.as_bytes(), "byte for byte");
    assert_eq!(again.content_type, "text/event-stream; charset=utf-8");
    // A client that did not ask for usage gets the stream it would have had live.
    let plain = replay(&stored, Ask { include_usage: false, ..ask(Wire::Chat, true) }).unwrap();
    let plain = String::from_utf8(plain.body.to_vec()).unwrap();
    assert!(!plain.contains("usage"), "{plain}");
    assert_eq!(event_names(plain.as_bytes()).len(), 8, "the usage chunk is gone, [DONE] stays");
    let folded = json_of(&replay(&stored, ask(Wire::Chat, false)).unwrap());
    assert_eq!(
        folded,
        json!({
            "id": "c9", "object": "chat.completion", "created": 5, "model": "m",
            "choices": [{"index": 0, "logprobs": null, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Hello", "refusal": null,
                "tool_calls": [{"id": "call_a", "type": "function", "function": {"name": "ls", "arguments": "{\"a\":1}"}}]
            }}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        })
    );
}

fn message_answer() -> Value {
    json!({
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
        "content": [
            {"type": "thinking", "thinking": "The user wants files.", "signature": "sig=="},
            {"type": "text", "text": "Listing them."},
            {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {"dir": ".", "all": true}}
        ],
        "stop_reason": "tool_use", "stop_sequence": null,
        "usage": {"input_tokens": 30, "cache_read_input_tokens": 100, "cache_creation_input_tokens": 0, "output_tokens": 12}
    })
}

#[test]
fn a_stored_message_streams_in_the_protocols_order_and_folds_back_whole() {
    let answer = message_answer();
    let (stream, folded) = round_trip(Wire::Messages, &answer);
    let names = event_names(&stream);
    let mut expected = vec!["message_start", "ping"];
    for deltas in [2, 1, 1] {
        expected.push("content_block_start");
        expected.extend(std::iter::repeat_n("content_block_delta", deltas));
        expected.push("content_block_stop");
    }
    expected.extend(["message_delta", "message_stop"]);
    assert_eq!(names, expected);
    let text = String::from_utf8(stream).unwrap();
    assert!(text.contains(r#""usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"input_tokens":30,"output_tokens":0}"#), "input usage up front");
    assert!(text.contains(r#""usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":100,"input_tokens":30,"output_tokens":12}"#), "all of it at the end");
    assert_eq!(folded, answer);
}

#[test]
fn a_live_message_stream_folds_into_the_message() {
    let stream = concat!(
        "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_9\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":5,\"output_tokens\":1}}}\n\n",
        "event: ping\ndata: {\"type\":\"ping\"}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi \"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"there\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
        "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"x\\\": [1,\"}}\n\n",
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\" 2]}\"}}\n\n",
        "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":7}}\n\n",
        "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
    );
    assert!(fold::is_whole(Wire::Messages, stream.as_bytes()));
    let folded = json_of(&replay(&entry(Form::Sse, stream), ask(Wire::Messages, false)).unwrap());
    assert_eq!(
        folded["content"],
        json!([{"type": "text", "text": "Hi there"}, {"type": "tool_use", "id": "t", "name": "f", "input": {"x": [1, 2]}}])
    );
    assert_eq!(folded["stop_reason"], "tool_use");
    assert_eq!(folded["usage"], json!({"input_tokens": 5, "output_tokens": 7}));
    // Cut before message_stop: not a whole answer, not storable or foldable.
    let cut = &stream[..stream.find("event: message_delta").unwrap()];
    assert!(!fold::is_whole(Wire::Messages, cut.as_bytes()));
    assert!(replay(&entry(Form::Sse, cut), ask(Wire::Messages, false)).is_err());
}

#[test]
fn a_stored_response_streams_numbered_events_and_folds_back_whole() {
    let answer = json!({
        "id": "resp_1", "object": "response", "created_at": 1700000000, "status": "completed", "model": "gpt-5",
        "output": [
            {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Thinking briefly."}]},
            {"id": "msg_1", "type": "message", "status": "completed", "role": "assistant",
             "content": [{"type": "output_text", "text": "Hello.", "annotations": []}]},
            {"id": "fc_1", "type": "function_call", "status": "completed", "call_id": "call_1", "name": "ls", "arguments": "{}"}
        ],
        "usage": {"input_tokens": 9, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 4,
                  "output_tokens_details": {"reasoning_tokens": 2}, "total_tokens": 13}
    });
    let (stream, folded) = round_trip(Wire::Responses, &answer);
    assert_eq!(folded, answer);
    let names = event_names(&stream);
    assert_eq!(names.first().map(String::as_str), Some("response.created"));
    assert_eq!(names.last().map(String::as_str), Some("response.completed"));
    let deltas: Vec<&String> = names.iter().filter(|n| n.ends_with(".delta")).collect();
    assert_eq!(
        deltas,
        [
            "response.reasoning_summary_text.delta",
            "response.output_text.delta",
            "response.function_call_arguments.delta"
        ]
    );
    let mut s = Splitter::default();
    let numbers: Vec<u64> = s
        .push(&stream)
        .iter()
        .map(|e| {
            serde_json::from_str::<Value>(&crate::protocol::sse::parse(e).1).unwrap()["sequence_number"]
                .as_u64()
                .unwrap()
        })
        .collect();
    assert_eq!(numbers, (0..numbers.len() as u64).collect::<Vec<_>>());
}

#[test]
fn completions_gemini_and_embeddings_replay_in_their_forms() {
    let completion = json!({
        "id": "cmpl-1", "object": "text_completion", "created": 1, "model": "m",
        "choices": [{"text": "once upon", "index": 0, "logprobs": null, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 2, "total_tokens": 4}
    });
    assert_eq!(round_trip(Wire::Completions, &completion).1, completion);
    let gemini = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Hi."}]}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 3, "candidatesTokenCount": 2, "totalTokenCount": 5},
        "modelVersion": "gemini-2.5-flash", "responseId": "r1"
    });
    let (stream, folded) = round_trip(Wire::Gemini, &gemini);
    assert_eq!(folded, gemini);
    assert_eq!(String::from_utf8(stream).unwrap(), format!("data: {gemini}\n\n"));
    // Embeddings have no stream: a stream request gets the JSON.
    let vectors = r#"{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}]}"#;
    let r = replay(&entry(Form::Json, vectors), ask(Wire::Embeddings, true)).unwrap();
    assert_eq!((r.stream, &r.body[..]), (false, vectors.as_bytes()));
}

#[test]
fn streams_that_failed_or_were_cut_are_not_whole() {
    let chat_done = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n";
    assert!(fold::is_whole(Wire::Chat, chat_done.as_bytes()));
    assert!(!fold::is_whole(Wire::Chat, b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n"));
    let errored = "data: {\"choices\":[]}\n\ndata: {\"error\":{\"message\":\"overloaded\"}}\n\ndata: [DONE]\n\n";
    assert!(!fold::is_whole(Wire::Chat, errored.as_bytes()));
    let failed = "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{}}\n\n";
    assert!(!fold::is_whole(Wire::Responses, failed.as_bytes()));
    let anthropic_error = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\"}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n";
    assert!(!fold::is_whole(Wire::Messages, anthropic_error.as_bytes()));
    // Garbage stored as JSON cannot be told as a stream: a miss, not a crash.
    assert!(replay(&entry(Form::Json, "{not json"), ask(Wire::Chat, true)).is_err());
}

#[test]
fn replies_from_the_cache_say_so_and_how_old_they_are() {
    let r = replay(&entry(Form::Json, "{}"), ask(Wire::Chat, false)).unwrap();
    let hit = response(r.clone(), CacheStatus::Hit, Duration::from_millis(61_900));
    assert_eq!(hit.headers()["x-switchyard-cache"], "hit");
    assert_eq!(hit.headers()["age"], "61");
    assert_eq!(hit.headers()["content-type"], "application/json");
    assert!(hit.headers().get("warning").is_none());
    let stale = response(r, CacheStatus::Stale, Duration::from_secs(700));
    assert_eq!(stale.headers()["x-switchyard-cache"], "stale");
    assert_eq!(stale.headers()["warning"], "110 - \"Response is Stale\"");
    let streamed = response(
        replay(&entry(Form::Json, &chat_answer().to_string()), ask(Wire::Chat, true)).unwrap(),
        CacheStatus::Hit,
        Duration::ZERO,
    );
    assert_eq!(streamed.headers()["cache-control"], "no-cache");
    let mut live = HeaderMap::new();
    set_headers(&mut live, CacheStatus::Miss, None);
    assert_eq!(live["x-switchyard-cache"], "miss");
    assert!(live.get("age").is_none());
}

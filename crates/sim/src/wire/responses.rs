//! OpenAI Responses: the response object and its event stream.

use axum::body::Bytes;
use serde_json::{json, Value};

use super::{event, Ctx, Events, CREATED};
use crate::agent::{Input, ToolCall};

fn output_message(ctx: &Ctx<'_>, status: &str, text: &str) -> Value {
    json!({
        "id": ctx.id("msg_"),
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": [{ "type": "output_text", "text": text, "annotations": [], "logprobs": [] }],
    })
}

fn is_custom(call: &ToolCall) -> bool {
    matches!(call.input, Input::Text(_))
}

fn item_id(ctx: &Ctx<'_>, call: &ToolCall, i: usize) -> String {
    ctx.call_id(if is_custom(call) { "ctc_" } else { "fc_" }, i)
}

/// The output item of the `i`th tool call; `input` is what has arrived so far.
fn tool_item(ctx: &Ctx<'_>, call: &ToolCall, i: usize, status: &str, input: &str) -> Value {
    let mut item = json!({
        "id": item_id(ctx, call, i),
        "type": if is_custom(call) { "custom_tool_call" } else { "function_call" },
        "status": status,
        "call_id": ctx.call_id("call_", i),
        "name": call.name,
    });
    item[if is_custom(call) { "input" } else { "arguments" }] = json!(input);
    item
}

fn output(ctx: &Ctx<'_>) -> Value {
    if ctx.calls().is_empty() {
        return json!([output_message(ctx, "completed", &ctx.text())]);
    }
    let items: Vec<Value> = ctx
        .calls()
        .iter()
        .enumerate()
        .map(|(i, call)| tool_item(ctx, call, i, "completed", &call.input.text()))
        .collect();
    json!(items)
}

pub(super) fn response_object(ctx: &Ctx<'_>, status: &str) -> Value {
    let done = status == "completed";
    json!({
        "id": ctx.id("resp_"),
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": null,
        "incomplete_details": null,
        "instructions": null,
        "model": ctx.model,
        "output": if done { output(ctx) } else { json!([]) },
        "parallel_tool_calls": true,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": if done { json!({
            "input_tokens": ctx.input_tokens,
            "input_tokens_details": { "cached_tokens": 0 },
            "output_tokens": ctx.output_tokens(),
            "output_tokens_details": { "reasoning_tokens": 0 },
            "total_tokens": ctx.input_tokens + ctx.output_tokens(),
        }) } else { Value::Null },
    })
}

/// Numbers events as they are made, in the order they are sent.
struct Sequence(u64);

impl Sequence {
    fn ev(&mut self, name: &str, mut body: Value) -> Bytes {
        body["type"] = json!(name);
        body["sequence_number"] = json!(self.0);
        self.0 += 1;
        event(name, &body)
    }
}

pub(super) fn response_events(ctx: &Ctx<'_>) -> Events {
    let mut seq = Sequence(0);
    let mut preamble = vec![
        seq.ev("response.created", json!({ "response": response_object(ctx, "in_progress") })),
        seq.ev("response.in_progress", json!({ "response": response_object(ctx, "in_progress") })),
    ];
    let (content, tail) = if ctx.calls().is_empty() {
        text_events(ctx, &mut seq, &mut preamble)
    } else {
        tool_events(ctx, &mut seq, &mut preamble)
    };
    // The error event takes the place of the first content event.
    let error = event(
        "error",
        &json!({
            "type": "error", "code": "server_error", "param": null,
            "message": "The server had an error while processing your request.",
            "sequence_number": preamble.len(),
        }),
    );
    Events { preamble, content, tail, error, ..Events::default() }
}

fn text_events(ctx: &Ctx<'_>, seq: &mut Sequence, preamble: &mut Vec<Bytes>) -> (Vec<Bytes>, Vec<Bytes>) {
    let item_id = ctx.id("msg_");
    let text = ctx.text();
    preamble.push(seq.ev(
        "response.output_item.added",
        json!({ "output_index": 0, "item": output_message(ctx, "in_progress", "") }),
    ));
    preamble.push(seq.ev(
        "response.content_part.added",
        json!({
            "item_id": item_id, "output_index": 0, "content_index": 0,
            "part": { "type": "output_text", "text": "", "annotations": [] },
        }),
    ));
    let content = ctx
        .pieces()
        .iter()
        .map(|p| {
            seq.ev(
                "response.output_text.delta",
                json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "delta": p, "logprobs": [] }),
            )
        })
        .collect();
    let tail = vec![
        seq.ev(
            "response.output_text.done",
            json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "text": text, "logprobs": [] }),
        ),
        seq.ev(
            "response.content_part.done",
            json!({
                "item_id": item_id, "output_index": 0, "content_index": 0,
                "part": { "type": "output_text", "text": text, "annotations": [] },
            }),
        ),
        seq.ev(
            "response.output_item.done",
            json!({ "output_index": 0, "item": output_message(ctx, "completed", &text) }),
        ),
        seq.ev("response.completed", json!({ "response": response_object(ctx, "completed") })),
    ];
    (content, tail)
}

/// Each call: `output_item.added` (empty arguments), argument deltas,
/// `.done`, `output_item.done`; a custom tool's input travels in
/// `custom_tool_call_input` events instead. The first call opens in the
/// preamble; the last one closes in the tail.
fn tool_events(ctx: &Ctx<'_>, seq: &mut Sequence, preamble: &mut Vec<Bytes>) -> (Vec<Bytes>, Vec<Bytes>) {
    let calls = ctx.calls();
    let mut content = Vec::new();
    let mut tail = Vec::new();
    for (i, call) in calls.iter().enumerate() {
        let added = seq.ev(
            "response.output_item.added",
            json!({ "output_index": i, "item": tool_item(ctx, call, i, "in_progress", "") }),
        );
        if i == 0 {
            preamble.push(added);
        } else {
            content.push(added);
        }
        let item_id = item_id(ctx, call, i);
        let (delta, done, field) = if is_custom(call) {
            ("response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "input")
        } else {
            ("response.function_call_arguments.delta", "response.function_call_arguments.done", "arguments")
        };
        for piece in ctx.argument_pieces(call) {
            content.push(seq.ev(delta, json!({ "item_id": item_id, "output_index": i, "delta": piece })));
        }
        let full = call.input.text();
        let closing = [
            seq.ev(done, json!({ "item_id": item_id, "output_index": i, field: full })),
            seq.ev(
                "response.output_item.done",
                json!({ "output_index": i, "item": tool_item(ctx, call, i, "completed", &full) }),
            ),
        ];
        if i + 1 == calls.len() {
            tail.extend(closing);
        } else {
            content.extend(closing);
        }
    }
    tail.push(seq.ev("response.completed", json!({ "response": response_object(ctx, "completed") })));
    (content, tail)
}

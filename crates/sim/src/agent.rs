//! The agent script: read a request in its own wire format, then either call
//! one of the tools it offers or answer with the result of the last call.
//!
//! A real coding agent loop is: the provider asks for a tool, the client runs
//! it, the provider answers using the tool's result. Under a [`ToolPlan`] the
//! simulated provider plays the provider's part of that loop, so a test can
//! drive a real client through a full round trip without a model.
//!
//! The decision is made from the request alone (no state between calls), so
//! it holds when a gateway retries, falls back or translates in between:
//! - the conversation carries tool results → text quoting the latest ones;
//! - else the request offers tools → the planned tool calls;
//! - else → the script's ordinary text reply.
//!
//! Like the real providers, the agent refuses a conversation whose tool
//! calls and results do not pair up ([`unpaired`]): a result that answers no
//! call of the turn before it, or a call left without its result. A gateway
//! that loses or renames an id on the way is then refused, not quietly
//! answered.

use serde_json::{json, Map, Value};

use crate::wire::Endpoint;

/// Which tools the agent calls, and with what arguments.
///
/// Arguments given as a JSON string for a function tool are wrapped in an
/// object under the tool's first required string property (`input` if it has
/// none), which is how a custom tool such as Codex's `apply_patch` looks once
/// emulated as a function: one plan then serves both the native and the
/// emulated shape. Any other non-object is wrapped as `{"value": ...}`.
#[derive(Debug, Clone, Default)]
pub struct ToolPlan {
    calls: Vec<Planned>,
}

#[derive(Debug, Clone)]
struct Planned {
    /// `None`: the first tool the request offers.
    tool: Option<String>,
    /// `None`: arguments made up from the tool's schema.
    args: Option<Value>,
}

impl ToolPlan {
    /// Call the first offered tool, with arguments made up from its schema.
    pub fn first() -> ToolPlan {
        ToolPlan { calls: vec![Planned { tool: None, args: None }] }
    }

    /// Call the tool named `name` with `args` (for a custom tool, a string: its raw input).
    pub fn call(name: &str, args: Value) -> ToolPlan {
        ToolPlan::default().and_call(name, args)
    }

    /// Call the tool named `name`, with arguments made up from its schema.
    pub fn tool(name: &str) -> ToolPlan {
        ToolPlan::default().and_tool(name)
    }

    /// Also call `name` with `args` in the same turn (parallel tool calls).
    pub fn and_call(mut self, name: &str, args: Value) -> ToolPlan {
        self.calls.push(Planned { tool: Some(name.to_string()), args: Some(args) });
        self
    }

    /// Also call `name` in the same turn, with arguments from its schema.
    pub fn and_tool(mut self, name: &str) -> ToolPlan {
        self.calls.push(Planned { tool: Some(name.to_string()), args: None });
        self
    }
}

/// What the assistant says in one reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// Text, in the pieces a stream sends it in.
    Text(Vec<String>),
    /// One or more tool calls, in order.
    Tools(Vec<ToolCall>),
}

/// One tool call the assistant makes.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub name: String,
    pub input: Input,
}

/// A tool call's arguments.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// A function tool's arguments: always a JSON object.
    Json(Value),
    /// A custom (freeform) tool's raw input, such as a patch.
    Text(String),
}

impl Input {
    /// The arguments as they travel in a string field (`arguments`, `input`).
    pub fn text(&self) -> String {
        match self {
            Input::Json(v) => v.to_string(),
            Input::Text(s) => s.clone(),
        }
    }
}

/// A tool the request offers.
#[derive(Debug, Clone, PartialEq)]
struct Offered {
    name: String,
    /// A Responses custom tool: its call carries a raw string.
    custom: bool,
    schema: Value,
}

impl Offered {
    /// A function tool declared as `{name, <schema_key>: schema}`.
    fn function(declared: &Value, schema_key: &str) -> Option<Offered> {
        let name = str_of(declared, "name")?.to_string();
        Some(Offered { name, custom: false, schema: declared.get(schema_key).cloned().unwrap_or_default() })
    }
}

/// What the agent needs from a request.
#[derive(Debug, Default, PartialEq)]
struct Seen {
    tools: Vec<Offered>,
    /// The tool results of the latest assistant turn that has any, in order.
    results: Vec<String>,
}

/// How much of each tool result the reply quotes.
const QUOTE_CHARS: usize = 200;

/// The turn the agent takes for `request`; `text` is the script's ordinary reply.
pub fn turn(plan: &ToolPlan, endpoint: Endpoint, request: &Value, chunks: usize, text: Vec<String>) -> Turn {
    let seen = read(endpoint, request);
    if !seen.results.is_empty() {
        let quoted: Vec<String> = seen.results.iter().map(|r| r.chars().take(QUOTE_CHARS).collect()).collect();
        return Turn::Text(split(&format!("the tool said: {}", quoted.join("; ")), chunks));
    }
    if seen.tools.is_empty() {
        return Turn::Text(text);
    }
    let mut calls = Vec::new();
    for planned in &plan.calls {
        let tool = match &planned.tool {
            None => seen.tools.first(),
            Some(name) => seen.tools.iter().find(|t| &t.name == name),
        };
        let Some(tool) = tool else {
            // Say so in the reply: a test then fails on a readable message,
            // not on a call the client cannot run.
            let offered: Vec<&str> = seen.tools.iter().map(|t| t.name.as_str()).collect();
            let wanted = planned.tool.as_deref().unwrap_or_default();
            let message = format!("no tool named {wanted} was offered; offered: {}", offered.join(", "));
            return Turn::Text(split(&message, chunks));
        };
        calls.push(ToolCall { name: tool.name.clone(), input: input_for(tool, planned.args.as_ref()) });
    }
    Turn::Tools(calls)
}

/// Splits `text` into at most `n` non-empty pieces of about equal length, on
/// character boundaries. An empty text has no pieces.
pub fn split(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let n = n.clamp(1, chars.len());
    let size = chars.len().div_ceil(n);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn input_for(tool: &Offered, args: Option<&Value>) -> Input {
    if tool.custom {
        return Input::Text(match args {
            None => String::new(),
            Some(Value::String(s)) => s.clone(),
            Some(v) => v.get("input").and_then(Value::as_str).map_or_else(|| v.to_string(), str::to_string),
        });
    }
    Input::Json(match args {
        None => value_for(&tool.schema, 0),
        Some(v @ Value::Object(_)) => v.clone(),
        Some(Value::String(s)) => {
            let mut object = Map::new();
            object.insert(first_string_property(&tool.schema), json!(s));
            Value::Object(object)
        }
        Some(other) => json!({ "value": other }),
    })
}

fn first_string_property(schema: &Value) -> String {
    let required = schema.get("required").and_then(Value::as_array).into_iter().flatten();
    required
        .filter_map(Value::as_str)
        .find(|name| schema.pointer(&format!("/properties/{name}")).is_some_and(|p| type_of(p) == Some("string")))
        .unwrap_or("input")
        .to_string()
}

/// A schema's type, lower-cased (Gemini writes `OBJECT`), the first non-null
/// one of a type list.
fn type_of(schema: &Value) -> Option<&'static str> {
    let name = match schema.get("type") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(types)) => types.iter().filter_map(Value::as_str).find(|t| *t != "null")?,
        _ if schema.get("properties").is_some() => "object",
        _ => return None,
    };
    ["object", "string", "integer", "number", "boolean", "array", "null"]
        .into_iter()
        .find(|t| t.eq_ignore_ascii_case(name))
}

/// A value valid for `schema` where that is easy to make: defaults, the first
/// enum member, every required property, the first `anyOf` branch.
fn value_for(schema: &Value, depth: usize) -> Value {
    if let Some(v) = schema.get("const").or_else(|| schema.get("default")) {
        return v.clone();
    }
    if let Some(first) = schema.get("enum").and_then(Value::as_array).and_then(|e| e.first()) {
        return first.clone();
    }
    let branch = ["anyOf", "oneOf", "allOf"].iter().find_map(|k| schema.get(*k)?.as_array()?.first());
    match (type_of(schema), branch) {
        (None, Some(branch)) => value_for(branch, depth + 1),
        (Some("string"), _) => json!("sim"),
        (Some("integer" | "number"), _) => json!(schema.get("minimum").and_then(Value::as_f64).map_or(1, |m| m as i64)),
        (Some("boolean"), _) => json!(false),
        (Some("array"), _) => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").map_or(json!("sim"), |items| value_for(items, depth + 1));
            Value::Array((0..min).map(|_| item.clone()).collect())
        }
        (Some("null"), _) => Value::Null,
        _ => object_for(schema, depth),
    }
}

fn object_for(schema: &Value, depth: usize) -> Value {
    let mut object = Map::new();
    // Deep or self-referencing schemas end in an empty object, not a loop.
    if depth > 8 {
        return Value::Object(object);
    }
    for name in schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        let property = schema.pointer(&format!("/properties/{name}")).unwrap_or(&Value::Null);
        object.insert(name.to_string(), value_for(property, depth + 1));
    }
    Value::Object(object)
}

/// Why the provider of `endpoint` would refuse `request`'s conversation, in
/// the spirit of its own error message: tool results must answer the calls
/// of the assistant turn just before them, and every call must be answered
/// before the conversation moves on. `None` when everything pairs up.
pub fn unpaired(endpoint: Endpoint, request: &Value) -> Option<String> {
    match endpoint {
        Endpoint::Chat => unpaired_chat(request),
        Endpoint::Responses => unpaired_responses(request),
        Endpoint::Messages => unpaired_messages(request),
        Endpoint::GeminiGenerate | Endpoint::GeminiStream => unpaired_gemini(request),
        _ => None,
    }
}

/// Chat: an assistant message's `tool_calls` are answered by the `tool`
/// messages right after it, one per `tool_call_id`.
fn unpaired_chat(request: &Value) -> Option<String> {
    let mut calls: Vec<String> = Vec::new();
    let mut unanswered: Vec<String> = Vec::new();
    for (i, message) in array(request, "messages").enumerate() {
        if str_of(message, "role") == Some("tool") {
            let id = str_of(message, "tool_call_id").unwrap_or_default();
            if !calls.iter().any(|c| c == id) {
                return Some(format!(
                    "messages[{i}]: a message with role 'tool' must be a response to a preceding message with \
                     'tool_calls'; no call has the id {id:?}"
                ));
            }
            unanswered.retain(|c| c != id);
            continue;
        }
        if let Some(id) = unanswered.first() {
            return Some(format!(
                "messages[{i}]: an assistant message with 'tool_calls' must be followed by tool messages \
                 responding to each 'tool_call_id'; {id:?} has none"
            ));
        }
        calls = array(message, "tool_calls").filter_map(|c| str_of(c, "id")).map(str::to_string).collect();
        unanswered.clone_from(&calls);
    }
    unanswered.first().map(|id| format!("the tool call {id:?} has no tool message answering it"))
}

/// Responses: each `*_call_output` names the `call_id` of a call earlier in
/// the input, and each call there has its output.
fn unpaired_responses(request: &Value) -> Option<String> {
    let mut calls: Vec<String> = Vec::new();
    let mut outputs: Vec<String> = Vec::new();
    for item in array(request, "input") {
        let id = str_of(item, "call_id").unwrap_or_default().to_string();
        match str_of(item, "type") {
            Some("function_call" | "custom_tool_call") => calls.push(id),
            Some("function_call_output" | "custom_tool_call_output") => {
                if !calls.contains(&id) {
                    return Some(format!("No tool call found for function call output with call_id {id}."));
                }
                outputs.push(id);
            }
            _ => {}
        }
    }
    calls.iter().find(|c| !outputs.contains(c)).map(|id| format!("No tool output found for function call {id}."))
}

/// Messages: the user message after an assistant's `tool_use` blocks holds
/// a `tool_result` for each of them, and for nothing else.
fn unpaired_messages(request: &Value) -> Option<String> {
    let mut calls: Vec<String> = Vec::new();
    for (i, message) in array(request, "messages").enumerate() {
        let ids = |kind: &str, key: &str| -> Vec<String> {
            array(message, "content")
                .filter(|b| str_of(b, "type") == Some(kind))
                .map(|b| str_of(b, key).unwrap_or_default().to_string())
                .collect()
        };
        if str_of(message, "role") == Some("assistant") {
            if let Some(id) = calls.first() {
                return Some(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}"
                ));
            }
            calls = ids("tool_use", "id");
            continue;
        }
        let results = ids("tool_result", "tool_use_id");
        if let Some(stray) = results.iter().find(|r| !calls.contains(r)) {
            return Some(format!(
                "messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray}. Each \
                 `tool_result` block must have a corresponding `tool_use` block in the previous message."
            ));
        }
        if let Some(id) = calls.iter().find(|c| !results.contains(c)) {
            return Some(format!(
                "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {id}"
            ));
        }
        calls.clear();
    }
    calls.first().map(|id| format!("`tool_use` ids were found without `tool_result` blocks immediately after: {id}"))
}

/// Gemini: the content after a model turn with `functionCall` parts has as
/// many `functionResponse` parts, with the same names.
fn unpaired_gemini(request: &Value) -> Option<String> {
    let names = |content: &Value, key: &str, snake: &str| -> Vec<String> {
        array(content, "parts")
            .filter_map(|p| p.get(key).or(p.get(snake)))
            .map(|f| str_of(f, "name").unwrap_or_default().to_string())
            .collect()
    };
    let mut calls: Vec<String> = Vec::new();
    for (i, content) in array(request, "contents").enumerate() {
        let responses = names(content, "functionResponse", "function_response");
        if str_of(content, "role") == Some("model") {
            if !calls.is_empty() {
                return Some(format!("contents[{i}]: the function calls of the turn before have no responses"));
            }
            calls = names(content, "functionCall", "function_call");
            continue;
        }
        let mut sorted = (calls.clone(), responses.clone());
        sorted.0.sort();
        sorted.1.sort();
        if sorted.0 != sorted.1 {
            return Some(format!(
                "contents[{i}]: Please ensure that the number of function response parts is equal to the number \
                 of function call parts of the function call turn (calls {calls:?}, responses {responses:?})."
            ));
        }
        calls.clear();
    }
    (!calls.is_empty()).then(|| format!("the function calls {calls:?} have no responses"))
}

/// Tool results grouped by the assistant turn they answer.
#[derive(Debug, Default)]
struct Results {
    turn: usize,
    found: Vec<(usize, String)>,
}

impl Results {
    /// An assistant message or item: later results answer a later turn.
    fn assistant(&mut self) {
        self.turn += 1;
    }

    fn result(&mut self, text: String) {
        self.found.push((self.turn, text));
    }

    fn latest(self) -> Vec<String> {
        let last = self.found.last().map(|(turn, _)| *turn);
        self.found.into_iter().filter(|(turn, _)| Some(*turn) == last).map(|(_, text)| text).collect()
    }
}

fn read(endpoint: Endpoint, request: &Value) -> Seen {
    match endpoint {
        Endpoint::Chat => read_chat(request),
        Endpoint::Responses => read_responses(request),
        Endpoint::Messages => read_messages(request),
        Endpoint::GeminiGenerate | Endpoint::GeminiStream => read_gemini(request),
        _ => Seen::default(),
    }
}

fn array<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value.get(key).and_then(Value::as_array).into_iter().flatten()
}

fn str_of<'a>(value: &'a Value, key: &str) -> Option<&'a str> {
    value.get(key).and_then(Value::as_str)
}

/// A result's content: a string, or the text of a list of parts or blocks.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => s.clone(),
                _ => str_of(p, "text")
                    .map_or_else(|| format!("[{}]", str_of(p, "type").unwrap_or("part")), str::to_string),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

/// Chat: `tools[].function`, results in `role:"tool"` messages.
fn read_chat(request: &Value) -> Seen {
    let tools = array(request, "tools")
        .filter(|t| str_of(t, "type").unwrap_or("function") == "function")
        .filter_map(|t| t.get("function"))
        .filter_map(|f| Offered::function(f, "parameters"))
        .collect();
    let mut results = Results::default();
    for message in array(request, "messages") {
        match str_of(message, "role") {
            Some("assistant") => results.assistant(),
            Some("tool") => results.result(content_text(message.get("content"))),
            _ => {}
        }
    }
    Seen { tools, results: results.latest() }
}

/// Responses: flat `tools[]` (function and custom), results as
/// `function_call_output` / `custom_tool_call_output` input items.
fn read_responses(request: &Value) -> Seen {
    let tools = array(request, "tools")
        .filter_map(|t| {
            let custom = match str_of(t, "type")? {
                "function" => false,
                "custom" => true,
                _ => return None,
            };
            let schema = t.get("parameters").cloned().unwrap_or_default();
            Some(Offered { name: str_of(t, "name")?.to_string(), custom, schema })
        })
        .collect();
    let mut results = Results::default();
    for item in array(request, "input") {
        match (str_of(item, "type"), str_of(item, "role")) {
            (Some("function_call" | "custom_tool_call" | "reasoning"), _) | (_, Some("assistant")) => {
                results.assistant()
            }
            (Some("function_call_output" | "custom_tool_call_output"), _) => {
                results.result(content_text(item.get("output")))
            }
            _ => {}
        }
    }
    Seen { tools, results: results.latest() }
}

/// Messages: client tools (no `type`, or `custom`), results as `tool_result`
/// blocks in user messages.
fn read_messages(request: &Value) -> Seen {
    let tools = array(request, "tools")
        .filter(|t| str_of(t, "type").is_none_or(|kind| kind == "custom"))
        .filter_map(|t| Offered::function(t, "input_schema"))
        .collect();
    let mut results = Results::default();
    for message in array(request, "messages") {
        if str_of(message, "role") == Some("assistant") {
            results.assistant();
            continue;
        }
        for block in array(message, "content").filter(|b| str_of(b, "type") == Some("tool_result")) {
            results.result(content_text(block.get("content")));
        }
    }
    Seen { tools, results: results.latest() }
}

/// Gemini: `tools[].functionDeclarations`, results as `functionResponse`
/// parts. The REST API takes snake_case names too.
fn read_gemini(request: &Value) -> Seen {
    let declarations =
        array(request, "tools").flat_map(|t| array(t, "functionDeclarations").chain(array(t, "function_declarations")));
    let tools = declarations
        .filter_map(|d| {
            let schema = ["parametersJsonSchema", "parameters_json_schema", "parameters"]
                .iter()
                .find_map(|k| d.get(*k))
                .cloned()
                .unwrap_or_default();
            Some(Offered { name: str_of(d, "name")?.to_string(), custom: false, schema })
        })
        .collect();
    let mut results = Results::default();
    for content in array(request, "contents") {
        if str_of(content, "role") == Some("model") {
            results.assistant();
            continue;
        }
        let responses =
            array(content, "parts").filter_map(|p| p.get("functionResponse").or(p.get("function_response")));
        for response in responses {
            results.result(gemini_result(response.get("response")));
        }
    }
    Seen { tools, results: results.latest() }
}

/// A `functionResponse.response` as text: its `output` (Gemini CLI's field)
/// or another lone string field when it has one, else its JSON.
fn gemini_result(response: Option<&Value>) -> String {
    let Some(response) = response else { return String::new() };
    ["output", "result", "content", "error"]
        .iter()
        .find_map(|k| response.get(*k).and_then(Value::as_str))
        .map_or_else(|| response.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls(turn: Turn) -> Vec<ToolCall> {
        match turn {
            Turn::Tools(calls) => calls,
            other => panic!("expected tool calls, got {other:?}"),
        }
    }

    #[test]
    fn arguments_follow_the_schema() {
        let schema = json!({
            "type": "object",
            "properties": {
                "command": { "type": "string" },
                "timeout": { "type": "integer", "minimum": 5 },
                "mode": { "enum": ["fast", "slow"] },
                "flags": { "type": "array", "items": { "type": "string" }, "minItems": 1 },
                "opt": { "type": "string" },
                "nested": { "type": "OBJECT", "properties": { "x": { "type": ["null", "boolean"] } }, "required": ["x"] },
            },
            "required": ["command", "timeout", "mode", "flags", "nested"],
        });
        assert_eq!(
            value_for(&schema, 0),
            json!({ "command": "sim", "timeout": 5, "mode": "fast", "flags": ["sim"], "nested": { "x": false } })
        );
        assert_eq!(value_for(&json!({ "type": "object", "properties": {} }), 0), json!({}));
        assert_eq!(value_for(&Value::Null, 0), json!({}));
    }

    #[test]
    fn a_string_for_a_function_tool_fills_its_string_parameter() {
        let tool = Offered {
            name: "apply_patch".into(),
            custom: false,
            schema: json!({ "type": "object", "properties": { "patch": { "type": "string" } }, "required": ["patch"] }),
        };
        assert_eq!(
            input_for(&tool, Some(&json!("*** Begin Patch"))),
            Input::Json(json!({ "patch": "*** Begin Patch" }))
        );
        let custom = Offered { custom: true, ..tool };
        assert_eq!(input_for(&custom, Some(&json!({ "input": "x" }))), Input::Text("x".into()));
        assert_eq!(input_for(&custom, None), Input::Text(String::new()));
    }

    #[test]
    fn split_keeps_characters_whole() {
        assert_eq!(split("{}", 5), vec!["{", "}"]);
        assert_eq!(split("héllo wörld", 3).concat(), "héllo wörld");
        assert_eq!(split("héllo wörld", 3).len(), 3);
        assert!(split("", 3).is_empty());
    }

    #[test]
    fn only_the_latest_turns_results_are_quoted() {
        let request = json!({
            "tools": [{ "type": "function", "function": { "name": "Bash", "parameters": {} } }],
            "messages": [
                { "role": "user", "content": "go" },
                { "role": "assistant", "tool_calls": [] },
                { "role": "tool", "tool_call_id": "a", "content": "old" },
                { "role": "assistant", "tool_calls": [] },
                { "role": "tool", "tool_call_id": "b", "content": [{ "type": "text", "text": "new" }] },
                { "role": "tool", "tool_call_id": "c", "content": "also" },
            ],
        });
        let turn = turn(&ToolPlan::first(), Endpoint::Chat, &request, 1, vec![]);
        assert_eq!(turn, Turn::Text(vec!["the tool said: new; also".into()]));
    }

    #[test]
    fn a_missing_tool_is_named_in_the_reply() {
        let request = json!({ "tools": [{ "name": "Read", "input_schema": {} }], "messages": [] });
        let Turn::Text(text) = turn(&ToolPlan::tool("Bash"), Endpoint::Messages, &request, 1, vec![]) else {
            panic!("expected text")
        };
        assert_eq!(text.concat(), "no tool named Bash was offered; offered: Read");
    }

    #[test]
    fn hosted_and_server_tools_are_not_called() {
        let request = json!({
            "tools": [{ "type": "web_search" }, { "type": "custom", "name": "apply_patch", "format": {} }],
            "input": "hi",
        });
        let call = &calls(turn(&ToolPlan::first(), Endpoint::Responses, &request, 1, vec![]))[0];
        assert_eq!(call.name, "apply_patch");
        let request = json!({
            "tools": [{ "type": "web_search_20250305", "name": "web_search" }, { "name": "Bash", "input_schema": {} }],
            "messages": [],
        });
        assert_eq!(calls(turn(&ToolPlan::first(), Endpoint::Messages, &request, 1, vec![]))[0].name, "Bash");
    }

    #[test]
    fn calls_and_results_must_pair_up() {
        let chat = |tool_id: &str| {
            json!({ "messages": [
                { "role": "user", "content": "go" },
                { "role": "assistant", "tool_calls": [{ "id": "a", "type": "function", "function": { "name": "f", "arguments": "{}" } }] },
                { "role": "tool", "tool_call_id": tool_id, "content": "x" },
                { "role": "user", "content": "more" },
            ] })
        };
        assert_eq!(unpaired(Endpoint::Chat, &chat("a")), None);
        assert!(unpaired(Endpoint::Chat, &chat("b")).unwrap().contains("\"b\""));
        let mut unanswered = chat("a");
        unanswered["messages"].as_array_mut().unwrap().remove(2);
        assert!(unpaired(Endpoint::Chat, &unanswered).unwrap().contains("\"a\""));

        let messages = |result_id: &str| {
            json!({ "messages": [
                { "role": "user", "content": "go" },
                { "role": "assistant", "content": [{ "type": "tool_use", "id": "toolu_1", "name": "f", "input": {} }] },
                { "role": "user", "content": [{ "type": "tool_result", "tool_use_id": result_id, "content": "x" }] },
            ] })
        };
        assert_eq!(unpaired(Endpoint::Messages, &messages("toolu_1")), None);
        assert!(unpaired(Endpoint::Messages, &messages("toolu_2")).unwrap().contains("unexpected `tool_use_id`"));

        let responses = |output_id: &str| {
            json!({ "input": [
                { "type": "message", "role": "user", "content": "go" },
                { "type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}" },
                { "type": "function_call_output", "call_id": output_id, "output": "x" },
            ] })
        };
        assert_eq!(unpaired(Endpoint::Responses, &responses("call_1")), None);
        assert!(unpaired(Endpoint::Responses, &responses("call_2")).unwrap().starts_with("No tool call found"));
        assert_eq!(unpaired(Endpoint::Responses, &json!({ "input": "hi" })), None);

        let gemini = |responses: Value| {
            json!({ "contents": [
                { "role": "user", "parts": [{ "text": "go" }] },
                { "role": "model", "parts": [{ "functionCall": { "name": "f", "args": {} } }, { "functionCall": { "name": "g", "args": {} } }] },
                { "role": "user", "parts": responses },
            ] })
        };
        let both = json!([{ "functionResponse": { "name": "g", "response": {} } }, { "functionResponse": { "name": "f", "response": {} } }]);
        assert_eq!(unpaired(Endpoint::GeminiStream, &gemini(both)), None);
        let one = json!([{ "functionResponse": { "name": "f", "response": {} } }]);
        assert!(unpaired(Endpoint::GeminiStream, &gemini(one)).unwrap().contains("number of function response parts"));
    }

    #[test]
    fn gemini_declarations_and_responses_are_read() {
        let request = json!({
            "tools": [{ "functionDeclarations": [{ "name": "run_shell_command", "parametersJsonSchema": {
                "type": "object", "properties": { "command": { "type": "string" } }, "required": ["command"] } }] }],
            "contents": [{ "role": "user", "parts": [{ "text": "hi" }] }],
        });
        let call = &calls(turn(&ToolPlan::first(), Endpoint::GeminiStream, &request, 1, vec![]))[0];
        assert_eq!(call.input, Input::Json(json!({ "command": "sim" })));
        let mut answered = request.clone();
        answered["contents"].as_array_mut().unwrap().extend([
            json!({ "role": "model", "parts": [{ "functionCall": { "name": "run_shell_command", "args": {} } }] }),
            json!({ "role": "user", "parts": [{ "functionResponse": { "name": "run_shell_command", "response": { "output": "hi\n" } } }] }),
        ]);
        assert_eq!(
            turn(&ToolPlan::first(), Endpoint::GeminiStream, &answered, 1, vec![]),
            Turn::Text(vec!["the tool said: hi\n".into()])
        );
    }
}

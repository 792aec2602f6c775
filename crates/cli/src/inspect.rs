//! `switchyard history show ID --bodies`: a request's capture as text —
//! what the client sent, each attempt's upstream request with the changes
//! the gateway made and why, the provider's answer (a stream as a timeline
//! of its events), and what the client got.

use std::fmt::Write as _;

use switchyard_core::admin::Inspection;

/// The capture, for a terminal.
pub fn text(i: &Inspection) -> String {
    let mut out = String::new();
    let c = &i.captured;
    if let Some(original) = &i.replay_of {
        let _ = writeln!(out, "\nreplay of {original}");
    }
    let _ = writeln!(out, "\nclient request: {} {}", c.client.method, c.client.path);
    headers(&mut out, &c.client.headers);
    body(&mut out, c.client.body.as_ref().map(|b| b.text.as_str()));
    for a in &c.attempts {
        let _ = writeln!(out, "\nattempt {}: {} {}", a.seq, a.request.method, a.request.path);
        if let Some(changes) = i.changes.iter().find(|ch| ch.seq == a.seq) {
            for ch in &changes.changes {
                let field = if ch.field.is_empty() { "body" } else { ch.field.as_str() };
                let _ = writeln!(out, "  {:<10} {field}: {}", ch.kind, ch.reason);
            }
        }
        headers(&mut out, &a.request.headers);
        body(&mut out, a.request.body.as_ref().map(|b| b.text.as_str()));
        if let Some(r) = &a.response {
            let status = r.status.map_or("-".to_string(), |s| s.to_string());
            let _ = writeln!(out, "  answer: {status}");
            if r.events.is_empty() {
                body(&mut out, Some(&r.body.text));
            }
            for e in &r.events {
                let name = e.event.as_deref().unwrap_or("data");
                let _ = writeln!(out, "  {:>9.1} ms  {name:<24} {:>6} B", e.at_ms, e.size);
            }
        }
    }
    if let Some(answer) = &c.answer {
        let status = answer.status.map_or("-".to_string(), |s| s.to_string());
        let _ = writeln!(out, "\nthe client got: {status}");
        body(&mut out, Some(&answer.body.text));
    }
    for r in &i.replays {
        let _ = writeln!(out, "replayed as {r}");
    }
    out
}

fn headers(out: &mut String, headers: &[(String, String)]) {
    for (name, value) in headers {
        let _ = writeln!(out, "  {name}: {value}");
    }
}

/// A body, pretty when it is JSON.
fn body(out: &mut String, text: Option<&str>) {
    let Some(text) = text else { return };
    let shown = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string());
    for line in shown.lines() {
        let _ = writeln!(out, "  | {line}");
    }
}

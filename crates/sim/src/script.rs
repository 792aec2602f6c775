//! What a simulated provider does on each call.

use std::collections::VecDeque;
use std::time::Duration;

use rand::Rng;

use crate::agent::ToolPlan;

/// One call's deviation from a normal, successful reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// A normal reply.
    None,
    /// An error status (with a body in the endpoint's own error shape) and
    /// extra headers such as `retry-after` or rate-limit resets.
    Status { status: u16, headers: Vec<(String, String)> },
    /// An error status whose body, in the endpoint's own error shape,
    /// says `message` (a provider naming what it rejects).
    Saying { status: u16, message: String },
    /// Accept the request and never answer.
    Hang,
    /// Streams: send the response head at once, the first event after this delay.
    SlowFirstByte(Duration),
    /// Streams: send the head and the preamble at once, the first content
    /// after this delay (a reasoning model thinking before it writes).
    Thinking(Duration),
    /// Streams: send this many content events, then nothing, holding the connection.
    StallAfter(usize),
    /// Streams: send this many content events, then reset the connection.
    DropAfter(usize),
    /// Streams: as [`Fault::DropAfter`] for a turn of text, none for a
    /// turn of tool calls (an agent whose answers break, not its calls).
    DropTextAfter(usize),
    /// Streams: in place of a turn of tool calls, a turn of text (an agent
    /// saying what it is about to do) reset after this many content
    /// events; a turn of text goes as planned.
    DropBeforeTools(usize),
    /// Streams: send this many content events, then the protocol's error
    /// event, then end (a provider failing mid-answer, as Anthropic's
    /// `overloaded_error` does).
    ErrorAfter(usize),
    /// Streams: send this many content events, then one that is not JSON
    /// (cut off mid-object), then the rest as if nothing had happened.
    GarbleAfter(usize),
    /// Streams: send the preamble, then the protocol's error event, then end.
    ErrorEvent,
    /// Answer with this error status, echoing the request back as a careless
    /// or hostile provider would: every request header (the injected key
    /// too) and the query string in the error message, and the same again
    /// in an `x-echo` response header.
    EchoRequest { status: u16 },
    /// Streams: send the preamble, then an error event whose message echoes
    /// the request as [`Fault::EchoRequest`] does, then end.
    EchoErrorEvent,
}

impl Fault {
    pub fn status(status: u16) -> Fault {
        Fault::Status { status, headers: Vec::new() }
    }

    /// A status whose error message is `message`, e.g.
    /// `Fault::saying(400, "messages.1.content.0: Invalid `signature` in `thinking` block")`.
    pub fn saying(status: u16, message: &str) -> Fault {
        Fault::Saying { status, message: message.to_string() }
    }

    /// A status with headers, e.g. `Fault::status_with(429, &[("retry-after", "30")])`.
    pub fn status_with(status: u16, headers: &[(&str, &str)]) -> Fault {
        Fault::Status { status, headers: headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect() }
    }
}

/// How many content events a stream has and how far apart they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    pub chunks: usize,
    pub interval: Duration,
    /// Thinking deltas before the text (Messages streams).
    pub thinking: usize,
}

/// A provider's behaviour: scripted faults for the first calls, then a
/// default, optionally with random faults at a given rate (for the demo).
#[derive(Debug, Clone)]
pub struct Script {
    first: VecDeque<Fault>,
    then: Fault,
    chaos: Vec<(f64, Fault)>,
    /// Delay before any response head.
    pub latency: Duration,
    chunks: usize,
    interval: Duration,
    thinking: usize,
    /// Models listed by `GET /v1/models`.
    pub models: Vec<String>,
    /// Extra headers on every successful reply (rate-limit quotas, say).
    pub headers: Vec<(String, String)>,
    /// When set, successful replies play an agent's turn: tool calls, then
    /// an answer that quotes their results (see [`crate::agent`]).
    pub(crate) agent: Option<ToolPlan>,
    /// When set, text replies say this instead of the greeting: what a
    /// client that reads edits out of the text (aider) is to apply.
    pub(crate) reply: Option<String>,
}

impl Default for Script {
    fn default() -> Script {
        Script::ok()
    }
}

impl Script {
    /// Every call succeeds, immediately.
    pub fn ok() -> Script {
        Script {
            first: VecDeque::new(),
            then: Fault::None,
            chaos: Vec::new(),
            latency: Duration::ZERO,
            chunks: 5,
            interval: Duration::ZERO,
            thinking: 0,
            models: vec!["sim-model".to_string()],
            headers: Vec::new(),
            agent: None,
            reply: None,
        }
    }

    /// Every call succeeds, as an agent: it calls the first tool a request
    /// offers, and answers with the tool's result once the request carries it.
    pub fn agent() -> Script {
        Script::ok().tool_plan(ToolPlan::first())
    }

    /// Successful replies follow `plan`: `Script::agent().tool_plan(ToolPlan::call("Bash", json!({...})))`.
    /// Faults still come first, as scripted.
    pub fn tool_plan(mut self, plan: ToolPlan) -> Script {
        self.agent = Some(plan);
        self
    }

    /// Text replies say `text` (in the stream's chunks) instead of the
    /// greeting; under an agent script, the text of a turn without tools.
    pub fn reply(mut self, text: &str) -> Script {
        self.reply = Some(text.to_string());
        self
    }

    /// Every call gets `fault`.
    pub fn always(fault: Fault) -> Script {
        Script { then: fault, ..Script::ok() }
    }

    /// The first `n` calls get `fault`, the rest follow the script.
    pub fn fail_first(mut self, n: usize, fault: Fault) -> Script {
        self.first.extend(std::iter::repeat_n(fault, n));
        self
    }

    /// The next call gets `fault` (calls queue in order).
    pub fn then_once(mut self, fault: Fault) -> Script {
        self.first.push_back(fault);
        self
    }

    /// After the scripted calls, each call gets `fault` with probability
    /// `rate`; several chaos faults are drawn independently, in order.
    pub fn chaos(mut self, rate: f64, fault: Fault) -> Script {
        self.chaos.push((rate.clamp(0.0, 1.0), fault));
        self
    }

    pub fn latency(mut self, latency: Duration) -> Script {
        self.latency = latency;
        self
    }

    /// Streams carry `chunks` content events, `interval` apart.
    pub fn stream(mut self, chunks: usize, interval: Duration) -> Script {
        self.chunks = chunks.max(1);
        self.interval = interval;
        self
    }

    /// A Messages stream of text thinks first: a thinking block of `deltas`
    /// content events (so [`Fault::DropAfter`] can cut inside it), signed
    /// and closed as Anthropic's are, before the text block.
    pub fn thinks(mut self, deltas: usize) -> Script {
        self.thinking = deltas;
        self
    }

    /// Adds headers to every successful reply.
    pub fn reply_headers(mut self, headers: &[(&str, &str)]) -> Script {
        self.headers.extend(headers.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        self
    }

    pub fn models(mut self, models: &[&str]) -> Script {
        self.models = models.iter().map(|m| m.to_string()).collect();
        self
    }

    pub(crate) fn pacing(&self) -> Pacing {
        Pacing { chunks: self.chunks, interval: self.interval, thinking: self.thinking }
    }

    /// The fault for the next call.
    pub(crate) fn next_fault(&mut self) -> Fault {
        if let Some(fault) = self.first.pop_front() {
            return fault;
        }
        let mut rng = rand::rng();
        if let Some((_, fault)) = self.chaos.iter().find(|(rate, _)| rng.random_bool(*rate)) {
            return fault.clone();
        }
        self.then.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripted_calls_come_first_then_the_default() {
        let mut s = Script::ok().fail_first(2, Fault::status(503)).then_once(Fault::Hang);
        assert_eq!(s.next_fault(), Fault::status(503));
        assert_eq!(s.next_fault(), Fault::status(503));
        assert_eq!(s.next_fault(), Fault::Hang);
        assert_eq!(s.next_fault(), Fault::None);
        let mut always = Script::always(Fault::ErrorEvent).chaos(1.0, Fault::status(500));
        assert_eq!(always.next_fault(), Fault::status(500));
    }
}

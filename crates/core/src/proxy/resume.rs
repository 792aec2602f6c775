//! Resumed streams (policy `resume = true`): a stream that breaks off
//! after text reached the client — the connection lost, silent past
//! `stream_idle_timeout`, an error event, a malformed event — is finished
//! by the chain's next provider under the same deadline and the same
//! guards as a fallback: asked with the conversation and the text sent so
//! far ([`crate::protocol::translate::resume`]), its stream joined on at
//! the seam so the client sees one stream ([`seam`]).
//!
//! Not resumed, and said so on record: a tool call or a thinking block in
//! progress, a deadline too short for a fallback, no provider left that
//! may take it. A request is resumed once.

use bytes::{Bytes, BytesMut};
use tokio::time::Instant;

use super::attempt::{self, Upstream};
use super::body::{self, RequestHead};
use super::journal::Journal;
use super::{repair, Inbound, Run};
use crate::gateway::Gateway;
use crate::ground::clock::now_ms;
use crate::ground::outcome::Reason;
use crate::policy::classify;
use crate::policy::deadline::Deadline;
use crate::policy::RequestPolicy;
use crate::protocol::sse::Splitter;
use crate::protocol::translate::ir::{Context, Format, StreamEvent};
use crate::protocol::translate::resume::{continuation, Ask};
use crate::protocol::translate::stream::seam::{Continuation, Sent};
use crate::protocol::translate::stream::{Decoder, Naming, Options};
use crate::protocol::{Endpoint, Protocol};
use crate::proxy::scrub::OnDemand;
use crate::upstream::provider::{Provider, Ticket};
use crate::upstream::routing::Candidate;

/// The break a stream's error event is: the provider's error, or what
/// made an event of its malformed.
pub(super) fn broken_by(message: &str, malformed: bool) -> String {
    if malformed {
        message.to_string()
    } else {
        format!("the provider's stream sent an error: {message}")
    }
}

/// Whether a stream of `provider`'s that breaks off is resumed: its own
/// table's `resume` where it sets one, else the request's policy.
pub(super) fn resumes(policy: &RequestPolicy, provider: &Provider) -> bool {
    provider.config.policy.resume.unwrap_or(policy.resume)
}

/// What a relayed stream needs to be finished elsewhere: the request as
/// the client sent it, and the chain's providers after the one streaming.
#[derive(Debug)]
pub struct Resumer {
    gateway: Gateway,
    inbound: Inbound,
    body: Bytes,
    head: RequestHead,
    policy: RequestPolicy,
    deadline: Deadline,
    tokens: u64,
    /// The chain after the provider streaming: names and upstream models.
    rest: Vec<(String, String)>,
    /// The provider streaming.
    provider: String,
    /// For a stream relayed as the provider sent it: its events as the
    /// client gets them.
    shadow: Option<Shadow>,
}

/// A stream relayed untranslated, read alongside: whole events are handed
/// on, an error event is held back.
#[derive(Debug)]
struct Shadow {
    splitter: Splitter,
    decoder: Decoder,
    sent: Sent,
}

/// The continuation, ready to relay in place of the broken stream.
#[derive(Debug)]
pub struct Continued {
    pub upstream: Upstream,
    pub ticket: Ticket,
    /// The endpoint it streams in, for the usage tap.
    pub endpoint: Endpoint,
    pub seam: Box<Continuation>,
    /// Its attempt on record.
    pub index: usize,
}

impl Resumer {
    /// `passthrough`: the stream goes to the client as the provider sends
    /// it (in the client's format), so it is read alongside.
    pub(super) fn new(run: &Run<'_>, provider: &str, model: &str, passthrough: bool) -> Option<Box<Resumer>> {
        let format = run.inbound.endpoint.format()?;
        let at = run.lineup.iter().position(|(p, m)| p == provider && m == model)?;
        let shadow = passthrough.then(|| {
            let mut decoder = Decoder::new(format);
            decoder.watch();
            Shadow { splitter: Splitter::default(), decoder, sent: Sent::default() }
        });
        Some(Box::new(Resumer {
            gateway: run.gateway.clone(),
            inbound: run.inbound.clone(),
            body: run.body.clone(),
            head: run.head.clone(),
            policy: run.policy.clone(),
            deadline: run.deadline,
            tokens: run.tokens,
            rest: run.lineup[at + 1..].to_vec(),
            provider: provider.to_string(),
            shadow,
        }))
    }

    /// A chunk of an untranslated stream: the whole events it completes,
    /// and the failure an error event among them is, held back from the
    /// client with whatever follows it.
    pub fn pass(&mut self, chunk: &[u8]) -> (Bytes, Option<String>) {
        let Some(shadow) = &mut self.shadow else { return (Bytes::copy_from_slice(chunk), None) };
        let mut out = BytesMut::new();
        let mut decoded = Vec::new();
        for event in shadow.splitter.push(chunk) {
            decoded.clear();
            shadow.decoder.push(&event, &mut decoded);
            for e in &decoded {
                if let StreamEvent::Error { message, .. } = e {
                    return (out.freeze(), Some(broken_by(message, shadow.decoder.malformed())));
                }
                shadow.sent.observe(e);
            }
            out.extend_from_slice(&event);
        }
        (out.freeze(), None)
    }

    /// What is left of an untranslated stream's last event, at its end.
    pub fn rest_of_stream(&mut self) -> Bytes {
        self.shadow.as_mut().map(|s| s.splitter.take_pending()).unwrap_or_default()
    }

    /// What the client was sent of an untranslated stream, and how the
    /// provider named it.
    pub fn sent(&self) -> Option<(&Sent, &Naming)> {
        self.shadow.as_ref().map(|s| (&s.sent, s.decoder.naming()))
    }

    /// Finishes the reply `sent` began at the next provider that may take
    /// it, each tried under the guards a fallback meets; the attempts on
    /// record in `journal`. `Err` says why nothing can.
    pub async fn resume(&self, sent: &Sent, naming: &Naming, journal: &mut Journal) -> Result<Continued, String> {
        let text = sent.resumable().map_err(|why| why.to_string())?.text;
        let client = self.inbound.endpoint.format().ok_or("not resumed: no stream format")?;
        let live = self.gateway.live();
        let candidates: Vec<Candidate<'_>> = self
            .rest
            .iter()
            .filter_map(|(name, model)| {
                let provider = live.providers.iter().find(|p| p.name() == name)?;
                Some(Candidate { provider, upstream_model: model, position: 0, routing: None })
            })
            .collect();
        let mut why = String::from("not resumed: no provider after it in the chain");
        for candidate in &candidates {
            let ask = ask(candidate, self.inbound.endpoint);
            let (body, head) = match self.asking(client, &text, ask) {
                Ok(asked) => asked,
                Err(e) => {
                    // On record as a provider passed over, as any other.
                    let why = format!("cannot be asked to go on: {e}");
                    self.run(&live, &self.body, &self.head, journal).skip(candidate, why);
                    continue;
                }
            };
            let mut run = self.run(&live, &body, &head, journal);
            match run.continue_with(candidate).await {
                Ok((upstream, ticket, endpoint, index)) => {
                    let format = endpoint.format().unwrap_or(client);
                    let ctx = Context { client_model: self.head.model.clone(), ..Context::default() };
                    let created =
                        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
                    let opts = Options { include_usage: self.head.has_stream_options, created };
                    let seam = Box::new(sent.continue_in(format, client, ctx, opts, naming));
                    return Ok(Continued { upstream, ticket, endpoint, seam, index });
                }
                Err(e) => why = e,
            }
        }
        Err(why)
    }

    /// The client's request asked to go on from `text`, and its head.
    fn asking(&self, client: Format, text: &str, ask: Ask) -> Result<(Bytes, RequestHead), String> {
        let body = continuation(client, &self.body, text, ask).map_err(|e| format!("{}: {}", e.field, e.reason))?;
        let head = match &self.inbound.path_model {
            Some(model) => body::inspect_with_model(&body, model, self.inbound.endpoint.streams()),
            None => body::inspect(&body),
        };
        Ok((Bytes::from(body), head.map_err(|e| e.to_string())?))
    }

    /// A request's run for one continuation: the client's request with
    /// `body`, the broken stream's provider its last failure.
    fn run<'r>(
        &'r self,
        live: &'r crate::gateway::Live,
        body: &'r Bytes,
        head: &'r RequestHead,
        journal: &'r mut Journal,
    ) -> Run<'r> {
        let gateway = &self.gateway;
        let inbound = &self.inbound;
        Run {
            gateway,
            inbound,
            head,
            body,
            policy: &self.policy,
            deadline: self.deadline,
            tokens: self.tokens,
            route: &live.unrouted,
            attempts: 0,
            notes: String::new(),
            out_of_time: false,
            refused: Vec::new(),
            journal,
            last_failed: Some(self.provider.clone()),
            backoff: std::time::Duration::ZERO,
            scrub: OnDemand::new(gateway, &live.providers, &inbound.headers, inbound.uri.query()),
            cached: None,
            budget: None,
            session: None,
            partner: None,
            lineup: Vec::new(),
        }
    }
}

/// How `candidate` is asked to go on: as its own reply where it can.
fn ask(candidate: &Candidate<'_>, client: Endpoint) -> Ask {
    let config = &candidate.provider.config;
    if config.kind == Protocol::Anthropic {
        Ask::Prefill
    } else if client == Endpoint::ChatCompletions && config.speaks(client) && config.profile.prefix_completion {
        Ask::Prefix
    } else {
        Ask::Instructed
    }
}

impl Run<'_> {
    /// One continuation at `candidate`: its stream and its attempt's index
    /// when it answers with one, else why not (on record).
    async fn continue_with(
        &mut self,
        candidate: &Candidate<'_>,
    ) -> Result<(Upstream, Ticket, Endpoint, usize), String> {
        let provider = candidate.provider;
        let name = provider.name();
        if let Err(blocked) = self.gateway.budgets().admit(name, candidate.upstream_model, now_ms()) {
            self.blocked(candidate, blocked);
            return Err(format!("not resumed: {name} is over budget"));
        }
        if !self.may_fall_back(provider) {
            return Err(format!("not resumed: {}", self.notes));
        }
        let out = self.outgoing(candidate).map_err(|u| format!("not resumed: {name} cannot take it: {}", u.reason))?;
        let mut ticket = match self.admit(candidate, None, 0).await {
            super::turn::Admit::Go(ticket) => ticket,
            _ => return Err(format!("not resumed: {}", self.notes)),
        };
        let timeout = self.deadline.attempt_timeout(self.policy.attempt_timeout, Instant::now());
        provider.note_fallback();
        let (prepared, request) = self.prepare(candidate, &ticket, &out, Reason::Resume, timeout).await;
        let attempted =
            attempt::run(self.gateway.client(), request, prepared.endpoint, prepared.patience, &self.scrub).await;
        let mut sent = self.judge(candidate, &out, prepared, attempted, repair::allowed(provider)).await;
        let streams = sent.attempted.upstream.as_ref().is_some_and(|u| u.sse && u.status.is_success());
        match sent.attempted.upstream.take().filter(|_| streams && classify::delivers(sent.attempted.outcome)) {
            Some(upstream) => {
                self.journal.end(sent.index, crate::ground::outcome::AttemptOutcome::Ok, sent.end(None));
                Ok((upstream, ticket, sent.endpoint, sent.index))
            }
            None => {
                ticket.record(sent.verdict);
                let detail = self.failed_attempt(provider, &mut sent).await;
                Err(format!("not resumed: {name} failed: {detail}"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::Config;

    const PROVIDER: &str =
        "[[providers]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\nauth = \"none\"\nmodels = [\"m\"]\n";

    #[test]
    fn resume_is_set_in_policy_a_route_or_a_provider() {
        let config = |text: &str| Config::parse(&format!("{text}\n{PROVIDER}"), Path::new("t.toml"));
        let off = config("").unwrap();
        assert!(!off.policy.resume && off.providers[0].policy.resume.is_none(), "off by default");
        let on = config("[policy]\nresume = true").unwrap();
        assert!(on.policy.resume);
        assert_eq!(on.providers[0].policy.resume, None, "[policy] is the requests' default, not the provider's own");
        let routed = config("[[routes]]\nmodel = \"m\"\nchain = [\"a\"]\npolicy = { resume = true }").unwrap();
        assert!(routed.routes[0].policy.resume && !routed.policy.resume);
        for own in [true, false] {
            let text = format!("{PROVIDER}policy = {{ resume = {own} }}\n");
            let provider = Config::parse(&text, Path::new("t.toml")).unwrap();
            assert_eq!(provider.providers[0].policy.resume, Some(own));
        }
    }
}

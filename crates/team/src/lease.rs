//! Team-wide admission: a lease per request in flight (a sorted set of
//! lease id → expiry per provider, and per capped key), the tokens the
//! request is estimated to use, and its estimated cost against every
//! budget that covers it, taken in one round trip and settled in one.
//!
//! Tokens and spend are reserved from the estimate (the prompt and the
//! output limit) and settled when the attempt ends: with the real usage
//! when the answer says it, returned whole when the attempt failed or the
//! client left. Settling and the lease's release go in one pipeline.
//!
//! A lease is renewed every third of its TTL while the request (and its
//! stream) runs (all of an instance's at once, [`crate::outage`]), and
//! released by id when its guard drops, whatever ended
//! the request: an answer, an error, the client gone. Release is by id and
//! idempotent, so a late one (an instance paused past the TTL) removes
//! nothing but its own expired entry; an instance killed while holding
//! leases frees them when their TTL runs out, since every grant first
//! drops expired entries. A lease lost while a stream runs is logged, never
//! a reason to cut a stream already committed to the client.
//!
//! The same admission keeps a request's place in a full provider's line
//! across the team (see the admission script): only the head is admitted
//! when a place frees, a place is given up by [`leave`] or lapses by
//! itself when its holder stops asking.

use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionManager;
use switchyard_core::team::{micros, AdmitAsk, Admitted, Held, Team, Used};
use tracing::warn;

use crate::outage::Boarded;
use crate::scripts::{self, Scripts};
use crate::RedisTeam;

/// How long a release and settlement may take before it is left to expiry.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(2);

/// How long a place in a provider's line lasts after its last ask: its
/// holder asks every few tens of milliseconds while it waits, so a place
/// outlives it (its instance killed or cut off) by about this long.
const PLACE_LASTS: Duration = Duration::from_secs(2);

/// What one admission holds; dropping it releases the lease and settles
/// the reservations.
#[derive(Debug)]
pub struct Reservation {
    id: String,
    /// The provider's leases and the key's (or the provider's again).
    lease_keys: (String, String),
    /// Whether a lease was taken (a cap applies).
    leased: bool,
    /// The tokens bucket, its limit per minute, and the tokens taken from it.
    tokens: Option<(String, u32, u64)>,
    /// Spend counters and the estimate reserved on each.
    spend: Vec<(String, i64)>,
    /// What the attempt used, once the answer said; `None`: it failed.
    used: Option<Used>,
    con: ConnectionManager,
    scripts: Arc<Scripts>,
    /// On this instance's books while the lease is held: renewed with the
    /// others, and counted again should Redis lose it.
    boarded: Option<Boarded>,
}

impl Held for Reservation {
    fn settle(&mut self, used: Used) {
        self.used = Some(used);
    }
}

impl Reservation {
    fn holds_anything(&self) -> bool {
        self.leased || self.tokens.is_some() || !self.spend.is_empty()
    }

    /// Tokens to give back: all of them for a failed attempt; what was
    /// reserved less what was used (negative: the extra used) for one
    /// that said its usage; none when it did not say.
    fn tokens_back(&self) -> i64 {
        let Some((_, tpm, reserved)) = &self.tokens else { return 0 };
        let reserved = i64::try_from(*reserved).unwrap_or(i64::MAX);
        match self.used {
            None => reserved,
            Some(Used { tokens: Some(n), .. }) => reserved - i64::try_from(n.min(u64::from(*tpm))).unwrap_or(0),
            Some(Used { tokens: None, .. }) => 0,
        }
    }

    /// The change to every spend counter: the estimate back for a failed
    /// attempt, the real cost less the estimate when it is known.
    fn spend_change(&self, estimate: i64) -> i64 {
        match self.used {
            None => -estimate,
            Some(Used { cost_usd: Some(cost), .. }) => micros(cost) - estimate,
            Some(Used { cost_usd: None, .. }) => 0,
        }
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        if let Some(boarded) = &self.boarded {
            boarded.close();
        }
        let back = self.tokens_back();
        let spend: Vec<(String, i64)> =
            self.spend.iter().map(|(key, estimate)| (key.clone(), self.spend_change(*estimate))).collect();
        let spend_changes = spend.iter().any(|(_, d)| *d != 0);
        if !self.leased && back == 0 && !spend_changes {
            return;
        }
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        let (mut con, scripts, id) = (self.con.clone(), self.scripts.clone(), std::mem::take(&mut self.id));
        let (lease_keys, tokens) = (self.lease_keys.clone(), self.tokens.take());
        let leased = self.leased;
        handle.spawn(async move {
            let mut calls = Vec::with_capacity(2);
            if leased || back != 0 {
                let mut call = scripts.settle.prepare_invoke();
                let (bucket, tpm) = tokens.map_or((lease_keys.0.clone(), 0), |(k, tpm, _)| (k, tpm));
                call.key(&lease_keys.0).key(&lease_keys.1).key(bucket).arg(&id).arg(tpm).arg(back);
                calls.push(call);
            }
            if spend_changes {
                let mut call = scripts.settle_spend.prepare_invoke();
                for (key, change) in &spend {
                    call.key(key).arg(change);
                }
                calls.push(call);
            }
            match tokio::time::timeout(SETTLE_TIMEOUT, scripts::pipelined(&mut con, &calls)).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => warn!("team: a release was not written ({e}); leases and buckets recover by expiry"),
                Err(_) => warn!("team: a release took too long; leases and buckets recover by expiry"),
            }
        });
    }
}

/// Asks the team to admit an attempt: its caps and rate buckets in one
/// script, its budgets in another, both in one round trip.
pub async fn take(team: &RedisTeam, ask: &AdmitAsk, ttl: Duration, limit: Duration) -> Admitted {
    let Some(mut con) = team.connection().filter(|_| team.connected.load(std::sync::atomic::Ordering::Relaxed)) else {
        return Admitted::Unreachable(None);
    };
    let scripts = team.scripts.clone();
    let provider_key = team.keys.leases(&ask.provider);
    let key_key = ask.key.as_ref().map(|(fp, _)| team.keys.key_leases(&ask.provider, fp));
    let lease_keys = (provider_key.clone(), key_key.clone().unwrap_or_else(|| provider_key.clone()));
    let tpm_key = team.keys.bucket(&ask.provider, "tpm");
    let id = uuid::Uuid::now_v7().to_string();
    let capped = ask.provider_max.is_some() || ask.key.is_some();
    let limited = capped || ask.requests_per_minute.is_some() || ask.tokens_per_minute.is_some();
    let counters: Vec<String> = ask.budgets.iter().map(|b| team.keys.spend(&b.counter)).collect();

    let mut calls = Vec::with_capacity(2);
    if !counters.is_empty() {
        let mut call = scripts.reserve_spend.prepare_invoke();
        for (key, b) in counters.iter().zip(&ask.budgets) {
            call.key(key).arg(b.limit_micros.unwrap_or(-1)).arg(b.estimate_micros).arg(b.expires_at_ms);
        }
        for b in &ask.budgets {
            call.key(team.keys.spend_seeded(&b.counter));
        }
        call.arg(team.instance());
        calls.push(call);
    }
    if limited {
        let mut call = scripts.admit.prepare_invoke();
        call.key(&lease_keys.0).key(&lease_keys.1);
        call.key(team.keys.bucket(&ask.provider, "rpm")).key(&tpm_key);
        call.arg(&id).arg(millis(ttl)).arg(ask.provider_max.unwrap_or(0)).arg(ask.key.as_ref().map_or(0, |(_, m)| *m));
        call.arg(ask.requests_per_minute.unwrap_or(0)).arg(ask.tokens_per_minute.unwrap_or(0)).arg(ask.tokens);
        call.key(team.keys.line(&ask.provider)).key(team.keys.line_alive(&ask.provider));
        match &ask.line {
            Some(line) => call.arg(&line.ticket).arg(line.max_queue).arg(line.age_ms).arg(millis(PLACE_LASTS)),
            None => call.arg("").arg(0).arg(0).arg(0),
        };
        calls.push(call);
    }
    // A connection Redis dropped (it restarted) fails the first call sent
    // on it while the manager reconnects: asked once more on the new one
    // rather than decided alone. (Had the first run before its answer was
    // lost, what it took expires with its TTL.)
    let ask_once = async {
        match scripts::pipelined(&mut con, &calls).await {
            Err(e) if e.is_connection_dropped() || e.is_io_error() => scripts::pipelined(&mut con, &calls).await,
            answered => answered,
        }
    };
    let answers = match tokio::time::timeout(limit, ask_once).await {
        Ok(Ok(answers)) if answers.len() == calls.len() => answers,
        Ok(Ok(_)) => return Admitted::Unreachable(None),
        Ok(Err(e)) => {
            warn!("team: shared limits could not be checked ({e}); this instance's share of them decides");
            return Admitted::Unreachable(None);
        }
        Err(_) => return Admitted::Unreachable(None),
    };
    drop(calls);
    let mut answers = answers.into_iter();
    let spend = if counters.is_empty() { vec![1] } else { answers.next().unwrap_or_default() };
    let admit = if limited { answers.next().unwrap_or_default() } else { vec![1, 0] };
    let spend_taken = spend.first() == Some(&1);
    let admit_taken = admit.first() == Some(&1);

    // What was taken, held so that a refusal by the other script gives it back.
    let tokens =
        ask.tokens_per_minute.filter(|_| admit_taken).map(|tpm| (tpm_key, tpm, ask.tokens.min(u64::from(tpm))));
    let spend_held = if spend_taken {
        counters.into_iter().zip(&ask.budgets).map(|(k, b)| (k, b.estimate_micros)).collect()
    } else {
        Vec::new()
    };
    let leased = admit_taken && capped;
    let boarded = leased.then(|| team.outage.fly(id.clone(), lease_keys.clone(), true));
    let hold = Reservation { id, lease_keys, leased, tokens, spend: spend_held, used: None, con, scripts, boarded };
    let refusal = match (spend.first().copied(), admit.first().copied()) {
        (Some(-2), _) => {
            Some(Admitted::Unseeded(spend.iter().skip(1).filter_map(|i| usize::try_from(*i).ok()).collect()))
        }
        (Some(-1), _) => Some(Admitted::OverBudget {
            budget: spend.get(1).and_then(|i| usize::try_from(*i).ok()).unwrap_or(0),
            spent_micros: spend.get(2).copied().unwrap_or(0),
        }),
        (_, Some(0)) => Some(Admitted::Wait(Duration::from_millis(
            admit.get(1).and_then(|w| u64::try_from(*w).ok()).unwrap_or(0).max(1),
        ))),
        (_, Some(1)) => None,
        (_, Some(-3)) => Some(Admitted::Queued { ahead: count(admit.get(1)) }),
        (_, Some(-2)) => Some(Admitted::LineFull { waiting: count(admit.get(1)) }),
        (_, _) => Some(Admitted::Full),
    };
    if let Some(refusal) = refusal {
        // Dropped: whatever the other script took goes back.
        drop(hold);
        return refusal;
    }
    if !hold.holds_anything() {
        return Admitted::Granted(None);
    }
    Admitted::Granted(Some(Box::new(hold)))
}

fn count(n: Option<&i64>) -> u32 {
    n.and_then(|n| u32::try_from(*n).ok()).unwrap_or(0)
}

/// Gives up `ticket`'s place in `provider`'s line, on a task of its own.
pub fn leave(team: &RedisTeam, provider: &str, ticket: &str) {
    let Some(mut con) = team.connection().filter(|_| team.connected()) else { return };
    let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
    let (line, alive, ticket) = (team.keys.line(provider), team.keys.line_alive(provider), ticket.to_owned());
    runtime.spawn(async move {
        let mut pipe = redis::pipe();
        pipe.zrem(&line, &ticket).ignore().zrem(&alive, &ticket).ignore();
        match tokio::time::timeout(SETTLE_TIMEOUT, pipe.query_async::<()>(&mut con)).await {
            Ok(Ok(())) => {}
            // The place lapses by itself soon after: nobody waits behind it long.
            Ok(Err(e)) => warn!("team: a place in line was not given up ({e}); it lapses by itself"),
            Err(_) => warn!("team: giving up a place in line took too long; it lapses by itself"),
        }
    });
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

//! The gateway's side of the team seam: what the request path asks of
//! the team beyond one admission (seeding the spend counters a Redis
//! restart lost, the budgets' rows as the team counts them), and
//! [`Inbound`], the small interface the team's runner drives: the
//! decisions other instances made, the share of the caps while the shared
//! state is out of reach, the spend counters kept, the events heard.

use super::Gateway;
use crate::ground::clock::now_ms;
use crate::ground::outcome::RequestOutcome;
use crate::history::Store;
use crate::policy::budget::Covering;
use crate::team::{micros, AdmitAsk, Admitted, Change, Roll, Seed, Team};
use crate::telemetry::events::GatewayEvent;
use crate::telemetry::Envelope;

impl Gateway {
    /// Seeds the team's spend counters for `covering[i]`, each `i` of
    /// `missing`: what the history has on record for the budget's scope
    /// since its period began, or what this instance's own ledger counts
    /// when that is more (the history is written in batches, a moment
    /// behind). A shared history seeds the whole counter once; a history
    /// per instance adds this instance's part, once (see [`Team::seed_spend`]).
    pub async fn seed_team_spend(&self, covering: &[Covering], missing: &[usize]) {
        let team = self.team();
        let now = now_ms();
        let seed = match self.store().map(Store::backend) {
            Some("postgres") => Seed::Whole,
            _ => Seed::Own,
        };
        for c in missing.iter().filter_map(|i| covering.get(*i)) {
            let scope = &c.budget.scope;
            let on_record = match self.store() {
                Some(store) => match on_record(store, scope, c.bounds.start_ms).await {
                    Ok(usd) => usd,
                    Err(e) => {
                        tracing::warn!("team: the spend on record could not be read to seed a budget: {e}");
                        0.0
                    }
                },
                None => 0.0,
            };
            let ours = self.budgets().spent(scope, c.budget.period, c.bounds, now);
            let usd = f64::max(on_record, ours);
            team.seed_spend(&c.ask.counter, micros(usd), c.ask.expires_at_ms, seed).await;
        }
    }

    /// Alerts for the thresholds the team's spend has crossed, each raised
    /// by the one instance that claims it first and seen by the others on
    /// the team's events; every instance's ledger sees only its own part.
    async fn raise_team_alerts(&self, team: &dyn Team, covering: Vec<Covering>) {
        let counters = covering.iter().map(|c| c.ask.counter.clone()).collect();
        let Some(spent) = team.spent(counters).await.filter(|s| s.len() == covering.len()) else { return };
        let counted: Vec<(Covering, i64)> =
            covering.into_iter().zip(spent).filter_map(|(c, micros)| Some((c, micros?))).collect();
        for (c, crossing) in self.budgets().crossed_by_team(&counted, now_ms()) {
            let what = format!("{}|{}", c.ask.counter, crossing.threshold);
            // Out of reach now: raising it here twice beats not at all.
            if team.claim(&what, c.ask.expires_at_ms).await != Some(false) {
                self.telemetry().budget_crossed(&crossing);
            }
        }
    }

    /// Each budget's spend in its current period: in a team within reach,
    /// the team's counter (every instance's spend, and what is reserved for
    /// requests in flight); else, or for a counter Redis does not have yet,
    /// this instance's own ledger.
    /// The members' budgets (`member:NAME`) come last, as last read.
    pub async fn budget_rows(&self, now_ms: i64) -> Vec<crate::policy::BudgetRow> {
        self.refresh_members().await;
        let rows = self.budgets().rows(now_ms);
        let counters = self.budgets().every_counter(now_ms).into_iter().map(|c| c.ask.counter).collect();
        let Some(spent) = self.team().spent(counters).await.filter(|s| s.len() == rows.len()) else { return rows };
        rows.into_iter()
            .zip(spent)
            .map(|(row, micros)| match micros {
                Some(micros) => row.counted_by_team(micros),
                None => row,
            })
            .collect()
    }

    /// The interface the team's runner drives.
    pub fn inbound(&self) -> Inbound {
        Inbound { gateway: self.clone() }
    }
}

/// What the team's runner may do to this gateway: follow what the others
/// decided, take a share of the caps, keep the spend counters, pass on
/// what the others heard. Nothing else of the gateway is the runner's.
#[derive(Debug, Clone)]
pub struct Inbound {
    gateway: Gateway,
}

impl Inbound {
    /// Proxied requests served since the start, for the roll call.
    pub fn served(&self) -> u64 {
        self.gateway.served()
    }

    /// The providers in force, by name.
    pub fn providers(&self) -> Vec<String> {
        self.gateway.live().providers.iter().map(|p| p.name().to_string()).collect()
    }

    /// This gateway's events, to publish to the others.
    pub fn events(&self) -> tokio::sync::broadcast::Receiver<std::sync::Arc<Envelope>> {
        self.gateway.telemetry().events.subscribe()
    }

    /// Follows a decision another instance of the team made (`by` names it).
    pub fn apply(&self, by: &str, change: &Change) {
        let live = self.gateway.live();
        let Some(provider) = live.provider(change.provider()) else { return };
        match change {
            Change::BreakerTripped { for_ms, reason, .. } => provider.team_open(*for_ms, reason, by),
            Change::BreakerClosed { reason, .. } => provider.team_close(reason, by),
            Change::BreakerForced { open, .. } => provider.force_breaker(*open),
            Change::Cooling { key, for_ms, .. } => provider.team_cooling(key.as_deref(), *for_ms),
            Change::Revoked { key, reason, .. } => provider.team_revoked(key, reason, by),
            Change::Toggled { provider: name, enabled } => {
                if provider.is_enabled() != *enabled {
                    if let Err(e) = self.gateway.toggle(name, *enabled) {
                        tracing::warn!("{e}");
                    }
                }
            }
        }
    }

    /// The team's one probe of `provider` after a trip is this instance's.
    pub fn probe(&self, provider: &str) {
        if let Some(p) = self.gateway.live().provider(provider) {
            p.team_probe();
        }
    }

    /// The team holds no verdict for `provider`'s held breaker: its own
    /// timer leads again.
    pub fn release(&self, provider: &str) {
        if let Some(p) = self.gateway.live().provider(provider) {
            p.team_release();
        }
    }

    /// Every provider's limits and every member's take `share` of what
    /// they allow ([`Roll::WHOLE`]: all of it), while the team's shared
    /// state is out of reach.
    pub fn share_caps(&self, share: Roll) {
        self.gateway.inner.share.store(share);
        for p in &self.gateway.live().providers {
            p.share_caps(share);
        }
    }

    /// The team went out of reach (`false`) or came back (`true`): the
    /// breakers follow their own timers or the team's again, and the
    /// budgets' alerts are raised from this instance's ledger or from the
    /// team's counters.
    pub fn reachable(&self, reachable: bool) {
        for p in &self.gateway.live().providers {
            p.team_reachable(reachable);
        }
        self.gateway.budgets().alert_by_team(reachable);
    }

    /// Brings back the team's spend counters Redis lost (it restarted) or
    /// a new period starts, each instance adding what its history holds,
    /// without waiting for a request to find them missing. The team's
    /// runner calls it every second while its shared state is in reach.
    pub async fn keep_spend(&self) {
        let gateway = &self.gateway;
        let team = gateway.team();
        let covering = gateway.budgets().every_counter(now_ms());
        if covering.is_empty() {
            return;
        }
        let ask = AdmitAsk {
            provider: String::new(),
            provider_max: None,
            key: None,
            requests_per_minute: None,
            tokens_per_minute: None,
            tokens: 0,
            budgets: covering.iter().map(|c| c.ask.clone()).collect(),
            line: None,
        };
        // Reserves nothing, refuses nothing: says which counters need seeding.
        let ask = Box::new(move || Some(ask));
        if let Admitted::Unseeded(missing) = team.admit(ask).await {
            gateway.seed_team_spend(&covering, &missing).await;
        }
        gateway.raise_team_alerts(team.as_ref(), covering).await;
    }

    /// Takes in an event another instance of the team published: onto this
    /// instance's feed and, for a request of a session it answered, into
    /// the session's stick ([`crate::policy::stick`]), so the session's
    /// next turn starts where its last was served, whichever instance the
    /// balancer sends it to. (What it failed is not carried: a turn that
    /// failed everywhere leaves the stick as it was, costing one attempt.)
    pub fn take_event(&self, instance: &str, at_ms: i64, event: GatewayEvent) {
        if let GatewayEvent::RequestFinished { request } = &event {
            let served = request.provider.as_deref().filter(|_| request.outcome == RequestOutcome::Ok);
            if let (Some(session), Some(name)) = (&request.session, served) {
                if let Some(provider) = self.gateway.live().provider(name) {
                    let signer = provider.signer();
                    self.gateway.conversations().served(session, name, &signer, tokio::time::Instant::now());
                }
            }
        }
        self.gateway.telemetry().events.publish_remote(instance, at_ms, event);
    }
}

/// What the history has on record for `scope` since `since`: the rollups'
/// cost by provider and model, or the rows' by member.
async fn on_record(
    store: &Store,
    scope: &crate::policy::BudgetScope,
    since: i64,
) -> Result<f64, crate::history::StoreError> {
    if let Some(member) = scope.member() {
        let spent = store.member_spend(since).await?;
        return Ok(spent.iter().filter(|m| m.member == member).map(|m| m.cost_usd).sum());
    }
    let rows = store.cost_since(since).await?;
    Ok(rows.iter().filter(|(p, m, _)| scope.covers(p, m)).map(|(_, _, usd)| usd).sum())
}

//! Team mode on Redis: several Switchyard gateways acting as one.
//!
//! [`join`] gives a [`RedisTeam`], the core's [`Team`] seam, and a
//! [`Runner`] that keeps it alive: it heartbeats this instance into the
//! roll call, writes each decision this instance shares with one atomic
//! script and announces it, hears the others' and has the gateway follow
//! them, grants the one probe of a breaker whose cool-down ended to exactly
//! one instance, and reads the whole shared state again every second as a
//! backstop for announcements missed while disconnected.
//!
//! Redis out of reach never stops a request: the instance says `degraded`,
//! its breakers follow their own timers, every limit is this instance's
//! share of it (the shares add up to the limit), and it reconnects on its
//! own, bringing back what it did alone before the team's limits open.
//! Nothing secret is written: keys are named by their fingerprint, and the
//! Redis URL is shown only with its password redacted.
//!
//! # Layout
//! - [`keys`]: the names of every key and channel.
//! - [`scripts`]: the Lua scripts, one per decision.
//! - `sync`: what the runner reads back from the shared state.
//! - `lease`: one admission under the team's caps, buckets and budgets.
//! - `outage`: what keeps the team inside its limits while Redis is out
//!   of reach, and what this instance brings back when it answers.
//! - `events`: every instance's events on every instance's live feed.

mod cache;
pub mod decode;
mod events;
pub mod keys;
mod lease;
mod outage;
pub mod scripts;
mod sync;

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};
use switchyard_core::config::{redact_redis_url, TeamConfig};
use switchyard_core::gateway::Inbound;
use switchyard_core::ground::share::AtomicRoll;
use switchyard_core::team::{
    solo_name, Admission, Admitted, Asking, BoxFuture, Change, Member, Roll, Seed, Shared, SharedCache, SpendCounters,
    Team, TeamView, Verdicts,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use keys::Keys;
use outage::Outage;
use scripts::Scripts;

/// How long an instance stays on the roll call without a heartbeat.
const MEMBER_TTL: Duration = Duration::from_secs(5);
/// How often the instance heartbeats and reads the shared state back.
const SYNC_EVERY: Duration = Duration::from_secs(1);
/// How often due probes are looked for.
const PROBE_EVERY: Duration = Duration::from_millis(100);
/// How long a probe claim holds: another instance takes over after it.
const PROBE_TTL: Duration = Duration::from_secs(10);
/// Every Redis call's limit: a slow Redis is a Redis out of reach.
const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long an instance back from an outage keeps to its share beside the
/// team's limits: past every other instance's next heartbeat, at which it
/// comes back too and counts its requests in flight in the team's leases.
const REJOIN_GRACE: Duration = Duration::from_millis(2500);
/// Decisions waiting to be written; past this, the oldest are dropped.
const OUTBOX: usize = 1024;
/// How long a local trip waits for a second instance to confirm it.
const SUSPECT_WINDOW: Duration = Duration::from_secs(30);

/// Why a team could not be joined.
#[derive(Debug, thiserror::Error)]
pub enum TeamError {
    #[error("team.redis ({url}): {source}")]
    Url { url: String, source: redis::RedisError },
}

/// A change as announced on the channel: who made it, and what it is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Announcement {
    by: String,
    id: String,
    change: Change,
}

/// This instance's side of the team, as the gateway sees it.
#[derive(Debug)]
pub struct RedisTeam {
    name: String,
    id: String,
    started_at: i64,
    address: String,
    namespace: String,
    redis_shown: String,
    keys: Keys,
    outbox: mpsc::Sender<Change>,
    connected: AtomicBool,
    connection: Mutex<Option<ConnectionManager>>,
    /// A connection of its own for the runner's work (heartbeats, the
    /// once-a-second read of the shared state, announcements, events), so
    /// that a request's admission never queues behind it on the one
    /// multiplexed connection the request path uses.
    background: Mutex<Option<ConnectionManager>>,
    scripts: Arc<Scripts>,
    lease_ttl: Duration,
    /// This instance's place in the roll call at the last heartbeat: the
    /// share it takes of every limit while Redis is out of reach.
    roll: AtomicRoll,
    /// What keeps the team inside its limits while Redis is out of reach,
    /// and what this instance brings back when it answers again.
    outage: Arc<Outage>,
    /// Numbers this process's fill locks (unique with its id).
    locks: std::sync::atomic::AtomicU64,
    /// Rung when a request finds Redis gone: the runner checks at once
    /// rather than at its next heartbeat.
    lost: tokio::sync::Notify,
}

impl RedisTeam {
    fn connection(&self) -> Option<ConnectionManager> {
        self.connection.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn set_connection(&self, c: Option<ConnectionManager>) {
        *self.connection.lock().unwrap_or_else(|p| p.into_inner()) = c;
    }

    fn background(&self) -> Option<ConnectionManager> {
        self.background.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The connection for what no request waits on (the runner's reads, the
    /// admin API's): the runner's own, so it never queues in front of an
    /// admission; the request path's until the runner has one.
    fn off_path(&self) -> Option<ConnectionManager> {
        self.background().or_else(|| self.connection()).filter(|_| self.connected())
    }

    fn set_background(&self, c: Option<ConnectionManager>) {
        *self.background.lock().unwrap_or_else(|p| p.into_inner()) = c;
    }

    /// An admission while Redis is out of reach (see [`Outage::admit`]).
    fn alone(&self, ask: &switchyard_core::team::AdmitAsk) -> Admitted {
        self.outage.admit(&self.keys, ask, self.roll(), self.connection())
    }

    /// This instance's unique id (per process start).
    pub fn id(&self) -> &str {
        &self.id
    }
}

impl Team for RedisTeam {
    fn instance(&self) -> &str {
        &self.name
    }

    fn connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    fn roll(&self) -> Roll {
        self.roll.load()
    }

    fn degraded(&self) -> bool {
        !self.connected()
    }

    fn out_of_reach(&self) {
        // Out of reach from this call on: the next admission is alone, in a
        // new outage's accounts, without waiting for the runner.
        if self.connected.swap(false, Ordering::Relaxed) {
            self.outage.begin();
        }
        self.lost.notify_one();
    }

    fn view(&self) -> BoxFuture<'_, TeamView> {
        Box::pin(async move {
            let mut view = TeamView {
                enabled: true,
                instance: self.name.clone(),
                state: if self.connected() { "connected" } else { "degraded" }.into(),
                redis: Some(self.redis_shown.clone()),
                namespace: Some(self.namespace.clone()),
                history: String::new(),
                history_status: None,
                members: Vec::new(),
            };
            if let Some(mut con) = self.background() {
                match sync::members(&mut con, &self.keys).await {
                    Ok(members) => view.members = members,
                    Err(e) => {
                        warn!("team: cannot read the roll call: {e}");
                        view.state = "degraded".into();
                    }
                }
            }
            view
        })
    }
}

impl Verdicts for RedisTeam {
    fn share(&self, change: Change) -> bool {
        // Out of reach, the decision stays this instance's own.
        if !self.connected() {
            return false;
        }
        if let Err(e) = self.outbox.try_send(change) {
            warn!("team: a decision was not shared ({e}); the others learn it at the next resync");
        }
        true
    }
}

impl Admission for RedisTeam {
    fn admit<'a>(&'a self, ask: Asking<'a>) -> BoxFuture<'a, Admitted> {
        Box::pin(async move {
            let Some(ask) = ask() else { return Admitted::Alone };
            // Out of reach since before this ask: this instance's share of
            // the caps (set when Redis was lost) and of the budgets decides.
            if !self.connected() {
                return self.alone(&ask);
            }
            match lease::take(self, &ask, self.lease_ttl, CALL_TIMEOUT).await {
                // Lost during this ask: every instance takes its share of
                // every limit from now on, not at its next heartbeat.
                Admitted::Unreachable(_) => {
                    if self.connected() {
                        self.out_of_reach();
                    }
                    self.alone(&ask)
                }
                admitted => admitted,
            }
        })
    }

    fn leave_line(&self, provider: &str, ticket: &str) {
        lease::leave(self, provider, ticket);
    }
}

impl SpendCounters for RedisTeam {
    fn spent(&self, counters: Vec<String>) -> BoxFuture<'_, Option<Vec<Option<i64>>>> {
        Box::pin(async move {
            let mut con = self.off_path()?;
            if counters.is_empty() {
                return Some(Vec::new());
            }
            let keys: Vec<String> = counters.iter().map(|c| self.keys.spend(c)).collect();
            let mut mget = redis::cmd("MGET");
            mget.arg(&keys);
            match tokio::time::timeout(CALL_TIMEOUT, mget.query_async::<Vec<Option<i64>>>(&mut con)).await {
                Ok(Ok(spent)) => {
                    self.outage.read(&counters, &spent);
                    Some(spent)
                }
                Ok(Err(e)) => {
                    warn!("team: the budgets' spend could not be read ({e}); this instance's ledger is shown");
                    None
                }
                Err(_) => None,
            }
        })
    }

    fn claim(&self, what: &str, expires_at_ms: i64) -> BoxFuture<'_, Option<bool>> {
        let key = self.keys.announced(what);
        Box::pin(async move {
            let mut con = self.off_path()?;
            // `PXAT`: the claim lives as long as the counter it is about.
            let mut set = redis::cmd("SET");
            set.arg(&key).arg(&self.name).arg("NX").arg("PXAT").arg(expires_at_ms);
            match tokio::time::timeout(CALL_TIMEOUT, set.query_async::<Option<String>>(&mut con)).await {
                Ok(Ok(set)) => Some(set.is_some()),
                Ok(Err(e)) => {
                    warn!("team: a budget alert could not be claimed ({e}); this instance raises it");
                    None
                }
                Err(_) => None,
            }
        })
    }

    fn seed_spend(&self, counter: &str, micros: i64, expires_at_ms: i64, seed: Seed) -> BoxFuture<'_, bool> {
        let (key, seeded) = (self.keys.spend(counter), self.keys.spend_seeded(counter));
        Box::pin(async move {
            let Some(mut con) = self.connection().filter(|_| self.connected()) else { return false };
            let mut call = self.scripts.seed_spend.prepare_invoke();
            call.key(&key).key(&seeded).arg(&self.name).arg(micros).arg(expires_at_ms);
            call.arg(u8::from(seed == Seed::Whole));
            match tokio::time::timeout(CALL_TIMEOUT, call.invoke_async::<Vec<i64>>(&mut con)).await {
                Ok(Ok(_)) => true,
                Ok(Err(e)) => {
                    warn!("team: a budget's spend could not be seeded: {e}");
                    false
                }
                Err(_) => false,
            }
        })
    }
}

impl SharedCache for RedisTeam {
    fn cache_fill(&self, key: &str, lock_ttl: Duration) -> BoxFuture<'_, Shared> {
        let key = key.to_owned();
        Box::pin(async move { cache::fill(self, &key, lock_ttl, CALL_TIMEOUT).await })
    }

    fn cache_store(&self, key: &str, entry: &mut dyn FnMut() -> Option<Vec<u8>>, ttl: Duration, lock: Option<String>) {
        if !self.connected() {
            return;
        }
        match entry() {
            Some(entry) => cache::store(self, key, Some(entry), ttl, lock, CALL_TIMEOUT),
            // An answer that cannot be kept: the fill lock goes at once.
            None => {
                if let Some(lock) = lock {
                    self.cache_release(key, lock);
                }
            }
        }
    }

    fn cache_release(&self, key: &str, lock: String) {
        cache::store(self, key, None, Duration::ZERO, Some(lock), CALL_TIMEOUT);
    }
}

/// What keeps the team alive: run it once the gateway is built.
#[derive(Debug)]
pub struct Runner {
    team: Arc<RedisTeam>,
    client: redis::Client,
    outbox: mpsc::Receiver<Change>,
    scripts: Arc<Scripts>,
    /// Whether this instance decides alone (its shares in force, the
    /// gateway told): from the start until it first joins, and in an outage.
    out: bool,
    /// Back from an outage: when this instance's limits open whole again.
    whole_at: Option<tokio::time::Instant>,
}

/// Joins the team `config` describes, as the instance listening on
/// `listen`. Redis need not be up: the instance starts degraded and
/// connects when it can.
pub fn join(config: &TeamConfig, listen: SocketAddr) -> Result<(Arc<RedisTeam>, Runner), TeamError> {
    let url = config.redis.expose_secret();
    let client = redis::Client::open(url).map_err(|source| TeamError::Url { url: redact_redis_url(url), source })?;
    let (tx, rx) = mpsc::channel(OUTBOX);
    let team = Arc::new(RedisTeam {
        name: config.instance.clone().unwrap_or_else(|| solo_name(listen)),
        id: uuid::Uuid::now_v7().to_string(),
        started_at: switchyard_core::history::now_ms(),
        address: listen.to_string(),
        namespace: config.namespace.clone(),
        redis_shown: config.redis_redacted(),
        keys: Keys::new(&config.namespace),
        outbox: tx,
        connected: AtomicBool::new(false),
        connection: Mutex::new(None),
        background: Mutex::new(None),
        scripts: Arc::new(Scripts::new()),
        lease_ttl: config.lease_ttl,
        roll: AtomicRoll::default(),
        outage: Arc::default(),
        locks: std::sync::atomic::AtomicU64::new(0),
        lost: tokio::sync::Notify::new(),
    });
    let runner =
        Runner { team: team.clone(), client, outbox: rx, scripts: team.scripts.clone(), out: true, whole_at: None };
    Ok((team, runner))
}

impl Runner {
    /// Keeps the instance in its team until `stop`.
    pub async fn run(mut self, gateway: Inbound, stop: CancellationToken) {
        let team = self.team.clone();
        info!(instance = %team.name, redis = %team.redis_shown, namespace = %team.namespace, "team mode");
        let (due_tx, mut due_rx) = mpsc::unbounded_channel::<String>();
        let listener =
            tokio::spawn(listen(self.client.clone(), team.clone(), gateway.clone(), due_tx.clone(), stop.clone()));
        let fan_out = tokio::spawn(events::fan_out(team.clone(), gateway.clone(), stop.clone()));
        let fan_in = tokio::spawn(events::fan_in(self.client.clone(), team.clone(), gateway.clone(), stop.clone()));
        let renewals = tokio::spawn(renew(team.clone(), self.scripts.clone(), stop.clone()));
        let mut due: HashSet<String> = HashSet::new();
        let mut sync_tick = tokio::time::interval(SYNC_EVERY);
        let mut probe_tick = tokio::time::interval(PROBE_EVERY);
        sync_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        probe_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                _ = sync_tick.tick() => self.sync(&gateway, &mut due).await,
                () = team.lost.notified() => {
                    // A request found Redis gone: every limit at this
                    // instance's share at once, then see whether it is.
                    self.reachable(&gateway, false);
                    self.sync(&gateway, &mut due).await;
                }
                _ = probe_tick.tick(), if !due.is_empty() => self.probes(&gateway, &mut due).await,
                Some(provider) = due_rx.recv() => { due.insert(provider); }
                Some(change) = self.outbox.recv() => {
                    if let Some(provider) = self.write(change).await {
                        due.insert(provider);
                    }
                }
            }
        }
        self.leave().await;
        for task in [listener, fan_out, fan_in, renewals] {
            task.abort();
        }
    }

    /// Connects when not connected; heartbeats; reads the shared state back.
    async fn sync(&mut self, gateway: &Inbound, due: &mut HashSet<String>) {
        let team = self.team.clone();
        let mut con = match team.background() {
            Some(con) => con,
            None => match self.connect().await {
                Some(con) => con,
                None => return self.reachable(gateway, false),
            },
        };
        let beat = sync::heartbeat(&mut con, &self.scripts, &team, gateway.served(), MEMBER_TTL);
        match tokio::time::timeout(CALL_TIMEOUT, beat).await {
            Ok(Ok(roll)) => team.roll.store(roll),
            Ok(Err(e)) => {
                warn!("team: Redis did not take the heartbeat: {e}");
                return self.reachable(gateway, false);
            }
            Err(_) => {
                warn!("team: Redis did not answer within {CALL_TIMEOUT:?}");
                return self.reachable(gateway, false);
            }
        }
        // Back (or still here): what this instance did alone is brought to
        // the team's count before the team's limits open again, so no
        // burst goes in beside the requests admitted under its share.
        if let Err(e) = self.bring_back(&mut con).await {
            warn!("team: Redis answered, but what this instance did alone could not be brought back yet: {e}");
            return self.reachable(gateway, false);
        }
        self.reachable(gateway, true);
        gateway.keep_spend().await;
        let names = gateway.providers();
        match tokio::time::timeout(CALL_TIMEOUT * 4, sync::state(&mut con, &team.keys, &names)).await {
            Ok(Ok(state)) => {
                for (by, change) in state {
                    if matches!(change, Change::BreakerTripped { .. }) {
                        due.insert(change.provider().to_string());
                    }
                    gateway.apply(&by, &change);
                }
            }
            Ok(Err(e)) => warn!("team: cannot read the shared state: {e}"),
            Err(_) => warn!("team: reading the shared state took over {:?}", CALL_TIMEOUT * 4),
        }
    }

    /// Counts this instance's requests in flight in the team's leases (all
    /// of them when coming back; while connected, those admitted alone on
    /// the way back) and adds what it spent alone to the team's budgets.
    async fn bring_back(&self, con: &mut ConnectionManager) -> redis::RedisResult<()> {
        let team = &self.team;
        let step = async {
            team.outage.adopt(con, &self.scripts, team.lease_ttl, self.out).await?;
            team.outage.settle_back(con, &self.scripts, &team.keys, (&team.name, &team.id)).await
        };
        match tokio::time::timeout(CALL_TIMEOUT * 2, step).await {
            Ok(done) => done,
            Err(_) => Err(redis::RedisError::from((redis::ErrorKind::Io, "timed out"))),
        }
    }

    async fn connect(&self) -> Option<ConnectionManager> {
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(CALL_TIMEOUT))
            .set_response_timeout(Some(CALL_TIMEOUT))
            .set_number_of_retries(1);
        let connect = || self.client.get_connection_manager_with_config(config.clone());
        match futures_util::future::try_join(connect(), connect()).await {
            Ok((requests, background)) => {
                self.team.set_connection(Some(requests));
                self.team.set_background(Some(background.clone()));
                Some(background)
            }
            Err(e) => {
                debug!("team: cannot connect to Redis: {e}");
                None
            }
        }
    }

    /// Notes whether Redis is in reach, telling the gateway when that changes.
    ///
    /// Out of reach, each instance takes its share of every limit by the
    /// last roll call: the shares add up to the limit. Back, the team's
    /// shared limits decide again at once, but this instance keeps to its
    /// share beside them for [`REJOIN_GRACE`]: the other instances come
    /// back at their own next heartbeat, and until each has counted its
    /// requests in the team's leases, only the shares keep the sum within
    /// the cap.
    fn reachable(&mut self, gateway: &Inbound, now: bool) {
        let was = self.team.connected.swap(now, Ordering::Relaxed);
        if now {
            if self.out {
                info!(instance = %self.team.name, "team: connected to Redis; shared state in force");
                self.out = false;
                self.whole_at = Some(tokio::time::Instant::now() + REJOIN_GRACE);
                gateway.reachable(true);
            } else if self.whole_at.is_some_and(|at| tokio::time::Instant::now() >= at) {
                self.whole_at = None;
                gateway.share_caps(Roll::WHOLE);
            }
            return;
        }
        // A request may have found it out of reach first (and begun the
        // outage's accounts then).
        if was {
            self.team.outage.begin();
        }
        if !self.out {
            warn!(instance = %self.team.name, "team: Redis out of reach; deciding alone (degraded) until it is back");
            self.out = true;
            self.whole_at = None;
            gateway.share_caps(self.team.roll());
            gateway.reachable(false);
        }
    }

    /// Writes a decision to the shared state and announces it; returns a
    /// provider whose breaker now waits for a probe.
    async fn write(&self, change: Change) -> Option<String> {
        let mut con = self.team.background()?;
        let step = sync::write(&mut con, &self.scripts, &self.team, change, SUSPECT_WINDOW);
        match tokio::time::timeout(CALL_TIMEOUT, step).await {
            Ok(Ok(due)) => due,
            Ok(Err(e)) => {
                warn!("team: a decision was not shared: {e}");
                None
            }
            Err(_) => {
                warn!("team: sharing a decision took over {CALL_TIMEOUT:?}");
                None
            }
        }
    }

    /// Claims due probes: the one instance that wins probes for the team.
    async fn probes(&self, gateway: &Inbound, due: &mut HashSet<String>) {
        let Some(mut con) = self.team.background() else { return };
        for provider in due.clone() {
            let claim = sync::claim_probe(&mut con, &self.scripts, &self.team, &provider, PROBE_TTL);
            match tokio::time::timeout(CALL_TIMEOUT, claim).await {
                Ok(Ok(sync::Claim::Won)) => {
                    due.remove(&provider);
                    info!(provider = %provider, "team: this instance probes for the team");
                    gateway.probe(&provider);
                }
                Ok(Ok(sync::Claim::NotOpen)) => {
                    // Not open in the team (a local trip no one confirmed,
                    // or closed meanwhile): this instance's own timer leads.
                    due.remove(&provider);
                    gateway.release(&provider);
                }
                Ok(Ok(sync::Claim::Later)) => {}
                Ok(Err(e)) => warn!("team: cannot claim a probe: {e}"),
                Err(_) => warn!("team: claiming a probe took over {CALL_TIMEOUT:?}"),
            }
        }
    }

    /// Leaves the roll call at once, so the others stop counting this instance.
    async fn leave(&self) {
        if let Some(mut con) = self.team.background() {
            // What it spent alone is the team's before it goes.
            let team = &self.team;
            if team.connected() {
                let settle = team.outage.settle_back(&mut con, &self.scripts, &team.keys, (&team.name, &team.id));
                let _ = tokio::time::timeout(CALL_TIMEOUT, settle).await;
                let _ = tokio::time::timeout(CALL_TIMEOUT, team.outage.release_orphans(&mut con)).await;
            }
            let _ = tokio::time::timeout(CALL_TIMEOUT, sync::leave(&mut con, &self.team.keys, &self.team.id)).await;
        }
    }
}

/// Renews the leases of this instance's requests in flight every third of
/// their TTL, all in one round trip, while Redis is in reach.
async fn renew(team: Arc<RedisTeam>, scripts: Arc<Scripts>, stop: CancellationToken) {
    let every = (team.lease_ttl / 3).max(Duration::from_millis(10));
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Some(mut con) = team.off_path() {
            team.outage.renew(&mut con, &scripts, team.lease_ttl).await;
        }
    }
}

/// Hears the others' announcements and has the gateway follow them,
/// resubscribing after every disconnect.
async fn listen(
    client: redis::Client,
    team: Arc<RedisTeam>,
    gateway: Inbound,
    due: mpsc::UnboundedSender<String>,
    stop: CancellationToken,
) {
    let channel = team.keys.channel();
    while !stop.is_cancelled() {
        let subscribed = async {
            let mut pubsub = client.get_async_pubsub().await?;
            pubsub.subscribe(&channel).await?;
            Ok::<_, redis::RedisError>(pubsub)
        };
        let mut pubsub = match tokio::time::timeout(CALL_TIMEOUT, subscribed).await {
            Ok(Ok(p)) => p,
            _ => {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(Duration::from_millis(200)) => continue,
                }
            }
        };
        let mut messages = pubsub.on_message();
        loop {
            let msg = tokio::select! {
                () = stop.cancelled() => return,
                msg = messages.next() => msg,
            };
            let Some(msg) = msg else { break };
            let a = match decode::announcement(&team.id, msg.get_payload_bytes()) {
                Ok(Some(a)) => a,
                // This instance's own, applied when it was made.
                Ok(None) => continue,
                Err(dropped) => {
                    decode::report(&dropped);
                    continue;
                }
            };
            if matches!(a.change, Change::BreakerTripped { .. }) {
                let _ = due.send(a.change.provider().to_string());
            }
            gateway.apply(&a.by, &a.change);
        }
    }
}

/// A member of the team as the roll call lists it (`listed`: its id there);
/// `None` for a hash that is gone, or (logged) one no instance of this
/// version wrote, or one that claims another instance's id.
fn member(listed: &str, fields: &[(Vec<u8>, Vec<u8>)]) -> Option<Member> {
    let fields: Vec<(&[u8], &[u8])> = fields.iter().map(|(k, v)| (k.as_slice(), v.as_slice())).collect();
    decode::member(Some(listed), &fields).unwrap_or_else(|dropped| {
        decode::report(&dropped);
        None
    })
}

//! Writing a batch to PostgreSQL: one transaction, one multi-row statement
//! per table (`INSERT … SELECT FROM UNNEST` of one array per column), so a
//! batch of a thousand records costs a handful of round trips. Requests go
//! in first with `ON CONFLICT DO NOTHING RETURNING id`: only the rows that
//! were new count towards the derived tables, so a spool replayed after a
//! crash, or twice, changes no count.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use sqlx::{Postgres, Transaction};

use super::PgStore;
use crate::history::derived::{Derived, Facet, Facts, DAY_MS};
use crate::history::record::{CaptureRecord, EventRecord, Record, RequestRecord};
use crate::history::store::StoreError;

/// How many days' partitions one transaction creates (three tables a day).
pub(super) const DAYS_PER_TRANSACTION: usize = 8;

/// How many transactions a large batch is written in at once, each on a
/// connection of its own: while one waits for its statements' answers or
/// its commit, the other's run, and the server works on both cores. Each
/// lane adds to rollup and client rows of its own (see [`PgStore::lanes`]),
/// so the two never wait on one row's lock.
pub(super) const LANES: usize = 2;

/// Requests a lane is given at least: a smaller batch goes in one
/// transaction, where a second would cost more round trips than it saves.
const LANE_MIN: usize = 128;

/// A rollup's change: span, start, provider, model, outcome, sums.
type Rollup<'a> = (i64, i64, &'a str, &'a str, &'a str, crate::history::derived::Sums);

const INSERT_REQUESTS: &str = "INSERT INTO requests (id, correlation_id, started_at, finished_at, user_agent,
    endpoint, model, streamed, outcome, status, provider, provider_model, attempts, fallback, duration_ms, ttft_ms,
    input_tokens, output_tokens, cached_tokens, cost_usd, error_code, error, request_body, response_body, cache,
    saved_usd, instance, member, session, cache_write_tokens, turn, trace_id, device)
    SELECT * FROM UNNEST($1::text[], $2::text[], $3::int8[], $4::int8[], $5::text[], $6::text[], $7::text[],
        $8::bool[], $9::text[], $10::int8[], $11::text[], $12::text[], $13::int8[], $14::bool[], $15::float8[],
        $16::float8[], $17::int8[], $18::int8[], $19::int8[], $20::float8[], $21::text[], $22::text[], $23::text[],
        $24::text[], $25::text[], $26::float8[], $27::text[], $28::text[], $29::text[], $30::int8[], $31::bool[],
        $32::text[], $33::text[])
    ON CONFLICT DO NOTHING RETURNING id";

const INSERT_ATTEMPTS: &str = "INSERT INTO attempts (request_id, seq, request_started_at, provider, key_label,
    model, reason, fallback_from, started_at, offset_ms, timeout_ms, backoff_ms, duration_ms, ttfb_ms, ttft_ms,
    status, outcome, retry_after_ms, breaker_state, error, input_tokens, output_tokens, cached_tokens, translated,
    dropped, routing, cache_write_tokens)
    SELECT * FROM UNNEST($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::text[],
        $8::text[], $9::int8[], $10::float8[], $11::float8[], $12::float8[], $13::float8[], $14::float8[],
        $15::float8[], $16::int8[], $17::text[], $18::float8[], $19::text[], $20::text[], $21::int8[], $22::int8[],
        $23::int8[], $24::text[], $25::text[], $26::bytea[], $27::int8[])
    ON CONFLICT DO NOTHING";

/// What an insert into `rollups` does with a row that is there: adds to
/// it. The writer's upsert and retention's fold both end with it.
macro_rules! add_to_rollup {
    () => {
        "
    ON CONFLICT (instance, span, start, provider, model, outcome) DO UPDATE SET
    requests = rollups.requests + excluded.requests, fallbacks = rollups.fallbacks + excluded.fallbacks,
    input_tokens = rollups.input_tokens + excluded.input_tokens,
    output_tokens = rollups.output_tokens + excluded.output_tokens,
    cached_tokens = rollups.cached_tokens + excluded.cached_tokens, cost_usd = rollups.cost_usd + excluded.cost_usd,
    priced = rollups.priced + excluded.priced, saved_usd = rollups.saved_usd + excluded.saved_usd"
    };
}

const UPSERT_ROLLUPS: &str = concat!(
    "INSERT INTO rollups (instance, span, start, provider, model, outcome, requests,
    fallbacks, input_tokens, output_tokens, cached_tokens, cost_usd, priced, saved_usd)
    SELECT $1, * FROM UNNEST($2::int8[], $3::int8[], $4::text[], $5::text[], $6::text[], $7::int8[], $8::int8[],
        $9::int8[], $10::int8[], $11::int8[], $12::float8[], $13::int8[], $14::float8[])",
    add_to_rollup!()
);

const INSERT_FACETS: &str = "INSERT INTO request_facets (facet, value, started_at, id)
    SELECT * FROM UNNEST($1::int8[], $2::text[], $3::int8[], $4::text[]) ON CONFLICT DO NOTHING";

const INSERT_FACET_DAYS: &str = "INSERT INTO facet_days (facet, value, day)
    SELECT * FROM UNNEST($1::int8[], $2::text[], $3::int8[]) ON CONFLICT DO NOTHING";

/// `facet_days`' facet for a correlation id, given to a request other than
/// its own, or a request's own when its id is not a UUIDv7 (which names
/// its day by itself); the facets proper are numbered from 1.
pub(super) const CORRELATION: i64 = 0;

const UPSERT_MEMBER_DAYS: &str = "INSERT INTO member_days (instance, member, day, requests, cost_usd,
    input_tokens, output_tokens)
    SELECT $1, * FROM UNNEST($2::text[], $3::int8[], $4::int8[], $5::float8[], $6::int8[], $7::int8[])
    ON CONFLICT (instance, member, day) DO UPDATE SET requests = member_days.requests + excluded.requests,
    cost_usd = member_days.cost_usd + excluded.cost_usd,
    input_tokens = member_days.input_tokens + excluded.input_tokens,
    output_tokens = member_days.output_tokens + excluded.output_tokens";

/// A member's day: requests, spend, input and output tokens.
#[derive(Debug, Default, Clone, Copy)]
struct MemberDay {
    requests: i64,
    cost_usd: f64,
    input_tokens: i64,
    output_tokens: i64,
}

const UPSERT_CLIENTS: &str = "INSERT INTO clients (instance, user_agent, requests, last_at, last_id, last_model,
    last_outcome)
    SELECT $1, * FROM UNNEST($2::text[], $3::int8[], $4::int8[], $5::text[], $6::text[], $7::text[])
    ON CONFLICT (instance, user_agent) DO UPDATE SET requests = clients.requests + excluded.requests,
    last_id = CASE WHEN excluded.last_at >= clients.last_at THEN excluded.last_id ELSE clients.last_id END,
    last_model = CASE WHEN excluded.last_at >= clients.last_at THEN excluded.last_model ELSE clients.last_model END,
    last_outcome = CASE WHEN excluded.last_at >= clients.last_at THEN excluded.last_outcome
        ELSE clients.last_outcome END,
    last_at = GREATEST(clients.last_at, excluded.last_at)";

const INSERT_CAPTURES: &str = "INSERT INTO captures (request_id, started_at, replay_of, data)
    SELECT * FROM UNNEST($1::text[], $2::int8[], $3::text[], $4::bytea[]) ON CONFLICT (request_id) DO NOTHING";

const INSERT_EVENTS: &str = "INSERT INTO events (at, kind, provider, detail, request_id)
    SELECT * FROM UNNEST($1::int8[], $2::text[], $3::text[], $4::text[], $5::text[])";

/// The days a batch's new requests put in `facet_days`, each once: every
/// facet entry's, and each correlation id's (`correlated`).
fn facet_days<'a>(
    facets: &[(Facet, &'a str, i64, &'a str)],
    correlated: impl Iterator<Item = (&'a str, i64)>,
) -> BTreeSet<(i64, &'a str, i64)> {
    let day = |at: i64| at.div_euclid(DAY_MS);
    let entries = facets.iter().map(|(facet, value, at, _)| (facet.code(), *value, day(*at)));
    entries.chain(correlated.map(|(c, at)| (CORRELATION, c, day(at)))).collect()
}

/// The new requests' sums by member and day.
fn member_days<'a>(requests: impl Iterator<Item = &'a &'a RequestRecord>) -> BTreeMap<(&'a str, i64), MemberDay> {
    let mut days: BTreeMap<(&str, i64), MemberDay> = BTreeMap::new();
    for r in requests {
        let Some(member) = r.member.as_deref() else { continue };
        let [input, output, _] = r.usage.columns();
        let day = days.entry((member, r.started_at_ms.div_euclid(DAY_MS))).or_default();
        day.requests += 1;
        day.cost_usd += r.cost_usd.unwrap_or(0.0);
        day.input_tokens += input.unwrap_or(0);
        day.output_tokens += output.unwrap_or(0);
    }
    days
}

async fn add_member_days(
    tx: &mut Transaction<'_, Postgres>,
    days: BTreeMap<(&str, i64), MemberDay>,
    key: &str,
) -> Result<(), StoreError> {
    if days.is_empty() {
        return Ok(());
    }
    sqlx::query(UPSERT_MEMBER_DAYS)
        .bind(key)
        .bind(days.keys().map(|k| k.0.to_string()).collect::<Vec<String>>())
        .bind(days.keys().map(|k| k.1).collect::<Vec<i64>>())
        .bind(days.values().map(|d| d.requests).collect::<Vec<i64>>())
        .bind(days.values().map(|d| d.cost_usd).collect::<Vec<f64>>())
        .bind(days.values().map(|d| d.input_tokens).collect::<Vec<i64>>())
        .bind(days.values().map(|d| d.output_tokens).collect::<Vec<i64>>())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn insert_facet_days(
    tx: &mut Transaction<'_, Postgres>,
    days: BTreeSet<(i64, &str, i64)>,
) -> Result<(), StoreError> {
    if days.is_empty() {
        return Ok(());
    }
    sqlx::query(INSERT_FACET_DAYS)
        .bind(days.iter().map(|d| d.0).collect::<Vec<i64>>())
        .bind(days.iter().map(|d| d.1.to_string()).collect::<Vec<String>>())
        .bind(days.iter().map(|d| d.2).collect::<Vec<i64>>())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

impl PgStore {
    /// Writes a batch: a large one in two halves at once ([`LANES`]), a
    /// small one in one transaction. Should one half fail, the whole batch
    /// is written again later; the half that went in changes no count then
    /// (its requests are already on record).
    pub(crate) async fn write_batch(&self, batch: &[Record]) -> Result<(), StoreError> {
        let requests = batch.iter().filter(|r| matches!(r, Record::Request(_))).count();
        if requests < LANES * LANE_MIN {
            return self.write_lane(batch, 0).await;
        }
        let (first, second) = batch.split_at(batch.len() / 2);
        let (a, b) = tokio::join!(self.write_lane(first, 0), self.write_lane(second, 1));
        a.and(b)
    }

    /// Writes records in one transaction, adding to lane `lane`'s rollup
    /// and client rows.
    async fn write_lane(&self, batch: &[Record], lane: usize) -> Result<(), StoreError> {
        let requests: Vec<&RequestRecord> = batch
            .iter()
            .filter_map(|r| match r {
                Record::Request(r) => Some(r.as_ref()),
                Record::Event(_) | Record::Capture(_) => None,
            })
            .collect();
        let events: Vec<&EventRecord> = batch
            .iter()
            .filter_map(|r| match r {
                Record::Event(e) => Some(e),
                Record::Request(_) | Record::Capture(_) => None,
            })
            .collect();
        let captures: Vec<&CaptureRecord> = batch
            .iter()
            .filter_map(|r| match r {
                Record::Capture(c) => Some(c.as_ref()),
                Record::Request(_) | Record::Event(_) => None,
            })
            .collect();
        let mut tx = self.pool.begin().await?;
        let new = insert_requests(&mut tx, &requests).await?;
        insert_attempts(&mut tx, &requests).await?;
        let mut derived = Derived::default();
        for r in requests.iter().filter(|r| new.contains(r.id.as_str())) {
            derived.add(&Facts::of(r));
        }
        write_derived(&mut tx, &derived, &self.lanes[lane]).await?;
        // A request's own id names its day when it is a UUIDv7 (the gateway's
        // ids): only another form needs an entry for the request itself.
        let correlated = requests
            .iter()
            .filter(|r| new.contains(r.id.as_str()))
            .filter(|r| r.correlation_id != r.id || super::stamped_at(&r.id).is_none())
            .map(|r| (r.correlation_id.as_str(), r.started_at_ms));
        insert_facet_days(&mut tx, facet_days(derived.facets_added(), correlated)).await?;
        let members = requests.iter().filter(|r| new.contains(r.id.as_str()));
        add_member_days(&mut tx, member_days(members), &self.lanes[lane]).await?;
        insert_events(&mut tx, &events).await?;
        insert_captures(&mut tx, &captures).await?;
        tx.commit().await?;
        Ok(())
    }
}

/// Adds a batch's new requests to the rollups, facets and clients, under
/// the rollup and client key `key`.
async fn write_derived(tx: &mut Transaction<'_, Postgres>, derived: &Derived<'_>, key: &str) -> Result<(), StoreError> {
    let rollups = derived.rollups();
    if !rollups.is_empty() {
        let col = |f: fn(&Rollup<'_>) -> i64| rollups.iter().map(f).collect::<Vec<i64>>();
        let text = |f: fn(&Rollup<'_>) -> String| rollups.iter().map(f).collect::<Vec<String>>();
        sqlx::query(UPSERT_ROLLUPS)
            .bind(key)
            .bind(col(|r| r.0))
            .bind(col(|r| r.1))
            .bind(text(|r| r.2.to_string()))
            .bind(text(|r| r.3.to_string()))
            .bind(text(|r| r.4.to_string()))
            .bind(col(|r| r.5.requests))
            .bind(col(|r| r.5.fallbacks))
            .bind(col(|r| r.5.input_tokens))
            .bind(col(|r| r.5.output_tokens))
            .bind(col(|r| r.5.cached_tokens))
            .bind(rollups.iter().map(|r| r.5.cost_usd).collect::<Vec<f64>>())
            .bind(col(|r| r.5.priced))
            .bind(rollups.iter().map(|r| r.5.saved_usd).collect::<Vec<f64>>())
            .execute(&mut **tx)
            .await?;
    }
    let facets = derived.facets_added();
    if !facets.is_empty() {
        sqlx::query(INSERT_FACETS)
            .bind(facets.iter().map(|f| f.0.code()).collect::<Vec<i64>>())
            .bind(facets.iter().map(|f| f.1.to_string()).collect::<Vec<String>>())
            .bind(facets.iter().map(|f| f.2).collect::<Vec<i64>>())
            .bind(facets.iter().map(|f| f.3.to_string()).collect::<Vec<String>>())
            .execute(&mut **tx)
            .await?;
    }
    let clients = derived.clients_added();
    if !clients.is_empty() {
        sqlx::query(UPSERT_CLIENTS)
            .bind(key)
            .bind(clients.iter().map(|c| c.0.to_string()).collect::<Vec<String>>())
            .bind(clients.iter().map(|c| c.1).collect::<Vec<i64>>())
            .bind(clients.iter().map(|c| c.2 .0).collect::<Vec<i64>>())
            .bind(clients.iter().map(|c| c.2 .1.to_string()).collect::<Vec<String>>())
            .bind(clients.iter().map(|c| c.2 .2.map(str::to_string)).collect::<Vec<Option<String>>>())
            .bind(clients.iter().map(|c| c.2 .3.to_string()).collect::<Vec<String>>())
            .execute(&mut **tx)
            .await?;
    }
    Ok(())
}

impl PgStore {
    /// The days of `batch`'s requests whose partitions this process has
    /// not seen yet, in order. Made (in transactions of
    /// [`DAYS_PER_TRANSACTION`] days, by [`PgStore::create_days`]) before the
    /// batch is written: a batch that spans many new days (a replayed spool,
    /// a copied history) keeps what each made, where one long transaction
    /// would be rolled back whole each time it ran out of time.
    pub(super) fn missing_days(&self, batch: &[Record]) -> Vec<i64> {
        let starts = batch.iter().filter_map(|r| match r {
            Record::Request(r) => Some(r.started_at_ms),
            Record::Event(_) | Record::Capture(_) => None,
        });
        let wanted: std::collections::BTreeSet<i64> = starts.map(|at| at.div_euclid(DAY_MS)).collect();
        let known = self.days.lock().unwrap_or_else(|p| p.into_inner());
        wanted.into_iter().filter(|d| !known.contains(d)).collect()
    }

    /// Creates `days`' partitions in one transaction, under a
    /// transaction-scoped advisory lock: two instances creating one day's
    /// partition at once would otherwise race between `IF NOT EXISTS` and
    /// the creation.
    pub(super) async fn create_days(&self, days: &[i64]) -> Result<(), StoreError> {
        if days.is_empty() {
            return Ok(());
        }
        let mut tx = self.pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(super::PARTITION_LOCK).execute(&mut *tx).await?;
        for day in days {
            for sql in super::partition_ddl(*day) {
                // Integers only are formatted in: the day number and its bounds.
                sqlx::query(sqlx::AssertSqlSafe(sql)).execute(&mut *tx).await?;
            }
        }
        tx.commit().await?;
        self.days.lock().unwrap_or_else(|p| p.into_inner()).extend(days.iter().copied());
        Ok(())
    }
}

/// Inserts the requests; returns the ids of those that were new.
async fn insert_requests(
    tx: &mut Transaction<'_, Postgres>,
    requests: &[&RequestRecord],
) -> Result<HashSet<String>, StoreError> {
    if requests.is_empty() {
        return Ok(HashSet::new());
    }
    macro_rules! col {
        ($t:ty, |$r:ident| $e:expr) => {
            requests.iter().map(|$r| $e).collect::<Vec<$t>>()
        };
    }
    let usage: Vec<[Option<i64>; 3]> = col!([Option<i64>; 3], |r| r.usage.columns());
    let ids: Vec<String> = sqlx::query_scalar(INSERT_REQUESTS)
        .bind(col!(String, |r| r.id.clone()))
        .bind(col!(String, |r| r.correlation_id.clone()))
        .bind(col!(i64, |r| r.started_at_ms))
        .bind(col!(i64, |r| r.finished_at_ms))
        .bind(col!(Option<String>, |r| r.user_agent.clone()))
        .bind(col!(String, |r| r.endpoint.clone()))
        .bind(col!(Option<String>, |r| r.model.clone()))
        .bind(col!(bool, |r| r.streamed))
        .bind(col!(String, |r| r.outcome.as_str().to_string()))
        .bind(col!(Option<i64>, |r| r.status.map(i64::from)))
        .bind(col!(Option<String>, |r| r.provider.clone()))
        .bind(col!(Option<String>, |r| r.provider_model.clone()))
        .bind(col!(i64, |r| r.attempts.len() as i64))
        .bind(col!(bool, |r| r.fallback))
        .bind(col!(f64, |r| r.duration_ms))
        .bind(col!(Option<f64>, |r| r.ttft_ms))
        .bind(usage.iter().map(|u| u[0]).collect::<Vec<_>>())
        .bind(usage.iter().map(|u| u[1]).collect::<Vec<_>>())
        .bind(usage.iter().map(|u| u[2]).collect::<Vec<_>>())
        .bind(col!(Option<f64>, |r| r.cost_usd))
        .bind(col!(Option<String>, |r| r.error_code.clone()))
        .bind(col!(Option<String>, |r| r.error.clone()))
        .bind(col!(Option<String>, |r| r.request_body.clone()))
        .bind(col!(Option<String>, |r| r.response_body.clone()))
        .bind(col!(Option<String>, |r| r.cache.map(|c| c.as_str().to_string())))
        .bind(col!(Option<f64>, |r| r.saved_usd))
        .bind(col!(Option<String>, |r| r.instance.clone()))
        .bind(col!(Option<String>, |r| r.member.clone()))
        .bind(col!(Option<String>, |r| r.session.clone()))
        .bind(col!(Option<i64>, |r| r.usage.cache_write_column()))
        .bind(col!(Option<bool>, |r| r.turn))
        .bind(col!(Option<String>, |r| r.trace_id.clone()))
        .bind(col!(Option<String>, |r| r.device.clone()))
        .fetch_all(&mut **tx)
        .await?;
    Ok(ids.into_iter().collect())
}

async fn insert_attempts(tx: &mut Transaction<'_, Postgres>, requests: &[&RequestRecord]) -> Result<(), StoreError> {
    let attempts: Vec<_> = requests
        .iter()
        .flat_map(|r| {
            r.attempts.iter().map(move |a| {
                let translated = r.translations.iter().find(|t| t.seq == a.seq).map(|t| t.column());
                let dropped =
                    r.dropped.iter().find(|d| d.seq == a.seq).and_then(|d| serde_json::to_string(&d.fields).ok());
                let routing = r.routing.iter().find(|x| x.seq == a.seq).and_then(|x| x.column());
                (*r, a, translated, dropped, routing)
            })
        })
        .collect();
    if attempts.is_empty() {
        return Ok(());
    }
    macro_rules! col {
        ($t:ty, |$r:ident, $a:ident| $e:expr) => {
            attempts.iter().map(|($r, $a, _, _, _)| $e).collect::<Vec<$t>>()
        };
    }
    sqlx::query(INSERT_ATTEMPTS)
        .bind(col!(String, |r, _a| r.id.clone()))
        .bind(col!(i64, |_r, a| i64::from(a.seq)))
        .bind(col!(i64, |r, _a| r.started_at_ms))
        .bind(col!(String, |_r, a| a.provider.clone()))
        .bind(col!(Option<String>, |_r, a| a.key_label.clone()))
        .bind(col!(String, |_r, a| a.model.clone()))
        .bind(col!(String, |_r, a| a.reason.as_str().to_string()))
        .bind(col!(Option<String>, |_r, a| a.fallback_from.clone()))
        .bind(col!(i64, |_r, a| a.started_at_ms))
        .bind(col!(f64, |_r, a| a.offset_ms))
        .bind(col!(Option<f64>, |_r, a| a.timeout_ms))
        .bind(col!(f64, |_r, a| a.backoff_ms))
        .bind(col!(Option<f64>, |_r, a| a.duration_ms))
        .bind(col!(Option<f64>, |_r, a| a.ttfb_ms))
        .bind(col!(Option<f64>, |_r, a| a.ttft_ms))
        .bind(col!(Option<i64>, |_r, a| a.status.map(i64::from)))
        .bind(col!(String, |_r, a| a.outcome.as_str().to_string()))
        .bind(col!(Option<f64>, |_r, a| a.retry_after_ms))
        .bind(col!(Option<String>, |_r, a| a.breaker_state.clone()))
        .bind(col!(Option<String>, |_r, a| a.error.clone()))
        .bind(col!(Option<i64>, |_r, a| a.usage.columns()[0]))
        .bind(col!(Option<i64>, |_r, a| a.usage.columns()[1]))
        .bind(col!(Option<i64>, |_r, a| a.usage.columns()[2]))
        .bind(attempts.iter().map(|(_, _, t, _, _)| t.clone()).collect::<Vec<Option<String>>>())
        .bind(attempts.iter().map(|(_, _, _, d, _)| d.clone()).collect::<Vec<Option<String>>>())
        .bind(attempts.iter().map(|(_, _, _, _, x)| x.clone()).collect::<Vec<Option<Vec<u8>>>>())
        .bind(col!(Option<i64>, |_r, a| a.usage.cache_write_column()))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn insert_events(tx: &mut Transaction<'_, Postgres>, events: &[&EventRecord]) -> Result<(), StoreError> {
    if events.is_empty() {
        return Ok(());
    }
    sqlx::query(INSERT_EVENTS)
        .bind(events.iter().map(|e| e.at_ms).collect::<Vec<i64>>())
        .bind(events.iter().map(|e| e.kind.clone()).collect::<Vec<String>>())
        .bind(events.iter().map(|e| e.provider.clone()).collect::<Vec<Option<String>>>())
        .bind(events.iter().map(|e| e.detail.clone()).collect::<Vec<String>>())
        .bind(events.iter().map(|e| e.request_id.clone()).collect::<Vec<Option<String>>>())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

async fn insert_captures(tx: &mut Transaction<'_, Postgres>, captures: &[&CaptureRecord]) -> Result<(), StoreError> {
    if captures.is_empty() {
        return Ok(());
    }
    sqlx::query(INSERT_CAPTURES)
        .bind(captures.iter().map(|c| c.request_id.clone()).collect::<Vec<String>>())
        .bind(captures.iter().map(|c| c.started_at_ms).collect::<Vec<i64>>())
        .bind(captures.iter().map(|c| c.replay_of.clone()).collect::<Vec<Option<String>>>())
        .bind(captures.iter().map(|c| c.data.clone()).collect::<Vec<Vec<u8>>>())
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// One day's rollup rows of every writer key, moved into the key `folded`.
const FOLD_DAY: &str = concat!(
    "WITH moved AS (
        DELETE FROM rollups WHERE start >= $1 AND start < $2 AND instance <> 'folded' RETURNING *)
    INSERT INTO rollups (instance, span, start, provider, model, outcome, requests, fallbacks, input_tokens,
        output_tokens, cached_tokens, cost_usd, priced, saved_usd)
    SELECT 'folded', span, start, provider, model, outcome, SUM(requests), SUM(fallbacks), SUM(input_tokens),
        SUM(output_tokens), SUM(cached_tokens), SUM(cost_usd), SUM(priced), SUM(saved_usd)
    FROM moved GROUP BY span, start, provider, model, outcome",
    add_to_rollup!()
);

/// Folds the rollup rows of the days before `today` (a day number) into
/// one key (`folded`), a day to a transaction. Each writer (every
/// instance, each of its two lanes) adds to rows of its own so that none
/// waits on another;
/// once a day is over, nothing but a replayed spool adds to it, and its
/// rows are one set summed many times over by every chart that shows it
/// (a year by day read twice the rows it needed with two lanes, ten times
/// with five instances). A late write to a folded day adds to its
/// writer's own row again, folded at the next pass; readers sum every key
/// either way. Run by retention, under its lock.
pub(super) async fn fold_rollups(conn: &mut sqlx::PgConnection, today: i64) -> Result<(), StoreError> {
    let days: Vec<i64> = sqlx::query_scalar(
        "SELECT DISTINCT start / $1 FROM rollups WHERE span = $1 AND start < $2 AND instance <> 'folded' ORDER BY 1",
    )
    .bind(DAY_MS)
    .bind(today * DAY_MS)
    .fetch_all(&mut *conn)
    .await?;
    for day in days {
        let mut tx = sqlx::Connection::begin(&mut *conn).await?;
        sqlx::query(FOLD_DAY).bind(day * DAY_MS).bind((day + 1) * DAY_MS).execute(&mut *tx).await?;
        tx.commit().await?;
    }
    Ok(())
}

//! The tables derived from the request rows (migrations 0004, 0006 and 0007
//! describe them): `rollups`, sums per minute, hour and day, provider, model and
//! outcome, which spend reads instead of the rows; `request_facets`,
//! one entry per filter a request matches among those that select few rows,
//! which filtered lists walk instead of the whole time index; and `clients`,
//! a row per user agent, which the Tools view reads.
//!
//! All change only with the rows, in the same transaction: the writer adds
//! what it inserts ([`Derived::add`]), retention takes away what it deletes
//! ([`Derived::remove`]), and [`rebuild`] computes them all again from the rows.

use std::collections::HashMap;

use rusqlite::{params, Connection, Transaction, TransactionBehavior};

use super::record::RequestRecord;
use crate::ground::outcome::RequestOutcome;

pub const MINUTE_MS: i64 = 60_000;
pub const HOUR_MS: i64 = 3_600_000;
pub const DAY_MS: i64 = 86_400_000;
/// The spans rollups are kept at, finest first.
pub const SPANS: [i64; 3] = [MINUTE_MS, HOUR_MS, DAY_MS];

/// A filter that a facet entry stands for (`request_facets.facet`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Facet {
    /// A provider that answered or was tried.
    Provider = 1,
    /// A model asked for or used.
    Model = 2,
    /// An outcome other than ok.
    Outcome = 3,
    /// Any outcome but ok.
    Failed = 4,
    Fallback = 5,
    /// What the response cache did (`hit`, `stale`, `miss`, `bypass`).
    Cache = 6,
}

impl Facet {
    pub fn code(self) -> i64 {
        self as i64
    }
}

/// What one request contributes to the derived tables, whether read from a
/// record (the writer) or from its row (retention).
#[derive(Debug, Clone)]
pub struct Facts<'a> {
    pub id: &'a str,
    pub started_at: i64,
    pub user_agent: Option<&'a str>,
    pub provider: Option<&'a str>,
    pub model: Option<&'a str>,
    pub provider_model: Option<&'a str>,
    pub outcome: &'a str,
    pub fallback: bool,
    pub input_tokens: Option<i64>,
    pub output_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub cost_usd: Option<f64>,
    /// The cache status, as stored.
    pub cache: Option<&'a str>,
    pub saved_usd: Option<f64>,
    /// The providers of its attempts.
    pub tried: Vec<&'a str>,
}

impl<'a> Facts<'a> {
    pub fn of(r: &'a RequestRecord) -> Facts<'a> {
        let [input_tokens, output_tokens, cached_tokens] = r.usage.columns();
        Facts {
            id: &r.id,
            started_at: r.started_at_ms,
            user_agent: r.user_agent.as_deref(),
            provider: r.provider.as_deref(),
            model: r.model.as_deref(),
            provider_model: r.provider_model.as_deref(),
            outcome: r.outcome.as_str(),
            fallback: r.fallback,
            input_tokens,
            output_tokens,
            cached_tokens,
            cost_usd: r.cost_usd,
            cache: r.cache.map(crate::ground::outcome::CacheStatus::as_str),
            saved_usd: r.saved_usd,
            tried: r.attempts.iter().map(|a| a.provider.as_str()).collect(),
        }
    }

    /// Its facet entries, each once.
    fn facets(&self) -> Vec<(Facet, &'a str)> {
        let mut facets: Vec<(Facet, &'a str)> = Vec::with_capacity(4);
        let mut push = |facet, value| {
            if !facets.contains(&(facet, value)) {
                facets.push((facet, value));
            }
        };
        for p in self.provider.into_iter().chain(self.tried.iter().copied()) {
            push(Facet::Provider, p);
        }
        for m in self.model.into_iter().chain(self.provider_model) {
            push(Facet::Model, m);
        }
        if self.outcome != RequestOutcome::Ok.as_str() {
            push(Facet::Outcome, self.outcome);
            push(Facet::Failed, "");
        }
        if self.fallback {
            push(Facet::Fallback, "");
        }
        if let Some(status) = self.cache {
            push(Facet::Cache, status);
        }
        facets
    }
}

/// Sums for one rollup key: a rollup row's columns.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sums {
    pub(super) requests: i64,
    pub(super) fallbacks: i64,
    pub(super) input_tokens: i64,
    pub(super) output_tokens: i64,
    pub(super) cached_tokens: i64,
    pub(super) cost_usd: f64,
    pub(super) priced: i64,
    pub(super) saved_usd: f64,
}

impl Sums {
    pub(super) fn add(&mut self, other: &Sums) {
        self.requests += other.requests;
        self.fallbacks += other.fallbacks;
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cached_tokens += other.cached_tokens;
        self.cost_usd += other.cost_usd;
        self.priced += other.priced;
        self.saved_usd += other.saved_usd;
    }

    fn of(f: &Facts<'_>, sign: i64) -> Sums {
        Sums {
            requests: sign,
            fallbacks: sign * i64::from(f.fallback),
            input_tokens: sign * f.input_tokens.unwrap_or(0),
            output_tokens: sign * f.output_tokens.unwrap_or(0),
            cached_tokens: sign * f.cached_tokens.unwrap_or(0),
            cost_usd: sign as f64 * f.cost_usd.unwrap_or(0.0),
            priced: sign * i64::from(f.cost_usd.is_some()),
            saved_usd: sign as f64 * f.saved_usd.unwrap_or(0.0),
        }
    }
}

/// A rollup key at minute span: start, provider, model, outcome.
type Key<'a> = (i64, &'a str, &'a str, &'a str);

/// One client's change over a transaction: requests added (or, negative,
/// removed) and the newest request added.
#[derive(Debug, Default)]
struct ClientChange<'a> {
    requests: i64,
    /// started_at, id, model asked for, outcome.
    newest: Option<(i64, &'a str, Option<&'a str>, &'a str)>,
}

/// Changes to the derived tables gathered over one transaction's rows.
#[derive(Debug, Default)]
pub struct Derived<'a> {
    /// By minute; coarser spans are summed from these when written.
    sums: HashMap<Key<'a>, Sums>,
    /// By user agent.
    clients: HashMap<&'a str, ClientChange<'a>>,
    added: Vec<(Facet, &'a str, i64, &'a str)>,
    removed: Vec<(Facet, &'a str, i64, &'a str)>,
}

const UPSERT_ROLLUP: &str = "INSERT INTO rollups (span, start, provider, model, outcome, requests, fallbacks,
    input_tokens, output_tokens, cached_tokens, cost_usd, priced, saved_usd)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
    ON CONFLICT (span, start, provider, model, outcome) DO UPDATE SET requests = requests + excluded.requests,
    fallbacks = fallbacks + excluded.fallbacks, input_tokens = input_tokens + excluded.input_tokens,
    output_tokens = output_tokens + excluded.output_tokens, cached_tokens = cached_tokens + excluded.cached_tokens,
    cost_usd = cost_usd + excluded.cost_usd, priced = priced + excluded.priced,
    saved_usd = saved_usd + excluded.saved_usd";
const DROP_EMPTY_ROLLUP: &str = "DELETE FROM rollups
    WHERE span = ?1 AND start = ?2 AND provider = ?3 AND model = ?4 AND outcome = ?5 AND requests <= 0";
const INSERT_FACET: &str =
    "INSERT OR IGNORE INTO request_facets (facet, value, started_at, id) VALUES (?1, ?2, ?3, ?4)";
// Columns on the right of SET are the row's values before the update.
const UPSERT_CLIENT: &str = "INSERT INTO clients (user_agent, requests, last_at, last_id, last_model, last_outcome)
    VALUES (?1, ?2, ?3, ?4, ?5, ?6)
    ON CONFLICT (user_agent) DO UPDATE SET requests = requests + excluded.requests,
    last_id = CASE WHEN excluded.last_at >= last_at THEN excluded.last_id ELSE last_id END,
    last_model = CASE WHEN excluded.last_at >= last_at THEN excluded.last_model ELSE last_model END,
    last_outcome = CASE WHEN excluded.last_at >= last_at THEN excluded.last_outcome ELSE last_outcome END,
    last_at = MAX(last_at, excluded.last_at)";
const REMOVE_FROM_CLIENT: &str = "UPDATE clients SET requests = requests + ?2 WHERE user_agent = ?1";
const DROP_EMPTY_CLIENT: &str = "DELETE FROM clients WHERE user_agent = ?1 AND requests <= 0";
const DELETE_FACET: &str = "DELETE FROM request_facets WHERE facet = ?1 AND value = ?2 AND started_at = ?3 AND id = ?4";

impl<'a> Derived<'a> {
    /// A request whose row was inserted.
    pub fn add(&mut self, f: &Facts<'a>) {
        self.sum(f, 1);
        self.added.extend(f.facets().into_iter().map(|(facet, value)| (facet, value, f.started_at, f.id)));
    }

    /// A request whose row is deleted.
    pub fn remove(&mut self, f: &Facts<'a>) {
        self.sum(f, -1);
        self.removed.extend(f.facets().into_iter().map(|(facet, value)| (facet, value, f.started_at, f.id)));
    }

    fn sum(&mut self, f: &Facts<'a>, sign: i64) {
        let key = (
            f.started_at - f.started_at.rem_euclid(MINUTE_MS),
            f.provider.unwrap_or(""),
            f.provider_model.or(f.model).unwrap_or(""),
            f.outcome,
        );
        self.sums.entry(key).or_default().add(&Sums::of(f, sign));
        if let Some(agent) = f.user_agent.filter(|a| !a.is_empty()) {
            let client = self.clients.entry(agent).or_default();
            client.requests += sign;
            if sign > 0 && client.newest.is_none_or(|(at, ..)| f.started_at >= at) {
                client.newest = Some((f.started_at, f.id, f.model, f.outcome));
            }
        }
    }

    /// Writes the changes in `tx`, the transaction of the rows they come from.
    pub fn write(&self, tx: &Transaction<'_>) -> rusqlite::Result<()> {
        let mut upsert = tx.prepare_cached(UPSERT_ROLLUP)?;
        let mut drop_empty = tx.prepare_cached(DROP_EMPTY_ROLLUP)?;
        for span in SPANS {
            let mut at_span: HashMap<Key<'a>, Sums> = HashMap::with_capacity(self.sums.len());
            for (&(minute, p, m, o), sums) in &self.sums {
                at_span.entry((minute - minute.rem_euclid(span), p, m, o)).or_default().add(sums);
            }
            for ((start, p, m, o), s) in at_span {
                upsert.execute(params![
                    span,
                    start,
                    p,
                    m,
                    o,
                    s.requests,
                    s.fallbacks,
                    s.input_tokens,
                    s.output_tokens,
                    s.cached_tokens,
                    s.cost_usd,
                    s.priced,
                    s.saved_usd
                ])?;
                if s.requests < 0 {
                    drop_empty.execute(params![span, start, p, m, o])?;
                }
            }
        }
        self.write_clients(tx)?;
        // In key order, so that consecutive inserts land on the same leaf
        // pages instead of seeking back and forth between facets.
        let mut added: Vec<_> = self.added.iter().collect();
        added.sort_unstable_by(|a, b| (a.0.code(), a.1, a.2, a.3).cmp(&(b.0.code(), b.1, b.2, b.3)));
        let mut insert = tx.prepare_cached(INSERT_FACET)?;
        for (facet, value, at, id) in added {
            insert.execute(params![facet.code(), value, at, id])?;
        }
        let mut delete = tx.prepare_cached(DELETE_FACET)?;
        for (facet, value, at, id) in &self.removed {
            delete.execute(params![facet.code(), value, at, id])?;
        }
        Ok(())
    }
}

impl<'a> Derived<'a> {
    /// The rollups' changes at every span: (span, start, provider, model,
    /// outcome, sums), each key once.
    pub(super) fn rollups(&self) -> Vec<(i64, i64, &'a str, &'a str, &'a str, Sums)> {
        let mut out = Vec::with_capacity(self.sums.len() * SPANS.len());
        for span in SPANS {
            let mut at_span: HashMap<Key<'a>, Sums> = HashMap::with_capacity(self.sums.len());
            for (&(minute, p, m, o), sums) in &self.sums {
                at_span.entry((minute - minute.rem_euclid(span), p, m, o)).or_default().add(sums);
            }
            out.extend(at_span.into_iter().map(|((start, p, m, o), s)| (span, start, p, m, o, s)));
        }
        out
    }

    /// The facet entries added: (facet, value, started_at, id).
    pub(super) fn facets_added(&self) -> &[(Facet, &'a str, i64, &'a str)] {
        &self.added
    }

    /// Clients that gained requests: (user agent, requests, and the newest
    /// request's started_at, id, model and outcome).
    #[allow(clippy::type_complexity)]
    pub(super) fn clients_added(&self) -> Vec<(&'a str, i64, (i64, &'a str, Option<&'a str>, &'a str))> {
        self.clients.iter().filter_map(|(agent, c)| Some((*agent, c.requests, c.newest?))).collect()
    }
}

impl Derived<'_> {
    /// Each client's change: added requests move its newest request
    /// forward, removed ones only its count, and a client left with none goes.
    fn write_clients(&self, tx: &Transaction<'_>) -> rusqlite::Result<()> {
        let mut upsert = tx.prepare_cached(UPSERT_CLIENT)?;
        let mut remove = tx.prepare_cached(REMOVE_FROM_CLIENT)?;
        let mut drop_empty = tx.prepare_cached(DROP_EMPTY_CLIENT)?;
        for (agent, change) in &self.clients {
            match change.newest {
                Some((at, id, model, outcome)) => {
                    upsert.execute(params![agent, change.requests, at, id, model, outcome])?;
                }
                None => {
                    remove.execute(params![agent, change.requests])?;
                }
            }
            if change.requests < 0 {
                drop_empty.execute([agent])?;
            }
        }
        Ok(())
    }
}

/// The statements that fill the derived tables from the rows: those that ended
/// the migration that made them, brought up to the columns added since.
fn fill_statements() -> &'static str {
    include_str!("rebuild.sql")
}

/// Computes both tables again from the rows, in one transaction. It holds
/// the write lock throughout (seconds for a million rows): a gateway
/// recording meanwhile waits up to its busy timeout, then keeps its records
/// in the spool for the next start.
pub fn rebuild(conn: &mut Connection) -> rusqlite::Result<()> {
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    tx.execute_batch("DELETE FROM rollups; DELETE FROM request_facets; DELETE FROM clients;")?;
    tx.execute_batch(fill_statements())?;
    tx.commit()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ground::outcome::AttemptOutcome;
    use crate::ground::outcome::CacheStatus;
    use crate::ground::outcome::Reason;
    use crate::history::record::{sample_request, AttemptRecord, Record};
    use crate::history::store::{RequestFilter, Store};
    use crate::protocol::usage::Usage;
    use sqlx::Row;

    #[test]
    fn the_rebuild_runs_the_migrations_fill_statements() {
        let fill = fill_statements();
        assert!(fill.contains("INSERT INTO rollups"), "{fill}");
        assert!(fill.contains("TOTAL(r.saved_usd)"), "{fill}");
        assert!(fill.contains("INSERT OR IGNORE INTO request_facets"), "{fill}");
    }

    /// `n` varied requests, `step_ms` apart from `start`: three providers
    /// and models, some failed, some fallen back over two attempts, some
    /// unpriced, some refused before any provider.
    pub(crate) fn varied(n: u64, start: i64, step_ms: i64) -> Vec<Record> {
        const OUTCOMES: [RequestOutcome; 4] =
            [RequestOutcome::Error, RequestOutcome::Canceled, RequestOutcome::ProviderError, RequestOutcome::Failed];
        (0..n)
            .map(|i| {
                let at = start + i as i64 * step_ms;
                let provider = ["p1", "p2", "p3"][(i % 3) as usize];
                let mut r = sample_request(&format!("r{i:07}"));
                r.started_at_ms = at;
                r.finished_at_ms = at + 5;
                r.model = Some(["m1", "m2", "alias"][(i % 5 % 3) as usize].into());
                r.provider = Some(provider.into());
                r.provider_model = Some(["m1", "m2"][(i % 2) as usize].into());
                // Three clients, a request with an empty user agent and one without.
                r.user_agent = [Some("claude-cli/2.1"), Some("codex_cli_rs/0.5"), Some("aider/0.86"), Some(""), None]
                    [(i % 7 % 5) as usize]
                    .map(str::to_string);
                r.usage = Usage {
                    input_tokens: Some(i % 100),
                    output_tokens: Some(i % 7),
                    cached_tokens: None,
                    cache_write_tokens: None,
                };
                r.cost_usd = (i % 4 != 0).then_some((i % 13) as f64 * 1e-6);
                // Two members' requests among the owner's.
                r.member = [None, Some("al"), Some("bo"), None, None, Some("al")][(i % 6) as usize].map(str::to_string);
                // Two in three traced (as a gateway whose tracing was on a while).
                r.trace_id = (i % 3 != 2).then(|| format!("{i:032x}"));
                if i % 11 == 0 {
                    r.outcome = OUTCOMES[(i / 11 % 4) as usize];
                }
                let attempt = |seq: u32, provider: &str, reason| AttemptRecord {
                    seq,
                    provider: provider.into(),
                    key_label: None,
                    model: "m1".into(),
                    reason,
                    fallback_from: None,
                    started_at_ms: at,
                    offset_ms: 0.0,
                    timeout_ms: None,
                    backoff_ms: 0.0,
                    duration_ms: Some(1.0),
                    ttfb_ms: None,
                    ttft_ms: None,
                    status: Some(200),
                    outcome: AttemptOutcome::Ok,
                    retry_after_ms: None,
                    breaker_state: None,
                    error: None,
                    usage: Usage::default(),
                };
                r.attempts = vec![attempt(0, provider, Reason::First)];
                if i % 7 == 0 {
                    r.fallback = true;
                    r.attempts.insert(0, attempt(0, "down", Reason::First));
                    r.attempts[1] = attempt(1, provider, Reason::Fallback);
                    // Routed by a strategy: what it weighed for each.
                    use crate::policy::order::{Routing, Strategy};
                    let routed = |seq, rank, latency_ms| crate::history::record::AttemptRouting {
                        seq,
                        routing: Routing {
                            rank,
                            latency_ms,
                            in_flight: Some(rank),
                            ..Routing::by(Strategy::LeastBusy)
                        },
                    };
                    r.routing = vec![routed(0, 0, None), routed(1, 1, Some(i as f64 + 0.25))];
                }
                // Some answered by the cache, with what they saved; some missed it.
                if i % 5 == 1 {
                    (r.cache, r.saved_usd, r.cost_usd, r.attempts) =
                        (Some(CacheStatus::Hit), Some((i % 9) as f64 * 1e-5), Some(0.0), vec![]);
                } else if i % 5 == 2 {
                    r.cache = Some([CacheStatus::Miss, CacheStatus::Bypass, CacheStatus::Stale][(i % 3) as usize]);
                }
                if i % 17 == 0 {
                    (r.provider, r.provider_model, r.outcome, r.attempts) =
                        (None, None, RequestOutcome::Rejected, vec![]);
                }
                Record::Request(Box::new(r))
            })
            .collect()
    }

    /// Fails unless every rollup equals the sum over the rows it covers and
    /// no rollup covers no rows.
    pub(crate) async fn assert_rollups_match_rows(store: &Store) {
        for span in SPANS {
            let rollups = key_sums(store, &format!(
                "SELECT start, provider, model, outcome, requests, fallbacks, input_tokens, output_tokens, cached_tokens,
                        priced, cost_usd, saved_usd FROM rollups WHERE span = {span}"
            ))
            .await;
            let rows = key_sums(store, &format!(
                "SELECT started_at - started_at % {span}, COALESCE(provider, ''), COALESCE(provider_model, model, ''),
                        outcome, COUNT(*), SUM(fallback), SUM(COALESCE(input_tokens, 0)), SUM(COALESCE(output_tokens, 0)),
                        SUM(COALESCE(cached_tokens, 0)), COUNT(cost_usd), TOTAL(cost_usd), TOTAL(saved_usd)
                 FROM requests GROUP BY 1, 2, 3, 4"
            ))
            .await;
            assert_eq!(rollups.len(), rows.len(), "span {span}: keys");
            for ((key, counts, sums), (row_key, row_counts, row_sums)) in rollups.iter().zip(&rows) {
                assert_eq!((key, counts), (row_key, row_counts), "span {span}");
                for (sum, row_sum) in sums.iter().zip(row_sums) {
                    assert!((sum - row_sum).abs() < 1e-12, "span {span} {key}: {sums:?} against {row_sums:?}");
                }
            }
        }
        assert_clients_match_rows(store).await;
    }

    /// The clients table against the rows grouped by user agent.
    async fn assert_clients_match_rows(store: &Store) {
        let read = |sql: &'static str| async move {
            sqlx::query(sql)
                .fetch_all(store.sqlite().unwrap().pool())
                .await
                .unwrap()
                .iter()
                .map(|r| {
                    let text = |i: usize| r.get::<Option<String>, _>(i).unwrap_or_default();
                    (text(0), r.get::<i64, _>(1), r.get::<i64, _>(2), text(3), text(4), text(5))
                })
                .collect::<Vec<_>>()
        };
        let clients =
            read("SELECT user_agent, requests, last_at, last_id, last_model, last_outcome FROM clients ORDER BY 1")
                .await;
        let rows = read(
            "SELECT user_agent, COUNT(*), MAX(started_at), id, model, outcome FROM requests
             WHERE user_agent <> '' GROUP BY user_agent ORDER BY 1",
        )
        .await;
        assert!(!rows.is_empty());
        assert_eq!(clients, rows, "clients");
    }

    /// Per key: its counts, then its cost and what it saved.
    async fn key_sums(store: &Store, sql: &str) -> Vec<(String, Vec<i64>, [f64; 2])> {
        let rows =
            sqlx::query(sqlx::AssertSqlSafe(sql.to_string())).fetch_all(store.sqlite().unwrap().pool()).await.unwrap();
        let mut out: Vec<(String, Vec<i64>, [f64; 2])> = rows
            .iter()
            .map(|r| {
                let key = format!(
                    "{}/{}/{}/{}",
                    r.get::<i64, _>(0),
                    r.get::<String, _>(1),
                    r.get::<String, _>(2),
                    r.get::<String, _>(3)
                );
                (key, (4..10).map(|i| r.get::<i64, _>(i)).collect(), [r.get::<f64, _>(10), r.get::<f64, _>(11)])
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every filter's pages, walked to the end, list what the plain
    /// conditions on the rows select, in the same order.
    pub(crate) async fn assert_filters_match_rows(store: &Store) {
        let naive = [
            ("provider", "provider = 'p2' OR id IN (SELECT request_id FROM attempts WHERE provider = 'p2')"),
            ("tried", "provider = 'down' OR id IN (SELECT request_id FROM attempts WHERE provider = 'down')"),
            ("model", "model = 'alias' OR provider_model = 'alias'"),
            ("outcome", "outcome = 'canceled'"),
            ("failed", "outcome <> 'ok'"),
            ("fallback", "fallback = 1"),
            ("failed+provider", "outcome <> 'ok' AND (provider = 'p1' OR id IN (SELECT request_id FROM attempts WHERE provider = 'p1'))"),
            ("fallback+model", "fallback = 1 AND (model = 'm2' OR provider_model = 'm2')"),
            ("cache", "cache = 'hit'"),
            ("cache+provider", "cache = 'stale' AND (provider = 'p1' OR id IN (SELECT request_id FROM attempts WHERE provider = 'p1'))"),
            ("failed+cache", "outcome <> 'ok' AND cache = 'miss'"),
            ("miss", "cache = 'miss'"),
            ("bypass+model", "cache = 'bypass' AND (model = 'm2' OR provider_model = 'm2')"),
        ];
        for (name, condition) in naive {
            let filter = match name {
                "provider" => RequestFilter { provider: Some("p2".into()), ..Default::default() },
                "tried" => RequestFilter { provider: Some("down".into()), ..Default::default() },
                "model" => RequestFilter { model: Some("alias".into()), ..Default::default() },
                "outcome" => RequestFilter { outcome: Some(RequestOutcome::Canceled), ..Default::default() },
                "failed" => RequestFilter { failed: true, ..Default::default() },
                "fallback" => RequestFilter { fallback: true, ..Default::default() },
                "failed+provider" => RequestFilter { failed: true, provider: Some("p1".into()), ..Default::default() },
                "cache" => RequestFilter { cache: Some(CacheStatus::Hit), ..Default::default() },
                "cache+provider" => {
                    RequestFilter { cache: Some(CacheStatus::Stale), provider: Some("p1".into()), ..Default::default() }
                }
                "failed+cache" => RequestFilter { failed: true, cache: Some(CacheStatus::Miss), ..Default::default() },
                "miss" => RequestFilter { cache: Some(CacheStatus::Miss), ..Default::default() },
                "bypass+model" => {
                    RequestFilter { cache: Some(CacheStatus::Bypass), model: Some("m2".into()), ..Default::default() }
                }
                _ => RequestFilter { fallback: true, model: Some("m2".into()), ..Default::default() },
            };
            let sql = format!("SELECT id FROM requests WHERE {condition} ORDER BY started_at DESC, id DESC");
            let expected: Vec<String> =
                sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_all(store.sqlite().unwrap().pool()).await.unwrap();
            let mut listed = Vec::new();
            let mut filter = RequestFilter { limit: Some(37), ..filter };
            loop {
                let page = store.requests(&filter).await.unwrap();
                listed.extend(page.requests.into_iter().map(|r| r.id));
                match page.next_cursor {
                    Some(c) => filter.cursor = Some(c),
                    None => break,
                }
            }
            assert_eq!(listed, expected, "{name}");
        }
    }

    async fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("h.db")).await.unwrap();
        (dir, store)
    }

    #[tokio::test]
    async fn rollups_and_facets_follow_writes_including_a_replayed_batch() {
        let (_dir, store) = store().await;
        // Several requests a minute, across hours and two days.
        let records = varied(3000, 1_700_000_000_000, 47_000);
        store.write(&records[..1500]).await.unwrap();
        store.write(&records[1000..]).await.unwrap();
        assert_eq!(store.requests_on_record().await.unwrap(), 3000);
        assert_rollups_match_rows(&store).await;
        assert_filters_match_rows(&store).await;
    }

    #[tokio::test]
    async fn rollups_and_facets_follow_retention_mid_minute_and_oldest_first() {
        let (_dir, store) = store().await;
        let start = 1_700_000_000_000;
        store.write(&varied(3000, start, 13_000)).await.unwrap();
        // A cutoff inside a minute, after more than one batch of rows.
        let removed = store.sqlite().unwrap().prune_older_than(start + 700 * 13_000 + 6_500).await.unwrap();
        assert_eq!(removed, 701);
        assert_rollups_match_rows(&store).await;
        assert_eq!(store.sqlite().unwrap().prune_oldest(450).await.unwrap(), 450);
        assert_eq!(store.requests_on_record().await.unwrap(), 3000 - 701 - 450);
        assert_rollups_match_rows(&store).await;
        assert_filters_match_rows(&store).await;
    }

    #[tokio::test]
    async fn a_rebuild_computes_rollups_and_facets_from_the_rows() {
        let (_dir, store) = store().await;
        store.write(&varied(2000, 1_700_000_000_000, 31_000)).await.unwrap();
        sqlx::query("UPDATE rollups SET requests = requests + 5")
            .execute(store.sqlite().unwrap().pool())
            .await
            .unwrap();
        sqlx::query("DELETE FROM request_facets WHERE facet = 1")
            .execute(store.sqlite().unwrap().pool())
            .await
            .unwrap();
        store.rebuild().await.unwrap();
        assert_rollups_match_rows(&store).await;
        assert_filters_match_rows(&store).await;
    }
}

//! The PostgreSQL backend against a real server: 127.0.0.1:5432, trust
//! auth, database `test` (`.ci/run` starts it). A missing server fails
//! these tests; it never skips them. Each test works in a database of its
//! own, created here and dropped when the test ends.
//!
//! The same records go into SQLite and PostgreSQL and every read must
//! answer the same (SQLite's answers are checked against its rows by its
//! own tests); PostgreSQL's derived tables are checked against its rows.

use std::time::Duration;

use sqlx::PgPool;

use crate::config::{HistoryConfig, HistoryUrl};
use crate::ground::clock::now_ms;
use crate::history::derived::tests::varied;
use crate::history::derived::SPANS;
use crate::history::record::Record;
use crate::history::spend::tests::first_difference;
use crate::history::store::{Bucket, CountTable, RequestFilter, SpendRow, Store, StoreError};
use crate::history::{History, RequestOutcome};

const SERVER: &str = "postgres://postgres@127.0.0.1:5432";

/// A database of its own, dropped when this is.
pub(crate) struct TestDb {
    name: String,
    pub(crate) url: HistoryUrl,
}

impl TestDb {
    pub(crate) async fn create() -> TestDb {
        let admin = PgPool::connect(&format!("{SERVER}/test"))
            .await
            .expect("PostgreSQL must run on 127.0.0.1:5432 with a database `test` and trust auth (.ci/run starts it)");
        let name = format!("sy_{}", uuid::Uuid::now_v7().simple());
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}"))).execute(&admin).await.unwrap();
        admin.close().await;
        let url = HistoryUrl::parse(&format!("{SERVER}/{name}")).unwrap();
        TestDb { name, url }
    }

    pub(crate) fn config(&self) -> HistoryConfig {
        HistoryConfig { url: Some(self.url.clone()), ..HistoryConfig::default() }
    }

    /// Takes the database out of reach (every connection to it ended, new
    /// ones refused), or puts it back: what a restart looks like to a client.
    pub(crate) async fn reachable(&self, yes: bool) {
        let admin = PgPool::connect(&format!("{SERVER}/test")).await.unwrap();
        let allow = format!("ALTER DATABASE {} ALLOW_CONNECTIONS {yes}", self.name);
        sqlx::raw_sql(sqlx::AssertSqlSafe(allow)).execute(&admin).await.unwrap();
        if !yes {
            sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
                .bind(&self.name)
                .execute(&admin)
                .await
                .unwrap();
        }
        admin.close().await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let name = self.name.clone();
        // Off the test's runtime, which may be ending.
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                if let Ok(admin) = PgPool::connect(&format!("{SERVER}/test")).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&admin).await;
                }
            })
        })
        .join();
    }
}

/// A PostgreSQL store on a fresh database, and a SQLite one beside it.
async fn both() -> (TestDb, tempfile::TempDir, Store, Store) {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let pg = Store::open_configured(&dir.path().join("pg.db"), &db.config()).await.unwrap();
    let sqlite = Store::open(&dir.path().join("h.db")).await.unwrap();
    assert_eq!((pg.backend(), sqlite.backend()), ("postgres", "sqlite"));
    (db, dir, pg, sqlite)
}

fn pool(store: &Store) -> &PgPool {
    store.postgres().unwrap().pool()
}

/// Fails unless every rollup key's sums over the instances equal the sums
/// over the rows it covers, the clients equal the rows grouped by user
/// agent, and the facet entries equal those the rows call for.
pub(crate) async fn assert_derived_match_rows(store: &Store) {
    for span in SPANS {
        let rollups = text_rows(
            pool(store),
            &format!(
                "SELECT start, provider, model, outcome, SUM(requests), SUM(fallbacks), SUM(input_tokens),
                    SUM(output_tokens), SUM(cached_tokens), SUM(priced), ROUND(SUM(cost_usd)::numeric, 9),
                    ROUND(SUM(saved_usd)::numeric, 9)
             FROM rollups WHERE span = {span} GROUP BY 1, 2, 3, 4 HAVING SUM(requests) <> 0 ORDER BY 1, 2, 3, 4"
            ),
        )
        .await;
        let rows = text_rows(
            pool(store),
            &format!(
                "SELECT started_at - started_at % {span}, COALESCE(provider, ''), COALESCE(provider_model, model, ''),
                    outcome, COUNT(*), SUM(fallback::int), SUM(COALESCE(input_tokens, 0)),
                    SUM(COALESCE(output_tokens, 0)), SUM(COALESCE(cached_tokens, 0)), COUNT(cost_usd),
                    ROUND(COALESCE(SUM(cost_usd), 0)::numeric, 9), ROUND(COALESCE(SUM(saved_usd), 0)::numeric, 9)
             FROM requests GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4"
            ),
        )
        .await;
        assert!(!rows.is_empty());
        assert_eq!(rollups, rows, "span {span}");
    }
    // The days each facet entry and correlation id is found on, exactly.
    let kept = text_rows(pool(store), "SELECT facet, value, day FROM facet_days ORDER BY 1, 2, 3").await;
    let found = text_rows(
        pool(store),
        "SELECT facet, value, started_at / 86400000 AS day FROM request_facets
         UNION SELECT 0, correlation_id, started_at / 86400000 FROM requests
            WHERE correlation_id <> id OR id !~ '^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$'
         ORDER BY 1, 2, 3",
    )
    .await;
    assert_eq!(kept, found, "facet_days");
    // Each member's day, summed over the writers' keys, as the rows give it.
    let kept = text_rows(
        pool(store),
        "SELECT member, day, SUM(requests), SUM(input_tokens), SUM(output_tokens), ROUND(SUM(cost_usd)::numeric, 9)
         FROM member_days GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .await;
    let found = text_rows(
        pool(store),
        "SELECT member, started_at / 86400000, COUNT(*), COALESCE(SUM(input_tokens), 0),
            COALESCE(SUM(output_tokens), 0), ROUND(COALESCE(SUM(cost_usd), 0)::numeric, 9)
         FROM requests WHERE member IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2",
    )
    .await;
    assert_eq!(kept, found, "member_days");
    let clients = text_rows(
        pool(store),
        "SELECT user_agent, SUM(requests) FROM clients GROUP BY 1 HAVING SUM(requests) > 0 ORDER BY 1",
    )
    .await;
    let rows = text_rows(
        pool(store),
        "SELECT user_agent, COUNT(*) FROM requests WHERE user_agent <> '' GROUP BY 1 ORDER BY 1",
    )
    .await;
    assert_eq!(clients, rows, "clients");
    let facets =
        text_rows(pool(store), "SELECT facet, value, started_at, id FROM request_facets ORDER BY 1, 2, 3, 4").await;
    let wanted = text_rows(pool(store), &format!(
        "SELECT * FROM ({}) f ORDER BY 1, 2, 3, 4",
        "SELECT DISTINCT * FROM (SELECT 1::int8 AS facet, provider AS value, started_at, id FROM requests WHERE provider IS NOT NULL
         UNION ALL SELECT 1, a.provider, r.started_at, r.id FROM attempts a JOIN requests r ON r.id = a.request_id
         UNION ALL SELECT 2, model, started_at, id FROM requests WHERE model IS NOT NULL
         UNION ALL SELECT 2, provider_model, started_at, id FROM requests WHERE provider_model IS NOT NULL
         UNION ALL SELECT 3, outcome, started_at, id FROM requests WHERE outcome <> 'ok'
         UNION ALL SELECT 4, '', started_at, id FROM requests WHERE outcome <> 'ok'
         UNION ALL SELECT 5, '', started_at, id FROM requests WHERE fallback
         UNION ALL SELECT 6, cache, started_at, id FROM requests WHERE cache IS NOT NULL) u"
    ))
    .await;
    assert_eq!(facets.len(), wanted.len(), "facet entries");
    assert!(facets == wanted, "facet entries differ");
}

/// Each row as PostgreSQL writes a record's value (`(v1,v2,…)`): values
/// only, whatever the columns are called, sorted.
async fn text_rows(pool: &PgPool, sql: &str) -> Vec<String> {
    let sql = format!("SELECT q::text FROM ({sql}) q");
    let mut rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).fetch_all(pool).await.unwrap();
    rows.sort();
    rows
}

/// The filters the dashboard and CLI use, each alone and some together.
fn filters() -> Vec<RequestFilter> {
    let f = RequestFilter::default;
    vec![
        f(),
        RequestFilter { failed: true, ..f() },
        RequestFilter { fallback: true, ..f() },
        RequestFilter { outcome: Some(RequestOutcome::Error), ..f() },
        RequestFilter { outcome: Some(RequestOutcome::Ok), ..f() },
        RequestFilter { provider: Some("p2".into()), ..f() },
        RequestFilter { provider: Some("down".into()), ..f() },
        RequestFilter { model: Some("m1".into()), ..f() },
        RequestFilter { cache: Some(crate::ground::outcome::CacheStatus::Hit), ..f() },
        RequestFilter { search: Some("r00012".into()), ..f() },
        RequestFilter { search: Some(format!("{:032x}", 42)), ..f() },
        RequestFilter { correlation_id: Some("r0000042".into()), ..f() },
        RequestFilter { failed: true, provider: Some("p1".into()), limit: Some(7), ..f() },
        RequestFilter {
            since: Some(1_700_000_000_000 + 500 * 13_000),
            until: Some(1_700_000_000_000 + 900 * 13_000),
            ..f()
        },
    ]
}

/// Every page of a filter, as ids.
async fn all_pages(store: &Store, filter: &RequestFilter) -> Vec<String> {
    let mut ids = Vec::new();
    let mut filter = RequestFilter { limit: Some(filter.limit.unwrap_or(250)), ..filter.clone() };
    loop {
        let page = store.requests(&filter).await.unwrap();
        ids.extend(page.requests.iter().map(|r| r.id.clone()));
        match page.next_cursor {
            Some(c) => filter.cursor = Some(c),
            None => return ids,
        }
    }
}

/// The same records in both backends: every read answers the same.
#[tokio::test]
async fn postgres_answers_every_read_as_sqlite_does() {
    let (_db, _dir, pg, sqlite) = both().await;
    // Over three days, so that the rows span day partitions.
    let records = varied(3000, 1_700_000_000_000, 97_000);
    for store in [&pg, &sqlite] {
        store.write(&records[..2000]).await.unwrap();
        store.write(&records[1500..]).await.unwrap();
    }
    assert_eq!(pg.requests_on_record().await.unwrap(), 3000);
    assert_eq!(pg.count(CountTable::Requests).await.unwrap(), 3000);
    // Batches this large went in as two halves at once, each under a rollup key of its own.
    let keys: i64 =
        sqlx::query_scalar("SELECT COUNT(DISTINCT instance) FROM rollups").fetch_one(pool(&pg)).await.unwrap();
    assert_eq!(keys, 2, "one rollup key per write lane");
    assert_eq!(pg.count(CountTable::Attempts).await.unwrap(), sqlite.count(CountTable::Attempts).await.unwrap());
    assert_derived_match_rows(&pg).await;
    for filter in filters() {
        assert_eq!(all_pages(&pg, &filter).await, all_pages(&sqlite, &filter).await, "{filter:?}");
    }
    for id in ["r0000000", "r0000007", "r0000011", "r0000017", "r0000001", "nope"] {
        let (a, b) = (pg.request(id).await.unwrap(), sqlite.request(id).await.unwrap());
        assert_eq!(serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap(), "{id}");
    }
    // A routed request's figures come back from each, as written.
    let routed = pg.request("r0000007").await.unwrap().unwrap().routing;
    assert_eq!(routed.iter().map(|r| (r.seq, r.routing.latency_ms)).collect::<Vec<_>>(), [(0, None), (1, Some(7.25))]);
    for bucket in [Bucket::Day, Bucket::Hour, Bucket::Minute] {
        for since in [1_700_000_000_000 - 86_400_000, 1_700_000_000_000 + 7_777_777] {
            let (mut a, mut b) = (pg.spend(bucket, since).await.unwrap(), sqlite.spend(bucket, since).await.unwrap());
            // Costs that differ by rounding alone may sort either way: compare by key.
            for rows in [&mut a, &mut b] {
                rows.sort_by(|x, y| (&y.bucket, &x.provider, &x.model).cmp(&(&x.bucket, &y.provider, &y.model)));
            }
            let difference = first_difference(&a, &b);
            assert!(difference.is_none(), "{bucket:?} since {since}: {}", difference.unwrap_or_default());
        }
    }
    let (mut a, mut b) =
        (pg.cost_since(1_700_000_000_000).await.unwrap(), sqlite.cost_since(1_700_000_000_000).await.unwrap());
    a.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    b.sort_by(|x, y| (&x.0, &x.1).cmp(&(&y.0, &y.1)));
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert!((&x.0, &x.1) == (&y.0, &y.1) && (x.2 - y.2).abs() < 1e-12, "{x:?} {y:?}");
    }
    assert_eq!(pg.clients(100).await.unwrap(), sqlite.clients(100).await.unwrap());
    // Members' spend from a day's start, from within a day, from before the first request.
    for since in [1_700_006_400_000, 1_700_000_000_000 + 100_000_000, 1_600_000_000_000] {
        let (a, b) = (pg.member_spend(since).await.unwrap(), sqlite.member_spend(since).await.unwrap());
        assert_eq!(a.len(), 2, "{a:?}");
        for (x, y) in a.iter().zip(&b) {
            let same = (&x.member, x.requests, x.input_tokens, x.output_tokens)
                == (&y.member, y.requests, y.input_tokens, y.output_tokens)
                && (x.cost_usd - y.cost_usd).abs() < 1e-12;
            assert!(same, "since {since}: {x:?} {y:?}");
        }
    }
    // A rebuild computes the same derived tables again.
    pg.rebuild().await.unwrap();
    assert_derived_match_rows(&pg).await;
    assert_eq!(pg.clients(100).await.unwrap(), sqlite.clients(100).await.unwrap());
}

/// Requests spread over the last 400 days, with the gateway's own ids
/// (UUIDv7 of their start): lists cross hundreds of day partitions, and
/// a request is found by its id's day, answering as SQLite does for every
/// filter, every page and every id.
#[tokio::test]
async fn lists_and_lookups_over_a_year_of_days_answer_as_sqlite_does() {
    let (_db, _dir, pg, sqlite) = both().await;
    let span = 400 * 86_400_000;
    let now = now_ms();
    let mut records = varied(2000, now - span, span / 2000);
    let mut ids: Vec<String> = Vec::new();
    for (i, record) in records.iter_mut().enumerate() {
        if let Record::Request(r) = record {
            let stamp = uuid::Builder::from_unix_timestamp_millis(
                r.started_at_ms as u64,
                &(i as u128).to_be_bytes()[6..].try_into().unwrap(),
            );
            r.id = stamp.into_uuid().to_string();
            // A client's trace id on some; on others the id of a request
            // fifty before (as a replay has its original's).
            r.correlation_id = match i % 100 {
                3 => "trace-a".into(),
                57 if ids.len() >= 50 => ids[ids.len() - 50].clone(),
                _ => r.id.clone(),
            };
            ids.push(r.id.clone());
        }
    }
    for store in [&pg, &sqlite] {
        store.write(&records).await.unwrap();
    }
    let f = RequestFilter::default;
    let mut filters = filters();
    let replayed = records
        .iter()
        .filter_map(|r| match r {
            Record::Request(r) if r.correlation_id != r.id && r.correlation_id != "trace-a" => {
                Some(r.correlation_id.clone())
            }
            _ => None,
        })
        .nth(5)
        .unwrap();
    filters.extend([
        RequestFilter { correlation_id: Some("trace-a".into()), ..f() },
        RequestFilter { correlation_id: Some(replayed.clone()), ..f() },
        RequestFilter { correlation_id: Some(uuid::Uuid::now_v7().to_string()), ..f() },
        RequestFilter { since: Some(now - 10 * 86_400_000), ..f() },
        RequestFilter { until: Some(now - 100 * 86_400_000), limit: Some(3), ..f() },
        RequestFilter { outcome: Some(RequestOutcome::Canceled), limit: Some(5), ..f() },
    ]);
    for filter in filters {
        let (a, b) = (all_pages(&pg, &filter).await, all_pages(&sqlite, &filter).await);
        assert_eq!(a, b, "{filter:?}");
        let first = RequestFilter { limit: Some(3), ..filter.clone() };
        let (a, b) = (pg.requests(&first).await.unwrap(), sqlite.requests(&first).await.unwrap());
        assert_eq!(serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap(), "{filter:?}");
    }
    let unknown = uuid::Uuid::now_v7().to_string();
    for id in [&ids[0], &ids[999], &ids[1999], &unknown] {
        let (a, b) = (pg.request(id).await.unwrap(), sqlite.request(id).await.unwrap());
        assert_eq!(serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap(), "{id}");
    }
    assert!(pg.request(&ids[7]).await.unwrap().is_some());
    let group = all_pages(&pg, &RequestFilter { correlation_id: Some(replayed.clone()), ..f() }).await;
    assert_eq!(group.len(), 2, "a replayed request's group: its original and the replay");
    assert!(group.contains(&replayed));
    assert_derived_match_rows(&pg).await;
}

/// Two stores on one database are two instances: their rollups and
/// clients are rows of their own, and every read sums them.
#[tokio::test]
async fn instances_add_to_rows_of_their_own_and_reads_sum_them() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let (config, a_path, b_path) = (db.config(), dir.path().join("a.db"), dir.path().join("b.db"));
    // Started together: the migrations are applied once, under sqlx's advisory lock.
    let (a, b) = tokio::join!(Store::open_configured(&a_path, &config), Store::open_configured(&b_path, &config));
    let (a, b) = (a.unwrap(), b.unwrap());
    let records = varied(1200, 1_700_000_000_000, 7_000);
    let (x, y) = tokio::join!(a.write(&records[..700]), b.write(&records[500..]));
    x.unwrap();
    y.unwrap();
    // Each instance's keys: its own, and `<own>/1` for its writer's second lane.
    let instances: i64 = sqlx::query_scalar("SELECT COUNT(DISTINCT split_part(instance, '/', 1)) FROM rollups")
        .fetch_one(pool(&a))
        .await
        .unwrap();
    assert_eq!(instances, 2);
    // Four transactions at once (two instances, two lanes each), sharing facet days: none deadlocked.
    let deadlocks: i64 =
        sqlx::query_scalar("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
            .fetch_one(pool(&a))
            .await
            .unwrap();
    assert_eq!(deadlocks, 0);
    assert_eq!(b.requests_on_record().await.unwrap(), 1200);
    assert_derived_match_rows(&a).await;
    let applied: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM _sqlx_migrations").fetch_one(pool(&a)).await.unwrap();
    let known = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations-pg")).unwrap().count();
    assert_eq!(applied, i64::try_from(known).unwrap(), "each migration applied once");
}

/// What the spool replays after a kill -9 is on record once.
#[tokio::test]
async fn a_replayed_batch_changes_no_count() {
    let (_db, _dir, pg, _) = both().await;
    let records = varied(500, now_ms() - 3_600_000, 1000);
    // One half of a batch went in, the other's transaction failed: the
    // writer writes the whole batch again.
    pg.write(&records[250..]).await.unwrap();
    pg.write(&records).await.unwrap();
    assert_eq!(pg.requests_on_record().await.unwrap(), 500);
    assert_derived_match_rows(&pg).await;
    let before = (pg.requests_on_record().await.unwrap(), pg.count(CountTable::Attempts).await.unwrap());
    pg.write(&records).await.unwrap();
    assert_eq!((pg.requests_on_record().await.unwrap(), pg.count(CountTable::Attempts).await.unwrap()), before);
    assert_eq!(pg.count(CountTable::Requests).await.unwrap(), 500);
    assert_derived_match_rows(&pg).await;
}

/// Age retention drops whole days and takes them out of the rollups.
#[tokio::test]
async fn retention_drops_old_days_and_their_sums() {
    let (_db, _dir, pg, _) = both().await;
    let day = 86_400_000;
    let now = now_ms();
    pg.write(&varied(300, now - 40 * day, 60_000)).await.unwrap();
    let recent: Vec<Record> = varied(600, now - 2 * day, 60_000).into_iter().skip(300).collect();
    pg.write(&recent).await.unwrap();
    let config = HistoryConfig { retention: Duration::from_secs(30 * 86_400), ..HistoryConfig::default() };
    assert_eq!(pg.prune(&config).await.unwrap(), 300);
    assert_eq!(pg.count(CountTable::Requests).await.unwrap(), 300);
    assert_eq!(pg.requests_on_record().await.unwrap(), 300);
    assert_derived_match_rows(&pg).await;
    let partitions: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = 'requests'",
    )
    .fetch_one(pool(&pg))
    .await
    .unwrap();
    assert!(partitions <= 3, "{partitions} day partitions left");
}

/// Retention folds past days' rollup rows, whatever wrote them, into one
/// key: charts read a day's rows once, and sum to what they did.
#[tokio::test]
async fn retention_folds_past_days_rollups_into_one_key_and_sums_stay() {
    let (db, dir, pg, sqlite) = both().await;
    let day = 86_400_000;
    let now = now_ms();
    let today = now - now.rem_euclid(day);
    // Two instances, each writing large batches (two lanes each), over three past days and today.
    let other = Store::open_configured(&dir.path().join("other.db"), &db.config()).await.unwrap();
    let records = varied(1600, today - 3 * day, 3 * day / 1600 + 60_000);
    let (a, b) = tokio::join!(pg.write(&records[..800]), other.write(&records[800..]));
    a.unwrap();
    b.unwrap();
    sqlite.write(&records).await.unwrap();
    let keys = |past: bool| {
        let op = if past { "<" } else { ">=" };
        format!("SELECT COUNT(DISTINCT instance) FROM rollups WHERE start {op} {today}")
    };
    let count = |sql: String| {
        let pool = pool(&pg).clone();
        async move { sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(sql)).fetch_one(&pool).await.unwrap() }
    };
    assert!(count(keys(true)).await >= 3, "two instances, two lanes each, over the past days");
    let config = HistoryConfig { retention: Duration::from_secs(30 * 86_400), ..HistoryConfig::default() };
    assert_eq!(pg.prune(&config).await.unwrap(), 0);
    assert_eq!(count(keys(true)).await, 1, "the past days' rows under one key");
    assert!(count(keys(false)).await >= 1, "today's rows are the writers' own");
    let folded = count(format!("SELECT COUNT(*) FROM rollups WHERE start < {today} AND instance <> 'folded'")).await;
    assert_eq!(folded, 0);
    assert_derived_match_rows(&pg).await;
    // A late record of a folded day (a replayed spool) adds to its writer's row again.
    let mut late = crate::history::record::sample_request("late");
    (late.started_at_ms, late.finished_at_ms, late.cost_usd) = (today - 2 * day + 5, today - 2 * day + 5, Some(0.5));
    for store in [&pg, &sqlite] {
        store.write(&[Record::Request(Box::new(late.clone()))]).await.unwrap();
    }
    assert_derived_match_rows(&pg).await;
    for bucket in [Bucket::Day, Bucket::Hour] {
        let (a, b) =
            (pg.spend(bucket, today - 4 * day).await.unwrap(), sqlite.spend(bucket, today - 4 * day).await.unwrap());
        let total = |rows: &[SpendRow]| {
            (rows.iter().map(|r| r.requests).sum::<i64>(), rows.iter().filter_map(|r| r.cost_usd).sum::<f64>())
        };
        let ((n, cost), (m, expected)) = (total(&a), total(&b));
        assert!(n == m && (cost - expected).abs() < 1e-9, "{bucket:?}: {n} {cost} against {m} {expected}");
    }
    assert_eq!(pg.prune(&config).await.unwrap(), 0);
    assert_eq!(count(keys(true)).await, 1);
    assert_derived_match_rows(&pg).await;
}

/// Over the size cap, whole days go, oldest first, until the tables fit;
/// the newest day stays whatever its size.
#[tokio::test]
async fn the_size_cap_drops_the_oldest_days_until_the_history_fits() {
    let (_db, _dir, pg, _) = both().await;
    let day = 86_400_000;
    let start = (now_ms() / day - 4) * day;
    // 200 requests on each of four days, each with an 8 KiB body that
    // does not compress (PostgreSQL would shrink a repeated one to nothing).
    let mut seed = 0x9E37_79B9_7F4A_7C15_u64;
    let mut noise = || {
        (0..8 * 1024)
            .map(|_| {
                seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                char::from(b'a' + ((seed >> 59) as u8 % 26))
            })
            .collect::<String>()
    };
    let records: Vec<Record> = varied(800, start, day / 200)
        .into_iter()
        .map(|r| match r {
            Record::Request(mut r) => {
                r.request_body = Some(noise());
                Record::Request(r)
            }
            event => event,
        })
        .collect();
    pg.write(&records).await.unwrap();
    let used = |pg: Store| async move { pg.used_bytes().await.unwrap() };
    let full = used(pg.clone()).await;
    // Room for about two of the four days.
    let cap = u64::try_from(full / 2).unwrap();
    let config = HistoryConfig { max_size_bytes: cap, ..HistoryConfig::default() };
    let removed = pg.prune(&config).await.unwrap();
    assert!(removed >= 200 && removed % 200 == 0, "whole days: {removed}");
    assert!(u64::try_from(used(pg.clone()).await).unwrap() <= cap);
    assert!(pg.request(&format!("r{:07}", 0)).await.unwrap().is_none(), "the oldest went");
    assert!(pg.request(&format!("r{:07}", 799)).await.unwrap().is_some(), "the newest stayed");
    assert_derived_match_rows(&pg).await;
    // A cap no single day fits under leaves the newest day.
    let tiny = HistoryConfig { max_size_bytes: 1, ..HistoryConfig::default() };
    pg.prune(&tiny).await.unwrap();
    assert_eq!(pg.count(CountTable::Requests).await.unwrap(), 200);
}

/// The gateway's writer thread drains into PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_writer_records_into_postgres() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let history = History::open(&dir.path().join("switchyard.db"), &db.config()).await.unwrap();
    let recorder = history.recorder();
    for record in varied(50, now_ms() - 60_000, 100) {
        recorder.complete(record).await;
    }
    recorder.flush().await;
    assert_eq!(history.store().count(CountTable::Requests).await.unwrap(), 50);
    assert_eq!(history.store().backend(), "postgres");
    drop(recorder);
    history.close(Duration::from_secs(5)).await;
}

/// The database goes away under a running writer: requests go on being
/// recorded in the spool, health says the history is behind, and once the
/// database is back the spool is replayed into it, every request once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_completed_while_the_database_is_gone_wait_in_the_spool_and_arrive() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let history = History::open(&dir.path().join("switchyard.db"), &db.config()).await.unwrap();
    let recorder = history.recorder();
    let mut records = varied(300, now_ms() - 60_000, 100);
    let later = records.split_off(100);
    for record in records {
        recorder.complete(record).await;
    }
    recorder.flush().await;
    assert_eq!(history.store().count(CountTable::Requests).await.unwrap(), 100);

    db.reachable(false).await;
    for record in later {
        recorder.complete(record).await;
    }
    // A flush tries the database at once: still gone.
    recorder.flush().await;
    let status = recorder.status();
    assert_eq!((status.backend.as_str(), status.state.as_str()), ("postgres", "behind"), "{status:?}");
    assert_eq!(status.spooled, 200, "{status:?}");
    assert!(status.error.is_some() && status.spool_bytes > 0, "{status:?}");

    db.reachable(true).await;
    recorder.flush().await;
    let status = recorder.status();
    assert_eq!((status.state.as_str(), status.spooled, status.lost), ("keeping_up", 0, 0), "{status:?}");
    assert_eq!(history.store().count(CountTable::Requests).await.unwrap(), 300);
    assert_derived_match_rows(history.store()).await;
    drop(recorder);
    history.close(Duration::from_secs(5)).await;
}

/// A wrong password, an unreachable server, a database set up by a newer
/// binary: an error naming the setting, without the password, and nothing written.
#[tokio::test]
async fn bad_servers_are_refused_with_the_setting_named_and_no_password() {
    let db = TestDb::create().await;
    let dir = tempfile::tempdir().unwrap();
    let open = |url: &str| {
        let config = HistoryConfig { url: Some(HistoryUrl::parse(url).unwrap()), ..HistoryConfig::default() };
        let path = dir.path().join("x.db");
        async move { Store::open_configured(&path, &config).await }
    };
    let unreachable = open("postgres://sy:hunter2@127.0.0.1:1/test?connect_timeout=2").await.unwrap_err();
    let text = unreachable.to_string();
    assert!(text.starts_with("history.url postgres://sy:***@127.0.0.1:1/test"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
    let no_database = open(&format!("{SERVER}/sy_no_such_database")).await.unwrap_err().to_string();
    assert!(no_database.starts_with("history.url ") && no_database.contains("sy_no_such_database"), "{no_database}");
    // Set up by this binary, then by a newer one.
    let store = Store::open_configured(&dir.path().join("y.db"), &db.config()).await.unwrap();
    sqlx::query("INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (9999, 'future', TRUE, '\\x00', 0)")
        .execute(pool(&store))
        .await
        .unwrap();
    let newer = Store::open_configured(&dir.path().join("z.db"), &db.config()).await.unwrap_err();
    assert!(matches!(newer, StoreError::Server { .. }), "{newer}");
    assert!(newer.to_string().contains("newer Switchyard"), "{newer}");
}

/// Members and their spend read the same from both backends: the store's
/// one seam holds for the members table too.
#[tokio::test]
async fn members_and_their_spend_answer_as_sqlite_does() {
    use crate::members::{new_key, NewMember};
    let (_db, _dir, pg, sqlite) = both().await;
    let now = now_ms();
    let new = NewMember {
        name: "al".into(),
        budget: Some("50/month".into()),
        rpm: Some(60),
        tpm: Some(9_000),
        models: Some("claude-*,gpt-4.1".into()),
        expires: Some("90d".into()),
    };
    let al = new.build(&new_key(), now).unwrap();
    let bo = NewMember { name: "bo".into(), ..NewMember::default() }.build(&new_key(), now).unwrap();
    let mut rows = Vec::new();
    for (i, member) in [Some("al"), Some("al"), Some("bo"), None].into_iter().enumerate() {
        let mut r = crate::history::record::sample_request(&format!("r{i}"));
        (r.started_at_ms, r.finished_at_ms, r.cost_usd, r.member) = (now, now, Some(0.25), member.map(str::to_string));
        rows.push(Record::Request(Box::new(r)));
    }
    for store in [&pg, &sqlite] {
        store.put_member(&al).await.unwrap();
        store.put_member(&bo).await.unwrap();
        let mut revoked = bo.clone();
        revoked.revoked_at_ms = Some(now);
        store.put_member(&revoked).await.unwrap();
        store.write(&rows).await.unwrap();
    }
    let (a, b) = (pg.members().await.unwrap(), sqlite.members().await.unwrap());
    assert_eq!(a, b);
    assert_eq!((a[0].clone(), a[1].revoked_at_ms), (al, Some(now)));
    let (a, b) = (pg.member_spend(now - 1).await.unwrap(), sqlite.member_spend(now - 1).await.unwrap());
    assert_eq!(a, b);
    assert_eq!(
        a.iter().map(|m| (m.member.as_str(), m.requests, m.cost_usd)).collect::<Vec<_>>(),
        [("al", 2, 0.5), ("bo", 1, 0.25)]
    );
    let filter = RequestFilter { member: Some("al".into()), ..RequestFilter::default() };
    assert_eq!(pg.requests(&filter).await.unwrap().requests.len(), 2);
    assert_eq!(sqlite.requests(&filter).await.unwrap().requests.len(), 2);
    assert!(pg.remove_member("al").await.unwrap() && !pg.remove_member("al").await.unwrap());
}

/// Sessions read the same from both backends, with figures summed exactly
/// from their rows: the list (filters, pages), one session, and the
/// request list by session.
#[tokio::test]
async fn sessions_answer_as_sqlite_does() {
    use crate::history::sessions::{SessionFilter, MAX_TIMELINE};
    use crate::protocol::usage::Usage;
    let (_db, _dir, pg, sqlite) = both().await;
    let now = now_ms();
    // (session, user agent, provider, input, cached, output, cost, fallback, ok), oldest first.
    let rows = [
        ("cc", "claude-cli/2.1.197 (external, cli)", "anthropic", 1000, 0, 10, 0.5, false, true),
        ("cc", "claude-cli/2.1.197 (external, cli)", "anthropic", 1200, 900, 20, 0.25, false, true),
        ("cx", "codex_exec/0.171.0", "openai", 500, 0, 5, 0.125, false, true),
        ("cc", "claude-cli/2.1.197 (external, cli)", "backup", 1300, 1000, 30, 0.25, true, false),
        ("gm", "GeminiCLI/0.61.0 (linux; x64)", "google", 100, 50, 1, 0.0, false, true),
    ];
    let records: Vec<Record> = rows
        .iter()
        .enumerate()
        .map(|(i, (session, ua, provider, input, cached, output, cost, fallback, ok))| {
            let mut r = crate::history::record::sample_request(&format!("r{i}"));
            r.started_at_ms = now - 10_000 + i as i64 * 1000;
            r.finished_at_ms = r.started_at_ms + 5;
            r.session = Some(session.to_string());
            r.user_agent = Some(ua.to_string());
            r.provider = Some(provider.to_string());
            // The first request writes the cache, the second is a tool
            // follow-up (no turn) that writes a little more; rows of old
            // (no turn recorded) count as turns.
            let written = [Some(1000), Some(300), None, None, None][i];
            r.turn = [Some(true), Some(false), None, Some(true), Some(true)][i];
            r.usage = Usage {
                input_tokens: Some(*input),
                output_tokens: Some(*output),
                cached_tokens: Some(*cached),
                cache_write_tokens: written,
            };
            let mut attempt = attempt_like(&r);
            attempt.usage = r.usage;
            r.attempts = vec![attempt];
            (r.cost_usd, r.fallback) = (Some(*cost), *fallback);
            if !ok {
                r.outcome = RequestOutcome::Error;
            }
            // cc is al's and bo's, cx al's, gm the owner's.
            r.member = [Some("al"), Some("bo"), Some("al"), Some("al"), None][i].map(str::to_string);
            Record::Request(Box::new(r))
        })
        .collect();
    for store in [&pg, &sqlite] {
        store.write(&records).await.unwrap();
    }
    let list = |filter: SessionFilter| {
        let (pg, sqlite) = (pg.clone(), sqlite.clone());
        async move {
            let (a, b) = (pg.sessions(&filter).await.unwrap(), sqlite.sessions(&filter).await.unwrap());
            assert_eq!(a.sessions, b.sessions, "{filter:?}");
            assert_eq!(a.next_cursor, b.next_cursor);
            a
        }
    };
    let all = list(SessionFilter::default()).await;
    let ids: Vec<&str> = all.sessions.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["gm", "cc", "cx"], "newest last request first");
    let cc = &all.sessions[1];
    assert_eq!((cc.client.as_deref(), cc.client_version.as_deref()), (Some("claude-code"), Some("2.1.197")));
    assert_eq!((cc.requests, cc.input_tokens, cc.output_tokens, cc.cache_read_tokens), (3, 3500, 60, 1900));
    assert_eq!((cc.cost_usd, cc.fallbacks, cc.errors), (Some(1.0), 1, 1));
    assert_eq!(cc.cache_hit_rate, Some(1900.0 / 3500.0));
    assert_eq!((cc.turns, cc.cache_write_tokens), (2, 1300), "a tool follow-up is a request, not a turn");
    assert_eq!((all.sessions[2].turns, all.sessions[2].cache_write_tokens), (1, 0));
    for store in [&pg, &sqlite] {
        let d = store.request("r1").await.unwrap().unwrap();
        assert_eq!((d.request.turn, d.request.usage.cache_write_tokens), (Some(false), Some(300)));
        assert_eq!(d.attempt_list[0].usage.cache_write_tokens, Some(300), "attempts keep their cache writes");
    }
    assert_eq!((cc.first_at, cc.last_at), (now - 10_000, now - 7_000));
    let members: Vec<&[String]> = all.sessions.iter().map(|s| s.members.as_slice()).collect();
    assert_eq!(members, [&[][..], &["al".to_string(), "bo".to_string()][..], &["al".to_string()][..]]);
    let bo = list(SessionFilter { member: Some("bo".into()), ..Default::default() }).await;
    let bo: Vec<(&str, i64, &[String])> =
        bo.sessions.iter().map(|s| (s.id.as_str(), s.requests, s.members.as_slice())).collect();
    assert_eq!(bo, [("cc", 1, &["bo".to_string()][..])], "only bo's requests, and bo named");

    let only = |f: SessionFilter| async { list(f).await.sessions.into_iter().map(|s| s.id).collect::<Vec<_>>() };
    assert_eq!(only(SessionFilter { client: Some("codex".into()), ..Default::default() }).await, ["cx"]);
    assert_eq!(only(SessionFilter { provider: Some("backup".into()), ..Default::default() }).await, ["cc"]);
    assert_eq!(only(SessionFilter { since: Some(now - 6_500), ..Default::default() }).await, ["gm"]);
    assert!(only(SessionFilter { model: Some("other".into()), ..Default::default() }).await.is_empty());
    let first = list(SessionFilter { limit: Some(2), ..Default::default() }).await;
    let cursor = first.next_cursor.clone().expect("a second page");
    let second = list(SessionFilter { limit: Some(2), cursor: Some(cursor), ..Default::default() }).await;
    assert_eq!((second.sessions.len(), second.sessions[0].id.as_str(), second.next_cursor), (1, "cx", None));

    let prices = crate::history::pricing::Prices::with_overrides(vec![crate::config::Price {
        provider: Some("anthropic".into()),
        model: "m".into(),
        input: 3.0,
        output: 15.0,
        cached: Some(0.3),
        cache_write: None,
    }]);
    for store in [&pg, &sqlite] {
        let d = store.session("cc", (now - 60_000, None), MAX_TIMELINE, Some(&prices)).await.unwrap().unwrap();
        assert_eq!(&d.summary, cc);
        assert_eq!(d.timeline.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["r0", "r1", "r3"]);
        assert_eq!((d.provider.as_deref(), d.model.as_deref()), (Some("backup"), Some("m")));
        let served: Vec<_> =
            d.providers.iter().map(|p| (p.provider.as_str(), p.requests, p.cache_read_tokens)).collect();
        assert_eq!(served, [("anthropic", 2, 900), ("backup", 1, 1000)]);
        // 900 cache reads at $3 rather than $0.30 a million; backup has no price.
        let saved = d.cache_saved_usd.unwrap();
        assert!((saved - 900.0 * 2.7 / 1e6).abs() < 1e-12, "{saved}");
        let latest = store.session("cc", (now - 60_000, None), 1, None).await.unwrap().unwrap();
        assert_eq!((latest.timeline.len(), latest.summary.requests), (1, 3));
        assert!(store.session("cc", (now - 1000, None), 1, None).await.unwrap().is_none(), "outside the window");
        let filter = RequestFilter { session: Some("cx".into()), ..RequestFilter::default() };
        assert_eq!(store.requests(&filter).await.unwrap().requests[0].session.as_deref(), Some("cx"));
        let agents = store.agent_spend(now - 60_000).await.unwrap();
        assert_eq!(agents.len(), 3);
    }
}

/// A request's trace id is written, shown in its detail and found by the
/// list's search as on SQLite; a request without one reads back with none.
#[tokio::test]
async fn a_trace_id_reads_back_from_postgres_as_from_sqlite() {
    use crate::history::tests::{assert_trace_ids_read_back, traced_and_untraced};
    let (_db, _dir, pg, sqlite) = both().await;
    let records = traced_and_untraced(now_ms());
    for store in [&pg, &sqlite] {
        store.write(&records).await.unwrap();
        assert_trace_ids_read_back(store).await;
    }
    for id in ["traced", "untraced"] {
        let (a, b) = (pg.request(id).await.unwrap(), sqlite.request(id).await.unwrap());
        assert_eq!(serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap(), "{id}");
    }
}

/// Captures are written in the batch with their requests, read back by id
/// and replay link, and go with their day under retention and with a purge.
#[tokio::test]
async fn captures_are_kept_linked_and_retired_with_their_requests() {
    let (_db, _dir, pg, _) = both().await;
    let day = 86_400_000;
    let now = now_ms();
    let capture = |id: &str, at: i64, replay_of: Option<&str>| {
        Record::Capture(Box::new(crate::history::record::CaptureRecord {
            request_id: id.to_string(),
            started_at_ms: at,
            replay_of: replay_of.map(str::to_string),
            data: id.as_bytes().to_vec(),
        }))
    };
    // Ids by position: the old request is the first, the recent ones the next two.
    let old = varied(1, now - 40 * day, 60_000);
    let recent: Vec<Record> = varied(3, now - day, 60_000).into_iter().skip(1).collect();
    let id = |r: &Record| match r {
        Record::Request(r) => r.id.clone(),
        _ => unreachable!(),
    };
    let (old_id, first, second) = (id(&old[0]), id(&recent[0]), id(&recent[1]));
    let mut batch = vec![old[0].clone(), recent[0].clone(), recent[1].clone()];
    batch.push(capture(&old_id, now - 40 * day, None));
    batch.push(capture(&first, now - day, None));
    batch.push(capture(&second, now - day, Some(&first)));
    pg.write(&batch).await.unwrap();
    assert_eq!(pg.capture(&first).await.unwrap().unwrap().data, first.as_bytes());
    assert_eq!(pg.capture(&second).await.unwrap().unwrap().replay_of.as_deref(), Some(first.as_str()));
    assert_eq!(pg.replays(&first).await.unwrap(), vec![second]);
    let config = HistoryConfig { retention: Duration::from_secs(30 * 86_400), ..HistoryConfig::default() };
    pg.prune(&config).await.unwrap();
    assert!(pg.capture(&old_id).await.unwrap().is_none(), "retention took the old day's capture");
    assert!(pg.capture(&first).await.unwrap().is_some());
    crate::history::purge(&pg, crate::cache::purge_beside).await.unwrap();
    assert!(pg.capture(&first).await.unwrap().is_none(), "a purge takes every capture");
}

/// An attempt that served `r`, for tests to change what they need.
pub(crate) fn attempt_like(r: &crate::history::record::RequestRecord) -> crate::history::record::AttemptRecord {
    use crate::ground::outcome::AttemptOutcome;
    use crate::ground::outcome::Reason;
    use crate::history::record::AttemptRecord;
    AttemptRecord {
        seq: 0,
        provider: r.provider.clone().unwrap_or_default(),
        key_label: None,
        model: r.provider_model.clone().unwrap_or_default(),
        reason: Reason::First,
        fallback_from: None,
        started_at_ms: r.started_at_ms,
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
        usage: r.usage,
    }
}

//! `switchyard history copy`: one history's requests, with their attempts
//! and their captures (the inspector's bodies), into another (an existing
//! SQLite record into PostgreSQL when a team moves in).
//!
//! Requests go newest first, a page at a time, each page written in one
//! transaction with the captures of its requests. The destination derives
//! its rollups, facets and clients from the rows as the writer does, and a
//! request or capture already there (same id) adds nothing: a copy run
//! twice, or resumed from its checkpoint after an interruption, counts
//! every request once and keeps one capture of each.

use super::record::{CaptureRecord, RequestRecord};
use super::store::{RequestDetail, RequestFilter, Store, StoreError};
use super::{CountTable, Record};

/// Requests read and written per transaction.
const PAGE: u32 = 500;

/// How far a copy has come.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// Requests copied so far, this run and the runs it resumes.
    pub copied: u64,
    /// Requests on record in the source when the copy began.
    pub total: u64,
    /// Where the next page starts: kept by the caller to resume from.
    pub cursor: Option<String>,
}

/// Copies every request in `from` older than `resume` (all of them without
/// one) into `to`, telling `progress` after each page. `copied` counts the
/// requests a resumed copy had already done.
pub async fn copy(
    from: &Store,
    to: &Store,
    resume: Option<String>,
    copied: u64,
    mut progress: impl FnMut(&Progress),
) -> Result<Progress, StoreError> {
    let total = u64::try_from(from.count(CountTable::Requests).await?).unwrap_or(0);
    let mut at = Progress { copied, total, cursor: resume };
    loop {
        let filter = RequestFilter { cursor: at.cursor.clone(), limit: Some(PAGE), ..RequestFilter::default() };
        let page = from.requests(&filter).await?;
        let mut batch = Vec::with_capacity(page.requests.len());
        for summary in &page.requests {
            // A request retention removed meanwhile is simply not copied.
            if let Some(detail) = from.request(&summary.id).await? {
                batch.push(Record::Request(Box::new(RequestRecord::from(detail))));
                // After its request, in the same transaction.
                if let Some(stored) = from.capture(&summary.id).await? {
                    batch.push(Record::Capture(Box::new(CaptureRecord {
                        request_id: summary.id.clone(),
                        started_at_ms: summary.started_at,
                        replay_of: stored.replay_of,
                        data: stored.data,
                    })));
                }
            }
        }
        if !batch.is_empty() {
            to.write(&batch).await?;
        }
        at.copied += page.requests.len() as u64;
        at.cursor = page.next_cursor;
        progress(&at);
        if at.cursor.is_none() {
            return Ok(at);
        }
    }
}

impl From<RequestDetail> for RequestRecord {
    /// The record a request was written from, read back.
    fn from(d: RequestDetail) -> RequestRecord {
        let r = d.request;
        RequestRecord {
            id: r.id,
            correlation_id: r.correlation_id,
            started_at_ms: r.started_at,
            finished_at_ms: r.finished_at,
            user_agent: r.user_agent,
            endpoint: r.endpoint,
            model: r.model,
            streamed: r.streamed,
            outcome: r.outcome,
            status: r.status.and_then(|s| u16::try_from(s).ok()),
            provider: r.provider,
            provider_model: r.provider_model,
            fallback: r.fallback,
            duration_ms: r.duration_ms,
            ttft_ms: r.ttft_ms,
            usage: r.usage,
            cost_usd: r.cost_usd,
            error_code: r.error_code,
            error: r.error,
            request_body: d.request_body,
            response_body: d.response_body,
            attempts: d.attempt_list,
            translations: d.translations,
            cache: r.cache,
            saved_usd: r.saved_usd,
            dropped: d.dropped,
            instance: r.instance,
            member: r.member,
            session: r.session,
            turn: r.turn,
            trace_id: d.trace_id,
            device: r.device,
            routing: d.routing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ground::clock::now_ms;
    use crate::history::derived::tests::varied;
    use crate::history::pg::tests::{assert_derived_match_rows, TestDb};
    use crate::history::spend::tests::first_difference;
    use crate::history::store::Bucket;

    /// A SQLite history copied into PostgreSQL: every request once, with
    /// its attempts and as it was; the spend equal; a second run, and a run
    /// resumed from a checkpoint, change no count.
    #[tokio::test]
    async fn a_sqlite_history_copies_into_postgres_once_however_often_it_runs() {
        let dir = tempfile::tempdir().unwrap();
        let sqlite = Store::open(&dir.path().join("h.db")).await.unwrap();
        let records = varied(1_234, now_ms() - 3 * 86_400_000, 200_000);
        sqlite.write(&records).await.unwrap();
        // Every tenth request captured, one of them a replay of another.
        let mut captures: Vec<Record> = records
            .iter()
            .filter_map(|r| match r {
                Record::Request(r) => Some(r),
                Record::Event(_) | Record::Capture(_) => None,
            })
            .step_by(10)
            .map(|r| {
                Record::Capture(Box::new(CaptureRecord {
                    request_id: r.id.clone(),
                    started_at_ms: r.started_at_ms,
                    replay_of: None,
                    data: r.id.as_bytes().to_vec(),
                }))
            })
            .collect();
        let captured = captures.len() as i64;
        let replayed = match &captures[0] {
            Record::Capture(c) => c.request_id.clone(),
            Record::Request(_) | Record::Event(_) => unreachable!(),
        };
        if let Record::Capture(c) = &mut captures[3] {
            c.replay_of = Some(replayed.clone());
        }
        sqlite.write(&captures).await.unwrap();
        let db = TestDb::create().await;
        let pg = Store::open_configured(&dir.path().join("pg.db"), &db.config()).await.unwrap();

        // Interrupted after two pages, then resumed from its checkpoint.
        let mut checkpoint = None;
        let first = async {
            copy(&sqlite, &pg, None, 0, |p| {
                if p.copied == u64::from(2 * PAGE) {
                    checkpoint = Some(p.clone());
                }
            })
            .await
        };
        first.await.unwrap();
        let resumed = checkpoint.unwrap();
        let done = copy(&sqlite, &pg, resumed.cursor, resumed.copied, |_| {}).await.unwrap();
        assert_eq!((done.copied, done.total, done.cursor), (1_234, 1_234, None));
        // Again, whole: nothing changes.
        copy(&sqlite, &pg, None, 0, |_| {}).await.unwrap();

        assert_eq!(pg.count(CountTable::Requests).await.unwrap(), 1_234);
        assert_eq!(pg.count(CountTable::Captures).await.unwrap(), captured, "each capture once");
        assert_eq!(pg.count(CountTable::Attempts).await.unwrap(), sqlite.count(CountTable::Attempts).await.unwrap());
        assert_derived_match_rows(&pg).await;
        let since = now_ms() - 10 * 86_400_000;
        for bucket in [Bucket::Day, Bucket::Hour] {
            let (mut a, mut b) = (sqlite.spend(bucket, since).await.unwrap(), pg.spend(bucket, since).await.unwrap());
            for rows in [&mut a, &mut b] {
                rows.sort_by(|x, y| (&y.bucket, &x.provider, &x.model).cmp(&(&x.bucket, &y.provider, &y.model)));
            }
            let difference = first_difference(&a, &b);
            assert!(difference.is_none(), "{bucket:?}: {}", difference.unwrap_or_default());
        }
        let some = match &records[7] {
            Record::Request(r) => r.id.clone(),
            Record::Event(_) | Record::Capture(_) => unreachable!(),
        };
        let (a, b) = (sqlite.request(&some).await.unwrap().unwrap(), pg.request(&some).await.unwrap().unwrap());
        assert_eq!(serde_json::to_value(&a).unwrap(), serde_json::to_value(&b).unwrap());
        let first = match &captures[3] {
            Record::Capture(c) => c.request_id.clone(),
            Record::Request(_) | Record::Event(_) => unreachable!(),
        };
        let copied = pg.capture(&first).await.unwrap().unwrap();
        assert_eq!((copied.data, copied.replay_of), (first.as_bytes().to_vec(), Some(replayed.clone())), "as it was");
        assert_eq!(pg.replays(&replayed).await.unwrap(), [first], "the replay stays linked");
    }
}

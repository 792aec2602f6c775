//! The spend chart, summed here from the rollups rather than by SQL.
//!
//! A year of days is some thousands of rollup rows (a row per day,
//! provider, model and outcome). Grouped and formatted by SQLite through
//! the async pool, each row cost about 3 µs: the `strftime` per row, the
//! sort of the grouped rows, and the pool's copy of every value across its
//! worker thread. Read here on a connection of its own, straight off the
//! rollups' primary key, and summed in a map, the same rows cost a fraction
//! of that; the labels are formatted once per bucket.

use std::collections::HashMap;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};

use super::derived::Sums;
use super::store::{spend_pieces, Bucket, SpendRow};

/// The sums of one bucket, provider and model: its rollup rows added up,
/// and the requests among them that did not end ok.
#[derive(Debug, Default)]
struct Bucketed {
    sums: Sums,
    failed: i64,
}

const ROWS: &str = "SELECT start, provider, model, outcome <> 'ok', requests, fallbacks, input_tokens, \
                    output_tokens, cached_tokens, cost_usd, priced, saved_usd \
                    FROM rollups WHERE span = ?1 AND start >= ?2 AND start < ?3 AND provider <> ''";

/// Tokens and cost per `bucket`, provider and model since `since`, newest
/// bucket first and the costliest first within it.
pub(super) fn read(path: &Path, bucket: Bucket, since: i64) -> rusqlite::Result<Vec<SpendRow>> {
    let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX)?;
    let mut tally = Tally::new(bucket);
    let mut rows = conn.prepare(ROWS)?;
    for (piece, from, to) in spend_pieces(bucket, since) {
        let mut found = rows.query((piece, from, to))?;
        while let Some(row) = found.next()? {
            let rollup = Sums {
                requests: row.get(4)?,
                fallbacks: row.get(5)?,
                input_tokens: row.get(6)?,
                output_tokens: row.get(7)?,
                cached_tokens: row.get(8)?,
                cost_usd: row.get(9)?,
                priced: row.get(10)?,
                saved_usd: row.get(11)?,
            };
            let (provider, model) = (row.get_ref(1)?.as_str()?, row.get_ref(2)?.as_str()?);
            tally.add(row.get(0)?, provider, model, row.get(3)?, &rollup);
        }
    }
    Ok(tally.finish())
}

/// Rollup rows summed into a chart's rows: what every backend reads for
/// [`Store::spend`](super::Store::spend), whatever it reads the rows with.
#[derive(Debug)]
pub(super) struct Tally {
    bucket: Bucket,
    /// Provider and model pairs, few, so that a row costs no allocation.
    pairs: Vec<(String, String)>,
    buckets: HashMap<(i64, usize), Bucketed>,
}

impl Tally {
    pub(super) fn new(bucket: Bucket) -> Tally {
        Tally { bucket, pairs: Vec::new(), buckets: HashMap::new() }
    }

    /// A rollup row: its start, key, whether its outcome was not ok, and its sums.
    pub(super) fn add(&mut self, start: i64, provider: &str, model: &str, failed: bool, rollup: &Sums) {
        let pair = match self.pairs.iter().position(|(p, m)| p == provider && m == model) {
            Some(i) => i,
            None => {
                self.pairs.push((provider.to_string(), model.to_string()));
                self.pairs.len() - 1
            }
        };
        let span = self.bucket.span();
        let bucketed = self.buckets.entry((start - start.rem_euclid(span), pair)).or_default();
        bucketed.sums.add(rollup);
        if failed {
            bucketed.failed += rollup.requests;
        }
    }

    /// The chart's rows, newest bucket first and the costliest first within it.
    pub(super) fn finish(self) -> Vec<SpendRow> {
        let Tally { bucket, pairs, buckets } = self;
        let mut out: Vec<(i64, SpendRow)> = buckets
            .into_iter()
            .map(|((at, pair), Bucketed { sums: s, failed })| {
                let (provider, model) = pairs[pair].clone();
                let row = SpendRow {
                    bucket: String::new(),
                    provider,
                    model,
                    requests: s.requests,
                    failed,
                    fallbacks: s.fallbacks,
                    input_tokens: s.input_tokens,
                    output_tokens: s.output_tokens,
                    cached_tokens: s.cached_tokens,
                    cost_usd: (s.priced > 0).then_some(s.cost_usd),
                    saved_usd: s.saved_usd,
                };
                (at, row)
            })
            .collect();
        // Unpriced (null) cost sorts last, as SQL's descending order puts it.
        out.sort_by(|(a_at, a), (b_at, b)| {
            b_at.cmp(a_at)
                .then_with(|| {
                    b.cost_usd.unwrap_or(f64::NEG_INFINITY).total_cmp(&a.cost_usd.unwrap_or(f64::NEG_INFINITY))
                })
                .then_with(|| (&a.provider, &a.model).cmp(&(&b.provider, &b.model)))
        });
        // Rows of one bucket are together: its label is formatted once.
        let mut last: Option<(i64, String)> = None;
        out.into_iter()
            .map(|(at, mut row)| {
                row.bucket = match &last {
                    Some((was, text)) if *was == at => text.clone(),
                    _ => last.insert((at, label(at, bucket))).1.clone(),
                };
                row
            })
            .collect()
    }
}

/// A bucket's label in UTC, as the chart shows it (`2026-12-03`,
/// `2026-12-03T14:00Z`, `2026-12-03T14:05Z`).
fn label(at_ms: i64, bucket: Bucket) -> String {
    jiff::Timestamp::from_millisecond(at_ms).map(|t| t.strftime(bucket.format()).to_string()).unwrap_or_default()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::super::derived::tests::varied;
    use super::super::store::{Bucket, Store};
    use super::*;

    /// The chart as SQL computes it from the request rows themselves, not
    /// from the rollups: what the map must sum to, in the same order.
    fn from_rows(path: &Path, bucket: Bucket, since: i64) -> Vec<SpendRow> {
        let conn = Connection::open(path).unwrap();
        let sql = "SELECT strftime(?1, (started_at - started_at % ?2) / 1000, 'unixepoch'), provider,
                          COALESCE(provider_model, model, ''), COUNT(*), SUM(outcome <> 'ok'), SUM(fallback),
                          COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                          COALESCE(SUM(cached_tokens), 0), SUM(cost_usd), TOTAL(saved_usd)
                   FROM requests WHERE provider IS NOT NULL AND started_at >= ?3 - ?3 % 60000
                   GROUP BY 1, 2, 3 ORDER BY 1 DESC, 10 DESC, 2, 3";
        let mut statement = conn.prepare(sql).unwrap();
        let rows = statement.query_map((bucket.format(), bucket.span(), since), |r| {
            Ok(SpendRow {
                bucket: r.get(0)?,
                provider: r.get(1)?,
                model: r.get(2)?,
                requests: r.get(3)?,
                failed: r.get(4)?,
                fallbacks: r.get(5)?,
                input_tokens: r.get(6)?,
                output_tokens: r.get(7)?,
                cached_tokens: r.get(8)?,
                cost_usd: r.get(9)?,
                saved_usd: r.get(10)?,
            })
        });
        rows.unwrap().map(Result::unwrap).collect()
    }

    /// The first row where the two differ (sums of floats to 1e-12).
    pub(crate) fn first_difference(a: &[SpendRow], b: &[SpendRow]) -> Option<String> {
        let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
            (Some(x), Some(y)) => (x - y).abs() < 1e-12,
            (x, y) => x.is_none() && y.is_none(),
        };
        if a.len() != b.len() {
            return Some(format!("{} rows, not {}", a.len(), b.len()));
        }
        a.iter().zip(b).enumerate().find_map(|(i, (a, b))| {
            let same = (&a.bucket, &a.provider, &a.model) == (&b.bucket, &b.provider, &b.model)
                && [a.requests, a.failed, a.fallbacks, a.input_tokens, a.output_tokens, a.cached_tokens]
                    == [b.requests, b.failed, b.fallbacks, b.input_tokens, b.output_tokens, b.cached_tokens]
                && close(a.cost_usd, b.cost_usd)
                && close(Some(a.saved_usd), Some(b.saved_usd));
            (!same).then(|| format!("row {i}:\n{a:?}\n{b:?}"))
        })
    }

    #[tokio::test]
    async fn the_chart_sums_to_what_the_rows_say_for_every_bucket_and_start() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("h.db");
        let store = Store::open(&path).await.unwrap();
        // Several requests a minute, over three days from mid-afternoon.
        let start = 1_700_000_000_000 + 15 * 3_600_000 + 1234;
        store.write(&varied(6000, start, 43_000)).await.unwrap();
        let end = start + 6000 * 43_000;
        for bucket in [Bucket::Day, Bucket::Hour, Bucket::Minute] {
            for since in [start - 86_400_000, start + 7_777_777, end - 3_600_000 - 61_000, end - 90_000] {
                let (read, expected) = (read(&path, bucket, since).unwrap(), from_rows(&path, bucket, since));
                assert!(!expected.is_empty());
                // Newest bucket first and the costliest first within it;
                // costs that differ by rounding alone may come either way.
                for pair in read.windows(2) {
                    let cost = |r: &SpendRow| r.cost_usd.unwrap_or(f64::NEG_INFINITY);
                    assert!(
                        pair[0].bucket > pair[1].bucket
                            || (pair[0].bucket == pair[1].bucket && cost(&pair[0]) >= cost(&pair[1]) - 1e-12),
                        "{bucket:?} since {since}: out of order: {pair:?}"
                    );
                }
                let by_key = |rows: &mut Vec<SpendRow>| {
                    rows.sort_by(|a, b| (&b.bucket, &a.provider, &a.model).cmp(&(&a.bucket, &b.provider, &b.model)))
                };
                let (mut read, mut expected) = (read, expected);
                by_key(&mut read);
                by_key(&mut expected);
                let difference = first_difference(&read, &expected);
                assert!(difference.is_none(), "{bucket:?} since {since}: {}", difference.unwrap_or_default());
            }
        }
    }
}

use super::*;

const MINUTE: i64 = 60_000;
const NOW: i64 = 1_750_000_000_000;

fn lifetime(ttl_min: u64, stale_min: u64) -> Lifetime {
    Lifetime { ttl: Duration::from_secs(ttl_min * 60), stale: Duration::from_secs(stale_min * 60) }
}

fn key(n: u8) -> CacheKey {
    let mut k = [n; 32];
    k[31] = n.wrapping_mul(7);
    CacheKey(k)
}

fn entry(body: impl Into<Bytes>, created_at_ms: i64) -> Entry {
    Entry {
        endpoint: "/v1/chat/completions".into(),
        model: "gpt-4o-mini".into(),
        provider: Some("openai".into()),
        status: 200,
        content_type: "application/json".into(),
        form: Form::Json,
        body: body.into(),
        usage: Usage { input_tokens: Some(12), output_tokens: Some(3), cached_tokens: None, cache_write_tokens: None },
        cost_usd: Some(0.0002),
        created_at_ms,
    }
}

/// Bytes that do not compress, so an entry's stored size is about its length.
fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

async fn open(dir: &Path, limits: Limits) -> Store {
    Store::open(&dir.join("switchyard.cache.db"), limits, Arc::default()).await.unwrap()
}

fn rows(dir: &Path) -> i64 {
    let conn = Connection::open(dir.join("switchyard.cache.db")).unwrap();
    conn.query_row("SELECT COUNT(*) FROM entries", [], |r| r.get(0)).unwrap()
}

#[tokio::test]
async fn an_answer_stored_is_found_again_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    let body = br#"{"id":"chatcmpl-1","choices":[{"message":{"role":"assistant","content":"4"}}]}"#;
    assert_eq!(store.get(&key(1), NOW, lifetime(10, 60)).await, None);
    store.put(key(1), entry(&body[..], NOW));
    store.flush().await;
    let hit = store.get(&key(1), NOW + MINUTE, lifetime(10, 60)).await.unwrap();
    assert_eq!(hit.freshness, Freshness::Fresh);
    assert_eq!(hit.age, Duration::from_secs(60));
    assert_eq!(hit.entry, entry(&body[..], NOW));
    drop(store);

    let store = open(dir.path(), Limits::default()).await;
    let hit = store.get(&key(1), NOW + 2 * MINUTE, lifetime(10, 60)).await.unwrap();
    assert_eq!(&hit.entry.body[..], &body[..], "kept across the restart");
    assert_eq!(store.counters().snapshot().entries, 1);
    assert_eq!(store.get(&key(2), NOW, lifetime(10, 60)).await, None);
}

#[tokio::test]
async fn an_entry_is_fresh_for_its_ttl_then_stale_then_gone() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{}"[..], NOW));
    store.flush().await;
    let at = |minutes: i64| NOW + minutes * MINUTE;
    let fresh = store.get(&key(1), at(10), lifetime(10, 60)).await.unwrap();
    assert_eq!(fresh.freshness, Freshness::Fresh, "the ttl's last moment");
    let stale = store.get(&key(1), at(11), lifetime(10, 60)).await.unwrap();
    assert_eq!((stale.freshness, stale.age), (Freshness::Stale, Duration::from_secs(11 * 60)));
    assert!(store.get(&key(1), at(70), lifetime(10, 60)).await.is_some(), "ttl + stale");
    assert_eq!(store.get(&key(1), at(71), lifetime(10, 60)).await, None);
    assert_eq!(store.get(&key(1), at(11), lifetime(10, 0)).await, None, "no stale window");
}

#[tokio::test]
async fn a_damaged_row_is_skipped_and_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    let body = noise(4000, 1);
    store.put(key(1), entry(body.clone(), NOW));
    store.put(key(2), entry(body.clone(), NOW));
    store.put(key(3), entry(body, NOW));
    store.put(key(4), entry(&b"{}"[..], NOW));
    store.put(key(5), entry(&b"{\"answer\":42}"[..], NOW));
    store.flush().await;
    {
        let conn = Connection::open(dir.path().join("switchyard.cache.db")).unwrap();
        // Not zlib at all; cut short; a form this code does not know.
        conn.execute("UPDATE entries SET body = x'00ff00ff' WHERE key = ?1", [&key(1).0[..]]).unwrap();
        conn.execute("UPDATE entries SET body = substr(body, 1, length(body) / 2) WHERE key = ?1", [&key(2).0[..]])
            .unwrap();
        conn.execute("UPDATE entries SET form = 'xml' WHERE key = ?1", [&key(3).0[..]]).unwrap();
        // A short body, stored uncompressed: one byte changed, its length kept.
        conn.execute(
            "UPDATE entries SET body = CAST(replace(body, '42', '43') AS BLOB) WHERE key = ?1",
            [&key(5).0[..]],
        )
        .unwrap();
    }
    for n in [1, 2, 3, 5] {
        assert_eq!(store.get(&key(n), NOW, lifetime(10, 0)).await, None, "entry {n}");
    }
    assert!(store.get(&key(4), NOW, lifetime(10, 0)).await.is_some(), "the others still answer");
    store.flush().await;
    assert_eq!(rows(dir.path()), 1);
    let stats = store.counters().snapshot();
    assert_eq!((stats.corrupt, stats.entries), (4, 1));
}

/// Three 10 KB entries (a fourth does not fit), the oldest used since,
/// with a restart before the fourth if `restart`: the least recently used
/// goes. Returns the store and its folder.
async fn fill_use_and_overflow(restart: bool) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits { max_bytes: 35_000, max_entry_bytes: 20_000 };
    let mut store = open(dir.path(), limits).await;
    for n in 1..=3u8 {
        store.put(key(n), entry(noise(10_000, n.into()), NOW + i64::from(n)));
    }
    store.flush().await;
    // Entry 1 is the oldest but was just used: 2 is the least recently used.
    assert!(store.get(&key(1), NOW + 10, lifetime(10, 0)).await.is_some());
    store.flush().await;
    if restart {
        store.close().await;
        store = open(dir.path(), limits).await;
    }
    store.put(key(4), entry(noise(10_000, 4), NOW + 20));
    store.flush().await;
    assert_eq!(store.get(&key(2), NOW + 30, lifetime(10, 0)).await, None, "evicted");
    for n in [1, 3, 4] {
        assert!(store.get(&key(n), NOW + 30, lifetime(10, 0)).await.is_some(), "entry {n} kept");
    }
    (dir, store)
}

#[tokio::test]
async fn the_least_recently_used_entries_go_first_at_the_cap() {
    let (dir, store) = fill_use_and_overflow(false).await;
    let stats = store.counters().snapshot();
    assert_eq!((stats.evictions, stats.entries), (1, 3));
    assert!(stats.bytes <= 35_000 && stats.bytes > 30_000, "{}", stats.bytes);
    // Too large for one entry: not stored at all.
    store.put(key(5), entry(noise(20_001, 5), NOW));
    store.flush().await;
    assert_eq!(store.get(&key(5), NOW, lifetime(10, 0)).await, None);
    assert_eq!(rows(dir.path()), 3);
}

#[tokio::test]
async fn the_order_of_use_is_kept_across_a_restart() {
    fill_use_and_overflow(true).await;
}

/// Whether the cache's files hold `needle` anywhere, free pages included.
fn files_hold(dir: &Path, needle: &[u8]) -> bool {
    ["switchyard.cache.db", "switchyard.cache.db-wal"].iter().any(|name| {
        let bytes = std::fs::read(dir.join(name)).unwrap_or_default();
        bytes.windows(needle.len()).any(|w| w == needle)
    })
}

#[tokio::test]
async fn a_purge_deletes_every_answer_in_the_gateway_or_from_outside() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.cache.db");
    let store = open(dir.path(), Limits::default()).await;
    let secret = b"{\"content\":\"the launch code is 0000-SECRET-1234\"}";
    // Short, so stored as it is: the answer's own bytes must not survive a purge.
    let stored = secret.to_vec();
    store.put(key(1), entry(&secret[..], NOW));
    store.put(key(2), entry(&b"{}"[..], NOW));
    store.flush().await;
    assert!(files_hold(dir.path(), &stored), "the check can see a stored body");
    assert_eq!(store.purge().await.unwrap(), 2);
    assert_eq!(store.get(&key(1), NOW, lifetime(10, 60)).await, None);
    assert_eq!(store.counters().snapshot().entries, 0);
    assert!(!files_hold(dir.path(), &stored), "overwritten, not left in a free page");

    store.put(key(3), entry(&secret[..], NOW));
    store.flush().await;
    // `switchyard history purge` while the gateway runs: it misses from then on.
    assert_eq!(purge_file(&path).unwrap(), 1);
    assert_eq!(store.get(&key(3), NOW, lifetime(10, 60)).await, None);
    assert!(!files_hold(dir.path(), &stored));
    assert_eq!(purge_file(&dir.path().join("none.cache.db")).unwrap(), 0, "no cache yet");
    assert_eq!(rows(dir.path()), 0);
}

#[cfg(unix)]
#[tokio::test]
async fn the_cache_files_are_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{}"[..], NOW));
    store.flush().await;
    for name in ["switchyard.cache.db", "switchyard.cache.db-wal", "switchyard.cache.db-shm"] {
        let mode = std::fs::metadata(dir.path().join(name)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{name}");
    }
}

#[tokio::test]
async fn a_file_that_is_not_a_cache_is_made_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.cache.db");
    std::fs::write(&path, b"this is not a database, whatever its name says").unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{}"[..], NOW));
    store.flush().await;
    assert!(store.get(&key(1), NOW, lifetime(1, 0)).await.is_some());
    drop(store);
    // Another schema version: dropped and made again.
    Connection::open(&path).unwrap().pragma_update(None, "user_version", 99).unwrap();
    let store = open(dir.path(), Limits::default()).await;
    assert_eq!(store.get(&key(1), NOW, lifetime(1, 0)).await, None);
    assert_eq!(rows(dir.path()), 0);
}

#[test]
fn the_cache_file_sits_beside_the_history() {
    assert_eq!(path_beside(Path::new("/d/switchyard.db")), Path::new("/d/switchyard.cache.db"));
}

#[tokio::test]
async fn stores_are_written_after_the_linger_without_a_flush() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{\"a\":1}"[..], NOW));
    store.put(key(2), entry(&b"{\"b\":2}"[..], NOW));
    // Lingering, not parked for good: both land in one transaction soon after.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while store.counters().stores.load(std::sync::atomic::Ordering::Relaxed) < 2 {
        assert!(std::time::Instant::now() < deadline, "the writer never wrote without a flush");
        tokio::time::sleep(LINGER).await;
    }
    let first = store.get(&key(1), NOW, lifetime(10, 60)).await.expect("written with the second");
    assert_eq!(&first.entry.body[..], b"{\"a\":1}", "a reused compressor starts each body afresh");
}

#[tokio::test]
async fn a_refreshed_answer_replaces_its_entry_and_its_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(noise(3000, 1), NOW));
    store.put(key(2), entry(noise(1000, 2), NOW));
    store.flush().await;
    let before = store.counters().snapshot();
    assert_eq!(before.entries, 2);
    // The same question stored again (`x-switchyard-cache: refresh`), with a longer answer.
    store.put(key(1), entry(noise(5000, 3), NOW + MINUTE));
    store.flush().await;
    let after = store.counters().snapshot();
    assert_eq!(after.entries, 2, "replaced, not added");
    assert_eq!(rows(dir.path()), 2);
    assert_eq!(after.bytes - before.bytes, 2000, "the new body's size less the old one's");
    let hit = store.get(&key(1), NOW + MINUTE, lifetime(10, 60)).await.unwrap();
    assert_eq!(&hit.entry.body[..], &noise(5000, 3)[..]);
    drop(store);
    // And the same figure when counted afresh from the file.
    let store = open(dir.path(), Limits::default()).await;
    assert_eq!(store.counters().snapshot().bytes, after.bytes);
}

#[tokio::test]
async fn a_question_stored_twice_in_one_batch_keeps_one_row_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{\"first\":1}"[..], NOW));
    store.put(key(1), entry(&b"{\"second\":2}"[..], NOW + 1));
    store.flush().await;
    assert_eq!(rows(dir.path()), 1);
    assert_eq!(store.counters().snapshot().entries, 1);
    let hit = store.get(&key(1), NOW + 1, lifetime(10, 60)).await.unwrap();
    assert_eq!(&hit.entry.body[..], b"{\"second\":2}");
}

/// Two keys whose first eight bytes (the in-memory index's prefix) agree.
fn twins() -> (CacheKey, CacheKey) {
    let a = CacheKey([9; 32]);
    let mut b = [9; 32];
    b[20] = 1;
    (a, CacheKey(b))
}

#[tokio::test]
async fn keys_that_share_a_prefix_never_answer_for_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = twins();
    assert_eq!(a.prefix(), b.prefix());
    let store = open(dir.path(), Limits::default()).await;
    store.put(a, entry(&b"{\"for\":\"a\"}"[..], NOW));
    store.flush().await;
    store.put(b, entry(&b"{\"for\":\"b\"}"[..], NOW + 1));
    store.flush().await;
    // The index finds b's row for both: a misses rather than get b's answer.
    assert_eq!(store.get(&a, NOW + 1, lifetime(10, 60)).await, None);
    assert_eq!(&store.get(&b, NOW + 1, lifetime(10, 60)).await.unwrap().entry.body[..], b"{\"for\":\"b\"}");
    assert_eq!(rows(dir.path()), 2, "a's row is not b's to delete");
    drop(store);
    let store = open(dir.path(), Limits::default()).await;
    assert_eq!(store.get(&a, NOW + 1, lifetime(10, 60)).await, None, "after a restart too");
    assert!(store.get(&b, NOW + 1, lifetime(10, 60)).await.is_some());
}

#[tokio::test]
async fn a_row_id_used_again_after_a_purge_from_outside_is_not_found_for_the_old_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("switchyard.cache.db");
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{\"old\":1}"[..], NOW));
    store.flush().await;
    let id_of = |k: CacheKey| -> i64 {
        let conn = Connection::open(&path).unwrap();
        conn.query_row("SELECT id FROM entries WHERE key = ?1", [&k.0[..]], |r| r.get(0)).unwrap()
    };
    let old_id = id_of(key(1));
    assert_eq!(purge_file(&path).unwrap(), 1);
    // The emptied table gives the next row the same id; the index still
    // points key 1 at it.
    store.put(key(2), entry(&b"{\"new\":2}"[..], NOW));
    store.flush().await;
    assert_eq!(id_of(key(2)), old_id, "the case under test: an id used again");
    assert_eq!(store.get(&key(1), NOW, lifetime(10, 60)).await, None);
    assert_eq!(&store.get(&key(2), NOW, lifetime(10, 60)).await.unwrap().entry.body[..], b"{\"new\":2}");
}

#[tokio::test]
async fn rows_the_index_cannot_find_are_evicted_too() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits { max_bytes: 21_000, max_entry_bytes: 20_000 };
    let (a, b) = twins();
    let store = open(dir.path(), limits).await;
    // a's row stays, unfound, once b takes the prefix's slot; evicting
    // every entry the index finds (b) is not enough to get under the cap.
    store.put(a, entry(noise(19_000, 1), NOW));
    store.flush().await;
    store.put(b, entry(noise(2_000, 2), NOW + 1));
    store.flush().await;
    let stats = store.counters().snapshot();
    assert!(stats.bytes <= 18_900, "under the cap's 90%: {}", stats.bytes);
    let conn = Connection::open(dir.path().join("switchyard.cache.db")).unwrap();
    let stored: i64 = conn.query_row("SELECT COALESCE(SUM(size), 0) FROM entries", [], |r| r.get(0)).unwrap();
    assert_eq!(stats.bytes, stored as u64, "the count is the rows'");
    assert_eq!(store.get(&a, NOW + 2, lifetime(10, 0)).await, None);
}

#[tokio::test]
async fn after_a_purge_from_outside_the_cap_counts_the_rows_that_are_there() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits { max_bytes: 35_000, max_entry_bytes: 20_000 };
    let store = open(dir.path(), limits).await;
    for n in 1..=3u8 {
        store.put(key(n), entry(noise(10_000, n.into()), NOW + i64::from(n)));
    }
    store.flush().await;
    assert_eq!(purge_file(&dir.path().join("switchyard.cache.db")).unwrap(), 3);
    // The gateway still counts 30 KB it no longer has: the next answer
    // takes it over the cap, and must not be the one evicted for it.
    store.put(key(4), entry(noise(10_000, 4), NOW + 20));
    store.flush().await;
    assert!(store.get(&key(4), NOW + 30, lifetime(10, 0)).await.is_some(), "the new answer kept");
    assert_eq!(rows(dir.path()), 1);
    let stats = store.counters().snapshot();
    assert!(stats.bytes > 10_000 && stats.bytes < 11_000, "counted again from the rows: {}", stats.bytes);
}

#[tokio::test]
async fn an_answer_whose_write_is_dropped_leaves_nothing_in_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    // Far more than the queue holds, faster than the writer takes them.
    for n in 0..20_000u32 {
        let mut k = [0u8; 32];
        k[..4].copy_from_slice(&n.to_le_bytes());
        store.put(CacheKey(k), entry(&b"{}"[..], NOW));
    }
    store.flush().await;
    let stats = store.counters().snapshot();
    assert!(stats.dropped_writes > 0, "the case under test: a full queue");
    let index = store.inner.index.lock();
    assert_eq!(index.len() as u64, stats.entries, "a slot for each answer written, and none for the dropped");
    assert!(index.values().all(|s| s.row.is_some()));
    assert_eq!(rows(dir.path()) as u64, stats.entries);
}

#[tokio::test]
async fn an_answer_is_found_the_moment_it_is_stored_before_it_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path(), Limits::default()).await;
    store.put(key(1), entry(&b"{\"a\":1}"[..], NOW));
    // Before the writer's linger is over: found all the same, and fresh.
    let hit = store.get(&key(1), NOW + 1000, lifetime(10, 60)).await.expect("found while waiting to be written");
    assert_eq!((&hit.entry.body[..], hit.freshness), (&b"{\"a\":1}"[..], Freshness::Fresh));
    assert_eq!(hit.age, Duration::from_secs(1));
    assert!(store.get(&key(2), NOW, lifetime(10, 60)).await.is_none());
    // Past its lifetime it is not found, waiting or not.
    assert!(store.get(&key(1), NOW + 71 * 60_000, lifetime(10, 60)).await.is_none());
    store.flush().await;
    let written = store.get(&key(1), NOW + 1000, lifetime(10, 60)).await.expect("found once written");
    assert_eq!(&written.entry.body[..], b"{\"a\":1}");
    // A purge takes the waiting ones too.
    store.put(key(3), entry(&b"{\"c\":3}"[..], NOW));
    store.purge().await.unwrap();
    assert!(store.get(&key(3), NOW, lifetime(10, 60)).await.is_none());
}

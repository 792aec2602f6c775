//! What a team's instance reads back from Redis (`switchyard_team::decode`):
//! the change stream's announcements, the event stream's entries, the
//! shared cache's answers and the roll call's hashes, all of which anyone
//! who can write to Redis can shape.
//!
//! Input: one byte that picks what is read, then its bytes: an
//! announcement's payload; an event entry's or a roll-call hash's fields
//! as `field NUL value NUL ...` (as `XREAD` and `HGETALL` give them); a
//! cached answer as stored; or a RESP reply (an `XREAD` reply, or the
//! cache fill script's), parsed by the `redis` crate first.
//! Checked: nothing panics; whatever is accepted is within the bounds
//! `decode` names (names, reasons, durations, times, counts, sizes), and
//! an accepted announcement or cached answer encodes back to itself; this
//! instance's own entries are never taken for another's.
#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_core::cache::{shared, Entry};
use switchyard_core::team::{Change, Shared};
use switchyard_core::telemetry::GatewayEvent;
use switchyard_team::decode::{self, *};

const OWN: &str = "0197a5c0-0000-7000-8000-000000000001";
const NOW: i64 = 1_750_000_000_000;

fn text_ok(s: &str, max: usize) {
    assert!(s.len() <= max, "{} bytes over {max}", s.len());
}

fn name_ok(s: &str, max: usize) {
    text_ok(s, max);
    assert!(!s.is_empty() && !s.chars().any(char::is_control));
}

fn announcement(payload: &[u8]) {
    let Ok(Some(a)) = decode::announcement(OWN, payload) else { return };
    assert!(payload.len() <= MAX_ANNOUNCEMENT_BYTES);
    assert_ne!(a.id, OWN, "this instance's own is not heard");
    name_ok(&a.by, MAX_NAME);
    name_ok(&a.id, MAX_ID);
    name_ok(a.change.provider(), MAX_PROVIDER);
    match &a.change {
        Change::BreakerTripped { for_ms, reason, .. } => {
            assert!(*for_ms <= MAX_FOR_MS);
            text_ok(reason, MAX_REASON);
        }
        Change::BreakerClosed { reason, .. } => text_ok(reason, MAX_REASON),
        Change::Cooling { key, for_ms, .. } => {
            assert!(*for_ms <= MAX_FOR_MS);
            if let Some(key) = key {
                name_ok(key, MAX_KEY);
            }
        }
        Change::Revoked { key, reason, .. } => {
            name_ok(key, MAX_KEY);
            text_ok(reason, MAX_REASON);
        }
        Change::BreakerForced { .. } | Change::Toggled { .. } => {}
    }
    let again = serde_json::to_vec(&a).unwrap();
    assert_eq!(decode::announcement(OWN, &again), Ok(Some(a)), "encodes back to itself");
}

/// `field NUL value NUL ...`; an odd last piece is a field without a value, left out.
fn pairs(bytes: &[u8]) -> Vec<(&[u8], &[u8])> {
    let pieces: Vec<&[u8]> = bytes.split(|b| *b == 0).collect();
    pieces.chunks_exact(2).map(|kv| (kv[0], kv[1])).collect()
}

fn event(fields: &[(&[u8], &[u8])]) {
    match decode::event(OWN, fields) {
        Ok(Some(heard)) => {
            assert!(fields.len() <= MAX_FIELDS);
            assert_ne!(heard.id, OWN);
            name_ok(&heard.id, MAX_ID);
            name_ok(&heard.name, MAX_NAME);
            assert!((0..=MAX_UNIX_MS).contains(&heard.at_ms));
            if let GatewayEvent::RequestFinished { request } = &heard.event {
                if let Some(session) = &request.session {
                    name_ok(session, switchyard_core::session::MAX_LEN);
                }
            }
        }
        Ok(None) => {
            let own = fields.iter().any(|(k, v)| *k == b"i" && *v == OWN.as_bytes());
            assert!(own, "only this instance's own is passed over unread");
        }
        Err(_) => {}
    }
}

fn cache_entry(bytes: &[u8]) {
    let Ok(entry) = decode::cache_entry(bytes, NOW) else { return };
    assert!(bytes.len() <= MAX_ENTRY_BYTES && entry.body.len() <= shared::MAX_SHARED_BYTES);
    assert!((200..=299).contains(&entry.status));
    let usage = &entry.usage;
    for n in [usage.input_tokens, usage.output_tokens, usage.cached_tokens].into_iter().flatten() {
        assert!(n <= MAX_TOKENS);
    }
    assert!(entry.cost_usd.is_none_or(|c| (0.0..=MAX_COST_USD).contains(&c)));
    assert!((0..=NOW + MAX_CLOCK_AHEAD_MS).contains(&entry.created_at_ms));
    assert!(!entry.body.trim_ascii().is_empty());
    let again = shared::encode(&entry).expect("an accepted answer is small enough to share");
    let back = decode::cache_entry(&again, NOW).expect("encodes back to an accepted answer");
    // serde_json reads a float to within an ULP or so, not exactly (its
    // `float_roundtrip` is off): `0.23333333333333334`, which it writes for
    // what it read, reads back as `...36`. The cost is compared as a number.
    let close = match (back.cost_usd, entry.cost_usd) {
        (Some(a), Some(b)) => (a - b).abs() <= b.abs() * 1e-15,
        (a, b) => a == b,
    };
    assert!(close, "the cost encodes back to itself: {:?} then {:?}", entry.cost_usd, back.cost_usd);
    assert_eq!(Entry { cost_usd: None, ..back }, Entry { cost_usd: None, ..entry }, "encodes back to itself");
}

fn member(fields: &[(&[u8], &[u8])]) {
    let Ok(Some(m)) = decode::member(None, fields) else { return };
    name_ok(&m.name, MAX_NAME);
    name_ok(&m.id, MAX_ID);
    text_ok(&m.version, MAX_VERSION);
    text_ok(&m.address, MAX_ADDRESS);
    assert!((0..=MAX_UNIX_MS).contains(&m.started_at) && (0..=MAX_UNIX_MS).contains(&m.seen_at));
    assert!(m.requests <= MAX_REQUESTS);
    assert!(decode::member(Some(&m.id), fields).is_ok(), "listed under its own id");
    let other = format!("{}-", m.id);
    assert_eq!(decode::member(Some(&other), fields).map_err(|d| d.why), Err(Why::NotItsId));
}

fn reply(bytes: &[u8]) {
    let Ok(value) = redis::parse_redis_value(bytes) else { return };
    if let Some(entries) = decode::stream_entries(&value) {
        for entry in entries.iter().filter_map(|e| e.fields.as_ref()) {
            event(entry);
        }
    }
    match decode::cache_fill(&value, "token".into(), NOW) {
        Ok(Shared::Found(entry)) => assert!(decode::cache_entry(&entry, NOW).is_ok()),
        Ok(Shared::Fill(token)) => assert_eq!(token, "token"),
        Ok(Shared::Filling) => {}
        Ok(Shared::Unreachable) => panic!("a reply is an answer or dropped"),
        Err(_) => {}
    }
}

fuzz_target!(|data: &[u8]| {
    let [what, bytes @ ..] = data else { return };
    match what % 5 {
        0 => announcement(bytes),
        1 => event(&pairs(bytes)),
        2 => cache_entry(bytes),
        3 => member(&pairs(bytes)),
        _ => reply(bytes),
    }
});

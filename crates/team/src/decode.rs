//! What this instance accepts from Redis.
//!
//! Redis is shared by every instance of the team, and by anyone else who
//! can write to it: what comes back from it is read as untrusted input.
//! Four things are read back, each by one function here: the change
//! stream's [`announcement`]s (pub/sub), the other instances' events on
//! the team's stream ([`stream_entries`], then [`event`]), the answers the
//! response cache shares ([`cache_fill`], [`cache_entry`]) and the roll
//! call's [`member`] hashes.
//!
//! Each is a pure function, bytes in and a value or a [`Dropped`] out,
//! that never panics. An entry is dropped whole (never half used) when it
//! is not what an instance of this version writes: not UTF-8 where text is
//! written, larger than the bounds below, a number out of range, a variant
//! this version does not know, JSON nested beyond `serde_json`'s limit of
//! 128, a field given twice, a cached answer whose bytes do not read back
//! as an answer. The caller logs it once with [`report`], which names what
//! was dropped and why, never its content (an event or a refusal's reason
//! may quote a provider's error text), and holds back repeats.
//!
//! Valid input decodes exactly as it did before these checks: the bounds
//! sit well above what an instance writes.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use redis::Value;
use serde::{Deserialize, Serialize};
use switchyard_core::cache::shared::{self, MAX_SHARED_BYTES};
use switchyard_core::cache::{Entry, Form};
use switchyard_core::team::{Change, Member, Shared};
use switchyard_core::telemetry::GatewayEvent;
use tracing::warn;

/// An instance's name: a configured one is at most 64 bytes, a default
/// one a host name (at most 253) with `:` and a port.
pub const MAX_NAME: usize = 320;
/// An instance's id: a UUID (36 bytes) in every version so far.
pub const MAX_ID: usize = 64;
/// The crate version an instance reports (`0.1.0`, a pre-release tag).
pub const MAX_VERSION: usize = 64;
/// The address an instance listens on: the longest socket address
/// written out (IPv6 with a zone and a port) is under 64 bytes.
pub const MAX_ADDRESS: usize = 128;
/// A provider's name, as configured.
pub const MAX_PROVIDER: usize = 256;
/// A key's fingerprint: 32 hex digits.
pub const MAX_KEY: usize = 64;
/// A breaker's or a refusal's reason: the longest an instance writes is a
/// status line and a provider's error text cut to 300 characters (at most
/// 4 bytes each).
pub const MAX_REASON: usize = 4096;
/// The longest a breaker stays open or a provider cools down on another
/// instance's word: a day-long quota's `Retry-After` fits, a wait of years
/// (which would keep a provider out for good) does not.
pub const MAX_FOR_MS: u64 = 7 * 24 * 3600 * 1000;
/// An announcement's JSON: its strings at their bounds with every
/// character escaped (`\u0000`, 6 bytes) come to under 29 KiB.
pub const MAX_ANNOUNCEMENT_BYTES: usize = 32 * 1024;
/// An event's JSON: an instance's are a few hundred bytes (a request's
/// brief, a reason cut to 300 characters); the live feed keeps 2048 of
/// them, so this bounds what the others' can take of its memory.
pub const MAX_EVENT_BYTES: usize = 16 * 1024;
/// Unix milliseconds at the end of the year 9999: later is no clock's
/// reading, and overflows the date arithmetic of the views.
pub const MAX_UNIX_MS: i64 = 253_402_300_799_999;
/// Requests an instance served: a JavaScript number (the dashboard's)
/// holds integers up to 2^53 - 1 exactly.
pub const MAX_REQUESTS: u64 = (1 << 53) - 1;
/// A roll-call hash or an event-stream entry has a handful of fields.
pub const MAX_FIELDS: usize = 32;
/// A cached answer's particulars (the JSON line before its body): a few
/// hundred bytes with a model name of any sane length. (One whose model
/// name runs to kilobytes is a miss on the other instances.)
pub const MAX_HEAD_BYTES: usize = 4096;
/// A cached answer whole: its body at most [`MAX_SHARED_BYTES`] (the core
/// shares no larger one) and its particulars.
pub const MAX_ENTRY_BYTES: usize = MAX_SHARED_BYTES + MAX_HEAD_BYTES;
/// Tokens in one answer's usage: a thousand times the largest context
/// window there is; a count beyond it only skews the savings counted.
pub const MAX_TOKENS: u64 = 1_000_000_000;
/// What one answer may have cost: more than any answer costs at any
/// price list's rates; the savings are counted in micro-dollars.
pub const MAX_COST_USD: f64 = 1_000_000.0;
/// How far ahead of this instance's clock another's may be when it stores
/// an answer: an answer is fresh for its TTL from its creation, so one
/// "created" in the future would be fresh here for longer than the TTL.
pub const MAX_CLOCK_AHEAD_MS: i64 = 5 * 60 * 1000;
/// How often [`report`] logs dropped entries of one kind at most.
pub const REPORT_EVERY: Duration = Duration::from_secs(10);

/// What was read from Redis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A change announced on the channel.
    Announcement,
    /// An entry of the team's event stream.
    Event,
    /// A cached answer, or the fill script's reply around it.
    CacheEntry,
    /// A roll-call hash.
    Member,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::Announcement, Kind::Event, Kind::CacheEntry, Kind::Member];

    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Announcement => "an announcement",
            Kind::Event => "an event",
            Kind::CacheEntry => "a cached answer",
            Kind::Member => "a roll-call entry",
        }
    }
}

/// Why an entry was dropped. Names fields, never their content.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Why {
    #[error("its {field} is {len} bytes, over {max}")]
    TooLarge { field: &'static str, len: usize, max: usize },
    #[error("its {field} is not UTF-8")]
    NotUtf8 { field: &'static str },
    #[error("it has no {field}")]
    Missing { field: &'static str },
    #[error("its {field} is given twice")]
    Twice { field: &'static str },
    #[error("its {field} is empty or holds control characters")]
    BadText { field: &'static str },
    #[error("its {field} is not a number in range")]
    OutOfRange { field: &'static str },
    #[error("it is not JSON this version reads ({category} error at column {column})")]
    Json { category: &'static str, column: usize },
    #[error("it is not in the form this version writes")]
    Form,
    #[error("its id is not the one the roll call lists")]
    NotItsId,
}

/// An entry read from Redis and dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{} was dropped: {why}", .kind.as_str())]
pub struct Dropped {
    pub kind: Kind,
    pub why: Why,
}

/// Entries of one kind dropped since its last line, and when that was
/// (ms since [`epoch`], plus one: 0 is "never").
#[derive(Debug)]
struct Held {
    last: AtomicU64,
    since: AtomicU64,
}

static HELD: [Held; 4] = [const { Held { last: AtomicU64::new(0), since: AtomicU64::new(0) } }; 4];

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// Logs `dropped` with one `warn!` line, at most one per kind every
/// [`REPORT_EVERY`]; the next line says how many were held back.
pub fn report(dropped: &Dropped) {
    let i = Kind::ALL.iter().position(|k| *k == dropped.kind).unwrap_or(0);
    let held = &HELD[i];
    let now = u64::try_from(epoch().elapsed().as_millis()).unwrap_or(u64::MAX - 1) + 1;
    let last = held.last.load(Ordering::Relaxed);
    let due = last == 0 || now.saturating_sub(last) >= REPORT_EVERY.as_millis() as u64;
    if !due || held.last.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err() {
        held.since.fetch_add(1, Ordering::Relaxed);
        return;
    }
    match held.since.swap(0, Ordering::Relaxed) {
        0 => warn!("team: {dropped}"),
        more => warn!("team: {dropped} ({more} more of its kind dropped since the last such line)"),
    }
}

fn drop_as(kind: Kind) -> impl Fn(Why) -> Dropped {
    move |why| Dropped { kind, why }
}

/// `bytes` as a name, an id, a provider or a key: UTF-8, not empty, at
/// most `max` bytes, no control characters (they would forge log lines).
fn name<'a>(field: &'static str, bytes: &'a [u8], max: usize) -> Result<&'a str, Why> {
    let s = text(field, bytes, max)?;
    if s.is_empty() || s.chars().any(char::is_control) {
        return Err(Why::BadText { field });
    }
    Ok(s)
}

/// `bytes` as free text (a reason): UTF-8, at most `max` bytes.
fn text<'a>(field: &'static str, bytes: &'a [u8], max: usize) -> Result<&'a str, Why> {
    if bytes.len() > max {
        return Err(Why::TooLarge { field, len: bytes.len(), max });
    }
    std::str::from_utf8(bytes).map_err(|_| Why::NotUtf8 { field })
}

fn json_error(e: &serde_json::Error) -> Why {
    use serde_json::error::Category;
    let category = match e.classify() {
        Category::Io => "io",
        Category::Syntax => "syntax",
        Category::Data => "data",
        Category::Eof => "end of input",
    };
    Why::Json { category, column: e.column() }
}

/// A whole number in `0..=max`, written as Redis and this crate write one.
fn number(field: &'static str, bytes: &[u8], max: u64) -> Result<u64, Why> {
    let out_of_range = Why::OutOfRange { field };
    // Digits only: `parse` also takes a leading `+`.
    if bytes.is_empty() || bytes.len() > 20 || !bytes.iter().all(u8::is_ascii_digit) {
        return Err(out_of_range);
    }
    let s = std::str::from_utf8(bytes).map_err(|_| out_of_range)?;
    s.parse::<u64>().ok().filter(|n| *n <= max).ok_or(out_of_range)
}

fn unix_ms(field: &'static str, bytes: &[u8]) -> Result<i64, Why> {
    let n = number(field, bytes, MAX_UNIX_MS as u64)?;
    i64::try_from(n).map_err(|_| Why::OutOfRange { field })
}

/// The fields `names` among `pairs` (a hash's or a stream entry's, as
/// Redis gives them), each at most once; others are ignored, as a newer
/// version may add some.
fn pick<'a, const N: usize>(
    pairs: &[(&'a [u8], &'a [u8])],
    names: [&'static str; N],
) -> Result<[Option<&'a [u8]>; N], Why> {
    if pairs.len() > MAX_FIELDS {
        return Err(Why::TooLarge { field: "list of fields", len: pairs.len(), max: MAX_FIELDS });
    }
    let mut out = [None; N];
    for (k, v) in pairs {
        if let Some(i) = names.iter().position(|n| n.as_bytes() == *k) {
            if out[i].replace(*v).is_some() {
                return Err(Why::Twice { field: names[i] });
            }
        }
    }
    Ok(out)
}

/// A change as announced on the channel: who made it (its name and id),
/// and what it is. The same JSON `sync::write` publishes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announced {
    pub by: String,
    pub id: String,
    pub change: Change,
}

/// An announcement heard on the change stream; `Ok(None)` for this
/// instance's own (`own_id`), which it has applied already.
pub fn announcement(own_id: &str, payload: &[u8]) -> Result<Option<Announced>, Dropped> {
    let drop = drop_as(Kind::Announcement);
    let text = text("payload", payload, MAX_ANNOUNCEMENT_BYTES).map_err(&drop)?;
    let a: Announced = serde_json::from_str(text).map_err(|e| drop(json_error(&e)))?;
    if a.id == own_id {
        return Ok(None);
    }
    name("by", a.by.as_bytes(), MAX_NAME).map_err(&drop)?;
    name("id", a.id.as_bytes(), MAX_ID).map_err(&drop)?;
    change(&a.change).map_err(&drop)?;
    Ok(Some(a))
}

/// Whether `change` is one an instance makes: its provider and key names,
/// its reason and its duration within their bounds.
fn change(change: &Change) -> Result<(), Why> {
    name("provider", change.provider().as_bytes(), MAX_PROVIDER)?;
    let for_ms = |for_ms: u64| if for_ms <= MAX_FOR_MS { Ok(()) } else { Err(Why::OutOfRange { field: "for_ms" }) };
    match change {
        Change::BreakerTripped { for_ms: ms, reason, .. } => {
            for_ms(*ms)?;
            text("reason", reason.as_bytes(), MAX_REASON)?;
        }
        Change::BreakerClosed { reason, .. } => {
            text("reason", reason.as_bytes(), MAX_REASON)?;
        }
        Change::Cooling { key, for_ms: ms, .. } => {
            for_ms(*ms)?;
            if let Some(key) = key {
                name("key", key.as_bytes(), MAX_KEY)?;
            }
        }
        Change::Revoked { key, reason, .. } => {
            name("key", key.as_bytes(), MAX_KEY)?;
            text("reason", reason.as_bytes(), MAX_REASON)?;
        }
        Change::BreakerForced { .. } | Change::Toggled { .. } => {}
    }
    Ok(())
}

/// An event another instance published, with who published it and when.
#[derive(Debug, Clone)]
pub struct Heard {
    pub id: String,
    pub name: String,
    pub at_ms: i64,
    pub event: GatewayEvent,
}

/// One entry of the team's event stream, from its fields as `XREAD` gives
/// them (`i`: the instance's id, `n`: its name, `a`: when, in Unix ms,
/// `e`: the event's JSON); `Ok(None)` for this instance's own (`own_id`),
/// which is not read further.
pub fn event(own_id: &str, fields: &[(&[u8], &[u8])]) -> Result<Option<Heard>, Dropped> {
    let drop = drop_as(Kind::Event);
    let [i, n, a, e] = pick(fields, ["i", "n", "a", "e"]).map_err(&drop)?;
    let id = i.ok_or(Why::Missing { field: "i" }).map_err(&drop)?;
    if id == own_id.as_bytes() {
        return Ok(None);
    }
    let id = name("i", id, MAX_ID).map_err(&drop)?;
    let instance = name("n", n.ok_or(Why::Missing { field: "n" }).map_err(&drop)?, MAX_NAME).map_err(&drop)?;
    let at_ms = unix_ms("a", a.ok_or(Why::Missing { field: "a" }).map_err(&drop)?).map_err(&drop)?;
    let json = text("e", e.ok_or(Why::Missing { field: "e" }).map_err(&drop)?, MAX_EVENT_BYTES).map_err(&drop)?;
    let event: GatewayEvent = serde_json::from_str(json).map_err(|e| drop(json_error(&e)))?;
    // A session steers the next turn of that session here: ids are cut
    // to the core's length wherever they are made.
    if let GatewayEvent::RequestFinished { request } = &event {
        if let Some(session) = &request.session {
            name("session", session.as_bytes(), switchyard_core::session::MAX_LEN).map_err(&drop)?;
        }
    }
    Ok(Some(Heard { id: id.to_owned(), name: instance.to_owned(), at_ms, event }))
}

/// One entry of an `XREAD` reply: its stream id (always readable, so the
/// reader moves past an entry it drops) and its fields, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamEntry<'a> {
    pub id: String,
    /// `None`: the entry's fields are not a list of pairs of strings.
    pub fields: Option<Vec<(&'a [u8], &'a [u8])>>,
}

/// The entries of an `XREAD` reply (RESP2 arrays or RESP3 maps), in
/// order, each with its fields as bytes: unlike the `redis` crate's
/// typed reply, a field that is not UTF-8 fails its entry alone, not the
/// whole read. `None`: the reply is not in the form `XREAD` answers.
pub fn stream_entries(reply: &Value) -> Option<Vec<StreamEntry<'_>>> {
    let streams: Vec<&Value> = match reply {
        Value::Nil => return Some(Vec::new()),
        Value::Array(streams) => {
            let mut entries = Vec::with_capacity(streams.len());
            for stream in streams {
                match stream {
                    Value::Array(pair) if pair.len() == 2 => entries.push(&pair[1]),
                    _ => return None,
                }
            }
            entries
        }
        Value::Map(streams) => streams.iter().map(|(_, entries)| entries).collect(),
        _ => return None,
    };
    let mut out = Vec::new();
    for entries in streams {
        let Value::Array(entries) = entries else { return None };
        for entry in entries {
            let Value::Array(parts) = entry else { return None };
            let (Some(id), fields) = (parts.first().and_then(bytes), parts.get(1)) else { return None };
            let id = std::str::from_utf8(id).ok()?.to_owned();
            out.push(StreamEntry { id, fields: fields.and_then(pairs) });
        }
    }
    Some(out)
}

/// A string reply's bytes.
fn bytes(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// A flat list of field, value, field, value (or a RESP3 map) as pairs.
fn pairs(v: &Value) -> Option<Vec<(&[u8], &[u8])>> {
    match v {
        Value::Array(flat) if flat.len() % 2 == 0 => {
            flat.chunks_exact(2).map(|kv| Some((bytes(&kv[0])?, bytes(&kv[1])?))).collect()
        }
        Value::Map(map) => map.iter().map(|(k, v)| Some((bytes(k)?, bytes(v)?))).collect(),
        _ => None,
    }
}

/// What the cache's fill script answered (see `scripts::CACHE_FILL`): an
/// entry another instance stored (checked by [`cache_entry`]; its bytes as
/// they came), the fill lock under `token`, or a wait.
pub fn cache_fill(answer: &Value, token: String, now_ms: i64) -> Result<Shared, Dropped> {
    let Value::Array(items) = answer else { return Err(Dropped { kind: Kind::CacheEntry, why: Why::Form }) };
    match items.as_slice() {
        [Value::Int(1), Value::BulkString(entry)] => {
            cache_entry(entry, now_ms)?;
            Ok(Shared::Found(entry.clone()))
        }
        [Value::Int(2)] => Ok(Shared::Fill(token)),
        [Value::Int(3)] => Ok(Shared::Filling),
        _ => Err(Dropped { kind: Kind::CacheEntry, why: Why::Form }),
    }
}

/// A cached answer another instance stored, as the core reads it back
/// ([`shared::decode`]), and only if it is an answer the core would have
/// stored: a success, a body whole in its form, counts and cost within
/// their bounds, created no later than [`MAX_CLOCK_AHEAD_MS`] after
/// `now_ms` (this instance's clock).
pub fn cache_entry(bytes: &[u8], now_ms: i64) -> Result<Entry, Dropped> {
    let drop = drop_as(Kind::CacheEntry);
    if bytes.len() > MAX_ENTRY_BYTES {
        return Err(drop(Why::TooLarge { field: "entry", len: bytes.len(), max: MAX_ENTRY_BYTES }));
    }
    let head = bytes.iter().position(|b| *b == b'\n').ok_or(drop(Why::Form))?;
    if head > MAX_HEAD_BYTES {
        return Err(drop(Why::TooLarge { field: "head", len: head, max: MAX_HEAD_BYTES }));
    }
    // Another version, damaged JSON, an unknown form, a body too large.
    let entry = shared::decode(bytes).ok_or(drop(Why::Form))?;
    if !(200..=299).contains(&entry.status) {
        return Err(drop(Why::OutOfRange { field: "status" }));
    }
    // As the core keeps them: a JSON answer is one object, a stream is
    // never empty.
    let body = entry.body.trim_ascii();
    let whole = match entry.form {
        Form::Json => body.first() == Some(&b'{') && body.last() == Some(&b'}'),
        Form::Sse => !body.is_empty(),
    };
    if !whole {
        return Err(drop(Why::Form));
    }
    let usage = &entry.usage;
    for (field, n) in [
        ("input_tokens", usage.input_tokens),
        ("output_tokens", usage.output_tokens),
        ("cached_tokens", usage.cached_tokens),
    ] {
        if n.is_some_and(|n| n > MAX_TOKENS) {
            return Err(drop(Why::OutOfRange { field }));
        }
    }
    if entry.cost_usd.is_some_and(|c| !(0.0..=MAX_COST_USD).contains(&c)) {
        return Err(drop(Why::OutOfRange { field: "cost_usd" }));
    }
    if entry.created_at_ms < 0 || entry.created_at_ms > now_ms.saturating_add(MAX_CLOCK_AHEAD_MS) {
        return Err(drop(Why::OutOfRange { field: "created_at_ms" }));
    }
    Ok(entry)
}

/// A member of the team as the roll call holds it (its hash's fields, as
/// `HGETALL` gives them). `listed` is the id the roll call lists it under,
/// when known (`sync::members` reads the hash by it): a hash that names
/// another id is dropped. `Ok(None)`: no
/// fields at all (the member left between the roll call and this read).
/// A field a version before this one did not write may be missing.
pub fn member(listed: Option<&str>, fields: &[(&[u8], &[u8])]) -> Result<Option<Member>, Dropped> {
    let drop = drop_as(Kind::Member);
    if fields.is_empty() {
        return Ok(None);
    }
    let [name_, id, started_at, version, address, requests, seen_at] =
        pick(fields, ["name", "id", "started_at", "version", "address", "requests", "seen_at"]).map_err(&drop)?;
    let name_ = name("name", name_.ok_or(Why::Missing { field: "name" }).map_err(&drop)?, MAX_NAME).map_err(&drop)?;
    let id = name("id", id.ok_or(Why::Missing { field: "id" }).map_err(&drop)?, MAX_ID).map_err(&drop)?;
    if listed.is_some_and(|l| l != id) {
        return Err(drop(Why::NotItsId));
    }
    let time = |field, v: Option<&[u8]>| v.map_or(Ok(0), |v| unix_ms(field, v)).map_err(&drop);
    let text_or_empty = |field, v: Option<&[u8]>, max| match v {
        None => Ok(String::new()),
        Some(v) => name(field, v, max).map(str::to_owned).map_err(&drop),
    };
    Ok(Some(Member {
        name: name_.to_owned(),
        id: id.to_owned(),
        started_at: time("started_at", started_at)?,
        version: text_or_empty("version", version, MAX_VERSION)?,
        address: text_or_empty("address", address, MAX_ADDRESS)?,
        requests: requests.map_or(Ok(0), |v| number("requests", v, MAX_REQUESTS)).map_err(&drop)?,
        seen_at: time("seen_at", seen_at)?,
    }))
}

#[cfg(test)]
mod tests {

    use switchyard_core::protocol::Usage;

    use super::*;

    const OWN: &str = "0197a5c0-0000-7000-8000-000000000001";
    const OTHER: &str = "0197a5c0-0000-7000-8000-000000000002";
    const NOW: i64 = 1_750_000_000_000;

    fn why<T: std::fmt::Debug>(r: Result<T, Dropped>) -> Why {
        r.expect_err("dropped").why
    }

    // --- announcements ---

    fn announced(change: Change) -> Vec<u8> {
        // What `sync::write` publishes.
        let a = crate::Announcement { by: "gw-2".into(), id: OTHER.into(), change };
        serde_json::to_vec(&a).unwrap()
    }

    fn every_change() -> Vec<Change> {
        vec![
            Change::BreakerTripped {
                provider: "openai".into(),
                for_ms: 30_000,
                reason: "5 failures".into(),
                local: true,
            },
            Change::BreakerClosed { provider: "openai".into(), reason: "2 probes succeeded".into() },
            Change::BreakerForced { provider: "openai".into(), open: true },
            Change::Cooling { provider: "openai".into(), key: Some("ab".repeat(16)), for_ms: 1500 },
            Change::Cooling { provider: "openai".into(), key: None, for_ms: MAX_FOR_MS },
            Change::Revoked { provider: "openai".into(), key: "cd".repeat(16), reason: "HTTP 401 é".into() },
            Change::Toggled { provider: "openai".into(), enabled: false },
        ]
    }

    #[test]
    fn every_change_an_instance_announces_is_heard_as_it_was_made() {
        for change in every_change() {
            let heard = announcement(OWN, &announced(change.clone())).unwrap().unwrap();
            assert_eq!(heard, Announced { by: "gw-2".into(), id: OTHER.into(), change });
        }
        let own = crate::Announcement { by: "gw-1".into(), id: OWN.into(), change: every_change().remove(0) };
        assert_eq!(announcement(OWN, &serde_json::to_vec(&own).unwrap()), Ok(None), "this instance's own");
        let newer =
            br#"{"by":"gw-2","id":"x","change":{"change":"toggled","provider":"p","enabled":true,"new":1},"v":2}"#;
        assert!(announcement(OWN, newer).unwrap().is_some(), "members a newer version adds are passed over");
    }

    #[test]
    fn a_malformed_or_hostile_announcement_is_dropped() {
        let tripped = |for_ms: &str, reason: &str| {
            format!(
                r#"{{"by":"gw-2","id":"x","change":{{"change":"breaker_tripped","provider":"p","for_ms":{for_ms},"reason":"{reason}","local":false}}}}"#
            )
            .into_bytes()
        };
        assert!(announcement(OWN, &tripped("1", "r")).unwrap().is_some());
        assert_eq!(why(announcement(OWN, b"\xff\xfe")), Why::NotUtf8 { field: "payload" });
        assert!(matches!(why(announcement(OWN, b"not json")), Why::Json { category: "syntax", .. }));
        assert!(matches!(why(announcement(OWN, b"")), Why::Json { category: "end of input", .. }));
        // Years of cool-down, and numbers no instance writes.
        assert_eq!(
            why(announcement(OWN, &tripped(&(MAX_FOR_MS + 1).to_string(), "r"))),
            Why::OutOfRange { field: "for_ms" }
        );
        assert_eq!(why(announcement(OWN, &tripped("18446744073709551615", "r"))), Why::OutOfRange { field: "for_ms" });
        for n in ["-1", "18446744073709551616", "1.5", "1e3", "\"1\"", "null"] {
            assert!(matches!(why(announcement(OWN, &tripped(n, "r"))), Why::Json { .. }), "{n}");
        }
        let unknown = br#"{"by":"gw-2","id":"x","change":{"change":"melted","provider":"p"}}"#;
        assert!(matches!(why(announcement(OWN, unknown)), Why::Json { category: "data", .. }));
        let long = "r".repeat(MAX_REASON + 1);
        assert_eq!(
            why(announcement(OWN, &tripped("1", &long))),
            Why::TooLarge { field: "reason", len: long.len(), max: MAX_REASON }
        );
        let huge = vec![b' '; MAX_ANNOUNCEMENT_BYTES + 1];
        assert!(matches!(why(announcement(OWN, &huge)), Why::TooLarge { field: "payload", .. }));
        // Names that would forge log lines, or name nothing.
        let forged = br#"{"by":"gw-2\nERROR all keys leaked","id":"x","change":{"change":"toggled","provider":"p","enabled":true}}"#;
        assert_eq!(why(announcement(OWN, forged)), Why::BadText { field: "by" });
        let nameless = br#"{"by":"gw-2","id":"x","change":{"change":"toggled","provider":"","enabled":true}}"#;
        assert_eq!(why(announcement(OWN, nameless)), Why::BadText { field: "provider" });
        let key = format!(
            r#"{{"by":"b","id":"x","change":{{"change":"cooling","provider":"p","key":"{}","for_ms":1}}}}"#,
            "k".repeat(65)
        );
        assert!(matches!(why(announcement(OWN, key.as_bytes())), Why::TooLarge { field: "key", .. }));
    }

    #[test]
    fn deep_nesting_is_refused_without_a_stack_overflow() {
        for open in ["[", "{\"a\":"] {
            let deep = format!(
                r#"{{"by":"b","id":"x","change":{{"change":"toggled","provider":"p","enabled":true,"x":{}}}}}"#,
                open.repeat(5000)
            );
            assert!(matches!(why(announcement(OWN, deep.as_bytes())), Why::Json { .. }));
            let event = format!(r#"{{"type":"config_reloaded","ok":true,"error":null,"x":{}}}"#, open.repeat(3000));
            assert!(matches!(why(event_of(OTHER, "gw-2", "1", &event)), Why::Json { .. }));
        }
    }

    // --- events ---

    fn event_of(id: &str, name: &str, at: &str, json: &str) -> Result<Option<Heard>, Dropped> {
        let fields = [("i", id), ("n", name), ("a", at), ("e", json)];
        let pairs: Vec<(&[u8], &[u8])> = fields.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        event(OWN, &pairs)
    }

    fn finished(session: &str) -> String {
        format!(
            r#"{{"type":"request_finished","request":{{"id":"r1","endpoint":"/v1/chat/completions","model":"m","provider":"openai","outcome":"ok","status":200,"duration_ms":12.5,"ttft_ms":null,"input_tokens":3,"output_tokens":4,"cost_usd":0.1,"cache":null,"attempts":["openai:200"],"member":null,"session":"{session}"}}}}"#
        )
    }

    #[test]
    fn another_instance_s_event_is_heard_and_this_one_s_is_not_read() {
        let toggled = GatewayEvent::ProviderToggled { provider: "openai".into(), enabled: false };
        let json = serde_json::to_string(&toggled).unwrap();
        let heard = event_of(OTHER, "gw-2", "1750000000000", &json).unwrap().unwrap();
        assert_eq!((heard.id.as_str(), heard.name.as_str(), heard.at_ms), (OTHER, "gw-2", 1_750_000_000_000));
        assert_eq!(serde_json::to_string(&heard.event).unwrap(), json);
        let heard = event_of(OTHER, "gw-2", "1", &finished("s-1")).unwrap().unwrap();
        assert!(
            matches!(heard.event, GatewayEvent::RequestFinished { request } if request.session.as_deref() == Some("s-1"))
        );
        assert!(event_of(OWN, "gw-1", "?", "not even json").unwrap().is_none(), "this instance's own");
        let extra: Vec<(&[u8], &[u8])> =
            vec![(b"i", OTHER.as_bytes()), (b"n", b"gw-2"), (b"a", b"5"), (b"e", json.as_bytes()), (b"\xff", b"new")];
        assert!(event(OWN, &extra).unwrap().is_some(), "fields a newer version adds are passed over");
    }

    #[test]
    fn a_malformed_or_hostile_event_is_dropped() {
        let ok = r#"{"type":"provider_toggled","provider":"p","enabled":true}"#;
        assert_eq!(why(event_of(OTHER, "gw-2", "-5", ok)), Why::OutOfRange { field: "a" });
        assert_eq!(why(event_of(OTHER, "gw-2", "+5", ok)), Why::OutOfRange { field: "a" });
        assert_eq!(why(event_of(OTHER, "gw-2", "", ok)), Why::OutOfRange { field: "a" });
        assert_eq!(why(event_of(OTHER, "gw-2", "99999999999999999999", ok)), Why::OutOfRange { field: "a" });
        assert_eq!(why(event_of(OTHER, "gw-2", &(MAX_UNIX_MS + 1).to_string(), ok)), Why::OutOfRange { field: "a" });
        assert_eq!(why(event_of(OTHER, "", "5", ok)), Why::BadText { field: "n" });
        assert_eq!(why(event_of(OTHER, "gw\u{1b}[31m", "5", ok)), Why::BadText { field: "n" });
        assert!(matches!(why(event_of(OTHER, &"n".repeat(MAX_NAME + 1), "5", ok)), Why::TooLarge { field: "n", .. }));
        assert!(matches!(
            why(event_of(OTHER, "gw-2", "5", r#"{"type":"exploded"}"#)),
            Why::Json { category: "data", .. }
        ));
        let big = format!(r#"{{"type":"config_reloaded","ok":false,"error":"{}"}}"#, "x".repeat(MAX_EVENT_BYTES));
        assert!(matches!(why(event_of(OTHER, "gw-2", "5", &big)), Why::TooLarge { field: "e", .. }));
        let session = "s".repeat(switchyard_core::session::MAX_LEN + 1);
        assert!(matches!(
            why(event_of(OTHER, "gw-2", "5", &finished(&session))),
            Why::TooLarge { field: "session", .. }
        ));
        let bytes = |pairs: &[(&'static [u8], &'static [u8])]| event(OWN, pairs).map(|h| h.map(|h| h.name));
        assert_eq!(why(bytes(&[(b"n", b"gw"), (b"a", b"5"), (b"e", b"{}")])), Why::Missing { field: "i" });
        assert_eq!(why(bytes(&[(b"i", b"x"), (b"a", b"5"), (b"e", b"{}")])), Why::Missing { field: "n" });
        assert_eq!(
            why(bytes(&[(b"i", b"x"), (b"n", b"\xc3"), (b"a", b"5"), (b"e", b"{}")])),
            Why::NotUtf8 { field: "n" }
        );
        assert_eq!(why(bytes(&[(b"i", b"x"), (b"n", b"gw"), (b"a", b"5")])), Why::Missing { field: "e" });
        assert_eq!(
            why(bytes(&[(b"i", b"x"), (b"i", OWN.as_bytes())])),
            Why::Twice { field: "i" },
            "no claiming to be ours"
        );
        let many: Vec<(&[u8], &[u8])> = vec![(b"x", b"y"); MAX_FIELDS + 1];
        assert!(matches!(why(event(OWN, &many)), Why::TooLarge { field: "list of fields", .. }));
    }

    fn xread(entries: Vec<Value>) -> Value {
        Value::Array(vec![Value::Array(vec![Value::BulkString(b"ns:events".to_vec()), Value::Array(entries)])])
    }

    fn entry(id: &str, fields: &[&[u8]]) -> Value {
        let fields = fields.iter().map(|f| Value::BulkString(f.to_vec())).collect();
        Value::Array(vec![Value::BulkString(id.as_bytes().to_vec()), Value::Array(fields)])
    }

    #[test]
    fn an_entry_the_redis_crate_cannot_type_fails_alone_not_the_whole_read() {
        let e = br#"{"type":"provider_toggled","provider":"p","enabled":true}"#;
        let reply = xread(vec![
            entry("1-0", &[b"i", OTHER.as_bytes(), b"n", b"gw-2", b"a", b"5", b"e", e]),
            // A field name that is not UTF-8: the typed reply fails whole.
            entry("2-0", &[b"\xff", b"x", b"i", OTHER.as_bytes(), b"n", b"gw-2", b"a", b"6", b"e", e]),
            entry("3-0", &[b"i", OTHER.as_bytes(), b"n", b"\xff", b"a", b"7", b"e", e]),
            Value::Array(vec![Value::BulkString(b"4-0".to_vec()), Value::Nil]),
        ]);
        assert!(
            redis::from_redis_value_ref::<redis::streams::StreamReadReply>(&reply).is_err(),
            "what fan_in read before: one such entry stalled the team's events on it"
        );
        let entries = stream_entries(&reply).unwrap();
        let ids: Vec<&str> = entries.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["1-0", "2-0", "3-0", "4-0"], "every entry passed, so none is read twice");
        let heard: Vec<Option<i64>> = entries
            .iter()
            .map(|e| e.fields.as_ref().and_then(|f| event(OWN, f).ok().flatten()).map(|h| h.at_ms))
            .collect();
        assert_eq!(heard, [Some(5), Some(6), None, None]);
    }

    #[test]
    fn an_xread_reply_is_read_in_either_protocol_and_nothing_else_is() {
        assert_eq!(stream_entries(&Value::Nil), Some(Vec::new()), "nothing new within the block");
        let resp3 = Value::Map(vec![(
            Value::BulkString(b"ns:events".to_vec()),
            Value::Array(vec![entry("1-0", &[b"i", b"x"])]),
        )]);
        let entries = stream_entries(&resp3).unwrap();
        assert_eq!(entries[0].fields, Some(vec![(&b"i"[..], &b"x"[..])]));
        let odd = xread(vec![entry("1-0", &[b"i"])]);
        assert_eq!(stream_entries(&odd).unwrap()[0].fields, None, "a field without a value");
        assert_eq!(stream_entries(&Value::Int(3)), None);
        assert_eq!(stream_entries(&xread(vec![Value::Int(1)])), None);
        assert_eq!(stream_entries(&Value::Array(vec![Value::Nil])), None);
    }

    // --- cached answers ---

    fn answer(form: Form, body: &[u8]) -> Entry {
        Entry {
            endpoint: "/v1/chat/completions".into(),
            model: "gpt-4o-mini".into(),
            provider: Some("openai".into()),
            status: 200,
            content_type: "application/json".into(),
            form,
            body: body.to_vec().into(),
            usage: Usage {
                input_tokens: Some(12),
                output_tokens: Some(3),
                cached_tokens: None,
                cache_write_tokens: None,
            },
            cost_usd: Some(0.25),
            created_at_ms: NOW - 1000,
        }
    }

    fn encoded(entry: &Entry) -> Vec<u8> {
        shared::encode(entry).unwrap()
    }

    /// A valid entry's encoding with its particulars' `from` replaced.
    fn tampered(from: &str, to: &str) -> Vec<u8> {
        let text = String::from_utf8(encoded(&answer(Form::Json, b"{\"id\":1}"))).unwrap();
        assert!(text.contains(from), "{from}");
        text.replacen(from, to, 1).into_bytes()
    }

    #[test]
    fn an_answer_another_instance_stored_is_found_as_it_was_stored() {
        let sse = answer(Form::Sse, b"data: {\"a\":\n\n1}\n\ndata: [DONE]\n\n");
        let json = answer(Form::Json, b" {\"id\":\"x\"}\n");
        for e in [sse, json] {
            assert_eq!(cache_entry(&encoded(&e), NOW), Ok(e.clone()));
            let found = Value::Array(vec![Value::Int(1), Value::BulkString(encoded(&e))]);
            assert_eq!(cache_fill(&found, "t".into(), NOW), Ok(Shared::Found(encoded(&e))));
        }
        let ahead = Entry { created_at_ms: NOW + MAX_CLOCK_AHEAD_MS, ..answer(Form::Json, b"{}") };
        assert!(cache_entry(&encoded(&ahead), NOW).is_ok(), "a clock a little ahead");
        let full = answer(Form::Sse, &vec![b'x'; MAX_SHARED_BYTES]);
        assert!(cache_entry(&encoded(&full), NOW).is_ok(), "the largest answer the core shares");
    }

    #[test]
    fn the_fill_script_answers_an_entry_a_lock_or_a_wait() {
        assert_eq!(cache_fill(&Value::Array(vec![Value::Int(2)]), "t".into(), NOW), Ok(Shared::Fill("t".into())));
        assert_eq!(cache_fill(&Value::Array(vec![Value::Int(3)]), "t".into(), NOW), Ok(Shared::Filling));
        for odd in [
            Value::Nil,
            Value::Array(vec![Value::Int(4)]),
            Value::Array(vec![Value::Int(1)]),
            Value::Array(vec![Value::Int(1), Value::Int(5)]),
        ] {
            assert_eq!(why(cache_fill(&odd, "t".into(), NOW)), Why::Form);
        }
        let damaged = Value::Array(vec![Value::Int(1), Value::BulkString(b"e".to_vec())]);
        assert_eq!(why(cache_fill(&damaged, "t".into(), NOW)), Why::Form);
    }

    #[test]
    fn a_cached_answer_that_does_not_read_back_as_one_is_dropped() {
        assert_eq!(why(cache_entry(b"no line at all", NOW)), Why::Form);
        assert_eq!(why(cache_entry(b"not json\n{}", NOW)), Why::Form);
        assert_eq!(why(cache_entry(&tampered("\"v\":1", "\"v\":9"), NOW)), Why::Form, "another version");
        assert_eq!(why(cache_entry(&tampered("\"form\":\"json\"", "\"form\":\"xml\""), NOW)), Why::Form);
        assert_eq!(why(cache_entry(&tampered("{\"id\":1}", "{\"id\":"), NOW)), Why::Form, "a body cut short");
        assert_eq!(why(cache_entry(&encoded(&answer(Form::Sse, b" \n")), NOW)), Why::Form, "an empty stream");
        assert_eq!(
            why(cache_entry(&tampered("\"status\":200", "\"status\":500"), NOW)),
            Why::OutOfRange { field: "status" }
        );
        assert_eq!(
            why(cache_entry(&tampered("\"status\":200", "\"status\":0"), NOW)),
            Why::OutOfRange { field: "status" }
        );
        assert_eq!(why(cache_entry(&tampered("\"status\":200", "\"status\":-1"), NOW)), Why::Form);
        assert_eq!(why(cache_entry(&tampered("\"status\":200", "\"status\":65536"), NOW)), Why::Form);
        let tokens = tampered("\"input_tokens\":12", "\"input_tokens\":18446744073709551615");
        assert_eq!(why(cache_entry(&tokens, NOW)), Why::OutOfRange { field: "input_tokens" });
        for cost in ["-0.5", "1e300", "1e6000"] {
            let bytes = tampered("\"cost_usd\":0.25", &format!("\"cost_usd\":{cost}"));
            assert!(matches!(why(cache_entry(&bytes, NOW)), Why::OutOfRange { .. } | Why::Form), "{cost}");
        }
        let future = Entry { created_at_ms: NOW + MAX_CLOCK_AHEAD_MS + 1, ..answer(Form::Json, b"{}") };
        assert_eq!(
            why(cache_entry(&encoded(&future), NOW)),
            Why::OutOfRange { field: "created_at_ms" },
            "fresh for ever"
        );
        let before = Entry { created_at_ms: -1, ..answer(Form::Json, b"{}") };
        assert_eq!(why(cache_entry(&encoded(&before), NOW)), Why::OutOfRange { field: "created_at_ms" });
        let head = Entry { model: "m".repeat(MAX_HEAD_BYTES), ..answer(Form::Json, b"{}") };
        assert!(matches!(why(cache_entry(&encoded(&head), NOW)), Why::TooLarge { field: "head", .. }));
        let mut huge = encoded(&answer(Form::Sse, b"x"));
        huge.resize(MAX_ENTRY_BYTES + 1, b'x');
        assert!(matches!(why(cache_entry(&huge, NOW)), Why::TooLarge { field: "entry", .. }));
        // The body's length is what follows the line, whatever a member says.
        let lies = tampered("\"endpoint\"", "\"body_len\":1,\"endpoint\"");
        assert_eq!(cache_entry(&lies, NOW).map(|e| e.body.len()), Ok(8));
    }

    // --- the roll call ---

    /// The fields the heartbeat writes (`sync::heartbeat`, `seen_at` by the script).
    fn heartbeat() -> Vec<(&'static str, String)> {
        vec![
            ("name", "gw-2".into()),
            ("id", OTHER.into()),
            ("started_at", "1749999999000".into()),
            ("version", "0.1.0".into()),
            ("address", "[::1]:4141".into()),
            ("requests", "42".into()),
            ("seen_at", "1750000000123".into()),
        ]
    }

    fn member_of(listed: Option<&str>, fields: &[(&'static str, String)]) -> Result<Option<Member>, Dropped> {
        let pairs: Vec<(&[u8], &[u8])> = fields.iter().map(|(k, v)| (k.as_bytes(), v.as_bytes())).collect();
        member(listed, &pairs)
    }

    fn with(field: &'static str, value: &str) -> Vec<(&'static str, String)> {
        let mut fields = heartbeat();
        fields.retain(|(k, _)| *k != field);
        fields.push((field, value.into()));
        fields
    }

    #[test]
    fn a_member_is_read_as_its_heartbeat_wrote_it() {
        let m = Member {
            name: "gw-2".into(),
            id: OTHER.into(),
            started_at: 1_749_999_999_000,
            version: "0.1.0".into(),
            address: "[::1]:4141".into(),
            requests: 42,
            seen_at: 1_750_000_000_123,
        };
        assert_eq!(member_of(Some(OTHER), &heartbeat()), Ok(Some(m.clone())));
        let raw: Vec<(Vec<u8>, Vec<u8>)> = heartbeat().into_iter().map(|(k, v)| (k.into(), v.into_bytes())).collect();
        assert_eq!(crate::member(OTHER, &raw), Some(m.clone()), "as the roll call's reader calls it");
        assert_eq!(crate::member("someone-else", &raw), None, "a hash that claims another instance's id");
        assert_eq!(member_of(None, &[]), Ok(None), "left meanwhile");
        let older = vec![("name", "gw-2".to_string()), ("id", OTHER.to_string())];
        let m = Member { started_at: 0, version: String::new(), address: String::new(), requests: 0, seen_at: 0, ..m };
        assert_eq!(member_of(None, &older), Ok(Some(m)), "fields an older version did not write");
    }

    #[test]
    fn a_malformed_or_hostile_member_is_dropped() {
        assert_eq!(why(member_of(Some(OWN), &heartbeat())), Why::NotItsId, "claims another instance's id");
        let mut no_name = heartbeat();
        no_name.remove(0);
        assert_eq!(why(member_of(None, &no_name)), Why::Missing { field: "name" });
        assert_eq!(why(member_of(None, &with("name", "gw\r\nother"))), Why::BadText { field: "name" });
        assert!(matches!(
            why(member_of(None, &with("id", &"i".repeat(MAX_ID + 1)))),
            Why::TooLarge { field: "id", .. }
        ));
        assert_eq!(why(member_of(None, &with("started_at", "-1"))), Why::OutOfRange { field: "started_at" });
        assert_eq!(why(member_of(None, &with("seen_at", "soon"))), Why::OutOfRange { field: "seen_at" });
        assert_eq!(why(member_of(None, &with("requests", "-3"))), Why::OutOfRange { field: "requests" });
        assert_eq!(
            why(member_of(None, &with("requests", "99999999999999999999999"))),
            Why::OutOfRange { field: "requests" }
        );
        assert_eq!(
            why(member_of(None, &with("requests", &(MAX_REQUESTS + 1).to_string()))),
            Why::OutOfRange { field: "requests" }
        );
        assert!(matches!(
            why(member_of(None, &with("version", &"v".repeat(65)))),
            Why::TooLarge { field: "version", .. }
        ));
        assert!(matches!(
            why(member_of(None, &with("address", &"a".repeat(129)))),
            Why::TooLarge { field: "address", .. }
        ));
        let mut twice = heartbeat();
        twice.push(("name", "gw-3".into()));
        assert_eq!(why(member_of(None, &twice)), Why::Twice { field: "name" });
        let raw: Vec<(&[u8], &[u8])> = vec![(b"name", b"gw-\xff"), (b"id", b"x")];
        assert_eq!(why(member(None, &raw)), Why::NotUtf8 { field: "name" });
    }

    #[test]
    fn repeated_drops_are_logged_once_and_counted() {
        let dropped = Dropped { kind: Kind::Member, why: Why::Form };
        assert_eq!(dropped.to_string(), "a roll-call entry was dropped: it is not in the form this version writes");
        let held = &HELD[3];
        report(&dropped);
        let before = held.since.load(Ordering::Relaxed);
        report(&dropped);
        report(&dropped);
        assert!(held.since.load(Ordering::Relaxed) >= before + 2, "held back within {REPORT_EVERY:?}");
    }
}

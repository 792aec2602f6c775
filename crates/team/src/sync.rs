//! The runner's Redis work: writing a decision, reading the shared state
//! back, the roll call, probe claims.

use std::collections::HashMap;
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::AsyncCommands;
use switchyard_core::team::{Change, Member, Roll};

use crate::decode;
use crate::keys::Keys;
use crate::scripts::Scripts;
use crate::{member, Announcement, RedisTeam};

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// This instance's heartbeat: on the roll call for `ttl` more. Returns the
/// roll call: how many instances are live, and this one's rank among them.
pub async fn heartbeat(
    con: &mut ConnectionManager,
    scripts: &Scripts,
    team: &RedisTeam,
    served: u64,
    ttl: Duration,
) -> redis::RedisResult<Roll> {
    let mut call = scripts.heartbeat.prepare_invoke();
    call.key(team.keys.members()).key(team.keys.member(&team.id));
    call.arg(&team.id).arg(ms(ttl));
    let version = env!("CARGO_PKG_VERSION");
    let started = team.started_at.to_string();
    for (k, v) in [
        ("name", team.name.as_str()),
        ("id", team.id.as_str()),
        ("started_at", started.as_str()),
        ("version", version),
        ("address", team.address.as_str()),
    ] {
        call.arg(k).arg(v);
    }
    call.arg("requests").arg(served);
    let answer: Vec<i64> = call.invoke_async(con).await?;
    let int = |i: usize| answer.get(i).and_then(|n| u32::try_from(*n).ok());
    match (int(0), int(1)) {
        (Some(live), Some(rank)) if live > 0 && rank < live => Ok(Roll::new(live, rank)),
        _ => Err(redis::RedisError::from((
            redis::ErrorKind::UnexpectedReturnType,
            "a roll call this version cannot read",
        ))),
    }
}

/// Off the roll call (a clean stop).
pub async fn leave(con: &mut ConnectionManager, keys: &Keys, id: &str) -> redis::RedisResult<()> {
    redis::pipe().zrem(keys.members(), id).del(keys.member(id)).query_async::<()>(con).await
}

/// Every live member, by name.
pub async fn members(con: &mut ConnectionManager, keys: &Keys) -> redis::RedisResult<Vec<Member>> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(con).await?;
    let now = secs * 1000 + micros / 1000;
    let ids: Vec<String> = con.zrangebyscore(keys.members(), now, "+inf").await?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        // Raw bytes: one value that is not text drops that member, not the
        // whole roll call.
        let fields: Vec<(Vec<u8>, Vec<u8>)> = con.hgetall(keys.member(&id)).await?;
        out.extend(member(&id, &fields));
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// Writes `change` with its script and announces it. Returns the provider
/// whose breaker now waits for the team's probe, when it does.
pub async fn write(
    con: &mut ConnectionManager,
    scripts: &Scripts,
    team: &RedisTeam,
    change: Change,
    suspect_window: Duration,
) -> redis::RedisResult<Option<String>> {
    let keys = &team.keys;
    let mut due = None;
    let announced = match &change {
        Change::BreakerTripped { provider, for_ms, reason, local } => {
            let (opened, left): (i64, i64) = scripts
                .trip
                .key(keys.breaker(provider))
                .key(keys.suspects(provider))
                .key(keys.probe(provider))
                .arg(*for_ms)
                .arg(reason)
                .arg(&team.name)
                .arg(if *local { "1" } else { "0" })
                .arg(ms(suspect_window))
                .invoke_async(con)
                .await?;
            // Open in the team or not, this instance's held breaker waits
            // on the probe claim, which also says when no one confirmed it.
            due = Some(provider.clone());
            (opened == 1).then(|| Change::BreakerTripped {
                provider: provider.clone(),
                for_ms: u64::try_from(left).unwrap_or(0),
                reason: reason.clone(),
                local: false,
            })
        }
        Change::BreakerClosed { provider, reason } => {
            scripts
                .close
                .key(keys.breaker(provider))
                .key(keys.probe(provider))
                .arg(reason)
                .arg(&team.name)
                .invoke_async::<i64>(con)
                .await?;
            Some(change.clone())
        }
        Change::BreakerForced { provider, open } => {
            scripts
                .force
                .key(keys.breaker(provider))
                .key(keys.probe(provider))
                .key(keys.suspects(provider))
                .arg(if *open { "1" } else { "0" })
                .arg(&team.name)
                .invoke_async::<i64>(con)
                .await?;
            Some(change.clone())
        }
        Change::Cooling { provider, key, for_ms } => {
            let left: i64 =
                scripts.cool.key(keys.cooling(provider, key.as_deref())).arg(*for_ms).invoke_async(con).await?;
            let index = keys.cooling_index(provider);
            redis::pipe()
                .sadd(&index, key.as_deref().unwrap_or("*"))
                .pexpire(&index, i64::try_from(*for_ms).unwrap_or(i64::MAX).max(1000))
                .query_async::<()>(con)
                .await?;
            let for_ms = u64::try_from(left).unwrap_or(0);
            Some(Change::Cooling { provider: provider.clone(), key: key.clone(), for_ms })
        }
        Change::Revoked { provider, key, reason } => {
            let revoked = keys.revoked(provider);
            redis::pipe().hset(&revoked, key, reason).expire(&revoked, 86_400).query_async::<()>(con).await?;
            Some(change.clone())
        }
        Change::Toggled { provider, enabled } => {
            let toggles = keys.toggles();
            redis::pipe()
                .hset(&toggles, provider, if *enabled { "1" } else { "0" })
                .expire(&toggles, 30 * 86_400)
                .query_async::<()>(con)
                .await?;
            Some(change.clone())
        }
    };
    if let Some(change) = announced {
        let a = Announcement { by: team.name.clone(), id: team.id.clone(), change };
        let text = serde_json::to_string(&a).unwrap_or_default();
        con.publish::<_, _, i64>(keys.channel(), text).await?;
    }
    Ok(due)
}

/// What a probe claim came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// This instance probes for the team.
    Won,
    /// Another instance probes, or the cool-down is not over yet.
    Later,
    /// The team's breaker is not open (closed, opened by hand, or a local
    /// trip no other instance confirmed).
    NotOpen,
}

pub async fn claim_probe(
    con: &mut ConnectionManager,
    scripts: &Scripts,
    team: &RedisTeam,
    provider: &str,
    ttl: Duration,
) -> redis::RedisResult<Claim> {
    let (won, left): (i64, i64) = scripts
        .claim_probe
        .key(team.keys.breaker(provider))
        .key(team.keys.probe(provider))
        .arg(&team.id)
        .arg(ms(ttl))
        .invoke_async(con)
        .await?;
    Ok(match (won, left) {
        (1, _) => Claim::Won,
        (_, -1) => Claim::NotOpen,
        _ => Claim::Later,
    })
}

/// The shared state of `providers`, as the changes that bring an instance
/// up to it: open breakers, cool-downs in force, refused keys, toggles.
/// Closings travel only as announcements, so that a resync never closes a
/// breaker this instance just tripped and has not written yet.
pub async fn state(
    con: &mut ConnectionManager,
    keys: &Keys,
    providers: &[String],
) -> redis::RedisResult<Vec<(String, Change)>> {
    let (secs, micros): (i64, i64) = redis::cmd("TIME").query_async(con).await?;
    let now = secs.saturating_mul(1000).saturating_add(micros / 1000);
    let mut out = Vec::new();
    let toggles = text(con.hgetall(keys.toggles()).await?);
    for provider in providers {
        let breaker = text(con.hgetall(keys.breaker(provider)).await?);
        let by = breaker.get("by").cloned().unwrap_or_else(|| "the team".into());
        match breaker.get("state").map(String::as_str) {
            Some("open") => {
                let until = breaker.get("until").and_then(|u| u.parse::<i64>().ok()).unwrap_or(now);
                let reason = breaker.get("reason").cloned().unwrap_or_default();
                let for_ms = bounded_ms(until.saturating_sub(now));
                out.push((by, Change::BreakerTripped { provider: provider.clone(), for_ms, reason, local: false }));
            }
            Some("forced") => out.push((by, Change::BreakerForced { provider: provider.clone(), open: true })),
            _ => {}
        }
        let cooling: Vec<Vec<u8>> = con.smembers(keys.cooling_index(provider)).await?;
        for key in cooling.into_iter().filter_map(|k| String::from_utf8(k).ok()).filter(|k| k.len() <= decode::MAX_KEY)
        {
            let name = (key != "*").then_some(key.as_str());
            let left: i64 = con.pttl(keys.cooling(provider, name)).await?;
            if left > 0 {
                let change = Change::Cooling {
                    provider: provider.clone(),
                    key: name.map(str::to_string),
                    for_ms: bounded_ms(left),
                };
                out.push(("the team".into(), change));
            }
        }
        let revoked = text(con.hgetall(keys.revoked(provider)).await?);
        for (key, reason) in revoked.into_iter().filter(|(k, _)| k.len() <= decode::MAX_KEY) {
            out.push(("the team".into(), Change::Revoked { provider: provider.clone(), key, reason }));
        }
        if let Some(on) = toggles.get(provider) {
            out.push(("the team".into(), Change::Toggled { provider: provider.clone(), enabled: on == "1" }));
        }
    }
    Ok(out)
}

/// A hash read back from Redis as text: a field or value that is not
/// UTF-8, or longer than any this version writes, is dropped (and said
/// once), not the whole read.
fn text(fields: Vec<(Vec<u8>, Vec<u8>)>) -> HashMap<String, String> {
    let mut out = HashMap::with_capacity(fields.len());
    let mut dropped = 0usize;
    for (k, v) in fields {
        match (String::from_utf8(k), String::from_utf8(v)) {
            (Ok(k), Ok(v)) if k.len() <= decode::MAX_NAME && v.len() <= decode::MAX_REASON => {
                out.insert(k, v);
            }
            _ => dropped += 1,
        }
    }
    if dropped > 0 {
        tracing::warn!(dropped, "team: fields of the shared state this version cannot read were ignored");
    }
    out
}

/// A time left as Redis holds it, within what any instance writes: a
/// hostile or broken value never keeps a provider shut for ages.
fn bounded_ms(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0).min(decode::MAX_FOR_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_that_is_not_text_or_too_long_is_dropped_not_the_whole_hash() {
        let fields = vec![
            (b"state".to_vec(), b"open".to_vec()),
            (b"reason".to_vec(), vec![0xff, 0xfe]),
            (b"by".to_vec(), vec![b'x'; decode::MAX_REASON + 1]),
        ];
        let read = text(fields);
        assert_eq!(read.get("state").map(String::as_str), Some("open"));
        assert_eq!(read.len(), 1);
    }

    #[test]
    fn a_time_left_from_redis_is_never_negative_nor_ages_long() {
        assert_eq!(bounded_ms(-5), 0);
        assert_eq!(bounded_ms(1500), 1500);
        assert_eq!(bounded_ms(i64::MAX), decode::MAX_FOR_MS);
    }
}

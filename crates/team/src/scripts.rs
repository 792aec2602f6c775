//! The shared state's atomic steps, one Lua script each: every decision
//! reads and writes its keys in one step, with time from Redis's own clock
//! (`TIME`), never an instance's, and a TTL on every key it writes, so state
//! left by an instance that died expires by itself.
//!
//! `redis::Script` sends a script by its digest and loads it again when
//! Redis answers NOSCRIPT (after a restart).

use redis::aio::ConnectionManager;
use redis::{ErrorKind, RedisResult, Script, ScriptInvocation, ServerErrorKind};

/// Redis's clock, in milliseconds.
const NOW: &str = "local t = redis.call('TIME'); local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)";

/// The scripts, loaded once per process.
#[derive(Debug)]
pub struct Scripts {
    pub trip: Script,
    pub close: Script,
    pub force: Script,
    pub cool: Script,
    pub heartbeat: Script,
    pub claim_probe: Script,
    pub admit: Script,
    pub renew: Script,
    pub adopt: Script,
    pub settle: Script,
    pub settle_outage: Script,
    pub reserve_spend: Script,
    pub settle_spend: Script,
    pub seed_spend: Script,
    pub cache_fill: Script,
    pub cache_store: Script,
    pub cache_release: Script,
    pub cache_renew: Script,
}

impl Scripts {
    pub fn new() -> Scripts {
        Scripts {
            trip: Script::new(&format!("{NOW}\n{TRIP}")),
            close: Script::new(&format!("{NOW}\n{CLOSE}")),
            force: Script::new(&format!("{NOW}\n{FORCE}")),
            cool: Script::new(&format!("{NOW}\n{COOL}")),
            heartbeat: Script::new(&format!("{NOW}\n{HEARTBEAT}")),
            claim_probe: Script::new(&format!("{NOW}\n{CLAIM_PROBE}")),
            admit: Script::new(&format!("{NOW}\n{ADMIT}")),
            renew: Script::new(&format!("{NOW}\n{RENEW}")),
            adopt: Script::new(&format!("{NOW}\n{ADOPT}")),
            settle_outage: Script::new(SETTLE_OUTAGE),
            settle: Script::new(&format!("{NOW}\n{SETTLE}")),
            reserve_spend: Script::new(RESERVE_SPEND),
            settle_spend: Script::new(SETTLE_SPEND),
            seed_spend: Script::new(SEED_SPEND),
            cache_fill: Script::new(CACHE_FILL),
            cache_store: Script::new(CACHE_STORE),
            cache_release: Script::new(CACHE_RELEASE),
            cache_renew: Script::new(CACHE_RENEW),
        }
    }
}

/// Runs `calls` in one pipeline: one round trip for them all. A script
/// Redis does not have (it restarted since it was loaded) answers NOSCRIPT
/// and did nothing; only those are sent again, each on its own (which
/// loads it), so no script runs twice. Every script answers an array.
pub async fn pipelined(con: &mut ConnectionManager, calls: &[ScriptInvocation<'_>]) -> RedisResult<Vec<Vec<i64>>> {
    let mut pipe = redis::pipe();
    pipe.ignore_errors();
    for call in calls {
        pipe.invoke_script(call);
    }
    let answers: Vec<RedisResult<Vec<i64>>> = pipe.query_async(con).await?;
    let mut out = Vec::with_capacity(calls.len());
    for (call, answer) in calls.iter().zip(answers) {
        out.push(match answer {
            Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => call.invoke_async(con).await?,
            other => other?,
        });
    }
    Ok(out)
}

impl Default for Scripts {
    fn default() -> Scripts {
        Scripts::new()
    }
}

/// A breaker tripped on one instance.
/// KEYS: breaker hash, suspects sorted set, probe key. ARGV: for_ms, reason, by,
/// local (0/1), window_ms.
/// A `local` trip (the instance could not connect) counts only when a
/// second instance reports one within the window. A longer open already
/// in force is kept. Returns {opened (0/1), ms left}.
const TRIP: &str = r"
local for_ms = tonumber(ARGV[1])
if ARGV[4] == '1' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[5]), ARGV[3])
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[5]))
  if redis.call('ZCARD', KEYS[2]) < 2 then return {0, 0} end
end
local until_ms = now + for_ms
local state = redis.call('HGET', KEYS[1], 'state')
local old = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if state == 'open' and old > until_ms then until_ms = old end
redis.call('HSET', KEYS[1], 'state', 'open', 'until', until_ms, 'by', ARGV[3], 'reason', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('PEXPIRE', KEYS[1], until_ms - now + 600000)
-- A new cool-down: whoever probed before holds nothing now.
redis.call('DEL', KEYS[3])
return {1, until_ms - now}
";

/// A breaker closed by the probes of the instance that held the probe.
/// KEYS: breaker hash, probe key. ARGV: reason, by. Returns 1.
const CLOSE: &str = r"
redis.call('HSET', KEYS[1], 'state', 'closed', 'until', now, 'by', ARGV[2], 'reason', ARGV[1])
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('PEXPIRE', KEYS[1], 600000)
redis.call('DEL', KEYS[2])
return 1
";

/// A breaker opened (ARGV[1] = '1') or reset by hand. KEYS: breaker hash,
/// probe key, suspects. ARGV: open, by. An opened breaker stays so until
/// reset (a day at most, as every key has a TTL).
const FORCE: &str = r"
local state = 'closed'
if ARGV[1] == '1' then state = 'forced' end
redis.call('HSET', KEYS[1], 'state', state, 'until', now, 'by', ARGV[2], 'reason', 'by hand')
redis.call('HINCRBY', KEYS[1], 'epoch', 1)
redis.call('PEXPIRE', KEYS[1], 86400000)
redis.call('DEL', KEYS[2], KEYS[3])
return 1
";

/// A rate-limit cool-down. KEYS: the cool-down key. ARGV: for_ms.
/// A later reset wins; an earlier one never shortens it. Returns the ms left.
const COOL: &str = r"
local until_ms = now + tonumber(ARGV[1])
local old = tonumber(redis.call('GET', KEYS[1]) or '0')
if old > until_ms then return old - now end
redis.call('SET', KEYS[1], until_ms, 'PX', tonumber(ARGV[1]))
return tonumber(ARGV[1])
";

/// An instance's heartbeat. KEYS: members sorted set, this member's hash.
/// ARGV: id, ttl_ms, then field/value pairs. Drops members whose heartbeat
/// expired, and returns the roll call: {how many are live, this instance's
/// rank among them}, ranked by id (ids are time-ordered and unique), so
/// every instance that reads the same roll call ranks it the same way.
const HEARTBEAT: &str = r"
local ttl = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 4)
for i = 3, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('HSET', KEYS[2], 'seen_at', now)
redis.call('PEXPIRE', KEYS[2], ttl * 2)
local ids = redis.call('ZRANGE', KEYS[1], 0, -1)
table.sort(ids)
local rank = 0
for i, id in ipairs(ids) do
  if id == ARGV[1] then rank = i - 1 end
end
return {#ids, rank}
";

/// Claims the one probe of an open breaker whose cool-down is over.
/// KEYS: breaker hash, probe key. ARGV: id, probe_ttl_ms.
/// Returns 1 when this instance probes, 0 when another does or the breaker
/// is not due (still cooling, closed, opened by hand), with the ms left.
const CLAIM_PROBE: &str = r"
local state = redis.call('HGET', KEYS[1], 'state')
if state ~= 'open' then return {0, -1} end
local until_ms = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if until_ms > now then return {0, until_ms - now} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', tonumber(ARGV[2])) then return {1, 0} end
return {0, 0}
";

/// A team-wide admission, all or nothing. KEYS: the provider's leases, the
/// key's leases (or the first again), the requests bucket, the tokens
/// bucket, the provider's line, its places' expiries. ARGV: lease id,
/// ttl_ms, provider cap, key cap, requests per minute, tokens per minute
/// (each 0: none), the request's tokens; then its ticket in the line (''
/// when it does not queue), the line's length at most, the request's age
/// (ms since it arrived) and how long a place lasts unless asked for again.
///
/// The line is ordered by arrival (Redis's clock less the request's age).
/// While anyone waits in it, only its head is admitted, and a request
/// that does not queue is not admitted at all: nobody passes those who
/// wait. Places not asked for again in time (their instance died) are
/// dropped first; a request admitted leaves the line in the same step.
///
/// The buckets refill continuously from Redis's clock (a clock that steps
/// back refills nothing) and expire when idle for two refills. Leases past
/// their expiry (an instance killed or paused while holding them) are
/// dropped first, so none leaks. Returns {1, 0} when admitted (a lease
/// added when a cap applies), {0, ms} when a bucket has room only after
/// that long, {-1, 0} when a cap is full, {-3, ahead} when the request
/// holds its place in line behind `ahead` others, {-2, waiting} when the
/// line is full; nothing is taken unless all is.
const ADMIT: &str = r"
local ttl = tonumber(ARGV[2])
local pmax, kmax = tonumber(ARGV[3]), tonumber(ARGV[4])
local rpm, tpm, tokens = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local function level(key, cap)
  local b = redis.call('HMGET', key, 't', 'ts')
  local t, ts = tonumber(b[1] or cap), tonumber(b[2] or now)
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  return math.min(cap, t + elapsed * cap / 60000)
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if kmax > 0 then redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now) end
local full = (pmax > 0 and redis.call('ZCARD', KEYS[1]) >= pmax) or (kmax > 0 and redis.call('ZCARD', KEYS[2]) >= kmax)
local ticket = ARGV[8] or ''
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', now)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[5], unpack(lapsed))
  redis.call('ZREM', KEYS[6], unpack(lapsed))
end
local waiting = redis.call('ZCARD', KEYS[5])
local at = ticket ~= '' and redis.call('ZSCORE', KEYS[5], ticket)
if ticket == '' then
  if full or waiting > 0 then return {-1, 0} end
elseif at or full or waiting > 0 then
  if not at then
    if waiting >= tonumber(ARGV[9]) then return {-2, waiting} end
    redis.call('ZADD', KEYS[5], now - tonumber(ARGV[10]), ticket)
    at = true
  end
  local lasts = tonumber(ARGV[11])
  redis.call('ZADD', KEYS[6], now + lasts, ticket)
  redis.call('PEXPIRE', KEYS[5], lasts * 2)
  redis.call('PEXPIRE', KEYS[6], lasts * 2)
  local ahead = redis.call('ZRANK', KEYS[5], ticket)
  if full or ahead > 0 then return {-3, ahead} end
end
local wait = 0
local r, k
if rpm > 0 then
  r = level(KEYS[3], rpm)
  if r < 1 then wait = math.max(wait, math.ceil((1 - r) * 60000 / rpm)) end
end
if tpm > 0 then
  local need = math.min(tokens, tpm)
  k = level(KEYS[4], tpm)
  if k < need then wait = math.max(wait, math.ceil((need - k) * 60000 / tpm)) end
end
if wait > 0 then return {0, wait} end
if at then
  redis.call('ZREM', KEYS[5], ticket)
  redis.call('ZREM', KEYS[6], ticket)
end
if rpm > 0 then
  redis.call('HSET', KEYS[3], 't', tostring(r - 1), 'ts', now)
  redis.call('PEXPIRE', KEYS[3], 120000)
end
if tpm > 0 then
  redis.call('HSET', KEYS[4], 't', tostring(k - math.min(tokens, tpm)), 'ts', now)
  redis.call('PEXPIRE', KEYS[4], 120000)
end
if pmax > 0 then
  redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ttl * 2)
end
if kmax > 0 then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
end
return {1, 0}
";

/// Renews a lease still held. KEYS: the provider's leases, the key's
/// leases (or the same key again). ARGV: lease id, ttl_ms. A lease that
/// already expired is not brought back (its place may be another's now):
/// returns {0}, and the holder goes on without it.
const RENEW: &str = r"
local ttl = tonumber(ARGV[2])
local at = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1]) or '0')
if at <= now then return {0} end
redis.call('ZADD', KEYS[1], 'XX', now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
if KEYS[2] ~= KEYS[1] then
  redis.call('ZADD', KEYS[2], 'XX', now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
end
return {1}
";

/// Counts a request this instance has in flight in the team's leases,
/// whatever they hold now: one it admitted under its own share while
/// Redis was out of reach, or one whose lease a Redis restart lost. So
/// the team's cap sees every request in flight before it admits more.
/// KEYS: the provider's leases, the key's leases (or the same key again).
/// ARGV: lease id, ttl_ms. Returns {1}.
const ADOPT: &str = r"
local ttl = tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('PEXPIRE', KEYS[1], ttl * 2)
if KEYS[2] ~= KEYS[1] then
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ttl * 2)
end
return {1}
";

/// Ends an admission: releases its lease and settles its reserved tokens.
/// KEYS: the provider's leases, the key's leases (or the first again), the
/// tokens bucket. ARGV: lease id, tokens per minute (0: none), tokens to
/// give back (what was reserved less what was used; negative takes the
/// extra the attempt used beyond its estimate, which later takers wait
/// for). Release is by id, so a late one removes only its own entry. A
/// bucket gone (idle past its TTL, or Redis restarted) is full already and
/// is left alone. Returns {1}.
const SETTLE: &str = r"
redis.call('ZREM', KEYS[1], ARGV[1])
if KEYS[2] ~= KEYS[1] then redis.call('ZREM', KEYS[2], ARGV[1]) end
local tpm, back = tonumber(ARGV[2]), tonumber(ARGV[3])
if tpm > 0 and back ~= 0 and redis.call('EXISTS', KEYS[3]) == 1 then
  local b = redis.call('HMGET', KEYS[3], 't', 'ts')
  local t, ts = tonumber(b[1] or tpm), tonumber(b[2] or now)
  local elapsed = now - ts
  if elapsed < 0 then elapsed = 0 end
  t = math.min(tpm, t + elapsed * tpm / 60000 + back)
  redis.call('HSET', KEYS[3], 't', tostring(t), 'ts', now)
  redis.call('PEXPIRE', KEYS[3], 120000)
end
return {1}
";

/// Reserves an attempt's estimated cost against every budget that covers
/// it, all or nothing. KEYS: the budgets' spend counters (micro-dollars),
/// then each one's set of instances that seeded it. ARGV: per counter, its
/// limit (-1: never refuses), the estimate and when the counter expires
/// (Unix ms, past its period's end); last, this instance's name.
/// Returns {1} when reserved; {-1, index, spent} when a budget (0-based
/// index) has spent its limit or more, reservations included; {-2, index…}
/// when counters are missing (a Redis restart lost them, a period began)
/// or this instance has not seeded them yet, to be seeded from its history
/// first. Nothing is taken unless all is.
const RESERVE_SPEND: &str = r"
local n = #KEYS / 2
local missing = {-2}
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 0 or redis.call('SISMEMBER', KEYS[n + i], ARGV[#ARGV]) == 0 then
    missing[#missing + 1] = i - 1
  end
end
if #missing > 1 then return missing end
for i = 1, n do
  local limit = tonumber(ARGV[3 * i - 2])
  local spent = tonumber(redis.call('GET', KEYS[i])) or 0
  if limit >= 0 and spent >= limit then return {-1, i - 1, spent} end
end
for i = 1, n do
  redis.call('INCRBY', KEYS[i], ARGV[3 * i - 1])
  redis.call('PEXPIREAT', KEYS[i], ARGV[3 * i])
end
return {1}
";

/// Settles reserved spend with the real cost. KEYS: the spend counters.
/// ARGV: per counter, the change (real cost less the estimate; the whole
/// estimate back, negative, when the attempt failed). A counter gone since
/// (Redis restarted) is left for the seeding to bring back from the
/// history, never started from a partial sum; none goes below zero.
/// Returns {1}.
const SETTLE_SPEND: &str = r"
for i = 1, #KEYS do
  local d = tonumber(ARGV[i])
  if d ~= 0 and redis.call('EXISTS', KEYS[i]) == 1 then
    if redis.call('INCRBY', KEYS[i], d) < 0 then redis.call('SET', KEYS[i], 0, 'KEEPTTL') end
  end
end
return {1}
";

/// Brings what an instance spent while Redis was out of reach to a
/// budget's counter. KEYS: the spend counter, its set of seeded instances,
/// the settlement's mark. ARGV: the instance's name, micro-dollars. Added
/// only to a counter that still holds this instance's part from before:
/// one Redis lost (or that another instance seeded anew) is seeded from
/// the history, which has that spend on record already. A settlement
/// already taken (its answer was lost, and it came again) is not added
/// twice. Returns {1} when added, {0} when not, {2} when taken before.
const SETTLE_OUTAGE: &str = r"
if not redis.call('SET', KEYS[3], '1', 'NX', 'PX', 86400000) then return {2} end
if redis.call('EXISTS', KEYS[1]) == 1 and redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then
  redis.call('INCRBY', KEYS[1], ARGV[2])
  return {1}
end
return {0}
";

/// Seeds a budget's spend counter from an instance's history, once per
/// instance name. KEYS: the counter, its set of seeded instances. ARGV:
/// the instance's name, micro-dollars on record, when both expire (Unix
/// ms), whole (1: the history is the team's, so the counter is set only
/// while missing and the first seed stands; 0: each instance's history is
/// its own, so each adds its part once). Returns {1}.
const SEED_SPEND: &str = r"
local first = redis.call('SADD', KEYS[2], ARGV[1])
redis.call('PEXPIREAT', KEYS[2], ARGV[3])
if ARGV[4] == '1' then
  redis.call('SET', KEYS[1], ARGV[2], 'NX', 'PXAT', ARGV[3])
elseif first == 1 then
  redis.call('INCRBY', KEYS[1], ARGV[2])
  redis.call('PEXPIREAT', KEYS[1], ARGV[3])
end
return {1}
";

/// A cached answer, or the fill lock on it. KEYS: the entry, its fill
/// lock. ARGV: this instance's lock token, the lock's TTL (ms).
/// Returns {1, entry}, {2} (the lock is this instance's) or {3} (another
/// holds it).
pub const CACHE_FILL: &str = r#"
local v = redis.call('GET', KEYS[1])
if v then return {1, v} end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
return {3}
"#;

/// Stores an answer for its TTL and lets go of the fill lock when it is
/// still the one this instance took. KEYS: the entry, its fill lock.
/// ARGV: the entry, its TTL (ms), the lock token ('' for none).
pub const CACHE_STORE: &str = r#"
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if ARGV[3] ~= '' and redis.call('GET', KEYS[2]) == ARGV[3] then redis.call('DEL', KEYS[2]) end
return {1}
"#;

/// Lets go of a fill lock, only when it is still the one this instance
/// took. KEYS: the lock. ARGV: the token.
pub const CACHE_RELEASE: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return {1}
"#;

/// Renews a fill lock, only while it is still the one this instance
/// took. KEYS: the lock. ARGV: the token, the TTL (ms). Returns 1 when
/// renewed, 0 when the lock is gone or another's.
pub const CACHE_RENEW: &str = r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"#;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    /// The machine's Redis (127.0.0.1:6379, which `.ci/run` starts), under
    /// a namespace of this test's own. Without a Redis the test fails.
    async fn redis() -> (ConnectionManager, String) {
        let client = redis::Client::open("redis://127.0.0.1:6379/0").unwrap();
        let con = ConnectionManager::new(client).await.expect("Redis must run on 127.0.0.1:6379 (.ci/run starts it)");
        (con, format!("test-line-{}", uuid::Uuid::now_v7()))
    }

    /// One admission for `ticket` ('' when it does not queue), aged `age` ms,
    /// under a cap of one and a line of at most two.
    async fn admit(
        con: &mut ConnectionManager,
        scripts: &Scripts,
        ns: &str,
        lease: &str,
        ticket: &str,
        age: u64,
    ) -> Vec<i64> {
        let mut call = scripts.admit.prepare_invoke();
        for k in ["leases", "leases", "rpm", "tpm", "line", "line:alive"] {
            call.key(format!("{ns}:{{p}}:{k}"));
        }
        call.arg(lease).arg(60_000).arg(1).arg(0).arg(0).arg(0).arg(0);
        call.arg(ticket).arg(2).arg(age).arg(if ticket.is_empty() { 0 } else { 2000 });
        call.invoke_async(con).await.unwrap()
    }

    #[tokio::test]
    async fn every_instance_reads_the_same_roll_call_and_a_rank_of_its_own() {
        let (mut con, ns) = redis().await;
        let scripts = Scripts::new();
        let (members, ids) = (format!("{ns}:members"), ["01-c", "01-a", "01-b"]);
        let mut beat = async |id: &str| -> Vec<i64> {
            let mut call = scripts.heartbeat.prepare_invoke();
            call.key(&members).key(format!("{ns}:member:{id}")).arg(id).arg(5000).arg("name").arg(id);
            call.invoke_async(&mut con).await.unwrap()
        };
        for id in ids {
            beat(id).await;
        }
        let mut rolls = Vec::new();
        for id in ids {
            rolls.push(beat(id).await);
        }
        assert_eq!(rolls, vec![vec![3, 2], vec![3, 0], vec![3, 1]], "ranked by id, the same on every instance");
    }

    #[tokio::test]
    async fn a_fill_lock_is_renewed_only_by_the_instance_that_holds_it() {
        let (mut con, ns) = redis().await;
        let scripts = Scripts::new();
        let lock = format!("{ns}:cache:{{k}}:fill");
        let _: () = redis::cmd("SET").arg(&lock).arg("mine").arg("PX").arg(200).query_async(&mut con).await.unwrap();
        let renew = |token: &str| {
            let mut call = scripts.cache_renew.prepare_invoke();
            call.key(&lock).arg(token).arg(30_000);
            call
        };
        assert_eq!(renew("theirs").invoke_async::<i64>(&mut con).await.unwrap(), 0, "not another's");
        let ttl: i64 = redis::cmd("PTTL").arg(&lock).query_async(&mut con).await.unwrap();
        assert!(ttl <= 200, "left as it was: {ttl} ms");
        assert_eq!(renew("mine").invoke_async::<i64>(&mut con).await.unwrap(), 1);
        let ttl: i64 = redis::cmd("PTTL").arg(&lock).query_async(&mut con).await.unwrap();
        assert!(ttl > 20_000, "renewed for the TTL: {ttl} ms");
        let _: () = redis::cmd("DEL").arg(&lock).query_async(&mut con).await.unwrap();
        assert_eq!(renew("mine").invoke_async::<i64>(&mut con).await.unwrap(), 0, "gone once stored or let go");
    }

    #[tokio::test]
    async fn a_full_provider_s_line_admits_its_head_first_and_nobody_passes_it() {
        let (mut con, ns) = redis().await;
        let scripts = Scripts::new();
        assert_eq!(admit(&mut con, &scripts, &ns, "l0", "", 0).await, vec![1, 0], "a free place is taken at once");
        assert_eq!(admit(&mut con, &scripts, &ns, "l1", "", 0).await, vec![-1, 0], "full, and no queue");
        assert_eq!(admit(&mut con, &scripts, &ns, "l1", "t1", 0).await, vec![-3, 0], "first in line");
        // Arrived 5 s ago, before t1: goes ahead of it.
        assert_eq!(admit(&mut con, &scripts, &ns, "l2", "t2", 5000).await, vec![-3, 0]);
        assert_eq!(admit(&mut con, &scripts, &ns, "l1", "t1", 0).await, vec![-3, 1], "t1 is now behind t2");
        assert_eq!(admit(&mut con, &scripts, &ns, "l3", "t3", 0).await, vec![-2, 2], "the line holds two at most");

        let _: () = redis::cmd("ZREM").arg(format!("{ns}:{{p}}:leases")).arg("l0").query_async(&mut con).await.unwrap();
        assert_eq!(admit(&mut con, &scripts, &ns, "l4", "", 0).await, vec![-1, 0], "a newcomer does not pass the line");
        assert_eq!(admit(&mut con, &scripts, &ns, "l1", "t1", 0).await, vec![-3, 1], "nor does the second in line");
        assert_eq!(admit(&mut con, &scripts, &ns, "l2", "t2", 5000).await, vec![1, 0], "the head is admitted");
        let line: i64 = redis::cmd("ZCARD").arg(format!("{ns}:{{p}}:line")).query_async(&mut con).await.unwrap();
        assert_eq!(line, 1, "and left the line in the same step");

        // t1's holder stops asking (its instance died): its place lapses.
        let _: () = redis::cmd("ZADD")
            .arg(format!("{ns}:{{p}}:line:alive"))
            .arg(1)
            .arg("t1")
            .query_async(&mut con)
            .await
            .unwrap();
        let _: () = redis::cmd("ZREM").arg(format!("{ns}:{{p}}:leases")).arg("l2").query_async(&mut con).await.unwrap();
        assert_eq!(admit(&mut con, &scripts, &ns, "l5", "", 0).await, vec![1, 0], "nobody waits any more");
        let _: () = redis::cmd("DEL").arg(format!("{ns}:{{p}}:leases")).query_async(&mut con).await.unwrap();
    }
}

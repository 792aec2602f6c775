//! Team members: people (or scripts) who use the gateway with a key of
//! their own, so that their requests, spend and limits are theirs.
//!
//! A key is `sy-m-` and 32 random bytes in hex, printed once when it is
//! made. Only its SHA-256 is kept, in the history's database (SQLite, or
//! the team's PostgreSQL): a key of 256 random bits needs no slow hash, and
//! a leaked table gives nobody a key. A presented key is hashed and compared
//! in constant time with every member's hash.
//!
//! # Layout
//! - this file: the member as stored, keys, and the text forms of limits.
//! - [`gate`]: the request path's check (who is asking, may they, now).
//! - [`spend`]: a member's budget on the request path (the budget engine's).

pub mod gate;
pub mod ops;
pub mod spend;

use secrecy::SecretString;
use serde::Serialize;

use crate::policy::budget::BudgetPeriod;

/// What every member key starts with: the scrubber and log filters know
/// the gateway's keys by their `sy-` prefix; `m-` tells them from the
/// owner's access token before any hashing.
pub const KEY_PREFIX: &str = "sy-m-";

/// A member as stored (the key's hash, never the key).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MemberRecord"))]
pub struct Member {
    pub name: String,
    /// Hex SHA-256 of the key; never sent by the admin API.
    #[serde(skip)]
    pub key_hash: String,
    pub created_at_ms: i64,
    pub expires_at_ms: Option<i64>,
    pub revoked_at_ms: Option<i64>,
    pub budget: Option<Budget>,
    /// Requests a minute.
    pub rpm: Option<u32>,
    /// Tokens a minute (estimated from the request's size, as the
    /// providers' token buckets are).
    #[cfg_attr(test, ts(type = "number | null"))]
    pub tpm: Option<u64>,
    /// Globs of the models the member may ask for (`claude-*`); empty: any.
    pub models: Vec<String>,
}

/// A member's spend limit, per period; past it requests are refused.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[cfg_attr(test, ts(rename = "MemberBudget"))]
pub struct Budget {
    pub limit_usd: f64,
    pub period: BudgetPeriod,
}

impl Budget {
    /// Read back from the table's two columns.
    pub fn from_columns(limit_usd: Option<f64>, period: Option<&str>) -> Option<Budget> {
        let period = BudgetPeriod::ALL.into_iter().find(|p| Some(p.as_str()) == period)?;
        Some(Budget { limit_usd: limit_usd?, period })
    }

    /// `50/month`, `5/day`, `$20/week`.
    pub fn parse(text: &str) -> Result<Budget, MemberError> {
        let bad = || MemberError::Invalid(format!("budget {text:?} is not AMOUNT/day, /week or /month"));
        let (amount, period) = text.trim().split_once('/').ok_or_else(bad)?;
        let limit_usd: f64 = amount.trim().trim_start_matches('$').parse().map_err(|_| bad())?;
        let period = BudgetPeriod::ALL.into_iter().find(|p| p.as_str() == period.trim()).ok_or_else(bad)?;
        if !limit_usd.is_finite() || limit_usd <= 0.0 {
            return Err(bad());
        }
        Ok(Budget { limit_usd, period })
    }

    /// The budget's scope, as the budgets' own are named.
    pub fn scope(name: &str) -> String {
        format!("member:{name}")
    }
}

/// A member's requests and spend over some time, for `/admin/spend`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct MemberSpend {
    pub member: String,
    pub requests: i64,
    pub cost_usd: f64,
    pub input_tokens: i64,
    pub output_tokens: i64,
}

#[derive(Debug, thiserror::Error)]
pub enum MemberError {
    #[error("{0}")]
    Invalid(String),
    #[error("no member named {0:?}")]
    NotFound(String),
    #[error("a member named {0:?} exists already")]
    Exists(String),
    #[error("the members need the history database, and this gateway has none")]
    NoStore,
    #[error(transparent)]
    Store(#[from] crate::history::store::StoreError),
}

/// What `members add` asks for, as text (the CLI's flags, the admin API's body).
#[derive(Debug, Clone, Default, serde::Deserialize)]
pub struct NewMember {
    pub name: String,
    pub budget: Option<String>,
    pub rpm: Option<u32>,
    pub tpm: Option<u64>,
    /// Comma-separated globs.
    pub models: Option<String>,
    /// A duration from now: `90d`, `12h`.
    pub expires: Option<String>,
}

impl NewMember {
    /// The member it describes, with the hash of `key`, made at `now_ms`.
    pub fn build(&self, key: &SecretString, now_ms: i64) -> Result<Member, MemberError> {
        check_name(&self.name)?;
        let expires_at_ms = match self.expires.as_deref() {
            Some(text) => {
                let d = humantime::parse_duration(text.trim())
                    .map_err(|e| MemberError::Invalid(format!("expires {text:?}: {e}")))?;
                Some(now_ms.saturating_add(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)))
            }
            None => None,
        };
        Ok(Member {
            name: self.name.clone(),
            key_hash: hash_key(key),
            created_at_ms: now_ms,
            expires_at_ms,
            revoked_at_ms: None,
            budget: self.budget.as_deref().map(Budget::parse).transpose()?,
            rpm: self.rpm.filter(|n| *n > 0),
            tpm: self.tpm.filter(|n| *n > 0),
            models: self.models.as_deref().map(split_models).unwrap_or_default(),
        })
    }
}

/// Names are what rows, metrics and budget scopes show: short and plain.
fn check_name(name: &str) -> Result<(), MemberError> {
    let plain = name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'));
    if name.is_empty() || name.len() > 64 || !plain {
        return Err(MemberError::Invalid(format!(
            "member name {name:?}: 1 to 64 letters, digits, `-`, `_`, `.` or `@`"
        )));
    }
    Ok(())
}

/// `claude-*, gpt-4.1` as a list.
pub fn split_models(text: &str) -> Vec<String> {
    text.split(',').map(str::trim).filter(|m| !m.is_empty()).map(str::to_string).collect()
}

/// A fresh key: `sy-m-` and 32 random bytes in hex.
pub fn new_key() -> SecretString {
    use rand::RngCore;
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    SecretString::from(format!("{KEY_PREFIX}{}", hex(&bytes)))
}

/// The hex SHA-256 of a key, as stored.
pub fn hash_key(key: &SecretString) -> String {
    use secrecy::ExposeSecret;
    hash_text(key.expose_secret())
}

pub(crate) fn hash_text(key: &str) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, key.as_bytes()).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Whether `model` matches `pattern`, where `*` stands for any run of
/// characters (none included).
pub fn glob_match(pattern: &str, model: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else { return false };
    let Some(mut rest) = model.strip_prefix(first) else { return false };
    let pieces: Vec<&str> = parts.collect();
    let Some((last, middle)) = pieces.split_last() else { return rest.is_empty() };
    for piece in middle {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl Member {
    /// Whether the member may ask for `model`.
    pub fn allows(&self, model: &str) -> bool {
        self.models.is_empty() || self.models.iter().any(|p| glob_match(p, model))
    }

    /// Active, revoked or expired at `now_ms`.
    pub fn state(&self, now_ms: i64) -> MemberState {
        if self.revoked_at_ms.is_some() {
            MemberState::Revoked
        } else if self.expires_at_ms.is_some_and(|at| at <= now_ms) {
            MemberState::Expired
        } else {
            MemberState::Active
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "snake_case")]
pub enum MemberState {
    Active,
    Revoked,
    Expired,
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::ExposeSecret;

    #[test]
    fn globs_match_prefixes_suffixes_and_whole_names() {
        assert!(glob_match("claude-*", "claude-sonnet-4"));
        assert!(!glob_match("claude-*", "gpt-4.1"));
        assert!(glob_match("gpt-4.1", "gpt-4.1"));
        assert!(!glob_match("gpt-4.1", "gpt-4.1-mini"));
        assert!(glob_match("*mini", "gpt-4.1-mini"));
        assert!(glob_match("g*-*i", "gpt-4.1-mini"));
        assert!(!glob_match("a*a", "a"));
        assert!(glob_match("*", ""));
    }

    #[test]
    fn budgets_read_amount_and_period() {
        assert_eq!(Budget::parse("50/month").unwrap(), Budget { limit_usd: 50.0, period: BudgetPeriod::Month });
        assert_eq!(Budget::parse("$2.5/day").unwrap().limit_usd, 2.5);
        for bad in ["50", "50/year", "-1/day", "x/day", "0/week"] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn keys_are_prefixed_random_and_kept_as_hashes() {
        let (a, b) = (new_key(), new_key());
        assert!(a.expose_secret().starts_with(KEY_PREFIX));
        assert_eq!(a.expose_secret().len(), KEY_PREFIX.len() + 64);
        assert_ne!(a.expose_secret(), b.expose_secret());
        let m = NewMember { name: "al".into(), ..NewMember::default() }.build(&a, 0).unwrap();
        assert_eq!(m.key_hash, hash_key(&a));
        assert!(!m.key_hash.contains(&a.expose_secret()[KEY_PREFIX.len()..]));
    }

    #[test]
    fn names_expiry_and_models_are_checked() {
        let key = new_key();
        assert!(NewMember { name: "a b".into(), ..NewMember::default() }.build(&key, 0).is_err());
        let m = NewMember {
            name: "bo".into(),
            expires: Some("1h".into()),
            models: Some("claude-*, gpt-4.1".into()),
            ..NewMember::default()
        }
        .build(&key, 1_000)
        .unwrap();
        assert_eq!(m.expires_at_ms, Some(3_601_000));
        assert_eq!(m.state(3_600_999), MemberState::Active);
        assert_eq!(m.state(3_601_000), MemberState::Expired);
        assert!(m.allows("claude-haiku") && m.allows("gpt-4.1") && !m.allows("gpt-4o"));
    }
}

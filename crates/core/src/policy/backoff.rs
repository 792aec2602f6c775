//! How long to wait before trying again: exponential backoff with full
//! jitter, unless the provider said how long in its headers.

use std::time::{Duration, SystemTime};

use axum::http::{header, HeaderMap, HeaderName};
use rand::Rng;

use crate::ground::headers::name;

/// Full jitter: a uniform wait in `[0, min(cap, base * 2^retry)]`. Spreading
/// retries out is what keeps many clients from retrying in lock-step.
pub fn full_jitter(retry: u32, base: Duration, cap: Duration, rng: &mut impl Rng) -> Duration {
    let ceiling = base.saturating_mul(2u32.saturating_pow(retry)).min(cap);
    if ceiling.is_zero() {
        return Duration::ZERO;
    }
    Duration::from_nanos(rng.random_range(0..=ceiling.as_nanos().min(u128::from(u64::MAX)) as u64))
}

/// The wait a provider asked for, from the first header that says:
/// `retry-after-ms`, `retry-after` (seconds or an HTTP date), OpenAI's
/// `x-ratelimit-reset-requests` / `-tokens` (`1s`, `6m0s`, `250ms`), and
/// Anthropic's `anthropic-ratelimit-*-reset` (RFC 3339). When several reset
/// headers are present the longest wins: every limit must have reset.
pub fn requested_wait(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let text = |name: HeaderName| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) =
        text(name::RETRY_AFTER_MS).and_then(|v| v.parse::<f64>().ok()).filter(|v| v.is_finite() && *v >= 0.0)
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    if let Some(v) = text(header::RETRY_AFTER) {
        if let Ok(secs) = v.parse::<f64>() {
            if secs.is_finite() && secs >= 0.0 {
                return Some(Duration::from_secs_f64(secs));
            }
        }
        if let Ok(at) = httpdate::parse_http_date(v) {
            return Some(at.duration_since(now).unwrap_or(Duration::ZERO));
        }
    }
    let openai = [name::X_RATELIMIT_RESET_REQUESTS, name::X_RATELIMIT_RESET_TOKENS]
        .into_iter()
        .filter_map(|h| text(h).and_then(parse_go_duration));
    let anthropic = headers
        .iter()
        .filter(|(name, _)| name.as_str().starts_with("anthropic-ratelimit-") && name.as_str().ends_with("-reset"))
        .filter_map(|(_, v)| v.to_str().ok())
        .filter_map(|v| humantime::parse_rfc3339_weak(v.trim()).ok())
        .map(|at| at.duration_since(now).unwrap_or(Duration::ZERO));
    openai.chain(anthropic).max()
}

/// Go-style durations as OpenAI sends them: `6m0s`, `1.5s`, `250ms`, `1h2m`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    let mut total = 0f64;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let num_len = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 0.001,
            "us" | "µs" => 0.000_001,
            "ns" => 0.000_000_001,
            _ => return None,
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

/// The remaining-quota headers: `(requests, tokens)` left, when given.
pub fn remaining_quota(headers: &HeaderMap) -> (Option<u64>, Option<u64>) {
    let num = |names: &[HeaderName]| {
        names
            .iter()
            .find_map(|n| headers.get(n).and_then(|v| v.to_str().ok()).and_then(|v| v.trim().parse::<u64>().ok()))
    };
    (
        num(&[name::X_RATELIMIT_REMAINING_REQUESTS, name::ANTHROPIC_RATELIMIT_REQUESTS_REMAINING]),
        num(&[
            name::X_RATELIMIT_REMAINING_TOKENS,
            name::ANTHROPIC_RATELIMIT_TOKENS_REMAINING,
            name::ANTHROPIC_RATELIMIT_INPUT_TOKENS_REMAINING,
        ]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        pairs.iter().map(|(k, v)| (axum::http::HeaderName::from_static(k), HeaderValue::from_str(v).unwrap())).collect()
    }

    #[test]
    fn jitter_stays_under_the_exponential_ceiling_and_the_cap() {
        let mut rng = StdRng::seed_from_u64(7);
        let base = Duration::from_millis(100);
        let cap = Duration::from_secs(1);
        for retry in 0..12 {
            let ceiling = (base * 2u32.pow(retry.min(10))).min(cap);
            let waits: Vec<Duration> = (0..200).map(|_| full_jitter(retry, base, cap, &mut rng)).collect();
            assert!(waits.iter().all(|w| *w <= ceiling), "retry {retry}");
            assert!(waits.iter().any(|w| *w > ceiling / 2), "jitter spreads over the range");
        }
        assert_eq!(full_jitter(3, Duration::ZERO, cap, &mut rng), Duration::ZERO);
    }

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("6m0s"), Some(Duration::from_secs(360)));
        assert_eq!(parse_go_duration("1s"), Some(Duration::from_secs(1)));
        assert_eq!(parse_go_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_go_duration("1h2m3s"), Some(Duration::from_secs(3723)));
        assert_eq!(parse_go_duration("soon"), None);
        assert_eq!(parse_go_duration(""), None);
    }

    #[test]
    fn provider_requested_waits() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_225_600);
        assert_eq!(requested_wait(&headers(&[("retry-after", "30")]), now), Some(Duration::from_secs(30)));
        assert_eq!(
            requested_wait(&headers(&[("retry-after-ms", "1500"), ("retry-after", "30")]), now),
            Some(Duration::from_millis(1500))
        );
        let date = httpdate::fmt_http_date(now + Duration::from_secs(12));
        assert_eq!(requested_wait(&headers(&[("retry-after", &date)]), now), Some(Duration::from_secs(12)));
        assert_eq!(
            requested_wait(
                &headers(&[("x-ratelimit-reset-requests", "1s"), ("x-ratelimit-reset-tokens", "6m0s")]),
                now
            ),
            Some(Duration::from_secs(360))
        );
        let reset = humantime::format_rfc3339(now + Duration::from_secs(20)).to_string();
        assert_eq!(
            requested_wait(&headers(&[("anthropic-ratelimit-requests-reset", &reset)]), now),
            Some(Duration::from_secs(20))
        );
        assert_eq!(requested_wait(&headers(&[("retry-after", "later")]), now), None);
        assert_eq!(requested_wait(&HeaderMap::new(), now), None);
    }

    #[test]
    fn remaining_quota_from_either_provider() {
        let h = headers(&[("x-ratelimit-remaining-requests", "3"), ("x-ratelimit-remaining-tokens", "900")]);
        assert_eq!(remaining_quota(&h), (Some(3), Some(900)));
        let h = headers(&[("anthropic-ratelimit-requests-remaining", "0")]);
        assert_eq!(remaining_quota(&h), (Some(0), None));
    }
}

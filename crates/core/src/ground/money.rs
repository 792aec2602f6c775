//! Money as the budgets and the team count it.

/// USD as whole micro-dollars, as the team counts spend (never negative).
pub fn micros(usd: f64) -> i64 {
    if usd.is_finite() && usd > 0.0 {
        // Saturates at i64::MAX for absurd values.
        (usd * 1_000_000.0).round() as i64
    } else {
        0
    }
}

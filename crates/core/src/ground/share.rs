//! A team's limits split among its instances while their shared state is
//! out of reach: shares that add up to the limit exactly.
//!
//! Each instance knows the roll call it last saw: how many instances were
//! live and its own rank among them (the same order on every instance).
//! The instance of rank `r` among `n` takes `floor(limit / n)`, plus one
//! when `r < limit mod n`, so the `n` shares sum to `limit`: a cap of 4
//! over three instances is 2, 1 and 1; a cap of 1 is 1, 0 and 0. A share
//! of 0 passes the provider over. Rounding every share up instead (2, 2
//! and 2) would let the team exceed the cap by up to `n - 1`.

use std::sync::atomic::{AtomicU64, Ordering};

/// Where this instance stood at its team's last roll call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Roll {
    /// Instances live, this one included (at least 1).
    pub live: u32,
    /// This instance's place among them, from 0.
    pub rank: u32,
}

impl Roll {
    /// Alone, or the team's shared state in reach: the whole limits.
    pub const WHOLE: Roll = Roll { live: 1, rank: 0 };

    /// A roll call of `live` instances where this one is `rank`th; a rank
    /// past the end (a roll call read while it changed) is taken modulo.
    pub fn new(live: u32, rank: u32) -> Roll {
        let live = live.max(1);
        Roll { live, rank: rank % live }
    }

    /// Whether this is the whole of every limit.
    pub fn is_whole(self) -> bool {
        self.live <= 1
    }

    /// This instance's share of `limit`.
    pub fn share(self, limit: u32) -> u32 {
        // Never more than `limit`, so it fits.
        u32::try_from(self.share_u64(u64::from(limit))).unwrap_or(limit)
    }

    /// This instance's share of a wide limit (tokens a minute).
    pub fn share_u64(self, limit: u64) -> u64 {
        let n = u64::from(self.live.max(1));
        limit / n + u64::from(u64::from(self.rank) % n < limit % n)
    }

    /// This instance's share of a limit that may not be set.
    pub fn share_of(self, limit: Option<u32>) -> Option<u32> {
        limit.map(|l| self.share(l))
    }

    /// This instance's share of an amount (micro-dollars left of a
    /// budget); nothing of an amount already spent past.
    pub fn share_amount(self, amount: i64) -> i64 {
        // Positive, so it fits both ways.
        u64::try_from(amount).map_or(0, |a| i64::try_from(self.share_u64(a)).unwrap_or(amount))
    }

    fn pack(self) -> u64 {
        (u64::from(self.live) << 32) | u64::from(self.rank)
    }

    fn unpack(bits: u64) -> Roll {
        // Both halves are 32 bits wide by construction.
        Roll::new((bits >> 32) as u32, (bits & u64::from(u32::MAX)) as u32)
    }
}

/// A [`Roll`] read and replaced at once from any thread.
#[derive(Debug)]
pub struct AtomicRoll(AtomicU64);

impl AtomicRoll {
    pub fn new(roll: Roll) -> AtomicRoll {
        AtomicRoll(AtomicU64::new(roll.pack()))
    }

    pub fn load(&self) -> Roll {
        Roll::unpack(self.0.load(Ordering::Relaxed))
    }

    pub fn store(&self, roll: Roll) {
        self.0.store(roll.pack(), Ordering::Relaxed);
    }
}

impl Default for AtomicRoll {
    fn default() -> AtomicRoll {
        AtomicRoll::new(Roll::WHOLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_of_every_cap_from_one_to_ten_over_one_to_five_instances_sum_to_the_cap() {
        for limit in 1..=10u32 {
            for live in 1..=5u32 {
                let shares: Vec<u32> = (0..live).map(|rank| Roll::new(live, rank).share(limit)).collect();
                assert_eq!(shares.iter().sum::<u32>(), limit, "cap {limit} over {live}: {shares:?}");
                let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
                assert!(hi - lo <= 1, "as even as whole requests allow: cap {limit} over {live}: {shares:?}");
            }
        }
    }

    #[test]
    fn a_cap_of_four_or_one_over_three_splits_as_docs_team_md_says() {
        let shares = |limit, live| (0..live).map(|r| Roll::new(live, r).share(limit)).collect::<Vec<_>>();
        assert_eq!(shares(4, 3), vec![2, 1, 1]);
        assert_eq!(shares(1, 3), vec![1, 0, 0], "a server with one slot: one instance takes it");
        assert_eq!(shares(7, 1), vec![7]);
        assert_eq!(Roll::WHOLE.share(0), 0);
    }

    #[test]
    fn amounts_split_the_same_way_and_nothing_of_an_overspent_one() {
        for amount in [0i64, 1, 2, 999_999, 1_000_000, 1_000_001, 12_345_678_901] {
            for live in 1..=5u32 {
                let sum: i64 = (0..live).map(|r| Roll::new(live, r).share_amount(amount)).sum();
                assert_eq!(sum, amount, "{amount} over {live}");
            }
        }
        assert_eq!(Roll::new(3, 0).share_amount(-5), 0);
    }

    #[test]
    fn a_roll_survives_the_atomic_and_a_rank_past_the_end_wraps() {
        let a = AtomicRoll::default();
        assert_eq!(a.load(), Roll::WHOLE);
        a.store(Roll::new(5, 3));
        assert_eq!(a.load(), Roll { live: 5, rank: 3 });
        assert_eq!(Roll::new(3, 4), Roll { live: 3, rank: 1 });
        assert_eq!(Roll::new(0, 0), Roll::WHOLE);
    }
}

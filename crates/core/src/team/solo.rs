//! A gateway alone: a team of one. It shares nothing and counts nothing
//! beyond this instance, so every ask is answered at once, without
//! building it: this instance's own limits, ledger and cache decide.

use super::{
    Admission, Admitted, Asking, BoxFuture, Change, Seed, SharedCache, SpendCounters, Team, TeamView, Verdicts,
};

/// A team of one, named as a team would name it.
#[derive(Debug)]
pub struct Solo {
    name: String,
}

impl Solo {
    pub fn new(name: String) -> Solo {
        Solo { name }
    }
}

impl Team for Solo {
    fn instance(&self) -> &str {
        &self.name
    }

    fn connected(&self) -> bool {
        false
    }

    fn view(&self) -> BoxFuture<'_, TeamView> {
        Box::pin(async move { TeamView::solo(&self.name, "") })
    }
}

/// Alone, every decision stays this instance's own.
impl Verdicts for Solo {
    fn share(&self, change: Change) -> bool {
        let _ = change;
        false
    }
}

/// Alone, this instance's own caps and buckets are the only ones.
impl Admission for Solo {
    fn admit<'a>(&'a self, ask: Asking<'a>) -> BoxFuture<'a, Admitted> {
        drop(ask);
        Box::pin(std::future::ready(Admitted::Alone))
    }
}

/// Alone, this instance's ledger is the whole spend.
impl SpendCounters for Solo {
    fn seed_spend(&self, counter: &str, micros: i64, expires_at_ms: i64, seed: Seed) -> BoxFuture<'_, bool> {
        let _ = (counter, micros, expires_at_ms, seed);
        Box::pin(std::future::ready(false))
    }
}

/// Alone, the local cache is the whole cache.
impl SharedCache for Solo {}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn alone_every_ask_is_answered_without_being_built() {
        let solo = Solo::new("host:4141".into());
        let built = std::sync::atomic::AtomicBool::new(false);
        let ask: Asking<'_> = Box::new(|| {
            built.store(true, std::sync::atomic::Ordering::Relaxed);
            None
        });
        assert!(matches!(solo.admit(ask).await, Admitted::Alone));
        assert!(!built.load(std::sync::atomic::Ordering::Relaxed), "a team of one builds no ask");
        assert!(!solo.connected());
        assert_eq!(solo.instance(), "host:4141");
        assert_eq!(solo.view().await.state, "solo");
        assert!(solo.spent(vec!["c".into()]).await.is_none());
        assert!(!solo.seed_spend("c", 1, 0, Seed::Own).await);
    }
}

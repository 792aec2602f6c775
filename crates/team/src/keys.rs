//! Every key and channel the team uses, under its namespace. A provider's
//! keys share a hash tag (`{provider}`), so they land on one slot of a
//! Redis Cluster and one script may touch them together.

#[derive(Debug, Clone)]
pub struct Keys {
    ns: String,
}

impl Keys {
    pub fn new(namespace: &str) -> Keys {
        Keys { ns: namespace.to_owned() }
    }

    /// A cached answer shared by the team, by its cache key's hex (the
    /// hash tag keeps it on one slot with its fill lock).
    pub fn cache_entry(&self, key: &str) -> String {
        format!("{}:cache:{{{key}}}", self.ns)
    }

    /// Who fills a cached answer now.
    pub fn cache_lock(&self, key: &str) -> String {
        format!("{}:cache:{{{key}}}:fill", self.ns)
    }

    /// Where changes are announced.
    pub fn channel(&self) -> String {
        format!("{}:changes", self.ns)
    }

    /// Every instance's events, newest last (capped).
    pub fn events(&self) -> String {
        format!("{}:events", self.ns)
    }

    /// Live instances: id → heartbeat expiry (Redis ms).
    pub fn members(&self) -> String {
        format!("{}:members", self.ns)
    }

    /// One instance's particulars.
    pub fn member(&self, id: &str) -> String {
        format!("{}:member:{id}", self.ns)
    }

    /// A provider's breaker verdict: state, until, epoch, by, reason.
    pub fn breaker(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:breaker", self.ns)
    }

    /// Who holds the one probe of a provider's breaker.
    pub fn probe(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:probe", self.ns)
    }

    /// Instances that could not connect to a provider lately.
    pub fn suspects(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:suspects", self.ns)
    }

    /// A cool-down: of one key (by fingerprint) or, with `None`, the provider.
    pub fn cooling(&self, provider: &str, key: Option<&str>) -> String {
        format!("{}:{{{provider}}}:cool:{}", self.ns, key.unwrap_or("*"))
    }

    /// The cool-downs of a provider that may be in force, for a resync.
    pub fn cooling_index(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:cooling", self.ns)
    }

    /// Requests in flight on a provider, across the team: lease id → expiry.
    pub fn leases(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:leases", self.ns)
    }

    /// Requests in flight on one key of a provider (by fingerprint).
    pub fn key_leases(&self, provider: &str, key: &str) -> String {
        format!("{}:{{{provider}}}:leases:{key}", self.ns)
    }

    /// A provider's line across the team: ticket → arrival (ms, Redis's clock).
    pub fn line(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:line", self.ns)
    }

    /// When each place in a provider's line lapses unless asked for again.
    pub fn line_alive(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:line:alive", self.ns)
    }

    /// A provider's team-wide bucket of requests (`rpm`) or tokens (`tpm`) per minute.
    pub fn bucket(&self, provider: &str, which: &str) -> String {
        format!("{}:{{{provider}}}:{which}", self.ns)
    }

    /// A budget's spend in one period, across the team, in micro-dollars.
    /// Every budget's counter shares one hash tag: one script reserves
    /// against all that cover a request.
    pub fn spend(&self, counter: &str) -> String {
        format!("{}:{{budgets}}:spend:{counter}", self.ns)
    }

    /// The instances (by name) whose part a spend counter holds.
    pub fn spend_seeded(&self, counter: &str) -> String {
        format!("{}:{{budgets}}:seeded:{counter}", self.ns)
    }

    /// A settlement of spend made alone, by the instance's id and its
    /// number: taken once, however often it is sent.
    pub fn settled(&self, id: &str, number: u64) -> String {
        format!("{}:{{budgets}}:settled:{id}:{number}", self.ns)
    }

    /// Which instance announced a budget's threshold (`counter|threshold`).
    pub fn announced(&self, what: &str) -> String {
        format!("{}:{{budgets}}:announced:{what}", self.ns)
    }

    /// Keys refused by a provider: fingerprint → reason.
    pub fn revoked(&self, provider: &str) -> String {
        format!("{}:{{{provider}}}:revoked", self.ns)
    }

    /// Providers switched on or off by hand: name → 1 or 0.
    pub fn toggles(&self) -> String {
        format!("{}:toggles", self.ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_s_keys_share_one_hash_tag() {
        let k = Keys::new("acme");
        assert_eq!(k.breaker("openai"), "acme:{openai}:breaker");
        assert_eq!(k.probe("openai"), "acme:{openai}:probe");
        assert_eq!(k.cooling("openai", Some("ab")), "acme:{openai}:cool:ab");
        assert_eq!(k.cooling("openai", None), "acme:{openai}:cool:*");
        assert_eq!(k.channel(), "acme:changes");
    }

    #[test]
    fn every_budget_s_counters_share_one_hash_tag() {
        let k = Keys::new("acme");
        assert_eq!(k.spend("d|all|day|0"), "acme:{budgets}:spend:d|all|day|0");
        assert_eq!(k.spend_seeded("d|all|day|0"), "acme:{budgets}:seeded:d|all|day|0");
    }
}

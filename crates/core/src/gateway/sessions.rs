//! Dashboard sessions. A browser never holds the admin token: `switchyard
//! open` asks for a one-time ticket (with the token), opens
//! `/ui/login?ticket=…`, and the gateway trades the ticket for an HttpOnly,
//! SameSite=Strict cookie and redirects to a URL without it. The login form
//! trades a pasted admin token for the same cookie.
//!
//! The desktop window's pages come from another origin (`tauri://localhost`),
//! to which a `SameSite=Strict` cookie is never sent: it carries the session
//! id in the [`SESSION_HEADER`] instead. Either way the holder has a session,
//! which expires when idle and can be revoked, never the admin token.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use rand::RngCore;
use tokio::time::Instant;

/// A ticket must be redeemed within this long.
const TICKET_TTL: Duration = Duration::from_secs(120);
/// A session lasts this long after its last use (and its cookie as long).
pub const SESSION_IDLE_SECS: u64 = 12 * 3600;
const SESSION_IDLE: Duration = Duration::from_secs(SESSION_IDLE_SECS);
/// Live tickets and sessions kept at most; the oldest go first.
const MAX_ENTRIES: usize = 256;

/// The request header that carries a session id where a cookie cannot.
pub const SESSION_HEADER: axum::http::HeaderName = crate::ground::headers::name::X_SWITCHYARD_SESSION;

/// The cookie that carries a session. Cookies ignore ports, so the port is
/// in the name: two gateways on one machine keep separate sessions.
pub fn cookie_name(port: u16) -> String {
    format!("switchyard_session_{port}")
}

#[derive(Debug, Default)]
pub struct Sessions {
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// Ticket → when it expires.
    tickets: HashMap<String, Instant>,
    /// Session id → when it expires unless used again.
    sessions: HashMap<String, Instant>,
}

impl Table {
    fn sweep(&mut self, now: Instant) {
        self.tickets.retain(|_, until| *until > now);
        self.sessions.retain(|_, until| *until > now);
        for map in [&mut self.tickets, &mut self.sessions] {
            while map.len() >= MAX_ENTRIES {
                let oldest = map.iter().min_by_key(|(_, until)| **until).map(|(k, _)| k.clone());
                match oldest {
                    Some(k) => map.remove(&k),
                    None => break,
                };
            }
        }
    }
}

impl Sessions {
    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new one-time ticket.
    pub fn ticket(&self) -> String {
        let now = Instant::now();
        let ticket = random_token();
        let mut t = self.table();
        t.sweep(now);
        t.tickets.insert(ticket.clone(), now + TICKET_TTL);
        ticket
    }

    /// Trades a live ticket for a new session id; a ticket works once.
    pub fn redeem(&self, ticket: &str) -> Option<String> {
        let now = Instant::now();
        let mut t = self.table();
        t.sweep(now);
        t.tickets.remove(ticket)?;
        Some(Self::open(&mut t, now))
    }

    /// Opens a session for someone who proved they hold the admin token.
    pub fn login(&self) -> String {
        let now = Instant::now();
        let mut t = self.table();
        t.sweep(now);
        Self::open(&mut t, now)
    }

    fn open(t: &mut Table, now: Instant) -> String {
        let id = random_token();
        t.sessions.insert(id.clone(), now + SESSION_IDLE);
        id
    }

    /// Whether `id` is a live session; using it extends it.
    pub fn check(&self, id: &str) -> bool {
        let now = Instant::now();
        let mut t = self.table();
        // A hash lookup: ids are 256 random bits, so timing reveals nothing useful.
        match t.sessions.get_mut(id) {
            Some(until) if *until > now => {
                *until = now + SESSION_IDLE;
                true
            }
            _ => false,
        }
    }

    pub fn logout(&self, id: &str) {
        self.table().sessions.remove(id);
    }
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The value of cookie `name` in a `Cookie` header.
pub fn cookie<'a>(header: &'a str, name: &str) -> Option<&'a str> {
    header.split(';').filter_map(|pair| pair.trim().split_once('=')).find(|(k, _)| *k == name).map(|(_, v)| v.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_ticket_works_once_and_expires() {
        let s = Sessions::default();
        let ticket = s.ticket();
        let session = s.redeem(&ticket).unwrap();
        assert!(s.check(&session));
        assert!(s.redeem(&ticket).is_none(), "a ticket is single-use");

        let late = s.ticket();
        tokio::time::advance(TICKET_TTL + Duration::from_secs(1)).await;
        assert!(s.redeem(&late).is_none(), "an old ticket is refused");
    }

    #[tokio::test(start_paused = true)]
    async fn sessions_expire_when_idle_and_on_logout() {
        let s = Sessions::default();
        let a = s.login();
        let b = s.login();
        tokio::time::advance(SESSION_IDLE / 2).await;
        assert!(s.check(&a));
        tokio::time::advance(SESSION_IDLE / 2 + Duration::from_secs(1)).await;
        assert!(s.check(&a), "use extends a session");
        assert!(!s.check(&b), "an idle session ends");
        s.logout(&a);
        assert!(!s.check(&a));
        assert!(!s.check("not-a-session"));
    }

    #[test]
    fn cookies_are_found_by_name() {
        let h = "a=1; switchyard_session_4141=abc ; b=2";
        assert_eq!(cookie(h, "switchyard_session_4141"), Some("abc"));
        assert_eq!(cookie(h, "switchyard_session_4142"), None);
    }
}

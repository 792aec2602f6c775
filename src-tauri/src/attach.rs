//! Attaching to another Switchyard that already serves the address. The app
//! holds the admin token (same data dir), so it could be that gateway's
//! owner; but another local user can bind the port first. The token goes
//! only to a gateway that proved it holds the same token (a challenge it
//! answers without either side revealing it), and the window then gets a
//! dashboard session from it, never the token itself.

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};
use switchyard_core::http::{cookie, cookie_name, SESSION_HEADER};
use switchyard_host::gateway_client::{verify_gateway, VerifyError};

/// How long the gateway on the port has to answer each step.
const ANSWER_WITHIN: Duration = Duration::from_secs(2);

/// Why the app did not attach, or got no session from the gateway it attached to.
#[derive(Debug, thiserror::Error)]
pub enum AttachError {
    /// It did not prove it holds the admin token: nothing secret was sent.
    #[error("the program on {0} is not this user's Switchyard")]
    NotOurs(SocketAddr),
    #[error("the Switchyard on {0} does not answer")]
    Unreachable(SocketAddr),
    #[error("the Switchyard on {addr} refused to sign the window in ({status})")]
    Refused { addr: SocketAddr, status: u16 },
    #[error("cannot make an HTTP client: {0}")]
    Client(#[from] reqwest::Error),
}

/// A gateway on `addr` that proved it holds the admin token. Its client
/// keeps one connection open, so what follows the check goes to the
/// process that passed it.
#[derive(Debug)]
pub struct Verified {
    http: reqwest::Client,
    addr: SocketAddr,
}

/// Asks whatever holds `addr` to prove it holds `token`, revealing nothing.
pub async fn verify(addr: SocketAddr, token: &SecretString) -> Result<Verified, AttachError> {
    let http = switchyard_host::gateway_client::client_builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(ANSWER_WITHIN)
        .build()?;
    // A program that accepts and never answers is not ours either.
    match tokio::time::timeout(ANSWER_WITHIN, verify_gateway(&http, addr, token)).await {
        Ok(Ok(())) => Ok(Verified { http, addr }),
        Ok(Err(VerifyError::Unreachable(_))) => Err(AttachError::Unreachable(addr)),
        Ok(Err(_)) | Err(_) => Err(AttachError::NotOurs(addr)),
    }
}

impl Verified {
    /// A dashboard session for the window: `kept` while the gateway still
    /// knows it, else a new one, from a one-time ticket (bought with the
    /// token) traded at `/ui/login` as a browser would.
    pub async fn session(&self, token: &SecretString, kept: Option<String>) -> Result<String, AttachError> {
        if let Some(id) = kept {
            if self.knows(&id).await {
                return Ok(id);
            }
        }
        let ticket = self.ticket(token).await?;
        let url = format!("http://{}/ui/login?ticket={ticket}", self.addr);
        let traded = self.http.get(url).send().await.map_err(|_| AttachError::Unreachable(self.addr))?;
        let name = cookie_name(self.addr.port());
        let refused = AttachError::Refused { addr: self.addr, status: traded.status().as_u16() };
        let set = traded.headers().get(reqwest::header::SET_COOKIE).and_then(|v| v.to_str().ok());
        set.and_then(|c| cookie(c, &name)).filter(|id| !id.is_empty()).map(str::to_string).ok_or(refused)
    }

    async fn knows(&self, id: &str) -> bool {
        let url = format!("http://{}/admin/providers", self.addr);
        let answer = self.http.get(url).header(SESSION_HEADER, id).send().await;
        answer.is_ok_and(|r| r.status().is_success())
    }

    async fn ticket(&self, token: &SecretString) -> Result<String, AttachError> {
        let url = format!("http://{}/admin/session", self.addr);
        let answer = self.http.post(url).bearer_auth(token.expose_secret()).send().await;
        let answer = answer.map_err(|_| AttachError::Unreachable(self.addr))?;
        let refused = AttachError::Refused { addr: self.addr, status: answer.status().as_u16() };
        if !answer.status().is_success() {
            return Err(refused);
        }
        let body: serde_json::Value = answer.json().await.map_err(|_| AttachError::Unreachable(self.addr))?;
        body["ticket"].as_str().map(str::to_string).ok_or(refused)
    }
}

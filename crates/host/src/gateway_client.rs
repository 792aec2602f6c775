//! Reaching a running gateway on loopback. Its admin token is sent only after the gateway has proved it holds it
//! ([`verify_gateway`]): another local user who binds the port first must
//! not receive it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use anyhow::Result;
use secrecy::SecretString;
use serde_json::Value;
use switchyard_core::admin;

use crate::paths;

/// An HTTP client for the gateway on loopback: no proxy, no public roots.
/// One connection is kept alive, so the requests after the check go to the
/// process that passed it.
pub fn client() -> Result<reqwest::Client> {
    Ok(client_builder().build()?)
}

/// [`client`]'s settings, for a caller that adds its own (the desktop app's
/// deadline and redirect policy).
pub fn client_builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .no_proxy()
        .tls_built_in_root_certs(false)
        .pool_max_idle_per_host(1)
        .connect_timeout(std::time::Duration::from_secs(5))
}

/// Where to reach a gateway that listens on `listen`: an unspecified
/// address (`0.0.0.0`, `[::]`) is reached on loopback.
pub fn reachable(listen: SocketAddr) -> SocketAddr {
    match listen.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => SocketAddr::from((Ipv4Addr::LOCALHOST, listen.port())),
        IpAddr::V6(ip) if ip.is_unspecified() => SocketAddr::from((Ipv6Addr::LOCALHOST, listen.port())),
        _ => listen,
    }
}

/// Why a gateway was not trusted with the admin token.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("nothing answers at {0}")]
    Unreachable(SocketAddr),
    #[error(
        "the program listening on {0} is not this user's Switchyard (it could not prove it holds the admin token): \
         the token was not sent. Stop that program, or point at your gateway with --listen"
    )]
    Impostor(SocketAddr),
}

/// Asks the gateway at `addr` to prove it holds `token` (an HMAC of a fresh
/// nonce and its own address, see `switchyard_core::admin::whoami`), without
/// revealing the token. Anything but a valid proof is an impostor.
pub async fn verify_gateway(http: &reqwest::Client, addr: SocketAddr, token: &SecretString) -> Result<(), VerifyError> {
    let nonce = paths::random_hex(32);
    let url = format!("http://{addr}{}?nonce={nonce}", admin::whoami::PATH);
    let response = http.get(url).send().await.map_err(|_| VerifyError::Unreachable(addr))?;
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let proof = body["proof"].as_str().unwrap_or("");
    if admin::whoami::verify(token, &nonce, addr, proof) {
        Ok(())
    } else {
        Err(VerifyError::Impostor(addr))
    }
}

//! Proof that a gateway is the one a client means, before the client sends
//! it a secret. Whatever process binds the port first receives what clients
//! send there, so the CLI and the desktop app ask before they send the admin
//! token: `GET /admin/whoami?nonce=<hex>` answers with an HMAC-SHA256, under
//! the admin token, of the nonce and the address the gateway accepted the
//! connection on. Only a holder of the token can answer, and the token never
//! crosses the wire. The address in the proof stops an impostor on another
//! port or address from relaying the question to the real gateway and
//! passing its answer off as its own.

use std::net::SocketAddr;

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use secrecy::{ExposeSecret, SecretString};
use serde::Deserialize;

use crate::admin::base::AdminError;
use crate::gateway::Gateway;

/// Where the gateway answers the challenge.
pub const PATH: &str = "/admin/whoami";

/// What the proof is about, so an HMAC under the admin token made for this
/// purpose can mean nothing else.
const CONTEXT: &[u8] = b"switchyard whoami v1\n";

/// The address the gateway accepted a connection on, as request extension.
#[derive(Debug, Clone, Copy)]
pub struct LocalAddr(pub SocketAddr);

/// A nonce is 16 to 64 random bytes, hex-encoded.
fn valid_nonce(nonce: &str) -> bool {
    (32..=128).contains(&nonce.len()) && nonce.bytes().all(|b| b.is_ascii_hexdigit())
}

fn key(token: &SecretString) -> ring::hmac::Key {
    ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token.expose_secret().as_bytes())
}

fn message(nonce: &str, local: SocketAddr) -> Vec<u8> {
    let mut m = CONTEXT.to_vec();
    m.extend_from_slice(local.to_string().as_bytes());
    m.push(b'\n');
    m.extend_from_slice(nonce.as_bytes());
    m
}

/// The proof a gateway holding `token`, reached at `local`, gives for `nonce`.
pub fn proof(token: &SecretString, nonce: &str, local: SocketAddr) -> String {
    let tag = ring::hmac::sign(&key(token), &message(nonce, local));
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether `proof` (hex) shows the token's holder answered at `local`;
/// compared in constant time.
pub fn verify(token: &SecretString, nonce: &str, local: SocketAddr, proof: &str) -> bool {
    let Some(tag) = unhex(proof) else { return false };
    ring::hmac::verify(&key(token), &message(nonce, local), &tag).is_ok()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok()).collect()
}

#[derive(Debug, Deserialize)]
pub(crate) struct Challenge {
    nonce: String,
}

/// `GET /admin/whoami?nonce=…`: open to anyone the guard lets in, since the
/// answer reveals nothing without the token.
pub(crate) async fn whoami(
    State(gw): State<Gateway>,
    local: Option<Extension<LocalAddr>>,
    Query(q): Query<Challenge>,
) -> Result<Response, AdminError> {
    let Some(token) = gw.admin_token() else {
        return Err(AdminError::admin_disabled());
    };
    if !valid_nonce(&q.nonce) {
        return Err(AdminError::bad_request("bad_nonce", "nonce must be 32 to 128 hex digits"));
    }
    let Some(Extension(LocalAddr(local))) = local else {
        return Err(AdminError::internal("no_local_address", "this connection has no local address to prove"));
    };
    let body = serde_json::json!({ "address": local.to_string(), "proof": proof(token, &q.nonce, local) });
    Ok((StatusCode::OK, Json(body)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(t: &str) -> SecretString {
        SecretString::from(t.to_string())
    }

    #[test]
    fn only_the_token_and_the_address_prove() {
        let nonce = "00112233445566778899aabbccddeeff";
        let here: SocketAddr = "127.0.0.1:4141".parse().unwrap();
        let p = proof(&token("sya-1"), nonce, here);
        assert!(verify(&token("sya-1"), nonce, here, &p));
        assert!(!verify(&token("sya-2"), nonce, here, &p), "another token");
        assert!(!verify(&token("sya-1"), nonce, "127.0.0.1:4142".parse().unwrap(), &p), "another port");
        assert!(!verify(&token("sya-1"), "ffeeddccbbaa99887766554433221100", here, &p), "another nonce");
        assert!(!verify(&token("sya-1"), nonce, here, "zz"), "not hex");
        assert!(!verify(&token("sya-1"), nonce, here, ""), "empty");
    }

    #[test]
    fn nonces_are_hex_of_a_sane_length() {
        assert!(valid_nonce(&"a".repeat(32)));
        assert!(!valid_nonce(&"a".repeat(31)));
        assert!(!valid_nonce(&"a".repeat(129)));
        assert!(!valid_nonce(&format!("{}g", "a".repeat(31))));
    }
}

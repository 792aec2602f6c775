//! The one place that decides what an upstream outcome means for the request.
//! Every outcome kind is matched explicitly, so a new kind must be decided
//! here rather than silently retried.

use axum::http::StatusCode;

/// What happened when the gateway called a provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The provider answered with this status.
    Status(StatusCode),
    /// No connection could be made (refused, DNS, TLS).
    Connect,
    /// The connection was made but the request or response head failed.
    Transport,
    /// The attempt ran out of time.
    Timeout,
}

/// What the gateway does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Hand this response to the client (success, or an error only the client can fix).
    Relay,
    /// Try the next provider in the chain.
    NextProvider,
}

pub fn decide(outcome: Outcome) -> Decision {
    match outcome {
        Outcome::Status(status) if status.is_server_error() => Decision::NextProvider,
        Outcome::Status(_) => Decision::Relay,
        Outcome::Connect | Outcome::Transport | Outcome::Timeout => Decision::NextProvider,
    }
}

/// Classifies a transport error from the HTTP client.
pub fn of_error(error: &reqwest::Error) -> Outcome {
    if error.is_timeout() {
        Outcome::Timeout
    } else if error.is_connect() {
        Outcome::Connect
    } else {
        Outcome::Transport
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_errors_and_transport_failures_move_on() {
        for code in [500, 502, 503, 504, 529] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(decide(Outcome::Status(status)), Decision::NextProvider, "{code}");
        }
        for outcome in [Outcome::Connect, Outcome::Transport, Outcome::Timeout] {
            assert_eq!(decide(outcome), Decision::NextProvider);
        }
    }

    #[test]
    fn client_errors_and_success_are_relayed() {
        for code in [200, 400, 401, 403, 404, 413, 422, 429] {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(decide(Outcome::Status(status)), Decision::Relay, "{code}");
        }
    }
}

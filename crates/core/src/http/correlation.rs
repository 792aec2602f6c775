//! Request and correlation ids. Every request gets a fresh, time-ordered id
//! (UUIDv7); a caller's own id is kept as the correlation id so that a trace
//! spanning several tools can be followed through the gateway.

use axum::http::HeaderMap;

use crate::ground::headers::name;

/// Longest client-supplied correlation id kept; longer ones are replaced.
const MAX_CORRELATION_LEN: usize = 128;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestIds {
    pub request_id: String,
    pub correlation_id: String,
}

impl RequestIds {
    pub fn from_headers(headers: &HeaderMap) -> RequestIds {
        let request_id = uuid::Uuid::now_v7().to_string();
        let supplied = [name::X_REQUEST_ID, name::X_CORRELATION_ID]
            .into_iter()
            .filter_map(|header| headers.get(header)?.to_str().ok())
            .map(str::trim)
            .find(|v| is_acceptable(v));
        let correlation_id = supplied.map_or_else(|| request_id.clone(), str::to_string);
        RequestIds { request_id, correlation_id }
    }
}

fn is_acceptable(id: &str) -> bool {
    !id.is_empty() && id.len() <= MAX_CORRELATION_LEN && id.bytes().all(|b| b.is_ascii_graphic())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    #[test]
    fn fresh_ids_are_time_ordered_and_unique() {
        let a = RequestIds::from_headers(&HeaderMap::new());
        let b = RequestIds::from_headers(&HeaderMap::new());
        assert_ne!(a.request_id, b.request_id);
        assert!(a.request_id < b.request_id, "UUIDv7 sorts by time");
        assert_eq!(a.correlation_id, a.request_id);
    }

    #[test]
    fn client_ids_become_the_correlation_id() {
        let mut h = HeaderMap::new();
        h.insert("x-correlation-id", HeaderValue::from_static("trace-42"));
        assert_eq!(RequestIds::from_headers(&h).correlation_id, "trace-42");
        h.insert("x-request-id", HeaderValue::from_static("req-7"));
        assert_eq!(RequestIds::from_headers(&h).correlation_id, "req-7");
        h.insert("x-request-id", HeaderValue::from_static("has space"));
        assert_eq!(RequestIds::from_headers(&h).correlation_id, "trace-42");
    }
}

//! The system's trusted root certificates, for every TLS client of the
//! gateway (providers, the OpenTelemetry collector).

use tracing::warn;

/// The system's trusted roots. Certificates that fail to load are skipped
/// (and said so), as a browser would: a server whose chain needs one of
/// them fails its own requests, with the TLS error, instead of every
/// client failing at start. None at all is an empty store, not an error:
/// plain-HTTP servers are still reached.
pub fn system_roots() -> rustls::RootCertStore {
    let found = rustls_native_certs::load_native_certs();
    for error in &found.errors {
        warn!("a system root certificate could not be loaded: {error}");
    }
    let mut roots = rustls::RootCertStore::empty();
    let (_, ignored) = roots.add_parsable_certificates(found.certs);
    if ignored > 0 {
        warn!("{ignored} system root certificates could not be parsed and are not trusted");
    }
    roots
}

/// A TLS client configuration that trusts `roots`, on the ring provider
/// the whole gateway uses.
pub fn client_config(roots: rustls::RootCertStore) -> Result<rustls::ClientConfig, rustls::Error> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

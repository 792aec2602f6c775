//! Tracing setup: human lines by default, JSON lines on request. The level
//! comes from `RUST_LOG`, else a per-command default.

use tracing_subscriber::EnvFilter;

use crate::LogFormat;

/// `default` applies when `RUST_LOG` is unset.
pub fn init(format: LogFormat, default: &str) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(true).with_span_list(false).try_init(),
    };
    if let Err(e) = result {
        eprintln!("switchyard: logging is not available: {e}");
    }
}

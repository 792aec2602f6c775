//! `[telemetry]`: where the gateway's OpenTelemetry traces go. Each field
//! has the standard variable of the OpenTelemetry SDKs beside it, and the
//! variable wins when both are set (`telemetry::trace::settings` resolves
//! them at start).

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::{ConfigError, Validator};

/// `[telemetry]` as written; each field is the variable named beside it.
#[derive(Clone, Default, PartialEq)]
pub struct TelemetryConfig {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL (`/v1/traces` is added for HTTP).
    pub endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the traces URL, used as it is.
    pub traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`: `http/protobuf` (the default) or `grpc`.
    pub protocol: Option<String>,
    /// `OTEL_EXPORTER_OTLP_HEADERS`: sent with every export (a collector's API key).
    pub headers: BTreeMap<String, String>,
    /// `OTEL_SERVICE_NAME`.
    pub service_name: Option<String>,
    /// `OTEL_RESOURCE_ATTRIBUTES`.
    pub resource_attributes: BTreeMap<String, String>,
    /// `OTEL_TRACES_SAMPLER`.
    pub sampler: Option<String>,
    /// `OTEL_TRACES_SAMPLER_ARG`.
    pub sampler_arg: Option<f64>,
    /// `OTEL_SDK_DISABLED`.
    pub disabled: Option<bool>,
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`: prompts and
    /// answers on the attempt spans, scrubbed as captures are. Off unless asked.
    pub capture_content: Option<bool>,
    /// `OTEL_BSP_SCHEDULE_DELAY`: how long a span waits for its batch, in ms.
    pub schedule_delay_ms: Option<u64>,
    /// `OTEL_BSP_MAX_QUEUE_SIZE`: spans held while the collector is slow; more are dropped.
    pub max_queue_size: Option<u64>,
    /// `OTEL_BSP_MAX_EXPORT_BATCH_SIZE`: spans sent in one export.
    pub max_export_batch_size: Option<u64>,
    /// `OTEL_BSP_EXPORT_TIMEOUT`: one batch's export's limit, in ms.
    pub export_timeout_ms: Option<u64>,
    /// `OTEL_EXPORTER_OTLP_TIMEOUT`: one request to the collector's limit, in ms.
    pub timeout_ms: Option<u64>,
}

/// Without the headers' values (a collector's API key) or the endpoints' passwords.
impl std::fmt::Debug for TelemetryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = |u: &Option<String>| u.as_deref().map(shown_url);
        f.debug_struct("TelemetryConfig")
            .field("endpoint", &shown(&self.endpoint))
            .field("traces_endpoint", &shown(&self.traces_endpoint))
            .field("protocol", &self.protocol)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("service_name", &self.service_name)
            .field("resource_attributes", &self.resource_attributes)
            .field("sampler", &self.sampler)
            .field("sampler_arg", &self.sampler_arg)
            .field("disabled", &self.disabled)
            .field("capture_content", &self.capture_content)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTelemetry {
    endpoint: Option<Spanned<String>>,
    traces_endpoint: Option<Spanned<String>>,
    protocol: Option<Spanned<String>>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    service_name: Option<String>,
    #[serde(default)]
    resource_attributes: BTreeMap<String, String>,
    sampler: Option<Spanned<String>>,
    sampler_arg: Option<Spanned<f64>>,
    disabled: Option<bool>,
    capture_content: Option<bool>,
    schedule_delay_ms: Option<u64>,
    max_queue_size: Option<Spanned<u64>>,
    max_export_batch_size: Option<Spanned<u64>>,
    export_timeout_ms: Option<u64>,
    timeout_ms: Option<u64>,
}

/// The samplers the OpenTelemetry SDKs name in `OTEL_TRACES_SAMPLER`.
pub const SAMPLERS: [&str; 6] = [
    "always_on",
    "always_off",
    "traceidratio",
    "parentbased_always_on",
    "parentbased_always_off",
    "parentbased_traceidratio",
];

/// A URL as it may be logged: without the user and password it may carry.
pub fn shown_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// Whether `url` is one an exporter can send to.
pub fn is_endpoint(url: &str) -> bool {
    url::Url::parse(url).is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some())
}

impl Validator<'_> {
    pub(super) fn telemetry(&self, raw: RawTelemetry) -> Result<TelemetryConfig, ConfigError> {
        for (field, url) in [("telemetry.endpoint", &raw.endpoint), ("telemetry.traces_endpoint", &raw.traces_endpoint)]
        {
            if let Some(url) = url.as_ref().filter(|u| !is_endpoint(u.get_ref())) {
                return self.error(url.span(), field, format!("{:?} is not an http:// or https:// URL", url.get_ref()));
            }
        }
        if let Some(p) = raw.protocol.as_ref().filter(|p| !matches!(p.get_ref().as_str(), "http/protobuf" | "grpc")) {
            return self.error(
                p.span(),
                "telemetry.protocol",
                format!("{:?} is not \"http/protobuf\" or \"grpc\"", p.get_ref()),
            );
        }
        if let Some(s) = raw.sampler.as_ref().filter(|s| !SAMPLERS.contains(&s.get_ref().as_str())) {
            return self.error(
                s.span(),
                "telemetry.sampler",
                format!("{:?} is not one of {}", s.get_ref(), SAMPLERS.join(", ")),
            );
        }
        if let Some(a) = raw.sampler_arg.as_ref().filter(|a| !(0.0..=1.0).contains(a.get_ref())) {
            return self.error(a.span(), "telemetry.sampler_arg", "must be a ratio from 0 to 1");
        }
        for (field, n) in [
            ("telemetry.max_queue_size", &raw.max_queue_size),
            ("telemetry.max_export_batch_size", &raw.max_export_batch_size),
        ] {
            if let Some(n) = n.as_ref().filter(|n| !(1..=1_000_000).contains(n.get_ref())) {
                return self.error(n.span(), field, "must be a whole number from 1 to 1000000");
            }
        }
        Ok(TelemetryConfig {
            endpoint: raw.endpoint.map(Spanned::into_inner),
            traces_endpoint: raw.traces_endpoint.map(Spanned::into_inner),
            protocol: raw.protocol.map(Spanned::into_inner),
            headers: raw.headers,
            service_name: raw.service_name,
            resource_attributes: raw.resource_attributes,
            sampler: raw.sampler.map(Spanned::into_inner),
            sampler_arg: raw.sampler_arg.map(Spanned::into_inner),
            disabled: raw.disabled,
            capture_content: raw.capture_content,
            schedule_delay_ms: raw.schedule_delay_ms,
            max_queue_size: raw.max_queue_size.map(Spanned::into_inner),
            max_export_batch_size: raw.max_export_batch_size.map(Spanned::into_inner),
            export_timeout_ms: raw.export_timeout_ms,
            timeout_ms: raw.timeout_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::config::tests::{invalid, parse};

    #[test]
    fn the_section_is_read_and_checked_field_by_field() {
        let config = parse(
            "[telemetry]\nendpoint = \"http://127.0.0.1:4318\"\nprotocol = \"grpc\"\nsampler = \"traceidratio\"\nsampler_arg = 0.25\nheaders = { \"x-api-key\" = \"k\" }\n",
        )
        .unwrap();
        let t = config.telemetry;
        assert_eq!(t.endpoint.as_deref(), Some("http://127.0.0.1:4318"));
        assert_eq!((t.protocol.as_deref(), t.sampler_arg), (Some("grpc"), Some(0.25)));
        assert_eq!(t.headers.get("x-api-key").map(String::as_str), Some("k"));
        for (text, field) in [
            ("[telemetry]\nendpoint = \"localhost:4318\"\n", "telemetry.endpoint"),
            ("[telemetry]\ntraces_endpoint = \"ftp://x\"\n", "telemetry.traces_endpoint"),
            ("[telemetry]\nprotocol = \"http/json\"\n", "telemetry.protocol"),
            ("[telemetry]\nsampler = \"sometimes\"\n", "telemetry.sampler"),
            ("[telemetry]\nsampler_arg = 2.0\n", "telemetry.sampler_arg"),
        ] {
            let (line, f, _) = invalid(text);
            assert_eq!((line, f.as_str()), (2, field), "{text}");
        }
    }
}

//! Where traces go and which are kept, from the standard `OTEL_*`
//! variables and `[telemetry]`: a variable wins over the file, as the
//! OpenTelemetry specification says. No endpoint anywhere: no tracing.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::config::TelemetryConfig;

/// How spans reach the collector (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    HttpProtobuf,
    Grpc,
}

/// Which traces are kept (`OTEL_TRACES_SAMPLER` and its argument).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sampling {
    AlwaysOn,
    AlwaysOff,
    /// This share of traces, chosen by trace id (so every hop that uses the
    /// same rule keeps the same traces).
    Ratio(f64),
    /// The client's decision when it sent one; the root rule otherwise.
    ParentBased(Root),
}

/// A parent-based sampler's rule for a trace the gateway starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Root {
    AlwaysOn,
    AlwaysOff,
    Ratio(f64),
}

impl Sampling {
    /// Whether a span with this trace id and this parent (`Some(sampled)`
    /// when the client sent a `traceparent`) is recorded.
    pub fn keeps(self, trace_id: [u8; 16], parent: Option<bool>) -> bool {
        match (self, parent) {
            (Sampling::AlwaysOn, _) => true,
            (Sampling::AlwaysOff, _) => false,
            (Sampling::Ratio(r), _) => ratio_keeps(r, trace_id),
            (Sampling::ParentBased(_), Some(sampled)) => sampled,
            (Sampling::ParentBased(Root::AlwaysOn), None) => true,
            (Sampling::ParentBased(Root::AlwaysOff), None) => false,
            (Sampling::ParentBased(Root::Ratio(r)), None) => ratio_keeps(r, trace_id),
        }
    }
}

/// The OpenTelemetry SDKs' rule: the trace id's last eight bytes, as a
/// number, under the ratio's share of the range.
fn ratio_keeps(ratio: f64, trace_id: [u8; 16]) -> bool {
    let mut low = [0u8; 8];
    low.copy_from_slice(&trace_id[8..]);
    let n = u64::from_be_bytes(low) >> 1;
    // Exact at the ends; the cast rounds in between, as the SDKs' does.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
    let bound = (ratio.clamp(0.0, 1.0) * (1u64 << 63) as f64) as u64;
    n < bound
}

/// Tracing as resolved: built only when an endpoint is set and the SDK is not disabled.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSettings {
    /// The URL spans are sent to, whole.
    pub endpoint: String,
    pub transport: Transport,
    pub headers: BTreeMap<String, String>,
    pub service_name: String,
    /// Resource attributes besides the service's name (`service.instance.id` is the gateway's).
    pub resource: BTreeMap<String, String>,
    pub sampling: Sampling,
    /// Prompts and answers on the attempt spans, scrubbed.
    pub capture_content: bool,
    pub batch: Batch,
}

/// The batch span processor's bounds (`OTEL_BSP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// How long a span waits for others to fill its batch.
    pub delay: Duration,
    /// Spans held at most while the collector is slow; more are dropped.
    pub max_queue: usize,
    pub max_batch: usize,
    /// One export's limit, retries included.
    pub timeout: Duration,
}

impl Default for Batch {
    /// The OpenTelemetry SDKs' defaults.
    fn default() -> Batch {
        Batch { delay: Duration::from_secs(5), max_queue: 2048, max_batch: 512, timeout: Duration::from_secs(30) }
    }
}

/// A variable or setting that cannot be used, named.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("{setting}: {message}")]
pub struct SettingsError {
    /// The variable's name, or `[telemetry] field`.
    pub setting: String,
    pub message: String,
}

fn invalid(setting: &str, message: impl Into<String>) -> SettingsError {
    SettingsError { setting: setting.to_string(), message: message.into() }
}

/// A source of variables: the process's environment, or a test's map.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment, empty values taken as unset (as the SDKs do).
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// Tracing as `config` and `env` say, `None` when off.
pub fn resolve(config: &TelemetryConfig, env: Env<'_>) -> Result<Option<TraceSettings>, SettingsError> {
    let var = |name: &str| env(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
    let disabled = match var("OTEL_SDK_DISABLED") {
        Some(v) => parse_bool("OTEL_SDK_DISABLED", &v)?,
        None => config.disabled.unwrap_or(false),
    };
    if disabled {
        return Ok(None);
    }
    let transport = match var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .map(|v| ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", v))
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL").map(|v| ("OTEL_EXPORTER_OTLP_PROTOCOL", v)))
        .or_else(|| config.protocol.clone().map(|v| ("[telemetry] protocol", v)))
    {
        None => Transport::HttpProtobuf,
        Some((setting, v)) => transport(setting, &v)?,
    };
    let Some(endpoint) = endpoint(config, &var, transport)? else { return Ok(None) };
    let mut headers = config.headers.clone();
    for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
        if let Some(v) = var(name) {
            headers.extend(pairs(name, &v)?);
        }
    }
    // Service name: the variable, the variables' resource, the file's name, the file's resource.
    let mut resource = config.resource_attributes.clone();
    let from_file = resource.remove("service.name");
    let mut from_env = match var("OTEL_RESOURCE_ATTRIBUTES") {
        Some(v) => pairs("OTEL_RESOURCE_ATTRIBUTES", &v)?,
        None => BTreeMap::new(),
    };
    let env_named = from_env.remove("service.name");
    resource.extend(from_env);
    let service_name = var("OTEL_SERVICE_NAME")
        .or(env_named)
        .or_else(|| config.service_name.clone())
        .or(from_file)
        .unwrap_or_else(|| "switchyard".to_string());
    let capture_content = match var("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
        Some(v) => parse_bool("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", &v)?,
        None => config.capture_content.unwrap_or(false),
    };
    Ok(Some(TraceSettings {
        endpoint,
        transport,
        headers,
        service_name,
        resource,
        sampling: sampling(config, &var)?,
        capture_content,
        batch: batch(config, &var)?,
    }))
}

fn transport(setting: &str, v: &str) -> Result<Transport, SettingsError> {
    match v {
        "http/protobuf" => Ok(Transport::HttpProtobuf),
        "grpc" => Ok(Transport::Grpc),
        other => Err(invalid(setting, format!("{other:?} is not \"http/protobuf\" or \"grpc\""))),
    }
}

/// The traces URL: a signal's own endpoint as it is; a base endpoint with
/// `/v1/traces` added for HTTP (gRPC names no path).
fn endpoint(
    config: &TelemetryConfig,
    var: &dyn Fn(&str) -> Option<String>,
    transport: Transport,
) -> Result<Option<String>, SettingsError> {
    let chosen = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .map(|v| ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", v, true))
        .or_else(|| var("OTEL_EXPORTER_OTLP_ENDPOINT").map(|v| ("OTEL_EXPORTER_OTLP_ENDPOINT", v, false)))
        .or_else(|| config.traces_endpoint.clone().map(|v| ("[telemetry] traces_endpoint", v, true)))
        .or_else(|| config.endpoint.clone().map(|v| ("[telemetry] endpoint", v, false)));
    let Some((setting, url, whole)) = chosen else { return Ok(None) };
    if !crate::config::is_telemetry_endpoint(&url) {
        return Err(invalid(setting, format!("{url:?} is not an http:// or https:// URL")));
    }
    Ok(Some(match (whole, transport) {
        (true, _) | (false, Transport::Grpc) => url,
        (false, Transport::HttpProtobuf) => format!("{}/v1/traces", url.trim_end_matches('/')),
    }))
}

fn sampling(config: &TelemetryConfig, var: &dyn Fn(&str) -> Option<String>) -> Result<Sampling, SettingsError> {
    let (setting, name) = match var("OTEL_TRACES_SAMPLER") {
        Some(v) => ("OTEL_TRACES_SAMPLER", v),
        None => ("[telemetry] sampler", config.sampler.clone().unwrap_or_else(|| "parentbased_always_on".into())),
    };
    let ratio = match var("OTEL_TRACES_SAMPLER_ARG") {
        Some(v) => match v.parse::<f64>() {
            Ok(r) if (0.0..=1.0).contains(&r) => r,
            _ => return Err(invalid("OTEL_TRACES_SAMPLER_ARG", format!("{v:?} is not a ratio from 0 to 1"))),
        },
        None => config.sampler_arg.unwrap_or(1.0),
    };
    Ok(match name.as_str() {
        "always_on" => Sampling::AlwaysOn,
        "always_off" => Sampling::AlwaysOff,
        "traceidratio" => Sampling::Ratio(ratio),
        "parentbased_always_on" => Sampling::ParentBased(Root::AlwaysOn),
        "parentbased_always_off" => Sampling::ParentBased(Root::AlwaysOff),
        "parentbased_traceidratio" => Sampling::ParentBased(Root::Ratio(ratio)),
        other => {
            let known = crate::config::SAMPLERS.join(", ");
            return Err(invalid(setting, format!("{other:?} is not one of {known}")));
        }
    })
}

fn batch(config: &TelemetryConfig, var: &dyn Fn(&str) -> Option<String>) -> Result<Batch, SettingsError> {
    let number = |name: &str, file: Option<u64>, default: u64| -> Result<u64, SettingsError> {
        match var(name) {
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| *n > 0)
                .ok_or_else(|| invalid(name, format!("{v:?} is not a whole number above 0"))),
            None => Ok(file.unwrap_or(default)),
        }
    };
    let d = Batch::default();
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let batch = Batch {
        delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", config.schedule_delay_ms, ms(d.delay))?),
        max_queue: size(number("OTEL_BSP_MAX_QUEUE_SIZE", config.max_queue_size, d.max_queue as u64)?),
        max_batch: size(number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", config.max_export_batch_size, d.max_batch as u64)?),
        timeout: Duration::from_millis(number("OTEL_BSP_EXPORT_TIMEOUT", config.export_timeout_ms, ms(d.timeout))?),
    };
    // The SDKs' rule: a batch is never larger than the queue.
    Ok(Batch { max_batch: batch.max_batch.min(batch.max_queue), ..batch })
}

fn parse_bool(setting: &str, v: &str) -> Result<bool, SettingsError> {
    match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(setting, format!("{v:?} is not true or false"))),
    }
}

/// `key=value,key2=value2`, values percent-decoded (the W3C baggage form
/// the specification gives these variables).
fn pairs(setting: &str, v: &str) -> Result<BTreeMap<String, String>, SettingsError> {
    let mut out = BTreeMap::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(invalid(setting, format!("{item:?} is not key=value")));
        };
        let value = percent_decode(value.trim());
        out.insert(key.trim().to_string(), value);
    }
    Ok(out)
}

fn percent_decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)], config: &TelemetryConfig) -> Result<Option<TraceSettings>, SettingsError> {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        resolve(config, &|name| map.get(name).cloned())
    }

    fn file(endpoint: &str) -> TelemetryConfig {
        TelemetryConfig { endpoint: Some(endpoint.into()), ..TelemetryConfig::default() }
    }

    #[test]
    fn nothing_set_is_no_tracing() {
        assert_eq!(with(&[], &TelemetryConfig::default()), Ok(None));
        let off = with(&[("OTEL_SDK_DISABLED", "true")], &file("http://c:4318"));
        assert_eq!(off, Ok(None));
    }

    #[test]
    fn the_variables_win_over_the_file() {
        let config = TelemetryConfig {
            endpoint: Some("http://file:4318".into()),
            service_name: Some("from-file".into()),
            sampler: Some("always_off".into()),
            headers: [("a".to_string(), "file".to_string())].into(),
            ..TelemetryConfig::default()
        };
        let s = with(
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318/"),
                ("OTEL_SERVICE_NAME", "from-env"),
                ("OTEL_TRACES_SAMPLER", "traceidratio"),
                ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "a=env,b=x%20y"),
                ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=staging"),
            ],
            &config,
        )
        .unwrap()
        .unwrap();
        assert_eq!(s.endpoint, "http://env:4318/v1/traces");
        assert_eq!(s.service_name, "from-env");
        assert_eq!(s.sampling, Sampling::Ratio(0.5));
        assert_eq!(s.headers.get("a").map(String::as_str), Some("env"));
        assert_eq!(s.headers.get("b").map(String::as_str), Some("x y"));
        assert_eq!(s.resource.get("deployment.environment").map(String::as_str), Some("staging"));
        let file_only = with(&[], &config).unwrap().unwrap();
        assert_eq!(
            (file_only.endpoint.as_str(), file_only.service_name.as_str()),
            ("http://file:4318/v1/traces", "from-file")
        );
        assert_eq!(file_only.sampling, Sampling::AlwaysOff);
    }

    #[test]
    fn a_signal_endpoint_is_used_whole_and_grpc_adds_no_path() {
        let s = with(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:9/x")], &file("http://f:1")).unwrap().unwrap();
        assert_eq!(s.endpoint, "http://c:9/x");
        let g = with(&[("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")], &file("http://f:4317")).unwrap().unwrap();
        assert_eq!((g.endpoint.as_str(), g.transport), ("http://f:4317", Transport::Grpc));
        let d = with(&[], &file("http://f:4318")).unwrap().unwrap();
        assert_eq!(d.sampling, Sampling::ParentBased(Root::AlwaysOn), "the SDKs' default");
    }

    #[test]
    fn a_bad_variable_is_named() {
        for (var, value) in [
            ("OTEL_TRACES_SAMPLER", "sometimes"),
            ("OTEL_TRACES_SAMPLER_ARG", "2"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_SDK_DISABLED", "maybe"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
        ] {
            let e = with(&[(var, value)], &file("http://f:4318")).unwrap_err();
            assert_eq!(e.setting, var, "{e}");
        }
    }

    #[test]
    fn sampling_follows_the_parent_and_the_ratio_splits_by_trace_id() {
        let p = Sampling::ParentBased(Root::AlwaysOn);
        assert!(p.keeps([0; 16], None));
        assert!(!p.keeps([0; 16], Some(false)));
        assert!(Sampling::ParentBased(Root::AlwaysOff).keeps([0; 16], Some(true)));
        let half = Sampling::Ratio(0.5);
        let low = [0u8; 16];
        let mut high = [0u8; 16];
        high[8] = 0xff;
        assert!(half.keeps(low, None));
        assert!(!half.keeps(high, None));
        assert!(!Sampling::Ratio(0.0).keeps(low, None));
        assert!(Sampling::Ratio(1.0).keeps([0xff; 16], None));
    }
}

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
#[derive(Clone, PartialEq)]
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

/// Without the headers' values (a collector's API key) or the URL's password.
impl std::fmt::Debug for TraceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceSettings")
            .field("endpoint", &crate::config::shown_url(&self.endpoint))
            .field("transport", &self.transport)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("service_name", &self.service_name)
            .field("resource", &self.resource)
            .field("sampling", &self.sampling)
            .field("capture_content", &self.capture_content)
            .field("batch", &self.batch)
            .finish()
    }
}

/// The batch span processor's bounds (`OTEL_BSP_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Batch {
    /// How long a span waits for others to fill its batch.
    pub delay: Duration,
    /// Spans held at most while the collector is slow; more are dropped.
    pub max_queue: usize,
    pub max_batch: usize,
    /// The batch's export's limit, retries included (`OTEL_BSP_EXPORT_TIMEOUT`).
    pub timeout: Duration,
    /// One request to the collector (`OTEL_EXPORTER_OTLP_TIMEOUT`).
    pub exporter_timeout: Duration,
}

impl Default for Batch {
    /// The OpenTelemetry SDKs' defaults.
    fn default() -> Batch {
        Batch {
            delay: Duration::from_secs(5),
            max_queue: 2048,
            max_batch: 512,
            timeout: Duration::from_secs(30),
            exporter_timeout: Duration::from_secs(10),
        }
    }
}

/// A source of variables: the process's environment, or a test's map.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process's environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Tracing as resolved, and what was wrong with the variables: as the
/// OpenTelemetry specification says, a variable that cannot be used is
/// warned about and ignored, never fatal (a fleet's `OTEL_*` meant for
/// other services must not stop the gateway). `[telemetry]` is checked
/// where the file is read, with its line.
#[derive(Debug, Default)]
pub struct Resolved {
    /// `None`: tracing is off.
    pub settings: Option<TraceSettings>,
    pub warnings: Vec<String>,
}

/// The variables, read once each, and what was ignored of them.
struct Vars<'a> {
    env: Env<'a>,
    warnings: Vec<String>,
}

impl Vars<'_> {
    /// A variable's value; empty is unset, as the SDKs take it.
    fn get(&self, name: &str) -> Option<String> {
        (self.env)(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    fn ignore(&mut self, name: &str, value: &str, why: &str) {
        self.warnings.push(format!("{name}: {value:?} {why}; ignored"));
    }

    /// A variable parsed by `parse` (`Err` says why not), else `None` with a warning.
    fn parsed<T>(&mut self, name: &str, parse: impl Fn(&str) -> Result<T, String>) -> Option<T> {
        let v = self.get(name)?;
        match parse(&v) {
            Ok(t) => Some(t),
            Err(why) => {
                self.ignore(name, &v, &why);
                None
            }
        }
    }

    /// `true` or `false`, in any case; anything else is false, said (the spec's rule for booleans).
    fn boolean(&mut self, name: &str) -> Option<bool> {
        let v = self.get(name)?;
        match v.to_ascii_lowercase().as_str() {
            "true" => Some(true),
            "false" => Some(false),
            _ => {
                self.warnings.push(format!("{name}: {v:?} is not true or false; taken as false"));
                Some(false)
            }
        }
    }
}

/// Tracing as `config` and `env` say.
pub fn resolve(config: &TelemetryConfig, env: Env<'_>) -> Resolved {
    let mut vars = Vars { env, warnings: Vec::new() };
    let settings = settings(config, &mut vars);
    Resolved { settings, warnings: vars.warnings }
}

fn settings(config: &TelemetryConfig, vars: &mut Vars<'_>) -> Option<TraceSettings> {
    if vars.boolean("OTEL_SDK_DISABLED").unwrap_or(config.disabled.unwrap_or(false)) {
        return None;
    }
    let transport = vars
        .parsed("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", transport)
        .or_else(|| vars.parsed("OTEL_EXPORTER_OTLP_PROTOCOL", transport))
        .or_else(|| config.protocol.as_deref().and_then(|p| transport(p).ok()))
        .unwrap_or(Transport::HttpProtobuf);
    let endpoint = endpoint(config, vars, transport)?;
    let mut headers = config.headers.clone();
    for name in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
        headers.extend(vars.parsed(name, pairs).unwrap_or_default());
    }
    // Service name: the variable, the variables' resource, the file's name, the file's resource.
    let mut resource = config.resource_attributes.clone();
    let from_file = resource.remove("service.name");
    let mut from_env = vars.parsed("OTEL_RESOURCE_ATTRIBUTES", pairs).unwrap_or_default();
    let env_named = from_env.remove("service.name");
    resource.extend(from_env);
    let service_name = vars
        .get("OTEL_SERVICE_NAME")
        .or(env_named)
        .or_else(|| config.service_name.clone())
        .or(from_file)
        .unwrap_or_else(|| "switchyard".to_string());
    let capture_content = vars
        .boolean("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .unwrap_or(config.capture_content.unwrap_or(false));
    Some(TraceSettings {
        endpoint,
        transport,
        headers,
        service_name,
        resource,
        sampling: sampling(config, vars),
        capture_content,
        batch: batch(config, vars),
    })
}

fn transport(v: &str) -> Result<Transport, String> {
    match v.to_ascii_lowercase().as_str() {
        "http/protobuf" => Ok(Transport::HttpProtobuf),
        "grpc" => Ok(Transport::Grpc),
        _ => Err("is not \"http/protobuf\" or \"grpc\"".into()),
    }
}

fn url(v: &str) -> Result<String, String> {
    if crate::config::is_telemetry_endpoint(v) {
        Ok(v.to_string())
    } else {
        Err("is not an http:// or https:// URL".into())
    }
}

/// The traces URL: a signal's own endpoint as it is; a base endpoint with
/// `/v1/traces` added for HTTP (gRPC names no path). No endpoint: no tracing.
fn endpoint(config: &TelemetryConfig, vars: &mut Vars<'_>, transport: Transport) -> Option<String> {
    let (url, whole) = vars
        .parsed("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", url)
        .map(|v| (v, true))
        .or_else(|| vars.parsed("OTEL_EXPORTER_OTLP_ENDPOINT", url).map(|v| (v, false)))
        .or_else(|| config.traces_endpoint.clone().map(|v| (v, true)))
        .or_else(|| config.endpoint.clone().map(|v| (v, false)))?;
    Some(match (whole, transport) {
        (true, _) | (false, Transport::Grpc) => url,
        (false, Transport::HttpProtobuf) => format!("{}/v1/traces", url.trim_end_matches('/')),
    })
}

/// A sampler's name, and its ratio when it takes one.
fn sampler(name: &str, ratio: f64) -> Result<Sampling, String> {
    Ok(match name.to_ascii_lowercase().as_str() {
        "always_on" => Sampling::AlwaysOn,
        "always_off" => Sampling::AlwaysOff,
        "traceidratio" => Sampling::Ratio(ratio),
        "parentbased_always_on" => Sampling::ParentBased(Root::AlwaysOn),
        "parentbased_always_off" => Sampling::ParentBased(Root::AlwaysOff),
        "parentbased_traceidratio" => Sampling::ParentBased(Root::Ratio(ratio)),
        _ => return Err(format!("is not one of {}", crate::config::SAMPLERS.join(", "))),
    })
}

fn sampling(config: &TelemetryConfig, vars: &mut Vars<'_>) -> Sampling {
    let name = vars.get("OTEL_TRACES_SAMPLER");
    let takes_ratio = |n: &str| n.to_ascii_lowercase().ends_with("traceidratio");
    // The argument is read only for a sampler that takes one (else a stray value would be warned about).
    let wants = name.as_deref().or(config.sampler.as_deref()).is_some_and(takes_ratio);
    let ratio = wants
        .then(|| {
            vars.parsed("OTEL_TRACES_SAMPLER_ARG", |v| {
                v.parse::<f64>()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| "is not a ratio from 0 to 1".into())
            })
        })
        .flatten()
        .or(config.sampler_arg)
        .unwrap_or(1.0);
    let from_file = || config.sampler.as_deref().and_then(|n| sampler(n, ratio).ok());
    let chosen = match name {
        Some(n) => match sampler(&n, ratio) {
            Ok(s) => Some(s),
            Err(why) => {
                vars.ignore("OTEL_TRACES_SAMPLER", &n, &why);
                None
            }
        },
        None => None,
    };
    chosen.or_else(from_file).unwrap_or(Sampling::ParentBased(Root::AlwaysOn))
}

fn batch(config: &TelemetryConfig, vars: &mut Vars<'_>) -> Batch {
    let d = Batch::default();
    let mut number = |name: &str, file: Option<u64>, default: u64| -> u64 {
        let above_zero = |v: &str| {
            v.parse::<u64>().ok().filter(|n| *n > 0).ok_or_else(|| "is not a whole number above 0".to_string())
        };
        vars.parsed(name, above_zero).or(file).unwrap_or(default)
    };
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let size = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    let exporter_timeout = number("OTEL_EXPORTER_OTLP_TIMEOUT", config.timeout_ms, ms(d.exporter_timeout));
    let batch = Batch {
        delay: Duration::from_millis(number("OTEL_BSP_SCHEDULE_DELAY", config.schedule_delay_ms, ms(d.delay))),
        max_queue: size(number("OTEL_BSP_MAX_QUEUE_SIZE", config.max_queue_size, d.max_queue as u64)),
        max_batch: size(number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", config.max_export_batch_size, d.max_batch as u64)),
        timeout: Duration::from_millis(number("OTEL_BSP_EXPORT_TIMEOUT", config.export_timeout_ms, ms(d.timeout))),
        exporter_timeout: Duration::from_millis(number("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", None, exporter_timeout)),
    };
    // The SDKs' rule: a batch is never larger than the queue.
    Batch { max_batch: batch.max_batch.min(batch.max_queue), ..batch }
}

/// `key=value,key2=value2`, values percent-decoded (the W3C baggage form
/// the specification gives these variables).
fn pairs(v: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return Err(format!("has {item:?}, not key=value"));
        };
        out.insert(key.trim().to_string(), percent_decode(value.trim()));
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

    fn resolved(vars: &[(&str, &str)], config: &TelemetryConfig) -> Resolved {
        let map: HashMap<String, String> = vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        resolve(config, &|name| map.get(name).cloned())
    }

    fn with(vars: &[(&str, &str)], config: &TelemetryConfig) -> Result<Option<TraceSettings>, Vec<String>> {
        let r = resolved(vars, config);
        if r.warnings.is_empty() {
            Ok(r.settings)
        } else {
            Err(r.warnings)
        }
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
    fn a_bad_variable_is_named_and_ignored_and_case_does_not_matter() {
        for (var, value) in [
            ("OTEL_TRACES_SAMPLER", "sometimes"),
            ("OTEL_TRACES_SAMPLER", "parentbased_jaeger_remote"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", "lots"),
        ] {
            let r = resolved(&[(var, value)], &file("http://f:4318"));
            assert!(r.warnings.iter().any(|w| w.starts_with(var) && w.contains(value)), "{var}: {:?}", r.warnings);
            let s = r.settings.unwrap();
            assert_eq!((s.endpoint.as_str(), s.transport), ("http://f:4318/v1/traces", Transport::HttpProtobuf));
            assert_eq!((s.sampling, s.batch.max_queue), (Sampling::ParentBased(Root::AlwaysOn), 2048));
        }
        let r = resolved(&[("OTEL_SDK_DISABLED", "1")], &file("http://f:4318"));
        assert!(r.settings.is_some() && r.warnings[0].contains("taken as false"), "{:?}", r.warnings);
        let upper = with(&[("OTEL_TRACES_SAMPLER", "ALWAYS_OFF"), ("OTEL_SDK_DISABLED", "FALSE")], &file("http://f:1"));
        assert_eq!(upper.unwrap().unwrap().sampling, Sampling::AlwaysOff);
        // A ratio for a sampler that takes none is not read, nor warned about.
        let stray =
            with(&[("OTEL_TRACES_SAMPLER", "always_on"), ("OTEL_TRACES_SAMPLER_ARG", "x")], &file("http://f:1"));
        assert_eq!(stray.unwrap().unwrap().sampling, Sampling::AlwaysOn);
    }

    #[test]
    fn the_otlp_timeout_is_the_request_s_and_the_processor_s_its_own() {
        let s =
            with(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"), ("OTEL_BSP_EXPORT_TIMEOUT", "9000")], &file("http://f:1"));
        let b = s.unwrap().unwrap().batch;
        assert_eq!((b.exporter_timeout.as_millis(), b.timeout.as_millis()), (2500, 9000));
    }

    #[test]
    fn a_url_is_shown_without_its_password_and_settings_without_header_values() {
        assert_eq!(
            crate::config::shown_url("https://user:secret@c.example:4318/v1/traces"),
            "https://c.example:4318/v1/traces"
        );
        let config = TelemetryConfig {
            headers: [("x-api-key".to_string(), "hunter2".to_string())].into(),
            ..file("https://user:secret@c.example")
        };
        let debug = format!("{:?}", with(&[], &config).unwrap().unwrap());
        assert!(!debug.contains("hunter2") && !debug.contains("secret") && debug.contains("x-api-key"), "{debug}");
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

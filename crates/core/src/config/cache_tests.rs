//! The cache, queue, key-lease and fallback settings.

use std::time::Duration;

use super::tests::{invalid, parse};
use super::*;

const PROVIDERS: &str = r#"
[[providers]]
name = "a"
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
models = ["m", "n", "o"]
"#;

#[test]
fn nothing_set_means_no_cache_no_queue_no_lease_cap_and_no_fallback() {
    let config = parse(&format!("{PROVIDERS}\n[[routes]]\nmodel = \"m\"\nchain = [\"a\"]\n")).unwrap();
    assert_eq!(config.cache, None);
    assert_eq!(config.cache_policy("m"), None);
    assert_eq!(config.cache_policy("n"), None);
    assert_eq!(config.fallback_response("m"), None);
    let a = config.provider("a").unwrap();
    assert_eq!(a.queue, QueuePolicy::default());
    assert_eq!(a.queue.max_queue, 0, "a full provider is passed over, as before");
    assert_eq!(a.key_max_concurrency, None);
    assert_eq!(config.history.cache_max_bytes, 64 * 1024 * 1024);
    let default = Config::embedded_default().unwrap();
    assert!(default.cache.is_none() && default.providers.iter().all(|p| p.queue.max_queue == 0));
}

#[test]
fn every_setting_in_its_place() {
    let config = parse(&format!(
        r#"
[policy]
cache = {{ ttl = "10m", stale = "1h" }}
max_queue = 8
max_queue_wait = "5s"

[history]
cache_max_size_mb = 16
{PROVIDERS}
policy = {{ max_queue = 2 }}
keys = {{ max_concurrency = 1 }}

[[providers]]
name = "b"
kind = "anthropic"
base_url = "http://127.0.0.1:2/v1"
models = ["c"]

[[routes]]
model = "m"
chain = ["a"]
policy = {{ cache = {{ ttl = "1m", tools = true }} }}
fallback_response = {{ status = 503, body = '{{"error":{{"message":"try later"}}}}' }}

[[routes]]
model = "n"
chain = ["a"]
policy = {{ cache = false }}
fallback_response = {{ status = 200, body = "busy, try later", content_type = "text/plain" }}
"#
    ))
    .unwrap();
    let global =
        CachePolicy { ttl: Duration::from_secs(600), stale: Duration::from_secs(3600), ..CachePolicy::default() };
    assert_eq!(config.cache_policy("o"), Some(&global), "no route: [policy]'s");
    let m = config.cache_policy("m").unwrap();
    assert_eq!((m.ttl, m.stale, m.tools, m.sampled), (Duration::from_secs(60), Duration::from_secs(3600), true, false));
    assert_eq!(config.cache_policy("n"), None, "turned off for its route");
    let (a, b) = (config.provider("a").unwrap(), config.provider("b").unwrap());
    assert_eq!(a.queue, QueuePolicy { max_queue: 2, max_wait: Duration::from_secs(5) });
    assert_eq!(b.queue, QueuePolicy { max_queue: 8, max_wait: Duration::from_secs(5) });
    assert_eq!((a.key_max_concurrency, b.key_max_concurrency), (Some(1), None));
    assert_eq!(config.history.cache_max_bytes, 16 * 1024 * 1024);
    let fm = config.fallback_response("m").unwrap();
    assert_eq!((fm.status.as_u16(), fm.content_type.to_str().unwrap()), (503, "application/json"));
    assert_eq!(&fm.body[..], br#"{"error":{"message":"try later"}}"#);
    assert_eq!(config.fallback_response("n").unwrap().content_type, "text/plain");
    // `true` is the defaults.
    let on = parse("[policy]\ncache = true\n").unwrap();
    assert_eq!(on.cache, Some(CachePolicy::default()));
    let zero_stale = parse("[policy]\ncache = { stale = \"0s\" }\n").unwrap();
    assert_eq!(zero_stale.cache.unwrap().stale, Duration::ZERO);
}

#[test]
fn mistakes_name_the_file_line_and_field() {
    let (line, field, message) = invalid("[policy]\ndeadline = \"30s\"\ncache = { tll = \"10m\" }\n");
    assert_eq!((line, field.as_str()), (3, "tll"), "{message}");
    assert!(message.contains("unknown field"), "{message}");
    let (line, field, message) = invalid("[policy]\ncache = { ttl = \"soon\" }\n");
    assert_eq!((line, field.as_str()), (2, "policy.cache.ttl"));
    assert!(message.contains("\"soon\""));
    let (_, field, _) = invalid("[policy]\ncache = { ttl = \"0s\" }\n");
    assert_eq!(field, "policy.cache.ttl", "a ttl of nothing");
    let (line, field, _) = invalid("[policy]\ncache = \"yes\"\n");
    assert_eq!((line, field.as_str()), (2, "cache"));
    let (_, field, _) = invalid("[policy]\nmax_queue = -1\n");
    assert_eq!(field, "policy.max_queue");
    let (_, field, _) = invalid("[policy]\nmax_queue_wait = \"a while\"\n");
    assert_eq!(field, "policy.max_queue_wait");
    // Each setting where it belongs.
    let (line, field, message) = invalid(&format!("{PROVIDERS}policy = {{ cache = {{ ttl = \"1m\" }} }}\n"));
    assert_eq!((line, field.as_str()), (7, "providers[0].policy.cache"));
    assert!(message.contains("request setting"));
    let (line, field, message) =
        invalid(&format!("{PROVIDERS}\n[[routes]]\nmodel = \"m\"\nchain = [\"a\"]\npolicy = {{ max_queue = 3 }}\n"));
    assert_eq!((line, field.as_str()), (11, "routes[0].policy.max_queue"));
    assert!(message.contains("provider setting"));
    let (line, field, _) = invalid(&format!("{PROVIDERS}keys = {{ max_concurrency = 0 }}\n"));
    assert_eq!((line, field.as_str()), (7, "providers[0].keys.max_concurrency"));
    let (_, field, _) = invalid(&format!("{PROVIDERS}keys = {{ max = 1 }}\n"));
    assert_eq!(field, "max");
    let route = |fallback: &str| {
        format!("{PROVIDERS}\n[[routes]]\nmodel = \"m\"\nchain = [\"a\"]\nfallback_response = {fallback}\n")
    };
    let (line, field, _) = invalid(&route("{ status = 42, body = \"{}\" }"));
    assert_eq!((line, field.as_str()), (11, "routes[0].fallback_response.status"));
    let (_, field, message) = invalid(&route("{ status = 503, body = \"not json\" }"));
    assert_eq!(field, "routes[0].fallback_response.body");
    assert!(message.contains("not JSON"), "{message}");
    let (_, field, _) = invalid(&route("{ status = 503, body = \"x\", content_type = \"text/plain\\n\" }"));
    assert_eq!(field, "routes[0].fallback_response.content_type");
    let (_, field, _) = invalid(&route("{ status = 503 }"));
    assert_eq!(field, "body", "missing");
    let (_, field, _) = invalid("[history]\ncache_max_size_mb = 0\n");
    assert_eq!(field, "history.cache_max_size_mb");
}

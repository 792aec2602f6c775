//! End-to-end harness: a real gateway on `127.0.0.1:0` in front of simulated
//! providers, each test with its own.

// A test harness: failing loudly on a broken setup is the point.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)]

pub mod clis;
pub mod otlp;
mod pg;

pub use pg::PgDatabase;

use std::net::SocketAddr;
use std::sync::Arc;

use std::time::Duration;

use switchyard_core::history::CountTable;
use switchyard_core::history::{History, Store};
use switchyard_core::secrets::MemoryStore;
use switchyard_core::{Config, Gateway};
use switchyard_sim::SimProvider;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

/// The admin token every test gateway requires.
pub const ADMIN_TOKEN: &str = "test-admin-token";
/// The local access token, required when the config says `access_token = true`.
pub const ACCESS_TOKEN: &str = "sy-test-access-token";

/// A gateway serving on an ephemeral loopback port, recording history in a
/// fresh temporary database; stops when dropped.
#[derive(Debug)]
pub struct TestGateway {
    pub addr: SocketAddr,
    pub gateway: Gateway,
    pub store: Store,
    /// The response cache beside the history database.
    pub cache: switchyard_core::cache::Store,
    _history: History,
    _dir: tempfile::TempDir,
    /// Stops the server when dropped.
    stop: DropGuard,
    task: JoinHandle<std::io::Result<()>>,
}

impl TestGateway {
    /// Starts a gateway from TOML config text and an in-memory key store.
    pub async fn start(config: &str, keys: MemoryStore) -> TestGateway {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("switchyard.toml"), config).expect("config written");
        TestGateway::start_in(dir, keys).await
    }

    /// The config file this gateway reloads from.
    pub fn config_file(&self) -> std::path::PathBuf {
        self._dir.path().join("switchyard.toml")
    }

    /// Stops this gateway and starts another on the same files (config,
    /// history, provider toggles), as a restart would.
    pub async fn restart(self, keys: MemoryStore) -> TestGateway {
        let TestGateway { _dir: dir, stop, task, _history: history, gateway, cache, .. } = self;
        drop(stop);
        let _ = task.await;
        // The history writer finishes once the gateway's recorders are gone.
        drop(gateway);
        history.close(Duration::from_secs(5)).await;
        cache.close().await;
        TestGateway::start_in(dir, keys).await
    }

    async fn start_in(dir: tempfile::TempDir, keys: MemoryStore) -> TestGateway {
        let path = dir.path().join("switchyard.toml");
        let config = Config::load(&path).expect("test config is valid");
        let database = dir.path().join("switchyard.db");
        let history = History::open(&database, &config.history).await.expect("history opens");
        let limits = switchyard_core::cache::Limits {
            max_bytes: config.history.cache_max_bytes,
            ..switchyard_core::cache::Limits::default()
        };
        let cache = switchyard_core::cache::Store::open(
            &switchyard_core::cache::path_beside(&database),
            limits,
            Arc::default(),
        )
        .await
        .expect("cache opens");
        let gateway = Gateway::builder(config, Arc::new(keys))
            // Tracing as the test's config says, whatever the shell running the tests exports.
            .otel_env(|_| None)
            .config_path(path)
            .state_file(dir.path().join("state.json"))
            .history(&history)
            .cache(cache.clone())
            .admin_token(secrecy::SecretString::from(ADMIN_TOKEN.to_string()))
            .access_token(secrecy::SecretString::from(ACCESS_TOKEN.to_string()))
            .build()
            .expect("gateway builds");
        let listener = TcpListener::bind(("127.0.0.1", 0)).await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let stop = CancellationToken::new();
        let shutdown = stop.clone().cancelled_owned();
        let task = tokio::spawn(switchyard_core::serve(listener, gateway.clone(), shutdown));
        let store = history.store().clone();
        TestGateway { addr, gateway, store, cache, _history: history, _dir: dir, stop: stop.drop_guard(), task }
    }

    /// Waits until `n` requests are on record (the writer is asynchronous).
    pub async fn recorded(&self, n: i64) -> i64 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let count = self.store.count(CountTable::Requests).await.expect("count");
            if count >= n || tokio::time::Instant::now() >= deadline {
                return count;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The request `id` as `/admin/requests/{id}` gives it, once it is on
    /// record (the writer is asynchronous).
    pub async fn detail(&self, id: &str) -> serde_json::Value {
        for _ in 0..300 {
            let d = self.admin(&format!("/admin/requests/{id}")).await;
            if d["attempts"].is_array() {
                return d;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("request {id} never on record");
    }

    /// A JSON POST to this gateway, as a client would send it.
    pub async fn post(&self, path: &str, body: &serde_json::Value) -> reqwest::Response {
        http().post(self.url(path)).json(body).send().await.expect("request sent")
    }

    /// A GET on the admin API, as JSON.
    pub async fn admin(&self, path_and_query: &str) -> serde_json::Value {
        let r = http().get(self.url(path_and_query)).bearer_auth(ADMIN_TOKEN).send().await.expect("admin call");
        assert!(r.status().is_success(), "{path_and_query}: {}", r.status());
        r.json().await.expect("admin JSON")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The base URL an OpenAI or Anthropic SDK is pointed at.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }
}

/// Builds config text for providers that point at simulated ones.
#[derive(Debug, Default, Clone)]
pub struct ConfigText {
    text: String,
}

impl ConfigText {
    pub fn new() -> ConfigText {
        ConfigText::default()
    }

    /// A provider named after the simulated one, listing `models`
    /// (`"alias=name"` maps an alias to the provider's own name).
    pub fn provider(self, sim: &SimProvider, kind: &str, models: &[&str]) -> ConfigText {
        self.provider_at(sim.name(), &sim.base_url(), kind, models)
    }

    pub fn provider_at(mut self, name: &str, base_url: &str, kind: &str, models: &[&str]) -> ConfigText {
        let entries: Vec<String> = models
            .iter()
            .map(|m| match m.split_once('=') {
                Some((alias, real)) => format!("{alias:?} = {real:?}"),
                None => format!("{m:?} = {m:?}"),
            })
            .collect();
        self.text.push_str(&format!(
            "\n[[providers]]\nname = {name:?}\nkind = {kind:?}\nbase_url = {base_url:?}\nmodels = {{ {} }}\n",
            entries.join(", ")
        ));
        // A simulated OpenAI provider speaks Responses too, as OpenAI does.
        if kind == "openai" {
            self.text.push_str("responses = true\n");
        }
        self
    }

    /// One simulated provider under both kinds: OpenAI `<name>` for
    /// `openai_models` and Anthropic `<name>-an` for `anthropic_models` (a
    /// simulated provider answers either protocol).
    pub fn both_kinds(self, sim: &SimProvider, openai_models: &[&str], anthropic_models: &[&str]) -> ConfigText {
        let anthropic = format!("{}-an", sim.name());
        self.provider(sim, "openai", openai_models).provider_at(
            &anthropic,
            &sim.base_url(),
            "anthropic",
            anthropic_models,
        )
    }

    /// An OpenAI-kind provider that speaks Chat Completions only (most
    /// OpenAI-compatible servers): Responses requests are translated for it.
    pub fn chat_only(mut self, sim: &SimProvider, models: &[&str]) -> ConfigText {
        self = self.provider(sim, "openai", models);
        self.text.truncate(self.text.len() - "responses = true\n".len());
        self
    }

    /// An OpenAI-kind provider that speaks Responses only (`chat = false`,
    /// as OpenAI serves its Codex models): every other format is translated
    /// to Responses for it.
    pub fn responses_only(mut self, sim: &SimProvider, models: &[&str]) -> ConfigText {
        self = self.provider(sim, "openai", models);
        self.text.push_str("chat = false\n");
        self
    }

    pub fn route(mut self, model: &str, chain: &[&str]) -> ConfigText {
        let chain: Vec<String> = chain.iter().map(|c| format!("{c:?}")).collect();
        self.text.push_str(&format!("\n[[routes]]\nmodel = {model:?}\nchain = [{}]\n", chain.join(", ")));
        self
    }

    /// Raw TOML appended as is (for `[server]` and the like, put it first).
    pub fn raw(mut self, toml: &str) -> ConfigText {
        self.text.push_str(toml);
        self.text.push('\n');
        self
    }

    pub fn build(&self) -> &str {
        &self.text
    }
}

/// The gateway's id for a response (`x-request-id`).
pub fn request_id(response: &reqwest::Response) -> String {
    response.headers()["x-request-id"].to_str().expect("ascii id").to_string()
}

/// A one-turn Chat Completions request saying "hi" to `model`.
pub fn chat_hi(model: &str) -> serde_json::Value {
    serde_json::json!({ "model": model, "messages": [{ "role": "user", "content": "hi" }] })
}

/// A one-turn Messages request saying "hi" to `model`, 8 tokens at most.
pub fn messages_hi(model: &str) -> serde_json::Value {
    serde_json::json!({ "model": model, "max_tokens": 8, "messages": [{ "role": "user", "content": "hi" }] })
}

/// A response header's value, empty when absent.
pub fn header<'a>(r: &'a reqwest::Response, name: &str) -> &'a str {
    r.headers().get(name).map_or("", |v| v.to_str().unwrap())
}

/// Keys `sk-<name>` for each named provider.
pub fn keys_for(names: &[&str]) -> MemoryStore {
    names.iter().fold(MemoryStore::new(), |store, name| store.with(name, "main", &format!("sk-{name}")))
}

/// A plain-HTTP client for loopback: no proxy, and no TLS roots to load
/// (loading the system's certificates per client costs tens of milliseconds).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().no_proxy().tls_built_in_root_certs(false).build().expect("client builds")
}

/// A loopback client that follows no redirect, to see where one points.
pub fn no_redirects() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .tls_built_in_root_certs(false)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client builds")
}

/// The `name=value` part of a response's Set-Cookie, which must be
/// `HttpOnly` and `SameSite=Strict`.
pub fn cookie_of(r: &reqwest::Response) -> String {
    let set = r.headers().get(reqwest::header::SET_COOKIE).expect("a cookie is set").to_str().expect("ascii");
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    set.split(';').next().unwrap_or_default().to_string()
}

/// A Python with the official SDKs and OpenTelemetry's: `SWITCHYARD_TEST_PYTHON`,
/// else the workspace's `.venv` (which `.ci/run` makes from `tests/python/requirements.txt`).
pub fn python() -> std::path::PathBuf {
    if let Some(p) = std::env::var_os("SWITCHYARD_TEST_PYTHON") {
        return p.into();
    }
    let venv = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python");
    assert!(
        venv.exists(),
        "no Python with the SDKs: run `python3 -m venv .venv && .venv/bin/pip install -r tests/python/requirements.txt` \
         at the workspace root, or set SWITCHYARD_TEST_PYTHON"
    );
    venv
}

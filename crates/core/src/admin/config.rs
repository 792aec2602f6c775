//! The admin API's config half: the configuration in force, as the
//! dashboard's Providers and Settings views show it, and edits to the config
//! file. An edit is applied to the file's text, validated whole, written
//! atomically and put in force; a refused edit changes nothing and says why.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, put};
use axum::{Json, Router};
use indexmap::IndexMap;
use serde::Serialize;
use serde_json::Value;

use crate::admin::base::AdminError;
use crate::config::edit::{ConfigEdit, ModelAlias, ProviderForm, RouteForm};
use crate::config::{Auth, Config, EMBEDDED_DEFAULT};
use crate::gateway::Gateway;

pub fn routes() -> Router<Gateway> {
    Router::new()
        .route("/admin/config", get(show))
        .route("/admin/config/providers/{name}", put(put_provider).delete(delete_provider))
        .route("/admin/config/routes/{*model}", put(put_route).delete(delete_route))
        .route("/admin/config/settings", patch(patch_settings))
}

/// The configuration in force, with every default filled in: what
/// `GET /admin/config` and every edit answer.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub(crate) struct ConfigView {
    /// The file edits go to; null on the embedded default.
    path: Option<String>,
    editable: bool,
    providers: Vec<ProviderEntry>,
    routes: Vec<RouteEntry>,
    settings: Settings,
}

/// A provider as the dashboard's form shows it.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub(crate) struct ProviderEntry {
    name: String,
    kind: String,
    base_url: String,
    models: Vec<ModelAlias>,
    auth: KeyNeed,
}

/// Whether a provider is called with a key.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(rename_all = "lowercase")]
pub(crate) enum KeyNeed {
    Key,
    None,
}

#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub(crate) struct RouteEntry {
    model: String,
    chain: Vec<String>,
    strategy: crate::upstream::strategy::Strategy,
    /// Each chain entry's weight, on a weighted route that gives weights.
    weights: Option<Vec<u32>>,
}

/// The settings the Settings view edits, by table and key; durations as
/// text (`"60s"`), as the config file writes them.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub(crate) struct Settings {
    server: BTreeMap<&'static str, Setting>,
    policy: BTreeMap<&'static str, Setting>,
    history: BTreeMap<&'static str, Setting>,
}

/// One setting's value.
#[derive(Debug, Serialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
#[serde(untagged)]
pub(crate) enum Setting {
    Text(String),
    Count(u64),
    Ratio(f64),
    Flag(bool),
}

impl From<Duration> for Setting {
    fn from(d: Duration) -> Setting {
        Setting::Text(humantime::format_duration(d).to_string())
    }
}

impl From<bool> for Setting {
    fn from(b: bool) -> Setting {
        Setting::Flag(b)
    }
}

impl From<f64> for Setting {
    fn from(r: f64) -> Setting {
        Setting::Ratio(r)
    }
}

impl From<u32> for Setting {
    fn from(n: u32) -> Setting {
        Setting::Count(n.into())
    }
}

impl From<usize> for Setting {
    fn from(n: usize) -> Setting {
        Setting::Count(u64::try_from(n).unwrap_or(u64::MAX))
    }
}

fn table<const N: usize>(entries: [(&'static str, Setting); N]) -> BTreeMap<&'static str, Setting> {
    entries.into_iter().collect()
}

fn provider_entry(p: &crate::config::ProviderConfig) -> ProviderEntry {
    let models = p
        .models
        .client_names()
        .map(|m| ModelAlias { client: m.into(), upstream: p.models.explicit(m).unwrap_or(m).into() })
        .chain(p.models.has_wildcard().then(|| ModelAlias { client: "*".into(), upstream: "*".into() }))
        .collect();
    ProviderEntry {
        name: p.name.clone(),
        kind: p.kind_name().into(),
        base_url: p.base_url.as_str().into(),
        models,
        auth: if p.auth == Auth::None { KeyNeed::None } else { KeyNeed::Key },
    }
}

pub(crate) fn view(gw: &Gateway) -> ConfigView {
    let live = gw.live();
    let c = &live.config;
    let (p, b, s, h) = (&c.policy, &c.provider_policy.breaker, &c.server, &c.history);
    let settings = Settings {
        server: table([
            ("listen", Setting::Text(s.listen.to_string())),
            ("access_token", s.access_token.into()),
            ("rate_limit_per_minute", s.rate_limit_per_minute.into()),
            ("max_body_bytes", s.max_body_bytes.into()),
            ("max_connections", s.max_connections.into()),
        ]),
        policy: table([
            ("deadline", p.deadline.into()),
            ("attempt_timeout", p.attempt_timeout.into()),
            ("max_retries", p.max_retries.into()),
            ("retry_timeouts", p.retry_timeouts.into()),
            ("backoff_base", p.backoff_base.into()),
            ("backoff_cap", p.backoff_cap.into()),
            ("max_retry_wait", p.max_retry_wait.into()),
            ("min_fallback_budget", p.min_fallback_budget.into()),
            ("stream_idle_timeout", p.stream_idle_timeout.into()),
            ("strategy", Setting::Text(p.strategy.as_str().into())),
            ("breaker_failure_rate", b.failure_rate.into()),
            ("breaker_window", b.window.into()),
            ("breaker_min_calls", b.min_calls.into()),
            ("breaker_consecutive_failures", b.consecutive_failures.into()),
            ("breaker_cooldown", b.cooldown.into()),
            ("breaker_cooldown_max", b.cooldown_max.into()),
            ("fallback_share", c.provider_policy.fallback_share.into()),
        ]),
        history: table([
            ("enabled", h.enabled.into()),
            ("retention", h.retention.into()),
            ("max_size_mb", Setting::Count(h.max_size_bytes / (1024 * 1024))),
            ("store_bodies", h.store_bodies.into()),
        ]),
    };
    ConfigView {
        path: gw.config_path().map(|p| p.display().to_string()),
        editable: gw.config_path().is_some(),
        providers: c.providers.iter().map(provider_entry).collect(),
        routes: c
            .routes
            .iter()
            .map(|r| RouteEntry {
                model: r.model.clone(),
                chain: r.chain.clone(),
                strategy: r.policy.strategy,
                weights: r.schedule.as_ref().map(|s| s.weights().to_vec()),
            })
            .collect(),
        settings,
    }
}

async fn show(State(gw): State<Gateway>) -> Json<ConfigView> {
    Json(view(&gw))
}

/// Reads the file (the embedded default seeds a file not written yet),
/// applies `change`, validates, writes atomically and reloads.
async fn edit(
    gw: Gateway,
    change: impl FnOnce(&mut ConfigEdit) -> Result<(), AdminError> + Send + 'static,
) -> Result<Response, AdminError> {
    let Some(path) = gw.config_path().map(Path::to_path_buf) else {
        return Err(AdminError::conflict(
            "config_not_editable",
            "this gateway runs on the embedded default without a config file: start it with --config FILE to edit",
        ));
    };
    let g = gw.clone();
    // File I/O and, for changed providers, the keychain block: off the runtime.
    crate::admin::base::blocking(move || {
        let _one_at_a_time = g.edit_lock();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => EMBEDDED_DEFAULT.to_string(),
            Err(e) => return Err(AdminError::internal("config_unreadable", format!("{}: {e}", path.display()))),
        };
        let mut doc =
            ConfigEdit::parse(&text).map_err(|e| AdminError::unprocessable("config_invalid", e.to_string()))?;
        change(&mut doc)?;
        let text = doc.to_string();
        let config =
            Config::parse(&text, &path).map_err(|e| AdminError::unprocessable("config_invalid", e.to_string()))?;
        crate::private::write(&path, text.as_bytes())
            .map_err(|e| AdminError::internal("config_not_saved", format!("{}: {e}", path.display())))?;
        g.reload(config);
        Ok(())
    })
    .await??;
    Ok(Json(view(&gw)).into_response())
}

fn invalid(e: crate::config::edit::EditError) -> AdminError {
    AdminError::unprocessable("config_invalid", e.to_string())
}

async fn put_provider(
    State(gw): State<Gateway>,
    UrlPath(name): UrlPath<String>,
    Json(form): Json<ProviderForm>,
) -> Result<Response, AdminError> {
    edit(gw, move |doc| doc.upsert_provider(&name, &form).map_err(invalid)).await
}

async fn delete_provider(State(gw): State<Gateway>, UrlPath(name): UrlPath<String>) -> Result<Response, AdminError> {
    edit(gw, move |doc| match doc.remove_provider(&name).map_err(invalid)? {
        true => Ok(()),
        false => Err(AdminError::provider_not_found(&name)),
    })
    .await
}

/// `PUT /admin/config/routes/{model}`: `{"chain": ["a", "b"], "strategy":
/// "latency", "weights": [9, 1]}`, each part optional on a route that
/// exists (what is left out stays as the file has it).
async fn put_route(
    State(gw): State<Gateway>,
    UrlPath(model): UrlPath<String>,
    Json(form): Json<RouteForm>,
) -> Result<Response, AdminError> {
    edit(gw, move |doc| doc.set_route(&model, &form).map_err(invalid)).await
}

async fn delete_route(State(gw): State<Gateway>, UrlPath(model): UrlPath<String>) -> Result<Response, AdminError> {
    edit(gw, move |doc| match doc.remove_route(&model).map_err(invalid)? {
        true => Ok(()),
        false => Err(AdminError::not_found("route_not_found", format!("the config file has no route for {model:?}"))),
    })
    .await
}

/// `{"policy": {"deadline": "60s", "max_retries": null}, "history": {...}}`;
/// null puts a setting back to its default.
async fn patch_settings(
    State(gw): State<Gateway>,
    Json(changes): Json<IndexMap<String, IndexMap<String, Value>>>,
) -> Result<Response, AdminError> {
    edit(gw, move |doc| {
        for (table, values) in &changes {
            for (key, value) in values {
                doc.set(table, key, value).map_err(invalid)?;
            }
        }
        Ok(())
    })
    .await
}

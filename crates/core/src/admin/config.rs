//! The admin API's config half: the configuration in force, as the
//! dashboard's Providers and Settings views show it, and edits to the config
//! file. An edit is applied to the file's text, validated whole, written
//! atomically and put in force; a refused edit changes nothing and says why.

use std::path::Path;
use std::time::Duration;

use axum::extract::{Path as UrlPath, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, patch, put};
use axum::{Json, Router};
use indexmap::IndexMap;
use serde_json::{json, Value};

use crate::admin::AdminError;
use crate::config::edit::{ConfigEdit, ModelAlias, ProviderForm};
use crate::config::{Auth, Config, EMBEDDED_DEFAULT};
use crate::gateway::Gateway;

pub fn routes() -> Router<Gateway> {
    Router::new()
        .route("/admin/config", get(show))
        .route("/admin/config/providers/{name}", put(put_provider).delete(delete_provider))
        .route("/admin/config/routes/{*model}", put(put_route).delete(delete_route))
        .route("/admin/config/settings", patch(patch_settings))
}

fn secs(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

/// The configuration in force, with every default filled in.
fn view(gw: &Gateway) -> Value {
    let live = gw.live();
    let c = &live.config;
    let providers: Vec<Value> = c
        .providers
        .iter()
        .map(|p| {
            let models: Vec<ModelAlias> = p
                .models
                .client_names()
                .map(|m| ModelAlias { client: m.into(), upstream: p.models.explicit(m).unwrap_or(m).into() })
                .chain(p.models.has_wildcard().then(|| ModelAlias { client: "*".into(), upstream: "*".into() }))
                .collect();
            json!({
                "name": p.name, "kind": p.kind.as_str(), "base_url": p.base_url.as_str(), "models": models,
                "auth": if p.auth == Auth::None { "none" } else { "key" },
            })
        })
        .collect();
    let routes: Vec<Value> = c.routes.iter().map(|r| json!({ "model": r.model, "chain": r.chain })).collect();
    let (p, b, s, h) = (&c.policy, &c.provider_policy.breaker, &c.server, &c.history);
    json!({
        "path": gw.config_path().map(|p| p.display().to_string()),
        "editable": gw.config_path().is_some(),
        "providers": providers,
        "routes": routes,
        "settings": {
            "server": {
                "listen": s.listen.to_string(), "access_token": s.access_token,
                "rate_limit_per_minute": s.rate_limit_per_minute, "max_body_bytes": s.max_body_bytes,
                "max_connections": s.max_connections,
            },
            "policy": {
                "deadline": secs(p.deadline), "attempt_timeout": secs(p.attempt_timeout),
                "max_retries": p.max_retries, "retry_timeouts": p.retry_timeouts,
                "backoff_base": secs(p.backoff_base), "backoff_cap": secs(p.backoff_cap),
                "max_retry_wait": secs(p.max_retry_wait), "min_fallback_budget": secs(p.min_fallback_budget),
                "stream_idle_timeout": secs(p.stream_idle_timeout),
                "breaker_failure_rate": b.failure_rate, "breaker_window": secs(b.window),
                "breaker_min_calls": b.min_calls, "breaker_consecutive_failures": b.consecutive_failures,
                "breaker_cooldown": secs(b.cooldown), "breaker_cooldown_max": secs(b.cooldown_max),
                "fallback_share": c.provider_policy.fallback_share,
            },
            "history": {
                "enabled": h.enabled, "retention": secs(h.retention),
                "max_size_mb": h.max_size_bytes / (1024 * 1024), "store_bodies": h.store_bodies,
            },
        },
    })
}

async fn show(State(gw): State<Gateway>) -> Json<Value> {
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
    crate::admin::blocking(move || {
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

#[derive(Debug, serde::Deserialize)]
struct RouteForm {
    chain: Vec<String>,
}

async fn put_route(
    State(gw): State<Gateway>,
    UrlPath(model): UrlPath<String>,
    Json(form): Json<RouteForm>,
) -> Result<Response, AdminError> {
    edit(gw, move |doc| doc.set_route(&model, &form.chain).map_err(invalid)).await
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

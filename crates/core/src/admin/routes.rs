//! `GET /admin/routes`: each route's strategy, its chain with weights,
//! and its recent split (which providers answered its requests over the
//! last five minutes), for the Providers view and `switchyard status`.
//! Behind the admin token, as every admin route.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};

use crate::gateway::{Gateway, Live};
use crate::upstream::strategy::{Share, Strategy, SPLIT_WINDOW};

pub fn routes() -> Router<Gateway> {
    Router::new().route("/admin/routes", get(show))
}

/// Every route, then the models without one.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RoutesView {
    pub routes: Vec<RouteView>,
    /// Models without a route of their own: `[policy]`'s strategy, over
    /// every provider that lists the model.
    pub unrouted: UnroutedView,
    /// How far back each split looks.
    pub split_window_s: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct RouteView {
    pub model: String,
    pub strategy: Strategy,
    pub chain: Vec<ChainEntry>,
    /// `cheapest`'s latency bound, in ms.
    pub max_latency_ms: Option<u64>,
    /// When a late first byte is hedged (`"300ms"`, `"p95"`), if it is.
    pub hedge_after: Option<String>,
    /// The most of the route's requests in a minute that are hedged.
    pub hedge_max_share: Option<f64>,
    pub split: Vec<Share>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct ChainEntry {
    pub provider: String,
    /// Its weight, on a weighted route that gives weights.
    pub weight: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(test, derive(ts_rs::TS))]
pub struct UnroutedView {
    pub strategy: Strategy,
    pub split: Vec<Share>,
}

/// The routes of the configuration in force.
pub fn view(live: &Live) -> RoutesView {
    let routes = live
        .config
        .routes
        .iter()
        .zip(&live.routes)
        .map(|(route, state)| RouteView {
            model: route.model.clone(),
            strategy: route.policy.strategy,
            chain: route
                .chain
                .iter()
                .enumerate()
                .map(|(i, provider)| ChainEntry {
                    provider: provider.clone(),
                    weight: route.schedule.as_ref().and_then(|s| s.weight(i)),
                })
                .collect(),
            max_latency_ms: route.policy.max_latency.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            hedge_after: route.policy.hedge.map(|h| h.after.to_string()),
            hedge_max_share: route.policy.hedge.map(|h| h.max_share),
            split: in_chain_order(state.split(), &route.chain),
        })
        .collect();
    RoutesView {
        routes,
        unrouted: UnroutedView { strategy: live.config.policy.strategy, split: busiest_first(live.unrouted.split()) },
        split_window_s: SPLIT_WINDOW.as_secs(),
    }
}

/// A route's split in its chain's order (a provider since dropped from it last).
fn in_chain_order(mut split: Vec<Share>, chain: &[String]) -> Vec<Share> {
    split.sort_by_key(|s| chain.iter().position(|p| *p == s.provider).unwrap_or(usize::MAX));
    split
}

/// The models without a route share no chain: the busiest provider first.
fn busiest_first(mut split: Vec<Share>) -> Vec<Share> {
    split.sort_by(|a, b| b.requests.cmp(&a.requests).then_with(|| a.provider.cmp(&b.provider)));
    split
}

async fn show(State(gw): State<Gateway>) -> Json<RoutesView> {
    Json(view(&gw.live()))
}

//! `/admin/members`: list, add, rotate, revoke and remove team members,
//! behind the admin token as every admin route. A key is in the answer to
//! `add` and `rotate` only, once; nothing else ever returns one.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use secrecy::{ExposeSecret, SecretString};
use serde_json::json;

use crate::admin::base::AdminError;
use crate::gateway::Gateway;
use crate::ground::clock::now_ms;
use crate::members::ops::{self, MemberView};
use crate::members::{Member, MemberError, NewMember};

pub fn routes() -> Router<Gateway> {
    Router::new()
        .route("/admin/members", get(list).post(add))
        .route("/admin/members/{name}", get(show).delete(remove))
        .route("/admin/members/{name}/rotate", post(rotate))
        .route("/admin/members/{name}/revoke", post(revoke))
}

impl From<MemberError> for AdminError {
    fn from(e: MemberError) -> AdminError {
        match e {
            MemberError::Invalid(m) => AdminError::bad_request("invalid_member", m),
            MemberError::NotFound(_) => AdminError::not_found("member_not_found", e.to_string()),
            MemberError::Exists(_) => AdminError::conflict("member_exists", e.to_string()),
            MemberError::NoStore => AdminError::not_found("history_disabled", e.to_string()),
            MemberError::Store(s) => s.into(),
        }
    }
}

fn store(gw: &Gateway) -> Result<&crate::history::Store, AdminError> {
    gw.store().ok_or_else(|| MemberError::NoStore.into())
}

/// This gateway refuses a changed key at once, not after its next read.
async fn changed(gw: &Gateway) {
    gw.reload_members().await;
}

fn with_key(status: StatusCode, member: Member, key: &SecretString) -> Response {
    let view = MemberView::of(member, now_ms());
    (status, Json(json!({ "member": view, "key": key.expose_secret() }))).into_response()
}

async fn list(State(gw): State<Gateway>) -> Result<Json<Vec<MemberView>>, AdminError> {
    let now = now_ms();
    Ok(Json(ops::list(store(&gw)?).await?.into_iter().map(|m| MemberView::of(m, now)).collect()))
}

async fn show(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Json<MemberView>, AdminError> {
    Ok(Json(MemberView::of(ops::get(store(&gw)?, &name).await?, now_ms())))
}

async fn add(State(gw): State<Gateway>, Json(new): Json<NewMember>) -> Result<Response, AdminError> {
    let (member, key) = ops::add(store(&gw)?, &new, now_ms()).await?;
    changed(&gw).await;
    Ok(with_key(StatusCode::CREATED, member, &key))
}

async fn rotate(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Response, AdminError> {
    let (member, key) = ops::rotate(store(&gw)?, &name).await?;
    changed(&gw).await;
    Ok(with_key(StatusCode::OK, member, &key))
}

async fn revoke(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<Json<MemberView>, AdminError> {
    let member = ops::revoke(store(&gw)?, &name, now_ms()).await?;
    changed(&gw).await;
    Ok(Json(MemberView::of(member, now_ms())))
}

async fn remove(State(gw): State<Gateway>, Path(name): Path<String>) -> Result<StatusCode, AdminError> {
    ops::remove(store(&gw)?, &name).await?;
    changed(&gw).await;
    Ok(StatusCode::NO_CONTENT)
}

//! `/v1/webhook_endpoints`: merchants register where converge notifies them (DESIGN.md
//! "Outbox, merchant notifications, event stream"; Standard Webhooks for the secret form).
//! The signing secret is shown once, in the answer that creates or rotates it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, response::IntoResponse};
use serde::{Deserialize, Serialize};

use super::AppState;
use super::idempotency::IdemContext;
use crate::domain::clock::rfc3339;
use crate::domain::webhooks::Subscription;
use crate::error::{ApiError, ApiJson, ApiPath};
use crate::service::webhooks::{Actor, EndpointError, EndpointWithSecret, new_endpoint_id};
use crate::store::{Merchant, WebhookEndpoint};

/// Body of `POST /v1/webhook_endpoints`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    url: String,
    enabled_events: Vec<String>,
    #[serde(default)]
    description: String,
}

/// An endpoint as merchants see it; `secret` only when just created or rotated.
#[derive(Debug, Serialize)]
pub struct EndpointView {
    id: String,
    url: String,
    enabled_events: Vec<String>,
    description: String,
    status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    disabled_reason: Option<String>,
    created_at: String,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    secret: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_secret_expires_at: Option<String>,
}

impl EndpointView {
    fn of(e: &WebhookEndpoint, secret: Option<String>) -> Self {
        EndpointView {
            id: e.id.clone(),
            url: e.url.clone(),
            enabled_events: Subscription::from_stored(&e.enabled_events).names(),
            description: e.description.clone(),
            status: e.status.clone(),
            disabled_reason: e.disabled_reason.clone(),
            created_at: rfc3339(e.created_at),
            updated_at: rfc3339(e.updated_at),
            secret,
            previous_secret_expires_at: e.previous_expires_at.map(rfc3339),
        }
    }
}

impl From<EndpointWithSecret> for EndpointView {
    fn from(e: EndpointWithSecret) -> Self {
        EndpointView::of(&e.endpoint, Some(e.secret))
    }
}

impl From<EndpointError> for ApiError {
    fn from(e: EndpointError) -> Self {
        match e {
            EndpointError::Url(u) => ApiError::bad_request(u.code(), u.to_string()),
            EndpointError::Events(m) => ApiError::bad_request("invalid_enabled_events", m),
            EndpointError::Description => {
                ApiError::bad_request("invalid_description", e.to_string())
            }
            EndpointError::NotFound => ApiError::not_found("webhook endpoint"),
            EndpointError::Deleted => ApiError::new(
                StatusCode::CONFLICT,
                "webhook_endpoint_deleted",
                "the webhook endpoint was deleted",
            ),
            EndpointError::Store(s) => s.into(),
        }
    }
}

fn actor(m: &Merchant) -> Actor {
    Actor {
        name: format!("merchant:{}", m.name),
        roles: String::new(),
        meta: "{}".into(),
    }
}

fn refuse_frozen(m: &Merchant) -> Result<(), ApiError> {
    super::auth::refuse_frozen(m, "register or change webhook endpoints")
}

/// Registers an endpoint: 201 with it and its `secret` (shown once). A retry after a crash
/// resumes the endpoint the key recorded (never a second one).
pub async fn create(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    Extension(ctx): Extension<IdemContext>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<impl IntoResponse, ApiError> {
    refuse_frozen(&merchant)?;
    let core = &st.core;
    if let Some(id) = ctx.resource_id.as_deref()
        && let Some(e) = core.store.endpoint(id).await?
    {
        let secret = e.secret.clone();
        return Ok((
            StatusCode::CREATED,
            Json(EndpointView::of(&e, Some(secret))),
        ));
    }
    // Validate before recording the recovery point, so a refused request leaves the key free.
    core.check_endpoint_url(&body.url)
        .await
        .map_err(|u| ApiError::bad_request(u.code(), u.to_string()))?;
    Subscription::parse(&body.enabled_events)
        .map_err(|m| ApiError::bad_request("invalid_enabled_events", m))?;
    let id = ctx.resource_id.clone().unwrap_or_else(new_endpoint_id);
    if ctx.resource_id.is_none() && !core.store.set_key_resource(&ctx.key, &id).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_key_in_use",
            "a request with this Idempotency-Key is still running",
        )
        .with_retry_after(1));
    }
    let created = core
        .create_endpoint(
            &id,
            merchant.id,
            &body.url,
            &body.enabled_events,
            &body.description,
            &actor(&merchant),
        )
        .await?;
    Ok((StatusCode::CREATED, Json(EndpointView::from(created))))
}

/// The merchant's endpoints, newest first (deleted ones included, with their status).
pub async fn list(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let all = st.core.store.endpoints(Some(merchant.id)).await?;
    let data: Vec<EndpointView> = all.iter().map(|e| EndpointView::of(e, None)).collect();
    Ok(Json(serde_json::json!({ "data": data })))
}

/// One endpoint; another merchant's is 404.
pub async fn show(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EndpointView>, ApiError> {
    let e = st.core.merchant_endpoint(merchant.id, &id).await?;
    Ok(Json(EndpointView::of(&e, None)))
}

/// Deletes an endpoint (kept as `deleted` for its history; its undelivered events are
/// abandoned). 200 with the endpoint; repeating it is harmless.
pub async fn delete(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EndpointView>, ApiError> {
    refuse_frozen(&merchant)?;
    let e = st
        .core
        .delete_endpoint(merchant.id, &id, &actor(&merchant))
        .await?;
    Ok(Json(EndpointView::of(&e, None)))
}

/// A new secret (shown once); the previous one keeps signing beside it until
/// `previous_secret_expires_at` (24 h by default).
///
/// The key records the rotation before it happens: a retry after a crash answers with the
/// secret the crashed request made instead of rotating again, which would push the secret
/// the merchant still holds out of the overlap.
pub async fn rotate_secret(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    Extension(ctx): Extension<IdemContext>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EndpointView>, ApiError> {
    refuse_frozen(&merchant)?;
    let current = st.core.merchant_endpoint(merchant.id, &id).await?;
    if ctx.resource_id.is_some() {
        let secret = current.secret.clone();
        return Ok(Json(EndpointView::of(&current, Some(secret))));
    }
    if !st.core.store.set_key_resource(&ctx.key, &id).await? {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "idempotency_key_in_use",
            "a request with this Idempotency-Key is still running",
        )
        .with_retry_after(1));
    }
    let rotated = st
        .core
        .rotate_endpoint_secret(&id, &actor(&merchant))
        .await?;
    Ok(Json(EndpointView::from(rotated)))
}

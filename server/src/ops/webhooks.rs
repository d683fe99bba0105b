//! `/ops/v1/webhooks...`: what ops staff see of merchant notifications and what they may do
//! (DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §6.3 "a way to
//! resend"). Reading needs `View`; redelivering, recovering and re-enabling need
//! `RequestActions` (operator), each audited with a reason; recovery is previewed first and
//! rate-limited like the bulk retry.

use std::collections::{BTreeSet, HashMap};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Principal;
use super::handlers::{ClientAddr, parse_time};
use crate::api::AppState;
use crate::domain::roles::{Permission, format_roles};
use crate::domain::webhooks::Subscription;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery};
use crate::service::webhooks::{Actor, EndpointError};
use crate::store::{DeliveryFilter, EndpointHealth, WebhookEndpoint, delivery_status};

/// Window of the endpoints' health figures: 24 h, ms.
pub const HEALTH_WINDOW_MS: i64 = 86_400_000;
/// Endpoint recoveries one user may run a minute.
pub const RECOVERIES_PER_MINUTE: usize = 5;

/// An endpoint as ops staff see it: no secret, with its merchant and 24 h health.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct EndpointRow {
    /// Id.
    pub id: String,
    /// Merchant name.
    pub merchant: String,
    /// URL.
    pub url: String,
    /// Event types (or `*`).
    pub enabled_events: Vec<String>,
    /// Free text.
    pub description: String,
    /// `enabled`, `disabled`, `deleted`.
    pub status: String,
    /// Why disabled.
    pub disabled_reason: Option<String>,
    /// Start of the current failure run, epoch ms UTC.
    pub failing_since: Option<i64>,
    /// Attempts in 24 h.
    pub attempts_24h: i64,
    /// Of which 2xx.
    pub succeeded_24h: i64,
    /// Last failed attempt, epoch ms UTC.
    pub last_failure_at: Option<i64>,
    /// Its error.
    pub last_failure: Option<String>,
    /// Epoch ms UTC.
    pub created_at: i64,
}

fn row(e: &WebhookEndpoint, merchant: &str, h: Option<&EndpointHealth>) -> EndpointRow {
    EndpointRow {
        id: e.id.clone(),
        merchant: merchant.to_string(),
        url: e.url.clone(),
        enabled_events: Subscription::from_stored(&e.enabled_events).names(),
        description: e.description.clone(),
        status: e.status.clone(),
        disabled_reason: e.disabled_reason.clone(),
        failing_since: e.failing_since,
        attempts_24h: h.map_or(0, |h| h.attempts),
        succeeded_24h: h.map_or(0, |h| h.succeeded),
        last_failure_at: h.and_then(|h| h.last_failure_at),
        last_failure: h.and_then(|h| h.last_failure.clone()),
        created_at: e.created_at,
    }
}

/// Every endpoint with its health and the delivery backlog. Shared with the console's
/// server functions.
pub async fn overview(st: &AppState) -> Result<Value, ApiError> {
    let store = &st.core.store;
    let now = st.core.clock.now_ms();
    let names: HashMap<i64, String> = store
        .merchants()
        .await?
        .into_iter()
        .map(|m| (m.id, m.name))
        .collect();
    let health: HashMap<String, EndpointHealth> = store
        .endpoint_health(now - HEALTH_WINDOW_MS)
        .await?
        .into_iter()
        .map(|h| (h.endpoint_id.clone(), h))
        .collect();
    let endpoints: Vec<EndpointRow> = store
        .endpoints(None)
        .await?
        .iter()
        .map(|e| {
            row(
                e,
                names.get(&e.merchant_id).map_or("?", String::as_str),
                health.get(&e.id),
            )
        })
        .collect();
    let backlog = store.webhook_backlog(now - HEALTH_WINDOW_MS).await?;
    Ok(json!({"endpoints": endpoints, "backlog": backlog, "now": now}))
}

async fn get_overview(State(st): State<AppState>, p: Principal) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(overview(&st).await?))
}

/// Query of `GET /ops/v1/webhooks/deliveries`.
#[derive(Debug, Deserialize, Default, Clone, Serialize)]
#[serde(deny_unknown_fields)]
pub struct DeliveryQuery {
    /// `pending`, `succeeded`, `dead`, `abandoned`.
    pub status: Option<String>,
    /// Endpoint id.
    pub endpoint: Option<String>,
    /// Event type.
    #[serde(rename = "type")]
    pub event_type: Option<String>,
    /// Created at or after (RFC 3339 or YYYY-MM-DD, UTC).
    pub from: Option<String>,
    /// Created before.
    pub to: Option<String>,
    /// A payment's deliveries (its events and its refunds' events).
    pub payment: Option<String>,
    /// At most this many (1..=500, default 100).
    pub limit: Option<i64>,
}

fn blank(o: &Option<String>) -> Option<String> {
    o.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
}

/// Runs a delivery search (shared with the server functions). Errors: 400 for an unknown
/// status or type or a bad time.
pub async fn search_deliveries(st: &AppState, q: &DeliveryQuery) -> Result<Value, ApiError> {
    let status = blank(&q.status);
    if let Some(s) = &status
        && !delivery_status::ALL.contains(&s.as_str())
    {
        return Err(ApiError::bad_request(
            "invalid_status",
            format!("status must be one of {}", delivery_status::ALL.join(", ")),
        ));
    }
    let event_type = blank(&q.event_type);
    if let Some(t) = &event_type {
        t.parse::<crate::domain::webhooks::EventType>()
            .map_err(|m| ApiError::bad_request("invalid_event_type", m))?;
    }
    let f = DeliveryFilter {
        merchant_id: None,
        status,
        endpoint_id: blank(&q.endpoint),
        event_type,
        from: blank(&q.from).map(|v| parse_time("from", &v)).transpose()?,
        to: blank(&q.to).map(|v| parse_time("to", &v)).transpose()?,
        payment_id: blank(&q.payment),
    };
    let items = st
        .core
        .store
        .deliveries(&f, q.limit.unwrap_or(100).clamp(1, 500))
        .await?;
    Ok(json!({ "items": items }))
}

async fn deliveries(
    State(st): State<AppState>,
    p: Principal,
    ApiQuery(q): ApiQuery<DeliveryQuery>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(search_deliveries(&st, &q).await?))
}

/// A delivery with its attempts and its event. Shared with the server functions.
pub async fn delivery_detail(st: &AppState, id: i64) -> Result<Value, ApiError> {
    let store = &st.core.store;
    let d = store
        .delivery(id)
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))?;
    let attempts = store.delivery_attempts(id).await?;
    let event = store.outbox_event(&d.event_id).await?;
    Ok(json!({"delivery": d, "attempts": attempts, "event": event}))
}

async fn delivery(
    State(st): State<AppState>,
    p: Principal,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(delivery_detail(&st, id).await?))
}

/// Body of the state-changing webhook actions.
#[derive(Debug, Deserialize, Default, Clone, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Why (required, 1..=2000 bytes).
    pub reason: String,
}

fn reason(r: &str) -> Result<&str, ApiError> {
    let r = r.trim();
    if r.is_empty() || r.len() > 2000 {
        return Err(ApiError::bad_request(
            "invalid_reason",
            "a reason of 1 to 2000 bytes is required",
        ));
    }
    Ok(r)
}

/// The console user as the actor of an audited change.
pub fn actor(p: &Principal, addr: &str) -> Actor {
    Actor {
        name: p.username.clone(),
        roles: format_roles(&p.roles),
        meta: json!({"client": addr}).to_string(),
    }
}

/// Puts one delivery back for a new round of attempts now. Errors: 404, 409 when it is
/// still pending (its job will attempt it), 400 without a reason.
pub async fn run_redeliver(
    st: &AppState,
    p: &Principal,
    addr: &str,
    id: i64,
    why: &str,
) -> Result<Value, ApiError> {
    p.require(Permission::RequestActions)?;
    let why = reason(why)?;
    let d = st
        .core
        .store
        .delivery(id)
        .await?
        .ok_or_else(|| ApiError::not_found("delivery"))?;
    if d.status == delivery_status::PENDING {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "delivery_pending",
            "the delivery is still pending; its next attempt is scheduled",
        ));
    }
    let done = st
        .core
        .redeliver(
            &[id],
            why,
            &format!("webhook_delivery:{id}"),
            &actor(p, addr),
        )
        .await?;
    Ok(json!({"redelivered": done}))
}

async fn redeliver(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(run_redeliver(&st, &p, &addr, id, &body.reason).await?))
}

/// Query of the recovery preview.
#[derive(Debug, Deserialize, Default, Clone, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SinceQuery {
    /// Failed deliveries created at or after this time (RFC 3339 or YYYY-MM-DD, UTC).
    pub since: String,
}

/// The failed deliveries of an endpoint since a time: what a recovery would put back.
pub async fn recovery_preview(
    st: &AppState,
    endpoint: &str,
    since: &str,
) -> Result<Value, ApiError> {
    st.core
        .store
        .endpoint(endpoint)
        .await?
        .ok_or_else(|| ApiError::not_found("webhook endpoint"))?;
    let since = parse_time("since", since)?;
    let items = st.core.recovery_candidates(endpoint, since).await?;
    Ok(json!({"endpoint": endpoint, "since": since, "items": items}))
}

async fn preview(
    State(st): State<AppState>,
    p: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<SinceQuery>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(recovery_preview(&st, &id, &q.since).await?))
}

/// Body of `POST /ops/v1/webhooks/endpoints/{id}/recover`.
#[derive(Debug, Deserialize, Default, Clone, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RecoverBody {
    /// The preview's `since`.
    pub since: String,
    /// The deliveries the preview showed and the person kept selected.
    pub delivery_ids: Vec<i64>,
    /// Why.
    pub reason: String,
}

/// Redelivers the previewed deliveries that are still failed deliveries of this endpoint
/// since `since` (a server re-check); names the rest. Rate-limited per user.
pub async fn run_recover(
    st: &AppState,
    p: &Principal,
    addr: &str,
    endpoint: &str,
    body: &RecoverBody,
) -> Result<Value, ApiError> {
    p.require(Permission::RequestActions)?;
    let why = reason(&body.reason)?;
    if body.delivery_ids.is_empty() || body.delivery_ids.len() > 500 {
        return Err(ApiError::bad_request(
            "invalid_selection",
            "select 1 to 500 deliveries from the preview",
        ));
    }
    let now = st.core.clock.now_ms();
    {
        let mut limiter = st.recover_limiter.lock().unwrap_or_else(|e| e.into_inner());
        if !limiter.try_acquire(&p.username, now) {
            let secs = limiter.retry_after_secs(&p.username, now);
            return Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limited",
                format!("at most {RECOVERIES_PER_MINUTE} recoveries a minute; retry in {secs} s"),
            )
            .with_retry_after(secs));
        }
    }
    let since = parse_time("since", &body.since)?;
    let still: BTreeSet<i64> = st
        .core
        .recovery_candidates(endpoint, since)
        .await?
        .into_iter()
        .map(|d| d.id)
        .collect();
    let (keep, gone): (Vec<i64>, Vec<i64>) =
        body.delivery_ids.iter().partition(|id| still.contains(id));
    let done = if keep.is_empty() {
        vec![]
    } else {
        st.core
            .redeliver(
                &keep,
                why,
                &format!("webhook_endpoint:{endpoint}"),
                &actor(p, addr),
            )
            .await?
    };
    Ok(json!({"redelivered": done, "skipped": gone}))
}

async fn recover(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<RecoverBody>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(run_recover(&st, &p, &addr, &id, &body).await?))
}

/// Re-enables a disabled endpoint (audited). Errors: 404, 409 for a deleted endpoint or one
/// already enabled.
pub async fn run_enable(
    st: &AppState,
    p: &Principal,
    addr: &str,
    endpoint: &str,
    why: &str,
) -> Result<Value, ApiError> {
    p.require(Permission::RequestActions)?;
    let why = reason(why)?;
    match st
        .core
        .set_endpoint_enabled(endpoint, true, why, &actor(p, addr))
        .await
    {
        Ok(true) => Ok(json!({"status": "enabled"})),
        Ok(false) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "already_enabled",
            "the endpoint is already enabled",
        )),
        Err(EndpointError::NotFound) => Err(ApiError::not_found("webhook endpoint")),
        Err(EndpointError::Deleted) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "webhook_endpoint_deleted",
            "the merchant deleted this endpoint; it cannot be re-enabled",
        )),
        Err(EndpointError::Store(e)) => Err(e.into()),
        Err(e) => Err(ApiError::internal(e)),
    }
}

async fn enable(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(run_enable(&st, &p, &addr, &id, &body.reason).await?))
}

/// The webhook routes, merged into `/ops/v1` (not yet in the OpenAPI document).
pub fn routes() -> utoipa_axum::router::OpenApiRouter<AppState> {
    use axum::routing::{get, post};
    utoipa_axum::router::OpenApiRouter::new()
        .route("/webhooks", get(get_overview))
        .route("/webhooks/deliveries", get(deliveries))
        .route("/webhooks/deliveries/{id}", get(delivery))
        .route("/webhooks/deliveries/{id}/redeliver", post(redeliver))
        .route("/webhooks/endpoints/{id}/recover/preview", get(preview))
        .route("/webhooks/endpoints/{id}/recover", post(recover))
        .route("/webhooks/endpoints/{id}/enable", post(enable))
}

//! `/ops/v1/webhooks...`: what ops staff see of merchant notifications and what they may do
//! (DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §6.3 "a way to
//! resend"). Reading needs `View`; redelivering, recovering and re-enabling need
//! `RequestActions` (operator), each audited with a reason; recovery is previewed first and
//! rate-limited like the bulk retry. Thin adapters over [`crate::service::deliveries`].

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::OpsState;
use super::audit::actor;
use super::auth::Principal;
use super::extract::ClientAddr;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody};
use crate::store::DeliveryRow;

pub use crate::service::deliveries::{HEALTH_WINDOW_MS, RECOVERIES_PER_MINUTE};
pub use converge_wire::EndpointRow;

pub use converge_wire::WebhooksOverview as Overview;

/// `{"items": [...]}`: deliveries, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    /// The deliveries.
    pub items: Vec<DeliveryRow>,
}

pub use converge_wire::DeliveryDetail;
pub use converge_wire::webhooks::PaymentWebhooks;

/// The deliveries put back for a new round of attempts.
#[derive(Debug, Serialize, ToSchema)]
pub struct Redelivered {
    /// Their ids.
    pub redelivered: Vec<i64>,
}

/// What a recovery would put back: the endpoint's failed deliveries since a time.
#[derive(Debug, Serialize, ToSchema)]
pub struct RecoveryPreview {
    /// The endpoint's id.
    pub endpoint: String,
    /// The `since` asked for, epoch ms UTC.
    pub since: i64,
    /// The deliveries (dead or abandoned, not redelivered since).
    pub items: Vec<DeliveryRow>,
}

/// A recovery's outcome.
#[derive(Debug, Serialize, ToSchema)]
pub struct Recovered {
    /// The deliveries put back.
    pub redelivered: Vec<i64>,
    /// The selected ones that were no longer failed deliveries of this endpoint since
    /// `since` (delivered or redelivered meanwhile, or never its).
    pub skipped: Vec<i64>,
}

/// A re-enabled endpoint's new status.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointStatus {
    /// `enabled`.
    pub status: String,
}

#[utoipa::path(
    get,
    path = "/webhooks",
    tag = "ops",
    operation_id = "ops_webhooks",
    summary = "Webhook endpoints with their health, and the delivery backlog",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "Every endpoint and the backlog", body = Overview),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn get_overview(
    State(st): State<OpsState>,
    p: Principal,
) -> Result<Json<Overview>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(st.core.webhooks_overview().await?))
}

/// Query of `GET /ops/v1/webhooks/deliveries`.
pub use crate::service::queries::DeliverySearch;

#[utoipa::path(
    get,
    path = "/webhooks/deliveries",
    tag = "ops",
    operation_id = "ops_webhook_deliveries",
    summary = "Search webhook deliveries",
    description = "Filters combine; newest first. The next page: `before` = the last id of this one.",
    security(("console_session" = [])),
    params(DeliverySearch),
    responses(
        (status = 200, description = "The deliveries", body = DeliveryList),
        (status = 400, description = "A filter is malformed (status, type, time, cursor, unknown parameter)", body = ErrorBody, example = json!({"error": {"code": "invalid_status", "message": "status must be one of pending, succeeded, dead, abandoned"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn deliveries(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<DeliverySearch>,
) -> Result<Json<DeliveryList>, ApiError> {
    p.require(Permission::View)?;
    let items = st.core.search_deliveries(&q).await?;
    Ok(Json(DeliveryList { items }))
}

#[utoipa::path(
    get,
    path = "/webhooks/deliveries/{id}",
    tag = "ops",
    operation_id = "ops_webhook_delivery",
    summary = "A webhook delivery with its attempts and its event",
    security(("console_session" = [])),
    params(("id" = i64, Path, description = "The delivery's id")),
    responses(
        (status = 200, description = "The delivery", body = DeliveryDetail),
        (status = 400, description = "The id is not an integer", body = ErrorBody, example = json!({"error": {"code": "invalid_path", "message": "Cannot parse `x` to a `i64`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such delivery", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "delivery not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn delivery(
    State(st): State<OpsState>,
    p: Principal,
    ApiPath(id): ApiPath<i64>,
) -> Result<Json<DeliveryDetail>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(st.core.delivery_detail(id).await?))
}

/// Body of the state-changing webhook actions.
#[derive(Debug, Deserialize, Default, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = WebhookReasonBody, example = json!({"reason": "merchant lost the first one"}))]
pub struct ReasonBody {
    /// Why (audited): not blank, at most 2000 characters.
    #[schema(schema_with = crate::schema::note_schema)]
    pub reason: String,
}

#[utoipa::path(
    post,
    path = "/webhooks/deliveries/{id}/redeliver",
    tag = "ops",
    operation_id = "ops_redeliver",
    summary = "Redeliver a webhook delivery",
    description = "Puts a delivery that is not pending (succeeded, dead, abandoned) back for a new round of attempts now (operators; audited with the reason).",
    security(("console_session" = [])),
    params(("id" = i64, Path, description = "The delivery's id")),
    request_body(content = ReasonBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Put back", body = Redelivered),
        (status = 400, description = "No reason, the body is not valid, or the id is not an integer", body = ErrorBody, example = json!({"error": {"code": "invalid_reason", "message": "a reason of 1 to 2000 characters is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such delivery", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "delivery not found"}})),
        (status = 409, description = "The delivery is still pending: its next attempt is scheduled", body = ErrorBody, example = json!({"error": {"code": "delivery_pending", "message": "the delivery is still pending; its next attempt is scheduled"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn redeliver(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<Redelivered>, ApiError> {
    p.require(Permission::RequestActions)?;
    let redelivered = st
        .core
        .redeliver_one(&actor(&p, &addr), id, &body.reason)
        .await?;
    Ok(Json(Redelivered { redelivered }))
}

/// Query of the recovery preview.
#[derive(Debug, Deserialize, Default, Clone, Serialize)]
#[serde(deny_unknown_fields)]
pub struct SinceQuery {
    /// Failed deliveries created at or after this time: RFC 3339 or `YYYY-MM-DD` (UTC).
    pub since: String,
}

// Written out: the derive drops `required` (and the description) of a field whose schema is
// given with `schema_with`, and `since` is required (schemathesis found it documented as
// optional).
impl IntoParams for SinceQuery {
    fn into_params(
        _: impl Fn() -> Option<utoipa::openapi::path::ParameterIn>,
    ) -> Vec<utoipa::openapi::path::Parameter> {
        use utoipa::openapi::Required;
        use utoipa::openapi::path::{ParameterBuilder, ParameterIn};
        vec![
            ParameterBuilder::new()
                .name("since")
                .parameter_in(ParameterIn::Query)
                .required(Required::True)
                .description(Some(
                    "Failed deliveries created at or after this time: RFC 3339 or `YYYY-MM-DD` (UTC).",
                ))
                .schema(Some(crate::schema::time_schema()))
                .build(),
        ]
    }
}

#[utoipa::path(
    get,
    path = "/webhooks/endpoints/{id}/recover/preview",
    tag = "ops",
    operation_id = "ops_webhook_recovery_preview",
    summary = "Preview a recovery: an endpoint's failed deliveries since a time",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The endpoint's id"), SinceQuery),
    responses(
        (status = 200, description = "What a recovery would put back", body = RecoveryPreview),
        (status = 400, description = "`since` is missing or not a time", body = ErrorBody, example = json!({"error": {"code": "invalid_time", "message": "since must be RFC 3339 or YYYY-MM-DD"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such endpoint", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "webhook endpoint not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn preview(
    State(st): State<OpsState>,
    p: Principal,
    ApiPath(id): ApiPath<String>,
    ApiQuery(q): ApiQuery<SinceQuery>,
) -> Result<Json<RecoveryPreview>, ApiError> {
    p.require(Permission::View)?;
    let (since, items) = st.core.recovery_preview(&id, &q.since).await?;
    Ok(Json(RecoveryPreview {
        endpoint: id,
        since,
        items,
    }))
}

/// Body of `POST /ops/v1/webhooks/endpoints/{id}/recover`.
#[derive(Debug, Deserialize, Default, Clone, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"since": "2026-12-01", "delivery_ids": [41, 42], "reason": "receiver was down for maintenance"}))]
pub struct RecoverBody {
    /// The preview's `since`: RFC 3339 or `YYYY-MM-DD` (UTC).
    #[schema(schema_with = crate::schema::time_schema)]
    pub since: String,
    /// The deliveries the preview showed and the person kept selected (1 to 500).
    #[schema(min_items = 1, max_items = 500)]
    pub delivery_ids: Vec<i64>,
    /// Why (audited): not blank, at most 2000 characters.
    #[schema(schema_with = crate::schema::note_schema)]
    pub reason: String,
}

#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{id}/recover",
    tag = "ops",
    operation_id = "ops_webhook_recover",
    summary = "Recover an endpoint: redeliver the previewed failed deliveries",
    description = "Redelivers the selected deliveries that are still failed deliveries of this endpoint since `since` (the server checks again) and names the rest (operators; audited; at most 5 recoveries a minute per user).",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The endpoint's id")),
    request_body(content = RecoverBody, content_type = "application/json"),
    responses(
        (status = 200, description = "What was put back and what was skipped", body = Recovered),
        (status = 400, description = "No reason, no or too many deliveries selected, `since` not a time, or the body is not valid", body = ErrorBody, example = json!({"error": {"code": "invalid_selection", "message": "select 1 to 500 deliveries from the preview"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "More than 5 recoveries in a minute by this user", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "at most 5 recoveries a minute; retry in 42 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn recover(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<RecoverBody>,
) -> Result<Json<Recovered>, ApiError> {
    p.require(Permission::RequestActions)?;
    let done = st
        .core
        .recover_endpoint(
            &actor(&p, &addr),
            &id,
            &body.since,
            &body.delivery_ids,
            &body.reason,
        )
        .await?;
    Ok(Json(Recovered {
        redelivered: done.redelivered,
        skipped: done.skipped,
    }))
}

#[utoipa::path(
    post,
    path = "/webhooks/endpoints/{id}/enable",
    tag = "ops",
    operation_id = "ops_webhook_enable",
    summary = "Re-enable a disabled webhook endpoint",
    description = "Operators; audited with the reason. New events are delivered to it again; what it missed while disabled is recovered separately.",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The endpoint's id")),
    request_body(content = ReasonBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Enabled", body = EndpointStatus, example = json!({"status": "enabled"})),
        (status = 400, description = "No reason, or the body is not valid", body = ErrorBody, example = json!({"error": {"code": "invalid_reason", "message": "a reason of 1 to 2000 characters is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such endpoint", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "webhook endpoint not found"}})),
        (status = 409, description = "The endpoint is already enabled, or was deleted by the merchant", body = ErrorBody, examples(
            ("already_enabled" = (value = json!({"error": {"code": "already_enabled", "message": "the endpoint is already enabled"}}))),
            ("webhook_endpoint_deleted" = (value = json!({"error": {"code": "webhook_endpoint_deleted", "message": "the merchant deleted this endpoint; it cannot be re-enabled"}})))
        )),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn enable(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(body): ApiJson<ReasonBody>,
) -> Result<Json<EndpointStatus>, ApiError> {
    p.require(Permission::RequestActions)?;
    let status = st
        .core
        .enable_endpoint(&actor(&p, &addr), &id, &body.reason)
        .await?;
    Ok(Json(EndpointStatus {
        status: status.as_str().into(),
    }))
}

/// The webhook routes, merged into `/ops/v1`, each with its OpenAPI documentation.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<OpsState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(get_overview))
        .routes(routes!(deliveries))
        .routes(routes!(delivery))
        .routes(routes!(redeliver))
        .routes(routes!(preview))
        .routes(routes!(recover))
        .routes(routes!(enable))
}

//! `/ops/v1/pauses`: the emergency switch (issue 17 "Emergency switch"). Operators request a
//! pause and end it; a different approver approves it, re-entering their password (step-up,
//! as for actions). Ending takes the operator's password again, and before the minimum
//! duration a different approver too (issue 36).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use converge_wire::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::OpsState;
use super::audit::actor;
use super::auth::Principal;
use super::extract::ClientAddr;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::service::pauses::PauseEnd;
use crate::store::PauseRecord;

/// The `/ops/v1/pauses` routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<OpsState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(list, request))
        .routes(routes!(approve))
        .routes(routes!(reject))
        .routes(routes!(resume))
}

/// One pause.
#[derive(Debug, Serialize, ToSchema)]
pub struct PauseEnvelope {
    /// The pause as it is now.
    pub pause: PauseRecord,
}

/// The pauses: pending and active ones first (oldest first), then the last 50 that ended.
#[derive(Debug, Serialize, ToSchema)]
pub struct PauseList {
    /// The pauses.
    pub items: Vec<PauseRecord>,
}

/// Body of `POST /ops/v1/pauses`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseRequestBody {
    /// `submissions`, `job:<kind>` or `endpoint:<id>`.
    #[schema(schema_with = crate::schema::pause_target_schema)]
    target: String,
    /// Why (audited, shown in the console's banner).
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// Body of an approval: the approver's password again, and a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseApproveBody {
    /// The approver's own password (step-up), or
    #[serde(default)]
    password: Option<String>,
    /// a passkey's assertion (`POST /ops/v1/passkeys/step-up` first): exactly one of the
    /// two. While an admin requires passkeys, the password is refused (403
    /// `passkey_required`).
    #[serde(default)]
    passkey: Option<super::passkeys::PasskeyAssertion>,
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// Body of ending (or cancelling) a pause: the operator's password again, and a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseEndBody {
    /// The operator's own password (step-up). Without it: 403 `step_up_required`.
    #[serde(default)]
    password: Option<String>,
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// Body with a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PauseReasonBody {
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// How long a pending pause stays approvable (the use case's rule, kept at this path for
/// its callers).
pub use crate::service::pauses::PAUSE_TTL_MS;

/// Lists the pauses (anyone who may view).
#[utoipa::path(
    get,
    path = "/pauses",
    tag = "ops",
    operation_id = "ops_list_pauses",
    summary = "Emergency-switch pauses",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "Pending and active pauses, then the last that ended", body = PauseList),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn list(State(st): State<OpsState>, p: Principal) -> Result<Json<PauseList>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(PauseList {
        items: st.core.pause_list(50).await?,
    }))
}

/// Requests a pause (operators); it takes effect when a different approver approves it.
#[utoipa::path(
    post,
    path = "/pauses",
    tag = "ops",
    operation_id = "ops_request_pause",
    summary = "Request a pause (emergency switch)",
    description = "Pauses submissions to the channel (payments are accepted and held PENDING), one job kind, or webhook deliveries to one endpoint, once a different approver approves it.",
    security(("console_session" = [])),
    request_body(content = PauseRequestBody, content_type = "application/json"),
    responses(
        (status = 201, description = "The pause, pending approval", body = PauseEnvelope),
        (status = 400, description = "Bad target or reason", body = ErrorBody, example = json!({"error": {"code": "invalid_target", "message": "target must be `submissions`, `job:<kind>` or `endpoint:<id>`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such webhook endpoint", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "webhook endpoint not found"}})),
        (status = 409, description = "The target already has a pending or active pause", body = ErrorBody, example = json!({"error": {"code": "pause_open", "message": "submissions already has a pending or active pause"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn request(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<PauseRequestBody>,
) -> Result<(StatusCode, Json<PauseEnvelope>), ApiError> {
    p.require(Permission::RequestActions)?;
    let pause = st
        .core
        .request_pause(&actor(&p, &addr), &b.target, &b.reason)
        .await?;
    Ok((StatusCode::CREATED, Json(PauseEnvelope { pause })))
}

/// Approves a pending pause (approvers other than the requester, after step-up), or an
/// active pause's early end request (approvers other than who asked; the pause is resumed).
#[utoipa::path(
    post,
    path = "/pauses/{id}/approve",
    tag = "ops",
    operation_id = "ops_approve_pause",
    summary = "Approve a pending pause: it is in force within a second everywhere",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The pause's id")),
    request_body(content = PauseApproveBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The pause, active", body = PauseEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed by the role (`forbidden`), cross-site (`csrf_rejected`), the password while an admin requires passkeys (`passkey_required`), or not approved (`approval_refused`): one answer for a wrong password or passkey, no such pause, the user's own request, and one already decided or expired", body = ErrorBody, example = json!({"error": {"code": "approval_refused", "message": "not approved: re-enter your own password, for a pending request someone else made that is still current"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many failed password checks", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 4 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn approve(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<PauseApproveBody>,
) -> Result<Json<PauseEnvelope>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let asserted = super::passkeys::assertion(b.passkey.as_ref())?;
    let pause = st
        .core
        .approve_pause_with_step_up(
            st.step_up_with(
                &p,
                &addr,
                super::passkeys::proof(b.password.as_deref(), asserted.as_ref())?,
            ),
            &id,
            &b.reason,
        )
        .await?;
    Ok(Json(PauseEnvelope { pause }))
}

/// Rejects a pending pause (approvers other than the requester).
#[utoipa::path(
    post,
    path = "/pauses/{id}/reject",
    tag = "ops",
    operation_id = "ops_reject_pause",
    summary = "Reject a pending pause",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The pause's id")),
    request_body(content = PauseReasonBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The pause, rejected", body = PauseEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed: role, cross-site, or the user's own request", body = ErrorBody, example = json!({"error": {"code": "self_approval", "message": "a pause must be approved or rejected by someone other than its requester"}})),
        (status = 404, description = "No such pause", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "pause not found"}})),
        (status = 409, description = "The pause is not pending, or expired", body = ErrorBody, example = json!({"error": {"code": "not_pending", "message": "this pause is active"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn reject(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<PauseReasonBody>,
) -> Result<Json<PauseEnvelope>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let pause = st
        .core
        .reject_pause(&actor(&p, &addr), &id, &b.reason)
        .await?;
    Ok(Json(PauseEnvelope { pause }))
}

/// Ends a pause (operators, after step-up): an active pause in force for at least
/// `--pause-min-duration-secs` is resumed and a pending one cancelled (200); a younger active
/// pause is not ended but gets an early end request that a different approver approves at
/// `.../approve` or rejects at `.../reject` (202), as its start was (issue 36).
#[utoipa::path(
    post,
    path = "/pauses/{id}/resume",
    tag = "ops",
    operation_id = "ops_resume_pause",
    summary = "End a pause (password again): resumed, cancelled, or, before its minimum duration, an end request for an approver",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The pause's id")),
    request_body(content = PauseEndBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The pause, resumed (or cancelled if it was pending)", body = PauseEnvelope),
        (status = 202, description = "Active for less than the minimum duration: the pause, still active, with its early end request awaiting a different approver", body = PauseEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed by the role (`forbidden`), cross-site (`csrf_rejected`), no password (`step_up_required`) or a wrong one (`step_up_refused`)", body = ErrorBody, example = json!({"error": {"code": "step_up_required", "message": "re-enter your password to end or cancel a pause"}})),
        (status = 404, description = "No such pause", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "pause not found"}})),
        (status = 409, description = "The pause already ended (`not_open`), or its early end already awaits an approver (`end_requested`)", body = ErrorBody, example = json!({"error": {"code": "not_open", "message": "this pause is resumed"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many failed password checks", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 4 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn resume(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<PauseEndBody>,
) -> Result<(StatusCode, Json<PauseEnvelope>), ApiError> {
    p.require(Permission::RequestActions)?;
    let Some(password) = b.password.filter(|pw| !pw.is_empty()) else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::StepUpRequired,
            "re-enter your password to end or cancel a pause",
        ));
    };
    let end = st
        .core
        .end_pause_with_step_up(st.step_up(&p, &addr, &password), &id, &b.reason)
        .await?;
    Ok(match end {
        PauseEnd::Ended(pause) => (StatusCode::OK, Json(PauseEnvelope { pause })),
        PauseEnd::Requested(pause) => (StatusCode::ACCEPTED, Json(PauseEnvelope { pause })),
    })
}

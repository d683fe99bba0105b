//! `/ops/v1/privilege-requests`: the two-person rule on privilege (issue 36). A console change
//! that gives power (a user with operator, approver or admin; a privileged role granted; a
//! disabled user enabled; a merchant key issued; a merchant unfrozen) answers 202 with a
//! pending request; another admin approves it here, re-entering their password (step-up, as
//! for money actions), or rejects it; its requester may cancel it.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::OpsState;
use super::audit::actor;
use super::auth::Principal;
use super::extract::ClientAddr;
use super::extract::Empty;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::service::privilege::{PrivilegeApproved, PrivilegeError, PrivilegeInbox};
use crate::store::PrivilegeRequest;

/// The `/ops/v1/privilege-requests` routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<OpsState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(list))
        .routes(routes!(approve))
        .routes(routes!(reject))
        .routes(routes!(cancel))
}

/// A privilege request waiting for (or past) another admin's decision.
#[derive(Debug, Serialize, ToSchema)]
pub struct PrivilegeEnvelope {
    /// The request as it is now.
    pub request: PrivilegeRequest,
}

/// A privilege refusal's answer: the user's, the merchant's or the request's.
impl From<PrivilegeError> for ApiError {
    fn from(e: PrivilegeError) -> Self {
        match e {
            PrivilegeError::User(u) => u.into(),
            PrivilegeError::Merchant(m) => m.into(),
            PrivilegeError::Request(a) => a.into(),
        }
    }
}

/// 202 `{"request": ...}`: the change became a request another admin decides.
pub fn requested(request: PrivilegeRequest) -> Response {
    (StatusCode::ACCEPTED, Json(PrivilegeEnvelope { request })).into_response()
}

/// Body of an approval: the approving admin's password again, and a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovePrivilegeBody {
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

/// Body with a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PrivilegeReasonBody {
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// The pending privilege requests and the 50 latest decided ones (admins).
#[utoipa::path(
    get,
    path = "/privilege-requests",
    tag = "ops",
    operation_id = "ops_privilege_requests",
    summary = "Privilege requests waiting for another admin (admins)",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "Pending (at most 200) and the 50 latest decided, newest first", body = PrivilegeInbox),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn list(State(st): State<OpsState>, p: Principal) -> Result<Json<PrivilegeInbox>, ApiError> {
    p.require(Permission::ManageUsers)?;
    Ok(Json(st.core.privilege_inbox(50).await?))
}

/// Approves and runs a privilege request (an admin other than its requester and its
/// target, after step-up). An issued key is in the answer, this once.
#[utoipa::path(
    post,
    path = "/privilege-requests/{id}/approve",
    tag = "ops",
    operation_id = "ops_privilege_approve",
    summary = "Approve a privilege request (another admin, password again)",
    description = "Runs the change once (audited `privilege_approved`, then `privilege_executed` or `privilege_failed`, with the change's own record). A wrong password, one's own request, a grant to oneself, and a request already decided or expired all get one answer, 403 `approval_refused`.",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The request's id (`prv_...`)")),
    request_body(content = ApprovePrivilegeBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Approved and run (`executed`, or `failed` with why in `result`)", body = PrivilegeApproved),
        (status = 400, description = "The body is not a valid approval", body = ErrorBody, example = json!({"error": {"code": "invalid_reason", "message": "a reason is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not an admin (`forbidden`), cross-site (`csrf_rejected`), the password while an admin requires passkeys (`passkey_required`), or refused (`approval_refused`)", body = ErrorBody, example = json!({"error": {"code": "approval_refused", "message": "not approved: re-enter your own password, for a pending request someone else made that is still current"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many failed password checks", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 4 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn approve(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<ApprovePrivilegeBody>,
) -> Result<Json<PrivilegeApproved>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let asserted = super::passkeys::assertion(b.passkey.as_ref())?;
    let done = st
        .core
        .approve_privilege_with_step_up(
            st.step_up_with(
                &p,
                &addr,
                super::passkeys::proof(b.password.as_deref(), asserted.as_ref())?,
            ),
            &id,
            &b.reason,
        )
        .await?;
    Ok(Json(done))
}

/// Rejects a privilege request (an admin other than its requester and its target).
#[utoipa::path(
    post,
    path = "/privilege-requests/{id}/reject",
    tag = "ops",
    operation_id = "ops_privilege_reject",
    summary = "Reject a privilege request (another admin)",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The request's id (`prv_...`)")),
    request_body(content = PrivilegeReasonBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The request as it is now", body = PrivilegeEnvelope),
        (status = 400, description = "The body is not valid", body = ErrorBody, example = json!({"error": {"code": "invalid_reason", "message": "a reason is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not an admin, cross-site, or one's own request", body = ErrorBody, example = json!({"error": {"code": "self_approval", "message": "a privilege request must be decided by another admin"}})),
        (status = 404, description = "No such request", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "privilege request not found"}})),
        (status = 409, description = "Not pending, or expired", body = ErrorBody, example = json!({"error": {"code": "not_pending", "message": "this request is executed"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn reject(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<PrivilegeReasonBody>,
) -> Result<Json<PrivilegeEnvelope>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let request = st
        .core
        .reject_privilege(&actor(&p, &addr), &id, &b.reason)
        .await?;
    Ok(Json(PrivilegeEnvelope { request }))
}

/// Withdraws one's own pending privilege request.
#[utoipa::path(
    post,
    path = "/privilege-requests/{id}/cancel",
    tag = "ops",
    operation_id = "ops_privilege_cancel",
    summary = "Cancel one's own privilege request",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The request's id (`prv_...`)")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 200, description = "The request as it is now", body = PrivilegeEnvelope),
        (status = 400, description = "The body is not `{}`", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: unknown field `x`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not an admin, cross-site, or someone else's request", body = ErrorBody, example = json!({"error": {"code": "not_requester", "message": "only the requester can cancel a request"}})),
        (status = 404, description = "No such request", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "privilege request not found"}})),
        (status = 409, description = "Not pending", body = ErrorBody, example = json!({"error": {"code": "not_pending", "message": "this request is executed"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn cancel(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<PrivilegeEnvelope>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let request = st.core.cancel_privilege(&actor(&p, &addr), &id).await?;
    Ok(Json(PrivilegeEnvelope { request }))
}

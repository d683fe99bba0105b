//! `/ops/v1/actions`: request, approve, reject, cancel and re-execute ops actions
//! (DESIGN.md "Ops console"). Approvers re-enter their password to approve (step-up).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use converge_wire::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::OpsState;
use super::audit::actor;
use super::auth::Principal;
use super::extract::{ClientAddr, Empty};
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody};
use crate::service::actions::ActionRequest;
use crate::service::bulk::{BulkItem, BulkOutcome, Confirmed, Selection};
use crate::store::ActionRecord;

/// One ops action.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionEnvelope {
    /// The action as it is now.
    pub action: ActionRecord,
}

/// `{"items": [...]}` of ops actions.
#[derive(Debug, Serialize, ToSchema)]
pub struct ActionList {
    /// The actions, newest first (at most 200).
    pub items: Vec<ActionRecord>,
}

/// What a bulk retry of a selection would retry now.
#[derive(Debug, Serialize, ToSchema)]
pub struct BulkPreview {
    /// The selection, as understood.
    pub selection: Selection,
    /// The payments, each with the version a confirm must carry back.
    pub items: Vec<BulkItem>,
}

/// How long a pending request stays approvable (24 h, DESIGN.md "Requests expire").
pub const DEFAULT_TTL_MS: i64 = 24 * 3_600_000;

/// Body of `POST /ops/v1/actions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestBody {
    /// `query`, `retry`, `reverse` or `force_transition`.
    kind: String,
    /// The payment.
    payment_id: String,
    /// Why (required).
    reason: String,
    /// For `force_transition`: the state to force (whitelisted transitions only).
    target_status: Option<String>,
    /// For `force_transition`: the evidence (required there).
    evidence: Option<String>,
    /// For `capture`: the amount, integer minor units of the payment's currency (required
    /// there: > 0 and at most what the hold still holds).
    capture_amount: Option<i64>,
    /// For `capture`: whether it is the final capture, which releases the rest (default
    /// false).
    capture_final: Option<bool>,
}

// Its schema is a `oneOf` (what `force_transition` requires differs), written by hand in
// `crate::schema::action_request_schema`.
impl utoipa::PartialSchema for RequestBody {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        crate::schema::action_request_schema().into()
    }
}

impl ToSchema for RequestBody {
    fn name() -> std::borrow::Cow<'static, str> {
        "RequestBody".into()
    }
}

/// Requests an action (operators). 201 with the action: executed for query/retry, pending
/// for reverse/force.
#[utoipa::path(
    post,
    path = "/actions",
    tag = "ops",
    operation_id = "ops_request_action",
    summary = "Request an action on a payment",
    description = "`query` and `retry` run at once; `reverse`, `force_transition`, `capture` and `void` wait for a different approver.",
    security(("console_session" = [])),
    request_body(content = RequestBody, content_type = "application/json"),
    responses(
        (status = 201, description = "The action: executed (query, retry) or pending (reverse, force_transition)", body = ActionEnvelope,
            links(
                ("ShowAction" = (operation_id = "ops_show_action", parameters(("id" = "$response.body#/action/id")))),
                ("ApproveAction" = (operation_id = "ops_approve_action", parameters(("id" = "$response.body#/action/id")))),
                ("RejectAction" = (operation_id = "ops_reject_action", parameters(("id" = "$response.body#/action/id")))),
                ("CancelAction" = (operation_id = "ops_cancel_action", parameters(("id" = "$response.body#/action/id")))),
                ("ExecuteAction" = (operation_id = "ops_execute_action", parameters(("id" = "$response.body#/action/id"))))
            )),
        (status = 400, description = "Unknown kind, no reason, or force_transition without a valid target_status or evidence", body = ErrorBody, example = json!({"error": {"code": "invalid_action", "message": "unknown action kind"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such payment", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 409, description = "The payment's state does not allow it (already has a pending request, not reversible, not a whitelisted transition from its state)", body = ErrorBody, example = json!({"error": {"code": "action_pending", "message": "this payment already has a pending request"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "More `query` and `retry` actions than this user may run a minute (`--action-limit-per-minute`, 60 by default)", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "at most 60 query and retry actions a minute; retry in 12 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn request(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<RequestBody>,
) -> Result<(StatusCode, Json<ActionEnvelope>), ApiError> {
    p.require(Permission::RequestActions)?;
    let req = ActionRequest {
        kind: b.kind,
        payment_id: b.payment_id,
        reason: b.reason,
        target_status: b.target_status,
        evidence: b.evidence,
        capture_amount: b.capture_amount,
        capture_final: b.capture_final,
    };
    let a = st.core.request_action(&p.actor(&addr), &req).await?;
    Ok((StatusCode::CREATED, Json(ActionEnvelope { action: a })))
}

/// Query of the list.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// Only actions in this status (e.g. `pending`).
    status: Option<String>,
    /// Only actions on this payment.
    payment: Option<String>,
}

/// Lists actions (anyone who may view).
#[utoipa::path(
    get,
    path = "/actions",
    tag = "ops",
    operation_id = "ops_list_actions",
    summary = "Ops actions",
    security(("console_session" = [])),
    params(ListQuery),
    responses(
        (status = 200, description = "The actions", body = ActionList),
        (status = 400, description = "A query parameter is malformed", body = ErrorBody, example = json!({"error": {"code": "invalid_query", "message": "Failed to deserialize query string"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn list(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<ActionList>, ApiError> {
    p.require(Permission::View)?;
    let clean = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let items = st
        .core
        .store
        .actions(
            clean(&q.status).as_deref(),
            clean(&q.payment).as_deref(),
            200,
        )
        .await?;
    Ok(Json(ActionList { items }))
}

/// One action.
#[utoipa::path(
    get,
    path = "/actions/{id}",
    tag = "ops",
    operation_id = "ops_show_action",
    summary = "One ops action",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The action's id")),
    responses(
        (status = 200, description = "The action", body = ActionEnvelope),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such action", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "action not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn show(
    State(st): State<OpsState>,
    p: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<ActionEnvelope>, ApiError> {
    p.require(Permission::View)?;
    let a = st
        .core
        .store
        .action(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("action"))?;
    Ok(Json(ActionEnvelope { action: a }))
}

/// Body of an approval: the approver's password again, and a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
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

/// Approves and executes (approvers other than the requester, after step-up).
#[utoipa::path(
    post,
    path = "/actions/{id}/approve",
    tag = "ops",
    operation_id = "ops_approve_action",
    summary = "Approve and execute a pending action",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The action's id")),
    request_body(content = ApproveBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The action as it is now", body = ActionEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed by the role (`forbidden`), cross-site (`csrf_rejected`), the password while an admin requires passkeys (`passkey_required`), or not approved (`approval_refused`): one answer, after the same work, for a wrong password or a passkey assertion that does not verify, no such action, the user's own request, and an action already decided, expired or stale", body = ErrorBody, example = json!({"error": {"code": "approval_refused", "message": "not approved: re-enter your own password, for a pending request someone else made that is still current"}})),
        (status = 409, description = "Approved, but the payment was busy: run it again with execute", body = ErrorBody, example = json!({"error": {"code": "payment_busy", "message": "payment pay_... is busy; retry"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many failed password checks from this address, or for this user from this address", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 4 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn approve(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<ApproveBody>,
) -> Result<Json<ActionEnvelope>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let asserted = super::passkeys::assertion(b.passkey.as_ref())?;
    let a = st
        .core
        .approve_action_with_step_up(
            st.step_up_with(
                &p,
                &addr,
                super::passkeys::proof(b.password.as_deref(), asserted.as_ref())?,
            ),
            &id,
            &b.reason,
        )
        .await?;
    Ok(Json(ActionEnvelope { action: a }))
}

/// Body with a reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// Rejects (approvers other than the requester).
#[utoipa::path(
    post,
    path = "/actions/{id}/reject",
    tag = "ops",
    operation_id = "ops_reject_action",
    summary = "Reject a pending action",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The action's id")),
    request_body(content = ReasonBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The action as it is now", body = ActionEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed: role, own request, or wrong password", body = ErrorBody, example = json!({"error": {"code": "self_approval", "message": "you cannot decide your own request"}})),
        (status = 404, description = "No such action", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "action not found"}})),
        (status = 409, description = "The action is not pending (or not executable), or it is stale: the payment moved", body = ErrorBody, example = json!({"error": {"code": "not_pending", "message": "the action is not pending"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn reject(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<ReasonBody>,
) -> Result<Json<ActionEnvelope>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let a = st
        .core
        .reject_action(&actor(&p, &addr), &id, &b.reason)
        .await?;
    Ok(Json(ActionEnvelope { action: a }))
}

/// Cancels one's own pending request.
#[utoipa::path(
    post,
    path = "/actions/{id}/cancel",
    tag = "ops",
    operation_id = "ops_cancel_action",
    summary = "Cancel your own pending request",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The action's id")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 200, description = "The action as it is now", body = ActionEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed: role, own request, or wrong password", body = ErrorBody, example = json!({"error": {"code": "not_requester", "message": "only the requester can cancel"}})),
        (status = 404, description = "No such action", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "action not found"}})),
        (status = 409, description = "The action is not pending (or not executable), or it is stale: the payment moved", body = ErrorBody, example = json!({"error": {"code": "not_pending", "message": "the action is not pending"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn cancel(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<ActionEnvelope>, ApiError> {
    p.require(Permission::RequestActions)?;
    let a = st.core.cancel_action(&actor(&p, &addr), &id).await?;
    Ok(Json(ActionEnvelope { action: a }))
}

/// Runs an approved or failed action again (approvers; each step is idempotent).
#[utoipa::path(
    post,
    path = "/actions/{id}/execute",
    tag = "ops",
    operation_id = "ops_execute_action",
    summary = "Run an approved or failed action again",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The action's id")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 200, description = "The action as it is now", body = ActionEnvelope),
        (status = 400, description = "The body is not a valid request", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `reason`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not allowed: role, own request, or wrong password", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such action", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "action not found"}})),
        (status = 409, description = "The action is not pending (or not executable), or it is stale: the payment moved", body = ErrorBody, example = json!({"error": {"code": "not_pending", "message": "the action is not pending"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn execute(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<ActionEnvelope>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let a = st.core.execute_action(&actor(&p, &addr), &id).await?;
    Ok(Json(ActionEnvelope { action: a }))
}

pub use crate::service::bulk::BULK_RETRIES_PER_MINUTE;

/// What a bulk retry selects from (the documented values of a selection's `source`).
#[derive(Debug, Clone, Copy, ToSchema)]
#[allow(dead_code)] // Only documents the values; the handler reads `source` as text.
#[schema(rename_all = "snake_case")]
pub enum SelectionSource {
    /// Stuck payments (of one state, or all).
    Stuck,
    /// The payments of open error-pool items (of one kind, or all).
    ErrorPool,
}

/// Query of the bulk-retry preview: the selection.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PreviewQuery {
    /// `stuck` or `error_pool` (required; a missing or unknown one is 400
    /// `invalid_selection`, like every other selection mistake).
    #[param(value_type = SelectionSource, required = true, inline)]
    source: Option<String>,
    /// For `stuck`: the state.
    #[param(schema_with = crate::schema::stuck_status_schema)]
    status: Option<String>,
    /// For `error_pool`: the item kind.
    kind: Option<String>,
    /// For `error_pool`: only the payments of these items, comma-separated ids (`4,7,9`).
    #[param(pattern = r"^[0-9]{1,18}(,[0-9]{1,18}){0,99}$")]
    ids: Option<String>,
}

/// Parses a comma-separated list of item ids (`4,7,9`); blank means none. Errors:
/// `invalid_selection` (400) for anything else.
pub fn parse_ids(v: Option<&str>) -> Result<Option<Vec<i64>>, ApiError> {
    let Some(v) = v.map(str::trim).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    v.split(',')
        .map(|p| p.trim().parse::<i64>())
        .collect::<Result<Vec<_>, _>>()
        .map(Some)
        .map_err(|_| {
            ApiError::bad_request(
                ErrorCode::InvalidSelection,
                "ids must be comma-separated item numbers",
            )
        })
}

/// `GET /ops/v1/actions/bulk-retry/preview?source=stuck|error_pool&status=&kind=`
/// (operators): the exact payments a bulk retry of that selection would retry now, each with
/// the version the confirm must carry back (`{"selection": ..., "items": [...]}`).
#[utoipa::path(
    get,
    path = "/actions/bulk-retry/preview",
    tag = "ops",
    operation_id = "ops_bulk_retry_preview",
    summary = "Preview a bulk retry",
    security(("console_session" = [])),
    params(PreviewQuery),
    responses(
        (status = 200, description = "The payments the selection holds now", body = BulkPreview),
        (status = 400, description = "Not a valid selection", body = ErrorBody, example = json!({"error": {"code": "invalid_selection", "message": "source must be stuck or error_pool"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn bulk_preview(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<PreviewQuery>,
) -> Result<Json<BulkPreview>, ApiError> {
    p.require(Permission::RequestActions)?;
    let sel = Selection {
        source: q.source.unwrap_or_default(),
        status: q.status,
        kind: q.kind,
        ids: parse_ids(q.ids.as_deref())?,
    };
    let items = st.core.bulk_retry_preview(&sel).await?;
    Ok(Json(BulkPreview {
        selection: sel,
        items,
    }))
}

/// Body of `POST /ops/v1/actions/bulk-retry`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    /// The selection the preview showed.
    selection: Selection,
    /// The previewed payments to retry, each at its previewed version (at most 100).
    #[schema(min_items = 1, max_items = 100)]
    items: Vec<Confirmed>,
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

/// `POST /ops/v1/actions/bulk-retry` (operators): retries the previewed items still in the
/// selection at the previewed version; 200 with `{"retried": [...], "skipped": [...]}`.
/// Rate-limited per user (429 `rate_limited` with Retry-After).
#[utoipa::path(
    post,
    path = "/actions/bulk-retry",
    tag = "ops",
    operation_id = "ops_bulk_retry",
    summary = "Retry the previewed payments still in the selection",
    security(("console_session" = [])),
    request_body(content = BulkBody, content_type = "application/json"),
    responses(
        (status = 200, description = "What was retried and what was skipped, with why", body = BulkOutcome),
        (status = 400, description = "Not a valid selection, no items, too many, or no reason", body = ErrorBody, example = json!({"error": {"code": "invalid_selection", "message": "source must be stuck or error_pool"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "More than 5 bulk retries a minute", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "at most 5 bulk retries a minute; retry in 30 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn bulk_retry(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<BulkBody>,
) -> Result<Json<BulkOutcome>, ApiError> {
    p.require(Permission::RequestActions)?;
    let out = st
        .core
        .bulk_retry(&actor(&p, &addr), &b.selection, &b.items, &b.reason)
        .await?;
    Ok(Json(out))
}

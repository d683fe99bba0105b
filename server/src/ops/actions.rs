//! `/ops/v1/actions`: request, approve, reject, cancel and re-execute ops actions
//! (DESIGN.md "Ops console"). Approvers re-enter their password to approve (step-up).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use super::audit::actor;
use super::auth::Principal;
use super::handlers::ClientAddr;
use crate::api::AppState;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery};
use crate::service::actions::{ActionError, ActionRequest};
use crate::service::bulk::{BulkOutcome, Confirmed, Selection};

/// How long a pending request stays approvable (24 h, DESIGN.md "Requests expire").
pub const DEFAULT_TTL_MS: i64 = 24 * 3_600_000;

/// The HTTP answer of an action error.
pub fn action_error(e: ActionError) -> ApiError {
    match e {
        ActionError::Invalid(code, m) => ApiError::bad_request(code, m),
        ActionError::NotFound(what) => ApiError::not_found(what),
        ActionError::Forbidden(code, m) => ApiError::new(StatusCode::FORBIDDEN, code, m),
        ActionError::Conflict(code, m) => ApiError::new(StatusCode::CONFLICT, code, m),
        ActionError::Store(s) => s.into(),
    }
}

/// Body of `POST /ops/v1/actions`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestBody {
    kind: String,
    payment_id: String,
    reason: String,
    target_status: Option<String>,
    evidence: Option<String>,
}

/// Requests an action (operators). 201 with the action: executed for query/retry, pending
/// for reverse/force.
pub async fn request(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<RequestBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    p.require(Permission::RequestActions)?;
    let req = ActionRequest {
        kind: b.kind,
        payment_id: b.payment_id,
        reason: b.reason,
        target_status: b.target_status,
        evidence: b.evidence,
    };
    let a = st
        .core
        .request_action(
            &actor(&p, &addr),
            &req,
            st.settings.action_ttl_secs as i64 * 1000,
        )
        .await
        .map_err(action_error)?;
    Ok((StatusCode::CREATED, Json(json!({"action": a}))))
}

/// Query of the list.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    status: Option<String>,
    payment: Option<String>,
}

/// Lists actions (anyone who may view).
pub async fn list(
    State(st): State<AppState>,
    p: Principal,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> Result<Json<Value>, ApiError> {
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
    Ok(Json(json!({"items": items})))
}

/// One action.
pub async fn show(
    State(st): State<AppState>,
    p: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    let a = st
        .core
        .store
        .action(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("action"))?;
    Ok(Json(json!({"action": a})))
}

/// Body of an approval: the approver's password again, and a reason.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApproveBody {
    password: String,
    reason: String,
}

/// Approves and executes (approvers other than the requester, after step-up).
pub async fn approve(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<ApproveBody>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ApproveActions)?;
    step_up(&st, &p, &addr, &b.password).await?;
    let a = st
        .core
        .approve_action(&actor(&p, &addr), &id, &b.reason)
        .await
        .map_err(action_error)?;
    Ok(Json(json!({"action": a})))
}

/// Checks the signed-in user's password again; a mismatch is audited and refused (403).
pub async fn step_up(
    st: &AppState,
    p: &Principal,
    addr: &str,
    password: &str,
) -> Result<(), ApiError> {
    let user = st.core.store.user_by_name(&p.username).await?;
    if st
        .auth
        .hasher
        .verify(password, user.as_ref().map(|u| u.password_hash.as_str()))
        .await
    {
        return Ok(());
    }
    let now = st.core.clock.now_ms();
    let e = actor(p, addr).entry(
        now,
        "step_up_failed",
        &format!("user:{}", p.username),
        "wrong password at approval",
        String::new(),
        String::new(),
    );
    st.core.store.append_audit(&e).await?;
    Err(ApiError::new(
        StatusCode::FORBIDDEN,
        "password_mismatch",
        "re-enter your own password to approve",
    ))
}

/// Body with a reason.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReasonBody {
    reason: String,
}

/// Rejects (approvers other than the requester).
pub async fn reject(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(b): ApiJson<ReasonBody>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let a = st
        .core
        .reject_action(&actor(&p, &addr), &id, &b.reason)
        .await
        .map_err(action_error)?;
    Ok(Json(json!({"action": a})))
}

/// An empty JSON body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// Cancels one's own pending request.
pub async fn cancel(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::RequestActions)?;
    let a = st
        .core
        .cancel_action(&actor(&p, &addr), &id)
        .await
        .map_err(action_error)?;
    Ok(Json(json!({"action": a})))
}

/// Runs an approved or failed action again (approvers; each step is idempotent).
pub async fn execute(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ApproveActions)?;
    let a = st
        .core
        .execute_action(&actor(&p, &addr), &id)
        .await
        .map_err(action_error)?;
    Ok(Json(json!({"action": a})))
}

/// Bulk retries one user may confirm per minute.
pub const BULK_RETRIES_PER_MINUTE: usize = 5;

/// Query of the bulk-retry preview: the selection.
#[derive(Debug, Deserialize)]
pub struct PreviewQuery {
    source: Option<String>,
    status: Option<String>,
    kind: Option<String>,
}

/// `GET /ops/v1/actions/bulk-retry/preview?source=stuck|error_pool&status=&kind=`
/// (operators): the exact payments a bulk retry of that selection would retry now, each with
/// the version the confirm must carry back (`{"selection": ..., "items": [...]}`).
pub async fn bulk_preview(
    State(st): State<AppState>,
    p: Principal,
    ApiQuery(q): ApiQuery<PreviewQuery>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::RequestActions)?;
    let sel = Selection {
        source: q.source.unwrap_or_default(),
        status: q.status,
        kind: q.kind,
    };
    let items = st
        .core
        .bulk_retry_preview(&sel, &st.settings.stuck_thresholds())
        .await
        .map_err(action_error)?;
    Ok(Json(json!({"selection": sel, "items": items})))
}

/// Body of `POST /ops/v1/actions/bulk-retry`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkBody {
    selection: Selection,
    items: Vec<Confirmed>,
    reason: String,
}

/// `POST /ops/v1/actions/bulk-retry` (operators): retries the previewed items still in the
/// selection at the previewed version; 200 with `{"retried": [...], "skipped": [...]}`.
/// Rate-limited per user (429 `rate_limited` with Retry-After).
pub async fn bulk_retry(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<BulkBody>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::RequestActions)?;
    let out = run_bulk_retry(&st, &actor(&p, &addr), &b.selection, &b.items, &b.reason).await?;
    Ok(Json(json!(out)))
}

/// A bulk retry by `who` as both the JSON endpoint and the console's server function run it:
/// bad input is answered first (so it spends no allowance), then one bulk retry is taken from
/// the user's allowance, then [`Core::bulk_retry`](crate::service::Core::bulk_retry) runs.
/// The caller has checked the role.
pub async fn run_bulk_retry(
    st: &AppState,
    who: &crate::service::actions::Actor,
    sel: &Selection,
    items: &[Confirmed],
    reason: &str,
) -> Result<BulkOutcome, ApiError> {
    crate::service::bulk::validate(sel, items, reason).map_err(action_error)?;
    bulk_permit(st, &who.username)?;
    st.core
        .bulk_retry(
            who,
            sel,
            items,
            reason,
            &st.settings.stuck_thresholds(),
            st.settings.action_ttl_secs as i64 * 1000,
        )
        .await
        .map_err(action_error)
}

/// Takes one bulk retry from `user`'s allowance, or answers 429.
fn bulk_permit(st: &AppState, user: &str) -> Result<(), ApiError> {
    let now = st.core.clock.now_ms();
    let mut limiter = st
        .bulk_limiter
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if limiter.try_acquire(user, now) {
        return Ok(());
    }
    let secs = limiter.retry_after_secs(user, now);
    Err(ApiError::new(
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
        format!("at most {BULK_RETRIES_PER_MINUTE} bulk retries a minute; retry in {secs} s"),
    )
    .with_retry_after(secs))
}

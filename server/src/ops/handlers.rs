//! `/ops/v1` JSON endpoints (DESIGN.md "Ops console": stable endpoints for scripts and tests;
//! session cookie; state changes are POST with a JSON body). Every handler checks its
//! permission on the server.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;
use serde::{Deserialize, Serialize};
use tower_sessions::Session;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::OpsState;
use super::auth::Principal;
pub use super::extract::{ClientAddr, client_addr_of, resolve_client_addr};
use crate::domain::roles::{Permission, format_roles};
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody};
use crate::service::privilege::Change;
use crate::service::queries::blank;
use crate::service::users::UserView;
use crate::store::{ErrorItem, Merchant};

/// The `/ops/v1` routes (state applied by the caller), each with its OpenAPI documentation.
pub fn routes() -> OpenApiRouter<OpsState> {
    OpenApiRouter::new()
        .routes(routes!(login))
        .routes(routes!(logout))
        .routes(routes!(me))
        .routes(routes!(get_dashboard))
        .routes(routes!(super::live::live))
        .routes(routes!(merchants))
        .routes(routes!(search))
        .routes(routes!(super::payments_export::export))
        .routes(routes!(detail))
        .routes(routes!(error_pool))
        .routes(routes!(resolve))
        .routes(routes!(super::error_pool::by_kind))
        .routes(routes!(super::error_pool::bulk_resolve_preview))
        .routes(routes!(super::error_pool::bulk_resolve))
        .routes(routes!(super::error_pool::act))
        .routes(routes!(list_users, add_user))
        .routes(routes!(disable_user))
        .routes(routes!(enable_user))
        .routes(routes!(reset_password))
        .routes(routes!(set_roles))
        .routes(routes!(super::actions::list, super::actions::request))
        .routes(routes!(super::actions::bulk_preview))
        .routes(routes!(super::actions::bulk_retry))
        .routes(routes!(super::actions::show))
        .routes(routes!(super::actions::approve))
        .routes(routes!(super::actions::reject))
        .routes(routes!(super::actions::cancel))
        .routes(routes!(super::actions::execute))
        .routes(routes!(super::audit::export))
        .routes(routes!(super::audit::verify_handler))
        .routes(routes!(super::audit::list))
        .routes(routes!(list_keys, issue_key))
        .routes(routes!(revoke_key))
        .merge(super::webhooks::routes())
        .merge(super::lookup::routes())
        .merge(super::pauses::routes())
        .merge(super::privilege::routes())
        .merge(super::passkeys::routes())
}

pub use converge_wire::PrincipalView;

fn principal_view(p: &Principal) -> PrincipalView {
    PrincipalView {
        username: p.username.clone(),
        roles: format_roles(&p.roles)
            .split(',')
            .map(str::to_owned)
            .collect(),
    }
}

/// `{"items": [...]}` of merchants.
#[derive(Debug, Serialize, ToSchema)]
pub struct MerchantList {
    /// Every merchant.
    pub items: Vec<Merchant>,
}

/// One page of a payment search: a wire type, sent by `GET /ops/v1/payments` and the
/// console's server function alike.
pub use converge_wire::PaymentPage;

/// `{"items": [...]}` of error-pool items.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorItemList {
    /// The items, newest first.
    pub items: Vec<ErrorItem>,
}

/// A resolved error-pool item.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResolvedItem {
    /// The item as it is now.
    pub item: Option<ErrorItem>,
}

/// `{"items": [...]}` of console users.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserList {
    /// Every user.
    pub items: Vec<UserView>,
}

/// One console user.
#[derive(Debug, Serialize, ToSchema)]
pub struct UserEnvelope {
    /// The user.
    pub user: UserView,
}

/// Body of `POST /ops/v1/login`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"username": "alice", "password": "a-long-password-here"}))]
pub struct LoginBody {
    /// User name.
    username: String,
    /// Password.
    password: String,
}

#[utoipa::path(
    post,
    path = "/login",
    tag = "ops",
    operation_id = "ops_login",
    summary = "Sign in",
    description = "Checks the password and starts a session: the answer sets the session cookie (HttpOnly, SameSite=Strict). Unknown user, wrong password and disabled user get the same 401. Failed attempts are limited per client address, and each (account, client address) waits a delay that doubles with every failure past the free ones; the counts are shared by every server on the database.",
    request_body(content = LoginBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Signed in; the session cookie is set", body = PrincipalView),
        (status = 400, description = "The body is not a valid login", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: missing field `password`"}})),
        (status = 401, description = "Unknown user, wrong password or disabled user", body = ErrorBody, example = json!({"error": {"code": "invalid_credentials", "message": "unknown user or wrong password"}})),
        (status = 403, description = "Cross-site request", body = ErrorBody, example = json!({"error": {"code": "csrf_rejected", "message": "cross-origin request refused"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many attempts", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 60 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn login(
    State(st): State<OpsState>,
    ClientAddr(addr): ClientAddr,
    session: Session,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Json<PrincipalView>, ApiError> {
    let p = st
        .auth
        .login(
            st.core.store.as_ref(),
            &session,
            body.username.trim(),
            &body.password,
            &addr,
            st.core.clock.as_ref(),
        )
        .await?;
    Ok(Json(principal_view(&p)))
}

#[utoipa::path(
    post,
    path = "/logout",
    tag = "ops",
    operation_id = "ops_logout",
    summary = "Sign out",
    description = "Ends the session (destroyed on the server) and clears the cookie.",
    security(("console_session" = [])),
    responses(
        (status = 204, description = "Signed out"),
        (status = 403, description = "Cross-site request", body = ErrorBody, example = json!({"error": {"code": "csrf_rejected", "message": "cross-origin request refused"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn logout(
    State(st): State<OpsState>,
    ClientAddr(addr): ClientAddr,
    session: Session,
    headers: axum::http::HeaderMap,
) -> Result<StatusCode, ApiError> {
    // No body, but a change all the same: JSON only, like every other `/ops/v1` POST (a
    // cross-site form cannot send that without a CORS preflight).
    if !crate::error::is_json_content_type(&headers) {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ErrorCode::UnsupportedMediaType,
            "send Content-Type: application/json",
        ));
    }
    let now = st.core.clock.now_ms();
    st.auth
        .logout(st.core.store.as_ref(), &session, &addr, now)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    get,
    path = "/me",
    tag = "ops",
    operation_id = "ops_me",
    summary = "The signed-in user",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "The signed-in user", body = PrincipalView),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn me(p: Principal) -> Json<PrincipalView> {
    Json(principal_view(&p))
}

#[utoipa::path(
    get,
    path = "/dashboard",
    tag = "ops",
    operation_id = "ops_dashboard",
    summary = "Dashboard: stuck payments, idempotency hit rate, queue, error pool",
    description = "Scripts that poll it should send `X-Converge-Background: 1`: a background request is served as usual but does not restart the session's idle timeout (any `/ops/v1` endpoint honours the header).",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "The dashboard", body = crate::service::dashboard::Dashboard),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn get_dashboard(
    State(st): State<OpsState>,
    p: Principal,
) -> Result<Json<crate::service::dashboard::Dashboard>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(st.core.dashboard().await?))
}

#[utoipa::path(
    get,
    path = "/merchants",
    tag = "ops",
    operation_id = "ops_merchants",
    summary = "Merchants",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "Every merchant", body = MerchantList),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn merchants(
    State(st): State<OpsState>,
    p: Principal,
) -> Result<Json<MerchantList>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(MerchantList {
        items: st.core.store.merchants().await?,
    }))
}

/// Query of `GET /ops/v1/payments`.
pub use crate::service::queries::PaymentSearch;

#[utoipa::path(
    get,
    path = "/payments",
    tag = "ops",
    operation_id = "ops_search_payments",
    summary = "Search payments",
    description = "Filters combine; `after` pages on from the previous page's `next`.",
    security(("console_session" = [])),
    params(PaymentSearch),
    responses(
        (status = 200, description = "One page of payments", body = PaymentPage),
        (status = 400, description = "A filter is malformed (status, failure reason, time, cursor)", body = ErrorBody, example = json!({"error": {"code": "invalid_time", "message": "from must be RFC 3339 or YYYY-MM-DD"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn search(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<PaymentSearch>,
) -> Result<Json<PaymentPage>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(st.core.search_payments(&q).await?))
}

#[utoipa::path(
    get,
    path = "/payments/{id}",
    tag = "ops",
    operation_id = "ops_payment_detail",
    summary = "A payment's whole story",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The payment's id")),
    responses(
        (status = 200, description = "The payment with its events, jobs, ledger, refunds, error-pool items, actions and audit records", body = crate::service::dashboard::PaymentDetail),
        (status = 400, description = "The id is not a valid path segment", body = ErrorBody, example = json!({"error": {"code": "invalid_path", "message": "the path may not contain %00"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such payment", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn detail(
    State(st): State<OpsState>,
    p: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<crate::service::dashboard::PaymentDetail>, ApiError> {
    p.require(Permission::View)?;
    let d = st
        .core
        .payment_detail(&id)
        .await?
        .ok_or_else(|| ApiError::not_found("payment"))?;
    Ok(Json(d))
}

/// Query of `GET /ops/v1/error-pool`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PoolQuery {
    /// `open` or `resolved`; both when absent or empty.
    #[param(schema_with = crate::schema::pool_status_schema)]
    status: Option<String>,
    /// Only items of this kind (e.g. `suspense`, `reconcile_amount_mismatch`).
    kind: Option<String>,
    /// At most this many (1..=500, default 100; others are clamped).
    limit: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/error-pool",
    tag = "ops",
    operation_id = "ops_error_pool",
    summary = "Error-pool items",
    security(("console_session" = [])),
    params(PoolQuery),
    responses(
        (status = 200, description = "The items", body = ErrorItemList,
            links(("ResolveFirstItem" = (operation_id = "ops_resolve_error", parameters(("id" = "$response.body#/items/0/id")))))),
        (status = 400, description = "status is not open or resolved", body = ErrorBody, example = json!({"error": {"code": "invalid_status", "message": "status must be open or resolved"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn error_pool(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<PoolQuery>,
) -> Result<Json<ErrorItemList>, ApiError> {
    p.require(Permission::View)?;
    let status = crate::service::error_pool::check_status(q.status.as_deref())?;
    let items = st
        .core
        .store
        .error_items(status, blank(&q.kind), q.limit.unwrap_or(100).clamp(1, 500))
        .await?;
    Ok(Json(ErrorItemList { items }))
}

/// Body of a resolution.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"note": "statement corrected by the channel"}))]
pub struct ResolveBody {
    /// What was done about it (1 to 2000 characters, not only spaces).
    #[schema(schema_with = crate::schema::note_schema)]
    note: String,
}

#[utoipa::path(
    post,
    path = "/error-pool/{id}/resolve",
    tag = "ops",
    operation_id = "ops_resolve_error",
    summary = "Resolve an error-pool item",
    security(("console_session" = [])),
    params(("id" = i64, Path, description = "The item's id")),
    request_body(content = ResolveBody, content_type = "application/json"),
    responses(
        (status = 200, description = "Resolved", body = ResolvedItem),
        (status = 400, description = "No note, or a malformed id", body = ErrorBody, example = json!({"error": {"code": "invalid_note", "message": "a resolution note of 1 to 2000 bytes is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such error-pool item", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "error-pool item not found"}})),
        (status = 409, description = "Already resolved", body = ErrorBody, example = json!({"error": {"code": "already_resolved", "message": "this item is already resolved"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn resolve(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<ResolveBody>,
) -> Result<Json<ResolvedItem>, ApiError> {
    p.require(Permission::ResolveErrors)?;
    let item = st
        .core
        .resolve_error_item(&super::audit::actor(&p, &addr), id, &body.note)
        .await?;
    Ok(Json(ResolvedItem { item: Some(item) }))
}

#[utoipa::path(
    get,
    path = "/users",
    tag = "ops",
    operation_id = "ops_list_users",
    summary = "Console users",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "Every user", body = UserList),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn list_users(State(st): State<OpsState>, p: Principal) -> Result<Json<UserList>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let items = st.core.list_users().await?;
    Ok(Json(UserList { items }))
}

/// Body of `POST /ops/v1/users`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"username": "bob", "roles": "viewer,approver", "password": "another-long-password"}))]
pub struct NewUserBody {
    /// User name.
    #[schema(schema_with = crate::schema::username_schema)]
    username: String,
    /// Comma-separated roles.
    #[schema(schema_with = crate::schema::roles_schema)]
    roles: String,
    /// 12 to 256 characters.
    #[schema(schema_with = crate::schema::new_password_schema)]
    password: String,
}

#[utoipa::path(
    post,
    path = "/users",
    tag = "ops",
    operation_id = "ops_add_user",
    summary = "Add a console user",
    security(("console_session" = [])),
    request_body(content = NewUserBody, content_type = "application/json"),
    responses(
        (status = 202, description = "A user with operator, approver or admin: a request another admin approves (issue 36)", body = super::privilege::PrivilegeEnvelope),
        (status = 201, description = "Added (viewer or auditor only)", body = UserEnvelope,
            links(
                ("DisableUser" = (operation_id = "ops_user_disable", parameters(("name" = "$response.body#/user/username")))),
                ("EnableUser" = (operation_id = "ops_user_enable", parameters(("name" = "$response.body#/user/username")))),
                ("ResetPassword" = (operation_id = "ops_user_password", parameters(("name" = "$response.body#/user/username")))),
                ("SetRoles" = (operation_id = "ops_user_roles", parameters(("name" = "$response.body#/user/username"))))
            )),
        (status = 400, description = "Bad name, role or password", body = ErrorBody, example = json!({"error": {"code": "invalid_user", "message": "password must be at least 12 characters"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 409, description = "A user with this name exists, or the same privilege change already waits for an admin (`privilege_pending`)", body = ErrorBody, example = json!({"error": {"code": "user_exists", "message": "user bob exists"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn add_user(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<NewUserBody>,
) -> Result<Response, ApiError> {
    p.require(Permission::ManageUsers)?;
    let change = st
        .core
        .console_add_user(
            &super::audit::actor(&p, &addr),
            &st.auth.credentials.hasher,
            &b.username,
            &b.roles,
            &b.password,
        )
        .await?;
    Ok(match change {
        Change::Done(user) => (StatusCode::CREATED, Json(UserEnvelope { user })).into_response(),
        Change::Requested(r) => super::privilege::requested(r),
    })
}

use super::extract::Empty;

/// A merchant's API keys, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct MerchantKeyList {
    /// The keys (never the key itself: id, prefix, times).
    pub items: Vec<crate::store::MerchantKey>,
}

/// `GET /ops/v1/merchants/{name}/keys` (admins): id, prefix, created, last used, revoked.
#[utoipa::path(
    get,
    path = "/merchants/{name}/keys",
    tag = "ops",
    operation_id = "ops_merchant_keys",
    summary = "A merchant's API keys (admins)",
    security(("console_session" = [])),
    params(("name" = String, Path, description = "The merchant's name")),
    responses(
        (status = 200, description = "The keys, oldest first", body = MerchantKeyList),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such merchant", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "no merchant named \"shop\""}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn list_keys(
    State(st): State<OpsState>,
    p: Principal,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<MerchantKeyList>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let items = st.core.list_merchant_keys(&name).await?;
    Ok(Json(MerchantKeyList { items }))
}

/// `POST /ops/v1/merchants/{name}/keys` `{}` (admins): a new key, shown once in the answer;
/// the merchant's other keys keep working.
#[utoipa::path(
    post,
    path = "/merchants/{name}/keys",
    tag = "ops",
    operation_id = "ops_merchant_key_issue",
    summary = "Issue another API key to a merchant (admins)",
    description = "A request another admin approves with step-up (`POST /ops/v1/privilege-requests/{id}/approve`, issue 36): the new key is in that answer only; the merchant's other keys keep working until revoked, so a rotation has no gap. Audited (`privilege_requested`, then `merchant_key_issued`).",
    security(("console_session" = [])),
    params(("name" = String, Path, description = "The merchant's name")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 202, description = "A request another admin approves (issue 36); the key is shown to that admin once, in the approval's answer", body = super::privilege::PrivilegeEnvelope),
        (status = 409, description = "The same privilege change already waits for an admin", body = ErrorBody, example = json!({"error": {"code": "privilege_pending", "message": "the same change for shop already waits for an admin"}})),
        (status = 400, description = "The body is not `{}`", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: unknown field `x`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such merchant", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "no merchant named \"shop\""}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn issue_key(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Response, ApiError> {
    p.require(Permission::ManageUsers)?;
    let r = st
        .core
        .console_issue_key(&super::audit::actor(&p, &addr), &name)
        .await?;
    Ok(super::privilege::requested(r))
}

/// `POST /ops/v1/merchants/{name}/keys/{id}/revoke` `{}` (admins): 401 for that key at once.
#[utoipa::path(
    post,
    path = "/merchants/{name}/keys/{id}/revoke",
    tag = "ops",
    operation_id = "ops_merchant_key_revoke",
    summary = "Revoke a merchant's API key (admins)",
    description = "From the commit on, every server answers 401 to the key. Audited (`merchant_key_revoked`) in the same transaction.",
    security(("console_session" = [])),
    params(
        ("name" = String, Path, description = "The merchant's name"),
        ("id" = String, Path, description = "The key's id (`mk_...`)")
    ),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 204, description = "Revoked"),
        (status = 400, description = "The body is not `{}`", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "invalid request body: unknown field `x`"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such merchant, or no unrevoked key with this id", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "merchant \"shop\" has no unrevoked key \"mk_3f9a1c2e7b4d\""}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn revoke_key(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath((name, id)): ApiPath<(String, String)>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::ManageUsers)?;
    st.core
        .revoke_merchant_key(
            st.core.clock.now_ms(),
            &name,
            &id,
            &super::audit::actor(&p, &addr),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post,
    path = "/users/{name}/disable",
    tag = "ops",
    operation_id = "ops_user_disable",
    summary = "Disable a user (ends their sessions)",
    security(("console_session" = [])),
    params(("name" = String, Path, description = "The user's name")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 204, description = "Disabled"),
        (status = 400, description = "Bad input (e.g. disabling yourself)", body = ErrorBody, example = json!({"error": {"code": "invalid_user", "message": "you cannot disable yourself"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such user", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "user bob not found"}})),
        (status = 409, description = "It would disable the last enabled admin", body = ErrorBody, example = json!({"error": {"code": "last_admin", "message": "this is the last enabled admin: add or enable another admin first"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn disable_user(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::ManageUsers)?;
    st.core
        .set_user_disabled(
            &name,
            true,
            st.core.clock.now_ms(),
            &super::audit::actor(&p, &addr),
        )
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(
    post,
    path = "/users/{name}/enable",
    tag = "ops",
    operation_id = "ops_user_enable",
    summary = "Enable a user",
    security(("console_session" = [])),
    params(("name" = String, Path, description = "The user's name")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 204, description = "Already enabled: nothing to do"),
        (status = 202, description = "A disabled user: a request another admin approves (issue 36)", body = super::privilege::PrivilegeEnvelope),
        (status = 409, description = "The same privilege change already waits for an admin", body = ErrorBody, example = json!({"error": {"code": "privilege_pending", "message": "the same change for bob already waits for an admin"}})),
        (status = 400, description = "Bad input (e.g. disabling yourself)", body = ErrorBody, example = json!({"error": {"code": "invalid_user", "message": "you cannot disable yourself"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such user", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "user bob not found"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn enable_user(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Response, ApiError> {
    p.require(Permission::ManageUsers)?;
    let change = st
        .core
        .console_enable_user(&super::audit::actor(&p, &addr), &name)
        .await?;
    Ok(match change {
        Change::Done(()) => StatusCode::NO_CONTENT.into_response(),
        Change::Requested(r) => super::privilege::requested(r),
    })
}

/// Body of a password reset.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasswordBody {
    /// The new password, 12 to 256 characters.
    #[schema(schema_with = crate::schema::new_password_schema)]
    password: String,
}

#[utoipa::path(
    post,
    path = "/users/{name}/password",
    tag = "ops",
    operation_id = "ops_user_password",
    summary = "Reset a user's password (ends their sessions)",
    security(("console_session" = [])),
    params(("name" = String, Path, description = "The user's name")),
    request_body(content = PasswordBody, content_type = "application/json"),
    responses(
        (status = 202, description = "Someone else holding operator, approver or admin: a request another admin approves (issue 36)", body = super::privilege::PrivilegeEnvelope),
        (status = 409, description = "The same privilege change already waits for an admin", body = ErrorBody, example = json!({"error": {"code": "privilege_pending", "message": "the same change for bob already waits for an admin"}})),
        (status = 204, description = "Reset"),
        (status = 400, description = "Bad input (e.g. disabling yourself)", body = ErrorBody, example = json!({"error": {"code": "invalid_user", "message": "you cannot disable yourself"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such user", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "user bob not found"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn reset_password(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(b): ApiJson<PasswordBody>,
) -> Result<Response, ApiError> {
    p.require(Permission::ManageUsers)?;
    let change = st
        .core
        .console_reset_password(
            &super::audit::actor(&p, &addr),
            &st.auth.credentials.hasher,
            &name,
            &b.password,
        )
        .await?;
    Ok(match change {
        Change::Done(()) => StatusCode::NO_CONTENT.into_response(),
        Change::Requested(r) => super::privilege::requested(r),
    })
}

/// Body of a role change.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RolesBody {
    /// Comma-separated roles.
    #[schema(schema_with = crate::schema::roles_schema)]
    roles: String,
}

#[utoipa::path(
    post,
    path = "/users/{name}/roles",
    tag = "ops",
    operation_id = "ops_user_roles",
    summary = "Set a user's roles",
    security(("console_session" = [])),
    params(("name" = String, Path, description = "The user's name")),
    request_body(content = RolesBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The user with its new roles (no operator, approver or admin role added)", body = UserEnvelope),
        (status = 202, description = "Grants operator, approver or admin: a request another admin approves (issue 36)", body = super::privilege::PrivilegeEnvelope),
        (status = 409, description = "It would leave no enabled admin, or the same privilege change already waits for an admin (`privilege_pending`)", body = ErrorBody, example = json!({"error": {"code": "last_admin", "message": "this is the last enabled admin: add or enable another admin first"}})),
        (status = 400, description = "Bad input (e.g. disabling yourself)", body = ErrorBody, example = json!({"error": {"code": "invalid_user", "message": "you cannot disable yourself"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such user", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "user bob not found"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn set_roles(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(b): ApiJson<RolesBody>,
) -> Result<Response, ApiError> {
    p.require(Permission::ManageUsers)?;
    let change = st
        .core
        .console_set_roles(&super::audit::actor(&p, &addr), &name, &b.roles)
        .await?;
    Ok(match change {
        Change::Done(user) => Json(UserEnvelope { user }).into_response(),
        Change::Requested(r) => super::privilege::requested(r),
    })
}

//! `/ops/v1` JSON endpoints (DESIGN.md "Ops console": stable endpoints for scripts and tests;
//! session cookie; state changes are POST with a JSON body). Every handler checks its
//! permission on the server.

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_sessions::Session;

use super::auth::{LoginError, Principal};
use super::dashboard::{dashboard, payment_detail};
use super::users::{self, UserError, UserView};
use crate::api::AppState;
use crate::domain::roles::{Permission, format_roles};
use crate::domain::state::PaymentStatus;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery};
use crate::store::PaymentFilter;

/// The `/ops/v1` routes (state applied by the caller).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/login", post(login))
        .route("/logout", post(logout))
        .route("/me", get(me))
        .route("/dashboard", get(get_dashboard))
        .route("/merchants", get(merchants))
        .route("/payments", get(search))
        .route("/payments/{id}", get(detail))
        .route("/error-pool", get(error_pool))
        .route("/error-pool/{id}/resolve", post(resolve))
        .route("/merchants/{name}/keys", get(list_keys).post(issue_key))
        .route("/merchants/{name}/keys/{id}/revoke", post(revoke_key))
        .route("/users", get(list_users).post(add_user))
        .route("/users/{name}/disable", post(disable_user))
        .route("/users/{name}/enable", post(enable_user))
        .route("/users/{name}/password", post(reset_password))
        .route("/users/{name}/roles", post(set_roles))
        .route(
            "/actions",
            get(super::actions::list).post(super::actions::request),
        )
        .route(
            "/actions/bulk-retry/preview",
            get(super::actions::bulk_preview),
        )
        .route("/actions/bulk-retry", post(super::actions::bulk_retry))
        .route("/actions/{id}", get(super::actions::show))
        .route("/actions/{id}/approve", post(super::actions::approve))
        .route("/actions/{id}/reject", post(super::actions::reject))
        .route("/actions/{id}/cancel", post(super::actions::cancel))
        .route("/actions/{id}/execute", post(super::actions::execute))
        .route("/audit/export", get(super::audit::export))
        .route("/audit/verify", get(super::audit::verify_handler))
}

fn principal_json(p: &Principal) -> Value {
    json!({"username": p.username, "roles": format_roles(&p.roles).split(',').collect::<Vec<_>>()})
}

/// Body of `POST /ops/v1/login`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginBody {
    username: String,
    password: String,
}

/// The client's IP address when the server was started with connect info, else `unknown`.
pub struct ClientAddr(pub String);

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        let addr = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string());
        Ok(ClientAddr(addr.unwrap_or_else(|| "unknown".into())))
    }
}

async fn login(
    State(st): State<AppState>,
    ClientAddr(addr): ClientAddr,
    session: Session,
    ApiJson(body): ApiJson<LoginBody>,
) -> Result<Json<Value>, ApiError> {
    match st
        .auth
        .login(
            st.core.store.as_ref(),
            &session,
            body.username.trim(),
            &body.password,
            &addr,
            st.core.clock.as_ref(),
        )
        .await
    {
        Ok(p) => {
            tracing::info!(user = %crate::telemetry::log_safe(&p.username, 64), addr = %crate::telemetry::log_safe(&addr, 64), "console login");
            Ok(Json(principal_json(&p)))
        }
        Err(LoginError::InvalidCredentials) => {
            tracing::warn!(user = %crate::telemetry::log_safe(&body.username, 64), addr = %crate::telemetry::log_safe(&addr, 64), "console login refused");
            Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_credentials",
                "unknown user or wrong password",
            ))
        }
        Err(LoginError::RateLimited(secs)) => Err(ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limited",
            format!("too many login attempts; retry in {secs} s"),
        )
        .with_retry_after(secs)),
        Err(LoginError::Store(e)) => Err(e.into()),
        Err(LoginError::Session(e)) => Err(ApiError::internal(e)),
    }
}

async fn logout(
    State(st): State<AppState>,
    ClientAddr(addr): ClientAddr,
    session: Session,
) -> Result<StatusCode, ApiError> {
    let now = st.core.clock.now_ms();
    match st
        .auth
        .logout(st.core.store.as_ref(), &session, &addr, now)
        .await
    {
        Ok(()) => Ok(StatusCode::NO_CONTENT),
        Err(LoginError::Store(e)) => Err(e.into()),
        Err(e) => Err(ApiError::internal(e)),
    }
}

async fn me(p: Principal) -> Json<Value> {
    Json(principal_json(&p))
}

async fn get_dashboard(State(st): State<AppState>, p: Principal) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    let d = dashboard(&st.core, &st.settings.stuck_thresholds()).await?;
    Ok(Json(serde_json::to_value(d).map_err(ApiError::internal)?))
}

async fn merchants(State(st): State<AppState>, p: Principal) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(json!({"items": st.core.store.merchants().await?})))
}

/// Query of `GET /ops/v1/payments`.
#[derive(Debug, Deserialize, Default)]
pub struct SearchQuery {
    /// Payment id (exact): the one payment.
    pub id: Option<String>,
    /// Status name.
    pub status: Option<String>,
    /// Merchant name.
    pub merchant: Option<String>,
    /// merchant_order_id (exact).
    pub order: Option<String>,
    /// Created at or after: RFC 3339 or `YYYY-MM-DD` (UTC).
    pub from: Option<String>,
    /// Created before: RFC 3339 or `YYYY-MM-DD` (UTC).
    pub to: Option<String>,
    /// Paging cursor from the previous page's `next`.
    pub after: Option<String>,
    /// Page size (1..=200, default 50).
    pub limit: Option<i64>,
}

/// A console time filter: RFC 3339 or `YYYY-MM-DD` (UTC); 400 `invalid_time` otherwise.
pub fn parse_time(field: &str, v: &str) -> Result<i64, ApiError> {
    crate::domain::clock::parse_utc(v).map_err(|_| {
        ApiError::bad_request(
            "invalid_time",
            format!("{field} must be RFC 3339 or YYYY-MM-DD"),
        )
    })
}

fn blank(o: &Option<String>) -> Option<&str> {
    o.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// Runs a payment search for the console; shared with the server functions.
pub async fn run_search(st: &AppState, q: &SearchQuery) -> Result<Value, ApiError> {
    let store = &st.core.store;
    if let Some(id) = blank(&q.id) {
        let items: Vec<_> = store.payment(id).await?.into_iter().collect();
        return Ok(json!({"items": items, "next": null}));
    }
    let mut f = PaymentFilter {
        limit: q.limit.unwrap_or(50).clamp(1, 200),
        ..PaymentFilter::default()
    };
    if let Some(s) = blank(&q.status) {
        let status: PaymentStatus = s.parse().map_err(|_| {
            ApiError::bad_request("invalid_status", format!("unknown status {s:?}"))
        })?;
        f.status = Some(status.as_str().to_string());
    }
    if let Some(name) = blank(&q.merchant) {
        match store
            .merchants()
            .await?
            .into_iter()
            .find(|m| m.name == name)
        {
            Some(m) => f.merchant_id = Some(m.id),
            None => return Ok(json!({"items": [], "next": null})),
        }
    }
    f.merchant_order_id = blank(&q.order).map(str::to_string);
    f.from = blank(&q.from).map(|v| parse_time("from", v)).transpose()?;
    f.to = blank(&q.to).map(|v| parse_time("to", v)).transpose()?;
    if let Some(cursor) = blank(&q.after) {
        let (at, id) = cursor
            .split_once('_')
            .and_then(|(at, id)| at.parse::<i64>().ok().map(|at| (at, id.to_string())))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_cursor",
                    "after must be a cursor from a previous page",
                )
            })?;
        f.after = Some((at, id));
    }
    let items = store.search_payments(&f).await?;
    let next = (items.len() as i64 == f.limit)
        .then(|| items.last().map(|p| format!("{}_{}", p.created_at, p.id)))
        .flatten();
    Ok(json!({"items": items, "next": next}))
}

async fn search(
    State(st): State<AppState>,
    p: Principal,
    ApiQuery(q): ApiQuery<SearchQuery>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(run_search(&st, &q).await?))
}

async fn detail(
    State(st): State<AppState>,
    p: Principal,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    let d = payment_detail(&st.core, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("payment"))?;
    Ok(Json(serde_json::to_value(d).map_err(ApiError::internal)?))
}

/// Query of `GET /ops/v1/error-pool`.
#[derive(Debug, Deserialize)]
struct PoolQuery {
    status: Option<String>,
    kind: Option<String>,
    limit: Option<i64>,
}

async fn error_pool(
    State(st): State<AppState>,
    p: Principal,
    ApiQuery(q): ApiQuery<PoolQuery>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::View)?;
    let status = blank(&q.status);
    if status.is_some_and(|s| s != "open" && s != "resolved") {
        return Err(ApiError::bad_request(
            "invalid_status",
            "status must be open or resolved",
        ));
    }
    let items = st
        .core
        .store
        .error_items(status, blank(&q.kind), q.limit.unwrap_or(100).clamp(1, 500))
        .await?;
    Ok(Json(json!({"items": items})))
}

/// Body of a resolution.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResolveBody {
    note: String,
}

async fn resolve(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<i64>,
    ApiJson(body): ApiJson<ResolveBody>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ResolveErrors)?;
    let note = body.note.trim();
    if note.is_empty() || note.len() > 2000 {
        return Err(ApiError::bad_request(
            "invalid_note",
            "a resolution note of 1 to 2000 bytes is required",
        ));
    }
    let now = st.core.clock.now_ms();
    if !st
        .core
        .store
        .resolve_error(id, note, &p.username, now)
        .await?
    {
        return match st.core.store.error_item(id).await? {
            None => Err(ApiError::not_found("error-pool item")),
            Some(_) => Err(ApiError::new(
                StatusCode::CONFLICT,
                "already_resolved",
                "this item is already resolved",
            )),
        };
    }
    let item = st.core.store.error_item(id).await?;
    let target = format!("error:{id}");
    audit(
        &st,
        &p,
        &addr,
        "error_resolved",
        &target,
        note,
        json!({"payment_id": item.as_ref().and_then(|i| i.payment_id.clone())}),
    )
    .await?;
    Ok(Json(json!({"item": item})))
}

/// Appends an audit record for a console change by `p`.
pub async fn audit(
    st: &AppState,
    p: &Principal,
    addr: &str,
    action: &str,
    target: &str,
    reason: &str,
    after: Value,
) -> Result<(), ApiError> {
    let e = super::audit::actor(p, addr).entry(
        st.core.clock.now_ms(),
        action,
        target,
        reason,
        String::new(),
        after.to_string(),
    );
    st.core.store.append_audit(&e).await?;
    Ok(())
}

fn user_error(e: UserError) -> ApiError {
    match e {
        UserError::Invalid(m) => ApiError::bad_request("invalid_user", m),
        UserError::Exists(_) => ApiError::new(StatusCode::CONFLICT, "user_exists", e.to_string()),
        UserError::NotFound(_) => ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string()),
        UserError::Store(s) => s.into(),
    }
}

async fn list_users(State(st): State<AppState>, p: Principal) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let users: Vec<UserView> = st
        .core
        .store
        .users()
        .await?
        .iter()
        .map(UserView::from)
        .collect();
    Ok(Json(json!({"items": users})))
}

/// Body of `POST /ops/v1/users`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewUserBody {
    username: String,
    roles: String,
    password: String,
}

async fn add_user(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<NewUserBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    p.require(Permission::ManageUsers)?;
    let now = st.core.clock.now_ms();
    let u = users::add_user(
        st.core.store.as_ref(),
        &st.auth.hasher,
        b.username.trim(),
        &b.roles,
        &b.password,
        now,
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(user_error)?;
    Ok((StatusCode::CREATED, Json(json!({"user": u}))))
}

fn merchant_error(e: crate::service::merchants::MerchantError) -> ApiError {
    use crate::service::merchants::MerchantError as E;
    match e {
        E::InvalidName => ApiError::bad_request("invalid_merchant", e.to_string()),
        E::Exists(_) => ApiError::new(StatusCode::CONFLICT, "merchant_exists", e.to_string()),
        E::NoMerchant(_) | E::NoKey(..) => {
            ApiError::new(StatusCode::NOT_FOUND, "not_found", e.to_string())
        }
        E::Store(s) => s.into(),
    }
}

/// `GET /ops/v1/merchants/{name}/keys` (admins): id, prefix, created, last used, revoked.
async fn list_keys(
    State(st): State<AppState>,
    p: Principal,
    ApiPath(name): ApiPath<String>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let keys = crate::service::merchants::list_merchant_keys(st.core.store.as_ref(), &name)
        .await
        .map_err(merchant_error)?;
    Ok(Json(json!({"items": keys})))
}

/// `POST /ops/v1/merchants/{name}/keys` `{}` (admins): a new key, shown once in the answer;
/// the merchant's other keys keep working.
async fn issue_key(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    p.require(Permission::ManageUsers)?;
    let (k, issued) = crate::service::merchants::issue_merchant_key(
        st.core.store.as_ref(),
        st.core.clock.now_ms(),
        &name,
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(merchant_error)?;
    Ok((
        StatusCode::CREATED,
        Json(json!({"key": k, "api_key": issued.key})),
    ))
}

/// `POST /ops/v1/merchants/{name}/keys/{id}/revoke` `{}` (admins): 401 for that key at once.
async fn revoke_key(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath((name, id)): ApiPath<(String, String)>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::ManageUsers)?;
    crate::service::merchants::revoke_merchant_key(
        st.core.store.as_ref(),
        st.core.clock.now_ms(),
        &name,
        &id,
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(merchant_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// An empty JSON object body (`{}`), required so that state changes are JSON.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

async fn disable_user(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::ManageUsers)?;
    if name == p.username {
        return Err(ApiError::bad_request(
            "invalid_user",
            "you cannot disable yourself",
        ));
    }
    users::set_disabled(
        st.core.store.as_ref(),
        &name,
        true,
        st.core.clock.now_ms(),
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(user_error)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn enable_user(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::ManageUsers)?;
    users::set_disabled(
        st.core.store.as_ref(),
        &name,
        false,
        st.core.clock.now_ms(),
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(user_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Body of a password reset.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PasswordBody {
    password: String,
}

async fn reset_password(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(b): ApiJson<PasswordBody>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::ManageUsers)?;
    users::reset_password(
        st.core.store.as_ref(),
        &st.auth.hasher,
        &name,
        &b.password,
        st.core.clock.now_ms(),
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(user_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Body of a role change.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RolesBody {
    roles: String,
}

async fn set_roles(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(name): ApiPath<String>,
    ApiJson(b): ApiJson<RolesBody>,
) -> Result<Json<Value>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let u = users::set_roles(
        st.core.store.as_ref(),
        &name,
        &b.roles,
        st.core.clock.now_ms(),
        &super::audit::actor(&p, &addr),
    )
    .await
    .map_err(user_error)?;
    Ok(Json(json!({"user": u})))
}

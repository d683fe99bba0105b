//! `/ops/v1/error-pool/...`: the error pool as a work queue (issue 17): a page of items
//! grouped by kind with the kinds and their counts, and the two steps of a bulk resolve
//! (preview, then confirm with one note), and an item's own action (issue 41: the one its
//! kind calls for, reporting what it did). The rules live in
//! [`service::error_pool`](crate::service::error_pool); these handlers parse and answer.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::OpsState;
use super::actions::parse_ids;
use super::audit::actor;
use super::auth::Principal;
use super::extract::ClientAddr;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody};
use crate::service::error_pool::{ConfirmedItem, PoolPage, ResolveOutcome, ResolveSelection};
use crate::service::pool_actions::ItemActionOutcome;
use crate::store::ErrorItem;

/// Query of `GET /ops/v1/error-pool/by-kind`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ByKindQuery {
    /// `open` or `resolved`; both when absent or empty.
    #[param(schema_with = crate::schema::pool_status_schema)]
    status: Option<String>,
    /// Only items of this kind.
    kind: Option<String>,
    /// Only this item.
    id: Option<i64>,
    /// Page number, from 0 (25 items a page).
    #[param(minimum = 0, maximum = 1000000)]
    page: Option<i64>,
}

#[utoipa::path(
    get,
    path = "/error-pool/by-kind",
    tag = "ops",
    operation_id = "ops_error_pool_by_kind",
    summary = "A page of error-pool items grouped by kind, with the kinds and their counts",
    security(("console_session" = [])),
    params(ByKindQuery),
    responses(
        (status = 200, description = "The kinds with counts and one page of items", body = PoolPage),
        (status = 400, description = "status is not open or resolved, or the page is out of range", body = ErrorBody, example = json!({"error": {"code": "invalid_status", "message": "status must be open or resolved"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn by_kind(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<ByKindQuery>,
) -> Result<Json<PoolPage>, ApiError> {
    p.require(Permission::View)?;
    let page = st
        .core
        .error_pool_page(
            q.status.as_deref(),
            q.kind.as_deref(),
            q.id,
            q.page.unwrap_or(0),
        )
        .await?;
    Ok(Json(page))
}

/// Query of the bulk-resolve preview: the selection.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResolvePreviewQuery {
    /// Only open items of this kind (all kinds when absent).
    kind: Option<String>,
    /// Only these items, comma-separated ids (`4,7,9`); every open item of the kind when
    /// absent or blank.
    #[param(pattern = r"^([0-9]{1,18}(,[0-9]{1,18}){0,99})?$")]
    ids: Option<String>,
}

/// The open items a bulk resolve of `selection` would resolve now.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResolvePreview {
    /// The selection, as the confirm must send it back.
    pub selection: ResolveSelection,
    /// The items, each with the `occurrences` the confirm must carry back.
    pub items: Vec<ErrorItem>,
}

#[utoipa::path(
    get,
    path = "/error-pool/bulk-resolve/preview",
    tag = "ops",
    operation_id = "ops_bulk_resolve_preview",
    summary = "Preview a bulk resolve",
    security(("console_session" = [])),
    params(ResolvePreviewQuery),
    responses(
        (status = 200, description = "The open items the selection holds now", body = ResolvePreview),
        (status = 400, description = "Not a valid selection", body = ErrorBody, example = json!({"error": {"code": "invalid_selection", "message": "ids must be comma-separated item numbers"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn bulk_resolve_preview(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<ResolvePreviewQuery>,
) -> Result<Json<ResolvePreview>, ApiError> {
    p.require(Permission::ResolveErrors)?;
    let selection = ResolveSelection {
        kind: q.kind,
        ids: parse_ids(q.ids.as_deref())?,
    };
    let items = st.core.bulk_resolve_preview(&selection).await?;
    Ok(Json(ResolvePreview { selection, items }))
}

/// Body of `POST /ops/v1/error-pool/bulk-resolve`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"selection": {"kind": "suspense"}, "items": [{"id": 4, "occurrences": 1}], "note": "merchant unfrozen; ledger posted"}))]
pub struct BulkResolveBody {
    /// The selection the preview showed.
    #[serde(deserialize_with = "crate::error::json_object")]
    selection: ResolveSelection,
    /// The previewed items to resolve, each with its previewed `occurrences` (at most 100).
    #[schema(min_items = 1, max_items = 100)]
    items: Vec<ConfirmedItem>,
    /// What was done about them (1 to 2000 characters, not only spaces): every item gets it.
    #[schema(schema_with = crate::schema::note_schema)]
    note: String,
}

#[utoipa::path(
    post,
    path = "/error-pool/bulk-resolve",
    tag = "ops",
    operation_id = "ops_bulk_resolve",
    summary = "Resolve the previewed items still open and unchanged, with one note",
    security(("console_session" = [])),
    request_body(content = BulkResolveBody, content_type = "application/json"),
    responses(
        (status = 200, description = "What was resolved and what was skipped, with why; each resolution is audited", body = ResolveOutcome),
        (status = 400, description = "No note, no items, too many, or not a valid selection", body = ErrorBody, example = json!({"error": {"code": "invalid_note", "message": "a resolution note of 1 to 2000 characters is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn bulk_resolve(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<BulkResolveBody>,
) -> Result<Json<ResolveOutcome>, ApiError> {
    p.require(Permission::ResolveErrors)?;
    let out = st
        .core
        .bulk_resolve(&actor(&p, &addr), &b.selection, &b.items, &b.note)
        .await?;
    Ok(Json(out))
}

/// Body of `POST /ops/v1/error-pool/{id}/act`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reason": "receiver fixed by the merchant"}))]
pub struct ActBody {
    /// Why (audited).
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
}

#[utoipa::path(
    post,
    path = "/error-pool/{id}/act",
    tag = "ops",
    operation_id = "ops_error_item_act",
    summary = "Run the action an open error-pool item offers",
    description = "The action is the one the item's kind calls for (`offers` of the by-kind page): `redeliver` a dead webhook delivery, `replay` an event the broker refused, `retry` the payment's waiting or dead jobs, `query` the channel. The answer counts what it did; a redelivered or replayed item is resolved (it opens again if that fails again).",
    security(("console_session" = [])),
    params(("id" = i64, Path, description = "The item's id")),
    request_body(content = ActBody, content_type = "application/json"),
    responses(
        (status = 200, description = "What the action did, as counted by the server", body = ItemActionOutcome),
        (status = 400, description = "No reason, the body is not valid, or the id is not an integer", body = ErrorBody, example = json!({"error": {"code": "invalid_reason", "message": "a reason is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or the request is cross-site", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such item (or the delivery it names is gone)", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "error-pool item not found"}})),
        (status = 409, description = "The item is resolved (`already_resolved`), no action fits its kind (`no_action`), or the action would do nothing now (`nothing_to_do`: no job to wake, the delivery already queued, the event no longer refused); the message says why. Also a retry's or query's own refusals (`action_pending`, `payment_busy`)", body = ErrorBody, example = json!({"error": {"code": "nothing_to_do", "message": "no job of this payment is waiting or dead: a retry would wake nothing"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "A retry or query over this user's allowance (`--action-limit-per-minute`, 60 by default)", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "at most 60 query and retry actions a minute; retry in 12 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn act(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<i64>,
    ApiJson(b): ApiJson<ActBody>,
) -> Result<Json<ItemActionOutcome>, ApiError> {
    p.require(Permission::RequestActions)?;
    let out = st
        .core
        .act_on_error_item(&actor(&p, &addr), id, &b.reason)
        .await?;
    Ok(Json(out))
}

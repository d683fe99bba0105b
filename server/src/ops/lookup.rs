//! `/ops/v1/search` and `/ops/v1/idempotency-keys/{merchant_id}/{key}` (issue 17, "Find
//! anything, by any id"): thin over [`crate::service::lookup`]; viewer role.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::OpsState;
use super::auth::Principal;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiPath, ApiQuery, ErrorBody};
use crate::service::lookup::{KeyDetail, SearchResult};

/// The routes of this module.
pub fn routes() -> OpenApiRouter<OpsState> {
    OpenApiRouter::new()
        .routes(routes!(search))
        .routes(routes!(key))
}

/// Query of `GET /ops/v1/search`.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct FindQuery {
    /// The start of any id, any case: payment id, merchant order id, Idempotency-Key,
    /// channel key, refund id, error-pool item number (whole) or action id. Surrounding
    /// spaces are ignored.
    // What `Core::lookup` accepts: at most 255 characters, none a control character, not
    // blank.
    #[param(
        max_length = 255,
        pattern = "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$",
        example = "pay_7f3a"
    )]
    q: String,
}

#[utoipa::path(
    get,
    path = "/search",
    tag = "ops",
    operation_id = "ops_search_ids",
    summary = "Find anything by any id",
    description = "Prefix match, case-insensitive, over payment ids, merchant order ids, Idempotency-Keys, channel keys, refund ids, error-pool item numbers and action ids; at most 20 results, each with the console page that shows it.",
    security(("console_session" = [])),
    params(FindQuery),
    responses(
        (status = 200, description = "What matches (possibly nothing)", body = SearchResult),
        (status = 400, description = "Blank, longer than 255 characters, or with control characters", body = ErrorBody, example = json!({"error": {"code": "query_too_long", "message": "a search is at most 255 characters"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn search(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<FindQuery>,
) -> Result<Json<SearchResult>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(st.core.lookup(&q.q).await?))
}

#[utoipa::path(
    get,
    path = "/idempotency-keys/{merchant_id}/{key}",
    tag = "ops",
    operation_id = "ops_idempotency_key",
    summary = "One stored Idempotency-Key",
    description = "Its merchant, route, scope, fingerprint, state, lease, times, the stored response exactly as a retry receives it, the payment it made, and what later requests with it got.",
    security(("console_session" = [])),
    params(
        ("merchant_id" = i64, Path, description = "The merchant's id (keys are per merchant)"),
        ("key" = String, Path, description = "The key, percent-encoded", min_length = 1, max_length = 255, pattern = "^[!-~]+$")
    ),
    responses(
        (status = 200, description = "The key", body = KeyDetail),
        (status = 400, description = "Not a key any request could have used, or a malformed merchant id", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_invalid", "message": "an Idempotency-Key is 1 to 255 visible ASCII characters"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 404, description = "No such key stored for this merchant (never used, refused, or purged)", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "idempotency key not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn key(
    State(st): State<OpsState>,
    p: Principal,
    ApiPath((merchant_id, key)): ApiPath<(i64, String)>,
) -> Result<Json<KeyDetail>, ApiError> {
    p.require(Permission::View)?;
    st.core
        .key_detail(merchant_id, &key)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found("idempotency key"))
}

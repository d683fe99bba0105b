//! `/v1/webhook_endpoints`: merchants register where converge notifies them (DESIGN.md
//! "Outbox, merchant notifications, event stream"; Standard Webhooks for the secret form).
//! The signing secret is shown once, in the answer that creates or rotates it.

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::ApiState;
use crate::api::idempotency::{key_in_use, respond};
use crate::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::service::actor::Actor;
use crate::service::endpoints::{EndpointInput, EndpointView, EndpointWriteError};
use crate::service::write::KeyClaim;
use crate::store::Merchant;

/// Body of `POST /v1/webhook_endpoints`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(as = CreateWebhookEndpointBody, example = json!({"url": "https://shop.example.com/converge/webhooks", "enabled_events": ["payment.succeeded", "refund.succeeded"], "description": "order service"}))]
pub struct CreateBody {
    /// Where deliveries are POSTed: an absolute `https` (or `http`) URL with a host and
    /// without user info, at most 2048 characters. Unless the server runs with
    /// `--webhook-allow-private`, its host must resolve, and only to public addresses:
    /// loopback, private, link-local, carrier-grade NAT, documentation and other internal
    /// ranges are refused, as is a host that does not resolve, with one answer for both
    /// (400 `url_address_refused`, naming no address).
    #[schema(max_length = 2048)]
    url: String,
    /// The event types to deliver (`payment.succeeded`, `payment.failed`,
    /// `payment.reversed`, `payment.refunded`, `refund.succeeded`, `refund.failed`), or
    /// `["*"]` alone for every type, including types added later.
    #[schema(schema_with = crate::schema::enabled_events_schema)]
    enabled_events: Vec<String>,
    /// Free text for the merchant's records: at most 1024 characters, no control characters.
    #[serde(default)]
    #[schema(max_length = 1024, pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*$")]
    description: String,
}

/// `{"data": [...]}`: the merchant's endpoints.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointList {
    /// Newest first, deleted ones included.
    data: Vec<EndpointView>,
}

fn actor(m: &Merchant) -> Actor {
    Actor::merchant(&m.name)
}

fn refuse_frozen(m: &Merchant) -> Result<(), ApiError> {
    super::auth::refuse_frozen(m, crate::domain::freeze::NewWork::Endpoints)
}

/// Registers an endpoint: 201 with it and its `secret` (shown once). A retry after a crash
/// resumes the endpoint the key recorded (never a second one).
#[utoipa::path(
    post,
    path = "/webhook_endpoints",
    tag = "webhooks",
    operation_id = "create_webhook_endpoint",
    summary = "Register a webhook endpoint",
    description = "Registers a URL that converge notifies of the merchant's payment and refund outcomes (Standard Webhooks: `webhook-id`, `webhook-timestamp`, `webhook-signature` headers). The answer carries the signing `secret`, shown this once. Requires an `Idempotency-Key`: a retry after a lost answer gets the same endpoint and secret, never a second endpoint.",
    security(("merchant_key" = [])),
    params(super::openapi::IdempotencyKey),
    request_body(content = CreateBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Registered (or, for a replay, the stored answer of the first request), with its secret", body = EndpointView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body")),
            links(
                ("GetWebhookEndpoint" = (operation_id = "get_webhook_endpoint", parameters(("id" = "$response.body#/id")))),
                ("RotateWebhookSecret" = (operation_id = "rotate_webhook_secret", parameters(("id" = "$response.body#/id")))),
                ("DeleteWebhookEndpoint" = (operation_id = "delete_webhook_endpoint", parameters(("id" = "$response.body#/id"))))
            )),
        (status = 400, description = "Idempotency-Key missing or malformed, or the body is not a valid endpoint: the URL is malformed, not http(s), carries user info, is too long, or its host does not resolve or resolves to an internal address (loopback, private, link-local, ...: one answer, `url_address_refused`, for both, naming no address); the event list is empty, names an unknown type or mixes `*` with types; the description is too long; or the merchant already has the most live endpoints one merchant may have (`endpoint_limit`, `--max-endpoints-per-merchant`, 16 by default: delete one first). Nothing is stored; the key stays free", body = ErrorBody, examples(
            ("idempotency_key_missing" = (value = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}}))),
            ("url_address_refused" = (value = json!({"error": {"code": "url_address_refused", "message": crate::domain::webhooks::ADDRESS_REFUSED}}))),
            ("invalid_url" = (value = json!({"error": {"code": "invalid_url", "message": "url is not an absolute http(s) URL: relative URL without a base"}}))),
            ("url_scheme_not_allowed" = (value = json!({"error": {"code": "url_scheme_not_allowed", "message": "url scheme must be https or http"}}))),
            ("invalid_enabled_events" = (value = json!({"error": {"code": "invalid_enabled_events", "message": "enabled_events must name at least one event type (or \"*\")"}}))),
            ("endpoint_limit" = (value = json!({"error": {"code": "endpoint_limit", "message": "a merchant may have at most 16 webhook endpoints; delete one first"}})))
        )),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 403, description = "The merchant is frozen", body = ErrorBody, example = json!({"error": {"code": "merchant_frozen", "message": "the merchant is frozen: it cannot register or change webhook endpoints"}})),
        (status = 409, description = "A request with this Idempotency-Key is still running", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "idempotency_key_in_use", "message": "a request with this Idempotency-Key is still running"}})),
        (status = 413, description = "Body larger than the limit", body = ErrorBody, example = json!({"error": {"code": "body_too_large", "message": "request body is too large"}})),
        (status = 415, description = "Content-Type is not JSON", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 422, description = "This Idempotency-Key was used with another body or on another route; nothing was written", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_reused", "message": "this Idempotency-Key was used with a different request; use a new key"}})),
        (status = 503, description = "Database unavailable; retry with the same Idempotency-Key", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn create(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Response {
    let input = EndpointInput {
        url: body.url,
        enabled_events: body.enabled_events,
        description: body.description,
    };
    let written = st
        .core
        .create_endpoint_keyed(&merchant, &input, &claim)
        .await
        .map_err(endpoint_error);
    respond(written)
}

/// An endpoint write's refusal or failure as its HTTP answer.
fn endpoint_error(e: EndpointWriteError) -> ApiError {
    match e {
        EndpointWriteError::Frozen => refuse_frozen_error(),
        EndpointWriteError::KeyLost => key_in_use(None, 0),
        EndpointWriteError::Secret(cause) => ApiError::internal(cause),
        EndpointWriteError::Endpoint(e) => e.into(),
    }
}

fn refuse_frozen_error() -> ApiError {
    super::auth::frozen(crate::domain::freeze::Frozen(
        crate::domain::freeze::NewWork::Endpoints,
    ))
}

/// The merchant's endpoints, newest first (deleted ones included, with their status).
#[utoipa::path(
    get,
    path = "/webhook_endpoints",
    tag = "webhooks",
    operation_id = "list_webhook_endpoints",
    summary = "List webhook endpoints",
    description = "The merchant's endpoints, newest first, deleted ones included (with their status). Secrets are never shown here.",
    security(("merchant_key" = [])),
    responses(
        (status = 200, description = "The endpoints", body = EndpointList),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn list(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
) -> Result<Json<EndpointList>, ApiError> {
    let all = st.core.store.endpoints(Some(merchant.id)).await?;
    let data: Vec<EndpointView> = all.iter().map(|e| EndpointView::of(e, None)).collect();
    Ok(Json(EndpointList { data }))
}

/// One endpoint; another merchant's, or a deleted one, is 404: after a DELETE the endpoint is
/// gone from its URL (schemathesis found it still answering 200 there). Its history stays in
/// the list, with `status: deleted`, and in the audit log.
#[utoipa::path(
    get,
    path = "/webhook_endpoints/{id}",
    tag = "webhooks",
    operation_id = "get_webhook_endpoint",
    summary = "Read a webhook endpoint",
    security(("merchant_key" = [])),
    params(("id" = String, Path, description = "The endpoint's id", example = "we_5d1c9e0a7b3f2e8d4c6a1b0f")),
    responses(
        (status = 200, description = "The endpoint (without its secret)", body = EndpointView),
        (status = 400, description = "The id is not a valid path segment", body = ErrorBody, example = json!({"error": {"code": "invalid_path", "message": "the path may not contain %00"}})),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 404, description = "No such endpoint, another merchant's, or a deleted one", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "webhook endpoint not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn show(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EndpointView>, ApiError> {
    let e = st.core.merchant_endpoint(merchant.id, &id).await?;
    if e.status == crate::store::EndpointStatus::Deleted {
        return Err(ApiError::not_found("webhook endpoint"));
    }
    Ok(Json(EndpointView::of(&e, None)))
}

/// Deletes an endpoint (kept as `deleted` for its history; its undelivered events are
/// abandoned). 200 with the endpoint; repeating it is harmless.
#[utoipa::path(
    delete,
    path = "/webhook_endpoints/{id}",
    tag = "webhooks",
    operation_id = "delete_webhook_endpoint",
    summary = "Delete a webhook endpoint",
    description = "The endpoint stops receiving deliveries (its undelivered ones are abandoned) and is kept as `deleted` for its history. Deleting it again answers the same.",
    security(("merchant_key" = [])),
    params(("id" = String, Path, description = "The endpoint's id", example = "we_5d1c9e0a7b3f2e8d4c6a1b0f")),
    responses(
        (status = 200, description = "The deleted endpoint", body = EndpointView),
        (status = 400, description = "The id is not a valid path segment", body = ErrorBody, example = json!({"error": {"code": "invalid_path", "message": "the path may not contain %00"}})),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 403, description = "The merchant is frozen", body = ErrorBody, example = json!({"error": {"code": "merchant_frozen", "message": "the merchant is frozen: it cannot register or change webhook endpoints"}})),
        (status = 404, description = "No such endpoint, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "webhook endpoint not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn delete(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<EndpointView>, ApiError> {
    refuse_frozen(&merchant)?;
    let e = st
        .core
        .delete_endpoint(merchant.id, &id, &actor(&merchant))
        .await?;
    Ok(Json(EndpointView::of(&e, None)))
}

/// A new secret (shown once); the previous one keeps signing beside it until
/// `previous_secret_expires_at` (24 h by default).
///
/// The key records the rotation before it happens: a retry after a crash answers with the
/// secret the crashed request made instead of rotating again, which would push the secret
/// the merchant still holds out of the overlap.
#[utoipa::path(
    post,
    path = "/webhook_endpoints/{id}/rotate_secret",
    tag = "webhooks",
    operation_id = "rotate_webhook_secret",
    summary = "Rotate a webhook endpoint's signing secret",
    description = "Makes a new secret, shown this once; deliveries carry a signature with each of the new and the previous secret until `previous_secret_expires_at` (24 hours by default). Requires an `Idempotency-Key`: a retry after a lost answer gets the same new secret instead of rotating again.",
    security(("merchant_key" = [])),
    params(("id" = String, Path, description = "The endpoint's id", example = "we_5d1c9e0a7b3f2e8d4c6a1b0f"), super::openapi::IdempotencyKey),
    responses(
        (status = 200, description = "The endpoint with its new secret (or, for a replay, the stored answer of the first request)", body = EndpointView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body"))),
        (status = 400, description = "Idempotency-Key missing or malformed, or the id is not a valid path segment", body = ErrorBody, examples(
            ("idempotency_key_missing" = (value = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}}))),
            ("idempotency_key_invalid" = (value = json!({"error": {"code": "idempotency_key_invalid", "message": "Idempotency-Key must be 1 to 255 visible ASCII characters"}})))
        )),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 403, description = "The merchant is frozen", body = ErrorBody, example = json!({"error": {"code": "merchant_frozen", "message": "the merchant is frozen: it cannot register or change webhook endpoints"}})),
        (status = 404, description = "No such endpoint, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "webhook endpoint not found"}})),
        (status = 409, description = "The endpoint was deleted, or a request with this Idempotency-Key is still running", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use`)")),
            examples(
                ("webhook_endpoint_deleted" = (value = json!({"error": {"code": "webhook_endpoint_deleted", "message": "the webhook endpoint was deleted"}}))),
                ("idempotency_key_in_use" = (value = json!({"error": {"code": "idempotency_key_in_use", "message": "a request with this Idempotency-Key is still running"}})))
            )),
        (status = 413, description = "Body larger than the limit", body = ErrorBody, example = json!({"error": {"code": "body_too_large", "message": "request body is too large"}})),
        (status = 415, description = "Content-Type is not JSON", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 422, description = "This Idempotency-Key was used with another body or on another route; nothing was written", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_reused", "message": "this Idempotency-Key was used with a different request; use a new key"}})),
        (status = 503, description = "Database unavailable; retry with the same Idempotency-Key", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn rotate_secret(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiPath(id): ApiPath<String>,
) -> Response {
    let written = st
        .core
        .rotate_secret_keyed(&merchant, &id, &claim)
        .await
        .map_err(endpoint_error);
    respond(written)
}

//! TCC by business key on the merchant API (issue 34): `POST /v1/payments/cancel`, under an
//! Idempotency-Key on the one write path (`service::write`), a thin shell over
//! `service::tcc`.

use axum::Extension;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::ToSchema;

use super::ApiState;
use super::holds::hold_error;
use super::payments::validate_order_id;
use crate::api::idempotency::respond;
use crate::error::{ApiJson, ErrorBody};
use crate::service::tcc::OrderCancelView;
use crate::service::write::KeyClaim;
use crate::store::Merchant;

/// Body of a cancel by business key.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"merchant_order_id": "order-1"}))]
pub struct CancelOrderBody {
    /// The merchant's own order id, as its create sent (or would send) it. At most 128
    /// characters, not only white space, no control characters.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    merchant_order_id: String,
}

/// Cancels an order by its merchant_order_id: its payment cancelled or voided, or, when
/// there is none yet, a tombstone that refuses its create (409 when the payment is past both).
#[utoipa::path(
    post,
    path = "/payments/cancel",
    tag = "payments",
    operation_id = "cancel_order",
    summary = "Cancel an order by its merchant_order_id (TCC Cancel)",
    description = "The Cancel of a saga coordinator that may have timed out before converge saw its Try. If the merchant's payment with this `merchant_order_id` exists: PENDING is cancelled (`canceled`); a manual-capture payment whose authorization is in flight or unknown, or whose hold is AUTHORIZED with nothing captured, is voided (`voided`); a CANCELED or VOIDED payment answers as it is. If no payment has it, a tombstone is written and the answer is a success (`tombstoned`, the empty rollback): a create (`POST /v1/payments`) for this `merchant_order_id` afterwards is refused with 409 `order_cancelled` and never reaches the channel. Tombstones are kept for the server's tombstone retention (default 30 days), past the Idempotency-Key retention. A repeated cancel answers what the first did. Requires an `Idempotency-Key`.",
    security(("merchant_key" = [])),
    params(super::openapi::IdempotencyKey),
    request_body(content = CancelOrderBody, content_type = "application/json"),
    responses(
        (status = 200, description = "What the cancel did, and the order's payment after it (null when tombstoned); or, for a replay, the stored answer of the first request", body = OrderCancelView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body")),
            examples(
                ("tombstoned" = (value = json!({"merchant_order_id": "order-1", "outcome": "tombstoned", "payment": null}))),
                ("canceled" = (value = json!({"merchant_order_id": "order-1", "outcome": "canceled", "payment": {"id": "pay_7f3a9c2e4b1d8f6a0c5e2b9d", "status": "CANCELED", "amount": 1999, "currency": "CNY", "merchant_order_id": "order-1", "refunded_amount": 0, "created_at": "2026-12-01T05:00:00.000Z", "updated_at": "2026-12-01T05:00:01.000Z", "capture": "automatic"}})))
            )),
        (status = 400, description = "Idempotency-Key missing or malformed, or the body is not a valid cancel (nothing is stored; the key stays free)", body = ErrorBody, examples(
            ("idempotency_key_missing" = (value = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}}))),
            ("invalid_merchant_order_id" = (value = json!({"error": {"code": "invalid_merchant_order_id", "message": "merchant_order_id must be 1 to 128 characters, not only spaces, without control characters"}}))),
            ("invalid_request" = (value = json!({"error": {"code": "invalid_request", "message": "invalid request body: unknown field `order`"}})))
        )),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 409, description = "The order's payment reached the channel and holds nothing to void (or was captured), a capture of its hold is in flight, or a request with this Idempotency-Key is still running (nothing is stored; the key stays free)", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use`)")),
            examples(
                ("not_cancelable" = (value = json!({"error": {"code": "not_cancelable", "message": "a SUCCESS payment reached the channel; it cannot be cancelled before submission"}}))),
                ("not_voidable" = (value = json!({"error": {"code": "not_voidable", "message": "the hold was captured in part: send a final capture to release the rest"}}))),
                ("hold_busy" = (value = json!({"error": {"code": "hold_busy", "message": "a capture or void of this hold is in flight (CAPTURING); read the payment and decide again"}}))),
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
pub async fn cancel_order(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiJson(body): ApiJson<CancelOrderBody>,
) -> Response {
    let order = match validate_order_id(body.merchant_order_id) {
        Ok(order) => order,
        Err(e) => return e.into_response(),
    };
    let written = st
        .core
        .cancel_order_keyed(&merchant, &order, &claim)
        .await
        .map_err(hold_error);
    respond(written)
}

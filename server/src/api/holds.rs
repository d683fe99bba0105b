//! A manual-capture payment's hold on the merchant API (issue 34): `POST
//! /v1/payments/{id}/captures`, `POST /v1/payments/{id}/void` and `POST
//! /v1/payments/{id}/cancel`, each under an Idempotency-Key on the one write path
//! (`service::write`), each a thin shell over its use case in `service::holds`.

use axum::Extension;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::ApiState;
use crate::api::idempotency::{key_in_use, respond};
use crate::domain::money::validate_amount;
use crate::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::service::holds::{CaptureInput, HoldError};
use crate::service::write::KeyClaim;
use crate::store::Merchant;
use crate::store::views::PaymentView;

/// Body of a capture: `amount` minor units of the hold; `final` releases the rest after it.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"amount": 1500, "final": true}))]
pub struct CaptureBody {
    /// Minor units, at most what the hold still holds (`amount_capturable`).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_000_i64)]
    amount: i64,
    /// `true`: the last capture; the rest of the hold is released. `false` (default): more
    /// captures may follow until the hold is used up or expires.
    #[serde(default, rename = "final")]
    last: bool,
}

/// Captures part or all of a hold (409 unless AUTHORIZED).
#[utoipa::path(
    post,
    path = "/payments/{id}/captures",
    tag = "payments",
    operation_id = "capture_payment",
    summary = "Capture a hold",
    description = "Captures `amount` of a manual-capture payment's hold (`\"capture\": \"manual\"` at its create). Several partial captures are allowed until one is `final` or the hold is used up; the rest is released then (the payment is SUCCESS). A capture the channel refuses leaves the payment AUTHORIZED; one whose answer was lost leaves it CAPTURING until a query of the hold settles it (never sent again under another key). Requires an `Idempotency-Key`.",
    security(("merchant_key" = [])),
    params(
        ("id" = String, Path, description = "The payment's id", example = "pay_7f3a9c2e4b1d8f6a0c5e2b9d"),
        super::openapi::IdempotencyKey
    ),
    request_body(content = CaptureBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The payment after the capture (or, for a replay, the stored answer of the first request)", body = PaymentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body"))),
        (status = 400, description = "Idempotency-Key missing or malformed, or the body is not a valid capture (nothing is stored; the key stays free)", body = ErrorBody, examples(
            ("idempotency_key_missing" = (value = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}}))),
            ("invalid_amount" = (value = json!({"error": {"code": "invalid_amount", "message": "amount must be a positive integer number of minor units"}})))
        )),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 403, description = "The merchant is frozen: it may not capture (nothing is stored; the key stays free)", body = ErrorBody, example = json!({"error": {"code": "merchant_frozen", "message": "the merchant is frozen: it cannot capture holds"}})),
        (status = 404, description = "No such payment, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 409, description = "The payment has no hold, holds nothing capturable now, expired, holds less than asked, a capture or void is in flight, or a request with this Idempotency-Key is still running (nothing is stored; the key stays free)", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use`)")),
            examples(
                ("not_manual_capture" = (value = json!({"error": {"code": "not_manual_capture", "message": "the payment was created with capture automatic: it has no hold"}}))),
                ("not_capturable" = (value = json!({"error": {"code": "not_capturable", "message": "a VOIDED payment holds nothing to capture"}}))),
                ("capture_exceeds_hold" = (value = json!({"error": {"code": "capture_exceeds_hold", "message": "the capture of 2500 exceeds what is held, 2000"}}))),
                ("hold_expired" = (value = json!({"error": {"code": "hold_expired", "message": "the hold expired at 2026-12-08T05:00:00.000Z"}}))),
                ("hold_busy" = (value = json!({"error": {"code": "hold_busy", "message": "a capture or void of this hold is in flight (VOIDING); read the payment and decide again"}}))),
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
pub async fn capture(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiPath(payment_id): ApiPath<String>,
    ApiJson(body): ApiJson<CaptureBody>,
) -> Response {
    let amount = match validate_amount(body.amount) {
        Ok(amount) => amount,
        Err(e) => {
            return ApiError::bad_request(ErrorCode::InvalidAmount, e.to_string()).into_response();
        }
    };
    let input = CaptureInput {
        amount,
        last: body.last,
    };
    let written = st
        .core
        .capture_keyed(&merchant, &payment_id, input, &claim)
        .await
        .map_err(hold_error);
    respond(written)
}

/// Releases a hold (409 once anything was captured).
#[utoipa::path(
    post,
    path = "/payments/{id}/void",
    tag = "payments",
    operation_id = "void_payment",
    summary = "Void a hold",
    description = "Releases a manual-capture payment's hold before anything was captured (VOIDED). A void while the authorization is still in flight or unknown voids it at the channel too: a late authorization is then declined. A capture and a void racing on one payment: exactly one wins; the other is refused with 409 `hold_busy` and never reaches the channel. A VOIDED payment answers as it is. Requires an `Idempotency-Key`.",
    security(("merchant_key" = [])),
    params(
        ("id" = String, Path, description = "The payment's id", example = "pay_7f3a9c2e4b1d8f6a0c5e2b9d"),
        super::openapi::IdempotencyKey
    ),
    responses(
        (status = 200, description = "The payment after the void (or, for a replay, the stored answer of the first request)", body = PaymentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body"))),
        (status = 400, description = "Idempotency-Key missing or malformed, or the id is not a valid path segment", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}})),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 404, description = "No such payment, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 409, description = "The payment has no hold, its hold was captured or ended, a capture is in flight, or a request with this Idempotency-Key is still running (nothing is stored; the key stays free)", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use`)")),
            examples(
                ("not_voidable" = (value = json!({"error": {"code": "not_voidable", "message": "a SUCCESS payment holds nothing to void"}}))),
                ("hold_busy" = (value = json!({"error": {"code": "hold_busy", "message": "a capture or void of this hold is in flight (CAPTURING); read the payment and decide again"}}))),
                ("not_manual_capture" = (value = json!({"error": {"code": "not_manual_capture", "message": "the payment was created with capture automatic: it has no hold"}})))
            )),
        (status = 422, description = "This Idempotency-Key was used with another body or on another route; nothing was written", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_reused", "message": "this Idempotency-Key was used with a different request; use a new key"}})),
        (status = 503, description = "Database unavailable; retry with the same Idempotency-Key", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn void(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiPath(payment_id): ApiPath<String>,
) -> Response {
    let written = st
        .core
        .void_keyed(&merchant, &payment_id, &claim)
        .await
        .map_err(hold_error);
    respond(written)
}

/// Cancels a payment that has not reached the channel (409 once it has).
#[utoipa::path(
    post,
    path = "/payments/{id}/cancel",
    tag = "payments",
    operation_id = "cancel_payment",
    summary = "Cancel a payment before submission",
    description = "Cancels a payment still PENDING (for example held by the emergency switch): it never reaches the channel (CANCELED). A CANCELED payment answers as it is; one that reached the channel is refused (void its hold, or refund it). Requires an `Idempotency-Key`.",
    security(("merchant_key" = [])),
    params(
        ("id" = String, Path, description = "The payment's id", example = "pay_7f3a9c2e4b1d8f6a0c5e2b9d"),
        super::openapi::IdempotencyKey
    ),
    responses(
        (status = 200, description = "The payment after the cancel (or, for a replay, the stored answer of the first request)", body = PaymentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body"))),
        (status = 400, description = "Idempotency-Key missing or malformed, or the id is not a valid path segment", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}})),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 404, description = "No such payment, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 409, description = "The payment reached the channel, or a request with this Idempotency-Key is still running (nothing is stored; the key stays free)", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use`)")),
            examples(
                ("not_cancelable" = (value = json!({"error": {"code": "not_cancelable", "message": "a SUCCESS payment reached the channel; it cannot be cancelled before submission"}})))
            )),
        (status = 422, description = "This Idempotency-Key was used with another body or on another route; nothing was written", body = ErrorBody, example = json!({"error": {"code": "idempotency_key_reused", "message": "this Idempotency-Key was used with a different request; use a new key"}})),
        (status = 503, description = "Database unavailable; retry with the same Idempotency-Key", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn cancel(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiPath(payment_id): ApiPath<String>,
) -> Response {
    let written = st
        .core
        .cancel_keyed(&merchant, &payment_id, &claim)
        .await
        .map_err(hold_error);
    respond(written)
}

/// A hold's refusal or failure as its HTTP answer.
pub(super) fn hold_error(e: HoldError) -> ApiError {
    let conflict = |code, e: &HoldError| ApiError::new(StatusCode::CONFLICT, code, e.to_string());
    match e {
        HoldError::NotFound => ApiError::not_found("payment"),
        HoldError::Frozen(refused) => super::auth::frozen(refused),
        HoldError::KeyLost => key_in_use(None, 0),
        HoldError::NotManual => conflict(ErrorCode::NotManualCapture, &e),
        HoldError::NotCapturable(_) => conflict(ErrorCode::NotCapturable, &e),
        HoldError::Busy(_) => conflict(ErrorCode::HoldBusy, &e),
        HoldError::Expired(_) => conflict(ErrorCode::HoldExpired, &e),
        HoldError::ExceedsHold { .. } => conflict(ErrorCode::CaptureExceedsHold, &e),
        HoldError::NotVoidable(_) => conflict(ErrorCode::NotVoidable, &e),
        HoldError::NotCancelable(_) => conflict(ErrorCode::NotCancelable, &e),
        HoldError::Failed(cause) => cause.into(),
    }
}

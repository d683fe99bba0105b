//! `POST /v1/payments/{id}/refunds` (DESIGN.md "Merchant HTTP API": total refunds never
//! exceed the payment amount).

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
use crate::service::refunds::{RefundError, RefundInput};
use crate::service::write::KeyClaim;
use crate::store::Merchant;
use crate::store::views::RefundView;

/// Body of a refund request: amount in minor units, optional reason.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"amount": 500, "reason": "one coffee returned"}))]
pub struct RefundBody {
    /// Minor units; all refunds of a payment together never exceed its amount.
    #[schema(minimum = 1, maximum = 1_000_000_000_000_000_i64)]
    amount: i64,
    /// Free text for the merchant's records.
    #[serde(default)]
    #[schema(max_length = 1024)]
    reason: String,
}

/// Creates (or resumes) a refund and sends it to the channel. 201 with the refund;
/// 409 `payment_not_refundable` unless the payment is SUCCESS; 409 `refund_exceeds_remaining`.
#[utoipa::path(
    post,
    path = "/payments/{id}/refunds",
    tag = "payments",
    operation_id = "create_refund",
    summary = "Refund a payment",
    description = "Refunds part or all of a SUCCESS payment through the channel. Partial refunds keep the payment SUCCESS; refunds that reach its amount make it REFUNDED. Requires an `Idempotency-Key`, scoped to this payment's refunds route.",
    security(("merchant_key" = [])),
    params(
        ("id" = String, Path, description = "The payment's id", example = "pay_7f3a9c2e4b1d8f6a0c5e2b9d"),
        super::openapi::IdempotencyKey
    ),
    request_body(content = RefundBody, content_type = "application/json"),
    responses(
        (status = 201, description = "The refund (or, for a replay, the stored answer of the first request)", body = RefundView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body")),
            links(
                ("GetRefundedPayment" = (operation_id = "get_payment", parameters(("id" = "$response.body#/payment_id"))))
            )),
        (status = 400, description = "Idempotency-Key missing or malformed, or the body is not a valid refund (nothing is stored; the key stays free)", body = ErrorBody, examples(
            ("idempotency_key_missing" = (value = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}}))),
            ("invalid_amount" = (value = json!({"error": {"code": "invalid_amount", "message": "amount must be a positive integer number of minor units"}})))
        )),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 403, description = "The merchant is frozen: it may read but not create refunds (nothing is stored; the key stays free)", body = ErrorBody, example = json!({"error": {"code": "merchant_frozen", "message": "the merchant is frozen: it cannot create refunds"}})),
        (status = 404, description = "No such payment, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 409, description = "The payment is not SUCCESS, the amount exceeds what remains, or a request with this Idempotency-Key is still running", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use` and `payment_busy`)")),
            examples(
                ("payment_not_refundable" = (value = json!({"error": {"code": "payment_not_refundable", "message": "payment is FAILED; only SUCCESS payments can be refunded"}}))),
                ("refund_exceeds_remaining" = (value = json!({"error": {"code": "refund_exceeds_remaining", "message": "at most 1499 minor units can still be refunded"}}))),
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
pub async fn create(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    Extension(claim): Extension<KeyClaim>,
    ApiPath(payment_id): ApiPath<String>,
    ApiJson(body): ApiJson<RefundBody>,
) -> Response {
    let input = match validate(body) {
        Ok(input) => input,
        Err(e) => return e.into_response(),
    };
    let written = st
        .core
        .create_refund_keyed(&merchant, &payment_id, &input, &claim)
        .await
        .map_err(refund_error);
    respond(written)
}

fn validate(body: RefundBody) -> Result<RefundInput, ApiError> {
    let amount = validate_amount(body.amount)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidAmount, e.to_string()))?;
    if body.reason.chars().count() > 1024 {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidReason,
            "reason is longer than 1024 characters",
        ));
    }
    Ok(RefundInput {
        amount,
        reason: body.reason,
    })
}

/// A refund's refusal or failure as its HTTP answer.
fn refund_error(e: RefundError) -> ApiError {
    match e {
        RefundError::NoPayment => ApiError::not_found("payment"),
        RefundError::Frozen => super::auth::frozen(crate::domain::freeze::Frozen(
            crate::domain::freeze::NewWork::Refunds,
        )),
        RefundError::NotRefundable(status) => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::PaymentNotRefundable,
            format!("payment is {status}; only SUCCESS payments can be refunded"),
        ),
        RefundError::ExceedsRemaining { remaining } => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::RefundExceedsRemaining,
            format!("at most {remaining} minor units can still be refunded"),
        ),
        RefundError::Reversing => ApiError::new(
            StatusCode::CONFLICT,
            ErrorCode::PaymentReversing,
            "an ops reversal holds this payment; it refunds the remaining amount".to_string(),
        ),
        RefundError::KeyLost => key_in_use(None, 0),
        RefundError::Failed(cause) => cause.into(),
    }
}

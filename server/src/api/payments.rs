//! `POST /v1/payments` and `GET /v1/payments/{id}` (DESIGN.md "Merchant HTTP API").

use axum::Extension;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;
use serde::Deserialize;
use utoipa::ToSchema;

use super::ApiState;
use crate::api::idempotency::respond;
use crate::domain::money::{validate_amount, validate_currency};
use crate::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::service::payments::{CreateError, PaymentInput};
use crate::service::write::KeyClaim;
use crate::store::views::PaymentView;
use crate::store::{Merchant, Payment};
use converge_wire::payments::CaptureMode;

/// Longest merchant_order_id, in characters (JSON Schema's `maxLength` counts characters;
/// schemathesis found a byte limit refusing documented-valid ids).
const MAX_ORDER_ID: usize = 128;
/// Longest description, in characters.
const MAX_DESCRIPTION: usize = 1024;

/// Body of `POST /v1/payments`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"amount": 1999, "currency": "CNY", "merchant_order_id": "order-1", "description": "two coffees"}))]
pub struct CreateBody {
    /// Minor units (fen for CNY, cents for USD, yen for JPY).
    #[schema(minimum = 1, maximum = 1_000_000_000_000_000_i64)]
    amount: i64,
    /// ISO 4217 alphabetic code of a currency with minor units.
    #[schema(schema_with = crate::schema::currency_schema)]
    currency: String,
    /// The merchant's own order id: a second payment with the same one and the same
    /// parameters answers the first (200); with other parameters, 409.
    /// At most 128 characters, not only white space, no control characters.
    #[schema(
        min_length = 1,
        max_length = 128,
        pattern = "^[^\\u0000-\\u001F\\u007F-\\u009F]*[^\\s\\u0000-\\u001F\\u007F-\\u009F][^\\u0000-\\u001F\\u007F-\\u009F]*$"
    )]
    merchant_order_id: String,
    /// Free text for the merchant's records.
    #[serde(default)]
    #[schema(max_length = 1024)]
    description: String,
    /// `automatic` (default): charged in one step. `manual`: authorized only (a hold,
    /// AUTHORIZED), captured later with `POST /v1/payments/{id}/captures` or released with
    /// `POST /v1/payments/{id}/void`; it lapses after the server's authorization TTL.
    #[serde(default)]
    #[schema(schema_with = crate::schema::capture_mode_schema)]
    capture: Option<String>,
}

/// A merchant_order_id as the merchant API accepts it (a create's, a cancel's by business
/// key): 1 to [`MAX_ORDER_ID`] characters, not only white space, no control characters; else
/// 400 `invalid_merchant_order_id`.
pub(super) fn validate_order_id(order: String) -> Result<String, ApiError> {
    if order.trim().is_empty()
        || order.chars().count() > MAX_ORDER_ID
        || order.chars().any(char::is_control)
    {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidMerchantOrderId,
            format!(
                "merchant_order_id must be 1 to {MAX_ORDER_ID} characters, not only spaces, without control characters"
            ),
        ));
    }
    Ok(order)
}

fn validate(b: CreateBody) -> Result<PaymentInput, ApiError> {
    let amount = validate_amount(b.amount)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidAmount, e.to_string()))?;
    let (currency, _) = validate_currency(&b.currency)
        .map_err(|e| ApiError::bad_request(ErrorCode::InvalidCurrency, e.to_string()))?;
    let order = validate_order_id(b.merchant_order_id)?;
    if b.description.chars().count() > MAX_DESCRIPTION {
        return Err(ApiError::bad_request(
            ErrorCode::InvalidDescription,
            format!("description is longer than {MAX_DESCRIPTION} characters"),
        ));
    }
    let capture_mode = match b.capture.as_deref() {
        None => CaptureMode::Automatic,
        Some(name) => CaptureMode::parse(name).ok_or_else(|| {
            ApiError::bad_request(
                ErrorCode::InvalidRequest,
                "capture must be \"automatic\" or \"manual\"",
            )
        })?,
    };
    Ok(PaymentInput {
        amount,
        currency,
        merchant_order_id: order,
        description: b.description,
        capture_mode,
    })
}

/// Creates (or resumes) a payment and drives it as far as it goes within the request.
/// 201 with the payment; 200 with the existing payment for a repeated merchant_order_id with
/// the same parameters; 409 `merchant_order_id_conflict` when the parameters differ.
#[utoipa::path(
    post,
    path = "/payments",
    tag = "payments",
    operation_id = "create_payment",
    summary = "Create a payment",
    description = "Creates a payment and drives it as far as it goes within the request: the answer's `status` shows how far that was (`SUCCESS`, or `UNKNOWN` when the channel was slow: the payment keeps converging in the background). Requires an `Idempotency-Key`; a retry with the same key and body replays the stored answer byte for byte.",
    security(("merchant_key" = [])),
    params(super::openapi::IdempotencyKey),
    request_body(content = CreateBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Created (or, for a replay, the stored answer of the first request)", body = PaymentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body")),
            links(
                ("GetPayment" = (operation_id = "get_payment", parameters(("id" = "$response.body#/id")))),
                ("RefundPayment" = (operation_id = "create_refund", parameters(("id" = "$response.body#/id"))))
            )),
        (status = 200, description = "A payment with this merchant_order_id and the same parameters already exists: that payment", body = PaymentView,
            headers(("Idempotent-Replayed" = String, description = "`true` when this is the stored answer of an earlier request with the same key and body")),
            links(
                ("GetExistingPayment" = (operation_id = "get_payment", parameters(("id" = "$response.body#/id"))))
            )),
        (status = 400, description = "Idempotency-Key missing or malformed, or the body is not a valid payment (nothing is stored; the key stays free)", body = ErrorBody, examples(
            ("idempotency_key_missing" = (value = json!({"error": {"code": "idempotency_key_missing", "message": "POST requests need an Idempotency-Key header"}}))),
            ("idempotency_key_invalid" = (value = json!({"error": {"code": "idempotency_key_invalid", "message": "Idempotency-Key must be 1 to 255 visible ASCII characters"}}))),
            ("invalid_amount" = (value = json!({"error": {"code": "invalid_amount", "message": "amount must be a positive integer number of minor units"}}))),
            ("invalid_request" = (value = json!({"error": {"code": "invalid_request", "message": "invalid request body: unknown field `amout`"}})))
        )),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 403, description = "The merchant is frozen: it may read but not create payments (nothing is stored; the key stays free)", body = ErrorBody, example = json!({"error": {"code": "merchant_frozen", "message": "the merchant is frozen: it cannot create payments"}})),
        (status = 409, description = "A request with this Idempotency-Key is still running (retry after `Retry-After` seconds), or merchant_order_id belongs to a payment with other parameters, or the merchant cancelled merchant_order_id before this create (`POST /v1/payments/cancel`: nothing is written or sent; the key stays free)", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying (for `idempotency_key_in_use` and `payment_busy`)")),
            examples(
                ("idempotency_key_in_use" = (value = json!({"error": {"code": "idempotency_key_in_use", "message": "a request with this Idempotency-Key is still running"}}))),
                ("merchant_order_id_conflict" = (value = json!({"error": {"code": "merchant_order_id_conflict", "message": "merchant_order_id \"order-1\" belongs to payment pay_7f3a9c2e4b1d8f6a0c5e2b9d with other parameters"}}))),
                ("order_cancelled" = (value = json!({"error": {"code": "order_cancelled", "message": "merchant_order_id \"order-1\" was cancelled (POST /v1/payments/cancel) before this create: it can never be paid"}})))
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
    ApiJson(body): ApiJson<CreateBody>,
) -> Response {
    let input = match validate(body) {
        Ok(input) => input,
        Err(e) => return e.into_response(),
    };
    let written = st
        .core
        .create_payment_keyed(&merchant, &input, &claim)
        .await
        .map_err(|e| match e {
            CreateError::OrderConflict(p) => order_conflict(&p),
            CreateError::OrderCancelled => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::OrderCancelled,
                format!(
                    "merchant_order_id {:?} was cancelled (POST /v1/payments/cancel) before this create: it can never be paid",
                    input.merchant_order_id
                ),
            ),
            CreateError::Frozen => super::auth::frozen(crate::domain::freeze::Frozen(
                crate::domain::freeze::NewWork::Payments,
            )),
            CreateError::Missing => ApiError::not_found("payment"),
            CreateError::Failed(cause) => ApiError::from(cause),
        });
    respond(written)
}

/// 409 `merchant_order_id_conflict`: the merchant's payment `p` has this merchant_order_id
/// with other parameters.
fn order_conflict(p: &Payment) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        ErrorCode::MerchantOrderIdConflict,
        format!(
            "merchant_order_id {:?} belongs to payment {} with other parameters",
            p.merchant_order_id, p.id
        ),
    )
}

/// The payment, if it belongs to the merchant (another merchant's payment is 404, not 403).
#[utoipa::path(
    get,
    path = "/payments/{id}",
    tag = "payments",
    operation_id = "get_payment",
    summary = "Read a payment",
    security(("merchant_key" = [])),
    params(("id" = String, Path, description = "The payment's id", example = "pay_7f3a9c2e4b1d8f6a0c5e2b9d")),
    responses(
        (status = 200, description = "The payment", body = PaymentView),
        (status = 400, description = "The id is not a valid path segment", body = ErrorBody, example = json!({"error": {"code": "invalid_path", "message": "the path may not contain %00"}})),
        (status = 401, description = "No or unknown merchant key", body = ErrorBody, example = json!({"error": {"code": "unauthorized", "message": "send Authorization: Bearer <merchant API key>"}})),
        (status = 404, description = "No such payment, or another merchant's", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "payment not found"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before retrying")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn show(
    State(st): State<ApiState>,
    Extension(merchant): Extension<Merchant>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PaymentView>, ApiError> {
    Ok(Json(PaymentView::from(&owned(&st, &merchant, &id).await?)))
}

pub(super) async fn owned(
    st: &ApiState,
    merchant: &Merchant,
    id: &str,
) -> Result<Payment, ApiError> {
    match st.core.store.payment(id).await? {
        Some(p) if p.merchant_id == merchant.id => Ok(p),
        _ => Err(ApiError::not_found("payment")),
    }
}

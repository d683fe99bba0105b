//! `POST /v1/payments` and `GET /v1/payments/{id}` (DESIGN.md "Merchant HTTP API").

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, response::IntoResponse};
use serde::Deserialize;

use super::AppState;
use super::idempotency::IdemContext;
use crate::domain::money::{validate_amount, validate_currency};
use crate::error::{ApiError, ApiJson, ApiPath};
use crate::service::payments::{InsertOutcome, PaymentInput};
use crate::store::views::PaymentView;
use crate::store::{Merchant, Payment};

/// Longest merchant_order_id, in bytes.
const MAX_ORDER_ID: usize = 128;
/// Longest description, in bytes.
const MAX_DESCRIPTION: usize = 1024;

/// Body of `POST /v1/payments`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    amount: i64,
    currency: String,
    merchant_order_id: String,
    #[serde(default)]
    description: String,
}

fn validate(b: CreateBody) -> Result<PaymentInput, ApiError> {
    let amount = validate_amount(b.amount)
        .map_err(|e| ApiError::bad_request("invalid_amount", e.to_string()))?;
    let (currency, _) = validate_currency(&b.currency)
        .map_err(|e| ApiError::bad_request("invalid_currency", e.to_string()))?;
    let order = b.merchant_order_id;
    if order.trim().is_empty() || order.len() > MAX_ORDER_ID || order.chars().any(char::is_control)
    {
        return Err(ApiError::bad_request(
            "invalid_merchant_order_id",
            format!(
                "merchant_order_id must be 1 to {MAX_ORDER_ID} bytes, not only spaces, without control characters"
            ),
        ));
    }
    if b.description.len() > MAX_DESCRIPTION {
        return Err(ApiError::bad_request(
            "invalid_description",
            format!("description is longer than {MAX_DESCRIPTION} bytes"),
        ));
    }
    Ok(PaymentInput {
        amount,
        currency,
        merchant_order_id: order,
        description: b.description,
    })
}

/// Creates (or resumes) a payment and drives it as far as it goes within the request.
/// 201 with the payment; 200 with the existing payment for a repeated merchant_order_id with
/// the same parameters; 409 `merchant_order_id_conflict` when the parameters differ.
pub async fn create(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    Extension(ctx): Extension<IdemContext>,
    ApiJson(body): ApiJson<CreateBody>,
) -> Result<impl IntoResponse, ApiError> {
    let input = validate(body)?;
    let core = &st.core;
    if let Some(id) = ctx.resource_id.as_deref() {
        let payment = owned(&st, &merchant, id).await?;
        let driven = core.drive(payment, "api").await?;
        return Ok((StatusCode::CREATED, Json(PaymentView::from(&driven))));
    }
    // The key's recovery point is set in the insert's own transaction.
    match core
        .insert_payment(merchant.id, &input, Some(&ctx.key))
        .await?
    {
        InsertOutcome::Created(p) => {
            let driven = core.drive(p, "api").await?;
            Ok((StatusCode::CREATED, Json(PaymentView::from(&driven))))
        }
        InsertOutcome::Existing(p) => Ok((StatusCode::OK, Json(PaymentView::from(&p)))),
        InsertOutcome::OrderConflict(p) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "merchant_order_id_conflict",
            format!(
                "merchant_order_id {:?} belongs to payment {} with other parameters",
                p.merchant_order_id, p.id
            ),
        )),
    }
}

/// The payment, if it belongs to the merchant (another merchant's payment is 404, not 403).
pub async fn show(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<PaymentView>, ApiError> {
    Ok(Json(PaymentView::from(&owned(&st, &merchant, &id).await?)))
}

pub(super) async fn owned(
    st: &AppState,
    merchant: &Merchant,
    id: &str,
) -> Result<Payment, ApiError> {
    match st.core.store.payment(id).await? {
        Some(p) if p.merchant_id == merchant.id => Ok(p),
        _ => Err(ApiError::not_found("payment")),
    }
}

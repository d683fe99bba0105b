//! `POST /v1/payments/{id}/refunds` (DESIGN.md "Merchant HTTP API": total refunds never
//! exceed the payment amount).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, response::IntoResponse};
use serde::Deserialize;

use super::AppState;
use super::idempotency::IdemContext;
use super::payments::owned;
use super::views::RefundView;
use crate::domain::money::validate_amount;
use crate::error::{ApiError, ApiJson, ApiPath};
use crate::service::ids::new_id;
use crate::store::{CreateRefund, Merchant};

/// Body of a refund request: amount in minor units, optional reason.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RefundBody {
    amount: i64,
    #[serde(default)]
    reason: String,
}

/// Creates (or resumes) a refund and sends it to the channel. 201 with the refund;
/// 409 `payment_not_refundable` unless the payment is SUCCESS; 409 `refund_exceeds_remaining`.
pub async fn create(
    State(st): State<AppState>,
    Extension(merchant): Extension<Merchant>,
    Extension(ctx): Extension<IdemContext>,
    ApiPath(payment_id): ApiPath<String>,
    ApiJson(body): ApiJson<RefundBody>,
) -> Result<impl IntoResponse, ApiError> {
    let amount = validate_amount(body.amount)
        .map_err(|e| ApiError::bad_request("invalid_amount", e.to_string()))?;
    if body.reason.len() > 1024 {
        return Err(ApiError::bad_request(
            "invalid_reason",
            "reason is longer than 1024 bytes",
        ));
    }
    let payment = owned(&st, &merchant, &payment_id).await?;
    let core = &st.core;
    // The refund's id is recorded on the key *before* anything is reserved. Refunds have no
    // business key (payments have merchant_order_id) to catch a duplicate, so if the id were
    // recorded after the reservation, a crash in between would let the retry reserve and pay
    // out a second refund. Recorded first, a retry always resumes this one id: it finds the
    // refund and drives it, or finds nothing yet and creates it.
    let refund_id = match ctx.resource_id.clone() {
        Some(id) => id,
        None => {
            let id = new_id("re");
            if !core.store.set_key_resource(&ctx.key, &id).await? {
                // Our claim lapsed and another request with this key holds it now.
                return Err(ApiError::new(
                    StatusCode::CONFLICT,
                    "idempotency_key_in_use",
                    "a request with this Idempotency-Key is still running",
                )
                .with_retry_after(1));
            }
            id
        }
    };
    if let Some(refund) = core.store.refund(&refund_id).await? {
        let driven = core.drive_refund(refund, "api").await?;
        return Ok((StatusCode::CREATED, Json(RefundView::from(&driven))));
    }
    match core
        .insert_refund_with_id(&refund_id, &payment.id, amount, &body.reason)
        .await?
    {
        CreateRefund::Created(r) => {
            let driven = core.drive_refund(r, "api").await?;
            Ok((StatusCode::CREATED, Json(RefundView::from(&driven))))
        }
        CreateRefund::NotRefundable(status) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "payment_not_refundable",
            format!("payment is {status}; only SUCCESS payments can be refunded"),
        )),
        CreateRefund::ExceedsRemaining { remaining } => Err(ApiError::new(
            StatusCode::CONFLICT,
            "refund_exceeds_remaining",
            format!("at most {remaining} minor units can still be refunded"),
        )),
        CreateRefund::NoPayment => Err(ApiError::not_found("payment")),
        CreateRefund::Reversing => Err(ApiError::new(
            StatusCode::CONFLICT,
            "payment_reversing",
            "an ops reversal holds this payment; it refunds the remaining amount".to_string(),
        )),
    }
}

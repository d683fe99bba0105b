//! JSON shapes of payments and refunds as merchants see them (DESIGN.md "Merchant HTTP
//! API"), used by the API's answers and by the outbox's payloads, so a webhook's `data` is
//! exactly what `GET /v1/payments/{id}` shows, plus `version`. Amounts are integer minor
//! units; times are RFC 3339 UTC.

use serde::Serialize;
use utoipa::ToSchema;

use super::{Payment, Refund};
use crate::domain::clock::rfc3339;

/// A payment as merchants see it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "pay_7f3a9c2e4b1d8f6a0c5e2b9d", "status": "SUCCESS", "amount": 1999, "currency": "CNY",
    "merchant_order_id": "order-1", "refunded_amount": 0,
    "created_at": "2026-12-01T05:00:00.000Z", "updated_at": "2026-12-01T05:00:00.120Z"
}))]
pub struct PaymentView {
    /// The payment's id (`pay_` and hex digits).
    id: String,
    /// How far the payment got (DESIGN.md "Payment state machine").
    #[schema(schema_with = crate::schema::payment_status_schema)]
    status: &'static str,
    /// Minor units.
    #[schema(minimum = 1)]
    amount: i64,
    /// ISO 4217 code.
    currency: String,
    /// The merchant's own order id, unique per merchant.
    merchant_order_id: String,
    /// Minor units refunded so far (at most `amount`).
    #[schema(minimum = 0)]
    refunded_amount: i64,
    /// RFC 3339, UTC.
    #[schema(format = DateTime)]
    created_at: String,
    /// RFC 3339, UTC.
    #[schema(format = DateTime)]
    updated_at: String,
    /// `automatic` (charged in one step) or `manual` (authorized now, captured later).
    #[schema(schema_with = crate::schema::capture_mode_schema)]
    capture: &'static str,
    /// A manual-capture payment's hold: captured so far (minor units).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    captured_amount: Option<i64>,
    /// A manual-capture payment's hold: what can still be captured (minor units; 0 once the
    /// hold ended).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    amount_capturable: Option<i64>,
    /// A manual-capture payment's hold: released without capture (minor units).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    released_amount: Option<i64>,
    /// A manual-capture payment's hold: when it lapses, RFC 3339 UTC (once authorized).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    expires_at: Option<String>,
    /// Once something was captured (a sale that succeeded, a hold's captures): the fees
    /// charged on its captures and refunds under the merchant's pricing, minor units (issue
    /// 35).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 0)]
    fee: Option<i64>,
    /// With `fee`: the captured amount less `fee`, minor units (refunds themselves are told
    /// by `refunded_amount`, not netted here); below 0 only when refund fees take more than
    /// the captures' fees left.
    #[serde(skip_serializing_if = "Option::is_none")]
    net: Option<i64>,
    /// Only in `payment.captured` events: the capture told of.
    #[serde(skip_serializing_if = "Option::is_none")]
    last_capture: Option<CaptureView>,
    /// Only in events: the payment's version, so a receiver can drop a stale notification
    /// (deliveries are not ordered).
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
}

/// One capture of a hold, as a `payment.captured` event tells it.
#[derive(Debug, Serialize, ToSchema)]
pub struct CaptureView {
    /// `cap_` and hex digits.
    id: String,
    /// Minor units.
    #[schema(minimum = 1)]
    amount: i64,
}

impl From<&Payment> for PaymentView {
    fn from(p: &Payment) -> Self {
        PaymentView {
            id: p.id.clone(),
            status: p.status.as_str(),
            amount: p.amount,
            currency: p.currency.clone(),
            merchant_order_id: p.merchant_order_id.clone(),
            refunded_amount: p.refunded_amount,
            created_at: rfc3339(p.created_at),
            updated_at: rfc3339(p.updated_at),
            capture: p.capture_mode.as_str(),
            captured_amount: p.hold.as_ref().map(|h| h.captured),
            amount_capturable: p.hold.as_ref().map(|_| p.held_amount()),
            released_amount: p.hold.as_ref().map(|h| h.released),
            expires_at: p.hold.as_ref().and_then(|h| h.expires_at).map(rfc3339),
            fee: p.captured_gross().map(|_| p.fee),
            net: p.captured_gross().map(|gross| gross - p.fee),
            last_capture: None,
            version: None,
        }
    }
}

/// A refund as merchants see it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "re_4c1b7e9a2d5f8c3b6e0a9d2f", "payment_id": "pay_7f3a9c2e4b1d8f6a0c5e2b9d",
    "amount": 500, "status": "succeeded"
}))]
pub struct RefundView {
    /// The refund's id (`re_` and hex digits).
    id: String,
    /// The refunded payment.
    payment_id: String,
    /// Minor units.
    #[schema(minimum = 1)]
    amount: i64,
    /// `pending` until the channel answers, then `succeeded` or `failed`.
    #[schema(schema_with = crate::schema::refund_status_schema)]
    status: String,
    /// Only in events: when the refund reached its status.
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
}

impl From<&Refund> for RefundView {
    fn from(r: &Refund) -> Self {
        RefundView {
            id: r.id.clone(),
            payment_id: r.payment_id.clone(),
            amount: r.amount,
            status: r.status.as_str().into(),
            updated_at: None,
        }
    }
}

/// The outbox payload of a payment event: [`PaymentView`] with `version`, as JSON text.
pub fn payment_payload(p: &Payment) -> String {
    let mut v = PaymentView::from(p);
    v.version = Some(p.version);
    serde_json::to_string(&v).unwrap_or_default()
}

/// The outbox payload of a `payment.captured` event: [`PaymentView`] with `version` and the
/// capture (`{"id", "amount"}`, minor units), as JSON text.
pub fn capture_payload(p: &Payment, capture_id: &str, amount: i64) -> String {
    let mut v = PaymentView::from(p);
    v.version = Some(p.version);
    v.last_capture = Some(CaptureView {
        id: capture_id.into(),
        amount,
    });
    serde_json::to_string(&v).unwrap_or_default()
}

/// The outbox payload of a refund event: [`RefundView`] with `updated_at`, as JSON text.
pub fn refund_payload(r: &Refund) -> String {
    let mut v = RefundView::from(r);
    v.updated_at = Some(rfc3339(r.updated_at));
    serde_json::to_string(&v).unwrap_or_default()
}

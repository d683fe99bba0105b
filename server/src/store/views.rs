//! JSON shapes of payments and refunds as merchants see them (DESIGN.md "Merchant HTTP
//! API"), used by the API's answers and by the outbox's payloads, so a webhook's `data` is
//! exactly what `GET /v1/payments/{id}` shows, plus `version`. Amounts are integer minor
//! units; times are RFC 3339 UTC.

use serde::Serialize;

use super::{Payment, Refund};
use crate::domain::clock::rfc3339;

/// A payment as merchants see it.
#[derive(Debug, Serialize)]
pub struct PaymentView {
    id: String,
    status: &'static str,
    amount: i64,
    currency: String,
    merchant_order_id: String,
    refunded_amount: i64,
    created_at: String,
    updated_at: String,
    /// Only in events: the payment's version, so a receiver can drop a stale notification
    /// (deliveries are not ordered).
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<i64>,
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
            version: None,
        }
    }
}

/// A refund as merchants see it.
#[derive(Debug, Serialize)]
pub struct RefundView {
    id: String,
    payment_id: String,
    amount: i64,
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
            status: r.status.clone(),
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

/// The outbox payload of a refund event: [`RefundView`] with `updated_at`, as JSON text.
pub fn refund_payload(r: &Refund) -> String {
    let mut v = RefundView::from(r);
    v.updated_at = Some(rfc3339(r.updated_at));
    serde_json::to_string(&v).unwrap_or_default()
}

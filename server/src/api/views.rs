//! JSON shapes of the merchant API (DESIGN.md "Merchant HTTP API"). Amounts are integer minor
//! units; times are RFC 3339 UTC.

use serde::Serialize;

use crate::domain::clock::rfc3339;
use crate::store::{Payment, Refund};

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
}

impl From<&Refund> for RefundView {
    fn from(r: &Refund) -> Self {
        RefundView {
            id: r.id.clone(),
            payment_id: r.payment_id.clone(),
            amount: r.amount,
            status: r.status.clone(),
        }
    }
}

//! Read-only storage queries behind `converge verify` (DESIGN.md "Convergence invariants").
//! Part of the storage abstraction: [`Store`](super::Store) requires [`Verify`], both backends
//! run the same SQL (`impl_verify!`), and the conformance suite (tests/it/verify_store.rs)
//! runs it on both. The checks themselves are plain Rust in [`crate::verify`].

use async_trait::async_trait;
use serde::Serialize;

use super::StoreError;

/// One payment with the counts the invariants need, as of one read. Amounts are integer minor
/// units; times are epoch milliseconds UTC.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct VerifyPaymentRow {
    /// Payment id (`pay_...`).
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// The merchant's business key.
    pub merchant_order_id: String,
    /// Status name as stored (`SUCCESS`, ...).
    pub status: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// The key the payment is charged under at the channel.
    pub channel_key: String,
    /// Refunds reserved or done, minor units.
    pub refunded_amount: i64,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Entered the current state, epoch ms UTC.
    pub updated_at: i64,
    /// Ledger batches of kind `charge` for the payment.
    pub charge_batches: i64,
    /// Sum of the debit lines of those batches, minor units.
    pub charge_batch_debits: i64,
    /// Refunds in status `succeeded`.
    pub refunds_succeeded: i64,
    /// Their total, minor units.
    pub refunds_succeeded_amount: i64,
    /// Refunds still `pending`.
    pub refunds_pending: i64,
    /// Ledger batches belonging to the payment's refunds (at most one per refund).
    pub refund_batches: i64,
    /// Open error-pool items naming the payment.
    pub open_error_items: i64,
    /// `automatic` (a charge) or `manual` (a hold, issue 34).
    pub capture_mode: String,
    /// What a manual-capture payment captured, minor units (0 for a charge).
    pub captured_amount: i64,
}

impl VerifyPaymentRow {
    /// A manual-capture payment: a hold, captured in parts, not one charge.
    pub fn is_hold(&self) -> bool {
        self.capture_mode == converge_wire::payments::CaptureMode::Manual.as_str()
    }

    /// What the payment took: its amount, or a hold's captures.
    pub fn charged_amount(&self) -> i64 {
        if self.is_hold() {
            self.captured_amount
        } else {
            self.amount
        }
    }
}

/// A ledger batch whose lines do not balance: debits differ from credits, it has no lines, or
/// a line's currency differs from the batch's. Amounts in minor units.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct UnbalancedBatch {
    /// Batch id.
    pub id: i64,
    /// Payment.
    pub payment_id: String,
    /// `charge`, `refund` or `reversal`.
    pub kind: String,
    /// The batch's currency.
    pub currency: String,
    /// Sum of debit lines.
    pub debits: i64,
    /// Sum of credit lines.
    pub credits: i64,
    /// Number of lines.
    pub lines: i64,
    /// Lines in another currency than the batch's.
    pub foreign_lines: i64,
}

/// Completed Idempotency-Keys and how many of them lack a stored response (status or body),
/// which would make a replay impossible (DESIGN.md invariant 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct KeyTotals {
    /// Keys in state `done`.
    pub done: i64,
    /// Of those, keys without a stored status or body.
    pub without_response: i64,
}

/// Queries for `converge verify`. All are reads; none takes a write lock.
#[async_trait]
pub trait Verify: Send + Sync + 'static {
    /// Up to `limit` payments with id greater than `after` (`""` for the first page), in id
    /// order, with their ledger, refund and error-pool counts. Paging keeps memory bounded on
    /// large databases.
    async fn verify_payments_page(
        &self,
        after: &str,
        limit: i64,
    ) -> Result<Vec<VerifyPaymentRow>, StoreError>;
    /// Every ledger batch that does not balance (see [`UnbalancedBatch`]); empty when all do.
    async fn unbalanced_batches(&self) -> Result<Vec<UnbalancedBatch>, StoreError>;
    /// Completed Idempotency-Keys and how many lack a stored response.
    async fn key_totals(&self) -> Result<KeyTotals, StoreError>;
}

macro_rules! impl_verify {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Verify for $store {
            async fn verify_payments_page(
                &self,
                after: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::VerifyPaymentRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::VerifyPaymentRow>(
                    concat!("SELECT p.id, p.merchant_id, p.merchant_order_id, p.status, p.amount, p.currency, p.channel_key, \
                     p.refunded_amount, p.created_at, p.updated_at, \
                     (SELECT COUNT(*) FROM ledger_batches b WHERE b.payment_id = p.id AND b.kind = 'charge') \
                       AS charge_batches, \
                     (SELECT CAST(COALESCE(SUM(e.amount), 0) AS BIGINT) FROM ledger_batches b \
                       JOIN ledger_entries e ON e.batch_id = b.id \
                       WHERE b.payment_id = p.id AND b.kind = 'charge' AND e.direction = 'debit') AS charge_batch_debits, \
                     (SELECT COUNT(*) FROM refunds r WHERE r.payment_id = p.id AND r.status = ", converge_wire::refund_sql!(Succeeded), ") \
                       AS refunds_succeeded, \
                     (SELECT CAST(COALESCE(SUM(r.amount), 0) AS BIGINT) FROM refunds r \
                       WHERE r.payment_id = p.id AND r.status = ", converge_wire::refund_sql!(Succeeded), ") AS refunds_succeeded_amount, \
                     (SELECT COUNT(*) FROM refunds r WHERE r.payment_id = p.id AND r.status = ", converge_wire::refund_sql!(Pending), concat!(") \
                       AS refunds_pending, \
                     (SELECT COUNT(*) FROM refunds r JOIN ledger_batches b ON b.refund_id = r.id \
                       WHERE r.payment_id = p.id) AS refund_batches, \
                     (SELECT COUNT(*) FROM error_pool ep WHERE ep.payment_id = p.id AND ep.status = ", converge_wire::error_item_sql!(Open), ") \
                       AS open_error_items, p.capture_mode, p.captured_amount \
                     FROM payments p WHERE p.id > $1 ORDER BY p.id LIMIT $2")),
                )
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?)
            }

            async fn unbalanced_batches(
                &self,
            ) -> Result<Vec<$crate::store::UnbalancedBatch>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::UnbalancedBatch>(
                    "SELECT b.id, b.payment_id, b.kind, b.currency, \
                     CAST(COALESCE(SUM(CASE WHEN e.direction = 'debit' THEN e.amount ELSE 0 END), 0) AS BIGINT) AS debits, \
                     CAST(COALESCE(SUM(CASE WHEN e.direction = 'credit' THEN e.amount ELSE 0 END), 0) AS BIGINT) AS credits, \
                     COUNT(e.id) AS lines, \
                     CAST(COALESCE(SUM(CASE WHEN e.currency <> b.currency THEN 1 ELSE 0 END), 0) AS BIGINT) AS foreign_lines \
                     FROM ledger_batches b LEFT JOIN ledger_entries e ON e.batch_id = b.id \
                     GROUP BY b.id, b.payment_id, b.kind, b.currency \
                     HAVING COUNT(e.id) = 0 \
                     OR COALESCE(SUM(CASE WHEN e.direction = 'debit' THEN e.amount ELSE 0 END), 0) \
                        <> COALESCE(SUM(CASE WHEN e.direction = 'credit' THEN e.amount ELSE 0 END), 0) \
                     OR COALESCE(SUM(CASE WHEN e.currency <> b.currency THEN 1 ELSE 0 END), 0) > 0 \
                     ORDER BY b.id",
                )
                .fetch_all(self.reader())
                .await?)
            }

            async fn key_totals(&self) -> Result<$crate::store::KeyTotals, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::KeyTotals>(
                    concat!("SELECT COUNT(*) AS done, \
                     CAST(COALESCE(SUM(CASE WHEN response_status IS NULL OR response_body IS NULL THEN 1 ELSE 0 END), 0) \
                     AS BIGINT) AS without_response \
                     FROM idempotency_keys WHERE state = ", converge_wire::key_sql!(Done)),
                )
                .fetch_one(self.reader())
                .await?)
            }
        }
    };
}

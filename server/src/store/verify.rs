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
    /// The connector that took it (`payments.connector`).
    pub connector: String,
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
    /// A reversal is reserved on the payment (`reversal_id`) and the payment is not
    /// REVERSED yet: its refund may be at the channel already.
    pub reversal_in_flight: bool,
    /// Ledger batches belonging to the payment's refunds (at most one per refund).
    pub refund_batches: i64,
    /// Open error-pool items naming the payment.
    pub open_error_items: i64,
    /// The payment's fees, minor units (issue 35).
    pub fee_amount: i64,
    /// What its fee batches credit to fee revenue, minor units.
    pub fee_batch_credits: i64,
    /// `automatic` or `manual` (a hold, issue 34).
    pub capture_mode: String,
    /// Captured off the hold so far, minor units (0 for an automatic payment).
    pub captured_amount: i64,
    /// Released from the hold (void, expiry, the rest after a final capture), minor units.
    pub released_amount: i64,
    /// When the recorded hold lapses, epoch ms UTC; `None` while no hold is recorded.
    pub hold_expires_at: Option<i64>,
    /// The capture in flight (CAPTURING), minor units.
    pub capture_amount: Option<i64>,
    /// Ledger batches of kind `hold` for the payment (manual payments only; 0 otherwise).
    pub hold_batches: i64,
    /// Ledger batches of kind `release` for the payment (manual payments only).
    pub release_batches: i64,
    /// Ledger batches of kind `capture` of the payment's capture records (manual only).
    pub capture_batches: i64,
    /// Net (debits less credits) of `hold_pending:{merchant}` over the payment's hold,
    /// capture and release batches: minus what is still held, 0 once the hold ended.
    pub hold_pending_net: i64,
    /// Net (debits less credits) of `channel_holds` over the same batches: what is still held.
    pub channel_holds_net: i64,
    /// Credits to `merchant_payable:{merchant}` in the payment's capture batches: what the
    /// ledger says was captured, minor units.
    pub capture_payable: i64,
    /// Capture records in status `captured`.
    pub captures_captured: i64,
    /// Their total, minor units.
    pub captures_captured_amount: i64,
    /// Of those, how many have their capture batch.
    pub captures_captured_batched: i64,
}

/// A payment whose (merchant, merchant_order_id) is tombstoned by a TCC cancel that came
/// first (a hanging Try that got through).
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow, Serialize)]
pub struct TombstonedPayment {
    /// Payment id.
    pub id: String,
    /// Owner.
    pub merchant_id: i64,
    /// The tombstoned business key.
    pub merchant_order_id: String,
    /// The payment's status.
    pub status: String,
}

/// The signed sum (debits less credits) of `account` (an SQL expression) over a manual
/// payment's hold and release batches and its captures' batches; each part reaches its
/// batches by an index (the partial ones on `hold` and `release`, the capture id).
fn hold_net_sql(account: &str) -> String {
    let signed = "CASE WHEN e.direction = 'debit' THEN e.amount ELSE -e.amount END";
    let by_kind = |kind: &str| {
        format!(
            "(SELECT CAST(COALESCE(SUM({signed}), 0) AS BIGINT) FROM ledger_batches b \
             JOIN ledger_entries e ON e.batch_id = b.id \
             WHERE b.payment_id = p.id AND b.kind = '{kind}' AND e.account = {account})"
        )
    };
    format!(
        "{} + {} + (SELECT CAST(COALESCE(SUM({signed}), 0) AS BIGINT) FROM payment_captures c \
         JOIN ledger_batches b ON b.capture_id = c.id JOIN ledger_entries e ON e.batch_id = b.id \
         WHERE c.payment_id = p.id AND b.kind = 'capture' AND e.account = {account})",
        by_kind("hold"),
        by_kind("release")
    )
}

/// The select list and source of [`VerifyPaymentRow`] (alias `p`); callers add the WHERE.
/// The hold's columns are computed for manual payments only (`CASE` skips the subqueries of
/// automatic ones).
pub(crate) fn verify_payment_select() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let manual = |expr: &str| {
            format!("CASE WHEN p.capture_mode = 'manual' THEN {expr} ELSE 0 END")
        };
        let count_kind = |kind: &str| {
            manual(&format!(
                "(SELECT COUNT(*) FROM ledger_batches b WHERE b.payment_id = p.id AND b.kind = '{kind}')"
            ))
        };
        let captures = |what: &str, extra: &str| {
            manual(&format!(
                "(SELECT CAST(COALESCE({what}, 0) AS BIGINT) FROM payment_captures c \
                 WHERE c.payment_id = p.id AND c.status = {captured}{extra})",
                captured = converge_wire::capture_sql!(Captured)
            ))
        };
        let batched = " AND EXISTS (SELECT 1 FROM ledger_batches b WHERE b.capture_id = c.id \
                       AND b.kind = 'capture' AND b.payment_id = p.id)";
        let pending = "'hold_pending:' || CAST(p.merchant_id AS TEXT)";
        let payable = "'merchant_payable:' || CAST(p.merchant_id AS TEXT)";
        format!(
            "{base}, p.capture_mode, p.captured_amount, p.released_amount, p.hold_expires_at, \
             p.capture_amount, {holds} AS hold_batches, {releases} AS release_batches, \
             {capture_batches} AS capture_batches, {pending_net} AS hold_pending_net, \
             {channel_net} AS channel_holds_net, {capture_payable} AS capture_payable, \
             {n} AS captures_captured, {amount} AS captures_captured_amount, \
             {batched} AS captures_captured_batched FROM payments p",
            base = VERIFY_BASE,
            holds = count_kind("hold"),
            releases = count_kind("release"),
            capture_batches = manual(
                "(SELECT COUNT(*) FROM payment_captures c JOIN ledger_batches b ON b.capture_id = c.id \
                 WHERE c.payment_id = p.id AND b.kind = 'capture' AND b.payment_id = p.id)"
            ),
            pending_net = manual(&format!("({})", hold_net_sql(pending))),
            channel_net = manual(&format!("({})", hold_net_sql("'channel_holds'"))),
            capture_payable = manual(&format!(
                "(SELECT CAST(COALESCE(SUM(e.amount), 0) AS BIGINT) FROM payment_captures c \
                 JOIN ledger_batches b ON b.capture_id = c.id JOIN ledger_entries e ON e.batch_id = b.id \
                 WHERE c.payment_id = p.id AND b.kind = 'capture' AND e.direction = 'credit' \
                 AND e.account = {payable})"
            )),
            n = captures("COUNT(*)", ""),
            amount = captures("SUM(c.amount)", ""),
            batched = captures("COUNT(*)", batched),
        )
    })
}

/// The condition of [`Verify::verify_payments_changed_page`] (alias `p`, `$3` the mark, `$4`
/// the window's cutoff): whatever a payment's checks read was stamped at or after the mark,
/// or the window may find it late (unsettled by the domain's
/// [`is_settled`](crate::domain::state::PaymentStatus::is_settled) and created by the cutoff,
/// or a refund pending). One union of plain scans rather than a correlated test per payment:
/// a quarter of the time.
pub(crate) fn changed_since_sql() -> &'static str {
    static SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    SQL.get_or_init(|| {
        let unsettled = super::queue::status_list(|s| !s.is_settled());
        format!(
            "p.id IN (SELECT id FROM payments WHERE updated_at >= $3 \
               OR (status IN ({unsettled}) AND created_at <= $4) \
             UNION SELECT payment_id FROM ledger_batches WHERE created_at >= $3 \
             UNION SELECT payment_id FROM refunds WHERE updated_at >= $3 OR status = {pending} \
             UNION SELECT payment_id FROM payment_captures \
               WHERE requested_at >= $3 OR settled_at >= $3 \
             UNION SELECT payment_id FROM error_pool WHERE last_seen >= $3 OR resolved_at >= $3)",
            pending = converge_wire::refund_sql!(Pending)
        )
    })
}

/// The columns every payment has (automatic and manual), in [`VerifyPaymentRow`] order.
const VERIFY_BASE: &str = concat!(
    "SELECT p.id, p.merchant_id, p.merchant_order_id, p.status, p.amount, p.currency, p.channel_key, p.connector, \
     p.refunded_amount, p.created_at, p.updated_at, \
     (SELECT COUNT(*) FROM ledger_batches b WHERE b.payment_id = p.id AND b.kind = 'charge') \
       AS charge_batches, \
     (SELECT CAST(COALESCE(SUM(e.amount), 0) AS BIGINT) FROM ledger_batches b \
       JOIN ledger_entries e ON e.batch_id = b.id \
       WHERE b.payment_id = p.id AND b.kind = 'charge' AND e.direction = 'debit') AS charge_batch_debits, \
     (SELECT COUNT(*) FROM refunds r WHERE r.payment_id = p.id AND r.status = ",
    converge_wire::refund_sql!(Succeeded),
    ") \
       AS refunds_succeeded, \
     (SELECT CAST(COALESCE(SUM(r.amount), 0) AS BIGINT) FROM refunds r \
       WHERE r.payment_id = p.id AND r.status = ",
    converge_wire::refund_sql!(Succeeded),
    ") AS refunds_succeeded_amount, \
     (SELECT COUNT(*) FROM refunds r WHERE r.payment_id = p.id AND r.status = ",
    converge_wire::refund_sql!(Pending),
    ") \
       AS refunds_pending, \
     (p.reversal_id IS NOT NULL AND p.status <> 'REVERSED') AS reversal_in_flight, \
     (SELECT COUNT(*) FROM refunds r JOIN ledger_batches b ON b.refund_id = r.id \
       WHERE r.payment_id = p.id AND b.kind = 'refund') AS refund_batches, \
     (SELECT COUNT(*) FROM error_pool ep WHERE ep.payment_id = p.id AND ep.status = ",
    converge_wire::error_item_sql!(Open),
    ") \
       AS open_error_items, p.fee_amount, \
     (SELECT CAST(COALESCE(SUM(e.amount), 0) AS BIGINT) FROM ledger_batches b \
       JOIN ledger_entries e ON e.batch_id = b.id \
       WHERE b.payment_id = p.id AND b.kind = 'fee' AND e.direction = 'credit') AS fee_batch_credits"
);

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
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow, Serialize)]
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
    /// As [`verify_payments_page`](Verify::verify_payments_page), but only the payments that
    /// changed at or after `since_ms` (epoch ms UTC): the payment's row, or a ledger batch,
    /// refund, capture or error-pool item of it, stamped then; and those the convergence
    /// window may find late whatever changed: unsettled and created by `cutoff_ms` (now −
    /// window), or with a refund pending. The incremental check's read
    /// ([`crate::verify::Scope::Changed`]).
    async fn verify_payments_changed_page(
        &self,
        since_ms: i64,
        cutoff_ms: i64,
        after: &str,
        limit: i64,
    ) -> Result<Vec<VerifyPaymentRow>, StoreError>;
    /// Every ledger batch written at or after `since_ms` (epoch ms UTC; 0 for all) that does
    /// not balance (see [`UnbalancedBatch`]); empty when all do.
    async fn unbalanced_batches(&self, since_ms: i64) -> Result<Vec<UnbalancedBatch>, StoreError>;
    /// Completed Idempotency-Keys and how many lack a stored response.
    async fn key_totals(&self) -> Result<KeyTotals, StoreError>;
    /// The row of payment `id` as [`verify_payments_page`](Verify::verify_payments_page)
    /// reads it, or `None`: a second look at a payment that moved while it was checked.
    async fn verify_payment(&self, id: &str) -> Result<Option<VerifyPaymentRow>, StoreError>;
    /// Payments whose (merchant, merchant_order_id) has a TCC tombstone (issue 34): a Try
    /// that got through after its Cancel. Only pairs where the payment row or the tombstone
    /// was written at or after `since_ms` (epoch ms UTC; 0 for all: `converge verify`; the
    /// incremental check's mark otherwise). Empty when all is well.
    async fn tombstoned_payments(
        &self,
        since_ms: i64,
    ) -> Result<Vec<TombstonedPayment>, StoreError>;
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
                let sql = format!(
                    "{} WHERE p.id > $1 ORDER BY p.id LIMIT $2",
                    $crate::store::verify::verify_payment_select()
                );
                Ok(sqlx::query_as::<_, $crate::store::VerifyPaymentRow>(&sql)
                .bind(after)
                .bind(limit)
                .fetch_all(self.reader())
                .await?)
            }

            async fn verify_payments_changed_page(
                &self,
                since_ms: i64,
                cutoff_ms: i64,
                after: &str,
                limit: i64,
            ) -> Result<Vec<$crate::store::VerifyPaymentRow>, $crate::store::StoreError> {
                let sql = format!(
                    "{} WHERE p.id > $1 AND ({}) ORDER BY p.id LIMIT $2",
                    $crate::store::verify::verify_payment_select(),
                    $crate::store::verify::changed_since_sql()
                );
                Ok(sqlx::query_as::<_, $crate::store::VerifyPaymentRow>(&sql)
                    .bind(after)
                    .bind(limit)
                    .bind(since_ms)
                    .bind(cutoff_ms)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn unbalanced_batches(
                &self,
                since_ms: i64,
            ) -> Result<Vec<$crate::store::UnbalancedBatch>, $crate::store::StoreError> {
                // The batches by their `created_at` index: a plain `b.created_at >= $1` had
                // SQLite scan every batch for the GROUP BY's order (issue 39).
                Ok(sqlx::query_as::<_, $crate::store::UnbalancedBatch>(
                    "SELECT b.id, b.payment_id, b.kind, b.currency, \
                     CAST(COALESCE(SUM(CASE WHEN e.direction = 'debit' THEN e.amount ELSE 0 END), 0) AS BIGINT) AS debits, \
                     CAST(COALESCE(SUM(CASE WHEN e.direction = 'credit' THEN e.amount ELSE 0 END), 0) AS BIGINT) AS credits, \
                     COUNT(e.id) AS lines, \
                     CAST(COALESCE(SUM(CASE WHEN e.currency <> b.currency THEN 1 ELSE 0 END), 0) AS BIGINT) AS foreign_lines \
                     FROM ledger_batches b LEFT JOIN ledger_entries e ON e.batch_id = b.id \
                     WHERE b.id IN (SELECT id FROM ledger_batches WHERE created_at >= $1) \
                     GROUP BY b.id, b.payment_id, b.kind, b.currency \
                     HAVING COUNT(e.id) = 0 \
                     OR COALESCE(SUM(CASE WHEN e.direction = 'debit' THEN e.amount ELSE 0 END), 0) \
                        <> COALESCE(SUM(CASE WHEN e.direction = 'credit' THEN e.amount ELSE 0 END), 0) \
                     OR COALESCE(SUM(CASE WHEN e.currency <> b.currency THEN 1 ELSE 0 END), 0) > 0 \
                     ORDER BY b.id",
                )
                .bind(since_ms)
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

            async fn verify_payment(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::VerifyPaymentRow>, $crate::store::StoreError> {
                let sql = format!(
                    "{} WHERE p.id = $1",
                    $crate::store::verify::verify_payment_select()
                );
                Ok(sqlx::query_as::<_, $crate::store::VerifyPaymentRow>(&sql)
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn tombstoned_payments(
                &self,
                since_ms: i64,
            ) -> Result<Vec<$crate::store::TombstonedPayment>, $crate::store::StoreError> {
                // A breach is made by a payment row or a tombstone written since the mark
                // (neither's business key ever changes): one indexed half each.
                Ok(sqlx::query_as::<_, $crate::store::TombstonedPayment>(
                    "SELECT p.id, p.merchant_id, p.merchant_order_id, p.status FROM payments p \
                     JOIN order_tombstones t ON t.merchant_id = p.merchant_id \
                       AND t.merchant_order_id = p.merchant_order_id \
                     WHERE p.updated_at >= $1 \
                     UNION SELECT p.id, p.merchant_id, p.merchant_order_id, p.status \
                     FROM order_tombstones t JOIN payments p ON p.merchant_id = t.merchant_id \
                       AND p.merchant_order_id = t.merchant_order_id \
                     WHERE t.created_at >= $1 \
                     ORDER BY 1",
                )
                .bind(since_ms)
                .fetch_all(self.reader())
                .await?)
            }
        }
    };
}

//! Reads of the double-entry ledger (its batches are written by the payment and refund
//! transactions they belong to). Part of the storage abstraction: [`Store`](super::Store)
//! requires it, the SQL is `ledger_sql.rs`, and the conformance suite runs it on both backends.

use async_trait::async_trait;

use super::{LedgerDayLine, LedgerTotal, StoreError};

/// Ledger reads.
#[async_trait]
pub trait Ledger: Send + Sync + 'static {
    /// Debits and credits per currency over the whole ledger.
    async fn ledger_totals(&self) -> Result<Vec<LedgerTotal>, StoreError>;
    /// How many ledger batches of `kind` a payment has.
    async fn ledger_batch_count(&self, payment_id: &str, kind: &str) -> Result<i64, StoreError>;
    /// The batches dated accounting day `date` (`YYYY-MM-DD`), per currency and kind, ordered
    /// so: one aggregate over the day's index, never the day's rows in memory. Errors: a day's
    /// sum beyond 64 bits (the database refuses it).
    async fn ledger_day(&self, date: &str) -> Result<Vec<LedgerDayLine>, StoreError>;
}

//! Reads of the double-entry ledger (its batches are written by the payment and refund
//! transactions they belong to). Part of the storage abstraction: [`Store`](super::Store)
//! requires it, the SQL is `ledger_sql.rs`, and the conformance suite runs it on both backends.

use async_trait::async_trait;

use super::{LedgerTotal, StoreError};

/// Ledger reads.
#[async_trait]
pub trait Ledger: Send + Sync + 'static {
    /// Debits and credits per currency over the whole ledger.
    async fn ledger_totals(&self) -> Result<Vec<LedgerTotal>, StoreError>;
    /// How many ledger batches of `kind` a payment has.
    async fn ledger_batch_count(&self, payment_id: &str, kind: &str) -> Result<i64, StoreError>;
}

//! Storage: one [`Store`] trait with a SQLite and a PostgreSQL implementation, chosen at
//! start-up from the URL scheme (DESIGN.md "Storage"). Both run the same SQL where the
//! dialects agree (see `shared.rs`); what differs (write-transaction start, job claiming)
//! lives in each backend's module. One conformance suite (tests/it/conformance.rs) runs
//! every test against both.

#[macro_use]
mod shared;
#[macro_use]
mod console_sql;
#[macro_use]
mod governance_sql;
#[macro_use]
mod queue_sql;
#[macro_use]
pub mod verify;
pub mod console;
pub mod governance;
mod postgres;
pub mod queue;
pub mod records;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
pub use console::*;
pub use governance::*;
pub use queue::*;
pub use records::*;
pub use verify::*;

pub use postgres::PgStore;
pub use sqlite::SqliteStore;

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Embedded SQLite file (WAL).
    Sqlite,
    /// PostgreSQL server.
    Postgres,
}

/// Storage errors. The HTTP layers map `Unavailable` to 503 and the rest to 500, logging the
/// cause and never sending it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The URL cannot be used (scheme, syntax).
    #[error("{0}")]
    BadUrl(String),
    /// The database cannot be reached or opened.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Migrations failed.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// A unique constraint refused the write.
    #[error("conflict: {0}")]
    Conflict(String),
    /// A stored value is not one converge writes.
    #[error("corrupt data: {0}")]
    Corrupt(String),
    /// Any other database error.
    #[error("database error: {0}")]
    Db(#[source] sqlx::Error),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_) => StoreError::Unavailable(e),
            e if e
                .as_database_error()
                .is_some_and(|d| d.is_unique_violation()) =>
            {
                StoreError::Conflict(e.to_string())
            }
            e => StoreError::Db(e),
        }
    }
}

/// Everything converge persists. Implementations must be safe to share between several
/// processes on one PostgreSQL (nothing may rely on being the only process).
#[async_trait]
pub trait Store: Queue + Console + Governance + Verify + Send + Sync + 'static {
    /// The backend behind this store.
    fn backend(&self) -> Backend;

    /// Round trip to the database (`SELECT 1`). Errors: `Unavailable` when it is gone.
    async fn ping(&self) -> Result<(), StoreError>;

    /// Closes the pools; later calls fail with `Unavailable`.
    async fn close(&self);

    // --- merchants -------------------------------------------------------------------------

    /// Inserts a merchant. Errors: `Conflict` when the name is taken.
    async fn create_merchant(
        &self,
        name: &str,
        api_key_hash: &str,
        now: i64,
    ) -> Result<Merchant, StoreError>;
    /// The merchant whose API key hashes to `api_key_hash`.
    async fn merchant_by_key_hash(
        &self,
        api_key_hash: &str,
    ) -> Result<Option<Merchant>, StoreError>;
    /// The merchant with this id.
    async fn merchant(&self, id: i64) -> Result<Option<Merchant>, StoreError>;
    /// Sets the frozen flag; false when there is no such merchant.
    async fn set_merchant_frozen(&self, name: &str, frozen: bool) -> Result<bool, StoreError>;

    // --- idempotency keys ------------------------------------------------------------------

    /// Claims a key: inserts it running, or takes over a claim with the same fingerprint whose
    /// lease lapsed (the crashed request's recovery point comes back), or returns the record
    /// another request holds or completed. Never writes when the fingerprint differs.
    async fn claim_key(&self, claim: &KeyClaim) -> Result<ClaimResult, StoreError>;
    /// Records what the request created (recovery point); false when the lease was lost.
    async fn set_key_resource(&self, key: &KeyRef, resource_id: &str) -> Result<bool, StoreError>;
    /// Stores the response and marks the key done; false when the lease was lost.
    async fn complete_key(
        &self,
        key: &KeyRef,
        response: &StoredResponse,
    ) -> Result<bool, StoreError>;
    /// Deletes a claim whose request had no effect, so the key stays free.
    async fn release_key(&self, key: &KeyRef) -> Result<bool, StoreError>;
    /// Deletes keys whose retention ended before `now`; returns how many.
    async fn purge_keys(&self, now: i64) -> Result<u64, StoreError>;
    /// Adds one to the count of `outcome` on `route` in the minute `minute` (epoch minutes).
    async fn count_outcome(
        &self,
        route: &str,
        outcome: &str,
        minute: i64,
    ) -> Result<(), StoreError>;
    /// Counts per (route, outcome) since `since_minute` (epoch minutes).
    async fn outcome_counts(
        &self,
        since_minute: i64,
    ) -> Result<Vec<(String, String, i64)>, StoreError>;

    // --- payments --------------------------------------------------------------------------

    /// Inserts a PENDING payment and its submit job in one transaction, or returns the
    /// merchant's existing payment with the same merchant_order_id.
    async fn create_payment(&self, new: &NewPayment) -> Result<CreatePayment, StoreError>;
    /// The payment with this id.
    async fn payment(&self, id: &str) -> Result<Option<Payment>, StoreError>;
    /// The payment whose channel key is `channel_key`.
    async fn payment_by_channel_key(
        &self,
        channel_key: &str,
    ) -> Result<Option<Payment>, StoreError>;
    /// Applies a transition with a conditional update on (id, status, version), recording the
    /// event and writing the posting and jobs in the same transaction.
    async fn apply_transition(&self, t: &Transition) -> Result<TransitionResult, StoreError>;
    /// Records an event that was not applied; false if (payment, event_id) was recorded before.
    async fn record_ignored_event(&self, e: &IgnoredEvent) -> Result<bool, StoreError>;
    /// Every event of a payment, oldest first.
    async fn payment_events(&self, payment_id: &str) -> Result<Vec<EventRecord>, StoreError>;
    /// Every job of a payment, oldest first.
    async fn payment_jobs(&self, payment_id: &str) -> Result<Vec<Job>, StoreError>;

    // --- refunds ---------------------------------------------------------------------------

    /// Reserves `amount` on a SUCCESS payment (never past its amount), inserts the refund and
    /// its job, in one transaction.
    async fn create_refund(&self, new: &NewRefund) -> Result<CreateRefund, StoreError>;
    /// The refund with this id.
    async fn refund(&self, id: &str) -> Result<Option<Refund>, StoreError>;
    /// How many refunds of a payment are still pending.
    async fn pending_refund_count(&self, payment_id: &str) -> Result<i64, StoreError>;
    /// Marks a pending refund succeeded and posts its batch; false if it was not pending.
    async fn refund_succeeded(
        &self,
        id: &str,
        posting: &LedgerPosting,
        now: i64,
    ) -> Result<bool, StoreError>;
    /// Marks a pending refund failed and releases its reservation; false if it was not pending.
    async fn refund_failed(&self, id: &str, error: &str, now: i64) -> Result<bool, StoreError>;

    // --- ledger and callbacks --------------------------------------------------------------

    /// Debits and credits per currency over the whole ledger.
    async fn ledger_totals(&self) -> Result<Vec<LedgerTotal>, StoreError>;
    /// How many ledger batches of `kind` a payment has.
    async fn ledger_batch_count(&self, payment_id: &str, kind: &str) -> Result<i64, StoreError>;
    /// Claims the handling of a channel callback event id (DESIGN.md "Merchant HTTP API":
    /// a duplicate event id is acknowledged once). True when this caller is to handle it: the
    /// id is new, or an earlier handler's claim is still unsettled and was taken at or before
    /// `stale_before` (that handler died; its lapsed claim is taken over). False for an event
    /// already settled or being handled now. Times are epoch ms UTC.
    async fn claim_callback(
        &self,
        event_id: &str,
        channel_key: &str,
        kind: &str,
        now: i64,
        stale_before: i64,
    ) -> Result<bool, StoreError>;
    /// Settles a claimed callback: `Some(outcome)` records how it ended (`applied`,
    /// `ignored`, `unknown_payment`); `None` drops the claim so the channel's redelivery is
    /// handled afresh (the handler failed before any effect was committed).
    async fn settle_callback(
        &self,
        event_id: &str,
        outcome: Option<&str>,
    ) -> Result<(), StoreError>;
}

/// Opens the store named by `url` and applies its migrations.
///
/// `sqlite:PATH`, `sqlite://PATH` or a plain path (`data/converge.db`) open SQLite in WAL mode,
/// creating the file and its directory; `postgres://` or `postgresql://` open PostgreSQL.
/// Errors: `BadUrl` for another scheme or a malformed URL, `Unavailable` when the database
/// cannot be reached or the file cannot be created.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PgStore::connect(url).await?))
    } else if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        Ok(Arc::new(SqliteStore::open(path).await?))
    } else if url.contains("://") {
        Err(StoreError::BadUrl(format!(
            "unsupported database URL scheme in {:?}: use sqlite:PATH or postgres://USER:PASS@HOST/DB",
            redact(url)
        )))
    } else {
        Ok(Arc::new(SqliteStore::open(url).await?))
    }
}

/// `url` with any password replaced by `***`, for error messages and logs.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

//! The contract between the SQL both backends share and the two backends that run it.
//!
//! SQLite and PostgreSQL agree on `$N` parameters, `ON CONFLICT ... DO NOTHING`, `RETURNING`
//! and partial unique indexes, so one SQL text serves both. That text lives in one
//! `*_sql.rs` file per aggregate (merchants, payments, refunds, ledger, callbacks, keys,
//! queue, console, governance, lookup, live, pauses, verify, webhooks), each a `macro_rules!`
//! that writes its storage trait's impl for a concrete store type, because sqlx's queries are
//! typed by the database and one generic body over both would need a bound per bound value.
//!
//! What differs between the backends (how a write transaction starts, the locks, job claiming,
//! the pools) is [`SqlBackend`]: the shared SQL calls nothing of a store but its items, so a
//! backend that lacks one fails to compile with an error naming the trait. A backend
//! implements [`SqlBackend`] and expands [`impl_sql_store!`] once; that writes every storage
//! trait of [`Store`](super::Store) for it.

use std::future::Future;

use sqlx::{Pool, Transaction};

use super::{AuditPageQuery, AuditRecord, Backend, DbPool, LeasedJob, StoreError, WebhookPlan};

/// What a database backend supplies to the shared SQL (module docs).
///
/// Every write that needs more than one statement runs in a transaction from
/// [`begin_write`](Self::begin_write); single-statement writes go to
/// [`writer`](Self::writer), reads to [`reader`](Self::reader).
pub(crate) trait SqlBackend: Send + Sync + 'static {
    /// The sqlx database the shared SQL is typed by (`Sqlite` or `Postgres`).
    type Db: sqlx::Database;

    /// Which backend this is: what [`Store::backend`](super::Store::backend) reports, and the
    /// dialect of the few statements written per backend (the id lookup).
    const BACKEND: Backend;

    /// The pool for reads. Reads through it may see a snapshot older than the last write of
    /// another connection, never a partial transaction.
    fn reader(&self) -> &Pool<Self::Db>;

    /// The pool for single-statement writes (and reads that must see them).
    fn writer(&self) -> &Pool<Self::Db>;

    /// Starts a write transaction. SQLite: on the one writer connection with `BEGIN
    /// IMMEDIATE`, so the transaction holds the write lock from its first statement (a
    /// read-then-write never fails to upgrade, and writers of this process queue instead of
    /// spinning in the busy handler). PostgreSQL: READ COMMITTED on the shared pool, where
    /// the conditional updates and [`lock_audit`](Self::lock_audit) /
    /// [`lock_auth`](Self::lock_auth) do the fencing. Errors: `Unavailable` when no
    /// connection can be had.
    fn begin_write(
        &self,
    ) -> impl Future<Output = Result<Transaction<'static, Self::Db>, StoreError>> + Send;

    /// Serialises audit appends for the rest of `tx`, across connections and processes, so two
    /// appends never chain to the same head. A no-op where `begin_write` already excludes
    /// every other writer (SQLite).
    fn lock_audit(
        tx: &mut Transaction<'static, Self::Db>,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Serialises the password checks of client address `addr` for the rest of `tx`, so
    /// concurrent sign-ins cannot all pass the throttle on the same count. A no-op where
    /// `begin_write` already excludes every other writer (SQLite).
    fn lock_auth(
        tx: &mut Transaction<'static, Self::Db>,
        addr: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Serialises, for the rest of `tx`, the transactions that decide on merchant
    /// `merchant_id`'s `merchant_order_id` (a create's insert, a cancel's tombstone: TCC by
    /// business key), so each sees what the other committed: on READ COMMITTED a create's
    /// "no tombstone" and a cancel's "no payment" could both hold otherwise, and both write
    /// (a hanging Try). A no-op where `begin_write` already excludes every other writer
    /// (SQLite).
    fn lock_order(
        tx: &mut Transaction<'static, Self::Db>,
        merchant_id: i64,
        merchant_order_id: &str,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// [`Queue::claim_jobs_of`](super::Queue::claim_jobs_of): leases up to `batch` due jobs
    /// (or lapsed leases) of the kinds `filter` takes, round-robin across merchants
    /// ([`fair_claim_sql`](super::fair_claim_sql)), never one job to two claimers. The two
    /// dialects differ here (SQLite's one writer; PostgreSQL's `FOR UPDATE SKIP LOCKED`).
    fn claim_due_jobs(
        &self,
        owner: &str,
        batch: i64,
        lease_ms: i64,
        now: i64,
        filter: &super::KindFilter,
    ) -> impl Future<Output = Result<Vec<LeasedJob>, StoreError>> + Send;

    /// The pool behind [`Console::db_pool`](super::Console::db_pool) (the session store's).
    fn pool_handle(&self) -> DbPool;

    /// How new webhook deliveries are scheduled (the plan the outbox writes with).
    fn outbox_plan(&self) -> &WebhookPlan;

    /// Closes every pool (and any reader of the backend's own); later calls fail with
    /// `Unavailable`.
    fn close_pools(&self) -> impl Future<Output = ()> + Send;

    /// A page of the audit export read by the backend's own reader, or None to read it through
    /// [`reader`](Self::reader) with the shared SQL (SQLite reads a file's pages on a blocking
    /// thread, `sqlite_export.rs`).
    fn audit_page_direct(
        &self,
        page: &AuditPageQuery,
    ) -> impl Future<Output = Result<Option<Vec<AuditRecord>>, StoreError>> + Send;
}

/// The sqlx database of backend `B`.
pub(crate) type DbOf<B> = <B as SqlBackend>::Db;

/// The write transaction of backend `B`, as the shared SQL's helpers take it.
pub(crate) type Tx<B> = Transaction<'static, DbOf<B>>;

/// Compiles only for a [`SqlBackend`]: each `impl_*!` macro evaluates it first, so expanding
/// one for a type that is not a backend is refused with an error naming the trait.
pub(crate) const fn is_backend<B: SqlBackend>() {}

/// Writes every storage trait of [`Store`](super::Store) for `$store`, a [`SqlBackend`],
/// from the shared SQL. The aggregates call each other's in-transaction helpers (all are
/// expanded into the backend's module): `append_audit_in` (governance) from every audited
/// write, `insert_job` (queue) and `insert_posting` (ledger) from payments and refunds,
/// `insert_outbox_event` (webhooks) from payments and refunds, the key steps (keys) from
/// payments; so they are expanded together, here.
macro_rules! impl_sql_store {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();
        // The aggregates call the backend's items as methods (`self.reader()`,
        // `self.begin_write()`): the trait's, since the stores have no inherent items of
        // those names.
        use $crate::store::backend::SqlBackend as _;

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> $crate::store::Backend {
                <$store as $crate::store::backend::SqlBackend>::BACKEND
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                sqlx::query("SELECT 1")
                    .execute(self.reader())
                    .await
                    .map_err($crate::store::StoreError::Unavailable)?;
                Ok(())
            }

            async fn role(&self) -> Result<$crate::store::DatabaseRole, $crate::store::StoreError> {
                use $crate::store::Presence;
                self.check_present()?;
                match <$store as $crate::store::backend::SqlBackend>::BACKEND {
                    // The one writer connection may be busy with a long write: the round
                    // trip goes to a reader.
                    $crate::store::Backend::Sqlite => {
                        self.ping().await?;
                        Ok($crate::store::DatabaseRole {
                            standby: false,
                            writable: true,
                        })
                    }
                    $crate::store::Backend::Postgres => {
                        let (standby, read_only): (bool, String) = sqlx::query_as(
                            "SELECT pg_is_in_recovery(), current_setting('transaction_read_only')",
                        )
                        .fetch_one(self.writer())
                        .await?;
                        Ok($crate::store::DatabaseRole {
                            standby,
                            writable: !standby && read_only != "on",
                        })
                    }
                }
            }

            async fn close(&self) {
                self.close_pools().await;
            }
        }

        impl_merchants!($store);
        impl_payments!($store);
        impl_refunds!($store);
        impl_ledger!($store);
        impl_callbacks!($store);
        impl_keys!($store);
        impl_queue!($store);
        impl_verify!($store);
        impl_console!($store);
        impl_governance!($store);
        impl_channel_health!($store);
        impl_lookup!($store);
        impl_live!($store);
        impl_pauses!($store);
        impl_privileges!($store);
        impl_passkeys!($store);
        impl_webhooks!($store);
    };
}

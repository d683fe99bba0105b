//! PostgreSQL backend, for production and for several `converge serve` processes sharing one
//! database (DESIGN.md "Storage").

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Transaction};

use super::{Backend, StoreError};

/// The PostgreSQL implementation of [`Store`](super::Store).
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    /// How new webhook deliveries are scheduled.
    webhook_plan: std::sync::Arc<super::WebhookPlan>,
}

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/postgres");

/// The pool size of [`PgStore::connect`]: one-off commands, tools and tests.
pub const DEFAULT_POOL: u32 = 16;

impl PgStore {
    /// Connects to `url` (`postgres://USER:PASS@HOST:PORT/DB`) with a pool of up to 16
    /// connections and applies the migrations.
    ///
    /// Errors: `BadUrl` when the URL does not parse, `Unavailable` when the server cannot be
    /// reached within 5 s or refuses the login; when the pool only says it timed out, the
    /// error is the cause one direct connection attempt meets (e.g. connection refused).
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_sized(url, DEFAULT_POOL).await
    }

    /// [`connect`](Self::connect) with a pool of up to `max_connections` (at least 1): a
    /// serving process sizes it to its lanes and its API reserve
    /// ([`LaneSettings::pool_size`](crate::config::LaneSettings::pool_size)).
    pub async fn connect_sized(url: &str, max_connections: u32) -> Result<Self, StoreError> {
        let max = max_connections.max(1);
        let opts = PgConnectOptions::from_str(url).map_err(|e| {
            StoreError::BadUrl(format!("bad PostgreSQL URL {}: {e}", super::redact(url)))
        })?;
        let pool = match Self::pool(opts.clone(), max).await {
            Ok(pool) => pool,
            Err(sqlx::Error::PoolTimedOut) => Self::pool_after_timeout(opts, max).await?,
            Err(e) => return Err(StoreError::Unavailable(e)),
        };
        MIGRATOR.run(&pool).await?;
        Ok(Self {
            pool,
            webhook_plan: Default::default(),
        })
    }

    async fn pool(opts: PgConnectOptions, max: u32) -> Result<PgPool, sqlx::Error> {
        PgPoolOptions::new()
            .max_connections(max)
            .acquire_timeout(Duration::from_secs(5))
            .after_connect(|_, _| {
                Box::pin(async {
                    super::connection_opened();
                    Ok(())
                })
            })
            .connect_with(opts)
            .await
    }

    /// The pool retries a refused connection until its timeout (the server may be starting)
    /// and then reports only `PoolTimedOut`. One direct attempt names the real cause; if it
    /// succeeds the server has just come up, and the pool gets one more try.
    async fn pool_after_timeout(opts: PgConnectOptions, max: u32) -> Result<PgPool, StoreError> {
        use sqlx::{ConnectOptions, Connection};
        match tokio::time::timeout(Duration::from_secs(5), opts.connect()).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
                Self::pool(opts, max).await.map_err(StoreError::Unavailable)
            }
            Ok(Err(e)) => Err(StoreError::Unavailable(e)),
            Err(_) => Err(StoreError::Unavailable(sqlx::Error::Io(
                std::io::Error::new(std::io::ErrorKind::TimedOut, "no answer within 5 s"),
            ))),
        }
    }
}

/// One shared pool at READ COMMITTED; advisory locks where a conditional update cannot fence.
impl super::SqlBackend for PgStore {
    type Db = Postgres;

    const BACKEND: Backend = Backend::Postgres;

    /// The pool (reads and writes share it).
    fn reader(&self) -> &PgPool {
        &self.pool
    }

    /// The pool (reads and writes share it).
    fn writer(&self) -> &PgPool {
        &self.pool
    }

    /// A transaction at READ COMMITTED: conditional updates do the fencing.
    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, StoreError> {
        Ok(self.pool.begin().await?)
    }

    /// Serialises audit appends across connections and processes for the rest of the
    /// transaction, so two appends cannot both chain to the same head.
    async fn lock_audit(tx: &mut Transaction<'static, Postgres>) -> Result<(), StoreError> {
        // 0x636f6e76 = "conv": the one advisory lock converge uses.
        sqlx::query("SELECT pg_advisory_xact_lock(1668247158)")
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Serialises the password checks of one client address across connections and
    /// processes for the rest of the transaction (two-key advisory lock: its own key space,
    /// apart from the audit lock's single key).
    async fn lock_auth(
        tx: &mut Transaction<'static, Postgres>,
        addr: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_advisory_xact_lock(1668247159, hashtext($1))")
            .bind(addr)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Serialises the creates and cancels of one merchant's order across connections and
    /// processes for the rest of the transaction (two-key advisory lock in its own key space;
    /// two orders whose hashes collide only wait for each other).
    async fn lock_order(
        tx: &mut Transaction<'static, Postgres>,
        merchant_id: i64,
        merchant_order_id: &str,
    ) -> Result<(), StoreError> {
        sqlx::query("SELECT pg_advisory_xact_lock(1668247160, hashtext($1::text || ':' || $2))")
            .bind(merchant_id)
            .bind(merchant_order_id)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Leases due jobs with `FOR UPDATE SKIP LOCKED` in a CTE, so concurrent claimers skip
    /// each other's rows and a claim never returns more than `batch` rows.
    async fn claim_due_jobs(
        &self,
        owner: &str,
        batch: i64,
        lease_ms: i64,
        now: i64,
        filter: &super::KindFilter,
    ) -> Result<Vec<super::LeasedJob>, StoreError> {
        // The ranking reads a snapshot; the rows picked are then locked in turn order with
        // SKIP LOCKED, and each is re-checked on its latest version (READ COMMITTED), so a
        // job another claimer took meanwhile (leased, its run_at now the lease's expiry) is
        // passed over, never leased twice. A window function cannot share a query level
        // with FOR UPDATE, hence the ranking in its own subquery. The ranking keeps its
        // first `$5` itself: without that LIMIT the planner guessed ~1,600 ranked rows and
        // hash-joined them to every live job (a bitmap scan of the whole backlog: 22,000
        // due refunds made each claim 10-26 ms idle and 300-450 ms under full-rate creates,
        // BENCHMARKS.md "Bulkheads"); with it, it looks each one up by its key. A ranked
        // job a concurrent claimer holds is skipped, not replaced: that claim returns fewer,
        // and the lane's next claim takes the rest.
        let sql = format!(
            concat!(
                "WITH picked AS (SELECT j.id FROM jobs j \
             JOIN ({fair} ORDER BY turn, run_at, id LIMIT $5) f ON f.id = j.id \
             WHERE j.status IN (",
                converge_wire::job_sql!(Due),
                ", ",
                converge_wire::job_sql!(Leased),
                ") AND j.run_at <= $4 \
             ORDER BY f.turn, f.run_at, f.id LIMIT $5 FOR UPDATE OF j SKIP LOCKED) \
             UPDATE jobs j SET status = ",
                converge_wire::job_sql!(Leased),
                ", lease_owner = $1, lease_token = $2 || '-' || j.id, \
             lease_expires_at = $3, run_at = $3, attempts = j.attempts + 1, updated_at = $4 \
             FROM picked WHERE j.id = picked.id \
             RETURNING j.id, j.kind, j.payment_id, j.refund_id, j.payload, j.attempts, j.max_attempts, j.lease_token, j.trace_id"
            ),
            fair = super::fair_claim_sql(filter, super::ClaimDialect::Postgres),
        );
        let mut q = sqlx::query_as::<_, super::LeasedJob>(&sql)
            .bind(owner)
            .bind(crate::ids::new_token())
            .bind(now + lease_ms)
            .bind(now)
            .bind(batch);
        for k in filter.params() {
            q = q.bind(k);
        }
        Ok(q.fetch_all(&self.pool).await?)
    }

    fn pool_handle(&self) -> super::DbPool {
        super::DbPool::Postgres(self.pool.clone())
    }

    fn outbox_plan(&self) -> &super::WebhookPlan {
        &self.webhook_plan
    }

    async fn close_pools(&self) {
        self.pool.close().await;
    }

    /// The shared SQL, its rows decoded by position (`pg_export.rs`).
    async fn audit_page_direct(
        &self,
        page: &super::AuditPageQuery,
    ) -> Result<Option<Vec<super::AuditRecord>>, StoreError> {
        super::pg_export::page(&self.pool, page).await.map(Some)
    }
}

/// A server has no file to lose: a round trip ([`Store::ping`](super::Store::ping)) says it all.
impl super::Presence for PgStore {
    fn check_present(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

impl_sql_store!(PgStore);

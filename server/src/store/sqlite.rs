//! SQLite backend: the embedded default (`data/converge.db`, WAL).
//!
//! SQLite allows one writer at a time. Writes go through a one-connection writer pool, so
//! writers in this process queue in order instead of spinning in the busy handler, and each
//! write transaction starts with `BEGIN IMMEDIATE`, so a second process (e.g. `converge
//! worker`) waits on the busy timeout instead of failing a snapshot upgrade.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::{Backend, StoreError};

/// The SQLite implementation of [`Store`](super::Store).
#[derive(Debug, Clone)]
pub struct SqliteStore {
    reader: SqlitePool,
    writer: SqlitePool,
    /// The database file and its identity when opened; None in memory.
    file: Option<DbFile>,
    /// How new webhook deliveries are scheduled.
    webhook_plan: std::sync::Arc<super::WebhookPlan>,
    /// The audit export's blocking reader of the file; None in memory, where the one
    /// connection is sqlx's and the export reads through it.
    export: Option<std::sync::Arc<super::sqlite_export::ExportReader>>,
    /// The deterministic simulator's seam (issue 39), None everywhere else.
    write_hook: Option<WriteHook>,
}

/// What the deterministic simulator (`sim/`, issue 39) runs at the start of every write
/// transaction ([`SqlBackend::begin_write`](super::SqlBackend::begin_write)), before the
/// writer connection is taken: None goes on at once; a future is awaited first. The
/// simulator ends the process there (a future that never resolves, the caller's future
/// dropped: a crash between two transactions) or holds the operation until a later step
/// releases it (another actor acts between the operation's read and its write). Installed
/// with [`SqliteStore::with_write_hook`]; no server builds one, and unset it costs one branch.
#[derive(Clone)]
pub struct WriteHook(pub std::sync::Arc<dyn Fn() -> Option<WriteWait> + Send + Sync>);

/// What a [`WriteHook`] has a write transaction await before it starts.
pub type WriteWait = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

impl std::fmt::Debug for WriteHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WriteHook")
    }
}

/// A database file as opened, to notice when it is deleted or replaced under a running
/// process: SQLite keeps answering from its open descriptors, so `SELECT 1` cannot.
#[derive(Debug, Clone)]
struct DbFile {
    path: PathBuf,
    /// (device, inode) on Unix, so a new file at the same path is not taken for the old one.
    id: Option<(u64, u64)>,
}

impl DbFile {
    fn identity(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some((meta.dev(), meta.ino()))
        }
        #[cfg(not(unix))]
        {
            let _ = meta;
            None
        }
    }

    /// Errors: `Unavailable` (an `io::Error` naming the path) when the file is gone, is no
    /// longer a regular file, or is another file than the one opened.
    fn check(&self) -> Result<(), StoreError> {
        let gone = |why: &str| {
            StoreError::Unavailable(sqlx::Error::Io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("SQLite database file {} {why}", self.path.display()),
            )))
        };
        match std::fs::metadata(&self.path) {
            Ok(meta) if !meta.is_file() => Err(gone("is no longer a file")),
            Ok(meta) if self.id.is_some() && Self::identity(&meta) != self.id => {
                Err(gone("was replaced by another file"))
            }
            Ok(_) => Ok(()),
            Err(e) => Err(gone(&format!("is gone ({e})"))),
        }
    }
}

/// Prepared statements each connection keeps: room for every distinct statement converge runs
/// (137 in one simulator seed; the console's and the jobs' reads add to them) with a margin.
const STATEMENT_CACHE: usize = 512;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../migrations/sqlite");

impl SqliteStore {
    /// Opens (creating if needed) the database file at `path` (or `:memory:`), in WAL mode with
    /// foreign keys on and a 10 s busy timeout, and applies the migrations.
    ///
    /// Errors: `BadUrl` for an empty path, `Unavailable` when the directory cannot be created
    /// or the file opened.
    pub async fn open(path: &str) -> Result<Self, StoreError> {
        // An empty path would open a private temporary database: nothing written would last.
        if path.trim().is_empty() {
            return Err(StoreError::BadUrl("the SQLite path is empty".into()));
        }
        let memory = path == ":memory:";
        if !memory
            && let Some(dir) = Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
        {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Unavailable(sqlx::Error::Io(e)))?;
        }
        // The path is a file name, taken literally: read as a URL, `?mode=memory` or `%20`
        // in it would open another database than the file named.
        let opts = if memory {
            SqliteConnectOptions::from_str("sqlite::memory:")
                .map_err(|e| StoreError::BadUrl(format!("bad SQLite path {path:?}: {e}")))?
        } else {
            SqliteConnectOptions::new().filename(path)
        };
        let opts = opts
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            // converge runs more distinct statements than sqlx's default of 100 prepared
            // statements kept per connection (137 in one simulator seed): with 100, the oldest
            // were evicted and prepared again all the time (BENCHMARKS.md "Deterministic
            // simulator").
            .statement_cache_capacity(STATEMENT_CACHE);
        // An in-memory database exists per connection: both pools must be that one connection.
        // That connection never goes stale (nothing lies between it and the database), so the
        // pool's ping before each use is skipped: it doubled the simulator's round trips.
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .test_before_acquire(!memory)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.clone())
            .await
            .map_err(StoreError::Unavailable)?;
        let reader = if memory {
            writer.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(opts.read_only(false))
                .await
                .map_err(StoreError::Unavailable)?
        };
        MIGRATOR.run(&writer).await?;
        let file = if memory {
            None
        } else {
            let path = PathBuf::from(path);
            let id = std::fs::metadata(&path)
                .ok()
                .and_then(|m| DbFile::identity(&m));
            Some(DbFile { path, id })
        };
        let export = file
            .as_ref()
            .map(|f| super::sqlite_export::ExportReader::new(f.path.clone()));
        Ok(Self {
            reader,
            writer,
            file,
            webhook_plan: Default::default(),
            export,
            write_hook: None,
        })
    }

    /// This store with `hook` run at the start of every write transaction (the simulator's
    /// crash and hold points, [`WriteHook`]).
    pub fn with_write_hook(mut self, hook: WriteHook) -> Self {
        self.write_hook = Some(hook);
        self
    }
}

/// One writer connection, `BEGIN IMMEDIATE`, and the export's own blocking reader.
impl super::SqlBackend for SqliteStore {
    type Db = Sqlite;

    const BACKEND: Backend = Backend::Sqlite;

    /// Several connections; WAL readers never block the writer.
    fn reader(&self) -> &SqlitePool {
        &self.reader
    }

    /// The one writer connection: writers of this process queue on it in order.
    fn writer(&self) -> &SqlitePool {
        &self.writer
    }

    /// On the one writer connection, holding SQLite's write lock from its first statement.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, StoreError> {
        if let Some(wait) = self.write_hook.as_ref().and_then(|h| (h.0)()) {
            wait.await;
        }
        Ok(self.writer.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Audit appends need no extra lock: `BEGIN IMMEDIATE` already makes this transaction the
    /// only writer.
    async fn lock_audit(_tx: &mut Transaction<'static, Sqlite>) -> Result<(), StoreError> {
        Ok(())
    }

    /// Password checks need no extra lock: `BEGIN IMMEDIATE` already makes this transaction
    /// the only writer.
    async fn lock_auth(
        _tx: &mut Transaction<'static, Sqlite>,
        _addr: &str,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// An order's create and cancel need no extra lock: `BEGIN IMMEDIATE` already makes
    /// this transaction the only writer.
    async fn lock_order(
        _tx: &mut Transaction<'static, Sqlite>,
        _merchant_id: i64,
        _merchant_order_id: &str,
    ) -> Result<(), StoreError> {
        Ok(())
    }

    /// The one writer connection and `BEGIN IMMEDIATE` serialise claimers, so the `IN (...
    /// LIMIT n)` subquery cannot hand one job to two of them.
    async fn claim_due_jobs(
        &self,
        owner: &str,
        batch: i64,
        lease_ms: i64,
        now: i64,
        filter: &super::KindFilter,
    ) -> Result<Vec<super::LeasedJob>, StoreError> {
        // One writer: the ranking and the update run in one write transaction, so no other
        // claimer sees the jobs between them.
        let mut tx = self.begin_write().await?;
        let sql = format!(
            concat!(
                "UPDATE jobs SET status = ",
                converge_wire::job_sql!(Leased),
                ", lease_owner = $1, lease_token = $2 || '-' || id, \
             lease_expires_at = $3, run_at = $3, attempts = attempts + 1, updated_at = $4 \
             WHERE id IN (SELECT id FROM ({}) f ORDER BY turn, run_at, id LIMIT $5) RETURNING {}"
            ),
            super::fair_claim_sql(filter, super::ClaimDialect::Sqlite),
            super::queue_sql::LEASED_COLUMNS
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
        let jobs = q.fetch_all(&mut *tx).await?;
        tx.commit().await?;
        Ok(jobs)
    }

    /// The writer pool: session writes are writes.
    fn pool_handle(&self) -> super::DbPool {
        super::DbPool::Sqlite(self.writer.clone())
    }

    fn outbox_plan(&self) -> &super::WebhookPlan {
        &self.webhook_plan
    }

    async fn close_pools(&self) {
        self.writer.close().await;
        self.reader.close().await;
        if let Some(e) = &self.export {
            e.close();
        }
    }

    /// A page of the audit export read on a blocking thread ([`super::sqlite_export`]: sqlx's
    /// per-row hand-off from its worker thread halved the export's speed); None in memory.
    async fn audit_page_direct(
        &self,
        page: &super::AuditPageQuery,
    ) -> Result<Option<Vec<super::AuditRecord>>, StoreError> {
        match &self.export {
            Some(r) => Ok(Some(r.page(page).await?)),
            None => Ok(None),
        }
    }
}

/// The file must still be the one opened (always Ok in memory).
impl super::Presence for SqliteStore {
    fn check_present(&self) -> Result<(), StoreError> {
        self.file.as_ref().map_or(Ok(()), DbFile::check)
    }
}

impl_sql_store!(SqliteStore);

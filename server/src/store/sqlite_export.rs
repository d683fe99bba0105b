//! The SQLite audit export's read, on a blocking thread with rusqlite (issue 15, "Exports and
//! drains"; BENCHMARKS.md "Profiles and fixes").
//!
//! sqlx's SQLite driver runs each statement on its own worker thread and hands every row to
//! the async side as its own message, each value copied with `sqlite3_value_dup` there and
//! freed here: a profile of the export at 1 M records spent most of its time in those
//! hand-offs and in allocator locks shared by the two threads. Here one page is one statement
//! stepped on a blocking thread that decodes each row straight into an [`AuditRecord`] and
//! returns the page as one `Vec`: one hand-off per page instead of one per row.
//!
//! The connections are the store's own file opened again, read-only by `query_only`, kept
//! idle between pages; the SQL text is the one [`AuditPageQuery`] gives both backends.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use super::{AUDIT_COLUMNS, AuditArg, AuditPageQuery, AuditRecord, StoreError};

/// Idle connections kept between pages (an export uses one at a time; a few exports may run).
const IDLE: usize = 4;

/// Read-only rusqlite connections to one SQLite file, opened on first use.
#[derive(Debug)]
pub(super) struct ExportReader {
    path: PathBuf,
    idle: Mutex<Vec<Connection>>,
    /// Set by [`Self::close`]: connections in use are closed when their page ends.
    closed: AtomicBool,
}

impl ExportReader {
    /// Readers of the database file at `path` (which the store has opened, in WAL mode).
    pub(super) fn new(path: PathBuf) -> Arc<Self> {
        Arc::new(Self {
            path,
            idle: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        })
    }

    /// Runs `q` on a blocking thread. Errors: `Unavailable` when the file cannot be opened
    /// or stays locked past the busy timeout, `Db` for any other SQLite error (a stored value
    /// that is not text where text is expected included).
    pub(super) async fn page(
        self: &Arc<Self>,
        q: &AuditPageQuery,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        let me = self.clone();
        let q = q.clone();
        // A dropped export leaves the blocking read to finish; its connection goes back idle.
        tokio::task::spawn_blocking(move || me.page_blocking(&q))
            .await
            .map_err(|e| db_error(std::io::Error::other(e)))?
    }

    /// Closes the idle connections (a page being read keeps its own until it ends).
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Ok(mut idle) = self.idle.lock() {
            idle.clear();
        }
    }

    fn page_blocking(&self, q: &AuditPageQuery) -> Result<Vec<AuditRecord>, StoreError> {
        let conn = self.idle.lock().ok().and_then(|mut v| v.pop());
        let conn = match conn {
            Some(c) => c,
            None => self.open()?,
        };
        let rows = read(&conn, q).map_err(map_err)?;
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < IDLE
            && !self.closed.load(Ordering::SeqCst)
        {
            idle.push(conn);
        }
        Ok(rows)
    }

    fn open(&self) -> Result<Connection, StoreError> {
        // Not SQLITE_OPEN_READ_ONLY: a read-only connection cannot create the WAL index when
        // it is missing. `query_only` refuses writes instead. No URI: the path is literal.
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags).map_err(|e| {
            StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(format!(
                "SQLite database file {}: {e}",
                self.path.display()
            ))))
        })?;
        conn.busy_timeout(Duration::from_secs(10))
            .and_then(|()| conn.pragma_update(None, "query_only", true))
            .map_err(map_err)?;
        Ok(conn)
    }
}

/// Steps the page's statement, decoding each row where it is read.
fn read(conn: &Connection, q: &AuditPageQuery) -> rusqlite::Result<Vec<AuditRecord>> {
    let mut stmt = conn.prepare(&q.sql)?;
    // `$n` is `args[n - 1]` (AuditPageQuery): bound by position.
    for (i, a) in q.args.iter().enumerate() {
        match a {
            AuditArg::Int(v) => stmt.raw_bind_parameter(i + 1, v)?,
            AuditArg::Text(v) => stmt.raw_bind_parameter(i + 1, v.as_str())?,
        }
    }
    // By name, as sqlx's FromRow reads them: `SELECT *` follows the table's column order.
    let mut c = [0; 12];
    for (slot, name) in c.iter_mut().zip(AUDIT_COLUMNS) {
        *slot = stmt.column_index(name)?;
    }
    let mut out = Vec::with_capacity(q.capacity());
    let mut rows = stmt.raw_query();
    while let Some(r) = rows.next()? {
        out.push(AuditRecord {
            seq: r.get(c[0])?,
            at: r.get(c[1])?,
            actor: r.get(c[2])?,
            roles: r.get(c[3])?,
            action: r.get(c[4])?,
            target: r.get(c[5])?,
            reason: r.get(c[6])?,
            before_state: r.get(c[7])?,
            after_state: r.get(c[8])?,
            request_meta: r.get(c[9])?,
            prev_hash: r.get(c[10])?,
            hash: r.get(c[11])?,
        });
    }
    Ok(out)
}

fn db_error(e: std::io::Error) -> StoreError {
    StoreError::Db(sqlx::Error::Io(e))
}

/// Busy, locked, unopenable and I/O failures are the database being unavailable, as sqlx's
/// are ([`StoreError`]'s `From<sqlx::Error>`); the rest are errors of the read.
fn map_err(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode::*;
    let unavailable = matches!(
        e.sqlite_error_code(),
        Some(DatabaseBusy | DatabaseLocked | CannotOpen | SystemIoFailure | NotADatabase)
    );
    let io = std::io::Error::other(format!("SQLite: {e}"));
    if unavailable {
        StoreError::Unavailable(sqlx::Error::Io(io))
    } else {
        db_error(io)
    }
}

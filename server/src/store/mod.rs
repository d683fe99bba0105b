//! Storage: one [`Store`] trait, made of one trait per aggregate, with a SQLite and a
//! PostgreSQL implementation chosen at start-up from the URL scheme (DESIGN.md "Storage").
//! Both run the same SQL where the dialects agree (one `*_sql.rs` per aggregate); what
//! differs (write-transaction start, locks, job claiming) is the [`SqlBackend`] trait
//! (`backend.rs`), implemented in each backend's module. One conformance suite
//! (tests/it/conformance.rs) runs every test against both.

#[macro_use]
mod backend;
#[macro_use]
mod merchants_sql;
#[macro_use]
mod payments_sql;
#[macro_use]
mod refunds_sql;
#[macro_use]
mod ledger_sql;
#[macro_use]
mod callbacks_sql;
#[macro_use]
mod keys_sql;
#[macro_use]
mod console_sql;
#[macro_use]
mod governance_sql;
#[macro_use]
mod health_sql;
#[macro_use]
mod lookup_sql;
#[macro_use]
mod live_sql;
#[macro_use]
mod passkeys_sql;
#[macro_use]
mod pauses_sql;
#[macro_use]
mod privilege_sql;
#[macro_use]
mod queue_sql;
#[macro_use]
pub mod verify;
#[macro_use]
pub(crate) mod webhooks_sql;
pub mod callbacks;
pub mod console;
pub mod governance;
pub mod health;
pub mod keys;
pub mod ledger;
pub mod live;
pub mod lookup;
pub mod merchants;
pub mod passkeys;
pub mod pauses;
pub mod payments;
mod pg_export;
mod postgres;
pub mod privilege;
pub mod queue;
pub mod records;
pub mod refunds;
mod sqlite;
mod sqlite_export;
pub mod views;
pub mod webhooks;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use async_trait::async_trait;

pub(crate) use backend::SqlBackend;
pub use callbacks::*;
pub use console::*;
pub use governance::*;
pub use health::{ChannelAttemptRow, ChannelHealth, FailureGroup, NewChannelAttempt};
pub use keys::KeyStore;
pub use ledger::Ledger;
pub use live::*;
pub use lookup::{IdKind, IdMatch, KeyOutcomeCount, KeySummary, Lookup, MAX_ID_MATCHES};
pub use merchants::Merchants;
pub use passkeys::*;
pub use pauses::*;
pub use payments::Payments;
pub use privilege::*;
pub use queue::*;
pub use records::*;
pub use refunds::Refunds;
pub use verify::*;
pub use webhooks::*;

pub use postgres::{DEFAULT_POOL as DEFAULT_PG_POOL, PgStore};
pub use sqlite::{SqliteStore, WriteHook};

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
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
    /// The database refused a value the request carried (PostgreSQL: a NUL character, a key
    /// too long to index). The HTTP layers answer 400; the edges refuse such input first, so
    /// this is the backstop.
    #[error("value refused by the database: {0}")]
    Rejected(String),
    /// Any other database error.
    #[error("database error: {0}")]
    Db(#[source] sqlx::Error),
}

/// PostgreSQL SQLSTATEs that mean "this input cannot be stored", not "the database failed":
/// 22021 character_not_in_repertoire (NUL in text), 22P05 untranslatable_character, 22001
/// string_data_right_truncation, 54000 program_limit_exceeded (index row too large).
const REJECTED_INPUT: [&str; 4] = ["22021", "22P05", "22001", "54000"];

/// PostgreSQL SQLSTATEs that mean "this server cannot take the statement now; another (or
/// this one, soon) can": a failover in progress (issue 40), answered 503 with `Retry-After`
/// like a lost connection, never 500. 25006 read_only_sql_transaction (a demoted primary, or
/// one restarted read-only before its promotion), 57P01 admin_shutdown, 57P02
/// crash_shutdown, 57P03 cannot_connect_now (starting up or in recovery), 53300
/// too_many_connections, and class 08 (connection exceptions). Nothing of the statement was
/// applied: the transaction it ran in is rolled back.
const UNAVAILABLE_NOW: [&str; 5] = ["25006", "57P01", "57P02", "57P03", "53300"];

/// Whether a database error's SQLSTATE is one of [`UNAVAILABLE_NOW`] or of class 08.
fn unavailable_now(e: &sqlx::Error) -> bool {
    e.as_database_error()
        .and_then(|d| d.code())
        .is_some_and(|c| c.starts_with("08") || UNAVAILABLE_NOW.contains(&c.as_ref()))
}

/// Database errors of this process that meant "unavailable" ([`StoreError::Unavailable`]):
/// lost connections, pool time-outs and the SQLSTATEs of [`UNAVAILABLE_NOW`]; each failed
/// one statement, which its caller answers 503 or retries. `/health` reports it as
/// `unavailable_errors`; `converge_database_unavailable_total` counts the same (issue 40).
pub static UNAVAILABLE_ERRORS: AtomicU64 = AtomicU64::new(0);

/// Connections this process opened to the database after a statement had found it
/// unavailable: one per recovery (sqlx's pools replace a broken connection by themselves; the
/// first new one after an [`UNAVAILABLE_ERRORS`] is the reconnect). `/health` reports it as
/// `reconnects`; `converge_database_reconnects_total` counts the same (issue 40).
pub static RECONNECTS: AtomicU64 = AtomicU64::new(0);

/// Set by an unavailable error, cleared by the next connection opened ([`connection_opened`]).
static LOST_SINCE_LAST_CONNECT: AtomicBool = AtomicBool::new(false);

/// Counts one [`UNAVAILABLE_ERRORS`] and returns `e` as `Unavailable`.
fn unavailable(e: sqlx::Error) -> StoreError {
    UNAVAILABLE_ERRORS.fetch_add(1, Ordering::Relaxed);
    LOST_SINCE_LAST_CONNECT.store(true, Ordering::Relaxed);
    metrics::counter!("converge_database_unavailable_total").increment(1);
    StoreError::Unavailable(e)
}

/// Called by the pools for every connection they open: counts a [`RECONNECTS`] when the
/// database was found unavailable since the last one.
pub(crate) fn connection_opened() {
    if LOST_SINCE_LAST_CONNECT.swap(false, Ordering::Relaxed) {
        RECONNECTS.fetch_add(1, Ordering::Relaxed);
        metrics::counter!("converge_database_reconnects_total").increment(1);
    }
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        match e {
            sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::Io(_)
            | sqlx::Error::Tls(_) => unavailable(e),
            e if unavailable_now(&e) => unavailable(e),
            e if e
                .as_database_error()
                .is_some_and(|d| d.is_unique_violation()) =>
            {
                StoreError::Conflict(e.to_string())
            }
            e if e.as_database_error().is_some_and(|d| {
                d.code()
                    .is_some_and(|c| REJECTED_INPUT.contains(&c.as_ref()))
            }) =>
            {
                StoreError::Rejected(e.to_string())
            }
            e => StoreError::Db(e),
        }
    }
}

/// Whether the database is still where the store opened it. A SQLite file deleted under a
/// running process keeps answering queries from its open descriptors, so a round trip alone
/// cannot tell that the database is gone.
pub trait Presence {
    /// Errors: `Unavailable` when the database file was deleted or replaced (SQLite); always
    /// Ok for a server (PostgreSQL).
    fn check_present(&self) -> Result<(), StoreError>;
}

/// Everything converge persists. Implementations must be safe to share between several
/// processes on one PostgreSQL (nothing may rely on being the only process).
#[async_trait]
pub trait Store:
    Merchants
    + Payments
    + Refunds
    + Ledger
    + Callbacks
    + KeyStore
    + Queue
    + Console
    + ChannelHealth
    + Governance
    + Live
    + Lookup
    + Pauses
    + Passkeys
    + Privileges
    + Verify
    + Webhooks
    + Presence
    + Send
    + Sync
    + 'static
{
    /// The backend behind this store.
    fn backend(&self) -> Backend;

    /// Round trip to the database (`SELECT 1`). Errors: `Unavailable` when it is gone.
    async fn ping(&self) -> Result<(), StoreError>;

    /// What `/health` and the console's status badge report: the database is still where it
    /// was opened ([`Presence`]) and answers a round trip ([`ping`](Self::ping)).
    /// Errors: `Unavailable` when either fails.
    async fn health(&self) -> Result<(), StoreError> {
        self.check_present()?;
        self.ping().await
    }

    /// What `/health` reports of the database in one round trip on the writer pool: whether
    /// it is where it was opened ([`Presence`]), answers, is a standby (PostgreSQL
    /// `pg_is_in_recovery()`) and takes writes (`transaction_read_only` off: false on a
    /// standby, a demoted primary, or one restarted read-only before its promotion: issue
    /// 40's failover). SQLite is always a writable primary. Errors: `Unavailable` when it
    /// does not answer.
    async fn role(&self) -> Result<DatabaseRole, StoreError>;

    /// Closes the pools; later calls fail with `Unavailable`.
    async fn close(&self);
}

/// The database's role as the process's writer connection sees it ([`Store::role`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DatabaseRole {
    /// A PostgreSQL standby (in recovery): it follows a primary and takes no writes.
    pub standby: bool,
    /// It takes writes now.
    pub writable: bool,
}

/// Where a database URL points, decided from its form alone (no I/O).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target<'a> {
    /// `postgres://...` or `postgresql://...`: the whole URL.
    Postgres(&'a str),
    /// A SQLite file path (`sqlite:` and `sqlite://` removed), taken literally: no URL
    /// options, no percent-decoding; or `:memory:`.
    Sqlite(&'a str),
}

/// Classifies a database URL: `postgres://` and `postgresql://` URLs are PostgreSQL;
/// `sqlite:PATH`, `sqlite://PATH`, `sqlite::memory:` and plain paths (`data/converge.db`) are
/// SQLite.
///
/// Errors: `BadUrl` (one line, password redacted) for an empty URL or path, and for anything
/// else that starts like a URL scheme (`^[A-Za-z][A-Za-z0-9+.-]*:`), e.g. `postgres:/u@h/db`
/// or `localhost:5432/db`: taking those for file names would quietly create a new SQLite
/// database instead of reaching the one meant.
pub fn classify(url: &str) -> Result<Target<'_>, StoreError> {
    if url.trim().is_empty() {
        return Err(StoreError::BadUrl(
            "the database URL is empty: give a SQLite path (data/converge.db) or postgres://USER:PASS@HOST/DB".into(),
        ));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Target::Postgres(url));
    }
    if let Some(rest) = url.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.trim().is_empty() {
            return Err(StoreError::BadUrl(format!(
                "{url:?} names no SQLite file: use sqlite:PATH, or sqlite::memory: for a throw-away database"
            )));
        }
        // sqlx's URL options (`?mode=rwc`, `?cache=shared`) are not honoured: refused rather
        // than taken as part of the file name, which would create `c.db?mode=rwc`.
        if let Some((file, query)) = path.split_once('?') {
            return Err(StoreError::BadUrl(format!(
                "SQLite URL options are not supported (?{query}): give the file alone (sqlite:{file}); converge opens it read-write and creates it",
                query = redact(query),
            )));
        }
        return Ok(Target::Sqlite(path));
    }
    if let Some(scheme) = scheme_prefix(url) {
        let hint = if scheme.eq_ignore_ascii_case("postgres")
            || scheme.eq_ignore_ascii_case("postgresql")
        {
            "PostgreSQL URLs start with postgres:// (postgres://USER:PASS@HOST:PORT/DB)"
        } else {
            "use a SQLite path (data/converge.db, sqlite:PATH; ./ before a path with a colon) or postgres://USER:PASS@HOST:PORT/DB"
        };
        return Err(StoreError::BadUrl(format!(
            "unsupported database URL {:?}: {hint}",
            redact(url)
        )));
    }
    Ok(Target::Sqlite(url))
}

/// The scheme of `url` when it starts like one (`^[A-Za-z][A-Za-z0-9+.-]*:`).
fn scheme_prefix(url: &str) -> Option<&str> {
    let (scheme, _) = url.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '.' | '-')))
    .then_some(scheme)
}

/// Opens the store named by `url` (see [`classify`] for the accepted forms) and applies its
/// migrations. SQLite opens in WAL mode, creating the file and its directory.
///
/// Errors: `BadUrl` for a URL [`classify`] refuses or a malformed PostgreSQL URL,
/// `Unavailable` when the database cannot be reached or the file cannot be created,
/// `Migrate` when the migrations fail.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    connect_sized(url, DEFAULT_PG_POOL).await
}

/// [`connect`] with a PostgreSQL pool of up to `pg_pool` connections (a serving process's
/// lanes and API reserve: `LaneSettings::pool_size`). SQLite keeps its one writer and its
/// readers whatever the size.
pub async fn connect_sized(url: &str, pg_pool: u32) -> Result<Arc<dyn Store>, StoreError> {
    match classify(url)? {
        Target::Postgres(url) => Ok(Arc::new(PgStore::connect_sized(url, pg_pool).await?)),
        Target::Sqlite(path) => Ok(Arc::new(SqliteStore::open(path).await?)),
    }
}

/// `url` with its user-info (between `://` and the last `@` before the host) replaced by
/// `***`, and the value of a `password=` query parameter too, for error messages and logs.
/// Works on text that does not parse as a URL, so a malformed URL never shows its password.
/// The one helper for every URL converge logs or shows (database, NATS, channel: issue 36),
/// whatever its scheme.
pub fn redact(url: &str) -> String {
    // After the scheme and its slashes (`postgres://`, or a mistyped `postgres:/`) ...
    let authority = match scheme_prefix(url) {
        Some(scheme) => {
            let rest = &url[scheme.len() + 1..];
            scheme.len() + 1 + (rest.len() - rest.trim_start_matches('/').len())
        }
        None => url.find("://").map_or(url.len(), |i| i + 3),
    };
    // ... up to the last `@`: a password may itself hold an unescaped `@`, `/` or `?`, so no
    // character before the final `@` can be trusted to end the user-info.
    let mut out = match url[authority..].rfind('@') {
        Some(at) => format!("{}***{}", &url[..authority], &url[authority + at..]),
        None => url.to_string(),
    };
    // sqlx also takes the password as a query parameter (`?password=...`).
    let mut from = 0;
    while let Some(pos) = find_ascii_ci(&out[from..], "password=") {
        let start = from + pos;
        let preceded = start == 0 || matches!(out.as_bytes()[start - 1], b'?' | b'&');
        let value = start + "password=".len();
        if !preceded {
            from = value;
            continue;
        }
        let end = out[value..].find('&').map_or(out.len(), |i| value + i);
        out.replace_range(value..end, "***");
        from = value + 3;
    }
    out
}

/// Byte offset of `needle` (ASCII) in `hay`, ignoring ASCII case.
fn find_ascii_ci(hay: &str, needle: &str) -> Option<usize> {
    hay.as_bytes()
        .windows(needle.len())
        .position(|w| w.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(url: &str) -> String {
        match classify(url) {
            Err(StoreError::BadUrl(msg)) => msg,
            other => panic!("{url:?} should be refused, got {other:?}"),
        }
    }

    #[test]
    fn classify_accepts_postgres_sqlite_urls_and_plain_paths() {
        for url in [
            "postgres://u:p@127.0.0.1:5432/db",
            "postgresql://u@h/db?sslmode=disable",
        ] {
            assert_eq!(classify(url).unwrap(), Target::Postgres(url));
        }
        for (url, path) in [
            ("data/converge.db", "data/converge.db"),
            ("/var/lib/converge/c.db", "/var/lib/converge/c.db"),
            ("./odd:name.db", "./odd:name.db"),
            (":memory:", ":memory:"),
            ("sqlite::memory:", ":memory:"),
            ("sqlite:data/c.db", "data/c.db"),
            ("sqlite://data/c.db", "data/c.db"),
            ("sqlite:///abs/c.db", "/abs/c.db"),
        ] {
            assert_eq!(classify(url).unwrap(), Target::Sqlite(path), "{url}");
        }
    }

    #[test]
    fn a_sqlite_url_with_query_parameters_is_refused_not_taken_as_a_file_name() {
        for url in [
            "sqlite://data/c.db?mode=rwc",
            "sqlite:data/c.db?cache=shared&mode=rwc",
        ] {
            let msg = refused(url);
            assert!(msg.contains("not supported"), "{msg}");
            assert!(msg.contains("sqlite:data/c.db)"), "{msg}");
            assert!(!msg.contains('\n'), "{msg}");
        }
        // A plain path stays literal (issue 2): no URL parsing without a scheme.
        assert_eq!(
            classify("./x.db?mode=memory").unwrap(),
            Target::Sqlite("./x.db?mode=memory")
        );
    }

    #[test]
    fn classify_refuses_empty_and_unknown_or_malformed_schemes() {
        for url in ["", "   ", "sqlite:", "sqlite://"] {
            let msg = refused(url);
            assert!(!msg.contains('\n'), "{msg}");
        }
        assert!(refused("").contains("empty"));
        let msg = refused("postgres:/u:pw@127.0.0.1/db");
        assert!(msg.contains("postgres://"), "{msg}");
        assert!(!msg.contains("pw"), "password shown: {msg}");
        for url in [
            "localhost:5432/db",
            "mysql://u:pw@h/db",
            "http://h/db",
            "Postgres:x",
            "c+d.e-f:thing",
        ] {
            let msg = refused(url);
            assert!(msg.contains("unsupported database URL"), "{url}: {msg}");
        }
    }

    #[test]
    fn redact_hides_user_info_even_when_the_url_does_not_parse() {
        for (url, shown) in [
            (
                "postgres://u:SECRETPW@127.0.0.1:notaport/db",
                "postgres://***@127.0.0.1:notaport/db",
            ),
            ("postgres://u:SECRETPW@h/db", "postgres://***@h/db"),
            (
                "postgres://u:SEC@RET/PW@h:5432/db",
                "postgres://***@h:5432/db",
            ),
            ("postgres:/u:SECRETPW@h/db", "postgres:/***@h/db"),
            ("localhost:5432/db", "localhost:5432/db"),
            (
                "postgres://h/db?password=SECRETPW",
                "postgres://h/db?password=***",
            ),
            (
                "postgres://h/db?sslmode=disable&PASSWORD=SECRETPW&x=1",
                "postgres://h/db?sslmode=disable&PASSWORD=***&x=1",
            ),
            ("postgres://h:5432/db", "postgres://h:5432/db"),
            (
                "nats://natsuser:S3CRET@127.0.0.1:4222",
                "nats://***@127.0.0.1:4222",
            ),
            ("nats://TOKEN@127.0.0.1:4222", "nats://***@127.0.0.1:4222"),
            (
                "http://chan:PW@127.0.0.1:3100/charges",
                "http://***@127.0.0.1:3100/charges",
            ),
            ("data/converge.db", "data/converge.db"),
            ("", ""),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
    }
}

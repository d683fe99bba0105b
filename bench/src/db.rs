//! Throw-away databases for the chaos run and the benchmarks.

use anyhow::{Context, Result, bail};
use rand::Rng;

/// Which backend a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Backend {
    /// A SQLite file in the run's directory.
    Sqlite,
    /// A fresh database on the PostgreSQL server named by `--pg-url`.
    Postgres,
}

/// The admin URL of the PostgreSQL server: `explicit`, else `CONVERGE_TEST_PG_URL`, else a
/// `postgres://` `DATABASE_URL`.
pub fn pg_admin_url(explicit: Option<&str>) -> Option<String> {
    explicit
        .map(str::to_string)
        .or_else(|| std::env::var("CONVERGE_TEST_PG_URL").ok())
        .or_else(|| {
            std::env::var("DATABASE_URL")
                .ok()
                .filter(|u| u.starts_with("postgres"))
        })
}

/// Creates `<prefix>_<12 hex>` on the server `admin` names and returns its URL.
pub async fn create_pg_database(admin: &str, prefix: &str) -> Result<String> {
    if !prefix.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        bail!("database prefix {prefix:?} must be lowercase letters and _");
    }
    let name = format!("{prefix}_{}", hex::encode(rand::rng().random::<[u8; 6]>()));
    let pool = sqlx::PgPool::connect(admin).await.with_context(|| {
        format!(
            "cannot connect to PostgreSQL at {}",
            converge_server::store::redact(admin)
        )
    })?;
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&pool)
        .await
        .context("CREATE DATABASE")?;
    pool.close().await;
    let mut url = url::Url::parse(admin).context("the PostgreSQL URL does not parse")?;
    url.set_path(&name);
    Ok(url.to_string())
}

/// Drops the database `url` names (made by [`create_pg_database`]), through `admin`.
///
/// Never fails the run whose figures are already printed: a database left behind is
/// harmless (scripts/pg.sh drops leftovers), so a drop that still fails after three tries
/// is one `note:` line on stderr. The retries are for PostgreSQL 15's `WITH (FORCE)`, which
/// refuses outright when an autovacuum worker happens to be in the database and the role
/// lacks `pg_signal_backend` (the worker is gone a moment later).
pub async fn drop_pg_database(admin: &str, url: &str) -> Result<()> {
    let name = url::Url::parse(url)?
        .path()
        .trim_start_matches('/')
        .to_string();
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        bail!("refusing to drop {name:?}");
    }
    let mut last = None;
    for attempt in 0..3u64 {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_secs(attempt)).await;
        }
        match drop_once(admin, &name).await {
            Ok(()) => return Ok(()),
            Err(e) => last = Some(e),
        }
    }
    if let Some(e) = last {
        eprintln!("note: database {name} left behind: {e:#}");
    }
    Ok(())
}

async fn drop_once(admin: &str, name: &str) -> Result<()> {
    let pool = sqlx::PgPool::connect(admin).await?;
    let dropped = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        .execute(&pool)
        .await;
    pool.close().await;
    dropped?;
    Ok(())
}

/// A throw-away database for one run: `converge.db` in `dir` for SQLite, or a fresh
/// `<prefix>_<hex>` database on the PostgreSQL server `pg_url` (else `CONVERGE_TEST_PG_URL`)
/// names. Returns its URL and, for PostgreSQL, the admin URL [`drop_pg_database`] needs.
pub async fn scratch(
    backend: Backend,
    pg_url: Option<&str>,
    dir: &std::path::Path,
    prefix: &str,
) -> Result<(String, Option<String>)> {
    match backend {
        Backend::Sqlite => Ok((dir.join("converge.db").to_string_lossy().into_owned(), None)),
        Backend::Postgres => {
            let admin = pg_admin_url(pg_url)
                .context("--db postgres needs --pg-url or CONVERGE_TEST_PG_URL")?;
            Ok((create_pg_database(&admin, prefix).await?, Some(admin)))
        }
    }
}

/// Runs `sql`, whose columns are all integers, on the database `url` names (a `postgres://`
/// URL, else a SQLite file opened read-only); returns the rows. Errors: the database cannot
/// be opened, the query fails, or a cell is not an integer (NULL included: say
/// `COALESCE(..., 0)` where none is meant), naming the query.
pub async fn int_rows(url: &str, sql: &str) -> Result<Vec<Vec<i64>>> {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await?;
        let rows = sqlx::query(sql).fetch_all(&pool).await;
        pool.close().await;
        ints(&rows.with_context(|| sql.to_string())?, sql)
    } else {
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(url)
            .read_only(true);
        let pool = sqlx::SqlitePool::connect_with(opts).await?;
        let rows = sqlx::query(sql).fetch_all(&pool).await;
        pool.close().await;
        ints(&rows.with_context(|| sql.to_string())?, sql)
    }
}

/// Every cell of `rows` as an integer, or an error naming the cell and the query.
fn ints<R: sqlx::Row>(rows: &[R], sql: &str) -> Result<Vec<Vec<i64>>>
where
    usize: sqlx::ColumnIndex<R>,
    for<'r> i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
{
    rows.iter()
        .enumerate()
        .map(|(n, r)| {
            (0..r.len())
                .map(|i| {
                    r.try_get::<i64, _>(i)
                        .with_context(|| format!("row {n}, column {i} of {sql} is not an integer"))
                })
                .collect()
        })
        .collect()
}

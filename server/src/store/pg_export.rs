//! The PostgreSQL audit export's read (issue 15, "Exports and drains"; BENCHMARKS.md
//! "Profiles and fixes").
//!
//! A profile of `converge audit export` at 1 M records (`perf record -a`, Intel Xeon host)
//! put the reading task at a third of both CPUs, ahead of PostgreSQL itself, and a quarter of
//! the task in sqlx's `FromRow` by name: each of the twelve columns of each row found by
//! comparing names (`ColumnIndex for &str`), and its type checked against the Rust type
//! (`Type::compatible`, a `PgTypeInfo` built and dropped), a million times over. Here the
//! columns are found by name once per page, the types checked on the page's first row, and the
//! other rows decoded by position: the same statement gives every row of a page the same
//! columns. The rows are decoded as they arrive, while the server still sends the rest.
//!
//! The SQL text is the one [`AuditPageQuery`] gives both backends.

use futures_util::TryStreamExt;
use sqlx::postgres::PgRow;
use sqlx::{Column, PgPool, Postgres, Row};

use super::{AUDIT_COLUMNS, AuditArg, AuditPageQuery, AuditRecord, StoreError};

/// Reads one page. Errors: the pool's and the server's, as every read's; `Db` when a column is
/// missing or not of the record's type (a schema that is not converge's).
pub(super) async fn page(
    pool: &PgPool,
    q: &AuditPageQuery,
) -> Result<Vec<AuditRecord>, StoreError> {
    let mut query = sqlx::query(&q.sql);
    for a in &q.args {
        query = match a {
            AuditArg::Int(v) => query.bind(*v),
            AuditArg::Text(v) => query.bind(v.as_str()),
        };
    }
    let mut rows = query.fetch(pool);
    let mut out = Vec::with_capacity(q.capacity());
    let Some(first) = rows.try_next().await? else {
        return Ok(out);
    };
    let at = positions(&first)?;
    // The first row through the checked reads: a column of another type is an error here, so
    // the unchecked reads below only ever decode the types these accepted.
    out.push(record(&first, &at, Read::Checked)?);
    while let Some(row) = rows.try_next().await? {
        out.push(record(&row, &at, Read::Unchecked)?);
    }
    Ok(out)
}

/// Each of [`AUDIT_COLUMNS`]' position in the statement's row.
fn positions(row: &PgRow) -> Result<[usize; 12], StoreError> {
    let mut at = [0; 12];
    for (slot, name) in at.iter_mut().zip(AUDIT_COLUMNS) {
        *slot = row
            .columns()
            .iter()
            .position(|c| c.name() == name)
            .ok_or_else(|| StoreError::Db(sqlx::Error::ColumnNotFound(name.into())))?;
    }
    Ok(at)
}

/// How a row's values are decoded: the first row of a page with its types checked against
/// the record's, the others without.
#[derive(Debug, Clone, Copy)]
enum Read {
    Checked,
    Unchecked,
}

fn get<'r, T>(r: &'r PgRow, i: usize, how: Read) -> Result<T, sqlx::Error>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    match how {
        Read::Checked => r.try_get(i),
        Read::Unchecked => r.try_get_unchecked(i),
    }
}

fn record(r: &PgRow, at: &[usize; 12], how: Read) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        seq: get(r, at[0], how)?,
        at: get(r, at[1], how)?,
        actor: get(r, at[2], how)?,
        roles: get(r, at[3], how)?,
        action: get(r, at[4], how)?,
        target: get(r, at[5], how)?,
        reason: get(r, at[6], how)?,
        before_state: get(r, at[7], how)?,
        after_state: get(r, at[8], how)?,
        request_meta: get(r, at[9], how)?,
        prev_hash: get(r, at[10], how)?,
        hash: get(r, at[11], how)?,
    })
}

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
use sqlx::{Column, PgPool, Row};

use super::{AUDIT_COLUMNS, AuditPageQuery, AuditRecord, StoreError};

/// Reads one page. Errors: the pool's and the server's, as every read's; `Db` when a column is
/// missing or not of the record's type (a schema that is not converge's).
pub(super) async fn page(
    pool: &PgPool,
    q: &AuditPageQuery,
) -> Result<Vec<AuditRecord>, StoreError> {
    let mut query = sqlx::query(&q.sql).bind(q.after_seq);
    for v in &q.ints {
        query = query.bind(*v);
    }
    for v in &q.texts {
        query = query.bind(v.as_str());
    }
    let mut rows = query.bind(q.limit).fetch(pool);
    let mut out = Vec::with_capacity(usize::try_from(q.limit.clamp(0, 10_000)).unwrap_or(0));
    let Some(first) = rows.try_next().await? else {
        return Ok(out);
    };
    let at = positions(&first)?;
    // The first row through the checked reads: a column of another type is an error here, so
    // the unchecked reads below only ever decode the types these accepted.
    out.push(record(
        &first,
        &at,
        |r, i| r.try_get::<String, _>(i),
        |r, i| r.try_get::<i64, _>(i),
    )?);
    while let Some(row) = rows.try_next().await? {
        out.push(record(
            &row,
            &at,
            |r, i| r.try_get_unchecked::<String, _>(i),
            |r, i| r.try_get_unchecked::<i64, _>(i),
        )?);
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

fn record(
    r: &PgRow,
    at: &[usize; 12],
    text: impl Fn(&PgRow, usize) -> Result<String, sqlx::Error>,
    int: impl Fn(&PgRow, usize) -> Result<i64, sqlx::Error>,
) -> Result<AuditRecord, StoreError> {
    Ok(AuditRecord {
        seq: int(r, at[0])?,
        at: int(r, at[1])?,
        actor: text(r, at[2])?,
        roles: text(r, at[3])?,
        action: text(r, at[4])?,
        target: text(r, at[5])?,
        reason: text(r, at[6])?,
        before_state: text(r, at[7])?,
        after_state: text(r, at[8])?,
        request_meta: text(r, at[9])?,
        prev_hash: text(r, at[10])?,
        hash: text(r, at[11])?,
    })
}

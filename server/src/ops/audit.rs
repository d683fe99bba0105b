//! The audit log's console side (DESIGN.md "Ops console": export as CSV and NDJSON, filtered
//! by time/actor/action, streamed with bounded memory, safe to open in a spreadsheet, itself
//! audited; verify reports the first broken record).
//!
//! Memory stays flat because rows are read and written one page at a time. NDJSON is the
//! exact machine form (every field as stored, so a verifier can recompute the chain); CSV is
//! for people and spreadsheets, so cells a spreadsheet would run as a formula are prefixed
//! with `'` (OWASP "CSV Injection").

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::auth::Principal;
use super::handlers::ClientAddr;
use crate::api::AppState;
use crate::domain::audit::{AuditRecord, Break, ChainVerifier};
use crate::domain::clock::rfc3339;
use crate::domain::roles::{Permission, format_roles};
use crate::error::{ApiError, ApiQuery};
use crate::service::actions::Actor;
use crate::store::{AuditFilter, Store, StoreError};

/// Rows read per page.
const PAGE: i64 = 1000;

/// The CSV header.
pub const CSV_HEADER: [&str; 12] = [
    "seq",
    "at",
    "actor",
    "roles",
    "action",
    "target",
    "reason",
    "before",
    "after",
    "request_meta",
    "prev_hash",
    "hash",
];

/// The actor of a console request.
pub fn actor(p: &Principal, addr: &str) -> Actor {
    Actor {
        username: p.username.clone(),
        roles: format_roles(&p.roles),
        meta: json!({"addr": addr}).to_string(),
    }
}

/// A cell a spreadsheet would evaluate (`=`, `+`, `-`, `@`, tab, CR first) gets a leading `'`;
/// plain numbers (`-100`, `12.5`) stay numeric.
pub fn neutralise(cell: &str) -> std::borrow::Cow<'_, str> {
    let risky = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if risky && cell.parse::<f64>().is_err() {
        format!("'{cell}").into()
    } else {
        cell.into()
    }
}

/// Output format of an export.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Comma-separated, spreadsheet-safe.
    Csv,
    /// One JSON object per line, exact.
    Ndjson,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "csv" => Ok(Format::Csv),
            "ndjson" => Ok(Format::Ndjson),
            other => Err(format!("format must be csv or ndjson, not {other:?}")),
        }
    }
}

/// The bytes of one page of rows (and the header, first).
pub fn encode(format: Format, rows: &[AuditRecord], header: bool) -> Vec<u8> {
    match format {
        Format::Ndjson => {
            let mut out = Vec::new();
            for r in rows {
                if let Ok(line) = serde_json::to_vec(r) {
                    out.extend(line);
                    out.push(b'\n');
                }
            }
            out
        }
        Format::Csv => {
            let mut w = csv::Writer::from_writer(Vec::new());
            if header {
                let _ = w.write_record(CSV_HEADER);
            }
            for r in rows {
                let seq = r.seq.to_string();
                let at = rfc3339(r.at);
                let cells = [
                    seq.as_str(),
                    at.as_str(),
                    &r.actor,
                    &r.roles,
                    &r.action,
                    &r.target,
                    &r.reason,
                    &r.before_state,
                    &r.after_state,
                    &r.request_meta,
                    &r.prev_hash,
                    &r.hash,
                ];
                let _ = w.write_record(
                    cells
                        .iter()
                        .map(|c| neutralise(c))
                        .collect::<Vec<_>>()
                        .iter()
                        .map(|c| c.as_ref()),
                );
            }
            w.into_inner().unwrap_or_default()
        }
    }
}

/// Streams the matching records as chunks of at most one page each.
pub fn stream(
    store: std::sync::Arc<dyn Store>,
    filter: AuditFilter,
    format: Format,
) -> impl futures_util::Stream<Item = Result<Bytes, StoreError>> + Send {
    futures_util::stream::try_unfold((0_i64, true, false), move |(after, first, done)| {
        let store = store.clone();
        let filter = filter.clone();
        async move {
            if done {
                return Ok(None);
            }
            let rows = store.audit_page(after, PAGE, &filter).await?;
            let last = rows.last().map_or(after, |r| r.seq);
            let finished = (rows.len() as i64) < PAGE;
            let chunk = Bytes::from(encode(format, &rows, first));
            Ok(Some((chunk, (last, false, finished))))
        }
    })
}

/// Re-computes the whole chain; returns (records checked, head, first break).
pub async fn verify(store: &dyn Store) -> Result<(i64, ChainVerifier, Option<Break>), StoreError> {
    let mut v = ChainVerifier::default();
    let mut after = 0;
    let mut n = 0;
    loop {
        let rows = store
            .audit_page(after, PAGE, &AuditFilter::default())
            .await?;
        for r in &rows {
            n += 1;
            if let Err(b) = v.push(r) {
                return Ok((n, v, Some(b)));
            }
        }
        match rows.last() {
            Some(r) if rows.len() as i64 == PAGE => after = r.seq,
            _ => return Ok((n, v, None)),
        }
    }
}

/// Query of the export endpoint.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `csv` (default; spreadsheet-safe) or `ndjson` (exact, re-verifiable).
    #[param(schema_with = crate::api::openapi::export_format_schema)]
    format: Option<String>,
    /// Records at or after this UTC time (RFC 3339 or YYYY-MM-DD).
    #[param(schema_with = crate::api::openapi::time_filter_schema)]
    from: Option<String>,
    /// Records before this UTC time.
    #[param(schema_with = crate::api::openapi::time_filter_schema)]
    to: Option<String>,
    /// Only this actor.
    actor: Option<String>,
    /// Only this action (e.g. `action_approved`).
    action: Option<String>,
}

/// The answer of `GET /ops/v1/audit/verify`.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct VerifyView {
    /// Whether the whole chain verifies.
    pub ok: bool,
    /// Records checked.
    pub records: i64,
    /// The last verified record.
    pub head: ChainHead,
    /// The first record that does not verify, if any.
    pub first_broken: Option<crate::domain::audit::Break>,
}

/// Sequence number and hash of a chain position.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ChainHead {
    /// Sequence number (0 for an empty log).
    pub seq: i64,
    /// Its SHA-256 hash (hex).
    pub hash: String,
}

fn time(field: &str, v: &Option<String>) -> Result<Option<i64>, ApiError> {
    v.as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|v| super::handlers::parse_time(field, v))
        .transpose()
}

/// `GET /ops/v1/audit/export`: auditors; the export is audited before it starts. The chain
/// head at export time is in the `Converge-Audit-Head: <seq> <hash>` header, so a later
/// verify can prove the export was complete.
#[utoipa::path(
    get,
    path = "/audit/export",
    tag = "ops",
    operation_id = "ops_audit_export",
    summary = "Export the audit log",
    description = "Streams the records as CSV or NDJSON; the export is itself audited first. `Converge-Audit-Head: <seq> <hash>` names the chain head at export time.",
    security(("console_session" = [])),
    params(ExportQuery),
    responses(
        (status = 200, description = "The records", headers(("Converge-Audit-Head" = String, description = "`<seq> <hash>` of the chain head at export time")), content((String = "text/csv"), (String = "application/x-ndjson"))),
        (status = 400, description = "Unknown format or a malformed time", body = crate::error::ErrorBody, example = json!({"error": {"code": "invalid_format", "message": "format must be csv or ndjson"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = crate::error::ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = crate::error::ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = crate::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn export(
    State(st): State<AppState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiQuery(q): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    p.require(Permission::Audit)?;
    let format: Format = q
        .format
        .as_deref()
        .unwrap_or("csv")
        .parse()
        .map_err(|m| ApiError::bad_request("invalid_format", m))?;
    let clean = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let filter = AuditFilter {
        from: time("from", &q.from)?,
        to: time("to", &q.to)?,
        actor: clean(&q.actor),
        action: clean(&q.action),
    };
    let now = st.core.clock.now_ms();
    let what = json!({"format": q.format, "from": q.from, "to": q.to, "actor": filter.actor, "action": filter.action});
    let record = actor(&p, &addr).entry(
        now,
        "audit_export",
        "audit",
        "",
        String::new(),
        what.to_string(),
    );
    let head = st.core.store.append_audit(&record).await?;
    let body = Body::from_stream(stream(st.core.store.clone(), filter, format));
    let mut resp = body.into_response();
    let (ctype, ext) = match format {
        Format::Csv => ("text/csv; charset=utf-8", "csv"),
        Format::Ndjson => ("application/x-ndjson", "ndjson"),
    };
    let h = resp.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    if let Ok(v) = HeaderValue::from_str(&format!(
        "attachment; filename=\"converge-audit-{}.{ext}\"",
        head.seq
    )) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    if let Ok(v) = HeaderValue::from_str(&format!("{} {}", head.seq, head.hash)) {
        h.insert("converge-audit-head", v);
    }
    Ok(resp)
}

/// `GET /ops/v1/audit/verify`: auditors.
#[utoipa::path(
    get,
    path = "/audit/verify",
    tag = "ops",
    operation_id = "ops_audit_verify",
    summary = "Verify the audit chain",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "The result; `ok` is false and `first_broken` names the record when the chain breaks", body = VerifyView),
        (status = 401, description = "Not signed in (no or expired session)", body = crate::error::ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this, or (state changes) the request is cross-site", body = crate::error::ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = crate::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn verify_handler(
    State(st): State<AppState>,
    p: Principal,
) -> Result<Json<VerifyView>, ApiError> {
    p.require(Permission::Audit)?;
    let (records, v, broken) = verify(st.core.store.as_ref()).await?;
    Ok(Json(VerifyView {
        ok: broken.is_none(),
        records,
        head: ChainHead {
            seq: v.seq,
            hash: v.hash,
        },
        first_broken: broken,
    }))
}

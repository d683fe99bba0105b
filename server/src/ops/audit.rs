//! The audit log's console side (DESIGN.md "Ops console": export filtered by time/actor/action,
//! itself audited; verify reports the first broken record): thin HTTP adapters over
//! `service::audit_export` (encoding, streaming, checkpoints) and `service::audit_chain`.

use axum::Json;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;
use serde::Deserialize;
use serde_json::json;

use super::OpsState;
use super::auth::Principal;
use super::extract::ClientAddr;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiQuery};
use crate::service::actor::Actor;
use crate::service::audit_export::{Format, stream_with_checkpoint};
use crate::store::AuditFilter;

/// The actor of a console request.
pub fn actor(p: &Principal, addr: &str) -> Actor {
    p.actor(addr)
}

/// Query of the export endpoint.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ExportQuery {
    /// `csv` (default; spreadsheet-safe) or `ndjson` (exact, re-verifiable).
    #[param(schema_with = crate::schema::export_format_schema)]
    format: Option<String>,
    /// Records at or after this UTC time (RFC 3339 or YYYY-MM-DD).
    #[param(schema_with = crate::schema::time_filter_schema)]
    from: Option<String>,
    /// Records before this UTC time.
    #[param(schema_with = crate::schema::time_filter_schema)]
    to: Option<String>,
    /// Only this actor.
    actor: Option<String>,
    /// Only this action (e.g. `action_approved`).
    action: Option<String>,
}

pub use converge_wire::audit::{AuditVerify as VerifyView, ChainHead};

/// The audit chain re-computed from its first record against the signed checkpoints (their
/// signatures checked when the server holds the signing key), as both
/// `GET /ops/v1/audit/verify` and the console's audit page run it. Auditors only.
pub async fn run_verify(st: &OpsState, p: &Principal) -> Result<VerifyView, ApiError> {
    p.require(Permission::Audit)?;
    let v = st.core.audit_verdict().await?;
    Ok(VerifyView {
        ok: v.broken.is_none(),
        records: v.records,
        head: ChainHead {
            seq: v.head.seq,
            hash: v.head.hash,
        },
        first_broken: v.broken,
        checkpoints: v.checkpoints as i64,
        latest_checkpoint: v.latest.map(Into::into),
        signatures_checked: v.signatures_checked,
    })
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
        (status = 403, description = "The user's roles do not allow this (`forbidden`), or the request is cross-site (`csrf_rejected`: an `Origin` other than the console's, or a `Sec-Fetch-Site` other than `same-origin`/`none`; the export writes an audit record, so it is guarded as a write)", body = crate::error::ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = crate::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn export(
    State(st): State<OpsState>,
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
        .map_err(|m| ApiError::bad_request(ErrorCode::InvalidFormat, m))?;
    let clean = |v: &Option<String>| {
        v.as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let filter = AuditFilter {
        from: crate::service::queries::time_filter("from", &q.from)?,
        to: crate::service::queries::time_filter("to", &q.to)?,
        actor: clean(&q.actor),
        action: clean(&q.action),
    };
    let what = json!({"format": q.format, "from": q.from, "to": q.to, "actor": filter.actor, "action": filter.action});
    let (head, checkpoint) = st.core.begin_export(&actor(&p, &addr), &what).await?;
    let body = Body::from_stream(stream_with_checkpoint(
        st.core.store.clone(),
        filter,
        format,
        checkpoint.clone(),
    ));
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
    if let Some(c) = &checkpoint
        && let Ok(v) = HeaderValue::from_str(&format!(
            "{} {} {} {} {}",
            c.seq, c.head_hash, c.at, c.key_id, c.signature
        ))
    {
        h.insert("converge-audit-checkpoint", v);
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
    State(st): State<OpsState>,
    p: Principal,
) -> Result<Json<VerifyView>, ApiError> {
    Ok(Json(run_verify(&st, &p).await?))
}

pub use converge_wire::AuditList;
/// Query of `GET /ops/v1/audit`.
pub use converge_wire::AuditListQuery;

/// `GET /ops/v1/audit` (auditors): the audit viewer's page of records, newest first.
#[utoipa::path(
    get,
    path = "/audit",
    tag = "ops",
    operation_id = "ops_audit_list",
    summary = "Audit records, filtered by actor, action, payment and time",
    security(("console_session" = [])),
    params(AuditListQuery),
    responses(
        (status = 200, description = "One page of records, newest first, with the cursors of the pages beside it", body = AuditList),
        (status = 400, description = "A malformed time or a negative cursor", body = crate::error::ErrorBody, example = json!({"error": {"code": "invalid_time", "message": "from must be RFC 3339 or YYYY-MM-DD"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = crate::error::ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = crate::error::ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = crate::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn list(
    State(st): State<OpsState>,
    p: Principal,
    ApiQuery(q): ApiQuery<AuditListQuery>,
) -> Result<Json<AuditList>, ApiError> {
    p.require(Permission::Audit)?;
    let page = st.core.audit_list(&q).await?;
    Ok(Json(page))
}

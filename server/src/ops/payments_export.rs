//! `GET /ops/v1/payments/export`: the payments a console search selects, as CSV (issue 17),
//! a thin adapter over [`Core::export_payments`](crate::service::Core::export_payments), which
//! checks the filters (a malformed one is a 400 before anything is written), audits the export
//! and streams it formula-safe.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::OpsState;
use super::audit::actor;
use super::auth::Principal;
use super::extract::ClientAddr;
use crate::domain::clock::rfc3339;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiQuery};
use crate::service::queries::PaymentSearch;

#[utoipa::path(
    get,
    path = "/payments/export",
    tag = "ops",
    operation_id = "ops_export_payments",
    summary = "Export the payments a search selects, as CSV",
    description = "The search's filters (`after` and `limit` are ignored: every page is exported, newest first). Cells a spreadsheet would evaluate are prefixed with `'`. The export is audited (`payments_export`) before it starts.",
    security(("console_session" = [])),
    params(PaymentSearch),
    responses(
        (status = 200, description = "The payments", content((String = "text/csv"))),
        (status = 400, description = "A filter is malformed (status, failure reason, time, cursor)", body = crate::error::ErrorBody, example = json!({"error": {"code": "invalid_time", "message": "from must be RFC 3339 or YYYY-MM-DD"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = crate::error::ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this (`forbidden`), or the request is cross-site (`csrf_rejected`: an `Origin` other than the console's, or a `Sec-Fetch-Site` other than `same-origin`/`none`; the export writes an audit record, so it is guarded as a write)", body = crate::error::ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 503, description = "Database unavailable", body = crate::error::ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn export(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiQuery(q): ApiQuery<PaymentSearch>,
) -> Result<Response, ApiError> {
    p.require(Permission::View)?;
    let export = st.core.export_payments(&actor(&p, &addr), &q).await?;
    let now = export.at;
    let body = Body::from_stream(export.body);
    let mut resp = body.into_response();
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/csv; charset=utf-8"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!(
        "attachment; filename=\"converge-payments-{}.csv\"",
        rfc3339(now).replace(':', "")
    )) {
        h.insert(header::CONTENT_DISPOSITION, v);
    }
    Ok(resp)
}

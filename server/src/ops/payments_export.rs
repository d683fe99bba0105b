//! `GET /ops/v1/payments/export`: the payments a console search selects, as CSV (issue 17:
//! "CSV export of exactly what the filters select, streamed, formula-safe, audited").
//!
//! The filters are the search's own ([`select_payments`]), checked before anything is written,
//! so a malformed one is a 400 and the export selects exactly what the page lists (all pages
//! of it). Rows are read 500 at a time by the same keyset paging, so memory stays flat however
//! many match. Every cell goes through [`neutralise`] (OWASP "CSV Injection"): merchant order
//! ids, descriptions and errors come from merchants and the channel. The export is audited
//! (`payments_export`, with its filters) before the first byte is sent.

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::OpsState;
use super::audit::actor;
use super::auth::Principal;
use super::extract::ClientAddr;
use crate::domain::clock::rfc3339;
use crate::domain::money;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiQuery};
use crate::service::audit_export::neutralise;
use crate::service::queries::{PaymentSearch, Selection, select_payments};
use crate::store::{Payment, PaymentFilter, Store, StoreError};

/// Rows read per page while streaming.
const PAGE: i64 = 500;

/// The CSV columns, in order. Amounts twice: integer minor units (exact, for machines) and
/// major units (for people), so a 100x misread cannot come from the export.
pub const CSV_HEADER: [&str; 14] = [
    "id",
    "merchant",
    "merchant_order_id",
    "status",
    "amount_minor",
    "amount",
    "currency",
    "refunded_minor",
    "description",
    "channel_key",
    "submit_attempts",
    "last_error",
    "created_at_utc",
    "updated_at_utc",
];

/// The CSV bytes of `rows` (and the header, first); `merchant` names a merchant id.
pub fn encode(rows: &[Payment], merchant: &dyn Fn(i64) -> String, header: bool) -> Vec<u8> {
    let mut w = csv::Writer::from_writer(Vec::new());
    if header {
        let _ = w.write_record(CSV_HEADER);
    }
    for p in rows {
        let cells = [
            p.id.clone(),
            merchant(p.merchant_id),
            p.merchant_order_id.clone(),
            p.status.as_str().to_string(),
            p.amount.to_string(),
            money::major(p.amount, &p.currency).unwrap_or_default(),
            p.currency.clone(),
            p.refunded_amount.to_string(),
            p.description.clone(),
            p.channel_key.clone(),
            p.submit_attempts.to_string(),
            p.last_error.clone().unwrap_or_default(),
            rfc3339(p.created_at),
            rfc3339(p.updated_at),
        ];
        let _ = w.write_record(cells.iter().map(|c| neutralise(c).into_owned()));
    }
    w.into_inner().unwrap_or_default()
}

/// Streams every payment `filter` selects (newest first, all pages) as CSV chunks, reading
/// `page` rows at a time (the handler uses 500).
pub fn stream(
    store: std::sync::Arc<dyn Store>,
    mut filter: PaymentFilter,
    names: std::collections::HashMap<i64, String>,
    page: i64,
) -> impl futures_util::Stream<Item = Result<Bytes, StoreError>> + Send {
    filter.limit = page;
    let names = std::sync::Arc::new(names);
    futures_util::stream::try_unfold((filter, true, false), move |(mut filter, first, done)| {
        let store = store.clone();
        let names = names.clone();
        async move {
            if done {
                return Ok(None);
            }
            let rows = store.search_payments(&filter).await?;
            let finished = (rows.len() as i64) < page;
            filter.after = rows.last().map(|p| (p.created_at, p.id.clone()));
            let name = |id: i64| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
            let chunk = Bytes::from(encode(&rows, &name, first));
            Ok(Some((chunk, (filter, false, finished))))
        }
    })
}

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
        (status = 400, description = "A filter is malformed (status, time, cursor)", body = crate::error::ErrorBody, example = json!({"error": {"code": "invalid_time", "message": "from must be RFC 3339 or YYYY-MM-DD"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = crate::error::ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = crate::error::ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
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
    let selection = select_payments(st.core.store.as_ref(), &q).await?;
    let store = st.core.store.clone();
    let names: std::collections::HashMap<i64, String> = store
        .merchants()
        .await?
        .into_iter()
        .map(|m| (m.id, m.name))
        .collect();
    let now = st.core.clock.now_ms();
    let what = json!({
        "id": q.id, "status": q.status, "merchant": q.merchant, "order": q.order,
        "from": q.from, "to": q.to,
    });
    let record = actor(&p, &addr).entry(
        now,
        "payments_export",
        "payments",
        "",
        String::new(),
        what.to_string(),
    );
    store.append_audit(&record).await?;
    let body = match selection {
        Selection::Filter(f) => Body::from_stream(stream(store, f, names, PAGE)),
        Selection::One(one) => {
            let rows: Vec<Payment> = one.into_iter().collect();
            let name = |id: i64| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
            Body::from(encode(&rows, &name, true))
        }
        Selection::Nothing => Body::from(encode(&[], &|id| id.to_string(), true)),
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::state::PaymentStatus;

    fn payment(order: &str, amount: i64) -> Payment {
        Payment {
            id: "pay_1".into(),
            merchant_id: 7,
            merchant_order_id: order.into(),
            amount,
            currency: "CNY".into(),
            description: "=HYPERLINK(\"http://x\")".into(),
            params_hash: String::new(),
            status: PaymentStatus::Success,
            version: 1,
            channel_key: "ck".into(),
            submit_attempts: 1,
            refunded_amount: 0,
            last_error: None,
            created_at: 0,
            updated_at: 1_000,
            reversal_id: None,
        }
    }

    #[test]
    fn export_cells_are_formula_safe_and_amounts_are_given_both_ways() {
        let out = encode(&[payment("-2+3", 18_857)], &|_| "@shop".to_string(), true);
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        assert_eq!(lines.next(), Some(CSV_HEADER.join(",").as_str()));
        let row = lines.next().unwrap();
        assert!(
            row.starts_with("pay_1,'@shop,'-2+3,SUCCESS,18857,188.57,CNY,0,"),
            "{row}"
        );
        assert!(row.contains("'=HYPERLINK"), "{row}");
        assert!(
            row.ends_with("1970-01-01T00:00:00.000Z,1970-01-01T00:00:01.000Z"),
            "{row}"
        );
    }
}

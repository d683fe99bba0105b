//! The payments a console search selects, as CSV (issue 17: "CSV export of exactly what the
//! filters select, streamed, formula-safe, audited").
//!
//! The filters are the search's own ([`Core::select_payments`]), checked before anything is written,
//! so a malformed one is refused and the export selects exactly what the page lists (all pages
//! of it). Rows are read 500 at a time by the same keyset paging, so memory stays flat however
//! many match. Every cell goes through [`neutralise`] (OWASP "CSV Injection"): merchant order
//! ids, descriptions and errors come from merchants and the channel. The export is audited
//! (`payments_export`, with its filters) before the first byte is produced.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use serde_json::json;

use super::Core;
use super::actor::Actor;
use super::audit_export::neutralise;
use super::queries::{FilterError, PaymentSearch, Selection};
use crate::domain::clock::rfc3339;
use crate::domain::money;
use crate::store::{Payment, PaymentFilter, Store, StoreError};

/// Rows read per page while streaming.
pub const PAGE: i64 = 500;

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
/// `page` rows at a time ([`Core::export_payments`] uses [`PAGE`]).
pub fn stream(
    store: Arc<dyn Store>,
    mut filter: PaymentFilter,
    names: HashMap<i64, String>,
    page: i64,
) -> impl futures_util::Stream<Item = Result<Bytes, StoreError>> + Send {
    filter.limit = page;
    // Every page from the top: a `before` cursor would page upwards.
    filter.before = None;
    let names = Arc::new(names);
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

/// A started export: its time (epoch ms UTC, for the file name) and its CSV bytes, header
/// first.
pub struct PaymentsExport {
    /// When the export was audited, epoch ms UTC.
    pub at: i64,
    /// The CSV, in chunks of at most [`PAGE`] rows; a chunk's error is a failed read.
    pub body: Pin<Box<dyn futures_util::Stream<Item = Result<Bytes, StoreError>> + Send>>,
}

impl Core {
    /// Exports the payments `q` selects (its `after` and `limit` ignored: every page, newest
    /// first) after auditing the export (`payments_export` on target `payments` by `who`,
    /// the filters as JSON). Errors: a malformed filter ([`FilterError`]) before anything is
    /// written; the store's.
    pub async fn export_payments(
        &self,
        who: &Actor,
        q: &PaymentSearch,
    ) -> Result<PaymentsExport, FilterError> {
        let selection = self.select_payments(q).await?;
        let names = self.merchant_names().await?;
        let at = self.clock.now_ms();
        let what = json!({
            "id": q.id, "status": q.status, "merchant": q.merchant, "order": q.order,
            "from": q.from, "to": q.to, "in_state_for": q.in_state_for,
        });
        let record = who.entry(
            at,
            "payments_export",
            "payments",
            "",
            String::new(),
            what.to_string(),
        );
        self.store.append_audit(&record).await?;
        let once = |rows: &[Payment]| {
            let name = |id: i64| names.get(&id).cloned().unwrap_or_else(|| id.to_string());
            let chunk: Result<Bytes, StoreError> = Ok(Bytes::from(encode(rows, &name, true)));
            futures_util::stream::iter([chunk])
        };
        let body: PaymentsExport = match selection {
            Selection::Filter(f) => PaymentsExport {
                at,
                body: Box::pin(stream(self.store.clone(), f, names, PAGE)),
            },
            Selection::One(one) => {
                let rows: Vec<Payment> = one.into_iter().collect();
                PaymentsExport {
                    at,
                    body: Box::pin(once(&rows)),
                }
            }
            Selection::Nothing => PaymentsExport {
                at,
                body: Box::pin(once(&[])),
            },
        };
        Ok(body)
    }
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
            connector: "sandbox".into(),
            capture_mode: Default::default(),
            hold: None,
            fee: 0,
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

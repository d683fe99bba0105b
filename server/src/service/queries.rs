//! The console's read queries with filters a person types: the payment search (the search
//! page, `GET /ops/v1/payments` and the CSV export select alike), the audit viewer's list and
//! the webhook delivery search (DESIGN.md "Ops console"). The filters are checked here, once, for every adapter: an
//! unknown status, a malformed time or cursor is a [`FilterError`], which the HTTP layer
//! answers with 400 and a stable code. No HTTP here.

use super::Core;
use crate::domain::state::PaymentStatus;
use crate::domain::webhooks::{DeliveryStatus, EventType};
use crate::store::{
    AuditListFilter, DeliveryFilter, DeliveryRow, Payment, PaymentFilter, StoreError,
};

pub use converge_wire::{AuditList, AuditListQuery, PaymentPage, PaymentSearch};

/// A filter the query cannot use.
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// A time filter that is neither RFC 3339 nor `YYYY-MM-DD` (UTC): `invalid_time`.
    #[error("{field} must be RFC 3339 or YYYY-MM-DD")]
    InvalidTime {
        /// The filter's name (`from`, `to`, `since`).
        field: &'static str,
    },
    /// A status name that is not one of the lifecycle's: `invalid_status` (the message).
    #[error("{0}")]
    InvalidStatus(String),
    /// A failure reason that is not a [`FailureReason`](converge_wire::FailureReason) key:
    /// `invalid_reason` (the message).
    #[error("{0}")]
    InvalidReason(String),
    /// An event type that is not a webhook event type: `invalid_event_type` (the message).
    #[error("{0}")]
    InvalidEventType(String),
    /// A time in state that is not a whole number of minutes from 1 to a year:
    /// `invalid_query` (the message).
    #[error("{0}")]
    InvalidDuration(String),
    /// A paging cursor that no page gave: `invalid_cursor`.
    #[error("{0}")]
    InvalidCursor(&'static str),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The longest time in state a payment search filters by, in minutes: a year.
pub const MAX_IN_STATE_MINUTES: i64 = 525_600;

/// A payment search cursor, `<created_at ms>_<id>`, as `(created_at, id)`; None when it is
/// not one.
fn payment_cursor(c: &str) -> Option<(i64, String)> {
    c.split_once('_')
        .and_then(|(at, id)| at.parse::<i64>().ok().map(|at| (at, id.to_string())))
}

/// A console time filter, RFC 3339 or `YYYY-MM-DD` (UTC), as epoch ms UTC. Errors:
/// [`FilterError::InvalidTime`] naming `field`.
pub fn parse_time(field: &'static str, v: &str) -> Result<i64, FilterError> {
    crate::domain::clock::parse_utc(v).map_err(|_| FilterError::InvalidTime { field })
}

/// The value of a filter, trimmed, or None when it is absent or blank (every console filter
/// reads a blank field as "any").
pub fn blank(o: &Option<String>) -> Option<&str> {
    o.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

/// An optional time filter as epoch ms UTC: None when absent or blank. Errors: as
/// [`parse_time`].
pub fn time_filter(field: &'static str, v: &Option<String>) -> Result<Option<i64>, FilterError> {
    blank(v).map(|v| parse_time(field, v)).transpose()
}

/// What a console payment search selects, its filters checked. Shared by the search page and
/// the CSV export, so both select alike.
#[derive(Debug, Clone)]
pub enum Selection {
    /// An exact id: that payment, or none.
    One(Option<Payment>),
    /// Rows matching the filter (`limit` is the page size).
    Filter(PaymentFilter),
    /// Nothing can match (an unknown merchant name).
    Nothing,
}

impl Core {
    /// Checks a search's filters and resolves them to a [`Selection`]: the page size is `limit`
    /// clamped to 1..=200 (default 50), a merchant is named, a cursor (`after` or `before`,
    /// which wins when both are given) is `<created_at ms>_<id>`.
    /// Every filter is checked before the id lookup, so a malformed one is refused even when an
    /// id makes the others moot (schemathesis found them accepted). Errors: [`FilterError`].
    pub async fn select_payments(&self, q: &PaymentSearch) -> Result<Selection, FilterError> {
        let store = self.store.as_ref();
        let mut f = PaymentFilter {
            limit: q.limit.unwrap_or(50).clamp(1, 200),
            ..PaymentFilter::default()
        };
        if let Some(s) = blank(&q.status) {
            let status: PaymentStatus = s
                .parse()
                .map_err(|_| FilterError::InvalidStatus(format!("unknown status {s:?}")))?;
            f.status = Some(status.as_str().to_string());
        }
        f.merchant_order_id = blank(&q.order).map(str::to_string);
        // Exactly as sent, as its schema says (failure_reason_filter_schema): no trimming.
        if let Some(r) = q.reason.as_deref().filter(|r| !r.is_empty()) {
            let reason = converge_wire::FailureReason::parse(r).ok_or_else(|| {
                FilterError::InvalidReason(format!(
                    "unknown failure reason {r:?}: decline:<reason>, timeout, 5xx, dropped, garbled or fenced"
                ))
            })?;
            f.reason = Some(reason.key());
        }
        f.from = time_filter("from", &q.from)?;
        f.to = time_filter("to", &q.to)?;
        f.expires_before = time_filter("expires_before", &q.expires_before)?;
        f.updated_before = blank(&q.in_state_for)
            .map(|m| {
                m.parse::<i64>()
                    .ok()
                    .filter(|m| (1..=MAX_IN_STATE_MINUTES).contains(m))
                    .map(|m| self.clock.now_ms() - m * 60_000)
                    .ok_or_else(|| {
                        FilterError::InvalidDuration(format!(
                            "in_state_for must be a whole number of minutes from 1 to {MAX_IN_STATE_MINUTES}, not {m:?}"
                        ))
                    })
            })
            .transpose()?;
        f.after = blank(&q.after)
            .map(|c| {
                payment_cursor(c).ok_or(FilterError::InvalidCursor(
                    "after must be a cursor from a previous page",
                ))
            })
            .transpose()?;
        f.before = blank(&q.before)
            .map(|c| {
                payment_cursor(c).ok_or(FilterError::InvalidCursor(
                    "before must be a cursor from a previous page",
                ))
            })
            .transpose()?;
        if f.before.is_some() {
            f.after = None;
        }
        if let Some(id) = blank(&q.id) {
            return Ok(Selection::One(store.payment(id).await?));
        }
        if let Some(name) = blank(&q.merchant) {
            match store
                .merchants()
                .await?
                .into_iter()
                .find(|m| m.name == name)
            {
                Some(m) => f.merchant_id = Some(m.id),
                None => return Ok(Selection::Nothing),
            }
        }
        Ok(Selection::Filter(f))
    }

    /// One page of a payment search, newest first, with the cursors of the older page
    /// (`next`, while there are older rows) and of the newer page (`prev`, while there are
    /// newer rows). One row more than the page is read, so a cursor is given only when its
    /// page holds something. Errors: [`FilterError`].
    pub async fn search_payments(&self, q: &PaymentSearch) -> Result<PaymentPage, FilterError> {
        let store = self.store.as_ref();
        let mut f = match self.select_payments(q).await? {
            Selection::One(p) => {
                return Ok(PaymentPage {
                    items: p.into_iter().collect(),
                    next: None,
                    prev: None,
                });
            }
            Selection::Nothing => {
                return Ok(PaymentPage {
                    items: Vec::new(),
                    next: None,
                    prev: None,
                });
            }
            Selection::Filter(f) => f,
        };
        let limit = f.limit;
        f.limit = limit + 1;
        let mut items = store.search_payments(&f).await?;
        let more = items.len() as i64 > limit;
        let cursor = |p: &Payment| format!("{}_{}", p.created_at, p.id);
        let (next, prev) = if f.before.is_some() {
            // The extra row is the newest one: it belongs to the page above.
            if more {
                items.remove(0);
            }
            // The cursor's own row is older than this page, so an older page exists.
            (
                items.last().map(cursor),
                items.first().filter(|_| more).map(cursor),
            )
        } else {
            items.truncate(limit as usize);
            (
                items.last().filter(|_| more).map(cursor),
                items.first().filter(|_| f.after.is_some()).map(cursor),
            )
        };
        Ok(PaymentPage { items, next, prev })
    }

    /// The actions the audit log holds, for the viewer's action filter (issue 41), in byte order.
    /// Errors: a store error.
    pub async fn audit_actions(&self) -> Result<Vec<String>, crate::store::StoreError> {
        let store = self.store.as_ref();
        store.audit_actions().await
    }

    /// One page of the audit log, newest first: records a page `limit` clamped to 1..=200
    /// (default 50), the cursors of the older and newer pages beside it. With both cursors,
    /// `before` is used (query parameters cannot say in OpenAPI that they exclude each other,
    /// and a request the schema allows is answered); a time range with `from` not before `to` is
    /// empty, as in the payment search. Errors: [`FilterError::InvalidTime`], and
    /// [`FilterError::InvalidCursor`] for a `before` below 1 or a negative `after`.
    pub async fn audit_list(&self, q: &AuditListQuery) -> Result<AuditList, FilterError> {
        let store = self.store.as_ref();
        let clean = |v: &Option<String>| blank(v).map(str::to_string);
        let (before, after) = match (q.before, q.after) {
            (Some(b), _) => (Some(b), None),
            (None, a) => (None, a),
        };
        let from = time_filter("from", &q.from)?;
        let to = time_filter("to", &q.to)?;
        if before.is_some_and(|b| b < 1) || after.is_some_and(|a| a < 0) {
            return Err(FilterError::InvalidCursor(
                "before must be a positive record number and after not negative",
            ));
        }
        if let (Some(f), Some(t)) = (from, to)
            && f >= t
        {
            return Ok(AuditList {
                items: Vec::new(),
                older: None,
                newer: None,
            });
        }
        let limit = q.limit.unwrap_or(50).clamp(1, 200);
        let filter = AuditListFilter {
            actor: clean(&q.actor),
            action: clean(&q.action),
            payment_id: clean(&q.payment),
            target: clean(&q.target),
            from,
            to,
            before_seq: before,
            after_seq: after,
            limit,
        };
        let items = store.audit_list(&filter).await?;
        let full = items.len() as i64 == limit;
        let (first, last) = (
            items.first().map(|r| r.record.seq),
            items.last().map(|r| r.record.seq),
        );
        let (older, newer) = if after.is_some() {
            (last, if full { first } else { None })
        } else {
            (if full { last } else { None }, before.and(first))
        };
        Ok(AuditList {
            items,
            older,
            newer,
        })
    }
}

pub use converge_wire::DeliverySearch;

impl Core {
    /// The deliveries a delivery search selects, newest first, at most `limit` (1..=500, default
    /// 100), below id `before` when given (the next page). Errors: [`FilterError::InvalidStatus`]
    /// naming the delivery statuses, [`FilterError::InvalidEventType`],
    /// [`FilterError::InvalidTime`], [`FilterError::InvalidCursor`] for a `before` below 1.
    pub async fn search_deliveries(
        &self,
        q: &DeliverySearch,
    ) -> Result<Vec<DeliveryRow>, FilterError> {
        let store = self.store.as_ref();
        let status = blank(&q.status)
            .map(|s| {
                s.parse::<DeliveryStatus>().map_err(|_| {
                    let names: Vec<&str> = DeliveryStatus::ALL.iter().map(|s| s.as_str()).collect();
                    FilterError::InvalidStatus(format!(
                        "status must be one of {}",
                        names.join(", ")
                    ))
                })
            })
            .transpose()?;
        let event_type = blank(&q.event_type).map(str::to_string);
        if let Some(t) = &event_type {
            t.parse::<EventType>()
                .map_err(FilterError::InvalidEventType)?;
        }
        let f = DeliveryFilter {
            merchant_id: None,
            status,
            endpoint_id: blank(&q.endpoint).map(str::to_string),
            event_type,
            from: time_filter("from", &q.from)?,
            to: time_filter("to", &q.to)?,
            payment_id: blank(&q.payment).map(str::to_string),
            before_id: q.before,
        };
        if q.before.is_some_and(|b| b < 1) {
            return Err(FilterError::InvalidCursor(
                "before must be a positive delivery id",
            ));
        }
        Ok(store
            .deliveries(&f, q.limit.unwrap_or(100).clamp(1, 500))
            .await?)
    }
}

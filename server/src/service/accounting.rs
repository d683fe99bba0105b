//! Finance's view of an accounting day (issue 35 "Three-layer reconciliation", its inside
//! layer's first read): what the day's ledger batches moved, per currency and kind, with the
//! day's net to merchants and fee revenue. The days are the ones every batch is dated by
//! ([`crate::domain::accounting`]).

use serde::Serialize;

use super::Core;
use crate::store::{LedgerDayLine, StoreError};

/// Why a day could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LedgerDayError {
    /// Not a calendar date `YYYY-MM-DD`.
    #[error("date must be a calendar date YYYY-MM-DD, such as 2026-12-05")]
    InvalidDate,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// One currency's totals on an accounting day, minor units.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DayTotal {
    /// ISO 4217.
    pub currency: String,
    /// What the day's batches left owed to merchants: credits to their payable accounts less
    /// debits (negative when refunds and fees outweighed captures).
    pub net_to_merchants: i64,
    /// The day's fees, credited to `fee_revenue`.
    pub fee_revenue: i64,
}

/// An accounting day's ledger: its lines per currency and kind, and each currency's totals.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LedgerDay {
    /// `YYYY-MM-DD`.
    pub date: String,
    /// Per currency and kind, ordered so.
    pub lines: Vec<LedgerDayLine>,
    /// Per currency, ordered so.
    pub totals: Vec<DayTotal>,
}

impl Core {
    /// The ledger of accounting day `date` (`YYYY-MM-DD`). Errors: `InvalidDate`, the store's.
    pub async fn ledger_day(&self, date: &str) -> Result<LedgerDay, LedgerDayError> {
        let day: jiff::civil::Date = date.parse().map_err(|_| LedgerDayError::InvalidDate)?;
        if day.to_string() != date {
            return Err(LedgerDayError::InvalidDate);
        }
        let lines = self.store.ledger_day(date).await?;
        let mut totals: Vec<DayTotal> = Vec::new();
        for l in &lines {
            let net = l.payable_credits - l.payable_debits;
            let fee = if l.kind == "fee" { l.payable_debits } else { 0 };
            match totals.last_mut() {
                Some(t) if t.currency == l.currency => {
                    t.net_to_merchants += net;
                    t.fee_revenue += fee;
                }
                _ => totals.push(DayTotal {
                    currency: l.currency.clone(),
                    net_to_merchants: net,
                    fee_revenue: fee,
                }),
            }
        }
        Ok(LedgerDay {
            date: date.to_string(),
            lines,
            totals,
        })
    }
}

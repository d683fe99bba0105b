//! Bulk retry: the preview's items and what the confirm did.

use serde::{Deserialize, Serialize};

/// One payment of a preview.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BulkItem {
    /// Payment id.
    pub payment_id: String,
    /// Its status now.
    pub status: String,
    /// Its version now: the confirm must carry it back unchanged.
    pub version: i64,
    /// Amount, minor units.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// Last change, epoch ms UTC.
    pub updated_at: i64,
    /// Why it is selected: the payment's last error or the error-pool item's summary.
    pub why: String,
}

/// What a bulk retry did, item by item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct BulkOutcome {
    /// Retried: payment id, the retry action's id, and how many jobs it woke.
    pub retried: Vec<(String, String, u64)>,
    /// Not retried: payment id and why (moved since the preview, no longer selected, ...).
    pub skipped: Vec<(String, String)>,
}

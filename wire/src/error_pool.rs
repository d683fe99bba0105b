//! The error pool: its items, a page of them by kind, and what a bulk resolve did.

use serde::{Deserialize, Serialize};

/// An error-pool item as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct ErrorItem {
    /// Id.
    pub id: i64,
    /// `job_dead`, `suspense`, `reconcile_*`, `stale_callback`, ...
    pub kind: String,
    /// What makes two reports the same item (re-running reconciliation adds nothing twice).
    pub dedupe_key: String,
    /// Payment, if any.
    pub payment_id: Option<String>,
    /// One line for lists.
    pub summary: String,
    /// JSON evidence (both sides of a difference, last error, attempts, state).
    pub evidence: String,
    /// `open` or `resolved`.
    #[cfg_attr(feature = "utoipa", schema(value_type = String))]
    #[cfg_attr(feature = "sqlx", sqlx(try_from = "String"))]
    pub status: crate::ErrorItemStatus,
    /// How often it was reported.
    pub occurrences: i64,
    /// Epoch ms UTC.
    pub first_seen: i64,
    /// Epoch ms UTC.
    pub last_seen: i64,
    /// What the person who resolved it wrote.
    pub resolution_note: Option<String>,
    /// Who resolved it (`system` for automatic resolution).
    pub resolved_by: Option<String>,
    /// Epoch ms UTC.
    pub resolved_at: Option<i64>,
}

/// How many error-pool items of one kind there are (for the console's kind filter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "sqlx", derive(sqlx::FromRow))]
pub struct KindCount {
    /// Kind (`job_dead`, `suspense`, ...).
    pub kind: String,
    /// Items of that kind with the status asked for.
    pub count: i64,
}

/// One page of the error pool with the kinds to filter by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct PoolPage {
    /// Kinds with items of the status asked for, with their counts, by name.
    pub kinds: Vec<KindCount>,
    /// The page's items, grouped by kind, newest first within a kind.
    pub items: Vec<ErrorItem>,
    /// This page (0-based).
    pub page: i64,
    /// Items per page.
    pub page_size: i64,
    /// Items matching the filter in all.
    pub total: i64,
}

/// What a bulk resolve did, item by item.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ResolveOutcome {
    /// Resolved item ids.
    pub resolved: Vec<i64>,
    /// Not resolved: item id and why (resolved by someone else, reported again, ...).
    pub skipped: Vec<(i64, String)>,
}

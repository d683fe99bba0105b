//! What the live console watches (issue 17 "Live pages"): a cheap marker of everything the
//! console shows, read a few times a second by each serving process, and, when it moved, which
//! payments changed. The database is the only thing every `serve` and `worker` process
//! shares, so a change made by any of them (an approval, a worker's retry, a channel
//! callback) is seen by all. Part of the storage abstraction; conformance-tested on both
//! backends.

use std::collections::BTreeSet;

use async_trait::async_trait;

use super::StoreError;

/// The high-water marks of the tables the console reads. Two equal markers mean nothing the
/// console shows changed in between, as far as committed rows in id or `updated_at` order
/// tell (a row committed later with a smaller id or time than one already seen is noticed
/// with the next change). Every field is 0 for an empty table.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, sqlx::FromRow)]
pub struct ChangeMarker {
    /// Largest `payments.updated_at`, epoch ms UTC (index `payments_updated`).
    pub payments_at: i64,
    /// Largest `payment_events.id`: transitions, applied or ignored.
    pub payment_event: i64,
    /// Largest `jobs.updated_at`, epoch ms UTC (index `jobs_updated`): jobs added, retried,
    /// finished or dead.
    pub jobs_at: i64,
    /// Largest `error_pool.id`: a new error-pool item.
    pub error_item: i64,
    /// Largest `audit_log.seq`: every person's action (requests, decisions, resolutions, sign-ins).
    pub audit_seq: i64,
    /// Largest `webhook_attempts.id`: a merchant notification was tried.
    pub webhook_attempt: i64,
}

/// What changed after a [`ChangeMarker`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSet {
    /// Payments whose row, timeline, jobs, error items, notifications or audit records changed,
    /// each once, at most the limit asked for.
    pub payments: BTreeSet<String>,
    /// More payments changed than the limit: every payment page should look again.
    pub truncated: bool,
    /// An ops action was requested, approved, rejected, cancelled, executed or closed as
    /// stale or expired (an `action_*` audit record), or a privilege request moved (a
    /// `privilege_*` one): what the approvals page lists.
    pub actions: bool,
    /// An emergency-switch pause was requested, decided, ended or expired (a `pause_*` audit
    /// record): the pause banner, the pauses page and the approvals page look again (issue 41).
    pub pauses: bool,
    /// One of the changed payments has a pending request, which may have made it stale.
    pub pending: bool,
}

/// Change detection for the live console.
#[async_trait]
pub trait Live {
    /// The marker now: one query of index probes, cheap enough to run several times a second.
    async fn change_marker(&self) -> Result<ChangeMarker, StoreError>;

    /// What changed after `since` (a marker read earlier): payments by id, at most `limit`
    /// (clamped to 1..=1000). Payments updated in the very millisecond of
    /// `since.payments_at` (and jobs in that of `since.jobs_at`) are included again, since a
    /// row of that millisecond may have committed after `since` was read.
    async fn changes_since(
        &self,
        since: &ChangeMarker,
        limit: i64,
    ) -> Result<ChangeSet, StoreError>;
}

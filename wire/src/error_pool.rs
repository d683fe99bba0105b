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
    /// The action each open item of the page offers now, by item id (issue 41): absent for
    /// resolved items.
    #[serde(default)]
    pub offers: Vec<ItemActionOffer>,
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

/// What a person can do about an open error-pool item, by its kind (issue 41, "Honest
/// actions"): the one rule the server applies and the console offers, so a button is never
/// offered for an item it cannot help.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum ItemAction {
    /// Wake the payment's waiting or dead jobs (`job_dead`, `suspense`): only where a job
    /// would wake.
    Retry,
    /// Queue the dead webhook delivery again for a new round of attempts
    /// (`webhook_exhausted`).
    Redeliver,
    /// Hand the event the broker refused to the relay again (`event_publish_refused`).
    Replay,
    /// Ask the channel about the payment now (`amount_mismatch`, `conflicting_callback`,
    /// the reconciliation differences that name a payment).
    Query,
}

impl ItemAction {
    /// Every action, in the order the console lists them.
    pub const ALL: [ItemAction; 4] = [
        ItemAction::Retry,
        ItemAction::Redeliver,
        ItemAction::Replay,
        ItemAction::Query,
    ];

    /// Stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ItemAction::Retry => "retry",
            ItemAction::Redeliver => "redeliver",
            ItemAction::Replay => "replay",
            ItemAction::Query => "query",
        }
    }

    /// The button's label.
    pub fn label(self) -> &'static str {
        match self {
            ItemAction::Retry => "Retry",
            ItemAction::Redeliver => "Redeliver",
            ItemAction::Replay => "Replay",
            ItemAction::Query => "Query channel",
        }
    }

    /// The action that fits an item of `kind` (with a payment when `has_payment`), or why
    /// none does: the rule "which action fits which item kind", in this one place.
    ///
    /// - `webhook_exhausted` → [`Redeliver`](Self::Redeliver): waking its dead job would
    ///   only find the delivery dead and stop (issue 41: "Retried 2 payments" while the
    ///   deliveries stayed dead);
    /// - `event_publish_refused` → [`Replay`](Self::Replay);
    /// - `job_dead`, `suspense` → [`Retry`](Self::Retry), when the item names a payment;
    /// - `amount_mismatch`, `conflicting_callback`, `reconcile_amount_mismatch`,
    ///   `reconcile_missing_statement` → [`Query`](Self::Query), when it names a payment;
    /// - anything else (a job that can never run, a statement line with no payment here, a
    ///   bad statement file, a customer's `dispute` answered at the channel, a kind this
    ///   version does not know) → none: a person finds out and resolves the item with a note.
    pub fn for_kind(kind: &str, has_payment: bool) -> Result<ItemAction, &'static str> {
        let action = match kind {
            "webhook_exhausted" => return Ok(ItemAction::Redeliver),
            "event_publish_refused" => return Ok(ItemAction::Replay),
            "job_dead" | "suspense" => ItemAction::Retry,
            "amount_mismatch"
            | "conflicting_callback"
            | "reconcile_amount_mismatch"
            | "reconcile_missing_statement" => ItemAction::Query,
            "job_unknown_kind" => {
                return Err("this version has no handler for the job's kind: it would fail again");
            }
            "job_bad_payload" => {
                return Err("the job's payload cannot be read: it would fail again");
            }
            "reconcile_missing_local" => {
                return Err("no payment here matches the statement line: look at the channel");
            }
            "dispute" => {
                return Err(
                    "a chargeback: answer it at the channel with the evidence before its deadline (or book the loss), then resolve with a note",
                );
            }
            "reconcile_bad_file" => {
                return Err(
                    "re-run the day (converge reconcile --date) once the channel serves a whole statement",
                );
            }
            _ => return Err("no action fits this kind of item"),
        };
        if has_payment {
            Ok(action)
        } else {
            Err("the item names no payment")
        }
    }
}

impl std::fmt::Display for ItemAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An open item's action as the server offers it now: the action its kind calls for (none
/// when no action fits), and whether it would do anything now, with why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ItemActionOffer {
    /// The item.
    pub item_id: i64,
    /// The action its kind calls for ([`ItemAction::for_kind`]); null when none fits.
    pub action: Option<ItemAction>,
    /// Whether it would do something now (a job would wake, the delivery is not pending,
    /// the event is still refused).
    pub available: bool,
    /// Why it is not available (empty when it is): shown next to the disabled button.
    pub why: String,
}

/// What an item's action did, as the server counted it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "utoipa", derive(utoipa::ToSchema))]
pub struct ItemActionOutcome {
    /// The item.
    pub item_id: i64,
    /// What was done.
    pub action: ItemAction,
    /// Jobs woken (a retry).
    pub jobs_woken: u64,
    /// Webhook deliveries queued for a new round of attempts (a redelivery).
    pub deliveries_queued: u64,
    /// Events handed to the relay again (a replay).
    pub events_replayed: u64,
    /// Error-pool items resolved by it: the redelivered or replayed item (it opens again
    /// if that fails again); a retry or a query leaves the item open.
    pub items_resolved: u64,
    /// The ops action recorded for a retry or a query (`act_...`), if any.
    pub action_id: Option<String>,
    /// A query's answer as recorded (the action's result JSON), if any.
    pub answer: Option<String>,
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

impl ItemActionOutcome {
    /// The sentence the console shows: what happened, in the server's counts.
    pub fn sentence(&self) -> String {
        let id = self.item_id;
        let resolved = match self.items_resolved {
            0 => format!("item #{id} stays open"),
            _ => format!("item #{id} resolved (it opens again if this fails again)"),
        };
        match self.action {
            ItemAction::Retry => format!(
                "Retry for item #{id}: {} woken; {resolved}.",
                plural(self.jobs_woken, "job", "jobs")
            ),
            ItemAction::Redeliver => format!(
                "Redeliver for item #{id}: {} queued; {resolved}.",
                plural(self.deliveries_queued, "delivery", "deliveries")
            ),
            ItemAction::Replay => format!(
                "Replay for item #{id}: {} handed to the relay; {resolved}.",
                plural(self.events_replayed, "event", "events")
            ),
            ItemAction::Query => {
                format!("Query for item #{id}: the channel was asked; {resolved}.")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_webhook_delivery_is_redelivered_not_retried() {
        assert_eq!(
            ItemAction::for_kind("webhook_exhausted", true),
            Ok(ItemAction::Redeliver)
        );
        // A delivery of a refund's event may name no payment: it is redelivered all the same.
        assert_eq!(
            ItemAction::for_kind("webhook_exhausted", false),
            Ok(ItemAction::Redeliver)
        );
    }

    #[test]
    fn a_refused_publication_is_replayed() {
        assert_eq!(
            ItemAction::for_kind("event_publish_refused", false),
            Ok(ItemAction::Replay)
        );
    }

    #[test]
    fn only_items_whose_jobs_can_wake_are_retried() {
        assert_eq!(
            ItemAction::for_kind("job_dead", true),
            Ok(ItemAction::Retry)
        );
        assert_eq!(
            ItemAction::for_kind("suspense", true),
            Ok(ItemAction::Retry)
        );
        assert!(ItemAction::for_kind("job_dead", false).is_err());
        // A job whose kind or payload is broken would only die again.
        assert!(ItemAction::for_kind("job_unknown_kind", true).is_err());
        assert!(ItemAction::for_kind("job_bad_payload", true).is_err());
    }

    #[test]
    fn differences_with_the_channel_are_queried() {
        for kind in [
            "amount_mismatch",
            "conflicting_callback",
            "reconcile_amount_mismatch",
            "reconcile_missing_statement",
        ] {
            assert_eq!(
                ItemAction::for_kind(kind, true),
                Ok(ItemAction::Query),
                "{kind}"
            );
            assert!(ItemAction::for_kind(kind, false).is_err(), "{kind}");
        }
    }

    #[test]
    fn kinds_no_action_helps_say_why() {
        for kind in [
            "reconcile_missing_local",
            "reconcile_bad_file",
            "dispute",
            "something_new",
        ] {
            let why = ItemAction::for_kind(kind, true).unwrap_err();
            assert!(!why.is_empty(), "{kind}");
        }
    }

    #[test]
    fn the_sentence_says_what_the_server_counted() {
        let out = ItemActionOutcome {
            item_id: 7,
            action: ItemAction::Redeliver,
            jobs_woken: 0,
            deliveries_queued: 1,
            events_replayed: 0,
            items_resolved: 1,
            action_id: None,
            answer: None,
        };
        assert_eq!(
            out.sentence(),
            "Redeliver for item #7: 1 delivery queued; item #7 resolved (it opens again if this fails again)."
        );
        let retry = ItemActionOutcome {
            action: ItemAction::Retry,
            jobs_woken: 2,
            deliveries_queued: 0,
            items_resolved: 0,
            ..out
        };
        assert_eq!(
            retry.sentence(),
            "Retry for item #7: 2 jobs woken; item #7 stays open."
        );
    }
}

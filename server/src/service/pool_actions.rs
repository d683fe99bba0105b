//! Honest error-pool actions (issue 41, "Honest actions"): each open item offers the one
//! action its kind calls for ([`ItemAction::for_kind`], the rule both the server and the
//! console read), disabled with the reason where it would do nothing now, and each action
//! reports what really happened, counted here: jobs woken, deliveries queued, events handed
//! to the relay again, items resolved.
//!
//! The actions reuse the existing use cases, never a copy of them: a retry or a query is an
//! ordinary ops action (as [`Core::request_action`] records one, its own record and audit entries), a
//! redelivery is [`Core::redeliver_one`] (audited `webhook_redelivered`). A redelivered or
//! replayed item is resolved with its own `error_resolved` audit record, because its failure
//! is back in the hands of the machinery: a delivery dying again and an event refused again
//! report the same dedupe key with `reopen`, which opens the item again. A retry and a query
//! leave the item open: whether they helped is only known later.

use converge_wire::ErrorCode;
use serde_json::json;

use super::Core;
use super::actions::{ActionError, ActionRequest};
use super::actor::Actor;
use super::deliveries::DeliveryError;
use crate::domain::actions::check_reason;
use crate::store::{DeliveryStatus, ErrorItem, ErrorItemStatus, StoreError};
pub use converge_wire::{ItemAction, ItemActionOffer, ItemActionOutcome};

/// A number the item's evidence carries under `key` (`delivery_id`).
fn evidence_i64(item: &ErrorItem, key: &str) -> Option<i64> {
    serde_json::from_str::<serde_json::Value>(&item.evidence)
        .ok()?
        .get(key)?
        .as_i64()
}

/// A text the item's evidence carries under `key` (`event_id`).
fn evidence_str(item: &ErrorItem, key: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(&item.evidence)
        .ok()?
        .get(key)?
        .as_str()
        .map(str::to_string)
}

fn offer(item: &ErrorItem, action: Option<ItemAction>, why: String) -> ItemActionOffer {
    ItemActionOffer {
        item_id: item.id,
        action,
        available: action.is_some() && why.is_empty(),
        why,
    }
}

impl Core {
    /// The action each open item of `items` offers now (resolved items are left out).
    /// Errors: the store's.
    pub async fn item_action_offers(
        &self,
        items: &[ErrorItem],
    ) -> Result<Vec<ItemActionOffer>, StoreError> {
        let mut out = Vec::new();
        for item in items.iter().filter(|i| i.status == ErrorItemStatus::Open) {
            out.push(self.item_action_offer(item).await?);
        }
        Ok(out)
    }

    /// The action `item` offers now: the one its kind calls for, unavailable (with why)
    /// when it would do nothing: a retry with no job waiting or dead, a redelivery of a
    /// delivery already queued or gone. Errors: the store's.
    pub async fn item_action_offer(&self, item: &ErrorItem) -> Result<ItemActionOffer, StoreError> {
        let action = match ItemAction::for_kind(&item.kind, item.payment_id.is_some()) {
            Ok(a) => a,
            Err(why) => return Ok(offer(item, None, why.into())),
        };
        let why = match action {
            ItemAction::Retry => {
                let pid = item.payment_id.as_deref().unwrap_or_default();
                if self.store.wakeable_jobs(pid).await? == 0 {
                    "no job of this payment is waiting or dead: a retry would wake nothing".into()
                } else {
                    String::new()
                }
            }
            ItemAction::Redeliver => match evidence_i64(item, "delivery_id") {
                None => "the item names no delivery".into(),
                Some(d) => match self.store.delivery(d).await? {
                    None => format!("delivery #{d} no longer exists"),
                    Some(del) if del.status == DeliveryStatus::Pending => {
                        format!("delivery #{d} is already queued: its next attempt is scheduled")
                    }
                    Some(_) => String::new(),
                },
            },
            ItemAction::Replay => match evidence_str(item, "event_id") {
                None => "the item names no event".into(),
                Some(_) => String::new(),
            },
            ItemAction::Query => String::new(),
        };
        Ok(offer(item, Some(action), why))
    }

    /// Runs the action open item `id` offers, as `actor` with `reason`, and reports what it
    /// did as counted here. Errors (nothing done): `invalid_reason` (400); `not_found`
    /// (404); `already_resolved`, `no_action` (no action fits the kind) and `nothing_to_do`
    /// (it would do nothing now; the message says why) (409); `RateLimited` over the
    /// allowance a retry or a query spends; a retry's or query's own refusals
    /// ([`Core::request_action`]); the store's.
    pub async fn act_on_error_item(
        &self,
        actor: &Actor,
        id: i64,
        reason: &str,
    ) -> Result<ItemActionOutcome, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let item = self
            .store
            .error_item(id)
            .await?
            .ok_or(ActionError::NotFound("error-pool item"))?;
        if item.status != ErrorItemStatus::Open {
            return Err(ActionError::Conflict(
                ErrorCode::AlreadyResolved,
                format!("error-pool item {id} is already resolved"),
            ));
        }
        let offered = self.item_action_offer(&item).await?;
        let Some(action) = offered.action else {
            return Err(ActionError::Conflict(ErrorCode::NoAction, offered.why));
        };
        if !offered.available {
            return Err(ActionError::Conflict(ErrorCode::NothingToDo, offered.why));
        }
        let mut out = ItemActionOutcome {
            item_id: id,
            action,
            jobs_woken: 0,
            deliveries_queued: 0,
            events_replayed: 0,
            items_resolved: 0,
            action_id: None,
            answer: None,
        };
        let reason = reason.trim();
        match action {
            ItemAction::Retry | ItemAction::Query => {
                self.spend_action_allowance(&actor.username)?;
                let kind = if action == ItemAction::Retry {
                    "retry"
                } else {
                    "query"
                };
                let req = ActionRequest {
                    kind: kind.into(),
                    payment_id: item.payment_id.clone().unwrap_or_default(),
                    reason: reason.into(),
                    target_status: None,
                    evidence: None,
                    capture_amount: None,
                    capture_final: None,
                };
                let a = self.record_action(actor, &req).await?;
                if action == ItemAction::Retry {
                    out.jobs_woken = jobs_woken(a.result.as_deref());
                } else {
                    out.answer = a.result.clone();
                }
                out.action_id = Some(a.id);
            }
            ItemAction::Redeliver => {
                let d = evidence_i64(&item, "delivery_id").unwrap_or_default();
                let queued = self
                    .redeliver_one(actor, d, reason)
                    .await
                    .map_err(delivery_error)?;
                out.deliveries_queued = queued.len() as u64;
                if !queued.is_empty() {
                    let note = format!("redelivered delivery #{d}: {reason}");
                    out.items_resolved =
                        u64::from(self.resolve_audited(actor, &item, &note).await?);
                }
            }
            ItemAction::Replay => {
                let event = evidence_str(&item, "event_id").unwrap_or_default();
                let audit = actor.entry(
                    self.clock.now_ms(),
                    "event_replayed",
                    &format!("event:{event}"),
                    reason,
                    String::new(),
                    json!({"error_item": id}).to_string(),
                );
                if !self.store.replay_refused_event(&event, &audit).await? {
                    return Err(ActionError::Conflict(
                        ErrorCode::NothingToDo,
                        format!(
                            "event {event} has no refused publication: it was published or replayed already"
                        ),
                    ));
                }
                out.events_replayed = 1;
                let note = format!("event {event} replayed: {reason}");
                out.items_resolved = u64::from(self.resolve_audited(actor, &item, &note).await?);
            }
        }
        Ok(out)
    }
}

/// The `jobs_woken` a retry action's result records (0 when it records none).
pub fn jobs_woken(result: Option<&str>) -> u64 {
    result
        .and_then(|r| serde_json::from_str::<serde_json::Value>(r).ok())
        .and_then(|v| v["jobs_woken"].as_u64())
        .unwrap_or(0)
}

/// A redelivery's refusal as an item action's.
fn delivery_error(e: DeliveryError) -> ActionError {
    match e {
        DeliveryError::NotFound(what) => ActionError::NotFound(what),
        DeliveryError::Pending => ActionError::Conflict(ErrorCode::NothingToDo, e.to_string()),
        DeliveryError::InvalidReason => {
            ActionError::Invalid(ErrorCode::InvalidReason, e.to_string())
        }
        DeliveryError::Service(s) => s.into(),
        other => ActionError::Conflict(ErrorCode::NothingToDo, other.to_string()),
    }
}

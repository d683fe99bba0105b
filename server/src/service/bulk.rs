//! Bulk retry of a filtered selection (issue "Ops console II": "a preview of the exact items
//! first, re-checked on the server, rate-limited"; DESIGN.md "Ops console", retry).
//!
//! Two steps. The preview lists exactly which payments a selection holds now (stuck payments
//! of one state, or the payments of open error-pool items of one kind), each with its
//! version. From the error pool it takes only the items whose kind calls for a retry
//! ([`ItemAction::for_kind`]), and a confirmed payment with no job waiting or dead is skipped
//! and named, since a retry would wake nothing (issue 41). The operator then submits those
//! `(payment_id, version)` pairs with a reason; the server computes the selection again and retries only the items that are still in it at the
//! same version, so a payment that moved between preview and confirm (settled, retried by
//! someone else, changed state) is skipped and named, never retried blind. Each retried item
//! is an ordinary `retry` action (its own action record and audit entries, normal lease
//! rules); the bulk request itself is audited too, and spends one of the user's bulk allowance
//! ([`super::console::ConsoleLimiters::bulk`]).

use converge_wire::ErrorCode;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Core;
use super::actions::{ActionError, ActionRequest};
use super::actor::Actor;
use crate::domain::actions::check_reason;
use crate::domain::state::PaymentStatus;
use crate::domain::stuck::StuckThresholds;
use crate::store::ErrorItemStatus;
use converge_wire::ItemAction;

/// Most items one bulk retry may hold (and a preview lists).
pub const MAX_BULK_ITEMS: usize = 100;

/// What a bulk retry selects.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Selection {
    /// `stuck` (stuck payments, DESIGN.md thresholds) or `error_pool` (payments of open
    /// error-pool items).
    #[schema(schema_with = crate::schema::selection_source_schema)]
    pub source: String,
    /// For `stuck`: only this state (PENDING, PROCESSING, UNKNOWN, CHANNEL_SUCCESS, SUSPENSE).
    #[serde(default)]
    #[schema(schema_with = crate::schema::stuck_status_or_null_schema)]
    pub status: Option<String>,
    /// For `error_pool`: only items of this kind (e.g. `job_dead`, `suspense`).
    #[serde(default)]
    pub kind: Option<String>,
    /// For `error_pool`: only the payments of these open items (the rows a person ticked);
    /// 1 to 100 ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(min_items = 1, max_items = 100)]
    pub ids: Option<Vec<i64>>,
}

pub use converge_wire::BulkItem;

/// One confirmed item: a payment and the version its preview showed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Confirmed {
    /// Payment id.
    pub payment_id: String,
    /// Version shown in the preview.
    pub version: i64,
}

pub use converge_wire::BulkOutcome;

impl Selection {
    fn check(&self) -> Result<(), ActionError> {
        // Whatever the source: an empty list is not "no list" (schemathesis found `[]`
        // accepted against the documented minimum of one).
        if let Some(ids) = &self.ids
            && (ids.is_empty() || ids.len() > MAX_BULK_ITEMS)
        {
            return Err(ActionError::Invalid(
                ErrorCode::InvalidSelection,
                format!("ids must list 1 to {MAX_BULK_ITEMS} items"),
            ));
        }
        match self.source.as_str() {
            "stuck" => {
                if let Some(s) = self.status.as_deref().filter(|s| !s.is_empty()) {
                    let st: PaymentStatus = s.parse().map_err(|_| {
                        ActionError::Invalid(
                            ErrorCode::InvalidSelection,
                            format!("unknown status {s:?}"),
                        )
                    })?;
                    let stuckable = StuckThresholds::default()
                        .per_state()
                        .iter()
                        .any(|(s, _)| *s == st);
                    if !stuckable {
                        return Err(ActionError::Invalid(
                            ErrorCode::InvalidSelection,
                            format!("{st} payments are never stuck"),
                        ));
                    }
                }
                Ok(())
            }
            "error_pool" => Ok(()),
            other => Err(ActionError::Invalid(
                ErrorCode::InvalidSelection,
                format!("source must be stuck or error_pool, not {other:?}"),
            )),
        }
    }
}

/// Checks a bulk retry's input without touching storage: the reason, the selection, and
/// 1..=[`MAX_BULK_ITEMS`] items. Errors: `invalid_reason`, `invalid_selection`, `no_items`,
/// `too_many_items` (400).
pub fn validate(sel: &Selection, items: &[Confirmed], reason: &str) -> Result<(), ActionError> {
    check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
    sel.check()?;
    if items.is_empty() {
        return Err(ActionError::Invalid(
            ErrorCode::NoItems,
            "confirm at least one previewed item".into(),
        ));
    }
    if items.len() > MAX_BULK_ITEMS {
        return Err(ActionError::Invalid(
            ErrorCode::TooManyItems,
            format!("at most {MAX_BULK_ITEMS} items per bulk retry"),
        ));
    }
    Ok(())
}

/// Bulk retries one user may run a minute.
pub const BULK_RETRIES_PER_MINUTE: usize = 5;

impl Core {
    /// The payments `sel` holds now, oldest first for `stuck`, most recently seen first for
    /// `error_pool`; at most [`MAX_BULK_ITEMS`].
    ///
    /// Errors: `invalid_selection` (400) for an unknown source or state.
    pub async fn bulk_retry_preview(&self, sel: &Selection) -> Result<Vec<BulkItem>, ActionError> {
        sel.check()?;
        let thresholds = &self.console.stuck;
        let mut picked: Vec<(String, String)> = Vec::new();
        match sel.source.as_str() {
            "stuck" => {
                let only = sel.status.as_deref().filter(|s| !s.is_empty());
                // A state that is not wanted gets a cut-off no row can meet.
                let cutoffs = thresholds.cutoffs(self.clock.now_ms()).map(|(s, c)| {
                    (
                        s,
                        if only.is_none_or(|o| o == s.as_str()) {
                            c
                        } else {
                            i64::MIN
                        },
                    )
                });
                for s in self
                    .store
                    .stuck_payments(&cutoffs, MAX_BULK_ITEMS as i64)
                    .await?
                {
                    picked.push((s.id, s.last_error.unwrap_or_default()));
                }
            }
            _ => {
                let kind = sel.kind.as_deref().filter(|k| !k.is_empty());
                let items = match &sel.ids {
                    Some(ids) => {
                        let mut v = Vec::with_capacity(ids.len());
                        for id in ids {
                            if let Some(i) = self.store.error_item(*id).await?
                                && i.status == ErrorItemStatus::Open
                                && kind.is_none_or(|k| k == i.kind)
                            {
                                v.push(i);
                            }
                        }
                        v
                    }
                    // Several items can name one payment; more are read than kept for that
                    // reason.
                    None => {
                        self.store
                            .error_items(
                                Some(ErrorItemStatus::Open),
                                kind,
                                4 * MAX_BULK_ITEMS as i64,
                            )
                            .await?
                    }
                };
                for item in items {
                    // Only items a retry can help (issue 41: a dead webhook delivery's item was
                    // "retried" while the delivery stayed dead): the rest have their own action.
                    let fits = ItemAction::for_kind(&item.kind, item.payment_id.is_some());
                    if fits != Ok(ItemAction::Retry) {
                        continue;
                    }
                    let Some(pid) = item.payment_id else { continue };
                    if picked.iter().any(|(p, _)| *p == pid) {
                        continue;
                    }
                    picked.push((pid, item.summary));
                    if picked.len() == MAX_BULK_ITEMS {
                        break;
                    }
                }
            }
        }
        let mut items = Vec::with_capacity(picked.len());
        for (id, why) in picked {
            if let Some(p) = self.store.payment(&id).await? {
                items.push(BulkItem {
                    payment_id: p.id,
                    status: p.status.as_str().into(),
                    version: p.version,
                    amount: p.amount,
                    currency: p.currency,
                    updated_at: p.updated_at,
                    why,
                });
            }
        }
        Ok(items)
    }

    /// Retries the confirmed items that `sel` still holds at the version the preview showed; the
    /// rest are skipped with the reason. Each retry is an ordinary `retry` action by `actor` with
    /// `reason`; the bulk request is audited as `bulk_retry`. Bad input is answered first, so it
    /// spends none of the actor's allowance (at most [`BULK_RETRIES_PER_MINUTE`],
    /// [`super::console::ConsoleLimiters::bulk`]): one operator cannot flood the channel by
    /// confirming selections in a loop.
    ///
    /// Errors (nothing retried): `invalid_reason`, `invalid_selection`, `no_items`,
    /// `too_many_items` (400); `RateLimited` over the allowance.
    pub async fn bulk_retry(
        &self,
        actor: &Actor,
        sel: &Selection,
        items: &[Confirmed],
        reason: &str,
    ) -> Result<BulkOutcome, ActionError> {
        validate(sel, items, reason)?;
        if let Some(secs) = self.spend_bulk_allowance(&actor.username) {
            return Err(ActionError::RateLimited(
                format!(
                    "at most {BULK_RETRIES_PER_MINUTE} bulk retries a minute; retry in {secs} s"
                ),
                secs,
            ));
        }
        let current: HashMap<String, BulkItem> = self
            .bulk_retry_preview(sel)
            .await?
            .into_iter()
            .map(|i| (i.payment_id.clone(), i))
            .collect();
        let mut out = BulkOutcome::default();
        let mut seen: Vec<&str> = Vec::new();
        for c in items {
            if seen.contains(&c.payment_id.as_str()) {
                continue;
            }
            seen.push(&c.payment_id);
            let Some(now) = current.get(&c.payment_id) else {
                out.skipped
                    .push((c.payment_id.clone(), "no longer in the selection".into()));
                continue;
            };
            if now.version != c.version {
                out.skipped.push((
                    c.payment_id.clone(),
                    format!(
                        "changed since the preview (version {} -> {}, now {})",
                        c.version, now.version, now.status
                    ),
                ));
                continue;
            }
            // A retry that would wake nothing is not one: skipped and named, never recorded
            // as "retried" (issue 41).
            if self.store.wakeable_jobs(&c.payment_id).await? == 0 {
                out.skipped.push((
                    c.payment_id.clone(),
                    "nothing to wake: no job of this payment is waiting or dead".into(),
                ));
                continue;
            }
            let req = ActionRequest {
                kind: "retry".into(),
                payment_id: c.payment_id.clone(),
                reason: reason.trim().into(),
                target_status: None,
                evidence: None,
                capture_amount: None,
                capture_final: None,
            };
            match self.record_action(actor, &req).await {
                Ok(a) => {
                    let woken = super::pool_actions::jobs_woken(a.result.as_deref());
                    out.retried.push((c.payment_id.clone(), a.id, woken));
                }
                Err(ActionError::Store(e)) => return Err(ActionError::Store(e)),
                Err(e) => out.skipped.push((c.payment_id.clone(), e.to_string())),
            }
        }
        let audit = actor.entry(
            self.clock.now_ms(),
            "bulk_retry",
            &format!("selection:{}", sel.source),
            reason.trim(),
            String::new(),
            json!({"selection": sel, "retried": out.retried.len(), "skipped": out.skipped})
                .to_string(),
        );
        self.store.append_audit(&audit).await?;
        Ok(out)
    }
}

//! The error pool as a work queue (issue 17, "Work queues people act on"): items listed by
//! kind and paged, resolved one by one or in bulk with one note.
//!
//! A bulk resolve follows the bulk retry's rule (see [`super::bulk`]): the preview lists
//! exactly the items the selection holds now, each with how often it was reported; the
//! confirm carries those `(id, occurrences)` pairs back, and the server resolves an item only
//! while it is still open, still in the selection and not reported again since (a new
//! occurrence is a new failure the person has not seen). Each resolution is written with its
//! own `error_resolved` audit record in one transaction, exactly as a single resolve is; the
//! rest are skipped and named.

use converge_wire::ErrorCode;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Core;
use super::actions::ActionError;
use super::actor::Actor;
use crate::store::{ErrorFilter, ErrorItem, ErrorItemStatus};

/// Most items one bulk resolve may hold (and a preview lists).
pub const MAX_BULK_RESOLVE: usize = 100;

/// Longest resolution note, in characters.
pub const MAX_NOTE_CHARS: usize = 2000;

/// Items per page of the console's list.
pub const PAGE_SIZE: i64 = 25;

/// Which items a bulk resolve selects: the open items of one kind (or all kinds), or only
/// the listed ones among them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveSelection {
    /// Only items of this kind (all kinds when absent or empty).
    #[serde(default)]
    pub kind: Option<String>,
    /// Only these item ids (every open item of the kind when absent); 1 to 100.
    #[serde(default)]
    #[schema(min_items = 1, max_items = 100)]
    pub ids: Option<Vec<i64>>,
}

/// One confirmed item: its id and how often it had been reported when previewed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmedItem {
    /// Item id.
    pub id: i64,
    /// `occurrences` shown in the preview.
    pub occurrences: i64,
}

pub use converge_wire::ResolveOutcome;

/// The trimmed note, or `invalid_note` (400) when it is blank or longer than
/// [`MAX_NOTE_CHARS`] characters.
pub fn check_note(note: &str) -> Result<&str, ActionError> {
    let t = note.trim();
    if t.is_empty() || note.chars().count() > MAX_NOTE_CHARS {
        return Err(ActionError::Invalid(
            ErrorCode::InvalidNote,
            format!("a resolution note of 1 to {MAX_NOTE_CHARS} characters is required"),
        ));
    }
    Ok(t)
}

/// `open`, `resolved`, or None for both (blank counts as none); anything else is
/// `invalid_status` (400).
pub fn check_status(status: Option<&str>) -> Result<Option<ErrorItemStatus>, ActionError> {
    status
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse().map_err(|_| {
                ActionError::Invalid(
                    ErrorCode::InvalidStatus,
                    "status must be open or resolved".into(),
                )
            })
        })
        .transpose()
}

fn check_selection(sel: &ResolveSelection) -> Result<(), ActionError> {
    if sel.ids.as_ref().is_some_and(|ids| ids.is_empty()) {
        return Err(ActionError::Invalid(
            ErrorCode::InvalidSelection,
            "select at least one item, or none to take every open item of the kind".into(),
        ));
    }
    if sel
        .ids
        .as_ref()
        .is_some_and(|ids| ids.len() > MAX_BULK_RESOLVE)
    {
        return Err(ActionError::Invalid(
            ErrorCode::TooManyItems,
            format!("at most {MAX_BULK_RESOLVE} items per bulk resolve"),
        ));
    }
    Ok(())
}

/// Checks a bulk resolve's input without touching storage. Errors: `invalid_note`,
/// `invalid_selection`, `no_items`, `too_many_items` (400).
pub fn validate(
    sel: &ResolveSelection,
    items: &[ConfirmedItem],
    note: &str,
) -> Result<(), ActionError> {
    check_note(note)?;
    check_selection(sel)?;
    if items.is_empty() {
        return Err(ActionError::Invalid(
            ErrorCode::NoItems,
            "confirm at least one previewed item".into(),
        ));
    }
    if items.len() > MAX_BULK_RESOLVE {
        return Err(ActionError::Invalid(
            ErrorCode::TooManyItems,
            format!("at most {MAX_BULK_RESOLVE} items per bulk resolve"),
        ));
    }
    Ok(())
}

pub use converge_wire::PoolPage;

fn blank(v: Option<&str>) -> Option<&str> {
    v.map(str::trim).filter(|s| !s.is_empty())
}

impl Core {
    /// Page `page` (0-based) of the items with `status` (None: both) and `kind` (None: all),
    /// [`PAGE_SIZE`] a page, or only item `id`; with the kinds of that status and their
    /// counts, and the action each open item offers now
    /// ([`Core::item_action_offers`](super::pool_actions)). Errors: `invalid_status`, `invalid_page` (400).
    pub async fn error_pool_page(
        &self,
        status: Option<&str>,
        kind: Option<&str>,
        id: Option<i64>,
        page: i64,
    ) -> Result<PoolPage, ActionError> {
        let status = check_status(status)?;
        if !(0..=1_000_000).contains(&page) {
            return Err(ActionError::Invalid(
                ErrorCode::InvalidPage,
                "page must be 0 to 1000000".into(),
            ));
        }
        let kind = blank(kind);
        let kinds = self.store.error_kinds(status).await?;
        let total = match (id, kind) {
            (Some(_), _) => 1,
            (None, Some(k)) => kinds.iter().find(|c| c.kind == k).map_or(0, |c| c.count),
            (None, None) => kinds.iter().map(|c| c.count).sum(),
        };
        let items = self
            .store
            .error_items_page(&ErrorFilter {
                status,
                kind: kind.map(Into::into),
                id,
                offset: page * PAGE_SIZE,
                limit: PAGE_SIZE,
            })
            .await?;
        let total = if id.is_some() {
            items.len() as i64
        } else {
            total
        };
        let offers = self.item_action_offers(&items).await?;
        Ok(PoolPage {
            kinds,
            items,
            page,
            page_size: PAGE_SIZE,
            total,
            offers,
        })
    }

    /// Resolves open item `id` with `note` as `actor`, audited (`error_resolved`, target
    /// `error:<id>`) in the same transaction. Errors: `invalid_note` (400), `not_found`
    /// (404), `already_resolved` (409).
    pub async fn resolve_error_item(
        &self,
        actor: &Actor,
        id: i64,
        note: &str,
    ) -> Result<ErrorItem, ActionError> {
        let note = check_note(note)?;
        // A report landing between the read and the write only bumps `occurrences`: read
        // again and resolve what is there now, since one item is resolved as it is seen.
        for _ in 0..3 {
            let Some(item) = self.store.error_item(id).await? else {
                return Err(ActionError::NotFound("error-pool item"));
            };
            if item.status != ErrorItemStatus::Open {
                return Err(ActionError::Conflict(
                    ErrorCode::AlreadyResolved,
                    format!("error-pool item {id} is already resolved"),
                ));
            }
            if self.resolve_audited(actor, &item, note).await? {
                return self
                    .store
                    .error_item(id)
                    .await?
                    .ok_or(ActionError::NotFound("error-pool item"));
            }
        }
        Err(ActionError::Conflict(
            ErrorCode::ItemBusy,
            format!("error-pool item {id} keeps being reported; retry"),
        ))
    }

    pub(super) async fn resolve_audited(
        &self,
        actor: &Actor,
        item: &ErrorItem,
        note: &str,
    ) -> Result<bool, ActionError> {
        let now = self.clock.now_ms();
        let audit = actor.entry(
            now,
            "error_resolved",
            &format!("error:{}", item.id),
            note,
            String::new(),
            json!({"payment_id": item.payment_id, "kind": item.kind}).to_string(),
        );
        Ok(self
            .store
            .resolve_error_audited(
                item.id,
                item.occurrences,
                note,
                &actor.username,
                now,
                &audit,
            )
            .await?)
    }

    /// The open items `sel` holds now, in list order; at most [`MAX_BULK_RESOLVE`].
    /// Errors: `invalid_selection`, `too_many_items` (400).
    pub async fn bulk_resolve_preview(
        &self,
        sel: &ResolveSelection,
    ) -> Result<Vec<ErrorItem>, ActionError> {
        check_selection(sel)?;
        let kind = blank(sel.kind.as_deref());
        match &sel.ids {
            Some(ids) => {
                let mut out = Vec::with_capacity(ids.len());
                for id in ids {
                    if out.iter().any(|i: &ErrorItem| i.id == *id) {
                        continue;
                    }
                    if let Some(item) = self.store.error_item(*id).await?
                        && item.status == ErrorItemStatus::Open
                        && kind.is_none_or(|k| k == item.kind)
                    {
                        out.push(item);
                    }
                }
                Ok(out)
            }
            None => Ok(self
                .store
                .error_items_page(&ErrorFilter {
                    status: Some(ErrorItemStatus::Open),
                    kind: kind.map(Into::into),
                    id: None,
                    offset: 0,
                    limit: MAX_BULK_RESOLVE as i64,
                })
                .await?),
        }
    }

    /// Resolves the confirmed items that `sel` still holds, open and reported exactly as
    /// often as the preview showed, each with `note` and its own `error_resolved` audit
    /// record; the rest are skipped with the reason. Errors (nothing resolved):
    /// `invalid_note`, `invalid_selection`, `no_items`, `too_many_items` (400).
    pub async fn bulk_resolve(
        &self,
        actor: &Actor,
        sel: &ResolveSelection,
        items: &[ConfirmedItem],
        note: &str,
    ) -> Result<ResolveOutcome, ActionError> {
        validate(sel, items, note)?;
        let note = note.trim();
        let kind = blank(sel.kind.as_deref());
        let mut out = ResolveOutcome::default();
        let mut seen: Vec<i64> = Vec::new();
        for c in items {
            if seen.contains(&c.id) {
                continue;
            }
            seen.push(c.id);
            let in_ids = sel.ids.as_ref().is_none_or(|ids| ids.contains(&c.id));
            let item = self.store.error_item(c.id).await?;
            let why = match &item {
                None => Some("no such item".to_string()),
                Some(_) if !in_ids => Some("not in the selection".to_string()),
                Some(i) if kind.is_some_and(|k| k != i.kind) => {
                    Some(format!("not in the selection (kind {})", i.kind))
                }
                Some(i) if i.status != ErrorItemStatus::Open => Some(format!(
                    "already resolved by {}",
                    i.resolved_by.as_deref().unwrap_or("someone")
                )),
                Some(i) if i.occurrences != c.occurrences => Some(format!(
                    "reported again since the preview ({} -> {} occurrences)",
                    c.occurrences, i.occurrences
                )),
                Some(_) => None,
            };
            if let Some(why) = why {
                out.skipped.push((c.id, why));
                continue;
            }
            let Some(item) = item else { continue };
            if self.resolve_audited(actor, &item, note).await? {
                out.resolved.push(c.id);
            } else {
                out.skipped
                    .push((c.id, "changed while it was being resolved".into()));
            }
        }
        Ok(out)
    }
}

//! The emergency switch (issue 17 "Emergency switch"; seed 004 §8.4): request, approve,
//! reject and end pauses, and the view of what is paused that every effect reads. Ending
//! one is guarded like starting it (issue 36): the password again, and before
//! `--pause-min-duration-secs` a different approver.
//!
//! Every process (each `serve`, each `worker`) reads the active pauses from the database at
//! most once per [`PAUSE_REFRESH`] and caches them, so a pause approved anywhere holds
//! everywhere within about a second, and the hot paths (each claim, each drive) cost no
//! query. The effects, one place each: submissions in [`Core::drive`] (and the submit job,
//! which holds rather than fails), job kinds in the worker's claim
//! ([`ActivePauses::unleased_kinds`]), endpoints in [`Core::deliver_webhook`]. Held work is
//! never failed and spends no attempt, so on resume it all proceeds.

use converge_wire::ErrorCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::actions::ActionError;
use super::actor::Actor;
use super::step_up::{StepUp, StepUpError, StepUpUse};
use super::{Core, ids};
use crate::domain::actions::check_reason;
use crate::domain::pause::{ActivePauses, PAUSABLE_JOB_KINDS, PauseStatus, PauseTarget};
use crate::store::{CreatePause, NewPause, PauseEndRequest, PauseMove, PauseRecord, StoreError};

/// How long a pending pause, or an early end's request, stays approvable: one hour (an
/// emergency is decided quickly, and a forgotten request should not be approvable days
/// later).
pub const PAUSE_TTL_MS: i64 = 3_600_000;

/// What ending a pause did ([`Core::end_pause`]).
#[derive(Debug, Clone)]
pub enum PauseEnd {
    /// Over: an active pause resumed, or a pending one cancelled.
    Ended(PauseRecord),
    /// An active pause younger than the minimum: its end awaits a different approver.
    Requested(PauseRecord),
}

/// How stale a process's view of the active pauses may be.
pub const PAUSE_REFRESH: Duration = Duration::from_secs(1);

/// How long after a held job is put back it is looked at again, ms: about as long as a
/// resume takes to reach every process.
pub const HOLD_RECHECK_MS: i64 = 1_000;

/// This process's cached view of the active pauses (shared by the clones of a [`Core`]),
/// with the core's clock's time it was read (epoch ms UTC): the injected clock, so a
/// simulated run refreshes it by simulated time and decides the same way every run.
#[derive(Clone, Default)]
pub struct PauseCache {
    inner: Arc<tokio::sync::Mutex<Option<(i64, ActivePauses)>>>,
}

impl std::fmt::Debug for PauseCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PauseCache")
    }
}

impl PauseCache {
    /// Forgets the cached view, so the next read goes to the database (after this process
    /// changed a pause).
    pub async fn invalidate(&self) {
        *self.inner.lock().await = None;
    }
}

impl Core {
    /// What is paused now, as of at most [`PAUSE_REFRESH`] ago. When the database cannot be
    /// read the last view stands (nothing is resumed by an outage); with no view yet,
    /// nothing is paused (and nothing proceeds anyway without the database).
    pub async fn active_pauses(&self) -> ActivePauses {
        let mut cached = self.pauses.inner.lock().await;
        let now = self.clock.now_ms();
        let refresh = PAUSE_REFRESH.as_millis() as i64;
        // A clock stepped back re-reads too (the view's age is unknown then).
        if let Some((at, view)) = cached.as_ref()
            && (*at..at.saturating_add(refresh)).contains(&now)
        {
            return view.clone();
        }
        match self.store.active_pause_targets().await {
            Ok(targets) => {
                let view = ActivePauses::from_targets(targets.iter().map(String::as_str));
                pause_gauges(&view);
                *cached = Some((now, view.clone()));
                view
            }
            Err(e) => {
                tracing::warn!(error = %e, "reading the active pauses failed; keeping the last view");
                cached.as_ref().map(|(_, v)| v.clone()).unwrap_or_default()
            }
        }
    }

    /// The pause requests as ops staff list them: pending and active ones (oldest first),
    /// then up to `ended` that ended (newest first).
    pub async fn pause_list(&self, ended: i64) -> Result<Vec<PauseRecord>, StoreError> {
        self.store.pauses(ended).await
    }

    /// The pauses in force now, read from the database (not the cached view), for the
    /// console's banner.
    pub async fn pauses_in_force(&self) -> Result<Vec<PauseRecord>, StoreError> {
        let mut all = self.store.pauses(0).await?;
        all.retain(|p| p.status == PauseStatus::Active);
        Ok(all)
    }

    /// How many pause requests wait for an approver: pending pauses, and active ones whose
    /// early end was asked for.
    pub async fn pauses_awaiting_approval(&self) -> Result<usize, StoreError> {
        let all = self.store.pauses(0).await?;
        let now = self.clock.now_ms();
        Ok(all
            .iter()
            .filter(|p| p.status == PauseStatus::Pending || p.open_end_request(now).is_some())
            .count())
    }

    /// Records a pause request (operators); it takes effect once a different approver
    /// approves it, for [`PAUSE_TTL_MS`].
    ///
    /// Errors: `invalid_target` / `invalid_reason` (400); `not_found` for an endpoint target
    /// that does not exist (404); `pause_open` when the target already has a pending or active
    /// pause (409).
    pub async fn request_pause(
        &self,
        actor: &Actor,
        target: &str,
        reason: &str,
    ) -> Result<PauseRecord, ActionError> {
        let ttl_ms = PAUSE_TTL_MS;
        let target: PauseTarget = target
            .parse()
            .map_err(|m| ActionError::Invalid(ErrorCode::InvalidTarget, m))?;
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        if let PauseTarget::Endpoint(id) = &target
            && self.store.endpoint(id).await?.is_none()
        {
            return Err(ActionError::NotFound("webhook endpoint"));
        }
        let now = self.clock.now_ms();
        let new = NewPause {
            id: ids::new_id("pause"),
            target: target.as_string(),
            reason: reason.trim().into(),
            requested_by: actor.username.clone(),
            now,
            expires_at: now + ttl_ms,
        };
        let audit = actor.entry(
            now,
            "pause_requested",
            &format!("pause:{}", new.id),
            &new.reason,
            String::new(),
            json!({"target": new.target, "status": PauseStatus::Pending}).to_string(),
        );
        for _ in 0..2 {
            match self.store.create_pause(&new, &audit).await? {
                CreatePause::Created(p) => return Ok(p),
                // A request nobody decided in time only holds the target until someone
                // asks again: close it as expired and insert once more.
                CreatePause::OpenExists if self.close_expired(actor, &new.target).await? => {}
                CreatePause::OpenExists => break,
            }
        }
        Err(ActionError::Conflict(
            ErrorCode::PauseOpen,
            format!("{} already has a pending or active pause", new.target),
        ))
    }

    /// Closes `target`'s pending pause if it expired; true when one was closed.
    async fn close_expired(&self, actor: &Actor, target: &str) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        let expired = self.store.pauses(0).await?.into_iter().find(|p| {
            p.target == target && p.status == PauseStatus::Pending && p.expires_at <= now
        });
        match expired {
            Some(p) => {
                self.move_pause(
                    actor,
                    &p,
                    PauseStatus::Cancelled,
                    "expired before a decision",
                    "pause_expired",
                    false,
                )
                .await
            }
            None => Ok(false),
        }
    }

    /// Whether `actor` could approve pause `id` now, read before the approver's password is
    /// checked; the caller answers every `false` like a wrong password. Approvable: a
    /// pending, unexpired pause someone else requested (its start), or an active pause
    /// with an unexpired early end request someone else made (its end, issue 36).
    pub async fn pause_approvable(&self, actor: &Actor, id: &str) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        Ok(self.store.pause(id).await?.is_some_and(|p| {
            (p.status == PauseStatus::Pending
                && p.requested_by != actor.username
                && p.expires_at > now)
                || p.open_end_request(now)
                    .is_some_and(|by| by != actor.username)
        }))
    }

    /// Approves a pending pause: it is in force from now, in this process at once and in
    /// every other within [`PAUSE_REFRESH`]. The approver must not be the requester. On an
    /// active pause with an early end request it approves the end instead
    /// ([`Self::end_pause`]): the pause is resumed; the approver must not be who asked to end it.
    ///
    /// Errors: `self_approval` (403), `not_pending` or `expired` (409), `not_found` (404).
    pub async fn approve_pause(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<PauseRecord, ActionError> {
        self.decide_pause(actor, id, reason, PauseStatus::Active, "pause_approved")
            .await
    }

    /// Rejects a pending pause (by someone other than the requester), or an active pause's
    /// early end request (by someone other than who asked; the pause stays in force).
    pub async fn reject_pause(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<PauseRecord, ActionError> {
        self.decide_pause(actor, id, reason, PauseStatus::Rejected, "pause_rejected")
            .await
    }

    async fn decide_pause(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
        to: PauseStatus,
        audit_action: &str,
    ) -> Result<PauseRecord, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let p = self
            .store
            .pause(id)
            .await?
            .ok_or(ActionError::NotFound("pause"))?;
        if p.status == PauseStatus::Active && p.end_requested_by.is_some() {
            return self
                .decide_pause_end(actor, p, reason, to == PauseStatus::Active)
                .await;
        }
        if p.requested_by == actor.username {
            return Err(ActionError::Forbidden(
                ErrorCode::SelfApproval,
                "a pause must be approved or rejected by someone other than its requester".into(),
            ));
        }
        if p.status != PauseStatus::Pending {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                format!("this pause is {}", p.status),
            ));
        }
        let now = self.clock.now_ms();
        if p.expires_at <= now {
            // Closed, so the target is free for a new request.
            self.move_pause(
                actor,
                &p,
                PauseStatus::Cancelled,
                "expired before a decision",
                "pause_expired",
                false,
            )
            .await?;
            return Err(ActionError::Conflict(
                ErrorCode::Expired,
                "this pause request expired; request again".into(),
            ));
        }
        let m = PauseMove {
            id: p.id.clone(),
            from: PauseStatus::Pending,
            to,
            by: actor.username.clone(),
            reason: reason.trim().into(),
            not_by_requester: true,
            unexpired_at: Some(now),
            end_approval: false,
            now,
        };
        let audit = actor.entry(
            now,
            audit_action,
            &format!("pause:{}", p.id),
            reason.trim(),
            json!({"target": p.target, "status": p.status, "requested_by": p.requested_by, "reason": p.reason}).to_string(),
            json!({"target": p.target, "status": to}).to_string(),
        );
        if !self.store.move_pause(&m, &audit).await? {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                "this pause was already decided".into(),
            ));
        }
        self.pauses.invalidate().await;
        Ok(self.store.pause(id).await?.unwrap_or(p))
    }

    /// Ends pause `id` as `actor` (operators, the requester included; the caller has
    /// checked the password again, [`Self::end_pause_with_step_up`]). A pending pause is
    /// cancelled. An active pause in force for at least the pause's minimum
    /// ([`super::console::ConsoleSettings::pause_min_ms`], from its approval)
    /// is resumed, and everything it held proceeds; a younger one is not: the end becomes a
    /// request, approvable for [`PAUSE_TTL_MS`] from now, that a different approver approves
    /// ([`Self::approve_pause`]) or rejects (issue 36: one person cannot undo what two
    /// started).
    ///
    /// Errors: `invalid_reason` (400), `not_found` (404), `not_open` (409) when it already
    /// ended, `end_requested` (409) when an early end already awaits an approver.
    pub async fn end_pause(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<PauseEnd, ActionError> {
        let min_active_ms = self.console.pause_min_ms;
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let p = self
            .store
            .pause(id)
            .await?
            .ok_or(ActionError::NotFound("pause"))?;
        let now = self.clock.now_ms();
        let (to, audit_action) = match p.status {
            PauseStatus::Active
                if now - p.approved_at.unwrap_or(p.requested_at) < min_active_ms =>
            {
                return self.request_pause_end(actor, p, reason.trim()).await;
            }
            PauseStatus::Active => (PauseStatus::Resumed, "pause_resumed"),
            PauseStatus::Pending => (PauseStatus::Cancelled, "pause_cancelled"),
            other @ (PauseStatus::Resumed | PauseStatus::Rejected | PauseStatus::Cancelled) => {
                return Err(ActionError::Conflict(
                    ErrorCode::NotOpen,
                    format!("this pause is {other}"),
                ));
            }
        };
        if !self
            .move_pause(actor, &p, to, reason.trim(), audit_action, false)
            .await?
        {
            return Err(ActionError::Conflict(
                ErrorCode::NotOpen,
                "this pause changed meanwhile; look again".into(),
            ));
        }
        self.pauses.invalidate().await;
        Ok(PauseEnd::Ended(self.store.pause(id).await?.unwrap_or(p)))
    }

    /// [`Self::end_pause`] after re-checking `step_up.who`'s password (issue 36: ending or
    /// cancelling a pause is a step-up, as approving one is). The check counts toward the
    /// same limits as sign-ins (`Check(RateLimited)` once over them); a wrong password is
    /// audited (`step_up_refused`) and answered `step_up_refused` (403). The caller has
    /// checked the role.
    pub async fn end_pause_with_step_up(
        &self,
        step_up: StepUp<'_>,
        id: &str,
        reason: &str,
    ) -> Result<PauseEnd, StepUpError> {
        check_reason(reason).map_err(StepUpError::InvalidReason)?;
        let store = self.store.as_ref();
        let who = step_up.who.clone();
        let ((), ok) = self
            .prove_step_up(&step_up, StepUpUse::Other, async {})
            .await?;
        if !ok {
            let e = who.entry(
                self.clock.now_ms(),
                "step_up_refused",
                &format!("pause:{}", id.chars().take(64).collect::<String>()),
                "wrong password to end or cancel a pause",
                String::new(),
                String::new(),
            );
            store.append_audit(&e).await?;
            return Err(StepUpError::Action(ActionError::Forbidden(
                ErrorCode::StepUpRefused,
                "not ended: re-enter your own password".into(),
            )));
        }
        Ok(self.end_pause(&who, id, reason).await?)
    }

    /// Records the early end of active pause `p` (audited `pause_end_requested`).
    async fn request_pause_end(
        &self,
        actor: &Actor,
        p: PauseRecord,
        reason: &str,
    ) -> Result<PauseEnd, ActionError> {
        let now = self.clock.now_ms();
        let ttl_ms = PAUSE_TTL_MS;
        let r = PauseEndRequest {
            id: p.id.clone(),
            by: actor.username.clone(),
            reason: reason.into(),
            now,
            expires_at: now + ttl_ms,
        };
        let audit = actor.entry(
            now,
            "pause_end_requested",
            &format!("pause:{}", p.id),
            reason,
            json!({"target": p.target, "status": p.status}).to_string(),
            json!({"target": p.target, "status": p.status, "end_requested_by": r.by}).to_string(),
        );
        if !self.store.request_pause_end(&r, &audit).await? {
            return Err(ActionError::Conflict(
                ErrorCode::EndRequested,
                "an early end of this pause already awaits an approver (or it changed meanwhile; look again)".into(),
            ));
        }
        Ok(PauseEnd::Requested(
            self.store.pause(&p.id).await?.unwrap_or(p),
        ))
    }

    /// Approves (the pause is resumed) or rejects (it stays in force) the early end
    /// request of active pause `p`, by someone other than who asked for it.
    async fn decide_pause_end(
        &self,
        actor: &Actor,
        p: PauseRecord,
        reason: &str,
        approve: bool,
    ) -> Result<PauseRecord, ActionError> {
        let now = self.clock.now_ms();
        let Some(asked_by) = p.open_end_request(now).map(str::to_owned) else {
            return Err(ActionError::Conflict(
                ErrorCode::Expired,
                "this early end request expired; ask again".into(),
            ));
        };
        if asked_by == actor.username {
            return Err(ActionError::Forbidden(
                ErrorCode::SelfApproval,
                "an early end must be approved or rejected by someone other than who asked for it"
                    .into(),
            ));
        }
        let before = json!({"target": p.target, "status": p.status, "end_requested_by": asked_by, "end_reason": p.end_reason}).to_string();
        let done = if approve {
            let m = PauseMove {
                id: p.id.clone(),
                from: PauseStatus::Active,
                to: PauseStatus::Resumed,
                by: actor.username.clone(),
                reason: reason.trim().into(),
                not_by_requester: false,
                unexpired_at: None,
                end_approval: true,
                now,
            };
            let audit = actor.entry(
                now,
                "pause_end_approved",
                &format!("pause:{}", p.id),
                reason.trim(),
                before,
                json!({"target": p.target, "status": PauseStatus::Resumed}).to_string(),
            );
            self.store.move_pause(&m, &audit).await?
        } else {
            let audit = actor.entry(
                now,
                "pause_end_rejected",
                &format!("pause:{}", p.id),
                reason.trim(),
                before,
                json!({"target": p.target, "status": p.status}).to_string(),
            );
            self.store
                .reject_pause_end(&p.id, &actor.username, now, &audit)
                .await?
        };
        if !done {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                "this early end was already decided".into(),
            ));
        }
        self.pauses.invalidate().await;
        Ok(self.store.pause(&p.id).await?.unwrap_or(p))
    }

    async fn move_pause(
        &self,
        actor: &Actor,
        p: &PauseRecord,
        to: PauseStatus,
        reason: &str,
        audit_action: &str,
        not_by_requester: bool,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        let m = PauseMove {
            id: p.id.clone(),
            from: p.status,
            to,
            by: actor.username.clone(),
            reason: reason.into(),
            not_by_requester,
            unexpired_at: None,
            end_approval: false,
            now,
        };
        let audit = actor.entry(
            now,
            audit_action,
            &format!("pause:{}", p.id),
            reason,
            json!({"target": p.target, "status": p.status}).to_string(),
            json!({"target": p.target, "status": to}).to_string(),
        );
        self.store.move_pause(&m, &audit).await
    }
}

/// Endpoints this process has reported paused, so a resumed one is set back to 0.
static PAUSED_ENDPOINTS: std::sync::Mutex<std::collections::BTreeSet<String>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

/// `converge_pause_active{target}`: 1 while the emergency switch pauses the target, else 0,
/// set at each refresh of this process's view (at least every `--monitor-ms`, and every
/// second in a process whose workers poll). Submissions and every pausable job kind are
/// always reported; an endpoint from its first pause on.
fn pause_gauges(active: &ActivePauses) {
    let set = |target: String, on: bool| {
        metrics::gauge!("converge_pause_active", "target" => target).set(if on {
            1.0
        } else {
            0.0
        });
    };
    set("submissions".into(), active.submissions());
    for kind in PAUSABLE_JOB_KINDS {
        set(format!("job:{kind}"), active.job_kind(kind));
    }
    let mut seen = PAUSED_ENDPOINTS.lock().unwrap_or_else(|p| p.into_inner());
    for t in active.targets() {
        if let PauseTarget::Endpoint(id) = t {
            seen.insert(id.clone());
        }
    }
    for id in seen.iter() {
        set(format!("endpoint:{id}"), active.endpoint(id));
    }
}

//! Ops actions under maker-checker (DESIGN.md "Ops console": query and retry run at once;
//! reverse and force_transition need a second person; a request pins the payment version and
//! a moved payment makes approval stale; requests expire; execution happens exactly once).
//!
//! Exactly once: only one decision can move a request from `pending` to `approved` (a
//! conditional update), and every execution step is idempotent — the channel refund is keyed
//! by the action id and each transition is conditional on the pinned version — so re-running
//! an approved or failed execution cannot refund or move the payment twice.

use converge_wire::ErrorCode;
use serde_json::json;

use super::actor::Actor;
use super::holds::CaptureInput;
use super::{Core, ids};
use crate::domain::actions::{
    ActionKind, ActionMoveKind, ActionStatus, HoldFacts, MAX_EVIDENCE, capture_refusal,
    check_reason, force_allowed, void_refusal,
};
use crate::domain::state::PaymentStatus;
use crate::store::{
    ActionMove, ActionRecord, ApprovalRow, CreateAction, NewAction, Payment, StoreError,
};

pub use converge_wire::governance::ApprovalInbox;

/// A request for an action.
#[derive(Debug, Clone)]
pub struct ActionRequest {
    /// `query`, `retry`, `reverse`, `force_transition`, `capture` or `void`.
    pub kind: String,
    /// Payment.
    pub payment_id: String,
    /// Why (required).
    pub reason: String,
    /// Force: the target status.
    pub target_status: Option<String>,
    /// Force: the evidence (required for force).
    pub evidence: Option<String>,
    /// Capture: the amount, integer minor units of the payment's currency (required for
    /// capture: > 0 and at most what is held).
    pub capture_amount: Option<i64>,
    /// Capture: whether it is the final capture, releasing the rest (default false).
    pub capture_final: Option<bool>,
}

/// Why an action step was refused. Each carries a stable code for the HTTP layer.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// Bad input (400).
    #[error("{1}")]
    Invalid(ErrorCode, String),
    /// No such payment or action (404).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Not allowed for this user (403).
    #[error("{1}")]
    Forbidden(ErrorCode, String),
    /// The request's state forbids it (409): pending exists, not pending, expired, stale.
    #[error("{1}")]
    Conflict(ErrorCode, String),
    /// Over a per-user allowance (429): the message, and the seconds until one is free.
    #[error("{0}")]
    RateLimited(String, u64),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<super::ServiceError> for ActionError {
    fn from(e: super::ServiceError) -> Self {
        match e {
            super::ServiceError::Store(s) => ActionError::Store(s),
            super::ServiceError::Contended(id) => ActionError::Conflict(
                ErrorCode::PaymentBusy,
                format!("payment {id} is busy; retry"),
            ),
        }
    }
}

/// How long after a reservation its `reverse` job is due, ms: the executing request normally
/// records the reversal well before.
pub const REVERSE_JOB_DELAY_MS: i64 = 30_000;

/// A forced transition's checks at request time: a payment status as the target (400
/// `invalid_target`), a whitelisted transition from the payment's status (409
/// `transition_not_allowed`: the payment's state decides, not the request's shape;
/// schemathesis found a well-formed request answered 400 here) and evidence of 1 to
/// [`MAX_EVIDENCE`] characters (400 `invalid_evidence`). Returns the target's name and the
/// trimmed evidence.
fn check_force_request(p: &Payment, req: &ActionRequest) -> Result<(String, String), ActionError> {
    let t: PaymentStatus = req
        .target_status
        .as_deref()
        .unwrap_or_default()
        .parse()
        .map_err(|_| {
            ActionError::Invalid(
                ErrorCode::InvalidTarget,
                "target_status must be a payment status".into(),
            )
        })?;
    if !force_allowed(p.status, t) {
        return Err(ActionError::Conflict(
            ErrorCode::TransitionNotAllowed,
            format!(
                "forcing {} -> {t} is not a whitelisted transition",
                p.status
            ),
        ));
    }
    let evidence = req.evidence.clone().unwrap_or_default().trim().to_string();
    if evidence.is_empty()
        || req.evidence.as_deref().unwrap_or_default().chars().count() > MAX_EVIDENCE
    {
        return Err(ActionError::Invalid(
            ErrorCode::InvalidEvidence,
            format!("evidence of 1 to {MAX_EVIDENCE} characters is required"),
        ));
    }
    Ok((t.as_str().to_string(), evidence))
}

fn payment_json(p: &Payment) -> String {
    json!({"status": p.status.as_str(), "version": p.version, "amount": p.amount, "currency": p.currency, "refunded_amount": p.refunded_amount})
        .to_string()
}

fn action_json(a: &ActionRecord) -> String {
    serde_json::to_string(a).unwrap_or_default()
}

impl Core {
    /// Requests action `req` as `actor` (the `/ops/v1` endpoint and the console's server
    /// function both come here): a `query` or `retry` first spends one of the actor's
    /// single-action allowance ([`super::console::ConsoleLimiters::action`]), then
    /// [`Self::record_action`]. Errors: `RateLimited` (429 `rate_limited` with
    /// `Retry-After`) over the allowance, with nothing recorded; the rest as
    /// [`Self::record_action`]'s.
    pub async fn request_action(
        &self,
        actor: &Actor,
        req: &ActionRequest,
    ) -> Result<ActionRecord, ActionError> {
        if matches!(
            req.kind.parse::<ActionKind>(),
            Ok(ActionKind::Query | ActionKind::Retry)
        ) {
            self.spend_action_allowance(&actor.username)?;
        }
        self.record_action(actor, req).await
    }

    /// Records a request, its allowance already spent or not needed (a bulk retry spends its
    /// own). Query and retry then run at once; reverse and force wait for an approver, for
    /// [`super::console::ConsoleSettings::action_ttl_ms`].
    pub async fn record_action(
        &self,
        actor: &Actor,
        req: &ActionRequest,
    ) -> Result<ActionRecord, ActionError> {
        let ttl_ms = self.console.action_ttl_ms;
        let kind: ActionKind = req
            .kind
            .parse()
            .map_err(|m| ActionError::Invalid(ErrorCode::InvalidAction, m))?;
        check_reason(&req.reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let p = self
            .store
            .payment(&req.payment_id)
            .await?
            .ok_or(ActionError::NotFound("payment"))?;
        let mut target = None;
        let mut evidence = String::new();
        let mut capture = None;
        match kind {
            ActionKind::ForceTransition => {
                let (t, e) = check_force_request(&p, req)?;
                target = Some(t);
                evidence = e;
            }
            ActionKind::Reverse if !crate::domain::actions::reversible(p.status) => {
                return Err(ActionError::Conflict(
                    ErrorCode::NotReversible,
                    format!("a {} payment cannot be reversed", p.status),
                ));
            }
            ActionKind::Capture => {
                capture = Some(self.check_capture_request(&p, req)?);
            }
            ActionKind::Void => {
                let hold = HoldFacts::of(&p, self.clock.now_ms());
                if let Some(why) = void_refusal(p.status, hold) {
                    return Err(ActionError::Conflict(ErrorCode::NotVoidable, why));
                }
            }
            _ => {}
        }
        let now = self.clock.now_ms();
        let new = NewAction {
            id: ids::new_id("act"),
            kind: kind.as_str().into(),
            payment_id: p.id.clone(),
            requested_by: actor.username.clone(),
            reason: req.reason.trim().into(),
            evidence,
            target_status: target,
            capture_amount: capture.map(|c: CaptureInput| c.amount),
            capture_final: capture.map(|c| c.last),
            payment_version: p.version,
            status: kind.initial_status().as_str().into(),
            now,
            expires_at: now + ttl_ms,
        };
        let audit = actor.entry(
            now,
            "action_requested",
            &format!("payment:{}", p.id),
            &new.reason,
            payment_json(&p),
            json!({"action": new.id, "kind": new.kind, "target_status": new.target_status, "evidence": new.evidence, "capture_amount": new.capture_amount, "capture_final": new.capture_final}).to_string(),
        );
        let action = match self.store.create_action(&new, &audit).await? {
            CreateAction::Created(a) => a,
            CreateAction::PendingExists => {
                return Err(ActionError::Conflict(
                    ErrorCode::ActionPending,
                    "this payment already has a pending request".into(),
                ));
            }
        };
        if kind.needs_approval() {
            Ok(action)
        } else {
            self.execute_action(actor, &action.id).await
        }
    }

    /// A capture request's checks at request time (issue 34): an amount > 0 (400
    /// `invalid_amount`), a payment whose hold may be captured now (409 `not_capturable`)
    /// and no more than it holds (409 `capture_exceeds_hold`). The execution checks again
    /// (the hold may have moved meanwhile; then the request is stale anyway).
    fn check_capture_request(
        &self,
        p: &Payment,
        req: &ActionRequest,
    ) -> Result<CaptureInput, ActionError> {
        let amount = req.capture_amount.filter(|a| *a > 0).ok_or_else(|| {
            ActionError::Invalid(
                ErrorCode::InvalidAmount,
                "a capture needs capture_amount: integer minor units > 0".into(),
            )
        })?;
        let hold = HoldFacts::of(p, self.clock.now_ms());
        if let Some(why) = capture_refusal(p.status, hold) {
            return Err(ActionError::Conflict(ErrorCode::NotCapturable, why));
        }
        let held = p.held_amount();
        if amount > held {
            return Err(ActionError::Conflict(
                ErrorCode::CaptureExceedsHold,
                format!(
                    "the capture of {} exceeds what is held, {}",
                    crate::domain::money::display(amount, &p.currency),
                    crate::domain::money::display(held, &p.currency)
                ),
            ));
        }
        Ok(CaptureInput {
            amount,
            last: req.capture_final.unwrap_or(false),
        })
    }

    /// The approvals inbox (issue 17): the requests that need an approver, pending ones and
    /// the `recent` latest decided ones, newest first, each with its payment's merchant,
    /// amount and status as they stand now. Queries and retries run at once and are left out,
    /// so they never flood it. A pending row whose payment moved is stale
    /// ([`ApprovalRow::stale`](crate::store::ApprovalRow::stale)): the page says so at once
    /// instead of offering Approve, by the same rule [`approve_action`](Self::approve_action)
    /// applies. At most 200 pending rows; `now` is the server's clock, for ages and expiry.
    pub async fn approval_inbox(&self, recent: i64) -> Result<ApprovalInbox, StoreError> {
        let kinds = ActionKind::approval_kinds();
        let items = |rows: Vec<ApprovalRow>| -> Vec<converge_wire::governance::ApprovalItem> {
            rows.into_iter().map(Into::into).collect()
        };
        Ok(ApprovalInbox {
            now: self.clock.now_ms(),
            pending: items(self.store.approval_requests(&kinds, true, 200).await?),
            decided: items(self.store.approval_requests(&kinds, false, recent).await?),
        })
    }

    /// How many requests wait for an approver (the count beside "Approvals" in the console's
    /// navigation): one `COUNT(*)`, not a page of rows.
    pub async fn pending_approval_count(&self) -> Result<i64, StoreError> {
        self.store
            .pending_approval_count(&ActionKind::approval_kinds())
            .await
    }

    /// Everything waiting for an approver, as the console's navigation counts it beside
    /// "Approvals": pending money requests and emergency-switch pauses (and pause ends) waiting
    /// for approval (issue 41: a pending pause showed "0" there). Errors: the store's.
    pub async fn approvals_waiting(&self) -> Result<i64, StoreError> {
        let pauses = self.pauses_awaiting_approval().await?;
        Ok(self.pending_approval_count().await? + i64::try_from(pauses).unwrap_or(i64::MAX))
    }

    /// Approves a pending request and executes it. The approver must not be the requester,
    /// nor have created the requester's account or given them power within the
    /// approval-conflict window (403 `approval_conflict`, issue 36); a request whose payment
    /// moved since it was made is stale; an expired one is refused.
    pub async fn approve_action(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<ActionRecord, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let a = self
            .store
            .action(id)
            .await?
            .ok_or(ActionError::NotFound("action"))?;
        if a.requested_by == actor.username {
            return Err(ActionError::Forbidden(
                ErrorCode::SelfApproval,
                "a request must be approved by someone else".into(),
            ));
        }
        self.refuse_approval_conflict(actor, &a.requested_by)
            .await?;
        self.check_pending(actor, &a).await?;
        let p = self
            .store
            .payment(&a.payment_id)
            .await?
            .ok_or(ActionError::NotFound("payment"))?;
        let now = self.clock.now_ms();
        if p.version != a.payment_version {
            self.close(
                actor,
                &a,
                ActionMoveKind::Stale,
                reason,
                json!({"pinned": a.payment_version, "now": p.version}),
            )
            .await?;
            return Err(ActionError::Conflict(
                ErrorCode::Stale,
                "the payment changed since the request; request again".into(),
            ));
        }
        let audit_action = ActionMoveKind::Approve.audit_action();
        let m = ActionMove {
            decision: Some((actor.username.clone(), reason.trim().into())),
            not_by_requester: Some(actor.username.clone()),
            unexpired_at: Some(now),
            ..ActionMove::of(ActionMoveKind::Approve, &a.id, now)
        };
        let audit = actor.entry(
            now,
            audit_action,
            &format!("action:{}", a.id),
            reason.trim(),
            action_json(&a),
            String::new(),
        );
        if !self.store.move_action(&m, &audit).await? {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                "this request was already decided".into(),
            ));
        }
        self.execute_action(actor, &a.id).await
    }

    /// Whether `actor` could approve request `id` now, read before the approver's password
    /// is checked: it exists, someone else made it, it is pending and unexpired, and its
    /// payment has not moved. An expired or stale request is closed as such on the way
    /// (what the password turns out to be does not change that). The caller answers every
    /// `false` exactly like a wrong password, so a session cannot tell them apart.
    pub async fn approvable(&self, actor: &Actor, id: &str) -> Result<bool, ActionError> {
        let Some(a) = self.store.action(id).await? else {
            return Ok(false);
        };
        if a.requested_by == actor.username || !ActionMoveKind::Approve.allowed_from(a.status) {
            return Ok(false);
        }
        if self
            .approval_conflict(&actor.username, &a.requested_by)
            .await?
        {
            return Ok(false);
        }
        if a.expires_at <= self.clock.now_ms() {
            self.close(
                actor,
                &a,
                ActionMoveKind::Expire,
                "expired before a decision",
                json!({}),
            )
            .await?;
            return Ok(false);
        }
        let Some(p) = self.store.payment(&a.payment_id).await? else {
            return Ok(false);
        };
        if p.version != a.payment_version {
            self.close(
                actor,
                &a,
                ActionMoveKind::Stale,
                "the payment changed since the request",
                json!({"pinned": a.payment_version, "now": p.version}),
            )
            .await?;
            return Ok(false);
        }
        Ok(true)
    }

    /// Rejects a pending request (by someone other than the requester).
    pub async fn reject_action(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<ActionRecord, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid(ErrorCode::InvalidReason, m))?;
        let a = self
            .store
            .action(id)
            .await?
            .ok_or(ActionError::NotFound("action"))?;
        if a.requested_by == actor.username {
            return Err(ActionError::Forbidden(
                ErrorCode::SelfApproval,
                "the requester cancels, someone else rejects".into(),
            ));
        }
        self.check_pending(actor, &a).await?;
        self.close(actor, &a, ActionMoveKind::Reject, reason, json!({}))
            .await?;
        Ok(self.store.action(id).await?.unwrap_or(a))
    }

    /// Cancels one's own pending request.
    pub async fn cancel_action(
        &self,
        actor: &Actor,
        id: &str,
    ) -> Result<ActionRecord, ActionError> {
        let a = self
            .store
            .action(id)
            .await?
            .ok_or(ActionError::NotFound("action"))?;
        if a.requested_by != actor.username {
            return Err(ActionError::Forbidden(
                ErrorCode::NotRequester,
                "only the requester can cancel a request".into(),
            ));
        }
        self.check_pending(actor, &a).await?;
        self.close(
            actor,
            &a,
            ActionMoveKind::Cancel,
            "cancelled by the requester",
            json!({}),
        )
        .await?;
        Ok(self.store.action(id).await?.unwrap_or(a))
    }

    async fn check_pending(&self, actor: &Actor, a: &ActionRecord) -> Result<(), ActionError> {
        if a.status != ActionStatus::Pending {
            return Err(ActionError::Conflict(
                ErrorCode::NotPending,
                format!("this request is {}", a.status),
            ));
        }
        if a.expires_at <= self.clock.now_ms() {
            self.close(
                actor,
                a,
                ActionMoveKind::Expire,
                "expired before a decision",
                json!({}),
            )
            .await?;
            return Err(ActionError::Conflict(
                ErrorCode::Expired,
                "this request expired; request again".into(),
            ));
        }
        Ok(())
    }

    /// Moves a pending request to the final status of `step` with its audit record.
    async fn close(
        &self,
        actor: &Actor,
        a: &ActionRecord,
        step: ActionMoveKind,
        reason: &str,
        detail: serde_json::Value,
    ) -> Result<bool, ActionError> {
        let now = self.clock.now_ms();
        let audit_action = step.audit_action();
        let m = ActionMove {
            decision: Some((actor.username.clone(), reason.trim().into())),
            result: Some(detail.to_string()),
            ..ActionMove::of(step, &a.id, now)
        };
        let audit = actor.entry(
            now,
            audit_action,
            &format!("action:{}", a.id),
            reason.trim(),
            action_json(a),
            detail.to_string(),
        );
        Ok(self.store.move_action(&m, &audit).await?)
    }

    /// Runs an approved (or earlier failed) action. Safe to call again: each step is
    /// idempotent. Returns the action as it ends (`executed` or `failed`).
    #[tracing::instrument(name = "execute_action", skip_all, fields(action_id = %id, actor = %actor.username))]
    pub async fn execute_action(
        &self,
        actor: &Actor,
        id: &str,
    ) -> Result<ActionRecord, ActionError> {
        let a = self
            .store
            .action(id)
            .await?
            .ok_or(ActionError::NotFound("action"))?;
        if !ActionMoveKind::Execute.allowed_from(a.status) {
            return Err(ActionError::Conflict(
                ErrorCode::NotExecutable,
                format!("this request is {}", a.status),
            ));
        }
        let p = self
            .store
            .payment(&a.payment_id)
            .await?
            .ok_or(ActionError::NotFound("payment"))?;
        let outcome = match a.kind.parse::<ActionKind>() {
            Ok(ActionKind::Query) => self.run_query(&a, p).await,
            Ok(ActionKind::Retry) => {
                let woken = self.store.wake_jobs(&p.id, self.clock.now_ms()).await?;
                Ok(json!({"jobs_woken": woken}))
            }
            Ok(ActionKind::Reverse) => self.run_reverse(&a, p).await,
            Ok(ActionKind::ForceTransition) => self.run_force(&a, p).await,
            Ok(ActionKind::Capture) => self.run_capture(&a, p).await,
            Ok(ActionKind::Void) => self.run_void(&a, p).await,
            Err(m) => Err(m),
        };
        let now = self.clock.now_ms();
        let (step, result) = match outcome {
            Ok(r) => (ActionMoveKind::Execute, r),
            Err(why) => (ActionMoveKind::Fail, json!({"error": why})),
        };
        let audit_action = step.audit_action();
        let m = ActionMove {
            result: Some(result.to_string()),
            ..ActionMove::of(step, &a.id, now)
        };
        let after = self
            .store
            .payment(&a.payment_id)
            .await?
            .map(|p| payment_json(&p))
            .unwrap_or_default();
        let audit = actor.entry(
            now,
            audit_action,
            &format!("payment:{}", a.payment_id),
            &a.reason,
            result.to_string(),
            after,
        );
        if !self.store.move_action(&m, &audit).await? {
            return Err(ActionError::Conflict(
                ErrorCode::NotExecutable,
                "another execution finished first".into(),
            ));
        }
        Ok(self.store.action(id).await?.unwrap_or(a))
    }
}

//! Ops actions under maker-checker (DESIGN.md "Ops console": query and retry run at once;
//! reverse and force_transition need a second person; a request pins the payment version and
//! a moved payment makes approval stale; requests expire; execution happens exactly once).
//!
//! Exactly once: only one decision can move a request from `pending` to `approved` (a
//! conditional update), and every execution step is idempotent — the channel refund is keyed
//! by the action id and each transition is conditional on the pinned version — so re-running
//! an approved or failed execution cannot refund or move the payment twice.

use serde_json::json;

use super::payments::Extras;
use super::resolve::{QueryVerdict, query_verdict, suspense_key};
use super::{Core, ids};
use crate::channel::{CancelOutcome, RefundOutcome};
use crate::domain::actions::{
    ActionKind, ActionMoveKind, ActionStatus, MAX_EVIDENCE, check_reason, force_allowed,
};
use crate::domain::state::{PaymentEvent, PaymentStatus, check, rule};
use crate::store::{
    ActionMove, ActionRecord, ApprovalRow, AuditEntry, CreateAction, JobKind, NewAction, NewJob,
    Payment, ReserveReversal, ReversalReservation, StoreError, TransitionResult,
};

/// Who acts, for the audit log.
#[derive(Debug, Clone)]
pub struct Actor {
    /// Username.
    pub username: String,
    /// Roles, comma-separated.
    pub roles: String,
    /// Request metadata, JSON text (client address).
    pub meta: String,
}

impl Actor {
    /// An audit entry by this actor now.
    pub fn entry(
        &self,
        at: i64,
        action: &str,
        target: &str,
        reason: &str,
        before: String,
        after: String,
    ) -> AuditEntry {
        AuditEntry {
            at,
            actor: self.username.clone(),
            roles: self.roles.clone(),
            action: action.into(),
            target: target.into(),
            reason: reason.into(),
            before,
            after,
            meta: self.meta.clone(),
        }
    }
}

/// The approvals inbox: pending requests and recently decided ones, newest first.
#[derive(Debug, Clone)]
pub struct ApprovalInbox {
    /// Waiting for an approver.
    pub pending: Vec<ApprovalRow>,
    /// Approved, executed, failed, rejected, cancelled or expired.
    pub decided: Vec<ApprovalRow>,
}

/// A request for an action.
#[derive(Debug, Clone)]
pub struct ActionRequest {
    /// `query`, `retry`, `reverse` or `force_transition`.
    pub kind: String,
    /// Payment.
    pub payment_id: String,
    /// Why (required).
    pub reason: String,
    /// Force: the target status.
    pub target_status: Option<String>,
    /// Force: the evidence (required for force).
    pub evidence: Option<String>,
}

/// Why an action step was refused. Each carries a stable code for the HTTP layer.
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    /// Bad input (400).
    #[error("{1}")]
    Invalid(&'static str, String),
    /// No such payment or action (404).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// Not allowed for this user (403).
    #[error("{1}")]
    Forbidden(&'static str, String),
    /// The request's state forbids it (409): pending exists, not pending, expired, stale.
    #[error("{1}")]
    Conflict(&'static str, String),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<super::ServiceError> for ActionError {
    fn from(e: super::ServiceError) -> Self {
        match e {
            super::ServiceError::Store(s) => ActionError::Store(s),
            super::ServiceError::Contended(id) => {
                ActionError::Conflict("payment_busy", format!("payment {id} is busy; retry"))
            }
        }
    }
}

/// How long after a reservation its `reverse` job is due, ms: the executing request normally
/// records the reversal well before.
pub const REVERSE_JOB_DELAY_MS: i64 = 30_000;

fn payment_json(p: &Payment) -> String {
    json!({"status": p.status.as_str(), "version": p.version, "amount": p.amount, "refunded_amount": p.refunded_amount})
        .to_string()
}

fn action_json(a: &ActionRecord) -> String {
    serde_json::to_string(a).unwrap_or_default()
}

impl Core {
    /// Records a request. Query and retry then run at once; reverse and force wait for an
    /// approver. `ttl_ms` is how long a pending request stays approvable.
    pub async fn request_action(
        &self,
        actor: &Actor,
        req: &ActionRequest,
        ttl_ms: i64,
    ) -> Result<ActionRecord, ActionError> {
        let kind: ActionKind = req
            .kind
            .parse()
            .map_err(|m| ActionError::Invalid("invalid_action", m))?;
        check_reason(&req.reason).map_err(|m| ActionError::Invalid("invalid_reason", m))?;
        let p = self
            .store
            .payment(&req.payment_id)
            .await?
            .ok_or(ActionError::NotFound("payment"))?;
        let mut target = None;
        let mut evidence = String::new();
        match kind {
            ActionKind::ForceTransition => {
                let t: PaymentStatus = req
                    .target_status
                    .as_deref()
                    .unwrap_or_default()
                    .parse()
                    .map_err(|_| {
                        ActionError::Invalid(
                            "invalid_target",
                            "target_status must be a payment status".into(),
                        )
                    })?;
                // The payment's state decides, not the request's shape: 409 (schemathesis found
                // a well-formed request answered 400 here).
                if !force_allowed(p.status, t) {
                    return Err(ActionError::Conflict(
                        "transition_not_allowed",
                        format!(
                            "forcing {} -> {t} is not a whitelisted transition",
                            p.status
                        ),
                    ));
                }
                evidence = req.evidence.clone().unwrap_or_default().trim().to_string();
                if evidence.is_empty()
                    || req.evidence.as_deref().unwrap_or_default().chars().count() > MAX_EVIDENCE
                {
                    return Err(ActionError::Invalid(
                        "invalid_evidence",
                        format!("evidence of 1 to {MAX_EVIDENCE} characters is required"),
                    ));
                }
                target = Some(t.as_str().to_string());
            }
            ActionKind::Reverse if !crate::domain::actions::reversible(p.status) => {
                return Err(ActionError::Conflict(
                    "not_reversible",
                    format!("a {} payment cannot be reversed", p.status),
                ));
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
            payment_version: p.version,
            status: ActionStatus::initial(kind).as_str().into(),
            now,
            expires_at: now + ttl_ms,
        };
        let audit = actor.entry(
            now,
            "action_requested",
            &format!("payment:{}", p.id),
            &new.reason,
            payment_json(&p),
            json!({"action": new.id, "kind": new.kind, "target_status": new.target_status, "evidence": new.evidence}).to_string(),
        );
        let action = match self.store.create_action(&new, &audit).await? {
            CreateAction::Created(a) => a,
            CreateAction::PendingExists => {
                return Err(ActionError::Conflict(
                    "action_pending",
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

    /// The approvals inbox (issue 17): the requests that need an approver, pending ones and
    /// the `recent` latest decided ones, newest first, each with its payment's merchant,
    /// amount and status as they stand now. Queries and retries run at once and are left out,
    /// so they never flood it. A pending row whose payment moved is stale
    /// ([`ApprovalRow::stale`](crate::store::ApprovalRow::stale)): the page says so at once
    /// instead of offering Approve, by the same rule [`approve_action`](Self::approve_action)
    /// applies. At most 200 pending rows.
    pub async fn approval_inbox(&self, recent: i64) -> Result<ApprovalInbox, StoreError> {
        let kinds = ActionKind::approval_kinds();
        Ok(ApprovalInbox {
            pending: self.store.approval_requests(&kinds, true, 200).await?,
            decided: self.store.approval_requests(&kinds, false, recent).await?,
        })
    }

    /// How many requests wait for an approver (the count beside "Approvals" in the console's
    /// navigation): one `COUNT(*)`, not a page of rows.
    pub async fn pending_approval_count(&self) -> Result<i64, StoreError> {
        self.store
            .pending_approval_count(&ActionKind::approval_kinds())
            .await
    }

    /// Approves a pending request and executes it. The approver must not be the requester; a
    /// request whose payment moved since it was made is stale; an expired one is refused.
    pub async fn approve_action(
        &self,
        actor: &Actor,
        id: &str,
        reason: &str,
    ) -> Result<ActionRecord, ActionError> {
        check_reason(reason).map_err(|m| ActionError::Invalid("invalid_reason", m))?;
        let a = self
            .store
            .action(id)
            .await?
            .ok_or(ActionError::NotFound("action"))?;
        if a.requested_by == actor.username {
            return Err(ActionError::Forbidden(
                "self_approval",
                "a request must be approved by someone else".into(),
            ));
        }
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
                "stale",
                "the payment changed since the request; request again".into(),
            ));
        }
        let (from, to, audit_action) = ActionMoveKind::Approve.rule();
        let m = ActionMove {
            id: a.id.clone(),
            from: names(from),
            to: to.as_str().into(),
            decision: Some((actor.username.clone(), reason.trim().into())),
            not_by_requester: Some(actor.username.clone()),
            unexpired_at: Some(now),
            result: None,
            now,
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
                "not_pending",
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
        if a.requested_by == actor.username || !ActionMoveKind::Approve.allowed_from(&a.status) {
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
        check_reason(reason).map_err(|m| ActionError::Invalid("invalid_reason", m))?;
        let a = self
            .store
            .action(id)
            .await?
            .ok_or(ActionError::NotFound("action"))?;
        if a.requested_by == actor.username {
            return Err(ActionError::Forbidden(
                "self_approval",
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
                "not_requester",
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
        if a.status != ActionStatus::Pending.as_str() {
            return Err(ActionError::Conflict(
                "not_pending",
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
                "expired",
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
        let (from, to, audit_action) = step.rule();
        let m = ActionMove {
            id: a.id.clone(),
            from: names(from),
            to: to.as_str().into(),
            decision: Some((actor.username.clone(), reason.trim().into())),
            result: Some(detail.to_string()),
            now,
            ..ActionMove::default()
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
        if !ActionMoveKind::Execute.allowed_from(&a.status) {
            return Err(ActionError::Conflict(
                "not_executable",
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
            Err(m) => Err(m),
        };
        let now = self.clock.now_ms();
        let (step, result) = match outcome {
            Ok(r) => (ActionMoveKind::Execute, r),
            Err(why) => (ActionMoveKind::Fail, json!({"error": why})),
        };
        let (from, to, audit_action) = step.rule();
        let m = ActionMove {
            id: a.id.clone(),
            from: names(from),
            to: to.as_str().into(),
            result: Some(result.to_string()),
            now,
            ..ActionMove::default()
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
                "not_executable",
                "another execution finished first".into(),
            ));
        }
        Ok(self.store.action(id).await?.unwrap_or(a))
    }

    async fn run_query(&self, a: &ActionRecord, p: Payment) -> Result<serde_json::Value, String> {
        let answer = self.channel.query(&p.channel_key).await;
        let source = format!("action:{}", a.id);
        let shown = format!("{answer:?}");
        // An ops query settles what the worker's query would, and only an UNKNOWN payment.
        if p.status == PaymentStatus::Unknown {
            if let QueryVerdict::Settles(event, extras) = query_verdict(&p, answer) {
                let after = self
                    .apply(&p, event, &source, extras)
                    .await
                    .map_err(|e| e.to_string())?;
                self.drive(after, &source)
                    .await
                    .map_err(|e| e.to_string())?;
            }
        }
        let now = self
            .store
            .payment(&p.id)
            .await
            .map_err(|e| e.to_string())?
            .map(|p| p.status.as_str());
        Ok(json!({"answer": shown, "status": now}))
    }

    /// Reverses at the channel what the payment still holds. The reversal first reserves the
    /// payment at the pinned version (while no merchant refund is pending), so a merchant
    /// refund racing it is refused rather than issued beside it; only then does it refund at
    /// the channel (keyed by the action id) and record REVERSED.
    async fn run_reverse(&self, a: &ActionRecord, p: Payment) -> Result<serde_json::Value, String> {
        if p.status == PaymentStatus::Reversed {
            return Ok(json!({"status": "REVERSED", "note": "already reversed"}));
        }
        let now = self.clock.now_ms();
        let reservation = ReserveReversal {
            payment_id: p.id.clone(),
            action_id: a.id.clone(),
            pinned_version: a.payment_version,
            now,
            job: NewJob {
                kind: JobKind::Reverse,
                payment_id: Some(p.id.clone()),
                refund_id: None,
                // Later than this request's own channel call takes: the job finishes a
                // reversal whose request died (running beside it would be harmless anyway).
                run_at: now + REVERSE_JOB_DELAY_MS,
                max_attempts: self.timings.max_attempts,
            },
        };
        let held = match self
            .store
            .reserve_reversal(&reservation)
            .await
            .map_err(|e| e.to_string())?
        {
            ReversalReservation::Reserved(p) | ReversalReservation::AlreadyHeld(p) => p,
            ReversalReservation::NoPayment => return Err("payment vanished".into()),
            ReversalReservation::Refused {
                payment,
                pending_refunds,
            } => {
                return Err(if payment.version != a.payment_version {
                    format!(
                        "payment moved from version {} to {}",
                        a.payment_version, payment.version
                    )
                } else if pending_refunds > 0 {
                    format!("{pending_refunds} merchant refund(s) still pending")
                } else {
                    format!("a {} payment cannot be reversed", payment.status)
                });
            }
        };
        let remaining = held.unrefunded();
        self.finish_reversal(&a.id, held, &format!("action:{}", a.id))
            .await?;
        Ok(json!({"status": "REVERSED", "refunded_at_channel": remaining}))
    }

    /// Finishes a reserved reversal (by its action's execution or by its `reverse` job):
    /// refunds the remaining amount at the channel under the action id (idempotent there), then
    /// records REVERSED with the reversing ledger batch. A refusal by the channel releases the
    /// reservation; an undecidable answer keeps it for the job. Safe to run twice.
    pub async fn finish_reversal(
        &self,
        action_id: &str,
        held: Payment,
        source: &str,
    ) -> Result<Payment, String> {
        if held.reversal_id.as_deref() != Some(action_id) {
            return Err(format!(
                "action {action_id} holds no reservation on {}",
                held.id
            ));
        }
        let remaining = held.unrefunded();
        match self
            .channel
            .refund(&held.channel_key, action_id, remaining)
            .await
        {
            RefundOutcome::Succeeded => {}
            RefundOutcome::Rejected { reason } => {
                self.store
                    .release_reversal(&held.id, action_id, self.clock.now_ms())
                    .await
                    .map_err(|e| e.to_string())?;
                return Err(format!("channel refused the refund: {reason}"));
            }
            RefundOutcome::Error { detail } => {
                return Err(format!("refund outcome unknown (execute again): {detail}"));
            }
        }
        // The channel has refunded: record it. Nothing can reserve the payment meanwhile, but
        // a SUSPENSE payment may still be posted (SUSPENSE -> SUCCESS), so follow its moves.
        let mut p = held;
        for _ in 0..8 {
            if p.status == PaymentStatus::Reversed {
                return Ok(p);
            }
            // The row says what the reversal posts: the reversing batch from SUCCESS, nothing
            // from SUSPENSE (never posted).
            let r = rule(p.status, PaymentEvent::Reversed).map_err(|e| e.to_string())?;
            let extras = Extras {
                detail: format!("reversed the remaining {remaining} at the channel"),
                event_id: Some(format!("{}@{action_id}", PaymentEvent::Reversed)),
                ..Extras::default()
            };
            let t = self.step(&p, r, source, extras, self.clock.now_ms());
            match self
                .store
                .apply_transition(&t)
                .await
                .map_err(|e| e.to_string())?
            {
                TransitionResult::Applied(after) => return Ok(after),
                TransitionResult::DuplicateEvent => {
                    return self
                        .store
                        .payment(&p.id)
                        .await
                        .map_err(|e| e.to_string())?
                        .ok_or_else(|| "payment vanished".into());
                }
                TransitionResult::Stale(now) => p = now,
                TransitionResult::Refused(e) => {
                    return Err(format!("refused by the state machine: {e}"));
                }
            }
        }
        Err("the payment kept moving; the reverse job records it".into())
    }

    async fn run_force(&self, a: &ActionRecord, p: Payment) -> Result<serde_json::Value, String> {
        let target: PaymentStatus = a
            .target_status
            .as_deref()
            .unwrap_or_default()
            .parse()
            .map_err(|_| "bad target".to_string())?;
        if p.status == target {
            return Ok(json!({"status": target.as_str(), "note": "already there"}));
        }
        if p.version != a.payment_version || !force_allowed(p.status, target) {
            return Err(format!(
                "payment is {} at version {}; the request pinned version {}",
                p.status, p.version, a.payment_version
            ));
        }
        let now = self.clock.now_ms();
        if (p.status, target) == (PaymentStatus::Unknown, PaymentStatus::Failed) {
            match self.channel.cancel(&p.channel_key).await {
                CancelOutcome::Cancelled => {}
                CancelOutcome::AlreadyCharged { amount, currency } => {
                    return Err(format!(
                        "the channel holds a charge of {amount} {currency}; not failing it"
                    ));
                }
                CancelOutcome::Error { detail } => {
                    return Err(format!("could not fence the key: {detail}"));
                }
            }
        }
        let after = self.forced(a, &p, target).await?;
        if after.status == PaymentStatus::Success {
            let _ = self
                .store
                .resolve_error_by_key(
                    &suspense_key(&p.id),
                    &format!("forced to SUCCESS by {}", a.id),
                    "system",
                    now,
                )
                .await;
        }
        if after.status == PaymentStatus::ChannelSuccess {
            self.drive(after, &format!("action:{}", a.id))
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(json!({"status": target.as_str()}))
    }

    /// Applies an approved force-transition to `target`, conditional on the pinned version,
    /// with what its row in [`FORCE_WHITELIST`](crate::domain::state::FORCE_WHITELIST) writes.
    async fn forced(
        &self,
        a: &ActionRecord,
        p: &Payment,
        target: PaymentStatus,
    ) -> Result<Payment, String> {
        let r = check(p.status, PaymentEvent::Forced, target)
            .map_err(|e| format!("refused by the state machine: {e}"))?;
        let pinned = Payment {
            version: a.payment_version,
            ..p.clone()
        };
        let extras = Extras {
            detail: a.evidence.clone(),
            event_id: Some(format!("{}@{}", PaymentEvent::Forced, a.id)),
            ..Extras::default()
        };
        let t = self.step(
            &pinned,
            r,
            &format!("action:{}", a.id),
            extras,
            self.clock.now_ms(),
        );
        match self
            .store
            .apply_transition(&t)
            .await
            .map_err(|e| e.to_string())?
        {
            TransitionResult::Applied(after) => Ok(after),
            TransitionResult::DuplicateEvent => self
                .store
                .payment(&p.id)
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| "payment vanished".into()),
            TransitionResult::Stale(now) => Err(format!(
                "payment moved to {} (version {}) before the change applied",
                now.status, now.version
            )),
            TransitionResult::Refused(e) => Err(format!("refused by the state machine: {e}")),
        }
    }
}

/// Stored names of `statuses`, for a conditional move.
fn names(statuses: &[ActionStatus]) -> Vec<String> {
    statuses.iter().map(|s| s.as_str().to_string()).collect()
}

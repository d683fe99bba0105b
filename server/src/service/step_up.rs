//! Approvals that need the approver's password again (step-up): a maker-checker action (a
//! reversal, a forced transition) and a pause (DESIGN.md "Ops console": dual approval; OWASP
//! Authentication Cheat Sheet, "Reauthentication"; issue 13).

use std::future::Future;

use super::Core;
use super::actions::ActionError;
use super::actor::Actor;
use super::sign_in::{Credentials, LoginError};
use crate::domain::actions::check_reason;
use crate::domain::throttle::AttemptKind;
use crate::store::{ActionRecord, PauseRecord, StoreError};

/// Why a step-up approval did not approve.
#[derive(Debug, thiserror::Error)]
pub enum StepUpError {
    /// The reason is blank or too long (checked before the password, and not counted).
    #[error("{0}")]
    InvalidReason(String),
    /// Not approved: one answer for a wrong password, nothing to approve, one's own
    /// request, and one already decided, expired or stale (audited as `approval_refused`).
    #[error(
        "not approved: re-enter your own password, for a pending request someone else made that is still current"
    )]
    Refused,
    /// The password check was not admitted (`RateLimited`) or its record failed.
    #[error(transparent)]
    Check(#[from] LoginError),
    /// Approved, but its execution met something (a busy payment), said as is.
    #[error(transparent)]
    Action(#[from] ActionError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Who approves, and the proof asked again: the approver's own password, checked as a
/// sign-in from client address `addr` would be.
pub struct StepUp<'a> {
    /// The password checks and their throttle.
    pub credentials: &'a Credentials,
    /// The approver (its username is the account checked).
    pub who: Actor,
    /// The approver's client address, for the throttle.
    pub addr: &'a str,
    /// The password as entered.
    pub password: &'a str,
}

/// What a step-up approval is about: the audit target of a refusal (`action:<id>`,
/// `pause:<id>`, `privilege:<id>`) and the reason recorded with it.
pub(super) struct StepUpTarget {
    /// Audit target, at most 64 characters of the id.
    pub(super) target: String,
    /// Why, in the `approval_refused` record.
    pub(super) refusal: &'static str,
}

impl Core {
    /// Approves (and executes) maker-checker request `id` as `step_up.who` after re-checking its
    /// password ([`Self::with_step_up`]'s rule). The caller has checked the role. Errors:
    /// [`StepUpError`]; an approved request whose execution found the payment busy is
    /// `Action(Conflict("payment_busy"))`.
    pub async fn approve_action_with_step_up(
        &self,
        step_up: StepUp<'_>,
        id: &str,
        reason: &str,
    ) -> Result<ActionRecord, StepUpError> {
        // The approval-conflict rule (issue 36) does not depend on the password, so it is
        // said as is, before the password is checked (no oracle, no failed attempt).
        if let Some(a) = self.store.action(id).await? {
            self.refuse_approval_conflict(&step_up.who, &a.requested_by)
                .await?;
        }
        self.with_step_up(
            step_up,
            reason,
            StepUpTarget {
                target: format!("action:{}", id.chars().take(64).collect::<String>()),
                refusal: "wrong password, or a request this user cannot approve",
            },
            |who| async move { self.approvable(&who, id).await },
            |who| async move {
                match self.approve_action(&who, id, reason).await {
                    // Decided, expired or moved in between: refused like the rest.
                    Err(
                        ActionError::NotFound(_)
                        | ActionError::Forbidden(..)
                        | ActionError::Conflict("not_pending" | "expired" | "stale", _),
                    ) => None,
                    // Approved (its execution may still have met something, e.g. a busy
                    // payment, which is said as is), or storage failed.
                    other => Some(other),
                }
            },
        )
        .await
    }

    /// Approves pause `id` as `step_up.who` after re-checking its password, by the same rule
    /// as an action's approval ([`Self::with_step_up`]). The caller has checked the role.
    pub async fn approve_pause_with_step_up(
        &self,
        step_up: StepUp<'_>,
        id: &str,
        reason: &str,
    ) -> Result<PauseRecord, StepUpError> {
        self.with_step_up(
            step_up,
            reason,
            StepUpTarget {
                target: format!("pause:{}", id.chars().take(64).collect::<String>()),
                refusal: "wrong password, or a pause this user cannot approve",
            },
            |who| async move { self.pause_approvable(&who, id).await },
            |who| async move {
                match self.approve_pause(&who, id, reason).await {
                    Err(
                        ActionError::NotFound(_)
                        | ActionError::Forbidden(..)
                        | ActionError::Conflict(..),
                    ) => None,
                    other => Some(other),
                }
            },
        )
        .await
    }

    /// The one rule of every approval that needs the approver's password again. The password
    /// check is throttled with the sign-ins (`Check(RateLimited)` once over the limits): its
    /// failures count for sign-ins too, while it meets only its own (account, address)
    /// delay, never an address's limit that others' failed sign-ins filled
    /// ([`crate::domain::throttle`]).
    /// Whatever makes an approval impossible — a wrong password, nothing to approve, one's
    /// own request, one already decided, expired or stale — gets one answer
    /// ([`StepUpError::Refused`]) after the same work: the argon2 verification always runs
    /// and each refusal is audited alike (`approval_refused`), so the answer never tells the
    /// reasons apart.
    ///
    /// The throttle counts password checks, not refusals (issue 36, the approver locked out
    /// in a busy incident): the attempt is a failure only when the password did not match.
    /// A correct password on a request that turned stale (its payment moved), expired or was
    /// decided meanwhile is a good check, so approving a run of such requests cannot lock the
    /// approver out of the next approval (an emergency pause). What a stolen session could
    /// learn from that is no more than sign-in gives: every wrong guess still counts toward
    /// the (account, address) delay.
    ///
    /// `approvable` says whether `who` could approve it at all; `approve` approves it and
    /// gives `None` for a refusal that must look like the others.
    pub(super) async fn with_step_up<T, E, Fa, Fd>(
        &self,
        step_up: StepUp<'_>,
        reason: &str,
        what: StepUpTarget,
        approvable: impl FnOnce(Actor) -> Fa,
        approve: impl FnOnce(Actor) -> Fd,
    ) -> Result<T, StepUpError>
    where
        E: Into<ActionError>,
        Fa: Future<Output = Result<bool, E>>,
        Fd: Future<Output = Option<Result<T, ActionError>>>,
    {
        let StepUp {
            credentials,
            who,
            addr,
            password,
        } = step_up;
        check_reason(reason).map_err(StepUpError::InvalidReason)?;
        let store = self.store.as_ref();
        let attempt = credentials
            .begin_attempt(
                store,
                &who.username,
                addr,
                AttemptKind::StepUp,
                self.clock.now_ms(),
            )
            .await?;
        let can = approvable(who.clone()).await.map_err(Into::into);
        let user = credentials
            .verify_user(store, &who.username, password)
            .await;
        let approved = if matches!(can, Ok(true)) && matches!(user, Ok(Some(_))) {
            approve(who.clone()).await
        } else {
            None
        };
        // The password alone decides the attempt's outcome (see above).
        let password_ok = matches!(user, Ok(Some(_)));
        credentials
            .finish_attempt(store, attempt, password_ok, self.clock.now_ms())
            .await?;
        can?;
        user?;
        if let Some(result) = approved {
            return Ok(result?);
        }
        let e = who.entry(
            self.clock.now_ms(),
            "approval_refused",
            &what.target,
            what.refusal,
            String::new(),
            String::new(),
        );
        store.append_audit(&e).await?;
        Err(StepUpError::Refused)
    }
}

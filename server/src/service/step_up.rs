//! Approvals that need the approver's proof again (step-up): a maker-checker action (a
//! reversal, a forced transition), a pause, a privilege request (DESIGN.md "Ops console": dual
//! approval; OWASP Authentication Cheat Sheet, "Reauthentication"; issue 13). The proof is the
//! password or, since issue 36, an assertion of one of the user's passkeys
//! ([`super::passkeys`]); [`Core::prove_step_up`] is the one place that decides.

use converge_wire::ErrorCode;
use std::future::Future;

use webauthn_rs::prelude::PublicKeyCredential;

use super::Core;
use super::actions::ActionError;
use super::actor::Actor;
use super::relying_party::RelyingParty;
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
    /// Not approved: one answer for a wrong password (or a passkey assertion that does not
    /// verify), nothing to approve, one's own request, and one already decided, expired or
    /// stale (audited as `approval_refused`).
    #[error(
        "not approved: re-enter your own password, for a pending request someone else made that is still current"
    )]
    Refused,
    /// An admin requires passkeys for approvals and the proof was the password (403
    /// `passkey_required`); said before any check, since it depends on no secret.
    #[error("approvals require a passkey: approve with your passkey")]
    PasskeyRequired,
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

/// What proves a step-up: the user's own password, or an assertion of one of its passkeys
/// answering a step-up ceremony it began ([`Core::begin_passkey_step_up`]).
#[derive(Clone, Copy)]
pub enum Proof<'a> {
    /// The password as entered.
    Password(&'a str),
    /// A WebAuthn assertion.
    Passkey {
        /// The ceremony's id, from its begin.
        challenge_id: &'a str,
        /// The browser's `PublicKeyCredential`.
        credential: &'a PublicKeyCredential,
    },
}

/// Who approves, and the proof asked again, checked as a sign-in from client address `addr`
/// would be (the same throttle: a failed passkey counts like a failed password).
pub struct StepUp<'a> {
    /// The password checks and their throttle.
    pub credentials: &'a Credentials,
    /// The relying party that verifies passkey assertions.
    pub passkeys: &'a RelyingParty,
    /// The approver (its username is the account checked).
    pub who: Actor,
    /// The approver's client address, for the throttle.
    pub addr: &'a str,
    /// The password, or a passkey assertion.
    pub proof: Proof<'a>,
}

/// Whether the passkey policy applies to a step-up ([`Core::prove_step_up`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepUpUse {
    /// An approval (of a money action, a pause, a privilege request), a change of the
    /// policy itself, or the registration of a further passkey: refused with the password
    /// while passkeys are required.
    Approval,
    /// Anything else (ending a pause, registering the first passkey): either proof.
    Other,
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
            self.refuse_conflict_audited(
                &step_up.who,
                &a.requested_by,
                &format!("action:{}", id.chars().take(64).collect::<String>()),
            )
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
                        | ActionError::Conflict(
                            ErrorCode::NotPending | ErrorCode::Expired | ErrorCode::Stale,
                            _,
                        ),
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
        // The approval-conflict rule covers pauses too (issue 36): whoever asked for this
        // step (the pause, or its early end) must not be a user this approver recently
        // created or gave power to.
        if let Some(p) = self.store.pause(id).await? {
            let requester = p
                .open_end_request(self.clock.now_ms())
                .unwrap_or(&p.requested_by)
                .to_string();
            self.refuse_conflict_audited(
                &step_up.who,
                &requester,
                &format!("pause:{}", id.chars().take(64).collect::<String>()),
            )
            .await?;
        }
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
        check_reason(reason).map_err(StepUpError::InvalidReason)?;
        let who = step_up.who.clone();
        let (can, proven) = self
            .prove_step_up(&step_up, StepUpUse::Approval, approvable(who.clone()))
            .await?;
        let can: Result<bool, ActionError> = can.map_err(Into::into);
        let approved = if matches!(can, Ok(true)) && proven {
            approve(who.clone()).await
        } else {
            None
        };
        let store = self.store.as_ref();
        can?;
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

    /// [`Self::refuse_approval_conflict`], with the refusal audited as `approval_refused` on
    /// `target` (`action:<id>`, `pause:<id>`), so that a conflict leaves the same trace as
    /// any other refused approval. Decided before, and without, the proof: no oracle.
    async fn refuse_conflict_audited(
        &self,
        who: &Actor,
        requester: &str,
        target: &str,
    ) -> Result<(), StepUpError> {
        match self.refuse_approval_conflict(who, requester).await {
            Ok(()) => Ok(()),
            Err(e @ ActionError::Forbidden(ErrorCode::ApprovalConflict, _)) => {
                let entry = who.entry(
                    self.clock.now_ms(),
                    "approval_refused",
                    target,
                    "approval conflict: the approver created the requester's account or gave them power within the window",
                    String::new(),
                    String::new(),
                );
                self.store.append_audit(&entry).await?;
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The one rule of every step-up's proof. When passkeys are required (an admin's
    /// setting, [`Core::passkey_policy`]) a password proof of an [`StepUpUse::Approval`] is
    /// refused at once (`PasskeyRequired`: it depends on no secret, so it is said before any
    /// work and not counted). Otherwise the check is admitted by the sign-in throttle
    /// (`Check(RateLimited)`), `during` runs (what the caller must do in the same time,
    /// whatever the proof: an approval's "could this user approve it"), the proof is checked
    /// (the argon2 verification of the password, or the passkey assertion against the
    /// single-use ceremony), and the attempt is recorded as failed when the proof did not
    /// hold, for either kind. Gives `during`'s output and whether the proof held.
    pub(super) async fn prove_step_up<T>(
        &self,
        step_up: &StepUp<'_>,
        usage: StepUpUse,
        during: impl Future<Output = T>,
    ) -> Result<(T, bool), StepUpError> {
        let store = self.store.as_ref();
        if usage == StepUpUse::Approval
            && matches!(step_up.proof, Proof::Password(_))
            && self.passkey_policy().await?.required
        {
            return Err(StepUpError::PasskeyRequired);
        }
        let attempt = step_up
            .credentials
            .begin_attempt(
                store,
                &step_up.who.username,
                step_up.addr,
                AttemptKind::StepUp,
                self.clock.now_ms(),
            )
            .await?;
        let out = during.await;
        let proven = match step_up.proof {
            Proof::Password(password) => step_up
                .credentials
                .verify_user(store, &step_up.who.username, password)
                .await
                .map(|u| u.is_some()),
            Proof::Passkey {
                challenge_id,
                credential,
            } => {
                self.verify_passkey_assertion(
                    step_up.passkeys,
                    &step_up.who,
                    challenge_id,
                    credential,
                )
                .await
            }
        };
        step_up
            .credentials
            .finish_attempt(
                store,
                attempt,
                matches!(proven, Ok(true)),
                self.clock.now_ms(),
            )
            .await?;
        Ok((out, proven?))
    }
}

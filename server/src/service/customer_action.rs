//! The customer's step at the channel: 3-D Secure (Stripe's `requires_action`; issue 38).
//!
//! A charge or an authorization the channel answers with "the customer must authenticate"
//! is neither a success nor a decline: the payment waits in REQUIRES_ACTION. Its query job
//! asks the channel by the channel key (every [`ACTION_POLL_MS`], sooner when a webhook
//! hastens it) until the customer's step decides, or until the action window
//! (`--action-window-secs`) ends: then the key is cancelled at the channel first (seed 004:
//! no late request may charge a key the core gave up on), and only then the payment fails.
//! A charge found at that cancel wins, as for every fence.

use super::payments::Extras;
use super::resolve::{Fence, QueryVerdict, Step, amount_mismatch, query_verdict};
use super::{Core, ServiceError};
use crate::channel::{HoldQueryOutcome, HoldStatus, VoidOutcome};
use crate::domain::state::{PaymentEvent, PaymentStatus};
use crate::store::Payment;
use converge_wire::payments::CaptureMode;

/// How often a waiting payment's channel is asked, at most, ms (a webhook hastens it).
pub const ACTION_POLL_MS: i64 = 60_000;

/// The customer's default time to authenticate, seconds (`--action-window-secs`): an hour,
/// longer than any 3-D Secure challenge a customer is still at.
pub const DEFAULT_ACTION_WINDOW_SECS: u64 = 3_600;

/// What the channel says of a waiting payment.
enum Look {
    /// The customer's step decided: the event and its evidence.
    Decided(PaymentEvent, Extras),
    /// Still waiting for the customer.
    Waiting,
    /// The channel has nothing under the key, or it was cancelled: fence it and fail.
    Gone,
    /// Nothing decidable: ask again.
    Undecided(String),
    /// The channel's record disagrees with the payment: a person must look.
    Mismatch(Step),
}

impl Core {
    /// The query job's wait for payment `p` (REQUIRES_ACTION): the next poll, or the end of
    /// the action window when that comes first. Spends no attempt: waiting for a customer is
    /// not a failure.
    pub(super) fn wait_for_action(&self, p: &Payment) -> Step {
        let now = self.clock.now_ms();
        let ends = p.updated_at.saturating_add(self.timings.action_window_ms);
        Step::WaitUntil {
            at: now.saturating_add(ACTION_POLL_MS).min(ends).max(now),
            why: "waiting for the customer to authenticate at the channel".into(),
        }
    }

    /// One look at a REQUIRES_ACTION payment's channel by its key, and the step it justifies:
    /// the customer's outcome applied, a wait, or (past the action window, or when the
    /// channel dropped the request) the key fenced and the payment FAILED.
    #[tracing::instrument(name = "resolve_action", skip_all, fields(payment_id = %p.id))]
    pub async fn resolve_action(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        if p.status != PaymentStatus::RequiresAction {
            return Ok(Step::Done);
        }
        let look = if p.capture_mode == CaptureMode::Manual {
            self.look_at_hold(&p).await
        } else {
            self.look_at_charge(&p).await
        };
        let expired =
            self.clock.now_ms() >= p.updated_at.saturating_add(self.timings.action_window_ms);
        match look {
            Look::Decided(event, extras) => {
                let after = self.apply(&p, event, source, extras).await?;
                if event == PaymentEvent::QuerySucceeded {
                    self.drive(after, source).await?;
                }
                Ok(Step::Done)
            }
            // A channel that lost sight of the request (a search lagging behind) is given the
            // window too: only its end fences the key.
            Look::Waiting | Look::Gone if !expired => Ok(self.wait_for_action(&p)),
            Look::Waiting | Look::Gone => self.abandon(p, source).await,
            Look::Undecided(detail) => Ok(Step::Retry(format!("query failed: {detail}"))),
            Look::Mismatch(step) => Ok(step),
        }
    }

    async fn look_at_charge(&self, p: &Payment) -> Look {
        let answer = self.connectors.for_payment(p).query(&p.channel_key).await;
        match query_verdict(p, answer) {
            QueryVerdict::Settles(event, extras) => Look::Decided(event, extras),
            QueryVerdict::OtherAmount { amount, currency } => {
                Look::Mismatch(amount_mismatch(p, amount, &currency))
            }
            QueryVerdict::AwaitsAction(_) => Look::Waiting,
            QueryVerdict::NotFound | QueryVerdict::Cancelled => Look::Gone,
            QueryVerdict::Error(detail) => Look::Undecided(detail),
        }
    }

    async fn look_at_hold(&self, p: &Payment) -> Look {
        let answer = match self
            .connectors
            .for_payment(p)
            .query_hold(&p.channel_key)
            .await
        {
            Ok(answer) => answer,
            Err(unsupported) => return Look::Undecided(unsupported.to_string()),
        };
        if let Some((event, extras)) = self.authorization_decided(p, &answer) {
            return Look::Decided(event, extras);
        }
        match answer {
            HoldQueryOutcome::Found {
                status: HoldStatus::RequiresAction,
                ..
            } => Look::Waiting,
            HoldQueryOutcome::Found {
                status: HoldStatus::Voided | HoldStatus::Expired,
                captured: 0,
                ..
            }
            | HoldQueryOutcome::NotFound
            | HoldQueryOutcome::Cancelled => Look::Gone,
            HoldQueryOutcome::Found { .. } => Look::Mismatch(super::holds::hold_mismatch(
                p,
                &format!("query found {answer:?}"),
            )),
            HoldQueryOutcome::Error { detail } => Look::Undecided(detail),
        }
    }

    /// Nobody authenticated in time: the key is cancelled at the channel (a sale's cancel, a
    /// hold's void), then the payment FAILED.
    async fn abandon(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        let window_secs = self.timings.action_window_ms / 1000;
        let detail = format!(
            "the customer did not authenticate within {window_secs} s; key cancelled at the channel"
        );
        if p.capture_mode != CaptureMode::Manual {
            let fence = Fence {
                event: PaymentEvent::ActionAbandoned,
                detail,
                last_error: "the customer did not authenticate; key fenced",
            };
            return self.fence(p, fence, source).await;
        }
        match self.connectors.for_payment(&p).void(&p.channel_key).await {
            // A hold the customer's late step made is released by the same void: nothing was
            // recorded here, nothing is held.
            Ok(VoidOutcome::Voided | VoidOutcome::Expired) => {
                let extras = Extras {
                    detail,
                    last_error: Some("the customer did not authenticate; key fenced".into()),
                    ..Extras::default()
                };
                self.apply(&p, PaymentEvent::ActionAbandoned, source, extras)
                    .await?;
                Ok(Step::Done)
            }
            Ok(VoidOutcome::Rejected { reason }) => Ok(super::holds::hold_mismatch(&p, &reason)),
            Ok(VoidOutcome::Error { detail }) => Ok(Step::Retry(format!("void failed: {detail}"))),
            Err(unsupported) => Ok(super::holds::hold_mismatch(&p, &unsupported.to_string())),
        }
    }
}

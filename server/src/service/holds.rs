//! A manual-capture payment's hold (issue 34; seed 000 §4.1 on the card lifecycle, seed 004
//! §5.1 on TCC): authorize (Try), capture in one or several parts (Confirm), void (Cancel),
//! expiry, and the cancel of a payment that never reached the channel.
//!
//! Every rule of a charge holds for each step: an undecidable answer is never a failure
//! (UNKNOWN, or CAPTURING until a query of the hold settles the capture); the channel is asked
//! again only under the same key (the payment's channel key, the capture's id); the core
//! records a step before the channel hears of it (RequestCapture, RequestVoid, a lapse), so
//! two requests racing on one hold cannot both reach the channel: the conditional update
//! lets one win and the other is refused (409 `hold_busy`); each transition carries its
//! ledger batch, its outbox event and its jobs (the state machine's rows).

use serde_json::json;

use super::payments::payment_answer;
use super::payments::{Applied, Extras};
use super::resolve::Step;
use super::write::{Answer, KeyClaim, Seal, Start, Written};
use super::{Core, ServiceError, ids};
use crate::channel::{AuthorizeOutcome, CaptureOutcome, HoldQueryOutcome, HoldStatus, VoidOutcome};
use crate::domain::clock::rfc3339;
use crate::domain::freeze::NewWork;
use crate::domain::money;
use crate::domain::state::{PaymentEvent, PaymentStatus};
use crate::store::{HoldWrite, Merchant, Payment};
use converge_wire::payments::{CaptureMode, PendingCapture};

/// A capture asked of a hold: `amount` minor units (> 0, at most what is held); `last` (the
/// merchant's `final`) releases the rest after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CaptureInput {
    /// Minor units.
    pub amount: i64,
    /// Close the hold after this capture.
    pub last: bool,
}

/// Why a hold's capture, void or a payment's cancel was refused (each a 4xx with its stable
/// code; nothing was written or sent) or could not finish.
#[derive(Debug, thiserror::Error)]
pub enum HoldError {
    /// No such payment of this merchant (404 `payment_not_found`).
    #[error("no such payment")]
    NotFound,
    /// An automatic payment has no hold (409 `not_manual_capture`).
    #[error("the payment was created with capture automatic: it has no hold")]
    NotManual,
    /// Nothing can be captured in this status (409 `not_capturable`).
    #[error("a {0} payment holds nothing to capture")]
    NotCapturable(PaymentStatus),
    /// A capture or void is in flight, or won the race (409 `hold_busy`).
    #[error("a capture or void of this hold is in flight ({0}); read the payment and decide again")]
    Busy(PaymentStatus),
    /// The hold lapsed (409 `hold_expired`).
    #[error("the hold expired at {0}")]
    Expired(String),
    /// More than is held (409 `capture_exceeds_hold`).
    #[error("the capture of {asked} exceeds what is held, {held}")]
    ExceedsHold {
        /// Asked, minor units.
        asked: i64,
        /// Held, minor units.
        held: i64,
    },
    /// The hold cannot be voided (409 `not_voidable`).
    #[error("{0}")]
    NotVoidable(String),
    /// The merchant is frozen (403 `merchant_frozen`).
    #[error(transparent)]
    Frozen(#[from] crate::domain::freeze::Frozen),
    /// The key's claim was lost to another request meanwhile (409 `idempotency_key_in_use`).
    #[error("another request holds this Idempotency-Key now")]
    KeyLost,
    /// The payment reached the channel (409 `not_cancelable`).
    #[error("a {0} payment reached the channel; it cannot be cancelled before submission")]
    NotCancelable(PaymentStatus),
    /// The store failed, or the payment kept changing.
    #[error(transparent)]
    Failed(#[from] ServiceError),
}

impl From<crate::store::StoreError> for HoldError {
    fn from(e: crate::store::StoreError) -> Self {
        HoldError::Failed(e.into())
    }
}

impl super::write::Refusal for HoldError {
    fn is_refusal(&self) -> bool {
        match self {
            HoldError::Failed(e) => e.is_refusal(),
            _ => true,
        }
    }
}

impl Core {
    /// `POST /v1/payments/{id}/captures` under an Idempotency-Key, on the one write path
    /// ([`Core::keyed_write`]): the claim records the new capture's id as its recovery
    /// point, then [`capture_hold`](Self::capture_hold) records and sends it. A retry after a
    /// crash resumes that one capture (settled by a query of the hold if it is still in
    /// flight), never a second one. Answers 200 with the payment (CAPTURING when the
    /// channel's answer was undecidable: it settles in the background).
    pub async fn capture_keyed(
        &self,
        merchant: &Merchant,
        payment_id: &str,
        input: CaptureInput,
        claim: &KeyClaim,
    ) -> Result<Written, HoldError> {
        self.merchant_payment(merchant, payment_id).await?;
        let id = ids::new_id("cap");
        let start = Start::of_claim(self.store.claim_key_at(claim, &id).await?, id);
        let fresh = async |id: String| -> Result<Answer, HoldError> {
            crate::domain::freeze::may_start(merchant.frozen, NewWork::Captures)?;
            let p = self.merchant_payment(merchant, payment_id).await?;
            let after = self.capture_hold(&p, input, Some(id), "api").await?;
            Ok(Answer::Ready(payment_answer(200, &after)))
        };
        let resume = async |resource_id: Option<String>| -> Result<Answer, HoldError> {
            let id = match resource_id {
                Some(id) => id,
                None => {
                    let id = ids::new_id("cap");
                    if !self.record_recovery_point(claim, &id).await? {
                        return Err(HoldError::KeyLost);
                    }
                    id
                }
            };
            let p = self.merchant_payment(merchant, payment_id).await?;
            let after = if pending(&p).is_some_and(|c| c.id == id) {
                self.settle_capture(p.clone(), "api").await?;
                self.merchant_payment(merchant, payment_id).await?
            } else if self
                .store
                .payment_captures(&p.id)
                .await?
                .iter()
                .any(|c| c.id == id)
            {
                p
            } else {
                crate::domain::freeze::may_start(merchant.frozen, NewWork::Captures)?;
                self.capture_hold(&p, input, Some(id), "api").await?
            };
            Ok(Answer::Ready(payment_answer(200, &after)))
        };
        self.keyed_write(claim, Seal::Plain, start, fresh, resume)
            .await
    }

    /// `POST /v1/payments/{id}/void` under an Idempotency-Key: [`void_hold`](Self::void_hold)
    /// on the one write path (the recovery point is the payment; a void is idempotent on it).
    /// Answers 200 with the payment.
    pub async fn void_keyed(
        &self,
        merchant: &Merchant,
        payment_id: &str,
        claim: &KeyClaim,
    ) -> Result<Written, HoldError> {
        self.merchant_payment(merchant, payment_id).await?;
        let start = Start::of_claim(self.store.claim_key_at(claim, payment_id).await?, ());
        let void = async || -> Result<Answer, HoldError> {
            let p = self.merchant_payment(merchant, payment_id).await?;
            Ok(Answer::Ready(payment_answer(
                200,
                &self.void_hold(&p, "api").await?,
            )))
        };
        self.keyed_write(
            claim,
            Seal::Plain,
            start,
            async |()| void().await,
            async |_| void().await,
        )
        .await
    }

    /// `POST /v1/payments/{id}/cancel` under an Idempotency-Key:
    /// [`cancel_pending`](Self::cancel_pending) on the one write path. Answers 200 with the
    /// payment.
    pub async fn cancel_keyed(
        &self,
        merchant: &Merchant,
        payment_id: &str,
        claim: &KeyClaim,
    ) -> Result<Written, HoldError> {
        self.merchant_payment(merchant, payment_id).await?;
        let start = Start::of_claim(self.store.claim_key_at(claim, payment_id).await?, ());
        let cancel = async || -> Result<Answer, HoldError> {
            let p = self.merchant_payment(merchant, payment_id).await?;
            Ok(Answer::Ready(payment_answer(
                200,
                &self.cancel_pending(&p, "api").await?,
            )))
        };
        self.keyed_write(
            claim,
            Seal::Plain,
            start,
            async |()| cancel().await,
            async |_| cancel().await,
        )
        .await
    }

    /// The merchant's payment `id` (another merchant's is not found).
    async fn merchant_payment(&self, merchant: &Merchant, id: &str) -> Result<Payment, HoldError> {
        match self.store.payment(id).await? {
            Some(p) if p.merchant_id == merchant.id => Ok(p),
            _ => Err(HoldError::NotFound),
        }
    }

    /// The authorization at the channel with the payment's channel key (never inside a
    /// transaction), holding the funds for `--authorization-ttl-secs` or the connector's own
    /// limit. A connector without holds answers before sending anything: a decline.
    pub(crate) async fn send_authorize(&self, p: &Payment) -> AuthorizeOutcome {
        let ttl_secs = (self.timings.authorization_ttl_ms / 1000).max(1);
        let answer = self
            .connectors
            .for_payment(p)
            .authorize(&p.channel_key, p.amount, &p.currency, ttl_secs)
            .await;
        let outcome = answer.unwrap_or_else(|unsupported| AuthorizeOutcome::Declined {
            reason: unsupported.to_string(),
        });
        let name = match &outcome {
            AuthorizeOutcome::Authorized { .. } => "authorized",
            AuthorizeOutcome::Declined { .. } => "declined",
            AuthorizeOutcome::RequiresAction { .. } => "requires_action",
            AuthorizeOutcome::Error { .. } => "error",
        };
        metrics::counter!("converge_channel_authorizations_total", "outcome" => name).increment(1);
        outcome
    }

    /// The event an authorization's answer is and what it writes: a hold of another amount
    /// or an error is UNKNOWN with a query job (never a failure). The hold's expiry is the
    /// channel's, at most the TTL away.
    pub(crate) fn authorize_answer(
        &self,
        p: &Payment,
        outcome: AuthorizeOutcome,
    ) -> (PaymentEvent, Extras) {
        match outcome {
            AuthorizeOutcome::Authorized {
                amount,
                currency,
                expires_at_ms,
            } if amount == p.amount && currency == p.currency => (
                PaymentEvent::ChannelAuthorized,
                self.authorized(p, expires_at_ms, "authorized"),
            ),
            AuthorizeOutcome::Authorized {
                amount, currency, ..
            } => unknown(format!(
                "channel held {}, payment is {}",
                money::display(amount, &currency),
                money::display(p.amount, &p.currency)
            )),
            AuthorizeOutcome::Declined { reason } => (
                PaymentEvent::ChannelDeclined,
                Extras {
                    last_error: Some(format!("declined: {reason}")),
                    detail: reason,
                    ..Extras::default()
                },
            ),
            AuthorizeOutcome::RequiresAction { detail } => super::payments::awaiting_action(detail),
            AuthorizeOutcome::Error { detail } => unknown(detail),
        }
    }

    /// The extras of a step that records the hold (`verb`: authorized, or found by a query).
    pub(super) fn authorized(&self, p: &Payment, expires_at_ms: i64, verb: &str) -> Extras {
        let expires_at = expires_at_ms.min(self.clock.now_ms() + self.timings.authorization_ttl_ms);
        Extras {
            detail: format!(
                "{verb} {} until {}",
                money::display(p.amount, &p.currency),
                rfc3339(expires_at)
            ),
            hold: Some(HoldWrite::Authorize { expires_at }),
            ..Extras::default()
        }
    }

    /// AUTHORIZING: sends the authorization and records the answer.
    pub(crate) async fn authorize(
        &self,
        p: &Payment,
        source: &str,
    ) -> Result<Payment, ServiceError> {
        let outcome = self.send_authorize(p).await;
        let (event, extras) = self.authorize_answer(p, outcome);
        self.apply(p, event, source, extras).await
    }

    /// One query of a manual-capture payment left UNKNOWN by its authorization, and the step
    /// it justifies (seed 004: query by the same key; resubmit a not-found key a bounded
    /// number of times; fence it before giving up: a void of a key with no hold fences it).
    pub async fn resolve_unknown_hold(
        &self,
        p: Payment,
        source: &str,
    ) -> Result<Step, ServiceError> {
        let answer = match self
            .connectors
            .for_payment(&p)
            .query_hold(&p.channel_key)
            .await
        {
            Ok(answer) => answer,
            Err(unsupported) => return Ok(hold_mismatch(&p, &unsupported.to_string())),
        };
        if let Some((event, extras)) = self.authorization_decided(&p, &answer) {
            self.apply(&p, event, source, extras).await?;
            return Ok(Step::Done);
        }
        let (event, extras) = match answer {
            HoldQueryOutcome::Found {
                status: HoldStatus::Expired,
                captured: 0,
                ..
            } => (
                PaymentEvent::HoldLapsed,
                Extras {
                    detail: "query: the hold lapsed before it was recorded".into(),
                    ..Extras::default()
                },
            ),
            HoldQueryOutcome::Found {
                status: HoldStatus::RequiresAction,
                ..
            } => {
                let extras = super::payments::awaiting(format!("the hold under {}", p.channel_key));
                let after = self
                    .apply(&p, PaymentEvent::QueryRequiresAction, source, extras)
                    .await?;
                return Ok(self.wait_for_action(&after));
            }
            HoldQueryOutcome::Found { .. } => {
                return Ok(hold_mismatch(&p, &format!("query found {answer:?}")));
            }
            HoldQueryOutcome::NotFound if p.submit_attempts <= self.timings.resubmit_budget => {
                let extras = Extras {
                    detail: "query: no hold; authorizing again with the same key".into(),
                    ..Extras::default()
                };
                let after = self
                    .apply(&p, PaymentEvent::QueryHoldNotFound, source, extras)
                    .await?;
                self.drive(after, source).await?;
                return Ok(Step::Done);
            }
            HoldQueryOutcome::NotFound | HoldQueryOutcome::Cancelled => {
                return self.fence_hold(p, source).await;
            }
            HoldQueryOutcome::Error { detail } => {
                return Ok(Step::Retry(format!("query of the hold failed: {detail}")));
            }
        };
        self.apply(&p, event, source, extras).await?;
        Ok(Step::Done)
    }

    /// What a query of payment `p`'s hold says of its authorization when it decides it: held
    /// for the payment's amount with nothing captured (QUERY_AUTHORIZED, with the hold's
    /// expiry), or declined (QUERY_DECLINED). One reading for an UNKNOWN authorization and one
    /// waiting for the customer's step.
    pub(super) fn authorization_decided(
        &self,
        p: &Payment,
        answer: &HoldQueryOutcome,
    ) -> Option<(PaymentEvent, Extras)> {
        match answer {
            HoldQueryOutcome::Found {
                status: HoldStatus::Authorized,
                amount,
                currency,
                expires_at_ms,
                captured: 0,
            } if *amount == p.amount && *currency == p.currency => Some((
                PaymentEvent::QueryAuthorized,
                self.authorized(p, *expires_at_ms, "query: authorized"),
            )),
            HoldQueryOutcome::Found {
                status: HoldStatus::Declined,
                ..
            } => Some((
                PaymentEvent::QueryDeclined,
                Extras {
                    detail: "query: the authorization was declined".into(),
                    last_error: Some("declined".into()),
                    ..Extras::default()
                },
            )),
            _ => None,
        }
    }

    /// Voids the key first, so no late authorization can hold funds with it (the channel
    /// fences a key with no hold, and releases one that a late request made), and only then
    /// fails the payment.
    async fn fence_hold(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        match self.connectors.for_payment(&p).void(&p.channel_key).await {
            Ok(VoidOutcome::Voided | VoidOutcome::Expired) => {
                let extras = Extras {
                    detail: format!(
                        "no hold after {} submissions; key voided at the channel",
                        p.submit_attempts
                    ),
                    last_error: Some("not found at the channel; key fenced".into()),
                    ..Extras::default()
                };
                self.apply(&p, PaymentEvent::QueryNotFoundFenced, source, extras)
                    .await?;
                Ok(Step::Done)
            }
            Ok(VoidOutcome::Rejected { reason }) => Ok(hold_mismatch(&p, &reason)),
            Ok(VoidOutcome::Error { detail }) => Ok(Step::Retry(format!("void failed: {detail}"))),
            Err(unsupported) => Ok(hold_mismatch(&p, &unsupported.to_string())),
        }
    }

    /// Captures `input` of payment `p`'s hold on `source`'s authority (the merchant API, or
    /// an approved ops action): records the capture first (AUTHORIZED -> CAPTURING, so a
    /// racing capture, void or expiry loses before the channel hears of it), then sends it
    /// under its own capture key and records the answer. An undecidable answer leaves the
    /// payment CAPTURING for its capture job, which queries the hold. `capture_id`: the
    /// capture's id, chosen by the caller (the key's recovery point), or a new one.
    pub async fn capture_hold(
        &self,
        p: &Payment,
        input: CaptureInput,
        capture_id: Option<String>,
        source: &str,
    ) -> Result<Payment, HoldError> {
        self.check_capture(p, input)?;
        let id = capture_id.unwrap_or_else(|| ids::new_id("cap"));
        let extras = Extras {
            detail: format!(
                "capture {id} of {}{}",
                money::display(input.amount, &p.currency),
                if input.last { ", final" } else { "" }
            ),
            hold: Some(HoldWrite::BeginCapture {
                id,
                amount: input.amount,
                last: input.last,
            }),
            ..Extras::default()
        };
        let capturing = self
            .claim_hold(p, PaymentEvent::RequestCapture, source, extras)
            .await?;
        Ok(self.send_capture(&capturing, source).await?)
    }

    /// The capture's refusals, decided before anything is written.
    fn check_capture(&self, p: &Payment, input: CaptureInput) -> Result<(), HoldError> {
        if p.capture_mode != CaptureMode::Manual {
            return Err(HoldError::NotManual);
        }
        match p.status {
            PaymentStatus::Authorized => {}
            PaymentStatus::Capturing | PaymentStatus::Voiding => {
                return Err(HoldError::Busy(p.status));
            }
            status => return Err(HoldError::NotCapturable(status)),
        }
        let expires_at = p.hold.as_ref().and_then(|h| h.expires_at).unwrap_or(0);
        if self.clock.now_ms() >= expires_at {
            return Err(HoldError::Expired(rfc3339(expires_at)));
        }
        let held = p.held_amount();
        if input.amount > held {
            return Err(HoldError::ExceedsHold {
                asked: input.amount,
                held,
            });
        }
        Ok(())
    }

    /// Applies a step that claims the hold (a capture or void asked for): the payment after
    /// it, or `hold_busy` when another writer moved it first (nothing reaches the channel).
    async fn claim_hold(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
        extras: Extras,
    ) -> Result<Payment, HoldError> {
        match self.apply_outcome(p, event, source, extras).await? {
            (after, Applied::Yes) => Ok(after),
            (now, Applied::Refused | Applied::Lost) => Err(HoldError::Busy(now.status)),
        }
    }

    /// Sends a CAPTURING payment's pending capture under its own key and records the answer;
    /// an undecidable answer is left to the capture job's query.
    async fn send_capture(&self, p: &Payment, source: &str) -> Result<Payment, ServiceError> {
        let Some(c) = pending(p) else {
            return Ok(p.clone());
        };
        let answer = self
            .connectors
            .for_payment(p)
            .capture(&p.channel_key, &c.id, c.amount, c.last)
            .await
            .unwrap_or_else(|unsupported| CaptureOutcome::Rejected {
                reason: unsupported.to_string(),
            });
        match self.capture_answer(p, &c, answer) {
            Some((event, extras)) => self.apply(p, event, source, extras).await,
            None => Ok(p.clone()),
        }
    }

    /// The step a capture's answer makes from CAPTURING, or None when it is undecidable (the
    /// capture job queries the hold). A capture that closes the hold (final, used up, or
    /// closed by the channel) releases the rest with it.
    fn capture_answer(
        &self,
        p: &Payment,
        c: &PendingCapture,
        answer: CaptureOutcome,
    ) -> Option<(PaymentEvent, Extras)> {
        let held = p.held_amount();
        match answer {
            CaptureOutcome::Captured { amount, closed, .. } if amount == c.amount => {
                let last = closed || c.last || amount == held;
                let released = if last { held - amount } else { 0 };
                let event = if last {
                    PaymentEvent::ChannelCapturedFinal
                } else {
                    PaymentEvent::ChannelCaptured
                };
                Some((
                    event,
                    Extras {
                        detail: format!(
                            "captured {}{}",
                            money::display(amount, &p.currency),
                            if last {
                                format!("; released {}", money::display(released, &p.currency))
                            } else {
                                String::new()
                            }
                        ),
                        hold: Some(HoldWrite::Capture {
                            id: c.id.clone(),
                            amount,
                            released,
                        }),
                        ..Extras::default()
                    },
                ))
            }
            CaptureOutcome::Captured { .. } | CaptureOutcome::Error { .. } => None,
            CaptureOutcome::Rejected { reason } if reason == "expired" => {
                Some(self.lapse(p, "the channel refused the capture: the hold expired"))
            }
            CaptureOutcome::Rejected { reason } => Some((
                PaymentEvent::CaptureRefused,
                Extras {
                    detail: format!("capture {} refused: {reason}", c.id),
                    last_error: Some(format!("capture refused: {reason}")),
                    hold: Some(HoldWrite::RefuseCapture {
                        id: c.id.clone(),
                        reason,
                    }),
                    ..Extras::default()
                },
            )),
        }
    }

    /// The lapse of `p`'s hold: EXPIRED when nothing was captured, SUCCESS (the captures are
    /// the charge) otherwise; the rest is released either way.
    fn lapse(&self, p: &Payment, why: &str) -> (PaymentEvent, Extras) {
        let captured = p.hold.as_ref().map_or(0, |h| h.captured);
        let event = if captured > 0 {
            PaymentEvent::HoldLapsedCaptured
        } else {
            PaymentEvent::HoldLapsed
        };
        let held = p.held_amount();
        (
            event,
            Extras {
                detail: format!("{why}; released {}", money::display(held, &p.currency)),
                hold: Some(HoldWrite::Release {
                    amount: held,
                    reason: "expired".into(),
                }),
                ..Extras::default()
            },
        )
    }

    /// The capture job: settles a CAPTURING payment's capture from a query of the hold (the
    /// channel's captured total says whether it was made), sending it again under its own key
    /// only when the hold is still open and shows nothing of it.
    pub async fn settle_capture(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        let Some(c) = pending(&p).filter(|_| p.status == PaymentStatus::Capturing) else {
            return Ok(Step::Done);
        };
        let captured = p.hold.as_ref().map_or(0, |h| h.captured);
        let answer = match self
            .connectors
            .for_payment(&p)
            .query_hold(&p.channel_key)
            .await
        {
            Ok(answer) => answer,
            Err(unsupported) => return Ok(hold_mismatch(&p, &unsupported.to_string())),
        };
        let step = match answer {
            HoldQueryOutcome::Found {
                status,
                captured: total,
                currency,
                ..
            } if total == captured + c.amount => self.capture_answer(
                &p,
                &c,
                CaptureOutcome::Captured {
                    amount: c.amount,
                    captured_total: total,
                    currency,
                    closed: status != HoldStatus::Authorized,
                },
            ),
            HoldQueryOutcome::Found {
                status: HoldStatus::Authorized,
                captured: total,
                ..
            } if total == captured => {
                let after = self.send_capture(&p, source).await?;
                return Ok(if after.status == PaymentStatus::Capturing {
                    Step::Retry("capture outcome unknown".into())
                } else {
                    Step::Done
                });
            }
            HoldQueryOutcome::Found {
                status: HoldStatus::Expired,
                captured: total,
                ..
            } if total == captured => {
                Some(self.lapse(&p, "query: the hold expired before the capture"))
            }
            HoldQueryOutcome::Error { detail } => {
                return Ok(Step::Retry(format!("query of the hold failed: {detail}")));
            }
            other => return Ok(hold_mismatch(&p, &format!("query found {other:?}"))),
        };
        if let Some((event, extras)) = step {
            self.apply(&p, event, source, extras).await?;
        }
        Ok(Step::Done)
    }

    /// Voids payment `p`'s hold on `source`'s authority: records the void first (-> VOIDING,
    /// so no capture can start), then voids at the channel and records VOIDED. A hold whose
    /// authorization is still in flight, unknown or waiting for the customer is voided too (the channel's void releases
    /// what a late authorization held, or fences the key). A VOIDED payment answers as it is.
    pub async fn void_hold(&self, p: &Payment, source: &str) -> Result<Payment, HoldError> {
        if p.capture_mode != CaptureMode::Manual {
            return Err(HoldError::NotManual);
        }
        let voiding = match p.status {
            PaymentStatus::Voided => return Ok(p.clone()),
            PaymentStatus::Voiding => p.clone(),
            PaymentStatus::Capturing => return Err(HoldError::Busy(p.status)),
            PaymentStatus::Authorized if p.hold.as_ref().is_some_and(|h| h.captured > 0) => {
                return Err(HoldError::NotVoidable(
                    "the hold was captured in part: send a final capture to release the rest"
                        .into(),
                ));
            }
            PaymentStatus::Authorized
            | PaymentStatus::Authorizing
            | PaymentStatus::Unknown
            | PaymentStatus::RequiresAction => {
                let extras = Extras {
                    detail: "void asked".into(),
                    ..Extras::default()
                };
                self.claim_hold(p, PaymentEvent::RequestVoid, source, extras)
                    .await?
            }
            status => {
                return Err(HoldError::NotVoidable(format!(
                    "a {status} payment holds nothing to void"
                )));
            }
        };
        let (after, _) = self.send_void(voiding, source).await?;
        Ok(after)
    }

    /// Sends the void of a VOIDING payment (or of an ended hold's rest, after a lapse) and
    /// records VOIDED; the step says whether the job must try again.
    pub async fn send_void(
        &self,
        p: Payment,
        source: &str,
    ) -> Result<(Payment, Step), ServiceError> {
        let answer = match self.connectors.for_payment(&p).void(&p.channel_key).await {
            Ok(answer) => answer,
            Err(unsupported) => {
                let step = hold_mismatch(&p, &unsupported.to_string());
                return Ok((p, step));
            }
        };
        if p.status != PaymentStatus::Voiding {
            // The release of a lapsed hold at the channel: the core recorded it already.
            let step = match answer {
                VoidOutcome::Error { detail } => Step::Retry(format!("void failed: {detail}")),
                _ => Step::Done,
            };
            return Ok((p, step));
        }
        let held = p.held_amount();
        let (event, extras) = match answer {
            VoidOutcome::Voided | VoidOutcome::Expired if held > 0 => (
                PaymentEvent::ChannelVoided,
                Extras {
                    detail: format!("voided; released {}", money::display(held, &p.currency)),
                    hold: Some(HoldWrite::Release {
                        amount: held,
                        reason: "voided".into(),
                    }),
                    ..Extras::default()
                },
            ),
            VoidOutcome::Voided | VoidOutcome::Expired => (
                PaymentEvent::VoidFenced,
                Extras {
                    detail: "voided before any hold was recorded; the key is fenced".into(),
                    ..Extras::default()
                },
            ),
            VoidOutcome::Rejected { reason } => {
                let step = hold_mismatch(&p, &reason);
                return Ok((p, step));
            }
            VoidOutcome::Error { detail } => {
                return Ok((p, Step::Retry(format!("void failed: {detail}"))));
            }
        };
        let after = self.apply(&p, event, source, extras).await?;
        Ok((after, Step::Done))
    }

    /// The expiry job: an AUTHORIZED hold past its expiry is recorded lapsed (EXPIRED, or
    /// SUCCESS when a part was captured; the rest released), then voided at the channel by
    /// the row's follow-up job. A capture in flight is left to its own job until the expiry;
    /// past it, the hold's query settles it here ([`settle_capture`](Self::settle_capture)),
    /// since the capture's own job may have given up (dead, its payment in the error pool)
    /// and this one would otherwise wait forever (the simulator's seed 1 of 200 payments).
    pub async fn expire_hold(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        let expires_at = p.hold.as_ref().and_then(|h| h.expires_at);
        match (p.status, expires_at) {
            (PaymentStatus::Authorized, Some(at)) if self.clock.now_ms() < at => {
                Ok(Step::RetryAt {
                    at,
                    error: format!("the hold lapses at {}", rfc3339(at)),
                })
            }
            (PaymentStatus::Authorized, Some(_)) => {
                let (event, extras) = self.lapse(&p, "the hold reached its expiry");
                self.apply(&p, event, source, extras).await?;
                Ok(Step::Done)
            }
            (PaymentStatus::Capturing, Some(at)) if self.clock.now_ms() >= at => {
                self.settle_capture(p, source).await
            }
            (PaymentStatus::Capturing, _) => Ok(Step::Wait("a capture is in flight".into())),
            _ => Ok(Step::Done),
        }
    }

    /// Cancels payment `p` before it reaches the channel (PENDING -> CANCELED); a CANCELED
    /// payment answers as it is. A payment that reached the channel is refused.
    pub async fn cancel_pending(&self, p: &Payment, source: &str) -> Result<Payment, HoldError> {
        match p.status {
            PaymentStatus::Canceled => Ok(p.clone()),
            PaymentStatus::Pending => {
                let extras = Extras {
                    detail: "cancelled before submission".into(),
                    ..Extras::default()
                };
                match self
                    .apply_outcome(p, PaymentEvent::Cancel, source, extras)
                    .await?
                {
                    (after, Applied::Yes) => Ok(after),
                    (now, _) => Err(HoldError::NotCancelable(now.status)),
                }
            }
            status => Err(HoldError::NotCancelable(status)),
        }
    }
}

/// The capture `p` has in flight, if any.
fn pending(p: &Payment) -> Option<PendingCapture> {
    p.hold.as_ref().and_then(|h| h.pending_capture.clone())
}

/// AUTHORIZING/PROCESSING -> UNKNOWN with the query job (an undecidable answer).
fn unknown(detail: String) -> (PaymentEvent, Extras) {
    (
        PaymentEvent::ChannelError,
        Extras {
            last_error: Some(detail.clone()),
            detail,
            ..Extras::default()
        },
    )
}

/// The channel's hold disagrees with what the core recorded: a person must look.
pub(super) fn hold_mismatch(p: &Payment, what: &str) -> Step {
    Step::GiveUp {
        kind: "hold_mismatch",
        summary: format!("the channel's hold disagrees with payment {}: {what}", p.id),
        evidence: json!({"channel_key": p.channel_key, "status": p.status.as_str(), "hold": p.hold, "channel": what}),
    }
}

//! Resolving what the request could not finish (DESIGN.md "Payment state machine" rows for
//! UNKNOWN and SUSPENSE; seed article 004: an UNKNOWN answer is queried by the same key, never
//! guessed; a not-found charge is resubmitted with the same key a bounded number of times,
//! then the key is cancelled at the channel — the TCC anti-hanging fence — before FAILED).

use serde_json::json;

use super::payments::{Extras, awaiting};
use super::{Core, ServiceError};
use crate::channel::{CancelOutcome, QueryOutcome};
use crate::domain::money;
use crate::domain::state::{PaymentEvent, PaymentStatus, suspense_resolution};
use crate::store::{NewErrorItem, Payment};

/// What a compensation step achieved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Nothing more for this job to do.
    Done,
    /// Try again after a backoff; the text is the error to record.
    Retry(String),
    /// Not an error: waiting for something outside (e.g. a frozen merchant); retry at the
    /// backoff cap without spending an attempt.
    Wait(String),
    /// Held by the emergency switch (a pause): look again in
    /// [`HOLD_RECHECK_MS`](super::pauses::HOLD_RECHECK_MS) without spending an attempt.
    Held(String),
    /// Not an error and not an attempt: look again at `at` (epoch ms UTC), a time the handler
    /// chose, without spending an attempt (a webhook endpoint's open circuit breaker or full
    /// in-flight cap).
    WaitUntil {
        /// When.
        at: i64,
        /// Why it waits (recorded as the job's last error).
        why: String,
    },
    /// Try again at `at` (epoch ms UTC), a time the handler chose (a webhook's schedule or
    /// the receiver's `Retry-After`); spends the attempt.
    RetryAt {
        /// When.
        at: i64,
        /// The error to record.
        error: String,
    },
    /// [`Step::GiveUp`] under a dedupe key of the handler's, so a later failure of the same
    /// thing (a redelivery dying again) reopens one item instead of adding another.
    GiveUpWith {
        /// Error-pool kind.
        kind: &'static str,
        /// Error-pool dedupe key.
        dedupe_key: String,
        /// One line.
        summary: String,
        /// JSON evidence.
        evidence: serde_json::Value,
    },
    /// Cannot be resolved automatically: to the error pool with this evidence.
    GiveUp {
        /// Error-pool kind.
        kind: &'static str,
        /// One line.
        summary: String,
        /// JSON evidence.
        evidence: serde_json::Value,
    },
}

/// The error-pool dedupe key of a payment's SUSPENSE item (the rule lives with the effect
/// that opens the item, in the state machine).
pub use crate::domain::state::suspense_key;

/// What a channel's answer to a query of UNKNOWN payment `p` means (seed article 004: only
/// a decidable answer settles). One reading for the worker's query job and an ops query
/// action, so the two never disagree.
pub(crate) enum QueryVerdict {
    /// A charge of the payment's amount and currency (QUERY_SUCCEEDED), or a decline
    /// (QUERY_DECLINED): the transition and its evidence.
    Settles(PaymentEvent, Extras),
    /// A charge of another amount or currency: a person must look.
    OtherAmount {
        /// Minor units the channel charged.
        amount: i64,
        /// Its currency.
        currency: String,
    },
    /// The channel waits for the customer to authenticate (3-D Secure): its detail.
    AwaitsAction(String),
    /// The channel has no request under the key.
    NotFound,
    /// The key was cancelled at the channel (fenced).
    Cancelled,
    /// No decidable answer: ask again later.
    Error(String),
}

/// [`QueryVerdict`] of `answer` for `p`.
pub(crate) fn query_verdict(p: &Payment, answer: QueryOutcome) -> QueryVerdict {
    match answer {
        QueryOutcome::Succeeded { amount, currency }
            if amount == p.amount && currency == p.currency =>
        {
            let extras = Extras {
                detail: format!("query: charged {}", money::display(amount, &currency)),
                ..Extras::default()
            };
            QueryVerdict::Settles(PaymentEvent::QuerySucceeded, extras)
        }
        QueryOutcome::Succeeded { amount, currency } => {
            QueryVerdict::OtherAmount { amount, currency }
        }
        QueryOutcome::Declined { reason } => {
            let extras = Extras {
                detail: format!("query: declined: {reason}"),
                last_error: Some(format!("declined: {reason}")),
                ..Extras::default()
            };
            QueryVerdict::Settles(PaymentEvent::QueryDeclined, extras)
        }
        QueryOutcome::RequiresAction { detail } => QueryVerdict::AwaitsAction(detail),
        QueryOutcome::NotFound => QueryVerdict::NotFound,
        QueryOutcome::Cancelled => QueryVerdict::Cancelled,
        QueryOutcome::Error { detail } => QueryVerdict::Error(detail),
    }
}

/// How a fence ends the payment: the event (QUERY_NOT_FOUND_FENCED, or ACTION_ABANDONED for
/// a customer who never authenticated) and what it records.
pub(super) struct Fence {
    /// The step to FAILED.
    pub event: PaymentEvent,
    /// The event log's detail.
    pub detail: String,
    /// The payment's `last_error`.
    pub last_error: &'static str,
}

/// The channel charged another amount or currency than payment `p`'s: a person must look.
pub(super) fn amount_mismatch(p: &Payment, amount: i64, currency: &str) -> Step {
    Step::GiveUp {
        kind: "amount_mismatch",
        summary: format!(
            "channel charged {}, payment is {}",
            money::display(amount, currency),
            money::display(p.amount, &p.currency)
        ),
        evidence: json!({"channel": {"amount": amount, "currency": currency}, "local": {"amount": p.amount, "currency": p.currency}, "channel_key": p.channel_key}),
    }
}

impl Core {
    /// One query of an UNKNOWN payment by its channel key, and the transition it justifies.
    #[tracing::instrument(name = "resolve_unknown", skip_all, fields(payment_id = %p.id))]
    pub async fn resolve_unknown(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        if p.status != PaymentStatus::Unknown {
            return Ok(Step::Done);
        }
        if p.capture_mode == converge_wire::payments::CaptureMode::Manual {
            return self.resolve_unknown_hold(p, source).await;
        }
        let answer = self.connectors.for_payment(&p).query(&p.channel_key).await;
        match query_verdict(&p, answer) {
            QueryVerdict::Settles(event, extras) => {
                let after = self.apply(&p, event, source, extras).await?;
                if event == PaymentEvent::QuerySucceeded {
                    self.drive(after, source).await?;
                }
                Ok(Step::Done)
            }
            QueryVerdict::OtherAmount { amount, currency } => {
                Ok(amount_mismatch(&p, amount, &currency))
            }
            QueryVerdict::AwaitsAction(detail) => {
                let after = self
                    .apply(
                        &p,
                        PaymentEvent::QueryRequiresAction,
                        source,
                        awaiting(detail),
                    )
                    .await?;
                Ok(self.wait_for_action(&after))
            }
            QueryVerdict::NotFound if p.submit_attempts <= self.timings.resubmit_budget => {
                let extras = Extras {
                    detail: "query: not found; resubmitting with the same key".into(),
                    ..Extras::default()
                };
                let after = self
                    .apply(&p, PaymentEvent::QueryNotFound, source, extras)
                    .await?;
                self.drive(after, source).await?;
                Ok(Step::Done)
            }
            QueryVerdict::NotFound | QueryVerdict::Cancelled => {
                let fence = Fence {
                    event: PaymentEvent::QueryNotFoundFenced,
                    detail: format!(
                        "not found after {} submissions; key cancelled at the channel",
                        p.submit_attempts
                    ),
                    last_error: "not found at the channel; key fenced",
                };
                self.fence(p, fence, source).await
            }
            QueryVerdict::Error(detail) => Ok(Step::Retry(format!("query failed: {detail}"))),
        }
    }

    /// Cancels the channel key first, so no late request can charge with it, and only then
    /// fails the payment with `fence`'s event. A charge found at cancel time wins: the
    /// payment is charged.
    pub(super) async fn fence(
        &self,
        p: Payment,
        fence: Fence,
        source: &str,
    ) -> Result<Step, ServiceError> {
        let cancelled = match () {
            #[cfg(feature = "planted-bugs")]
            () if crate::planted::on(crate::planted::Bug::FailedWithoutFence) => {
                CancelOutcome::Cancelled
            }
            () => self.connectors.for_payment(&p).cancel(&p.channel_key).await,
        };
        match cancelled {
            CancelOutcome::Cancelled => {
                let extras = Extras {
                    detail: fence.detail,
                    last_error: Some(fence.last_error.into()),
                    ..Extras::default()
                };
                self.apply(&p, fence.event, source, extras).await?;
                Ok(Step::Done)
            }
            CancelOutcome::AlreadyCharged { amount, currency }
                if amount == p.amount && currency == p.currency =>
            {
                let extras = Extras {
                    detail: "cancel refused: the channel holds a charge".into(),
                    ..Extras::default()
                };
                let after = self
                    .apply(&p, PaymentEvent::QuerySucceeded, source, extras)
                    .await?;
                self.drive(after, source).await?;
                Ok(Step::Done)
            }
            CancelOutcome::AlreadyCharged { amount, currency } => {
                Ok(amount_mismatch(&p, amount, &currency))
            }
            CancelOutcome::Error { detail } => Ok(Step::Retry(format!("cancel failed: {detail}"))),
        }
    }

    /// Retries the charge's ledger posting of a CHANNEL_SUCCESS or SUSPENSE payment. While
    /// the merchant is frozen the payment waits in SUSPENSE (and in the error pool: the
    /// parking step's effect); the posting step's effect resolves the item.
    ///
    /// A rerun for a payment already SUCCESS resolves an item still open: what a version
    /// before the effects left when its process died between the posting's commit and the
    /// item's (the resolution only touches an open item, so it is a no-op otherwise).
    pub async fn retry_posting(&self, p: Payment, source: &str) -> Result<Step, ServiceError> {
        match p.status {
            PaymentStatus::ChannelSuccess | PaymentStatus::Suspense => {
                let after = self.post_ledger(&p, source).await?;
                if after.status == PaymentStatus::Suspense {
                    return Ok(Step::Wait("merchant account frozen".into()));
                }
                Ok(Step::Done)
            }
            PaymentStatus::Success => {
                let note = suspense_resolution(PaymentEvent::LedgerPosted, source);
                self.store
                    .resolve_error_by_key(
                        &suspense_key(&p.id),
                        &note,
                        "system",
                        self.clock.now_ms(),
                    )
                    .await?;
                Ok(Step::Done)
            }
            _ => Ok(Step::Done),
        }
    }

    /// Restates a payment still parked in SUSPENSE to the error pool: each posting retry
    /// counts an occurrence of its item, and puts back an item a version before the effects
    /// lost (its process died between parking the payment and reporting it). A restatement,
    /// never a new fact: it does not reopen an item a person resolved (they may be handling it
    /// outside converge; `NewErrorItem::reopen`). The item opens with the parking step itself
    /// ([`SuspenseItem::Open`](crate::domain::state::SuspenseItem)).
    pub(crate) async fn restate_suspense(&self, p: &Payment) -> Result<(), ServiceError> {
        let item = NewErrorItem::suspense(p, false, self.clock.now_ms());
        self.store.report_error(&item).await?;
        Ok(())
    }
}

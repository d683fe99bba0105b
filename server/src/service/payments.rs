//! Creating and driving payments through the state machine (DESIGN.md "Payment state
//! machine"; seed article 000 "atomic phases", seed article 004 on UNKNOWN and SUSPENSE).
//!
//! Each step between two external calls is one local transaction (a transition with its
//! event, ledger batch and jobs), so a crash between steps leaves a state a retry or a job can
//! resume from; the channel is always called with the payment's one channel key, so a resumed
//! request never charges twice.

use std::ops::ControlFlow;

use serde_json::json;

use super::write::{Answer, Refusal, Seal, Start, Written, json_answer};
use super::{Core, ServiceError, ids};
use crate::channel::ChargeOutcome;
use crate::domain::fingerprint::fingerprint;
use crate::domain::freeze::{self, NewWork};
use crate::domain::ledger;
use crate::domain::money;
use crate::domain::state::{AutoStep, Batch, Delay, PaymentEvent, PaymentStatus, Rule, rule};
use crate::store::keys::{ClaimResult, KeyClaim, KeyCompletion, KeyRef, StoredResponse};
use crate::store::views::PaymentView;
use crate::store::{
    CreatePayment, HoldWrite, IgnoredEvent, Merchant, NewJob, NewPayment, OpenPayment,
    OpenedPayment, Payment, Transition, TransitionResult,
};
use converge_wire::payments::CaptureMode;

/// A validated create-payment request. Amount in minor units; currency ISO 4217.
#[derive(Debug, Clone)]
pub struct PaymentInput {
    /// Minor units, > 0.
    pub amount: i64,
    /// ISO 4217 code.
    pub currency: String,
    /// The merchant's business key.
    pub merchant_order_id: String,
    /// Free text.
    pub description: String,
    /// Charged at once (`automatic`, the default) or authorized for a later capture
    /// (`manual`, issue 34).
    pub capture_mode: CaptureMode,
}

impl PaymentInput {
    /// SHA-256 of the business parameters; two requests for one merchant_order_id are "the
    /// same payment" exactly when these match. The capture mode counts only when it is
    /// `manual`, so an automatic payment's hash is what it was before holds existed.
    pub fn params_hash(&self) -> String {
        let mut params = json!({
            "amount": self.amount,
            "currency": self.currency,
            "merchant_order_id": self.merchant_order_id,
            "description": self.description,
        });
        if self.capture_mode == CaptureMode::Manual {
            params["capture"] = json!(self.capture_mode.as_str());
        }
        fingerprint(&params)
    }
}

/// Result of [`Core::insert_payment`].
#[derive(Debug, Clone)]
pub enum InsertOutcome {
    /// A new PENDING payment (answer 201 once driven).
    Created(Payment),
    /// Same merchant_order_id, same parameters: the existing payment (answer 200).
    Existing(Payment),
    /// Same merchant_order_id, other parameters: 409 `merchant_order_id_conflict`.
    OrderConflict(Payment),
    /// The merchant cancelled this merchant_order_id before (a tombstone): nothing was
    /// written; 409 `order_cancelled`.
    Tombstoned,
}

/// Result of [`Core::create_payment`].
#[derive(Debug, Clone)]
pub enum CreateOutcome {
    /// A new payment, driven as far as it goes. `stored` is the answer stored with the key
    /// in the transaction of the payment's last step; None when the caller is to store it.
    Created {
        /// The payment as the request leaves it.
        payment: Payment,
        /// The answer already stored with the key (to be sent as it is).
        stored: Option<StoredResponse>,
    },
    /// Same merchant_order_id, same parameters: the existing payment (answer 200; the key is
    /// claimed and the caller stores the answer).
    Existing(Payment),
    /// Same merchant_order_id, other parameters: 409 `merchant_order_id_conflict` (the key is
    /// claimed and the caller releases it).
    OrderConflict(Payment),
    /// The merchant cancelled this merchant_order_id before any payment had it (TCC by
    /// business key): nothing was written, not even the key's claim; 409 `order_cancelled`.
    Tombstoned,
    /// The key was claimed before: another request's record, or a lapsed claim this request
    /// took over (resume its recovery point). Nothing else was written.
    Key(ClaimResult),
}

/// Why a create under an Idempotency-Key did not answer with a payment
/// ([`Core::create_payment_keyed`]).
#[derive(Debug)]
pub enum CreateError {
    /// Same merchant_order_id, other parameters: 409 `merchant_order_id_conflict`.
    OrderConflict(Box<Payment>),
    /// The merchant cancelled this merchant_order_id first (`POST /v1/payments/cancel` left a
    /// tombstone): a Try after its Cancel is refused so no hold hangs, 409
    /// `order_cancelled`; nothing was written and nothing reached the channel.
    OrderCancelled,
    /// The merchant is frozen and no earlier request with this key created a payment: 403
    /// `merchant_frozen`.
    Frozen,
    /// The key's recovery point names a payment that is not the merchant's: 404.
    Missing,
    /// The store failed, or the payment kept changing.
    Failed(ServiceError),
}

impl From<ServiceError> for CreateError {
    fn from(e: ServiceError) -> Self {
        CreateError::Failed(e)
    }
}

impl From<crate::store::StoreError> for CreateError {
    fn from(e: crate::store::StoreError) -> Self {
        CreateError::Failed(e.into())
    }
}

impl Refusal for CreateError {
    fn is_refusal(&self) -> bool {
        match self {
            CreateError::OrderConflict(_)
            | CreateError::OrderCancelled
            | CreateError::Frozen
            | CreateError::Missing => true,
            CreateError::Failed(e) => e.is_refusal(),
        }
    }
}

/// The answer of a create: the payment as the request leaves it, 201 when it is new (or
/// resumed) and 200 when merchant_order_id found it.
pub fn payment_answer(status: u16, p: &Payment) -> StoredResponse {
    json_answer(status, &PaymentView::from(p))
}

/// What the caller of a transition knows that the state machine's row does not: everything
/// else a step writes is the row's (`Core::step`).
#[derive(Debug, Default)]
pub(crate) struct Extras {
    /// Evidence recorded with the event (the channel's answer, a reason).
    pub detail: String,
    /// The payment's new `last_error`; None keeps it (a settling step clears it).
    pub last_error: Option<String>,
    /// The event id when the step is keyed by something other than the payment's version
    /// (an ops action: `reversed@act_...`), so a re-execution is recorded once.
    pub event_id: Option<String>,
    /// The values of the row's hold write (a hold's steps, issue 34): the expiry, the
    /// capture and its amounts, what is released.
    pub hold: Option<HoldWrite>,
}

/// Upper bound on steps in one drive, so a payment that keeps being moved by others cannot
/// keep a request busy forever.
const MAX_STEPS: usize = 12;

impl Core {
    /// Inserts a PENDING payment with its submit job (one transaction), or finds the
    /// merchant's payment with the same merchant_order_id, or finds the order tombstoned
    /// (nothing written).
    pub async fn insert_payment(
        &self,
        merchant_id: i64,
        input: &PaymentInput,
        recovery_key: Option<&KeyRef>,
    ) -> Result<InsertOutcome, ServiceError> {
        let mut new = self.new_payment(merchant_id, input);
        new.recovery_key = recovery_key.cloned();
        let params_hash = new.params_hash.clone();
        Ok(match self.store.create_payment(&new).await? {
            CreatePayment::Created(p) => InsertOutcome::Created(p),
            CreatePayment::Existing(p) if p.params_hash == params_hash => {
                InsertOutcome::Existing(p)
            }
            CreatePayment::Existing(p) => InsertOutcome::OrderConflict(p),
            CreatePayment::Tombstoned => InsertOutcome::Tombstoned,
        })
    }

    /// The row of a new PENDING payment with fresh ids (no recovery key).
    fn new_payment(&self, merchant_id: i64, input: &PaymentInput) -> NewPayment {
        let now = self.clock.now_ms();
        NewPayment {
            id: ids::new_id("pay"),
            merchant_id,
            merchant_order_id: input.merchant_order_id.clone(),
            amount: input.amount,
            currency: input.currency.clone(),
            description: input.description.clone(),
            params_hash: input.params_hash(),
            channel_key: ids::new_id("ck"),
            connector: self.connectors.route(merchant_id, None).to_owned(),
            capture_mode: input.capture_mode,
            now,
            submit_due_at: now + self.timings.submit_delay_ms,
            max_attempts: self.timings.max_attempts,
            recovery_key: None,
        }
    }

    /// A create request under an Idempotency-Key, from its claim to its answer (DESIGN.md
    /// "Idempotency contract", "Merchant HTTP API"), on the one write path
    /// ([`Core::keyed_write`]): [`create_payment`](Self::create_payment)'s two phases for a
    /// new key (the first claims the key, records the recovery point and inserts the
    /// payment in one transaction); for a key a crashed request claimed, its recovery point
    /// resumed (the payment it created driven on, never a second payment or charge: the
    /// channel key is the payment's) or, when it created nothing, the payment inserted now. A
    /// frozen merchant's request only resumes what an earlier request created.
    pub async fn create_payment_keyed(
        &self,
        merchant: &Merchant,
        input: &PaymentInput,
        claim: &KeyClaim,
    ) -> Result<Written, CreateError> {
        let start = if freeze::may_start(merchant.frozen, NewWork::Payments).is_err() {
            // Claimed first, as before phase 1 existed: a payment a crashed request already
            // created is in flight and converges whatever the merchant's state; only a new one
            // is refused.
            // A new claim comes back as a recovery point of None, which refuses (below).
            Start::of_claim_only(self.store.claim_key(claim).await?)
        } else {
            // Both phases run here, before `keyed_write`: a failure after phase 1 committed
            // ends the claim's lease as `keyed_write` does for any other write's failure.
            match self.create_payment(merchant.id, input, claim).await {
                Ok(CreateOutcome::Key(k)) => Start::of_claim_only(k),
                Ok(created) => Start::Fresh(created),
                Err(e) => {
                    self.end_lease(claim.key_ref(), claim.lease_expires_at)
                        .await;
                    return Err(e.into());
                }
            }
        };
        let fresh = async |created: CreateOutcome| -> Result<Answer, CreateError> {
            match created {
                CreateOutcome::Created {
                    stored: Some(stored),
                    ..
                } => Ok(Answer::Stored(stored)),
                CreateOutcome::Created { payment, .. } => {
                    Ok(Answer::Ready(payment_answer(201, &payment)))
                }
                CreateOutcome::Existing(p) => Ok(Answer::Ready(payment_answer(200, &p))),
                CreateOutcome::OrderConflict(p) => Err(CreateError::OrderConflict(Box::new(p))),
                CreateOutcome::Tombstoned => Err(CreateError::OrderCancelled),
                CreateOutcome::Key(_) => Err(CreateError::Failed(ServiceError::Store(
                    crate::store::StoreError::Corrupt("a key outcome as a fresh create".into()),
                ))),
            }
        };
        let resume = async |resource_id: Option<String>| -> Result<Answer, CreateError> {
            match resource_id {
                Some(id) => match self.store.payment(&id).await? {
                    Some(p) if p.merchant_id == merchant.id => Ok(Answer::Ready(payment_answer(
                        201,
                        &self.drive(p, "api").await?,
                    ))),
                    _ => Err(CreateError::Missing),
                },
                // The crashed request claimed the key but created nothing.
                None if freeze::may_start(merchant.frozen, NewWork::Payments).is_err() => {
                    Err(CreateError::Frozen)
                }
                None => match self
                    .insert_payment(merchant.id, input, Some(&claim.key_ref()))
                    .await?
                {
                    InsertOutcome::Created(p) => Ok(Answer::Ready(payment_answer(
                        201,
                        &self.drive(p, "api").await?,
                    ))),
                    InsertOutcome::Existing(p) => Ok(Answer::Ready(payment_answer(200, &p))),
                    InsertOutcome::OrderConflict(p) => Err(CreateError::OrderConflict(Box::new(p))),
                    InsertOutcome::Tombstoned => Err(CreateError::OrderCancelled),
                },
            }
        };
        self.keyed_write(claim, Seal::Plain, start, fresh, resume)
            .await
    }

    /// Creates a payment under an Idempotency-Key in two atomic phases (Brandur Leach,
    /// "Implementing Stripe-like Idempotency Keys in Postgres"; issue 15):
    ///
    /// 1. one transaction claims the key, inserts the payment with its submit job and the
    ///    key's recovery point, and submits it (PENDING -> PROCESSING);
    /// 2. the charge is sent with the payment's channel key, outside any transaction;
    /// 3. one transaction applies the channel's answer as its transition(s), the ledger batch
    ///    when it is a charge, and completes the key with the payment's answer
    ///    ([`payment_answer`], 201).
    ///
    /// A crash between any two steps leaves what a retry resumes from (the key's recovery
    /// point, the submit job), as [`drive`](Self::drive) does from any state. When something
    /// else moved the payment between the phases, or the merchant is frozen, or submissions
    /// are paused, the payment is driven step by step instead and `stored` is None.
    #[tracing::instrument(name = "create_payment", skip_all, fields(merchant_id = merchant_id, idempotency_key = %claim.idem_key))]
    pub async fn create_payment(
        &self,
        merchant_id: i64,
        input: &PaymentInput,
        claim: &KeyClaim,
    ) -> Result<CreateOutcome, ServiceError> {
        let source = "api";
        let p = match self.open_keyed(merchant_id, input, claim, source).await? {
            ControlFlow::Continue(p) => p,
            ControlFlow::Break(outcome) => return Ok(outcome),
        };
        let (event, extras) = match p.capture_mode {
            CaptureMode::Automatic => {
                let outcome = self.send_charge(&p).await;
                self.charge_answer(&p, outcome)
            }
            CaptureMode::Manual => {
                let outcome = self.send_authorize(&p).await;
                self.authorize_answer(&p, outcome)
            }
        };
        let steps = self.answer_steps(&p, event, extras, source).await?;
        self.complete_keyed(&p, claim, event, &steps, source).await
    }

    /// Phase 1 of [`create_payment`](Self::create_payment): one transaction claims the key,
    /// inserts the payment with its submit job and submits it (unless submissions are
    /// paused). Continues with the PROCESSING payment to charge; breaks with the outcome when
    /// there is nothing to send (an existing payment, an order conflict, a tombstoned order, a
    /// claimed key, a payment held PENDING by the emergency switch).
    async fn open_keyed(
        &self,
        merchant_id: i64,
        input: &PaymentInput,
        claim: &KeyClaim,
        source: &str,
    ) -> Result<ControlFlow<CreateOutcome, Payment>, ServiceError> {
        let held = self.active_pauses().await.submissions();
        let new = self.new_payment(merchant_id, input);
        let params_hash = new.params_hash.clone();
        let event = submit_event(new.capture_mode);
        let submit = (!held).then(|| Transition {
            payment_id: new.id.clone(),
            from: PaymentStatus::Pending,
            version: 1,
            to: rule(PaymentStatus::Pending, event).map_or(PaymentStatus::Processing, |r| r.to),
            event,
            event_id: format!("{event}@v1"),
            source: source.into(),
            detail: String::new(),
            now: new.now,
            last_error: None,
            posting: None,
            enqueue: vec![],
            hold: None,
        });
        let opened = self
            .store
            .open_payment(&OpenPayment {
                claim: claim.clone(),
                payment: new,
                submit,
            })
            .await?;
        let p = match opened {
            OpenedPayment::Created(p) => p,
            OpenedPayment::Existing(p) if p.params_hash == params_hash => {
                return Ok(ControlFlow::Break(CreateOutcome::Existing(p)));
            }
            OpenedPayment::Existing(p) => {
                return Ok(ControlFlow::Break(CreateOutcome::OrderConflict(p)));
            }
            OpenedPayment::Key(k) => return Ok(ControlFlow::Break(CreateOutcome::Key(k))),
            OpenedPayment::Tombstoned => return Ok(ControlFlow::Break(CreateOutcome::Tombstoned)),
        };
        if AutoStep::awaits_channel(p.status) && p.status != PaymentStatus::Pending {
            metrics::counter!("converge_transitions_total", "to" => p.status.as_str().to_ascii_lowercase()).increment(1);
            Ok(ControlFlow::Continue(p))
        } else {
            // Held by the emergency switch: PENDING until its submit job runs after the resume.
            Ok(ControlFlow::Break(CreateOutcome::Created {
                payment: p,
                stored: None,
            }))
        }
    }

    /// The transitions the channel's answer `event` makes from the submitted `p`: the answer
    /// itself and, for a charge of a merchant whose postings do not wait, the ledger's
    /// posting, both to be applied in one transaction.
    async fn answer_steps(
        &self,
        p: &Payment,
        event: PaymentEvent,
        extras: Extras,
        source: &str,
    ) -> Result<Vec<Transition>, ServiceError> {
        let now = self.clock.now_ms();
        let first = self.transition(p, event, source, extras, now)?;
        let mut steps = vec![first];
        if steps[0].to == PaymentStatus::ChannelSuccess {
            let merchant = self.store.merchant(p.merchant_id).await?;
            if !freeze::posting_waits(merchant.map(|m| m.frozen)) {
                // The payment as the first step leaves it, for the row that follows.
                let charged = Payment {
                    status: steps[0].to,
                    version: steps[0].version + 1,
                    ..p.clone()
                };
                let posted = self.transition(
                    &charged,
                    PaymentEvent::LedgerPosted,
                    source,
                    Extras {
                        detail: format!("charge batch {}", money::display(p.amount, &p.currency)),
                        ..Extras::default()
                    },
                    now,
                )?;
                steps.push(posted);
            }
        }
        Ok(steps)
    }

    /// Phase 3 of [`create_payment`](Self::create_payment): one transaction applies `steps`
    /// and, when they leave the payment where [`drive`](Self::drive) would stop, completes
    /// the key with its answer; otherwise (or when something else moved the payment) the
    /// payment is driven on and the caller stores the answer.
    async fn complete_keyed(
        &self,
        p: &Payment,
        claim: &KeyClaim,
        event: PaymentEvent,
        steps: &[Transition],
        source: &str,
    ) -> Result<CreateOutcome, ServiceError> {
        // Only an answer drive() would stop at is stored with the key; otherwise the payment
        // goes on step by step (a frozen merchant's SUSPENSE) and the caller stores it.
        let last = steps.last().map_or(p.status, |t| t.to);
        let settled = AutoStep::of(last).is_none();
        let key = claim.key_ref();
        let render = |p: &Payment| payment_answer(201, p);
        let completion = KeyCompletion {
            key: &key,
            render: &render,
        };
        let done = self
            .store
            .apply_transitions(steps, settled.then_some(&completion))
            .await?;
        count_transition_metrics(&done.result, steps);
        let current = match done.result {
            TransitionResult::Applied(after) if settled => {
                return Ok(CreateOutcome::Created {
                    payment: after,
                    stored: done.stored,
                });
            }
            TransitionResult::Applied(after) => after,
            TransitionResult::Stale(current) => {
                self.record_lost(p, event, source, &current).await?;
                current
            }
            TransitionResult::DuplicateEvent => self.record_lost_unread(p, event, source).await?,
            TransitionResult::Refused(refused) => {
                return Err(ServiceError::Store(crate::store::StoreError::Corrupt(
                    format!("store refused {refused}"),
                )));
            }
        };
        Ok(CreateOutcome::Created {
            payment: self.drive(current, source).await?,
            stored: None,
        })
    }

    /// Moves a payment as far as it goes without waiting: submit, charge with its channel key,
    /// record the answer, post the ledger. Returns where it got (UNKNOWN, SUSPENSE and
    /// PROCESSING are left to the compensation queue). `source` is recorded with each event.
    ///
    /// While submissions are paused (the emergency switch) a PENDING or PROCESSING payment
    /// is left where it is and nothing is sent; its submit job sends it after the resume.
    #[tracing::instrument(name = "drive", skip_all, fields(payment_id = %p.id, merchant_id = p.merchant_id))]
    pub async fn drive(&self, mut p: Payment, source: &str) -> Result<Payment, ServiceError> {
        let held = self.active_pauses().await.submissions();
        for _ in 0..MAX_STEPS {
            let before = (p.status, p.version);
            p = match AutoStep::of(p.status) {
                Some(step) if held && step.reaches_channel() => return Ok(p),
                Some(AutoStep::Submit) => {
                    let event = submit_event(p.capture_mode);
                    self.apply(&p, event, source, Extras::default()).await?
                }
                Some(AutoStep::Charge) => self.charge(&p, source).await?,
                Some(AutoStep::Authorize) => self.authorize(&p, source).await?,
                Some(AutoStep::Post) => self.post_ledger(&p, source).await?,
                None => return Ok(p),
            };
            if (p.status, p.version) == before {
                // Nothing moved (an ignored event): stop rather than spin.
                return Ok(p);
            }
        }
        Err(ServiceError::Contended(p.id))
    }

    /// Sends the charge with the payment's channel key and records the answer.
    async fn charge(&self, p: &Payment, source: &str) -> Result<Payment, ServiceError> {
        let outcome = self.send_charge(p).await;
        let (event, extras) = self.charge_answer(p, outcome);
        self.apply(p, event, source, extras).await
    }

    /// The charge at the channel with the payment's channel key (never inside a
    /// transaction), counted by outcome and recorded as a channel attempt
    /// ([`Core::record_attempt`]).
    async fn send_charge(&self, p: &Payment) -> ChargeOutcome {
        let started = std::time::Instant::now();
        let outcome = self
            .connectors
            .for_payment(p)
            .charge(&p.channel_key, p.amount, &p.currency)
            .await;
        let duration_ms = i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX);
        metrics::counter!("converge_channel_charges_total", "outcome" => outcome_name(&outcome))
            .increment(1);
        self.record_attempt(p, &outcome, duration_ms).await;
        outcome
    }

    /// Records a charge's answer for channel health: a `channel_attempts` row (the dashboard)
    /// and `converge_channel_attempts_total{connector, outcome}` (`/metrics`; `outcome` is
    /// `success`, `decline`, or the undecidable reason `timeout`, `5xx`, `dropped`,
    /// `garbled`). A charge for another amount than the payment's is undecidable (`garbled`),
    /// as the payment treats it. The row is telemetry: a failed write is logged and the
    /// charge's answer is still recorded on the payment.
    async fn record_attempt(&self, p: &Payment, outcome: &ChargeOutcome, duration_ms: i64) {
        use crate::domain::channel_health::{AttemptOutcome, FailureReason, undecidable_reason};
        let (kind, reason) = match outcome {
            ChargeOutcome::Succeeded { amount, currency }
                if *amount == p.amount && *currency == p.currency =>
            {
                (AttemptOutcome::Success, None)
            }
            ChargeOutcome::Succeeded { .. } => {
                (AttemptOutcome::Undecidable, Some(FailureReason::Garbled))
            }
            ChargeOutcome::Declined { reason } => (
                AttemptOutcome::Decline,
                Some(FailureReason::declined(reason)),
            ),
            // The channel answered, decidably: the connector is healthy; the customer's step
            // is not the channel's failure.
            ChargeOutcome::RequiresAction { .. } => (AttemptOutcome::Success, None),
            ChargeOutcome::Error { detail } => (
                AttemptOutcome::Undecidable,
                Some(undecidable_reason(detail)),
            ),
        };
        let label = match (&kind, &reason) {
            (AttemptOutcome::Undecidable, Some(r)) => r.key(),
            _ => kind.as_str().to_owned(),
        };
        metrics::counter!(
            "converge_channel_attempts_total",
            "connector" => p.connector.clone(),
            "outcome" => label
        )
        .increment(1);
        metrics::histogram!("converge_channel_attempt_duration_seconds", "connector" => p.connector.clone())
            .record(duration_ms as f64 / 1000.0);
        let attempt = crate::store::NewChannelAttempt {
            payment_id: p.id.clone(),
            connector: p.connector.clone(),
            outcome: kind,
            reason,
            duration_ms,
            at: self.clock.now_ms(),
        };
        if let Err(e) = self.store.record_channel_attempt(&attempt).await {
            tracing::warn!(error = %e, payment_id = %p.id, "channel attempt not recorded for channel health");
        }
    }

    /// The event a charge's answer is and what it writes: a charge for another amount or an
    /// error is UNKNOWN with a query job (an undecidable answer is never a failure).
    fn charge_answer(&self, p: &Payment, outcome: ChargeOutcome) -> (PaymentEvent, Extras) {
        match outcome {
            ChargeOutcome::Succeeded { amount, currency }
                if amount == p.amount && currency == p.currency =>
            {
                let extras = Extras {
                    detail: format!("charged {}", money::display(amount, &currency)),
                    ..Extras::default()
                };
                (PaymentEvent::ChannelSucceeded, extras)
            }
            ChargeOutcome::Succeeded { amount, currency } => {
                let detail = format!(
                    "channel charged {}, payment is {}",
                    money::display(amount, &currency),
                    money::display(p.amount, &p.currency)
                );
                self.unknown_answer(detail)
            }
            ChargeOutcome::Declined { reason } => {
                let extras = Extras {
                    detail: reason.clone(),
                    last_error: Some(format!("declined: {reason}")),
                    ..Extras::default()
                };
                (PaymentEvent::ChannelDeclined, extras)
            }
            #[cfg(feature = "planted-bugs")]
            ChargeOutcome::Error { detail }
                if crate::planted::on(crate::planted::Bug::UnknownChargeFailed) =>
            {
                let extras = Extras {
                    last_error: Some(format!("declined: {detail}")),
                    detail,
                    ..Extras::default()
                };
                (PaymentEvent::ChannelDeclined, extras)
            }
            ChargeOutcome::RequiresAction { detail } => awaiting_action(detail),
            ChargeOutcome::Error { detail } => self.unknown_answer(detail),
        }
    }

    /// PROCESSING -> UNKNOWN (its row queues the query job).
    fn unknown_answer(&self, detail: String) -> (PaymentEvent, Extras) {
        let extras = Extras {
            last_error: Some(detail.clone()),
            detail,
            ..Extras::default()
        };
        (PaymentEvent::ChannelError, extras)
    }

    /// Posts the charge batch (CHANNEL_SUCCESS or SUSPENSE -> SUCCESS), or parks the payment
    /// in SUSPENSE with a post_ledger job when the merchant is frozen.
    pub(crate) async fn post_ledger(
        &self,
        p: &Payment,
        source: &str,
    ) -> Result<Payment, ServiceError> {
        let merchant = self.store.merchant(p.merchant_id).await?;
        if freeze::posting_waits(merchant.map(|m| m.frozen)) {
            if p.status == PaymentStatus::Suspense {
                // Each retry counts on the item (SuspenseItem: a restatement, never a reopening
                // of an item a person resolved).
                self.restate_suspense(p).await?;
                return Ok(p.clone());
            }
            // No new job (the row's effects): the post_ledger job written when the payment
            // entered CHANNEL_SUCCESS keeps retrying while the merchant is frozen. The parking
            // step opens the SUSPENSE item itself (its row's effects); a writer that lost the
            // race to park it states nothing.
            let extras = Extras {
                detail: "merchant account frozen".into(),
                last_error: Some("ledger posting failed: merchant account frozen".into()),
                ..Extras::default()
            };
            return self
                .apply(p, PaymentEvent::LedgerFailed, source, extras)
                .await;
        }
        let extras = Extras {
            detail: format!("charge batch {}", money::display(p.amount, &p.currency)),
            ..Extras::default()
        };
        self.apply(p, PaymentEvent::LedgerPosted, source, extras)
            .await
    }

    /// Applies `event` to `p` if the state machine allows it, else records it as ignored.
    /// Returns the payment as it now is (re-read when someone else moved first); an event that
    /// lost a race to another writer is recorded as ignored too.
    pub(crate) async fn apply(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
        extras: Extras,
    ) -> Result<Payment, ServiceError> {
        Ok(self.apply_recorded(p, event, source, extras).await?.0)
    }

    /// [`apply`](Self::apply) that also says whether this call's event is the one applied,
    /// for a caller whose follow-up differs for the writer that moved the payment.
    pub(crate) async fn apply_recorded(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
        extras: Extras,
    ) -> Result<(Payment, Applied), ServiceError> {
        let (current, applied) = self.apply_outcome(p, event, source, extras).await?;
        if applied == Applied::Lost {
            self.record_lost(p, event, source, &current).await?;
        }
        Ok((current, applied))
    }

    /// Records `event`, which lost the race for `p` to another writer, as ignored: every
    /// ignored event is recorded (DESIGN.md "Payment state machine"), each loser as its own
    /// record, since several workers or callbacks may lose the same race.
    async fn record_lost(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
        current: &Payment,
    ) -> Result<(), ServiceError> {
        self.store
            .record_ignored_event(&IgnoredEvent {
                payment_id: p.id.clone(),
                event_id: format!("{event}@v{}:lost:{}", p.version, super::ids::new_id("race")),
                event,
                from: p.status,
                source: source.into(),
                detail: format!(
                    "lost the race: the payment is {} at version {}",
                    current.status.as_str(),
                    current.version
                ),
                now: self.clock.now_ms(),
            })
            .await?;
        Ok(())
    }

    /// [`record_lost`](Self::record_lost) after another writer applied the same event id
    /// first: the payment is read again. Returns it.
    async fn record_lost_unread(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
    ) -> Result<Payment, ServiceError> {
        let current = self
            .store
            .payment(&p.id)
            .await?
            .ok_or_else(|| ServiceError::Contended(p.id.clone()))?;
        self.record_lost(p, event, source, &current).await?;
        Ok(current)
    }

    /// The transition `event` makes from `p`. Errors: the state machine refuses it.
    pub(crate) fn transition(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
        extras: Extras,
        now: i64,
    ) -> Result<Transition, ServiceError> {
        let r = rule(p.status, event).map_err(refused)?;
        Ok(self.step(p, r, source, extras, now))
    }

    /// The one builder of a [`Transition`]: `r`'s row applied to `p`, with the ledger lines
    /// and follow-up job the row's [`Effects`](crate::domain::state::Effects) call for (the
    /// store checks them against the same row and applies the rest: jobs closed, submission
    /// counted, error cleared). `extras` is what the caller knows: the evidence, the error and,
    /// for a step keyed by an ops action, its event id.
    pub(crate) fn step(
        &self,
        p: &Payment,
        r: &'static Rule,
        source: &str,
        extras: Extras,
        now: i64,
    ) -> Transition {
        debug_assert_eq!(p.status, r.from);
        let (m, cur) = (p.merchant_id, p.currency.as_str());
        // A hold's batch takes its amounts from the step's hold write; a batch without the
        // write it needs is left out, and the store refuses the step (paired with the row).
        let posting = r
            .effects
            .ledger
            .and_then(|batch| match (batch, &extras.hold) {
                (Batch::Charge, _) => Some(ledger::charge(m, p.amount, cur)),
                (Batch::Reversal, _) => Some(ledger::reversal(m, p.unrefunded(), cur)),
                (Batch::Hold, _) => Some(ledger::hold(m, p.amount, cur)),
                (
                    Batch::Capture,
                    Some(HoldWrite::Capture {
                        id,
                        amount,
                        released,
                    }),
                ) => Some(ledger::capture(m, id, *amount, *released, cur)),
                (Batch::Release, Some(HoldWrite::Release { amount, .. })) if *amount > 0 => {
                    Some(ledger::release(m, *amount, cur))
                }
                (Batch::Capture | Batch::Release, _) => None,
            })
            .map(|posting| posting.dated(self.accounting.date_of(now)));
        let expires_at = match &extras.hold {
            Some(HoldWrite::Authorize { expires_at }) => *expires_at,
            _ => now + self.timings.authorization_ttl_ms,
        };
        // The state this transition enters is left by a later step; if the process dies
        // before that step, only a job written in this same transaction moves it on.
        let enqueue = r
            .effects
            .follow_up
            .map(|f| NewJob {
                kind: f.kind,
                payment_id: Some(p.id.clone()),
                refund_id: None,
                run_at: now
                    + match f.after {
                        Delay::Now => 0,
                        Delay::Submit => self.timings.submit_delay_ms,
                        Delay::Query => self.timings.query_delay_ms,
                        Delay::HoldExpiry => expires_at - now,
                    },
                max_attempts: self.timings.max_attempts,
            })
            .into_iter()
            .collect();
        Transition {
            payment_id: p.id.clone(),
            from: r.from,
            version: p.version,
            to: r.to,
            event: r.event,
            event_id: extras
                .event_id
                .unwrap_or_else(|| format!("{}@v{}", r.event, p.version)),
            source: source.into(),
            detail: extras.detail,
            now,
            last_error: extras.last_error,
            posting,
            enqueue,
            hold: extras.hold,
        }
    }

    /// [`apply`](Self::apply) without recording a lost race, for callers that record the
    /// event under their own id (a callback's `cb:<event id>`). Returns the payment as it now
    /// is and whether this call's event is the one applied.
    pub(crate) async fn apply_outcome(
        &self,
        p: &Payment,
        event: PaymentEvent,
        source: &str,
        extras: Extras,
    ) -> Result<(Payment, Applied), ServiceError> {
        let now = self.clock.now_ms();
        let r = match rule(p.status, event) {
            Ok(r) => r,
            Err(refused) => {
                self.store
                    .record_ignored_event(&IgnoredEvent {
                        payment_id: p.id.clone(),
                        event_id: format!("{event}@v{}:ignored", p.version),
                        event,
                        from: p.status,
                        source: source.into(),
                        detail: refused.to_string(),
                        now,
                    })
                    .await?;
                metrics::counter!("converge_events_ignored_total", "event" => event.as_str())
                    .increment(1);
                return Ok((p.clone(), Applied::Refused));
            }
        };
        let t = self.step(p, r, source, extras, now);
        match self.store.apply_transition(&t).await? {
            TransitionResult::Applied(next) => {
                metrics::counter!("converge_transitions_total", "to" => next.status.as_str().to_ascii_lowercase())
                    .increment(1);
                Ok((next, Applied::Yes))
            }
            TransitionResult::Stale(current) => {
                metrics::counter!("converge_events_ignored_total", "event" => event.as_str())
                    .increment(1);
                Ok((current, Applied::Lost))
            }
            // Another writer applied the same event at this version first.
            TransitionResult::DuplicateEvent => {
                metrics::counter!("converge_events_ignored_total", "event" => event.as_str())
                    .increment(1);
                let current = self
                    .store
                    .payment(&p.id)
                    .await?
                    .ok_or_else(|| ServiceError::Contended(p.id.clone()))?;
                Ok((current, Applied::Lost))
            }
            TransitionResult::Refused(refused) => Err(ServiceError::Store(
                crate::store::StoreError::Corrupt(format!("store refused {refused}")),
            )),
        }
    }
}

/// Whether [`Core::apply_outcome`]'s event took effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    /// This call's transition is the one applied.
    Yes,
    /// The state machine refuses it from the payment's state; recorded as ignored.
    Refused,
    /// Another writer moved the payment first (a version race); not yet recorded.
    Lost,
}

/// The counters of a batch of transitions: each applied step, or the first step's event
/// ignored when the batch lost its race.
fn count_transition_metrics(result: &TransitionResult, steps: &[Transition]) {
    match result {
        TransitionResult::Applied(_) => {
            for t in steps {
                metrics::counter!("converge_transitions_total", "to" => t.to.as_str().to_ascii_lowercase())
                    .increment(1);
            }
        }
        TransitionResult::Stale(_) | TransitionResult::DuplicateEvent => {
            if let Some(t) = steps.first() {
                metrics::counter!("converge_events_ignored_total", "event" => t.event.as_str())
                    .increment(1);
            }
        }
        TransitionResult::Refused(_) => {}
    }
}

/// The event that sends a PENDING payment on: its charge, or its authorization.
pub(crate) fn submit_event(mode: CaptureMode) -> PaymentEvent {
    match mode {
        CaptureMode::Automatic => PaymentEvent::Submit,
        CaptureMode::Manual => PaymentEvent::SubmitAuthorization,
    }
}

/// A transition the state machine refuses where the caller's own state says it cannot be:
/// a bug, reported as corrupt state rather than written.
fn refused(e: crate::domain::state::TransitionError) -> ServiceError {
    ServiceError::Store(crate::store::StoreError::Corrupt(format!(
        "state machine refused {e}"
    )))
}

/// The extras of a step into REQUIRES_ACTION (issue 38): the channel's reference for the
/// customer's step.
pub(super) fn awaiting(detail: String) -> Extras {
    Extras {
        detail: format!("waiting for the customer to authenticate ({detail})"),
        ..Extras::default()
    }
}

/// The step and evidence of a charge or authorization the channel answered with a customer's
/// step (3-D Secure): PROCESSING or AUTHORIZING -> REQUIRES_ACTION.
pub(super) fn awaiting_action(detail: String) -> (PaymentEvent, Extras) {
    (PaymentEvent::ChannelRequiresAction, awaiting(detail))
}

fn outcome_name(o: &ChargeOutcome) -> &'static str {
    match o {
        ChargeOutcome::Succeeded { .. } => "succeeded",
        ChargeOutcome::Declined { .. } => "declined",
        ChargeOutcome::RequiresAction { .. } => "requires_action",
        ChargeOutcome::Error { .. } => "error",
    }
}

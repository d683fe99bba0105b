//! The payment state machine (DESIGN.md "Payment state machine"; seed article 000 on the
//! order state machine, seed article 004 on UNKNOWN vs FAILED and CHANNEL_SUCCESS/SUSPENSE).
//!
//! The transition table is data ([`TRANSITIONS`]); [`transition`] is the only way to compute a
//! next state. Persistence applies the result with a conditional update on (id, status,
//! version), so two writers racing from one version cannot both win.

use std::fmt;
use std::str::FromStr;

// The statuses, their names and their classes (terminal, settled, charged) are defined once
// in `converge-wire`, which the console shares; the moves between them are this module's.
pub use converge_wire::status::{PaymentStatus, UnknownName};

/// Something that happened to a payment; the input of [`transition`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PaymentEvent {
    /// The channel request was sent with the payment's channel key.
    Submit,
    /// The channel confirmed the charge (amount, currency and key matched).
    ChannelSucceeded,
    /// The channel explicitly and decidably declined.
    ChannelDeclined,
    /// Timeout, 5xx or garbled answer: the outcome is unknown.
    ChannelError,
    /// A query by channel key found the charge.
    QuerySucceeded,
    /// A query by channel key found a decline.
    QueryDeclined,
    /// A query found nothing; the request will be resubmitted with the same key.
    QueryNotFound,
    /// A query found nothing, the resubmit budget is spent and the key was cancelled at the
    /// channel (TCC anti-hanging fence), so no late request can charge.
    QueryNotFoundFenced,
    /// The charge's ledger batch was posted.
    LedgerPosted,
    /// Posting failed (e.g. merchant account frozen).
    LedgerFailed,
    /// The remaining amount was refunded at the channel and reversing entries posted.
    Reversed,
    /// Merchant refunds reached the payment amount.
    RefundedInFull,
    /// An approved ops force-transition (outside the table; see [`FORCE_WHITELIST`]).
    Forced,
    /// A manual-capture payment's authorization is sent with its channel key (issue 34).
    SubmitAuthorization,
    /// The channel holds the funds (amount, currency and key matched).
    ChannelAuthorized,
    /// A query of the hold by channel key found it authorized.
    QueryAuthorized,
    /// A query of the hold found nothing; the authorization is resent with the same key.
    QueryHoldNotFound,
    /// The hold lapsed (the expiry job, or the channel said so) with nothing captured.
    HoldLapsed,
    /// The hold lapsed after a part was captured: the rest is released, the payment SUCCESS.
    HoldLapsedCaptured,
    /// A capture of part or all of the hold was asked for (merchant or approved ops action).
    RequestCapture,
    /// The channel made the capture; the hold stays open for more.
    ChannelCaptured,
    /// The channel made the capture and closed the hold (final, or the hold used up).
    ChannelCapturedFinal,
    /// The channel refused the capture decidably: back to AUTHORIZED (seed 000
    /// `capture_retry`).
    CaptureRefused,
    /// A void of the hold was asked for (merchant, TCC cancel or approved ops action).
    RequestVoid,
    /// The channel released the recorded hold (or said it had lapsed).
    ChannelVoided,
    /// The channel fenced a key whose hold the core never recorded (a void while the
    /// authorization was in flight or unknown): nothing was held here, nothing is released.
    VoidFenced,
    /// The merchant cancelled a payment that never reached the channel.
    Cancel,
    /// The channel answered the charge or the authorization: it waits for the customer to
    /// authenticate (3-D Secure; issue 38).
    ChannelRequiresAction,
    /// A query by channel key found the request waiting for the customer to authenticate.
    QueryRequiresAction,
    /// Nobody authenticated within the action window (or the channel dropped the request):
    /// the key was cancelled at the channel first, so a late authentication cannot charge;
    /// nothing was charged or held.
    ActionAbandoned,
}

impl PaymentEvent {
    /// Every event.
    pub const ALL: [PaymentEvent; 30] = [
        PaymentEvent::Submit,
        PaymentEvent::ChannelSucceeded,
        PaymentEvent::ChannelDeclined,
        PaymentEvent::ChannelError,
        PaymentEvent::QuerySucceeded,
        PaymentEvent::QueryDeclined,
        PaymentEvent::QueryNotFound,
        PaymentEvent::QueryNotFoundFenced,
        PaymentEvent::LedgerPosted,
        PaymentEvent::LedgerFailed,
        PaymentEvent::Reversed,
        PaymentEvent::RefundedInFull,
        PaymentEvent::Forced,
        PaymentEvent::SubmitAuthorization,
        PaymentEvent::ChannelAuthorized,
        PaymentEvent::QueryAuthorized,
        PaymentEvent::QueryHoldNotFound,
        PaymentEvent::HoldLapsed,
        PaymentEvent::HoldLapsedCaptured,
        PaymentEvent::RequestCapture,
        PaymentEvent::ChannelCaptured,
        PaymentEvent::ChannelCapturedFinal,
        PaymentEvent::CaptureRefused,
        PaymentEvent::RequestVoid,
        PaymentEvent::ChannelVoided,
        PaymentEvent::VoidFenced,
        PaymentEvent::Cancel,
        PaymentEvent::ChannelRequiresAction,
        PaymentEvent::QueryRequiresAction,
        PaymentEvent::ActionAbandoned,
    ];

    /// The stable snake_case name recorded with each event.
    pub fn as_str(self) -> &'static str {
        match self {
            PaymentEvent::Submit => "submit",
            PaymentEvent::ChannelSucceeded => "channel_succeeded",
            PaymentEvent::ChannelDeclined => "channel_declined",
            PaymentEvent::ChannelError => "channel_error",
            PaymentEvent::QuerySucceeded => "query_succeeded",
            PaymentEvent::QueryDeclined => "query_declined",
            PaymentEvent::QueryNotFound => "query_not_found",
            PaymentEvent::QueryNotFoundFenced => "query_not_found_fenced",
            PaymentEvent::LedgerPosted => "ledger_posted",
            PaymentEvent::LedgerFailed => "ledger_failed",
            PaymentEvent::Reversed => "reversed",
            PaymentEvent::RefundedInFull => "refunded_in_full",
            PaymentEvent::Forced => "force_transition",
            PaymentEvent::SubmitAuthorization => "submit_authorization",
            PaymentEvent::ChannelAuthorized => "channel_authorized",
            PaymentEvent::QueryAuthorized => "query_authorized",
            PaymentEvent::QueryHoldNotFound => "query_hold_not_found",
            PaymentEvent::HoldLapsed => "hold_lapsed",
            PaymentEvent::HoldLapsedCaptured => "hold_lapsed_captured",
            PaymentEvent::RequestCapture => "request_capture",
            PaymentEvent::ChannelCaptured => "channel_captured",
            PaymentEvent::ChannelCapturedFinal => "channel_captured_final",
            PaymentEvent::CaptureRefused => "capture_refused",
            PaymentEvent::RequestVoid => "request_void",
            PaymentEvent::ChannelVoided => "channel_voided",
            PaymentEvent::VoidFenced => "void_fenced",
            PaymentEvent::Cancel => "cancel",
            PaymentEvent::ChannelRequiresAction => "channel_requires_action",
            PaymentEvent::QueryRequiresAction => "query_requires_action",
            PaymentEvent::ActionAbandoned => "action_abandoned",
        }
    }
}

impl fmt::Display for PaymentEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for PaymentEvent {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PaymentEvent::ALL
            .into_iter()
            .find(|e| e.as_str() == s)
            .ok_or_else(|| UnknownName(s.to_string()))
    }
}

use PaymentEvent as E;
use PaymentStatus as S;

use crate::domain::jobs::JobKind;

/// One row of the state machine: `from --event--> to` and what the step does besides
/// changing the status. The service and the store both read the effects from here, so no
/// caller restates them (issue 14; TigerBeetle's TIGER_STYLE: state changed in one place).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Status the payment must be in.
    pub from: PaymentStatus,
    /// The event.
    pub event: PaymentEvent,
    /// Status it moves to.
    pub to: PaymentStatus,
    /// What the step writes besides the status, in the same transaction.
    pub effects: Effects,
}

/// What a transition writes besides the status and its event record (DESIGN.md "Payment
/// state machine" and "Compensation queue"). The store applies these in the transition's
/// transaction, in this order: the status (counting a submission, clearing the error), the
/// ledger batch, the outbox row for the new status, the SUSPENSE item, the jobs closed, then
/// the follow-up job (so a step never closes the job it has just queued).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Effects {
    /// The payment's open (`due`) jobs of these kinds become pointless in the new status and
    /// are closed (`done`).
    pub closes: &'static [JobKind],
    /// The job that moves the payment on from `to` if the process dies before the step that
    /// normally follows in the same request (CHANNEL_SUCCESS waits for its posting, UNKNOWN
    /// for its query, a resubmission for its charge).
    pub follow_up: Option<FollowUp>,
    /// The step sends the charge (again): it counts against the resubmit budget
    /// (`payments.submit_attempts`).
    pub counts_submit: bool,
    /// The step settles the charge: `last_error` is cleared rather than kept.
    pub clears_error: bool,
    /// The ledger batch the step posts; the caller supplies its lines (amounts are the
    /// payment's), the store refuses a step whose lines and this disagree.
    pub ledger: Option<Batch>,
    /// What the step does to the payment's SUSPENSE item in the error pool.
    pub suspense_item: Option<SuspenseItem>,
    /// What the step writes to a manual-capture payment's hold (issue 34); the caller
    /// supplies the values ([`HoldEffect`]), the store refuses a step whose values and this
    /// disagree.
    pub hold: Option<HoldEffect>,
}

/// What a step writes to a manual-capture payment's hold (issue 34), in the transition's
/// transaction with its ledger batch: the payment's `hold_expires_at`, `captured_amount`,
/// `released_amount` and pending capture, and the capture's own record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HoldEffect {
    /// The hold is recorded with the expiry the channel answered.
    Authorize,
    /// A capture starts: the payment's pending capture (id, amount, final) is recorded with
    /// the capture's record.
    BeginCapture,
    /// The pending capture was made: its amount is captured; when it closes the hold, the
    /// rest is released.
    Capture,
    /// The pending capture was refused: nothing captured, the capture's record says why.
    RefuseCapture,
    /// What is still held is released (void, expiry); a pending capture is refused with it.
    Release,
}

/// What a step does to the payment's SUSPENSE item in the error pool (DESIGN.md "Compensation
/// queue and error pool"; invariant 4: a payment left waiting is in the error pool). Written
/// in the step's transaction, so the item and the status never disagree, and only by the
/// writer whose step applied (a writer that lost the race states nothing new).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SuspenseItem {
    /// The payment is parked: its item (kind `suspense`, key [`suspense_key`]) opens, again
    /// if a person resolved an earlier parking.
    Open,
    /// The charge batch is posted: the open item is resolved by `system` with
    /// [`suspense_resolution`]'s note.
    Resolve,
}

/// The error-pool dedupe key of payment `payment_id`'s SUSPENSE item: one item per payment.
pub fn suspense_key(payment_id: &str) -> String {
    format!("suspense:{payment_id}")
}

/// The note a step that posts a SUSPENSE payment's charge resolves its item with: a forced
/// step names the action (`source` `action:<id>`), a posting names the unfreezing.
pub fn suspense_resolution(event: PaymentEvent, source: &str) -> String {
    match event {
        PaymentEvent::Forced => format!(
            "forced to SUCCESS by {}",
            source.strip_prefix("action:").unwrap_or(source)
        ),
        _ => "ledger posted after the merchant was unfrozen".into(),
    }
}

/// A follow-up job: its kind and when it first runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowUp {
    /// The job.
    pub kind: JobKind,
    /// When it first runs, relative to the step.
    pub after: Delay,
}

/// The delays a follow-up job waits, named for the setting that gives each its length
/// (`converge serve --submit-delay-ms / --query-delay-ms`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delay {
    /// At once.
    Now,
    /// The submit delay: long enough for the request that made the step to take the next one
    /// itself.
    Submit,
    /// The query delay: the channel is given time to settle before it is asked.
    Query,
    /// When the hold lapses (the channel's answer, at most `--authorization-ttl` away).
    HoldExpiry,
}

/// The ledger batch a step posts (DESIGN.md "Ledger").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Batch {
    /// The charge: customer funds to the merchant's account, the payment's amount.
    Charge,
    /// A reversal of what the payment still holds (amount less refunds).
    Reversal,
    /// A hold recorded: the authorized amount, pending, off the merchant's payable.
    Hold,
    /// A capture: its amount from the pending hold to the merchant's payable, and the rest of
    /// the hold released when the capture closes it.
    Capture,
    /// The rest of a hold released (void, expiry).
    Release,
}

const NONE: Effects = Effects {
    closes: &[],
    follow_up: None,
    counts_submit: false,
    clears_error: false,
    ledger: None,
    suspense_item: None,
    hold: None,
};

/// The charge was answered (or the charge found by a query): the jobs that send or ask about
/// it are done.
const ANSWERED: &[JobKind] = &[JobKind::Submit, JobKind::Query];

/// CHANNEL_SUCCESS is left by the ledger posting that follows in the same request.
const POST_LEDGER: Option<FollowUp> = Some(FollowUp {
    kind: JobKind::PostLedger,
    after: Delay::Submit,
});

/// A step that moves a payment out of every in-flight state by a person's or a reversal's
/// authority closes every job that drives a charge.
const ALL_PAYMENT_JOBS: &[JobKind] = &[JobKind::Submit, JobKind::Query, JobKind::PostLedger];

const fn row(
    from: PaymentStatus,
    event: PaymentEvent,
    to: PaymentStatus,
    effects: Effects,
) -> Rule {
    Rule {
        from,
        event,
        to,
        effects,
    }
}

/// The whitelist: (from, event) -> to, exactly the table in DESIGN.md, each row with its
/// effects.
pub const TRANSITIONS: &[Rule] = &[
    row(
        S::Pending,
        E::Submit,
        S::Processing,
        Effects {
            counts_submit: true,
            ..NONE
        },
    ),
    row(
        S::Processing,
        E::ChannelSucceeded,
        S::ChannelSuccess,
        Effects {
            closes: ANSWERED,
            follow_up: POST_LEDGER,
            ..NONE
        },
    ),
    row(
        S::Processing,
        E::ChannelDeclined,
        S::Failed,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    row(
        S::Processing,
        E::ChannelError,
        S::Unknown,
        Effects {
            closes: &[JobKind::Submit],
            follow_up: Some(FollowUp {
                kind: JobKind::Query,
                after: Delay::Query,
            }),
            ..NONE
        },
    ),
    row(
        S::Unknown,
        E::QuerySucceeded,
        S::ChannelSuccess,
        Effects {
            closes: ANSWERED,
            follow_up: POST_LEDGER,
            ..NONE
        },
    ),
    row(
        S::Unknown,
        E::QueryDeclined,
        S::Failed,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    // Resubmitted with the same channel key: its charge follows in the same request.
    row(
        S::Unknown,
        E::QueryNotFound,
        S::Processing,
        Effects {
            closes: &[JobKind::Query],
            follow_up: Some(FollowUp {
                kind: JobKind::Submit,
                after: Delay::Submit,
            }),
            counts_submit: true,
            ..NONE
        },
    ),
    row(
        S::Unknown,
        E::QueryNotFoundFenced,
        S::Failed,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    row(
        S::ChannelSuccess,
        E::LedgerPosted,
        S::Success,
        Effects {
            closes: &[JobKind::PostLedger],
            clears_error: true,
            ledger: Some(Batch::Charge),
            ..NONE
        },
    ),
    // The post_ledger job written on entering CHANNEL_SUCCESS stays live and keeps retrying
    // while the merchant is frozen; a second one would post nothing more.
    row(
        S::ChannelSuccess,
        E::LedgerFailed,
        S::Suspense,
        Effects {
            suspense_item: Some(SuspenseItem::Open),
            ..NONE
        },
    ),
    row(
        S::Suspense,
        E::LedgerPosted,
        S::Success,
        Effects {
            closes: &[JobKind::PostLedger],
            clears_error: true,
            ledger: Some(Batch::Charge),
            suspense_item: Some(SuspenseItem::Resolve),
            ..NONE
        },
    ),
    // SUSPENSE was never posted: nothing to reverse in the ledger.
    row(
        S::Suspense,
        E::Reversed,
        S::Reversed,
        Effects {
            closes: REVERSED,
            ..NONE
        },
    ),
    row(
        S::Success,
        E::Reversed,
        S::Reversed,
        Effects {
            closes: REVERSED,
            ledger: Some(Batch::Reversal),
            ..NONE
        },
    ),
    row(S::Success, E::RefundedInFull, S::Refunded, NONE),
    // A payment still PENDING (held by the emergency switch, or not yet sent) never reaches
    // the channel once cancelled: its submission is a conditional update that now loses.
    row(
        S::Pending,
        E::Cancel,
        S::Canceled,
        Effects {
            closes: &[JobKind::Submit],
            ..NONE
        },
    ),
    // The hold's rows (issue 34; seed 000 §4.1, seed 004 §5.1).
    row(
        S::Pending,
        E::SubmitAuthorization,
        S::Authorizing,
        Effects {
            counts_submit: true,
            ..NONE
        },
    ),
    row(
        S::Authorizing,
        E::ChannelAuthorized,
        S::Authorized,
        AUTHORIZED,
    ),
    row(
        S::Authorizing,
        E::ChannelDeclined,
        S::Failed,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    row(
        S::Authorizing,
        E::ChannelError,
        S::Unknown,
        Effects {
            closes: &[JobKind::Submit],
            follow_up: Some(FollowUp {
                kind: JobKind::Query,
                after: Delay::Query,
            }),
            ..NONE
        },
    ),
    row(S::Unknown, E::QueryAuthorized, S::Authorized, AUTHORIZED),
    // Resent with the same channel key: its authorization follows in the same request.
    row(
        S::Unknown,
        E::QueryHoldNotFound,
        S::Authorizing,
        Effects {
            closes: &[JobKind::Query],
            follow_up: Some(FollowUp {
                kind: JobKind::Submit,
                after: Delay::Submit,
            }),
            counts_submit: true,
            ..NONE
        },
    ),
    // A query found the hold lapsed: it was never recorded here, so nothing is released.
    row(
        S::Unknown,
        E::HoldLapsed,
        S::Expired,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    row(
        S::Authorized,
        E::RequestCapture,
        S::Capturing,
        Effects {
            follow_up: Some(FollowUp {
                kind: JobKind::Capture,
                after: Delay::Submit,
            }),
            hold: Some(HoldEffect::BeginCapture),
            ..NONE
        },
    ),
    row(
        S::Capturing,
        E::ChannelCaptured,
        S::Authorized,
        Effects {
            closes: &[JobKind::Capture],
            clears_error: true,
            ledger: Some(Batch::Capture),
            hold: Some(HoldEffect::Capture),
            ..NONE
        },
    ),
    row(
        S::Capturing,
        E::ChannelCapturedFinal,
        S::Success,
        Effects {
            closes: HOLD_JOBS,
            clears_error: true,
            ledger: Some(Batch::Capture),
            hold: Some(HoldEffect::Capture),
            ..NONE
        },
    ),
    row(
        S::Capturing,
        E::CaptureRefused,
        S::Authorized,
        Effects {
            closes: &[JobKind::Capture],
            hold: Some(HoldEffect::RefuseCapture),
            ..NONE
        },
    ),
    row(S::Capturing, E::HoldLapsed, S::Expired, LAPSED),
    row(
        S::Capturing,
        E::HoldLapsedCaptured,
        S::Success,
        LAPSED_CAPTURED,
    ),
    // The expiry job records the lapse first, so no capture can start after it, then voids
    // at the channel (idempotent; the channel's hold lapses on its own clock as well).
    row(
        S::Authorized,
        E::HoldLapsed,
        S::Expired,
        Effects {
            follow_up: VOID_AT_CHANNEL,
            ..LAPSED
        },
    ),
    row(
        S::Authorized,
        E::HoldLapsedCaptured,
        S::Success,
        Effects {
            follow_up: VOID_AT_CHANNEL,
            ..LAPSED_CAPTURED
        },
    ),
    row(S::Authorized, E::RequestVoid, S::Voiding, VOIDING),
    // A void while the authorization is in flight or unknown: the channel's void releases a
    // hold that was made or fences the key, so a late authorization is declined (TCC).
    row(
        S::Authorizing,
        E::RequestVoid,
        S::Voiding,
        Effects {
            closes: ANSWERED,
            ..VOIDING
        },
    ),
    row(
        S::Unknown,
        E::RequestVoid,
        S::Voiding,
        Effects {
            closes: ANSWERED,
            ..VOIDING
        },
    ),
    row(
        S::Voiding,
        E::ChannelVoided,
        S::Voided,
        Effects {
            closes: HOLD_JOBS,
            ledger: Some(Batch::Release),
            hold: Some(HoldEffect::Release),
            ..NONE
        },
    ),
    row(
        S::Voiding,
        E::VoidFenced,
        S::Voided,
        Effects {
            closes: HOLD_JOBS,
            ..NONE
        },
    ),
    // The customer's authentication (3-D Secure; issue 38). The query job that follows
    // asks the channel until the customer acts or the action window ends.
    row(
        S::Processing,
        E::ChannelRequiresAction,
        S::RequiresAction,
        AWAIT_ACTION,
    ),
    row(
        S::Authorizing,
        E::ChannelRequiresAction,
        S::RequiresAction,
        AWAIT_ACTION,
    ),
    // Found waiting by the query job of an UNKNOWN payment: that job keeps asking.
    row(S::Unknown, E::QueryRequiresAction, S::RequiresAction, NONE),
    row(
        S::RequiresAction,
        E::QuerySucceeded,
        S::ChannelSuccess,
        Effects {
            closes: ANSWERED,
            follow_up: POST_LEDGER,
            ..NONE
        },
    ),
    row(
        S::RequiresAction,
        E::QueryAuthorized,
        S::Authorized,
        AUTHORIZED,
    ),
    row(
        S::RequiresAction,
        E::QueryDeclined,
        S::Failed,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    row(
        S::RequiresAction,
        E::ActionAbandoned,
        S::Failed,
        Effects {
            closes: ANSWERED,
            ..NONE
        },
    ),
    // A merchant's void of a hold still waiting for the customer: the channel's void
    // cancels the key, as for an authorization in flight.
    row(
        S::RequiresAction,
        E::RequestVoid,
        S::Voiding,
        Effects {
            closes: ANSWERED,
            ..VOIDING
        },
    ),
];

/// The channel waits for the customer: the charge was answered, its query job asks again
/// until the customer acts or the action window ends.
const AWAIT_ACTION: Effects = Effects {
    closes: &[JobKind::Submit],
    follow_up: Some(FollowUp {
        kind: JobKind::Query,
        after: Delay::Query,
    }),
    ..NONE
};

/// A hold is recorded: its batch, its expiry and the job that ends it then.
const AUTHORIZED: Effects = Effects {
    closes: ANSWERED,
    follow_up: Some(FollowUp {
        kind: JobKind::ExpireHold,
        after: Delay::HoldExpiry,
    }),
    ledger: Some(Batch::Hold),
    hold: Some(HoldEffect::Authorize),
    ..NONE
};

/// A hold that ends closes every job that drives it or its authorization.
const HOLD_JOBS: &[JobKind] = &[
    JobKind::Submit,
    JobKind::Query,
    JobKind::Capture,
    JobKind::VoidHold,
    JobKind::ExpireHold,
];

/// The hold lapsed with nothing captured: the rest (all of it) released.
const LAPSED: Effects = Effects {
    closes: HOLD_JOBS,
    ledger: Some(Batch::Release),
    hold: Some(HoldEffect::Release),
    ..NONE
};

/// The hold lapsed after captures: the rest released, the captures are the charge.
const LAPSED_CAPTURED: Effects = Effects {
    clears_error: true,
    ..LAPSED
};

/// The void at the channel after the core recorded a lapse.
const VOID_AT_CHANNEL: Option<FollowUp> = Some(FollowUp {
    kind: JobKind::VoidHold,
    after: Delay::Now,
});

/// A void is asked for: its job sends it if the request that asked dies first.
const VOIDING: Effects = Effects {
    closes: &[JobKind::ExpireHold],
    follow_up: Some(FollowUp {
        kind: JobKind::VoidHold,
        after: Delay::Submit,
    }),
    ..NONE
};

/// A reversal ends every job of the payment, its own `reverse` job included.
const REVERSED: &[JobKind] = &[
    JobKind::Submit,
    JobKind::Query,
    JobKind::PostLedger,
    JobKind::Reverse,
];

/// Forced transitions an approver may sign off (event [`PaymentEvent::Forced`], outside
/// [`TRANSITIONS`]), each with why it is safe:
/// - UNKNOWN -> FAILED: the key is cancelled at the channel first (refused if it charged).
/// - UNKNOWN -> CHANNEL_SUCCESS: the channel's own record shows the charge (evidence).
/// - PROCESSING -> UNKNOWN: a request died mid-call; the query path then resolves it.
/// - SUSPENSE -> SUCCESS and CHANNEL_SUCCESS -> SUCCESS: the charge batch is posted now on
///   the approver's authority (e.g. after the merchant's account issue was settled).
pub const FORCE_WHITELIST: &[Rule] = &[
    row(
        S::Unknown,
        E::Forced,
        S::Failed,
        Effects {
            closes: ALL_PAYMENT_JOBS,
            ..NONE
        },
    ),
    row(
        S::Unknown,
        E::Forced,
        S::ChannelSuccess,
        Effects {
            closes: ALL_PAYMENT_JOBS,
            follow_up: POST_LEDGER,
            ..NONE
        },
    ),
    row(
        S::Processing,
        E::Forced,
        S::Unknown,
        Effects {
            closes: ALL_PAYMENT_JOBS,
            follow_up: Some(FollowUp {
                kind: JobKind::Query,
                after: Delay::Now,
            }),
            ..NONE
        },
    ),
    row(
        S::Suspense,
        E::Forced,
        S::Success,
        Effects {
            closes: ALL_PAYMENT_JOBS,
            clears_error: true,
            ledger: Some(Batch::Charge),
            suspense_item: Some(SuspenseItem::Resolve),
            ..NONE
        },
    ),
    row(
        S::ChannelSuccess,
        E::Forced,
        S::Success,
        Effects {
            closes: ALL_PAYMENT_JOBS,
            clears_error: true,
            ledger: Some(Batch::Charge),
            ..NONE
        },
    ),
];

/// Whether an approver may force `from -> to` ([`FORCE_WHITELIST`]).
pub fn force_allowed(from: PaymentStatus, to: PaymentStatus) -> bool {
    !from.is_terminal() && FORCE_WHITELIST.iter().any(|r| r.from == from && r.to == to)
}

/// Why an event cannot move a payment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TransitionError {
    /// The payment is terminal; nothing moves it (late callbacks land here).
    #[error("payment is {from}, a terminal state; {event} ignored")]
    Terminal {
        /// Current status.
        from: PaymentStatus,
        /// Refused event.
        event: PaymentEvent,
    },
    /// The pair is not in the whitelist (e.g. a stale failure after success).
    #[error("{event} is not allowed from {from}")]
    Forbidden {
        /// Current status.
        from: PaymentStatus,
        /// Refused event.
        event: PaymentEvent,
    },
    /// The pair is whitelisted but leads elsewhere (e.g. `channel_error` written as FAILED).
    #[error("{event} from {from} leads to {expected}, not {to}")]
    WrongTarget {
        /// Current status.
        from: PaymentStatus,
        /// The event.
        event: PaymentEvent,
        /// The status asked for.
        to: PaymentStatus,
        /// The status the whitelist gives.
        expected: PaymentStatus,
    },
}

/// What the core does next from a status on its own, with no outside answer (a callback, a
/// query, a person): the moves `Core::drive` makes and the submit job retries (DESIGN.md
/// "Payment state machine"; seed 004 on the charge path). Every other status waits for
/// something else: UNKNOWN for a query, SUSPENSE for a person, the settled ones for nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoStep {
    /// PENDING: submit (PENDING -> PROCESSING).
    Submit,
    /// PROCESSING: send the charge with the payment's channel key and apply the answer.
    Charge,
    /// CHANNEL_SUCCESS: post the ledger batch.
    Post,
    /// AUTHORIZING: send the authorization with the payment's channel key and apply the
    /// answer.
    Authorize,
}

impl AutoStep {
    /// The step from `status`, or `None` when the payment waits for something outside.
    pub fn of(status: PaymentStatus) -> Option<AutoStep> {
        // Exhaustive: a new status does not compile until it says whether it moves alone.
        match status {
            PaymentStatus::Pending => Some(AutoStep::Submit),
            PaymentStatus::Processing => Some(AutoStep::Charge),
            PaymentStatus::ChannelSuccess => Some(AutoStep::Post),
            PaymentStatus::Authorizing => Some(AutoStep::Authorize),
            // A hold waits for the merchant (or its expiry job); a capture or a void in
            // flight for its answer, or its job's query.
            PaymentStatus::Authorized
            | PaymentStatus::Capturing
            | PaymentStatus::Voiding
            | PaymentStatus::Voided
            | PaymentStatus::Expired
            | PaymentStatus::Canceled
            | PaymentStatus::Unknown
            | PaymentStatus::RequiresAction
            | PaymentStatus::Suspense
            | PaymentStatus::Success
            | PaymentStatus::Failed
            | PaymentStatus::Reversed
            | PaymentStatus::Refunded => None,
        }
    }

    /// The step sends (or is about to send) a charge to the channel, so a pause of
    /// submissions (the emergency switch) holds it.
    pub fn reaches_channel(self) -> bool {
        match self {
            AutoStep::Submit | AutoStep::Charge | AutoStep::Authorize => true,
            AutoStep::Post => false,
        }
    }

    /// `status` still has its charge to send: PENDING or PROCESSING.
    pub fn awaits_channel(status: PaymentStatus) -> bool {
        AutoStep::of(status).is_some_and(AutoStep::reaches_channel)
    }
}

/// The next status for `event` in status `from`, or why the event must be ignored.
pub fn transition(
    from: PaymentStatus,
    event: PaymentEvent,
) -> Result<PaymentStatus, TransitionError> {
    rule(from, event).map(|r| r.to)
}

/// The row for `event` in status `from` (never a forced one), or why the event must be
/// ignored.
pub fn rule(from: PaymentStatus, event: PaymentEvent) -> Result<&'static Rule, TransitionError> {
    if let Some(r) = TRANSITIONS
        .iter()
        .find(|r| r.from == from && r.event == event)
    {
        return Ok(r);
    }
    if from.is_terminal() {
        Err(TransitionError::Terminal { from, event })
    } else {
        Err(TransitionError::Forbidden { from, event })
    }
}

/// Checks a whole `(from, event) -> to` triple against the whitelist, for writers that are
/// handed a precomputed target (the store checks every transition it applies), and gives
/// the row whose effects the step writes.
pub fn check(
    from: PaymentStatus,
    event: PaymentEvent,
    to: PaymentStatus,
) -> Result<&'static Rule, TransitionError> {
    // An approved force-transition follows its own whitelist instead of the table.
    if event == PaymentEvent::Forced {
        return match FORCE_WHITELIST
            .iter()
            .find(|r| r.from == from && r.to == to)
        {
            Some(r) if !from.is_terminal() => Ok(r),
            _ if from.is_terminal() => Err(TransitionError::Terminal { from, event }),
            _ => Err(TransitionError::Forbidden { from, event }),
        };
    }
    match rule(from, event)? {
        r if r.to == to => Ok(r),
        r => Err(TransitionError::WrongTarget {
            from,
            event,
            to,
            expected: r.to,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_auto_step_is_a_row_of_the_table_and_settled_payments_never_move_alone() {
        for status in PaymentStatus::ALL {
            let step = AutoStep::of(status);
            let events: &[PaymentEvent] = match step {
                Some(AutoStep::Submit) => &[PaymentEvent::Submit],
                Some(AutoStep::Charge) => &[
                    PaymentEvent::ChannelSucceeded,
                    PaymentEvent::ChannelDeclined,
                    PaymentEvent::ChannelError,
                ],
                Some(AutoStep::Post) => &[PaymentEvent::LedgerPosted, PaymentEvent::LedgerFailed],
                Some(AutoStep::Authorize) => &[
                    PaymentEvent::ChannelAuthorized,
                    PaymentEvent::ChannelDeclined,
                    PaymentEvent::ChannelError,
                ],
                None => &[],
            };
            for &event in events {
                assert!(
                    rule(status, event).is_ok(),
                    "{status}: {event} not in the table"
                );
            }
            if status.is_settled() {
                assert_eq!(step, None, "{status} is settled but moves alone");
            }
            // A pause of submissions holds exactly the payments whose charge is not yet answered.
            assert_eq!(
                AutoStep::awaits_channel(status),
                step.is_some() && !status.is_charged(),
                "{status}"
            );
        }
    }

    #[test]
    fn check_accepts_exactly_the_table_and_the_force_whitelist() {
        for from in PaymentStatus::ALL {
            for event in PaymentEvent::ALL {
                for to in PaymentStatus::ALL {
                    let listed = TRANSITIONS
                        .iter()
                        .any(|r| (r.from, r.event, r.to) == (from, event, to))
                        || (event == E::Forced && force_allowed(from, to));
                    assert_eq!(
                        check(from, event, to).is_ok(),
                        listed,
                        "{from} --{event}--> {to}"
                    );
                }
            }
        }
        assert!(matches!(
            check(S::Processing, E::ChannelError, S::Failed),
            Err(TransitionError::WrongTarget { .. })
        ));
    }

    #[test]
    fn every_whitelisted_row_is_applied() {
        for r in TRANSITIONS {
            assert_eq!(
                transition(r.from, r.event),
                Ok(r.to),
                "{} --{}-->",
                r.from,
                r.event
            );
        }
    }

    #[test]
    fn every_pair_outside_the_table_is_refused() {
        for from in PaymentStatus::ALL {
            for event in PaymentEvent::ALL {
                let listed = TRANSITIONS
                    .iter()
                    .any(|r| r.from == from && r.event == event);
                assert_eq!(
                    transition(from, event).is_ok(),
                    listed,
                    "{from} --{event}-->"
                );
            }
        }
    }

    #[test]
    fn terminal_states_refuse_every_event() {
        for from in [
            S::Failed,
            S::Reversed,
            S::Refunded,
            S::Voided,
            S::Expired,
            S::Canceled,
        ] {
            for event in PaymentEvent::ALL {
                assert_eq!(
                    transition(from, event),
                    Err(TransitionError::Terminal { from, event })
                );
            }
        }
    }

    #[test]
    fn stale_failure_after_success_is_forbidden() {
        assert!(matches!(
            transition(S::Success, E::ChannelDeclined),
            Err(TransitionError::Forbidden { .. })
        ));
        assert!(matches!(
            transition(S::ChannelSuccess, E::ChannelError),
            Err(TransitionError::Forbidden { .. })
        ));
    }

    #[test]
    fn channel_error_never_fails_a_payment() {
        assert_eq!(transition(S::Processing, E::ChannelError), Ok(S::Unknown));
    }

    #[test]
    fn only_a_settled_charge_or_capture_clears_the_error_and_only_a_charge_posts_its_batch() {
        for r in TRANSITIONS.iter().chain(FORCE_WHITELIST) {
            let settles = r.to == S::Success || r.event == E::ChannelCaptured;
            assert_eq!(
                r.effects.clears_error, settles,
                "{} --{}--> {}",
                r.from, r.event, r.to
            );
            // A hold's SUCCESS posted its captures and releases its rest instead.
            let charge = r.to == S::Success && !r.from.is_held();
            assert_eq!(
                r.effects.ledger == Some(Batch::Charge),
                charge,
                "{} --{}--> {}",
                r.from,
                r.event,
                r.to
            );
        }
    }

    #[test]
    fn every_hold_batch_is_paired_with_its_hold_write() {
        for r in TRANSITIONS.iter().chain(FORCE_WHITELIST) {
            let expected = match r.effects.ledger {
                Some(Batch::Hold) => Some(HoldEffect::Authorize),
                Some(Batch::Capture) => Some(HoldEffect::Capture),
                Some(Batch::Release) => Some(HoldEffect::Release),
                Some(Batch::Charge | Batch::Reversal) => None,
                None => r
                    .effects
                    .hold
                    .filter(|h| matches!(h, HoldEffect::BeginCapture | HoldEffect::RefuseCapture)),
            };
            assert_eq!(
                r.effects.hold, expected,
                "{} --{}--> {}",
                r.from, r.event, r.to
            );
        }
    }

    #[test]
    fn every_state_left_by_a_later_step_gets_the_job_that_takes_it() {
        for r in TRANSITIONS.iter().chain(FORCE_WHITELIST) {
            let needs = match (r.from, r.to) {
                (_, S::ChannelSuccess) => Some(JobKind::PostLedger),
                (_, S::Unknown) => Some(JobKind::Query),
                // Found waiting by the UNKNOWN payment's query job, which keeps asking.
                (S::Unknown, S::RequiresAction) => None,
                (_, S::RequiresAction) => Some(JobKind::Query),
                // A new payment's submit job is written with it.
                (S::Pending, S::Processing | S::Authorizing) => None,
                (_, S::Processing | S::Authorizing) => Some(JobKind::Submit),
                // After a capture the authorization's expiry job is still due.
                (S::Capturing, S::Authorized) => None,
                (_, S::Authorized) => Some(JobKind::ExpireHold),
                (_, S::Capturing) => Some(JobKind::Capture),
                (_, S::Voiding) => Some(JobKind::VoidHold),
                // The core records a lapse first; the channel's void follows.
                (S::Authorized, S::Expired | S::Success) => Some(JobKind::VoidHold),
                _ => None,
            };
            assert_eq!(
                r.effects.follow_up.map(|f| f.kind),
                needs,
                "{} --{}--> {}",
                r.from,
                r.event,
                r.to
            );
            if r.to.is_terminal() && needs != Some(JobKind::VoidHold) {
                assert!(r.effects.follow_up.is_none());
            }
        }
    }

    #[test]
    fn only_a_step_that_sends_the_charge_or_authorization_counts_a_submission() {
        for r in TRANSITIONS.iter().chain(FORCE_WHITELIST) {
            assert_eq!(
                r.effects.counts_submit,
                matches!(r.to, S::Processing | S::Authorizing),
                "{} --{}-->",
                r.from,
                r.event
            );
        }
    }

    #[test]
    fn a_settled_charge_closes_the_jobs_that_would_send_it_again() {
        for r in TRANSITIONS.iter().chain(FORCE_WHITELIST) {
            if r.from.is_charged() || !r.to.is_charged() && !r.to.is_terminal() {
                continue;
            }
            // Leaving PROCESSING or UNKNOWN for a charged or terminal state: no submit may run.
            assert!(
                r.effects.closes.contains(&JobKind::Submit),
                "{} --{}--> {} leaves its submit job open",
                r.from,
                r.event,
                r.to
            );
        }
    }

    /// The lines the lifecycle diagram (docs/payment-lifecycle.md) draws: every row of the
    /// table and of the force whitelist, `FROM --> TO: event`.
    fn diagram_lines() -> std::collections::BTreeSet<String> {
        TRANSITIONS
            .iter()
            .chain(FORCE_WHITELIST)
            .map(|r| format!("{} --> {}: {}", r.from, r.to, r.event))
            .collect()
    }

    #[test]
    fn the_lifecycle_diagram_draws_every_row_of_the_table_and_no_other() {
        let doc = include_str!("../../../docs/payment-lifecycle.md");
        // The lines of the mermaid blocks, start and end markers aside.
        let mut in_diagram = false;
        let drawn: std::collections::BTreeSet<String> = doc
            .lines()
            .map(str::trim)
            .filter(|l| {
                if l.starts_with("```") {
                    in_diagram = *l == "```mermaid";
                }
                in_diagram && l.contains(" --> ") && !l.contains("[*]")
            })
            .map(str::to_string)
            .collect();
        let rows = diagram_lines();
        let missing: Vec<_> = rows.difference(&drawn).collect();
        let extra: Vec<_> = drawn.difference(&rows).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "docs/payment-lifecycle.md: missing {missing:#?}, not in the table {extra:#?}"
        );
    }

    #[test]
    fn names_round_trip() {
        for s in PaymentStatus::ALL {
            assert_eq!(s.as_str().parse::<PaymentStatus>(), Ok(s));
        }
        for e in PaymentEvent::ALL {
            assert_eq!(e.as_str().parse::<PaymentEvent>(), Ok(e));
        }
        assert!("NOPE".parse::<PaymentStatus>().is_err());
    }
}

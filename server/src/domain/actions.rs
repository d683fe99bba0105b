//! Ops actions on a payment under maker-checker (DESIGN.md "Ops console": `query` and `retry`
//! run at once for an operator; `reverse` and `force_transition` are requested by an operator
//! and approved by a different approver; a reason is required; force needs evidence and only
//! whitelisted transitions, never out of a terminal state). A manual-capture payment's hold
//! adds `capture` (an amount, in part or final) and `void` (issue 34), approved the same way.

use super::state::PaymentStatus;
use converge_wire::payments::{CaptureMode, Payment};

/// Longest reason, in bytes.
pub const MAX_REASON: usize = 1000;
/// Longest evidence text, in bytes.
pub const MAX_EVIDENCE: usize = 4000;

/// An action kind: defined with its names in the wire crate, which the console shares
/// (`converge_wire::ActionKind`), so the console's buttons and the server's checks name the
/// same four kinds and the console compares no kind as text.
pub use converge_wire::ActionKind;

pub use crate::domain::state::{FORCE_WHITELIST, force_allowed};

/// Where a maker-checker request is in its life: defined with its names in the wire crate,
/// which the console shares (`converge_wire::lifecycle`); the moves between them are
/// [`ActionMoveKind`]'s table below.
pub use converge_wire::ActionStatus;

/// A move in a request's life: the only ways its status changes, each with the statuses it
/// may start from and the audit action it is recorded as (one table; the store applies a move
/// conditionally on the status being one of `from`, so two deciders cannot both win).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActionMoveKind {
    /// A second person approves.
    Approve,
    /// A second person refuses.
    Reject,
    /// Its time to live ran out before a decision.
    Expire,
    /// Its requester withdraws it.
    Cancel,
    /// Its payment moved since the request: deciding it would act on what nobody saw.
    Stale,
    /// It ran to the end.
    Execute,
    /// It ran and stopped short.
    Fail,
}

impl ActionMoveKind {
    /// Every move.
    pub const ALL: [ActionMoveKind; 7] = [
        ActionMoveKind::Approve,
        ActionMoveKind::Reject,
        ActionMoveKind::Expire,
        ActionMoveKind::Cancel,
        ActionMoveKind::Stale,
        ActionMoveKind::Execute,
        ActionMoveKind::Fail,
    ];

    /// (statuses it may start from, status it ends in, audit action).
    pub fn rule(self) -> (&'static [ActionStatus], ActionStatus, &'static str) {
        use ActionStatus as A;
        const UNDECIDED: &[ActionStatus] = &[A::Pending];
        const RUNNABLE: &[ActionStatus] = &[A::Approved, A::Failed];
        match self {
            ActionMoveKind::Approve => (UNDECIDED, A::Approved, "action_approved"),
            ActionMoveKind::Reject => (UNDECIDED, A::Rejected, "action_rejected"),
            ActionMoveKind::Expire => (UNDECIDED, A::Expired, "action_expired"),
            ActionMoveKind::Cancel => (UNDECIDED, A::Cancelled, "action_cancelled"),
            ActionMoveKind::Stale => (UNDECIDED, A::Stale, "action_stale"),
            ActionMoveKind::Execute => (RUNNABLE, A::Executed, "action_executed"),
            ActionMoveKind::Fail => (RUNNABLE, A::Failed, "action_failed"),
        }
    }

    /// Whether a request in `status` may make this move.
    pub fn allowed_from(self, status: ActionStatus) -> bool {
        self.rule().0.contains(&status)
    }

    /// The audit action the move is recorded under (`action_approved`, ...).
    pub fn audit_action(self) -> &'static str {
        self.rule().2
    }
}

/// Whether a payment in `status` can be reversed (its charge refunded and the ledger
/// reversed): the states the state machine has a `reversed` row from ([`TRANSITIONS`]):
/// SUCCESS, and SUSPENSE (charged, never posted).
///
/// [`TRANSITIONS`]: super::state::TRANSITIONS
pub fn reversible(status: PaymentStatus) -> bool {
    super::state::rule(status, super::state::PaymentEvent::Reversed).is_ok()
}

/// Whether an action applies to a payment now, and if not, why (with, for a forced
/// transition, the statuses it may go to): what the console offers, so ops staff are never
/// offered an action that cannot apply (issue 17). A wire type: the console shows it as sent.
pub use converge_wire::ActionOffer;

/// The statuses an approver may force a payment in `status` into ([`force_allowed`]), in
/// [`FORCE_WHITELIST`] order: what the console's target list offers.
pub fn force_targets(status: PaymentStatus) -> Vec<PaymentStatus> {
    FORCE_WHITELIST
        .iter()
        .filter(|r| r.from == status && force_allowed(r.from, r.to))
        .map(|r| r.to)
        .collect()
}

/// A manual-capture payment's hold as the action rules read it (issue 34).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldFacts {
    /// Still held at the channel, integer minor units.
    pub held: i64,
    /// Captured so far, integer minor units.
    pub captured: i64,
    /// The hold's expiry has passed (the expiry job releases it; nothing may capture it).
    pub lapsed: bool,
}

impl HoldFacts {
    /// The facts of `p`'s hold at `now` (epoch ms UTC); None for an automatic payment, which
    /// has no hold.
    pub fn of(p: &Payment, now: i64) -> Option<HoldFacts> {
        (p.capture_mode == CaptureMode::Manual).then(|| HoldFacts {
            held: p.held_amount(),
            captured: p.hold.as_ref().map_or(0, |h| h.captured),
            lapsed: p
                .hold
                .as_ref()
                .and_then(|h| h.expires_at)
                .is_some_and(|at| now >= at),
        })
    }
}

/// Why a payment in `status` with `hold` cannot be captured by an ops action now, or None
/// when it can: only a manual-capture payment, only AUTHORIZED (a capture or void in flight
/// must finish first), only before its expiry and only while something is held. The same
/// refusals as the merchant's capture (`Core::capture_hold`), said for the console.
pub fn capture_refusal(status: PaymentStatus, hold: Option<HoldFacts>) -> Option<String> {
    let Some(h) = hold else {
        return Some("an automatic payment has no hold to capture".into());
    };
    if status != PaymentStatus::Authorized {
        return Some(format!(
            "a {status} payment holds nothing to capture (only AUTHORIZED)"
        ));
    }
    if h.lapsed {
        return Some("the hold has expired".into());
    }
    (h.held <= 0).then(|| "nothing is held any more".into())
}

/// Why a payment in `status` with `hold` cannot be voided by an ops action now, or None when
/// it can: a manual-capture payment AUTHORIZED with nothing captured (a part captured is
/// closed by a final capture, which releases the rest), or whose authorization is still in
/// flight, unknown or waiting for the customer (AUTHORIZING, UNKNOWN, REQUIRES_ACTION: the
/// channel's void releases what a late authorization held, or fences the key).
pub fn void_refusal(status: PaymentStatus, hold: Option<HoldFacts>) -> Option<String> {
    let Some(h) = hold else {
        return Some("an automatic payment has no hold to void".into());
    };
    match status {
        PaymentStatus::Authorized if h.captured > 0 => {
            Some("the hold was captured in part: a final capture releases the rest".into())
        }
        PaymentStatus::Authorized
        | PaymentStatus::Authorizing
        | PaymentStatus::Unknown
        | PaymentStatus::RequiresAction => None,
        status => Some(format!(
            "a {status} payment holds nothing to void (only AUTHORIZED, AUTHORIZING, UNKNOWN or REQUIRES_ACTION)"
        )),
    }
}

/// Why a retry of a payment with `wakeable_jobs` jobs it would wake (due or dead ones) does
/// nothing now, or None when it wakes something: the one rule for the payment page's Retry,
/// the dashboard's stuck list and the server's checks.
pub fn retry_refusal(wakeable_jobs: usize) -> Option<String> {
    (wakeable_jobs == 0).then(|| "no job is waiting or dead, so a retry would wake nothing".into())
}

/// The offers for a payment in `status` with `wakeable_jobs` jobs a retry would wake (due or
/// dead ones) and, for a manual-capture payment, its `hold`: query always (it only reads the
/// channel); retry only with a job to wake; reverse only when [`reversible`]; a forced
/// transition only where the whitelist has one, listing its [`force_targets`]; capture and
/// void only where [`capture_refusal`] and [`void_refusal`] find nothing, and for a payment
/// without a hold (automatic) not even as unavailable. One rule for the console's buttons
/// and the server's checks.
pub fn offers(
    status: PaymentStatus,
    wakeable_jobs: usize,
    hold: Option<HoldFacts>,
) -> Vec<ActionOffer> {
    let offer = |kind: ActionKind, why: Option<String>, targets: Vec<PaymentStatus>| ActionOffer {
        kind,
        available: why.is_none(),
        why: why.unwrap_or_default(),
        targets,
    };
    let targets = force_targets(status);
    let mut all = vec![
        offer(ActionKind::Query, None, Vec::new()),
        offer(ActionKind::Retry, retry_refusal(wakeable_jobs), Vec::new()),
        offer(
            ActionKind::Reverse,
            (!reversible(status)).then(|| {
                format!("a {status} payment cannot be reversed (only SUCCESS or SUSPENSE)")
            }),
            Vec::new(),
        ),
        offer(
            ActionKind::ForceTransition,
            targets
                .is_empty()
                .then(|| format!("no whitelisted forced transition leaves {status}")),
            targets,
        ),
    ];
    // Capture and void are a hold's: an automatic payment is not offered them at all (a
    // "why not" on every automatic payment's page would only be noise).
    if hold.is_some() {
        all.push(offer(
            ActionKind::Capture,
            capture_refusal(status, hold),
            Vec::new(),
        ));
        all.push(offer(
            ActionKind::Void,
            void_refusal(status, hold),
            Vec::new(),
        ));
    }
    all
}

/// [`offers`] for a payment that may have a request waiting for an approver (`pending`: its
/// id). A payment holds at most one pending request (the store refuses a second with 409
/// `action_pending`: the `actions_one_pending_per_payment` index), so while one waits the kinds
/// that need an approver are withheld, saying which request to decide first (issue 41: Reverse
/// was offered and its submission refused).
pub fn offers_with_pending(
    status: PaymentStatus,
    wakeable_jobs: usize,
    hold: Option<HoldFacts>,
    pending: Option<&str>,
) -> Vec<ActionOffer> {
    let mut all = offers(status, wakeable_jobs, hold);
    let Some(id) = pending else { return all };
    for o in all
        .iter_mut()
        .filter(|o| o.available && o.kind.needs_approval())
    {
        o.available = false;
        o.why = format!(
            "request {id} is waiting for an approver: it must be approved, rejected or cancelled first"
        );
    }
    all
}

/// Checks a reason: not blank, at most [`MAX_REASON`] characters (as the OpenAPI document's
/// `maxLength` counts them).
pub fn check_reason(reason: &str) -> Result<(), String> {
    if reason.trim().is_empty() {
        Err("a reason is required".into())
    } else if reason.chars().count() > MAX_REASON {
        Err(format!("reason is longer than {MAX_REASON} characters"))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PaymentStatus as S;

    #[test]
    fn success_and_suspense_are_the_reversible_states() {
        let reversible: Vec<_> = PaymentStatus::ALL
            .into_iter()
            .filter(|s| reversible(*s))
            .collect();
        assert_eq!(
            reversible,
            [PaymentStatus::Suspense, PaymentStatus::Success]
        );
    }

    #[test]
    fn every_kind_is_listed() {
        // A new variant breaks this match until it is added to `ALL` as well.
        for k in ActionKind::ALL {
            match k {
                ActionKind::Query
                | ActionKind::Retry
                | ActionKind::Reverse
                | ActionKind::ForceTransition
                | ActionKind::Capture
                | ActionKind::Void => {}
            }
            assert_eq!(k.as_str().parse::<ActionKind>(), Ok(k));
        }
        assert_eq!(
            ActionKind::approval_kinds(),
            ["reverse", "force_transition", "capture", "void"]
        );
    }

    #[test]
    fn only_actions_that_can_apply_are_offered_each_with_why_not() {
        let available = |status, jobs| -> Vec<String> {
            offers(status, jobs, None)
                .into_iter()
                .filter(|o| o.available)
                .map(|o| o.kind.to_string())
                .collect()
        };
        assert_eq!(available(S::Reversed, 0), vec!["query"]);
        assert_eq!(available(S::Success, 0), vec!["query", "reverse"]);
        assert_eq!(
            available(S::Suspense, 1),
            vec!["query", "retry", "reverse", "force_transition"]
        );
        assert_eq!(
            available(S::Unknown, 1),
            vec!["query", "retry", "force_transition"]
        );
        let reversed = offers(S::Reversed, 0, None);
        assert!(reversed.iter().all(|o| o.available == o.why.is_empty()));
        assert!(
            reversed[2]
                .why
                .contains("REVERSED payment cannot be reversed")
        );
    }

    #[test]
    fn a_pending_request_withholds_the_kinds_that_need_an_approver() {
        let waiting = offers_with_pending(S::Suspense, 1, None, Some("act_1"));
        let available: Vec<_> = waiting
            .iter()
            .filter(|o| o.available)
            .map(|o| o.kind.as_str())
            .collect();
        assert_eq!(available, ["query", "retry"]);
        assert!(
            waiting[2]
                .why
                .contains("request act_1 is waiting for an approver")
        );
        // A reason the state already gives stays the one shown.
        let reversed = offers_with_pending(S::Reversed, 0, None, Some("act_1"));
        assert!(reversed[2].why.contains("cannot be reversed"));
        assert_eq!(
            offers_with_pending(S::Success, 0, None, None),
            offers(S::Success, 0, None)
        );
    }

    #[test]
    fn the_force_offer_lists_exactly_the_allowed_targets_in_whitelist_order() {
        assert_eq!(
            force_targets(S::Unknown),
            vec![S::Failed, S::ChannelSuccess]
        );
        for from in S::ALL {
            let force = offers(from, 0, None)
                .into_iter()
                .find(|o| o.kind == ActionKind::ForceTransition)
                .expect("force is offered or refused");
            assert_eq!(force.kind.as_str(), "force_transition");
            let allowed: Vec<_> = S::ALL
                .into_iter()
                .filter(|to| force_allowed(from, *to))
                .collect();
            let mut offered = force.targets.clone();
            offered.sort();
            assert_eq!(offered, allowed, "{from}");
            assert_eq!(force.available, !force.targets.is_empty(), "{from}");
            // Only the force offer carries targets.
            assert!(
                offers(from, 1, None)
                    .iter()
                    .filter(|o| o.kind != ActionKind::ForceTransition)
                    .all(|o| o.targets.is_empty())
            );
        }
    }

    #[test]
    fn only_money_moving_actions_need_approval() {
        assert!(!ActionKind::Query.needs_approval());
        assert!(!ActionKind::Retry.needs_approval());
        assert!(ActionKind::Reverse.needs_approval());
        assert!(ActionKind::ForceTransition.needs_approval());
        assert!(ActionKind::Capture.needs_approval());
        assert!(ActionKind::Void.needs_approval());
    }

    fn hold(held: i64, captured: i64, lapsed: bool) -> Option<HoldFacts> {
        Some(HoldFacts {
            held,
            captured,
            lapsed,
        })
    }

    fn available_kinds(status: PaymentStatus, h: Option<HoldFacts>) -> Vec<&'static str> {
        offers(status, 0, h)
            .into_iter()
            .filter(|o| o.available)
            .map(|o| o.kind.as_str())
            .collect()
    }

    #[test]
    fn capture_is_offered_only_on_an_authorized_unexpired_hold_with_something_held() {
        assert_eq!(
            available_kinds(S::Authorized, hold(1000, 0, false)),
            ["query", "capture", "void"]
        );
        // Captured in part: a final capture closes it, a void would not.
        assert_eq!(
            available_kinds(S::Authorized, hold(600, 400, false)),
            ["query", "capture"]
        );
        assert!(capture_refusal(S::Authorized, hold(1000, 0, true)).is_some());
        assert!(capture_refusal(S::Authorized, hold(0, 1000, false)).is_some());
        for s in [
            S::Authorizing,
            S::Capturing,
            S::Voiding,
            S::Voided,
            S::Expired,
            S::Success,
        ] {
            assert!(capture_refusal(s, hold(1000, 0, false)).is_some(), "{s}");
        }
        // An automatic payment has no hold at all: neither is listed, not even as unavailable.
        assert!(
            offers(S::Success, 0, None)
                .iter()
                .all(|o| !matches!(o.kind, ActionKind::Capture | ActionKind::Void))
        );
        assert!(capture_refusal(S::Authorized, None).is_some_and(|w| w.contains("automatic")));
    }

    #[test]
    fn void_is_offered_on_an_uncaptured_hold_or_an_authorization_in_doubt() {
        for s in [S::Authorized, S::Authorizing, S::Unknown] {
            assert_eq!(void_refusal(s, hold(0, 0, false)), None, "{s}");
        }
        for s in [
            S::Capturing,
            S::Voiding,
            S::Voided,
            S::Expired,
            S::Success,
            S::Pending,
        ] {
            assert!(void_refusal(s, hold(1000, 0, false)).is_some(), "{s}");
        }
        assert!(void_refusal(S::Authorized, hold(600, 400, false)).is_some());
        assert!(void_refusal(S::Unknown, None).is_some());
        assert!(!available_kinds(S::Unknown, None).contains(&"void"));
    }

    #[test]
    fn force_never_leaves_a_terminal_state_and_only_follows_the_whitelist() {
        for from in S::ALL {
            for to in S::ALL {
                let listed = FORCE_WHITELIST.iter().any(|r| (r.from, r.to) == (from, to));
                assert_eq!(force_allowed(from, to), listed && !from.is_terminal());
            }
        }
        assert!(!force_allowed(S::Failed, S::Success));
        assert!(!force_allowed(S::Success, S::Failed));
    }

    #[test]
    fn a_final_request_never_moves_again_and_only_an_undecided_one_is_decided() {
        use ActionStatus as A;
        for m in ActionMoveKind::ALL {
            let (from, to, audit) = m.rule();
            for s in [A::Rejected, A::Expired, A::Cancelled, A::Stale, A::Executed] {
                assert!(!from.contains(&s), "{m:?} leaves final {s:?}");
            }
            assert!(!from.contains(&to) || to == A::Failed, "{m:?}");
            assert!(audit.starts_with("action_"));
        }
        for s in A::ALL {
            assert_eq!(A::parse(s.as_str()), Some(s));
        }
        assert_eq!(ActionKind::Reverse.initial_status(), A::Pending);
        assert_eq!(ActionKind::Query.initial_status(), A::Approved);
    }

    #[test]
    fn reasons_are_required_and_bounded() {
        assert!(check_reason("  ").is_err());
        assert!(check_reason(&"x".repeat(MAX_REASON + 1)).is_err());
        assert!(check_reason("customer called").is_ok());
        assert!("refund".parse::<ActionKind>().is_err());
    }
}

//! Invariant 7, holds (issue 34): plain Rust over a payment's row and, when the channel is
//! checked, the channel's answer to a query of the hold. No I/O.
//!
//! - [`check_hold`]: captured ≤ authorized for every payment; a manual payment's hold is
//!   recorded (hold batch) at most once and ends exactly once (its pending accounts net to
//!   zero, captured + released = authorized); the ledger's captures equal the payment's.
//! - [`check_hold_at_channel`]: nothing captured at the channel after a void or an expiry, and
//!   the channel's captured amount equals the ledger's.
//! - [`check_tombstones`]: no payment for an order a TCC cancel tombstoned first.

use crate::channel::HoldQueryOutcome;
use crate::domain::state::PaymentStatus;
use crate::store::{TombstonedPayment, VerifyPaymentRow};

use super::breach::Breach;

/// The payment takes its money by a hold (`capture_mode = 'manual'`).
pub fn is_manual(p: &VerifyPaymentRow) -> bool {
    p.capture_mode == "manual"
}

/// The database side of invariant 7 for one payment (any capture mode; an automatic one
/// only has to capture nothing more than its amount).
pub fn check_hold(p: &VerifyPaymentRow, status: PaymentStatus) -> Vec<Breach> {
    let mut out = Vec::new();
    let total = p.captured_amount.checked_add(p.released_amount);
    if p.captured_amount < 0 || p.released_amount < 0 || total.is_none_or(|t| t > p.amount) {
        out.push(Breach::CapturedOverAuthorized {
            payment: p.id.clone(),
            amount: p.amount,
            captured: p.captured_amount,
            released: p.released_amount,
        });
    }
    if !is_manual(p) {
        return out;
    }
    if let Some(detail) = hold_lifecycle(p, status) {
        out.push(Breach::HoldNotEnded {
            payment: p.id.clone(),
            status: p.status.clone(),
            detail,
        });
    }
    if let Some(detail) = capture_ledger(p) {
        out.push(Breach::CaptureLedger {
            payment: p.id.clone(),
            detail,
        });
    }
    out
}

/// What is wrong with a manual payment's hold for its status, if anything: "every hold ends
/// exactly once".
fn hold_lifecycle(p: &VerifyPaymentRow, status: PaymentStatus) -> Option<String> {
    use PaymentStatus as S;
    let recorded = p.hold_expires_at.is_some();
    if p.hold_batches > 1 || p.release_batches > 1 {
        return Some(format!(
            "has {} hold and {} release ledger batches (at most one each)",
            p.hold_batches, p.release_batches
        ));
    }
    if recorded != (p.hold_batches == 1) {
        return Some(format!(
            "has {} hold ledger batches but its hold is {}recorded",
            p.hold_batches,
            if recorded { "" } else { "not " }
        ));
    }
    let open = p.amount - p.captured_amount - p.released_amount;
    let nets = (p.hold_pending_net, p.channel_holds_net);
    let nets_wrong = recorded && nets != (-open, open);
    match status {
        S::Pending | S::Authorizing | S::Unknown | S::RequiresAction | S::Failed | S::Canceled
            if recorded =>
        {
            Some("was never authorized yet has a hold recorded".into())
        }
        S::Pending | S::Authorizing | S::Unknown | S::RequiresAction | S::Failed | S::Canceled => {
            untouched(p, "was never authorized")
        }
        S::Voided | S::Expired if !recorded => untouched(p, "ended before any hold was recorded"),
        S::Voided | S::Expired if p.captured_amount != 0 => Some(format!(
            "captured {} before it ended uncaptured",
            p.captured_amount
        )),
        S::Voided | S::Expired | S::Success | S::Refunded | S::Reversed if !recorded => {
            Some("ended without its hold batch".into())
        }
        S::Voided | S::Expired | S::Success | S::Refunded | S::Reversed => {
            if open != 0 {
                Some(format!(
                    "ended with {} captured and {} released of {}",
                    p.captured_amount, p.released_amount, p.amount
                ))
            } else if nets_wrong {
                Some(format!(
                    "ended but its hold accounts net to {} pending, {} at the channel (not 0)",
                    nets.0, nets.1
                ))
            } else if status == S::Voided || status == S::Expired {
                (p.release_batches != 1).then(|| "ended without its release batch".into())
            } else {
                (p.captured_amount <= 0).then(|| "is SUCCESS with nothing captured".into())
            }
        }
        S::Authorized | S::Capturing | S::Voiding if !recorded && status != S::Voiding => {
            Some("is open without its hold batch".into())
        }
        S::Authorized | S::Capturing | S::Voiding => {
            if p.release_batches != 0 || p.released_amount != 0 {
                Some(format!(
                    "is open but released {} in {} release batches",
                    p.released_amount, p.release_batches
                ))
            } else if !recorded {
                untouched(p, "is voided before any hold was recorded")
            } else if nets_wrong {
                Some(format!(
                    "holds {open} but its hold accounts net to {} pending, {} at the channel",
                    nets.0, nets.1
                ))
            } else {
                None
            }
        }
        S::Processing | S::ChannelSuccess | S::Suspense => {
            Some("is a manual payment in a charge's state".into())
        }
    }
}

/// A hold that never held anything must have moved nothing.
fn untouched(p: &VerifyPaymentRow, why: &str) -> Option<String> {
    let moved = p.captured_amount != 0
        || p.released_amount != 0
        || p.capture_batches != 0
        || p.release_batches != 0
        || (p.hold_pending_net, p.channel_holds_net) != (0, 0);
    moved.then(|| {
        format!(
            "{why} yet captured {} and released {} ({} capture and {} release batches)",
            p.captured_amount, p.released_amount, p.capture_batches, p.release_batches
        )
    })
}

/// What is wrong with the ledger's captures against the payment's, if anything.
fn capture_ledger(p: &VerifyPaymentRow) -> Option<String> {
    if p.capture_payable != p.captured_amount {
        Some(format!(
            "the ledger's capture batches credit {} to the merchant, the payment captured {}",
            p.capture_payable, p.captured_amount
        ))
    } else if p.captures_captured_amount != p.captured_amount {
        Some(format!(
            "its captured capture records total {}, the payment captured {}",
            p.captures_captured_amount, p.captured_amount
        ))
    } else if p.captures_captured_batched != p.captures_captured {
        Some(format!(
            "{} of its {} captured captures have no capture batch",
            p.captures_captured - p.captures_captured_batched,
            p.captures_captured
        ))
    } else if p.capture_batches != p.captures_captured_batched {
        Some(format!(
            "has {} capture batches for {} captured captures",
            p.capture_batches, p.captures_captured_batched
        ))
    } else {
        None
    }
}

/// The channel's name of a hold status (as the sandbox reports it).
fn channel_status(answer: &HoldQueryOutcome) -> &'static str {
    answer.name()
}

/// The channel side of invariant 7 for one manual payment, given the channel's answer to a
/// query of its hold (never an `Error`: the caller asks again or gives up): nothing captured
/// after a void or an expiry, the channel's captured amount equal to the ledger's (one
/// capture's worth more while CAPTURING), and the hold's state the payment's.
pub fn check_hold_at_channel(
    p: &VerifyPaymentRow,
    status: PaymentStatus,
    answer: &HoldQueryOutcome,
) -> Vec<Breach> {
    use PaymentStatus as S;
    let at_channel = channel_status(answer);
    let captured = match answer {
        HoldQueryOutcome::Found { captured, .. } => *captured,
        _ => 0,
    };
    let mismatch = |detail: String| Breach::HoldChannelMismatch {
        payment: p.id.clone(),
        status: p.status.clone(),
        detail,
    };
    let mut out = Vec::new();
    if let HoldQueryOutcome::Found {
        amount, currency, ..
    } = answer
        && (*amount != p.amount || *currency != p.currency)
    {
        out.push(mismatch(format!(
            "is {amount} {currency} at the channel, {} {} here",
            p.amount, p.currency
        )));
    }
    if matches!(status, S::Voided | S::Expired) {
        if captured != 0 {
            out.push(Breach::CaptureAfterVoid {
                payment: p.id.clone(),
                status: p.status.clone(),
                channel: at_channel.into(),
                captured,
            });
        } else if !matches!(at_channel, "voided" | "expired" | "declined" | "cancelled") {
            out.push(mismatch(format!("is still {at_channel} at the channel")));
        }
        return out;
    }
    let in_flight = p.capture_amount.unwrap_or(0);
    let agrees = captured == p.capture_payable
        || (status == S::Capturing && captured == p.capture_payable + in_flight);
    if !agrees {
        out.push(mismatch(format!(
            "captured {captured} at the channel, {} in the ledger",
            p.capture_payable
        )));
    }
    let state_ok = match status {
        S::Authorized => matches!(at_channel, "authorized" | "expired"),
        S::Success | S::Refunded | S::Reversed => matches!(at_channel, "captured" | "expired"),
        _ => true,
    };
    if !state_ok {
        out.push(mismatch(format!("is {at_channel} at the channel")));
    }
    out
}

/// Payments for tombstoned orders: each a hanging Try that got through.
pub fn check_tombstones(rows: &[TombstonedPayment]) -> Vec<Breach> {
    rows.iter()
        .map(|t| Breach::TombstonedOrder {
            payment: t.id.clone(),
            merchant_order_id: t.merchant_order_id.clone(),
            status: t.status.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::HoldStatus;

    /// A manual payment of 1000 in `status` with a consistent hold: `captured` captured in
    /// one capture, the rest released when the status ends the hold.
    fn hold(status: &str, captured: i64) -> VerifyPaymentRow {
        let ended = matches!(status, "VOIDED" | "EXPIRED" | "SUCCESS" | "REFUNDED");
        let released = if ended { 1000 - captured } else { 0 };
        let open = 1000 - captured - released;
        VerifyPaymentRow {
            id: "pay_h".into(),
            merchant_id: 1,
            merchant_order_id: "o-h".into(),
            status: status.into(),
            amount: 1000,
            currency: "EUR".into(),
            channel_key: "ck_h".into(),
            connector: "sandbox".into(),
            refunded_amount: 0,
            created_at: 0,
            updated_at: 0,
            charge_batches: 0,
            charge_batch_debits: 0,
            refunds_succeeded: 0,
            refunds_succeeded_amount: 0,
            refunds_pending: 0,
            reversal_in_flight: false,
            refund_batches: 0,
            open_error_items: 0,
            fee_amount: 0,
            fee_batch_credits: 0,
            capture_mode: "manual".into(),
            captured_amount: captured,
            released_amount: released,
            hold_expires_at: Some(1),
            capture_amount: None,
            hold_batches: 1,
            release_batches: i64::from(matches!(status, "VOIDED" | "EXPIRED")),
            capture_batches: i64::from(captured > 0),
            hold_pending_net: -open,
            channel_holds_net: open,
            capture_payable: captured,
            captures_captured: i64::from(captured > 0),
            captures_captured_amount: captured,
            captures_captured_batched: i64::from(captured > 0),
        }
    }

    fn status(p: &VerifyPaymentRow) -> PaymentStatus {
        p.status.parse().unwrap()
    }

    fn found(status: HoldStatus, captured: i64) -> HoldQueryOutcome {
        HoldQueryOutcome::Found {
            status,
            amount: 1000,
            captured,
            currency: "EUR".into(),
            expires_at_ms: 1,
        }
    }

    #[test]
    fn consistent_holds_pass_in_every_state() {
        for (s, captured) in [
            ("AUTHORIZED", 0),
            ("AUTHORIZED", 300),
            ("CAPTURING", 300),
            ("VOIDED", 0),
            ("EXPIRED", 0),
            ("SUCCESS", 600),
            ("SUCCESS", 1000),
        ] {
            let p = hold(s, captured);
            assert_eq!(check_hold(&p, status(&p)), vec![], "{s} {captured}");
        }
    }

    #[test]
    fn capturing_and_releasing_more_than_authorized_is_named() {
        let mut p = hold("SUCCESS", 600);
        p.released_amount = 401;
        let b = check_hold(&p, status(&p));
        assert!(
            matches!(
                b[0],
                Breach::CapturedOverAuthorized {
                    captured: 600,
                    released: 401,
                    ..
                }
            ),
            "{b:?}"
        );
        assert!(
            b[0].to_string()
                .contains("captured 600 and released 401 of 1000")
        );
    }

    #[test]
    fn an_ended_hold_must_net_to_zero_and_add_up() {
        let mut p = hold("VOIDED", 0);
        p.release_batches = 0;
        p.hold_pending_net = -1000;
        p.channel_holds_net = 1000;
        let b = check_hold(&p, status(&p));
        assert!(
            matches!(&b[..], [Breach::HoldNotEnded { detail, .. }] if detail.contains("net to -1000")),
            "{b:?}"
        );
        let mut p = hold("SUCCESS", 600);
        p.released_amount = 0;
        let b = check_hold(&p, status(&p));
        assert!(
            matches!(&b[..], [Breach::HoldNotEnded { detail, .. }] if detail.contains("600 captured and 0 released")),
            "{b:?}"
        );
        let mut p = hold("AUTHORIZED", 0);
        p.hold_batches = 0;
        let b = check_hold(&p, status(&p));
        assert!(matches!(&b[..], [Breach::HoldNotEnded { .. }]), "{b:?}");
    }

    #[test]
    fn a_hold_fenced_before_it_was_recorded_has_moved_nothing() {
        let mut p = hold("VOIDED", 0);
        (p.hold_expires_at, p.hold_batches, p.release_batches) = (None, 0, 0);
        (p.released_amount, p.hold_pending_net, p.channel_holds_net) = (0, 0, 0);
        assert_eq!(check_hold(&p, status(&p)), vec![]);
        p.released_amount = 1000;
        assert!(matches!(
            &check_hold(&p, status(&p))[..],
            [Breach::HoldNotEnded { .. }]
        ));
    }

    #[test]
    fn the_ledger_captures_must_equal_the_payments() {
        let mut p = hold("AUTHORIZED", 300);
        p.capture_payable = 0;
        p.captures_captured_batched = 0;
        p.capture_batches = 0;
        let b = check_hold(&p, status(&p));
        assert!(
            matches!(&b[..], [Breach::CaptureLedger { detail, .. }] if detail.contains("credit 0")),
            "{b:?}"
        );
        let mut p = hold("AUTHORIZED", 300);
        p.captures_captured_batched = 0;
        let b = check_hold(&p, status(&p));
        assert!(
            matches!(&b[..], [Breach::CaptureLedger { detail, .. }] if detail.contains("no capture batch")),
            "{b:?}"
        );
    }

    #[test]
    fn a_capture_at_the_channel_after_a_void_is_named() {
        let p = hold("VOIDED", 0);
        assert_eq!(
            check_hold_at_channel(&p, status(&p), &found(HoldStatus::Voided, 0)),
            vec![]
        );
        assert_eq!(
            check_hold_at_channel(&p, status(&p), &HoldQueryOutcome::Cancelled),
            vec![]
        );
        let b = check_hold_at_channel(&p, status(&p), &found(HoldStatus::Captured, 200));
        assert!(
            matches!(&b[..], [Breach::CaptureAfterVoid { captured: 200, .. }]),
            "{b:?}"
        );
        let b = check_hold_at_channel(&p, status(&p), &found(HoldStatus::Authorized, 0));
        assert!(
            matches!(&b[..], [Breach::HoldChannelMismatch { .. }]),
            "{b:?}"
        );
    }

    #[test]
    fn the_channels_captured_amount_must_equal_the_ledgers() {
        let p = hold("AUTHORIZED", 300);
        assert_eq!(
            check_hold_at_channel(&p, status(&p), &found(HoldStatus::Authorized, 300)),
            vec![]
        );
        let b = check_hold_at_channel(&p, status(&p), &found(HoldStatus::Authorized, 500));
        assert!(
            matches!(&b[..], [Breach::HoldChannelMismatch { detail, .. }] if detail.contains("captured 500 at the channel, 300 in the ledger")),
            "{b:?}"
        );
        // A capture in flight may have reached the channel already.
        let mut p = hold("CAPTURING", 300);
        p.capture_amount = Some(200);
        for captured in [300, 500] {
            assert_eq!(
                check_hold_at_channel(&p, status(&p), &found(HoldStatus::Authorized, captured)),
                vec![]
            );
        }
        let p = hold("SUCCESS", 600);
        let b = check_hold_at_channel(&p, status(&p), &found(HoldStatus::Authorized, 600));
        assert!(
            matches!(&b[..], [Breach::HoldChannelMismatch { .. }]),
            "{b:?}"
        );
    }

    #[test]
    fn a_payment_for_a_tombstoned_order_is_named() {
        let b = check_tombstones(&[TombstonedPayment {
            id: "pay_t".into(),
            merchant_id: 1,
            merchant_order_id: "o-t".into(),
            status: "AUTHORIZED".into(),
        }]);
        assert_eq!(b[0].payment(), Some("pay_t"));
        assert_eq!(b[0].invariant(), crate::verify::Invariant::Holds);
    }
}

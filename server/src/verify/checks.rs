//! The invariant checks: plain Rust over facts the store and the channel gave, no I/O.

use crate::domain::state::PaymentStatus;
use crate::store::{KeyTotals, LedgerTotal, OutboxFacts, UnbalancedBatch, VerifyPaymentRow};

use super::breach::Breach;
use super::channel::ChannelCharge;

/// The invariant-4 settings. Times in epoch milliseconds UTC.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// When the check runs.
    pub now_ms: i64,
    /// How long a payment may stay unfinished, ms.
    pub window_ms: i64,
    /// How long a payment may wait for the customer's 3-D Secure step (REQUIRES_ACTION), ms,
    /// before the server gives up on it (`--action-window-secs`): such a payment converges at
    /// the end of that wait, so `window_ms` counts from then (issue 38).
    pub action_window_ms: i64,
}

/// Checks invariants 1, 2 and 4 for one payment. `charges` are the channel's records under the
/// payment's key (`None` when the channel is not checked).
pub fn check_payment(
    p: &VerifyPaymentRow,
    charges: Option<&[ChannelCharge]>,
    window: Window,
) -> Vec<Breach> {
    let mut out = Vec::new();
    let Ok(status) = p.status.parse::<PaymentStatus>() else {
        out.push(Breach::CorruptStatus {
            payment: p.id.clone(),
            status: p.status.clone(),
        });
        return out;
    };
    if let Some(charges) = charges {
        check_channel(p, status, charges, window, &mut out);
    }
    check_payment_ledger(p, status, &mut out);
    out.extend(super::holds::check_hold(p, status));
    check_window(p, status, window, &mut out);
    out
}

/// Invariant 1 for one payment: the channel holds as many successful charges under its key
/// as its status says, each of its amount, and refunded what its succeeded refunds total.
fn check_channel(
    p: &VerifyPaymentRow,
    status: PaymentStatus,
    charges: &[ChannelCharge],
    window: Window,
    out: &mut Vec<Breach>,
) {
    let succeeded: Vec<&ChannelCharge> = charges.iter().filter(|c| c.succeeded()).collect();
    // A manual payment's money moves by its hold (checked with the channel's hold, invariant
    // 7): its key never carries a charge (one key, one payment).
    let manual = super::holds::is_manual(p);
    let expected = if manual {
        "0"
    } else if status.is_charged() {
        "1"
    } else if status == PaymentStatus::Failed {
        "0"
    } else {
        "0 or 1"
    };
    let ok = match expected {
        "1" => succeeded.len() == 1,
        "0" => succeeded.is_empty(),
        _ => succeeded.len() <= 1,
    };
    if !ok {
        out.push(Breach::ChargeCount {
            payment: p.id.clone(),
            status: p.status.clone(),
            charges: succeeded.len(),
            expected,
        });
    }
    for c in &succeeded {
        if c.amount != p.amount || c.currency != p.currency {
            out.push(Breach::ChargeMismatch {
                payment: p.id.clone(),
                local: (p.amount, p.currency.clone()),
                channel: (c.amount, c.currency.clone()),
            });
        }
    }
    let refunded_at_channel: i64 = succeeded.iter().map(|c| c.refunded).sum();
    // A reversal refunds at the channel without a refund row; pending refunds are in flight,
    // and so is a reserved reversal whose refund's answer has not been recorded yet (the
    // simulator's seed 15: an approved reversal's answer lost), within the convergence
    // window: one still in flight after it is a mismatch. A manual payment's refunds are
    // against its captures, which the charge list omits.
    let reversing = p.reversal_in_flight && window.now_ms - p.updated_at <= window.window_ms;
    if !manual
        && status != PaymentStatus::Reversed
        && p.refunds_pending == 0
        && !reversing
        && refunded_at_channel != p.refunds_succeeded_amount
    {
        out.push(Breach::RefundMismatch {
            payment: p.id.clone(),
            local: p.refunds_succeeded_amount,
            channel: refunded_at_channel,
        });
    }
}

/// Invariant 2 for one payment: one charge batch of its amount when posted (none
/// otherwise), fee batches that post its fees (at most what it captured and refunded), one batch per
/// succeeded refund, and refund totals that agree with the amount
/// reserved on the payment.
fn check_payment_ledger(p: &VerifyPaymentRow, status: PaymentStatus, out: &mut Vec<Breach>) {
    // A manual payment posts its captures instead (invariant 7), never a charge batch.
    let manual = super::holds::is_manual(p);
    let posted = !manual
        && matches!(
            status,
            PaymentStatus::Success | PaymentStatus::Refunded | PaymentStatus::Reversed
        );
    let expected_batches = i64::from(posted);
    if p.charge_batches != expected_batches {
        out.push(Breach::ChargeBatchCount {
            payment: p.id.clone(),
            status: p.status.clone(),
            batches: p.charge_batches,
            expected: expected_batches,
        });
    } else if posted && p.charge_batch_debits != p.amount {
        out.push(Breach::ChargeBatchAmount {
            payment: p.id.clone(),
            amount: p.amount,
            posted: p.charge_batch_debits,
        });
    }
    let captured = if manual {
        p.captured_amount
    } else {
        i64::from(posted) * p.amount
    };
    // Each capture pays at most itself, and each refund at most itself.
    if p.fee_batch_credits != p.fee_amount || p.fee_amount > captured + p.refunds_succeeded_amount {
        out.push(Breach::FeeLedger {
            payment: p.id.clone(),
            fee: p.fee_amount,
            posted: p.fee_batch_credits,
            captured,
        });
    }
    if p.refund_batches != p.refunds_succeeded {
        out.push(Breach::RefundBatchCount {
            payment: p.id.clone(),
            refunds: p.refunds_succeeded,
            batches: p.refund_batches,
        });
    }
    check_refund_totals(p, status, out);
}

/// The refund side of invariant 2: succeeded refunds never exceed what the payment reserves,
/// equal it when none is pending, and equal the amount of a REFUNDED payment.
fn check_refund_totals(p: &VerifyPaymentRow, status: PaymentStatus, out: &mut Vec<Breach>) {
    if p.refunds_succeeded_amount > p.refunded_amount {
        out.push(Breach::RefundTotals {
            payment: p.id.clone(),
            detail: format!(
                "succeeded refunds total {} but only {} is reserved on the payment",
                p.refunds_succeeded_amount, p.refunded_amount
            ),
        });
    } else if p.refunds_pending == 0 && p.refunds_succeeded_amount != p.refunded_amount {
        out.push(Breach::RefundTotals {
            payment: p.id.clone(),
            detail: format!(
                "{} reserved for refunds with none pending, but succeeded refunds total {}",
                p.refunded_amount, p.refunds_succeeded_amount
            ),
        });
    }
    // What a payment charged: its amount, or what its hold captured.
    let charged = if super::holds::is_manual(p) {
        p.captured_amount
    } else {
        p.amount
    };
    if status == PaymentStatus::Refunded && p.refunds_succeeded_amount != charged {
        out.push(Breach::RefundTotals {
            payment: p.id.clone(),
            detail: format!(
                "REFUNDED but succeeded refunds total {} of {charged}",
                p.refunds_succeeded_amount
            ),
        });
    }
}

/// Invariant 4 for one payment without an open error-pool item: settled, and its refunds
/// finished, within the window.
fn check_window(
    p: &VerifyPaymentRow,
    status: PaymentStatus,
    window: Window,
    out: &mut Vec<Breach>,
) {
    if p.open_error_items != 0 {
        return;
    }
    let settled = status.is_settled();
    let cutoff = window.now_ms - window.window_ms;
    // A customer still within the action window is waited for, not late.
    let waiting = status == PaymentStatus::RequiresAction
        && p.updated_at.saturating_add(window.action_window_ms) > cutoff;
    if !settled && !waiting && p.created_at <= cutoff {
        out.push(Breach::NotConverged {
            payment: p.id.clone(),
            status: p.status.clone(),
            age_secs: (window.now_ms - p.created_at) / 1000,
            detail: "non-terminal".into(),
        });
    } else if p.refunds_pending > 0 && p.updated_at <= cutoff {
        out.push(Breach::NotConverged {
            payment: p.id.clone(),
            status: p.status.clone(),
            age_secs: (window.now_ms - p.updated_at) / 1000,
            detail: format!("{} refunds still pending", p.refunds_pending),
        });
    }
}

/// Checks invariant 2 over the whole ledger: per-currency totals and unbalanced batches.
pub fn check_ledger(totals: &[LedgerTotal], unbalanced: &[UnbalancedBatch]) -> Vec<Breach> {
    let mut out: Vec<Breach> = totals
        .iter()
        .filter(|t| t.debits != t.credits)
        .map(|t| Breach::UnbalancedCurrency {
            currency: t.currency.clone(),
            debits: t.debits,
            credits: t.credits,
        })
        .collect();
    for b in unbalanced {
        let detail = if b.lines == 0 {
            format!("({}) has no lines", b.kind)
        } else if b.foreign_lines > 0 {
            format!(
                "({} {}) has {} lines in another currency",
                b.kind, b.currency, b.foreign_lines
            )
        } else {
            format!(
                "({} {}) debits {} != credits {}",
                b.kind, b.currency, b.debits, b.credits
            )
        };
        out.push(Breach::UnbalancedBatch {
            payment: b.payment_id.clone(),
            batch: b.id,
            detail,
        });
    }
    out
}

/// The successful charges left over once every payment took its own: money no payment owns.
pub fn orphan_charges<'a>(left: impl IntoIterator<Item = &'a ChannelCharge>) -> Vec<Breach> {
    let mut out: Vec<Breach> = left
        .into_iter()
        .filter(|c| c.succeeded())
        .map(|c| Breach::OrphanCharge {
            key: c.key.clone(),
            amount: c.amount,
            currency: c.currency.clone(),
        })
        .collect();
    out.sort_by_key(|b| b.to_string());
    out
}

/// Invariant 3 as far as the database goes: completed keys all hold a response.
pub fn check_keys(keys: &KeyTotals) -> Vec<Breach> {
    if keys.without_response > 0 {
        vec![Breach::KeysWithoutResponse {
            count: keys.without_response,
        }]
    } else {
        vec![]
    }
}

/// Invariant 6: every outcome has its event; every event past the window reached each
/// subscribed enabled endpoint, or its delivery is in the error pool.
pub fn check_outbox(f: &OutboxFacts) -> Vec<Breach> {
    let mut out = Vec::new();
    for (payment, status) in &f.payments_without_event {
        out.push(Breach::MissingEvent {
            payment: payment.clone(),
            aggregate: "payment".into(),
            status: status.clone(),
        });
    }
    for (refund, payment, status) in &f.refunds_without_event {
        out.push(Breach::MissingEvent {
            payment: payment.clone(),
            aggregate: format!("refund:{refund}"),
            status: status.clone(),
        });
    }
    for (delivery, event, aggregate, status) in &f.undelivered {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: format!(
                "delivery {delivery} is {status} past the window and not in the error pool"
            ),
        });
    }
    for (event, aggregate) in &f.unpublished {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: "is not published to the event stream past the window".into(),
        });
    }
    for (event, endpoint, aggregate) in &f.missing_deliveries {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: format!("has no delivery to subscribed endpoint {endpoint}"),
        });
    }
    for (event, aggregate, detail) in &f.pending_drift {
        out.push(Breach::Undelivered {
            aggregate: aggregate.clone(),
            event: event.clone(),
            detail: (*detail).into(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verify::Invariant;

    const NOW: i64 = 1_800_000_000_000;
    const W: Window = Window {
        now_ms: NOW,
        window_ms: 60_000,
        action_window_ms: 0,
    };

    fn payment(status: &str) -> VerifyPaymentRow {
        let posted = matches!(status, "SUCCESS" | "REFUNDED" | "REVERSED");
        VerifyPaymentRow {
            id: "pay_1".into(),
            merchant_id: 1,
            merchant_order_id: "o-1".into(),
            status: status.into(),
            amount: 1000,
            currency: "CNY".into(),
            channel_key: "ck_1".into(),
            connector: "sandbox".into(),
            refunded_amount: 0,
            created_at: NOW - 1_000,
            updated_at: NOW - 1_000,
            charge_batches: i64::from(posted),
            charge_batch_debits: if posted { 1000 } else { 0 },
            refunds_succeeded: 0,
            refunds_succeeded_amount: 0,
            refunds_pending: 0,
            reversal_in_flight: false,
            refund_batches: 0,
            open_error_items: 0,
            fee_amount: 0,
            fee_batch_credits: 0,
            capture_mode: "automatic".into(),
            captured_amount: 0,
            released_amount: 0,
            hold_expires_at: None,
            capture_amount: None,
            hold_batches: 0,
            release_batches: 0,
            capture_batches: 0,
            hold_pending_net: 0,
            channel_holds_net: 0,
            capture_payable: 0,
            captures_captured: 0,
            captures_captured_amount: 0,
            captures_captured_batched: 0,
        }
    }

    fn charge(status: &str, amount: i64) -> ChannelCharge {
        ChannelCharge {
            key: "ck_1".into(),
            status: status.into(),
            amount,
            currency: "CNY".into(),
            attempts: 1,
            refunded: 0,
        }
    }

    #[test]
    fn a_success_with_one_charge_and_one_batch_passes() {
        assert_eq!(
            check_payment(&payment("SUCCESS"), Some(&[charge("succeeded", 1000)]), W),
            vec![]
        );
    }

    #[test]
    fn a_charged_payment_without_a_channel_charge_is_named() {
        for status in [
            "SUCCESS",
            "REFUNDED",
            "REVERSED",
            "CHANNEL_SUCCESS",
            "SUSPENSE",
        ] {
            let b = check_payment(&payment(status), Some(&[]), W);
            assert!(
                b.iter().any(|b| matches!(b, Breach::ChargeCount { charges: 0, expected: "1", payment, .. } if payment == "pay_1")),
                "{status}: {b:?}"
            );
        }
    }

    #[test]
    fn a_declined_record_is_not_a_charge() {
        let b = check_payment(&payment("FAILED"), Some(&[charge("declined", 1000)]), W);
        assert_eq!(b, vec![]);
        let b = check_payment(&payment("SUCCESS"), Some(&[charge("declined", 1000)]), W);
        assert!(
            matches!(b[0], Breach::ChargeCount { charges: 0, .. }),
            "{b:?}"
        );
    }

    #[test]
    fn two_charges_for_one_payment_are_a_double_charge() {
        let b = check_payment(
            &payment("SUCCESS"),
            Some(&[charge("succeeded", 1000), charge("succeeded", 1000)]),
            W,
        );
        assert!(b.iter().any(Breach::is_double_charge), "{b:?}");
        // Even an in-flight payment may hold at most one.
        let b = check_payment(
            &payment("UNKNOWN"),
            Some(&[charge("succeeded", 1000), charge("succeeded", 1000)]),
            W,
        );
        assert!(b.iter().any(Breach::is_double_charge), "{b:?}");
    }

    #[test]
    fn a_failed_payment_with_a_charge_is_a_lost_charge() {
        let b = check_payment(&payment("FAILED"), Some(&[charge("succeeded", 1000)]), W);
        assert!(b.iter().any(Breach::is_lost_charge), "{b:?}");
    }

    #[test]
    fn in_flight_payments_may_or_may_not_hold_a_charge() {
        for status in ["PENDING", "PROCESSING", "UNKNOWN"] {
            assert_eq!(
                check_payment(&payment(status), Some(&[]), W),
                vec![],
                "{status}"
            );
            assert_eq!(
                check_payment(&payment(status), Some(&[charge("succeeded", 1000)]), W),
                vec![],
                "{status}"
            );
        }
    }

    #[test]
    fn a_charge_of_another_amount_is_a_mismatch() {
        let b = check_payment(&payment("SUCCESS"), Some(&[charge("succeeded", 1001)]), W);
        assert!(matches!(&b[..], [Breach::ChargeMismatch { .. }]), "{b:?}");
    }

    #[test]
    fn without_a_channel_only_the_database_is_checked() {
        assert_eq!(check_payment(&payment("SUCCESS"), None, W), vec![]);
    }

    #[test]
    fn charge_batches_follow_the_status() {
        let mut p = payment("SUCCESS");
        p.charge_batches = 0;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(
                &b[..],
                [Breach::ChargeBatchCount {
                    batches: 0,
                    expected: 1,
                    ..
                }]
            ),
            "{b:?}"
        );
        p.charge_batches = 2;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::ChargeBatchCount { batches: 2, .. }]
        ));
        let mut p = payment("SUSPENSE");
        p.charge_batches = 1;
        p.open_error_items = 1;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::ChargeBatchCount { expected: 0, .. }]
        ));
        let mut p = payment("SUCCESS");
        p.charge_batch_debits = 999;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::ChargeBatchAmount { posted: 999, .. }]
        ));
    }

    #[test]
    fn fees_must_equal_their_batches_and_never_exceed_what_was_captured() {
        let mut p = payment("SUCCESS");
        (p.fee_amount, p.fee_batch_credits) = (88, 88);
        assert_eq!(check_payment(&p, None, W), vec![]);
        p.fee_batch_credits = 0;
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::FeeLedger {
                fee: 88,
                posted: 0,
                ..
            }]
        ));
        (p.fee_amount, p.fee_batch_credits) = (p.amount + 1, p.amount + 1);
        assert!(matches!(
            &check_payment(&p, None, W)[..],
            [Breach::FeeLedger { captured, .. }] if *captured == p.amount
        ));
        // Nothing posted yet: no fee may be either.
        let mut p = payment("PROCESSING");
        p.charge_batches = 0;
        (p.fee_amount, p.fee_batch_credits) = (1, 1);
        assert!(
            check_payment(&p, None, W)
                .iter()
                .any(|b| matches!(b, Breach::FeeLedger { captured: 0, .. }))
        );
    }

    #[test]
    fn refunds_must_agree_with_batches_the_channel_and_the_payment() {
        let mut p = payment("SUCCESS");
        p.refunded_amount = 300;
        p.refunds_succeeded = 1;
        p.refunds_succeeded_amount = 300;
        p.refund_batches = 1;
        let mut c = charge("succeeded", 1000);
        c.refunded = 300;
        assert_eq!(check_payment(&p, Some(std::slice::from_ref(&c)), W), vec![]);

        c.refunded = 600;
        let b = check_payment(&p, Some(std::slice::from_ref(&c)), W);
        assert!(
            matches!(
                &b[..],
                [Breach::RefundMismatch {
                    local: 300,
                    channel: 600,
                    ..
                }]
            ),
            "{b:?}"
        );

        p.refund_batches = 0;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(
                &b[..],
                [Breach::RefundBatchCount {
                    refunds: 1,
                    batches: 0,
                    ..
                }]
            ),
            "{b:?}"
        );

        let mut p = payment("REFUNDED");
        p.refunded_amount = 1000;
        p.refunds_succeeded = 1;
        p.refunds_succeeded_amount = 400;
        p.refund_batches = 1;
        let b = check_payment(&p, None, W);
        assert_eq!(b.len(), 2, "{b:?}");
        assert!(b.iter().all(|b| matches!(b, Breach::RefundTotals { .. })));
    }

    #[test]
    fn a_reversal_in_flight_is_not_a_mismatch_until_the_window_ends() {
        let mut p = payment("SUCCESS");
        p.reversal_in_flight = true;
        p.updated_at = NOW - 1_000;
        let mut c = charge("succeeded", 1000);
        c.refunded = 1000;
        assert_eq!(check_payment(&p, Some(&[c.clone()]), W), vec![]);
        p.updated_at = NOW - W.window_ms - 1;
        let b = check_payment(&p, Some(&[c]), W);
        assert!(
            b.iter().any(|b| matches!(b, Breach::RefundMismatch { .. })),
            "{b:?}"
        );
    }

    #[test]
    fn a_pending_refund_is_in_flight_not_a_mismatch() {
        let mut p = payment("SUCCESS");
        p.refunded_amount = 500;
        p.refunds_pending = 1;
        let mut c = charge("succeeded", 1000);
        c.refunded = 500;
        assert_eq!(check_payment(&p, Some(&[c]), W), vec![]);
    }

    #[test]
    fn a_customer_is_waited_for_until_the_action_window_and_then_the_convergence_window_end() {
        let w = Window {
            action_window_ms: 3_600_000,
            ..W
        };
        let mut p = payment("REQUIRES_ACTION");
        p.created_at = NOW - 3_000_000;
        p.updated_at = NOW - 3_000_000;
        assert_eq!(
            check_payment(&p, None, w),
            vec![],
            "within the action window"
        );
        p.updated_at = NOW - 3_600_000 - 60_001;
        let b = check_payment(&p, None, w);
        assert!(matches!(&b[..], [Breach::NotConverged { .. }]), "{b:?}");
        // Only the customer's step has the allowance.
        let mut unknown = payment("UNKNOWN");
        unknown.created_at = NOW - 3_000_000;
        unknown.updated_at = NOW - 3_000_000;
        assert_eq!(check_payment(&unknown, None, w).len(), 1);
    }

    #[test]
    fn old_non_terminal_payments_must_be_in_the_error_pool() {
        let mut p = payment("UNKNOWN");
        p.created_at = NOW - 61_000;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(&b[..], [Breach::NotConverged { age_secs: 61, .. }]),
            "{b:?}"
        );
        assert_eq!(b[0].payment(), Some("pay_1"));
        assert_eq!(b[0].invariant(), Invariant::Window);
        p.open_error_items = 1;
        assert_eq!(check_payment(&p, None, W), vec![]);
        // Young enough: still converging.
        let mut p = payment("PROCESSING");
        p.created_at = NOW - 59_000;
        assert_eq!(check_payment(&p, None, W), vec![]);
        // Settled states are fine at any age.
        for status in ["SUCCESS", "FAILED", "REFUNDED", "REVERSED"] {
            let mut p = payment(status);
            p.created_at = 0;
            if status == "REFUNDED" {
                p.refunded_amount = 1000;
                p.refunds_succeeded = 1;
                p.refunds_succeeded_amount = 1000;
                p.refund_batches = 1;
            }
            assert_eq!(check_payment(&p, None, W), vec![], "{status}");
        }
    }

    #[test]
    fn an_old_pending_refund_must_be_in_the_error_pool() {
        let mut p = payment("SUCCESS");
        p.refunded_amount = 100;
        p.refunds_pending = 1;
        p.updated_at = NOW - 120_000;
        let b = check_payment(&p, None, W);
        assert!(
            matches!(&b[..], [Breach::NotConverged { age_secs: 120, .. }]),
            "{b:?}"
        );
    }

    #[test]
    fn an_unknown_status_is_reported_not_panicked_on() {
        let b = check_payment(&payment("LIMBO"), Some(&[]), W);
        assert!(matches!(&b[..], [Breach::CorruptStatus { .. }]), "{b:?}");
    }

    #[test]
    fn ledger_totals_and_batches_must_balance() {
        let ok = LedgerTotal {
            currency: "CNY".into(),
            debits: 10,
            credits: 10,
        };
        let bad = LedgerTotal {
            currency: "USD".into(),
            debits: 10,
            credits: 9,
        };
        assert_eq!(check_ledger(std::slice::from_ref(&ok), &[]), vec![]);
        let b = check_ledger(&[ok, bad], &[]);
        assert!(
            matches!(&b[..], [Breach::UnbalancedCurrency { currency, .. }] if currency == "USD"),
            "{b:?}"
        );
        let batch = UnbalancedBatch {
            id: 9,
            payment_id: "pay_9".into(),
            kind: "charge".into(),
            currency: "CNY".into(),
            debits: 5,
            credits: 0,
            lines: 1,
            foreign_lines: 0,
        };
        let b = check_ledger(&[], &[batch]);
        assert_eq!(b[0].payment(), Some("pay_9"));
        assert!(
            b[0].to_string().contains("debits 5 != credits 0"),
            "{}",
            b[0]
        );
    }

    #[test]
    fn charges_no_payment_took_are_orphans() {
        let mut c = charge("succeeded", 1000);
        c.key = "ck_lost".into();
        let declined = charge("declined", 1000);
        let b = orphan_charges([&c, &declined]);
        assert_eq!(b.len(), 1);
        assert!(b[0].is_double_charge());
        assert!(b[0].to_string().contains("ck_lost"));
    }

    #[test]
    fn keys_without_a_stored_response_break_replays() {
        assert_eq!(
            check_keys(&KeyTotals {
                done: 3,
                without_response: 0
            }),
            vec![]
        );
        assert_eq!(
            check_keys(&KeyTotals {
                done: 3,
                without_response: 2
            }),
            vec![Breach::KeysWithoutResponse { count: 2 }]
        );
    }

    #[test]
    fn outcomes_without_events_and_undelivered_events_are_named() {
        let facts = OutboxFacts {
            payments_without_event: vec![("pay_1".into(), "SUCCESS".into())],
            refunds_without_event: vec![("re_1".into(), "pay_2".into(), "failed".into())],
            undelivered: vec![(7, "ev1".into(), "pay_3".into(), "pending".into())],
            missing_deliveries: vec![("ev2".into(), "we_1".into(), "pay_4".into())],
            pending_drift: vec![(
                "ev3".into(),
                "pay_5".into(),
                "is unpublished but missing from the outbox backlog",
            )],
            ..OutboxFacts::default()
        };
        let b = check_outbox(&facts);
        assert_eq!(b.len(), 5);
        assert!(b.iter().all(|b| b.invariant() == Invariant::Events));
        assert_eq!(b[0].payment(), Some("pay_1"));
        assert_eq!(b[1].payment(), Some("pay_2"));
        assert!(
            b[2].to_string().contains("delivery 7 is pending"),
            "{}",
            b[2]
        );
        assert!(b[3].to_string().contains("we_1"), "{}", b[3]);
        assert!(b[4].to_string().contains("outbox backlog"), "{}", b[4]);
        assert!(check_outbox(&OutboxFacts::default()).is_empty());
    }
}

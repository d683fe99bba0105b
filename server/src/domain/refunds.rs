//! A merchant refund's life (DESIGN.md "Refunds"): created `pending` with its job, then
//! `succeeded` when the channel refunded it or `failed` when the channel refused it. An
//! undecidable answer leaves it pending for its job; both ends are final.

/// A refund's status: defined with its names in the wire crate, which the console shares
/// (`converge_wire::lifecycle`).
pub use converge_wire::RefundStatus;

use super::state::PaymentStatus;

/// Whether a merchant may refund a payment in `status`: the states the state machine has a
/// `refunded_in_full` row from (DESIGN.md "Payment state machine": SUCCESS, refunds reach the
/// amount, REFUNDED), which is SUCCESS only: a posted charge. SUSPENSE waits for a person; a
/// REFUNDED or REVERSED payment has nothing left. The store's reservation of the amount checks
/// the same rule in its UPDATE, so a refund racing a status change cannot slip through.
pub fn refundable(status: PaymentStatus) -> bool {
    super::state::rule(status, super::state::PaymentEvent::RefundedInFull).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_success_payment_is_refundable() {
        let refundable: Vec<_> = PaymentStatus::ALL
            .into_iter()
            .filter(|s| refundable(*s))
            .collect();
        assert_eq!(refundable, [PaymentStatus::Success]);
    }
}

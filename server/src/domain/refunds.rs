//! A merchant refund's life (DESIGN.md "Refunds"): created `pending` with its job, then
//! `succeeded` when the channel refunded it or `failed` when the channel refused it. An
//! undecidable answer leaves it pending for its job; both ends are final.

/// A refund's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefundStatus {
    /// Not yet decided at the channel; its job sends (or asks) again.
    Pending,
    /// Refunded at the channel; counted in the payment's `refunded_amount`.
    Succeeded,
    /// Refused by the channel; nothing moved.
    Failed,
}

impl RefundStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [RefundStatus; 3] = [
        RefundStatus::Pending,
        RefundStatus::Succeeded,
        RefundStatus::Failed,
    ];

    /// Stored and sent name.
    pub fn as_str(self) -> &'static str {
        match self {
            RefundStatus::Pending => "pending",
            RefundStatus::Succeeded => "succeeded",
            RefundStatus::Failed => "failed",
        }
    }

    /// The status stored as `name`, if any.
    pub fn parse(name: &str) -> Option<RefundStatus> {
        RefundStatus::ALL.into_iter().find(|s| s.as_str() == name)
    }

    /// Decided: nothing sends it again.
    pub fn is_final(self) -> bool {
        !matches!(self, RefundStatus::Pending)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refund_names_round_trip_and_only_pending_is_open() {
        for s in RefundStatus::ALL {
            assert_eq!(RefundStatus::parse(s.as_str()), Some(s));
            assert_eq!(s.is_final(), s != RefundStatus::Pending);
        }
        assert_eq!(RefundStatus::parse("done"), None);
    }
}

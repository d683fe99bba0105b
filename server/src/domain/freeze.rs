//! The frozen-merchant rule, written once (issue 13 "Merchant keys"; DESIGN.md "SUSPENSE";
//! issue 33): a frozen merchant may read, but may not start anything new (a payment, a
//! refund, a change to its webhook endpoints). What is already in flight keeps settling
//! (callbacks and workers are never refused), but a charge's ledger posting waits in SUSPENSE
//! until the merchant is unfrozen. The merchant API (`api::auth::refuse_frozen`), the create
//! (`service::payments`), the posting and the command line all ask here.

/// What a frozen merchant may not start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewWork {
    /// Create payments.
    Payments,
    /// Create refunds.
    Refunds,
    /// Register, change or delete webhook endpoints.
    Endpoints,
    /// Capture a hold: it posts to the merchant's payable (issue 34). Voids and cancels
    /// release money and stay open to a frozen merchant.
    Captures,
}

impl NewWork {
    /// What the merchant cannot do, completing "it cannot ...".
    pub fn what(self) -> &'static str {
        match self {
            NewWork::Payments => "create payments",
            NewWork::Refunds => "create refunds",
            NewWork::Endpoints => "register or change webhook endpoints",
            NewWork::Captures => "capture holds",
        }
    }
}

/// The refusal: the merchant is frozen, so it cannot start `.0` (403 `merchant_frozen` on
/// the merchant API).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the merchant is frozen: it cannot {}", .0.what())]
pub struct Frozen(pub NewWork);

/// Whether a merchant that is `frozen` (or not) may start `work`.
pub fn may_start(frozen: bool, work: NewWork) -> Result<(), Frozen> {
    if frozen { Err(Frozen(work)) } else { Ok(()) }
}

/// Whether a charge's ledger posting waits in SUSPENSE: its merchant is frozen, or has no row
/// (`merchant_frozen` None: nothing is posted to an account nobody holds).
pub fn posting_waits(merchant_frozen: Option<bool>) -> bool {
    merchant_frozen.is_none_or(|frozen| frozen)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frozen_merchant_starts_nothing_and_its_postings_wait() {
        for work in [
            NewWork::Payments,
            NewWork::Refunds,
            NewWork::Endpoints,
            NewWork::Captures,
        ] {
            assert_eq!(may_start(false, work), Ok(()));
            assert_eq!(may_start(true, work), Err(Frozen(work)));
        }
        assert_eq!(
            Frozen(NewWork::Refunds).to_string(),
            "the merchant is frozen: it cannot create refunds"
        );
        assert!(!posting_waits(Some(false)));
        assert!(posting_waits(Some(true)));
        assert!(
            posting_waits(None),
            "a merchant without a row is never posted to"
        );
    }
}

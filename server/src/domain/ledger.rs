//! Double-entry ledger batches (DESIGN.md "Ledger"). Per currency, every batch's debits
//! equal its credits; history is never edited, corrections are new batches.
//!
//! Accounts: `channel_clearing` (what the channel owes us) and `merchant_payable:{id}` (what
//! we owe the merchant). A charge debits clearing and credits the merchant; a refund or
//! reversal posts the reverse.
//!
//! A hold (issue 34) is visible without touching the merchant's payable: `channel_holds`
//! (what the channel holds for us, not yet ours) against `hold_pending:{id}` (what is held
//! for the merchant). The hold batch opens the pair; each capture moves its amount off the
//! pair and onto clearing and the payable (a charge of that amount); the release closes what
//! is left. A hold that ended nets both accounts of its payment to zero.
//!
//! A fee (issue 35) is its own batch beside the charge, capture or refund it prices: debit the
//! merchant's payable, credit `fee_revenue`, with the pricing version that priced it.

/// One double-entry line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerLine {
    /// Account name, e.g. `channel_clearing` or `merchant_payable:7`.
    pub account: String,
    /// Debit (true) or credit.
    pub debit: bool,
    /// Minor units, > 0.
    pub amount: i64,
}

/// A ledger batch to post, in one currency.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerPosting {
    /// `charge`, `refund`, `reversal`, `hold`, `capture`, `release` or `fee`.
    pub kind: &'static str,
    /// The refund it belongs to, if any (at most one batch per refund).
    pub refund_id: Option<String>,
    /// The capture it belongs to, if any (at most one batch per capture).
    pub capture_id: Option<String>,
    /// ISO 4217.
    pub currency: String,
    /// Lines.
    pub lines: Vec<LedgerLine>,
    /// A fee batch's pricing version (see [`super::fees::Pricing`]); `None` otherwise.
    pub pricing_version: Option<i64>,
    /// The accounting day it belongs to, `YYYY-MM-DD` ([`super::accounting`]): empty until
    /// [`dated`](Self::dated), and a batch is only posted dated.
    pub accounting_date: String,
}

impl LedgerPosting {
    /// The batch on accounting day `accounting_date` (`YYYY-MM-DD`, from
    /// [`AccountingCalendar::date_of`](super::accounting::AccountingCalendar::date_of)).
    pub fn dated(mut self, accounting_date: String) -> Self {
        self.accounting_date = accounting_date;
        self
    }
}

/// Clearing account every charge flows through.
pub const CLEARING: &str = "channel_clearing";

/// Where the fees merchants pay us go (issue 35).
pub const FEE_REVENUE: &str = "fee_revenue";

/// What channels hold for us under authorizations not yet captured.
pub const CHANNEL_HOLDS: &str = "channel_holds";

/// What is held for a merchant under its payments' authorizations.
pub fn hold_account(merchant_id: i64) -> String {
    format!("hold_pending:{merchant_id}")
}

/// The payable account of a merchant.
pub fn merchant_account(merchant_id: i64) -> String {
    format!("merchant_payable:{merchant_id}")
}

fn pair(
    kind: &'static str,
    refund_id: Option<String>,
    debit: String,
    credit: String,
    amount: i64,
    currency: &str,
) -> LedgerPosting {
    LedgerPosting {
        kind,
        refund_id,
        capture_id: None,
        currency: currency.to_string(),
        pricing_version: None,
        accounting_date: String::new(),
        lines: vec![
            LedgerLine {
                account: debit,
                debit: true,
                amount,
            },
            LedgerLine {
                account: credit,
                debit: false,
                amount,
            },
        ],
    }
}

/// The one charge batch of a payment: debit clearing, credit the merchant.
pub fn charge(merchant_id: i64, amount: i64, currency: &str) -> LedgerPosting {
    pair(
        "charge",
        None,
        CLEARING.into(),
        merchant_account(merchant_id),
        amount,
        currency,
    )
}

/// A merchant refund: debit the merchant, credit clearing.
pub fn refund(merchant_id: i64, refund_id: &str, amount: i64, currency: &str) -> LedgerPosting {
    pair(
        "refund",
        Some(refund_id.into()),
        merchant_account(merchant_id),
        CLEARING.into(),
        amount,
        currency,
    )
}

/// An ops reversal of the remaining amount: debit the merchant, credit clearing.
pub fn reversal(merchant_id: i64, amount: i64, currency: &str) -> LedgerPosting {
    pair(
        "reversal",
        None,
        merchant_account(merchant_id),
        CLEARING.into(),
        amount,
        currency,
    )
}

/// A hold recorded (issue 34): debit the channel's holds, credit what is held for the
/// merchant, the authorized amount.
pub fn hold(merchant_id: i64, amount: i64, currency: &str) -> LedgerPosting {
    pair(
        "hold",
        None,
        CHANNEL_HOLDS.into(),
        hold_account(merchant_id),
        amount,
        currency,
    )
}

/// A capture `capture_id` of `amount` off the hold (to clearing and the merchant's payable,
/// as a charge of that amount), with `released` (the rest of a hold the capture closes; 0
/// otherwise) released in the same batch.
pub fn capture(
    merchant_id: i64,
    capture_id: &str,
    amount: i64,
    released: i64,
    currency: &str,
) -> LedgerPosting {
    let off_hold = amount + released;
    let line = |account: String, debit: bool, amount: i64| LedgerLine {
        account,
        debit,
        amount,
    };
    LedgerPosting {
        kind: "capture",
        refund_id: None,
        capture_id: Some(capture_id.into()),
        currency: currency.to_string(),
        pricing_version: None,
        accounting_date: String::new(),
        lines: vec![
            line(hold_account(merchant_id), true, off_hold),
            line(CHANNEL_HOLDS.into(), false, off_hold),
            line(CLEARING.into(), true, amount),
            line(merchant_account(merchant_id), false, amount),
        ],
    }
}

/// What is left of a hold released (void, expiry): the hold batch reversed for `amount`.
pub fn release(merchant_id: i64, amount: i64, currency: &str) -> LedgerPosting {
    pair(
        "release",
        None,
        hold_account(merchant_id),
        CHANNEL_HOLDS.into(),
        amount,
        currency,
    )
}

/// The fee `amount` (> 0) of the batch `of` (a charge, a capture: its `capture_id`, a refund:
/// its `refund_id`), priced by `pricing_version`: debit the merchant's payable, credit fee
/// revenue, linked to what it prices.
pub fn fee(
    merchant_id: i64,
    of: &LedgerPosting,
    amount: i64,
    pricing_version: i64,
) -> LedgerPosting {
    let mut p = pair(
        "fee",
        of.refund_id.clone(),
        merchant_account(merchant_id),
        FEE_REVENUE.into(),
        amount,
        &of.currency,
    );
    p.capture_id = of.capture_id.clone();
    p.pricing_version = Some(pricing_version);
    p.accounting_date = of.accounting_date.clone();
    p
}

/// True when the batch's debits equal its credits and every line is positive.
pub fn is_balanced(p: &LedgerPosting) -> bool {
    let mut debits: i128 = 0;
    let mut credits: i128 = 0;
    for l in &p.lines {
        if l.amount <= 0 {
            return false;
        }
        if l.debit {
            debits += i128::from(l.amount)
        } else {
            credits += i128::from(l.amount)
        }
    }
    !p.lines.is_empty() && debits == credits
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charge_refund_and_reversal_batches_balance() {
        assert!(is_balanced(&charge(1, 1999, "CNY")));
        assert!(is_balanced(&refund(1, "re_1", 500, "CNY")));
        assert!(is_balanced(&reversal(1, 1499, "CNY")));
    }

    #[test]
    fn a_hold_captured_in_parts_and_released_nets_its_accounts_to_zero() {
        let batches = [
            hold(3, 1000, "EUR"),
            capture(3, "cap_1", 300, 0, "EUR"),
            capture(3, "cap_2", 200, 500, "EUR"),
        ];
        let mut net = std::collections::HashMap::<String, i64>::new();
        for b in &batches {
            assert!(is_balanced(b), "{b:?}");
            for l in &b.lines {
                *net.entry(l.account.clone()).or_default() +=
                    if l.debit { l.amount } else { -l.amount };
            }
        }
        assert_eq!(net[&hold_account(3)], 0);
        assert_eq!(net[CHANNEL_HOLDS], 0);
        assert_eq!(
            net[&merchant_account(3)],
            -500,
            "what was captured is payable"
        );
        assert!(is_balanced(&release(3, 700, "EUR")));
    }

    #[test]
    fn refund_reverses_the_charge_accounts() {
        let c = charge(7, 100, "CNY");
        let r = refund(7, "re_1", 100, "CNY");
        assert_eq!(c.lines[0].account, r.lines[1].account);
        assert_eq!(c.lines[1].account, r.lines[0].account);
    }

    #[test]
    fn one_sided_or_zero_batches_are_unbalanced() {
        let mut p = charge(1, 100, "CNY");
        p.lines.pop();
        assert!(!is_balanced(&p));
        assert!(!is_balanced(&charge(1, 0, "CNY")));
    }
}

//! Double-entry ledger batches (DESIGN.md "Ledger"). Per currency, every batch's debits
//! equal its credits; history is never edited, corrections are new batches.
//!
//! Accounts: `channel_clearing` (what the channel owes us) and `merchant_payable:{id}` (what
//! we owe the merchant). A charge debits clearing and credits the merchant; a refund or
//! reversal posts the reverse.

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
    /// `charge`, `refund` or `reversal`.
    pub kind: &'static str,
    /// The refund it belongs to, if any (at most one batch per refund).
    pub refund_id: Option<String>,
    /// ISO 4217.
    pub currency: String,
    /// Lines.
    pub lines: Vec<LedgerLine>,
}

/// Clearing account every charge flows through.
pub const CLEARING: &str = "channel_clearing";

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
        currency: currency.to_string(),
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

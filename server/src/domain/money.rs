//! Amounts and currencies. Amounts are integer minor units (fen for CNY, cents for USD);
//! currencies are ISO 4217 alphabetic codes checked against `iso_currency`'s list.

use iso_currency::Currency;

/// Why an amount or currency was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MoneyError {
    /// Zero or negative amount.
    #[error("amount must be a positive integer number of minor units")]
    NotPositive,
    /// Larger than [`MAX_AMOUNT`].
    #[error("amount is larger than the maximum of {MAX_AMOUNT} minor units")]
    TooLarge,
    /// Not an ISO 4217 code.
    #[error("currency must be an ISO 4217 alphabetic code such as CNY")]
    UnknownCurrency,
}

/// Largest amount accepted, in minor units: 10^15, far below `i64::MAX`, so sums of refunds
/// and ledger totals can never overflow.
pub const MAX_AMOUNT: i64 = 1_000_000_000_000_000;

/// Checks a payment or refund amount in minor units.
pub fn validate_amount(amount: i64) -> Result<i64, MoneyError> {
    if amount <= 0 {
        Err(MoneyError::NotPositive)
    } else if amount > MAX_AMOUNT {
        Err(MoneyError::TooLarge)
    } else {
        Ok(amount)
    }
}

/// Checks an ISO 4217 alphabetic code (exact, upper case) and returns it with its minor-unit
/// exponent (2 for CNY, 0 for JPY). Funds codes without minor units (e.g. XAU) are refused:
/// a payment needs a currency with a defined exponent.
pub fn validate_currency(code: &str) -> Result<(String, u16), MoneyError> {
    if code.len() != 3 || !code.bytes().all(|b| b.is_ascii_uppercase()) {
        return Err(MoneyError::UnknownCurrency);
    }
    if !has_minor_unit(code) {
        return Err(MoneyError::UnknownCurrency);
    }
    let exponent = converge_wire::money::exponent(code) as u16;
    Ok((code.to_string(), exponent))
}

/// An amount of integer minor units as a person reads it: in major units with the currency's
/// ISO 4217 minor units and its code (`18857, "CNY"` → `188.57 CNY`; `500, "JPY"` → `500
/// JPY`; `1234, "KWD"` → `1.234 KWD`). Every summary and detail a person reads uses it: a
/// "18857 CNY" beside "188.57 CNY" is a 100x misread in a payments console (issue 17). A code
/// without a defined exponent (only a channel could send one) stays in minor units, saying so.
pub fn display(minor: i64, currency: &str) -> String {
    match major(minor, currency) {
        Some(m) => format!("{m} {currency}"),
        None => format!("{minor} minor units of {currency:?}"),
    }
}

/// The number part of [`display`]: `18857, "CNY"` → `188.57`; `None` for a code without a
/// defined ISO 4217 exponent.
pub fn major(minor: i64, currency: &str) -> Option<String> {
    has_minor_unit(currency).then(|| converge_wire::money::major(minor, currency))
}

/// Whether `code` is an ISO 4217 currency with a defined minor unit (`iso_currency`'s list;
/// funds codes such as XAU have none). How many decimals it has is the one table's,
/// `converge_wire::money::exponent`.
fn has_minor_unit(code: &str) -> bool {
    Currency::from_code(code).is_some_and(|c| c.exponent().is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wire_exponents_agree_with_iso_4217() {
        let letters = b'A'..=b'Z';
        let mut checked = 0;
        for a in letters.clone() {
            for b in letters.clone() {
                for c in letters.clone() {
                    let code = String::from_utf8(vec![a, b, c]).unwrap();
                    let Some(iso) = Currency::from_code(&code).and_then(|c| c.exponent()) else {
                        continue;
                    };
                    assert_eq!(
                        converge_wire::money::exponent(&code),
                        u32::from(iso),
                        "{code}'s minor unit"
                    );
                    checked += 1;
                }
            }
        }
        assert!(
            checked > 150,
            "the ISO 4217 list was read ({checked} codes)"
        );
    }

    #[test]
    fn amounts_are_displayed_in_major_units_with_the_currency_exponent() {
        assert_eq!(display(18857, "CNY"), "188.57 CNY");
        assert_eq!(display(5, "USD"), "0.05 USD");
        assert_eq!(display(-250, "USD"), "-2.50 USD");
        assert_eq!(display(500, "JPY"), "500 JPY");
        assert_eq!(display(1234, "KWD"), "1.234 KWD");
        assert_eq!(display(i64::MIN, "USD"), "-92233720368547758.08 USD");
        assert_eq!(display(7, "XAU"), "7 minor units of \"XAU\"");
        assert_eq!(display(7, "??"), "7 minor units of \"??\"");
    }

    #[test]
    fn zero_negative_and_huge_amounts_are_refused() {
        assert_eq!(validate_amount(0), Err(MoneyError::NotPositive));
        assert_eq!(validate_amount(-1), Err(MoneyError::NotPositive));
        assert_eq!(validate_amount(MAX_AMOUNT + 1), Err(MoneyError::TooLarge));
        assert_eq!(validate_amount(1), Ok(1));
    }

    #[test]
    fn real_currencies_carry_their_exponent() {
        assert_eq!(validate_currency("CNY").unwrap().1, 2);
        assert_eq!(validate_currency("JPY").unwrap().1, 0);
        assert_eq!(validate_currency("BHD").unwrap().1, 3);
    }

    #[test]
    fn unknown_or_lowercase_currency_is_refused() {
        assert_eq!(validate_currency("XYZ"), Err(MoneyError::UnknownCurrency));
        assert_eq!(validate_currency("cny"), Err(MoneyError::UnknownCurrency));
        assert_eq!(validate_currency(""), Err(MoneyError::UnknownCurrency));
    }
}

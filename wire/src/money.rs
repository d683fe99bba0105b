//! Currency minor units: how many decimals an ISO 4217 currency's amounts carry, and an
//! amount of integer minor units written in major units. The one table of exponents in the
//! workspace: the server's `domain::money` (which checks that a code is a currency at all,
//! against `iso_currency`'s list) and the console's `format::money` both read it, so the two
//! can no longer disagree (a second table in the console was the rule behind a 100x misread,
//! issue 33). The server's test `the_wire_exponents_agree_with_iso_4217` checks it against
//! every ISO 4217 code with a defined minor unit.

/// ISO 4217 codes whose minor unit is 0 (no decimals), 3 and 4; every other currency with a
/// defined minor unit has 2.
const ZERO: [&str; 17] = [
    "BIF", "CLP", "DJF", "GNF", "ISK", "JPY", "KMF", "KRW", "PYG", "RWF", "UGX", "UYI", "VND",
    "VUV", "XAF", "XOF", "XPF",
];
const THREE: [&str; 7] = ["BHD", "IQD", "JOD", "KWD", "LYD", "OMR", "TND"];
const FOUR: [&str; 2] = ["CLF", "UYW"];

/// The codes whose exponent is not 2, by exponent (0, 3, 4): every other currency with a
/// defined minor unit has 2. What a query that must pick currencies by exponent reads (the
/// console's search by amount).
pub fn codes_not_of_exponent_two() -> [(u32, &'static [&'static str]); 3] {
    [(0, &ZERO), (3, &THREE), (4, &FOUR)]
}

/// Minor-unit exponent of an ISO 4217 code: 0 (JPY), 3 (KWD), 4 (CLF), else 2. The server
/// accepts only codes with a defined exponent (`domain::money::validate_currency`); a code
/// without one is 2 here, so callers that may meet one check it first.
pub fn exponent(currency: &str) -> u32 {
    if ZERO.contains(&currency) {
        0
    } else if THREE.contains(&currency) {
        3
    } else if FOUR.contains(&currency) {
        4
    } else {
        2
    }
}

/// The number part of an amount of integer minor units in major units, by the currency's
/// [`exponent`]: `18857, "CNY"` → `188.57`, `500, "JPY"` → `500`, `-250, "USD"` → `-2.50`,
/// `1234, "KWD"` → `1.234`.
pub fn major(minor: i64, currency: &str) -> String {
    let exp = exponent(currency);
    if exp == 0 {
        return minor.to_string();
    }
    let unit = 10u64.pow(exp);
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!(
        "{sign}{}.{:0width$}",
        abs / unit,
        abs % unit,
        width = exp as usize
    )
}

/// An amount written in major units (`12.34`, `12`, `0.5`) as integer minor units of
/// `currency`, by its [`exponent`]: `"12.34", "CNY"` → `1234`, `"500", "JPY"` → `500`. None
/// for anything else: a sign, more decimals than the currency has, a letter, blank, or more
/// than an `i64` holds. What a console form reads back from a person's major units.
pub fn minor(major: &str, currency: &str) -> Option<i64> {
    let exp = exponent(currency) as usize;
    let text = major.trim();
    let (whole, frac) = match text.split_once('.') {
        Some((w, f)) => (w, f),
        None => (text, ""),
    };
    let digits = |s: &str| s.chars().all(|c| c.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(frac) || frac.len() > exp {
        return None;
    }
    if text.contains('.') && frac.is_empty() {
        return None;
    }
    let padded = format!("{whole}{frac:0<exp$}");
    padded.parse::<i64>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_are_written_with_their_currencys_decimals() {
        assert_eq!(major(18857, "CNY"), "188.57");
        assert_eq!(major(500, "JPY"), "500");
        assert_eq!(major(-250, "USD"), "-2.50");
        assert_eq!(major(1234, "KWD"), "1.234");
        assert_eq!(major(5, "CLF"), "0.0005");
        assert_eq!(major(i64::MIN, "USD"), "-92233720368547758.08");
    }

    #[test]
    fn major_units_read_back_as_minor_units_by_the_currencys_decimals() {
        assert_eq!(minor("12.34", "CNY"), Some(1234));
        assert_eq!(minor("12", "CNY"), Some(1200));
        assert_eq!(minor(" 0.5 ", "CNY"), Some(50));
        assert_eq!(minor("500", "JPY"), Some(500));
        assert_eq!(minor("1.234", "KWD"), Some(1234));
        for bad in [
            "",
            " ",
            "-1",
            "+1",
            "1.234",
            "1,5",
            "1e3",
            "abc",
            ".5",
            "1.",
            "99999999999999999999",
        ] {
            assert_eq!(minor(bad, "CNY"), None, "{bad:?}");
        }
        assert_eq!(minor("1.5", "JPY"), None);
        for m in [0, 1, 99, 18857, 1_000_000] {
            assert_eq!(minor(&major(m, "CNY"), "CNY"), Some(m));
        }
    }
}

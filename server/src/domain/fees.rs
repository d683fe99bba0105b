//! A merchant's pricing and the fee it charges per capture (issue 35 "Money rules"; Stripe's
//! balance transactions: amount, fee, net).
//!
//! A pricing is a percentage and a fixed fee. The fee of a capture of `gross` minor units is
//! `round_half_even(gross × percent / 100) + fixed`, at most `gross`: the net the merchant
//! keeps is never negative. Half-even (banker's rounding) is the one rounding rule: over many
//! lines its halves go up as often as down, so a day's fees carry no rounding bias either way.
//! A sale is one capture of its whole amount; each capture of a hold is priced on its own.
//! A pricing may also charge a fixed fee per merchant refund, at most the refund's amount
//! ([`refund_fee`]); an ops reversal is charged none.
//!
//! Percentages are kept in parts per million of the amount (`2.9` % is 29 000 ppm), so a
//! pricing with up to four decimal places of percent is exact.

/// Parts per million in 100 %.
pub const FULL_PPM: i64 = 1_000_000;

/// One version of a merchant's pricing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pricing {
    /// 1 for the merchant's first pricing, one more for each change.
    pub version: i64,
    /// The percentage, in parts per million of the captured amount (0..=1 000 000).
    pub percent_ppm: i64,
    /// Added to every capture's fee, minor units of the capture's currency (>= 0).
    pub fixed: i64,
    /// The fee of each merchant refund, minor units of its currency (>= 0; 0: none).
    pub refund_fee: i64,
}

/// Why a pricing was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PricingError {
    /// Not a decimal number from 0 to 100 with at most four decimal places.
    #[error("percent must be a decimal from 0 to 100 with at most 4 decimal places, such as 2.9")]
    Percent,
    /// A fixed fee (per capture or per refund) negative, or more than the largest amount.
    #[error(
        "fixed fees (per capture and per refund) must be from 0 to {} minor units",
        super::money::MAX_AMOUNT
    )]
    Fixed,
}

/// Reads a percentage as a person writes it (`2.9`, `0`, `1.25`, `100`) into parts per
/// million. Errors: [`PricingError::Percent`] for anything else (signs, exponents, more than
/// four decimals, above 100).
pub fn parse_percent(text: &str) -> Result<i64, PricingError> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || whole.len() > 3 || frac.len() > 4 || !digits(whole) || !digits(frac) {
        return Err(PricingError::Percent);
    }
    if text.ends_with('.') {
        return Err(PricingError::Percent);
    }
    let whole: i64 = whole.parse().map_err(|_| PricingError::Percent)?;
    let frac: i64 = format!("{frac:0<4}")
        .parse()
        .map_err(|_| PricingError::Percent)?;
    let ppm = whole * 10_000 + frac;
    if ppm > FULL_PPM {
        return Err(PricingError::Percent);
    }
    Ok(ppm)
}

/// Checks a fixed fee in minor units. Errors: [`PricingError::Fixed`].
pub fn validate_fixed(fixed: i64) -> Result<i64, PricingError> {
    if (0..=super::money::MAX_AMOUNT).contains(&fixed) {
        Ok(fixed)
    } else {
        Err(PricingError::Fixed)
    }
}

/// A percentage in parts per million as a person reads it (`29000` → `2.9`): the wire's, so
/// the console shows it the same way.
pub use converge_wire::merchants::display_percent;

/// The fee of one capture of `gross` minor units (> 0) under `pricing`: the percentage
/// rounded half-even, plus the fixed fee, at most `gross`.
pub fn fee(gross: i64, pricing: &Pricing) -> i64 {
    debug_assert!(gross > 0 && (0..=FULL_PPM).contains(&pricing.percent_ppm));
    let product = i128::from(gross) * i128::from(pricing.percent_ppm);
    let (quotient, remainder) = (product / 1_000_000, product % 1_000_000);
    let rounds_up = match (2 * remainder).cmp(&1_000_000) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Equal => quotient % 2 == 1,
        std::cmp::Ordering::Less => false,
    };
    // At most gross (100 %), so it fits back in 64 bits.
    let proportional = (quotient + i128::from(rounds_up)) as i64;
    let fee = proportional.saturating_add(pricing.fixed).min(gross);
    debug_assert!((0..=gross).contains(&fee));
    fee
}

/// The fee of one merchant refund of `amount` minor units (> 0) under `pricing`: its fixed
/// refund fee, at most `amount`.
pub fn refund_fee(amount: i64, pricing: &Pricing) -> i64 {
    debug_assert!(amount > 0 && pricing.refund_fee >= 0);
    pricing.refund_fee.min(amount)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pricing(percent: &str, fixed: i64) -> Pricing {
        Pricing {
            version: 1,
            percent_ppm: parse_percent(percent).unwrap(),
            fixed,
            refund_fee: 25,
        }
    }

    #[test]
    fn percentages_read_as_people_write_them() {
        assert_eq!(parse_percent("2.9"), Ok(29_000));
        assert_eq!(parse_percent("0"), Ok(0));
        assert_eq!(parse_percent("100"), Ok(FULL_PPM));
        assert_eq!(parse_percent("0.0001"), Ok(1));
        assert_eq!(parse_percent("1.25"), Ok(12_500));
        for bad in [
            "", "-1", "+1", "1e2", "100.0001", "101", "2.", ".5", "0.00001", "2,9", " 2", "1000",
        ] {
            assert_eq!(parse_percent(bad), Err(PricingError::Percent), "{bad:?}");
        }
        assert_eq!(display_percent(29_000), "2.9");
        assert_eq!(display_percent(FULL_PPM), "100");
        assert_eq!(display_percent(1), "0.0001");
        assert_eq!(display_percent(0), "0");
    }

    #[test]
    fn half_of_a_minor_unit_rounds_to_the_even_neighbour() {
        // 1 % of 50 is 0.5 → 0; of 150 is 1.5 → 2; of 250 is 2.5 → 2.
        assert_eq!(fee(50, &pricing("1", 0)), 0);
        assert_eq!(fee(150, &pricing("1", 0)), 2);
        assert_eq!(fee(250, &pricing("1", 0)), 2);
        // Just above and below the half.
        assert_eq!(fee(251, &pricing("1", 0)), 3);
        assert_eq!(fee(249, &pricing("1", 0)), 2);
        // 2.9 % + 30 of 1999 is 57.971 + 30 → 88.
        assert_eq!(fee(1999, &pricing("2.9", 30)), 88);
    }

    #[test]
    fn the_fee_never_exceeds_the_captured_amount() {
        assert_eq!(
            fee(20, &pricing("2.9", 30)),
            20,
            "the fixed fee alone is more"
        );
        assert_eq!(fee(1000, &pricing("100", 1)), 1000);
        assert_eq!(fee(1000, &pricing("0", 0)), 0);
        assert_eq!(
            refund_fee(10, &pricing("0", 0)),
            10,
            "a refund pays at most itself"
        );
        assert_eq!(refund_fee(1000, &pricing("0", 0)), 25);
    }

    #[test]
    fn the_largest_amount_at_the_largest_percentage_does_not_overflow() {
        let max = super::super::money::MAX_AMOUNT;
        assert_eq!(fee(max, &pricing("100", max)), max);
        assert_eq!(fee(max, &pricing("99.9999", 0)), max - max / FULL_PPM);
        assert_eq!(validate_fixed(max + 1), Err(PricingError::Fixed));
        assert_eq!(validate_fixed(-1), Err(PricingError::Fixed));
    }
}

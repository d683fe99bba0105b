//! Channel callback signatures: HMAC-SHA256 over a timestamp and the raw body, Stripe-style
//! (DESIGN.md "Merchant HTTP API": callbacks are HMAC-SHA256 signed with a timestamp; bad
//! signature 401, older than 5 minutes 400; "Sandbox channel": signed callbacks).
//!
//! Header value: `t=<unix seconds, UTC>,v1=<lowercase hex HMAC-SHA256>`, where the MAC is over
//! the bytes `"{t}." ++ body`. Binding the timestamp into the MAC is what makes the age check
//! meaningful: a replayed body cannot be given a fresh `t`.

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Name of the HTTP header carrying the signature.
pub const SIGNATURE_HEADER: &str = "Converge-Signature";

/// Default age tolerance in seconds (DESIGN.md: callbacks older than 5 minutes are refused).
pub const DEFAULT_TOLERANCE_SECS: i64 = 300;

type HmacSha256 = Hmac<Sha256>;

/// Why a signature header was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// The header is not `t=<int>,v1=<hex>` (missing part, bad integer, bad hex).
    #[error("malformed signature header")]
    Malformed,
    /// No `v1` value matches the MAC of `t` and the body under the secret.
    #[error("signature does not match")]
    BadSignature,
    /// `t` is more than the tolerance before now (a replay, or a very late delivery).
    #[error("signature timestamp too old")]
    TooOld,
    /// `t` is more than the tolerance after now; refused so a forged-ahead timestamp cannot
    /// extend a captured signature's life.
    #[error("signature timestamp in the future")]
    InFuture,
}

fn mac_for(secret: &[u8], unix_secs: i64, body: &[u8]) -> HmacSha256 {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(unix_secs.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// Signs `body` at `unix_secs` (seconds since the epoch, UTC) with `secret`; returns the
/// [`SIGNATURE_HEADER`] value `t=<unix_secs>,v1=<64 lowercase hex chars>`.
pub fn sign(secret: &[u8], unix_secs: i64, body: &[u8]) -> String {
    let tag = mac_for(secret, unix_secs, body).finalize().into_bytes();
    format!("t={unix_secs},v1={}", hex::encode(tag))
}

/// Checks a [`SIGNATURE_HEADER`] value against `body` and returns its timestamp `t` (unix
/// seconds, UTC) when it is valid and within `tolerance_secs` of `now_unix_secs` either way
/// (callers pass [`DEFAULT_TOLERANCE_SECS`], 300).
///
/// Several `v1=` entries are accepted (any may match) so a secret can be rotated; unknown
/// schemes are ignored. The MAC is compared in constant time.
pub fn verify(
    secret: &[u8],
    header: &str,
    body: &[u8],
    now_unix_secs: i64,
    tolerance_secs: i64,
) -> Result<i64, SignatureError> {
    let mut t: Option<i64> = None;
    let mut sigs: Vec<Vec<u8>> = Vec::new();
    for part in header.split(',') {
        let (k, v) = part
            .trim()
            .split_once('=')
            .ok_or(SignatureError::Malformed)?;
        match k {
            "t" => {
                if t.is_some() {
                    return Err(SignatureError::Malformed);
                }
                t = Some(v.parse::<i64>().map_err(|_| SignatureError::Malformed)?);
            }
            "v1" => sigs.push(hex::decode(v).map_err(|_| SignatureError::Malformed)?),
            _ => {}
        }
    }
    let t = t.ok_or(SignatureError::Malformed)?;
    if sigs.is_empty() {
        return Err(SignatureError::Malformed);
    }
    // Check the MAC before the clock so a forged header learns nothing about our time window.
    let base = mac_for(secret, t, body);
    if !sigs.iter().any(|s| base.clone().verify_slice(s).is_ok()) {
        return Err(SignatureError::BadSignature);
    }
    let age = now_unix_secs.saturating_sub(t);
    if age > tolerance_secs {
        return Err(SignatureError::TooOld);
    }
    if age < tolerance_secs.saturating_neg() {
        return Err(SignatureError::InFuture);
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &[u8] = b"whsec_test";
    const BODY: &[u8] = br#"{"event_id":"evt_1","type":"charge.succeeded"}"#;

    #[test]
    fn sign_has_the_documented_shape() {
        let h = sign(SECRET, 1_700_000_000, BODY);
        let (t, v1) = h.split_once(',').unwrap();
        assert_eq!(t, "t=1700000000");
        let hex_part = v1.strip_prefix("v1=").unwrap();
        assert_eq!(hex_part.len(), 64);
        assert!(
            hex_part
                .chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
    }

    #[test]
    fn mac_is_over_timestamp_dot_body() {
        let mut mac = HmacSha256::new_from_slice(SECRET).unwrap();
        mac.update(b"1700000000.");
        mac.update(BODY);
        let expected = hex::encode(mac.finalize().into_bytes());
        assert_eq!(
            sign(SECRET, 1_700_000_000, BODY),
            format!("t=1700000000,v1={expected}")
        );
    }

    #[test]
    fn round_trip_returns_the_timestamp() {
        let h = sign(SECRET, 1000, BODY);
        assert_eq!(verify(SECRET, &h, BODY, 1000, 300), Ok(1000));
        assert_eq!(verify(SECRET, &h, BODY, 1300, 300), Ok(1000));
        assert_eq!(verify(SECRET, &h, BODY, 700, 300), Ok(1000));
    }

    #[test]
    fn tampered_body_or_wrong_secret_is_bad_signature() {
        let h = sign(SECRET, 1000, BODY);
        assert_eq!(
            verify(SECRET, &h, b"{}", 1000, 300),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(
            verify(b"other", &h, BODY, 1000, 300),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn changed_timestamp_is_bad_signature() {
        let h = sign(SECRET, 1000, BODY);
        let forged = h.replacen("t=1000", "t=1001", 1);
        assert_eq!(
            verify(SECRET, &forged, BODY, 1001, 300),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn too_old_and_too_far_ahead_are_refused() {
        let h = sign(SECRET, 1000, BODY);
        assert_eq!(
            verify(SECRET, &h, BODY, 1301, 300),
            Err(SignatureError::TooOld)
        );
        assert_eq!(
            verify(SECRET, &h, BODY, 699, 300),
            Err(SignatureError::InFuture)
        );
    }

    #[test]
    fn any_of_several_v1_entries_may_match() {
        let good = sign(SECRET, 1000, BODY);
        let v1 = good.split_once(",v1=").unwrap().1;
        let h = format!("t=1000,v1={},v1={v1},v0=zz", "00".repeat(32));
        assert_eq!(verify(SECRET, &h, BODY, 1000, 300), Ok(1000));
    }

    #[test]
    fn malformed_headers_are_refused_without_panicking() {
        for h in [
            "",
            "garbage",
            "t=,v1=00",
            "t=abc,v1=00",
            "v1=00",
            "t=1000",
            "t=1000,v1=xyz",
            "t=1000,t=1000,v1=00",
            "t=99999999999999999999,v1=00",
            "t=1000,,v1=00",
        ] {
            assert_eq!(
                verify(SECRET, h, BODY, 1000, 300),
                Err(SignatureError::Malformed),
                "{h}"
            );
        }
    }

    #[test]
    fn short_or_wrong_length_mac_is_bad_signature() {
        assert_eq!(
            verify(SECRET, "t=1000,v1=00", BODY, 1000, 300),
            Err(SignatureError::BadSignature)
        );
        assert_eq!(
            verify(SECRET, "t=1000,v1=", BODY, 1000, 300),
            Err(SignatureError::BadSignature)
        );
    }

    #[test]
    fn extreme_clock_values_do_not_overflow() {
        let h = sign(SECRET, i64::MIN, BODY);
        assert_eq!(
            verify(SECRET, &h, BODY, i64::MAX, 300),
            Err(SignatureError::TooOld)
        );
        let h = sign(SECRET, i64::MAX, BODY);
        assert_eq!(
            verify(SECRET, &h, BODY, i64::MIN, i64::MAX),
            Err(SignatureError::InFuture)
        );
    }
}

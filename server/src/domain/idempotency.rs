//! Idempotency-Key rules that need no storage: key validation and the outcomes counted per
//! route (DESIGN.md "Idempotency contract"; IETF draft-ietf-httpapi-idempotency-key-header;
//! Stripe's documented behaviour for keys up to 255 characters).

use std::fmt;

/// Longest accepted key, in characters (Stripe's documented limit).
pub const MAX_KEY_LEN: usize = 255;

/// Why an `Idempotency-Key` header was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyError {
    /// No header on a POST: 400 `idempotency_key_missing`.
    Missing,
    /// Empty, longer than [`MAX_KEY_LEN`], or not visible ASCII: 400 `idempotency_key_invalid`.
    Invalid,
}

/// Validates a raw header value: 1..=255 bytes of visible ASCII (0x21..=0x7E).
///
/// `None` means the header was absent. The header value arrives as bytes because a client may
/// send non-ASCII; those are invalid, not a server error.
pub fn validate_key(raw: Option<&[u8]>) -> Result<String, KeyError> {
    let bytes = raw.ok_or(KeyError::Missing)?;
    if bytes.is_empty()
        || bytes.len() > MAX_KEY_LEN
        || !bytes.iter().all(|b| (0x21..=0x7e).contains(b))
    {
        return Err(KeyError::Invalid);
    }
    // Visible ASCII is valid UTF-8.
    Ok(String::from_utf8_lossy(bytes).into_owned())
}

/// The answer a request with (or without) a key got; counted per route for the hit rate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// First use of the key: the request executed.
    First,
    /// Completed key, same fingerprint: the stored response was replayed.
    Replay,
    /// Key still running: 409 `idempotency_key_in_use`.
    InUse,
    /// Key used with another fingerprint or route: 422 `idempotency_key_reused`.
    Reused,
    /// POST without a key: 400 `idempotency_key_missing`.
    Missing,
    /// Malformed key: 400 `idempotency_key_invalid`.
    Invalid,
}

impl Outcome {
    /// All outcomes, in the order the console lists them.
    pub const ALL: [Outcome; 6] = [
        Outcome::First,
        Outcome::Replay,
        Outcome::InUse,
        Outcome::Reused,
        Outcome::Missing,
        Outcome::Invalid,
    ];

    /// The stable lowercase name used in metrics labels and storage.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::First => "first",
            Outcome::Replay => "replay",
            Outcome::InUse => "in_use",
            Outcome::Reused => "reused",
            Outcome::Missing => "missing",
            Outcome::Invalid => "invalid",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_header_is_missing() {
        assert_eq!(validate_key(None), Err(KeyError::Missing));
    }

    #[test]
    fn empty_key_is_invalid() {
        assert_eq!(validate_key(Some(b"")), Err(KeyError::Invalid));
    }

    #[test]
    fn key_of_255_is_accepted_and_256_refused() {
        assert!(validate_key(Some("k".repeat(255).as_bytes())).is_ok());
        assert_eq!(
            validate_key(Some("k".repeat(256).as_bytes())),
            Err(KeyError::Invalid)
        );
    }

    #[test]
    fn non_ascii_and_spaces_are_invalid() {
        assert_eq!(validate_key(Some("clé".as_bytes())), Err(KeyError::Invalid));
        assert_eq!(validate_key(Some(b"a b")), Err(KeyError::Invalid));
        assert_eq!(validate_key(Some(b"a\tb")), Err(KeyError::Invalid));
    }

    #[test]
    fn uuid_shaped_key_is_valid() {
        assert_eq!(
            validate_key(Some(b"8e03978e-40d5-43e8-bc93-6894a57f9324"))
                .unwrap()
                .len(),
            36
        );
    }
}

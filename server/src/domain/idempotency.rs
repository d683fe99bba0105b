//! The Idempotency-Key rules that need neither storage nor HTTP: which keys are valid, what
//! makes two requests the same (the fingerprint), what an existing key answers, and the
//! outcomes counted per route (DESIGN.md "Idempotency contract"; IETF
//! draft-ietf-httpapi-idempotency-key-header; Stripe's documented behaviour for keys up to 255
//! characters).
//!
//! Keys are scoped by (merchant, method, route template with its path ids); the fingerprint
//! of a request is the SHA-256 of its canonical JSON body. Keys are kept at least 24 hours
//! (`--key-retention-secs`), then purged; after that the business key (merchant,
//! merchant_order_id) still prevents a second payment.
//!
//! | case | answer |
//! |---|---|
//! | POST without `Idempotency-Key` | 400 `idempotency_key_missing` |
//! | key empty, longer than 255, not visible ASCII, or sent twice | 400 `idempotency_key_invalid` |
//! | first request | runs; a 2xx answer (status, body, `Content-Type`, `Location`) is stored |
//! | same key and fingerprint, completed | the stored answer byte for byte, `Idempotent-Replayed: true` |
//! | same key and fingerprint, still running | 409 `idempotency_key_in_use` + `Retry-After` |
//! | same key, other fingerprint or route | 422 `idempotency_key_reused`, nothing written |
//! | refused with a 4xx (no effect) | nothing kept; the key stays free |
//! | 5xx or crash after the claim | the claim keeps its lease; once it lapses a retry takes it over and resumes from the recovery point |
//!
//! The contract lives in four layers, each importing only those below it: these rules here;
//! the key's records and SQL in [`crate::store::keys`] (`store/keys_sql.rs`); the claim, the
//! recovery point and the stored answer in each merchant write's use case
//! ([`crate::service::write`]), with the outcome counts in [`crate::service::outcomes`] and
//! the purge in [`crate::worker::purge_keys`]; the header, fingerprint, replay and counting in
//! the HTTP layer ([`crate::api::idempotency`]).

use std::fmt;

use crate::domain::fingerprint::{fingerprint, sha256_hex};

/// The request header carrying the key (HTTP header names are case-insensitive).
pub const HEADER: &str = "idempotency-key";
/// The header marking a replayed answer, `Idempotent-Replayed: true` (also shown on the
/// console's key page beside the stored headers).
pub const REPLAYED: &str = "idempotent-replayed";

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

/// The key a request names, from the values of its `Idempotency-Key` headers in order:
/// exactly one valid value ([`validate_key`]). Two headers name no single key and are refused
/// like a malformed one rather than silently taking the first.
pub fn key_from_headers<'a>(
    mut values: impl Iterator<Item = &'a [u8]>,
) -> Result<String, KeyError> {
    let key = validate_key(values.next())?;
    match values.next() {
        Some(_) => Err(KeyError::Invalid),
        None => Ok(key),
    }
}

/// Where a stored key is in its life (`idempotency_keys.state`): defined in `converge-wire`,
/// where the console reads it.
pub use converge_wire::lifecycle::KeyState;

/// What a request whose key was claimed before gets, from the stored key's request (its
/// `fingerprint`, `scope` and `state`) and this request's: [`Outcome::Reused`] for another
/// body or route (422, nothing written), [`Outcome::Replay`] when the stored request is
/// `done` (its answer byte for byte), else [`Outcome::InUse`] (409, retry later).
pub fn existing_outcome(stored: (&str, &str, KeyState), fingerprint: &str, scope: &str) -> Outcome {
    let (stored_fingerprint, stored_scope, stored_state) = stored;
    if stored_fingerprint != fingerprint || stored_scope != scope {
        Outcome::Reused
    } else if stored_state == KeyState::Done {
        Outcome::Replay
    } else {
        Outcome::InUse
    }
}

/// Whether a request may take over a stored claim: the claim is still `running` but its lease
/// lapsed at or before `now` (its request crashed or gave up), and this is the same request
/// (fingerprint and scope). It then resumes from the claim's recovery point instead of
/// creating a second payment.
pub fn may_take_over(
    stored: (&str, &str, KeyState),
    lease_expires_at: Option<i64>,
    fingerprint: &str,
    scope: &str,
    now: i64,
) -> bool {
    let (_, _, stored_state) = stored;
    stored_state == KeyState::Running
        && lease_expires_at.unwrap_or(i64::MIN) <= now
        && existing_outcome(stored, fingerprint, scope) != Outcome::Reused
}

/// The `Retry-After` of an in-use answer, in whole seconds: until the holder's lease lapses
/// (`lease_expires_at`, epoch ms UTC; now when unknown), rounded up, at least 1 and at most 60.
pub fn in_use_retry_after_secs(lease_expires_at: Option<i64>, now: i64) -> u64 {
    let wait_ms = lease_expires_at.unwrap_or(now).saturating_sub(now).max(0);
    (wait_ms.saturating_add(999) / 1000).clamp(1, 60) as u64
}

/// The fingerprint of a request body, 64 lowercase hex characters: the SHA-256 of its
/// canonical JSON ([`fingerprint`]) when `json` is the body parsed, so key order and
/// whitespace do not make two requests differ; else the SHA-256 of the raw bytes. A body
/// that is not JSON still gets a fingerprint: its handler then refuses it and the claim is
/// released.
pub fn request_fingerprint(body: &[u8], json: Option<&serde_json::Value>) -> String {
    json.map_or_else(|| sha256_hex(body), fingerprint)
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
    fn a_second_header_makes_the_key_invalid() {
        let one: [&[u8]; 1] = [b"k-1"];
        assert_eq!(key_from_headers(one.into_iter()), Ok("k-1".to_owned()));
        let two: [&[u8]; 2] = [b"k-1", b"k-1"];
        assert_eq!(key_from_headers(two.into_iter()), Err(KeyError::Invalid));
        assert_eq!(key_from_headers(std::iter::empty()), Err(KeyError::Missing));
    }

    #[test]
    fn another_body_or_route_is_reused_before_done_or_running_is_asked() {
        assert_eq!(
            existing_outcome(
                ("fp", "POST /v1/payments", KeyState::Done),
                "fp",
                "POST /v1/payments"
            ),
            Outcome::Replay
        );
        assert_eq!(
            existing_outcome(
                ("fp", "POST /v1/payments", KeyState::Running),
                "fp",
                "POST /v1/payments"
            ),
            Outcome::InUse
        );
        assert_eq!(
            existing_outcome(
                ("fp", "POST /v1/payments", KeyState::Done),
                "other",
                "POST /v1/payments"
            ),
            Outcome::Reused
        );
        assert_eq!(
            existing_outcome(
                ("fp", "POST /v1/payments/p/refunds", KeyState::Running),
                "fp",
                "POST /v1/payments"
            ),
            Outcome::Reused
        );
    }

    #[test]
    fn only_the_same_request_takes_over_a_lapsed_claim() {
        let running = ("fp", "POST /v1/payments", KeyState::Running);
        assert!(may_take_over(
            running,
            Some(1_000),
            "fp",
            "POST /v1/payments",
            1_000
        ));
        assert!(!may_take_over(
            running,
            Some(1_001),
            "fp",
            "POST /v1/payments",
            1_000
        ));
        assert!(!may_take_over(
            running,
            Some(1_000),
            "other",
            "POST /v1/payments",
            1_000
        ));
        let done = ("fp", "POST /v1/payments", KeyState::Done);
        assert!(!may_take_over(done, None, "fp", "POST /v1/payments", 1_000));
    }

    #[test]
    fn retry_after_rounds_the_lease_up_between_one_and_sixty_seconds() {
        assert_eq!(in_use_retry_after_secs(Some(10_001), 9_000), 2);
        assert_eq!(in_use_retry_after_secs(Some(10_000), 9_000), 1);
        assert_eq!(in_use_retry_after_secs(Some(5_000), 9_000), 1);
        assert_eq!(in_use_retry_after_secs(None, 9_000), 1);
        assert_eq!(in_use_retry_after_secs(Some(i64::MAX), 0), 60);
    }

    #[test]
    fn a_body_that_is_not_json_is_fingerprinted_by_its_bytes() {
        let json: serde_json::Value = serde_json::from_slice(br#"{"b": 1, "a": 2}"#).unwrap();
        assert_eq!(
            request_fingerprint(br#"{"b": 1, "a": 2}"#, Some(&json)),
            request_fingerprint(br#"{"a":2,"b":1}"#, Some(&json))
        );
        assert_eq!(
            request_fingerprint(b"not json", None),
            sha256_hex(b"not json")
        );
        assert_ne!(
            request_fingerprint(b"not json", None),
            request_fingerprint(b"not json!", None)
        );
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

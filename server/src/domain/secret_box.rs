//! Secrets sealed at rest (issue 36, "no secret readable from the console"; OWASP
//! Cryptographic Storage Cheat Sheet, "encrypt sensitive data at rest with an authenticated
//! cipher, the key kept apart from the data").
//!
//! A webhook endpoint's signing secret and a stored Idempotency-Key answer that carries one are
//! written to the database sealed with ChaCha20-Poly1305 (RFC 8439, `ring`'s AEAD) under a
//! 32-byte key the database never holds: the operator's key file, or one converge makes on
//! first start in its data directory (`crate::config::SecretsSettings`). A database dump alone
//! yields no secret, and no console view can show one it never opens.
//!
//! Each sealed value names its purpose as associated data, so a sealed value copied into
//! another column does not open there, and starts with the first 4 bytes of the key's id, so a
//! value sealed under another key is told apart from a damaged one.

use std::borrow::Cow;

use base64::Engine;
use ring::aead::{Aad, CHACHA20_POLY1305, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use ring::rand::{SecureRandom, SystemRandom};
use sha2::{Digest, Sha256};

/// Bytes in a secrets key.
pub const KEY_BYTES: usize = 32;
/// Bytes of the key id a sealed value starts with.
const KID_BYTES: usize = 4;
/// The prefix of a sealed text value (a column that otherwise holds the plain text).
const TEXT_PREFIX: &str = "sealed:v1:";
/// The prefix of a sealed byte value. A NUL byte cannot begin a JSON answer or any text, so a
/// stored answer that starts with it is sealed and one that does not is as it was sent.
const BYTES_PREFIX: &[u8] = b"\0sealed:v1:";

/// What a sealed value is for: the associated data it is sealed with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `webhook_endpoints.secret` and `.previous_secret`.
    WebhookSecret,
    /// `idempotency_keys.response_body` of an answer that carries a secret.
    StoredAnswer,
    /// `merchant_connectors.secret_key` and `.webhook_secrets`: a merchant's PSP credentials.
    ConnectorSecret,
}

impl Purpose {
    fn aad(self) -> &'static [u8] {
        match self {
            Purpose::WebhookSecret => b"converge webhook_endpoints.secret",
            Purpose::StoredAnswer => b"converge idempotency_keys.response_body",
            Purpose::ConnectorSecret => b"converge merchant_connectors",
        }
    }
}

/// Why a sealed value did not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// Sealed under another key (its id, 8 hex digits, is named).
    #[error(
        "sealed under another secrets key (key id {0}); start with the key file that sealed it (--secrets-key-file)"
    )]
    OtherKey(String),
    /// The value is damaged, or was sealed for another purpose.
    #[error("a sealed secret is damaged or was moved from another column")]
    Damaged,
}

/// The key that seals secrets at rest, with its id. Cloning shares nothing mutable.
#[derive(Clone)]
pub struct SecretBox {
    key: [u8; KEY_BYTES],
    kid: [u8; KID_BYTES],
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself, even in a debug dump.
        write!(f, "SecretBox(key id {})", self.key_id())
    }
}

impl SecretBox {
    /// A box over `key` (32 bytes).
    pub fn new(key: [u8; KEY_BYTES]) -> Self {
        let digest = Sha256::new()
            .chain_update(b"converge secrets key id\0")
            .chain_update(key)
            .finalize();
        let mut kid = [0u8; KID_BYTES];
        kid.copy_from_slice(&digest[..KID_BYTES]);
        SecretBox { key, kid }
    }

    /// A box over a fresh random key, for tests and for processes that keep nothing sealed
    /// beyond their own life (an in-memory database).
    pub fn random() -> Self {
        SecretBox::new(random_key())
    }

    /// The key's id, 8 lowercase hex digits: what a sealed value names, never the key.
    pub fn key_id(&self) -> String {
        hex::encode(self.kid)
    }

    /// `text` sealed as `sealed:v1:` + base64url (no padding) of key id, nonce and ciphertext.
    pub fn seal_text(&self, purpose: Purpose, text: &str) -> String {
        let raw = self.seal_raw(purpose, text.as_bytes());
        format!(
            "{TEXT_PREFIX}{}",
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
        )
    }

    /// The plain text of a value from [`SecretBox::seal_text`]; a value without the prefix is
    /// plain text written before secrets were sealed, and is answered as it is.
    ///
    /// Errors: [`OpenError`].
    pub fn open_text<'a>(
        &self,
        purpose: Purpose,
        stored: &'a str,
    ) -> Result<Cow<'a, str>, OpenError> {
        let Some(b64) = stored.strip_prefix(TEXT_PREFIX) else {
            return Ok(Cow::Borrowed(stored));
        };
        let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(b64)
            .map_err(|_| OpenError::Damaged)?;
        let plain = self.open_raw(purpose, &raw)?;
        String::from_utf8(plain)
            .map(Cow::Owned)
            .map_err(|_| OpenError::Damaged)
    }

    /// `bytes` sealed behind a NUL-led prefix (see [`is_sealed_bytes`]).
    pub fn seal_bytes(&self, purpose: Purpose, bytes: &[u8]) -> Vec<u8> {
        let raw = self.seal_raw(purpose, bytes);
        let mut out = Vec::with_capacity(BYTES_PREFIX.len() + raw.len());
        out.extend_from_slice(BYTES_PREFIX);
        out.extend_from_slice(&raw);
        out
    }

    /// The plain bytes of a value from [`SecretBox::seal_bytes`]; unsealed bytes are answered
    /// as they are. Errors: [`OpenError`].
    pub fn open_bytes<'a>(
        &self,
        purpose: Purpose,
        stored: &'a [u8],
    ) -> Result<Cow<'a, [u8]>, OpenError> {
        match stored.strip_prefix(BYTES_PREFIX) {
            None => Ok(Cow::Borrowed(stored)),
            Some(raw) => self.open_raw(purpose, raw).map(Cow::Owned),
        }
    }

    fn cipher(&self) -> LessSafeKey {
        LessSafeKey::new(
            UnboundKey::new(&CHACHA20_POLY1305, &self.key).expect("a 32-byte ChaCha20 key"),
        )
    }

    /// key id ‖ nonce ‖ ciphertext ‖ tag. The nonce is random from the OS, never from the
    /// injected, seeded RNG: a seeded nonce would repeat across restarts under the same key.
    fn seal_raw(&self, purpose: Purpose, plain: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        SystemRandom::new()
            .fill(&mut nonce)
            .expect("the OS random source is available");
        let mut body = plain.to_vec();
        self.cipher()
            .seal_in_place_append_tag(
                Nonce::assume_unique_for_key(nonce),
                Aad::from(purpose.aad()),
                &mut body,
            )
            .expect("ChaCha20-Poly1305 seals any length this process holds");
        let mut out = Vec::with_capacity(KID_BYTES + NONCE_LEN + body.len());
        out.extend_from_slice(&self.kid);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&body);
        out
    }

    fn open_raw(&self, purpose: Purpose, raw: &[u8]) -> Result<Vec<u8>, OpenError> {
        if raw.len() < KID_BYTES + NONCE_LEN + CHACHA20_POLY1305.tag_len() {
            return Err(OpenError::Damaged);
        }
        let (kid, rest) = raw.split_at(KID_BYTES);
        if kid != self.kid {
            return Err(OpenError::OtherKey(hex::encode(kid)));
        }
        let (nonce, sealed) = rest.split_at(NONCE_LEN);
        let nonce = Nonce::try_assume_unique_for_key(nonce).map_err(|_| OpenError::Damaged)?;
        let mut body = sealed.to_vec();
        let plain = self
            .cipher()
            .open_in_place(nonce, Aad::from(purpose.aad()), &mut body)
            .map_err(|_| OpenError::Damaged)?;
        Ok(plain.to_vec())
    }
}

/// Whether stored bytes were sealed by [`SecretBox::seal_bytes`].
pub fn is_sealed_bytes(stored: &[u8]) -> bool {
    stored.starts_with(BYTES_PREFIX)
}

/// Whether a stored text value was sealed by [`SecretBox::seal_text`].
pub fn is_sealed_text(stored: &str) -> bool {
    stored.starts_with(TEXT_PREFIX)
}

/// 32 random bytes from the OS, for a new secrets key.
pub fn random_key() -> [u8; KEY_BYTES] {
    let mut key = [0u8; KEY_BYTES];
    SystemRandom::new()
        .fill(&mut key)
        .expect("the OS random source is available");
    key
}

/// A key file's text: the key in standard base64 and a newline.
pub fn key_to_text(key: &[u8; KEY_BYTES]) -> String {
    format!(
        "{}\n",
        base64::engine::general_purpose::STANDARD.encode(key)
    )
}

/// The key in a key file's text (standard base64 of 32 bytes, surrounding whitespace ignored).
/// Errors: one line saying what is wrong, never the text.
pub fn key_from_text(text: &str) -> Result<[u8; KEY_BYTES], String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|_| "a secrets key file holds the key in base64".to_string())?;
    <[u8; KEY_BYTES]>::try_from(bytes.as_slice()).map_err(|_| {
        format!(
            "a secrets key is {KEY_BYTES} bytes, this file holds {}",
            bytes.len()
        )
    })
}

/// The JSON text of a stored answer with every signing secret replaced by a placeholder, for
/// the console and the ops API, which never show one (issue 36): every string under a key
/// named `secret` and every string that starts with `whsec_`. Text that is not JSON but holds
/// `whsec_` is withheld whole.
pub fn redact_secrets(text: &str) -> String {
    match serde_json::from_str::<serde_json::Value>(text) {
        // Rewritten only when a secret was found: any other answer is shown as it was stored,
        // byte for byte (a re-serialised one would reorder its keys).
        Ok(mut v) => {
            if redact_value(&mut v, false) {
                serde_json::to_string(&v).unwrap_or_else(|_| REDACTED.to_string())
            } else {
                text.to_string()
            }
        }
        Err(_) if text.contains(crate::domain::webhooks::SECRET_PREFIX) => REDACTED.to_string(),
        Err(_) => text.to_string(),
    }
}

/// What the console shows in place of a secret.
pub const REDACTED: &str = "[redacted: shown to the merchant once, never in the console]";

fn redact_value(v: &mut serde_json::Value, under_secret_key: bool) -> bool {
    match v {
        serde_json::Value::String(s)
            if under_secret_key || s.starts_with(crate::domain::webhooks::SECRET_PREFIX) =>
        {
            *s = REDACTED.to_string();
            true
        }
        serde_json::Value::Array(items) => items
            .iter_mut()
            .fold(false, |found, i| redact_value(i, false) | found),
        serde_json::Value::Object(map) => map.iter_mut().fold(false, |found, (k, item)| {
            let secret_key = k.eq_ignore_ascii_case("secret") || k.ends_with("_secret");
            redact_value(item, secret_key) | found
        }),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_text_opens_to_itself_and_holds_no_plain_text() {
        let b = SecretBox::random();
        let sealed = b.seal_text(Purpose::WebhookSecret, "whsec_abc");
        assert!(is_sealed_text(&sealed));
        assert!(!sealed.contains("whsec_abc"));
        assert_eq!(
            b.open_text(Purpose::WebhookSecret, &sealed).unwrap(),
            "whsec_abc"
        );
        assert_ne!(
            sealed,
            b.seal_text(Purpose::WebhookSecret, "whsec_abc"),
            "fresh nonce"
        );
    }

    #[test]
    fn plain_values_written_before_sealing_open_as_they_are() {
        let b = SecretBox::random();
        assert_eq!(
            b.open_text(Purpose::WebhookSecret, "whsec_old").unwrap(),
            "whsec_old"
        );
        assert_eq!(
            &*b.open_bytes(Purpose::StoredAnswer, b"{\"a\":1}").unwrap(),
            b"{\"a\":1}"
        );
    }

    #[test]
    fn sealed_bytes_round_trip_and_are_marked() {
        let b = SecretBox::random();
        let sealed = b.seal_bytes(Purpose::StoredAnswer, b"{\"secret\":\"whsec_x\"}");
        assert!(is_sealed_bytes(&sealed));
        assert!(!sealed.windows(5).any(|w| w == b"whsec"));
        assert_eq!(
            &*b.open_bytes(Purpose::StoredAnswer, &sealed).unwrap(),
            b"{\"secret\":\"whsec_x\"}"
        );
    }

    #[test]
    fn another_key_is_named_and_a_moved_or_damaged_value_refused() {
        let a = SecretBox::random();
        let b = SecretBox::random();
        let sealed = a.seal_text(Purpose::WebhookSecret, "whsec_abc");
        assert_eq!(
            b.open_text(Purpose::WebhookSecret, &sealed),
            Err(OpenError::OtherKey(a.key_id()))
        );
        assert_eq!(
            a.open_text(Purpose::StoredAnswer, &sealed),
            Err(OpenError::Damaged)
        );
        let mut bytes = a.seal_bytes(Purpose::StoredAnswer, b"{}");
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        assert_eq!(
            a.open_bytes(Purpose::StoredAnswer, &bytes),
            Err(OpenError::Damaged)
        );
        assert_eq!(
            a.open_text(Purpose::WebhookSecret, "sealed:v1:!!"),
            Err(OpenError::Damaged)
        );
    }

    #[test]
    fn a_key_file_round_trips_and_a_short_one_is_one_line() {
        let key = random_key();
        assert_eq!(key_from_text(&key_to_text(&key)).unwrap(), key);
        let e = key_from_text("c2hvcnQ=").unwrap_err();
        assert!(e.contains("32 bytes") && !e.contains('\n'), "{e}");
        assert!(key_from_text("not base64!").is_err());
    }

    #[test]
    fn redaction_hides_every_secret_and_keeps_the_rest() {
        let body = r#"{"id":"we_1","url":"https://a.example/h","secret":"whsec_AAAA","nested":[{"other":"whsec_BBBB"}],"signing_secret":"x"}"#;
        let shown = redact_secrets(body);
        assert!(
            !shown.contains("whsec_AAAA") && !shown.contains("whsec_BBBB"),
            "{shown}"
        );
        assert!(!shown.contains("\"x\""), "{shown}");
        assert!(
            shown.contains("we_1") && shown.contains("https://a.example/h"),
            "{shown}"
        );
        assert_eq!(redact_secrets("not json whsec_C"), REDACTED);
        assert_eq!(redact_secrets("plain"), "plain");
        let untouched = r#"{"z":1,"a":"b"}"#;
        assert_eq!(
            redact_secrets(untouched),
            untouched,
            "no secret: the same bytes"
        );
    }
}

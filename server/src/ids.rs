//! Identifiers: `pay_`/`re_`/`ck_` + 24 lowercase hex characters (96 random bits), and
//! opaque tokens for leases.
//!
//! Below the store (which makes lease tokens) and the services alike; not in the domain,
//! which takes no randomness from the process.

use rand::Rng;

/// A new id with `prefix` and 96 random bits in hex, e.g. `pay_3f2a...`.
pub fn new_id(prefix: &str) -> String {
    let bytes: [u8; 12] = rand::rng().random();
    format!("{prefix}_{}", hex::encode(bytes))
}

/// A lease token: 128 random bits in hex.
pub fn new_token() -> String {
    let bytes: [u8; 16] = rand::rng().random();
    hex::encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_prefix_and_24_hex() {
        let id = new_id("pay");
        assert!(id.starts_with("pay_"));
        assert_eq!(id.len(), 28);
        assert_ne!(id, new_id("pay"));
    }
}

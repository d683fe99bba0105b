//! Request fingerprints: SHA-256 of the canonical JSON body (DESIGN.md "Idempotency
//! contract"; IETF draft-ietf-httpapi-idempotency-key-header §2.4).
//!
//! Canonical means object keys sorted by their UTF-8 bytes and no insignificant whitespace,
//! so `{"b":1, "a":2}` and `{"a":2,"b":1}` are the same request. The encoding is written out
//! here rather than trusting `serde_json`'s map order, which a feature flag elsewhere in the
//! dependency graph (`preserve_order`) would silently change.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Writes `value` as canonical JSON (sorted keys, compact).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Lowercase hex SHA-256 of the canonical JSON of `value` (64 characters).
pub fn fingerprint(value: &Value) -> String {
    sha256_hex(canonical_json(value).as_bytes())
}

/// Lowercase hex SHA-256 of `bytes` (64 characters).
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_change_the_fingerprint() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"x":"s","y":[1,2]},"b":1}"#).unwrap();
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
    }

    #[test]
    fn a_changed_value_changes_the_fingerprint() {
        assert_ne!(
            fingerprint(&json!({"amount": 100})),
            fingerprint(&json!({"amount": 101}))
        );
    }

    #[test]
    fn array_order_is_significant() {
        assert_ne!(fingerprint(&json!([1, 2])), fingerprint(&json!([2, 1])));
    }

    #[test]
    fn strings_are_escaped_in_canonical_form() {
        assert_eq!(canonical_json(&json!({"k\"": "a\nb"})), r#"{"k\"":"a\nb"}"#);
    }
}

//! The password rule's bounds (OWASP Authentication Cheat Sheet), plain numbers: the checker is
//! `service/password.rs`; the OpenAPI document's `minLength` and
//! `maxLength` (`schema.rs`) state the same bounds.

/// Shortest password accepted, in characters (OWASP: at least 8, longer without MFA).
pub const MIN_PASSWORD_CHARS: usize = 12;
/// Longest password accepted, in characters (argon2 takes any length; this bounds the work;
/// characters, as the OpenAPI document's `maxLength` counts them).
pub const MAX_PASSWORD_CHARS: usize = 256;

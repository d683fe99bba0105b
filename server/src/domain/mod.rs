//! The payment domain as plain Rust: no SQL, no HTTP, no global clock or RNG.
//!
//! Everything here is unit-tested without a database (DESIGN.md "Layout").

pub mod accounting;
pub mod actions;
pub mod audit;
pub mod backoff;
pub mod breaker;
pub mod bucket;
pub mod channel_health;
pub mod checkpoint;
pub mod clock;
pub mod fees;
pub mod fingerprint;
pub mod freeze;
pub mod idempotency;
pub mod jobs;
pub mod lanes;
pub mod ledger;
pub mod money;
pub mod netaddr;
pub mod password;
pub mod pause;
pub mod privilege;
pub mod ratelimit;
pub mod refunds;
pub mod roles;
pub mod secret_box;
pub mod state;
pub mod stuck;
pub mod throttle;
pub mod webhooks;

//! converge backend: the payment state machine, Idempotency-Key store, ledger, compensation
//! queue, merchant and ops APIs, and the sandbox channel. Knows nothing of the UI
//! (DESIGN.md "Layout": app -> server, never the reverse).

pub mod api;
pub mod channel;
pub mod config;
pub mod domain;
pub mod error;
pub mod http;
pub mod ids;
pub mod ops;
#[cfg(feature = "planted-bugs")]
pub mod planted;
pub mod schema;
pub mod service;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod verify;
pub mod worker;

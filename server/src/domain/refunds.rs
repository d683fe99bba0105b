//! A merchant refund's life (DESIGN.md "Refunds"): created `pending` with its job, then
//! `succeeded` when the channel refunded it or `failed` when the channel refused it. An
//! undecidable answer leaves it pending for its job; both ends are final.

/// A refund's status: defined with its names in the wire crate, which the console shares
/// (`converge_wire::lifecycle`).
pub use converge_wire::RefundStatus;

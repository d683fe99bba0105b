//! One integration-test binary for the server crate (one link instead of one per file).

#[macro_use]
mod support;

mod conformance;
mod payments_api;
mod sandbox;
mod scratch;

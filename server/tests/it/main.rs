//! One integration-test binary for the server crate (one link instead of one per file).

mod sandbox;

//! One integration-test binary for the server crate (one link instead of one per file).

// Helpers are shared by many modules; not every helper is used by every build of the suite.
#[macro_use]
#[allow(dead_code)]
mod support;

mod actions_audit;
mod architecture;
mod audit_checkpoints;
mod auth_hardening;
mod bad_input;
mod bulk_retry;
mod bulkheads;
mod callbacks;
mod channel_health;
mod concurrency;
mod conformance;
mod connector_conformance;
mod console_auth;
mod convergence;
mod error_pool_actions;
mod event_stream;
mod fees;
mod hold_actions;
mod holds;
mod idempotency;
mod lanes;
mod live;
mod lookup;
mod merchant_keys;
mod metrics;
mod openapi;
mod ops_console;
mod passkeys;
mod pauses;
mod payments_api;
mod privilege;
mod reconcile_holds;
mod refunds;
mod reversal_race;
mod sandbox;
mod sandbox_behaviours;
mod secrets_at_rest;
mod source_rules;
mod stripe_connector;
mod tcc;
mod trace_context;
mod transitions;
mod two_phase;
mod verify_holds;
mod verify_store;
mod webhooks;
mod work_queues;

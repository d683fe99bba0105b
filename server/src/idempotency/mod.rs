//! Idempotency-Keys on the merchant API, in one module: a client may retry any POST with the
//! same `Idempotency-Key` and get the first answer, never a second payment or refund
//! (DESIGN.md "Idempotency contract"; IETF draft-ietf-httpapi-idempotency-key-header;
//! Stripe's documented behaviour). zero2prod's `src/idempotency/` is the model.
//!
//! # The contract
//!
//! Keys are scoped by (merchant, method, route template with its path ids); the fingerprint
//! of a request is the SHA-256 of its canonical JSON body. Keys are kept at least 24 hours
//! (`--key-retention-secs`), then purged; after that the business key (merchant,
//! merchant_order_id) still prevents a second payment.
//!
//! | case | answer |
//! |---|---|
//! | POST without `Idempotency-Key` | 400 `idempotency_key_missing` |
//! | key empty, longer than 255, not visible ASCII, or sent twice | 400 `idempotency_key_invalid` |
//! | first request | runs; a 2xx answer (status, body, `Content-Type`, `Location`) is stored |
//! | same key and fingerprint, completed | the stored answer byte for byte, `Idempotent-Replayed: true` |
//! | same key and fingerprint, still running | 409 `idempotency_key_in_use` + `Retry-After` |
//! | same key, other fingerprint or route | 422 `idempotency_key_reused`, nothing written |
//! | refused with a 4xx (no effect) | the claim is deleted; the key stays free |
//! | 5xx or crash after the claim | the claim keeps its lease; once it lapses a retry takes it over and resumes from the recovery point |
//!
//! Every outcome (first, replay, in_use, reused, missing, invalid) is counted per route and
//! minute (the console's hit rates) and, for a stored key, per key (its page).
//!
//! # Claim, run, finish
//!
//! The claim is its own short transaction and never spans the channel call. A request holds
//! its claim through a lease token; every later write about the key (its recovery point, its
//! answer, its release) holds only while that token does, so a request whose lease lapsed and
//! was taken over cannot overwrite the new holder's work. The recovery point (`resource_id`)
//! is what the request created: a retry that takes over a lapsed claim drives that payment or
//! refund on instead of creating another.
//!
//! `POST /v1/payments` claims in two atomic phases (issue 15; Brandur Leach, "Implementing
//! Stripe-like Idempotency Keys in Postgres"): phase 1 claims the key, inserts the payment
//! with its submit job and sets the recovery point in one transaction
//! ([`Payments::open_payment`](crate::store::Payments::open_payment)); phase 2 applies the
//! channel's answer and stores the key's answer in one transaction
//! ([`KeyCompletion`](store::KeyCompletion)). The layer hands that route a
//! [`DeferredClaim`](layer::DeferredClaim) instead of claiming first. Other routes are claimed
//! by the layer before their handler runs ([`IdemContext`](layer::IdemContext)).
//!
//! # Parts, from plain to HTTP
//!
//! - [`key`]: the rules (valid keys, fingerprint, what an existing key answers, take-over,
//!   `Retry-After`, outcome names, header names). Plain Rust: no SQL, no HTTP.
//! - [`store`]: the [`KeyStore`](store::KeyStore) trait every store implements and its
//!   records (SQL for both backends in `store/keys_sql.rs`).
//! - [`outcomes`]: outcome counts kept in memory and written in batches.
//! - [`purge`]: the periodic deletion of expired keys.
//! - [`layer`]: the axum middleware over the merchant POST routes: claim, run, finish.

pub mod key;
pub mod layer;
pub mod outcomes;
pub mod purge;
pub mod store;

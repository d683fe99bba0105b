//! Storage of Idempotency-Keys: the [`KeyStore`] trait every [`Store`](crate::store::Store)
//! implements (a supertrait of it) and the records it reads and writes. Times are epoch
//! milliseconds UTC. Both backends run the same SQL (`store/keys_sql.rs`); the conformance
//! suite (tests/it/conformance.rs) runs every method against both.
//!
//! A key's life: [`claim_key`](KeyStore::claim_key) inserts it `running` under a lease token;
//! [`set_key_resource`](KeyStore::set_key_resource) records the recovery point (what the
//! request created); [`complete_key`](KeyStore::complete_key) stores the answer and marks it
//! `done`, or [`release_key`](KeyStore::release_key) deletes a claim whose request had no
//! effect. Every write after the claim holds only while the lease token does. A create's two
//! phases write the claim and the recovery point with the payment
//! ([`Payments::open_payment`](crate::store::Payments::open_payment)) and the answer with its last
//! transitions ([`KeyCompletion`]). [`purge_keys`](KeyStore::purge_keys) deletes keys past
//! their retention.

use async_trait::async_trait;

use crate::domain::idempotency::KeyState;
use crate::store::{Payment, StoreError};

/// The key operations of a store.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Claims a key: inserts it running, or takes over a claim with the same fingerprint whose
    /// lease lapsed (the crashed request's recovery point comes back), or returns the record
    /// another request holds or completed. Never writes when the fingerprint differs.
    async fn claim_key(&self, claim: &KeyClaim) -> Result<ClaimResult, StoreError>;
    /// [`claim_key`](Self::claim_key) that inserts a new claim with `resource_id` as its
    /// recovery point, in the same statement: a write whose first transaction is its own
    /// claims its key and records where a retry resumes at once, before that write (the
    /// merchant write path, `service/write.rs`). A lapsed claim taken over keeps the
    /// recovery point it had ([`ClaimStep::TakenOver`]).
    async fn claim_key_at(
        &self,
        claim: &KeyClaim,
        resource_id: &str,
    ) -> Result<ClaimStep, StoreError>;
    /// Records what the request created (recovery point); false when the lease was lost.
    async fn set_key_resource(&self, key: &KeyRef, resource_id: &str) -> Result<bool, StoreError>;
    /// Stores the response and marks the key done; false when the lease was lost.
    async fn complete_key(
        &self,
        key: &KeyRef,
        response: &StoredResponse,
    ) -> Result<bool, StoreError>;
    /// Deletes a claim whose request had no effect, so the key stays free.
    async fn release_key(&self, key: &KeyRef) -> Result<bool, StoreError>;
    /// Ends the lease of a running claim at `now` (epoch ms UTC), keeping its recovery point:
    /// its request failed and answered, so a retry with the same fingerprint may take it
    /// over at once. False when the lease was already lost (taken over, completed, released).
    async fn lapse_key(&self, key: &KeyRef, now: i64) -> Result<bool, StoreError>;
    /// Deletes keys whose retention ended before `now`, with the outcomes recorded for them
    /// ([`record_key_outcome`](Self::record_key_outcome)); returns how many keys.
    async fn purge_keys(&self, now: i64) -> Result<u64, StoreError>;
    /// Adds one to the count of `outcome` on `route` in the minute `minute` (epoch minutes).
    async fn count_outcome(
        &self,
        route: &str,
        outcome: &str,
        minute: i64,
    ) -> Result<(), StoreError> {
        let delta = RouteOutcomeDelta {
            route: route.into(),
            outcome: outcome.into(),
            minute,
            count: 1,
        };
        self.add_outcome_counts(&[delta], &[]).await
    }
    /// Counts one request with a stored key that got `outcome` at `now` (epoch ms UTC).
    async fn record_key_outcome(
        &self,
        merchant_id: i64,
        idem_key: &str,
        outcome: &str,
        now: i64,
    ) -> Result<(), StoreError> {
        let delta = KeyOutcomeDelta {
            merchant_id,
            idem_key: idem_key.into(),
            outcome: outcome.into(),
            count: 1,
            first_at: now,
            last_at: now,
        };
        self.add_outcome_counts(&[], &[delta]).await
    }
    /// Adds the per-route-and-minute and per-key outcome counts in one transaction (the
    /// in-memory counts of [`OutcomeBuffer`](crate::service::outcomes::OutcomeBuffer), flushed).
    async fn add_outcome_counts(
        &self,
        routes: &[RouteOutcomeDelta],
        keys: &[KeyOutcomeDelta],
    ) -> Result<(), StoreError>;
    /// Counts per (route, outcome) since `since_minute` (epoch minutes).
    async fn outcome_counts(
        &self,
        since_minute: i64,
    ) -> Result<Vec<(String, String, i64)>, StoreError>;
}

/// One stored Idempotency-Key (DESIGN.md "Idempotency contract").
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct KeyRecord {
    /// Owner.
    pub merchant_id: i64,
    /// Route template with its path ids, e.g. `POST /v1/payments/pay_x/refunds`.
    pub scope: String,
    /// The client's key.
    pub idem_key: String,
    /// Route template without ids, for counting.
    pub route: String,
    /// SHA-256 of the canonical body.
    pub fingerprint: String,
    /// `running` or `done`.
    #[sqlx(try_from = "String")]
    pub state: KeyState,
    /// Token of the request holding the claim.
    pub lease_token: Option<String>,
    /// When the claim lapses, epoch ms UTC.
    pub lease_expires_at: Option<i64>,
    /// The payment or refund this request created, once it did (recovery point).
    pub resource_id: Option<String>,
    /// Stored HTTP status.
    pub response_status: Option<i64>,
    /// Stored headers as a JSON array of [name, value].
    pub response_headers: Option<String>,
    /// Stored body bytes.
    pub response_body: Option<Vec<u8>>,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Purge time, epoch ms UTC.
    pub expires_at: i64,
}

/// A request to claim a key.
#[derive(Debug, Clone)]
pub struct KeyClaim {
    /// Owner.
    pub merchant_id: i64,
    /// Route template with path ids.
    pub scope: String,
    /// Client key.
    pub idem_key: String,
    /// Route template without ids.
    pub route: String,
    /// SHA-256 of the canonical body.
    pub fingerprint: String,
    /// Fresh token for this request.
    pub lease_token: String,
    /// Claim lapses at, epoch ms UTC.
    pub lease_expires_at: i64,
    /// Epoch ms UTC.
    pub now: i64,
    /// Purge after, epoch ms UTC.
    pub expires_at: i64,
}

/// Result of [`KeyStore::claim_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum ClaimResult {
    /// This request holds the key: a new claim (`resource_id` None) or a lapsed claim taken
    /// over (`resource_id` says what the crashed request had created, to resume it).
    Claimed {
        /// Recovery point.
        resource_id: Option<String>,
    },
    /// Another request holds or completed the key.
    Existing(KeyRecord),
}

impl KeyClaim {
    /// The claim as a reference to set its recovery point, complete or release it by.
    pub fn key_ref(&self) -> KeyRef {
        KeyRef {
            merchant_id: self.merchant_id,
            scope: self.scope.clone(),
            idem_key: self.idem_key.clone(),
            lease_token: self.lease_token.clone(),
        }
    }
}

/// How a claim made with its recovery point went ([`KeyStore::claim_key_at`], and inside a
/// use case's first transaction).
#[derive(Debug, Clone, PartialEq, Eq)]
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub enum ClaimStep {
    /// A new claim was inserted with the recovery point asked for.
    Inserted,
    /// A lapsed claim with the same request was taken over; its recovery point, if its
    /// request recorded one.
    TakenOver(Option<String>),
    /// Another request holds or completed the key.
    Existing(KeyRecord),
}

impl From<ClaimStep> for ClaimResult {
    fn from(step: ClaimStep) -> Self {
        match step {
            ClaimStep::Inserted => ClaimResult::Claimed { resource_id: None },
            ClaimStep::TakenOver(resource_id) => ClaimResult::Claimed { resource_id },
            ClaimStep::Existing(rec) => ClaimResult::Existing(rec),
        }
    }
}

/// Which key a call is about, and the token that must still hold it.
#[derive(Debug, Clone)]
pub struct KeyRef {
    /// Owner.
    pub merchant_id: i64,
    /// Route template with path ids.
    pub scope: String,
    /// Client key.
    pub idem_key: String,
    /// The claim's token.
    pub lease_token: String,
}

/// Requests on one route that got one Idempotency-Key outcome in one minute, to add to the
/// stored count ([`KeyStore::add_outcome_counts`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOutcomeDelta {
    /// `POST /v1/...` route template.
    pub route: String,
    /// [`Outcome::as_str`](crate::domain::idempotency::Outcome::as_str).
    pub outcome: String,
    /// Epoch minutes UTC.
    pub minute: i64,
    /// How many requests, > 0.
    pub count: i64,
}

/// Later requests with one stored key that got one outcome, to add to the key's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyOutcomeDelta {
    /// Owner of the key.
    pub merchant_id: i64,
    /// The client's key.
    pub idem_key: String,
    /// `replay`, `in_use` or `reused`.
    pub outcome: String,
    /// How many requests, > 0.
    pub count: i64,
    /// The first and last of them, epoch ms UTC.
    pub first_at: i64,
    /// See `first_at`.
    pub last_at: i64,
}

/// A stored response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredResponse {
    /// HTTP status.
    pub status: u16,
    /// Chosen headers, as [name, value] pairs.
    pub headers: Vec<(String, String)>,
    /// Body bytes, replayed byte for byte.
    pub body: Vec<u8>,
}

/// Completing an Idempotency-Key in the same transaction as the transitions that decide its
/// answer (phase 2 of a create, [`Payments::apply_transitions`](crate::store::Payments::apply_transitions)).
pub struct KeyCompletion<'a> {
    /// The claim to complete (only while its lease token still holds).
    pub key: &'a KeyRef,
    /// The answer to store, made from the payment as the last transition left it.
    pub render: &'a (dyn Fn(&Payment) -> StoredResponse + Send + Sync),
}

impl std::fmt::Debug for KeyCompletion<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyCompletion")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

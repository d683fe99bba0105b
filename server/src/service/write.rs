//! One write path for every merchant POST (DESIGN.md "Idempotency contract"; issue 33; Brandur
//! Leach, "Implementing Stripe-like Idempotency Keys in Postgres").
//!
//! Every merchant write is a use case that receives its request's Idempotency-Key claim
//! ([`KeyClaim`], made by the HTTP layer from the key, the route and the body's fingerprint)
//! and:
//!
//! 1. refuses what it can refuse before any write (bad input, a frozen merchant, another
//!    merchant's payment): nothing is claimed and the key stays free;
//! 2. in its first transaction, claims the key, records the recovery point (the id of what it
//!    creates) and makes its first write: [`Payments::open_payment`], [`Refunds::open_refund`],
//!    or [`KeyStore::claim_key_at`] before a write that is a transaction of its own;
//! 3. hands what that transaction found ([`Start`]) to [`Core::keyed_write`], the one place
//!    a write goes on from: another request's key ([`Written::Taken`], nothing written), this
//!    request's fresh write, or the recovery point of a crashed request whose lapsed claim this
//!    one took over (resumed: the same payment, refund or endpoint, never a second one).
//!    `keyed_write` stores a 2xx answer with the key (sealed at rest when the use case says it
//!    carries a secret, [`Seal::Secret`]), releases the key after a refusal
//!    ([`Refusal::is_refusal`]) and keeps it after a failure with its lease ended at once
//!    ([`KeyStore::lapse_key`]), so the client's retry resumes from the recovery point
//!    instead of waiting out `--key-lease-ms` (issue 40).
//!
//! The answer is data ([`StoredResponse`]: status, headers, JSON bytes), made by the use
//! case: the bytes stored are the bytes sent. The HTTP layer (`api/idempotency.rs`) only reads
//! the header, fingerprints the body, answers from another request's record (replay, 409 in
//! use, 422 reused) and counts the outcome; no list of routes tells it anything.
//!
//! # Adding a merchant POST
//!
//! Touch three places:
//! - **its use case**, a `Core` method in `service/` taking the merchant, `&KeyClaim` and the
//!   validated input, returning `Result<Written, E>` where `E: Refusal` says which errors
//!   are refusals (answered 4xx: the key is released). Its first transaction claims with the
//!   recovery point (`claim_key_at`, or a store method that claims inside its own
//!   transaction, as `open_refund` does); it passes the [`Start`] to [`Core::keyed_write`]
//!   with what a fresh write answers and how a recovery point is resumed;
//! - **its route** in `api/`: extract `Extension<KeyClaim>` and the body, validate, call the
//!   use case and answer with `api::idempotency::respond` (mapping `E` to its HTTP error);
//! - **its test** in `tests/it/`.

use serde::Serialize;

use super::Core;
pub use crate::store::keys::{ClaimResult, ClaimStep, KeyClaim, KeyRecord, KeyRef, StoredResponse};
#[cfg(doc)]
use crate::store::{KeyStore, Payments, Refunds};

use crate::domain::secret_box::Purpose;

/// What a merchant write did with its key.
#[derive(Debug)]
pub enum Written {
    /// The key is another request's (running, done, or used with another body or route):
    /// nothing was written, and the HTTP layer answers from this record.
    Taken(Box<KeyRecord>),
    /// This request's answer (2xx), stored with the key: sent as it is.
    Answered(StoredResponse),
}

/// What a use case's first transaction found.
#[derive(Debug)]
pub enum Start<T> {
    /// Another request's key: nothing was written.
    Taken(Box<KeyRecord>),
    /// The key is this request's and the first write is made: `T` is what it wrote.
    Fresh(T),
    /// A crashed request's lapsed claim, taken over: its recovery point, if it recorded one.
    Resume(Option<String>),
}

impl<T> Start<T> {
    /// The start of a write whose claim was made with its recovery point before the write
    /// itself ([`KeyStore::claim_key_at`]): `fresh` is the new claim's.
    pub fn of_claim(step: ClaimStep, fresh: T) -> Self {
        match step {
            ClaimStep::Inserted => Start::Fresh(fresh),
            ClaimStep::TakenOver(resource_id) => Start::Resume(resource_id),
            ClaimStep::Existing(rec) => Start::Taken(Box::new(rec)),
        }
    }

    /// The start of a claim that wrote nothing beside it ([`KeyStore::claim_key`], or a
    /// first transaction that found the key claimed): the key another request's, or a claim
    /// to go on from its recovery point (None when there is none: a new claim, or a crashed
    /// request's that recorded none).
    pub fn of_claim_only(claim: ClaimResult) -> Self {
        match claim {
            ClaimResult::Claimed { resource_id } => Start::Resume(resource_id),
            ClaimResult::Existing(rec) => Start::Taken(Box::new(rec)),
        }
    }
}

/// A use case's answer to a request whose key it holds.
#[derive(Debug)]
pub enum Answer {
    /// Stored with the key in the use case's last transaction (a create's phase 2).
    Stored(StoredResponse),
    /// To store with the key now.
    Ready(StoredResponse),
}

/// Whether a write's answer carries a secret (a webhook endpoint's signing secret): stored
/// sealed ([`crate::domain::secret_box`]), so a replay is the same bytes while the database,
/// and every console view of the key, hold none (issue 36).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seal {
    /// Stored as it is.
    Plain,
    /// Stored sealed.
    Secret,
}

/// The errors of a merchant write: which of them are refusals, answered with a 4xx because
/// the write had no effect (the key is released and stays free), and which are failures
/// (5xx: the claim keeps its lease, and a retry after it lapses resumes).
pub trait Refusal {
    /// True for a refusal.
    fn is_refusal(&self) -> bool;
}

impl Refusal for super::ServiceError {
    /// A value the database cannot hold (400 `invalid_request`) is refused before anything
    /// is written. A payment another writer kept moving (409 `payment_busy`) is not a
    /// refusal: it comes after the write's first transaction, so the key keeps its recovery
    /// point (released, a retry of a refund would make a second one) and a retry after the
    /// lease resumes.
    fn is_refusal(&self) -> bool {
        matches!(
            self,
            super::ServiceError::Store(crate::store::StoreError::Rejected(_))
        )
    }
}

/// A JSON answer as it is stored with a key and sent: the same bytes both ways
/// (`Content-Type: application/json`, the body as `serde_json` writes it).
pub fn json_answer(status: u16, body: &impl Serialize) -> StoredResponse {
    StoredResponse {
        status,
        headers: vec![("content-type".to_string(), "application/json".to_string())],
        body: serde_json::to_vec(body).unwrap_or_default(),
    }
}

impl Core {
    /// The one way a merchant write goes on from its first transaction (see the module
    /// docs): `start` taken answers from the other request's record; fresh runs `fresh` with
    /// what the first transaction wrote; a recovery point runs `resume` (with None when the
    /// crashed request recorded none). Then the answer is stored with the key (`seal`ed when
    /// it carries a secret), a refusal releases the key, and a failure keeps it with its
    /// lease ended ([`end_lease`](Self::end_lease)).
    ///
    /// A key whose lease was lost before its answer was stored keeps the other holder's
    /// answer: this request's answer is still sent (logged).
    pub async fn keyed_write<T, E: Refusal>(
        &self,
        claim: &KeyClaim,
        seal: Seal,
        start: Start<T>,
        fresh: impl AsyncFnOnce(T) -> Result<Answer, E>,
        resume: impl AsyncFnOnce(Option<String>) -> Result<Answer, E>,
    ) -> Result<Written, E> {
        let answer = match start {
            Start::Taken(rec) => return Ok(Written::Taken(rec)),
            Start::Fresh(first) => fresh(first).await,
            Start::Resume(resource_id) => resume(resource_id).await,
        };
        let key = claim.key_ref();
        match answer {
            Ok(Answer::Stored(stored)) => Ok(Written::Answered(stored)),
            Ok(Answer::Ready(answer)) => {
                self.store_answer(&key, &answer, seal).await;
                Ok(Written::Answered(answer))
            }
            Err(e) => {
                if e.is_refusal() {
                    self.release_key(&key).await;
                } else {
                    self.end_lease(key, claim.lease_expires_at).await;
                }
                Err(e)
            }
        }
    }

    /// Ends the lease of a failed write's claim (`key`, whose lease runs to `lapses_at`,
    /// epoch ms UTC), keeping its recovery point: nothing of this request runs once it has
    /// answered, so the lease guards nothing any more, and the client's retry (the same
    /// key) takes the claim over at once and resumes. Without this, a request cut by a
    /// database failover left its claim held, and every retry was answered 409 in use until
    /// `--key-lease-ms` had passed (30 s; issue 40's drill). The database is often why the
    /// write failed: while it does not answer, a task asks again with backoff until it does
    /// or the lease lapses by itself.
    pub(super) async fn end_lease(&self, key: KeyRef, lapses_at: i64) {
        let first = self.store.lapse_key(&key, self.clock.now_ms()).await;
        let Err(crate::store::StoreError::Unavailable(_)) = first else {
            if let Err(e) = first {
                tracing::warn!(error = %e, "could not end the lease of a failed write's key; it lapses by itself");
            }
            return;
        };
        let (store, clock) = (self.store.clone(), self.clock.clone());
        let backoff = crate::domain::backoff::Backoff {
            base_ms: 250,
            cap_ms: 4_000,
        };
        tokio::spawn(async move {
            let mut tries = 0;
            while clock.now_ms() < lapses_at {
                tries += 1;
                let wait = std::time::Duration::from_millis(backoff.ceiling_ms(tries));
                tokio::time::sleep(wait).await;
                if !matches!(
                    store.lapse_key(&key, clock.now_ms()).await,
                    Err(crate::store::StoreError::Unavailable(_))
                ) {
                    return;
                }
            }
        });
    }

    /// Records `resource_id` as the recovery point of a claim taken over from a crashed
    /// request that recorded none, before the write it names. False when this request's
    /// lease was lost meanwhile (another request holds the key now: 409 in use).
    pub async fn record_recovery_point(
        &self,
        claim: &KeyClaim,
        resource_id: &str,
    ) -> Result<bool, crate::store::StoreError> {
        self.store
            .set_key_resource(&claim.key_ref(), resource_id)
            .await
    }

    async fn store_answer(&self, key: &KeyRef, answer: &StoredResponse, seal: Seal) {
        let sealed;
        let stored = match seal {
            Seal::Plain => answer,
            Seal::Secret => {
                sealed = StoredResponse {
                    body: self.secrets.seal_bytes(Purpose::StoredAnswer, &answer.body),
                    ..answer.clone()
                };
                &sealed
            }
        };
        match self.store.complete_key(key, stored).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(key = %crate::telemetry::log_safe(&key.idem_key, 255), "lease lost before the response was stored")
            }
            Err(e) => {
                tracing::error!(error = %e, key = %key.idem_key, "could not store the response; a retry resumes")
            }
        }
    }

    async fn release_key(&self, key: &KeyRef) {
        if let Err(e) = self.store.release_key(key).await {
            tracing::warn!(error = %e, "could not release the claim of a refused request; it lapses with its lease");
        }
    }
}

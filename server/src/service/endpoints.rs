//! Merchants' webhook endpoint writes on the one write path (`service/write.rs`): registering
//! an endpoint and rotating its secret (DESIGN.md "Outbox, merchant notifications, event
//! stream"; Standard Webhooks for the secret form). The signing secret is shown once, in the
//! answer that creates or rotates it, and that answer is stored sealed with its key
//! ([`Seal::Secret`]), so a retry gets the same secret while the database holds none.

use serde::Serialize;
use utoipa::ToSchema;

use super::Core;
use super::actor::Actor;
use super::webhooks::{EndpointError, EndpointWithSecret, new_endpoint_id};
use super::write::{Answer, KeyClaim, Refusal, Seal, Start, Written, json_answer};
use crate::domain::clock::rfc3339;
use crate::domain::freeze::{self, NewWork};
use crate::domain::webhooks::Subscription;
use crate::store::{Merchant, WebhookEndpoint};

/// An endpoint as merchants see it; `secret` only when just created or rotated.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({
    "id": "we_5d1c9e0a7b3f2e8d4c6a1b0f", "url": "https://shop.example.com/converge/webhooks",
    "enabled_events": ["payment.succeeded", "refund.succeeded"], "description": "order service",
    "status": "enabled", "created_at": "2026-12-01T05:00:00.000Z", "updated_at": "2026-12-01T05:00:00.000Z",
    "secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
}))]
pub struct EndpointView {
    /// The endpoint's id (`we_` and hex digits).
    id: String,
    /// Where deliveries are POSTed.
    url: String,
    /// The subscribed event types, or `["*"]`.
    enabled_events: Vec<String>,
    /// Free text.
    description: String,
    /// `enabled`; `disabled` (by converge after `410 Gone` or days of failures, or by ops);
    /// `deleted` (kept for its history).
    #[schema(schema_with = crate::schema::endpoint_status_schema)]
    status: crate::store::EndpointStatus,
    /// Why it is disabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    disabled_reason: Option<String>,
    /// RFC 3339, UTC.
    #[schema(format = DateTime)]
    created_at: String,
    /// RFC 3339, UTC.
    #[schema(format = DateTime)]
    updated_at: String,
    /// The signing secret (Standard Webhooks, `whsec_` and base64): only in the answer that
    /// creates or rotates it, never again.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(pattern = "^whsec_[A-Za-z0-9+/=]+$")]
    secret: Option<String>,
    /// After a rotation: until when the previous secret keeps signing beside the new one.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(format = DateTime)]
    previous_secret_expires_at: Option<String>,
}

impl EndpointView {
    /// The view of `e`, with `secret` when it was just made.
    pub fn of(e: &WebhookEndpoint, secret: Option<String>) -> Self {
        EndpointView {
            id: e.id.clone(),
            url: e.url.clone(),
            enabled_events: Subscription::from_stored(&e.enabled_events).names(),
            description: e.description.clone(),
            status: e.status,
            disabled_reason: e.disabled_reason.clone(),
            created_at: rfc3339(e.created_at),
            updated_at: rfc3339(e.updated_at),
            secret,
            previous_secret_expires_at: e.previous_expires_at.map(rfc3339),
        }
    }
}

impl From<EndpointWithSecret> for EndpointView {
    fn from(e: EndpointWithSecret) -> Self {
        EndpointView::of(&e.endpoint, Some(e.secret))
    }
}

/// Why an endpoint write did not answer with the endpoint.
#[derive(Debug)]
pub enum EndpointWriteError {
    /// The merchant is frozen: 403 `merchant_frozen`.
    Frozen,
    /// This request's claim lapsed and another request holds the key now: 409
    /// `idempotency_key_in_use`.
    KeyLost,
    /// The endpoint's stored secret did not open (a wrong key file): 500.
    Secret(String),
    /// Refused (bad URL, events or description; not found; deleted) or failed (storage).
    Endpoint(EndpointError),
}

impl From<EndpointError> for EndpointWriteError {
    fn from(e: EndpointError) -> Self {
        EndpointWriteError::Endpoint(e)
    }
}

impl From<crate::store::StoreError> for EndpointWriteError {
    fn from(e: crate::store::StoreError) -> Self {
        EndpointWriteError::Endpoint(EndpointError::Store(e))
    }
}

impl Refusal for EndpointWriteError {
    fn is_refusal(&self) -> bool {
        match self {
            EndpointWriteError::Frozen | EndpointWriteError::KeyLost => true,
            EndpointWriteError::Secret(_) => false,
            EndpointWriteError::Endpoint(EndpointError::Store(e)) => {
                matches!(e, crate::store::StoreError::Rejected(_))
            }
            EndpointWriteError::Endpoint(_) => true,
        }
    }
}

/// A validated request to register an endpoint (the merchant API's body).
#[derive(Debug, Clone)]
pub struct EndpointInput {
    /// Where deliveries go.
    pub url: String,
    /// Event type names, or `["*"]`.
    pub enabled_events: Vec<String>,
    /// Free text.
    pub description: String,
}

impl Core {
    /// Registers a merchant's webhook endpoint under an Idempotency-Key: the key is claimed
    /// with the new endpoint's id as its recovery point, then the URL and events are checked
    /// (a refusal releases the key) and the endpoint is created with its secret. A retry
    /// after a crash answers with the endpoint the key recorded (never a second one), or
    /// creates it under that id. Answers 201 with the endpoint and its secret, stored sealed.
    pub async fn create_endpoint_keyed(
        &self,
        merchant: &Merchant,
        input: &EndpointInput,
        claim: &KeyClaim,
    ) -> Result<Written, EndpointWriteError> {
        if freeze::may_start(merchant.frozen, NewWork::Endpoints).is_err() {
            return Err(EndpointWriteError::Frozen);
        }
        let id = new_endpoint_id();
        let start = Start::of_claim(self.store.claim_key_at(claim, &id).await?, id);
        let actor = Actor::merchant(&merchant.name);
        let create = async |id: String| -> Result<Answer, EndpointWriteError> {
            // Checked before the write, so a refused request leaves the key free.
            self.check_endpoint_url(&input.url)
                .await
                .map_err(EndpointError::Url)?;
            Subscription::parse(&input.enabled_events).map_err(EndpointError::Events)?;
            let created = self
                .create_endpoint(
                    &id,
                    merchant.id,
                    &input.url,
                    &input.enabled_events,
                    &input.description,
                    &actor,
                )
                .await?;
            Ok(endpoint_answer(201, EndpointView::from(created)))
        };
        let resume = async |resource_id: Option<String>| -> Result<Answer, EndpointWriteError> {
            if let Some(id) = resource_id.as_deref()
                && let Some(e) = self.store.endpoint(id).await?
            {
                let secret = self
                    .endpoint_secret(&e.secret)
                    .map_err(|e| EndpointWriteError::Secret(e.to_string()))?;
                return Ok(endpoint_answer(201, EndpointView::of(&e, Some(secret))));
            }
            let id = match resource_id {
                Some(id) => id,
                None => {
                    let id = new_endpoint_id();
                    if !self.record_recovery_point(claim, &id).await? {
                        return Err(EndpointWriteError::KeyLost);
                    }
                    id
                }
            };
            create(id).await
        };
        self.keyed_write(
            claim,
            Seal::Secret,
            start,
            async |id| create(id).await,
            resume,
        )
        .await
    }

    /// Gives a merchant's endpoint a new secret under an Idempotency-Key, the previous one
    /// signing beside it for the overlap. The key records the rotation before it happens: a
    /// retry after a crash answers with the secret the crashed request made instead of
    /// rotating again, which would push the secret the merchant still holds out of the
    /// overlap. Answers 200 with the endpoint and its new secret, stored sealed.
    pub async fn rotate_secret_keyed(
        &self,
        merchant: &Merchant,
        id: &str,
        claim: &KeyClaim,
    ) -> Result<Written, EndpointWriteError> {
        if freeze::may_start(merchant.frozen, NewWork::Endpoints).is_err() {
            return Err(EndpointWriteError::Frozen);
        }
        let current = self.merchant_endpoint(merchant.id, id).await?;
        let start = Start::of_claim(self.store.claim_key_at(claim, id).await?, ());
        let rotate = async || -> Result<Answer, EndpointWriteError> {
            let rotated = self
                .rotate_endpoint_secret(id, &Actor::merchant(&merchant.name))
                .await?;
            Ok(endpoint_answer(200, EndpointView::from(rotated)))
        };
        let resume = async |resource_id: Option<String>| -> Result<Answer, EndpointWriteError> {
            if resource_id.is_some() {
                let secret = self
                    .endpoint_secret(&current.secret)
                    .map_err(|e| EndpointWriteError::Secret(e.to_string()))?;
                return Ok(endpoint_answer(
                    200,
                    EndpointView::of(&current, Some(secret)),
                ));
            }
            if !self.record_recovery_point(claim, id).await? {
                return Err(EndpointWriteError::KeyLost);
            }
            rotate().await
        };
        self.keyed_write(
            claim,
            Seal::Secret,
            start,
            async |()| rotate().await,
            resume,
        )
        .await
    }
}

fn endpoint_answer(status: u16, view: EndpointView) -> Answer {
    Answer::Ready(json_answer(status, &view))
}

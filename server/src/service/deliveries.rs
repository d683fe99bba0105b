//! What operators see of webhook deliveries and do about them (DESIGN.md "Webhooks": the ops
//! side; issue "Webhooks"): the endpoints with their health, a delivery with its attempts, a
//! payment's notifications, a redelivery, an endpoint's recovery (preview, then redeliver what
//! is still failed) and re-enabling. Every change is audited with its reason by the store
//! call that makes it. The console's JSON endpoints and server functions are thin adapters
//! over these; the role checks are theirs.

use std::collections::{BTreeSet, HashMap};

use super::actor::Actor;
use super::queries::{FilterError, parse_time};
use super::webhooks::EndpointError;
use super::{Core, ServiceError};
use crate::domain::breaker::BreakerView;
use crate::domain::webhooks::{EndpointStatus, Subscription};
use crate::store::{
    DeliveryFilter, DeliveryRow, DeliveryStatus, EndpointHealth, StoreError, WebhookEndpoint,
};
use converge_wire::{
    BreakerStatus, DeliveryDetail, EndpointRow, WebhooksOverview, webhooks::PaymentWebhooks,
};

/// Window of the endpoints' health figures: 24 h, ms.
pub const HEALTH_WINDOW_MS: i64 = 86_400_000;
/// Endpoint recoveries one user may run a minute.
pub const RECOVERIES_PER_MINUTE: usize = 5;
/// The longest reason of a webhook action, in characters.
pub const MAX_REASON: usize = 2000;
/// The most deliveries one recovery may select (the preview's length).
pub const MAX_RECOVERY: usize = 500;

/// Why an operator's webhook request was refused.
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// No such delivery or endpoint (names which).
    #[error("{0} not found")]
    NotFound(&'static str),
    /// The reason is blank or longer than [`MAX_REASON`] characters.
    #[error("a reason of 1 to {MAX_REASON} characters is required")]
    InvalidReason,
    /// No deliveries, or more than [`MAX_RECOVERY`], selected for a recovery.
    #[error("select 1 to {MAX_RECOVERY} deliveries from the preview")]
    InvalidSelection,
    /// `since` is not a time.
    #[error(transparent)]
    Filter(#[from] FilterError),
    /// The delivery is still pending: its job will attempt it.
    #[error("the delivery is still pending; its next attempt is scheduled")]
    Pending,
    /// Over [`RECOVERIES_PER_MINUTE`] for this user; retry after the seconds given.
    #[error("at most {RECOVERIES_PER_MINUTE} recoveries a minute; retry in {0} s")]
    RateLimited(u64),
    /// Re-enabling an endpoint that is enabled.
    #[error("the endpoint is already enabled")]
    AlreadyEnabled,
    /// Re-enabling an endpoint its merchant deleted.
    #[error("the merchant deleted this endpoint; it cannot be re-enabled")]
    EndpointDeleted,
    /// A use case below failed.
    #[error(transparent)]
    Service(#[from] ServiceError),
}

impl From<StoreError> for DeliveryError {
    fn from(e: StoreError) -> Self {
        DeliveryError::Service(e.into())
    }
}

/// A recovery's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovery {
    /// The deliveries put back.
    pub redelivered: Vec<i64>,
    /// The selected ones that were no longer failed deliveries of this endpoint since
    /// `since` (delivered or redelivered meanwhile, or never its).
    pub skipped: Vec<i64>,
}

/// The trimmed reason, or [`DeliveryError::InvalidReason`]. Characters of the reason as sent
/// (the documented `maxLength`), not bytes of the trimmed text: a 2000-character reason in
/// another script was refused.
fn reason(r: &str) -> Result<&str, DeliveryError> {
    if r.trim().is_empty() || r.chars().count() > MAX_REASON {
        return Err(DeliveryError::InvalidReason);
    }
    Ok(r.trim())
}

fn row(
    e: &WebhookEndpoint,
    merchant: &str,
    h: Option<&EndpointHealth>,
    breaker: BreakerView,
) -> EndpointRow {
    EndpointRow {
        id: e.id.clone(),
        merchant: merchant.to_string(),
        url: e.url.clone(),
        enabled_events: Subscription::from_stored(&e.enabled_events).names(),
        description: e.description.clone(),
        status: e.status,
        disabled_reason: e.disabled_reason.clone(),
        failing_since: e.failing_since,
        attempts_24h: h.map_or(0, |h| h.attempts),
        succeeded_24h: h.map_or(0, |h| h.succeeded),
        last_failure_at: h.and_then(|h| h.last_failure_at),
        last_failure: h.and_then(|h| h.last_failure.clone()),
        created_at: e.created_at,
        breaker: match breaker {
            BreakerView::Closed => BreakerStatus::Closed,
            BreakerView::Open(_) => BreakerStatus::Open,
            BreakerView::HalfOpen => BreakerStatus::HalfOpen,
        },
        breaker_open_until: match breaker {
            BreakerView::Open(until) => Some(until),
            _ => None,
        },
    }
}

impl Core {
    /// The endpoints of merchant `merchant_id` (every merchant's when None), newest first,
    /// each with its health over the last [`HEALTH_WINDOW_MS`] and its circuit breaker now.
    /// Errors: the store's.
    pub async fn endpoint_rows(
        &self,
        merchant_id: Option<i64>,
    ) -> Result<Vec<EndpointRow>, StoreError> {
        let now = self.clock.now_ms();
        let names = self.merchant_names().await?;
        let health: HashMap<String, EndpointHealth> = self
            .store
            .endpoint_health(now - HEALTH_WINDOW_MS)
            .await?
            .into_iter()
            .map(|h| (h.endpoint_id.clone(), h))
            .collect();
        let breakers: HashMap<String, BreakerView> = self
            .store
            .open_breakers()
            .await?
            .into_iter()
            .map(|(id, b)| (id, b.view(now)))
            .collect();
        Ok(self
            .store
            .endpoints(merchant_id)
            .await?
            .iter()
            .map(|e| {
                row(
                    e,
                    names.get(&e.merchant_id).map_or("?", String::as_str),
                    health.get(&e.id),
                    breakers.get(&e.id).copied().unwrap_or(BreakerView::Closed),
                )
            })
            .collect())
    }

    /// Every endpoint with its health over the last [`HEALTH_WINDOW_MS`], and the delivery
    /// backlog. Errors: the store's.
    pub async fn webhooks_overview(&self) -> Result<WebhooksOverview, StoreError> {
        let now = self.clock.now_ms();
        let endpoints = self.endpoint_rows(None).await?;
        let backlog = self.store.webhook_backlog(now - HEALTH_WINDOW_MS).await?;
        Ok(WebhooksOverview {
            endpoints,
            backlog,
            now,
        })
    }

    /// A payment's events (and its refunds') with their deliveries, newest first, at most
    /// 200: the console's payment page. Errors: the store's.
    pub async fn payment_webhooks(&self, payment_id: &str) -> Result<PaymentWebhooks, StoreError> {
        let events = self.store.payment_outbox_events(payment_id).await?;
        let deliveries = self
            .store
            .deliveries(
                &DeliveryFilter {
                    payment_id: Some(payment_id.to_string()),
                    ..Default::default()
                },
                200,
            )
            .await?;
        Ok(PaymentWebhooks { events, deliveries })
    }

    /// A delivery with its attempts and its event. Errors: `NotFound("delivery")`; the
    /// store's.
    pub async fn delivery_detail(&self, id: i64) -> Result<DeliveryDetail, DeliveryError> {
        let d = self
            .store
            .delivery(id)
            .await?
            .ok_or(DeliveryError::NotFound("delivery"))?;
        let attempts = self.store.delivery_attempts(id).await?;
        let event = self.store.outbox_event(&d.event_id).await?;
        Ok(DeliveryDetail {
            delivery: d,
            attempts,
            event,
        })
    }

    /// Puts delivery `id` back for a new round of attempts now, audited with `why` on target
    /// `webhook_delivery:<id>`. Returns the ids put back. Errors: `InvalidReason`,
    /// `NotFound("delivery")`, `Pending` (its job will attempt it), the store's.
    pub async fn redeliver_one(
        &self,
        who: &Actor,
        id: i64,
        why: &str,
    ) -> Result<Vec<i64>, DeliveryError> {
        let why = reason(why)?;
        let d = self
            .store
            .delivery(id)
            .await?
            .ok_or(DeliveryError::NotFound("delivery"))?;
        if d.status == DeliveryStatus::Pending {
            return Err(DeliveryError::Pending);
        }
        Ok(self
            .redeliver(&[id], why, &format!("webhook_delivery:{id}"), who)
            .await?)
    }

    /// The failed deliveries of `endpoint` since `since` (RFC 3339 or `YYYY-MM-DD`, UTC):
    /// what a recovery would put back, with `since` as epoch ms. Errors:
    /// `NotFound("webhook endpoint")`, `Filter(InvalidTime)`, the store's.
    pub async fn recovery_preview(
        &self,
        endpoint: &str,
        since: &str,
    ) -> Result<(i64, Vec<DeliveryRow>), DeliveryError> {
        self.store
            .endpoint(endpoint)
            .await?
            .ok_or(DeliveryError::NotFound("webhook endpoint"))?;
        let since = parse_time("since", since)?;
        Ok((since, self.recovery_candidates(endpoint, since).await?))
    }

    /// Redelivers the previewed deliveries `ids` that are still failed deliveries of `endpoint`
    /// since `since` (checked again here), audited once with `why` on target
    /// `webhook_endpoint:<id>`, and names the rest. At most [`RECOVERIES_PER_MINUTE`] per user
    /// ([`super::console::ConsoleLimiters::recover`]); every check of the request comes first, so a
    /// malformed one does not spend one. Errors: `InvalidReason`, `InvalidSelection`,
    /// `Filter(InvalidTime)`, `RateLimited`, the store's.
    pub async fn recover_endpoint(
        &self,
        who: &Actor,
        endpoint: &str,
        since: &str,
        ids: &[i64],
        why: &str,
    ) -> Result<Recovery, DeliveryError> {
        let why = reason(why)?;
        if ids.is_empty() || ids.len() > MAX_RECOVERY {
            return Err(DeliveryError::InvalidSelection);
        }
        let since = parse_time("since", since)?;
        if let Some(secs) = self.spend_recover_allowance(&who.username) {
            return Err(DeliveryError::RateLimited(secs));
        }
        let still: BTreeSet<i64> = self
            .recovery_candidates(endpoint, since)
            .await?
            .into_iter()
            .map(|d| d.id)
            .collect();
        let (keep, skipped): (Vec<i64>, Vec<i64>) = ids.iter().partition(|id| still.contains(id));
        let redelivered = if keep.is_empty() {
            vec![]
        } else {
            self.redeliver(&keep, why, &format!("webhook_endpoint:{endpoint}"), who)
                .await?
        };
        Ok(Recovery {
            redelivered,
            skipped,
        })
    }

    /// Re-enables disabled endpoint `endpoint`, audited with `why`; returns its new status.
    /// Errors: `InvalidReason`, `NotFound("webhook endpoint")`, `AlreadyEnabled`,
    /// `EndpointDeleted`, the store's.
    pub async fn enable_endpoint(
        &self,
        who: &Actor,
        endpoint: &str,
        why: &str,
    ) -> Result<EndpointStatus, DeliveryError> {
        let why = reason(why)?;
        match self.set_endpoint_enabled(endpoint, true, why, who).await {
            Ok(true) => Ok(EndpointStatus::Enabled),
            Ok(false) => Err(DeliveryError::AlreadyEnabled),
            Err(EndpointError::NotFound) => Err(DeliveryError::NotFound("webhook endpoint")),
            Err(EndpointError::Deleted) => Err(DeliveryError::EndpointDeleted),
            Err(EndpointError::Store(e)) => Err(e.into()),
            // Re-enabling changes neither URL, events nor description.
            Err(
                e @ (EndpointError::Url(_)
                | EndpointError::Events(_)
                | EndpointError::Description
                | EndpointError::Limit(_)),
            ) => Err(StoreError::Corrupt(e.to_string()).into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_counts_characters_as_sent_and_is_trimmed() {
        assert!(matches!(reason("  "), Err(DeliveryError::InvalidReason)));
        assert_eq!(reason(" lost it ").unwrap(), "lost it");
        let long = "é".repeat(MAX_REASON);
        assert!(reason(&long).is_ok());
        let longer = "é".repeat(MAX_REASON + 1);
        assert!(matches!(reason(&longer), Err(DeliveryError::InvalidReason)));
    }
}

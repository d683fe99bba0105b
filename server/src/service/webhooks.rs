//! Merchant notifications: webhook endpoints and the delivery of outbox events to them
//! (DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §6.3 and §11.1 step 6:
//! best-effort notification with backoff, an error-pool item when it gives up, a way to
//! resend; the Standard Webhooks specification for headers and signatures).
//!
//! The outbox rows and their deliveries are written by the transitions themselves (store);
//! this module registers endpoints, makes one attempt per `webhook` job and records it, and
//! puts deliveries back for ops. Every address an attempt connects to is checked after
//! resolution ([`GuardedResolver`]), so a name that resolved to a public address at
//! registration cannot be re-pointed inside the network (DNS rebinding).

use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

use super::actor::Actor;
use super::delivery_gate::Passage;
use super::resolve::Step;
use super::{Core, ServiceError, ids};
use crate::domain::clock::rfc3339;
use crate::domain::secret_box::{OpenError, Purpose};
use crate::domain::webhooks::{
    self as wh, AttemptVerdict, RetrySchedule, Subscription, UrlRefusal,
};
use crate::store::{
    AttemptResult, DeliveryRow, DeliveryStatus, EndpointStatus, LeasedJob, NewEndpoint,
    WebhookEndpoint,
};

/// A failed attempt's reason, the endpoint's `Retry-After` (ms) and its HTTP status, if any.
struct Failure {
    reason: String,
    not_before_ms: Option<u64>,
    status: Option<u16>,
}

/// Bytes of an endpoint's answer that are read before the connection is dropped; the first
/// [`STORED_RESPONSE_BYTES`] are kept with the attempt.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Bytes of an endpoint's answer kept with the attempt (the first KiB).
pub const STORED_RESPONSE_BYTES: usize = 1024;
/// Longest endpoint description, in characters.
pub const MAX_DESCRIPTION: usize = 1024;

/// The default of [`WebhookSettings::max_endpoints_per_merchant`].
pub const DEFAULT_MAX_ENDPOINTS: usize = 16;

/// The default of [`WebhookSettings::inflight_per_endpoint`].
pub const DEFAULT_INFLIGHT_PER_ENDPOINT: usize = 4;

/// The default of [`WebhookSettings::inflight_per_merchant`]: half the delivery lane's
/// default slots (8), so another merchant's deliveries always find free slots. At 8 (the
/// lane's every slot) one merchant's 16 hanging endpoints held the whole lane, and another
/// merchant's deliveries waited a minute (BENCHMARKS.md "Bulkheads", noisy neighbour).
pub const DEFAULT_INFLIGHT_PER_MERCHANT: usize = 4;

/// What delivery needs from the process settings.
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Waits before each attempt.
    pub schedule: RetrySchedule,
    /// One attempt's time limit.
    pub timeout: Duration,
    /// Internal addresses allowed (tests, local development).
    pub allow_private: bool,
    /// How long a rotated-out secret keeps signing, ms.
    pub secret_overlap_ms: i64,
    /// A run of failures this long disables the endpoint, ms.
    pub disable_after_ms: i64,
    /// The most live (not deleted) endpoints one merchant may have
    /// (`--max-endpoints-per-merchant`): one merchant's many endpoints share the delivery
    /// workers with every other merchant's (issue 37, bulkheads).
    pub max_endpoints_per_merchant: usize,
    /// Attempts one endpoint may have in flight in this process
    /// (`--webhook-inflight-per-endpoint`); a delivery beyond it waits without spending an
    /// attempt ([`super::delivery_gate`]).
    pub inflight_per_endpoint: usize,
    /// Attempts one merchant's endpoints together may have in flight in this process
    /// (`--webhook-inflight-per-merchant`): a merchant with many hanging endpoints holds at
    /// most this many delivery workers.
    pub inflight_per_merchant: usize,
    /// The endpoints' circuit breaker ([`crate::domain::breaker`]).
    pub breaker: crate::domain::breaker::BreakerPolicy,
    /// Seed of the retry schedule's jitter (0: from the OS), the workers' `--seed`: the
    /// injected-RNG contract (DESIGN.md "Architecture": time and randomness are injected and
    /// seeded, so a run with the same seed waits the same times).
    pub jitter_seed: u64,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        WebhookSettings {
            schedule: RetrySchedule::default(),
            timeout: Duration::from_secs(15),
            allow_private: false,
            secret_overlap_ms: 86_400_000,
            disable_after_ms: 5 * 86_400_000,
            max_endpoints_per_merchant: DEFAULT_MAX_ENDPOINTS,
            inflight_per_endpoint: DEFAULT_INFLIGHT_PER_ENDPOINT,
            inflight_per_merchant: DEFAULT_INFLIGHT_PER_MERCHANT,
            breaker: crate::domain::breaker::BreakerPolicy::default(),
            jitter_seed: 0,
        }
    }
}

/// The HTTP client of deliveries, built once per process: no redirects followed, no proxy,
/// the attempt's time limit, and every resolved address checked.
#[derive(Clone)]
pub struct Notifier {
    /// Settings.
    pub settings: WebhookSettings,
    /// Makes each attempt's POST: HTTP ([`HttpSender`]) unless replaced
    /// ([`Notifier::with_sender`]).
    sender: Arc<dyn WebhookSender>,
    /// The retry schedule's jitter, seeded from `settings.jitter_seed` (a clone draws from
    /// the same stream).
    jitter: Arc<Mutex<StdRng>>,
    /// The attempts in flight per endpoint in this process (a clone counts the same ones).
    pub inflight: Arc<super::delivery_gate::InFlight>,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier with `settings`.
    pub fn new(settings: WebhookSettings) -> Self {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            // Never a proxy, whatever HTTP_PROXY/HTTPS_PROXY/ALL_PROXY say: through a proxy the
            // target's name is resolved (and connected to) by the proxy, so the resolver below
            // would check only the proxy's address and the webhook could reach inside the
            // network (issue 36; OWASP SSRF Prevention: validate the address actually used).
            .no_proxy()
            .timeout(settings.timeout)
            .connect_timeout(settings.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("converge-webhooks/", env!("CARGO_PKG_VERSION")))
            .dns_resolver(Arc::new(GuardedResolver {
                allow_private: settings.allow_private,
            }))
            .build()
            .unwrap_or_else(|_| reqwest::Client::new());
        let jitter = Arc::new(Mutex::new(if settings.jitter_seed == 0 {
            StdRng::from_os_rng()
        } else {
            StdRng::seed_from_u64(settings.jitter_seed)
        }));
        Notifier {
            sender: Arc::new(HttpSender {
                client,
                timeout: settings.timeout,
            }),
            settings,
            jitter,
            inflight: Arc::default(),
        }
    }

    /// This notifier with its POSTs made by `sender` instead of HTTP: the one seam of a
    /// delivery's network, for the deterministic simulator (issue 39), whose endpoints
    /// answer from the seed.
    pub fn with_sender(mut self, sender: Arc<dyn WebhookSender>) -> Self {
        self.sender = sender;
        self
    }

    /// The next jitter draw for the retry schedule, uniform in [0, 1)
    /// (`RetrySchedule::delay_ms`'s `unit`).
    pub fn jitter_unit(&self) -> f64 {
        self.jitter
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .random()
    }
}

impl Default for Notifier {
    fn default() -> Self {
        Notifier::new(WebhookSettings::default())
    }
}

/// What an endpoint answered one POST: its HTTP status, its `Retry-After` header, the first
/// [`MAX_RESPONSE_BYTES`] of its body, and why reading the body stopped early, if it did.
#[derive(Debug, Clone, Default)]
pub struct PostAnswer {
    /// The HTTP status.
    pub status: u16,
    /// The `Retry-After` header's value, as sent.
    pub retry_after: Option<String>,
    /// The body's first bytes (at most [`MAX_RESPONSE_BYTES`]).
    pub body: Vec<u8>,
    /// Reading the body failed after the status came (one line).
    pub error: Option<String>,
}

/// Makes one delivery attempt's POST (the Standard Webhooks headers are given): the seam
/// between delivery and the network, so the simulator's endpoints can answer from the seed
/// (issue 39: "where the code needs a seam to be simulated, add the seam in the one place
/// that does it").
#[async_trait::async_trait]
pub trait WebhookSender: Send + Sync {
    /// POSTs `body` (JSON) with `headers` to `url`. Errors: no answer came (refused,
    /// timed out, an internal address), one line.
    async fn post(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: String,
    ) -> Result<PostAnswer, String>;
}

/// The shipping [`WebhookSender`]: the guarded HTTP client ([`Notifier::new`]).
struct HttpSender {
    client: reqwest::Client,
    timeout: Duration,
}

#[async_trait::async_trait]
impl WebhookSender for HttpSender {
    async fn post(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: String,
    ) -> Result<PostAnswer, String> {
        let mut req = self.client.post(url);
        for (name, value) in headers {
            req = req.header(*name, value);
        }
        let mut resp = req.body(body).send().await.map_err(|e| {
            if e.is_timeout() {
                format!("timed out after {} ms", self.timeout.as_millis())
            } else {
                error_chain(&e)
            }
        })?;
        let mut answer = PostAnswer {
            status: resp.status().as_u16(),
            retry_after: resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            ..PostAnswer::default()
        };
        loop {
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    answer.body.extend_from_slice(&chunk);
                    if answer.body.len() >= MAX_RESPONSE_BYTES {
                        break; // dropping the response closes the connection
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    answer.error = Some(format!("reading the answer failed: {}", error_chain(&e)));
                    break;
                }
            }
        }
        Ok(answer)
    }
}

/// Resolves host names for deliveries and refuses the answer when any address is internal
/// (OWASP SSRF Prevention: validate after resolution, on the address actually used).
struct GuardedResolver {
    allow_private: bool,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let allow = self.allow_private;
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((name.as_str(), 0)).await?.collect();
            let ips: Vec<IpAddr> = addrs.iter().map(SocketAddr::ip).collect();
            wh::check_addresses(&ips, allow).map_err(|e| Box::new(e) as Box<_>)?;
            Ok(Box::new(addrs.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Why an endpoint cannot be registered or changed.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The URL is refused.
    #[error(transparent)]
    Url(#[from] UrlRefusal),
    /// `enabled_events` is empty or names an unknown type.
    #[error("{0}")]
    Events(String),
    /// The description is too long or holds control characters.
    #[error("description must be at most {MAX_DESCRIPTION} characters without control characters")]
    Description,
    /// The merchant already has this many live (not deleted) endpoints, the most one
    /// merchant may have ([`WebhookSettings::max_endpoints_per_merchant`]).
    #[error("a merchant may have at most {0} webhook endpoints; delete one first")]
    Limit(usize),
    /// No such endpoint for this merchant.
    #[error("webhook endpoint not found")]
    NotFound,
    /// The endpoint was deleted.
    #[error("webhook endpoint was deleted")]
    Deleted,
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// An endpoint with the secret shown once (creation, rotation).
#[derive(Debug, Clone)]
pub struct EndpointWithSecret {
    /// The endpoint.
    pub endpoint: WebhookEndpoint,
    /// `whsec_...`.
    pub secret: String,
}

/// The state of an endpoint an audit record shows (never the secret).
pub fn endpoint_state(e: &WebhookEndpoint) -> String {
    json!({
        "url": e.url, "status": e.status, "enabled_events": Subscription::from_stored(&e.enabled_events).names(),
        "disabled_reason": e.disabled_reason, "merchant_id": e.merchant_id,
    })
    .to_string()
}

/// A new endpoint id, `we_` + 24 hex.
pub fn new_endpoint_id() -> String {
    ids::new_id("we")
}

fn new_secret() -> String {
    wh::format_secret(&rand::rng().random::<[u8; wh::SECRET_BYTES]>())
}

impl Core {
    /// Checks an endpoint URL's form and, unless internal addresses are allowed, that every
    /// address its host resolves to is public. Errors: the [`UrlRefusal`].
    pub async fn check_endpoint_url(&self, raw: &str) -> Result<url::Url, UrlRefusal> {
        let u = wh::check_url_form(raw)?;
        if self.notifier.settings.allow_private {
            return Ok(u);
        }
        let host = u.host_str().unwrap_or_default().trim_matches(['[', ']']);
        let ips: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => tokio::net::lookup_host((host, u.port_or_known_default().unwrap_or(443)))
                .await
                .map_err(|_| UrlRefusal::Unresolvable(host.to_string()))?
                .map(|a| a.ip())
                .collect(),
        };
        if ips.is_empty() {
            return Err(UrlRefusal::Unresolvable(host.to_string()));
        }
        wh::check_addresses(&ips, false)?;
        Ok(u)
    }

    /// Registers endpoint `id` (`we_...`, see [`new_endpoint_id`]) for `merchant_id` with a
    /// new secret, audited in the same transaction. The one place the per-merchant cap
    /// ([`WebhookSettings::max_endpoints_per_merchant`]) is checked, so the merchant API and
    /// the CLI refuse alike; the store counts and inserts in one step, so creates racing for
    /// the last place never pass together. Errors: [`EndpointError`] (`Limit` beyond the
    /// cap).
    pub async fn create_endpoint(
        &self,
        id: &str,
        merchant_id: i64,
        url: &str,
        enabled_events: &[String],
        description: &str,
        actor: &Actor,
    ) -> Result<EndpointWithSecret, EndpointError> {
        let url = self.check_endpoint_url(url).await?;
        let subscription = Subscription::parse(enabled_events).map_err(EndpointError::Events)?;
        // Characters, not bytes: the documented `maxLength` counts characters.
        if description.chars().count() > MAX_DESCRIPTION
            || description.chars().any(char::is_control)
        {
            return Err(EndpointError::Description);
        }
        let cap = self.notifier.settings.max_endpoints_per_merchant;
        let now = self.clock.now_ms();
        let secret = new_secret();
        let new = NewEndpoint {
            id: id.into(),
            merchant_id,
            url: url.to_string(),
            description: description.into(),
            enabled_events: subscription.to_stored(),
            secret: self.secrets.seal_text(Purpose::WebhookSecret, &secret),
            now,
            max_live: Some(cap),
        };
        let after = json!({"url": new.url, "enabled_events": subscription.names(), "merchant_id": merchant_id});
        let audit = actor.entry(
            now,
            "webhook_endpoint_created",
            &format!("webhook_endpoint:{}", new.id),
            "",
            String::new(),
            after.to_string(),
        );
        let endpoint = self
            .store
            .create_endpoint(&new, Some(&audit))
            .await?
            .ok_or(EndpointError::Limit(cap))?;
        Ok(EndpointWithSecret { endpoint, secret })
    }

    /// The endpoint if it belongs to `merchant_id` (another merchant's is not found).
    pub async fn merchant_endpoint(
        &self,
        merchant_id: i64,
        id: &str,
    ) -> Result<WebhookEndpoint, EndpointError> {
        match self.store.endpoint(id).await? {
            Some(e) if e.merchant_id == merchant_id => Ok(e),
            _ => Err(EndpointError::NotFound),
        }
    }

    /// Deletes (by status: history stays) a merchant's endpoint; its pending deliveries are
    /// abandoned when their jobs next run. Idempotent.
    pub async fn delete_endpoint(
        &self,
        merchant_id: i64,
        id: &str,
        actor: &Actor,
    ) -> Result<WebhookEndpoint, EndpointError> {
        let before = self.merchant_endpoint(merchant_id, id).await?;
        let now = self.clock.now_ms();
        let mut after = before.clone();
        after.status = EndpointStatus::Deleted;
        let audit = actor.entry(
            now,
            "webhook_endpoint_deleted",
            &format!("webhook_endpoint:{id}"),
            "",
            endpoint_state(&before),
            endpoint_state(&after),
        );
        self.store
            .set_endpoint_status(
                id,
                EndpointStatus::Deleted,
                Some("deleted by the merchant"),
                now,
                Some(&audit),
            )
            .await?;
        Ok(self.store.endpoint(id).await?.unwrap_or(after))
    }

    /// Disables (`enabled = false`) or re-enables an endpoint; re-enabling ends its failure
    /// run. `reason` is recorded on the endpoint and in the audit record. False when it was
    /// already in that state. Errors: not found, deleted.
    pub async fn set_endpoint_enabled(
        &self,
        id: &str,
        enabled: bool,
        reason: &str,
        actor: &Actor,
    ) -> Result<bool, EndpointError> {
        let before = self
            .store
            .endpoint(id)
            .await?
            .ok_or(EndpointError::NotFound)?;
        if before.status == EndpointStatus::Deleted {
            return Err(EndpointError::Deleted);
        }
        let now = self.clock.now_ms();
        let status = if enabled {
            EndpointStatus::Enabled
        } else {
            EndpointStatus::Disabled
        };
        let mut after = before.clone();
        after.status = status;
        after.disabled_reason = (!enabled).then(|| reason.to_string());
        let audit = actor.entry(
            now,
            if enabled {
                "webhook_endpoint_enabled"
            } else {
                "webhook_endpoint_disabled"
            },
            &format!("webhook_endpoint:{id}"),
            reason,
            endpoint_state(&before),
            endpoint_state(&after),
        );
        Ok(self
            .store
            .set_endpoint_status(id, status, (!enabled).then_some(reason), now, Some(&audit))
            .await?)
    }

    /// The plain `whsec_...` of an endpoint secret as stored (sealed at rest, or plain when
    /// written before sealing). Errors: [`OpenError`] (another key, damaged).
    pub fn endpoint_secret(&self, stored: &str) -> Result<String, OpenError> {
        self.secrets
            .open_text(Purpose::WebhookSecret, stored)
            .map(std::borrow::Cow::into_owned)
    }

    /// Gives an endpoint a new secret; the old one keeps signing beside it for the overlap.
    /// Errors: not found, deleted.
    pub async fn rotate_endpoint_secret(
        &self,
        id: &str,
        actor: &Actor,
    ) -> Result<EndpointWithSecret, EndpointError> {
        let now = self.clock.now_ms();
        let secret = new_secret();
        let expires = now + self.notifier.settings.secret_overlap_ms;
        let audit = actor.entry(
            now,
            "webhook_secret_rotated",
            &format!("webhook_endpoint:{id}"),
            "",
            String::new(),
            json!({"previous_secret_expires_at": rfc3339(expires)}).to_string(),
        );
        match self
            .store
            .rotate_endpoint_secret(
                id,
                &self.secrets.seal_text(Purpose::WebhookSecret, &secret),
                expires,
                now,
                Some(&audit),
            )
            .await?
        {
            Some(endpoint) => Ok(EndpointWithSecret { endpoint, secret }),
            None => match self.store.endpoint(id).await? {
                Some(_) => Err(EndpointError::Deleted),
                None => Err(EndpointError::NotFound),
            },
        }
    }

    /// Puts deliveries back for a new round of attempts (ops redelivery, endpoint
    /// recovery), audited once with `reason`. Returns the ids put back; pending ones are
    /// skipped (they already have their job).
    pub async fn redeliver(
        &self,
        ids: &[i64],
        reason: &str,
        target: &str,
        actor: &Actor,
    ) -> Result<Vec<i64>, ServiceError> {
        let now = self.clock.now_ms();
        let audit = actor.entry(
            now,
            "webhook_redelivered",
            target,
            reason,
            String::new(),
            json!({"deliveries": ids}).to_string(),
        );
        Ok(self.store.redeliver(ids, now, Some(&audit)).await?)
    }

    /// One attempt of the delivery a `webhook` job names, recorded, and what the job does
    /// next: done (delivered, or nothing left to do), a retry at the schedule's next time
    /// (not before the endpoint's `Retry-After`), or the error pool (`webhook_exhausted`)
    /// after the schedule's last attempt. No attempt, and a wait that spends none, while the
    /// endpoint's circuit breaker is open or its (or its merchant's) in-flight cap is full
    /// ([`super::delivery_gate`]).
    pub async fn deliver_webhook(&self, job: &LeasedJob) -> Result<Step, ServiceError> {
        let Ok(delivery_id) = job.payload.parse::<i64>() else {
            return Ok(Step::GiveUp {
                kind: "job_bad_payload",
                summary: format!("webhook job {} has no delivery id", job.id),
                evidence: json!({"job_id": job.id, "payload": job.payload}),
            });
        };
        let store = &self.store;
        let Some(d) = store.delivery(delivery_id).await? else {
            return Ok(Step::Done);
        };
        if d.status != DeliveryStatus::Pending {
            return Ok(Step::Done);
        }
        // The emergency switch: the delivery stays pending, no attempt is made or spent.
        if self.active_pauses().await.endpoint(&d.endpoint_id) {
            return Ok(Step::Held(format!(
                "deliveries to endpoint {} are paused",
                d.endpoint_id
            )));
        }
        let now = self.clock.now_ms();
        let (Some(endpoint), Some(event)) = (
            store.endpoint(&d.endpoint_id).await?,
            store.outbox_event(&d.event_id).await?,
        ) else {
            store
                .abandon_delivery(d.id, "endpoint or event missing", now)
                .await?;
            return Ok(Step::Done);
        };
        if endpoint.status != EndpointStatus::Enabled {
            let why = format!(
                "endpoint {}: {}",
                endpoint.status,
                endpoint.disabled_reason.as_deref().unwrap_or("-")
            );
            store.abandon_delivery(d.id, &why, now).await?;
            return Ok(Step::Done);
        }
        // The bulkheads: the endpoint's breaker and in-flight cap decide whether it is
        // attempted now; the slot is held until the attempt is recorded.
        let gate = self.delivery_gate(&endpoint.id, endpoint.merchant_id, now);
        let (slot, merchant_slot, breaker) = match gate.await? {
            Passage::Go {
                slot,
                merchant_slot,
                breaker,
            } => (slot, merchant_slot, breaker),
            Passage::Wait(step) => return Ok(step),
        };
        let step = self
            .attempt_delivery(job, &d, &endpoint, &event, &breaker, now)
            .await;
        drop((slot, merchant_slot));
        step
    }

    /// One attempt of delivery `d` to `endpoint`, recorded (the delivery, and the endpoint's
    /// breaker when it failed or ended a failure run), and what the job does next.
    async fn attempt_delivery(
        &self,
        job: &LeasedJob,
        d: &DeliveryRow,
        endpoint: &WebhookEndpoint,
        event: &crate::store::OutboxEvent,
        breaker: &crate::domain::breaker::BreakerState,
        now: i64,
    ) -> Result<Step, ServiceError> {
        let store = &self.store;
        let body = webhook_body(&event.event_type, event.created_at, &event.payload);
        let keys = self.signing_keys(endpoint, now);
        let attempt = self.attempt(&endpoint.url, &event.id, &keys, body).await;
        metrics::histogram!("converge_webhook_attempt_duration_seconds")
            .record(attempt.duration.as_secs_f64());
        let verdict = match attempt.status {
            Some(status) => wh::judge(status, attempt.retry_after.as_deref()),
            None => AttemptVerdict::Failed {
                reason: attempt.error.clone().unwrap_or_else(|| "no answer".into()),
                not_before_ms: None,
            },
        };
        let failed = matches!(verdict, AttemptVerdict::Failed { .. });
        if failed || verdict == AttemptVerdict::Delivered {
            let ended = self.clock.now_ms();
            if let Err(e) = self
                .record_breaker_outcome(&endpoint.id, breaker, !failed, ended)
                .await
            {
                tracing::warn!(endpoint = %endpoint.id, error = %e, "circuit breaker not updated");
            }
        }
        let mut result = AttemptResult {
            delivery_id: d.id,
            attempted_at: now,
            duration_ms: attempt.duration.as_millis().min(i64::MAX as u128) as i64,
            status_code: attempt.status.map(i64::from),
            response: attempt.excerpt,
            error: None,
            new_status: DeliveryStatus::Pending,
            next_attempt_at: None,
        };
        let outcome = match verdict {
            AttemptVerdict::Delivered => {
                result.new_status = DeliveryStatus::Succeeded;
                store.record_attempt(&result).await?;
                "delivered"
            }
            AttemptVerdict::Gone => {
                result.new_status = DeliveryStatus::Abandoned;
                result.error = Some("410 Gone: the endpoint asked not to be called again".into());
                store.record_attempt(&result).await?;
                self.set_endpoint_enabled(
                    &endpoint.id,
                    false,
                    "the receiver answered 410 Gone",
                    &Actor::system(),
                )
                .await
                .map_err(endpoint_to_service)?;
                "gone"
            }
            AttemptVerdict::Failed {
                reason,
                not_before_ms,
            } => {
                let failed = Failure {
                    reason,
                    not_before_ms,
                    status: attempt.status,
                };
                return self
                    .after_failure(job, d, endpoint, event, result, failed, now)
                    .await;
            }
        };
        count_attempt(outcome);
        Ok(Step::Done)
    }

    /// The signing keys of `endpoint` at `now`: its secret's, and its previous secret's while
    /// the rotation's overlap lasts.
    fn signing_keys(&self, endpoint: &WebhookEndpoint, now: i64) -> Vec<Vec<u8>> {
        let mut keys = Vec::new();
        for s in std::iter::once(Some(&endpoint.secret)).chain(std::iter::once(
            endpoint
                .previous_secret
                .as_ref()
                .filter(|_| endpoint.previous_expires_at.is_some_and(|t| t > now)),
        )) {
            let Some(stored) = s else { continue };
            match self.endpoint_secret(stored) {
                Ok(plain) => keys.extend(wh::secret_key(&plain).ok()),
                // A key that does not open the secret is a configuration error start-up
                // refuses; a damaged value signs nothing rather than something wrong.
                Err(e) => {
                    tracing::error!(endpoint = %endpoint.id, error = %e, "webhook secret did not open")
                }
            }
        }
        keys
    }

    /// A failed attempt, recorded, and what the job does next: a retry at the schedule's next
    /// time with its jitter (not before the endpoint's `Retry-After`), done after disabling
    /// an endpoint failing for too long, or the error pool after the schedule's last attempt.
    #[allow(clippy::too_many_arguments)]
    async fn after_failure(
        &self,
        job: &LeasedJob,
        d: &DeliveryRow,
        endpoint: &WebhookEndpoint,
        event: &crate::store::OutboxEvent,
        mut result: AttemptResult,
        failed: Failure,
        now: i64,
    ) -> Result<Step, ServiceError> {
        let store = &self.store;
        let Failure {
            reason,
            not_before_ms,
            status,
        } = failed;
        result.error = Some(reason.clone());
        let next = u32::try_from(job.attempts).unwrap_or(u32::MAX) as usize + 1;
        let unit = self.notifier.jitter_unit();
        match self.notifier.settings.schedule.delay_ms(next, unit) {
            Some(delay) => {
                let delay = delay.max(not_before_ms.unwrap_or(0));
                let at = now.saturating_add(i64::try_from(delay).unwrap_or(i64::MAX));
                result.next_attempt_at = Some(at);
                store.record_attempt(&result).await?;
                let failing_for = endpoint
                    .failing_since
                    .map_or(0, |since| now.saturating_sub(since));
                if failing_for >= self.notifier.settings.disable_after_ms {
                    let why = format!("every attempt failed for {} h", failing_for / 3_600_000);
                    self.set_endpoint_enabled(&endpoint.id, false, &why, &Actor::system())
                        .await
                        .map_err(endpoint_to_service)?;
                    store.abandon_delivery(d.id, &why, now).await?;
                    count_attempt("failed");
                    return Ok(Step::Done);
                }
                count_attempt("failed");
                Ok(Step::RetryAt { at, error: reason })
            }
            None => {
                result.new_status = DeliveryStatus::Dead;
                store.record_attempt(&result).await?;
                count_attempt("dead");
                Ok(Step::GiveUpWith {
                    kind: "webhook_exhausted",
                    dedupe_key: format!("webhook:{}", d.id),
                    summary: format!(
                        "{} to {} failed {} times: {reason}",
                        event.event_type,
                        endpoint.url,
                        d.attempts + 1
                    ),
                    evidence: json!({
                        "delivery_id": d.id, "event_id": event.id, "event_type": event.event_type,
                        "endpoint_id": endpoint.id, "url": endpoint.url, "attempts": d.attempts + 1,
                        "last_status": status, "last_error": reason,
                        "last_response": result.response,
                    }),
                })
            }
        }
    }

    async fn attempt(&self, url: &str, msg_id: &str, keys: &[Vec<u8>], body: String) -> Attempt {
        let started = Instant::now();
        let mut out = Attempt {
            duration: Duration::ZERO,
            status: None,
            retry_after: None,
            excerpt: String::new(),
            error: None,
        };
        // An IP literal never reaches the resolver: check it here.
        if let Err(e) = self.check_literal(url) {
            out.error = Some(e.to_string());
            return out;
        }
        let ts = self.clock.now_ms() / 1000;
        let signature = wh::signature_header(keys, msg_id, ts, body.as_bytes());
        let headers = [
            ("content-type", "application/json".to_string()),
            ("webhook-id", msg_id.to_string()),
            ("webhook-timestamp", ts.to_string()),
            ("webhook-signature", signature),
        ];
        match self.notifier.sender.post(url, &headers, body).await {
            Ok(mut answer) => {
                out.status = Some(answer.status);
                out.retry_after = answer.retry_after;
                out.error = answer.error;
                answer.body.truncate(STORED_RESPONSE_BYTES);
                out.excerpt = String::from_utf8_lossy(&answer.body).into_owned();
            }
            Err(e) => out.error = Some(e),
        }
        out.duration = started.elapsed();
        out
    }

    fn check_literal(&self, url: &str) -> Result<(), UrlRefusal> {
        let u = wh::check_url_form(url)?;
        if let Ok(ip) = u
            .host_str()
            .unwrap_or_default()
            .trim_matches(['[', ']'])
            .parse::<IpAddr>()
        {
            wh::check_addresses(&[ip], self.notifier.settings.allow_private)?;
        }
        Ok(())
    }

    /// Deliveries of one endpoint that failed (dead or abandoned) since `since`, at most
    /// 500: what an endpoint recovery would put back (the preview).
    pub async fn recovery_candidates(
        &self,
        endpoint_id: &str,
        since: i64,
    ) -> Result<Vec<DeliveryRow>, ServiceError> {
        let mut out = Vec::new();
        for status in [DeliveryStatus::Dead, DeliveryStatus::Abandoned] {
            out.extend(
                self.store
                    .deliveries(
                        &crate::store::DeliveryFilter {
                            endpoint_id: Some(endpoint_id.into()),
                            status: Some(status),
                            from: Some(since),
                            ..Default::default()
                        },
                        500,
                    )
                    .await?,
            );
        }
        out.sort_by_key(|d| d.id);
        out.truncate(500);
        Ok(out)
    }
}

fn endpoint_to_service(e: EndpointError) -> ServiceError {
    match e {
        EndpointError::Store(s) => ServiceError::Store(s),
        other => ServiceError::Store(crate::store::StoreError::Corrupt(other.to_string())),
    }
}

fn count_attempt(outcome: &'static str) {
    metrics::counter!("converge_webhook_attempts_total", "outcome" => outcome).increment(1);
}

/// The error with its sources, one line (reqwest's own message hides the cause).
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

struct Attempt {
    duration: Duration,
    status: Option<u16>,
    retry_after: Option<String>,
    excerpt: String,
    error: Option<String>,
}

/// The Standard Webhooks body: `{"type","timestamp","data"}`, `data` the outbox payload as
/// stored (so every attempt sends the same bytes).
pub fn webhook_body(event_type: &str, created_at: i64, payload: &str) -> String {
    format!(
        r#"{{"type":{},"timestamp":{},"data":{}}}"#,
        serde_json::Value::String(event_type.into()),
        serde_json::Value::String(rfc3339(created_at)),
        payload
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The retry waits a notifier seeded with `seed` draws for its next eight failed attempts.
    fn waits(seed: u64) -> Vec<Option<u64>> {
        let n = Notifier::new(WebhookSettings {
            jitter_seed: seed,
            ..WebhookSettings::default()
        });
        (1..=8)
            .map(|attempt| n.settings.schedule.delay_ms(attempt, n.jitter_unit()))
            .collect()
    }

    #[test]
    fn the_same_jitter_seed_gives_the_same_retry_waits() {
        assert_eq!(waits(42), waits(42));
        assert_ne!(
            waits(42),
            waits(43),
            "the seed, not a constant, drives the jitter"
        );
    }
}

//! Signed channel callbacks (DESIGN.md "Sandbox channel": signed callbacks; digits 55 deliver
//! the success twice and then a stale failure; digits 54 deliver none). Charges send
//! `charge.*`; holds (issue 34) send `authorization.*` for an authorization and `capture.*`,
//! naming the capture's `capture_key`, for each new capture.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::behaviour::Behaviour;
use crate::channel::signature::{SIGNATURE_HEADER, sign};
use crate::domain::clock::Clock;

/// How often one event is tried before it is given up (logged, never fatal).
const DELIVERY_ATTEMPTS: u32 = 4;
const RETRY_BASE: Duration = Duration::from_millis(200);

/// The JSON body of a callback: `{"event_id","type","channel_key","amount","currency",
/// "created_at"}` and, for a capture, `"capture_key"`, for a dispute `"dispute_id"` and
/// `"reason"`; amount in minor units (a capture's own amount for `capture.*`, the disputed
/// amount for `dispute.*`), created_at in unix seconds (UTC).
#[derive(Debug, Clone, Serialize)]
pub struct CallbackEvent {
    pub event_id: String,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub channel_key: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_key: Option<String>,
    pub amount: i64,
    pub currency: String,
    pub created_at: i64,
    /// For `dispute.*`: the dispute's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dispute_id: Option<String>,
    /// For `dispute.*`: the card network's reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl CallbackEvent {
    /// The event id is derived from the key and a label, so a re-sent event has the same id
    /// (which is what lets the core dedupe) and the ids need no RNG.
    pub fn new(
        kind: &'static str,
        label: &str,
        key: &str,
        amount: i64,
        currency: &str,
        at: i64,
    ) -> Self {
        let digest = Sha256::digest(format!("{key}\u{0}{label}").as_bytes());
        Self {
            event_id: format!("evt_{}", &hex::encode(digest)[..24]),
            kind,
            channel_key: key.to_owned(),
            capture_key: None,
            amount,
            currency: currency.to_owned(),
            created_at: at,
            dispute_id: None,
            reason: None,
        }
    }
}

/// The events one decision sends: `succeeded` (e.g. `charge.succeeded`) once, or with
/// [`Behaviour::DuplicateCallbacks`] twice under one event id and then a stale `failed` under
/// another; none for a dropped connection (digits 54). `make(kind, label)` builds one.
pub fn events_for(
    behaviour: Behaviour,
    succeeded: &'static str,
    failed: &'static str,
    make: impl Fn(&'static str, &str) -> CallbackEvent,
) -> Vec<CallbackEvent> {
    match behaviour {
        Behaviour::Dropped => Vec::new(),
        Behaviour::DuplicateCallbacks => {
            let ok = make(succeeded, "succeeded");
            vec![ok.clone(), ok, make(failed, "stale-failed")]
        }
        _ => vec![make(succeeded, "succeeded")],
    }
}

/// Sends events to the configured callback URL in background tasks.
#[derive(Clone)]
pub struct CallbackSender {
    client: reqwest::Client,
    url: Option<String>,
    secret: Arc<[u8]>,
    delay: Duration,
    clock: Arc<dyn Clock>,
}

impl CallbackSender {
    pub fn new(url: Option<String>, secret: &[u8], delay: Duration, clock: Arc<dyn Clock>) -> Self {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .build()
            .unwrap_or_default();
        Self {
            client,
            url,
            secret: secret.into(),
            delay,
            clock,
        }
    }

    /// Delivers `events` in order, after the configured delay, in a spawned task: the charge
    /// answer never waits for (or fails because of) the merchant side.
    pub fn schedule(&self, events: Vec<CallbackEvent>) {
        let Some(url) = self.url.clone() else { return };
        let this = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(this.delay).await;
            for event in events {
                this.deliver(&url, &event).await;
            }
        });
    }

    async fn deliver(&self, url: &str, event: &CallbackEvent) {
        let body = match serde_json::to_vec(event) {
            Ok(b) => b,
            Err(e) => {
                tracing::error!(error = %e, "sandbox: cannot encode callback");
                return;
            }
        };
        for attempt in 1..=DELIVERY_ATTEMPTS {
            // Signed per attempt: a retry minutes later must still pass the receiver's age check.
            let now_secs = self.clock.now_ms().div_euclid(1000);
            let result = self
                .client
                .post(url)
                .header(SIGNATURE_HEADER, sign(&self.secret, now_secs, &body))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body.clone())
                .send()
                .await;
            match result {
                Ok(r) if r.status().is_success() => return,
                Ok(r) => {
                    tracing::warn!(event_id = %event.event_id, status = %r.status(), attempt, "sandbox: callback refused")
                }
                Err(e) => {
                    // Without the URL: it may carry user info (issue 36).
                    let error = e.without_url();
                    tracing::warn!(event_id = %event.event_id, %error, attempt, "sandbox: callback failed")
                }
            }
            if attempt < DELIVERY_ATTEMPTS {
                tokio::time::sleep(RETRY_BASE * attempt).await;
            }
        }
        tracing::error!(event_id = %event.event_id, "sandbox: callback given up");
    }
}

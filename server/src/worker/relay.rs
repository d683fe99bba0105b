//! The event-stream relay: the outbox published to NATS JetStream, in insertion order (per
//! payment, commit order), at least once, with the broker removing repeats (DESIGN.md
//! "Outbox, merchant notifications, event stream"; seed 004 §6.1 and §11.2: "sent but not
//! marked: allow re-sending, consumers deduplicate"; seed 000 §6).
//!
//! Each event goes to subject `{prefix}.{aggregatetype}.{type}` with header `Nats-Msg-Id` =
//! the event id; the relay waits for the PubAcks (pipelined) and only then records the stream
//! sequences. A relay that dies between the two re-publishes after its lease lapses, and
//! JetStream's duplicate window turns that into a no-op (the PubAck says `duplicate`), so the
//! stream holds each event once. One relay publishes at a time: the publishing position is
//! held under a lease in the database, so several `serve` processes on one PostgreSQL keep
//! per-payment order and skip nothing.
//!
//! A message the broker refuses for good (larger than its `max_payload`) is recorded as
//! refused, reported to the error pool (`event_publish_refused`), and the relay goes on with
//! the next event: one oversized event must not stop every payment's stream. Per-payment
//! order still holds for what is published; the refused event is named in the error pool.

use std::time::Duration;

use async_nats::jetstream::{self, context::PublishErrorKind, stream::StorageType};
use serde_json::json;
use tokio::sync::watch;

use crate::domain::clock::rfc3339;
use crate::service::Core;
use crate::service::ids::new_token;
use crate::store::{NewErrorItem, OutboxEvent, Publication};

/// The lease name of the publishing position.
pub const LEASE: &str = crate::store::RELAY_LEASE;

/// How the relay runs (`--nats-*` flags).
#[derive(Debug, Clone)]
pub struct RelayConfig {
    /// `nats://HOST:PORT`.
    pub url: String,
    /// Subject prefix: events go to `{prefix}.{aggregatetype}.{type}`.
    pub prefix: String,
    /// The stream's name (created with subjects `{prefix}.>` when missing).
    pub stream: String,
    /// The duplicate window of a stream the relay creates; an existing stream's window must
    /// be at least [`RelayConfig::min_window`].
    pub duplicate_window: Duration,
    /// The publishing lease, ms.
    pub lease_ms: i64,
    /// Events per batch.
    pub batch: i64,
    /// Sleep when nothing is waiting.
    pub poll: Duration,
    /// Published events older than this are purged (ms), once every delivery is finished.
    pub retention_ms: i64,
    /// This process's name for the lease.
    pub owner: String,
}

impl RelayConfig {
    /// The shortest duplicate window that still removes a re-publish: a relay that died
    /// after publishing is replaced once its lease lapses, and the replacement re-publishes
    /// within about one more lease, so three leases leave a margin.
    pub fn min_window(&self) -> Duration {
        Duration::from_millis((self.lease_ms.max(1) as u64).saturating_mul(3))
    }

    /// The subject of an event.
    pub fn subject(&self, e: &OutboxEvent) -> String {
        format!("{}.{}.{}", self.prefix, e.aggregatetype, e.event_type)
    }
}

/// Why the relay cannot run.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The broker is unreachable or refused a request; the relay retries.
    #[error("NATS: {0}")]
    Broker(String),
    /// The existing stream cannot deduplicate the relay's re-publishes: a configuration
    /// error, never retried.
    #[error(
        "stream {stream} has a duplicate window of {have:?}, shorter than the {need:?} the relay needs to deduplicate a re-publish (3 x --relay-lease-ms); raise the stream's duplicate_window"
    )]
    WindowTooShort {
        /// Stream name.
        stream: String,
        /// Its window.
        have: Duration,
        /// What the relay needs.
        need: Duration,
    },
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// A relay connected to its stream.
pub struct Connected {
    js: jetstream::Context,
}

/// Connects to the broker and makes sure the stream exists with a window long enough.
/// Errors: [`RelayError::Broker`] (retry), [`RelayError::WindowTooShort`] (configuration).
pub async fn connect(cfg: &RelayConfig) -> Result<Connected, RelayError> {
    // No retry inside the client: a broker that is down is reported at once, and the relay's
    // own loop retries with backoff (and reports it on the dashboard meanwhile).
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(3))
        .connect(&cfg.url);
    // The URL may carry a user and password (or a token): this message reaches the log and
    // every viewer's dashboard, so it names the broker without them (issue 36).
    let shown = crate::store::redact(&cfg.url);
    let client = tokio::time::timeout(Duration::from_secs(5), client)
        .await
        .map_err(|_| RelayError::Broker(format!("no connection to {shown} within 5 s")))?
        .map_err(|e| RelayError::Broker(format!("cannot connect to {shown}: {e}")))?;
    let js = jetstream::new(client);
    let mut stream = match js.get_stream(&cfg.stream).await {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                jetstream::context::GetStreamErrorKind::JetStream(ref j)
                    if j.error_code() == jetstream::ErrorCode::STREAM_NOT_FOUND
            ) =>
        {
            js.create_stream(jetstream::stream::Config {
                name: cfg.stream.clone(),
                subjects: vec![format!("{}.>", cfg.prefix)],
                storage: StorageType::File,
                duplicate_window: cfg.duplicate_window,
                ..Default::default()
            })
            .await
            .map_err(|e| RelayError::Broker(format!("cannot create stream {}: {e}", cfg.stream)))?
        }
        Err(e) => {
            return Err(RelayError::Broker(format!(
                "cannot read stream {}: {e}",
                cfg.stream
            )));
        }
    };
    let have = stream
        .info()
        .await
        .map_err(|e| RelayError::Broker(format!("cannot read stream {}: {e}", cfg.stream)))?
        .config
        .duplicate_window;
    if have < cfg.min_window() {
        return Err(RelayError::WindowTooShort {
            stream: cfg.stream.clone(),
            have,
            need: cfg.min_window(),
        });
    }
    Ok(Connected { js })
}

/// The message body of an event: the event (with `seq`, its place in the outbox, which per
/// payment is commit order) and its payload as `data`.
pub fn message(e: &OutboxEvent) -> String {
    let data: serde_json::Value =
        serde_json::from_str(&e.payload).unwrap_or(serde_json::Value::Null);
    json!({
        "id": e.id, "seq": e.seq, "type": e.event_type, "aggregatetype": e.aggregatetype,
        "aggregateid": e.aggregateid, "merchant_id": e.merchant_id,
        "created_at": rfc3339(e.created_at), "data": data,
    })
    .to_string()
}

impl Connected {
    /// Publishes `events` in order (acks pipelined) and returns what the broker said of each,
    /// up to the first that failed for a reason that may pass (the rest are published on the
    /// next round, after it, so per-payment order holds).
    pub async fn publish(&self, cfg: &RelayConfig, events: &[OutboxEvent]) -> Vec<Publication> {
        let mut pending = Vec::new();
        let mut out = Vec::new();
        for e in events {
            let mut headers = async_nats::HeaderMap::new();
            headers.insert("Nats-Msg-Id", e.id.as_str());
            match self
                .js
                .publish_with_headers(cfg.subject(e), headers, message(e).into())
                .await
            {
                Ok(ack) => pending.push((e.id.clone(), Ok(ack))),
                Err(err) => {
                    let permanent = err.kind() == PublishErrorKind::MaxPayloadExceeded;
                    pending.push((e.id.clone(), Err((permanent, err.to_string()))));
                    if !permanent {
                        break;
                    }
                }
            }
        }
        for (id, sent) in pending {
            let p = match sent {
                Ok(ack) => match ack.await {
                    Ok(a) => Publication {
                        event_id: id,
                        stream_seq: Some(a.sequence as i64),
                        duplicate: a.duplicate,
                        refused: None,
                    },
                    Err(err) => {
                        let text = err.to_string();
                        if text.contains("maximum") && text.contains("size") {
                            refused(id, text)
                        } else {
                            tracing::warn!(error = %text, "publish not acknowledged; retried next round");
                            break;
                        }
                    }
                },
                Err((true, text)) => refused(id, text),
                Err((false, text)) => {
                    tracing::warn!(error = %text, "publish failed; retried next round");
                    break;
                }
            };
            out.push(p);
        }
        out
    }
}

fn refused(event_id: String, why: String) -> Publication {
    Publication {
        event_id,
        stream_seq: None,
        duplicate: false,
        refused: Some(why),
    }
}

/// Runs the relay until `stop` turns true: connect (retrying with backoff while the broker
/// is down; payments go on meanwhile, their events wait in the outbox), hold the lease,
/// publish, record, purge, heartbeat. A stream whose window is too short stops the relay with
/// an error in the log and on the dashboard.
pub async fn run(core: Core, cfg: RelayConfig, mut stop: watch::Receiver<bool>) {
    let token = new_token();
    let mut backoff = Duration::from_millis(200);
    let mut connected: Option<Connected> = None;
    let mut last_purge = 0i64;
    loop {
        if *stop.borrow() {
            return;
        }
        let now = core.clock.now_ms();
        let leader = match core
            .store
            .acquire_relay_lease(LEASE, &cfg.owner, &token, now, now + cfg.lease_ms)
            .await
        {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "relay lease");
                false
            }
        };
        let mut wait = cfg.poll;
        if leader {
            if connected.is_none() {
                match connect(&cfg).await {
                    Ok(c) => {
                        connected = Some(c);
                        backoff = Duration::from_millis(200);
                        heartbeat(&core, &token, true, None).await;
                    }
                    Err(e @ RelayError::WindowTooShort { .. }) => {
                        tracing::error!(error = %e, "relay stopped");
                        heartbeat(&core, &token, false, Some(&e.to_string())).await;
                        return;
                    }
                    Err(e) => {
                        metrics::counter!("converge_relay_connect_failures_total").increment(1);
                        tracing::warn!(error = %e, retry_in_ms = backoff.as_millis() as u64, "relay cannot reach the broker");
                        heartbeat(&core, &token, false, Some(&e.to_string())).await;
                        wait = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(10));
                    }
                }
            }
            if let Some(c) = &connected {
                match round(&core, &cfg, c, &token).await {
                    Ok(0) => {}
                    Ok(_) => wait = Duration::ZERO,
                    Err(e) => {
                        tracing::warn!(error = %e, "relay round failed; reconnecting");
                        heartbeat(&core, &token, false, Some(&e.to_string())).await;
                        connected = None;
                        wait = backoff;
                        backoff = (backoff * 2).min(Duration::from_secs(10));
                    }
                }
            }
            if now - last_purge > 60_000 {
                last_purge = now;
                match core
                    .store
                    .purge_published_events(now - cfg.retention_ms)
                    .await
                {
                    Ok(0) => {}
                    Ok(n) => {
                        tracing::info!(events = n, "published events past their retention purged")
                    }
                    Err(e) => tracing::warn!(error = %e, "purging published events failed"),
                }
            }
        }
        if !wait.is_zero() {
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.changed() => {}
            }
        }
    }
}

async fn heartbeat(core: &Core, token: &str, connected: bool, error: Option<&str>) {
    let now = core.clock.now_ms();
    if let Err(e) = core
        .store
        .relay_heartbeat(LEASE, token, connected, error, now)
        .await
    {
        tracing::warn!(error = %e, "relay heartbeat");
    }
}

/// One batch: read, publish, record. Returns how many events were recorded; an error means
/// the broker went away (nothing recorded for what was not acknowledged).
pub async fn round(
    core: &Core,
    cfg: &RelayConfig,
    c: &Connected,
    token: &str,
) -> Result<usize, RelayError> {
    let events = core.store.unpublished_events(cfg.batch).await?;
    if events.is_empty() {
        heartbeat(core, token, true, None).await;
        return Ok(0);
    }
    let pubs = c.publish(cfg, &events).await;
    if pubs.is_empty() {
        return Err(RelayError::Broker("no event was acknowledged".into()));
    }
    let now = core.clock.now_ms();
    if !core
        .store
        .record_publications(LEASE, token, &pubs, now)
        .await?
    {
        tracing::warn!(
            "relay lease lost before the marks were written; the new holder re-publishes"
        );
        return Ok(0);
    }
    for p in &pubs {
        let outcome = if p.refused.is_some() {
            "refused"
        } else if p.duplicate {
            "duplicate"
        } else {
            "published"
        };
        metrics::counter!("converge_relay_events_total", "outcome" => outcome).increment(1);
        if let Some(why) = &p.refused {
            let e = events.iter().find(|e| e.id == p.event_id);
            let item = NewErrorItem {
                kind: "event_publish_refused".into(),
                dedupe_key: format!("publish:{}", p.event_id),
                payment_id: e.filter(|e| e.aggregatetype == "payment").map(|e| e.aggregateid.clone()),
                summary: format!("the broker refused event {}: {why}", p.event_id),
                evidence: json!({"event_id": p.event_id, "error": why,
                    "type": e.map(|e| e.event_type.clone()), "aggregateid": e.map(|e| e.aggregateid.clone())})
                .to_string(),
                // A refusal after a person replayed the event (and so resolved its item) is
                // a new failure: it opens the item again (issue 41).
                reopen: true,
                now,
            };
            core.store.report_error(&item).await?;
        }
    }
    heartbeat(core, token, true, None).await;
    Ok(pubs.len())
}

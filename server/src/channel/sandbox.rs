//! The sandbox channel: a PSP simulator over HTTP with its own SQLite store, signed
//! callbacks and a daily CSV statement (DESIGN.md "Sandbox channel").
//!
//! Protocol (JSON unless noted; amounts are integer minor units; times are UTC):
//! - `POST /charges` `{"key","amount","currency"}` -> 200 `{"status":"succeeded","key",
//!   "amount","currency"}` | 402 `{"status":"declined","reason"}` | 409 `{"status":"cancelled"}`
//!   (key tombstoned) | 409 `{"status":"key_mismatch"}` (key reused with another amount or
//!   currency) | 400 `{"status":"invalid","reason"}`. Idempotent on `key`: a repeated key
//!   never charges again, it gets the stored answer.
//! - `GET /charges/{key}` -> 200 `{"status":"succeeded"|"declined"|"cancelled","amount",
//!   "currency","charged_at"(RFC 3339),"reason"?}` | 404 `{"status":"not_found"}`.
//! - `POST /charges/{key}/cancel` -> 200 `{"status":"cancelled"}` (tombstone; idempotent) |
//!   409 `{"status":"succeeded","amount","currency"}` when a charge exists.
//! - `POST /refunds` `{"refund_key","charge_key","amount"}` -> 200 `{"status":"succeeded"}`
//!   (idempotent on `refund_key`) | 422 `{"status":"rejected","reason"}` (no successful charge,
//!   total over the charge, refund key reused with other parameters, amount not positive).
//! - `POST /authorizations` `{"key","amount","currency","ttl_secs"?}` (default 7 days, at most
//!   31) -> 200 `{"status":"authorized","key","amount","currency","expires_at_ms"}` | 402
//!   `{"status":"declined","reason"}` | 409 `{"status":"cancelled"}` (key fenced) | 409
//!   `{"status":"key_mismatch"}` (key used with other parameters, or by a charge) | 409
//!   `{"status":"captured"|"voided"|"expired"}` (a repeat after the hold moved on) | 400. A
//!   hold of funds, idempotent on `key`; the amount's digits act as for charges, and a new
//!   hold sends `authorization.succeeded` as a charge sends `charge.succeeded` (digits 55:
//!   twice, then a stale `authorization.failed`; 54: none).
//! - `GET /authorizations/{key}` -> 200 `{"status":"authorized"|"captured"|"voided"|"expired"|
//!   "declined","key","amount","captured","currency","expires_at_ms","reason"?}` | 200
//!   `{"status":"cancelled"}` (fenced, nothing held) | 404 `{"status":"not_found"}`. Expiry is
//!   read on the sandbox's clock.
//! - `POST /authorizations/{key}/captures` `{"capture_key","amount","final"?}` -> 200
//!   `{"status":"captured","key","capture_key","amount","captured","currency","closed"}`
//!   (idempotent on `capture_key`; partial captures until one is final or the hold is used
//!   up) | 422 `{"status":"rejected","reason"}` (`not_found`, `voided`, `expired`, `declined`,
//!   `closed`, `exceeds_authorized`, `capture_key_reused`, `amount_not_positive`). A new
//!   capture sends `capture.succeeded` with its `capture_key` and its own amount (the capture's
//!   digits 55: twice, then a stale `capture.failed`; 54: none).
//! - `POST /authorizations/{key}/void` -> 200 `{"status":"voided"}` (released, or no hold and
//!   the key is now fenced: TCC empty rollback) | 200 `{"status":"expired"}` (lapsed before) |
//!   422 `{"status":"rejected","reason":"already_captured"}`. `POST /charges/{key}/cancel` of a
//!   key with a live hold answers 409 `{"status":"held"}`: holds are released by a void.
//! - `GET /statements/{YYYY-MM-DD}` -> `text/csv`, header
//!   `channel_key,amount,currency,status,charged_at`: the successful charges of that UTC day
//!   and the captures made that day (one `succeeded` line per capture under its hold's key,
//!   `charged_at` the capture's time; a capture's amount digits 57 and 58 act on its line as
//!   on a charge's), oldest first, then an end line `#end,<number of lines>,,,` | 400 on a
//!   bad date.
//! - `GET /charges?after=KEY&limit=N` -> `{"charges":[{"key","status":"succeeded"|"declined",
//!   "amount","currency","charged_at","attempts","refunded"}],"next":KEY|null}`: every stored
//!   charge in key order, `limit` 1..=5000 (default 1000), with the charge attempts seen for the
//!   key and the total refunded against it; `next` is the `after` of the following page.
//! - `POST /charges/{key}/disputes` `{"reason"?,"outcome"?:"won"|"lost"}` -> 202
//!   `{"dispute_id","status":"opened"}` | 404 `{"status":"not_found"}` (no successful charge
//!   under the key) | 400: the card holder disputes the charge (a chargeback, issue 38): a
//!   `dispute.opened` callback with `dispute_id`, `reason` and the charge's amount, then
//!   `dispute.won` or `dispute.lost` when `outcome` is given. One dispute per charge (its id
//!   follows from the key, so a repeat sends the same events again, deduplicated by the core).
//! - `GET /attempts/{key}` -> `{"key","attempts","behaviour"}`: charge attempts seen per key.
//! - `GET /stats` -> `{"charges","declines","attempts","faults":{"slow","timeout","dropped",
//!   "error5xx"}}`; `GET /health` -> 200.
//! - `GET /faults` -> `{"rate","kind"}`; `PUT /faults` `{"rate"(0..=1),"kind"?:"slow"|
//!   "timeout"|"dropped"|"error5xx"}` -> 200 the new setting | 400: the seeded fault injection
//!   while the sandbox runs (an outage drill: `{"rate":1,"kind":"error5xx"}` fails every new
//!   key's first two attempts; `{"rate":0}` heals). Keys seen before keep their behaviour.
//!
//! The amount's last two digits (`amount % 100`) select a behaviour, as in the DESIGN.md table:
//! 51 decline; 52 commit, answer after `slow_ms`; 53 commit nothing, 504 after `hang_ms` (on
//! every retry of that key); 54 commit, then break the connection mid-answer, no callback; 55
//! success, `charge.succeeded` twice (same `event_id`) then a stale `charge.failed`; 56 500 on
//! the first two attempts, then success; 57 statement amount + 1; 58 missing from the
//! statement; other: success. With `hang_submit_ms` > 0 every charge and authorization is
//! held that long and answered 504, committing nothing (a stalled forward path). With `fault_rate` > 0, "other" amounts also get seeded 52/53/54/56
//! faults. A key's behaviour is fixed at its first attempt.
//! Callbacks: `POST callback_url` with `{"event_id","type":"charge.succeeded"|"charge.failed",
//! "channel_key","amount","currency","created_at"(unix seconds)}` and the
//! [`signature::SIGNATURE_HEADER`](crate::channel::signature::SIGNATURE_HEADER) header.

mod behaviour;
mod callbacks;
mod disputes;
mod dropped;
mod handlers;
mod hold_handlers;
mod holds;
mod store;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use behaviour::FaultCounts;

use crate::domain::clock::{Clock, SystemClock};
use behaviour::FaultInjector;
use callbacks::CallbackSender;
use store::Store;

/// How the sandbox runs (DESIGN.md "Sandbox channel"; `--fault-rate F --seed N`).
#[derive(Clone)]
pub struct SandboxConfig {
    /// Its own store: `sqlite::memory:` (tests), `sqlite://data/channel.db?mode=rwc`, or a
    /// plain file path such as `data/channel.db` (parent directory created).
    pub database_url: String,
    /// Where callbacks are POSTed (the core's `/v1/channel/callbacks`); `None` sends none.
    pub callback_url: Option<String>,
    /// HMAC-SHA256 secret for the `Converge-Signature` header.
    pub callback_secret: Vec<u8>,
    /// Digits 52: how long the answer is held after the commit, milliseconds (default 5000).
    pub slow_ms: u64,
    /// Digits 53: how long before the 504, milliseconds (default 5000).
    pub hang_ms: u64,
    /// Delay between a commit and its callbacks, milliseconds (default 200).
    pub callback_delay_ms: u64,
    /// A stalled forward path (issue 37's forward-path stall benchmark): when above 0, every
    /// `POST /charges` and `POST /authorizations` is held this long, then answered 504
    /// `{"status":"timeout"}` with nothing committed or counted, whatever the amount; refunds,
    /// queries, cancels, captures and voids answer as usual. Milliseconds (default 0: off).
    pub hang_submit_ms: u64,
    /// Probability (0..=1) that an "other" amount gets an injected 52/53/54/56 fault.
    pub fault_rate: f64,
    /// Seed of the fault RNG: one seed and one request order give one fault sequence.
    pub seed: u64,
    /// Time source for `charged_at`, statement days and callback timestamps (UTC); the wall
    /// clock by default, a manual clock in deterministic simulations. Delays stay real.
    pub clock: Arc<dyn Clock>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            database_url: "sqlite::memory:".to_owned(),
            callback_url: None,
            callback_secret: Vec::new(),
            slow_ms: 5000,
            hang_ms: 5000,
            callback_delay_ms: 200,
            hang_submit_ms: 0,
            fault_rate: 0.0,
            seed: 0,
            clock: Arc::new(SystemClock),
        }
    }
}

impl std::fmt::Debug for SandboxConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is left out on purpose: configs end up in logs.
        f.debug_struct("SandboxConfig")
            .field("database_url", &self.database_url)
            .field("callback_url", &self.callback_url)
            .field("slow_ms", &self.slow_ms)
            .field("hang_ms", &self.hang_ms)
            .field("callback_delay_ms", &self.callback_delay_ms)
            .field("hang_submit_ms", &self.hang_submit_ms)
            .field("fault_rate", &self.fault_rate)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

struct Inner {
    cfg: SandboxConfig,
    store: Store,
    faults: FaultInjector,
    callbacks: CallbackSender,
}

/// Shared state behind the sandbox router (cheap to clone).
#[derive(Clone)]
pub struct SandboxState {
    inner: Arc<Inner>,
}

impl SandboxState {
    /// With the forward-path stall on (`hang_submit_ms` > 0), the 504 a charge or an
    /// authorization gets after the hang, before the store is touched; `None` when it is off.
    async fn stalled_submit(&self) -> Option<axum::response::Response> {
        let ms = self.inner.cfg.hang_submit_ms;
        if ms == 0 {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(ms)).await;
        Some(handlers::reply(
            axum::http::StatusCode::GATEWAY_TIMEOUT,
            serde_json::json!({"status": "timeout"}),
        ))
    }

    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(self.inner.cfg.clock.now_ms()).unwrap_or_default()
    }

    /// Faults injected so far by kind (the `"faults"` object of `GET /stats`).
    pub fn fault_counts(&self) -> FaultCounts {
        self.inner.faults.counts()
    }
}

/// Opens the store (creating its tables) and builds the sandbox router, to serve alone or
/// nest into another app. The returned state is the one the router uses.
pub async fn router(cfg: SandboxConfig) -> anyhow::Result<(Router, SandboxState)> {
    let store = Store::open(&cfg.database_url).await?;
    let callbacks = CallbackSender::new(
        cfg.callback_url.clone(),
        &cfg.callback_secret,
        Duration::from_millis(cfg.callback_delay_ms),
        cfg.clock.clone(),
    );
    let faults = FaultInjector::new(cfg.fault_rate, cfg.seed);
    let state = SandboxState {
        inner: Arc::new(Inner {
            cfg,
            store,
            faults,
            callbacks,
        }),
    };
    let app = Router::new()
        .route(
            "/charges",
            post(handlers::create_charge).get(handlers::list_charges),
        )
        .route("/charges/{key}", get(handlers::get_charge))
        .route("/charges/{key}/cancel", post(handlers::cancel_charge))
        .route("/charges/{key}/disputes", post(disputes::open_dispute))
        .route("/refunds", post(handlers::create_refund))
        .route("/authorizations", post(hold_handlers::authorize))
        .route("/authorizations/{key}", get(hold_handlers::get_hold))
        .route(
            "/authorizations/{key}/captures",
            post(hold_handlers::capture),
        )
        .route("/authorizations/{key}/void", post(hold_handlers::void))
        .route("/statements/{day}", get(handlers::statement))
        .route("/attempts/{key}", get(handlers::attempts))
        .route("/stats", get(handlers::stats))
        .route(
            "/faults",
            get(handlers::get_faults).put(handlers::put_faults),
        )
        .route("/health", get(handlers::health))
        .with_state(state.clone());
    Ok((app, state))
}

/// A sandbox serving on a local port. Dropping it stops accepting connections; call
/// [`SandboxHandle::shutdown`] to also wait for the server task.
pub struct SandboxHandle {
    /// Base URL, `http://<ip>:<port>` (no trailing slash), for [`super::http::HttpChannel`].
    pub url: String,
    /// The bound address (the real port when bound to port 0).
    pub addr: SocketAddr,
    /// The running sandbox's state.
    pub state: SandboxState,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl SandboxHandle {
    /// Stops the server: no new connections, in-flight answers get up to 5 s to finish.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
    }
}

impl Drop for SandboxHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Binds `bind` (port 0 picks a free port) and serves the sandbox in a tokio task
/// (`converge channel-sim`, or in-process under `converge serve`).
pub async fn spawn(cfg: SandboxConfig, bind: SocketAddr) -> anyhow::Result<SandboxHandle> {
    let (app, state) = router(cfg).await?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .with_context(|| format!("binding sandbox channel to {bind}"))?;
    let addr = listener.local_addr()?;
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
            let _ = stopped.await;
        });
        if let Err(e) = serve.await {
            tracing::error!(error = %e, "sandbox channel server stopped");
        }
    });
    Ok(SandboxHandle {
        url: format!("http://{addr}"),
        addr,
        state,
        stop: Some(stop),
        task: Some(task),
    })
}

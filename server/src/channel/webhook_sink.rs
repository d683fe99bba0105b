//! The webhook sink: a merchant's receiver for tests, chaos runs and local development
//! (`converge webhook-sink`). It records every delivery it receives (headers and body, as
//! received) and answers by path, or by a seeded fault schedule, so tests drive real HTTP
//! deliveries without a mock (DESIGN.md "Outbox, merchant notifications, event stream").
//!
//! Paths (any method POST; the answer is chosen by the path after `/hooks`):
//! - `/hooks/ok` (and any unlisted path): 200, unless the seeded faults pick another answer.
//! - `/hooks/fail/{n}`: 500 on the first `n` deliveries of each `webhook-id`, then 200.
//! - `/hooks/always-fail`: 500 always.
//! - `/hooks/gone`: 410 Gone.
//! - `/hooks/retry-after/{secs}`: 503 with `Retry-After: secs`.
//! - `/hooks/redirect`: 302 to `http://127.0.0.1:1/internal`.
//! - `/hooks/big`: 500 with a 50 MB body, streamed.
//! - `/hooks/slow/{ms}`: 200 after `ms`.
//! - `/hooks/hang`: no answer for an hour.
//!
//! With `fault_rate` > 0, `/hooks/ok` answers a seeded share of deliveries with a fault
//! (500, 503, a 3 s hang, a 500 ms delay then 200), each chosen by the RNG seeded with `seed`.
//!
//! `GET /received` -> `{"deliveries":[{"path","webhook_id","webhook_timestamp",
//! "webhook_signature","body","answered"}]}` in arrival order; `GET /health` -> 200.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use tokio::task::JoinHandle;

/// How the sink answers.
#[derive(Debug, Clone, Copy)]
pub struct SinkConfig {
    /// Share (0..=1) of `/hooks/ok` deliveries answered with a fault.
    pub fault_rate: f64,
    /// RNG seed of the faults.
    pub seed: u64,
}

/// One received delivery.
#[derive(Debug, Clone, Serialize)]
pub struct Received {
    /// Path after the host.
    pub path: String,
    /// `webhook-id`.
    pub webhook_id: String,
    /// `webhook-timestamp`.
    pub webhook_timestamp: String,
    /// `webhook-signature`.
    pub webhook_signature: String,
    /// Body as received (UTF-8, lossy).
    pub body: String,
    /// Status the sink answered (0 when it hung).
    pub answered: u16,
}

#[derive(Clone)]
struct Sink {
    cfg: SinkConfig,
    received: Arc<Mutex<Vec<Received>>>,
    rng: Arc<Mutex<StdRng>>,
}

/// A running sink.
pub struct SinkHandle {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The server task.
    pub task: JoinHandle<()>,
}

/// The sink's routes.
fn router(cfg: SinkConfig) -> Router {
    let sink = Sink {
        cfg,
        received: Arc::default(),
        rng: Arc::new(Mutex::new(StdRng::seed_from_u64(cfg.seed))),
    };
    Router::new()
        .route("/health", get(|| async { "ok" }))
        .route("/received", get(received))
        .route("/hooks/{*rest}", post(receive))
        .with_state(sink)
}

/// Serves the sink on `bind` (port 0: any free port) in this process.
pub async fn spawn(cfg: SinkConfig, bind: SocketAddr) -> anyhow::Result<SinkHandle> {
    let listener = tokio::net::TcpListener::bind(bind).await?;
    let addr = listener.local_addr()?;
    let app = router(cfg);
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "webhook sink stopped");
        }
    });
    Ok(SinkHandle {
        url: format!("http://{addr}"),
        task,
    })
}

async fn received(State(s): State<Sink>) -> Response {
    let list = s.received.lock().unwrap_or_else(|p| p.into_inner()).clone();
    axum::Json(serde_json::json!({ "deliveries": list })).into_response()
}

fn header_text(h: &HeaderMap, name: &str) -> String {
    h.get(name)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

async fn receive(
    State(s): State<Sink>,
    Path(rest): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let webhook_id = header_text(&headers, "webhook-id");
    let seen_before = {
        let list = s.received.lock().unwrap_or_else(|p| p.into_inner());
        list.iter().filter(|r| r.webhook_id == webhook_id).count()
    };
    let mut parts = rest.split('/');
    let (answer, hold): (Response, Option<Duration>) = match (parts.next(), parts.next()) {
        (Some("fail"), Some(n)) if seen_before < n.parse::<usize>().unwrap_or(0) => {
            (status(StatusCode::INTERNAL_SERVER_ERROR), None)
        }
        (Some("always-fail"), _) => (status(StatusCode::INTERNAL_SERVER_ERROR), None),
        (Some("gone"), _) => (status(StatusCode::GONE), None),
        (Some("retry-after"), Some(secs)) => (
            (
                StatusCode::SERVICE_UNAVAILABLE,
                [(header::RETRY_AFTER, secs.to_string())],
            )
                .into_response(),
            None,
        ),
        (Some("redirect"), _) => (
            (
                StatusCode::FOUND,
                [(header::LOCATION, "http://127.0.0.1:1/internal")],
            )
                .into_response(),
            None,
        ),
        (Some("big"), _) => (big_body(), None),
        (Some("slow"), Some(ms)) => (
            status(StatusCode::OK),
            Some(Duration::from_millis(ms.parse().unwrap_or(0))),
        ),
        (Some("hang"), _) => (status(StatusCode::OK), Some(Duration::from_secs(3600))),
        _ => s.fault(),
    };
    let answered = if hold.is_some_and(|d| d >= Duration::from_secs(3)) {
        0
    } else {
        answer.status().as_u16()
    };
    s.received
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(Received {
            path: format!("/hooks/{rest}"),
            webhook_id,
            webhook_timestamp: header_text(&headers, "webhook-timestamp"),
            webhook_signature: header_text(&headers, "webhook-signature"),
            body: String::from_utf8_lossy(&body).into_owned(),
            answered,
        });
    if let Some(d) = hold {
        tokio::time::sleep(d).await;
    }
    answer
}

impl Sink {
    /// The seeded answer of a `/hooks/ok` delivery.
    fn fault(&self) -> (Response, Option<Duration>) {
        if self.cfg.fault_rate <= 0.0 {
            return (status(StatusCode::OK), None);
        }
        let (hit, kind) = {
            let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
            (
                rng.random::<f64>() < self.cfg.fault_rate,
                rng.random_range(0..4u8),
            )
        };
        if !hit {
            return (status(StatusCode::OK), None);
        }
        match kind {
            0 => (status(StatusCode::INTERNAL_SERVER_ERROR), None),
            1 => (status(StatusCode::SERVICE_UNAVAILABLE), None),
            2 => (status(StatusCode::OK), Some(Duration::from_secs(3))),
            _ => (status(StatusCode::OK), Some(Duration::from_millis(500))),
        }
    }
}

fn status(s: StatusCode) -> Response {
    (s, s.canonical_reason().unwrap_or("")).into_response()
}

/// A 500 whose body is 50 MB, streamed in 64 KiB chunks.
fn big_body() -> Response {
    let chunk = Bytes::from(vec![b'x'; 64 * 1024]);
    let stream =
        futures_util::stream::iter((0..800).map(move |_| Ok::<_, std::io::Error>(chunk.clone())));
    Response::builder()
        .status(StatusCode::INTERNAL_SERVER_ERROR)
        .body(Body::from_stream(stream))
        .unwrap_or_else(|_| status(StatusCode::INTERNAL_SERVER_ERROR))
}

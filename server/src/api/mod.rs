//! HTTP: the merchant API (`/v1/*`), channel callbacks, `/health` and `/metrics`
//! (DESIGN.md "Merchant HTTP API"). Handlers are thin: they validate, call a
//! [`Core`](crate::service::Core) use case and shape the answer.

mod auth;
mod callbacks;
mod health;
pub mod idempotency;
mod payments;
mod refunds;
mod views;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::StatusCode;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;

use crate::config::Settings;
use crate::error::ApiError;
use crate::service::Core;

/// Shared state of the HTTP layer.
#[derive(Clone)]
pub struct AppState {
    /// The use cases.
    pub core: Core,
    /// Settings the process started with.
    pub settings: Arc<Settings>,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// HMAC secret of channel callbacks.
    pub callback_secret: Arc<Vec<u8>>,
    /// Console sign-in machinery.
    pub auth: Arc<crate::ops::auth::Auth>,
    /// Bulk retries per user ([`crate::ops::actions::BULK_RETRIES_PER_MINUTE`] a minute):
    /// one operator cannot flood the channel by confirming selections in a loop.
    pub bulk_limiter: Arc<std::sync::Mutex<crate::domain::ratelimit::RateLimiter>>,
    /// The audit checkpoint signing key (`--audit-signing-key`), when one was given.
    pub audit_key: Option<Arc<ed25519_dalek::SigningKey>>,
}

/// The backend's routes with their state applied: `/v1/*`, `/health`, `/metrics`.
/// The `converge` binary merges the console's routes into this router; request tracing is
/// added around the whole ([`with_trace`]).
pub fn router(state: AppState) -> Router {
    let merchant = Router::new()
        .route("/payments", post(payments::create))
        .route("/payments/{id}", get(payments::show))
        .route("/payments/{id}/refunds", post(refunds::create))
        .route_layer(from_fn_with_state(state.clone(), idempotency::layer))
        .route_layer(from_fn_with_state(state.clone(), auth::merchant));
    let v1 = merchant
        .route("/channel/callbacks", post(callbacks::receive))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.settings.body_limit));
    Router::new()
        .nest("/v1", v1)
        // `/v1/` itself is not inside the nest; without these it would reach the console's
        // HTML 404 instead of the API's JSON one.
        .route("/v1/", axum::routing::any(not_found))
        .route("/v1", axum::routing::any(not_found))
        .nest(
            "/ops/v1",
            crate::ops::routes()
                .fallback(not_found)
                .method_not_allowed_fallback(method_not_allowed),
        )
        .route("/health", get(health::health))
        .route("/metrics", get(health::metrics))
        .with_state(state)
}

/// `router` with one request span and one log line per request (method, path, route, status,
/// latency; error level for a 5xx) and the request-duration histogram. Applied once, around the merged router
/// (`startup`): a layer on the backend's router alone missed the console's routes merged
/// after it, and one on each part would log a request twice.
pub fn with_trace(router: Router) -> Router {
    router.layer(
        TraceLayer::new_for_http()
            .make_span_with(|req: &Request| {
                let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_owned());
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), route = route.as_deref().unwrap_or("-"))
            })
            .on_response(|resp: &axum::response::Response, latency: std::time::Duration, _span: &tracing::Span| {
                let (status, latency_ms) = (resp.status().as_u16(), latency.as_millis() as u64);
                if resp.status().is_server_error() {
                    tracing::error!(status, latency_ms, "response");
                } else {
                    tracing::info!(status, latency_ms, "response");
                }
                metrics::histogram!("converge_http_request_seconds").record(latency.as_secs_f64());
            })
            // A 5xx is already the response line above, at error level; only a failure with
            // no status (a response body that broke off) gets a line of its own.
            .on_failure(|class: ServerErrorsFailureClass, latency: std::time::Duration, _span: &tracing::Span| {
                if let ServerErrorsFailureClass::Error(error) = class {
                    tracing::error!(%error, latency_ms = latency.as_millis() as u64, "response failed");
                }
            }),
    )
}

async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "method not allowed on this route",
    )
}

//! HTTP: the merchant API (`/v1/*`), channel callbacks, `/health` and `/metrics`
//! (DESIGN.md "Merchant HTTP API"). Handlers are thin: they validate, call a
//! [`Core`](crate::service::Core) use case and shape the answer.

mod auth;
mod callbacks;
mod health;
pub mod openapi;
mod payments;
mod refunds;
mod webhooks;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{Method, StatusCode, header};
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;

use crate::telemetry::TraceId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::config::Settings;
use crate::error::ApiError;
use crate::idempotency::layer::KeyLayer;
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
    /// Webhook endpoint recoveries per user
    /// ([`crate::ops::webhooks::RECOVERIES_PER_MINUTE`] a minute).
    pub recover_limiter: Arc<std::sync::Mutex<crate::domain::ratelimit::RateLimiter>>,
    /// The audit checkpoint signing key (`--audit-signing-key`), when one was given.
    pub audit_key: Option<Arc<ed25519_dalek::SigningKey>>,
    /// The live console's change watcher and its subscribers (`GET /ops/v1/live`).
    pub live: Arc<crate::ops::live::LiveHub>,
}

/// The backend's routes with their state applied: `/v1/*`, `/ops/v1/*`, `/health`,
/// `/metrics`, and the OpenAPI document of the first three at `/openapi.json` with its
/// reference page at `/openapi` ([`openapi`]). The `converge` binary merges the console's
/// routes into this router; request tracing is added around the whole ([`with_trace`]).
pub fn router(state: AppState) -> Router {
    // Each route is registered with its `#[utoipa::path]` documentation (utoipa-axum), so the
    // document lists exactly the routes served.
    let (v1, merchant_doc) = OpenApiRouter::new()
        .routes(routes!(payments::create))
        .routes(routes!(payments::show))
        .routes(routes!(refunds::create))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::show, webhooks::delete))
        .routes(routes!(webhooks::rotate_secret))
        .route_layer(from_fn_with_state(
            KeyLayer::new(state.core.clone(), &state.settings),
            crate::idempotency::layer::layer,
        ))
        .route_layer(from_fn_with_state(state.clone(), auth::merchant))
        .routes(routes!(callbacks::receive))
        .split_for_parts();
    let (root, root_doc) = OpenApiRouter::new()
        .routes(routes!(health::health))
        .split_for_parts();
    let (ops, ops_doc) = crate::ops::routes().split_for_parts();
    let doc = openapi::document(merchant_doc, ops_doc, root_doc);
    let doc = openapi::to_json(&doc);
    let doc_json: Arc<str> = serde_json::to_string_pretty(&doc)
        .expect("a JSON value serializes")
        .into();
    let reference: Arc<str> = openapi::reference_html(&doc).into();
    let v1 = v1
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
            ops.fallback(not_found)
                .method_not_allowed_fallback(method_not_allowed),
        )
        .merge(root)
        .route("/metrics", get(health::metrics))
        .route(
            "/openapi.json",
            get(move || async move {
                (
                    [(header::CONTENT_TYPE, "application/json")],
                    doc_json.to_string(),
                )
            }),
        )
        .route(
            "/openapi",
            get(move || async move { axum::response::Html(reference.to_string()) }),
        )
        .with_state(state)
}

/// `router` with one request span and one log line per request (method, path, route, status,
/// latency; error level for a 5xx) and the request-duration histogram
/// ([`crate::telemetry::HTTP_REQUEST_DURATION`]). Applied once, around the merged router
/// (`startup`): a layer on the backend's router alone missed the console's routes merged
/// after it, and one on each part would log a request twice.
pub fn with_trace(router: Router) -> Router {
    router
        .layer(axum::middleware::from_fn(record_latency))
        .layer(
        TraceLayer::new_for_http()
            .make_span_with(|req: &Request| {
                let route = req.extensions().get::<MatchedPath>().map(|m| m.as_str().to_owned());
                let trace = req.extensions().get::<TraceId>().map_or("-", TraceId::as_str);
                tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), route = route.as_deref().unwrap_or("-"), trace_id = %trace)
            })
            .on_response(|resp: &axum::response::Response, latency: std::time::Duration, _span: &tracing::Span| {
                let (status, latency_ms) = (resp.status().as_u16(), latency.as_millis() as u64);
                if resp.status().is_server_error() {
                    tracing::error!(status, latency_ms, "response");
                } else {
                    tracing::info!(status, latency_ms, "response");
                }
            })
            // A 5xx is already the response line above, at error level; only a failure with
            // no status (a response body that broke off) gets a line of its own.
            .on_failure(|class: ServerErrorsFailureClass, latency: std::time::Duration, _span: &tracing::Span| {
                if let ServerErrorsFailureClass::Error(error) = class {
                    tracing::error!(%error, latency_ms = latency.as_millis() as u64, "response failed");
                }
            }),
    )
        .layer(axum::middleware::from_fn(trace_context))
}

/// The request's trace ([`TraceId`]): the incoming W3C `traceparent` header's trace id, or a
/// new one when it has none or a malformed one (W3C Trace Context §3.2.2: start a new trace).
/// The handler and everything it calls run in it, so the events, jobs and audit records the
/// request writes carry the id, and the request's span and log lines show it.
async fn trace_context(mut req: Request, next: axum::middleware::Next) -> axum::response::Response {
    let trace = req
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
        .and_then(TraceId::from_traceparent)
        .unwrap_or_else(TraceId::random);
    req.extensions_mut().insert(trace.clone());
    crate::telemetry::in_trace(trace, next.run(req)).await
}

/// Records [`crate::telemetry::HTTP_REQUEST_DURATION`] for one request. `Router::layer` wraps
/// each route, so the matched route template is known here; a request no route matched is
/// `route="unmatched"`. Methods outside the standard set are `method="other"`, so a client
/// cannot grow the label set without bound.
async fn record_latency(req: Request, next: axum::middleware::Next) -> axum::response::Response {
    let start = std::time::Instant::now();
    let method = match *req.method() {
        Method::GET => "get",
        Method::HEAD => "head",
        Method::POST => "post",
        Method::PUT => "put",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        Method::OPTIONS => "options",
        Method::TRACE => "trace",
        Method::CONNECT => "connect",
        _ => "other",
    };
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |m| m.as_str().to_owned());
    let resp = next.run(req).await;
    metrics::histogram!(
        crate::telemetry::HTTP_REQUEST_DURATION,
        "method" => method,
        "route" => route,
        "status" => resp.status().as_str().to_owned()
    )
    .record(start.elapsed().as_secs_f64());
    resp
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

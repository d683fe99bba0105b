//! HTTP: the merchant API (`/v1/*`), channel callbacks, `/health` and `/metrics`
//! (DESIGN.md "Merchant HTTP API"). Handlers are thin: they validate, call a
//! [`Core`](crate::service::Core) use case and shape the answer.

mod auth;
mod callbacks;
mod health;
mod holds;
pub mod idempotency;
pub mod openapi;
mod payments;
pub mod ratelimit;
mod refunds;
mod tcc;
mod webhooks;

use converge_wire::ErrorCode;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request};
use axum::http::{Method, StatusCode};
use axum::middleware::from_fn_with_state;
use axum::routing::get;
use metrics_exporter_prometheus::PrometheusHandle;
use tower_http::classify::ServerErrorsFailureClass;
use tower_http::trace::TraceLayer;

use crate::telemetry::TraceId;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::api::idempotency::KeyLayer;
use crate::config::IdempotencySettings;
use crate::error::ApiError;
use crate::service::Core;

/// What the merchant API's handlers share: the use cases, its own settings (body limit,
/// Idempotency-Keys), the `/metrics` renderer and the callback secret. The console's state is
/// [`crate::ops::OpsState`]; [`crate::http::router`] serves both side by side, so neither
/// adapter names the other's state.
#[derive(Clone)]
pub struct ApiState {
    /// The use cases.
    pub core: Core,
    /// Largest request body accepted, bytes (`--body-limit`).
    pub body_limit: usize,
    /// Idempotency-Keys: claim lease and retention.
    pub keys: IdempotencySettings,
    /// Renders `/metrics`.
    pub metrics: PrometheusHandle,
    /// HMAC secret of channel callbacks.
    pub callback_secret: Arc<Vec<u8>>,
    /// The rate limit per API key, this process's buckets ([`ratelimit`]).
    pub limiter: Arc<ratelimit::MerchantLimiter>,
}

/// The merchant API's routes (`/v1/*`, channel callbacks included), with merchant
/// authentication and the Idempotency-Key layer, and their OpenAPI document. Each route is
/// registered with its `#[utoipa::path]` documentation (utoipa-axum), so the document lists
/// exactly the routes served.
pub fn merchant_routes(state: &ApiState) -> (Router<ApiState>, utoipa::openapi::OpenApi) {
    let (v1, doc) = OpenApiRouter::new()
        .routes(routes!(payments::create))
        .routes(routes!(payments::show))
        .routes(routes!(refunds::create))
        .routes(routes!(holds::capture))
        .routes(routes!(holds::void))
        .routes(routes!(holds::cancel))
        .routes(routes!(tcc::cancel_order))
        .routes(routes!(webhooks::create, webhooks::list))
        .routes(routes!(webhooks::show, webhooks::delete))
        .routes(routes!(webhooks::rotate_secret))
        .route_layer(from_fn_with_state(
            KeyLayer::new(state.core.clone(), &state.keys, state.body_limit),
            crate::api::idempotency::layer,
        ))
        // After authentication (it limits per key), before the Idempotency-Key layer (a
        // refused request claims no key).
        .route_layer(from_fn_with_state(state.clone(), ratelimit::layer))
        .route_layer(from_fn_with_state(state.clone(), auth::merchant))
        .routes(routes!(callbacks::receive))
        .routes(routes!(callbacks::receive_for_connector))
        .split_for_parts();
    let v1 = v1
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(state.body_limit));
    (v1, doc)
}

/// `/health` and its document, and `/metrics` (not documented: Prometheus text).
pub fn root_routes() -> (Router<ApiState>, utoipa::openapi::OpenApi) {
    let (root, doc) = OpenApiRouter::new()
        .routes(routes!(health::health))
        .split_for_parts();
    (root.route("/metrics", get(health::metrics)), doc)
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
                // An error's internal cause is logged here, once, in the request's span.
                let cause = resp.extensions().get::<crate::error::ErrorCause>().map(|c| c.0.as_str());
                match (resp.status().is_server_error(), cause) {
                    (true, Some(cause)) => tracing::error!(status, latency_ms, cause, "response"),
                    (true, None) => tracing::error!(status, latency_ms, "response"),
                    (false, Some(cause)) => tracing::warn!(status, latency_ms, cause, "response"),
                    (false, None) => tracing::info!(status, latency_ms, "response"),
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

/// 404 `not_found` for a path no route serves (JSON, as every API answer).
pub async fn not_found() -> ApiError {
    ApiError::not_found("route")
}

/// 405 `method_not_allowed` for a route served with other methods.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::MethodNotAllowed,
        "method not allowed on this route",
    )
}

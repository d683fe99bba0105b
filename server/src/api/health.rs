//! `GET /health` (liveness + database) and `GET /metrics` (Prometheus text format).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::json;

use super::AppState;

/// 200 `{"status":"ok","database":{"backend","reachable":true}}`, or 503 with
/// `"status":"unavailable"` and `"reachable":false` when the database does not answer or its
/// SQLite file was deleted ([`Store::health`](crate::store::Store::health)).
pub async fn health(State(st): State<AppState>) -> impl IntoResponse {
    let backend = st.core.store.backend();
    match st.core.store.health().await {
        Ok(()) => (
            StatusCode::OK,
            Json(json!({"status": "ok", "database": {"backend": backend, "reachable": true}})),
        ),
        Err(e) => {
            tracing::error!(error = %e, "health check: database unreachable");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(
                    json!({"status": "unavailable", "database": {"backend": backend, "reachable": false}}),
                ),
            )
        }
    }
}

/// Prometheus text exposition of every converge metric.
pub async fn metrics(State(st): State<AppState>) -> impl IntoResponse {
    st.metrics.run_upkeep();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(),
    )
}

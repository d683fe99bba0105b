//! `GET /health` (liveness + database) and `GET /metrics` (Prometheus text format).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::ApiState;

/// The answer of `GET /health`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"status": "ok", "database": {"backend": "sqlite", "reachable": true}}))]
pub struct HealthView {
    /// `ok`, or `unavailable` when the database does not answer.
    #[schema(schema_with = health_status_schema)]
    status: &'static str,
    /// The database.
    database: DatabaseHealth,
}

/// The database part of [`HealthView`].
#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseHealth {
    /// Which database.
    backend: crate::store::Backend,
    /// Whether it answered.
    reachable: bool,
}

fn health_status_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(["ok", "unavailable"]))
        .build()
}

/// 200 `{"status":"ok","database":{"backend","reachable":true}}`, or 503 with
/// `"status":"unavailable"` and `"reachable":false` when the database does not answer or its
/// SQLite file was deleted ([`Store::health`](crate::store::Store::health)).
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    operation_id = "health",
    summary = "Liveness and database reachability",
    responses(
        (status = 200, description = "Serving, and the database answers", body = HealthView),
        (status = 503, description = "The database does not answer", body = HealthView,
            example = json!({"status": "unavailable", "database": {"backend": "postgres", "reachable": false}}))
    )
)]
pub async fn health(State(st): State<ApiState>) -> (StatusCode, Json<HealthView>) {
    let backend = st.core.store.backend();
    let (status, reachable) = match st.core.store.health().await {
        Ok(()) => (StatusCode::OK, true),
        Err(e) => {
            tracing::error!(error = %e, "health check: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, false)
        }
    };
    let view = HealthView {
        status: if reachable { "ok" } else { "unavailable" },
        database: DatabaseHealth { backend, reachable },
    };
    (status, Json(view))
}

/// Prometheus text exposition of every converge metric.
pub async fn metrics(State(st): State<ApiState>) -> impl IntoResponse {
    st.metrics.run_upkeep();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(),
    )
}

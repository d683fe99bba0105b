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
#[schema(example = json!({"status": "ok", "database": {"backend": "sqlite", "reachable": true, "writable": true, "reconnects": 0}}))]
pub struct HealthView {
    /// `ok`; `read_only` when the database answers but takes no writes (a PostgreSQL standby
    /// or a primary not yet promoted: a failover in progress); `unavailable` when it does not
    /// answer.
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
    /// Whether it takes writes ([`Store::writable`](crate::store::Store::writable)); false
    /// when it did not answer.
    writable: bool,
    /// Statements of this process, since it started, that found the database unavailable
    /// and were retried on a new connection ([`UNAVAILABLE_ERRORS`](crate::store::UNAVAILABLE_ERRORS)):
    /// its reconnects.
    reconnects: u64,
}

fn health_status_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(["ok", "read_only", "unavailable"]))
        .build()
}

/// 200 `{"status":"ok","database":{"backend","reachable":true,"writable":true}}`; 503 with
/// `"status":"unavailable"` and `"reachable":false` when the database does not answer or its
/// SQLite file was deleted ([`Store::health`](crate::store::Store::health)); 503 with
/// `"status":"read_only"` and `"writable":false` when it answers but takes no writes, so a
/// load balancer sends no request to a server whose database is failing over (issue 40).
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    operation_id = "health",
    summary = "Liveness and database reachability",
    responses(
        (status = 200, description = "Serving, and the database answers and takes writes", body = HealthView),
        (status = 503, description = "The database does not answer, or takes no writes (read_only)", body = HealthView,
            example = json!({"status": "unavailable", "database": {"backend": "postgres", "reachable": false, "writable": false, "reconnects": 3}}))
    )
)]
pub async fn health(State(st): State<ApiState>) -> (StatusCode, Json<HealthView>) {
    let backend = st.core.store.backend();
    let store = &st.core.store;
    let answer = match store.health().await {
        Ok(()) => store.writable().await,
        Err(e) => Err(e),
    };
    let (code, status, reachable, writable) = match answer {
        Ok(true) => (StatusCode::OK, "ok", true, true),
        Ok(false) => (StatusCode::SERVICE_UNAVAILABLE, "read_only", true, false),
        Err(e) => {
            tracing::error!(error = %e, "health check: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable", false, false)
        }
    };
    let view = HealthView {
        status,
        database: DatabaseHealth {
            backend,
            reachable,
            writable,
            reconnects: crate::store::UNAVAILABLE_ERRORS.load(std::sync::atomic::Ordering::Relaxed),
        },
    };
    (code, Json(view))
}

/// Prometheus text exposition of every converge metric.
pub async fn metrics(State(st): State<ApiState>) -> impl IntoResponse {
    st.metrics.run_upkeep();
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        st.metrics.render(),
    )
}

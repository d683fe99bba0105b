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
#[schema(example = json!({"status": "ok", "database": {"backend": "postgres", "reachable": true, "role": "primary", "writable": true, "reconnects": 1, "unavailable_errors": 7}}))]
pub struct HealthView {
    /// `ok`; `read_only` when the database answers but takes no writes (a PostgreSQL standby
    /// or a primary not yet promoted: a failover in progress); `unavailable` when it does not
    /// answer.
    #[schema(schema_with = health_status_schema)]
    status: &'static str,
    /// The database.
    database: DatabaseHealth,
}

/// The database part of [`HealthView`] (issue 40: the database's role and the reconnects).
#[derive(Debug, Serialize, ToSchema)]
pub struct DatabaseHealth {
    /// Which database.
    backend: crate::store::Backend,
    /// Whether it answered.
    reachable: bool,
    /// `primary` or `standby` (PostgreSQL in recovery) as this process's writer connection
    /// sees it ([`Store::role`](crate::store::Store::role)); absent when it did not answer.
    /// SQLite is always `primary`.
    #[schema(schema_with = role_schema)]
    #[serde(skip_serializing_if = "Option::is_none")]
    role: Option<&'static str>,
    /// Whether it takes writes; false when it did not answer.
    writable: bool,
    /// Connections this process opened after finding the database unavailable, since it
    /// started: one per recovery ([`RECONNECTS`](crate::store::RECONNECTS)).
    reconnects: u64,
    /// Statements of this process, since it started, that found the database unavailable
    /// ([`UNAVAILABLE_ERRORS`](crate::store::UNAVAILABLE_ERRORS)).
    unavailable_errors: u64,
}

fn health_status_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(["ok", "read_only", "unavailable"]))
        .build()
}

fn role_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(["primary", "standby"]))
        .build()
}

/// 200 `{"status":"ok","database":{"backend","reachable":true,"role":"primary","writable":true,
/// "reconnects","unavailable_errors"}}`; 503 with `"status":"unavailable"` and
/// `"reachable":false` when the database does not answer or its SQLite file was deleted; 503
/// with `"status":"read_only"` and `"writable":false` when it answers but takes no writes, so
/// a load balancer sends no request to a server whose database is failing over (issue 40).
/// One round trip ([`Store::role`](crate::store::Store::role)).
#[utoipa::path(
    get,
    path = "/health",
    tag = "health",
    operation_id = "health",
    summary = "Liveness and database reachability",
    responses(
        (status = 200, description = "Serving, and the database answers and takes writes", body = HealthView),
        (status = 503, description = "The database does not answer, or takes no writes (read_only)", body = HealthView,
            example = json!({"status": "unavailable", "database": {"backend": "postgres", "reachable": false, "writable": false, "reconnects": 0, "unavailable_errors": 3}}))
    )
)]
pub async fn health(State(st): State<ApiState>) -> (StatusCode, Json<HealthView>) {
    let store = &st.core.store;
    let (code, status, role) = match store.role().await {
        Ok(r) if r.writable => (StatusCode::OK, "ok", Some(r)),
        Ok(r) => (StatusCode::SERVICE_UNAVAILABLE, "read_only", Some(r)),
        Err(e) => {
            tracing::error!(error = %e, "health check: database unreachable");
            (StatusCode::SERVICE_UNAVAILABLE, "unavailable", None)
        }
    };
    let view = HealthView {
        status,
        database: DatabaseHealth {
            backend: store.backend(),
            reachable: role.is_some(),
            role: role.map(|r| if r.standby { "standby" } else { "primary" }),
            writable: role.is_some_and(|r| r.writable),
            reconnects: crate::store::RECONNECTS.load(std::sync::atomic::Ordering::Relaxed),
            unavailable_errors: crate::store::UNAVAILABLE_ERRORS
                .load(std::sync::atomic::Ordering::Relaxed),
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

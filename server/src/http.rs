//! The process's HTTP surface, above both adapters: the merchant API ([`crate::api`], with
//! [`ApiState`]) and the console's backend ([`crate::ops`], with [`OpsState`]) side by side,
//! with the one OpenAPI document of both. Neither adapter imports the other's state; only
//! this module sees both.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::routing::get;

use crate::api::{ApiState, method_not_allowed, not_found, openapi};
use crate::ops::OpsState;

/// The backend's routes with their states applied: `/v1/*`, `/ops/v1/*`, `/health`,
/// `/metrics`, and the OpenAPI document of the first three at `/openapi.json` with its
/// reference page at `/openapi` ([`openapi`]). The `converge` binary merges the console's
/// pages into this router; request tracing is added around the whole
/// ([`crate::api::with_trace`]).
pub fn router(api: ApiState, ops: OpsState) -> Router {
    let (v1, merchant_doc) = crate::api::merchant_routes(&api);
    let (root, root_doc) = crate::api::root_routes();
    let (console, ops_doc) = crate::ops::routes().split_for_parts();
    let doc = openapi::document(merchant_doc, ops_doc, root_doc, crate::ops::session::COOKIE);
    let doc = openapi::to_json(&doc);
    let doc_json: Arc<str> = serde_json::to_string_pretty(&doc)
        .expect("a JSON value serializes")
        .into();
    let reference: Arc<str> = openapi::reference_html(&doc).into();
    let console = console
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(ops);
    Router::new()
        .nest("/v1", v1)
        // `/v1/` itself is not inside the nest; without these it would reach the console's
        // HTML 404 instead of the API's JSON one.
        .route("/v1/", axum::routing::any(not_found))
        .route("/v1", axum::routing::any(not_found))
        .nest("/ops/v1", console)
        .merge(root)
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
        .with_state(api)
}

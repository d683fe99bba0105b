//! `POST /charges/{key}/disputes`: a card holder's dispute of a charge (a chargeback; issue
//! 38), so the core's handling of disputes is tested against the sandbox as well as Stripe's
//! webhooks (localstripe has no disputes).

use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::SandboxState;
use super::callbacks::CallbackEvent;
use super::handlers::{invalid, reply};
use super::store::QueryStep;

/// The dispute asked for.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DisputeRequest {
    /// The card network's reason (default `fraudulent`), at most 64 bytes.
    #[serde(default)]
    reason: Option<String>,
    /// How it ends, if it does now: `won` or `lost`.
    #[serde(default)]
    outcome: Option<String>,
}

/// Opens a dispute of the successful charge under `key` and sends its callbacks.
pub async fn open_dispute(
    State(s): State<SandboxState>,
    Path(key): Path<String>,
    body: Result<Json<DisputeRequest>, JsonRejection>,
) -> Response {
    let req = match body {
        Ok(Json(r)) => r,
        Err(e) => return invalid(e.body_text()),
    };
    let reason = req.reason.unwrap_or_else(|| "fraudulent".into());
    if reason.is_empty() || reason.len() > 64 || reason.chars().any(char::is_control) {
        return invalid("reason must be 1 to 64 bytes without control characters");
    }
    let closing = match req.outcome.as_deref() {
        None => None,
        Some("won") => Some("dispute.won"),
        Some("lost") => Some("dispute.lost"),
        Some(other) => return invalid(format!("outcome must be won or lost, not {other:?}")),
    };
    let charge = match s.inner.store.query(&key).await {
        Ok(QueryStep::Charge(c)) if c.succeeded() => c,
        Ok(_) => return reply(StatusCode::NOT_FOUND, json!({"status": "not_found"})),
        Err(e) => return super::handlers::store_error(e),
    };
    let dispute_id = format!("dp_{}", &hex::encode(Sha256::digest(key.as_bytes()))[..20]);
    let at = s.inner.cfg.clock.now_ms().div_euclid(1000);
    let event = |kind: &'static str| {
        let mut ev = CallbackEvent::new(kind, kind, &key, charge.amount, &charge.currency, at);
        ev.dispute_id = Some(dispute_id.clone());
        ev.reason = Some(reason.clone());
        ev
    };
    let mut events = vec![event("dispute.opened")];
    events.extend(closing.map(event));
    s.inner.callbacks.schedule(events);
    reply(
        StatusCode::ACCEPTED,
        json!({"dispute_id": dispute_id, "status": "opened"}),
    )
}

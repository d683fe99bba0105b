//! The sandbox's authorization-hold endpoints (protocol on [`super::router`]): authorize,
//! capture, void and query, each idempotent on its key.

use std::time::Duration;

use axum::Json;
use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::SandboxState;
use super::behaviour::Behaviour;
use super::callbacks::{CallbackEvent, events_for};
use super::dropped::BrokenBody;
use super::handlers::{bad_key, invalid, key_ok, reply, store_error};
use super::holds::{AuthorizeStep, CaptureStep, HoldQueryStep, StoredHold, VoidStep};

/// Hold lifetime when the request names none: 7 days, as card networks hold.
pub const DEFAULT_TTL_SECS: i64 = 7 * 86_400;
/// Longest hold the sandbox grants: 31 days.
pub const MAX_TTL_SECS: i64 = 31 * 86_400;

#[derive(Deserialize)]
pub struct AuthorizeRequest {
    key: String,
    amount: i64,
    currency: String,
    ttl_secs: Option<i64>,
}

#[derive(Deserialize)]
pub struct CaptureRequest {
    capture_key: String,
    amount: i64,
    #[serde(default)]
    r#final: bool,
}

fn hold_body(h: &StoredHold, now_ms: i64) -> Value {
    let mut body = json!({
        "status": h.state(now_ms), "key": h.key, "amount": h.amount, "captured": h.captured,
        "currency": h.currency, "expires_at_ms": h.expires_ms,
    });
    if let Some(r) = &h.reason {
        body["reason"] = json!(r);
    }
    body
}

fn authorize_answer(h: &StoredHold) -> Response {
    if h.status == "declined" {
        return reply(
            StatusCode::PAYMENT_REQUIRED,
            json!({"status": "declined", "reason": h.reason.as_deref().unwrap_or("declined")}),
        );
    }
    reply(
        StatusCode::OK,
        json!({"status": "authorized", "key": h.key, "amount": h.amount, "currency": h.currency, "expires_at_ms": h.expires_ms}),
    )
}

/// `POST /authorizations`.
pub async fn authorize(
    State(s): State<SandboxState>,
    body: Result<Json<AuthorizeRequest>, JsonRejection>,
) -> Response {
    let Json(req) = match body {
        Ok(b) => b,
        Err(e) => return invalid(e.body_text()),
    };
    if !key_ok(&req.key) {
        return bad_key();
    }
    if req.amount <= 0 {
        return invalid("amount must be a positive integer of minor units");
    }
    if req.currency.len() != 3 || !req.currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return invalid("currency must be an ISO 4217 code");
    }
    let ttl = req.ttl_secs.unwrap_or(DEFAULT_TTL_SECS);
    if !(1..=MAX_TTL_SECS).contains(&ttl) {
        return invalid(format!("ttl_secs must be 1..={MAX_TTL_SECS}"));
    }
    if let Some(stalled) = s.stalled_submit().await {
        return stalled;
    }
    let (amount, currency) = (req.amount, req.currency.clone());
    // As for charges: the decision runs in its own task so a client hanging up cannot cancel
    // it between the commit and the answer.
    let step = {
        let s = s.clone();
        tokio::spawn(async move {
            let faults = &s.inner.faults;
            let step = s
                .inner
                .store
                .authorize(
                    &req.key,
                    req.amount,
                    &req.currency,
                    ttl * 1000,
                    s.now(),
                    || faults.decide(req.amount),
                )
                .await;
            if let Ok(AuthorizeStep::Committed { hold, behaviour }) = &step {
                s.schedule_hold_callbacks(hold, *behaviour);
            }
            step
        })
        .await
    };
    let step = match step {
        Ok(Ok(step)) => step,
        Ok(Err(e)) => return store_error(e),
        Err(e) => return store_error(e),
    };
    let cfg = &s.inner.cfg;
    match step {
        AuthorizeStep::Existing(h) if h.amount != amount || h.currency != currency => reply(
            StatusCode::CONFLICT,
            json!({"status": "key_mismatch", "amount": h.amount, "currency": h.currency}),
        ),
        // A repeat after the hold moved on (captured, voided, lapsed) is not answered as a
        // fresh hold: 409 with where it stands, which the client leaves to a query.
        AuthorizeStep::Existing(h)
            if h.status != "declined" && h.state(s.now().timestamp_millis()) != "authorized" =>
        {
            let state = h.state(s.now().timestamp_millis());
            reply(StatusCode::CONFLICT, json!({"status": state, "key": h.key}))
        }
        AuthorizeStep::Existing(h) => authorize_answer(&h),
        AuthorizeStep::ChargedKey => reply(StatusCode::CONFLICT, json!({"status": "key_mismatch"})),
        AuthorizeStep::Cancelled => reply(StatusCode::CONFLICT, json!({"status": "cancelled"})),
        AuthorizeStep::Timeout => {
            tokio::time::sleep(Duration::from_millis(cfg.hang_ms)).await;
            reply(StatusCode::GATEWAY_TIMEOUT, json!({"status": "timeout"}))
        }
        AuthorizeStep::Error5xx { attempt } => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"status": "error", "reason": format!("simulated channel error, attempt {attempt}")}),
        ),
        AuthorizeStep::Committed { hold, behaviour } => match behaviour {
            Behaviour::Slow => {
                tokio::time::sleep(Duration::from_millis(cfg.slow_ms)).await;
                authorize_answer(&hold)
            }
            Behaviour::Dropped => Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::new(BrokenBody::new(
                    json!({"status": "authorized", "key": hold.key})
                        .to_string()
                        .into(),
                )))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
            _ => authorize_answer(&hold),
        },
    }
}

/// `GET /authorizations/{key}`.
pub async fn get_hold(State(s): State<SandboxState>, Path(key): Path<String>) -> Response {
    match s.inner.store.query_hold(&key).await {
        Ok(HoldQueryStep::Hold(h)) => {
            reply(StatusCode::OK, hold_body(&h, s.now().timestamp_millis()))
        }
        Ok(HoldQueryStep::Cancelled) => {
            reply(StatusCode::OK, json!({"status": "cancelled", "key": key}))
        }
        Ok(HoldQueryStep::NotFound) => reply(StatusCode::NOT_FOUND, json!({"status": "not_found"})),
        Err(e) => store_error(e),
    }
}

/// `POST /authorizations/{key}/captures`.
pub async fn capture(
    State(s): State<SandboxState>,
    Path(key): Path<String>,
    body: Result<Json<CaptureRequest>, JsonRejection>,
) -> Response {
    let Json(req) = match body {
        Ok(b) => b,
        Err(e) => return invalid(e.body_text()),
    };
    if !key_ok(&key) || !key_ok(&req.capture_key) {
        return bad_key();
    }
    if req.amount <= 0 {
        return reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"status": "rejected", "reason": "amount_not_positive"}),
        );
    }
    // The capture's own amount digits act as a charge's: 53 times out with nothing
    // committed, 52 answers late and 54 drops the connection after committing (the core
    // then finds the capture by a query of the hold).
    let behaviour = Behaviour::for_amount(req.amount);
    let cfg = &s.inner.cfg;
    if behaviour == Behaviour::Timeout {
        tokio::time::sleep(Duration::from_millis(cfg.hang_ms)).await;
        return reply(StatusCode::GATEWAY_TIMEOUT, json!({"status": "timeout"}));
    }
    match s
        .inner
        .store
        .capture(&key, &req.capture_key, req.amount, req.r#final, s.now())
        .await
    {
        Ok(CaptureStep::Captured {
            amount,
            hold,
            fresh,
        }) => {
            if fresh {
                s.schedule_capture_callbacks(&hold, &req.capture_key, amount, behaviour);
            }
            let body = json!({"status": "captured", "key": key, "capture_key": req.capture_key,
                   "amount": amount, "captured": hold.captured, "currency": hold.currency,
                   "closed": hold.closed});
            match behaviour {
                Behaviour::Slow => {
                    tokio::time::sleep(Duration::from_millis(cfg.slow_ms)).await;
                    reply(StatusCode::OK, body)
                }
                Behaviour::Dropped => Response::builder()
                    .status(StatusCode::OK)
                    .header(header::CONTENT_TYPE, "application/json")
                    .body(Body::new(BrokenBody::new(body.to_string().into())))
                    .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response()),
                _ => reply(StatusCode::OK, body),
            }
        }
        Ok(CaptureStep::Rejected(reason)) => reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"status": "rejected", "reason": reason}),
        ),
        Err(e) => store_error(e),
    }
}

/// `POST /authorizations/{key}/void`.
pub async fn void(State(s): State<SandboxState>, Path(key): Path<String>) -> Response {
    if !key_ok(&key) {
        return bad_key();
    }
    match s.inner.store.void(&key, s.now()).await {
        Ok(VoidStep::Voided) => reply(StatusCode::OK, json!({"status": "voided", "key": key})),
        Ok(VoidStep::Expired) => reply(StatusCode::OK, json!({"status": "expired", "key": key})),
        Ok(VoidStep::Rejected(reason)) => reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"status": "rejected", "reason": reason}),
        ),
        Err(e) => store_error(e),
    }
}

impl SandboxState {
    /// The callbacks of a new hold: `authorization.succeeded` (none for a decline), as a
    /// charge's (see [`events_for`]).
    fn schedule_hold_callbacks(&self, h: &StoredHold, behaviour: Behaviour) {
        if h.status == "declined" {
            return;
        }
        let at = self.now().timestamp();
        let ev =
            |kind, label: &str| CallbackEvent::new(kind, label, &h.key, h.amount, &h.currency, at);
        let events = events_for(
            behaviour,
            "authorization.succeeded",
            "authorization.failed",
            ev,
        );
        self.inner.callbacks.schedule(events);
    }

    /// The callbacks of a new capture of `amount` under `capture_key`: `capture.succeeded`
    /// naming it, its event id derived from the capture key so each capture has its own.
    fn schedule_capture_callbacks(
        &self,
        h: &StoredHold,
        capture_key: &str,
        amount: i64,
        behaviour: Behaviour,
    ) {
        let at = self.now().timestamp();
        let ev = |kind, label: &str| CallbackEvent {
            capture_key: Some(capture_key.to_owned()),
            ..CallbackEvent::new(
                kind,
                &format!("capture:{capture_key}:{label}"),
                &h.key,
                amount,
                &h.currency,
                at,
            )
        };
        let events = events_for(behaviour, "capture.succeeded", "capture.failed", ev);
        self.inner.callbacks.schedule(events);
    }
}

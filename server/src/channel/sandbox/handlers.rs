//! The sandbox's HTTP protocol (DESIGN.md "Sandbox channel"); the shapes are documented on
//! [`super::router`].

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
use super::store::{CancelStep, ChargeStep, QueryStep, RefundStep, StoredCharge};

const MAX_KEY_LEN: usize = 255;

#[derive(Deserialize)]
pub struct ChargeRequest {
    key: String,
    amount: i64,
    currency: String,
}

#[derive(Deserialize)]
pub struct RefundRequest {
    refund_key: String,
    charge_key: String,
    amount: i64,
}

pub(super) fn reply(status: StatusCode, body: Value) -> Response {
    (status, Json(body)).into_response()
}

pub(super) fn invalid(reason: impl Into<String>) -> Response {
    reply(
        StatusCode::BAD_REQUEST,
        json!({"status": "invalid", "reason": reason.into()}),
    )
}

pub(super) fn store_error(e: impl std::fmt::Display) -> Response {
    tracing::error!(error = %e, "sandbox: store error");
    reply(
        StatusCode::INTERNAL_SERVER_ERROR,
        json!({"status": "error", "reason": "store error"}),
    )
}

pub(super) fn key_ok(key: &str) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN
}

pub(super) fn bad_key() -> Response {
    invalid(format!("keys must be 1..={MAX_KEY_LEN} bytes"))
}

fn charge_answer(c: &StoredCharge) -> Response {
    if c.succeeded() {
        reply(
            StatusCode::OK,
            json!({"status": "succeeded", "key": c.key, "amount": c.amount, "currency": c.currency}),
        )
    } else {
        reply(
            StatusCode::PAYMENT_REQUIRED,
            json!({"status": "declined", "reason": c.reason.as_deref().unwrap_or("declined")}),
        )
    }
}

/// `POST /charges`.
pub async fn create_charge(
    State(s): State<SandboxState>,
    body: Result<Json<ChargeRequest>, JsonRejection>,
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
    if let Some(stalled) = s.stalled_submit().await {
        return stalled;
    }
    // The decision and callback scheduling run in their own task so a client hanging up
    // mid-request cannot cancel them between the commit and the callback.
    let (amount, currency) = (req.amount, req.currency.clone());
    let step = {
        let s = s.clone();
        tokio::spawn(async move { s.charge_step(&req.key, req.amount, &req.currency).await }).await
    };
    let step = match step {
        Ok(Ok(step)) => step,
        Ok(Err(e)) => return store_error(e),
        Err(e) => return store_error(e),
    };
    let cfg = &s.inner.cfg;
    match step {
        ChargeStep::Existing(c) if c.amount != amount || c.currency != currency => reply(
            StatusCode::CONFLICT,
            json!({"status": "key_mismatch", "amount": c.amount, "currency": c.currency}),
        ),
        ChargeStep::Existing(c) => charge_answer(&c),
        ChargeStep::Cancelled => reply(StatusCode::CONFLICT, json!({"status": "cancelled"})),
        ChargeStep::HeldKey => reply(StatusCode::CONFLICT, json!({"status": "key_mismatch"})),
        ChargeStep::Timeout => {
            tokio::time::sleep(Duration::from_millis(cfg.hang_ms)).await;
            reply(StatusCode::GATEWAY_TIMEOUT, json!({"status": "timeout"}))
        }
        ChargeStep::Error5xx { attempt } => reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            json!({"status": "error", "reason": format!("simulated channel error, attempt {attempt}")}),
        ),
        ChargeStep::Committed { charge, behaviour } => match behaviour {
            Behaviour::Slow => {
                tokio::time::sleep(Duration::from_millis(cfg.slow_ms)).await;
                charge_answer(&charge)
            }
            Behaviour::Dropped => dropped_answer(&charge),
            _ => charge_answer(&charge),
        },
    }
}

/// A 200 whose body breaks off after the headers (see [`BrokenBody`]).
fn dropped_answer(c: &StoredCharge) -> Response {
    let full =
        json!({"status": "succeeded", "key": c.key, "amount": c.amount, "currency": c.currency});
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::new(BrokenBody::new(full.to_string().into())))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

impl SandboxState {
    async fn charge_step(
        &self,
        key: &str,
        amount: i64,
        currency: &str,
    ) -> sqlx::Result<ChargeStep> {
        let now = self.now();
        let faults = &self.inner.faults;
        let step = self
            .inner
            .store
            .charge(key, amount, currency, now, || faults.decide(amount))
            .await?;
        if let ChargeStep::Committed { charge, behaviour } = &step {
            self.schedule_callbacks(charge, *behaviour);
        }
        Ok(step)
    }

    fn schedule_callbacks(&self, c: &StoredCharge, behaviour: Behaviour) {
        if !c.succeeded() {
            return;
        }
        let at = c.charged_ms.div_euclid(1000);
        let ev =
            |kind, label: &str| CallbackEvent::new(kind, label, &c.key, c.amount, &c.currency, at);
        let events = events_for(behaviour, "charge.succeeded", "charge.failed", ev);
        self.inner.callbacks.schedule(events);
    }
}

/// `GET /charges/{key}`.
pub async fn get_charge(State(s): State<SandboxState>, Path(key): Path<String>) -> Response {
    match s.inner.store.query(&key).await {
        Ok(QueryStep::Charge(c)) => {
            let mut body = json!({
                "status": c.status, "key": c.key, "amount": c.amount, "currency": c.currency,
                "charged_at": c.charged_at,
            });
            if let Some(r) = &c.reason {
                body["reason"] = json!(r);
            }
            reply(StatusCode::OK, body)
        }
        Ok(QueryStep::Cancelled) => {
            reply(StatusCode::OK, json!({"status": "cancelled", "key": key}))
        }
        Ok(QueryStep::NotFound) => reply(StatusCode::NOT_FOUND, json!({"status": "not_found"})),
        Err(e) => store_error(e),
    }
}

/// `POST /charges/{key}/cancel`.
pub async fn cancel_charge(State(s): State<SandboxState>, Path(key): Path<String>) -> Response {
    if !key_ok(&key) {
        return bad_key();
    }
    match s.inner.store.cancel(&key, s.now()).await {
        Ok(CancelStep::Cancelled) => reply(StatusCode::OK, json!({"status": "cancelled"})),
        Ok(CancelStep::AlreadyCharged(c)) => reply(
            StatusCode::CONFLICT,
            json!({"status": "succeeded", "amount": c.amount, "currency": c.currency}),
        ),
        Ok(CancelStep::Held) => reply(StatusCode::CONFLICT, json!({"status": "held"})),
        Err(e) => store_error(e),
    }
}

/// `POST /refunds`.
pub async fn create_refund(
    State(s): State<SandboxState>,
    body: Result<Json<RefundRequest>, JsonRejection>,
) -> Response {
    let Json(req) = match body {
        Ok(b) => b,
        Err(e) => return invalid(e.body_text()),
    };
    if !key_ok(&req.refund_key) || !key_ok(&req.charge_key) {
        return bad_key();
    }
    if req.amount <= 0 {
        return reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"status": "rejected", "reason": "amount_not_positive"}),
        );
    }
    match s
        .inner
        .store
        .refund(&req.refund_key, &req.charge_key, req.amount, s.now())
        .await
    {
        Ok(RefundStep::Succeeded) => reply(
            StatusCode::OK,
            json!({"status": "succeeded", "refund_key": req.refund_key, "charge_key": req.charge_key, "amount": req.amount}),
        ),
        Ok(RefundStep::Rejected(reason)) => reply(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"status": "rejected", "reason": reason}),
        ),
        Err(e) => store_error(e),
    }
}

/// `GET /statements/{YYYY-MM-DD}`.
pub async fn statement(State(s): State<SandboxState>, Path(day): Path<String>) -> Response {
    let Ok(date) = chrono::NaiveDate::parse_from_str(&day, "%Y-%m-%d") else {
        return invalid("date must be YYYY-MM-DD");
    };
    // Re-format so "2024-1-2" style inputs match the stored zero-padded day.
    let day = date.format("%Y-%m-%d").to_string();
    let lines = match s.inner.store.statement(&day).await {
        Ok(l) => l,
        Err(e) => return store_error(e),
    };
    let write = || -> Result<Vec<u8>, String> {
        let mut w = csv::Writer::from_writer(Vec::new());
        let e = |e: csv::Error| e.to_string();
        w.write_record(["channel_key", "amount", "currency", "status", "charged_at"])
            .map_err(e)?;
        for l in &lines {
            w.write_record([
                &l.key,
                &l.amount.to_string(),
                &l.currency,
                "succeeded",
                &l.charged_at,
            ])
            .map_err(e)?;
        }
        // The end line lets a reader tell a whole statement from one cut off in transit.
        w.write_record(["#end", &lines.len().to_string(), "", "", ""])
            .map_err(e)?;
        w.into_inner().map_err(|e| e.to_string())
    };
    match write() {
        Ok(bytes) => ([(header::CONTENT_TYPE, "text/csv; charset=utf-8")], bytes).into_response(),
        Err(e) => store_error(e),
    }
}

/// `GET /attempts/{key}`.
pub async fn attempts(State(s): State<SandboxState>, Path(key): Path<String>) -> Response {
    match s.inner.store.attempts(&key).await {
        Ok(Some((n, b))) => reply(
            StatusCode::OK,
            json!({"key": key, "attempts": n, "behaviour": b}),
        ),
        Ok(None) => reply(StatusCode::NOT_FOUND, json!({"status": "not_found"})),
        Err(e) => store_error(e),
    }
}

/// Largest page `GET /charges` returns.
pub const LIST_LIMIT_MAX: i64 = 5_000;

/// Query of `GET /charges`: `after` (a key; the page starts after it) and `limit`
/// (1..=[`LIST_LIMIT_MAX`], default 1000).
#[derive(Deserialize)]
pub struct ListQuery {
    #[serde(default)]
    after: String,
    limit: Option<i64>,
}

/// `GET /charges?after=KEY&limit=N`: every stored charge in key order, for `converge verify`.
pub async fn list_charges(
    State(s): State<SandboxState>,
    query: Result<axum::extract::Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let axum::extract::Query(q) = match query {
        Ok(q) => q,
        Err(e) => return invalid(e.body_text()),
    };
    let limit = q.limit.unwrap_or(1000);
    if !(1..=LIST_LIMIT_MAX).contains(&limit) {
        return invalid(format!("limit must be 1..={LIST_LIMIT_MAX}"));
    }
    match s.inner.store.list_charges(&q.after, limit).await {
        Ok(rows) => {
            let next = (rows.len() as i64 == limit)
                .then(|| rows.last().map(|r| r.key.clone()))
                .flatten();
            let charges: Vec<Value> = rows
                .iter()
                .map(|c| {
                    json!({
                        "key": c.key, "status": c.status, "amount": c.amount, "currency": c.currency,
                        "charged_at": c.charged_at, "attempts": c.attempts, "refunded": c.refunded,
                    })
                })
                .collect();
            reply(StatusCode::OK, json!({"charges": charges, "next": next}))
        }
        Err(e) => store_error(e),
    }
}

/// `GET /stats`.
pub async fn stats(State(s): State<SandboxState>) -> Response {
    match s.inner.store.stats().await {
        Ok(st) => reply(
            StatusCode::OK,
            json!({
                "charges": st.charges, "declines": st.declines, "attempts": st.attempts,
                "faults": s.inner.faults.counts(),
            }),
        ),
        Err(e) => store_error(e),
    }
}

/// `GET /health`.
pub async fn health(State(s): State<SandboxState>) -> Response {
    match s.inner.store.ping().await {
        Ok(()) => reply(StatusCode::OK, json!({"status": "ok"})),
        Err(e) => store_error(e),
    }
}

/// The body of `PUT /faults`: `{"rate": 0..=1, "kind"?: "slow"|"timeout"|"dropped"|"error5xx"}`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FaultRequest {
    rate: f64,
    kind: Option<String>,
}

/// `GET /faults`: the fault setting in force, `{"rate","kind"}`.
pub async fn get_faults(State(s): State<SandboxState>) -> Response {
    reply(StatusCode::OK, json!(s.inner.faults.setting()))
}

/// `PUT /faults`: replaces the fault setting for keys not seen before; answers the new
/// setting, or 400 `{"status":"invalid","reason"}`.
pub async fn put_faults(
    State(s): State<SandboxState>,
    body: Result<Json<FaultRequest>, JsonRejection>,
) -> Response {
    let Json(req) = match body {
        Ok(b) => b,
        Err(e) => return invalid(e.body_text()),
    };
    match super::behaviour::FaultSetting::new(req.rate, req.kind.as_deref()) {
        Ok(setting) => {
            s.inner.faults.set(setting);
            tracing::warn!(rate = setting.rate, kind = ?setting.kind, "sandbox fault setting changed");
            reply(StatusCode::OK, json!(setting))
        }
        Err(reason) => invalid(reason),
    }
}

//! `POST /v1/channel/callbacks`: signed channel notifications (DESIGN.md "Merchant HTTP
//! API": bad signature 401, older than 5 minutes 400, duplicate event id acknowledged once;
//! one being handled right now is 409 `callback_in_progress` with Retry-After, so the channel
//! delivers it again instead of taking a 2xx for an event that may still fail).

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};

use super::AppState;
use crate::channel::signature::{self, SignatureError};
use crate::error::ApiError;
use crate::service::callbacks::{CallbackEvent, CallbackOutcome};

/// Callbacks older than this are refused (seconds).
pub const TOLERANCE_SECS: i64 = 300;

/// Verifies and applies one callback; always 2xx once verified, even when ignored.
pub async fn receive(
    State(st): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let body = body.map_err(crate::error::body_rejection)?;
    let header = headers
        .get(signature::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let now_secs = st.core.clock.now_ms().div_euclid(1000);
    match signature::verify(&st.callback_secret, header, &body, now_secs, TOLERANCE_SECS) {
        Ok(_) => {}
        Err(SignatureError::TooOld) => {
            return Err(ApiError::bad_request(
                "callback_too_old",
                "callback timestamp is outside the 5-minute window",
            ));
        }
        Err(_) => {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "invalid_signature",
                "callback signature does not verify",
            ));
        }
    }
    let event: CallbackEvent = serde_json::from_slice(&body)
        .map_err(|e| ApiError::bad_request("invalid_callback", e.to_string()))?;
    event
        .check()
        .map_err(|why| ApiError::bad_request("invalid_callback", why))?;
    let outcome = st.core.handle_callback(&event).await?;
    let (name, detail) = match outcome {
        CallbackOutcome::Applied(s) => ("applied", s.as_str().to_string()),
        CallbackOutcome::Ignored(why) => ("ignored", why),
        CallbackOutcome::Duplicate => ("duplicate", String::new()),
        CallbackOutcome::InProgress => {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                "callback_in_progress",
                "this event is being handled; deliver it again later",
            )
            .with_retry_after(1));
        }
        CallbackOutcome::UnknownPayment => ("unknown_payment", String::new()),
    };
    Ok(Json(
        json!({"received": true, "outcome": name, "detail": detail}),
    ))
}

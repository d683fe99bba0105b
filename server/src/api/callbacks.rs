//! `POST /v1/channel/callbacks`: signed channel notifications (DESIGN.md "Merchant HTTP
//! API": bad signature 401, older than 5 minutes 400, duplicate event id acknowledged once).
//! A 200 is sent only after the callback's body, claim and decision have committed together
//! (issue 33), so a 2xx never acknowledges an event that may still fail; two deliveries of one
//! event at once are serialised by the store, the second answered `duplicate`.

use axum::Json;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use converge_wire::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use super::ApiState;
use crate::channel::CallbackRejection;
use crate::error::{ApiError, ErrorBody};
use crate::service::callbacks::{CallbackEvent, CallbackOutcome};

/// The acknowledgement of a verified callback.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"received": true, "outcome": "applied", "detail": "CHANNEL_SUCCESS"}))]
pub struct CallbackAck {
    /// Always `true`: the channel may stop delivering this event.
    pub received: bool,
    /// `applied`, `ignored` (stale, late or not decisive), `duplicate` (handled before) or
    /// `unknown_payment`.
    #[schema(schema_with = outcome_schema)]
    pub outcome: &'static str,
    /// The status it moved the payment to, or why it was ignored; empty otherwise.
    pub detail: String,
}

fn outcome_schema() -> utoipa::openapi::Object {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(["applied", "ignored", "duplicate", "unknown_payment"]))
        .build()
}

/// Verifies and applies one callback; always 2xx once verified, even when ignored.
#[utoipa::path(
    post,
    path = "/channel/callbacks",
    tag = "channel",
    operation_id = "receive_channel_callback",
    summary = "Receive a channel callback",
    description = "Notifications from the payment channel, signed with HMAC-SHA256 over `t.body` in the `Converge-Signature` header. A verified event is acknowledged with 200 whatever it did; a repeat of a handled event id is `duplicate`.",
    params(("Converge-Signature" = String, Header, description = "`t=<unix seconds>,v1=<64 lowercase hex digits>`: HMAC-SHA256 of `<t>.<body>` with the callback secret", example = "t=1796101200,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")),
    request_body(content = CallbackEvent, content_type = "application/json"),
    responses(
        (status = 200, description = "Verified and handled (applied, ignored, duplicate or for an unknown payment)", body = CallbackAck),
        (status = 400, description = "Timestamp outside the 5-minute window, or a body that is not a valid event", body = ErrorBody, examples(
            ("callback_too_old" = (value = json!({"error": {"code": "callback_too_old", "message": "callback timestamp is outside the 5-minute window"}}))),
            ("invalid_callback" = (value = json!({"error": {"code": "invalid_callback", "message": "currency must be a 3-letter ISO 4217 code"}})))
        )),
        (status = 401, description = "Missing or wrong signature", body = ErrorBody, example = json!({"error": {"code": "invalid_signature", "message": "callback signature does not verify"}})),
        (status = 413, description = "Body larger than the limit", body = ErrorBody, example = json!({"error": {"code": "body_too_large", "message": "request body is too large"}})),
        (status = 503, description = "Database unavailable; deliver again later", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before delivering again")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn receive(
    State(st): State<ApiState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CallbackAck>, ApiError> {
    let connectors = &st.core.connectors;
    // This route is the default connector's (the sandbox protocol): its connector checks the
    // signature and reads the event (the contract's callbacks, channel/mod.rs).
    let name = connectors.default_name().to_owned();
    apply(&st, &name, &headers, body).await
}

/// Verifies and applies one webhook of the connector `name` in its own protocol (Stripe's
/// `Stripe-Signature` for a Stripe connector); always 2xx once verified, even when ignored.
#[utoipa::path(
    post,
    path = "/connectors/{name}/callbacks",
    tag = "channel",
    operation_id = "receive_connector_callback",
    summary = "Receive a connector's webhook",
    description = "Webhooks of a named connector in its own protocol (issue 38): for a Stripe connector, Stripe events signed in `Stripe-Signature` (`t=<unix seconds>,v1=<hex>`, several `v1` while a secret is rolled, 5-minute tolerance). Events of PaymentIntents that are not converge's are acknowledged as `unknown_payment`; a repeated event id is `duplicate`.",
    params(
        ("name" = String, Path, description = "The connector's name (`converge serve --connector`)", example = "stripe"),
        ("Stripe-Signature" = Option<String>, Header, description = "Stripe's signature header, for a Stripe connector")
    ),
    request_body(content = String, content_type = "application/json", description = "The connector's event, as it sends it"),
    responses(
        (status = 200, description = "Verified and handled", body = CallbackAck),
        (status = 400, description = "Timestamp outside the window, or a body that is not an event of the connector", body = ErrorBody, example = json!({"error": {"code": "invalid_callback", "message": "not a stripe event: expected value at line 1 column 1"}})),
        (status = 401, description = "Missing or wrong signature, or a connector that takes no webhooks", body = ErrorBody, example = json!({"error": {"code": "invalid_signature", "message": "callback signature does not verify"}})),
        (status = 404, description = "No connector of that name", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "no connector named \"stripe\""}})),
        (status = 413, description = "Body larger than the limit", body = ErrorBody, example = json!({"error": {"code": "body_too_large", "message": "request body is too large"}})),
        (status = 503, description = "Database unavailable; deliver again later", body = ErrorBody,
            headers(("Retry-After" = u64, description = "Seconds to wait before delivering again")),
            example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn receive_for_connector(
    State(st): State<ApiState>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CallbackAck>, ApiError> {
    if !st.core.connectors.has(&name) {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("no connector named {name:?}"),
        ));
    }
    apply(&st, &name, &headers, body).await
}

/// The one path of every callback: the connector `name` verifies and reads it, then the core
/// records and applies it (a 200 only after that committed).
async fn apply(
    st: &ApiState,
    name: &str,
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<CallbackAck>, ApiError> {
    let body = body.map_err(crate::error::body_rejection)?;
    let now_secs = st.core.clock.now_ms().div_euclid(1000);
    let connector = st.core.connectors.named(name);
    let mut fact = connector
        .verify_callback(headers, &body, now_secs)
        .map_err(|e| match e {
            CallbackRejection::TooOld => ApiError::bad_request(
                ErrorCode::CallbackTooOld,
                "callback timestamp is outside the 5-minute window",
            ),
            CallbackRejection::Invalid(why) => {
                ApiError::bad_request(ErrorCode::InvalidCallback, why)
            }
            CallbackRejection::BadSignature | CallbackRejection::Unsupported(_) => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::InvalidSignature,
                "callback signature does not verify",
            ),
        })?;
    // A callback that names the payment by the connector's own id (a Stripe dispute, its
    // PaymentIntent) is looked up by the key the connector knows it under; unresolved, it
    // stays under that id: an unknown payment's.
    if let Some(reference) = fact.reference.take()
        && let Some(key) = connector.channel_key_of(&reference).await
    {
        fact.channel_key = key;
    }
    let event = CallbackEvent::from(fact);
    event
        .check()
        .map_err(|why| ApiError::bad_request(ErrorCode::InvalidCallback, why))?;
    // Verified above, so present; kept with the body as the callback's evidence.
    let signature = [
        crate::channel::signature::SIGNATURE_HEADER,
        crate::channel::stripe::STRIPE_SIGNATURE_HEADER,
    ]
    .iter()
    .find_map(|h| headers.get(*h).and_then(|v| v.to_str().ok()))
    .unwrap_or_default();
    let own_route = (name != st.core.connectors.default_name()).then_some(name);
    let outcome = st
        .core
        .handle_callback(&event, &body, signature, own_route)
        .await?;
    let (name, detail) = match outcome {
        CallbackOutcome::Applied(s) => ("applied", s.as_str().to_string()),
        CallbackOutcome::Ignored(why) => ("ignored", why),
        CallbackOutcome::Duplicate => ("duplicate", String::new()),
        CallbackOutcome::UnknownPayment => ("unknown_payment", String::new()),
    };
    Ok(Json(CallbackAck {
        received: true,
        outcome: name,
        detail,
    }))
}

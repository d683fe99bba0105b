//! The Idempotency-Key layer over the merchant POST routes (DESIGN.md "Idempotency
//! contract"; IETF draft-ietf-httpapi-idempotency-key-header; Stripe's documented behaviour):
//! the HTTP side of the contract. The rules it applies are in
//! [`crate::domain::idempotency`], the counting in [`crate::service::outcomes`].
//!
//! It reads the key, fingerprints the body and hands the handler the request's claim
//! ([`KeyClaim`]); it claims nothing itself. Every merchant POST is a use case on the one
//! write path (`service/write.rs`): it claims the key in its own first transaction, records
//! where a retry resumes, stores its answer or releases the key. The layer answers from
//! another request's record (the stored answer byte for byte, 409 in use, 422 reused), which
//! the handler hands back through [`respond`], and counts every outcome.

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, OriginalUri, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;

use crate::config::IdempotencySettings;
use crate::domain::idempotency::{
    HEADER, KeyError, Outcome, REPLAYED, existing_outcome, in_use_retry_after_secs,
    key_from_headers, request_fingerprint,
};
use crate::domain::secret_box::Purpose;
use crate::error::{ApiError, ParsedBody};
use crate::service::Core;
use crate::service::ids::new_token;
use crate::service::write::Written;
use crate::store::Merchant;
use crate::store::keys::{KeyClaim, KeyRecord, StoredResponse};

/// What the layer needs: the core (store, clock, outcome counts) and its settings.
#[derive(Clone)]
pub struct KeyLayer {
    /// The use cases' shared parts.
    pub core: Core,
    /// Largest request body read, in bytes (`--body-limit`).
    pub body_limit: usize,
    /// How long a claim holds before a retry may take it over, in ms (`--key-lease-ms`).
    pub lease_ms: i64,
    /// How long a key is kept, in ms (`--key-retention-secs` × 1000).
    pub retention_ms: i64,
}

impl KeyLayer {
    /// The layer's state from the Idempotency-Key settings and the API's body limit (bytes).
    pub fn new(core: Core, keys: &IdempotencySettings, body_limit: usize) -> Self {
        KeyLayer {
            core,
            body_limit,
            lease_ms: keys.lease_ms(),
            retention_ms: keys.retention_ms(),
        }
    }
}

/// The answer to a request whose key another request holds: 409 `idempotency_key_in_use`
/// with `Retry-After` the whole seconds until that claim's lease (epoch ms UTC) lapses,
/// 1..=60 ([`in_use_retry_after_secs`]; 1 when the lease is not known).
pub fn key_in_use(lease_expires_at: Option<i64>, now: i64) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        ErrorCode::IdempotencyKeyInUse,
        "a request with this Idempotency-Key is still running",
    )
    .with_retry_after(in_use_retry_after_secs(lease_expires_at, now))
}

/// A response extension by which a handler hands back the record of a key another request
/// holds or completed ([`Written::Taken`]): the layer answers from it (replay, in use,
/// reused) and counts that outcome instead of `first`.
#[derive(Debug, Clone)]
struct KeyTaken(Box<KeyRecord>);

/// The response of a merchant write's use case: its answer as stored with the key, or the
/// other request's record for the layer to answer from, or the use case's error.
pub fn respond(written: Result<Written, ApiError>) -> Response {
    match written {
        Ok(Written::Answered(stored)) => stored_response(stored),
        Ok(Written::Taken(rec)) => {
            let mut resp = StatusCode::CONFLICT.into_response();
            resp.extensions_mut().insert(KeyTaken(rec));
            resp
        }
        Err(e) => e.into_response(),
    }
}

/// The HTTP response of a stored answer (without the replay marker).
pub fn stored_response(stored: StoredResponse) -> Response {
    let status = StatusCode::from_u16(stored.status).unwrap_or(StatusCode::OK);
    let mut resp = Response::new(Body::from(stored.body));
    *resp.status_mut() = status;
    for (name, value) in stored.headers {
        if let (Ok(n), Ok(v)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
            resp.headers_mut().insert(n, v);
        }
    }
    resp
}

/// The middleware; GET and other methods pass through.
pub async fn layer(
    State(st): State<KeyLayer>,
    matched: MatchedPath,
    req: Request,
    next: Next,
) -> Response {
    if req.method() != Method::POST {
        return next.run(req).await;
    }
    let Some(merchant) = req.extensions().get::<Merchant>().cloned() else {
        return ApiError::internal("idempotency layer without an authenticated merchant")
            .into_response();
    };
    let route = format!("POST {}", matched.as_str());
    let key = match key_from_headers(
        req.headers()
            .get_all(HEADER)
            .iter()
            .map(HeaderValue::as_bytes),
    ) {
        Ok(k) => k,
        Err(KeyError::Missing) => {
            count(&st, &route, Outcome::Missing);
            return ApiError::bad_request(
                ErrorCode::IdempotencyKeyMissing,
                "POST requests need an Idempotency-Key header",
            )
            .into_response();
        }
        Err(KeyError::Invalid) => {
            count(&st, &route, Outcome::Invalid);
            return ApiError::bad_request(
                ErrorCode::IdempotencyKeyInvalid,
                "Idempotency-Key must be 1 to 255 visible ASCII characters",
            )
            .into_response();
        }
    };
    // The full path, with its ids: this layer runs inside the router nested at `/v1`, where
    // `req.uri()` has the prefix stripped, so the scope must come from the original URI to
    // match the route template (`POST /v1/payments/{id}/refunds`) DESIGN.md scopes keys by.
    let path = req
        .extensions()
        .get::<OriginalUri>()
        .map_or_else(|| req.uri().path(), |u| u.path());
    let scope = format!("POST {path}");
    let (parts, body) = req.into_parts();
    let Ok(bytes) = to_bytes(body, st.body_limit).await else {
        return ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::BodyTooLarge,
            "request body is too large",
        )
        .into_response();
    };
    // Parsed once here: the handler's `ApiJson` takes this parse rather than repeating it.
    let json = serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|e| e.to_string());
    let fp = request_fingerprint(&bytes, json.as_ref().ok());
    let parsed = ParsedBody::new(bytes.clone(), json);
    let now = st.core.clock.now_ms();
    let claim = KeyClaim {
        merchant_id: merchant.id,
        scope: scope.clone(),
        idem_key: key,
        route: route.clone(),
        fingerprint: fp.clone(),
        lease_token: new_token(),
        lease_expires_at: now + st.lease_ms,
        now,
        expires_at: now + st.retention_ms,
    };
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(parsed);
    req.extensions_mut().insert(claim.clone());
    let resp = next.run(req).await;
    finish(&st, &route, &scope, &fp, &claim, resp).await
}

/// Counts and answers what the handler's use case did with the key.
async fn finish(
    st: &KeyLayer,
    route: &str,
    scope: &str,
    fp: &str,
    claim: &KeyClaim,
    mut resp: Response,
) -> Response {
    if let Some(KeyTaken(rec)) = resp.extensions_mut().remove::<KeyTaken>() {
        return answer_existing(st, route, scope, fp, *rec, claim.now).await;
    }
    // A refused request wrote nothing, its claim included. If it was refused before its use
    // case claimed the key (a bad body, say), a stored key answers as a claim would have met
    // it: a replay, in use, or reused with another body.
    if resp.status().is_client_error() {
        match st
            .core
            .store
            .idempotency_key(claim.merchant_id, &claim.idem_key)
            .await
        {
            Ok(Some(rec)) => {
                return answer_existing(st, route, scope, fp, rec, claim.now).await;
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "could not look up the key of a refused request");
            }
        }
    }
    count(st, route, Outcome::First);
    resp
}

async fn answer_existing(
    st: &KeyLayer,
    route: &str,
    scope: &str,
    fp: &str,
    rec: KeyRecord,
    now: i64,
) -> Response {
    let outcome = existing_outcome((&rec.fingerprint, &rec.scope, rec.state), fp, scope);
    count(st, route, outcome);
    record(st, &rec, outcome, now);
    match outcome {
        Outcome::Reused => ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::IdempotencyKeyReused,
            "this Idempotency-Key was used with a different request; use a new key",
        )
        .into_response(),
        Outcome::Replay => replay(st, rec),
        _ => key_in_use(rec.lease_expires_at, now).into_response(),
    }
}

fn replay(st: &KeyLayer, rec: KeyRecord) -> Response {
    let status = rec
        .response_status
        .and_then(|s| u16::try_from(s).ok())
        .filter(|s| StatusCode::from_u16(*s).is_ok());
    let Some(status) = status else {
        return ApiError::internal(format!(
            "stored response of key {} has no status",
            rec.idem_key
        ))
        .into_response();
    };
    let headers: Vec<(String, String)> = rec
        .response_headers
        .as_deref()
        .and_then(|h| serde_json::from_str(h).ok())
        .unwrap_or_default();
    let stored = rec.response_body.unwrap_or_default();
    let body = match st.core.secrets.open_bytes(Purpose::StoredAnswer, &stored) {
        Ok(b) => b.into_owned(),
        Err(e) => {
            return ApiError::internal(format!(
                "stored response of key {} did not open: {e}",
                rec.idem_key
            ))
            .into_response();
        }
    };
    let mut resp = stored_response(StoredResponse {
        status,
        headers,
        body,
    });
    resp.headers_mut()
        .insert(REPLAYED, HeaderValue::from_static("true"));
    resp
}

/// Records, for the key's own page, what a later request with this stored key got (the
/// route-level [`count`] cannot say which key). Counted in memory and written in batches
/// ([`crate::service::outcomes`]).
fn record(st: &KeyLayer, rec: &KeyRecord, outcome: Outcome, now: i64) {
    st.core
        .outcomes
        .count_key(rec.merchant_id, &rec.idem_key, outcome.as_str(), now);
}

fn count(st: &KeyLayer, route: &str, outcome: Outcome) {
    st.core
        .outcomes
        .count_request(route, outcome, st.core.clock.now_ms());
}

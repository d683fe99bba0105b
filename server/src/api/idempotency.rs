//! The Idempotency-Key layer over the merchant POST routes (DESIGN.md "Idempotency
//! contract"; IETF draft-ietf-httpapi-idempotency-key-header; Stripe's documented behaviour):
//! the HTTP side of the Idempotency-Key contract. The rules it applies are in
//! [`crate::domain::idempotency`], the writes in [`crate::store::keys`], the counting in
//! [`crate::service::outcomes`].
//!
//! Claim, run, store: the claim is its own short transaction and never spans the channel
//! call. A 2xx answer is stored and later replayed byte for byte; a 4xx had no effect, so the
//! claim is deleted and the key stays free; a 5xx keeps the claim until its lease lapses, after
//! which a retry resumes from the recovery point the handler recorded (never a second payment).

use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, OriginalUri, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::domain::idempotency::{
    HEADER, KeyError, Outcome, REPLAYED, existing_outcome, in_use_retry_after_secs,
    key_from_headers, request_fingerprint,
};
use crate::store::keys::{ClaimResult, KeyClaim, KeyRecord, KeyRef, StoredResponse};
use crate::config::IdempotencySettings;
use crate::domain::secret_box::Purpose;
use crate::error::{ApiError, ParsedBody};
use crate::service::Core;
use crate::service::ids::new_token;
use crate::store::Merchant;

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

/// What the handler of a claimed request learns from the layer.
#[derive(Debug, Clone)]
pub struct IdemContext {
    /// The claim, to record the recovery point.
    pub key: KeyRef,
    /// What a crashed earlier attempt with this key created, if anything: resume it.
    pub resource_id: Option<String>,
}

impl IdemContext {
    /// Records `resource_id` as the claim's recovery point before the handler creates it, so a
    /// retry after a crash resumes this one resource rather than making a second (DESIGN.md
    /// "Idempotency contract"; Brandur Leach's recovery points). Errors: 409
    /// `idempotency_key_in_use` when this request's claim lapsed and another request holds the
    /// key now ([`key_in_use`], its lease unknown here: retry after 1 s); 503 when the
    /// database is unavailable.
    pub async fn record_recovery_point(
        &self,
        core: &Core,
        resource_id: &str,
    ) -> Result<(), ApiError> {
        if core.store.set_key_resource(&self.key, resource_id).await? {
            Ok(())
        } else {
            Err(key_in_use(None, 0))
        }
    }
}

/// The answer to a request whose key another request holds: 409 `idempotency_key_in_use`
/// with `Retry-After` the whole seconds until that claim's lease (epoch ms UTC) lapses,
/// 1..=60 ([`in_use_retry_after_secs`]; 1 when the lease is not known).
pub fn key_in_use(lease_expires_at: Option<i64>, now: i64) -> ApiError {
    ApiError::new(
        StatusCode::CONFLICT,
        "idempotency_key_in_use",
        "a request with this Idempotency-Key is still running",
    )
    .with_retry_after(in_use_retry_after_secs(lease_expires_at, now))
}

/// Routes whose handler claims the key in its own first transaction (issue 15: a create's
/// phase 1 claims the key, inserts the payment and records the recovery point at once). The
/// layer hands such a handler a [`DeferredClaim`] instead of claiming first, and the handler
/// says in a [`ClaimState`] response extension how the claim went.
const DEFERRED_ROUTES: [&str; 1] = ["POST /v1/payments"];

/// The claim a deferred route's handler makes itself (see [`DEFERRED_ROUTES`]).
#[derive(Debug, Clone)]
pub struct DeferredClaim(pub KeyClaim);

/// What a deferred route's handler did with its [`DeferredClaim`], as a response extension.
/// A response without one claimed nothing (the request was refused before its first
/// transaction, or that transaction failed).
#[derive(Debug, Clone)]
pub enum ClaimState {
    /// The claim is held: the layer stores a 2xx answer and releases the key on a 4xx, as
    /// for an eagerly claimed route.
    Held,
    /// The answer was stored with the key in the handler's last transaction: sent as it is.
    Completed,
    /// The key was claimed before: the layer answers from this record (replay, in use,
    /// reused) and the handler's response is dropped.
    Existing(Box<KeyRecord>),
}

/// A response extension by which a handler says its 2xx answer carries a secret (a webhook
/// endpoint's signing secret): the layer stores it sealed ([`crate::domain::secret_box`]), so
/// the merchant's replay is the same bytes while the database, and every console view of the
/// key, hold none (issue 36).
#[derive(Debug, Clone, Copy)]
pub struct SealStoredAnswer;

/// A JSON answer as it is stored with a key and sent: the same bytes both ways.
pub fn json_answer(status: StatusCode, body: &impl serde::Serialize) -> StoredResponse {
    StoredResponse {
        status: status.as_u16(),
        headers: vec![(
            header::CONTENT_TYPE.to_string(),
            "application/json".to_string(),
        )],
        body: serde_json::to_vec(body).unwrap_or_default(),
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

/// Headers kept with a stored answer (the rest are recomputed).
const STORED_HEADERS: [HeaderName; 2] = [header::CONTENT_TYPE, header::LOCATION];

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
                "idempotency_key_missing",
                "POST requests need an Idempotency-Key header",
            )
            .into_response();
        }
        Err(KeyError::Invalid) => {
            count(&st, &route, Outcome::Invalid);
            return ApiError::bad_request(
                "idempotency_key_invalid",
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
            "body_too_large",
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
    if DEFERRED_ROUTES.contains(&route.as_str()) {
        let mut req = Request::from_parts(parts, Body::from(bytes));
        req.extensions_mut().insert(parsed);
        req.extensions_mut().insert(DeferredClaim(claim.clone()));
        let resp = next.run(req).await;
        return finish_deferred(&st, &route, &scope, &fp, &claim, resp).await;
    }
    let resource_id = match st.core.store.claim_key(&claim).await {
        Err(e) => return ApiError::from(e).into_response(),
        Ok(ClaimResult::Existing(rec)) => {
            return answer_existing(&st, &route, &scope, &fp, rec, now).await;
        }
        Ok(ClaimResult::Claimed { resource_id }) => resource_id,
    };
    count(&st, &route, Outcome::First);
    let key_ref = claim.key_ref();
    let mut req = Request::from_parts(parts, Body::from(bytes));
    req.extensions_mut().insert(parsed);
    req.extensions_mut().insert(IdemContext {
        key: key_ref.clone(),
        resource_id,
    });
    let resp = next.run(req).await;
    finish(&st, &key_ref, resp).await
}

/// The end of a deferred route's request, by its handler's [`ClaimState`].
async fn finish_deferred(
    st: &KeyLayer,
    route: &str,
    scope: &str,
    fp: &str,
    claim: &KeyClaim,
    mut resp: Response,
) -> Response {
    match resp.extensions_mut().remove::<ClaimState>() {
        Some(ClaimState::Completed) => {
            count(st, route, Outcome::First);
            resp
        }
        Some(ClaimState::Held) => {
            count(st, route, Outcome::First);
            finish(st, &claim.key_ref(), resp).await
        }
        Some(ClaimState::Existing(rec)) => {
            answer_existing(st, route, scope, fp, *rec, claim.now).await
        }
        None => {
            // Refused before the key was claimed (a bad body, say). An eager claim would have
            // met a stored key first, so one is looked for to answer as it would have: a
            // replay, in use, or reused with another body.
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
                count(st, route, Outcome::First);
            }
            resp
        }
    }
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
            "idempotency_key_reused",
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

async fn finish(st: &KeyLayer, key: &KeyRef, resp: Response) -> Response {
    let status = resp.status();
    if status.is_client_error() {
        if let Err(e) = st.core.store.release_key(key).await {
            tracing::warn!(error = %e, "could not release the claim of a refused request; it lapses with its lease");
        }
        return resp;
    }
    if !status.is_success() {
        return resp;
    }
    let (parts, body) = resp.into_parts();
    let bytes = match to_bytes(body, usize::MAX).await {
        Ok(b) => b,
        Err(e) => {
            return ApiError::internal(format!("response body unreadable: {e}")).into_response();
        }
    };
    let headers = STORED_HEADERS
        .iter()
        .filter_map(|n| {
            parts
                .headers
                .get(n)
                .and_then(|v| v.to_str().ok())
                .map(|v| (n.to_string(), v.to_string()))
        })
        .collect();
    let body = if parts.extensions.get::<SealStoredAnswer>().is_some() {
        st.core.secrets.seal_bytes(Purpose::StoredAnswer, &bytes)
    } else {
        bytes.to_vec()
    };
    let stored = StoredResponse {
        status: status.as_u16(),
        headers,
        body,
    };
    match st.core.store.complete_key(key, &stored).await {
        Ok(true) => {}
        Ok(false) => {
            tracing::warn!(key = %crate::telemetry::log_safe(&key.idem_key, 255), "lease lost before the response was stored")
        }
        Err(e) => {
            tracing::error!(error = %e, key = %key.idem_key, "could not store the response; a retry resumes")
        }
    }
    Response::from_parts(parts, Body::from(bytes))
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

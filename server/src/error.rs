//! The HTTP error type: every failure is `{"error":{"code","message"}}` with a stable code
//! (DESIGN.md "Merchant HTTP API"). A 5xx logs its cause and never sends it. Every conversion
//! of a lower layer's error into an [`ApiError`] (storage, the services) is a `From` here, so
//! the layers below know no HTTP status.

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use converge_wire::ErrorCode;
use serde::Serialize;
use utoipa::ToSchema;

use crate::service::ServiceError;
use crate::service::actions::ActionError;
use crate::service::deliveries::DeliveryError;
use crate::service::lookup::LookupError;
use crate::service::merchants::MerchantError;
use crate::service::passkeys::PasskeyError;
use crate::service::queries::FilterError;
use crate::service::sign_in::LoginError;
use crate::service::step_up::StepUpError;
use crate::service::users::UserError;
use crate::service::webhooks::EndpointError;
use crate::store::StoreError;

/// An HTTP error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code (sent as its string, [`ErrorCode::as_str`]).
    pub code: ErrorCode,
    /// Human-readable message (never internal details).
    pub message: String,
    /// `Retry-After` seconds, for 409 in_use and 503.
    pub retry_after: Option<u64>,
    /// The internal cause (never sent): it rides on the response as an [`ErrorCause`]
    /// extension and the request's span logs it once, with the response line
    /// ([`crate::api::with_trace`]); axum's examples/error-handling model.
    pub cause: Option<String>,
}

/// The internal cause of an error answer, as a response extension for the request's log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorCause(pub String);

impl ApiError {
    /// An error with a status, a stable code and a message.
    pub fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            cause: None,
        }
    }

    /// The same answer with its internal cause attached (logged once by the request span).
    pub fn with_cause(mut self, cause: impl std::fmt::Display) -> Self {
        self.cause = Some(cause.to_string());
        self
    }

    /// 400 with `code`.
    pub fn bad_request(code: ErrorCode, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404 `not_found`.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            ErrorCode::NotFound,
            format!("{what} not found"),
        )
    }

    /// 500 `internal_error`; `cause` is logged with the response, not sent.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::InternalError,
            "internal error; retry with the same Idempotency-Key",
        )
        .with_cause(cause)
    }

    /// Whether this is [`ApiError::internal`]'s answer (its cause is not for the client):
    /// asked by its code's variant, never by comparing text.
    pub fn is_internal(&self) -> bool {
        self.code == ErrorCode::InternalError
    }

    /// Adds a `Retry-After` header.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The JSON body bytes of this error (what the response carries): an [`ErrorBody`].
    pub fn body(&self) -> Vec<u8> {
        serde_json::to_vec(&ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message.clone(),
            },
        })
        .expect("two strings serialize")
    }
}

/// The body of every error answer: `{"error":{"code","message"}}`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(example = json!({"error": {"code": "idempotency_key_missing", "message": "send an Idempotency-Key header with every POST"}}))]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// A stable code for programs and a message for people.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable machine-readable code (e.g. `invalid_amount`, `idempotency_key_reused`).
    #[schema(value_type = String, pattern = "^[a-z_]+$")]
    pub code: ErrorCode,
    /// Human-readable explanation; never internal details.
    pub message: String,
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(cause) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::DatabaseUnavailable,
                "database unavailable; retry later",
            )
            .with_retry_after(1)
            .with_cause(format!("database unavailable: {cause}")),
            StoreError::Rejected(cause) => ApiError::bad_request(
                ErrorCode::InvalidRequest,
                "the request holds a value that cannot be stored (e.g. a NUL character)",
            )
            .with_cause(format!("input refused by the database: {cause}")),
            other => ApiError::internal(other),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Store(s) => s.into(),
            ServiceError::Contended(id) => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::PaymentBusy,
                format!("payment {id} is being updated; retry"),
            )
            .with_retry_after(1),
        }
    }
}

impl From<LookupError> for ApiError {
    fn from(e: LookupError) -> Self {
        match e {
            LookupError::Invalid => ApiError::bad_request(ErrorCode::InvalidQuery, e.to_string()),
            LookupError::TooLong => ApiError::bad_request(ErrorCode::QueryTooLong, e.to_string()),
            LookupError::InvalidKey => {
                ApiError::bad_request(ErrorCode::IdempotencyKeyInvalid, e.to_string())
            }
            LookupError::Store(s) => s.into(),
        }
    }
}

impl From<FilterError> for ApiError {
    fn from(e: FilterError) -> Self {
        match e {
            FilterError::InvalidTime { .. } => {
                ApiError::bad_request(ErrorCode::InvalidTime, e.to_string())
            }
            FilterError::InvalidStatus(_) => {
                ApiError::bad_request(ErrorCode::InvalidStatus, e.to_string())
            }
            FilterError::InvalidReason(_) => {
                ApiError::bad_request(ErrorCode::InvalidReason, e.to_string())
            }
            FilterError::InvalidEventType(_) => {
                ApiError::bad_request(ErrorCode::InvalidEventType, e.to_string())
            }
            FilterError::InvalidDuration(_) => {
                ApiError::bad_request(ErrorCode::InvalidQuery, e.to_string())
            }
            FilterError::InvalidCursor(_) => {
                ApiError::bad_request(ErrorCode::InvalidCursor, e.to_string())
            }
            FilterError::Store(s) => s.into(),
        }
    }
}

impl From<EndpointError> for ApiError {
    fn from(e: EndpointError) -> Self {
        match e {
            EndpointError::Url(u) => ApiError::bad_request(u.code(), u.to_string()),
            EndpointError::Events(m) => ApiError::bad_request(ErrorCode::InvalidEnabledEvents, m),
            EndpointError::Description => {
                ApiError::bad_request(ErrorCode::InvalidDescription, e.to_string())
            }
            EndpointError::Limit(_) => {
                ApiError::bad_request(ErrorCode::EndpointLimit, e.to_string())
            }
            EndpointError::NotFound => ApiError::not_found("webhook endpoint"),
            EndpointError::Deleted => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::WebhookEndpointDeleted,
                "the webhook endpoint was deleted",
            ),
            EndpointError::Store(s) => s.into(),
        }
    }
}

/// An operator's webhook request refused: 404 `not_found`; 400 `invalid_reason`,
/// `invalid_selection`, `invalid_time`; 409 `delivery_pending`, `already_enabled`,
/// `webhook_endpoint_deleted`; 429 `rate_limited` with `Retry-After`.
impl From<DeliveryError> for ApiError {
    fn from(e: DeliveryError) -> Self {
        match e {
            DeliveryError::NotFound(what) => ApiError::not_found(what),
            DeliveryError::InvalidReason => {
                ApiError::bad_request(ErrorCode::InvalidReason, e.to_string())
            }
            DeliveryError::InvalidSelection => {
                ApiError::bad_request(ErrorCode::InvalidSelection, e.to_string())
            }
            DeliveryError::Filter(f) => f.into(),
            DeliveryError::Pending => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::DeliveryPending,
                e.to_string(),
            ),
            DeliveryError::RateLimited(secs) => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                e.to_string(),
            )
            .with_retry_after(secs),
            DeliveryError::AlreadyEnabled => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::AlreadyEnabled,
                e.to_string(),
            ),
            DeliveryError::EndpointDeleted => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::WebhookEndpointDeleted,
                e.to_string(),
            ),
            DeliveryError::Service(s) => s.into(),
        }
    }
}

impl From<ActionError> for ApiError {
    fn from(e: ActionError) -> Self {
        match e {
            ActionError::Invalid(code, m) => ApiError::bad_request(code, m),
            ActionError::NotFound(what) => ApiError::not_found(what),
            ActionError::Forbidden(code, m) => ApiError::new(StatusCode::FORBIDDEN, code, m),
            ActionError::Conflict(code, m) => ApiError::new(StatusCode::CONFLICT, code, m),
            ActionError::RateLimited(m, secs) => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, ErrorCode::RateLimited, m)
                    .with_retry_after(secs)
            }
            ActionError::Store(s) => s.into(),
        }
    }
}

/// A refused sign-in or password check, the same answers for the JSON endpoints and the
/// console's server functions: 401 `invalid_credentials`, one answer for an unknown user, a
/// wrong password and a disabled user (OWASP Authentication Cheat Sheet, "Authentication and
/// Error Messages"); 429 `rate_limited` with `Retry-After`; a failed store as [`StoreError`];
/// a session that cannot be written 500.
impl From<LoginError> for ApiError {
    fn from(e: LoginError) -> Self {
        match e {
            LoginError::InvalidCredentials => ApiError::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::InvalidCredentials,
                e.to_string(),
            ),
            LoginError::RateLimited(secs) => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::RateLimited,
                e.to_string(),
            )
            .with_retry_after(secs),
            LoginError::Store(e) => e.into(),
            LoginError::Session(_) => ApiError::internal(e),
        }
    }
}

/// A step-up approval's refusal: 400 `invalid_reason`; 403 `approval_refused`, one answer for
/// whatever made it impossible (OWASP Authentication Cheat Sheet, "Reauthentication"); a
/// refused password check as [`LoginError`]; an approved action's execution as
/// [`ActionError`].
impl From<StepUpError> for ApiError {
    fn from(e: StepUpError) -> Self {
        match e {
            StepUpError::InvalidReason(m) => ApiError::bad_request(ErrorCode::InvalidReason, m),
            StepUpError::Refused => ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::ApprovalRefused,
                e.to_string(),
            ),
            StepUpError::PasskeyRequired => ApiError::new(
                StatusCode::FORBIDDEN,
                ErrorCode::PasskeyRequired,
                e.to_string(),
            ),
            StepUpError::Check(e) => e.into(),
            StepUpError::Action(e) => e.into(),
            StepUpError::Store(e) => e.into(),
        }
    }
}

/// A passkey change's refusal (issue 36): 400 `invalid_passkey`, 403 `passkey_refused`, 409
/// `passkey_exists`, `too_many_passkeys` or `no_passkeys`, 404 `not_found`, 403
/// `step_up_refused`, and a step-up's own answers.
impl From<PasskeyError> for ApiError {
    fn from(e: PasskeyError) -> Self {
        let m = e.to_string();
        match e {
            PasskeyError::Invalid(m) => ApiError::bad_request(ErrorCode::InvalidPasskey, m),
            // A proof that does not hold, as a wrong password is (403).
            PasskeyError::Refused => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::PasskeyRefused, m)
            }
            PasskeyError::Exists => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::PasskeyExists, m)
            }
            PasskeyError::TooMany => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::TooManyPasskeys, m)
            }
            PasskeyError::NoPasskeys => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::NoPasskeys, m)
            }
            PasskeyError::NotFound => ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, m),
            PasskeyError::StepUpRefused => {
                ApiError::new(StatusCode::FORBIDDEN, ErrorCode::StepUpRefused, m)
            }
            PasskeyError::StepUp(e) => e.into(),
            PasskeyError::Store(e) => e.into(),
        }
    }
}

/// A user change's refusal: 400 `invalid_user`, 409 `user_exists`, 404 `not_found`, 409
/// `last_admin`.
impl From<UserError> for ApiError {
    fn from(e: UserError) -> Self {
        match e {
            UserError::Invalid(m) => ApiError::bad_request(ErrorCode::InvalidUser, m),
            UserError::DisableSelf | UserError::DropOwnAdmin => {
                ApiError::bad_request(ErrorCode::InvalidUser, e.to_string())
            }
            UserError::Exists(_) => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::UserExists, e.to_string())
            }
            UserError::NotFound(_) => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string())
            }
            UserError::LastAdmin => {
                ApiError::new(StatusCode::CONFLICT, ErrorCode::LastAdmin, e.to_string())
            }
            UserError::Store(s) => s.into(),
        }
    }
}

/// A merchant change's refusal: 400 `invalid_merchant`, `invalid_connector` or `invalid_pricing`, 409 `merchant_exists`, 404
/// `not_found` (no merchant, or no such unrevoked key).
impl From<MerchantError> for ApiError {
    fn from(e: MerchantError) -> Self {
        match e {
            MerchantError::InvalidName => {
                ApiError::bad_request(ErrorCode::InvalidMerchant, e.to_string())
            }
            MerchantError::InvalidConnector(_) => {
                ApiError::bad_request(ErrorCode::InvalidConnector, e.to_string())
            }
            MerchantError::InvalidPricing(_) => {
                ApiError::bad_request(ErrorCode::InvalidPricing, e.to_string())
            }
            MerchantError::Exists(_) => ApiError::new(
                StatusCode::CONFLICT,
                ErrorCode::MerchantExists,
                e.to_string(),
            ),
            MerchantError::NoMerchant(_) | MerchantError::NoKey(..) => {
                ApiError::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, e.to_string())
            }
            MerchantError::Store(s) => s.into(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut resp = (
            self.status,
            [(header::CONTENT_TYPE, "application/json")],
            self.body(),
        )
            .into_response();
        if let Some(secs) = self.retry_after {
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(cause) = self.cause {
            resp.extensions_mut().insert(ErrorCause(cause));
        }
        resp
    }
}

/// A request body a layer already read and parsed as JSON before the handler: the
/// Idempotency-Key layer fingerprints the body, and [`ApiJson`] takes that parse instead of
/// parsing the same bytes again. Inserted as a request extension.
#[derive(Debug, Clone)]
pub struct ParsedBody {
    bytes: axum::body::Bytes,
    json: Arc<Result<serde_json::Value, String>>,
}

impl ParsedBody {
    /// `bytes` and what `serde_json::from_slice::<Value>` made of them (its error's text when
    /// they are not JSON).
    pub fn new(bytes: axum::body::Bytes, json: Result<serde_json::Value, String>) -> Self {
        ParsedBody {
            bytes,
            json: Arc::new(json),
        }
    }

    /// The parse of `bytes`, when this is the parse of exactly those bytes.
    fn of(&self, bytes: &[u8]) -> Option<&Result<serde_json::Value, String>> {
        (self.bytes.as_ref() == bytes).then_some(self.json.as_ref())
    }
}

/// JSON body extractor whose rejections become [`ApiError`]s with stable codes instead of
/// axum's plain-text answers: 415 `unsupported_media_type` without a JSON content type, 413
/// `body_too_large` over the route's body limit, 400 `invalid_json` for bad syntax, 400
/// `invalid_request` for a body that is not an object, has unknown, missing, mistyped or
/// repeated fields.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json_content_type(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                ErrorCode::UnsupportedMediaType,
                "send Content-Type: application/json",
            ));
        }
        let parsed = req.extensions().get::<ParsedBody>().cloned();
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        // Checked as a `Value` first: serde's derived structs also accept a JSON array of the
        // fields in declaration order (`[1000,"CNY","o-1"]`), which is not the documented
        // object and must not create a payment. A layer's parse of these bytes is taken as it
        // is ([`ParsedBody`]).
        let own;
        let json = match parsed.as_ref().and_then(|p| p.of(&bytes)) {
            Some(json) => json,
            None => {
                own =
                    serde_json::from_slice::<serde_json::Value>(&bytes).map_err(|e| e.to_string());
                &own
            }
        };
        match json {
            Ok(v) if v.is_object() && has_nul(v) => {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidRequest,
                    "strings may not contain the NUL character",
                ));
            }
            Ok(v) if v.is_object() => {}
            Ok(_) => {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidRequest,
                    "the request body must be a JSON object",
                ));
            }
            Err(e) => {
                return Err(ApiError::bad_request(
                    ErrorCode::InvalidJson,
                    format!("invalid JSON: {e}"),
                ));
            }
        }
        // Then decoded from the bytes, not from the `Value`: a `Value` keeps only the last of
        // two members with the same name (`{"amount":1,"amount":2}`), which would make the
        // amount charged depend on a parser's choice; the derived decoder refuses repeats.
        // Numbers whose value is an integer are handed over in integer form first, exactly
        // (see [`integral_numbers_as_integers`]).
        let bytes = integral_numbers_as_integers(&bytes);
        serde_json::from_slice(&bytes).map(ApiJson).map_err(|e| {
            ApiError::bad_request(
                ErrorCode::InvalidRequest,
                format!("invalid request body: {e}"),
            )
        })
    }
}

/// Decodes a nested member that must be a JSON object. serde's derived structs also accept an
/// array of their fields in order (`[null, null]`), which [`ApiJson`] refuses only at the top
/// level; a member whose fields are all optional would otherwise take an array as "no
/// filter" (schemathesis found it). Use with `#[serde(deserialize_with = ...)]`.
pub fn json_object<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: serde::de::DeserializeOwned,
{
    use serde::Deserialize;
    let v = serde_json::Value::deserialize(d)?;
    if !v.is_object() {
        return Err(serde::de::Error::custom("expected a JSON object"));
    }
    serde_json::from_value(v).map_err(serde::de::Error::custom)
}

/// Rewrites every number of a (valid) JSON text whose value is an integer into plain integer
/// form, exactly: `1000.0`, `1e3` and `10000e-1` become `1000`; `10.5`, `1e-3` and numbers of
/// more than 30 digits stay as they are (and are then refused by an integer field).
///
/// The documents converge publishes are JSON Schema, where `1000.0` *is* the integer 1000
/// (schemathesis sent `8796093022209.0` as a valid refund amount and got 400). serde's integer
/// fields refuse any number written with a fraction or exponent, and reading the number as an
/// `f64` instead would round (`999999999999999999.0`), so the text is converted digit by digit.
/// Strings are copied untouched.
fn integral_numbers_as_integers(json: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    if !json.iter().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = Vec::with_capacity(json.len());
    let mut i = 0;
    while i < json.len() {
        match json[i] {
            b'"' => {
                let start = i;
                i += 1;
                while i < json.len() && json[i] != b'"' {
                    i += if json[i] == b'\\' { 2 } else { 1 };
                }
                i = (i + 1).min(json.len());
                out.extend_from_slice(&json[start..i]);
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                while i < json.len()
                    && matches!(json[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
                {
                    i += 1;
                }
                let token = &json[start..i];
                match exact_integer(token) {
                    Some(int) => out.extend_from_slice(int.as_bytes()),
                    None => out.extend_from_slice(token),
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The integer a JSON number token denotes, in plain decimal form, when it has a fraction or an
/// exponent and its value is an integer of at most 30 digits; `None` otherwise (plain integers
/// are left alone).
fn exact_integer(token: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(token).ok()?;
    let (negative, rest) = match text.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if frac.is_empty() && exponent == 0 && !rest.contains(['e', 'E']) {
        return None;
    }
    if int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || !frac.bytes().all(|b| b.is_ascii_digit())
    {
        return None;
    }
    // value = digits * 10^scale
    let mut digits: String = format!("{int}{frac}");
    let mut scale = exponent.checked_sub(frac.len() as i64)?;
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
        scale = scale.checked_add(1)?;
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some("0".to_owned());
    }
    if scale < 0 || digits.len() as i64 + scale > 30 {
        return None;
    }
    let mut out = String::with_capacity(31);
    if negative {
        out.push('-');
    }
    out.push_str(digits);
    out.extend(std::iter::repeat_n('0', scale as usize));
    Some(out)
}

/// Whether any string (or object key) in `v` holds U+0000, which PostgreSQL text cannot store
/// and no field of converge's API needs.
fn has_nul(v: &serde_json::Value) -> bool {
    match v {
        serde_json::Value::String(s) => s.contains('\0'),
        serde_json::Value::Array(a) => a.iter().any(has_nul),
        serde_json::Value::Object(o) => o.iter().any(|(k, v)| k.contains('\0') || has_nul(v)),
        _ => false,
    }
}

/// Whether a raw path or query string carries a percent-encoded NUL (`%00`).
fn has_encoded_nul(raw: &str) -> bool {
    raw.as_bytes()
        .windows(3)
        .any(|w| w[0] == b'%' && w[1] == b'0' && w[2] == b'0')
}

/// `application/json` or an `application/*+json` type, parameters allowed.
pub(crate) fn is_json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// A body that could not be read: 413 `body_too_large` over the limit, else 400.
pub fn body_rejection(e: axum::extract::rejection::BytesRejection) -> ApiError {
    if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::BodyTooLarge,
            "request body is too large",
        )
    } else {
        ApiError::bad_request(
            ErrorCode::InvalidRequest,
            "the request body could not be read",
        )
    }
}

/// Path parameters extractor whose rejection is a JSON 400 `invalid_path` (e.g. an id that is
/// not UTF-8 after percent-decoding) instead of axum's plain text.
#[derive(Debug, Clone)]
pub struct ApiPath<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for ApiPath<T>
where
    T: serde::de::DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        if has_encoded_nul(parts.uri.path()) {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidPath,
                "the path may not contain %00",
            ));
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(v)| ApiPath(v))
            .map_err(|e| ApiError::bad_request(ErrorCode::InvalidPath, e.body_text()))
    }
}

/// Query-string extractor whose rejection is a JSON 400 `invalid_query` instead of axum's
/// plain text.
#[derive(Debug, Clone)]
pub struct ApiQuery<T>(pub T);

impl<S, T> axum::extract::FromRequestParts<S> for ApiQuery<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        if parts.uri.query().is_some_and(has_encoded_nul) {
            return Err(ApiError::bad_request(
                ErrorCode::InvalidQuery,
                "the query may not contain %00",
            ));
        }
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(v)| ApiQuery(v))
            .map_err(|e| ApiError::bad_request(ErrorCode::InvalidQuery, e.body_text()))
    }
}

#[cfg(test)]
mod tests {
    use super::{ParsedBody, exact_integer, integral_numbers_as_integers};

    #[test]
    fn an_internal_cause_rides_on_the_response_and_never_in_its_body() {
        use axum::response::IntoResponse;
        let resp = super::ApiError::internal("pool timed out at db:5432").into_response();
        assert_eq!(resp.status().as_u16(), 500);
        assert_eq!(
            resp.extensions().get::<super::ErrorCause>(),
            Some(&super::ErrorCause("pool timed out at db:5432".into()))
        );
        let plain = super::ApiError::not_found("payment").into_response();
        assert!(plain.extensions().get::<super::ErrorCause>().is_none());
    }

    #[test]
    fn a_code_is_sent_as_its_snake_case_string() {
        let e = super::ApiError::bad_request(
            converge_wire::ErrorCode::IdempotencyKeyMissing,
            "send an Idempotency-Key header",
        );
        assert_eq!(
            String::from_utf8(e.body()).unwrap(),
            r#"{"error":{"code":"idempotency_key_missing","message":"send an Idempotency-Key header"}}"#
        );
        assert!(super::ApiError::internal("x").is_internal());
        assert!(!e.is_internal());
    }

    #[test]
    fn the_cause_is_not_in_the_answer_body() {
        let e = super::ApiError::internal("secret detail");
        assert!(!String::from_utf8_lossy(&e.body()).contains("secret detail"));
    }

    #[test]
    fn a_layer_parse_is_taken_only_for_the_same_bytes() {
        let body = br#"{"amount":1}"#;
        let parsed = ParsedBody::new(
            axum::body::Bytes::from_static(body),
            Ok(serde_json::json!({"amount": 1})),
        );
        assert!(parsed.of(body).is_some_and(|j| j.is_ok()));
        assert!(parsed.of(br#"{"amount":2}"#).is_none());
    }

    fn int(s: &str) -> Option<String> {
        exact_integer(s.as_bytes())
    }

    #[test]
    fn integral_numbers_are_converted_exactly() {
        assert_eq!(int("1000.0").as_deref(), Some("1000"));
        assert_eq!(int("1e3").as_deref(), Some("1000"));
        assert_eq!(int("1E+3").as_deref(), Some("1000"));
        assert_eq!(int("10000e-1").as_deref(), Some("1000"));
        assert_eq!(int("-2.50e1").as_deref(), Some("-25"));
        assert_eq!(int("0.0").as_deref(), Some("0"));
        assert_eq!(
            int("999999999999999999.0").as_deref(),
            Some("999999999999999999")
        );
        assert_eq!(int("8796093022209.0").as_deref(), Some("8796093022209"));
    }

    #[test]
    fn fractions_huge_numbers_and_plain_integers_are_left_alone() {
        assert_eq!(int("10.5"), None);
        assert_eq!(int("1e-3"), None);
        assert_eq!(int("1000.0000000000000001"), None);
        assert_eq!(int("1e30"), None);
        assert_eq!(int("1e99999999999999999999"), None);
        assert_eq!(int("1000"), None);
        assert_eq!(int("-7"), None);
    }

    #[test]
    fn strings_are_copied_untouched() {
        let body = br#"{"amount":1999.0,"reason":"1.0e3 \" 2.0","n":[1e2,-3.0]}"#;
        assert_eq!(
            &*integral_numbers_as_integers(body),
            br#"{"amount":1999,"reason":"1.0e3 \" 2.0","n":[100,-3]}"#
        );
        let plain = br#"{"amount":1999}"#;
        assert!(matches!(
            integral_numbers_as_integers(plain),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}

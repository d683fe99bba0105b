//! The merchant API's error type: every failure is `{"error":{"code","message"}}` with a
//! stable code (DESIGN.md "Merchant HTTP API"). A 5xx logs its cause and never sends it.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::store::StoreError;

/// An HTTP error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable message (never internal details).
    pub message: String,
    /// `Retry-After` seconds, for 409 in_use and 503.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with a status, a stable code and a message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
        }
    }

    /// 400 with `code`.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 404 `not_found`.
    pub fn not_found(what: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} not found"),
        )
    }

    /// 500 `internal_error`; `cause` is logged, not sent.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(%cause, "internal error");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "internal error; retry with the same Idempotency-Key",
        )
    }

    /// Adds a `Retry-After` header.
    pub fn with_retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The JSON body bytes of this error (what the response carries).
    pub fn body(&self) -> Vec<u8> {
        json!({"error": {"code": self.code, "message": self.message}})
            .to_string()
            .into_bytes()
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Unavailable(cause) => {
                tracing::error!(%cause, "database unavailable");
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database_unavailable",
                    "database unavailable; retry later",
                )
                .with_retry_after(1)
            }
            other => ApiError::internal(other),
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
        resp
    }
}

/// JSON body extractor whose rejections become [`ApiError`]s with stable codes instead of
/// axum's plain-text answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> axum::extract::FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, Self::Rejection> {
        use axum::extract::rejection::JsonRejection;
        // Parsed as a `Value` first: serde's derived structs also accept a JSON array of the
        // fields in declaration order (`[1000,"CNY","o-1"]`), which is not the documented
        // object and must not create a payment.
        match Json::<serde_json::Value>::from_request(req, state).await {
            Ok(Json(v)) if v.is_object() => serde_json::from_value(v).map(ApiJson).map_err(|e| {
                ApiError::bad_request("invalid_request", format!("invalid request body: {e}"))
            }),
            Ok(Json(_)) => Err(ApiError::bad_request(
                "invalid_request",
                "the request body must be a JSON object",
            )),
            Err(JsonRejection::MissingJsonContentType(_)) => Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send Content-Type: application/json",
            )),
            Err(JsonRejection::JsonSyntaxError(e)) => {
                Err(ApiError::bad_request("invalid_json", e.body_text()))
            }
            Err(JsonRejection::JsonDataError(e)) => {
                Err(ApiError::bad_request("invalid_request", e.body_text()))
            }
            Err(JsonRejection::BytesRejection(e))
                if e.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                Err(ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "request body is too large",
                ))
            }
            Err(e) => Err(ApiError::bad_request("invalid_request", e.body_text())),
        }
    }
}

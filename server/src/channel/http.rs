//! [`HttpConnector`]: the core's client for the sandbox channel's HTTP protocol (DESIGN.md
//! "Sandbox channel"; the protocol is documented on [`super::sandbox`]), a [`Connector`] with
//! every operation of the contract: charges, holds, refunds, callbacks and statements.
//!
//! Only answers the channel states explicitly are decisive. Timeouts, connect errors, 5xx,
//! broken or unparseable bodies and unexpected statuses are all `Error`, so the core moves the
//! payment to UNKNOWN and queries by the same key instead of guessing (seed article 004).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;
use url::Url;

use super::signature::{self, SignatureError};
use super::{
    AuthorizeOutcome, CallbackFact, CallbackRejection, CancelOutcome, CaptureOutcome,
    ChargeOutcome, Connector, HoldQueryOutcome, HoldStatus, QueryOutcome, RefundOutcome,
    StatementError, Unsupported, VoidOutcome,
};

/// Longest slice of an unexpected body quoted in an error detail, in bytes.
const DETAIL_BODY_MAX: usize = 200;
/// Kept under hyper's 30 s server-side idle limit so a pooled connection is not reused just
/// as the server closes it (which would turn a fine request into a spurious `Error`).
const POOL_IDLE: Duration = Duration::from_secs(20);

/// Callbacks older (or newer) than this are refused, seconds (DESIGN.md: 5 minutes).
pub const CALLBACK_TOLERANCE_SECS: i64 = signature::DEFAULT_TOLERANCE_SECS;

/// A [`Connector`] over the sandbox's HTTP protocol. Every call is bounded by the timeout
/// given to [`HttpConnector::new`] (connect, send and reading the whole body).
#[derive(Clone)]
pub struct HttpConnector {
    base: Result<Url, String>,
    client: Result<reqwest::Client, String>,
    timeout: Duration,
    /// HMAC-SHA256 key of the callbacks' `Converge-Signature`; `None`: callbacks unsupported.
    callback_secret: Option<Vec<u8>>,
}

impl std::fmt::Debug for HttpConnector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The secret is left out on purpose: connectors end up in logs.
        f.debug_struct("HttpConnector")
            .field(
                "base",
                &self.base.as_ref().map(|u| crate::store::redact(u.as_str())),
            )
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The connector's former name, kept for callers written against it.
pub type HttpChannel = HttpConnector;

/// The fields any sandbox answer may carry.
#[derive(Deserialize)]
struct Answer {
    status: String,
    /// The channel key the answer is about; a success must name the key that was sent.
    key: Option<String>,
    amount: Option<i64>,
    currency: Option<String>,
    reason: Option<String>,
    /// Holds: captured so far, minor units.
    captured: Option<i64>,
    /// Holds: when the hold lapses, epoch ms UTC.
    expires_at_ms: Option<i64>,
    /// Captures: no further capture is possible.
    closed: Option<bool>,
}

impl HttpConnector {
    /// A client for the sandbox at `base_url` (e.g. `http://127.0.0.1:7070`; a path prefix is
    /// kept). An unusable URL does not panic: every call then answers `Error`.
    pub fn new(base_url: &str, timeout: Duration) -> Self {
        // Every message that names the URL goes to the payment's timeline, which every
        // console viewer reads: never with its user info (issue 36).
        let shown = crate::store::redact(base_url);
        let base = Url::parse(base_url)
            .map_err(|e| format!("bad channel url {shown:?}: {e}"))
            .and_then(|u| {
                if u.cannot_be_a_base() || !matches!(u.scheme(), "http" | "https") {
                    Err(format!("channel url {shown:?} is not an http(s) base url"))
                } else {
                    Ok(u)
                }
            });
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .pool_idle_timeout(POOL_IDLE)
            .build()
            .map_err(|e| format!("building http client: {e}"));
        Self {
            base,
            client,
            timeout,
            callback_secret: None,
        }
    }

    /// The same connector, verifying callbacks signed with `secret` (HMAC-SHA256,
    /// [`signature`]); without one, [`Connector::verify_callback`] answers `Unsupported`.
    pub fn with_callback_secret(mut self, secret: &[u8]) -> Self {
        self.callback_secret = Some(secret.to_vec());
        self
    }

    fn endpoint(&self, segments: &[&str]) -> Result<Url, String> {
        let mut url = self.base.clone()?;
        // Segments are percent-encoded, so any key reaches the sandbox's path intact.
        url.path_segments_mut()
            .map_err(|_| "channel url cannot take a path".to_owned())?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    async fn call(
        &self,
        method: reqwest::Method,
        segments: &[&str],
        body: Option<serde_json::Value>,
    ) -> Result<(u16, bytes::Bytes), String> {
        let client = self.client.as_ref().map_err(Clone::clone)?;
        let url = self.endpoint(segments)?;
        let mut req = client.request(method, url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req
            .send()
            .await
            .map_err(|e| self.describe(e, "sending request"))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| self.describe(e, "reading body"))?;
        Ok((status, bytes))
    }

    fn describe(&self, e: reqwest::Error, stage: &str) -> String {
        describe_transport(e, stage, self.timeout)
    }
}

/// A one-line account of transport error `e` while `stage` (a request bounded by `timeout`),
/// with its cause chain, naming its URL without user info: the detail of an undecidable
/// answer, shared by every HTTP connector.
pub(super) fn describe_transport(e: reqwest::Error, stage: &str, timeout: Duration) -> String {
    // reqwest's Display shows the URL whole, password included.
    let url = e.url().map(|u| crate::store::redact(u.as_str()));
    let e = e.without_url();
    if e.is_timeout() {
        return format!("timeout after {} ms while {stage}", timeout.as_millis());
    }
    let kind = if e.is_connect() {
        "connect error"
    } else {
        "transport error"
    };
    // reqwest's Display omits the cause ("connection reset", "refused"), which is the
    // useful part in an event log.
    let mut detail = format!("{kind} while {stage}: {e}");
    if let Some(url) = url {
        detail.push_str(&format!(" for url ({url})"));
    }
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        detail.push_str(": ");
        detail.push_str(&s.to_string());
        source = s.source();
    }
    detail
}

fn parse(body: &[u8]) -> Option<Answer> {
    serde_json::from_slice(body).ok()
}

fn unexpected(status: u16, body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(DETAIL_BODY_MAX);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("unexpected answer {status}: {}", &text[..end])
}

/// Maps a `POST /charges` answer for `key` (status, raw body) to an outcome. A success about
/// another key is not evidence for this payment (DESIGN.md: "amount, currency, key must
/// match"), so it is an `Error` and the payment is resolved by a query.
fn charge_outcome(key: &str, status: u16, body: &[u8]) -> ChargeOutcome {
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "succeeded" && a.key.as_deref() == Some(key) => {
            match (a.amount, a.currency) {
                (Some(amount), Some(currency)) => ChargeOutcome::Succeeded { amount, currency },
                _ => ChargeOutcome::Error {
                    detail: unexpected(status, body),
                },
            }
        }
        (402, Some(a)) if a.status == "declined" => ChargeOutcome::Declined {
            reason: a.reason.unwrap_or_else(|| "declined".to_owned()),
        },
        // A tombstoned key can never be charged: as final as a decline.
        (409, Some(a)) if a.status == "cancelled" => ChargeOutcome::Declined {
            reason: "cancelled".to_owned(),
        },
        _ => ChargeOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `GET /charges/{key}` answer to an outcome; a success must name `key`.
fn query_outcome(key: &str, status: u16, body: &[u8]) -> QueryOutcome {
    match (status, parse(body)) {
        (200, Some(a)) => match (a.status.as_str(), a.amount, a.currency) {
            ("succeeded", Some(amount), Some(currency)) if a.key.as_deref() == Some(key) => {
                QueryOutcome::Succeeded { amount, currency }
            }
            ("declined", _, _) => QueryOutcome::Declined {
                reason: a.reason.unwrap_or_else(|| "declined".to_owned()),
            },
            ("cancelled", _, _) => QueryOutcome::Cancelled,
            _ => QueryOutcome::Error {
                detail: unexpected(status, body),
            },
        },
        // Only the sandbox's own not_found body counts: a bare 404 (wrong base URL, proxy)
        // read as NotFound would make the core resubmit or fence on no evidence.
        (404, Some(a)) if a.status == "not_found" => QueryOutcome::NotFound,
        _ => QueryOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `POST /charges/{key}/cancel` answer to an outcome.
fn cancel_outcome(status: u16, body: &[u8]) -> CancelOutcome {
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "cancelled" => CancelOutcome::Cancelled,
        (
            409,
            Some(Answer {
                status: s,
                amount: Some(amount),
                currency: Some(currency),
                ..
            }),
        ) if s == "succeeded" => CancelOutcome::AlreadyCharged { amount, currency },
        // Not a fence and not a charge: the key's funds are held, and only a void (or the
        // hold's expiry) releases them. Undecidable for the cancel's caller.
        (409, Some(a)) if a.status == "held" => CancelOutcome::Error {
            detail: "funds are held under the key: a hold is released by a void, not a cancel"
                .to_owned(),
        },
        _ => CancelOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `POST /refunds` answer to an outcome.
fn refund_outcome(status: u16, body: &[u8]) -> RefundOutcome {
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "succeeded" => RefundOutcome::Succeeded,
        (422, Some(a)) if a.status == "rejected" => RefundOutcome::Rejected {
            reason: a.reason.unwrap_or_else(|| "rejected".to_owned()),
        },
        _ => RefundOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `POST /authorizations` answer for `key`; a hold must name the key that was sent.
fn authorize_outcome(key: &str, status: u16, body: &[u8]) -> AuthorizeOutcome {
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "authorized" && a.key.as_deref() == Some(key) => {
            match (a.amount, a.currency, a.expires_at_ms) {
                (Some(amount), Some(currency), Some(expires_at_ms)) => {
                    AuthorizeOutcome::Authorized {
                        amount,
                        currency,
                        expires_at_ms,
                    }
                }
                _ => AuthorizeOutcome::Error {
                    detail: unexpected(status, body),
                },
            }
        }
        (402, Some(a)) if a.status == "declined" => AuthorizeOutcome::Declined {
            reason: a.reason.unwrap_or_else(|| "declined".to_owned()),
        },
        (409, Some(a)) if a.status == "cancelled" => AuthorizeOutcome::Declined {
            reason: "cancelled".to_owned(),
        },
        _ => AuthorizeOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `POST /authorizations/{key}/captures` answer; a capture must name the hold's key.
fn capture_outcome(key: &str, status: u16, body: &[u8]) -> CaptureOutcome {
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "captured" && a.key.as_deref() == Some(key) => {
            match (a.amount, a.captured, a.currency, a.closed) {
                (Some(amount), Some(captured_total), Some(currency), Some(closed)) => {
                    CaptureOutcome::Captured {
                        amount,
                        captured_total,
                        currency,
                        closed,
                    }
                }
                _ => CaptureOutcome::Error {
                    detail: unexpected(status, body),
                },
            }
        }
        (422, Some(a)) if a.status == "rejected" => CaptureOutcome::Rejected {
            reason: a.reason.unwrap_or_else(|| "rejected".to_owned()),
        },
        _ => CaptureOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `POST /authorizations/{key}/void` answer.
fn void_outcome(status: u16, body: &[u8]) -> VoidOutcome {
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "voided" => VoidOutcome::Voided,
        (200, Some(a)) if a.status == "expired" => VoidOutcome::Expired,
        (422, Some(a)) if a.status == "rejected" => VoidOutcome::Rejected {
            reason: a.reason.unwrap_or_else(|| "rejected".to_owned()),
        },
        _ => VoidOutcome::Error {
            detail: unexpected(status, body),
        },
    }
}

/// Maps a `GET /authorizations/{key}` answer; a hold must name `key`.
fn hold_query_outcome(key: &str, status: u16, body: &[u8]) -> HoldQueryOutcome {
    let error = || HoldQueryOutcome::Error {
        detail: unexpected(status, body),
    };
    match (status, parse(body)) {
        (200, Some(a)) if a.status == "cancelled" => HoldQueryOutcome::Cancelled,
        (200, Some(a)) if a.key.as_deref() == Some(key) => {
            let state = match a.status.as_str() {
                "authorized" => HoldStatus::Authorized,
                "captured" => HoldStatus::Captured,
                "voided" => HoldStatus::Voided,
                "expired" => HoldStatus::Expired,
                "declined" => HoldStatus::Declined,
                _ => return error(),
            };
            match (a.amount, a.captured, a.currency, a.expires_at_ms) {
                (Some(amount), Some(captured), Some(currency), Some(expires_at_ms)) => {
                    HoldQueryOutcome::Found {
                        status: state,
                        amount,
                        captured,
                        currency,
                        expires_at_ms,
                    }
                }
                _ => error(),
            }
        }
        (404, Some(a)) if a.status == "not_found" => HoldQueryOutcome::NotFound,
        _ => error(),
    }
}

/// Checks a sandbox callback's signature under `secret` and parses its body.
fn verify_sandbox_callback(
    secret: &[u8],
    headers: &axum::http::HeaderMap,
    body: &[u8],
    now_secs: i64,
) -> Result<CallbackFact, CallbackRejection> {
    let header = headers
        .get(signature::SIGNATURE_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    match signature::verify(secret, header, body, now_secs, CALLBACK_TOLERANCE_SECS) {
        Ok(_) => {}
        Err(SignatureError::TooOld) => return Err(CallbackRejection::TooOld),
        Err(_) => return Err(CallbackRejection::BadSignature),
    }
    serde_json::from_slice(body).map_err(|e| CallbackRejection::Invalid(e.to_string()))
}

#[async_trait]
impl Connector for HttpConnector {
    async fn charge(&self, channel_key: &str, amount: i64, currency: &str) -> ChargeOutcome {
        let body = json!({"key": channel_key, "amount": amount, "currency": currency});
        match self
            .call(reqwest::Method::POST, &["charges"], Some(body))
            .await
        {
            Ok((status, bytes)) => charge_outcome(channel_key, status, &bytes),
            Err(detail) => ChargeOutcome::Error { detail },
        }
    }

    async fn query(&self, channel_key: &str) -> QueryOutcome {
        match self
            .call(reqwest::Method::GET, &["charges", channel_key], None)
            .await
        {
            Ok((status, bytes)) => query_outcome(channel_key, status, &bytes),
            Err(detail) => QueryOutcome::Error { detail },
        }
    }

    async fn cancel(&self, channel_key: &str) -> CancelOutcome {
        match self
            .call(
                reqwest::Method::POST,
                &["charges", channel_key, "cancel"],
                None,
            )
            .await
        {
            Ok((status, bytes)) => cancel_outcome(status, &bytes),
            Err(detail) => CancelOutcome::Error { detail },
        }
    }

    async fn refund(&self, channel_key: &str, refund_key: &str, amount: i64) -> RefundOutcome {
        let body = json!({"refund_key": refund_key, "charge_key": channel_key, "amount": amount});
        match self
            .call(reqwest::Method::POST, &["refunds"], Some(body))
            .await
        {
            Ok((status, bytes)) => refund_outcome(status, &bytes),
            Err(detail) => RefundOutcome::Error { detail },
        }
    }

    async fn authorize(
        &self,
        channel_key: &str,
        amount: i64,
        currency: &str,
        ttl_secs: i64,
    ) -> Result<AuthorizeOutcome, Unsupported> {
        let body = json!({"key": channel_key, "amount": amount, "currency": currency, "ttl_secs": ttl_secs});
        Ok(
            match self
                .call(reqwest::Method::POST, &["authorizations"], Some(body))
                .await
            {
                Ok((status, bytes)) => authorize_outcome(channel_key, status, &bytes),
                Err(detail) => AuthorizeOutcome::Error { detail },
            },
        )
    }

    async fn capture(
        &self,
        channel_key: &str,
        capture_key: &str,
        amount: i64,
        last: bool,
    ) -> Result<CaptureOutcome, Unsupported> {
        let body = json!({"capture_key": capture_key, "amount": amount, "final": last});
        let path = ["authorizations", channel_key, "captures"];
        Ok(
            match self.call(reqwest::Method::POST, &path, Some(body)).await {
                Ok((status, bytes)) => capture_outcome(channel_key, status, &bytes),
                Err(detail) => CaptureOutcome::Error { detail },
            },
        )
    }

    async fn void(&self, channel_key: &str) -> Result<VoidOutcome, Unsupported> {
        let path = ["authorizations", channel_key, "void"];
        Ok(match self.call(reqwest::Method::POST, &path, None).await {
            Ok((status, bytes)) => void_outcome(status, &bytes),
            Err(detail) => VoidOutcome::Error { detail },
        })
    }

    async fn query_hold(&self, channel_key: &str) -> Result<HoldQueryOutcome, Unsupported> {
        let path = ["authorizations", channel_key];
        Ok(match self.call(reqwest::Method::GET, &path, None).await {
            Ok((status, bytes)) => hold_query_outcome(channel_key, status, &bytes),
            Err(detail) => HoldQueryOutcome::Error { detail },
        })
    }

    fn verify_callback(
        &self,
        headers: &axum::http::HeaderMap,
        body: &[u8],
        now_secs: i64,
    ) -> Result<CallbackFact, CallbackRejection> {
        let Some(secret) = &self.callback_secret else {
            return Err(Unsupported::of(super::Operation::Callback).into());
        };
        verify_sandbox_callback(secret, headers, body, now_secs)
    }

    async fn statement(&self, day: &str) -> Result<String, StatementError> {
        let (status, bytes) = self
            .call(reqwest::Method::GET, &["statements", day], None)
            .await
            .map_err(StatementError::Failed)?;
        if status != 200 {
            return Err(StatementError::Failed(format!(
                "statement of {day}: channel answered {status}"
            )));
        }
        String::from_utf8(bytes.to_vec())
            .map_err(|_| StatementError::Failed(format!("statement of {day} is not UTF-8")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_charge_error(o: &ChargeOutcome) -> bool {
        matches!(o, ChargeOutcome::Error { .. })
    }

    #[test]
    fn charge_answers_map_to_outcomes() {
        assert_eq!(
            charge_outcome(
                "k",
                200,
                br#"{"status":"succeeded","key":"k","amount":100,"currency":"CNY"}"#
            ),
            ChargeOutcome::Succeeded {
                amount: 100,
                currency: "CNY".into()
            }
        );
        assert_eq!(
            charge_outcome(
                "k",
                402,
                br#"{"status":"declined","reason":"card_declined"}"#
            ),
            ChargeOutcome::Declined {
                reason: "card_declined".into()
            }
        );
        assert_eq!(
            charge_outcome("k", 409, br#"{"status":"cancelled"}"#),
            ChargeOutcome::Declined {
                reason: "cancelled".into()
            }
        );
    }

    #[test]
    fn undecidable_charge_answers_are_errors_never_declines() {
        for (status, body) in [
            (409, &br#"{"status":"key_mismatch"}"#[..]),
            (500, br#"{"status":"error"}"#),
            (504, br#"{"status":"timeout"}"#),
            (502, b""),
            (200, b""),
            (200, b"{\"status\":\"succ"),
            (200, br#"{"status":"succeeded"}"#),
            (200, br#"{"status":"declined","reason":"x"}"#),
            (402, b"<html>payment required</html>"),
            (404, br#"{"status":"not_found"}"#),
            (302, b""),
            (
                200,
                br#"{"status":"succeeded","amount":"100","currency":"CNY"}"#,
            ),
            (200, &[0xff, 0xfe, 0x00][..]),
            // a success about another key, or naming none, is no evidence for this one
            (
                200,
                br#"{"status":"succeeded","key":"other","amount":100,"currency":"CNY"}"#,
            ),
            (
                200,
                br#"{"status":"succeeded","amount":100,"currency":"CNY"}"#,
            ),
        ] {
            assert!(
                is_charge_error(&charge_outcome("k", status, body)),
                "{status} {body:?}"
            );
        }
    }

    #[test]
    fn query_answers_map_to_outcomes() {
        assert_eq!(
            query_outcome(
                "k",
                200,
                br#"{"status":"succeeded","key":"k","amount":5,"currency":"CNY"}"#
            ),
            QueryOutcome::Succeeded {
                amount: 5,
                currency: "CNY".into()
            }
        );
        assert_eq!(
            query_outcome("k", 200, br#"{"status":"declined","reason":"r"}"#),
            QueryOutcome::Declined { reason: "r".into() }
        );
        assert_eq!(
            query_outcome("k", 200, br#"{"status":"cancelled"}"#),
            QueryOutcome::Cancelled
        );
        assert_eq!(
            query_outcome("k", 404, br#"{"status":"not_found"}"#),
            QueryOutcome::NotFound
        );
        for (status, body) in [
            (404, &b""[..]),
            (500, b"{}"),
            (200, b"[]"),
            (200, br#"{"status":"weird"}"#),
            (
                200,
                br#"{"status":"succeeded","key":"other","amount":5,"currency":"CNY"}"#,
            ),
        ] {
            assert!(
                matches!(query_outcome("k", status, body), QueryOutcome::Error { .. }),
                "{status}"
            );
        }
    }

    #[test]
    fn cancel_and_refund_answers_map_to_outcomes() {
        assert_eq!(
            cancel_outcome(200, br#"{"status":"cancelled"}"#),
            CancelOutcome::Cancelled
        );
        assert_eq!(
            cancel_outcome(
                409,
                br#"{"status":"succeeded","amount":7,"currency":"CNY"}"#
            ),
            CancelOutcome::AlreadyCharged {
                amount: 7,
                currency: "CNY".into()
            }
        );
        assert!(matches!(
            cancel_outcome(409, br#"{"status":"succeeded"}"#),
            CancelOutcome::Error { .. }
        ));
        assert!(matches!(
            cancel_outcome(500, b""),
            CancelOutcome::Error { .. }
        ));
        assert_eq!(
            refund_outcome(200, br#"{"status":"succeeded"}"#),
            RefundOutcome::Succeeded
        );
        assert_eq!(
            refund_outcome(
                422,
                br#"{"status":"rejected","reason":"exceeds_charge_amount"}"#
            ),
            RefundOutcome::Rejected {
                reason: "exceeds_charge_amount".into()
            }
        );
        assert!(matches!(
            refund_outcome(422, b"nope"),
            RefundOutcome::Error { .. }
        ));
        assert!(matches!(
            refund_outcome(503, b""),
            RefundOutcome::Error { .. }
        ));
    }

    #[test]
    fn hold_answers_map_to_outcomes_and_undecidable_ones_to_errors() {
        assert_eq!(
            authorize_outcome(
                "k",
                200,
                br#"{"status":"authorized","key":"k","amount":9,"currency":"CNY","expires_at_ms":5}"#
            ),
            AuthorizeOutcome::Authorized {
                amount: 9,
                currency: "CNY".into(),
                expires_at_ms: 5
            }
        );
        assert_eq!(
            authorize_outcome("k", 409, br#"{"status":"cancelled"}"#),
            AuthorizeOutcome::Declined {
                reason: "cancelled".into()
            }
        );
        for (status, body) in [
            (200, &br#"{"status":"authorized","key":"other","amount":9,"currency":"CNY","expires_at_ms":5}"#[..]),
            (200, br#"{"status":"authorized","key":"k"}"#),
            (409, br#"{"status":"key_mismatch"}"#),
            (504, br#"{"status":"timeout"}"#),
            (200, b""),
        ] {
            assert!(
                matches!(authorize_outcome("k", status, body), AuthorizeOutcome::Error { .. }),
                "{status}"
            );
        }
        assert_eq!(
            capture_outcome(
                "k",
                200,
                br#"{"status":"captured","key":"k","amount":3,"captured":5,"currency":"CNY","closed":false}"#
            ),
            CaptureOutcome::Captured {
                amount: 3,
                captured_total: 5,
                currency: "CNY".into(),
                closed: false
            }
        );
        assert!(matches!(
            capture_outcome("k", 422, br#"{"status":"rejected","reason":"voided"}"#),
            CaptureOutcome::Rejected { .. }
        ));
        assert!(matches!(
            capture_outcome("k", 422, b"<html>"),
            CaptureOutcome::Error { .. }
        ));
        assert_eq!(
            void_outcome(200, br#"{"status":"expired"}"#),
            VoidOutcome::Expired
        );
        assert!(matches!(void_outcome(500, b""), VoidOutcome::Error { .. }));
        assert_eq!(
            hold_query_outcome("k", 404, br#"{"status":"not_found"}"#),
            HoldQueryOutcome::NotFound
        );
        assert!(matches!(
            hold_query_outcome("k", 404, b""),
            HoldQueryOutcome::Error { .. }
        ));
        assert!(matches!(
            hold_query_outcome(
                "k",
                200,
                br#"{"status":"weird","key":"k","amount":1,"captured":0,"currency":"CNY","expires_at_ms":1}"#
            ),
            HoldQueryOutcome::Error { .. }
        ));
    }

    #[test]
    fn error_detail_quotes_a_bounded_body_on_a_char_boundary() {
        let body = "é".repeat(300);
        let detail = unexpected(500, body.as_bytes());
        assert!(detail.len() <= DETAIL_BODY_MAX + 30);
        assert!(detail.starts_with("unexpected answer 500: é"));
    }

    #[test]
    fn endpoints_keep_a_prefix_and_encode_keys() {
        let c = HttpConnector::new("http://127.0.0.1:9/psp/", Duration::from_secs(1));
        let u = c.endpoint(&["charges", "a/b c?#", "cancel"]).unwrap();
        assert_eq!(
            u.as_str(),
            "http://127.0.0.1:9/psp/charges/a%2Fb%20c%3F%23/cancel"
        );
        let c = HttpConnector::new("http://127.0.0.1:9", Duration::from_secs(1));
        assert_eq!(
            c.endpoint(&["charges"]).unwrap().as_str(),
            "http://127.0.0.1:9/charges"
        );
    }

    #[tokio::test]
    async fn unusable_urls_answer_error_without_panicking() {
        for url in ["", "not a url", "mailto:x@y", "ftp://host/"] {
            let c = HttpConnector::new(url, Duration::from_millis(100));
            assert!(
                matches!(c.charge("k", 1, "CNY").await, ChargeOutcome::Error { .. }),
                "{url}"
            );
            assert!(
                matches!(c.query("k").await, QueryOutcome::Error { .. }),
                "{url}"
            );
            assert!(
                matches!(c.cancel("k").await, CancelOutcome::Error { .. }),
                "{url}"
            );
            assert!(
                matches!(c.refund("k", "r", 1).await, RefundOutcome::Error { .. }),
                "{url}"
            );
            assert!(
                matches!(
                    c.authorize("k", 1, "CNY", 60).await,
                    Ok(AuthorizeOutcome::Error { .. })
                ),
                "{url}"
            );
            assert!(
                matches!(c.void("k").await, Ok(VoidOutcome::Error { .. })),
                "{url}"
            );
        }
    }
}

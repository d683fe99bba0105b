//! The stable error codes: the `error.code` of every `{"error":{"code","message"}}` answer of
//! the merchant API and `/ops/v1`, and the `converge-error-code` header of the console's
//! server functions (issue 33). Each code is written once, here: the server answers with an
//! [`ErrorCode`] (never a string typed at the call site) and the console names the same
//! variants. The wire text of each is its snake_case name ([`ErrorCode::as_str`]), which
//! clients match on, so a name here never changes once sent.

use std::fmt;

/// Defines [`ErrorCode`] from one list: each variant with its docstring and its wire string,
/// so the enum, [`ErrorCode::as_str`], [`ErrorCode::ALL`] and the parse cannot drift apart.
macro_rules! error_codes {
    ($($(#[doc = $doc:literal])+ $variant:ident => $text:literal,)+) => {
        /// A stable machine-readable error code (the `error.code` of an error answer).
        /// Serialised as its snake_case string ([`ErrorCode::as_str`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ErrorCode {
            $($(#[doc = $doc])+ $variant,)+
        }

        impl ErrorCode {
            /// Every code, in declaration order.
            pub const ALL: [ErrorCode; [$(stringify!($variant)),+].len()] =
                [$(ErrorCode::$variant),+];

            /// The code as sent on the wire: snake_case ASCII, e.g. `invalid_amount`.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $text,)+
                }
            }

            /// The code whose wire string is `text`; `None` for a string no variant sends.
            pub fn parse(text: &str) -> Option<ErrorCode> {
                match text {
                    $($text => Some(ErrorCode::$variant),)+
                    _ => None,
                }
            }
        }
    };
}

error_codes! {
    // 400: the request is malformed.
    /// 400: the body is not valid JSON.
    InvalidJson => "invalid_json",
    /// 400: the body is not a JSON object, has unknown, missing, mistyped or repeated fields,
    /// holds a NUL character, could not be read, or holds a value the database cannot store.
    InvalidRequest => "invalid_request",
    /// 400: a path parameter cannot be decoded (e.g. not UTF-8, or `%00`).
    InvalidPath => "invalid_path",
    /// 400: the query string cannot be decoded, or a search is blank or has control
    /// characters.
    InvalidQuery => "invalid_query",
    /// 400: a search is longer than 255 characters.
    QueryTooLong => "query_too_long",
    /// 400: `amount` is not a positive integer number of minor units (payments, refunds).
    InvalidAmount => "invalid_amount",
    /// 400: `currency` is not a supported 3-letter ISO 4217 code.
    InvalidCurrency => "invalid_currency",
    /// 400: `merchant_order_id` is empty, only spaces, too long or has control characters.
    InvalidMerchantOrderId => "invalid_merchant_order_id",
    /// 400: the console was asked for a payment id that is blank or longer than 64
    /// characters.
    InvalidPaymentId => "invalid_payment_id",
    /// 400: a reason (refund, ops action, approval, pause, freeze, redelivery) is missing
    /// or too long, or a failure-reason filter names no failure reason.
    InvalidReason => "invalid_reason",
    /// 400: a time filter is neither RFC 3339 nor `YYYY-MM-DD`.
    InvalidTime => "invalid_time",
    /// 400: a status filter or an error-pool status names no status.
    InvalidStatus => "invalid_status",
    /// 400: an event-type filter names no webhook event type.
    InvalidEventType => "invalid_event_type",
    /// 400: a page cursor is malformed (not one from a previous page, or out of range).
    InvalidCursor => "invalid_cursor",
    /// 400: a page number is out of range (0 to 1000000).
    InvalidPage => "invalid_page",
    /// 400: an export format other than csv or ndjson.
    InvalidFormat => "invalid_format",
    /// 400: an ops action request names no action kind.
    InvalidAction => "invalid_action",
    /// 400: a forced transition's `target_status` is not a payment status.
    InvalidTarget => "invalid_target",
    /// 400: a forced transition lacks evidence of the allowed length.
    InvalidEvidence => "invalid_evidence",
    /// 400: a resolution note is missing or too long.
    InvalidNote => "invalid_note",
    /// 400: a bulk selection (ids, source, filter) is malformed or names items that cannot
    /// be selected.
    InvalidSelection => "invalid_selection",
    /// 400: a bulk request confirms no previewed item.
    NoItems => "no_items",
    /// 400: a bulk request lists more items than one request may take.
    TooManyItems => "too_many_items",
    /// 400: a channel callback's body does not describe a valid event.
    InvalidCallback => "invalid_callback",
    /// 400: a channel callback whose timestamp is outside the 5-minute window.
    CallbackTooOld => "callback_too_old",
    /// 400: a webhook endpoint URL is not an absolute http(s) URL, or has no host.
    InvalidUrl => "invalid_url",
    /// 400: a webhook endpoint URL's scheme is neither https nor http.
    UrlSchemeNotAllowed => "url_scheme_not_allowed",
    /// 400: a webhook endpoint URL carries user info (`user:pass@`).
    UrlUserInfoNotAllowed => "url_user_info_not_allowed",
    /// 400: a webhook endpoint URL is longer than 2048 characters.
    UrlTooLong => "url_too_long",
    /// 400: a webhook endpoint URL's host does not resolve, or resolves to an internal
    /// address (one answer for both).
    UrlAddressRefused => "url_address_refused",
    /// 400: `enabled_events` names no event type, or an unknown one.
    InvalidEnabledEvents => "invalid_enabled_events",
    /// 400: a webhook endpoint description is too long or has control characters.
    InvalidDescription => "invalid_description",
    /// 400: the merchant already has as many live (not deleted) webhook endpoints as one
    /// merchant may (`--max-endpoints-per-merchant`, 16 by default); delete one first.
    EndpointLimit => "endpoint_limit",
    /// 400: a console user change is malformed (name, password, roles), or would disable
    /// the caller or drop the caller's own admin role.
    InvalidUser => "invalid_user",
    /// 400: a merchant name is malformed.
    InvalidMerchant => "invalid_merchant",
    /// 400: a merchant's connector account cannot be used (its API base, secret key, webhook
    /// signing secrets or payment method); the message names the field.
    InvalidConnector => "invalid_connector",
    /// 400: a merchant pricing's percent is not a decimal from 0 to 100 with at most four
    /// decimal places, or its fixed fee is negative or too large (issue 35).
    InvalidPricing => "invalid_pricing",
    /// 400: a passkey registration or assertion is malformed.
    InvalidPasskey => "invalid_passkey",
    /// 400: a POST without an `Idempotency-Key` header.
    IdempotencyKeyMissing => "idempotency_key_missing",
    /// 400: an `Idempotency-Key` that is not 1 to 255 visible ASCII characters.
    IdempotencyKeyInvalid => "idempotency_key_invalid",

    // 401 and 403: who is asking.
    /// 401: a merchant request without a valid `Authorization: Bearer` merchant key.
    Unauthorized => "unauthorized",
    /// 401: a console request without a signed-in session (none, or expired).
    NotAuthenticated => "not_authenticated",
    /// 401: a sign-in or password check refused: unknown user, wrong password or disabled
    /// user alike.
    InvalidCredentials => "invalid_credentials",
    /// 401: a channel callback whose signature does not verify.
    InvalidSignature => "invalid_signature",
    /// 403: the user's roles do not allow this.
    Forbidden => "forbidden",
    /// 403: a cross-site console write (a foreign `Origin` or `Sec-Fetch-Site`).
    CsrfRejected => "csrf_rejected",
    /// 403: the request's `Host` is not one the console answers to (`--allowed-hosts`).
    HostNotAllowed => "host_not_allowed",
    /// 403: the merchant is frozen; its writes are refused.
    MerchantFrozen => "merchant_frozen",
    /// 403: a request approved, rejected or cancelled by its own requester, where another
    /// person must decide.
    SelfApproval => "self_approval",
    /// 403: only the requester may cancel the request.
    NotRequester => "not_requester",
    /// 403: the approver created the requester's account or gave them power recently;
    /// another approver must decide.
    ApprovalConflict => "approval_conflict",
    /// 403: a step-up approval refused, one answer for whatever made it impossible.
    ApprovalRefused => "approval_refused",
    /// 403: the approval must be proven with a passkey, not a password.
    PasskeyRequired => "passkey_required",
    /// 403: a passkey proof that does not hold.
    PasskeyRefused => "passkey_refused",
    /// 403: a change that needs step-up sent without a proof (the user's password or a
    /// passkey).
    StepUpRequired => "step_up_required",
    /// 403: a change whose step-up proof did not hold (e.g. a wrong password).
    StepUpRefused => "step_up_refused",

    // 404, 405, 413, 415: the route or the body.
    /// 404: no such resource (payment, endpoint, delivery, user, merchant, key, passkey,
    /// request, item).
    NotFound => "not_found",
    /// 405: the method is not allowed on this route.
    MethodNotAllowed => "method_not_allowed",
    /// 413: the request body is larger than the route's limit.
    BodyTooLarge => "body_too_large",
    /// 415: a JSON body without a JSON `Content-Type`.
    UnsupportedMediaType => "unsupported_media_type",

    // 409 and 422: the state does not allow it now, or the key was used for another request.
    /// 409: a request with this `Idempotency-Key` is still running; retry after
    /// `Retry-After`.
    IdempotencyKeyInUse => "idempotency_key_in_use",
    /// 422: this `Idempotency-Key` was used with a different request; use a new key.
    IdempotencyKeyReused => "idempotency_key_reused",
    /// 409: the `merchant_order_id` belongs to a payment with other parameters.
    MerchantOrderIdConflict => "merchant_order_id_conflict",
    /// 409: the payment is being updated by another request; retry after `Retry-After`.
    PaymentBusy => "payment_busy",
    /// 409: the payment is not SUCCESS, so it cannot be refunded.
    PaymentNotRefundable => "payment_not_refundable",
    /// 409: the refund is larger than the amount that can still be refunded.
    RefundExceedsRemaining => "refund_exceeds_remaining",
    /// 409: an ops reversal holds this payment; it refunds the remaining amount.
    PaymentReversing => "payment_reversing",
    /// 409: the payment was created with `"capture": "automatic"`: it has no hold to
    /// capture or void (issue 34).
    NotManualCapture => "not_manual_capture",
    /// 409: the payment holds nothing to capture now (not AUTHORIZED: still authorizing,
    /// voided, expired, failed, or captured in full).
    NotCapturable => "not_capturable",
    /// 409: a capture or a void of this hold is in flight, or won the race against this
    /// request; read the payment and decide again.
    HoldBusy => "hold_busy",
    /// 409: the hold lapsed at its expiry; nothing can be captured from it.
    HoldExpired => "hold_expired",
    /// 409: the capture is larger than what the hold still holds (`amount_capturable`).
    CaptureExceedsHold => "capture_exceeds_hold",
    /// 409: the hold cannot be voided: it was captured in part (send a final capture) or in
    /// full, or the payment ended otherwise.
    NotVoidable => "not_voidable",
    /// 409: the payment reached the channel; it can no longer be cancelled before
    /// submission (void its hold, or refund it).
    NotCancelable => "not_cancelable",
    /// 409: this `merchant_order_id` was cancelled before converge saw its payment (TCC empty
    /// rollback): a payment for it is refused, so no hold hangs.
    OrderCancelled => "order_cancelled",
    /// 409: the payment's status cannot be reversed.
    NotReversible => "not_reversible",
    /// 409: forcing this status change is not a whitelisted transition.
    TransitionNotAllowed => "transition_not_allowed",
    /// 409: the payment already has a pending ops request.
    ActionPending => "action_pending",
    /// 409: the request (action, pause, early end, privilege) was already decided.
    NotPending => "not_pending",
    /// 409: the request expired; request again.
    Expired => "expired",
    /// 409: the payment changed since the request; request again.
    Stale => "stale",
    /// 409: the approved request is not executable now (not approved, or another execution
    /// finished first).
    NotExecutable => "not_executable",
    /// 409: the target already has a pending or active pause.
    PauseOpen => "pause_open",
    /// 409: the pause is not active (or changed meanwhile).
    NotOpen => "not_open",
    /// 409: an early end of this pause already awaits an approver.
    EndRequested => "end_requested",
    /// 409: the same privilege change already waits for an admin.
    PrivilegePending => "privilege_pending",
    /// 409: the error-pool item is already resolved.
    AlreadyResolved => "already_resolved",
    /// 409: no action fits the error-pool item's kind.
    NoAction => "no_action",
    /// 409: the action would do nothing now (no job to wake, the delivery already queued,
    /// the event no longer refused).
    NothingToDo => "nothing_to_do",
    /// 409: the error-pool item keeps being reported; retry.
    ItemBusy => "item_busy",
    /// 409: the webhook delivery is still pending; it cannot be redelivered yet.
    DeliveryPending => "delivery_pending",
    /// 409: the webhook endpoint is already enabled.
    AlreadyEnabled => "already_enabled",
    /// 409: the merchant deleted this webhook endpoint.
    WebhookEndpointDeleted => "webhook_endpoint_deleted",
    /// 409: a console user with this name exists.
    UserExists => "user_exists",
    /// 409: the change would leave no enabled admin.
    LastAdmin => "last_admin",
    /// 409: a merchant with this name exists.
    MerchantExists => "merchant_exists",
    /// 409: this passkey is registered already.
    PasskeyExists => "passkey_exists",
    /// 409: the user has as many passkeys as one may register.
    TooManyPasskeys => "too_many_passkeys",
    /// 409: passkeys cannot be required while the user has none.
    NoPasskeys => "no_passkeys",

    // 429, 500, 503: come back later.
    /// 429: too many attempts; retry after `Retry-After`.
    RateLimited => "rate_limited",
    /// 429: the session already has as many live streams open as it may.
    TooManyLiveStreams => "too_many_live_streams",
    /// 500: a failure whose cause is logged, never sent; retry with the same
    /// `Idempotency-Key`.
    InternalError => "internal_error",
    /// 503: the database is unavailable; retry after `Retry-After`.
    DatabaseUnavailable => "database_unavailable",
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code equals its wire string (`ErrorCode::NotFound == "not_found"`), for tests and
/// clients that hold the text of an answer.
impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

/// As `PartialEq<str>`.
impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl serde::Serialize for ErrorCode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for ErrorCode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ErrorCode::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown error code {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    #[test]
    fn every_code_is_unique_snake_case_and_parses_back() {
        let mut seen = std::collections::BTreeSet::new();
        for code in ErrorCode::ALL {
            let s = code.as_str();
            assert!(seen.insert(s), "{s} is sent by two variants");
            assert!(
                !s.is_empty()
                    && s.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
                    && !s.starts_with('_')
                    && !s.ends_with('_')
                    && !s.contains("__"),
                "{s} is not snake_case"
            );
            assert_eq!(ErrorCode::parse(s), Some(code));
        }
        assert_eq!(ErrorCode::parse("no_such_code"), None);
    }

    #[test]
    fn a_code_serialises_as_its_string() {
        assert_eq!(
            serde_json::to_string(&ErrorCode::IdempotencyKeyReused).unwrap(),
            r#""idempotency_key_reused""#
        );
        let back: ErrorCode = serde_json::from_str(r#""invalid_amount""#).unwrap();
        assert_eq!(back, ErrorCode::InvalidAmount);
        assert!(serde_json::from_str::<ErrorCode>(r#""InvalidAmount""#).is_err());
    }
}

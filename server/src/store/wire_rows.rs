//! Database rows of the records the console receives. Those records are `converge_wire`
//! types, shared with the browser and so free of sqlx; each is read through a row type here
//! that derives `sqlx::FromRow` with the same fields and converts field by field.

/// Declares `$row`, a `FromRow` twin of the wire type `$wire` with the fields listed (the
/// same names and types, so a field missing on either side fails to compile), and
/// `From<$row> for $wire`.
macro_rules! wire_row {
    ($row:ident => $wire:path { $($(#[$attr:meta])* $field:ident: $ty:ty),* $(,)? }) => {
        #[derive(Debug, Clone, sqlx::FromRow)]
        pub(crate) struct $row {
            $($(#[$attr])* pub(crate) $field: $ty),*
        }

        impl From<$row> for $wire {
            fn from(r: $row) -> Self {
                Self { $($field: r.$field),* }
            }
        }
    };
}

wire_row!(DbErrorItem => converge_wire::ErrorItem {
    id: i64,
    kind: String,
    dedupe_key: String,
    payment_id: Option<String>,
    summary: String,
    evidence: String,
    #[sqlx(try_from = "String")]
    status: converge_wire::ErrorItemStatus,
    occurrences: i64,
    first_seen: i64,
    last_seen: i64,
    resolution_note: Option<String>,
    resolved_by: Option<String>,
    resolved_at: Option<i64>,
});

wire_row!(DbKindCount => converge_wire::KindCount {
    kind: String,
    count: i64,
});

wire_row!(DbOutboxEvent => converge_wire::OutboxEvent {
    seq: i64,
    id: String,
    merchant_id: i64,
    aggregatetype: String,
    aggregateid: String,
    #[sqlx(rename = "type")]
    event_type: String,
    payload: String,
    created_at: i64,
});

wire_row!(DbDelivery => converge_wire::DeliveryRow {
    id: i64,
    event_id: String,
    event_type: String,
    aggregateid: String,
    endpoint_id: String,
    url: String,
    merchant_id: i64,
    #[sqlx(try_from = "String")]
    status: converge_wire::DeliveryStatus,
    attempts: i64,
    next_attempt_at: Option<i64>,
    last_status: Option<i64>,
    last_error: Option<String>,
    created_at: i64,
    updated_at: i64,
    delivered_at: Option<i64>,
});

wire_row!(DbAttempt => converge_wire::AttemptRow {
    id: i64,
    delivery_id: i64,
    attempted_at: i64,
    duration_ms: i64,
    status_code: Option<i64>,
    response: String,
    error: Option<String>,
});

wire_row!(DbStuckPayment => converge_wire::StuckPayment {
    id: String,
    merchant_id: i64,
    #[sqlx(try_from = "String")]
    status: converge_wire::PaymentStatus,
    amount: i64,
    currency: String,
    created_at: i64,
    updated_at: i64,
    last_error: Option<String>,
    next_attempt_at: Option<i64>,
});

wire_row!(DbAuditRecord => converge_wire::AuditRecord {
    seq: i64,
    at: i64,
    actor: String,
    roles: String,
    action: String,
    target: String,
    reason: String,
    before_state: String,
    after_state: String,
    request_meta: String,
    prev_hash: String,
    hash: String,
});

wire_row!(DbActionRecord => converge_wire::ActionRecord {
    id: String,
    kind: String,
    payment_id: String,
    requested_by: String,
    reason: String,
    evidence: String,
    target_status: Option<String>,
    payment_version: i64,
    #[sqlx(try_from = "String")]
    status: converge_wire::ActionStatus,
    decided_by: Option<String>,
    decision_reason: Option<String>,
    result: Option<String>,
    created_at: i64,
    expires_at: i64,
    decided_at: Option<i64>,
    executed_at: Option<i64>,
});

wire_row!(DbMerchant => converge_wire::Merchant {
    id: i64,
    name: String,
    frozen: bool,
    created_at: i64,
});

wire_row!(DbMerchantKey => converge_wire::MerchantKey {
    id: String,
    merchant_id: i64,
    prefix: String,
    created_at: i64,
    last_used_at: Option<i64>,
    revoked_at: Option<i64>,
});

wire_row!(DbKeyOutcomeCount => converge_wire::lookup::KeyOutcomeCount {
    outcome: String,
    count: i64,
    first_at: i64,
    last_at: i64,
});

wire_row!(DbPauseRecord => converge_wire::pauses::PauseRecord {
    id: String,
    target: String,
    reason: String,
    #[sqlx(try_from = "String")]
    status: converge_wire::PauseStatus,
    requested_by: String,
    requested_at: i64,
    expires_at: i64,
    approved_by: Option<String>,
    approved_at: Option<i64>,
    decision_reason: Option<String>,
    resumed_by: Option<String>,
    resumed_at: Option<i64>,
    resume_reason: Option<String>,
});

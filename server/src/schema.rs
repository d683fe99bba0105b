//! The OpenAPI schemas of request fields whose rules live in the domain (currencies, reasons,
//! notes, pause targets, filters, user names): one function per field, used by the handlers'
//! `#[schema(schema_with = ...)]` and `#[param(schema_with = ...)]` attributes in `api` and
//! `ops`. A leaf module, so the two adapters share it without importing each other; the
//! document itself is assembled in `api::openapi`.

use serde_json::Value;
use utoipa::openapi::{ObjectBuilder, schema::Type};

// Declared beside the query parameters they describe (the console's filters, in the wire
// crate); used here too.
pub use converge_wire::schema::{
    cursor_schema, day_or_time, delivery_status_filter_schema, filter_of, status_filter_schema,
    strings, time_filter_schema,
};
pub use converge_wire::webhooks::event_type_filter_schema;

/// The pattern of a string without U+0000.
pub(crate) const NO_NUL: &str = "^[^\\u0000]*$";

/// The `currency` schema: every ISO 4217 alphabetic code with minor units, the set
/// [`validate_currency`](crate::domain::money::validate_currency) accepts.
pub fn currency_schema() -> utoipa::openapi::Object {
    let mut codes = Vec::new();
    for a in b'A'..=b'Z' {
        for b in b'A'..=b'Z' {
            for c in b'A'..=b'Z' {
                let code = String::from_utf8(vec![a, b, c]).expect("ASCII");
                if crate::domain::money::validate_currency(&code).is_ok() {
                    codes.push(code);
                }
            }
        }
    }
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(codes))
        .examples([Value::from("CNY")])
        .build()
}

/// A string that is not blank (has a character other than white space), without U+0000, of at
/// most `max` characters: what `check_reason` and the note check accept.
fn non_blank(max: usize) -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .max_length(Some(max))
        .pattern(Some("^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$"))
        .build()
}

/// A passkey's name: 1 to 64 characters, not blank, no control characters (what
/// `service::passkeys` accepts).
pub fn passkey_name_schema() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(1))
        .max_length(Some(64))
        .pattern(Some(
            "^[^\\u0000-\\u001f\\u007f-\\u009f]*[^\\s\\u0000-\\u001f\\u007f-\\u009f][^\\u0000-\\u001f\\u007f-\\u009f]*$",
        ))
        .build()
}

/// A WebAuthn credential as the browser's `PublicKeyCredential.toJSON()` gives it (W3C Web
/// Authentication Level 3, §5.1): `id`, `rawId` (base64url), `type` and `response` with
/// `fields` (each base64url text; `userHandle` may be null), and empty client extension
/// results. Written out, rather than "any object", so that every body the schema admits can be
/// answered as documented: a free-form object admits NUL strings the API refuses.
fn credential_schema(fields: &[(&str, bool)]) -> utoipa::openapi::Object {
    use utoipa::openapi::schema::AdditionalProperties;
    let text = || ObjectBuilder::new().schema_type(Type::String).build();
    let mut response = ObjectBuilder::new()
        .schema_type(Type::Object)
        .additional_properties(Some(AdditionalProperties::FreeForm(false)));
    for (name, required) in fields {
        if *required {
            response = response.property(*name, text()).required(*name);
        } else {
            let mut v = serde_json::to_value(text()).expect("a schema serializes");
            v["type"] = serde_json::json!(["string", "null"]);
            let nullable: utoipa::openapi::Object =
                serde_json::from_value(v).expect("still a schema");
            response = response.property(*name, nullable);
        }
    }
    let empty = || {
        ObjectBuilder::new()
            .schema_type(Type::Object)
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
            .build()
    };
    ObjectBuilder::new()
        .schema_type(Type::Object)
        .property("id", text())
        .required("id")
        .property("rawId", text())
        .required("rawId")
        .property("type", strings(&["public-key"]))
        .required("type")
        .property("response", response)
        .required("response")
        .property("authenticatorAttachment", text())
        .property("clientExtensionResults", empty())
        .property("extensions", empty())
        .additional_properties(Some(AdditionalProperties::FreeForm(false)))
        .build()
}

/// The answer of `navigator.credentials.get` (a passkey's assertion): [`credential_schema`].
pub fn assertion_credential_schema() -> utoipa::openapi::Object {
    credential_schema(&[
        ("authenticatorData", true),
        ("clientDataJSON", true),
        ("signature", true),
        ("userHandle", false),
    ])
}

/// The answer of `navigator.credentials.create` (a registration): [`credential_schema`].
pub fn registration_credential_schema() -> utoipa::openapi::Object {
    credential_schema(&[("attestationObject", true), ("clientDataJSON", true)])
}

/// A webhook endpoint's `enabled_events`: `["*"]` alone, or at least one event type
/// (duplicates are ignored).
pub fn enabled_events_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, OneOfBuilder};
    let types: Vec<&str> = crate::domain::webhooks::EventType::ALL
        .iter()
        .map(|t| t.as_str())
        .collect();
    OneOfBuilder::new()
        .item(
            ArrayBuilder::new()
                .items(strings(&types))
                .min_items(Some(1))
                .description(Some("The event types to deliver")),
        )
        .item(
            ArrayBuilder::new()
                .items(strings(&["*"]))
                .min_items(Some(1))
                .max_items(Some(1))
                .description(Some("Every event type, including types added later")),
        )
        .examples([serde_json::json!(["payment.succeeded", "refund.succeeded"])])
        .build()
        .into()
}

/// An emergency-switch pause target: `submissions`, `job:<kind>` (a pausable kind) or
/// `endpoint:<id>`, exactly as [`PauseTarget`](crate::domain::pause::PauseTarget) parses it.
pub fn pause_target_schema() -> utoipa::openapi::Object {
    let kinds = crate::domain::pause::PAUSABLE_JOB_KINDS.join("|");
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!(
            "^(submissions|job:({kinds})|endpoint:[A-Za-z0-9_-]{{1,64}})$"
        )))
        .examples([serde_json::json!("submissions")])
        .build()
}

/// An ops `reason`: not blank, at most [`MAX_REASON`](crate::domain::actions::MAX_REASON)
/// characters.
pub fn reason_schema() -> utoipa::openapi::Object {
    non_blank(crate::domain::actions::MAX_REASON)
}

/// An error-pool resolution note: not blank, at most 2000 characters.
pub fn note_schema() -> utoipa::openapi::Object {
    non_blank(2000)
}

/// The kinds of ops action.
pub fn action_kind_schema() -> utoipa::openapi::Object {
    use crate::domain::actions::ActionKind;
    strings(&ActionKind::ALL.map(ActionKind::as_str))
}

/// A payment status name, as the API spells it.
pub fn payment_status_schema() -> utoipa::openapi::Object {
    use crate::domain::state::PaymentStatus;
    strings(&PaymentStatus::ALL.map(PaymentStatus::as_str))
}

/// A capture mode's name (`automatic`, `manual`; issue 34).
pub fn capture_mode_schema() -> utoipa::openapi::Object {
    use converge_wire::payments::CaptureMode;
    strings(&[CaptureMode::Automatic, CaptureMode::Manual].map(CaptureMode::as_str))
}

/// A refund status name.
pub fn refund_status_schema() -> utoipa::openapi::Object {
    use crate::domain::refunds::RefundStatus;
    strings(&RefundStatus::ALL.map(RefundStatus::as_str))
}

/// A webhook endpoint's status name.
pub fn endpoint_status_schema() -> utoipa::openapi::Object {
    use crate::domain::webhooks::EndpointStatus;
    strings(&EndpointStatus::ALL.map(EndpointStatus::as_str))
}

/// What a bulk retry selects from: `stuck` or `error_pool`.
pub fn selection_source_schema() -> utoipa::openapi::Object {
    strings(&["stuck", "error_pool"])
}

/// A selection's state: one a payment can be stuck in, or empty for all.
pub fn stuck_status_schema() -> utoipa::openapi::Object {
    let states: Vec<&str> = crate::domain::stuck::StuckThresholds::default()
        .per_state()
        .iter()
        .map(|(s, _)| s.as_str())
        .collect();
    filter_of(&states)
}

/// [`stuck_status_schema`] or null (a selection's `status` in a JSON body or answer).
pub fn stuck_status_or_null_schema() -> utoipa::openapi::Object {
    use utoipa::openapi::schema::SchemaType;
    let mut v = vec![Value::Null];
    v.extend(
        serde_json::to_value(stuck_status_schema()).expect("a schema serializes")["enum"]
            .as_array()
            .cloned()
            .unwrap_or_default(),
    );
    ObjectBuilder::new()
        .schema_type(SchemaType::from_iter([Type::String, Type::Null]))
        .enum_values(Some(v))
        .build()
}

/// The body of `POST /ops/v1/actions`: `force_transition` needs `target_status` and
/// `evidence`; the other kinds take neither (and ignore them when sent).
pub fn action_request_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{AdditionalProperties, OneOfBuilder, SchemaType};
    let common = |kinds: utoipa::openapi::Object| {
        ObjectBuilder::new()
            .property("kind", kinds)
            .required("kind")
            .property(
                "payment_id",
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .pattern(Some(NO_NUL)),
            )
            .required("payment_id")
            .property("reason", reason_schema())
            .required("reason")
            .additional_properties(Some(AdditionalProperties::FreeForm(false)))
    };
    let optional = |s: utoipa::openapi::Object| {
        let mut v = serde_json::to_value(s).expect("a schema serializes");
        v["type"] = serde_json::json!(["string", "null"]);
        serde_json::from_value::<utoipa::openapi::Object>(v).expect("still a schema")
    };
    OneOfBuilder::new()
        .item(
            common(strings(&["query", "retry", "reverse"]))
                .property("target_status", optional(ObjectBuilder::new().schema_type(Type::String).pattern(Some(NO_NUL)).build()))
                .property("evidence", optional(ObjectBuilder::new().schema_type(Type::String).pattern(Some(NO_NUL)).build()))
                .description(Some("query, retry (run at once) or reverse (waits for an approver)")),
        )
        .item(
            common(strings(&["void"]))
                .description(Some("void a manual-capture payment's hold (waits for an approver)")),
        )
        .item(
            common(strings(&["capture"]))
                .property(
                    "capture_amount",
                    ObjectBuilder::new()
                        .schema_type(Type::Integer)
                        .format(Some(utoipa::openapi::SchemaFormat::KnownFormat(utoipa::openapi::KnownFormat::Int64)))
                        .minimum(Some(1)),
                )
                .required("capture_amount")
                .property("capture_final", ObjectBuilder::new().schema_type(SchemaType::from_iter([Type::Boolean, Type::Null])))
                .description(Some("capture an amount (integer minor units) of a manual-capture payment's hold, final or not (waits for an approver)")),
        )
        .item(
            common(strings(&["force_transition"]))
                .property("target_status", payment_status_schema())
                .required("target_status")
                .property("evidence", non_blank(crate::domain::actions::MAX_EVIDENCE))
                .required("evidence")
                .description(Some("force_transition (waits for an approver; only whitelisted transitions)")),
        )
        .examples([serde_json::json!({"kind": "reverse", "payment_id": "pay_7f3a9c2e4b1d8f6a0c5e2b9d", "reason": "customer charged twice"})])
        .build()
        .into()
}

/// An error-pool status filter: `open`, `resolved`, or empty for both.
pub fn pool_status_schema() -> utoipa::openapi::Object {
    use converge_wire::lifecycle::ErrorItemStatus;
    let mut v = vec![""];
    v.extend(ErrorItemStatus::ALL.map(ErrorItemStatus::as_str));
    strings(&v)
}

/// An audit export format.
pub fn export_format_schema() -> utoipa::openapi::Object {
    strings(&["csv", "ndjson"])
}

/// A required time: a day (`YYYY-MM-DD`) or an RFC 3339 time.
pub fn time_schema() -> utoipa::openapi::schema::Schema {
    day_or_time(false)
        .examples([Value::from("2026-12-01")])
        .build()
        .into()
}

/// A comma-separated list of at least one role (blank items are skipped).
pub fn roles_schema() -> utoipa::openapi::Object {
    const ROLE: &str = "(viewer|operator|approver|auditor|admin)";
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!(
            "^(\\s*,)*\\s*{ROLE}\\s*(,\\s*({ROLE}\\s*)?)*$"
        )))
        .examples([Value::from("viewer,operator")])
        .build()
}

/// A console user name: 1 to 64 of `a-z A-Z 0-9 . _ - @` (surrounding white space is trimmed).
pub fn username_schema() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^\\s*[A-Za-z0-9._@-]{1,64}\\s*$"))
        .examples([Value::from("bob")])
        .build()
}

/// A new password: 12 to 256 characters.
pub fn new_password_schema() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .min_length(Some(crate::domain::password::MIN_PASSWORD_CHARS))
        .max_length(Some(crate::domain::password::MAX_PASSWORD_CHARS))
        .pattern(Some("^[^\\u0000]*$"))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_currency_schema_lists_accepted_codes_only() {
        let v = serde_json::to_value(currency_schema()).unwrap();
        let codes: Vec<&str> = v["enum"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(codes.contains(&"CNY") && codes.contains(&"JPY") && codes.contains(&"USD"));
        assert!(
            !codes.contains(&"XAU"),
            "funds codes without minor units are refused"
        );
        assert!(
            codes
                .iter()
                .all(|c| crate::domain::money::validate_currency(c).is_ok())
        );
    }
}

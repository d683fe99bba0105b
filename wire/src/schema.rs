//! The OpenAPI schemas of the console's query parameters that are declared in this crate
//! (the `utoipa` feature, the server's): the payment search's and the audit viewer's
//! filters and the webhook delivery search's. The server's `schema` module re-exports them, so each schema is written once
//! wherever its field is declared.

use utoipa::openapi::{ObjectBuilder, schema::Type};

use crate::status::PaymentStatus;

/// A string schema that takes exactly `values`.
pub fn strings(values: &[&str]) -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values.iter().copied()))
        .build()
}

/// `values`, or empty for all (a list filter).
pub fn filter_of(values: &[&str]) -> utoipa::openapi::Object {
    let mut v = vec![""];
    v.extend_from_slice(values);
    strings(&v)
}

/// A failure-reason filter, exactly as the server reads it (no trimming, so that the schema
/// and the check agree on every string): empty for none, `timeout`, `5xx`, `dropped`,
/// `garbled`, `fenced`, or `decline:` and the connector's reason (1 to
/// [`FailureReason::MAX_DECLINE_REASON`](crate::FailureReason::MAX_DECLINE_REASON)
/// characters, no NUL, which PostgreSQL text cannot hold).
pub fn failure_reason_filter_schema() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(format!(
            "^$|^(timeout|5xx|dropped|garbled|fenced|decline:[^\\u0000]{{1,{}}})$",
            crate::FailureReason::MAX_DECLINE_REASON
        )))
        .build()
}

/// A time-in-state filter (minutes, 1 to 525600), or blank for any: exactly what the server
/// accepts, so a schema-valid value is never refused.
pub fn in_state_schema() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some(
            "^\\s*$|^\\s*\\+?0*([1-9][0-9]{0,4}|[1-4][0-9]{5}|5[01][0-9]{3}|52[0-4][0-9]{2}|525[0-5][0-9]{2}|525600)\\s*$",
        ))
        .build()
}

/// A payment-status filter: a status name, or empty for all.
pub fn status_filter_schema() -> utoipa::openapi::Object {
    filter_of(&PaymentStatus::ALL.map(PaymentStatus::as_str))
}

/// A delivery-status filter: a delivery status name, or empty for all.
pub fn delivery_status_filter_schema() -> utoipa::openapi::Object {
    use crate::DeliveryStatus;
    filter_of(&DeliveryStatus::ALL.map(DeliveryStatus::as_str))
}

/// A day (`YYYY-MM-DD`) or an RFC 3339 time, what the server's `parse_utc` accepts; `empty`
/// also allows the empty string (a filter left blank).
pub fn day_or_time(empty: bool) -> utoipa::openapi::schema::AnyOfBuilder {
    use utoipa::openapi::schema::{AnyOfBuilder, KnownFormat, SchemaFormat};
    let b = AnyOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date))),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .format(Some(SchemaFormat::KnownFormat(KnownFormat::DateTime))),
        );
    if empty { b.item(strings(&[""])) } else { b }
}

/// A console time filter: a day (`YYYY-MM-DD`), an RFC 3339 time, or empty for none.
pub fn time_filter_schema() -> utoipa::openapi::schema::Schema {
    day_or_time(true).build().into()
}

/// A paging cursor: empty, or `<created_at ms>_<id>` from a previous page's `next`.
pub fn cursor_schema() -> utoipa::openapi::Object {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .pattern(Some("^\\s*$|^\\s*[+-]?[0-9]{1,18}_[^\\u0000]*$"))
        .build()
}

//! The OpenAPI 3.1 document of the merchant API and the ops API, generated from the handlers'
//! own types and `#[utoipa::path]` attributes (utoipa, utoipa-axum: each route is registered
//! together with its documentation, so a routed handler cannot be missing from the document),
//! served at `GET /openapi.json`, and a reference page rendered from it on the server at
//! `GET /openapi` (no script, no CDN).
//!
//! Adding a route: give the handler a `#[utoipa::path(...)]` attribute (path relative to its
//! router: `/payments` under `/v1`, `/login` under `/ops/v1`) and register it with
//! `.routes(routes!(handler))` on the `OpenApiRouter` in `api::router` or `ops::routes`.

use std::fmt::Write as _;

use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::openapi::OpenApi as Document;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{IntoParams, Modify, OpenApi};

/// The `Idempotency-Key` header every merchant POST requires (DESIGN.md "Idempotency
/// contract").
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Header)]
pub struct IdempotencyKey {
    /// The client's key for this operation: 1 to 255 visible ASCII characters. The same key
    /// with the same body replays the stored answer (with `Idempotent-Replayed: true`); while
    /// the first request runs, 409 `idempotency_key_in_use`; with another body or route, 422
    /// `idempotency_key_reused`; missing, 400 `idempotency_key_missing`; malformed, 400
    /// `idempotency_key_invalid`. Keys are kept at least 24 hours.
    #[serde(rename = "Idempotency-Key")]
    #[param(
        min_length = 1,
        max_length = 255,
        pattern = "^[!-~]+$",
        example = "order-1-try"
    )]
    pub idempotency_key: String,
}

/// The parts of the document that are not a route: title, servers, security schemes, tags.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "converge",
        description = "Payment core: the merchant API (`/v1`, Bearer merchant key, `Idempotency-Key` on every POST) and the ops console's JSON API (`/ops/v1`, session cookie from `POST /ops/v1/login`; state changes are POST with a JSON body from the console's own origin). Errors are always `{\"error\":{\"code\",\"message\"}}` with a stable code.",
        license(name = "MIT", identifier = "MIT")
    ),
    modifiers(&SecuritySchemes),
    tags(
        (name = "payments", description = "Merchant API: payments and refunds"),
        (name = "webhooks", description = "Merchant API: where converge notifies the merchant of payment and refund outcomes"),
        (name = "channel", description = "Signed notifications from the payment channel"),
        (name = "health", description = "Liveness"),
        (name = "ops", description = "Ops console JSON API (session cookie)")
    )
)]
struct Base;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, doc: &mut Document) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "merchant_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The API key `converge merchant add NAME` prints"))
                    .build(),
            ),
        );
    }
}

/// The whole document: [`Base`] with the merchant routes nested at `/v1`, the ops routes at
/// `/ops/v1` and the root routes (`/health`) as they are; `console_cookie` names the console
/// session's cookie for its security scheme (the console's own: `crate::ops::session::COOKIE`).
pub fn document(
    merchant: Document,
    ops: Document,
    root: Document,
    console_cookie: &str,
) -> Document {
    let mut doc = Base::openapi()
        .nest("/v1", merchant)
        .nest("/ops/v1", ops)
        .merge_from(root);
    doc.components
        .get_or_insert_with(Default::default)
        .add_security_scheme(
            "console_session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                console_cookie,
                "The session cookie `POST /ops/v1/login` sets",
            ))),
        );
    doc
}

/// The document as served: `doc` as JSON, with the rule that applies to every string the API
/// takes or gives written into each string schema that has no pattern, enum or format of its
/// own: no U+0000 (`ApiJson`, `ApiPath` and `ApiQuery` refuse it, since PostgreSQL text cannot
/// hold it; schemathesis found it missing from the document).
///
/// Tuples (`prefixItems` with `items: false`, how utoipa writes a Rust tuple) are written as
/// arrays of exactly that many items, each one of the tuple's item schemas: schemathesis 4.32
/// cannot read `prefixItems` ("is not of types boolean, object").
///
/// Every operation authenticated with the merchant key gets the 429 of the per-key rate limit
/// ([`crate::api::ratelimit`]).
pub fn to_json(doc: &Document) -> Value {
    let mut v = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    no_nul_in_strings(&mut v);
    tuples_as_arrays(&mut v);
    rate_limit_responses(&mut v);
    v
}

/// The 429 `rate_limited` of the merchant API's rate limit, with `Retry-After` and the
/// RateLimit header fields (draft-ietf-httpapi-ratelimit-headers-11).
fn rate_limited_response() -> Value {
    let text =
        |description: &str| json!({"description": description, "schema": {"type": "string"}});
    json!({
        "description": "More requests with this API key than the rate limit allows (`--merchant-rate-per-sec` a second, bursts of `--merchant-burst`; counted per server process). Nothing was done; retry after `Retry-After` seconds.",
        "headers": {
            "Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer", "minimum": 1}},
            "RateLimit-Policy": text("The quota policy (draft-ietf-httpapi-ratelimit-headers-11): `\"merchant\";q=<burst>;w=<seconds to refill>`"),
            "RateLimit": text("What is left of the quota: `\"merchant\";r=<requests left>;t=<seconds until full>`"),
        },
        "content": {"application/json": {
            "schema": {"$ref": "#/components/schemas/ErrorBody"},
            "example": {"error": {"code": "rate_limited", "message": "at most 1000 requests a second (bursts of 2000) per API key; retry in 1 s"}},
        }},
    })
}

/// Adds the [`rate_limited_response`] to each operation that names the `merchant_key`
/// security scheme (the channel's callbacks and the root routes are not limited). Inline in
/// each, not a `$ref`, so the reference page shows it where it applies.
fn rate_limit_responses(v: &mut Value) {
    let Some(paths) = v.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for item in paths.values_mut().filter_map(Value::as_object_mut) {
        for op in item.values_mut().filter_map(Value::as_object_mut) {
            let merchant = op
                .get("security")
                .and_then(Value::as_array)
                .is_some_and(|s| s.iter().any(|r| r.get("merchant_key").is_some()));
            if let (true, Some(responses)) = (
                merchant,
                op.get_mut("responses").and_then(Value::as_object_mut),
            ) {
                responses.insert("429".into(), rate_limited_response());
            }
        }
    }
}

fn tuples_as_arrays(v: &mut Value) {
    match v {
        Value::Object(o) => {
            if let (Some(Value::Array(items)), Some(Value::Bool(false))) =
                (o.get("prefixItems").cloned(), o.get("items"))
            {
                let n = items.len();
                let mut unique: Vec<Value> = Vec::new();
                for item in items {
                    if !unique.contains(&item) {
                        unique.push(item);
                    }
                }
                o.remove("prefixItems");
                let item = if unique.len() == 1 {
                    unique.remove(0)
                } else {
                    serde_json::json!({ "anyOf": unique })
                };
                o.insert("items".into(), item);
                o.insert("minItems".into(), Value::from(n));
                o.insert("maxItems".into(), Value::from(n));
            }
            o.values_mut().for_each(tuples_as_arrays);
        }
        Value::Array(a) => a.iter_mut().for_each(tuples_as_arrays),
        _ => {}
    }
}

fn no_nul_in_strings(v: &mut Value) {
    match v {
        Value::Object(o) => {
            let is_string = match o.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                _ => false,
            };
            if is_string
                && !["enum", "const", "pattern", "format"]
                    .iter()
                    .any(|k| o.contains_key(*k))
            {
                o.insert("pattern".into(), Value::from(crate::schema::NO_NUL));
            }
            for (k, child) in o.iter_mut() {
                // Example values are data, not schemas.
                if k != "example" && k != "examples" {
                    no_nul_in_strings(child);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(no_nul_in_strings),
        _ => {}
    }
}

/// The reference page: every operation of `doc` with its parameters, request body, answers,
/// headers and examples, and every schema, as plain HTML.
pub fn reference_html(doc: &Value) -> String {
    let mut h = String::new();
    let title = esc(doc
        .pointer("/info/title")
        .and_then(Value::as_str)
        .unwrap_or("API"));
    let _ = write!(
        h,
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title} API reference</title>\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\"><style>{CSS}</style></head><body><main>\
         <h1>{title} API reference</h1><p>{}</p><p>Machine-readable: <a href=\"/openapi.json\">/openapi.json</a> (OpenAPI {}).</p><nav aria-label=\"Operations\"><ul>",
        esc(doc
            .pointer("/info/description")
            .and_then(Value::as_str)
            .unwrap_or("")),
        esc(doc.get("openapi").and_then(Value::as_str).unwrap_or("")),
    );
    let ops = operations(doc);
    for (path, method, op) in &ops {
        let _ = write!(
            h,
            "<li><a href=\"#{}\"><code>{} {}</code></a> {}</li>",
            anchor(method, path),
            method.to_uppercase(),
            esc(path),
            esc(op.get("summary").and_then(Value::as_str).unwrap_or(""))
        );
    }
    h.push_str("</ul></nav>");
    for (path, method, op) in &ops {
        operation_section(&mut h, path, method, op);
    }
    if let Some(schemas) = doc
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    {
        h.push_str("<section id=\"schemas\"><h2>Schemas</h2>");
        for (name, s) in schemas {
            let _ = write!(
                h,
                "<h3 id=\"schema-{0}\">{0}</h3><pre>{1}</pre>",
                esc(name),
                esc(&serde_json::to_string_pretty(s).unwrap_or_default())
            );
        }
        h.push_str("</section>");
    }
    h.push_str("</main></body></html>");
    h
}

/// One operation's section of the reference page: its summary, description and
/// authentication, its parameters, request body and answers.
fn operation_section(h: &mut String, path: &str, method: &str, op: &Value) {
    let _ = write!(
        h,
        "<section id=\"{}\"><h2><code>{} {}</code></h2><p><strong>{}</strong></p><p>{}</p>",
        anchor(method, path),
        method.to_uppercase(),
        esc(path),
        esc(op.get("summary").and_then(Value::as_str).unwrap_or("")),
        esc(op.get("description").and_then(Value::as_str).unwrap_or(""))
    );
    if let Some(sec) = op.get("security").and_then(Value::as_array) {
        let names: Vec<String> = sec
            .iter()
            .filter_map(Value::as_object)
            .flat_map(|o| o.keys().cloned())
            .collect();
        if !names.is_empty() {
            let _ = write!(h, "<p>Authentication: {}</p>", esc(&names.join(", ")));
        }
    }
    if let Some(params) = op.get("parameters").and_then(Value::as_array) {
        parameters_table(h, params);
    }
    if let Some(body) = op.get("requestBody") {
        h.push_str("<h3>Request body</h3>");
        content(h, body);
    }
    if let Some(responses) = op.get("responses").and_then(Value::as_object) {
        h.push_str("<h3>Responses</h3>");
        for (status, r) in responses {
            let _ = write!(
                h,
                "<h4>{} — {}</h4>",
                esc(status),
                esc(r.get("description").and_then(Value::as_str).unwrap_or(""))
            );
            if let Some(headers) = r.get("headers").and_then(Value::as_object) {
                h.push_str("<ul>");
                for (name, hd) in headers {
                    let _ = write!(
                        h,
                        "<li>header <code>{}</code>: {}</li>",
                        esc(name),
                        esc(hd.get("description").and_then(Value::as_str).unwrap_or(""))
                    );
                }
                h.push_str("</ul>");
            }
            content(h, r);
        }
    }
    h.push_str("</section>");
}

/// An operation's parameters as a table: name, where it goes, whether it is required, its
/// schema and description.
fn parameters_table(h: &mut String, params: &[Value]) {
    h.push_str("<h3>Parameters</h3><table><thead><tr><th scope=\"col\">name</th><th scope=\"col\">in</th><th scope=\"col\">required</th><th scope=\"col\">schema</th><th scope=\"col\">description</th></tr></thead><tbody>");
    for p in params {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
            esc(p.get("name").and_then(Value::as_str).unwrap_or("")),
            esc(p.get("in").and_then(Value::as_str).unwrap_or("")),
            p.get("required").and_then(Value::as_bool).unwrap_or(false),
            esc(&p.get("schema").map(compact).unwrap_or_default()),
            esc(p.get("description").and_then(Value::as_str).unwrap_or(""))
        );
    }
    h.push_str("</tbody></table>");
}

const CSS: &str = "body{font-family:system-ui,sans-serif;line-height:1.5;color:#1a1a1a;background:#fff;margin:0}\
main{max-width:60rem;margin:0 auto;padding:1rem 1.5rem}section{border-top:1px solid #999;margin-top:2rem}\
code,pre{font-family:ui-monospace,monospace}pre{background:#f3f3f3;padding:.75rem;overflow:auto}\
table{border-collapse:collapse}th,td{border:1px solid #999;padding:.25rem .5rem;text-align:left;vertical-align:top}\
a{color:#0645ad}";

/// (path, method, operation) in document order.
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    if let Some(paths) = doc.get("paths").and_then(Value::as_object) {
        for (path, item) in paths {
            for method in ["get", "post", "put", "patch", "delete"] {
                if let Some(op) = item.get(method) {
                    out.push((path.clone(), method.to_owned(), op.clone()));
                }
            }
        }
    }
    out
}

/// The media types of a request body or response, with their schema and examples.
fn content(h: &mut String, v: &Value) {
    let Some(content) = v.get("content").and_then(Value::as_object) else {
        return;
    };
    for (media, m) in content {
        let _ = write!(h, "<p><code>{}</code>", esc(media));
        if let Some(schema) = m.get("schema") {
            match schema.get("$ref").and_then(Value::as_str) {
                Some(r) => {
                    let name = r.rsplit('/').next().unwrap_or(r);
                    let _ = write!(h, ": <a href=\"#schema-{0}\">{0}</a>", esc(name));
                }
                None => {
                    let _ = write!(h, ": <code>{}</code>", esc(&compact(schema)));
                }
            }
        }
        h.push_str("</p>");
        if let Some(ex) = m.get("example") {
            let _ = write!(
                h,
                "<pre>{}</pre>",
                esc(&serde_json::to_string_pretty(ex).unwrap_or_default())
            );
        }
        if let Some(exs) = m.get("examples").and_then(Value::as_object) {
            for (name, ex) in exs {
                let _ = write!(
                    h,
                    "<p>Example <code>{}</code></p><pre>{}</pre>",
                    esc(name),
                    esc(&serde_json::to_string_pretty(ex.get("value").unwrap_or(ex))
                        .unwrap_or_default())
                );
            }
        }
    }
}

fn compact(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 200 {
        format!(
            "{}…",
            &s[..s
                .char_indices()
                .take_while(|(i, _)| *i < 200)
                .last()
                .map_or(0, |(i, _)| i)]
        )
    } else {
        s
    }
}

fn anchor(method: &str, path: &str) -> String {
    let mut a = format!("op-{method}");
    for c in path.chars() {
        a.push(if c.is_ascii_alphanumeric() { c } else { '-' });
    }
    a
}

/// HTML-escapes text for element content and double-quoted attributes.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_page_escapes_what_it_shows() {
        let doc = serde_json::json!({
            "openapi": "3.1.0",
            "info": {"title": "t<i>", "description": "a & b"},
            "paths": {"/x/{id}": {"get": {"summary": "<script>", "responses": {"200": {"description": "ok"}}}}}
        });
        let html = reference_html(&doc);
        assert!(
            html.contains("t&lt;i&gt;")
                && html.contains("a &amp; b")
                && html.contains("&lt;script&gt;")
        );
        assert!(!html.contains("<script>"));
        assert!(html.contains("href=\"#op-get-x--id-\""));
    }
}

//! `GET /openapi.json` and the reference page `GET /openapi`: the document covers the served
//! routes with the idempotency contract (schemathesis in `scripts/checkers.sh` checks the
//! answers against it).

on_both_backends!(the_document_covers_the_merchant_and_ops_apis, |app| {
    let a = app.get("/openapi.json").await;
    assert_eq!(a.status, 200);
    let doc = a.json();
    assert_eq!(doc["openapi"], "3.1.0");
    for (path, method) in [
        ("/v1/payments", "post"),
        ("/v1/payments/{id}", "get"),
        ("/v1/payments/{id}/refunds", "post"),
        ("/v1/payments/cancel", "post"),
        ("/v1/channel/callbacks", "post"),
        ("/health", "get"),
        ("/ops/v1/login", "post"),
        ("/ops/v1/payments", "get"),
        ("/ops/v1/payments/{id}", "get"),
        ("/ops/v1/actions", "post"),
        ("/ops/v1/actions/{id}/approve", "post"),
        ("/ops/v1/audit/export", "get"),
        ("/v1/webhook_endpoints", "post"),
        ("/v1/webhook_endpoints", "get"),
        ("/v1/webhook_endpoints/{id}", "get"),
        ("/v1/webhook_endpoints/{id}", "delete"),
        ("/v1/webhook_endpoints/{id}/rotate_secret", "post"),
        ("/ops/v1/webhooks", "get"),
        ("/ops/v1/webhooks/deliveries", "get"),
        ("/ops/v1/webhooks/deliveries/{id}", "get"),
        ("/ops/v1/webhooks/deliveries/{id}/redeliver", "post"),
        ("/ops/v1/webhooks/endpoints/{id}/recover/preview", "get"),
        ("/ops/v1/webhooks/endpoints/{id}/recover", "post"),
        ("/ops/v1/webhooks/endpoints/{id}/enable", "post"),
        ("/ops/v1/merchants/{name}/keys", "get"),
        ("/ops/v1/merchants/{name}/keys", "post"),
        ("/ops/v1/merchants/{name}/keys/{id}/revoke", "post"),
        ("/ops/v1/search", "get"),
        ("/ops/v1/idempotency-keys/{merchant_id}/{key}", "get"),
        ("/ops/v1/passkeys", "get"),
        ("/ops/v1/passkeys", "post"),
        ("/ops/v1/passkeys/registrations", "post"),
        ("/ops/v1/passkeys/{id}/remove", "post"),
        ("/ops/v1/passkeys/step-up", "post"),
        ("/ops/v1/settings/passkeys", "get"),
        ("/ops/v1/settings/passkeys", "put"),
    ] {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} is not documented"
        );
    }
    let create = &doc["paths"]["/v1/payments"]["post"];
    let key = create["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .expect("Idempotency-Key is documented");
    assert_eq!(key["in"], "header");
    assert_eq!(key["required"], true);
    for status in ["201", "400", "409", "422"] {
        assert!(create["responses"][status].is_object(), "{status} missing");
    }
    assert!(create["responses"]["201"]["headers"]["Idempotent-Replayed"].is_object());
    assert!(create["responses"]["409"]["headers"]["Retry-After"].is_object());
    assert_eq!(
        create["responses"]["403"]["content"]["application/json"]["example"]["error"]["code"],
        "merchant_frozen"
    );
    assert!(
        create["responses"]["400"]["content"]["application/json"]["examples"]["idempotency_key_missing"]
            .is_object()
    );
    // Webhook endpoints: the key on both POSTs, and the refusal of internal URLs.
    let hook = &doc["paths"]["/v1/webhook_endpoints"]["post"];
    for op in [
        hook,
        &doc["paths"]["/v1/webhook_endpoints/{id}/rotate_secret"]["post"],
    ] {
        assert!(
            op["parameters"]
                .as_array()
                .unwrap()
                .iter()
                .any(|p| p["name"] == "Idempotency-Key" && p["required"] == true)
        );
        for status in ["400", "409", "422"] {
            assert!(op["responses"][status].is_object(), "{status} missing");
        }
    }
    let refusals = &hook["responses"]["400"]["content"]["application/json"]["examples"];
    assert!(refusals["url_address_refused"].is_object());
    assert!(
        refusals.get("url_internal_address").is_none()
            && refusals.get("url_unresolvable").is_none(),
        "the two codes that told an internal host from an unresolvable one are gone"
    );
    let since =
        &doc["paths"]["/ops/v1/webhooks/endpoints/{id}/recover/preview"]["get"]["parameters"];
    assert!(
        since
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "since" && p["required"] == true)
    );
    let schemas = &doc["components"]["schemas"];
    assert!(schemas["PaymentView"].is_object() && schemas["ErrorBody"].is_object());
    assert!(schemas["OrderCancelView"].is_object() && schemas["CancelOrderBody"].is_object());

    let page = app.get("/openapi").await;
    assert_eq!(page.status, 200);
    let html = String::from_utf8(page.body).unwrap();
    assert!(html.contains("<code>POST /v1/payments</code>"), "{html}");
    assert!(html.contains("idempotency_key_reused"));
    assert!(
        !html.contains("<script"),
        "the reference page runs no script"
    );
});

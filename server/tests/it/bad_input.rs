//! Bad input on the merchant API, on both backends: every refusal is a 4xx with the JSON
//! error shape `{"error":{"code","message"}}` and a stable code, never a 500, and writes no
//! payment (DESIGN.md "Merchant HTTP API").

use crate::support::*;

use serde_json::json;

const PAYMENTS: &str = "/v1/payments";

/// POSTs each raw body to `/v1/payments` with its own key and expects `status`/`code`.
async fn refused(app: &TestApp, bodies: &[&str], status: u16, code: &str) {
    for (i, body) in bodies.iter().enumerate() {
        let key = format!("k-{code}-{i}");
        let a = app.post_raw(&app.api_key, PAYMENTS, Some(&key), body).await;
        let text = String::from_utf8_lossy(&a.body).to_string();
        assert_eq!(a.status, status, "{body} -> {text}");
        a.assert_error(status, code);
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = $1",
                &[&key]
            )
            .await,
            0,
            "{body}: the key stays free"
        );
    }
    assert_eq!(app.payment_count().await, 0, "no payment written");
}

on_both_backends!(malformed_json_is_400_invalid_json, |app| {
    refused(
        &app,
        &[
            r#"{"amount": 1000,"#,
            "{not json}",
            "",
            "\u{feff}{}",
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o-1"}}"#,
        ],
        400,
        "invalid_json",
    )
    .await;
    let garbage = app
        .send(
            app.client
                .post(format!("{}{PAYMENTS}", app.base))
                .bearer_auth(&app.api_key)
                .header("Idempotency-Key", "k-bytes")
                .header("content-type", "application/json")
                .body(vec![0xff, 0xfe, b'{']),
        )
        .await;
    assert_eq!(garbage.status, 400);
    assert!(garbage.code().starts_with("invalid_"), "{}", garbage.code());
    assert_eq!(app.payment_count().await, 0);
});

on_both_backends!(missing_or_mistyped_field_is_400_invalid_request, |app| {
    refused(
        &app,
        &[
            r#"{"currency":"CNY","merchant_order_id":"o-1"}"#,
            r#"{"amount":1000,"merchant_order_id":"o-1"}"#,
            r#"{"amount":1000,"currency":"CNY"}"#,
            r#"{"amount":"1000","currency":"CNY","merchant_order_id":"o-1"}"#,
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":7}"#,
            r#"{"amount":null,"currency":"CNY","merchant_order_id":"o-1"}"#,
            "[]",
            "null",
            r#""a string""#,
            // The fields in declaration order, as an array: still not a payment object.
            r#"[1000,"CNY","o-1","d"]"#,
        ],
        400,
        "invalid_request",
    )
    .await;
});

on_both_backends!(unknown_field_is_400_invalid_request, |app| {
    refused(
        &app,
        &[
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o-1","status":"SUCCESS"}"#,
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o-1","Amount":5}"#,
        ],
        400,
        "invalid_request",
    )
    .await;
});

on_both_backends!(
    zero_negative_and_too_large_amounts_are_400_invalid_amount,
    |app| {
        refused(
            &app,
            &[
                r#"{"amount":0,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":-1,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":-9223372036854775808,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":1000000000000001,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":9223372036854775807,"currency":"CNY","merchant_order_id":"o-1"}"#,
            ],
            400,
            "invalid_amount",
        )
        .await;
    }
);

on_both_backends!(
    overflowing_and_fractional_amounts_are_400_invalid_request,
    |app| {
        refused(
            &app,
            &[
                r#"{"amount":1e30,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":99999999999999999999,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":9223372036854775808,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":10.5,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":1e-3,"currency":"CNY","merchant_order_id":"o-1"}"#,
                r#"{"amount":1000.0000000000000001,"currency":"CNY","merchant_order_id":"o-1"}"#,
            ],
            400,
            "invalid_request",
        )
        .await;
    }
);

// JSON Schema (the OpenAPI document's language) counts `1000.0` and `1e3` as the integer 1000,
// so the API takes them as 1000, exactly: schemathesis found `8796093022209.0` refused. (The
// conversion is digit by digit, never through f64: `error.rs`'s unit tests.)
on_both_backends!(
    integral_numbers_with_a_fraction_or_exponent_are_exact_integers,
    |app| {
        for (i, (amount, expect)) in [
            ("1000.0", 1000_i64),
            ("1e3", 1000),
            ("10000e-1", 1000),
            ("999999999999999.0", 999_999_999_999_999),
        ]
        .into_iter()
        .enumerate()
        {
            let body = format!(
                r#"{{"amount":{amount},"currency":"CNY","merchant_order_id":"o-int-{i}"}}"#
            );
            let a = app
                .post_raw(&app.api_key, PAYMENTS, Some(&format!("k-int-{i}")), &body)
                .await;
            assert_eq!(
                a.status,
                201,
                "{body} -> {}",
                String::from_utf8_lossy(&a.body)
            );
            assert_eq!(a.json()["amount"], expect, "{body}");
        }
    }
);

on_both_backends!(
    unknown_or_lowercase_currency_is_400_invalid_currency,
    |app| {
        refused(
            &app,
            &[
                r#"{"amount":1000,"currency":"XYZ","merchant_order_id":"o-1"}"#,
                r#"{"amount":1000,"currency":"cny","merchant_order_id":"o-1"}"#,
                r#"{"amount":1000,"currency":"","merchant_order_id":"o-1"}"#,
                r#"{"amount":1000,"currency":"CNYY","merchant_order_id":"o-1"}"#,
                r#"{"amount":1000,"currency":"XAU","merchant_order_id":"o-1"}"#,
            ],
            400,
            "invalid_currency",
        )
        .await;
    }
);

on_both_backends!(bad_merchant_order_id_or_description_is_400, |app| {
    let long_order = "o".repeat(129);
    let long_description = "d".repeat(1025);
    refused(
        &app,
        &[
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":""}"#,
            &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": long_order})
                .to_string(),
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o\n1"}"#,
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":"   "}"#,
        ],
        400,
        "invalid_merchant_order_id",
    )
    .await;
    refused(
        &app,
        &[&json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1", "description": long_description}).to_string()],
        400,
        "invalid_description",
    )
    .await;
});

on_both_backends!(body_over_the_limit_is_413_body_too_large, |app| {
    let description = "d".repeat(17 * 1024);
    let body = json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1", "description": description}).to_string();
    assert!(body.len() > app.running.settings.http.body_limit);
    let a = app
        .post_raw(&app.api_key, PAYMENTS, Some("k-big"), &body)
        .await;
    a.assert_error(413, "body_too_large");
    assert_eq!(app.payment_count().await, 0);
    assert_eq!(
        app.sql_i64("SELECT COUNT(*) FROM idempotency_keys", &[])
            .await,
        0
    );
});

on_both_backends!(wrong_content_type_is_415_unsupported_media_type, |app| {
    let body = r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o-1"}"#;
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        let mut req = app
            .client
            .post(format!("{}{PAYMENTS}", app.base))
            .bearer_auth(&app.api_key)
            .header("Idempotency-Key", "k-ct")
            .body(body);
        if let Some(ct) = content_type {
            req = req.header("content-type", ct);
        }
        app.send(req)
            .await
            .assert_error(415, "unsupported_media_type");
    }
    assert_eq!(app.payment_count().await, 0);
    // The key stayed free: the same key with the right content type executes.
    assert_eq!(
        app.post_raw(&app.api_key, PAYMENTS, Some("k-ct"), body)
            .await
            .status,
        201
    );
});

on_both_backends!(unknown_route_is_404_json, |app| {
    // (Paths outside /v1 belong to the binary's router, whose console fallback answers them.)
    for path in [
        "/v1/nope",
        "/v1/payments/pay_x/nope",
        "/v1/payments/pay_x/refunds/re_x",
    ] {
        app.get(path).await.assert_error(404, "not_found");
    }
    app.post(
        "/v1/charges",
        Some("k-404"),
        &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}),
    )
    .await
    .assert_error(404, "not_found");
    assert_eq!(app.payment_count().await, 0);
});

on_both_backends!(wrong_method_is_405_json, |app| {
    let url = |p: &str| format!("{}{p}", app.base);
    let reqs = [
        app.client.get(url(PAYMENTS)),
        app.client.delete(url("/v1/payments/pay_x")),
        app.client
            .put(url("/v1/payments/pay_x"))
            .header("Idempotency-Key", "k-put")
            .json(&json!({})),
        app.client
            .post(url("/v1/payments/pay_x"))
            .header("Idempotency-Key", "k-post")
            .json(&json!({})),
        app.client.get(url("/v1/payments/pay_x/refunds")),
        app.client.get(url("/v1/channel/callbacks")),
    ];
    for req in reqs {
        app.send(req.bearer_auth(&app.api_key))
            .await
            .assert_error(405, "method_not_allowed");
    }
    assert_eq!(app.payment_count().await, 0);
});

on_both_backends!(missing_or_wrong_bearer_is_401, |app| {
    let body = json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}).to_string();
    let url = format!("{}{PAYMENTS}", app.base);
    let post = || {
        app.client
            .post(&url)
            .header("Idempotency-Key", "k-auth")
            .header("content-type", "application/json")
            .body(body.clone())
    };
    let wrong_key = format!("{}x", app.api_key);
    let reqs = [
        post(),
        post().bearer_auth("sk_test_unknown"),
        post().bearer_auth(&wrong_key),
        post().header("authorization", format!("Basic {}", app.api_key)),
        post().header("authorization", "Bearer "),
        post().header("authorization", app.api_key.clone()),
    ];
    for req in reqs {
        app.send(req).await.assert_error(401, "unauthorized");
    }
    app.get_as("sk_test_unknown", "/v1/payments/pay_x")
        .await
        .assert_error(401, "unauthorized");
    app.send(app.client.get(format!("{}/v1/payments/pay_x", app.base)))
        .await
        .assert_error(401, "unauthorized");
    assert_eq!(app.payment_count().await, 0);
    assert_eq!(
        app.sql_i64("SELECT COUNT(*) FROM idempotency_keys", &[])
            .await,
        0
    );
});

on_both_backends!(another_merchants_payment_is_404, |app| {
    let other = app.add_merchant("globex").await;
    let theirs = app
        .post_raw(
            &other,
            PAYMENTS,
            Some("k-theirs"),
            &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}).to_string(),
        )
        .await;
    assert_eq!(theirs.status, 201);
    let id = theirs.json()["id"].as_str().unwrap().to_string();
    app.get(&format!("/v1/payments/{id}"))
        .await
        .assert_error(404, "not_found");
    app.get("/v1/payments/pay_000000000000000000000000")
        .await
        .assert_error(404, "not_found");
    app.post(
        &format!("/v1/payments/{id}/refunds"),
        Some("k-steal"),
        &json!({"amount": 100}),
    )
    .await
    .assert_error(404, "not_found");
    assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 0);
    assert_eq!(
        app.get_as(&other, &format!("/v1/payments/{id}"))
            .await
            .status,
        200
    );
});

on_both_backends!(bad_refund_bodies_are_4xx_and_reserve_nothing, |app| {
    let p = app
        .post(
            PAYMENTS,
            Some("k-p"),
            &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}),
        )
        .await
        .json();
    let path = format!("/v1/payments/{}/refunds", p["id"].as_str().unwrap());
    for (i, (body, code)) in [
        (r#"{"amount":0}"#, "invalid_amount"),
        (r#"{"amount":-5}"#, "invalid_amount"),
        (r#"{"amount":1.5}"#, "invalid_request"),
        (r#"{"amount":1e30}"#, "invalid_request"),
        (r#"{"reason":"x"}"#, "invalid_request"),
        (r#"{"amount":100,"currency":"CNY"}"#, "invalid_request"),
        (r#"{"amount":"#, "invalid_json"),
    ]
    .into_iter()
    .enumerate()
    {
        app.post_raw(&app.api_key, &path, Some(&format!("k-r{i}")), body)
            .await
            .assert_error(400, code);
    }
    let long_reason = json!({"amount": 100, "reason": "r".repeat(1025)}).to_string();
    app.post_raw(&app.api_key, &path, Some("k-long"), &long_reason)
        .await
        .assert_error(400, "invalid_reason");
    assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 0);
    assert_eq!(
        app.get(&format!("/v1/payments/{}", p["id"].as_str().unwrap()))
            .await
            .json()["refunded_amount"],
        0
    );
});

on_both_backends!(a_field_given_twice_is_400_and_charges_nothing, |app| {
    // A decoder that keeps the last (or first) of two `amount`s would charge an amount the
    // merchant's own logs may not show.
    refused(
        &app,
        &[
            r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o-1","amount":2000}"#,
            r#"{"amount":1000,"currency":"CNY","currency":"USD","merchant_order_id":"o-1"}"#,
        ],
        400,
        "invalid_request",
    )
    .await;
});

on_both_backends!(a_path_id_that_is_not_utf8_is_400_json, |app| {
    app.get("/v1/payments/%FF")
        .await
        .assert_error(400, "invalid_path");
    app.post(
        "/v1/payments/%FF/refunds",
        Some("k-path"),
        &json!({"amount": 1, "reason": "r"}),
    )
    .await
    .assert_error(400, "invalid_path");
    for path in ["/v1/", "/v1"] {
        app.get(path).await.assert_error(404, "not_found");
    }
});

on_both_backends!(an_oversized_callback_is_413_json, |app| {
    let body = vec![b'x'; app.running.settings.http.body_limit + 1];
    app.post_callback(&body, Some("t=1,v1=00"))
        .await
        .assert_error(413, "body_too_large");
});

on_both_backends!(two_idempotency_key_headers_are_400_invalid, |app| {
    let a = app
        .send(
            app.client
                .post(format!("{}{PAYMENTS}", app.base))
                .bearer_auth(&app.api_key)
                .header("Idempotency-Key", "k-one")
                .header("Idempotency-Key", "k-two")
                .json(&json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"})),
        )
        .await;
    a.assert_error(400, "idempotency_key_invalid");
    assert_eq!(app.payment_count().await, 0);
});

on_both_backends!(the_bearer_scheme_is_case_insensitive, |app| {
    let a = app
        .send(
            app.client
                .post(format!("{}{PAYMENTS}", app.base))
                .header("authorization", format!("bearer {}", app.api_key))
                .header("Idempotency-Key", "k-lower")
                .json(&json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"})),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
});

on_both_backends!(a_nul_character_anywhere_is_400_never_500, |app| {
    refused(
        &app,
        &[r#"{"amount":1000,"currency":"CNY","merchant_order_id":"o-1","description":"x\u0000"}"#],
        400,
        "invalid_request",
    )
    .await;
    app.get("/v1/payments/%00")
        .await
        .assert_error(400, "invalid_path");
    app.post(
        "/v1/payments/%00/refunds",
        Some("k-nul"),
        &json!({"amount": 1, "reason": "r"}),
    )
    .await
    .assert_error(400, "invalid_path");
    // The refused request left its key free.
    assert_eq!(
        app.sql_i64("SELECT COUNT(*) FROM idempotency_keys", &[])
            .await,
        0
    );
});

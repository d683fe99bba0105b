//! The merchant API end to end over HTTP, on both backends, against the sandbox channel.

use serde_json::json;

on_both_backends!(health_reports_the_backend, |app| {
    let a = app.get("/health").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["database"]["reachable"], true);
});

on_both_backends!(ordinary_amount_succeeds_with_one_charge_batch, |app| {
    let a = app
        .post("/v1/payments", Some("k-1"), &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}))
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    let p = a.json();
    assert_eq!(p["status"], "SUCCESS");
    let id = p["id"].as_str().unwrap();
    assert_eq!(app.store.ledger_batch_count(id, "charge").await.unwrap(), 1);
});

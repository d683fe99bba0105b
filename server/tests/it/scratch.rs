use serde_json::json;
on_both_backends!(scratch_scope, |app| {
    let a = app.post("/v1/payments", Some("k1"), &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"})).await;
    assert_eq!(a.status, 201);
    let v = sql_strings(&app.db_url, "SELECT scope || ' | ' || route FROM idempotency_keys", &[]).await;
    eprintln!("SCOPE {v:?}");
    let a = app.send(app.client.get(format!("{}/v1/payments", app.base)).bearer_auth(&app.api_key)).await;
    eprintln!("GET /v1/payments {} {:?}", a.status, String::from_utf8_lossy(&a.body));
    let a = app.send(app.client.get(format!("{}/v1/payments", app.base))).await;
    eprintln!("GET /v1/payments noauth {} {:?}", a.status, String::from_utf8_lossy(&a.body));
    let a = app.send(app.client.delete(format!("{}/v1/payments/x", app.base)).bearer_auth(&app.api_key)).await;
    eprintln!("DELETE {} {:?}", a.status, String::from_utf8_lossy(&a.body));
    let a = app.send(app.client.get(format!("{}/nope", app.base)).bearer_auth(&app.api_key)).await;
    eprintln!("/nope {} {:?}", a.status, String::from_utf8_lossy(&a.body));
    let a = app.send(app.client.get(format!("{}/v1/nope", app.base)).bearer_auth(&app.api_key)).await;
    eprintln!("/v1/nope {} {:?}", a.status, String::from_utf8_lossy(&a.body));
});

//! The merchant API end to end over HTTP, on both backends, against the sandbox channel.

use crate::support::{TestApp, set_read_only};
use serde_json::json;

on_both_backends!(health_reports_the_backend, |app| {
    let a = app.get("/health").await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json()["database"]["reachable"], true);
});

// The database gone from under a running server: on SQLite its file deleted (`rm -rf data`;
// the open descriptors still answer `SELECT 1`), on PostgreSQL the database dropped.
on_both_backends!(health_is_503_when_the_database_is_gone, |app| {
    app.skip_invariant_check("deletes its own database: nothing is left to check");
    match app.db {
        Db::Sqlite => std::fs::remove_file(&app.db_url).expect("delete the database file"),
        Db::Postgres => drop_database(&app.db_url).await,
    }
    let a = app.get("/health").await;
    assert_eq!(a.status, 503, "{:?}", a.json());
    assert_eq!(a.json()["status"], "unavailable");
    assert_eq!(a.json()["database"]["reachable"], false);
});

// A failover's read-only window (issue 40): PostgreSQL refuses every write with SQLSTATE
// 25006. A create answers 503 `database_unavailable` with Retry-After (never 500), nothing of
// it is written, /health says `read_only` (503) so a load balancer routes around the server,
// and once the database takes writes again the same request and key succeed without a
// restart. SQLite has no read-only primary: there the test only checks `writable`.
on_both_backends!(
    a_read_only_database_answers_503_and_the_retry_lands_once_it_is_writable_again,
    |app| {
        let body = json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-ro"});
        if matches!(app.db, Db::Sqlite) {
            assert_eq!(
                app.get("/health").await.json()["database"]["writable"],
                true
            );
        } else {
            read_only_then_writable(&app, &body).await;
        }
    }
);

async fn read_only_then_writable(app: &TestApp, body: &serde_json::Value) {
    set_read_only(&app.db_url, true).await;
    let health = app.get("/health").await;
    assert_eq!(health.status, 503, "{:?}", health.json());
    assert_eq!(health.json()["status"], "read_only");
    assert_eq!(health.json()["database"]["reachable"], true);
    assert_eq!(health.json()["database"]["writable"], false);
    let before = health.json()["database"]["reconnects"].as_u64().unwrap();
    let a = app.post("/v1/payments", Some("k-ro"), body).await;
    assert_eq!(a.status, 503, "{:?}", a.json());
    let after = app.get("/health").await.json()["database"]["reconnects"]
        .as_u64()
        .unwrap();
    assert!(
        after > before,
        "the refused write is counted: {before} -> {after}"
    );
    assert_eq!(a.json()["error"]["code"], "database_unavailable");
    assert!(a.headers.contains_key("retry-after"), "{:?}", a.headers);
    set_read_only(&app.db_url, false).await;
    assert_eq!(app.get("/health").await.status, 200);
    let b = app.post("/v1/payments", Some("k-ro"), body).await;
    assert_eq!(b.status, 201, "{:?}", b.json());
    assert_eq!(b.json()["status"], "SUCCESS");
}

on_both_backends!(ordinary_amount_succeeds_with_one_charge_batch, |app| {
    let a = app
        .post(
            "/v1/payments",
            Some("k-1"),
            &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    let p = a.json();
    assert_eq!(p["status"], "SUCCESS");
    let id = p["id"].as_str().unwrap();
    assert_eq!(app.store.ledger_batch_count(id, "charge").await.unwrap(), 1);
});

on_both_backends!(payment_answers_have_the_documented_shape, |app| {
    let a = app
        .post("/v1/payments", Some("k-shape"), &json!({"amount": 1999, "currency": "USD", "merchant_order_id": "o-shape", "description": "d"}))
        .await;
    assert_eq!(a.status, 201);
    assert!(
        a.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/json")
    );
    let created = a.json();
    let mut keys: Vec<_> = created.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "amount",
            "capture",
            "created_at",
            "currency",
            "id",
            "merchant_order_id",
            "refunded_amount",
            "status",
            "updated_at"
        ]
    );
    assert_eq!(
        (created["amount"].clone(), created["currency"].clone()),
        (json!(1999), json!("USD"))
    );
    assert_eq!(created["refunded_amount"], 0);
    assert!(created["id"].as_str().unwrap().starts_with("pay_"));
    for t in ["created_at", "updated_at"] {
        let s = created[t].as_str().unwrap();
        assert!(
            s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok(),
            "{t}: {s}"
        );
    }
    let shown = app
        .get(&format!("/v1/payments/{}", created["id"].as_str().unwrap()))
        .await;
    assert_eq!(shown.status, 200);
    assert_eq!(shown.json(), created, "GET shows what the request answered");
});

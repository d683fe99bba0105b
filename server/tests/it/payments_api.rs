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
            let health = app.get("/health").await.json();
            assert_eq!(health["database"]["writable"], true);
            assert_eq!(health["database"]["role"], "primary");
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
    assert_eq!(health.json()["database"]["role"], "primary");
    let count = |h: &serde_json::Value, what: &str| h["database"][what].as_u64().unwrap();
    let (errors, reconnects) = (
        count(&health.json(), "unavailable_errors"),
        count(&health.json(), "reconnects"),
    );
    let a = app.post("/v1/payments", Some("k-ro"), body).await;
    assert_eq!(a.status, 503, "{:?}", a.json());
    let after = app.get("/health").await.json();
    assert!(
        count(&after, "unavailable_errors") > errors,
        "the refused write is counted: {errors} -> {after}"
    );
    assert_eq!(a.json()["error"]["code"], "database_unavailable");
    assert!(a.headers.contains_key("retry-after"), "{:?}", a.headers);
    set_read_only(&app.db_url, false).await;
    let healthy = app.get("/health").await;
    assert_eq!(healthy.status, 200);
    assert!(
        count(&healthy.json(), "reconnects") > reconnects,
        "the connection opened after the refusal is a reconnect: {reconnects} -> {:?}",
        healthy.json()
    );
    let b = app.post("/v1/payments", Some("k-ro"), body).await;
    assert_eq!(b.status, 201, "{:?}", b.json());
    assert_eq!(b.json()["status"], "SUCCESS");
}

// A create cut by a failover after its first transaction (issue 40's drill: the claim and
// the payment committed, the charge in flight, then the database read-only and the request
// answered 503) leaves no claim held for --key-lease-ms (60 s here): the failed write ends
// its lease as soon as the database takes writes again, so the client's retry resumes the
// same payment within seconds instead of meeting 409 in use for a minute.
on_both_backends!(
    a_create_cut_by_a_read_only_database_is_resumed_by_its_retry_without_waiting_out_the_lease,
    |s| {
        s.idempotency.key_lease_ms = 60_000;
        s.sandbox.sandbox_slow_ms = 2_000;
        s.channel.channel_timeout_ms = 5_000;
    },
    |app| {
        if matches!(app.db, Db::Postgres) {
            cut_then_resumed(&app).await;
        }
    }
);

async fn cut_then_resumed(app: &TestApp) {
    // Amount ...52: the sandbox charges, then answers after sandbox_slow_ms.
    let body = json!({"amount": 1052, "currency": "CNY", "merchant_order_id": "o-cut"});
    let first = app.post("/v1/payments", Some("k-cut"), &body);
    let cut = async {
        tokio::time::sleep(std::time::Duration::from_millis(700)).await;
        set_read_only(&app.db_url, true).await;
    };
    let (a, ()) = tokio::join!(first, cut);
    assert_eq!(a.status, 503, "{:?}", a.json());
    set_read_only(&app.db_url, false).await;
    let started = std::time::Instant::now();
    let mut in_use = 0;
    let b = loop {
        let b = app.post("/v1/payments", Some("k-cut"), &body).await;
        if b.status != 409 || started.elapsed() > std::time::Duration::from_secs(20) {
            break b;
        }
        in_use += 1;
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert!(
        b.status == 200 || b.status == 201,
        "resumed after {in_use} answers 409 in {:?}: {} {:?}",
        started.elapsed(),
        b.status,
        b.json()
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "the retry waited {:?}, {in_use} answers 409: the lease was not ended",
        started.elapsed()
    );
    assert_eq!(b.json()["status"], "SUCCESS");
    assert_eq!(
        app.store
            .ledger_batch_count(b.json()["id"].as_str().unwrap(), "charge")
            .await
            .unwrap(),
        1
    );
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
            "fee",
            "id",
            "merchant_order_id",
            "net",
            "refunded_amount",
            "status",
            "updated_at"
        ]
    );
    assert_eq!(
        (created["amount"].clone(), created["currency"].clone()),
        (json!(1999), json!("USD"))
    );
    // Charged, so its fee (none: the merchant has no pricing) and net are told.
    assert_eq!(
        (created["fee"].clone(), created["net"].clone()),
        (json!(0), json!(1999))
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

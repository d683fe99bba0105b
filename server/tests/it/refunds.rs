//! Merchant refunds over HTTP, on both backends (DESIGN.md "Merchant HTTP API": total refunds
//! never exceed the payment amount; "Payment state machine": partial refunds keep SUCCESS,
//! refunds reaching the amount make it REFUNDED; "Ledger": balanced per currency).

use crate::support::*;

use std::sync::Arc;

use serde_json::{Value, json};

/// A payment of `amount` `currency` (driven to wherever its digits take it).
async fn payment(app: &TestApp, order: &str, amount: i64, currency: &str) -> Value {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": amount, "currency": currency, "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    a.json()
}

fn refunds_path(p: &Value) -> String {
    format!("/v1/payments/{}/refunds", p["id"].as_str().unwrap())
}

async fn refund(app: &TestApp, p: &Value, key: &str, amount: i64) -> Answer {
    app.post(
        &refunds_path(p),
        Some(key),
        &json!({"amount": amount, "reason": "customer asked"}),
    )
    .await
}

async fn current(app: &TestApp, p: &Value) -> Value {
    app.get(&format!("/v1/payments/{}", p["id"].as_str().unwrap()))
        .await
        .json()
}

async fn assert_ledger_balanced(app: &TestApp) {
    let totals = app.store.ledger_totals().await.unwrap();
    assert!(!totals.is_empty());
    for t in totals {
        assert_eq!(t.debits, t.credits, "{t:?}");
    }
}

on_both_backends!(partial_refund_keeps_the_payment_success, |app| {
    let p = payment(&app, "o-1", 1000, "CNY").await;
    let r = refund(&app, &p, "r-1", 300).await;
    assert_eq!(r.status, 201, "{:?}", r.json());
    let body = r.json();
    assert!(body["id"].as_str().unwrap().starts_with("re_"));
    assert_eq!(
        (
            body["payment_id"].clone(),
            body["amount"].clone(),
            body["status"].clone()
        ),
        (p["id"].clone(), json!(300), json!("succeeded"))
    );
    let now = current(&app, &p).await;
    assert_eq!(now["status"], "SUCCESS");
    assert_eq!(now["refunded_amount"], 300);
    let id = p["id"].as_str().unwrap();
    assert_eq!(app.store.ledger_batch_count(id, "refund").await.unwrap(), 1);
    assert_ledger_balanced(&app).await;
});

on_both_backends!(
    refunds_reaching_the_amount_make_the_payment_refunded,
    |app| {
        let p = payment(&app, "o-1", 1000, "CNY").await;
        assert_eq!(refund(&app, &p, "r-1", 600).await.status, 201);
        assert_eq!(current(&app, &p).await["status"], "SUCCESS");
        assert_eq!(refund(&app, &p, "r-2", 400).await.status, 201);
        let now = current(&app, &p).await;
        assert_eq!(now["status"], "REFUNDED");
        assert_eq!(now["refunded_amount"], 1000);
        // REFUNDED is terminal: nothing more to refund.
        refund(&app, &p, "r-3", 1)
            .await
            .assert_error(409, "payment_not_refundable");
        assert_eq!(
            app.store
                .ledger_batch_count(p["id"].as_str().unwrap(), "refund")
                .await
                .unwrap(),
            2
        );
        assert_ledger_balanced(&app).await;
    }
);

on_both_backends!(
    over_refund_is_409_refund_exceeds_remaining_and_reserves_nothing,
    |app| {
        let p = payment(&app, "o-1", 1000, "CNY").await;
        refund(&app, &p, "r-too-much", 1001)
            .await
            .assert_error(409, "refund_exceeds_remaining");
        assert_eq!(refund(&app, &p, "r-1", 700).await.status, 201);
        let over = refund(&app, &p, "r-2", 301).await;
        over.assert_error(409, "refund_exceeds_remaining");
        assert!(
            over.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains("300"),
            "says what remains"
        );
        let now = current(&app, &p).await;
        assert_eq!(
            (now["status"].clone(), now["refunded_amount"].clone()),
            (json!("SUCCESS"), json!(700))
        );
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 1);
        // The refused key stays free.
        assert_eq!(refund(&app, &p, "r-2", 300).await.status, 201);
        assert_eq!(current(&app, &p).await["status"], "REFUNDED");
        assert_ledger_balanced(&app).await;
    }
);

on_both_backends!(
    refund_of_a_failed_or_unknown_payment_is_409_payment_not_refundable,
    |app| {
        let failed = payment(&app, "o-fail", 1051, "CNY").await;
        assert_eq!(failed["status"], "FAILED");
        refund(&app, &failed, "r-1", 100)
            .await
            .assert_error(409, "payment_not_refundable");
        let unknown = payment(&app, "o-unknown", 1053, "CNY").await;
        assert_eq!(unknown["status"], "UNKNOWN");
        refund(&app, &unknown, "r-2", 100)
            .await
            .assert_error(409, "payment_not_refundable");
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 0);
        assert_eq!(current(&app, &failed).await["refunded_amount"], 0);
    }
);

on_both_backends!(
    refund_replay_with_the_same_key_returns_the_same_refund,
    |app| {
        let p = payment(&app, "o-1", 1000, "CNY").await;
        let first = refund(&app, &p, "r-1", 250).await;
        assert_eq!(first.status, 201);
        let again = refund(&app, &p, "r-1", 250).await;
        assert_eq!(again.status, 201);
        assert_eq!(again.header("idempotent-replayed"), "true");
        assert_eq!(again.body, first.body);
        refund(&app, &p, "r-1", 251)
            .await
            .assert_error(422, "idempotency_key_reused");
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 1);
        assert_eq!(current(&app, &p).await["refunded_amount"], 250);
    }
);

on_both_backends!(concurrent_refunds_never_exceed_the_amount, |app| {
    let p = payment(&app, "o-1", 1000, "CNY").await;
    let barrier = Arc::new(tokio::sync::Barrier::new(8));
    let tasks: Vec<_> = (0..8)
        .map(|i| {
            let (client, url, api_key, barrier) = (
                app.client.clone(),
                format!("{}{}", app.base, refunds_path(&p)),
                app.api_key.clone(),
                barrier.clone(),
            );
            tokio::spawn(async move {
                let req = client
                    .post(url)
                    .bearer_auth(api_key)
                    .header("Idempotency-Key", format!("r-{i}"))
                    .json(&json!({"amount": 300}));
                barrier.wait().await;
                let r = req.send().await.unwrap();
                (r.status().as_u16(), r.text().await.unwrap())
            })
        })
        .collect();
    let mut created = 0;
    for t in tasks {
        let (status, body) = t.await.unwrap();
        match status {
            201 => created += 1,
            409 => assert!(body.contains("refund_exceeds_remaining"), "{body}"),
            other => panic!("{other}: {body}"),
        }
    }
    assert_eq!(created, 3);
    let now = current(&app, &p).await;
    assert_eq!(
        (now["status"].clone(), now["refunded_amount"].clone()),
        (json!("SUCCESS"), json!(900))
    );
    assert_eq!(
        app.store
            .ledger_batch_count(p["id"].as_str().unwrap(), "refund")
            .await
            .unwrap(),
        3
    );
    assert_ledger_balanced(&app).await;
});

on_both_backends!(
    ledger_balances_per_currency_after_charges_and_refunds,
    |app| {
        let cny = payment(&app, "o-cny", 1000, "CNY").await;
        let usd = payment(&app, "o-usd", 2500, "USD").await;
        let jpy = payment(&app, "o-jpy", 700, "JPY").await;
        let failed = payment(&app, "o-failed", 1051, "CNY").await;
        assert_eq!(failed["status"], "FAILED");
        assert_eq!(refund(&app, &cny, "r-cny", 1000).await.status, 201);
        assert_eq!(refund(&app, &usd, "r-usd", 500).await.status, 201);
        refund(&app, &jpy, "r-jpy", 701)
            .await
            .assert_error(409, "refund_exceeds_remaining");
        let totals: Vec<_> = app
            .store
            .ledger_totals()
            .await
            .unwrap()
            .into_iter()
            .map(|t| (t.currency, t.debits, t.credits))
            .collect();
        assert_eq!(
            totals,
            vec![
                ("CNY".to_string(), 2000, 2000),
                ("JPY".to_string(), 700, 700),
                ("USD".to_string(), 3000, 3000),
            ]
        );
        assert_eq!(current(&app, &cny).await["status"], "REFUNDED");
        assert_eq!(current(&app, &usd).await["status"], "SUCCESS");
    }
);

/// What a refund request that crashed leaves behind: a running claim on `key` (lapsing after
/// `lease_ms`) whose recovery point is `refund_id`, recorded before anything was reserved.
async fn crashed_refund_claim(
    app: &TestApp,
    p: &Value,
    key: &str,
    body: &Value,
    refund_id: &str,
    lease_ms: i64,
) {
    use converge_server::domain::clock::{Clock, SystemClock};
    use converge_server::domain::fingerprint::fingerprint;
    use converge_server::store::keys::{ClaimResult, KeyClaim, KeyRef};
    let now = SystemClock.now_ms();
    let claim = KeyClaim {
        merchant_id: app.merchant_id,
        scope: format!("POST {}", refunds_path(p)),
        idem_key: key.into(),
        route: "POST /v1/payments/{id}/refunds".into(),
        fingerprint: fingerprint(body),
        lease_token: converge_server::service::ids::new_token(),
        lease_expires_at: now + lease_ms,
        now,
        expires_at: now + 86_400_000,
    };
    assert_eq!(
        app.store.claim_key(&claim).await.unwrap(),
        ClaimResult::Claimed { resource_id: None }
    );
    let key_ref = KeyRef {
        merchant_id: app.merchant_id,
        scope: claim.scope,
        idem_key: key.into(),
        lease_token: claim.lease_token,
    };
    assert!(
        app.store
            .set_key_resource(&key_ref, refund_id)
            .await
            .unwrap()
    );
}

/// Retries a refund until the crashed claim's lease lapses.
async fn retry_refund(app: &TestApp, p: &Value, key: &str, body: &Value) -> Answer {
    eventually(
        std::time::Duration::from_secs(5),
        "the crashed claim's lease to lapse",
        || async {
            let a = app.post(&refunds_path(p), Some(key), body).await;
            (a.status != 409 || a.code() != "idempotency_key_in_use").then_some(a)
        },
    )
    .await
}

on_both_backends!(
    crash_after_recording_the_refund_id_creates_that_one_refund_on_retry,
    |app| {
        let p = payment(&app, "o-1", 1000, "CNY").await;
        let body = json!({"amount": 400});
        // A lease long enough that the immediate retry surely falls within it.
        crashed_refund_claim(
            &app,
            &p,
            "r-crash",
            &body,
            "re_crashed000000000000000001",
            1_000,
        )
        .await;
        app.post(&refunds_path(&p), Some("r-crash"), &body)
            .await
            .assert_error(409, "idempotency_key_in_use");
        let r = retry_refund(&app, &p, "r-crash", &body).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        assert_eq!(r.json()["id"], "re_crashed000000000000000001");
        assert_eq!(r.json()["status"], "succeeded");
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 1);
        assert_eq!(current(&app, &p).await["refunded_amount"], 400);
        assert_ledger_balanced(&app).await;
    }
);

on_both_backends!(
    crash_after_reserving_a_refund_resumes_it_and_never_reserves_twice,
    |app| {
        use converge_server::store::{CreateRefund, NewRefund};
        let p = payment(&app, "o-1", 1000, "CNY").await;
        let body = json!({"amount": 700});
        crashed_refund_claim(
            &app,
            &p,
            "r-crash",
            &body,
            "re_crashed000000000000000002",
            300,
        )
        .await;
        // The crashed request got as far as reserving its refund.
        let now = chrono::Utc::now().timestamp_millis();
        let reserved = app
            .store
            .create_refund(&NewRefund {
                id: "re_crashed000000000000000002".into(),
                payment_id: p["id"].as_str().unwrap().into(),
                amount: 700,
                reason: String::new(),
                now,
                job_due_at: now + 60_000,
                max_attempts: 5,
            })
            .await
            .unwrap();
        assert!(matches!(reserved, CreateRefund::Created(_)), "{reserved:?}");
        let r = retry_refund(&app, &p, "r-crash", &body).await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        assert_eq!(r.json()["id"], "re_crashed000000000000000002");
        assert_eq!(r.json()["status"], "succeeded");
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await,
            1,
            "no second refund"
        );
        assert_eq!(current(&app, &p).await["refunded_amount"], 700);
        assert_eq!(
            app.store
                .ledger_batch_count(p["id"].as_str().unwrap(), "refund")
                .await
                .unwrap(),
            1
        );
        // Its replay is the resumed answer.
        let replay = app.post(&refunds_path(&p), Some("r-crash"), &body).await;
        assert_eq!(replay.body, r.body);
        assert_ledger_balanced(&app).await;
    }
);

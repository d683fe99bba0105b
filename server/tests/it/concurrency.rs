//! Concurrent merchant requests, on both backends: one key is one payment and one channel
//! charge however many copies race; distinct keys never 500 and leave no orphaned claim.

use crate::support::*;

use std::sync::Arc;

use serde_json::{Value, json};

const N: usize = 20;

/// Fires `bodies` (key, body) at `POST /v1/payments` all at once; returns the answers in order.
async fn fire(app: &TestApp, api_key: &str, bodies: Vec<(String, Value)>) -> Vec<Answer> {
    let barrier = Arc::new(tokio::sync::Barrier::new(bodies.len()));
    let tasks: Vec<_> = bodies
        .into_iter()
        .map(|(key, body)| {
            let (client, url, api_key, barrier) = (
                app.client.clone(),
                format!("{}/v1/payments", app.base),
                api_key.to_string(),
                barrier.clone(),
            );
            tokio::spawn(async move {
                let req = client
                    .post(url)
                    .bearer_auth(api_key)
                    .header("Idempotency-Key", key)
                    .json(&body);
                barrier.wait().await;
                let r = req.send().await.expect("request sent");
                let status = r.status().as_u16();
                let headers = r.headers().clone();
                Answer {
                    status,
                    headers,
                    body: r.bytes().await.unwrap().to_vec(),
                }
            })
        })
        .collect();
    let mut answers = vec![];
    for t in tasks {
        answers.push(t.await.unwrap());
    }
    answers
}

/// Idempotency keys not `done` (a claim left running after its request answered).
async fn unfinished_keys(app: &TestApp) -> i64 {
    app.sql_i64(
        "SELECT COUNT(*) FROM idempotency_keys WHERE state <> 'done'",
        &[],
    )
    .await
}

on_both_backends!(
    twenty_identical_requests_with_one_key_make_one_payment_and_one_charge,
    |s| {
        // Twenty at once on a loaded 2-CPU machine: the channel's prompt answer must not be
        // cut off by the test settings' short timeout (a timeout's outcome is tested apart).
        s.channel.channel_timeout_ms = 5_000;
    },
    |app| {
        let body = json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-race"});
        let answers = fire(
            &app,
            &app.api_key,
            (0..N)
                .map(|_| ("k-race".to_string(), body.clone()))
                .collect(),
        )
        .await;
        let created: Vec<_> = answers.iter().filter(|a| a.status == 201).collect();
        assert!(!created.is_empty(), "somebody executed");
        for a in &answers {
            match a.status {
                201 => assert_eq!(
                    a.body, created[0].body,
                    "every 201 is the one answer, byte for byte"
                ),
                409 => {
                    a.assert_error(409, "idempotency_key_in_use");
                    assert!(!a.header("retry-after").is_empty());
                }
                other => panic!("{other}: {}", String::from_utf8_lossy(&a.body)),
            }
        }
        let originals = created
            .iter()
            .filter(|a| a.header("idempotent-replayed").is_empty())
            .count();
        assert_eq!(
            originals, 1,
            "exactly one request executed; the other 201s are replays"
        );
        let id = created[0].json()["id"].as_str().unwrap().to_string();
        assert_eq!(app.payment_count().await, 1);
        let p = app.store.payment(&id).await.unwrap().unwrap();
        assert_eq!(p.status.as_str(), "SUCCESS");
        assert_eq!(p.submit_attempts, 1);
        assert_eq!(app.channel_attempts(&p.channel_key).await, 1);
        assert_eq!(app.channel_charges().await, 1);
        assert_eq!(
            app.store.ledger_batch_count(&id, "charge").await.unwrap(),
            1
        );
        assert_eq!(unfinished_keys(&app).await, 0);
    }
);

on_both_backends!(
    twenty_distinct_keys_at_once_make_twenty_payments_and_no_orphaned_claim,
    |s| {
        // Twenty at once on a loaded 2-CPU machine: the channel's prompt answer must not be
        // cut off by the test settings' short timeout (a timeout's outcome is tested apart).
        s.channel.channel_timeout_ms = 5_000;
    },
    |app| {
        let bodies = (0..N)
        .map(|i| (format!("k-{i}"), json!({"amount": 1000 + i as i64 * 100, "currency": "CNY", "merchant_order_id": format!("o-{i}")})))
        .collect();
        let answers = fire(&app, &app.api_key, bodies).await;
        for a in &answers {
            assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
            assert_eq!(a.json()["status"], "SUCCESS");
        }
        assert_eq!(app.payment_count().await, N as i64);
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM idempotency_keys WHERE state = 'done'",
                &[]
            )
            .await,
            N as i64
        );
        assert_eq!(unfinished_keys(&app).await, 0);
        assert_eq!(app.channel_charges().await, N as i64);
        for t in app.store.ledger_totals().await.unwrap() {
            assert_eq!(t.debits, t.credits, "{t:?}");
        }
    }
);

on_both_backends!(
    one_merchant_order_id_under_many_keys_at_once_is_one_payment,
    |app| {
        let body = json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-same"});
        let answers = fire(
            &app,
            &app.api_key,
            (0..10).map(|i| (format!("k-{i}"), body.clone())).collect(),
        )
        .await;
        let ids: std::collections::BTreeSet<_> = answers
            .iter()
            .map(|a| {
                assert!(
                    matches!(a.status, 200 | 201),
                    "{}: {}",
                    a.status,
                    String::from_utf8_lossy(&a.body)
                );
                a.json()["id"].as_str().unwrap().to_string()
            })
            .collect();
        assert_eq!(ids.len(), 1, "{ids:?}");
        assert_eq!(answers.iter().filter(|a| a.status == 201).count(), 1);
        assert_eq!(app.payment_count().await, 1);
        assert_eq!(app.channel_charges().await, 1);
        assert_eq!(unfinished_keys(&app).await, 0);
    }
);

on_both_backends!(
    identical_invalid_requests_with_one_key_race_without_a_500,
    |app| {
        // Each refused request releases the key while the others claim it: a claim must never trip
        // over a release in between its insert and its read.
        for round in 0..5 {
            let bad = json!({"amount": 1000, "currency": "XYZ", "merchant_order_id": "o-bad"});
            let answers = fire(
                &app,
                &app.api_key,
                (0..N)
                    .map(|_| (format!("k-bad-{round}"), bad.clone()))
                    .collect(),
            )
            .await;
            for a in &answers {
                match a.status {
                    400 => a.assert_error(400, "invalid_currency"),
                    409 => a.assert_error(409, "idempotency_key_in_use"),
                    other => panic!(
                        "round {round}: {other}: {}",
                        String::from_utf8_lossy(&a.body)
                    ),
                }
            }
        }
        assert_eq!(app.payment_count().await, 0);
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM idempotency_keys", &[])
                .await,
            0,
            "every refused claim released"
        );
    }
);

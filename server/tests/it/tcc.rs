//! TCC by business key (issue 34; seed 004 §5.1), on both backends through the merchant API
//! with the in-process sandbox: `POST /v1/payments/cancel {"merchant_order_id"}` before the
//! Try tombstones the order and the Try is refused (409 `order_cancelled`, nothing written,
//! nothing sent); a repeated Cancel answers what the first did; the Cancel of an existing
//! payment cancels it (PENDING) or voids its hold (a manual-capture payment); a create and a
//! cancel of one order racing leave exactly one of the payment and the tombstone; bad input is
//! a 400 with a stable code and writes nothing.

use serde_json::{Value, json};

use crate::support::*;

const CANCEL: &str = "/v1/payments/cancel";

/// POSTs a cancel of `order` under `key`.
async fn cancel(app: &TestApp, key: &str, order: &str) -> Answer {
    app.post(CANCEL, Some(key), &json!({"merchant_order_id": order}))
        .await
}

/// POSTs a create of `order` (1000 CNY, `capture` mode) under `key`.
async fn create(app: &TestApp, key: &str, order: &str, capture: &str) -> Answer {
    app.post(
        "/v1/payments",
        Some(key),
        &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": order, "capture": capture}),
    )
    .await
}

/// Tombstones of `order` (of the default merchant).
async fn tombstones(app: &TestApp, order: &str) -> i64 {
    app.sql_i64(
        "SELECT COUNT(*) FROM order_tombstones WHERE merchant_order_id = $1",
        &[order],
    )
    .await
}

/// Payments of `order`.
async fn payments_of(app: &TestApp, order: &str) -> i64 {
    app.sql_i64(
        "SELECT COUNT(*) FROM payments WHERE merchant_order_id = $1",
        &[order],
    )
    .await
}

/// Idempotency-Keys stored under `key` (0: the key is free).
async fn keys(app: &TestApp, key: &str) -> i64 {
    app.sql_i64(
        "SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = $1",
        &[key],
    )
    .await
}

/// Requests of any kind the sandbox saw (charges, authorizations, captures, voids).
async fn channel_requests(app: &TestApp) -> i64 {
    app.sandbox_get("/stats").await.json()["attempts"]
        .as_i64()
        .expect("attempts")
}

/// A PENDING payment of `order` made below the API (its submit job is due after the test
/// settings' 60 s submit delay, so nothing sends it meanwhile), as one held by the emergency
/// switch is.
async fn pending_payment(app: &TestApp, order: &str) -> converge_server::store::Payment {
    use converge_server::service::payments::{InsertOutcome, PaymentInput};
    let input = PaymentInput {
        amount: 1000,
        currency: "CNY".into(),
        merchant_order_id: order.into(),
        description: String::new(),
        capture_mode: Default::default(),
    };
    let InsertOutcome::Created(p) = app
        .running
        .state
        .core
        .insert_payment(app.merchant_id, &input, None)
        .await
        .expect("insert")
    else {
        panic!("order {order} exists already");
    };
    assert_eq!(p.status.as_str(), "PENDING");
    p
}

on_both_backends!(
    a_cancel_before_its_try_tombstones_the_order_and_the_try_is_refused_unsent,
    |app| {
        let a = cancel(&app, "c-1", "o-1").await;
        assert_eq!(a.status, 200, "{:?}", a.json());
        assert_eq!(
            a.json(),
            json!({"merchant_order_id": "o-1", "outcome": "tombstoned", "payment": null})
        );
        assert_eq!(tombstones(&app, "o-1").await, 1);
        for (key, capture) in [("t-1", "automatic"), ("t-2", "manual")] {
            let a = create(&app, key, "o-1", capture).await;
            a.assert_error(409, "order_cancelled");
            // Nothing written: no payment, and the key is free again.
            assert_eq!(payments_of(&app, "o-1").await, 0);
            assert_eq!(keys(&app, key).await, 0, "{key} is released");
        }
        // Nothing reached the channel: no hanging hold, no charge.
        assert_eq!(channel_requests(&app).await, 0);
        assert_eq!(app.channel_charges().await, 0);
        // The refused key is free: used for another order, it creates that one.
        let a = create(&app, "t-1", "o-2", "automatic").await;
        assert_eq!(a.status, 201, "{:?}", a.json());
        assert_eq!(payments_of(&app, "o-2").await, 1);
        // Another merchant's order of the same id is not tombstoned.
        let other = app.add_merchant("globex").await;
        let a = app
            .post_raw(
                &other,
                "/v1/payments",
                Some("g-1"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}).to_string(),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.json());
    }
);

on_both_backends!(a_repeated_cancel_answers_what_the_first_did, |app| {
    let first = cancel(&app, "c-1", "o-1").await;
    assert_eq!(first.status, 200);
    // The same key: the stored answer, replayed byte for byte.
    let replay = cancel(&app, "c-1", "o-1").await;
    assert_eq!(replay.status, 200);
    assert_eq!(replay.header("idempotent-replayed"), "true");
    assert_eq!(replay.body, first.body);
    // Another key (the coordinator's retry after a timeout): tombstoned again, one tombstone.
    let again = cancel(&app, "c-2", "o-1").await;
    assert_eq!((again.status, again.json()), (200, first.json()));
    assert_eq!(tombstones(&app, "o-1").await, 1);
    // The same for a cancelled payment: canceled both times, one CANCELED payment.
    let p = pending_payment(&app, "o-2").await;
    let one = cancel(&app, "c-3", "o-2").await.json();
    let two = cancel(&app, "c-4", "o-2").await.json();
    assert_eq!(one["outcome"], "canceled");
    assert_eq!(two["outcome"], "canceled");
    assert_eq!(one["payment"]["status"], "CANCELED");
    assert_eq!(one["payment"], two["payment"]);
    assert_eq!(app.channel_attempts(&p.channel_key).await, 0);
    assert_eq!(tombstones(&app, "o-2").await, 0);
});

on_both_backends!(
    a_cancel_of_a_pending_payment_cancels_it_before_it_reaches_the_channel,
    |app| {
        let p = pending_payment(&app, "o-1").await;
        let a = cancel(&app, "c-1", "o-1").await;
        assert_eq!(a.status, 200, "{:?}", a.json());
        let v = a.json();
        assert_eq!(v["outcome"], "canceled");
        assert_eq!(v["merchant_order_id"], "o-1");
        assert_eq!(v["payment"]["id"], p.id.as_str());
        assert_eq!(v["payment"]["status"], "CANCELED");
        let shown = app.get(&format!("/v1/payments/{}", p.id)).await.json();
        assert_eq!(shown["status"], "CANCELED");
        assert_eq!(app.channel_attempts(&p.channel_key).await, 0);
        // No tombstone: the payment is the order's record.
        assert_eq!(tombstones(&app, "o-1").await, 0);
    }
);

on_both_backends!(
    a_cancel_of_an_authorized_manual_payment_voids_its_hold,
    |app| {
        let a = create(&app, "k-1", "o-1", "manual").await;
        assert_eq!(a.status, 201, "{:?}", a.json());
        let id = a.json()["id"].as_str().unwrap().to_string();
        app.wait_for_status(&id, "AUTHORIZED", std::time::Duration::from_secs(10))
            .await;
        let a = cancel(&app, "c-1", "o-1").await;
        assert_eq!(a.status, 200, "{:?}", a.json());
        let v = a.json();
        assert_eq!(v["outcome"], "voided");
        assert_eq!(v["payment"]["id"], id.as_str());
        assert_eq!(v["payment"]["status"], "VOIDED", "{v}");
        // Voided: nothing can be captured after it, and a second cancel answers the same.
        let c = app
            .post(
                &format!("/v1/payments/{id}/captures"),
                Some("cap-1"),
                &json!({"amount": 500}),
            )
            .await;
        assert_eq!(c.status, 409, "{:?}", c.json());
        let again = cancel(&app, "c-2", "o-1").await.json();
        assert_eq!(again["outcome"], "voided");
        assert_eq!(again["payment"]["status"], "VOIDED");
        assert_eq!(tombstones(&app, "o-1").await, 0);
    }
);

on_both_backends!(
    a_cancel_of_a_charged_payment_is_refused_and_leaves_the_key_free,
    |app| {
        let p = app.pay("k-1", "o-1", 1000).await;
        assert_eq!(p["status"], "SUCCESS", "{p}");
        cancel(&app, "c-1", "o-1")
            .await
            .assert_error(409, "not_cancelable");
        assert_eq!(keys(&app, "c-1").await, 0);
        assert_eq!(tombstones(&app, "o-1").await, 0);
        let shown = app
            .get(&format!("/v1/payments/{}", p["id"].as_str().unwrap()))
            .await;
        assert_eq!(shown.json()["status"], "SUCCESS");
    }
);

on_both_backends!(
    a_bad_cancel_is_a_400_with_a_stable_code_and_writes_nothing,
    |app| {
        let cases: [(Value, &str); 6] = [
            (
                json!({"merchant_order_id": "o-1", "amount": 1}),
                "invalid_request",
            ),
            (json!({"order": "o-1"}), "invalid_request"),
            (json!({}), "invalid_request"),
            (
                json!({"merchant_order_id": ""}),
                "invalid_merchant_order_id",
            ),
            (
                json!({"merchant_order_id": "   "}),
                "invalid_merchant_order_id",
            ),
            (
                json!({"merchant_order_id": "o\u{7}1"}),
                "invalid_merchant_order_id",
            ),
        ];
        for (i, (body, code)) in cases.iter().enumerate() {
            let key = format!("bad-{i}");
            let a = app.post(CANCEL, Some(&key), body).await;
            a.assert_error(400, code);
            assert_eq!(keys(&app, &key).await, 0, "{body}");
        }
        let long = "x".repeat(129);
        app.post(
            CANCEL,
            Some("bad-long"),
            &json!({"merchant_order_id": long}),
        )
        .await
        .assert_error(400, "invalid_merchant_order_id");
        app.post(CANCEL, None, &json!({"merchant_order_id": "o-1"}))
            .await
            .assert_error(400, "idempotency_key_missing");
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM order_tombstones", &[])
                .await,
            0
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM idempotency_keys", &[])
                .await,
            0
        );
    }
);

on_both_backends!(
    a_create_and_a_cancel_of_one_order_racing_leave_exactly_one_of_payment_and_tombstone,
    |app| {
        let mut created = 0;
        for round in 0..20 {
            let order = format!("race-{round}");
            let (pay_key, cancel_key) = (format!("p-{round}"), format!("c-{round}"));
            let (made, undone) = tokio::join!(
                create(&app, &pay_key, &order, "automatic"),
                cancel(&app, &cancel_key, &order),
            );
            let (payments, stones) = (
                payments_of(&app, &order).await,
                tombstones(&app, &order).await,
            );
            assert_eq!(
                payments + stones,
                1,
                "round {round}: {payments} payment(s), {stones} tombstone(s); create {} {:?}, cancel {} {:?}",
                made.status,
                String::from_utf8_lossy(&made.body),
                undone.status,
                String::from_utf8_lossy(&undone.body)
            );
            if stones == 1 {
                // The cancel came first: the Try is refused and nothing was sent.
                made.assert_error(409, "order_cancelled");
                assert_eq!(undone.json()["outcome"], "tombstoned");
            } else {
                // The create came first: the cancel found its payment (charged by now, or
                // still pending when the cancel won that race too).
                assert!(
                    matches!(made.status, 200 | 201),
                    "round {round}: {}",
                    made.status
                );
                created += 1;
                assert!(
                    undone.status == 409 && undone.code() == "not_cancelable"
                        || undone.status == 200 && undone.json()["outcome"] == "canceled",
                    "round {round}: {} {:?}",
                    undone.status,
                    String::from_utf8_lossy(&undone.body)
                );
            }
        }
        // The channel saw one charge per payment, and nothing of a tombstoned order.
        assert_eq!(channel_requests(&app).await, created);
    }
);

on_both_backends!(a_frozen_merchant_may_still_cancel_an_order, |app| {
    // A cancel starts nothing: the freeze (no new payments) does not stop it.
    assert!(app.store.set_merchant_frozen("acme", true).await.unwrap());
    let a = cancel(&app, "c-1", "o-1").await;
    assert_eq!(a.status, 200, "{:?}", a.json());
    assert_eq!(a.json()["outcome"], "tombstoned");
    assert!(app.store.set_merchant_frozen("acme", false).await.unwrap());
    create(&app, "k-1", "o-1", "automatic")
        .await
        .assert_error(409, "order_cancelled");
});

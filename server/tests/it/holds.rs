//! Authorize now, capture later over HTTP, on both backends (issue 34; seed 000 §4.1, seed
//! 004 §5.1): a manual-capture payment's hold is authorized, captured in parts or in full,
//! voided, expired or cancelled before submission; each step moves the ledger's hold accounts
//! in its transition's transaction, tells its outbox event, and a race on one hold lets
//! exactly one request reach the channel.

use crate::support::*;

use std::time::Duration;

use serde_json::{Value, json};

/// A manual-capture payment of `amount` CNY for `order` (key `k-<order>`), as the merchant
/// creates it: the answer's body.
async fn hold(app: &TestApp, order: &str, amount: i64) -> Value {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order, "capture": "manual"}),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    a.json()
}

fn id(p: &Value) -> &str {
    p["id"].as_str().expect("payment id")
}

async fn capture(app: &TestApp, p: &Value, key: &str, amount: i64, last: bool) -> Answer {
    app.post(
        &format!("/v1/payments/{}/captures", id(p)),
        Some(key),
        &json!({"amount": amount, "final": last}),
    )
    .await
}

async fn void(app: &TestApp, p: &Value, key: &str) -> Answer {
    app.post(
        &format!("/v1/payments/{}/void", id(p)),
        Some(key),
        &json!({}),
    )
    .await
}

async fn current(app: &TestApp, p: &Value) -> Value {
    app.get(&format!("/v1/payments/{}", id(p))).await.json()
}

/// The stored payment (the core's view, for its channel key and hold).
async fn stored(app: &TestApp, p: &Value) -> converge_server::store::Payment {
    app.store.payment(id(p)).await.unwrap().expect("payment")
}

/// The sandbox's hold under the payment's channel key (`GET /authorizations/{key}`).
async fn channel_hold(app: &TestApp, p: &Value) -> Value {
    let key = stored(app, p).await.channel_key;
    app.sandbox_get(&format!("/authorizations/{key}"))
        .await
        .json()
}

/// The payment's outbox events' types, oldest first.
async fn event_types(app: &TestApp, p: &Value) -> Vec<String> {
    app.sql_strings(
        "SELECT type FROM events WHERE aggregateid = $1 ORDER BY seq",
        &[id(p)],
    )
    .await
}

/// What the payment's ledger batches leave on `account`, debits positive.
async fn account_net(app: &TestApp, p: &Value, account: &str) -> i64 {
    app.account_net(id(p), account).await
}

on_both_backends!(
    a_hold_captured_in_parts_then_final_is_success_with_the_rest_released,
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        assert_eq!(
            (
                p["status"].clone(),
                p["capture"].clone(),
                p["amount_capturable"].clone(),
                p["captured_amount"].clone()
            ),
            (json!("AUTHORIZED"), json!("manual"), json!(1000), json!(0))
        );
        assert!(p["expires_at"].is_string(), "{p}");
        let first = capture(&app, &p, "c-1", 300, false).await;
        assert_eq!(first.status, 200, "{:?}", first.json());
        let after = first.json();
        assert_eq!(
            (
                after["status"].clone(),
                after["captured_amount"].clone(),
                after["amount_capturable"].clone()
            ),
            (json!("AUTHORIZED"), json!(300), json!(700))
        );
        let last = capture(&app, &p, "c-2", 200, true).await.json();
        assert_eq!(
            (
                last["status"].clone(),
                last["captured_amount"].clone(),
                last["released_amount"].clone(),
                last["amount_capturable"].clone()
            ),
            (json!("SUCCESS"), json!(500), json!(500), json!(0))
        );
        let channel = channel_hold(&app, &p).await;
        assert_eq!(
            (channel["captured"].clone(), channel["status"].clone()),
            (json!(500), json!("captured"))
        );
        assert_eq!(
            event_types(&app, &p).await,
            [
                "payment.authorized",
                "payment.captured",
                "payment.captured",
                "payment.succeeded"
            ]
        );
        let merchant = format!("merchant_payable:{}", app.merchant_id);
        assert_eq!(
            account_net(&app, &p, &merchant).await,
            -500,
            "what was captured is payable"
        );
        let holds = format!("hold_pending:{}", app.merchant_id);
        assert_eq!(account_net(&app, &p, &holds).await, 0, "the hold is closed");
        assert_eq!(account_net(&app, &p, "channel_holds").await, 0);
        // Refunds apply to what was captured only.
        let refund = |key: &'static str, amount: i64| {
            let path = format!("/v1/payments/{}/refunds", id(&p));
            let app = &app;
            async move { app.post(&path, Some(key), &json!({"amount": amount})).await }
        };
        refund("r-1", 501)
            .await
            .assert_error(409, "refund_exceeds_remaining");
        assert_eq!(refund("r-2", 500).await.status, 201);
        assert_eq!(current(&app, &p).await["status"], "REFUNDED");
    }
);

on_both_backends!(
    partial_captures_that_use_up_the_hold_close_it_without_a_final_flag,
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        assert_eq!(capture(&app, &p, "c-1", 600, false).await.status, 200);
        let last = capture(&app, &p, "c-2", 400, false).await.json();
        assert_eq!(
            (last["status"].clone(), last["released_amount"].clone()),
            (json!("SUCCESS"), json!(0))
        );
        let captures = app.store.payment_captures(id(&p)).await.unwrap();
        assert_eq!(
            captures
                .iter()
                .map(|c| (c.amount, c.status.as_str()))
                .collect::<Vec<_>>(),
            [(600, "captured"), (400, "captured")]
        );
        // A capture is idempotent on its key: the replay is the stored answer.
        let again = capture(&app, &p, "c-1", 600, false).await;
        assert_eq!(again.header("idempotent-replayed"), "true");
        assert_eq!(app.store.payment_captures(id(&p)).await.unwrap().len(), 2);
    }
);

on_both_backends!(
    a_void_releases_the_hold_and_nothing_is_captured_after_it,
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        let voided = void(&app, &p, "v-1").await;
        assert_eq!(voided.status, 200, "{:?}", voided.json());
        assert_eq!(
            (
                voided.json()["status"].clone(),
                voided.json()["released_amount"].clone()
            ),
            (json!("VOIDED"), json!(1000))
        );
        assert_eq!(channel_hold(&app, &p).await["status"], "voided");
        capture(&app, &p, "c-1", 100, false)
            .await
            .assert_error(409, "not_capturable");
        // A void of a VOIDED payment answers as it is.
        assert_eq!(void(&app, &p, "v-2").await.json()["status"], "VOIDED");
        assert_eq!(
            event_types(&app, &p).await,
            ["payment.authorized", "payment.voided"]
        );
        let holds = format!("hold_pending:{}", app.merchant_id);
        assert_eq!(account_net(&app, &p, &holds).await, 0);
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM ledger_batches WHERE payment_id = $1 AND kind = 'release'",
                &[id(&p)]
            )
            .await,
            1
        );
    }
);

on_both_backends!(
    bad_captures_and_voids_are_refused_with_stable_codes_and_write_nothing,
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        let before = stored(&app, &p).await;
        capture(&app, &p, "bad-0", 0, false)
            .await
            .assert_error(400, "invalid_amount");
        capture(&app, &p, "bad-big", 1001, false)
            .await
            .assert_error(409, "capture_exceeds_hold");
        app.post(
            &format!("/v1/payments/{}/captures", id(&p)),
            Some("bad-field"),
            &json!({"amount": 10, "finale": true}),
        )
        .await
        .assert_error(400, "invalid_request");
        let other = app.add_merchant("other").await;
        let theirs = app
            .send(
                app.client
                    .post(format!("{}/v1/payments/{}/captures", app.base, id(&p)))
                    .bearer_auth(&other)
                    .header("Idempotency-Key", "theirs")
                    .json(&json!({"amount": 10})),
            )
            .await;
        theirs.assert_error(404, "not_found");
        assert_eq!(stored(&app, &p).await, before, "nothing was written");
        assert!(app.store.payment_captures(id(&p)).await.unwrap().is_empty());
        // The refused request's key stays free: the same key with a valid capture works.
        assert_eq!(capture(&app, &p, "bad-big", 100, false).await.status, 200);
        void(&app, &p, "v-partly")
            .await
            .assert_error(409, "not_voidable");
        let automatic = app.pay("k-auto", "o-auto", 1000).await;
        capture(&app, &automatic, "c-auto", 100, false)
            .await
            .assert_error(409, "not_manual_capture");
        void(&app, &automatic, "v-auto")
            .await
            .assert_error(409, "not_manual_capture");
        assert_eq!(
            capture(&app, &p, "c-final", 900, false).await.json()["status"],
            "SUCCESS"
        );
        void(&app, &p, "v-captured")
            .await
            .assert_error(409, "not_voidable");
        capture(&app, &p, "c-after", 1, false)
            .await
            .assert_error(409, "not_capturable");
    }
);

on_both_backends!(
    a_capture_and_a_void_racing_on_one_hold_on_two_servers_reach_the_channel_once,
    |app| {
        let (peer, _running) = app.spawn_peer(|_| {}).await;
        for round in 0..6 {
            let p = hold(&app, &format!("o-{round}"), 1000).await;
            let cap = {
                let req = app
                    .client
                    .post(format!("{}/v1/payments/{}/captures", app.base, id(&p)))
                    .bearer_auth(&app.api_key)
                    .header("Idempotency-Key", format!("c-{round}"))
                    .json(&json!({"amount": 1000, "final": true}));
                tokio::spawn(async move { req.send().await.unwrap().status().as_u16() })
            };
            let voiding = {
                let req = app
                    .client
                    .post(format!("{peer}/v1/payments/{}/void", id(&p)))
                    .bearer_auth(&app.api_key)
                    .header("Idempotency-Key", format!("v-{round}"))
                    .json(&json!({}));
                tokio::spawn(async move { req.send().await.unwrap().status().as_u16() })
            };
            let (c, v) = (cap.await.unwrap(), voiding.await.unwrap());
            assert_eq!(
                [c, v].iter().filter(|s| **s == 200).count(),
                1,
                "round {round}: capture {c}, void {v}"
            );
            assert!([c, v].contains(&409), "round {round}: the loser is refused");
            let now = current(&app, &p).await;
            let channel = channel_hold(&app, &p).await;
            if c == 200 {
                assert_eq!(now["status"], "SUCCESS");
                assert_eq!(
                    (channel["status"].clone(), channel["captured"].clone()),
                    (json!("captured"), json!(1000))
                );
            } else {
                assert_eq!(now["status"], "VOIDED");
                assert_eq!(
                    (channel["status"].clone(), channel["captured"].clone()),
                    (json!("voided"), json!(0))
                );
            }
        }
    }
);

on_both_backends!(
    a_capture_whose_answer_is_lost_is_found_by_a_query_of_the_hold_and_never_sent_twice,
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        // Digits 54: the sandbox commits the capture and drops the connection.
        let lost = capture(&app, &p, "c-1", 354, false).await;
        assert_eq!(lost.status, 200, "{:?}", lost.json());
        assert_eq!(
            lost.json()["status"],
            "CAPTURING",
            "undecidable: never refused, never failed"
        );
        assert_eq!(channel_hold(&app, &p).await["captured"], 354);
        // Another capture waits for it.
        capture(&app, &p, "c-2", 100, false)
            .await
            .assert_error(409, "hold_busy");
        let step = app
            .core()
            .settle_capture(stored(&app, &p).await, "test")
            .await
            .unwrap();
        assert_eq!(step, converge_server::service::resolve::Step::Done);
        let now = current(&app, &p).await;
        assert_eq!(
            (now["status"].clone(), now["captured_amount"].clone()),
            (json!("AUTHORIZED"), json!(354))
        );
        assert_eq!(
            channel_hold(&app, &p).await["captured"],
            354,
            "captured once"
        );
        let capture_batches = app
            .sql_i64(
                "SELECT COUNT(*) FROM ledger_batches WHERE payment_id = $1 AND kind = 'capture'",
                &[id(&p)],
            )
            .await;
        assert_eq!(capture_batches, 1);
        // The merchant's retry of the lost request answers from where it got, no second capture.
        assert_eq!(capture(&app, &p, "c-1", 354, false).await.status, 200);
        assert_eq!(app.store.payment_captures(id(&p)).await.unwrap().len(), 1);
    }
);

on_both_backends!(
    an_expired_hold_is_refused_a_capture_then_voided_by_its_job,
    |s| { s.jobs.authorization_ttl_secs = 1 },
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        capture(&app, &p, "c-late", 100, false)
            .await
            .assert_error(409, "hold_expired");
        app.core()
            .expire_hold(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        let now = current(&app, &p).await;
        assert_eq!(
            (now["status"].clone(), now["released_amount"].clone()),
            (json!("EXPIRED"), json!(1000))
        );
        // The row's follow-up voids at the channel (where the hold lapsed on its own clock).
        let (_, step) = app
            .core()
            .send_void(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(step, converge_server::service::resolve::Step::Done);
        assert_eq!(channel_hold(&app, &p).await["captured"], 0);
        assert_eq!(
            event_types(&app, &p).await,
            ["payment.authorized", "payment.expired"]
        );
        let holds = format!("hold_pending:{}", app.merchant_id);
        assert_eq!(account_net(&app, &p, &holds).await, 0);
    }
);

on_both_backends!(
    a_capture_in_flight_at_the_expiry_is_settled_by_its_query_and_the_rest_released,
    |s| { s.jobs.authorization_ttl_secs = 1 },
    |app| {
        let p = hold(&app, "o-1", 1000).await;
        let lost = capture(&app, &p, "c-1", 354, false).await.json();
        assert_eq!(lost["status"], "CAPTURING");
        // Before the expiry, the expiry job leaves a capture in flight to its own job.
        let waited = app
            .core()
            .expire_hold(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert!(
            matches!(waited, converge_server::service::resolve::Step::Wait(_)),
            "{waited:?}"
        );
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        // Past it, the expiry job settles the capture from the hold's query itself: the
        // capture's own job may have given up (the simulator's seed 1 of 200 payments).
        let settled = app
            .core()
            .expire_hold(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(settled, converge_server::service::resolve::Step::Done);
        let now = current(&app, &p).await;
        assert_eq!(
            (
                now["status"].clone(),
                now["captured_amount"].clone(),
                now["released_amount"].clone()
            ),
            (json!("SUCCESS"), json!(354), json!(646)),
            "the capture made before the expiry counts; the rest is released"
        );
    }
);

on_both_backends!(
    a_void_while_the_authorization_is_in_flight_fences_the_late_answer,
    |app| {
        // Digits 52: the sandbox holds the funds, then answers late (800 ms).
        let create = {
            let req = app
                .client
                .post(format!("{}/v1/payments", app.base))
                .bearer_auth(&app.api_key)
                .header("Idempotency-Key", "k-slow")
                .json(&json!({"amount": 1052, "currency": "CNY", "merchant_order_id": "o-slow", "capture": "manual"}));
            tokio::spawn(async move { req.send().await.unwrap().json::<Value>().await.unwrap() })
        };
        let p = eventually(Duration::from_secs(5), "the payment authorizing", || async {
            let ids = app
                .sql_strings(
                    "SELECT id FROM payments WHERE merchant_order_id = 'o-slow' AND status = 'AUTHORIZING'",
                    &[],
                )
                .await;
            ids.first().map(|id| json!({"id": id}))
        })
        .await;
        let voided = void(&app, &p, "v-1").await;
        assert_eq!(voided.status, 200, "{:?}", voided.json());
        let late = create.await.unwrap();
        assert_eq!(
            late["status"], "VOIDED",
            "the late authorization lost the race: {late}"
        );
        let now = current(&app, &p).await;
        assert_eq!(now["status"], "VOIDED");
        assert_eq!(channel_hold(&app, &p).await["status"], "voided");
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM ledger_batches WHERE payment_id = $1",
                &[id(&p)]
            )
            .await,
            0,
            "no hold was recorded, so none is released"
        );
    }
);

on_both_backends!(
    an_authorization_whose_answer_is_lost_is_found_by_a_query_and_a_decline_fails,
    |app| {
        // Digits 54: held at the channel, the connection dropped.
        let p = hold(&app, "o-lost", 1054).await;
        assert_eq!(p["status"], "UNKNOWN");
        app.core()
            .resolve_unknown(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(current(&app, &p).await["status"], "AUTHORIZED");
        let declined = hold(&app, "o-declined", 1051).await;
        assert_eq!(declined["status"], "FAILED");
        assert_eq!(event_types(&app, &declined).await, ["payment.failed"]);
    }
);

on_both_backends!(
    a_pending_payment_is_cancelled_before_it_reaches_the_channel,
    |app| {
        use converge_server::service::payments::{InsertOutcome, PaymentInput};
        let input = PaymentInput {
            amount: 1000,
            currency: "CNY".into(),
            merchant_order_id: "o-pending".into(),
            description: String::new(),
            capture_mode: Default::default(),
        };
        let InsertOutcome::Created(pending) = app
            .core()
            .insert_payment(app.merchant_id, &input, None)
            .await
            .unwrap()
        else {
            panic!("created");
        };
        let p = json!({"id": pending.id});
        let path = format!("/v1/payments/{}/cancel", pending.id);
        let cancelled = app.post(&path, Some("x-1"), &json!({})).await;
        assert_eq!(cancelled.status, 200, "{:?}", cancelled.json());
        assert_eq!(cancelled.json()["status"], "CANCELED");
        // Its submit job is closed and the channel never heard of it.
        let after = app
            .core()
            .drive(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(after.status.as_str(), "CANCELED");
        assert_eq!(app.channel_attempts(&pending.channel_key).await, 0);
        assert_eq!(
            app.post(&path, Some("x-2"), &json!({})).await.json()["status"],
            "CANCELED"
        );
        assert_eq!(event_types(&app, &p).await, ["payment.canceled"]);
        let charged = app.pay("k-charged", "o-charged", 1000).await;
        app.post(
            &format!("/v1/payments/{}/cancel", id(&charged)),
            Some("x-3"),
            &json!({}),
        )
        .await
        .assert_error(409, "not_cancelable");
    }
);

on_both_backends!(
    a_charge_callback_for_a_hold_never_settles_it_and_the_holds_query_does,
    |app| {
        // Digits 54: held at the channel, the answer dropped: UNKNOWN.
        let p = hold(&app, "o-cb", 1054).await;
        assert_eq!(p["status"], "UNKNOWN");
        let s = stored(&app, &p).await;
        let now = chrono::Utc::now().timestamp();
        let body = json!({"event_id": "evt_hold_1", "type": "charge.succeeded",
            "channel_key": s.channel_key, "amount": s.amount, "currency": s.currency, "created_at": now})
        .to_string()
        .into_bytes();
        let signature = converge_server::channel::signature::sign(&app.callback_secret, now, &body);
        let a = app.post_callback(&body, Some(&signature)).await;
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        assert_eq!(
            current(&app, &p).await["status"],
            "UNKNOWN",
            "a charge callback moved a hold"
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM ledger_batches WHERE payment_id = $1",
                &[id(&p)]
            )
            .await,
            0,
            "no charge batch for a hold"
        );
        app.core()
            .resolve_unknown(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(current(&app, &p).await["status"], "AUTHORIZED");
    }
);

/// Posts a signed hold callback (`authorization.*`, `capture.*`) for payment `p` as the
/// sandbox would; the answer's body.
async fn hold_callback(app: &TestApp, p: &Value, kind: &str, extra: Value) -> Value {
    let s = stored(app, p).await;
    let now = chrono::Utc::now().timestamp();
    let mut body = json!({"event_id": format!("evt_{kind}_{}", extra["n"].as_i64().unwrap_or(0)),
        "type": kind, "channel_key": s.channel_key, "amount": s.amount, "currency": s.currency,
        "created_at": now});
    for (k, v) in extra.as_object().expect("an object") {
        if k != "n" {
            body[k] = v.clone();
        }
    }
    let body = body.to_string().into_bytes();
    let signature = converge_server::channel::signature::sign(&app.callback_secret, now, &body);
    let a = app.post_callback(&body, Some(&signature)).await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    a.json()
}

/// The run_at of the payment's due job of `kind` (epoch ms), if it has one.
async fn due_job_run_at(app: &TestApp, p: &Value, kind: &str) -> Option<i64> {
    app.store
        .payment_jobs(id(p))
        .await
        .unwrap()
        .into_iter()
        .find(|j| j.kind == kind && j.status.as_str() == "due")
        .map(|j| j.run_at)
}

on_both_backends!(
    an_authorization_callback_hastens_the_query_of_an_unknown_hold_and_never_settles_it,
    |app| {
        // Digits 54: held at the channel, the answer dropped, no callback: UNKNOWN, its query
        // job due after a backoff.
        let p = hold(&app, "o-auth-cb", 1054).await;
        assert_eq!(p["status"], "UNKNOWN");
        let before = due_job_run_at(&app, &p, "query")
            .await
            .expect("a query job");
        let started = chrono::Utc::now().timestamp_millis();
        assert!(before > started, "the query waits for its backoff");
        let a = hold_callback(&app, &p, "authorization.succeeded", json!({"n": 1})).await;
        assert_eq!(a["outcome"], "ignored", "{a}");
        assert_eq!(
            current(&app, &p).await["status"],
            "UNKNOWN",
            "a callback decided"
        );
        let after = due_job_run_at(&app, &p, "query").await.expect("still due");
        assert!(
            after <= chrono::Utc::now().timestamp_millis(),
            "made due now"
        );
        // Another amount contradicts the hold: a conflict for a person.
        hold_callback(
            &app,
            &p,
            "authorization.succeeded",
            json!({"n": 2, "amount": 999}),
        )
        .await;
        let items = app.store.payment_error_items(id(&p)).await.unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0].kind, "conflicting_callback");
        // The query decides.
        app.core()
            .resolve_unknown(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(current(&app, &p).await["status"], "AUTHORIZED");
        // A failure for the hold the core now holds is a conflict too.
        hold_callback(&app, &p, "authorization.failed", json!({"n": 3})).await;
        assert_eq!(
            app.store.payment_error_items(id(&p)).await.unwrap().len(),
            2
        );
        assert_eq!(current(&app, &p).await["status"], "AUTHORIZED");
    }
);

on_both_backends!(
    the_sandboxs_duplicate_hold_callbacks_are_recorded_once_and_the_stale_failure_is_a_conflict,
    |app| {
        // Digits 55: authorized; the sandbox sends authorization.succeeded twice under one
        // event id, then a stale authorization.failed.
        let p = hold(&app, "o-auth-55", 1055).await;
        assert_eq!(p["status"], "AUTHORIZED");
        let events = eventually(Duration::from_secs(5), "the stale failure", || async {
            let events = app.store.payment_events(id(&p)).await.unwrap();
            events
                .iter()
                .any(|e| e.source == "callback" && e.event == "channel_declined")
                .then_some(events)
        })
        .await;
        let callbacks: Vec<_> = events.iter().filter(|e| e.source == "callback").collect();
        assert_eq!(
            callbacks.len(),
            2,
            "the duplicate recorded once: {callbacks:?}"
        );
        assert!(callbacks.iter().all(|e| !e.applied));
        let items = app.store.payment_error_items(id(&p)).await.unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(current(&app, &p).await["status"], "AUTHORIZED");
    }
);

on_both_backends!(
    a_capture_callback_hastens_the_capture_in_flight_and_one_never_sent_is_a_conflict,
    |app| {
        let p = hold(&app, "o-cap-cb", 5000).await;
        assert_eq!(p["status"], "AUTHORIZED");
        // The capture's digits 54: made at the channel, the answer dropped, no callback.
        let a = capture(&app, &p, "c-1", 1054, false).await;
        assert_eq!(
            current(&app, &p).await["status"],
            "CAPTURING",
            "{:?}",
            a.json()
        );
        let pending = stored(&app, &p)
            .await
            .hold
            .unwrap()
            .pending_capture
            .unwrap();
        let run_at = due_job_run_at(&app, &p, "capture")
            .await
            .expect("a capture job");
        let expiry_job = due_job_run_at(&app, &p, "expire_hold").await;
        let a = hold_callback(
            &app,
            &p,
            "capture.succeeded",
            json!({"n": 1, "amount": 1054, "capture_key": pending.id}),
        )
        .await;
        assert_eq!(a["outcome"], "ignored", "{a}");
        let now = chrono::Utc::now().timestamp_millis();
        let hastened = due_job_run_at(&app, &p, "capture")
            .await
            .expect("still due");
        assert!(hastened <= now && hastened <= run_at, "made due now");
        assert_eq!(
            due_job_run_at(&app, &p, "expire_hold").await,
            expiry_job,
            "the hold's expiry job stays at its expiry"
        );
        assert_eq!(current(&app, &p).await["status"], "CAPTURING");
        // A capture the core never asked for: a conflict.
        hold_callback(
            &app,
            &p,
            "capture.succeeded",
            json!({"n": 2, "amount": 100, "capture_key": "cap_000000000000000000000000"}),
        )
        .await;
        let items = app.store.payment_error_items(id(&p)).await.unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        // The capture job's query settles it; the callback repeated then is only a repeat.
        app.core()
            .settle_capture(stored(&app, &p).await, "worker")
            .await
            .unwrap();
        assert_eq!(current(&app, &p).await["status"], "AUTHORIZED");
        let a = hold_callback(
            &app,
            &p,
            "capture.succeeded",
            json!({"n": 3, "amount": 1054, "capture_key": pending.id}),
        )
        .await;
        assert!(
            a["detail"]
                .as_str()
                .unwrap_or("")
                .contains("already recorded"),
            "{a}"
        );
        assert_eq!(
            app.store.payment_error_items(id(&p)).await.unwrap().len(),
            1
        );
    }
);

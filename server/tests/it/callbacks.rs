//! `POST /v1/channel/callbacks` over HTTP, on both backends (DESIGN.md "Merchant HTTP API":
//! HMAC-SHA256 signed with a timestamp; bad signature 401, older than 5 minutes 400, duplicate
//! event id acknowledged once; "Payment state machine": stale callbacks never move a payment).

use crate::support::*;

use converge_server::channel::signature::sign;
use converge_server::store::Payment;
use serde_json::{Value, json};

fn now_secs() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A callback body for `p`.
fn event(event_id: &str, kind: &str, p: &Payment) -> Vec<u8> {
    json!({
        "event_id": event_id,
        "type": kind,
        "channel_key": p.channel_key,
        "amount": p.amount,
        "currency": p.currency,
        "created_at": now_secs(),
    })
    .to_string()
    .into_bytes()
}

/// POSTs `body` signed now with the test secret; asserts 200 and returns the answer's JSON.
async fn deliver(app: &TestApp, body: &[u8]) -> Value {
    let a = app
        .post_callback(body, Some(&sign(&app.callback_secret, now_secs(), body)))
        .await;
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    let v = a.json();
    assert_eq!(v["received"], true);
    v
}

/// Creates a payment of `amount` CNY and returns it as stored.
async fn payment(app: &TestApp, amount: i64) -> Payment {
    let a = app
        .post("/v1/payments", Some(&format!("k-{amount}")), &json!({"amount": amount, "currency": "CNY", "merchant_order_id": format!("o-{amount}")}))
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    app.store
        .payment(a.json()["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap()
}

on_both_backends!(
    bad_signature_is_401_invalid_signature_and_changes_nothing,
    |app| {
        let p = payment(&app, 1054).await;
        let body = event("evt_bad", "charge.succeeded", &p);
        let forged = sign(b"not-the-secret", now_secs(), &body);
        app.post_callback(&body, Some(&forged))
            .await
            .assert_error(401, "invalid_signature");
        // A valid signature over another body does not cover this one.
        let other = sign(&app.callback_secret, now_secs(), b"{}");
        app.post_callback(&body, Some(&other))
            .await
            .assert_error(401, "invalid_signature");
        app.post_callback(&body, Some("t=1,v1=zz"))
            .await
            .assert_error(401, "invalid_signature");
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM channel_callbacks", &[])
                .await,
            0
        );
        assert_eq!(app.store.payment(&p.id).await.unwrap().unwrap(), p);
    }
);

on_both_backends!(missing_signature_header_is_401, |app| {
    let p = payment(&app, 1054).await;
    app.post_callback(&event("evt_nosig", "charge.succeeded", &p), None)
        .await
        .assert_error(401, "invalid_signature");
    assert_eq!(app.store.payment(&p.id).await.unwrap().unwrap(), p);
});

on_both_backends!(
    callback_older_than_five_minutes_is_400_callback_too_old,
    |app| {
        let p = payment(&app, 1054).await;
        let body = event("evt_old", "charge.succeeded", &p);
        let old = sign(&app.callback_secret, now_secs() - 301, &body);
        app.post_callback(&body, Some(&old))
            .await
            .assert_error(400, "callback_too_old");
        assert_eq!(app.store.payment(&p.id).await.unwrap().unwrap(), p);
        // Refused before it was recorded: the same event, signed now, still counts.
        assert_eq!(deliver(&app, &body).await["outcome"], "applied");
    }
);

on_both_backends!(callback_from_far_in_the_future_is_refused, |app| {
    let p = payment(&app, 1054).await;
    let body = event("evt_future", "charge.succeeded", &p);
    let ahead = sign(&app.callback_secret, now_secs() + 3_600, &body);
    let a = app.post_callback(&body, Some(&ahead)).await;
    assert!(a.status == 400 || a.status == 401, "{}", a.status);
    assert_eq!(app.store.payment(&p.id).await.unwrap().unwrap(), p);
});

on_both_backends!(a_replayed_event_id_is_acknowledged_once, |app| {
    let p = payment(&app, 1054).await;
    let body = event("evt_once", "charge.succeeded", &p);
    let first = deliver(&app, &body).await;
    assert_eq!(
        (first["outcome"].as_str(), first["detail"].as_str()),
        (Some("applied"), Some("SUCCESS"))
    );
    let after = app.store.payment(&p.id).await.unwrap().unwrap();
    for _ in 0..2 {
        assert_eq!(deliver(&app, &body).await["outcome"], "duplicate");
    }
    assert_eq!(
        app.store.payment(&p.id).await.unwrap().unwrap(),
        after,
        "a duplicate moves nothing"
    );
    assert_eq!(
        app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
        1
    );
    assert_eq!(
        app.sql_i64(
            "SELECT COUNT(*) FROM channel_callbacks WHERE event_id = $1",
            &["evt_once"]
        )
        .await,
        1
    );
});

on_both_backends!(
    a_stale_failure_callback_after_success_leaves_the_payment_unchanged,
    |app| {
        let p = payment(&app, 1000).await;
        assert_eq!(p.status.as_str(), "SUCCESS");
        let v = deliver(&app, &event("evt_stale_fail", "charge.failed", &p)).await;
        assert_eq!(v["outcome"], "ignored");
        let now = app.store.payment(&p.id).await.unwrap().unwrap();
        assert_eq!((now.status, now.version), (p.status, p.version));
        let ignored: Vec<_> = app
            .store
            .payment_events(&p.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.event_id == "cb:evt_stale_fail")
            .collect();
        assert_eq!(ignored.len(), 1);
        assert!(!ignored[0].applied);
        assert_eq!(
            (ignored[0].event.as_str(), ignored[0].source.as_str()),
            ("channel_declined", "callback")
        );
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
    }
);

on_both_backends!(
    a_success_callback_for_an_unknown_payment_makes_it_success_with_one_ledger_batch,
    |app| {
        // Digits 54: the channel charged but the answer was lost, so the core holds it UNKNOWN.
        let p = payment(&app, 1054).await;
        assert_eq!(p.status.as_str(), "UNKNOWN");
        let v = deliver(&app, &event("evt_settle", "charge.succeeded", &p)).await;
        assert_eq!(
            (v["outcome"].as_str(), v["detail"].as_str()),
            (Some("applied"), Some("SUCCESS"))
        );
        let got = app.get(&format!("/v1/payments/{}", p.id)).await.json();
        assert_eq!(got["status"], "SUCCESS");
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        let jobs: Vec<_> = app
            .store
            .payment_jobs(&p.id)
            .await
            .unwrap()
            .into_iter()
            .map(|j| (j.kind, j.status.as_str().to_string()))
            .collect();
        assert!(
            jobs.iter().all(|(_, status)| status == "done"),
            "the query job is no longer needed: {jobs:?}"
        );
        // A second success with a new event id is late, not a second charge.
        assert_eq!(
            deliver(&app, &event("evt_settle_again", "charge.succeeded", &p)).await["outcome"],
            "ignored"
        );
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        for t in app.store.ledger_totals().await.unwrap() {
            assert_eq!(t.debits, t.credits, "{t:?}");
        }
    }
);

on_both_backends!(
    a_failure_callback_never_fails_an_unknown_payment_the_query_decides,
    |s| {
        s.worker.no_workers = false;
        s.jobs.submit_delay_ms = 200;
        s.jobs.query_delay_ms = 1_000;
        s.worker.poll_ms = 20;
        s.worker.backoff_base_ms = 20;
        s.worker.backoff_cap_ms = 200;
    },
    |app| {
        // Digits 54: the channel charged but the answer was lost. A failure callback (stale,
        // reordered, or simply wrong) must not make a charged payment FAILED.
        let p = payment(&app, 1054).await;
        assert_eq!(p.status.as_str(), "UNKNOWN");
        let v = deliver(&app, &event("evt_declined", "charge.failed", &p)).await;
        assert_eq!(v["outcome"], "ignored", "{v}");
        let now = app.store.payment(&p.id).await.unwrap().unwrap();
        assert_eq!(now.status.as_str(), "UNKNOWN");
        let ignored = app
            .store
            .payment_events(&p.id)
            .await
            .unwrap()
            .into_iter()
            .filter(|e| e.event_id == "cb:evt_declined" && !e.applied)
            .count();
        assert_eq!(ignored, 1, "the callback is recorded as ignored");
        // The queued query by channel key finds the charge.
        app.wait_for_status(&p.id, "SUCCESS", std::time::Duration::from_secs(20))
            .await;
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        assert_eq!(app.channel_charges().await, 1);
    }
);

on_both_backends!(
    a_callback_contradicting_a_settled_payment_goes_to_the_error_pool_once,
    |app| {
        let p = payment(&app, 1000).await;
        assert_eq!(p.status.as_str(), "SUCCESS");
        let body = event("evt_contra", "charge.failed", &p);
        assert_eq!(deliver(&app, &body).await["outcome"], "ignored");
        assert_eq!(deliver(&app, &body).await["outcome"], "duplicate");
        let items = app.store.payment_error_items(&p.id).await.unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(
            (items[0].kind.as_str(), items[0].status.as_str()),
            ("conflicting_callback", "open")
        );
        let evidence: Value = serde_json::from_str(&items[0].evidence).unwrap();
        assert_eq!(evidence["callback"]["type"], "charge.failed");
        assert_eq!(evidence["payment"]["status"], "SUCCESS");
        // A repeated success is only late, not a contradiction.
        assert_eq!(
            deliver(&app, &event("evt_again", "charge.succeeded", &p)).await["outcome"],
            "ignored"
        );
        assert_eq!(app.store.payment_error_items(&p.id).await.unwrap().len(), 1);
        // A success for a payment the core FAILED is money to return: also reported.
        let failed = payment(&app, 1051).await;
        assert_eq!(failed.status.as_str(), "FAILED");
        assert_eq!(
            deliver(&app, &event("evt_ok_late", "charge.succeeded", &failed)).await["outcome"],
            "ignored"
        );
        let items = app.store.payment_error_items(&failed.id).await.unwrap();
        assert_eq!(items.len(), 1, "{items:?}");
        assert_eq!(items[0].kind, "conflicting_callback");
        assert_eq!(
            app.store
                .payment(&failed.id)
                .await
                .unwrap()
                .unwrap()
                .status
                .as_str(),
            "FAILED"
        );
    }
);

on_both_backends!(a_success_callback_with_another_amount_is_ignored, |app| {
    let p = payment(&app, 1054).await;
    let mut body: Value =
        serde_json::from_slice(&event("evt_amount", "charge.succeeded", &p)).unwrap();
    body["amount"] = json!(p.amount + 1);
    let v = deliver(&app, body.to_string().as_bytes()).await;
    assert_eq!(v["outcome"], "ignored");
    assert_eq!(
        app.store
            .payment(&p.id)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "UNKNOWN"
    );
    assert_eq!(
        app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
        0
    );
});

on_both_backends!(
    a_callback_for_an_unknown_channel_key_is_acknowledged,
    |app| {
        let body = json!({"event_id": "evt_x", "type": "charge.succeeded", "channel_key": "ck_nobody", "amount": 1, "currency": "CNY", "created_at": now_secs()});
        assert_eq!(
            deliver(&app, body.to_string().as_bytes()).await["outcome"],
            "unknown_payment"
        );
        assert_eq!(app.payment_count().await, 0);
    }
);

on_both_backends!(
    a_signed_callback_that_is_not_an_event_is_400_invalid_callback,
    |app| {
        for body in [
            &b"not json"[..],
            b"{}",
            br#"{"event_id":"e","type":"charge.succeeded"}"#,
        ] {
            let a = app
                .post_callback(body, Some(&sign(&app.callback_secret, now_secs(), body)))
                .await;
            a.assert_error(400, "invalid_callback");
        }
    }
);

on_both_backends!(ignored_and_duplicate_callbacks_are_counted, |app| {
    let p = payment(&app, 1000).await;
    let body = event("evt_counted", "charge.failed", &p);
    assert_eq!(deliver(&app, &body).await["outcome"], "ignored");
    assert_eq!(deliver(&app, &body).await["outcome"], "duplicate");
    let metrics = app.get("/metrics").await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8(metrics.body).unwrap();
    // The recorder is process-wide, so other tests add to these counters: check presence.
    for outcome in ["ignored", "duplicate"] {
        assert!(
            text.lines()
                .any(|l| l.starts_with("converge_callbacks_total{")
                    && l.contains(&format!("outcome=\"{outcome}\""))),
            "{outcome} not counted in:\n{text}"
        );
    }
});

on_both_backends!(
    concurrent_success_callbacks_apply_once_and_the_rest_are_recorded_as_ignored,
    |app| {
        let p = payment(&app, 1054).await;
        assert_eq!(p.status.as_str(), "UNKNOWN");
        let bodies: Vec<Vec<u8>> = (0..12)
            .map(|i| event(&format!("evt_race_{i}"), "charge.succeeded", &p))
            .collect();
        let answers = futures_util::future::join_all(bodies.iter().map(|b| deliver(&app, b))).await;
        let applied = answers.iter().filter(|v| v["outcome"] == "applied").count();
        let ignored = answers.iter().filter(|v| v["outcome"] == "ignored").count();
        assert_eq!((applied, ignored), (1, 11), "{answers:?}");
        let events = app.store.payment_events(&p.id).await.unwrap();
        for i in 0..12 {
            let id = format!("evt_race_{i}");
            assert!(
                events.iter().any(|e| e.event_id == format!("cb:{id}"))
                    || events.iter().any(|e| e.applied && e.detail.contains(&id)),
                "callback {id} left no event record: {events:?}"
            );
        }
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
    }
);

on_both_backends!(
    a_callback_with_a_nul_or_an_oversized_id_is_400_invalid_callback,
    |app| {
        let p = payment(&app, 1000).await;
        let mut nul: Value =
            serde_json::from_slice(&event("evt_nul", "charge.succeeded", &p)).unwrap();
        nul["event_id"] = json!("evt\u{0}x");
        let mut long: Value =
            serde_json::from_slice(&event("evt_long", "charge.succeeded", &p)).unwrap();
        long["event_id"] = json!("e".repeat(8_000));
        for body in [nul.to_string(), long.to_string()] {
            let body = body.as_bytes();
            app.post_callback(body, Some(&sign(&app.callback_secret, now_secs(), body)))
                .await
                .assert_error(400, "invalid_callback");
        }
    }
);

on_both_backends!(
    a_callback_keeps_its_raw_body_and_signature_with_its_decision,
    |app| {
        let p = payment(&app, 1254).await;
        // Spacing and key order a re-encoding would lose: the evidence is what arrived.
        let body = format!(
            "{{ \"type\":\"charge.succeeded\",  \"event_id\":\"evt_raw\",\"channel_key\":\"{}\",\
             \"amount\":{},\"currency\":\"{}\",\"created_at\":{} }}",
            p.channel_key,
            p.amount,
            p.currency,
            now_secs()
        )
        .into_bytes();
        let signature = sign(&app.callback_secret, now_secs(), &body);
        let a = app.post_callback(&body, Some(&signature)).await;
        assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
        assert_eq!(
            app.store.callback_body("evt_raw").await.unwrap().as_deref(),
            Some(&body[..])
        );
        let kept = app
            .sql_i64(
                "SELECT COUNT(*) FROM channel_callbacks WHERE event_id = $1 AND signature = $2 \
                 AND outcome IN ('applied', 'ignored')",
                &["evt_raw", &signature],
            )
            .await;
        assert_eq!(
            kept, 1,
            "the signature and the decision are kept with the body"
        );
    }
);

/// The error-pool items of payment `id`: (kind, dedupe key, status), oldest first.
async fn pool_items(app: &TestApp, id: &str) -> Vec<String> {
    app.sql_strings(
        "SELECT kind || ' ' || dedupe_key || ' ' || status FROM error_pool WHERE payment_id = $1 ORDER BY id",
        &[id],
    )
    .await
}

/// POSTs a dispute of `p`'s charge to the in-process sandbox; returns the dispute's id.
async fn dispute(app: &TestApp, p: &Payment, body: Value) -> String {
    let base = &app
        .running
        .sandbox
        .as_ref()
        .expect("in-process sandbox")
        .url;
    let a = app
        .send(
            app.client
                .post(format!("{base}/charges/{}/disputes", p.channel_key))
                .json(&body),
        )
        .await;
    assert_eq!(a.status, 202, "{}", String::from_utf8_lossy(&a.body));
    a.json()["dispute_id"].as_str().unwrap().to_owned()
}

on_both_backends!(
    a_disputed_charge_goes_before_a_person_and_its_outcome_resolves_or_reopens_it,
    |app| {
        // A dispute the merchant wins: the item opens, then resolves; the payment never moves.
        let won = payment(&app, 4_200).await;
        let id = dispute(
            &app,
            &won,
            json!({"reason": "product_not_received", "outcome": "won"}),
        )
        .await;
        let items = eventually(
            std::time::Duration::from_secs(10),
            "the won dispute's item resolved",
            || async {
                let items = pool_items(&app, &won.id).await;
                (items == [format!("dispute dispute:{id} resolved")]).then_some(items)
            },
        )
        .await;
        assert_eq!(items.len(), 1);
        assert_eq!(
            app.store
                .payment(&won.id)
                .await
                .unwrap()
                .unwrap()
                .status
                .as_str(),
            "SUCCESS"
        );

        // One that is lost: the opened item is resolved into the lost one's, which stays open.
        let lost = payment(&app, 4_300).await;
        let id = dispute(&app, &lost, json!({"outcome": "lost"})).await;
        eventually(
            std::time::Duration::from_secs(10),
            "the lost dispute's item",
            || async {
                let items = pool_items(&app, &lost.id).await;
                (items
                    == [
                        format!("dispute dispute:{id} resolved"),
                        format!("dispute dispute:{id}:lost open"),
                    ])
                .then_some(())
            },
        )
        .await;
        let summary = app
            .sql_strings(
                "SELECT summary FROM error_pool WHERE dedupe_key = $1",
                &[&format!("dispute:{id}:lost")],
            )
            .await;
        assert!(
            summary[0].contains("43.00") && summary[0].contains("fraudulent"),
            "{summary:?}"
        );

        // An open one, delivered again by hand: applied once.
        let open = payment(&app, 4_400).await;
        let id = dispute(&app, &open, json!({})).await;
        let again = json!({"event_id": "evt_dispute_again", "type": "dispute.opened",
            "channel_key": open.channel_key, "amount": open.amount, "currency": open.currency,
            "created_at": now_secs(), "dispute_id": id, "reason": "fraudulent"})
        .to_string();
        let first = deliver(&app, again.as_bytes()).await;
        assert!(
            first["detail"].as_str().unwrap().contains("opened"),
            "{first}"
        );
        assert_eq!(
            deliver(&app, again.as_bytes()).await["outcome"],
            "duplicate"
        );
        eventually(
            std::time::Duration::from_secs(10),
            "the open dispute's one item",
            || async {
                (pool_items(&app, &open.id).await == [format!("dispute dispute:{id} open")])
                    .then_some(())
            },
        )
        .await;
        assert_eq!(
            app.store
                .payment(&open.id)
                .await
                .unwrap()
                .unwrap()
                .status
                .as_str(),
            "SUCCESS"
        );
    }
);

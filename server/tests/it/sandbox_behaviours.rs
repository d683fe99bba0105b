//! Each sandbox behaviour (DESIGN.md "Sandbox channel", digits 51-58) through the merchant
//! API, on both backends, as far as it goes without the compensation queue.

use crate::support::*;

use std::time::Duration;

use converge_server::store::{Job, Payment};
use serde_json::{Value, json};

const PATIENCE: Duration = Duration::from_secs(5);

/// Creates a payment of `amount` CNY; returns the answer's JSON and the stored payment.
async fn create(app: &TestApp, amount: i64) -> (Value, Payment) {
    let order = format!("o-{amount}");
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{amount}")),
            &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    let body = a.json();
    let p = app
        .store
        .payment(body["id"].as_str().unwrap())
        .await
        .unwrap()
        .unwrap();
    (body, p)
}

/// `(kind, status)` of a payment's jobs, oldest first.
async fn jobs(app: &TestApp, id: &str) -> Vec<(String, String)> {
    app.store
        .payment_jobs(id)
        .await
        .unwrap()
        .into_iter()
        .map(|j: Job| (j.kind, j.status.as_str().to_string()))
        .collect()
}

fn job(kind: &str, status: &str) -> (String, String) {
    (kind.to_string(), status.to_string())
}

/// Callback event ids the core recorded for a channel key.
async fn callbacks_for(app: &TestApp, channel_key: &str) -> i64 {
    app.sql_i64(
        "SELECT COUNT(*) FROM channel_callbacks WHERE channel_key = $1",
        &[channel_key],
    )
    .await
}

/// What the sandbox itself says about a key (`GET /charges/{key}`): status code and status.
async fn channel_record(app: &TestApp, channel_key: &str) -> (u16, String) {
    let a = app.sandbox_get(&format!("/charges/{channel_key}")).await;
    (
        a.status,
        a.json()["status"].as_str().unwrap_or_default().to_string(),
    )
}

/// Waits until the sandbox's callback for a fresh control payment has reached the core: any
/// callback the sandbox scheduled before it (same delay, earlier start) has been sent by then.
async fn control_callback_arrived(app: &TestApp) {
    let (_, control) = create(app, 1_000).await;
    eventually(PATIENCE, "the control payment's callback", || async {
        (callbacks_for(app, &control.channel_key).await == 1).then_some(())
    })
    .await;
}

on_both_backends!(digits_51_is_declined_and_the_payment_fails, |app| {
    let (body, p) = create(&app, 1051).await;
    assert_eq!(body["status"], "FAILED");
    assert!(
        p.last_error
            .as_deref()
            .unwrap_or_default()
            .contains("declined"),
        "{:?}",
        p.last_error
    );
    assert_eq!(p.submit_attempts, 1);
    assert_eq!(
        jobs(&app, &p.id).await,
        vec![job("submit", "done")],
        "a decline needs no query"
    );
    assert_eq!(
        app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
        0
    );
    assert_eq!(
        channel_record(&app, &p.channel_key).await,
        (200, "declined".to_string())
    );
    assert_eq!(app.channel_charges().await, 0);
});

on_both_backends!(
    digits_52_is_unknown_with_a_query_job_then_the_callback_makes_it_success,
    |s| {
        // The request times out (300 ms) well before the sandbox's callback (1 s after the
        // commit) and its late answer (800 ms): the callback is what settles the payment.
        s.sandbox.sandbox_callback_delay_ms = 1_000;
    },
    |app| {
        let (body, p) = create(&app, 1052).await;
        assert_eq!(
            body["status"], "UNKNOWN",
            "a late answer is never a failure"
        );
        assert!(
            p.last_error
                .as_deref()
                .unwrap_or_default()
                .contains("timeout"),
            "{:?}",
            p.last_error
        );
        assert_eq!(
            jobs(&app, &p.id).await,
            vec![job("submit", "done"), job("query", "due")]
        );

        let settled = app.wait_for_status(&p.id, "SUCCESS", PATIENCE).await;
        assert_eq!(settled["id"], p.id.as_str());
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        assert_eq!(
            jobs(&app, &p.id).await,
            vec![
                job("submit", "done"),
                job("query", "done"),
                job("post_ledger", "done")
            ],
            "the callback did the query's work (the posting's safety job closed with it)"
        );
        let events = app.store.payment_events(&p.id).await.unwrap();
        assert!(
            events
                .iter()
                .any(|e| e.event == "query_succeeded" && e.applied && e.source == "callback"),
            "{events:?}"
        );
        assert_eq!(app.channel_attempts(&p.channel_key).await, 1);
        assert_eq!(app.channel_charges().await, 1);
    }
);

on_both_backends!(
    digits_53_is_unknown_with_a_query_job_and_nothing_charged,
    |app| {
        let (body, p) = create(&app, 1053).await;
        assert_eq!(body["status"], "UNKNOWN");
        assert_eq!(
            jobs(&app, &p.id).await,
            vec![job("submit", "done"), job("query", "due")]
        );
        assert_eq!(
            channel_record(&app, &p.channel_key).await,
            (404, "not_found".to_string())
        );
        assert_eq!(app.channel_attempts(&p.channel_key).await, 1);
        control_callback_arrived(&app).await;
        assert_eq!(
            app.get(&format!("/v1/payments/{}", p.id)).await.json()["status"],
            "UNKNOWN"
        );
        assert_eq!(callbacks_for(&app, &p.channel_key).await, 0);
    }
);

on_both_backends!(
    digits_54_is_unknown_although_charged_and_no_callback_comes,
    |app| {
        let (body, p) = create(&app, 1054).await;
        assert_eq!(
            body["status"], "UNKNOWN",
            "a dropped connection is never a failure nor a success"
        );
        assert_eq!(
            jobs(&app, &p.id).await,
            vec![job("submit", "done"), job("query", "due")]
        );
        assert_eq!(
            channel_record(&app, &p.channel_key).await,
            (200, "succeeded".to_string()),
            "the channel did charge"
        );
        control_callback_arrived(&app).await;
        assert_eq!(
            callbacks_for(&app, &p.channel_key).await,
            0,
            "no callback for digits 54"
        );
        assert_eq!(
            app.get(&format!("/v1/payments/{}", p.id)).await.json()["status"],
            "UNKNOWN"
        );
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            0
        );
    }
);

on_both_backends!(
    digits_55_succeeds_and_duplicate_and_stale_callbacks_change_nothing,
    |app| {
        let (body, p) = create(&app, 1055).await;
        assert_eq!(body["status"], "SUCCESS");
        // The sandbox sends charge.succeeded twice (one event id), then a stale charge.failed.
        let events = eventually(
            PATIENCE,
            "the stale failure callback to be recorded",
            || async {
                let events = app.store.payment_events(&p.id).await.unwrap();
                events
                    .iter()
                    .any(|e| e.event == "channel_declined")
                    .then_some(events)
            },
        )
        .await;
        let stale: Vec<_> = events
            .iter()
            .filter(|e| e.event == "channel_declined")
            .collect();
        assert_eq!(stale.len(), 1, "{events:?}");
        assert!(!stale[0].applied);
        assert_eq!(stale[0].source, "callback");
        assert_eq!(stale[0].from_status, "SUCCESS");
        assert_eq!(stale[0].to_status, None);
        assert_eq!(
            callbacks_for(&app, &p.channel_key).await,
            2,
            "two distinct event ids; the duplicate recorded once"
        );
        let now = app.store.payment(&p.id).await.unwrap().unwrap();
        assert_eq!(now.status.as_str(), "SUCCESS");
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        assert_eq!(app.channel_charges().await, 1);
    }
);

on_both_backends!(
    digits_56_gets_a_5xx_inline_and_is_unknown_until_the_queue,
    |app| {
        let (body, p) = create(&app, 1056).await;
        assert_eq!(body["status"], "UNKNOWN", "a 5xx is never a failure");
        assert!(
            p.last_error.as_deref().unwrap_or_default().contains("500"),
            "{:?}",
            p.last_error
        );
        assert_eq!(
            jobs(&app, &p.id).await,
            vec![job("submit", "done"), job("query", "due")]
        );
        assert_eq!(
            app.channel_attempts(&p.channel_key).await,
            1,
            "the request does not retry inline"
        );
        assert_eq!(
            channel_record(&app, &p.channel_key).await,
            (404, "not_found".to_string())
        );
        control_callback_arrived(&app).await;
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
    }
);

on_both_backends!(digits_57_and_58_succeed_with_one_charge_batch, |app| {
    for amount in [1057, 1058] {
        let (body, p) = create(&app, amount).await;
        assert_eq!(body["status"], "SUCCESS", "{amount}");
        assert_eq!(body["amount"], amount);
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
        assert_eq!(
            jobs(&app, &p.id).await,
            vec![job("submit", "done")],
            "the posting commits with CHANNEL_SUCCESS: its safety job is never written"
        );
    }
    assert_eq!(app.channel_charges().await, 2);
});

on_both_backends!(
    other_digits_succeed_and_the_late_success_callback_is_recorded_as_ignored,
    |app| {
        let (body, p) = create(&app, 1000).await;
        assert_eq!(body["status"], "SUCCESS");
        let events = eventually(PATIENCE, "the success callback", || async {
            let events = app.store.payment_events(&p.id).await.unwrap();
            events
                .iter()
                .any(|e| e.source == "callback")
                .then_some(events)
        })
        .await;
        let late: Vec<_> = events.iter().filter(|e| e.source == "callback").collect();
        assert_eq!(late.len(), 1, "{events:?}");
        assert!(!late[0].applied, "a success after SUCCESS moves nothing");
        let after = app.store.payment(&p.id).await.unwrap().unwrap();
        assert_eq!(after.version, p.version);
        assert_eq!(
            app.store.ledger_batch_count(&p.id, "charge").await.unwrap(),
            1
        );
    }
);

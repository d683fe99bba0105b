//! Honest error-pool actions (issue 41, "Honest actions"): each open item offers the action
//! its kind calls for, disabled with the reason where it would do nothing, and each action
//! answers with what the server counted (jobs woken, deliveries queued, events replayed,
//! items resolved), over the real `/ops/v1` router on both backends.

use std::time::Duration;

use converge_server::channel::webhook_sink::{self, SinkConfig};
use converge_server::store::{ErrorItemStatus, KindFilter, NewErrorItem, Publication};
use serde_json::{Value, json};

use crate::support::{TestApp, add_ops_user, eventually, ops_post, ops_session};

async fn operator(app: &TestApp) -> reqwest::Client {
    add_ops_user(app, "op", "operator").await;
    ops_session(app, "op").await
}

/// `POST /ops/v1/error-pool/{id}/act`: status and body.
async fn act(c: &reqwest::Client, app: &TestApp, id: i64, reason: &str) -> (u16, Value) {
    let path = format!("/ops/v1/error-pool/{id}/act");
    ops_post(c, app, &path, json!({"reason": reason})).await
}

/// The offer the by-kind page makes for item `id`.
async fn offer(c: &reqwest::Client, app: &TestApp, id: i64) -> Value {
    let v: Value = c
        .get(format!("{}/ops/v1/error-pool/by-kind?id={id}", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    v["offers"]
        .as_array()
        .unwrap_or_else(|| panic!("no offers on the page: {v}"))
        .iter()
        .find(|o| o["item_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("no offer for item {id}: {v}"))
}

/// The open item of `kind`, once there is one.
async fn open_item(app: &TestApp, kind: &str) -> converge_server::store::ErrorItem {
    eventually(
        Duration::from_secs(15),
        &format!("an open {kind} item"),
        || async {
            app.store
                .error_items(Some(ErrorItemStatus::Open), Some(kind), 10)
                .await
                .unwrap()
                .into_iter()
                .next()
        },
    )
    .await
}

/// Leases and completes every job of `payment` (as a worker that finished them would), so
/// nothing of it is waiting or dead.
async fn finish_jobs(app: &TestApp, payment: &str) {
    let far = app.running.state.core.clock.now_ms() + 30 * 86_400_000;
    for j in app
        .store
        .claim_jobs_of("test", 100, 60_000, far, &KindFilter::all())
        .await
        .unwrap()
    {
        assert!(
            app.store
                .complete_job(j.id, &j.lease_token, far)
                .await
                .unwrap()
        );
    }
    assert_eq!(app.store.wakeable_jobs(payment).await.unwrap(), 0);
}

on_both_backends!(
    a_dead_deliverys_item_is_redelivered_and_reports_one_delivery_queued,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = webhook_sink::spawn(
            SinkConfig {
                fault_rate: 0.0,
                seed: 1,
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap();
        let url = format!("{}/hooks/always-fail", sink.url);
        let a = app
            .post(
                "/v1/webhook_endpoints",
                Some("we-1"),
                &json!({"url": url, "enabled_events": ["*"]}),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.json());
        app.pay("k-o-1", "o-1", 1000).await;
        let item = open_item(&app, "webhook_exhausted").await;
        let op = operator(&app).await;

        let o = offer(&op, &app, item.id).await;
        assert_eq!(o["action"], "redeliver", "{o}");
        assert_eq!(o["available"], true, "{o}");
        // The bulk retry no longer takes it: a retry would only find the delivery dead.
        let v: Value = op
            .get(format!(
                "{}/ops/v1/actions/bulk-retry/preview?source=error_pool&kind=webhook_exhausted",
                app.base
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(v["items"].as_array().unwrap().len(), 0, "{v}");

        let (s, out) = act(&op, &app, item.id, "receiver fixed by the merchant").await;
        assert_eq!(s, 200, "{out}");
        assert_eq!(out["action"], "redeliver", "{out}");
        assert_eq!(out["deliveries_queued"], 1, "{out}");
        assert_eq!(out["jobs_woken"], 0, "{out}");
        assert_eq!(out["items_resolved"], 1, "{out}");
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'webhook_redelivered' AND actor = 'op'",
                &[]
            )
            .await,
            1
        );
        // The delivery really went out again: three more attempts reach the receiver, and
        // when it dies again its item opens again.
        let client = reqwest::Client::new();
        eventually(Duration::from_secs(15), "six attempts", || async {
            let all: Value = client
                .get(format!("{}/received", sink.url))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (all["deliveries"].as_array()?.len() >= 6).then_some(())
        })
        .await;
        let again = eventually(Duration::from_secs(15), "the item open again", || async {
            let i = app.store.error_item(item.id).await.unwrap()?;
            (i.status == ErrorItemStatus::Open && i.occurrences == 2).then_some(i)
        })
        .await;
        assert_eq!(again.kind, "webhook_exhausted");
    }
);

on_both_backends!(
    a_retry_that_would_wake_nothing_is_offered_disabled_and_refused,
    |app| {
        let pid = app.suspended_payment("o-s", 100).await;
        let item = open_item(&app, "suspense").await;
        let op = operator(&app).await;
        // While its posting job waits, a retry wakes it and says so.
        assert!(app.store.wakeable_jobs(&pid).await.unwrap() >= 1);
        let o = offer(&op, &app, item.id).await;
        assert_eq!(
            (o["action"].as_str(), o["available"].as_bool()),
            (Some("retry"), Some(true)),
            "{o}"
        );
        let (s, out) = act(&op, &app, item.id, "merchant unfrozen").await;
        assert_eq!(s, 200, "{out}");
        assert!(out["jobs_woken"].as_u64().unwrap() >= 1, "{out}");
        assert_eq!(
            out["items_resolved"], 0,
            "a retry leaves the item open: {out}"
        );
        let actions = app.sql_i64("SELECT COUNT(*) FROM actions", &[]).await;
        assert_eq!(actions, 1);

        // Once no job of the payment waits or is dead, the retry is offered disabled with
        // the reason, refused with it, and nothing is recorded.
        finish_jobs(&app, &pid).await;
        let o = offer(&op, &app, item.id).await;
        assert_eq!(o["action"], "retry", "{o}");
        assert_eq!(o["available"], false, "{o}");
        assert!(o["why"].as_str().unwrap().contains("wake nothing"), "{o}");
        let (s, out) = act(&op, &app, item.id, "again").await;
        assert_eq!(s, 409, "{out}");
        assert_eq!(out["error"]["code"], "nothing_to_do", "{out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .unwrap()
                .contains("wake nothing")
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM actions", &[]).await,
            actions
        );

        // The bulk retry skips it by the same rule instead of calling it retried.
        let v: Value = op
            .get(format!(
                "{}/ops/v1/actions/bulk-retry/preview?source=error_pool&kind=suspense",
                app.base
            ))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let version = v["items"][0]["version"].as_i64().unwrap();
        let out: Value = op
            .post(format!("{}/ops/v1/actions/bulk-retry", app.base))
            .json(&json!({
                "selection": {"source": "error_pool", "kind": "suspense"},
                "items": [{"payment_id": pid, "version": version}],
                "reason": "again",
            }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(out["retried"].as_array().unwrap().len(), 0, "{out}");
        assert!(
            out["skipped"][0][1]
                .as_str()
                .unwrap()
                .contains("nothing to wake"),
            "{out}"
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM actions", &[]).await,
            actions
        );
    }
);

on_both_backends!(an_item_no_action_fits_says_why_and_is_refused, |app| {
    let now = app.running.state.core.clock.now_ms();
    let id = app
        .store
        .report_error(&NewErrorItem {
            kind: "reconcile_missing_local".into(),
            dedupe_key: "recon:2026-12-01:missing_local:k1".into(),
            payment_id: None,
            summary: "statement line with no payment".into(),
            evidence: "{}".into(),
            reopen: false,
            now,
        })
        .await
        .unwrap();
    let op = operator(&app).await;
    let o = offer(&op, &app, id).await;
    assert_eq!(o["action"], Value::Null, "{o}");
    assert_eq!(o["available"], false, "{o}");
    assert!(!o["why"].as_str().unwrap().is_empty(), "{o}");
    let (s, out) = act(&op, &app, id, "try").await;
    assert_eq!(
        (s, out["error"]["code"].as_str()),
        (409, Some("no_action")),
        "{out}"
    );
    // Bad input first, with stable codes; a viewer may not act.
    assert_eq!(
        act(&op, &app, id, "  ").await.1["error"]["code"],
        "invalid_reason"
    );
    assert_eq!(act(&op, &app, 999_999, "x").await.0, 404);
    add_ops_user(&app, "view", "viewer").await;
    let viewer = ops_session(&app, "view").await;
    assert_eq!(act(&viewer, &app, id, "x").await.0, 403);
    // The item was left for a person.
    let i = app.store.error_item(id).await.unwrap().unwrap();
    assert_eq!(i.status, ErrorItemStatus::Open);
    app.running
        .state
        .core
        .resolve_error_item(&crate::support::setup_actor(), id, "looked at the channel")
        .await
        .unwrap();
});

on_both_backends!(
    a_refused_publication_is_replayed_and_the_relay_gets_it_again,
    |app| {
        let pid = app.pay("k-o-1", "o-1", 1000).await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let event = app
            .sql_strings(
                "SELECT id FROM events WHERE aggregateid = $1 ORDER BY seq LIMIT 1",
                &[&pid],
            )
            .await
            .remove(0);
        let store = &app.store;
        let now = app.running.state.core.clock.now_ms();
        assert!(
            store
                .acquire_relay_lease("events-test", "relay", "tok", now, now + 60_000)
                .await
                .unwrap()
        );
        let refused = Publication {
            event_id: event.clone(),
            stream_seq: None,
            duplicate: false,
            refused: Some("maximum payload exceeded".into()),
        };
        assert!(
            store
                .record_publications("events-test", "tok", &[refused], now)
                .await
                .unwrap()
        );
        let id = store
            .report_error(&NewErrorItem {
                kind: "event_publish_refused".into(),
                dedupe_key: format!("publish:{event}"),
                payment_id: Some(pid.clone()),
                summary: format!("the broker refused event {event}"),
                evidence: json!({"event_id": event, "error": "maximum payload exceeded"})
                    .to_string(),
                reopen: true,
                now,
            })
            .await
            .unwrap();
        let backlog = |s: Vec<converge_server::store::OutboxEvent>| s.iter().any(|e| e.id == event);
        assert!(!backlog(store.unpublished_events(100).await.unwrap()));
        let op = operator(&app).await;
        let o = offer(&op, &app, id).await;
        assert_eq!(
            (o["action"].as_str(), o["available"].as_bool()),
            (Some("replay"), Some(true)),
            "{o}"
        );

        let (s, out) = act(&op, &app, id, "broker limit raised").await;
        assert_eq!(s, 200, "{out}");
        assert_eq!(
            (
                out["events_replayed"].as_u64(),
                out["items_resolved"].as_u64()
            ),
            (Some(1), Some(1)),
            "{out}"
        );
        assert!(
            backlog(store.unpublished_events(100).await.unwrap()),
            "the relay publishes it again"
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'event_replayed'",
                &[]
            )
            .await,
            1
        );
        // The store forgets only a refused publication: a second replay finds none.
        let audit = crate::support::setup_actor().entry(
            now,
            "event_replayed",
            "event:x",
            "r",
            String::new(),
            String::new(),
        );
        assert!(!store.replay_refused_event(&event, &audit).await.unwrap());
    }
);

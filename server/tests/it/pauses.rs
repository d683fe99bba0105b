//! The emergency switch (issue 17 "Emergency switch"), on both backends: a pause needs a
//! different approver; paused submissions hold new payments PENDING with nothing sent and
//! settle after the resume; a paused job kind is not leased and keeps its attempts; a paused
//! endpoint's deliveries wait and go out after the resume; a second process sharing the
//! database honours a pause; ending or cancelling one takes the password again, and ending
//! one before its minimum duration a different approver (issue 36); and the store's pause
//! methods.

use std::time::Duration;

use converge_server::channel::webhook_sink::{self, SinkConfig};
use converge_server::domain::pause::PauseStatus;
use converge_server::store::KindFilter;
use converge_server::store::{CreatePause, NewPause, PauseMove};
use converge_server::worker::Worker;
use serde_json::{Value, json};

use crate::support::*;

async fn users(app: &TestApp) {
    add_ops_user(app, "op", "operator").await;
    add_ops_user(app, "opap", "operator,approver").await;
    add_ops_user(app, "ap", "approver").await;
}

async fn post(c: &reqwest::Client, app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let r = c
        .post(format!("{}{path}", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// Requests a pause of `target` as "op" and approves it as "ap"; returns its id.
async fn pause(app: &TestApp, target: &str) -> String {
    let op = ops_session(app, "op").await;
    let ap = ops_session(app, "ap").await;
    let (s, v) = post(
        &op,
        app,
        "/ops/v1/pauses",
        json!({"target": target, "reason": "incident 42"}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    let id = v["pause"]["id"].as_str().unwrap().to_string();
    let (s, v) = post(
        &ap,
        app,
        &format!("/ops/v1/pauses/{id}/approve"),
        json!({"password": OPS_PASSWORD, "reason": "agreed"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["pause"]["status"], "active");
    id
}

async fn resume(app: &TestApp, id: &str) {
    let op = ops_session(app, "op").await;
    let (s, v) = post(
        &op,
        app,
        &format!("/ops/v1/pauses/{id}/resume"),
        json!({"password": OPS_PASSWORD, "reason": "incident over"}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["pause"]["status"], "resumed");
}

async fn pay(app: &TestApp, base: &str, order: &str) -> Value {
    let r = app
        .client
        .post(format!("{base}/v1/payments"))
        .bearer_auth(&app.api_key)
        .header("Idempotency-Key", format!("k-{order}"))
        .json(&json!({"amount": 1000, "currency": "CNY", "merchant_order_id": order}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    r.json().await.unwrap()
}

async fn submit_attempts(app: &TestApp, payment: &str) -> i64 {
    app.sql_i64(
        "SELECT CAST(COALESCE(SUM(attempts), 0) AS BIGINT) FROM jobs WHERE payment_id = $1 AND kind = 'submit'",
        &[payment],
    )
    .await
}

on_both_backends!(
    a_pause_needs_a_different_approver_and_each_step_is_audited,
    |app| {
        users(&app).await;
        let op = ops_session(&app, "opap").await;
        let (s, v) = post(
            &op,
            &app,
            "/ops/v1/pauses",
            json!({"target": "job:refund", "reason": "refund storm"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        assert_eq!(v["pause"]["status"], "pending");
        let id = v["pause"]["id"].as_str().unwrap().to_string();
        // The requester, though an approver, cannot approve it, not even with the password.
        let (s, v) = post(
            &op,
            &app,
            &format!("/ops/v1/pauses/{id}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "mine"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("approval_refused"))
        );
        assert!(app.running.state.core.active_pauses().await.is_empty());
        // A second request for the same target while one is open: 409.
        let (s, v) = post(
            &op,
            &app,
            "/ops/v1/pauses",
            json!({"target": "job:refund", "reason": "again"}),
        )
        .await;
        assert_eq!((s, v["error"]["code"].as_str()), (409, Some("pause_open")));
        // Bad targets are 400 with a stable code.
        for bad in ["everything", "job:submit", "job:nope", "endpoint:"] {
            let (s, v) = post(
                &op,
                &app,
                "/ops/v1/pauses",
                json!({"target": bad, "reason": "x"}),
            )
            .await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (400, Some("invalid_target")),
                "{bad}"
            );
        }
        let (s, v) = post(
            &op,
            &app,
            "/ops/v1/pauses",
            json!({"target": "endpoint:we_missing", "reason": "x"}),
        )
        .await;
        assert_eq!(s, 404, "{v}");
        // An operator without the approver role cannot approve at all.
        let plain = ops_session(&app, "op").await;
        let (s, _) = post(
            &plain,
            &app,
            &format!("/ops/v1/pauses/{id}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "x"}),
        )
        .await;
        assert_eq!(s, 403);
        // A different approver: a wrong password is refused, the right one makes it active.
        let ap = ops_session(&app, "ap").await;
        let (s, _) = post(
            &ap,
            &app,
            &format!("/ops/v1/pauses/{id}/approve"),
            json!({"password": "wrong-password-here", "reason": "x"}),
        )
        .await;
        assert_eq!(s, 403);
        let (s, v) = post(
            &ap,
            &app,
            &format!("/ops/v1/pauses/{id}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "agreed"}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["pause"]["approved_by"], "ap");
        assert!(
            app.running
                .state
                .core
                .active_pauses()
                .await
                .job_kind("refund")
        );
        let list: Value = ap
            .get(format!("{}/ops/v1/pauses", app.base))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list["items"][0]["id"], id.as_str());
        assert_eq!(list["items"][0]["status"], "active");
        // Past the minimum duration (0 in the test settings), one operator (the requester
        // here) resumes it with the password again (issue 36); a second resume is 409.
        let (s, v) = post(
            &plain,
            &app,
            &format!("/ops/v1/pauses/{id}/resume"),
            json!({"password": OPS_PASSWORD, "reason": "storm over"}),
        )
        .await;
        assert_eq!((s, v["pause"]["status"].as_str()), (200, Some("resumed")));
        assert_eq!(v["pause"]["resumed_by"], "op");
        assert!(app.running.state.core.active_pauses().await.is_empty());
        let (s, v) = post(
            &plain,
            &app,
            &format!("/ops/v1/pauses/{id}/resume"),
            json!({"password": OPS_PASSWORD, "reason": "again"}),
        )
        .await;
        assert_eq!((s, v["error"]["code"].as_str()), (409, Some("not_open")));
        let audited = app
            .sql_strings(
                "SELECT action || ':' || reason FROM audit_log WHERE target = $1 ORDER BY seq",
                &[&format!("pause:{id}")],
            )
            .await;
        assert_eq!(
            audited,
            vec![
                "pause_requested:refund storm",
                "approval_refused:wrong password, or a pause this user cannot approve",
                "approval_refused:wrong password, or a pause this user cannot approve",
                "pause_approved:agreed",
                "pause_resumed:storm over",
            ]
        );
    }
);

/// Requests a pause of `target` as "op" and approves it as "ap"; returns its id.
async fn active_pause(app: &TestApp, target: &str) -> String {
    pause(app, target).await
}

/// `POST /ops/v1/pauses/{id}/{step}` as `c` with `body`: (status, error code, the pause).
async fn step(
    c: &reqwest::Client,
    app: &TestApp,
    id: &str,
    step: &str,
    body: Value,
) -> (u16, String, Value) {
    let (s, v) = post(c, app, &format!("/ops/v1/pauses/{id}/{step}"), body).await;
    (
        s,
        v["error"]["code"].as_str().unwrap_or_default().to_string(),
        v["pause"].clone(),
    )
}

fn pause_audit_sql() -> &'static str {
    "SELECT action || ':' || actor FROM audit_log WHERE target = $1 ORDER BY seq"
}

// Issue 36, "No one moves money alone": ending or cancelling a pause is a step-up, and one
// person cannot end before the minimum duration what two people started.
on_both_backends!(
    ending_a_pause_takes_the_password_and_before_the_minimum_a_different_approver,
    |s| {
        s.actions.pause_min_duration_secs = 900;
    },
    |app| {
        users(&app).await;
        let id = active_pause(&app, "job:refund").await;
        let op = ops_session(&app, "op").await;
        let opap = ops_session(&app, "opap").await;
        let ap = ops_session(&app, "ap").await;
        let paused = || async {
            app.running
                .state
                .core
                .active_pauses()
                .await
                .job_kind("refund")
        };
        // No password (absent or empty): refused with a stable code, nothing changes.
        for body in [
            json!({"reason": "over"}),
            json!({"password": "", "reason": "over"}),
        ] {
            let (s, code, _) = step(&op, &app, &id, "resume", body).await;
            assert_eq!((s, code.as_str()), (403, "step_up_required"));
        }
        // A wrong password: refused, audited, nothing changes.
        let (s, code, _) = step(
            &op,
            &app,
            &id,
            "resume",
            json!({"password": "wrong-password-here", "reason": "over"}),
        )
        .await;
        assert_eq!((s, code.as_str()), (403, "step_up_refused"));
        assert!(paused().await);
        // The right password, before the minimum: not ended, an end request (202).
        let (s, code, p) = step(
            &opap,
            &app,
            &id,
            "resume",
            json!({"password": OPS_PASSWORD, "reason": "looks fixed"}),
        )
        .await;
        assert_eq!(s, 202, "{code} {p}");
        assert_eq!(p["status"], "active");
        assert_eq!(p["end_requested_by"], "opap");
        assert_eq!(p["end_reason"], "looks fixed");
        assert!(paused().await, "still in force");
        // A second end while one awaits an approver: 409.
        let (s, code, _) = step(
            &op,
            &app,
            &id,
            "resume",
            json!({"password": OPS_PASSWORD, "reason": "again"}),
        )
        .await;
        assert_eq!((s, code.as_str()), (409, "end_requested"));
        // Who asked cannot approve the end, not even with the password; nor a wrong password.
        let (s, code, _) = step(
            &opap,
            &app,
            &id,
            "approve",
            json!({"password": OPS_PASSWORD, "reason": "mine"}),
        )
        .await;
        assert_eq!((s, code.as_str()), (403, "approval_refused"));
        let (s, code, _) = step(
            &ap,
            &app,
            &id,
            "approve",
            json!({"password": "wrong-password-here", "reason": "ok"}),
        )
        .await;
        assert_eq!((s, code.as_str()), (403, "approval_refused"));
        assert!(paused().await);
        // A different approver, with the password: ended.
        let (s, code, p) = step(
            &ap,
            &app,
            &id,
            "approve",
            json!({"password": OPS_PASSWORD, "reason": "agreed, fixed"}),
        )
        .await;
        assert_eq!(s, 200, "{code} {p}");
        assert_eq!(
            (p["status"].as_str(), p["resumed_by"].as_str()),
            (Some("resumed"), Some("ap"))
        );
        assert!(!paused().await);
        let audited = app
            .sql_strings(pause_audit_sql(), &[&format!("pause:{id}")])
            .await;
        assert_eq!(
            audited,
            vec![
                "pause_requested:op",
                "pause_approved:ap",
                "step_up_refused:op",
                "pause_end_requested:opap",
                "approval_refused:opap",
                "approval_refused:ap",
                "pause_end_approved:ap",
            ]
        );

        // An early end can be rejected: the pause stays in force, and can be asked again.
        let id = active_pause(&app, "job:query").await;
        let (s, _, _) = step(
            &opap,
            &app,
            &id,
            "resume",
            json!({"password": OPS_PASSWORD, "reason": "early"}),
        )
        .await;
        assert_eq!(s, 202);
        let (s, code, _) = step(&opap, &app, &id, "reject", json!({"reason": "mine"})).await;
        assert_eq!((s, code.as_str()), (403, "self_approval"));
        let (s, code, p) = step(&ap, &app, &id, "reject", json!({"reason": "not yet"})).await;
        assert_eq!(s, 200, "{code} {p}");
        assert_eq!(
            (p["status"].as_str(), p["end_requested_by"].is_null()),
            (Some("active"), true)
        );
        assert!(
            app.running
                .state
                .core
                .active_pauses()
                .await
                .job_kind("query")
        );
        let (s, _, _) = step(
            &op,
            &app,
            &id,
            "resume",
            json!({"password": OPS_PASSWORD, "reason": "now"}),
        )
        .await;
        assert_eq!(s, 202);
        let (s, _, p) = step(
            &ap,
            &app,
            &id,
            "approve",
            json!({"password": OPS_PASSWORD, "reason": "ok"}),
        )
        .await;
        assert_eq!((s, p["status"].as_str()), (200, Some("resumed")));

        // Cancelling a pending pause takes the password too (no approver: it never held).
        let (s, v) = post(
            &op,
            &app,
            "/ops/v1/pauses",
            json!({"target": "submissions", "reason": "maybe"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        let pending = v["pause"]["id"].as_str().unwrap().to_string();
        let (s, code, _) = step(&op, &app, &pending, "resume", json!({"reason": "no"})).await;
        assert_eq!((s, code.as_str()), (403, "step_up_required"));
        let (s, code, _) = step(
            &op,
            &app,
            &pending,
            "resume",
            json!({"password": "wrong-password-here", "reason": "no"}),
        )
        .await;
        assert_eq!((s, code.as_str()), (403, "step_up_refused"));
        let (s, _, p) = step(
            &op,
            &app,
            &pending,
            "resume",
            json!({"password": OPS_PASSWORD, "reason": "not needed"}),
        )
        .await;
        assert_eq!((s, p["status"].as_str()), (200, Some("cancelled")));
    }
);

on_both_backends!(
    after_the_minimum_duration_one_operator_ends_a_pause_with_the_password,
    |s| {
        s.actions.pause_min_duration_secs = 2;
    },
    |app| {
        users(&app).await;
        let id = active_pause(&app, "job:refund").await;
        tokio::time::sleep(Duration::from_millis(2_300)).await;
        let op = ops_session(&app, "op").await;
        let (s, code, _) = step(&op, &app, &id, "resume", json!({"reason": "over"})).await;
        assert_eq!((s, code.as_str()), (403, "step_up_required"));
        let (s, code, _) = step(
            &op,
            &app,
            &id,
            "resume",
            json!({"password": "wrong-password-here", "reason": "over"}),
        )
        .await;
        assert_eq!((s, code.as_str()), (403, "step_up_refused"));
        let (s, code, p) = step(
            &op,
            &app,
            &id,
            "resume",
            json!({"password": OPS_PASSWORD, "reason": "over"}),
        )
        .await;
        assert_eq!(s, 200, "{code} {p}");
        assert_eq!(
            (p["status"].as_str(), p["resumed_by"].as_str()),
            (Some("resumed"), Some("op"))
        );
        assert!(p["end_requested_by"].is_null());
        assert!(app.running.state.core.active_pauses().await.is_empty());
    }
);

on_both_backends!(
    while_submissions_are_paused_a_payment_stays_pending_with_nothing_sent_and_settles_after_resume,
    |s| {
        s.worker.no_workers = false;
        s.jobs.submit_delay_ms = 200;
    },
    |app| {
        users(&app).await;
        let id = pause(&app, "submissions").await;
        let p = pay(&app, &app.base, "held-1").await;
        assert_eq!(p["status"], "PENDING", "{p}");
        let pid = p["id"].as_str().unwrap().to_string();
        // Well past the submit job's due time and several worker polls.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        let held = app.store.payment(&pid).await.unwrap().unwrap();
        assert_eq!(held.status.as_str(), "PENDING");
        assert_eq!(app.channel_attempts(&held.channel_key).await, 0);
        assert_eq!(submit_attempts(&app, &pid).await, 0);
        resume(&app, &id).await;
        app.wait_for_status(&pid, "SUCCESS", Duration::from_secs(10))
            .await;
        assert_eq!(app.channel_attempts(&held.channel_key).await, 1);
    }
);

on_both_backends!(
    a_paused_job_kind_is_not_leased_and_its_attempts_are_untouched,
    |app| {
        users(&app).await;
        let p = pay(&app, &app.base, "r-1").await;
        assert_eq!(p["status"], "SUCCESS");
        let pid = p["id"].as_str().unwrap().to_string();
        let id = pause(&app, "job:refund").await;
        // The refund is accepted and held pending: nothing goes to the channel.
        let r = app
            .post(
                &format!("/v1/payments/{pid}/refunds"),
                Some("rk-1"),
                &json!({"amount": 400, "reason": "returned"}),
            )
            .await;
        assert!(r.status < 300, "{:?}", r.json());
        assert_eq!(r.json()["status"], "pending");
        let core = app.running.state.core.clone();
        let now = core.clock.now_ms();
        assert!(app.store.wake_jobs(&pid, now).await.unwrap() >= 1);
        let settings = converge_server::config::Settings::for_tests(&app.db_url);
        let worker = Worker::new(core.clone(), settings.worker.config());
        for _ in 0..3 {
            worker.drain_once().await.unwrap();
        }
        let refund_job = |status: &'static str| {
            let app = &app;
            let pid = pid.clone();
            async move {
                app.sql_i64(
                    "SELECT COUNT(*) FROM jobs WHERE payment_id = $1 AND kind = 'refund' \
                     AND status = $2 AND attempts = 0",
                    &[&pid, status],
                )
                .await
            }
        };
        assert_eq!(refund_job("due").await, 1);
        resume(&app, &id).await;
        worker.drain_once().await.unwrap();
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = 'succeeded'",
                &[&pid],
            )
            .await,
            1
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM jobs WHERE payment_id = $1 AND kind = 'refund' AND status = 'done'",
                &[&pid],
            )
            .await,
            1
        );
    }
);

on_both_backends!(
    a_paused_endpoints_deliveries_wait_unspent_and_go_out_after_resume,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        users(&app).await;
        let sink = webhook_sink::spawn(
            SinkConfig {
                fault_rate: 0.0,
                seed: 1,
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .expect("sink starts");
        let url = format!("{}/hooks/ok", sink.url);
        let ep = app
            .post(
                "/v1/webhook_endpoints",
                Some("we-1"),
                &json!({"url": url, "enabled_events": ["payment.succeeded"]}),
            )
            .await;
        assert_eq!(ep.status, 201);
        let ep_id = ep.json()["id"].as_str().unwrap().to_string();
        let id = pause(&app, &format!("endpoint:{ep_id}")).await;
        let p = pay(&app, &app.base, "w-1").await;
        assert_eq!(p["status"], "SUCCESS");
        tokio::time::sleep(Duration::from_millis(2_000)).await;
        let received = |n: usize| {
            let sink = &sink;
            async move {
                let all: Value = reqwest::get(format!("{}/received", sink.url))
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                let got = all["deliveries"].as_array()?.len();
                (got >= n).then_some(got)
            }
        };
        assert_eq!(received(0).await, Some(0));
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'pending'",
                &[&ep_id],
            )
            .await,
            1
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM webhook_attempts", &[])
                .await,
            0
        );
        assert!(
            app.sql_i64("SELECT MAX(attempts) FROM jobs WHERE kind = 'webhook'", &[])
                .await
                <= 1
        );
        resume(&app, &id).await;
        eventually(Duration::from_secs(10), "the held delivery", || received(1)).await;
        eventually(Duration::from_secs(5), "the delivery recorded", || async {
            let n = app
                .sql_i64(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'succeeded'",
                    &[&ep_id],
                )
                .await;
            (n == 1).then_some(())
        })
        .await;
    }
);

on_both_backends!(
    a_second_process_on_the_same_database_honours_a_pause_within_seconds,
    |app| {
        users(&app).await;
        let (peer_base, peer) = app
            .spawn_peer(|s| {
                s.worker.no_workers = false;
                s.jobs.submit_delay_ms = 200;
            })
            .await;
        // The peer has read the (empty) set before the pause, so it must refresh to see it.
        assert!(peer.state.core.active_pauses().await.is_empty());
        let id = pause(&app, "submissions").await;
        eventually(
            Duration::from_secs(3),
            "the peer to see the pause",
            || async {
                peer.state
                    .core
                    .active_pauses()
                    .await
                    .submissions()
                    .then_some(())
            },
        )
        .await;
        let p = pay(&app, &peer_base, "peer-1").await;
        assert_eq!(p["status"], "PENDING", "{p}");
        let pid = p["id"].as_str().unwrap().to_string();
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        let held = app.store.payment(&pid).await.unwrap().unwrap();
        assert_eq!(held.status.as_str(), "PENDING");
        assert_eq!(submit_attempts(&app, &pid).await, 0);
        resume(&app, &id).await;
        // The peer's worker sends it once the resume reaches it.
        app.wait_for_status(&pid, "SUCCESS", Duration::from_secs(10))
            .await;
    }
);

store_conformance!(pauses_are_stored_moved_once_and_read_as_active, |store| {
    let audit = |action: &str| converge_server::domain::audit::AuditEntry {
        at: 1,
        actor: "op".into(),
        roles: "operator".into(),
        action: action.into(),
        target: "pause:x".into(),
        reason: "r".into(),
        before: String::new(),
        after: String::new(),
        meta: "{}".into(),
    };
    let new = |id: &str, target: &str| NewPause {
        id: id.into(),
        target: target.into(),
        reason: "incident".into(),
        requested_by: "op".into(),
        now: 1_000,
        expires_at: 5_000,
    };
    let CreatePause::Created(p) = store
        .create_pause(&new("pause_a", "submissions"), &audit("pause_requested"))
        .await
        .unwrap()
    else {
        panic!("created")
    };
    assert_eq!((p.status.as_str(), p.requested_at), ("pending", 1_000));
    assert_eq!(
        store
            .create_pause(&new("pause_b", "submissions"), &audit("pause_requested"))
            .await
            .unwrap(),
        CreatePause::OpenExists
    );
    assert!(store.active_pause_targets().await.unwrap().is_empty());
    let approve = |by: &str, at: i64| PauseMove {
        id: "pause_a".into(),
        from: PauseStatus::Pending,
        to: PauseStatus::Active,
        by: by.into(),
        reason: "ok".into(),
        not_by_requester: true,
        unexpired_at: Some(at),
        end_approval: false,
        now: at,
    };
    // Not by the requester, not once expired.
    assert!(
        !store
            .move_pause(&approve("op", 2_000), &audit("a"))
            .await
            .unwrap()
    );
    assert!(
        !store
            .move_pause(&approve("ap", 5_000), &audit("a"))
            .await
            .unwrap()
    );
    assert!(
        store
            .move_pause(&approve("ap", 2_000), &audit("a"))
            .await
            .unwrap()
    );
    // Decided once only.
    assert!(
        !store
            .move_pause(&approve("ap2", 2_100), &audit("a"))
            .await
            .unwrap()
    );
    let p = store.pause("pause_a").await.unwrap().unwrap();
    assert_eq!(
        (p.status.as_str(), p.approved_by.as_deref(), p.approved_at),
        ("active", Some("ap"), Some(2_000))
    );
    assert_eq!(
        store.active_pause_targets().await.unwrap(),
        vec!["submissions"]
    );
    let resume = PauseMove {
        id: "pause_a".into(),
        from: PauseStatus::Active,
        to: PauseStatus::Resumed,
        by: "op".into(),
        reason: "over".into(),
        not_by_requester: false,
        unexpired_at: None,
        end_approval: false,
        now: 3_000,
    };
    assert!(store.move_pause(&resume, &audit("r")).await.unwrap());
    let p = store.pause("pause_a").await.unwrap().unwrap();
    assert_eq!(
        (
            p.status.as_str(),
            p.resumed_by.as_deref(),
            p.resume_reason.as_deref(),
            p.resumed_at
        ),
        ("resumed", Some("op"), Some("over"), Some(3_000))
    );
    assert!(store.active_pause_targets().await.unwrap().is_empty());
    // The target is free again; open ones are listed first.
    assert!(matches!(
        store
            .create_pause(&new("pause_c", "submissions"), &audit("pause_requested"))
            .await
            .unwrap(),
        CreatePause::Created(_)
    ));
    let all: Vec<String> = store
        .pauses(10)
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    assert_eq!(all, vec!["pause_c", "pause_a"]);
    assert_eq!(store.pauses(0).await.unwrap().len(), 1);
    let (seq, _) = store.audit_head().await.unwrap();
    assert_eq!(seq, 4, "one audit record per step that applied");
});

store_conformance!(
    claims_leave_skipped_kinds_due_with_their_attempts,
    |store| {
        use converge_server::store::{JobKind, NewJob};
        for kind in [JobKind::Refund, JobKind::Reconcile] {
            store
                .enqueue_job(
                    &NewJob {
                        kind,
                        payment_id: None,
                        refund_id: None,
                        run_at: 0,
                        max_attempts: 5,
                    },
                    "",
                    0,
                )
                .await
                .unwrap();
        }
        let got = store
            .claim_jobs_of(
                "w",
                10,
                1_000,
                10,
                &KindFilter::except(vec!["refund".to_string()]),
            )
            .await
            .unwrap();
        assert_eq!(
            got.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>(),
            vec!["reconcile"]
        );
        let got = store
            .claim_jobs_of(
                "w",
                10,
                1_000,
                10,
                &KindFilter::except(vec!["refund".into(), "reconcile".into()]),
            )
            .await
            .unwrap();
        assert!(got.is_empty());
        let got = store
            .claim_jobs_of("w", 10, 1_000, 10, &KindFilter::all())
            .await
            .unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].kind.as_str(), got[0].attempts), ("refund", 1));
    }
);

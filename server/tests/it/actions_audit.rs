//! Ops actions under maker-checker and the audit chain, over HTTP on both backends
//! (DESIGN.md "Ops console": actions, audit log, export).

use std::time::Duration;

use converge_server::domain::audit::{AuditEntry, chain};
use converge_server::ops::password::PasswordHasherPool;
use converge_server::store::DbPool;
use serde_json::{Value, json};

use crate::support::{TestApp, ops_post};

/// The stored status of request `id`, by name.
async fn action_status(app: &TestApp, id: &str) -> &'static str {
    app.store.action(id).await.unwrap().unwrap().status.as_str()
}

const PASSWORD: &str = "correct-horse-battery";

async fn users(app: &TestApp) {
    let h = PasswordHasherPool::new(2);
    for (name, roles) in [
        ("op", "operator"),
        ("op2", "operator"),
        ("ap", "approver"),
        ("ap2", "approver"),
        ("aud", "auditor"),
        ("view", "viewer"),
        ("adm", "admin"),
    ] {
        app.core()
            .add_user(&h, name, roles, PASSWORD, 0, &crate::support::setup_actor())
            .await
            .expect("user");
    }
}

async fn session(app: &TestApp, name: &str) -> reqwest::Client {
    crate::support::ops_session(app, name).await
}

async fn paid(app: &TestApp, order: &str, amount: i64) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.json()["status"], "SUCCESS");
    a.json()["id"].as_str().unwrap().to_string()
}

async fn request_reverse(c: &reqwest::Client, app: &TestApp, payment: &str) -> String {
    let (s, v) = ops_post(
        c,
        app,
        "/ops/v1/actions",
        json!({"kind": "reverse", "payment_id": payment, "reason": "customer disputed"}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["action"]["status"], "pending");
    v["action"]["id"].as_str().unwrap().to_string()
}

fn approve_body() -> Value {
    json!({"password": PASSWORD, "reason": "checked the dispute"})
}

on_both_backends!(
    an_approved_reverse_refunds_once_and_posts_the_reversal,
    |app| {
        users(&app).await;
        let payment = paid(&app, "o-1", 5_000).await;
        let op = session(&app, "op").await;
        let ap = session(&app, "ap").await;
        let id = request_reverse(&op, &app, &payment).await;
        let (s, v) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{id}/approve"),
            approve_body(),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed");
        assert_eq!(
            app.get(&format!("/v1/payments/{payment}")).await.json()["status"],
            "REVERSED"
        );
        assert_eq!(
            app.store
                .ledger_batch_count(&payment, "reversal")
                .await
                .unwrap(),
            1
        );
        // The payment's story says what the reversal refunded, and by which action.
        let story = op
            .get(format!("{}/ops/v1/payments/{payment}", app.base))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        assert_eq!(story["reversal"], json!({"action_id": id, "amount": 5_000}));
        // A second approval, and a re-execution, after execution: refused, nothing runs twice.
        let (s, v) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{id}/approve"),
            approve_body(),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("approval_refused"))
        );
        let (s, _) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{id}/execute"),
            json!({}),
        )
        .await;
        assert_eq!(s, 409);
        assert_eq!(
            app.store
                .ledger_batch_count(&payment, "reversal")
                .await
                .unwrap(),
            1
        );
        for t in app.store.ledger_totals().await.unwrap() {
            assert_eq!(t.debits, t.credits);
        }
        let audit: Vec<String> = app
            .store
            .audit_page(0, 1000, &Default::default())
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.action)
            .collect();
        for step in ["action_requested", "action_approved", "action_executed"] {
            assert!(
                audit.contains(&step.to_string()),
                "{step} missing from {audit:?}"
            );
        }
    }
);

on_both_backends!(self_approval_is_refused, |app| {
    users(&app).await;
    app.core()
        .add_user(
            &PasswordHasherPool::new(1),
            "both",
            "operator,approver",
            PASSWORD,
            0,
            &crate::support::setup_actor(),
        )
        .await
        .unwrap();
    let payment = paid(&app, "o-1", 5_000).await;
    let both = session(&app, "both").await;
    let id = request_reverse(&both, &app, &payment).await;
    let (s, v) = ops_post(
        &both,
        &app,
        &format!("/ops/v1/actions/{id}/approve"),
        approve_body(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("approval_refused"))
    );
    assert_eq!(action_status(&app, &id).await, "pending");
});

on_both_backends!(two_approvers_at_once_execute_it_once, |app| {
    users(&app).await;
    let payment = paid(&app, "o-1", 5_000).await;
    let op = session(&app, "op").await;
    let id = request_reverse(&op, &app, &payment).await;
    let ap = session(&app, "ap").await;
    let ap2 = session(&app, "ap2").await;
    let path = format!("/ops/v1/actions/{id}/approve");
    let (a, b) = tokio::join!(
        ops_post(&ap, &app, &path, approve_body()),
        ops_post(&ap2, &app, &path, approve_body())
    );
    let mut codes = [a.0, b.0];
    codes.sort();
    assert_eq!(codes, [200, 403], "{a:?} {b:?}");
    assert_eq!(
        app.store
            .ledger_batch_count(&payment, "reversal")
            .await
            .unwrap(),
        1
    );
});

on_both_backends!(a_request_whose_payment_moved_is_stale, |app| {
    users(&app).await;
    let payment = paid(&app, "o-1", 5_000).await;
    let op = session(&app, "op").await;
    let id = request_reverse(&op, &app, &payment).await;
    // A merchant refund moves the payment's version after the request.
    let r = app
        .post(
            &format!("/v1/payments/{payment}/refunds"),
            Some("r-1"),
            &json!({"amount": 100}),
        )
        .await;
    assert_eq!(r.status, 201);
    let ap = session(&app, "ap").await;
    let (s, v) = ops_post(
        &ap,
        &app,
        &format!("/ops/v1/actions/{id}/approve"),
        approve_body(),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("approval_refused"))
    );
    assert_eq!(
        app.get(&format!("/v1/payments/{payment}")).await.json()["status"],
        "SUCCESS"
    );
    assert_eq!(action_status(&app, &id).await, "stale");
});

on_both_backends!(
    an_expired_request_is_refused,
    |s| {
        s.actions.action_ttl_secs = 1;
    },
    |app| {
        users(&app).await;
        let payment = paid(&app, "o-1", 5_000).await;
        let op = session(&app, "op").await;
        let id = request_reverse(&op, &app, &payment).await;
        tokio::time::sleep(Duration::from_millis(1_300)).await;
        let ap = session(&app, "ap").await;
        let (s, v) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{id}/approve"),
            approve_body(),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("approval_refused"))
        );
        assert_eq!(action_status(&app, &id).await, "expired");
    }
);

on_both_backends!(approval_needs_the_approvers_own_password, |app| {
    users(&app).await;
    let payment = paid(&app, "o-1", 5_000).await;
    let op = session(&app, "op").await;
    let id = request_reverse(&op, &app, &payment).await;
    let ap = session(&app, "ap").await;
    let (s, v) = ops_post(
        &ap,
        &app,
        &format!("/ops/v1/actions/{id}/approve"),
        json!({"password": "not-my-password", "reason": "ok"}),
    )
    .await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("approval_refused"))
    );
    assert_eq!(action_status(&app, &id).await, "pending");
});

/// Posts an approval of `id` with `password`: status and the whole body.
async fn approve_as(c: &reqwest::Client, app: &TestApp, id: &str, password: &str) -> (u16, Value) {
    ops_post(
        c,
        app,
        &format!("/ops/v1/actions/{id}/approve"),
        json!({"password": password, "reason": "checked"}),
    )
    .await
}

on_both_backends!(
    approval_refusals_are_one_answer_whatever_the_reason,
    |s| {
        // Every refusal below is a failed password check; keep them under the limits.
        s.session.login_limit_per_user = 20;
    },
    |app| {
        users(&app).await;
        app.core()
            .add_user(
                &PasswordHasherPool::new(1),
                "both",
                "operator,approver",
                PASSWORD,
                0,
                &crate::support::setup_actor(),
            )
            .await
            .unwrap();
        let op = session(&app, "op").await;
        let both = session(&app, "both").await;
        let ap2 = session(&app, "ap2").await;
        // A pending request someone else made: the only approvable one.
        let valid = request_reverse(&op, &app, &paid(&app, "o-valid", 1_000).await).await;
        // Their own request.
        let own = request_reverse(&both, &app, &paid(&app, "o-own", 1_000).await).await;
        // One already decided.
        let decided = request_reverse(&op, &app, &paid(&app, "o-decided", 1_000).await).await;
        let (s, _) = ops_post(
            &ap2,
            &app,
            &format!("/ops/v1/actions/{decided}/reject"),
            json!({"reason": "no"}),
        )
        .await;
        assert_eq!(s, 200);
        // A stale one: its payment moved after the request.
        let moved = paid(&app, "o-stale", 1_000).await;
        let stale = request_reverse(&op, &app, &moved).await;
        let r = app
            .post(
                &format!("/v1/payments/{moved}/refunds"),
                Some("r-stale"),
                &json!({"amount": 100}),
            )
            .await;
        assert_eq!(r.status, 201);
        let wrong = approve_as(&both, &app, &valid, "not-my-password").await;
        assert_eq!(wrong.0, 403, "{wrong:?}");
        assert_eq!(wrong.1["error"]["code"], "approval_refused");
        // With the right password or a wrong one, every impossible approval answers exactly
        // as a wrong password does: a stolen session learns nothing about the password.
        for id in [
            "act_000000000000000000000000",
            "nonsense",
            &own,
            &decided,
            &stale,
        ] {
            for password in [PASSWORD, "not-my-password"] {
                let answer = approve_as(&both, &app, id, password).await;
                assert_eq!(answer, wrong, "{id} with {password}");
            }
        }
        assert_eq!(action_status(&app, &own).await, "pending");
        assert_eq!(action_status(&app, &decided).await, "rejected");
        // Each refusal was a password check (argon2 ran) and audited alike, with nothing
        // that tells the reasons apart. Only the wrong passwords count as failed checks
        // (issue 36): the right one on a request that cannot be approved is not a failure.
        let sql = "SELECT COUNT(*) FROM auth_attempts WHERE account = 'both' AND kind = 'step_up' AND outcome = $1";
        assert_eq!(app.sql_i64(sql, &["failed"]).await, 6);
        assert_eq!(app.sql_i64(sql, &["ok"]).await, 5);
        let refused = app
            .store
            .audit_page(
                0,
                1_000,
                &converge_server::store::AuditFilter {
                    action: Some("approval_refused".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(refused.len(), 11);
        assert!(refused.iter().all(|r| r.reason == refused[0].reason));
        // The right password on the approvable request still approves it.
        let (s, v) = approve_as(&both, &app, &valid, PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed");
    }
);

on_both_backends!(
    approval_password_checks_count_toward_the_sign_in_limits,
    |s| {
        s.session.login_limit_per_user = 3;
    },
    |app| {
        users(&app).await;
        let op = session(&app, "op").await;
        let ap = session(&app, "ap").await;
        let id = request_reverse(&op, &app, &paid(&app, "o-1", 1_000).await).await;
        for _ in 0..3 {
            assert_eq!(approve_as(&ap, &app, &id, "not-my-password").await.0, 403);
        }
        // Even the right password now waits, at approval and at sign-in alike.
        let (s, v) = approve_as(&ap, &app, &id, PASSWORD).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (429, Some("rate_limited")),
            "{v}"
        );
        let r = reqwest::Client::new()
            .post(format!("{}/ops/v1/login", app.base))
            .json(&json!({"username": "ap", "password": PASSWORD}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 429);
        assert!(r.headers().get("retry-after").is_some());
        assert_eq!(action_status(&app, &id).await, "pending");
    }
);

on_both_backends!(
    force_follows_the_whitelist_and_bad_requests_get_stable_codes,
    |app| {
        users(&app).await;
        let payment = paid(&app, "o-1", 5_000).await;
        let op = session(&app, "op").await;
        let cases = [
            (
                json!({"kind": "force_transition", "payment_id": payment, "reason": "r", "target_status": "FAILED", "evidence": "e"}),
                409,
                "transition_not_allowed",
            ),
            (
                json!({"kind": "force_transition", "payment_id": payment, "reason": "r", "target_status": "NOPE", "evidence": "e"}),
                400,
                "invalid_target",
            ),
            (
                json!({"kind": "refund_all", "payment_id": payment, "reason": "r"}),
                400,
                "invalid_action",
            ),
            (
                json!({"kind": "reverse", "payment_id": payment, "reason": "  "}),
                400,
                "invalid_reason",
            ),
            (
                json!({"kind": "reverse", "payment_id": payment, "reason": "x".repeat(1001)}),
                400,
                "invalid_reason",
            ),
            (
                json!({"kind": "reverse", "payment_id": "pay_nope", "reason": "r"}),
                404,
                "not_found",
            ),
            (
                json!({"kind": "reverse", "payment_id": payment}),
                400,
                "invalid_request",
            ),
        ];
        for (body, status, code) in cases {
            let (s, v) = ops_post(&op, &app, "/ops/v1/actions", body.clone()).await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (status, Some(code)),
                "{body}"
            );
        }
        assert!(
            app.store.actions(None, None, 10).await.unwrap().is_empty(),
            "nothing written"
        );
        // One pending request per payment; someone else cannot cancel it.
        let id = request_reverse(&op, &app, &payment).await;
        let (s, v) = ops_post(
            &op,
            &app,
            "/ops/v1/actions",
            json!({"kind": "reverse", "payment_id": payment, "reason": "again"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (409, Some("action_pending"))
        );
        let op2 = session(&app, "op2").await;
        let (s, v) = ops_post(
            &op2,
            &app,
            &format!("/ops/v1/actions/{id}/cancel"),
            json!({}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("not_requester"))
        );
        let (s, v) = ops_post(
            &op,
            &app,
            &format!("/ops/v1/actions/{id}/cancel"),
            json!({}),
        )
        .await;
        assert_eq!(
            (s, v["action"]["status"].as_str()),
            (200, Some("cancelled"))
        );
    }
);

on_both_backends!(a_forced_unknown_to_failed_fences_the_key_first, |app| {
    users(&app).await;
    let a = app
        .post(
            "/v1/payments",
            Some("k-53"),
            &json!({"amount": 1053, "currency": "CNY", "merchant_order_id": "o-53"}),
        )
        .await;
    assert_eq!(a.json()["status"], "UNKNOWN");
    let payment = a.json()["id"].as_str().unwrap().to_string();
    let op = session(&app, "op").await;
    // The payment's story offers the forced transitions the whitelist allows out of UNKNOWN,
    // in its order (the console's target list is exactly this), and no others.
    let story = op
        .get(format!("{}/ops/v1/payments/{payment}", app.base))
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    let offers = story["offers"].as_array().unwrap();
    let force = offers
        .iter()
        .find(|o| o["kind"] == "force_transition")
        .unwrap();
    assert_eq!(force["available"], true);
    assert_eq!(force["targets"], json!(["FAILED", "CHANNEL_SUCCESS"]));
    assert!(
        offers
            .iter()
            .filter(|o| o["kind"] != "force_transition")
            .all(|o| o["targets"] == json!([]))
    );
    let (s, v) = ops_post(&op, &app, "/ops/v1/actions", json!({"kind": "force_transition", "payment_id": payment, "reason": "channel says never charged", "target_status": "FAILED", "evidence": "channel ticket 123: no charge"})).await;
    assert_eq!(s, 201, "{v}");
    let id = v["action"]["id"].as_str().unwrap().to_string();
    let ap = session(&app, "ap").await;
    let (s, v) = ops_post(
        &ap,
        &app,
        &format!("/ops/v1/actions/{id}/approve"),
        approve_body(),
    )
    .await;
    assert_eq!(
        (s, v["action"]["status"].as_str()),
        (200, Some("executed")),
        "{v}"
    );
    assert_eq!(
        app.get(&format!("/v1/payments/{payment}")).await.json()["status"],
        "FAILED"
    );
    let key = app
        .store
        .payment(&payment)
        .await
        .unwrap()
        .unwrap()
        .channel_key;
    let channel = converge_server::channel::http::HttpChannel::new(
        &app.running.sandbox.as_ref().unwrap().url,
        Duration::from_secs(5),
    );
    use converge_server::channel::{Channel, QueryOutcome};
    assert_eq!(channel.query(&key).await, QueryOutcome::Cancelled);
});

on_both_backends!(query_and_retry_run_at_once_for_operators_only, |app| {
    users(&app).await;
    let a = app
        .post(
            "/v1/payments",
            Some("k-53"),
            &json!({"amount": 1053, "currency": "CNY", "merchant_order_id": "o-53"}),
        )
        .await;
    let payment = a.json()["id"].as_str().unwrap().to_string();
    for role in ["view", "ap", "aud", "adm"] {
        let c = session(&app, role).await;
        let (s, _) = ops_post(
            &c,
            &app,
            "/ops/v1/actions",
            json!({"kind": "query", "payment_id": payment, "reason": "check"}),
        )
        .await;
        assert_eq!(s, 403, "{role} may not request actions");
    }
    let op = session(&app, "op").await;
    let (s, v) = ops_post(
        &op,
        &app,
        "/ops/v1/actions",
        json!({"kind": "query", "payment_id": payment, "reason": "check"}),
    )
    .await;
    assert_eq!(
        (s, v["action"]["status"].as_str()),
        (201, Some("executed")),
        "{v}"
    );
    let (s, v) = ops_post(
        &op,
        &app,
        "/ops/v1/actions",
        json!({"kind": "retry", "payment_id": payment, "reason": "run the query now"}),
    )
    .await;
    assert_eq!(
        (s, v["action"]["status"].as_str()),
        (201, Some("executed")),
        "{v}"
    );
    assert!(
        v["action"]["result"]
            .as_str()
            .unwrap()
            .contains("jobs_woken")
    );
    // Approving needs the approver role.
    let id = request_reverse(&op, &app, &paid(&app, "o-2", 100).await).await;
    let op2 = session(&app, "op2").await;
    let (s, _) = ops_post(
        &op2,
        &app,
        &format!("/ops/v1/actions/{id}/approve"),
        approve_body(),
    )
    .await;
    assert_eq!(s, 403);
});

on_both_backends!(concurrent_appends_keep_one_valid_chain, |app| {
    let mut tasks = Vec::new();
    for i in 0..20 {
        let store = app.store.clone();
        tasks.push(tokio::spawn(async move {
            let e = AuditEntry {
                at: i,
                actor: format!("u{i}"),
                roles: "operator".into(),
                action: "test".into(),
                target: "t".into(),
                reason: String::new(),
                before: String::new(),
                after: String::new(),
                meta: "{}".into(),
            };
            store.append_audit(&e).await.unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let (records, head, broken) = app.core().verify_audit_chain().await.unwrap();
    assert_eq!((records, head.seq), (20, 20));
    assert!(broken.is_none(), "{broken:?}");
});

on_both_backends!(an_edited_audit_row_is_detected_at_that_row, |app| {
    app.skip_invariant_check("edits audit record 3 on purpose: the chain is broken at it");
    for i in 0..5 {
        let e = AuditEntry {
            at: i,
            actor: "alice".into(),
            roles: "operator".into(),
            action: "test".into(),
            target: "t".into(),
            reason: "why".into(),
            before: String::new(),
            after: String::new(),
            meta: "{}".into(),
        };
        app.store.append_audit(&e).await.unwrap();
    }
    // The table refuses edits; an attacker with DDL rights drops the guard first.
    match app.store.db_pool() {
        DbPool::Sqlite(p) => {
            assert!(
                sqlx::query("UPDATE audit_log SET reason = 'x' WHERE seq = 3")
                    .execute(&p)
                    .await
                    .is_err(),
                "trigger refuses"
            );
            sqlx::query("DROP TRIGGER audit_log_no_update")
                .execute(&p)
                .await
                .unwrap();
            sqlx::query("UPDATE audit_log SET reason = 'nothing happened' WHERE seq = 3")
                .execute(&p)
                .await
                .unwrap();
        }
        DbPool::Postgres(p) => {
            assert!(
                sqlx::query("UPDATE audit_log SET reason = 'x' WHERE seq = 3")
                    .execute(&p)
                    .await
                    .is_err(),
                "trigger refuses"
            );
            sqlx::query("ALTER TABLE audit_log DISABLE TRIGGER audit_log_no_update_or_delete")
                .execute(&p)
                .await
                .unwrap();
            sqlx::query("UPDATE audit_log SET reason = 'nothing happened' WHERE seq = 3")
                .execute(&p)
                .await
                .unwrap();
        }
    }
    let (_, _, broken) = app.core().verify_audit_chain().await.unwrap();
    assert_eq!(broken.unwrap().seq, 3);
});

/// Inserts `n` chained records after the current head with one multi-row INSERT per 500.
async fn bulk_audit(app: &TestApp, n: i64, reason: impl Fn(i64) -> String) {
    let (mut seq, mut hash) = app.store.audit_head().await.unwrap();
    let mut batch = Vec::new();
    for i in 1..=n {
        let r = chain(
            seq,
            &hash,
            AuditEntry {
                at: i,
                actor: format!("u{}", i % 7),
                roles: "operator".into(),
                action: "test".into(),
                target: format!("payment:pay_{i}"),
                reason: reason(i),
                before: "{}".into(),
                after: "{}".into(),
                meta: "{}".into(),
            },
        );
        seq = r.seq;
        hash = r.hash.clone();
        batch.push(r);
        if batch.len() == 500 || i == n {
            let mut sql = String::from(
                "INSERT INTO audit_log (seq, at, actor, roles, action, target, reason, before_state, after_state, request_meta, prev_hash, hash) VALUES ",
            );
            let rows: Vec<String> = batch
                .iter()
                .map(|r| {
                    let q = |s: &str| format!("'{}'", s.replace('\'', "''"));
                    format!(
                        "({}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
                        r.seq,
                        r.at,
                        q(&r.actor),
                        q(&r.roles),
                        q(&r.action),
                        q(&r.target),
                        q(&r.reason),
                        q(&r.before_state),
                        q(&r.after_state),
                        q(&r.request_meta),
                        q(&r.prev_hash),
                        q(&r.hash)
                    )
                })
                .collect();
            sql.push_str(&rows.join(","));
            match app.store.db_pool() {
                DbPool::Sqlite(p) => sqlx::query(&sql).execute(&p).await.map(|_| ()),
                DbPool::Postgres(p) => sqlx::query(&sql).execute(&p).await.map(|_| ()),
            }
            .unwrap();
            batch.clear();
        }
    }
}

on_both_backends!(
    a_100k_row_export_streams_and_round_trips_through_a_csv_parser,
    |app| {
        users(&app).await;
        bulk_audit(&app, 100_000, |i| {
            if i == 7 {
                "=HYPERLINK(\"http://evil\")".into()
            } else {
                format!("reason {i}")
            }
        })
        .await;
        let aud = session(&app, "aud").await;
        let r = aud
            .get(format!("{}/ops/v1/audit/export?format=csv", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let head = r
            .headers()
            .get("converge-audit-head")
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        // 7 users added (audited) + 100k + the login + the export itself.
        assert!(head.starts_with("100009 "), "{head}");
        let body = r.bytes().await.unwrap();
        let mut reader = csv::Reader::from_reader(body.as_ref());
        assert_eq!(
            reader.headers().unwrap().iter().collect::<Vec<_>>(),
            converge_server::service::audit_export::CSV_HEADER
        );
        let mut n = 0;
        for row in reader.records() {
            let row = row.unwrap();
            n += 1;
            if &row[0] == "14" {
                assert_eq!(
                    &row[6], "'=HYPERLINK(\"http://evil\")",
                    "formula neutralised"
                );
            }
        }
        assert!(n >= 100_000, "{n} rows");
        // The NDJSON export is exact and verifies.
        let r = aud
            .get(format!(
                "{}/ops/v1/audit/export?format=ndjson&actor=u3",
                app.base
            ))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert!(
            text.lines()
                .all(|l| serde_json::from_str::<Value>(l).unwrap()["actor"] == "u3")
        );
        // Times both ways: `at` as hashed (epoch ms), `at_utc` as the CSV writes it.
        let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(
            first["at_utc"].as_str().unwrap(),
            converge_server::domain::clock::rfc3339(first["at"].as_i64().unwrap()),
            "{first}"
        );
        let (s, v) = {
            let r = aud
                .get(format!("{}/ops/v1/audit/verify", app.base))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        };
        assert_eq!((s, v["ok"].as_bool()), (200, Some(true)), "{v}");
        // Only auditors export.
        let op = session(&app, "op").await;
        assert_eq!(
            op.get(format!("{}/ops/v1/audit/export", app.base))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            403
        );
        let exports = app
            .store
            .audit_page(
                0,
                200_000,
                &converge_server::store::AuditFilter {
                    action: Some("audit_export".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        assert_eq!(exports.len(), 2, "each export is audited");
    }
);

on_both_backends!(
    the_approvals_inbox_lists_only_approvals_with_their_payment_now,
    |app| {
        users(&app).await;
        let core = &app.running.state.core;
        let op = session(&app, "op").await;
        let fresh = paid(&app, "o-inbox", 18_857).await;
        let pending = request_reverse(&op, &app, &fresh).await;
        // A retry runs at once: it is not an approval and must not appear.
        let (s, v) = ops_post(
            &op,
            &app,
            "/ops/v1/actions",
            json!({"kind": "query", "payment_id": fresh, "reason": "checking"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        // A request whose payment then moved: stale at once, before anyone types a password.
        let moved = paid(&app, "o-moved", 1_000).await;
        let stale = request_reverse(&op, &app, &moved).await;
        let r = app
            .post(
                &format!("/v1/payments/{moved}/refunds"),
                Some("r-moved"),
                &json!({"amount": 100}),
            )
            .await;
        assert_eq!(r.status, 201);
        // A rejected one lands under decided, with who and when.
        let rejected = request_reverse(&op, &app, &paid(&app, "o-rejected", 2_000).await).await;
        let ap = session(&app, "ap").await;
        let (s, _) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{rejected}/reject"),
            json!({"reason": "not disputed"}),
        )
        .await;
        assert_eq!(s, 200);

        let inbox = core.approval_inbox(30).await.unwrap();
        let ids = |rows: &[converge_wire::governance::ApprovalItem]| -> Vec<String> {
            rows.iter().map(|r| r.action.id.clone()).collect()
        };
        assert_eq!(ids(&inbox.pending), [stale.clone(), pending.clone()]);
        assert_eq!(ids(&inbox.decided), [rejected.as_str()]);
        let row = &inbox.pending[1];
        assert_eq!(row.merchant.as_deref(), Some("acme"));
        assert_eq!(
            (row.amount, row.currency.as_deref()),
            (Some(18_857), Some("CNY"))
        );
        assert_eq!(row.payment_status.as_deref(), Some("SUCCESS"));
        assert!(!row.stale);
        assert!(inbox.pending[0].stale, "{:?}", inbox.pending[0]);
        // What approving a reversal refunds now: the whole amount, or the rest after the
        // merchant's refund of 100.
        assert_eq!(row.reversal_refunds, Some(18_857));
        assert_eq!(inbox.pending[0].reversal_refunds, Some(900));
        let decided = &inbox.decided[0].action;
        assert_eq!(decided.decided_by.as_deref(), Some("ap"));
        assert!(decided.decided_at.is_some());
        assert_eq!(core.pending_approval_count().await.unwrap(), 2);
        // `recent` bounds the decided list.
        assert!(core.approval_inbox(0).await.unwrap().decided.is_empty());
    }
);

//! Issue 36 "No one moves money alone", the sign-in and approval findings, over HTTP on both
//! backends: an approver working through stale requests is not locked out; IPv6 clients are
//! throttled per /64; a flood of failed sign-ins from a shared address blocks neither the
//! people known there nor approvals; a failed sign-in's typed name never becomes an audit
//! actor or text; single query and retry actions have a per-user allowance.

use serde_json::{Value, json};

use crate::support::{OPS_PASSWORD, TestApp, add_ops_user, ops_session};

async fn post(c: &reqwest::Client, app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let r = c
        .post(format!("{}{path}", app.base))
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// A succeeded payment of the default merchant; its id.
async fn paid(app: &TestApp, order: &str) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": 1_000, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.json()["status"], "SUCCESS", "{:?}", a.json());
    a.json()["id"].as_str().unwrap().to_string()
}

/// Requests a reversal of `payment` as `c`; the request's id.
async fn request_reverse(c: &reqwest::Client, app: &TestApp, payment: &str) -> String {
    let (s, v) = post(
        c,
        app,
        "/ops/v1/actions",
        json!({"kind": "reverse", "payment_id": payment, "reason": "customer disputed"}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    v["action"]["id"].as_str().unwrap().to_string()
}

fn approval(password: &str) -> Value {
    json!({"password": password, "reason": "checked"})
}

/// A client with its own cookie jar whose every request comes from `from` (sent as
/// `X-Forwarded-For`, believed when the server trusts 127.0.0.1 as a proxy).
fn client_from(from: &str) -> reqwest::Client {
    let mut headers = reqwest::header::HeaderMap::new();
    headers.insert("x-forwarded-for", from.parse().unwrap());
    reqwest::Client::builder()
        .cookie_store(true)
        .default_headers(headers)
        .build()
        .unwrap()
}

/// One sign-in of `name` from `c`: the status.
async fn sign_in(c: &reqwest::Client, app: &TestApp, name: &str, password: &str) -> u16 {
    post(
        c,
        app,
        "/ops/v1/login",
        json!({"username": name, "password": password}),
    )
    .await
    .0
}

fn trust_loopback(s: &mut converge_server::config::Settings) {
    s.http.trusted_proxies = vec!["127.0.0.1".parse().expect("cidr")];
}

const WRONG: &str = "wrong-password-123";

on_both_backends!(
    an_approver_approving_stale_requests_with_the_right_password_is_not_locked_out,
    |app| {
        add_ops_user(&app, "op", "operator").await;
        add_ops_user(&app, "ap", "approver").await;
        let op = ops_session(&app, "op").await;
        let ap = ops_session(&app, "ap").await;
        // A busy incident: ten requests whose payments move (a merchant refund) before the
        // approver gets to them.
        let mut stale = Vec::new();
        for i in 0..10 {
            let payment = paid(&app, &format!("o-stale-{i}")).await;
            stale.push(request_reverse(&op, &app, &payment).await);
            let r = app
                .post(
                    &format!("/v1/payments/{payment}/refunds"),
                    Some(&format!("r-{i}")),
                    &json!({"amount": 100}),
                )
                .await;
            assert_eq!(r.status, 201);
        }
        for id in &stale {
            let (s, v) = post(
                &ap,
                &app,
                &format!("/ops/v1/actions/{id}/approve"),
                approval(OPS_PASSWORD),
            )
            .await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (403, Some("approval_refused")),
                "{id}: refused as stale, not throttled: {v}"
            );
            assert_eq!(
                app.store.action(id).await.unwrap().unwrap().status.as_str(),
                "stale"
            );
        }
        // At once, no waiting: a fresh request and an emergency pause are approved.
        let fresh = request_reverse(&op, &app, &paid(&app, "o-fresh").await).await;
        let (s, v) = post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{fresh}/approve"),
            approval(OPS_PASSWORD),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed");
        let (s, v) = post(
            &op,
            &app,
            "/ops/v1/pauses",
            json!({"target": "job:reconcile", "reason": "incident 36"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        let pause = v["pause"]["id"].as_str().unwrap().to_string();
        let (s, v) = post(
            &ap,
            &app,
            &format!("/ops/v1/pauses/{pause}/approve"),
            approval(OPS_PASSWORD),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["pause"]["status"], "active");
        // A wrong password still counts as a failed check.
        let other = request_reverse(&op, &app, &paid(&app, "o-other").await).await;
        let (s, _) = post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{other}/approve"),
            approval(WRONG),
        )
        .await;
        assert_eq!(s, 403);
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM auth_attempts WHERE account = 'ap' AND kind = 'step_up' AND outcome = 'failed'",
                &[]
            )
            .await,
            1
        );
    }
);

on_both_backends!(
    ipv6_clients_are_throttled_per_64_and_ipv4_clients_per_address,
    |s| {
        s.session.login_limit_per_addr = 3;
        trust_loopback(s);
    },
    |app| {
        add_ops_user(&app, "alice", "viewer").await;
        // Three failures, each from a new address of one /64.
        for i in 1..=3 {
            let c = client_from(&format!("2001:db8:1:2::{i:x}"));
            assert_eq!(sign_in(&c, &app, &format!("nobody{i}"), WRONG).await, 401);
        }
        // A fourth address in that /64 is held by the limit, even with a right password.
        let c = client_from("2001:db8:1:2:aaaa:bbbb:cccc:dddd");
        assert_eq!(sign_in(&c, &app, "alice", OPS_PASSWORD).await, 429);
        // Another /64 is not.
        let c = client_from("2001:db8:1:3::1");
        assert_eq!(sign_in(&c, &app, "alice", OPS_PASSWORD).await, 200);
        // IPv4 addresses stay on their own: three failures from three of them hold none.
        for i in 1..=3 {
            let c = client_from(&format!("198.51.100.{i}"));
            assert_eq!(sign_in(&c, &app, &format!("nobody{i}"), WRONG).await, 401);
        }
        let c = client_from("198.51.100.4");
        assert_eq!(sign_in(&c, &app, "alice", OPS_PASSWORD).await, 200);
    }
);

on_both_backends!(
    a_flood_of_failed_sign_ins_from_a_shared_address_blocks_neither_its_users_nor_approvals,
    |s| {
        s.session.login_limit_per_addr = 5;
        s.session.login_limit_per_user = 3;
        trust_loopback(s);
    },
    |app| {
        const OFFICE: &str = "198.51.100.50";
        add_ops_user(&app, "alice", "viewer").await;
        add_ops_user(&app, "bob", "viewer").await;
        add_ops_user(&app, "op", "operator").await;
        add_ops_user(&app, "ap", "approver").await;
        // Alice and the approver work from the office.
        assert_eq!(
            sign_in(&client_from(OFFICE), &app, "alice", OPS_PASSWORD).await,
            200
        );
        let ap = client_from(OFFICE);
        assert_eq!(sign_in(&ap, &app, "ap", OPS_PASSWORD).await, 200);
        let op = ops_session(&app, "op").await;
        let id = request_reverse(&op, &app, &paid(&app, "o-1").await).await;
        // Someone else behind the office's address floods the sign-in, also with the
        // approver's name, until the address's limit answers 429.
        let mut limited = false;
        for i in 0..12 {
            let name = if i % 3 == 0 {
                "ap".to_string()
            } else {
                format!("nobody{i}")
            };
            let s = sign_in(&client_from(OFFICE), &app, &name, WRONG).await;
            assert!(s == 401 || s == 429, "{s}");
            limited |= s == 429;
        }
        assert!(limited, "the flood reached the address's limit");
        // The limit still holds a stranger to the office, even with a right password.
        assert_eq!(
            sign_in(&client_from(OFFICE), &app, "bob", OPS_PASSWORD).await,
            429
        );
        // Alice, known there, signs in.
        assert_eq!(
            sign_in(&client_from(OFFICE), &app, "alice", OPS_PASSWORD).await,
            200
        );
        // The approver's step-up passes.
        let (s, v) = post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{id}/approve"),
            approval(OPS_PASSWORD),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed");
    }
);

on_both_backends!(
    a_failed_sign_in_never_puts_the_typed_name_in_the_audit_log,
    |app| {
        add_ops_user(&app, "alice", "viewer").await;
        const TYPED_PASSWORD: &str = "Tr0ub4dor&3-horse-staple";
        for typed in ["system", "cli:root", TYPED_PASSWORD] {
            let c = reqwest::Client::new();
            assert_eq!(sign_in(&c, &app, typed, WRONG).await, 401, "{typed}");
        }
        let c = reqwest::Client::new();
        assert_eq!(sign_in(&c, &app, "alice", OPS_PASSWORD).await, 200);
        let records = app
            .store
            .audit_page(0, 1_000, &Default::default())
            .await
            .unwrap();
        for r in &records {
            assert!(
                !["system", "cli:root", TYPED_PASSWORD].contains(&r.actor.as_str()),
                "{r:?}"
            );
            let text = format!("{r:?}");
            assert!(
                !text.contains(TYPED_PASSWORD) && !text.contains("cli:root"),
                "{text}"
            );
        }
        let failed: Vec<_> = records
            .iter()
            .filter(|r| r.action == "login_failed")
            .collect();
        assert_eq!(failed.len(), 3, "{records:?}");
        for r in &failed {
            assert_eq!(r.actor, "anonymous");
            let hash = r.target.strip_prefix("login:").expect("login:<hash>");
            assert!(
                hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
                "{hash}"
            );
        }
        assert_eq!(
            failed[0].target,
            format!(
                "login:{}",
                converge_server::service::sign_in::typed_name_hash("system")
            )
        );
        // A successful sign-in still names its user.
        assert!(
            records
                .iter()
                .any(|r| r.action == "login" && r.actor == "alice" && r.target == "user:alice"),
            "{records:?}"
        );
        // And no one can take the reserved actor names.
        for reserved in ["system", "Anonymous"] {
            assert!(
                app.core()
                    .add_user(
                        &converge_server::ops::password::PasswordHasherPool::new(1),
                        reserved,
                        "viewer",
                        OPS_PASSWORD,
                        0,
                        &crate::support::setup_actor(),
                    )
                    .await
                    .is_err(),
                "{reserved}"
            );
        }
    }
);

on_both_backends!(
    single_query_and_retry_actions_have_a_per_user_allowance,
    |s| {
        s.actions.action_limit_per_minute = 3;
    },
    |app| {
        add_ops_user(&app, "op", "operator").await;
        add_ops_user(&app, "op2", "operator").await;
        let op = ops_session(&app, "op").await;
        let payment = paid(&app, "o-1").await;
        for kind in ["query", "retry", "query"] {
            let (s, v) = post(
                &op,
                &app,
                "/ops/v1/actions",
                json!({"kind": kind, "payment_id": payment, "reason": "checking"}),
            )
            .await;
            assert_eq!(s, 201, "{kind}: {v}");
        }
        let r = op
            .post(format!("{}/ops/v1/actions", app.base))
            .json(&json!({"kind": "retry", "payment_id": payment, "reason": "again"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 429);
        let retry: u64 = r
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse().ok())
            .expect("Retry-After");
        assert!((1..=60).contains(&retry), "{retry}");
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "rate_limited");
        // The allowance is the user's: another operator is not held, nor are requests that
        // wait for an approver.
        let op2 = ops_session(&app, "op2").await;
        let (s, v) = post(
            &op2,
            &app,
            "/ops/v1/actions",
            json!({"kind": "query", "payment_id": payment, "reason": "checking"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        request_reverse(&op, &app, &payment).await;
        // Nothing was recorded for the refused one: three queries and retries by op.
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM actions WHERE requested_by = 'op' AND kind IN ('query', 'retry')",
                &[]
            )
            .await,
            3
        );
    }
);

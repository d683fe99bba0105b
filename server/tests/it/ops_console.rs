//! The console backend over HTTP on both backends: sign-in cases, sessions, CSRF, and every
//! `/ops/v1` endpoint against every role (DESIGN.md "Ops console").

use std::time::Duration;

use converge_server::store::KindFilter;
use serde_json::{Value, json};

use crate::support::{TestApp, ops_get, ops_post};

const PASSWORD: &str = "correct-horse-battery";

async fn user(app: &TestApp, name: &str, roles: &str) {
    crate::support::add_ops_user(app, name, roles).await;
}

/// A browser-like client with its own cookie jar.
fn browser() -> reqwest::Client {
    reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .expect("client")
}

async fn login(app: &TestApp, name: &str, password: &str) -> (reqwest::Client, u16, Value) {
    let c = browser();
    let (s, v) = ops_post(
        &c,
        app,
        "/ops/v1/login",
        &json!({"username": name, "password": password}),
    )
    .await;
    (c, s, v)
}

on_both_backends!(
    unknown_user_wrong_password_and_disabled_user_get_one_answer,
    |app| {
        user(&app, "alice", "viewer").await;
        user(&app, "dora", "viewer").await;
        app.core()
            .set_user_disabled("dora", true, 1, &crate::support::setup_actor())
            .await
            .unwrap();
        let (_, s1, b1) = login(&app, "nobody", PASSWORD).await;
        let (_, s2, b2) = login(&app, "alice", "wrong-password-123").await;
        let (_, s3, b3) = login(&app, "dora", PASSWORD).await;
        assert_eq!((s1, s2, s3), (401, 401, 401));
        assert_eq!(b1, b2);
        assert_eq!(b2, b3);
        assert_eq!(b1["error"]["code"], "invalid_credentials");
        let (_, ok, me) = login(&app, "alice", PASSWORD).await;
        assert_eq!((ok, me["username"].as_str()), (200, Some("alice")));
    }
);

on_both_backends!(stored_passwords_are_argon2id_with_owasp_parameters, |app| {
    user(&app, "alice", "viewer").await;
    let u = app.store.user_by_name("alice").await.unwrap().unwrap();
    assert!(
        u.password_hash
            .starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
        "{}",
        u.password_hash
    );
});

on_both_backends!(
    login_attempts_are_rate_limited_per_user,
    |s| {
        s.session.login_limit_per_user = 3;
    },
    |app| {
        user(&app, "alice", "viewer").await;
        for _ in 0..3 {
            assert_eq!(login(&app, "alice", "wrong-password-123").await.1, 401);
        }
        let c = browser();
        let r = c
            .post(format!("{}/ops/v1/login", app.base))
            .json(&json!({"username": "alice", "password": PASSWORD}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 429, "even the right password waits");
        assert!(r.headers().get("retry-after").is_some());
        // Another user from the same address is not blocked by alice's limit.
        user(&app, "bob", "viewer").await;
        assert_eq!(login(&app, "bob", PASSWORD).await.1, 200);
    }
);

on_both_backends!(login_renews_the_session_id_and_logout_destroys_it, |app| {
    user(&app, "alice", "viewer").await;
    let c = browser();
    let first = c
        .post(format!("{}/ops/v1/login", app.base))
        .json(&json!({"username": "alice", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    let cookie_a = first
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert!(
        first
            .headers()
            .get("set-cookie")
            .unwrap()
            .to_str()
            .unwrap()
            .contains("HttpOnly")
    );
    assert!(
        first
            .headers()
            .get("set-cookie")
            .unwrap()
            .to_str()
            .unwrap()
            .contains("SameSite=Strict")
    );
    let second = c
        .post(format!("{}/ops/v1/login", app.base))
        .json(&json!({"username": "alice", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    let cookie_b = second
        .headers()
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    assert_ne!(cookie_a, cookie_b, "a login issues a new session id");
    let plain = reqwest::Client::new();
    let old = plain
        .get(format!("{}/ops/v1/me", app.base))
        .header("cookie", &cookie_a)
        .send()
        .await
        .unwrap();
    assert_eq!(old.status().as_u16(), 401, "the pre-login id is dead");
    let cur = plain
        .get(format!("{}/ops/v1/me", app.base))
        .header("cookie", &cookie_b)
        .send()
        .await
        .unwrap();
    assert_eq!(cur.status().as_u16(), 200);
    assert_eq!(
        ops_post(&c, &app, "/ops/v1/logout", &json!({})).await.0,
        204
    );
    let after = plain
        .get(format!("{}/ops/v1/me", app.base))
        .header("cookie", &cookie_b)
        .send()
        .await
        .unwrap();
    assert_eq!(after.status().as_u16(), 401, "logout destroyed the session");
});

on_both_backends!(
    an_idle_session_expires,
    |s| {
        s.session.idle_timeout_secs = 1;
    },
    |app| {
        user(&app, "alice", "viewer").await;
        let (c, s, _) = login(&app, "alice", PASSWORD).await;
        assert_eq!(s, 200);
        assert_eq!(ops_get(&c, &app, "/ops/v1/me").await.0, 200);
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        assert_eq!(ops_get(&c, &app, "/ops/v1/me").await.0, 401);
    }
);

on_both_backends!(
    an_active_session_still_ends_at_the_absolute_timeout,
    |s| {
        s.session.absolute_timeout_secs = 2;
    },
    |app| {
        user(&app, "alice", "viewer").await;
        let (c, _, _) = login(&app, "alice", PASSWORD).await;
        for _ in 0..3 {
            assert_eq!(ops_get(&c, &app, "/ops/v1/me").await.0, 200);
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert_eq!(ops_get(&c, &app, "/ops/v1/me").await.0, 401);
    }
);

on_both_backends!(disabling_a_user_ends_its_sessions, |app| {
    user(&app, "alice", "viewer").await;
    user(&app, "root", "admin").await;
    let (alice, _, _) = login(&app, "alice", PASSWORD).await;
    let (admin, _, _) = login(&app, "root", PASSWORD).await;
    assert_eq!(ops_get(&alice, &app, "/ops/v1/me").await.0, 200);
    assert_eq!(
        ops_post(&admin, &app, "/ops/v1/users/alice/disable", &json!({}))
            .await
            .0,
        204
    );
    assert_eq!(ops_get(&alice, &app, "/ops/v1/me").await.0, 401);
    assert_eq!(login(&app, "alice", PASSWORD).await.1, 401);
});

on_both_backends!(cross_origin_and_non_json_writes_are_refused, |app| {
    user(&app, "alice", "operator").await;
    let c = browser();
    let r = c
        .post(format!("{}/ops/v1/login", app.base))
        .header("origin", "http://evil.example")
        .json(&json!({"username": "alice", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = c
        .post(format!("{}/ops/v1/login", app.base))
        .header("sec-fetch-site", "cross-site")
        .json(&json!({"username": "alice", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let r = c
        .post(format!("{}/ops/v1/login", app.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body("username=alice&password=x")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 415);
    let host = app.base.trim_start_matches("http://").to_string();
    let r = c
        .post(format!("{}/ops/v1/login", app.base))
        .header("origin", format!("http://{host}"))
        .json(&json!({"username": "alice", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "same origin passes");
});

// Issue 36: the two exports are GETs that write (each is audited), so a page on a sibling
// origin must not start one with the user's cookie; the console's same-origin download links,
// a typed address and scripts (no fetch metadata at all) still export.
on_both_backends!(
    cross_site_exports_are_refused_and_same_origin_ones_pass,
    |app| {
        crate::support::add_ops_user(&app, "auda", "viewer,auditor").await;
        let c = crate::support::ops_session(&app, "auda").await;
        let host = app.base.trim_start_matches("http://").to_string();
        let a = &app;
        let exports_audited = move || async move {
            a.sql_i64(
            "SELECT COUNT(*) FROM audit_log WHERE action IN ('audit_export', 'payments_export')",
            &[],
        )
        .await
        };
        for path in ["/ops/v1/audit/export?format=csv", "/ops/v1/payments/export"] {
            for (name, value) in [
                ("sec-fetch-site", "cross-site".to_string()),
                ("sec-fetch-site", "same-site".to_string()),
                ("origin", "http://evil.example".to_string()),
                ("origin", format!("http://sibling.{host}")),
            ] {
                for head in [false, true] {
                    let url = format!("{}{path}", app.base);
                    let req = if head { c.head(&url) } else { c.get(&url) };
                    let r = req.header(name, &value).send().await.unwrap();
                    assert_eq!(r.status().as_u16(), 403, "{path} with {name}: {value}");
                    if !head {
                        let body: Value = r.json().await.unwrap();
                        assert_eq!(body["error"]["code"], "csrf_rejected");
                    }
                }
            }
            assert_eq!(
                exports_audited().await,
                0,
                "a refused export is not audited"
            );
        }
        let mut done = 0;
        for path in ["/ops/v1/audit/export?format=csv", "/ops/v1/payments/export"] {
            for headers in [
                // The console's link: same origin (a download link's GET carries no Origin).
                vec![("sec-fetch-site", "same-origin".to_string())],
                // A typed address, a bookmark.
                vec![("sec-fetch-site", "none".to_string())],
                // A same-origin fetch.
                vec![
                    ("sec-fetch-site", "same-origin".to_string()),
                    ("origin", format!("http://{host}")),
                ],
                // curl, the scripts: neither header.
                vec![],
            ] {
                let mut req = c.get(format!("{}{path}", app.base));
                for (name, value) in &headers {
                    req = req.header(*name, value);
                }
                let r = req.send().await.unwrap();
                assert_eq!(r.status().as_u16(), 200, "{path} with {headers:?}");
                r.bytes().await.unwrap();
                done += 1;
                assert_eq!(exports_audited().await, done, "each export audited once");
            }
        }
    }
);

/// (method, path, body) of every /ops/v1 endpoint after login, with the roles allowed.
fn endpoints(
    payment: &str,
    item: i64,
) -> Vec<(&'static str, String, Value, &'static [&'static str])> {
    const ANY: &[&str] = &["viewer", "operator", "approver", "auditor", "admin"];
    vec![
        ("GET", "/ops/v1/me".into(), Value::Null, ANY),
        ("GET", "/ops/v1/dashboard".into(), Value::Null, ANY),
        ("GET", "/ops/v1/merchants".into(), Value::Null, ANY),
        (
            "GET",
            "/ops/v1/payments?status=SUCCESS".into(),
            Value::Null,
            ANY,
        ),
        (
            "GET",
            format!("/ops/v1/payments/{payment}"),
            Value::Null,
            ANY,
        ),
        (
            "GET",
            "/ops/v1/payments/export?status=SUCCESS".into(),
            Value::Null,
            ANY,
        ),
        (
            "GET",
            "/ops/v1/error-pool?status=open".into(),
            Value::Null,
            ANY,
        ),
        (
            "POST",
            format!("/ops/v1/error-pool/{item}/resolve"),
            json!({"note": "checked with the channel"}),
            &["operator"],
        ),
        (
            "GET",
            "/ops/v1/actions/bulk-retry/preview?source=error_pool".into(),
            Value::Null,
            &["operator"],
        ),
        (
            "POST",
            "/ops/v1/actions/bulk-retry".into(),
            json!({"selection": {"source": "error_pool"}, "items": [{"payment_id": payment, "version": 1}], "reason": "channel back"}),
            &["operator"],
        ),
        ("GET", "/ops/v1/users".into(), Value::Null, &["admin"]),
        (
            "POST",
            "/ops/v1/users".into(),
            json!({"username": "new-user", "roles": "viewer", "password": PASSWORD}),
            &["admin"],
        ),
        (
            "POST",
            "/ops/v1/users/target/roles".into(),
            json!({"roles": "viewer,auditor"}),
            &["admin"],
        ),
        (
            "POST",
            "/ops/v1/users/target/password".into(),
            json!({"password": "another-long-password"}),
            &["admin"],
        ),
        (
            "POST",
            "/ops/v1/users/target/disable".into(),
            json!({}),
            &["admin"],
        ),
        (
            "POST",
            "/ops/v1/users/target/enable".into(),
            json!({}),
            &["admin"],
        ),
    ]
}

on_both_backends!(every_endpoint_checks_every_role_on_the_server, |app| {
    // A payment and an open error-pool item to point at.
    let payment = app.suspended_payment("o-1", 100).await;
    let item = app.store.payment_error_items(&payment).await.unwrap()[0].id;
    let roles = ["viewer", "operator", "approver", "auditor", "admin"];
    for role in roles {
        user(&app, &format!("u-{role}"), role).await;
    }
    user(&app, "target", "viewer").await;
    let anonymous = browser();
    for (method, path, body, _) in endpoints(&payment, item) {
        let (s, _) = if method == "GET" {
            ops_get(&anonymous, &app, &path).await
        } else {
            ops_post(&anonymous, &app, &path, &body).await
        };
        assert_eq!(s, 401, "anonymous {method} {path}");
    }
    for role in roles {
        let (c, s, _) = login(&app, &format!("u-{role}"), PASSWORD).await;
        assert_eq!(s, 200);
        for (method, path, body, allowed) in endpoints(&payment, item) {
            let (s, v) = if method == "GET" {
                ops_get(&c, &app, &path).await
            } else {
                ops_post(&c, &app, &path, &body).await
            };
            if allowed.contains(&role) {
                assert!(s < 400 || s == 409, "{role} {method} {path}: {s} {v}");
            } else {
                assert_eq!(s, 403, "{role} {method} {path}: {v}");
                assert_eq!(v["error"]["code"], "forbidden");
            }
        }
    }
    let resolved = app.store.error_item(item).await.unwrap().unwrap();
    assert_eq!(
        (resolved.status.as_str(), resolved.resolved_by.as_deref()),
        ("resolved", Some("u-operator"))
    );
});

on_both_backends!(payment_search_pages_and_detail_tells_the_story, |app| {
    user(&app, "alice", "viewer").await;
    for i in 0..5 {
        app.post(
            "/v1/payments",
            Some(&format!("k-{i}")),
            &json!({"amount": 1000 + i, "currency": "CNY", "merchant_order_id": format!("o-{i}")}),
        )
        .await;
    }
    let (c, _, _) = login(&app, "alice", PASSWORD).await;
    let (s, page1) = ops_get(&c, &app, "/ops/v1/payments?merchant=acme&limit=3").await;
    assert_eq!(s, 200);
    assert_eq!(page1["items"].as_array().unwrap().len(), 3);
    let next = page1["next"].as_str().unwrap();
    let (_, page2) = ops_get(
        &c,
        &app,
        &format!("/ops/v1/payments?merchant=acme&limit=3&after={next}"),
    )
    .await;
    assert_eq!(page2["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        page1["prev"],
        Value::Null,
        "the first page has no newer page"
    );
    assert_eq!(
        page2["next"],
        Value::Null,
        "one row more is read: no empty last page"
    );
    // Back up from the second page: exactly the first page again (issue 41).
    let prev = page2["prev"].as_str().unwrap();
    let (_, back) = ops_get(
        &c,
        &app,
        &format!("/ops/v1/payments?merchant=acme&limit=3&before={prev}"),
    )
    .await;
    assert_eq!(back["items"], page1["items"]);
    assert_eq!(back["prev"], Value::Null);
    assert_eq!(back["next"], page1["next"]);
    let (_, by_order) = ops_get(&c, &app, "/ops/v1/payments?order=o-2").await;
    let id = by_order["items"][0]["id"].as_str().unwrap().to_string();
    let (s, d) = ops_get(&c, &app, &format!("/ops/v1/payments/{id}")).await;
    assert_eq!(s, 200);
    assert_eq!(d["merchant"], "acme");
    let applied: Vec<&str> = d["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["applied"] == true)
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        applied,
        ["created", "submit", "channel_succeeded", "ledger_posted"]
    );
    assert_eq!(d["ledger"].as_array().unwrap().len(), 2);
    assert_eq!(
        ops_get(&c, &app, "/ops/v1/payments?status=BOGUS").await.0,
        400
    );
    assert_eq!(
        ops_get(&c, &app, "/ops/v1/payments?from=yesterday").await.0,
        400
    );
    assert_eq!(
        ops_get(&c, &app, "/ops/v1/payments/pay_missing").await.0,
        404
    );
});

on_both_backends!(dashboard_counts_replays_and_stuck_payments, |app| {
    user(&app, "alice", "viewer").await;
    // 53: nothing committed and no callback, so the payment stays UNKNOWN with a due query.
    let body = json!({"amount": 1053, "currency": "CNY", "merchant_order_id": "o-slow"});
    app.post("/v1/payments", Some("k-slow"), &body).await;
    app.post("/v1/payments", Some("k-slow"), &body).await;
    let (c, _, _) = login(&app, "alice", PASSWORD).await;
    let (s, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
    assert_eq!(s, 200);
    let w5 = &d["idempotency"]["windows"][0];
    assert_eq!(
        (w5["keyed"].as_i64(), w5["replays"].as_i64()),
        (Some(2), Some(1)),
        "{w5}"
    );
    assert_eq!(
        d["queue"]["kinds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["kind"] == "query")
            .unwrap()["due"],
        1
    );
});

on_both_backends!(
    a_stuck_payments_retry_is_offered_only_where_a_job_would_wake,
    |s| {
        s.stuck.stuck_unknown_ms = 0;
    },
    |app| {
        user(&app, "alice", "viewer").await;
        // 53: nothing committed and no callback: UNKNOWN with a due query, which a retry wakes.
        let body = json!({"amount": 1053, "currency": "CNY", "merchant_order_id": "o-slow"});
        let slow = app.post("/v1/payments", Some("k-slow"), &body).await.json();
        // SUSPENSE after its merchant was frozen mid-flight.
        let suspended = app.suspended_payment("o-suspense", 2000).await;
        let (c, _, _) = login(&app, "alice", PASSWORD).await;
        let (s, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
        assert_eq!(s, 200);
        let oldest = d["stuck"]["oldest"].as_array().unwrap();
        let row = |id: &str| {
            oldest
                .iter()
                .find(|p| p["id"] == id)
                .unwrap_or_else(|| panic!("{id} is not stuck: {oldest:?}"))
                .clone()
        };
        let due = row(slow["id"].as_str().unwrap());
        assert_eq!(
            (due["wakeable_jobs"].as_i64(), due["retry_why"].as_str()),
            (Some(1), Some(""))
        );
        let stuck = row(&suspended);
        assert_eq!(
            (stuck["wakeable_jobs"].as_i64(), stuck["retry_why"].as_str()),
            (Some(1), Some(""))
        );
        // Every job taken by a worker (leased for an hour): nothing a retry could wake.
        let later = converge_server::domain::clock::Clock::now_ms(
            &converge_server::domain::clock::SystemClock,
        ) + 600_000;
        let leased = app
            .store
            .claim_jobs_of("elsewhere", 100, 3_600_000, later, &KindFilter::all())
            .await
            .unwrap();
        assert!(leased.len() >= 2, "{leased:?}");
        let (_, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
        let oldest = d["stuck"]["oldest"].as_array().unwrap();
        for id in [slow["id"].as_str().unwrap(), suspended.as_str()] {
            let p = oldest.iter().find(|p| p["id"] == id).unwrap();
            assert_eq!(
                (p["wakeable_jobs"].as_i64(), p["retry_why"].as_str()),
                (
                    Some(0),
                    Some("no job is waiting or dead, so a retry would wake nothing")
                ),
                "{p}"
            );
        }
    }
);

on_both_backends!(
    ops_bodies_with_unknown_fields_and_nul_queries_are_400_json,
    |app| {
        user(&app, "alice", "viewer,operator").await;
        // A misspelt field is refused, not silently dropped (e.g. `target_stauts`).
        let (c, s, v) = {
            let c = browser();
            let (s, v) = ops_post(
                &c,
                &app,
                "/ops/v1/login",
                &json!({"username": "alice", "password": PASSWORD, "remember": true}),
            )
            .await;
            (c, s, v)
        };
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some("invalid_request")),
            "{v}"
        );
        let (_, ok, _) = login(&app, "alice", PASSWORD).await;
        assert_eq!(ok, 200);
        drop(c);
        let (c, _, _) = login(&app, "alice", PASSWORD).await;
        for path in [
            "/ops/v1/payments?order=%00",
            "/ops/v1/error-pool?kind=%00",
            "/ops/v1/payments/%00",
        ] {
            let (s, v) = ops_get(&c, &app, path).await;
            assert_eq!(s, 400, "{path}: {v}");
            assert!(
                v["error"]["code"]
                    .as_str()
                    .is_some_and(|c| c == "invalid_query" || c == "invalid_path"),
                "{path}: {v}"
            );
        }
    }
);

on_both_backends!(
    refused_logins_past_the_rate_limit_are_counted_not_recorded_one_row_each,
    |s| {
        s.session.login_limit_per_addr = 3;
    },
    |app| {
        user(&app, "alice", "viewer").await;
        for _ in 0..40 {
            let status = login(&app, "alice", "wrong-password-123").await.1;
            assert!(status == 401 || status == 429, "{status}");
        }
        let failed = app
            .store
            .audit_page(
                0,
                1_000,
                &converge_server::store::AuditFilter {
                    action: Some("login_failed".into()),
                    ..Default::default()
                },
            )
            .await
            .unwrap();
        // 3 checked attempts, then one record for the refused ones of this window.
        assert_eq!(failed.len(), 4, "{failed:?}");
        assert!(
            failed[3].after_state.contains("rate_limited"),
            "{:?}",
            failed[3]
        );
    }
);

async fn status_with_host(app: &TestApp, path: &str, host: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{}{path}", app.base))
        .header("host", host)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

on_both_backends!(
    the_console_refuses_other_host_names_and_the_merchant_api_does_not,
    |app| {
        let port = app.base.rsplit(':').next().unwrap().to_string();
        // DNS rebinding: a page on evil.example resolving to this server.
        let r = reqwest::Client::new()
            .get(format!("{}/ops/v1/me", app.base))
            .header("host", format!("evil.example:{port}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403);
        let v: Value = r.json().await.unwrap();
        assert_eq!(v["error"]["code"], "host_not_allowed");
        assert_eq!(status_with_host(&app, "/login", "evil.example").await, 403);
        // The default names answer (401: not signed in).
        for host in [
            format!("127.0.0.1:{port}"),
            format!("localhost:{port}"),
            format!("LOCALHOST.:{port}"),
        ] {
            assert_eq!(
                status_with_host(&app, "/ops/v1/me", &host).await,
                401,
                "{host}"
            );
        }
        // The merchant API and health answer any Host.
        assert_eq!(status_with_host(&app, "/health", "evil.example").await, 200);
        assert_eq!(
            reqwest::Client::new()
                .get(format!("{}/v1/payments/pay_none", app.base))
                .header("host", "api.merchant.example")
                .bearer_auth(&app.api_key)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            404
        );
    }
);

on_both_backends!(
    allowed_hosts_replace_the_default_names,
    |s| {
        s.http.allowed_hosts = vec!["Console.Example".into()];
    },
    |app| {
        assert_eq!(
            status_with_host(&app, "/ops/v1/me", "console.example:443").await,
            401
        );
        assert_eq!(status_with_host(&app, "/ops/v1/me", "127.0.0.1").await, 403);
    }
);

on_both_backends!(
    the_payments_export_is_exactly_what_the_filters_select_every_page_formula_safe_and_audited,
    |app| {
        user(&app, "view", "viewer").await;
        let (c, s, _) = login(&app, "view", PASSWORD).await;
        assert_eq!(s, 200);
        for (order, amount) in [("=cmd|calc", 18_857), ("o-2", 100), ("o-3", 250)] {
            let r = app
                .post(
                    "/v1/payments",
                    Some(&format!("k-{order}")),
                    &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order}),
                )
                .await;
            assert_eq!(r.status, 201, "{:?}", r.json());
        }
        let csv = |path: String| {
            let c = c.clone();
            let base = app.base.clone();
            async move {
                let r = c.get(format!("{base}{path}")).send().await.unwrap();
                let status = r.status().as_u16();
                let ctype = r
                    .headers()
                    .get("content-type")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                (status, ctype, r.text().await.unwrap())
            }
        };
        let (s, ctype, body) = csv("/ops/v1/payments/export".into()).await;
        assert_eq!((s, ctype.as_str()), (200, "text/csv; charset=utf-8"));
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 4, "{body}");
        assert!(
            lines[0]
                .starts_with("id,merchant,merchant_order_id,status,amount_minor,amount,currency")
        );
        let risky = lines.iter().find(|l| l.contains("cmd")).unwrap();
        assert!(risky.contains(",acme,'=cmd|calc,"), "{risky}");
        assert!(risky.contains(",18857,188.57,CNY,"), "{risky}");
        // A filter narrows it exactly as the search does.
        let (_, _, one) = csv("/ops/v1/payments/export?order=o-2".into()).await;
        assert_eq!(one.lines().count(), 2, "{one}");
        assert!(one.contains(",o-2,"));
        let (_, _, none) = csv("/ops/v1/payments/export?merchant=nobody".into()).await;
        assert_eq!(none.lines().count(), 1, "{none}");
        // A malformed filter is refused before anything is written.
        let (s, _, bad) = csv("/ops/v1/payments/export?from=yesterday".into()).await;
        assert_eq!(s, 400, "{bad}");
        assert!(bad.contains("invalid_time"), "{bad}");
        // Each export is audited with its filters.
        let audited = app
            .sql_strings(
                "SELECT after_state FROM audit_log WHERE action = 'payments_export' ORDER BY seq",
                &[],
            )
            .await;
        assert_eq!(audited.len(), 3, "{audited:?}");
        assert!(audited[1].contains("\"order\":\"o-2\""), "{audited:?}");
        // Streamed a page at a time: a page of 2 over 3 rows still yields every row once.
        let all = converge_server::store::PaymentFilter {
            limit: 2,
            ..Default::default()
        };
        let chunks: Vec<_> = futures_util::StreamExt::collect::<Vec<_>>(
            converge_server::service::payments_export::stream(
                app.store.clone(),
                all,
                Default::default(),
                2,
            ),
        )
        .await;
        assert_eq!(chunks.len(), 2);
        let text: String = chunks
            .into_iter()
            .map(|c| String::from_utf8(c.unwrap().to_vec()).unwrap())
            .collect();
        assert_eq!(text.lines().count(), 4, "{text}");
    }
);

on_both_backends!(
    the_time_in_state_filter_selects_alike_in_the_list_and_the_export_and_refuses_nonsense,
    |app| {
        user(&app, "view", "viewer").await;
        let (c, _, _) = login(&app, "view", PASSWORD).await;
        for i in 0..2 {
            app.pay(&format!("k-{i}"), &format!("o-{i}"), 1000).await;
        }
        let count = |v: &Value| v["items"].as_array().map_or(0, Vec::len);
        let (s, all) = ops_get(&c, &app, "/ops/v1/payments?in_state_for=").await;
        assert_eq!((s, count(&all)), (200, 2), "blank is any: {all}");
        // Both changed just now: neither has been in its state for over a minute.
        let (s, none) = ops_get(&c, &app, "/ops/v1/payments?in_state_for=1").await;
        assert_eq!((s, count(&none)), (200, 0), "{none}");
        let r = app
            .send(c.get(format!(
                "{}/ops/v1/payments/export?in_state_for=1",
                app.base
            )))
            .await;
        assert_eq!(r.status, 200);
        let csv = String::from_utf8(r.body).unwrap();
        assert_eq!(csv.lines().count(), 1, "the header only: {csv}");
        let audited = app
            .sql_strings(
                "SELECT after_state FROM audit_log WHERE action = 'payments_export'",
                &[],
            )
            .await;
        assert!(audited[0].contains("\"in_state_for\":\"1\""), "{audited:?}");
        for bad in ["0", "-5", "1.5", "abc", "525601"] {
            let (s, v) = ops_get(&c, &app, &format!("/ops/v1/payments?in_state_for={bad}")).await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (400, Some("invalid_query")),
                "{bad}: {v}"
            );
        }
    }
);

on_both_backends!(
    role_changes_apply_to_open_sessions_and_sign_ins_are_shown,
    |app| {
        user(&app, "adm", "admin").await;
        user(&app, "adm2", "admin").await;
        user(&app, "ann", "viewer").await;
        let (admin, s, _) = login(&app, "adm", PASSWORD).await;
        assert_eq!(s, 200);
        let (_, users) = ops_get(&admin, &app, "/ops/v1/users").await;
        let last = |v: &Value, name: &str| {
            v.as_array()
                .or_else(|| v["items"].as_array())
                .unwrap()
                .iter()
                .find(|u| u["username"] == name)
                .unwrap()["last_sign_in_at"]
                .clone()
        };
        assert!(last(&users, "adm").as_i64().is_some(), "{users}");
        assert!(last(&users, "ann").is_null(), "{users}");
        // Ann's open session gets the new roles at its next request, without signing in again.
        let (ann, s, _) = login(&app, "ann", PASSWORD).await;
        assert_eq!(s, 200);
        assert_eq!(ops_get(&ann, &app, "/ops/v1/users").await.0, 403);
        // Granting admin is a request a second admin approves (issue 36).
        let (s, v) = ops_post(
            &admin,
            &app,
            "/ops/v1/users/ann/roles",
            &json!({"roles": "viewer,admin"}),
        )
        .await;
        assert_eq!(s, 202, "{v}");
        assert_eq!(ops_get(&ann, &app, "/ops/v1/users").await.0, 403);
        let (second, _, _) = login(&app, "adm2", PASSWORD).await;
        let (s, v) = ops_post(
            &second,
            &app,
            &format!(
                "/ops/v1/privilege-requests/{}/approve",
                v["request"]["id"].as_str().unwrap()
            ),
            &json!({"password": PASSWORD, "reason": "ann joins the on-call rota"}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(ops_get(&ann, &app, "/ops/v1/users").await.0, 200);
        let changed = app
            .sql_strings(
                "SELECT after_state FROM audit_log WHERE action = 'user_roles_changed' AND target = 'user:ann'",
                &[],
            )
            .await;
        assert_eq!(changed.len(), 1, "{changed:?}");
        // An admin cannot take away their own admin role (nobody might be left to give it back).
        let (s, v) = ops_post(
            &admin,
            &app,
            "/ops/v1/users/adm/roles",
            &json!({"roles": "viewer"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (400, Some("invalid_user")),
            "{v}"
        );
        let (_, users) = ops_get(&admin, &app, "/ops/v1/users").await;
        assert!(last(&users, "ann").as_i64().is_some(), "{users}");
    }
);

on_both_backends!(
    an_admin_cannot_disable_themselves_over_http_or_through_the_service,
    |app| {
        user(&app, "adm", "admin").await;
        let (admin, s, _) = login(&app, "adm", PASSWORD).await;
        assert_eq!(s, 200);
        let (s, v) = ops_post(&admin, &app, "/ops/v1/users/adm/disable", &json!({})).await;
        assert_eq!(
            (
                s,
                v["error"]["code"].as_str(),
                v["error"]["message"].as_str()
            ),
            (
                400,
                Some("invalid_user"),
                Some("you cannot disable yourself")
            ),
            "{v}"
        );
        // The rule is the use case's, not the adapter's: a direct call is refused the same.
        let me = converge_server::service::actor::Actor {
            username: "adm".into(),
            roles: "admin".into(),
            meta: "{}".into(),
        };
        let direct = app.core().set_user_disabled("adm", true, 1, &me).await;
        assert!(
            matches!(
                direct,
                Err(converge_server::service::users::UserError::DisableSelf)
            ),
            "{direct:?}"
        );
        // Nothing was written: the session still works and no user_disabled record exists.
        assert_eq!(ops_get(&admin, &app, "/ops/v1/users").await.0, 200);
        let disabled = app
            .sql_strings(
                "SELECT target FROM audit_log WHERE action = 'user_disabled'",
                &[],
            )
            .await;
        assert!(disabled.is_empty(), "{disabled:?}");
        // Enabling yourself is no risk and stays allowed.
        let (s, v) = ops_post(&admin, &app, "/ops/v1/users/adm/enable", &json!({})).await;
        assert_eq!(s, 204, "{v}");
    }
);

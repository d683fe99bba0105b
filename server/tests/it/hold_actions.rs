//! Capture and void of a manual-capture payment's hold as ops actions under maker-checker
//! (issue 34, "Console"), over the ops HTTP API on both backends: an operator requests with a
//! reason (and an amount), a different approver approves with their password, the execution
//! captures or voids at the sandbox channel once, a request whose payment moved is stale, and
//! the actions are offered only where the hold's state allows them.

use serde_json::{Value, json};

use crate::support::{OPS_PASSWORD, TestApp, add_ops_user, ops_get, ops_post, ops_session};

async fn users(app: &TestApp) -> (reqwest::Client, reqwest::Client) {
    add_ops_user(app, "op", "operator").await;
    add_ops_user(app, "ap", "approver").await;
    (ops_session(app, "op").await, ops_session(app, "ap").await)
}

/// A manual-capture payment of `amount` CNY, AUTHORIZED at the sandbox.
async fn held(app: &TestApp, order: &str, amount: i64) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order, "capture": "manual"}),
        )
        .await;
    assert_eq!(a.json()["status"], "AUTHORIZED", "{}", a.json());
    a.json()["id"].as_str().unwrap().to_string()
}

/// The sandbox's hold of payment `id`.
async fn channel_hold(app: &TestApp, id: &str) -> Value {
    let key = app.store.payment(id).await.unwrap().unwrap().channel_key;
    app.sandbox_get(&format!("/authorizations/{key}"))
        .await
        .json()
}

/// Requests `body`'s action on `payment` as `c`: the answer's status and JSON.
async fn request(c: &reqwest::Client, app: &TestApp, body: Value) -> (u16, Value) {
    ops_post(c, app, "/ops/v1/actions", body).await
}

/// Requests a capture of `amount` (final or not) and returns the pending request's id.
async fn request_capture(
    c: &reqwest::Client,
    app: &TestApp,
    payment: &str,
    amount: i64,
    last: bool,
) -> String {
    let (s, v) = request(
        c,
        app,
        json!({"kind": "capture", "payment_id": payment, "reason": "goods shipped", "capture_amount": amount, "capture_final": last}),
    )
    .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["action"]["status"], "pending");
    assert_eq!(v["action"]["capture_amount"], amount);
    v["action"]["id"].as_str().unwrap().to_string()
}

async fn approve(ap: &reqwest::Client, app: &TestApp, id: &str) -> (u16, Value) {
    ops_post(
        ap,
        app,
        &format!("/ops/v1/actions/{id}/approve"),
        json!({"password": OPS_PASSWORD, "reason": "checked the shipment"}),
    )
    .await
}

async fn story(c: &reqwest::Client, app: &TestApp, payment: &str) -> Value {
    let (s, v) = ops_get(c, app, &format!("/ops/v1/payments/{payment}")).await;
    assert_eq!(s, 200, "{v}");
    v
}

/// The kinds the story offers now.
fn offered(story: &Value) -> Vec<String> {
    story["offers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|o| o["available"] == true)
        .map(|o| o["kind"].as_str().unwrap().to_string())
        .collect()
}

on_both_backends!(
    an_approved_partial_then_final_capture_captures_at_the_channel_once_each,
    |app| {
        let (op, ap) = users(&app).await;
        let payment = held(&app, "o-cap", 10_000).await;
        let before = story(&op, &app, &payment).await;
        let kinds = offered(&before);
        assert!(kinds.contains(&"capture".to_string()), "{kinds:?}");
        assert!(kinds.contains(&"void".to_string()), "{kinds:?}");
        assert_eq!(before["captures"], json!([]));

        let first = request_capture(&op, &app, &payment, 4_000, false).await;
        let (s, v) = approve(&ap, &app, &first).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed", "{v}");
        let p = app.store.payment(&payment).await.unwrap().unwrap();
        assert_eq!(p.status.as_str(), "AUTHORIZED");
        assert_eq!(p.held_amount(), 6_000);
        assert_eq!(channel_hold(&app, &payment).await["captured"], 4_000);

        // The story carries the capture, named by the action, with its source.
        let after = story(&op, &app, &payment).await;
        let captures = after["captures"].as_array().unwrap();
        assert_eq!(captures.len(), 1, "{after}");
        let cap_id = format!("cap_{}", first.strip_prefix("act_").unwrap());
        assert_eq!(captures[0]["id"], cap_id);
        assert_eq!(captures[0]["amount"], 4_000);
        assert_eq!(captures[0]["last"], false);
        assert_eq!(captures[0]["status"], "captured");
        assert_eq!(captures[0]["source"], format!("action:{first}"));
        assert_eq!(after["payment"]["hold"]["captured"], 4_000);
        // Captured in part: a void is no longer offered, a further capture is.
        let kinds = offered(&after);
        assert!(kinds.contains(&"capture".to_string()), "{kinds:?}");
        assert!(!kinds.contains(&"void".to_string()), "{kinds:?}");

        // Executing the request again captures nothing more.
        let (s, v) = ops_post(
            &ap,
            &app,
            &format!("/ops/v1/actions/{first}/execute"),
            json!({}),
        )
        .await;
        assert_eq!(s, 409, "{v}");
        assert_eq!(channel_hold(&app, &payment).await["captured"], 4_000);

        // The final capture releases the rest.
        let last = request_capture(&op, &app, &payment, 2_500, true).await;
        let (s, v) = approve(&ap, &app, &last).await;
        assert_eq!(
            (s, &v["action"]["status"]),
            (200, &json!("executed")),
            "{v}"
        );
        let p = app.store.payment(&payment).await.unwrap().unwrap();
        assert_eq!(p.status.as_str(), "SUCCESS");
        let hold = p.hold.clone().unwrap();
        assert_eq!((hold.captured, hold.released), (6_500, 3_500));
        let channel = channel_hold(&app, &payment).await;
        assert_eq!(channel["captured"], 6_500, "{channel}");
        let result: Value = serde_json::from_str(v["action"]["result"].as_str().unwrap()).unwrap();
        assert_eq!(result["captured_amount"], 6_500);
        assert_eq!(result["released_amount"], 3_500);
        assert_eq!(result["currency"], "CNY");
        let done = story(&op, &app, &payment).await;
        assert_eq!(done["captures"].as_array().unwrap().len(), 2);
        let kinds = offered(&done);
        assert!(!kinds.contains(&"capture".to_string()), "{kinds:?}");
        assert!(!kinds.contains(&"void".to_string()), "{kinds:?}");
        // Each step is audited: requested, approved, executed, for both requests.
        for id in [&first, &last] {
            let actions: Vec<String> = app
                .store
                .audit_for_target(&format!("action:{id}"))
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.action)
                .collect();
            assert!(
                actions.contains(&"action_approved".to_string()),
                "{actions:?}"
            );
        }
        let executed = app
            .sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'action_executed' AND target = $1",
                &[&format!("payment:{payment}")],
            )
            .await;
        assert_eq!(executed, 2);
    }
);

on_both_backends!(an_approved_void_releases_the_whole_hold, |app| {
    let (op, ap) = users(&app).await;
    let payment = held(&app, "o-void", 3_000).await;
    let (s, v) = request(
        &op,
        &app,
        json!({"kind": "void", "payment_id": payment, "reason": "order cancelled"}),
    )
    .await;
    assert_eq!((s, &v["action"]["status"]), (201, &json!("pending")), "{v}");
    let id = v["action"]["id"].as_str().unwrap().to_string();
    let (s, v) = approve(&ap, &app, &id).await;
    assert_eq!(
        (s, &v["action"]["status"]),
        (200, &json!("executed")),
        "{v}"
    );
    let p = app.store.payment(&payment).await.unwrap().unwrap();
    assert_eq!(p.status.as_str(), "VOIDED");
    assert_eq!(p.hold.clone().unwrap().released, 3_000);
    assert_eq!(channel_hold(&app, &payment).await["status"], "voided");
    let after = story(&op, &app, &payment).await;
    assert_eq!(offered(&after), ["query"]);
});

on_both_backends!(a_capture_request_whose_hold_moved_is_stale, |app| {
    let (op, ap) = users(&app).await;
    let payment = held(&app, "o-stale", 5_000).await;
    let id = request_capture(&op, &app, &payment, 5_000, true).await;
    // The merchant captures a part meanwhile: the request pinned the hold before it.
    let a = app
        .post(
            &format!("/v1/payments/{payment}/captures"),
            Some("k-merchant-capture"),
            &json!({"amount": 1_000}),
        )
        .await;
    assert_eq!(a.status, 200, "{}", a.json());
    // Refused as a wrong password would be (a session cannot tell them apart), and closed
    // as stale on the way.
    let (s, v) = approve(&ap, &app, &id).await;
    assert_eq!(
        (s, v["error"]["code"].as_str()),
        (403, Some("approval_refused")),
        "{v}"
    );
    assert_eq!(
        app.store
            .action(&id)
            .await
            .unwrap()
            .unwrap()
            .status
            .as_str(),
        "stale"
    );
    // The channel saw only the merchant's capture.
    assert_eq!(channel_hold(&app, &payment).await["captured"], 1_000);
});

on_both_backends!(
    hold_requests_are_refused_where_the_state_does_not_allow_them,
    |app| {
        let (op, _ap) = users(&app).await;
        let payment = held(&app, "o-bad", 2_000).await;
        let cases = [
            (
                json!({"kind": "capture", "payment_id": payment, "reason": "r"}),
                400,
                "invalid_amount",
            ),
            (
                json!({"kind": "capture", "payment_id": payment, "reason": "r", "capture_amount": 0}),
                400,
                "invalid_amount",
            ),
            (
                json!({"kind": "capture", "payment_id": payment, "reason": "r", "capture_amount": 2_001}),
                409,
                "capture_exceeds_hold",
            ),
        ];
        for (body, status, code) in cases {
            let (s, v) = request(&op, &app, body.clone()).await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (status, Some(code)),
                "{body}: {v}"
            );
        }
        // An automatic payment has no hold: neither is offered, and a request is refused.
        let auto = app
            .post(
                "/v1/payments",
                Some("k-auto"),
                &json!({"amount": 2_000, "currency": "CNY", "merchant_order_id": "o-auto"}),
            )
            .await
            .json()["id"]
            .as_str()
            .unwrap()
            .to_string();
        let kinds = offered(&story(&op, &app, &auto).await);
        assert!(
            !kinds.contains(&"capture".to_string()) && !kinds.contains(&"void".to_string()),
            "{kinds:?}"
        );
        let (s, v) = request(
            &op,
            &app,
            json!({"kind": "capture", "payment_id": auto, "reason": "r", "capture_amount": 100}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (409, Some("not_capturable")),
            "{v}"
        );
        let (s, v) = request(
            &op,
            &app,
            json!({"kind": "void", "payment_id": auto, "reason": "r"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (409, Some("not_voidable")),
            "{v}"
        );
        // Captured in part by the merchant: no void, and nothing was recorded by the refusals.
        let a = app
            .post(
                &format!("/v1/payments/{payment}/captures"),
                Some("k-part"),
                &json!({"amount": 500}),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.json());
        let (s, v) = request(
            &op,
            &app,
            json!({"kind": "void", "payment_id": payment, "reason": "r"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (409, Some("not_voidable")),
            "{v}"
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM actions", &[]).await,
            0,
            "no refused request was recorded"
        );
    }
);

on_both_backends!(
    the_dashboard_counts_the_holds_expiring_within_a_day,
    |s| { s.jobs.authorization_ttl_secs = 3_600 },
    |app| {
        let (op, _ap) = users(&app).await;
        let first = held(&app, "o-exp-1", 3_000).await;
        held(&app, "o-exp-2", 1_250).await;
        // A hold captured in part counts with what it still holds.
        let a = app
            .post(
                &format!("/v1/payments/{first}/captures"),
                Some("k-exp-part"),
                &json!({"amount": 1_000}),
            )
            .await;
        assert_eq!(a.status, 200, "{}", a.json());
        let (s, d) = ops_get(&op, &app, "/ops/v1/dashboard").await;
        assert_eq!(s, 200, "{d}");
        let holds = &d["holds"];
        assert_eq!(holds["count"], 2, "{holds}");
        assert_eq!(holds["held"], json!([["CNY", 3_250]]), "{holds}");
        let soonest = app
            .store
            .payment(&first)
            .await
            .unwrap()
            .unwrap()
            .hold
            .unwrap()
            .expires_at
            .unwrap();
        assert_eq!(holds["oldest_expiry"], soonest);
        let generated = d["generated_at"].as_i64().unwrap();
        assert_eq!(holds["before"], generated + 86_400_000);
        assert!(soonest <= generated + 3_600_000, "{soonest} {generated}");
        // The panel's link: the AUTHORIZED payments whose hold expires before its cut-off.
        let cut_off =
            converge_server::domain::clock::rfc3339(generated + 86_400_000).replace('+', "%2B");
        let (s, page) = ops_get(
            &op,
            &app,
            &format!("/ops/v1/payments?status=AUTHORIZED&expires_before={cut_off}"),
        )
        .await;
        assert_eq!(s, 200, "{page}");
        assert_eq!(page["items"].as_array().unwrap().len(), 2, "{page}");
        let (_, none) = ops_get(
            &op,
            &app,
            "/ops/v1/payments?status=AUTHORIZED&expires_before=2000-01-01",
        )
        .await;
        assert_eq!(none["items"], json!([]), "{none}");
        let (s, bad) = ops_get(&op, &app, "/ops/v1/payments?expires_before=soon").await;
        assert_eq!(
            (s, bad["error"]["code"].as_str()),
            (400, Some("invalid_time"))
        );
    }
);

on_both_backends!(
    an_execution_run_again_after_its_capture_finds_it_and_captures_nothing_more,
    |app| {
        use converge_server::service::executors::capture_id_of;
        use converge_server::service::holds::CaptureInput;
        let payment = held(&app, "o-again", 4_000).await;
        let p = app.store.payment(&payment).await.unwrap().unwrap();
        let actor = crate::support::setup_actor();
        let action = converge_server::store::NewAction {
            id: "act_0123456789abcdef01234567".into(),
            kind: "capture".into(),
            payment_id: payment.clone(),
            requested_by: "op".into(),
            reason: "goods shipped".into(),
            evidence: String::new(),
            target_status: None,
            capture_amount: Some(1_500),
            capture_final: Some(false),
            payment_version: p.version,
            status: "approved".into(),
            now: 0,
            expires_at: i64::MAX,
        };
        let audit = actor.entry(
            0,
            "action_requested",
            "t",
            "r",
            String::new(),
            String::new(),
        );
        app.store.create_action(&action, &audit).await.unwrap();
        // An earlier execution captured under the action's capture id, then died before it
        // recorded the action's outcome.
        let id = capture_id_of(&action.id);
        assert_eq!(id, "cap_0123456789abcdef01234567");
        app.core()
            .capture_hold(
                &p,
                CaptureInput {
                    amount: 1_500,
                    last: false,
                },
                Some(id.clone()),
                &format!("action:{}", action.id),
            )
            .await
            .unwrap();
        // Run again: the payment moved past the pinned version, yet the capture is found and
        // reported; the channel holds one capture.
        let out = app.core().execute_action(&actor, &action.id).await.unwrap();
        assert_eq!(out.status.as_str(), "executed", "{out:?}");
        let result: Value = serde_json::from_str(out.result.as_deref().unwrap()).unwrap();
        assert_eq!(result["capture_id"], id.as_str());
        assert_eq!(result["captured_amount"], 1_500);
        assert_eq!(channel_hold(&app, &payment).await["captured"], 1_500);
        assert_eq!(app.store.payment_captures(&payment).await.unwrap().len(), 1);
    }
);

on_both_backends!(
    the_query_action_asks_the_channel_for_the_hold_and_settles_an_unknown_one,
    |app| {
        let (op, _) = users(&app).await;
        let query = |payment: String| json!({"kind": "query", "payment_id": payment, "reason": "what does the channel hold"});
        let id = held(&app, "o-q", 5000).await;
        let (s, v) = request(&op, &app, query(id.clone())).await;
        assert_eq!(
            (s, v["action"]["status"].as_str()),
            (201, Some("executed")),
            "{v}"
        );
        let result: Value =
            serde_json::from_str(v["action"]["result"].as_str().expect("a result")).unwrap();
        assert_eq!(result["outcome"], "authorized", "{result}");
        assert_eq!(
            (result["amount"].as_i64(), result["captured"].as_i64()),
            (Some(5000), Some(0))
        );
        assert!(result["expires_at"].as_i64().is_some(), "{result}");
        assert_eq!(result["status"], "AUTHORIZED");
        // Digits 54: held at the channel, the answer lost: the query action settles it.
        let a = app
            .post(
                "/v1/payments",
                Some("k-o-q54"),
                &json!({"amount": 1054, "currency": "CNY", "merchant_order_id": "o-q54", "capture": "manual"}),
            )
            .await;
        assert_eq!(a.json()["status"], "UNKNOWN");
        let unknown = a.json()["id"].as_str().unwrap().to_string();
        let (_, v) = request(&op, &app, query(unknown)).await;
        let result: Value = serde_json::from_str(v["action"]["result"].as_str().unwrap()).unwrap();
        assert_eq!(
            (result["outcome"].as_str(), result["status"].as_str()),
            (Some("authorized"), Some("AUTHORIZED")),
            "{result}"
        );
    }
);

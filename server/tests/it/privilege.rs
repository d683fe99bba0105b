//! The two-person rule on privilege (issue 36, "No one moves money alone"), black-box over
//! HTTP on both backends: a lone admin's two ways around dual approval (grant themselves
//! power and approve from a second account; issue a merchant key and refund through /v1)
//! are requests another admin must approve with their password; an admin who gave a user
//! power may not approve that user's money actions within the conflict window; the last
//! admin survives two concurrent demotions.

use serde_json::{Value, json};

use crate::support::{OPS_PASSWORD, TestApp, add_ops_user, ops_post, ops_session};

async fn roles_of(app: &TestApp, name: &str) -> String {
    app.store
        .user_by_name(name)
        .await
        .unwrap()
        .expect("user")
        .roles
}

/// Approves privilege request `id` as the signed-in `c` with `password`.
async fn approve(c: &reqwest::Client, app: &TestApp, id: &str, password: &str) -> (u16, Value) {
    ops_post(
        c,
        app,
        &format!("/ops/v1/privilege-requests/{id}/approve"),
        json!({"password": password, "reason": "checked with the security lead"}),
    )
    .await
}

/// The request id of a 202 answer.
fn requested(s: u16, v: &Value) -> String {
    assert_eq!(s, 202, "{v}");
    assert_eq!(v["request"]["status"], "pending", "{v}");
    v["request"]["id"].as_str().expect("request id").to_string()
}

async fn audit_actions(app: &TestApp, target: &str) -> Vec<String> {
    app.sql_strings(
        "SELECT action FROM audit_log WHERE target = $1 ORDER BY seq",
        &[target],
    )
    .await
}

on_both_backends!(
    a_lone_admin_granting_themselves_operator_gets_a_request_that_only_another_admin_can_approve,
    |app| {
        add_ops_user(&app, "ann", "admin").await;
        add_ops_user(&app, "bob", "admin").await;
        let ann = ops_session(&app, "ann").await;
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users/ann/roles",
            json!({"roles": "admin,operator"}),
        )
        .await;
        let id = requested(s, &v);
        assert_eq!(roles_of(&app, "ann").await, "admin", "nothing granted yet");
        // Her own request, with her right password: refused like any other refusal.
        let (s, v) = approve(&ann, &app, &id, OPS_PASSWORD).await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("approval_refused")),
            "{v}"
        );
        let (s, v) = ops_post(
            &ann,
            &app,
            &format!("/ops/v1/privilege-requests/{id}/reject"),
            json!({"reason": "never mind"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("self_approval")),
            "{v}"
        );
        assert_eq!(roles_of(&app, "ann").await, "admin");
        // Another admin, with a wrong password, then with theirs.
        let bob = ops_session(&app, "bob").await;
        let (s, v) = approve(&bob, &app, &id, "not-bobs-password").await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("approval_refused")),
            "{v}"
        );
        let (s, v) = approve(&bob, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["request"]["status"], "executed", "{v}");
        assert_eq!(v["request"]["decided_by"], "bob", "{v}");
        assert_eq!(roles_of(&app, "ann").await, "operator,admin");
        // Executed once: a second approval finds nothing pending.
        let (s, _) = approve(&bob, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 403);
        assert_eq!(
            audit_actions(&app, &format!("privilege:{id}")).await,
            [
                "privilege_requested",
                "approval_refused",
                "approval_refused",
                "privilege_approved",
                "privilege_executed",
                "approval_refused"
            ]
        );
        let changed = audit_actions(&app, "user:ann").await;
        assert_eq!(
            changed,
            ["user_added", "login", "user_roles_changed"],
            "{changed:?}"
        );
        // Taking over another admin's account by resetting their password is a request too.
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users/bob/password",
            json!({"password": "ann-knows-this-one"}),
        )
        .await;
        requested(s, &v);
        let bob_again = ops_session(&app, "bob").await;
        assert_eq!(
            bob_again
                .get(format!("{}/ops/v1/me", app.base))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16(),
            200,
            "bob's password is unchanged"
        );
        // One's own password stays one step.
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users/ann/password",
            json!({"password": "a-new-password-for-ann"}),
        )
        .await;
        assert_eq!(s, 204, "{v}");
    }
);

on_both_backends!(
    a_console_user_with_approver_waits_for_a_second_admin_and_a_viewer_does_not,
    |app| {
        add_ops_user(&app, "ann", "admin").await;
        add_ops_user(&app, "bob", "admin").await;
        let ann = ops_session(&app, "ann").await;
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users",
            json!({"username": "sock", "roles": "approver", "password": "sock-puppet-password"}),
        )
        .await;
        let id = requested(s, &v);
        assert!(v.to_string().find("sock-puppet").is_none(), "{v}");
        assert!(app.store.user_by_name("sock").await.unwrap().is_none());
        let login = |password: &'static str| {
            let base = app.base.clone();
            async move {
                reqwest::Client::new()
                    .post(format!("{base}/ops/v1/login"))
                    .json(&json!({"username": "sock", "password": password}))
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            }
        };
        assert_eq!(login("sock-puppet-password").await, 401);
        let bob = ops_session(&app, "bob").await;
        let (s, v) = approve(&bob, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(login("sock-puppet-password").await, 200);
        assert_eq!(roles_of(&app, "sock").await, "approver");
        // A viewer gives no power: one step.
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users",
            json!({"username": "eve", "roles": "viewer,auditor", "password": "a-viewer-password"}),
        )
        .await;
        assert_eq!(
            (s, v["user"]["username"].as_str()),
            (201, Some("eve")),
            "{v}"
        );
        // Re-enabling a disabled user is a request too; disabling stays one step.
        let (s, _) = ops_post(&ann, &app, "/ops/v1/users/eve/disable", json!({})).await;
        assert_eq!(s, 204);
        let (s, v) = ops_post(&ann, &app, "/ops/v1/users/eve/enable", json!({})).await;
        let id = requested(s, &v);
        assert!(
            app.store
                .user_by_name("eve")
                .await
                .unwrap()
                .unwrap()
                .disabled
        );
        let (s, v) = approve(&bob, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        assert!(
            !app.store
                .user_by_name("eve")
                .await
                .unwrap()
                .unwrap()
                .disabled
        );
        // The request never shows the password's hash, pending or decided.
        let (s, v) = ops_post(
            &bob,
            &app,
            "/ops/v1/privilege-requests/nope/reject",
            json!({"reason": "x"}),
        )
        .await;
        assert_eq!(s, 404, "{v}");
        let r = bob
            .get(format!("{}/ops/v1/privilege-requests", app.base))
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert!(!text.contains("argon2"), "{text}");
    }
);

on_both_backends!(
    a_key_issued_through_the_console_needs_a_second_admin_before_it_exists,
    |app| {
        add_ops_user(&app, "ann", "admin").await;
        add_ops_user(&app, "bob", "admin").await;
        let keys_before = app.sql_i64("SELECT COUNT(*) FROM merchant_keys", &[]).await;
        let ann = ops_session(&app, "ann").await;
        let (s, v) = ops_post(&ann, &app, "/ops/v1/merchants/acme/keys", json!({})).await;
        let id = requested(s, &v);
        assert!(v.get("api_key").is_none(), "{v}");
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM merchant_keys", &[]).await,
            keys_before,
            "no key exists before a second admin approves"
        );
        let (s, _) = approve(&ann, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 403);
        let bob = ops_session(&app, "bob").await;
        let (s, v) = approve(&bob, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        let key = v["api_key"]
            .as_str()
            .expect("the key, shown once")
            .to_string();
        assert!(key.starts_with("ck_live_"), "{v}");
        assert!(
            !v["request"].to_string().contains(&key),
            "the key is not recorded"
        );
        // The key works on the merchant API (404: authenticated, no such payment).
        assert_eq!(app.get_as(&key, "/v1/payments/pay_none").await.status, 404);
        // Freezing is one step; unfreezing (through the console's use case) is a request.
        let core = &app.running.state.core;
        let ann_actor =
            converge_server::service::actor::Actor::console("ann", "admin", "127.0.0.1");
        // Freezing says why (issue 41): refused without a reason, and nothing changes.
        let refused = core
            .console_set_frozen(&ann_actor, "acme", true, "  ")
            .await;
        assert!(
            matches!(
                refused,
                Err(
                    converge_server::service::privilege::PrivilegeError::Request(
                        converge_server::service::actions::ActionError::Invalid(
                            converge_wire::ErrorCode::InvalidReason,
                            _
                        )
                    )
                )
            ),
            "{refused:?}"
        );
        let frozen = core
            .console_set_frozen(&ann_actor, "acme", true, "chargebacks under review")
            .await
            .unwrap();
        assert!(matches!(
            frozen,
            converge_server::service::privilege::Change::Done(())
        ));
        assert_eq!(
            app.sql_strings(
                "SELECT reason FROM audit_log WHERE action = 'merchant_frozen'",
                &[]
            )
            .await,
            ["chargebacks under review"]
        );
        let asked = core
            .console_set_frozen(&ann_actor, "acme", false, "")
            .await
            .unwrap();
        let converge_server::service::privilege::Change::Requested(r) = asked else {
            panic!("unfreezing is a request: {asked:?}");
        };
        let is_frozen = |app: &TestApp| {
            let store = app.store.clone();
            async move {
                store
                    .merchants()
                    .await
                    .unwrap()
                    .into_iter()
                    .find(|m| m.name == "acme")
                    .unwrap()
                    .frozen
            }
        };
        assert!(is_frozen(&app).await);
        let (s, v) = approve(&bob, &app, &r.id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        assert!(!is_frozen(&app).await);
    }
);

on_both_backends!(
    a_merchant_added_in_the_console_has_no_key_until_a_second_admin_approves_its_first,
    |app| {
        add_ops_user(&app, "ann", "admin").await;
        add_ops_user(&app, "bob", "admin").await;
        let core = &app.running.state.core;
        let ann_actor =
            converge_server::service::actor::Actor::console("ann", "admin", "127.0.0.1");
        let (m, r) = core
            .console_add_merchant(&ann_actor, "globex")
            .await
            .unwrap();
        assert_eq!((m.name.as_str(), m.frozen), ("globex", false));
        assert_eq!(
            (r.kind.as_str(), r.target.as_str()),
            ("issue_key", "globex")
        );
        let keys = || {
            app.sql_i64(
                "SELECT COUNT(*) FROM merchant_keys k JOIN merchants m ON m.id = k.merchant_id \
                 WHERE m.name = 'globex'",
                &[],
            )
        };
        assert_eq!(
            keys().await,
            0,
            "no key exists before a second admin approves"
        );
        assert_eq!(
            app.sql_strings(
                "SELECT after_state FROM audit_log WHERE action = 'merchant_added' AND target = 'merchant:globex'",
                &[]
            )
            .await,
            [r#"{"first_key":"requested"}"#]
        );
        // Adding it again is refused, and files no second request.
        let again = core.console_add_merchant(&ann_actor, "globex").await;
        assert!(
            matches!(
                again,
                Err(
                    converge_server::service::privilege::PrivilegeError::Merchant(
                        converge_server::service::merchants::MerchantError::Exists(_)
                    )
                )
            ),
            "{again:?}"
        );
        let ann = ops_session(&app, "ann").await;
        let (s, _) = approve(&ann, &app, &r.id, OPS_PASSWORD).await;
        assert_eq!(s, 403, "the admin who added it cannot approve its key");
        assert_eq!(keys().await, 0);
        let bob = ops_session(&app, "bob").await;
        let (s, v) = approve(&bob, &app, &r.id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        let key = v["api_key"].as_str().expect("the key, shown once to bob");
        assert_eq!(keys().await, 1);
        assert_eq!(app.get_as(key, "/v1/payments/pay_none").await.status, 404);
    }
);

on_both_backends!(
    an_admin_who_gave_a_user_power_cannot_approve_that_users_reversal,
    |app| {
        add_ops_user(&app, "ann", "admin,approver").await;
        add_ops_user(&app, "bob", "admin,approver").await;
        add_ops_user(&app, "cat", "approver").await;
        let ann = ops_session(&app, "ann").await;
        let bob = ops_session(&app, "bob").await;
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users",
            json!({"username": "mal", "roles": "operator", "password": "mallory-password"}),
        )
        .await;
        let id = requested(s, &v);
        let (s, v) = approve(&bob, &app, &id, OPS_PASSWORD).await;
        assert_eq!(s, 200, "{v}");
        // mal asks to reverse a payment.
        let paid = app
            .post(
                "/v1/payments",
                Some("k-o-1"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}),
            )
            .await;
        assert_eq!(paid.json()["status"], "SUCCESS");
        let payment = paid.json()["id"].as_str().unwrap().to_string();
        let mal = reqwest::Client::builder()
            .cookie_store(true)
            .build()
            .unwrap();
        let (s, _) = ops_post(
            &mal,
            &app,
            "/ops/v1/login",
            json!({"username": "mal", "password": "mallory-password"}),
        )
        .await;
        assert_eq!(s, 200);
        let (s, v) = ops_post(
            &mal,
            &app,
            "/ops/v1/actions",
            json!({"kind": "reverse", "payment_id": payment, "reason": "customer disputed"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        let action = v["action"]["id"].as_str().unwrap().to_string();
        // The admin who asked for mal's account, and the one who approved it, are refused.
        for c in [&ann, &bob] {
            let (s, v) = ops_post(
                c,
                &app,
                &format!("/ops/v1/actions/{action}/approve"),
                json!({"password": OPS_PASSWORD, "reason": "looks fine"}),
            )
            .await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (403, Some("approval_conflict")),
                "{v}"
            );
        }
        assert_eq!(
            app.store
                .action(&action)
                .await
                .unwrap()
                .unwrap()
                .status
                .as_str(),
            "pending"
        );
        // Each conflict leaves the trace of any refused approval (issue 36).
        assert_eq!(
            app.sql_strings(
                "SELECT actor FROM audit_log WHERE action = 'approval_refused' AND target = $1 ORDER BY seq",
                &[format!("action:{action}").as_str()],
            )
            .await,
            ["ann", "bob"]
        );
        // The window covers pauses too: mal's pause waits for someone with no hand in it.
        let (s, v) = ops_post(
            &mal,
            &app,
            "/ops/v1/pauses",
            json!({"target": "submissions", "reason": "channel incident"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        let pause = v["pause"]["id"].as_str().unwrap().to_string();
        let (s, v) = ops_post(
            &bob,
            &app,
            &format!("/ops/v1/pauses/{pause}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "looks fine"}),
        )
        .await;
        assert_eq!(
            (s, v["error"]["code"].as_str()),
            (403, Some("approval_conflict")),
            "{v}"
        );
        assert_eq!(
            audit_actions(&app, &format!("pause:{pause}")).await,
            ["pause_requested", "approval_refused"]
        );
        // An approver with no hand in mal's power may.
        let cat = ops_session(&app, "cat").await;
        let (s, v) = ops_post(
            &cat,
            &app,
            &format!("/ops/v1/pauses/{pause}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "storm confirmed"}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        let (s, v) = ops_post(
            &cat,
            &app,
            &format!("/ops/v1/actions/{action}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "customer called twice"}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
        assert_eq!(v["action"]["status"], "executed", "{v}");
    }
);

on_both_backends!(
    a_conflict_window_of_zero_lets_the_admin_who_made_the_account_approve,
    |s| {
        // The window is the operator's choice: 0 turns the rule off.
        s.actions.approval_conflict_window_secs = 0;
    },
    |app| {
        add_ops_user(&app, "ann", "admin,approver").await;
        let ann = ops_session(&app, "ann").await;
        // A viewer account made in one step by ann, given operator at the command line.
        let (s, v) = ops_post(
            &ann,
            &app,
            "/ops/v1/users",
            json!({"username": "mal", "roles": "viewer", "password": "mallory-password"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        app.core()
            .set_roles("mal", "viewer,operator", 1, &crate::support::setup_actor())
            .await
            .unwrap();
        let paid = app
            .post(
                "/v1/payments",
                Some("k-o-1"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-1"}),
            )
            .await;
        let payment = paid.json()["id"].as_str().unwrap().to_string();
        let mal = reqwest::Client::builder()
            .cookie_store(true)
            .build()
            .unwrap();
        let (s, _) = ops_post(
            &mal,
            &app,
            "/ops/v1/login",
            json!({"username": "mal", "password": "mallory-password"}),
        )
        .await;
        assert_eq!(s, 200);
        let (s, v) = ops_post(
            &mal,
            &app,
            "/ops/v1/actions",
            json!({"kind": "reverse", "payment_id": payment, "reason": "customer disputed"}),
        )
        .await;
        assert_eq!(s, 201, "{v}");
        let action = v["action"]["id"].as_str().unwrap().to_string();
        let (s, v) = ops_post(
            &ann,
            &app,
            &format!("/ops/v1/actions/{action}/approve"),
            json!({"password": OPS_PASSWORD, "reason": "customer called twice"}),
        )
        .await;
        assert_eq!(s, 200, "{v}");
    }
);

/// Two admins, each signed in, demote the other at the same moment through `path` (`disable`
/// or `roles`): exactly one passes, the other is refused `last_admin`, and one enabled admin
/// is left, who cannot then be removed either.
async fn demote_each_other(app: &TestApp, path: &str, body: Value) {
    add_ops_user(app, "ann", "admin").await;
    add_ops_user(app, "bob", "admin").await;
    let ann = ops_session(app, "ann").await;
    let bob = ops_session(app, "bob").await;
    let (to_bob, to_ann) = (
        format!("/ops/v1/users/bob/{path}"),
        format!("/ops/v1/users/ann/{path}"),
    );
    let (ra, rb) = tokio::join!(
        ops_post(&ann, app, &to_bob, body.clone()),
        ops_post(&bob, app, &to_ann, body.clone()),
    );
    // One passes; the other is refused: by the store's guard (409 `last_admin`) when both
    // run at once, or, when the first committed before the second was authorised, because its
    // admin is no longer one (403) or no longer signed in (401).
    let passed = [&ra, &rb].into_iter().filter(|r| r.0 < 300).count();
    assert_eq!(passed, 1, "exactly one demotion passes: {ra:?} {rb:?}");
    let refused = if ra.0 < 300 { &rb } else { &ra };
    assert!(
        matches!(
            (refused.0, refused.1["error"]["code"].as_str()),
            (409, Some("last_admin")) | (403, Some("forbidden")) | (401, Some("not_authenticated"))
        ),
        "{refused:?}"
    );
    let admins = app
        .sql_strings(
            "SELECT username FROM users WHERE disabled = FALSE AND ',' || roles || ',' LIKE '%,admin,%'",
            &[],
        )
        .await;
    assert_eq!(admins.len(), 1, "{admins:?}");
    // The survivor is the last admin: the store refuses to disable or demote it, whoever asks.
    let last = &admins[0];
    let entry = crate::support::setup_actor().entry(
        1,
        "user_disabled",
        &format!("user:{last}"),
        "",
        String::new(),
        String::new(),
    );
    let disabled = app.store.set_user_disabled(last, true, 1, &entry).await;
    assert!(
        matches!(&disabled, Err(converge_server::store::StoreError::Conflict(m)) if m == "last_admin"),
        "{disabled:?}"
    );
    let demoted = app
        .core()
        .set_roles(last, "viewer", 1, &crate::support::setup_actor())
        .await;
    assert!(
        matches!(
            demoted,
            Err(converge_server::service::users::UserError::LastAdmin)
        ),
        "{demoted:?}"
    );
    // Demoting a non-admin, or an admin while another remains, still works.
    add_ops_user(app, "cat", "admin").await;
    let cat = ops_session(app, "cat").await;
    let (s, v) = ops_post(
        &cat,
        app,
        &format!("/ops/v1/users/{last}/disable"),
        json!({}),
    )
    .await;
    assert_eq!(s, 204, "{v}");
}

on_both_backends!(
    two_admins_disabling_each_other_at_once_leave_one_admin,
    |app| {
        demote_each_other(&app, "disable", json!({})).await;
    }
);

on_both_backends!(
    two_admins_revoking_each_others_admin_role_at_once_leave_one_admin,
    |app| {
        demote_each_other(&app, "roles", json!({"roles": "viewer"})).await;
    }
);

store_conformance!(
    privilege_requests_move_once_and_count_as_grants_when_executed,
    |store| {
        use converge_server::domain::actions::ActionMoveKind;
        use converge_server::store::{ActionMove, NewPrivilegeRequest};
        let actor = crate::support::setup_actor();
        let entry = |action: &str| {
            actor.entry(
                10,
                action,
                "privilege:prv_1",
                "",
                String::new(),
                String::new(),
            )
        };
        let new = NewPrivilegeRequest {
            id: "prv_1".into(),
            kind: "set_roles".into(),
            target: "mal".into(),
            roles: "operator".into(),
            password_hash: String::new(),
            requested_by: "ann".into(),
            reason: "set the roles of mal to operator".into(),
            now: 10,
            expires_at: 1_000,
        };
        let created = store
            .create_privilege_request(&new, &entry("privilege_requested"))
            .await
            .unwrap()
            .expect("created");
        assert_eq!(created.status.as_str(), "pending");
        // The same change for the same target cannot be asked twice while one is pending.
        let again = NewPrivilegeRequest {
            id: "prv_2".into(),
            ..new.clone()
        };
        assert!(
            store
                .create_privilege_request(&again, &entry("privilege_requested"))
                .await
                .unwrap()
                .is_none()
        );
        let approve = |by: &str, now: i64| ActionMove {
            decision: Some((by.to_string(), "ok".into())),
            not_by_requester: Some(by.to_string()),
            unexpired_at: Some(now),
            ..ActionMove::of(ActionMoveKind::Approve, "prv_1", now)
        };
        // Not by its requester, not once expired; then exactly one approval wins.
        assert!(
            !store
                .move_privilege_request(&approve("ann", 20), &entry("privilege_approved"))
                .await
                .unwrap()
        );
        assert!(
            !store
                .move_privilege_request(&approve("bob", 1_000), &entry("privilege_approved"))
                .await
                .unwrap()
        );
        assert!(
            store
                .grants_to("mal", &["set_roles"], 0)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .move_privilege_request(&approve("bob", 20), &entry("privilege_approved"))
                .await
                .unwrap()
        );
        assert!(
            !store
                .move_privilege_request(&approve("cat", 20), &entry("privilege_approved"))
                .await
                .unwrap()
        );
        let executed = ActionMove {
            result: Some("{}".into()),
            ..ActionMove::of(ActionMoveKind::Execute, "prv_1", 30)
        };
        assert!(
            store
                .move_privilege_request(&executed, &entry("privilege_executed"))
                .await
                .unwrap()
        );
        assert!(
            !store
                .move_privilege_request(&executed, &entry("privilege_executed"))
                .await
                .unwrap()
        );
        let grants = store.grants_to("mal", &["set_roles"], 0).await.unwrap();
        assert_eq!(grants.len(), 1, "{grants:?}");
        assert_eq!(
            (
                grants[0].requested_by.as_str(),
                grants[0].decided_by.as_deref(),
                grants[0].at
            ),
            ("ann", Some("bob"), 30)
        );
        assert!(
            store
                .grants_to("mal", &["set_roles"], 31)
                .await
                .unwrap()
                .is_empty()
        );
        assert!(
            store
                .grants_to("mal", &["issue_key"], 0)
                .await
                .unwrap()
                .is_empty()
        );
        let decided = store.privilege_requests(false, 10).await.unwrap();
        assert_eq!(decided.len(), 1);
        assert_eq!(decided[0].decided_by.as_deref(), Some("bob"));
    }
);

store_conformance!(
    the_store_never_demotes_the_last_two_admins_both_at_once,
    |store| {
        use std::sync::Arc;
        let actor = crate::support::setup_actor();
        let entry = |action: &str, name: &str| {
            actor.entry(
                1,
                action,
                &format!("user:{name}"),
                "",
                String::new(),
                String::new(),
            )
        };
        let add_admin = |name: String| {
            let (store, e) = (Arc::clone(&store), entry("user_added", &name));
            async move {
                store
                    .create_user(&name, "not-a-hash", "viewer,admin", 1, &e)
                    .await
                    .unwrap();
            }
        };
        add_admin("a0".into()).await;
        add_admin("b0".into()).await;
        for round in 0..6 {
            let (a, b) = (format!("a{round}"), format!("b{round}"));
            let (s1, s2) = (Arc::clone(&store), Arc::clone(&store));
            let (ea, eb) = (
                entry("user_roles_changed", &a),
                entry("user_roles_changed", &b),
            );
            let (a2, b2) = (a.clone(), b.clone());
            // Half the rounds demote, half disable: the same statement guards both.
            let (ra, rb) = if round % 2 == 0 {
                tokio::join!(
                    tokio::spawn(async move { s1.set_user_roles(&a2, "viewer", 2, &ea).await }),
                    tokio::spawn(async move { s2.set_user_roles(&b2, "viewer", 2, &eb).await }),
                )
            } else {
                tokio::join!(
                    tokio::spawn(async move { s1.set_user_disabled(&a2, true, 2, &ea).await }),
                    tokio::spawn(async move { s2.set_user_disabled(&b2, true, 2, &eb).await }),
                )
            };
            let (ra, rb) = (ra.unwrap(), rb.unwrap());
            let ok = [&ra, &rb]
                .into_iter()
                .filter(|r| matches!(r, Ok(true)))
                .count();
            let last = [&ra, &rb]
            .into_iter()
            .filter(|r| matches!(r, Err(converge_server::store::StoreError::Conflict(m)) if m == "last_admin"))
            .count();
            assert_eq!((ok, last), (1, 1), "round {round}: {ra:?} {rb:?}");
            let admins: Vec<String> = store
                .users()
                .await
                .unwrap()
                .into_iter()
                .filter(|u| !u.disabled && u.roles.split(',').any(|r| r == "admin"))
                .map(|u| u.username)
                .collect();
            assert_eq!(admins.len(), 1, "round {round}: {admins:?}");
            // The next pair first; then the survivor may step down, leaving the pair alone.
            add_admin(format!("a{}", round + 1)).await;
            add_admin(format!("b{}", round + 1)).await;
            let e = entry("user_roles_changed", &admins[0]);
            assert!(
                store
                    .set_user_roles(&admins[0], "viewer", 3, &e)
                    .await
                    .unwrap()
            );
        }
    }
);

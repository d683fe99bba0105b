//! Several API keys per merchant, revocable at once on every server (issue 13 "Merchant
//! keys"), on both backends.

use std::sync::Arc;

use converge_server::config::Settings;
use converge_server::service::actor::Actor;
use converge_server::service::merchants::{KEY_PREFIX, MerchantError};
use converge_server::store::Store;
use serde_json::{Value, json};

use crate::support::{TestApp, add_ops_user, core_of, ops_session};

const NOW: i64 = 1_800_000_000_000;

fn admin() -> Actor {
    Actor {
        username: "cli:tester".into(),
        roles: String::new(),
        meta: "{}".into(),
    }
}

store_conformance!(
    merchant_keys_are_listed_revoked_and_audited_with_the_change,
    |store| {
        let (m, first) = core_of(&store)
            .add_merchant(NOW, "shop", &admin())
            .await
            .unwrap();
        assert!(first.key.starts_with(KEY_PREFIX));
        assert_eq!(first.key.len(), KEY_PREFIX.len() + 64);
        assert!(first.key.starts_with(&first.prefix));
        let hash = |k: &str| converge_server::domain::fingerprint::sha256_hex(k.as_bytes());
        assert_eq!(
            store.merchant_by_key_hash(&hash(&first.key)).await.unwrap(),
            Some(m.clone())
        );
        let (_, second) = core_of(&store)
            .issue_merchant_key(NOW + 1, "shop", &admin())
            .await
            .unwrap();
        let keys = core_of(&store).list_merchant_keys("shop").await.unwrap();
        assert_eq!(
            keys.iter().map(|k| k.id.as_str()).collect::<Vec<_>>(),
            vec![first.id.as_str(), second.id.as_str()]
        );
        assert_eq!(keys[1].prefix, second.prefix);
        assert_eq!((keys[0].last_used_at, keys[0].revoked_at), (None, None));
        store
            .touch_merchant_key(&hash(&first.key), NOW + 5)
            .await
            .unwrap();
        assert_eq!(
            core_of(&store).list_merchant_keys("shop").await.unwrap()[0].last_used_at,
            Some(NOW + 5)
        );

        core_of(&store)
            .revoke_merchant_key(NOW + 10, "shop", &first.id, &admin())
            .await
            .unwrap();
        assert_eq!(
            store.merchant_by_key_hash(&hash(&first.key)).await.unwrap(),
            None,
            "revoked"
        );
        assert_eq!(
            store
                .merchant_by_key_hash(&hash(&second.key))
                .await
                .unwrap(),
            Some(m),
            "the other key keeps working"
        );
        assert!(matches!(
            core_of(&store)
                .revoke_merchant_key(NOW + 11, "shop", &first.id, &admin())
                .await,
            Err(MerchantError::NoKey(..))
        ));
        assert!(matches!(
            core_of(&store)
                .revoke_merchant_key(NOW + 11, "nobody", &first.id, &admin())
                .await,
            Err(MerchantError::NoMerchant(_))
        ));
        assert!(matches!(
            core_of(&store)
                .issue_merchant_key(NOW, "nobody", &admin())
                .await,
            Err(MerchantError::NoMerchant(_))
        ));
        assert!(matches!(
            core_of(&store).add_merchant(NOW, "shop", &admin()).await,
            Err(MerchantError::Exists(_))
        ));
        // Each change is in the audit log, by the CLI actor, and nothing for the refusals.
        let audit = store.audit_for_target("merchant:shop").await.unwrap();
        assert_eq!(
            audit
                .iter()
                .map(|r| (r.action.as_str(), r.actor.as_str()))
                .collect::<Vec<_>>(),
            vec![
                ("merchant_added", "cli:tester"),
                ("merchant_key_issued", "cli:tester"),
                ("merchant_key_revoked", "cli:tester"),
            ]
        );
        assert!(audit[2].after_state.contains(&first.id));
    }
);

async fn get_payments(base: &str, key: &str) -> u16 {
    reqwest::Client::new()
        .get(format!("{base}/v1/payments/pay_none"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

on_both_backends!(a_revoked_key_answers_401_at_once_on_every_server, |app| {
    // A second server on the same database.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let other = converge_server::startup::build(Settings::for_tests(&app.db_url), addr)
        .await
        .unwrap();
    let router = other.router.clone();
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
        .unwrap();
    });
    let other_base = format!("http://{addr}");

    add_ops_user(&app, "root", "admin").await;
    add_ops_user(&app, "root2", "admin").await;
    add_ops_user(&app, "viewer", "viewer").await;
    let admin = ops_session(&app, "root").await;
    let r = admin
        .post(format!("{}/ops/v1/merchants/acme/keys", app.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    // Issuing a key is a request a second admin approves, who gets the key (issue 36).
    assert_eq!(r.status().as_u16(), 202);
    let requested: Value = r.json().await.unwrap();
    let r = ops_session(&app, "root2")
        .await
        .post(format!(
            "{}/ops/v1/privilege-requests/{}/approve",
            app.base,
            requested["request"]["id"].as_str().unwrap()
        ))
        .json(&json!({"password": crate::support::OPS_PASSWORD, "reason": "rotation"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let approved: Value = r.json().await.unwrap();
    let result: Value =
        serde_json::from_str(approved["request"]["result"].as_str().unwrap()).unwrap();
    let issued = json!({"api_key": approved["api_key"], "key": {"id": result["key_id"]}});
    let new_key = issued["api_key"].as_str().unwrap().to_string();
    let new_id = issued["key"]["id"].as_str().unwrap().to_string();
    assert!(new_key.starts_with(KEY_PREFIX));
    // Rotation: old and new keys both work, on both servers (404: authenticated, no such
    // payment).
    for base in [&app.base, &other_base] {
        assert_eq!(get_payments(base, &app.api_key).await, 404);
        assert_eq!(get_payments(base, &new_key).await, 404);
    }
    let listed: Value = admin
        .get(format!("{}/ops/v1/merchants/acme/keys", app.base))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(ids.contains(&new_id.as_str()));
    let old_id = ids.iter().find(|i| **i != new_id).unwrap().to_string();

    // Only admins manage keys.
    let viewer = ops_session(&app, "viewer").await;
    let r = viewer
        .post(format!(
            "{}/ops/v1/merchants/acme/keys/{old_id}/revoke",
            app.base
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);

    // Revoked on the first server: the second refuses it on the very next request.
    let r = admin
        .post(format!(
            "{}/ops/v1/merchants/acme/keys/{old_id}/revoke",
            app.base
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);
    assert_eq!(get_payments(&other_base, &app.api_key).await, 401);
    assert_eq!(get_payments(&app.base, &app.api_key).await, 401);
    assert_eq!(get_payments(&other_base, &new_key).await, 404);
    let r = admin
        .post(format!(
            "{}/ops/v1/merchants/acme/keys/{old_id}/revoke",
            app.base
        ))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 404, "already revoked");
    let store: &Arc<dyn Store> = &app.store;
    let audit = store.audit_for_target("merchant:acme").await.unwrap();
    assert_eq!(
        audit
            .iter()
            .map(|r| (r.action.as_str(), r.actor.as_str()))
            .collect::<Vec<_>>(),
        // The key was made by the second admin's approval (issue 36).
        vec![
            ("merchant_key_issued", "root2"),
            ("merchant_key_revoked", "root")
        ]
    );
    other.shutdown().await;
});

store_conformance!(
    governance_changes_are_audited_with_the_change_and_refusals_write_nothing,
    |store| {
        use converge_server::ops::password::PasswordHasherPool;
        let h = PasswordHasherPool::new(1);
        let a = admin();
        core_of(&store)
            .add_user(&h, "bob", "viewer", "a-long-password-1", NOW, &a)
            .await
            .unwrap();
        core_of(&store)
            .set_roles("bob", "viewer,operator", NOW, &a)
            .await
            .unwrap();
        core_of(&store)
            .reset_password(&h, "bob", "another-password-2", NOW, &a)
            .await
            .unwrap();
        core_of(&store)
            .set_user_disabled("bob", true, NOW, &a)
            .await
            .unwrap();
        // Refused changes leave no record.
        assert!(
            core_of(&store)
                .set_user_disabled("nobody", true, NOW, &a)
                .await
                .is_err()
        );
        assert!(
            core_of(&store)
                .add_user(&h, "bob", "viewer", "a-long-password-1", NOW, &a)
                .await
                .is_err()
        );
        let audit = store.audit_for_target("user:bob").await.unwrap();
        assert_eq!(
            audit
                .iter()
                .map(|r| (r.action.as_str(), r.actor.as_str()))
                .collect::<Vec<_>>(),
            vec![
                ("user_added", "cli:tester"),
                ("user_roles_changed", "cli:tester"),
                ("user_password_reset", "cli:tester"),
                ("user_disabled", "cli:tester"),
            ]
        );
        assert!(
            store
                .audit_for_target("user:nobody")
                .await
                .unwrap()
                .is_empty()
        );

        core_of(&store).add_merchant(NOW, "shop", &a).await.unwrap();
        let e = a.entry(
            NOW,
            "merchant_frozen",
            "merchant:shop",
            "",
            String::new(),
            "{}".into(),
        );
        assert!(
            store
                .set_merchant_frozen_audited("shop", true, &e)
                .await
                .unwrap()
        );
        let e = a.entry(
            NOW,
            "merchant_frozen",
            "merchant:nope",
            "",
            String::new(),
            "{}".into(),
        );
        assert!(
            !store
                .set_merchant_frozen_audited("nope", true, &e)
                .await
                .unwrap()
        );
        assert!(
            store
                .audit_for_target("merchant:nope")
                .await
                .unwrap()
                .is_empty()
        );
        let shop = store.audit_for_target("merchant:shop").await.unwrap();
        assert_eq!(shop.last().unwrap().action, "merchant_frozen");
        let (_, _, broken) = core_of(&store).verify_audit_chain().await.unwrap();
        assert!(broken.is_none());
    }
);

on_both_backends!(
    a_frozen_merchant_reads_but_cannot_create_payments_or_refunds,
    |app| {
        let paid = app
            .post(
                "/v1/payments",
                Some("k-paid"),
                &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": "o-paid"}),
            )
            .await;
        assert_eq!(paid.json()["status"], "SUCCESS", "{}", paid.json());
        let paid = paid.json()["id"].as_str().unwrap().to_string();
        assert!(app.store.set_merchant_frozen("acme", true).await.unwrap());

        let body = json!({"amount": 500, "currency": "CNY", "merchant_order_id": "o-new"});
        app.post("/v1/payments", Some("k-new"), &body)
            .await
            .assert_error(403, "merchant_frozen");
        app.post(
            &format!("/v1/payments/{paid}/refunds"),
            Some("k-refund"),
            &json!({"amount": 100}),
        )
        .await
        .assert_error(403, "merchant_frozen");
        // Reads still work, and nothing was written: no payment, no refund.
        let read = app.get(&format!("/v1/payments/{paid}")).await;
        assert_eq!(read.status, 200);
        assert_eq!(read.json()["refunded_amount"], 0, "{}", read.json());
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM payments", &[]).await, 1);
        assert_eq!(app.sql_i64("SELECT COUNT(*) FROM refunds", &[]).await, 0);

        // The refusal left the key free: once unfrozen, the same key and body create.
        assert!(app.store.set_merchant_frozen("acme", false).await.unwrap());
        let created = app.post("/v1/payments", Some("k-new"), &body).await;
        assert_eq!(created.status, 201, "{}", created.json());
        assert_eq!(created.json()["status"], "SUCCESS");
        let refund = app
            .post(
                &format!("/v1/payments/{paid}/refunds"),
                Some("k-refund"),
                &json!({"amount": 100}),
            )
            .await;
        assert_eq!(refund.status, 201, "{}", refund.json());
    }
);

on_both_backends!(
    a_merchants_page_holds_its_keys_and_history_only_for_the_roles_that_may_read_them,
    |app| {
        app.pay("k-page-1", "o-page-1", 1200).await;
        let core = &app.running.state.core;
        let page = core
            .merchant_overview("acme", false, false)
            .await
            .unwrap()
            .expect("acme exists");
        assert_eq!(page.merchant.name, "acme");
        assert_eq!(page.payments.len(), 1);
        assert_eq!(page.payments[0].merchant_order_id, "o-page-1");
        assert_eq!((page.keys, page.history), (None, None));
        let full = core
            .merchant_overview("acme", true, true)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(full.keys.map(|k| k.len()), Some(1));
        assert!(full.history.is_some());
        assert!(
            core.merchant_overview("nobody", true, true)
                .await
                .unwrap()
                .is_none()
        );
    }
);

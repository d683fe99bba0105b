//! No secret readable from the console or from a database dump (issue 36), on both backends:
//! a webhook endpoint's signing secret and the stored answers that carry it are sealed at rest
//! (`domain::secret_box`); the merchant's replay is still the same bytes; the Idempotency-Key
//! page shows every such answer redacted, to every role; secrets written before sealing are
//! sealed at start.

use converge_server::domain::secret_box::{Purpose, SecretBox, is_sealed_bytes, is_sealed_text};
use serde_json::{Value, json};

use crate::support::*;

/// Registers an endpoint with Idempotency-Key `key`; the 201 answer.
async fn register(app: &TestApp, key: &str) -> Answer {
    let a = app
        .post(
            "/v1/webhook_endpoints",
            Some(key),
            &json!({"url": "http://127.0.0.1:9/hook", "enabled_events": ["*"]}),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", String::from_utf8_lossy(&a.body));
    a
}

/// The key page of `key` as `client` sees it.
async fn key_page(app: &TestApp, client: &reqwest::Client, key: &str) -> Answer {
    let path = format!(
        "/ops/v1/idempotency-keys/{}/{}",
        app.merchant_id,
        converge_server::service::lookup::path_segment(key)
    );
    app.send(client.get(format!("{}{path}", app.base))).await
}

on_both_backends!(
    no_console_role_sees_a_webhook_secret_on_the_key_page_and_the_replay_keeps_it,
    |app| {
        let created = register(&app, "hook-key-1").await;
        let secret = created.json()["secret"].as_str().unwrap().to_string();
        assert!(secret.starts_with("whsec_"));
        let id = created.json()["id"].as_str().unwrap().to_string();
        let rotated = app
            .post(
                &format!("/v1/webhook_endpoints/{id}/rotate_secret"),
                Some("rotate-key-1"),
                &json!({}),
            )
            .await;
        assert_eq!(rotated.status, 200, "{:?}", rotated.json());
        let new_secret = rotated.json()["secret"].as_str().unwrap().to_string();

        for (name, roles) in [
            ("vic", "viewer"),
            ("ada", "viewer,operator,approver,auditor,admin"),
        ] {
            add_ops_user(&app, name, roles).await;
            let c = ops_session(&app, name).await;
            for (key, secret) in [("hook-key-1", &secret), ("rotate-key-1", &new_secret)] {
                let page = key_page(&app, &c, key).await;
                assert_eq!(
                    page.status,
                    200,
                    "{:?}",
                    String::from_utf8_lossy(&page.body)
                );
                let text = String::from_utf8_lossy(&page.body);
                assert!(
                    !text.contains(secret.as_str()),
                    "{name} sees the secret: {text}"
                );
                assert!(!text.contains("whsec_"), "{name} sees a secret: {text}");
                let shown: Value =
                    serde_json::from_str(page.json()["response"]["body"].as_str().unwrap())
                        .unwrap();
                assert_eq!(shown["id"], id.as_str(), "the rest of the answer is shown");
                assert!(
                    shown["secret"].as_str().unwrap().starts_with("[redacted"),
                    "{shown}"
                );
            }
        }

        // The merchant's retry after a lost answer still gets the secret, byte for byte.
        let again = app
            .post(
                "/v1/webhook_endpoints",
                Some("hook-key-1"),
                &json!({"url": "http://127.0.0.1:9/hook", "enabled_events": ["*"]}),
            )
            .await;
        assert_eq!(again.status, 201);
        assert_eq!(again.header("idempotent-replayed"), "true");
        assert_eq!(again.body, created.body);
        let again = app
            .post(
                &format!("/v1/webhook_endpoints/{id}/rotate_secret"),
                Some("rotate-key-1"),
                &json!({}),
            )
            .await;
        assert_eq!(again.body, rotated.body);
    }
);

on_both_backends!(a_database_dump_holds_no_webhook_secret, |app| {
    let created = register(&app, "dump-key-1").await;
    let secret = created.json()["secret"].as_str().unwrap().to_string();
    let id = created.json()["id"].as_str().unwrap().to_string();
    let rotated = app
        .post(
            &format!("/v1/webhook_endpoints/{id}/rotate_secret"),
            Some("dump-key-2"),
            &json!({}),
        )
        .await;
    let new_secret = rotated.json()["secret"].as_str().unwrap().to_string();

    let stored = app
        .sql_strings(
            "SELECT secret FROM webhook_endpoints UNION ALL \
             SELECT previous_secret FROM webhook_endpoints WHERE previous_secret IS NOT NULL",
            &[],
        )
        .await;
    assert_eq!(stored.len(), 2);
    for s in &stored {
        assert!(is_sealed_text(s), "{s}");
        assert!(!s.contains(&secret) && !s.contains(&new_secret) && !s.contains("whsec_"));
    }
    let plain_answers = app
        .sql_i64(
            "SELECT COUNT(*) FROM idempotency_keys WHERE route LIKE 'POST /v1/webhook_endpoints%'",
            &[],
        )
        .await;
    assert_eq!(plain_answers, 2);
    for key in ["dump-key-1", "dump-key-2"] {
        let rec = app
            .store
            .idempotency_key(app.merchant_id, key)
            .await
            .unwrap()
            .expect("stored");
        let body = rec.response_body.expect("answer stored");
        assert!(is_sealed_bytes(&body), "{key}");
        assert!(!body.windows(6).any(|w| w == b"whsec_"), "{key}");
    }
});

/// Runs one raw write of a text and a byte argument (the read-only [`RawDb`] cannot), as an
/// older version would have written the row.
async fn plain_text_write(url: &str, sql: &str, text: &str, bytes: &[u8]) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.expect("connect");
        // The id column is text: bind the bytes as text where the statement compares an id.
        let q = sqlx::query(sql).bind(text);
        let q = if sql.contains("response_body") {
            q.bind(bytes)
        } else {
            q.bind(std::str::from_utf8(bytes).unwrap())
        };
        q.execute(&pool).await.expect(sql);
        pool.close().await;
    } else {
        let opts = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(url)
            .busy_timeout(std::time::Duration::from_secs(10));
        let pool = sqlx::SqlitePool::connect_with(opts).await.expect("open");
        let q = sqlx::query(sql).bind(text);
        let q = if sql.contains("response_body") {
            q.bind(bytes)
        } else {
            q.bind(std::str::from_utf8(bytes).unwrap())
        };
        q.execute(&pool).await.expect(sql);
        pool.close().await;
    }
}

on_both_backends!(
    secrets_stored_as_plain_text_before_sealing_are_sealed_and_still_open,
    |app| {
        let created = register(&app, "legacy-key-1").await;
        let secret = created.json()["secret"].as_str().unwrap().to_string();
        let id = created.json()["id"].as_str().unwrap().to_string();
        // As an install before sealing wrote them: the secret and the stored answer in plain text.
        plain_text_write(
            &app.db_url,
            "UPDATE webhook_endpoints SET secret = $1 WHERE id = $2",
            &secret,
            id.as_bytes(),
        )
        .await;
        plain_text_write(
            &app.db_url,
            "UPDATE idempotency_keys SET response_body = $2 WHERE idem_key = $1",
            "legacy-key-1",
            &created.body,
        )
        .await;
        let core = &app.running.state.core;
        assert_eq!(
            app.store
                .seal_plaintext_secrets(&core.secrets)
                .await
                .unwrap(),
            2
        );
        assert_eq!(
            app.store
                .seal_plaintext_secrets(&core.secrets)
                .await
                .unwrap(),
            0,
            "sealing again changes nothing"
        );
        let ep = app.store.endpoint(&id).await.unwrap().unwrap();
        assert!(is_sealed_text(&ep.secret));
        assert_eq!(core.endpoint_secret(&ep.secret).unwrap(), secret);
        let again = app
            .post(
                "/v1/webhook_endpoints",
                Some("legacy-key-1"),
                &json!({"url": "http://127.0.0.1:9/hook", "enabled_events": ["*"]}),
            )
            .await;
        assert_eq!(
            again.body, created.body,
            "the replay is the same bytes once opened"
        );
        // Another key does not open them, and says so without showing anything.
        let other = SecretBox::random();
        let e = other
            .open_text(Purpose::WebhookSecret, &ep.secret)
            .unwrap_err();
        assert!(e.to_string().contains(&core.secrets.key_id()), "{e}");
    }
);

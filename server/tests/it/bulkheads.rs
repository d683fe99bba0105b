//! Bulkheads between merchants and endpoints (issue 37, "Fairness between merchants and
//! endpoints"): the per-merchant endpoint cap, the merchant API's rate limit per key, the
//! per-endpoint in-flight cap and circuit breaker of webhook deliveries.

use crate::support::*;

use converge_server::domain::fingerprint::sha256_hex;
use converge_server::service::actor::Actor;
use converge_server::service::webhooks::{EndpointError, new_endpoint_id};
use serde_json::{Value, json};

/// Registers an endpoint at `url` through the merchant API under Idempotency-Key `key`.
async fn register_at(app: &TestApp, url: &str, key: &str) -> Answer {
    app.post(
        "/v1/webhook_endpoints",
        Some(key),
        &json!({"url": url, "enabled_events": ["*"]}),
    )
    .await
}

on_both_backends!(
    the_endpoint_beyond_the_merchant_cap_is_refused_with_endpoint_limit,
    |app| {
        for i in 0..16 {
            let a = register_at(
                &app,
                &format!("http://127.0.0.1:9/hooks/{i}"),
                &format!("ep-{i}"),
            )
            .await;
            assert_eq!(a.status, 201, "endpoint {i}: {:?}", a.json());
        }
        let refused = register_at(&app, "http://127.0.0.1:9/hooks/16", "ep-16").await;
        refused.assert_error(400, "endpoint_limit");
        // The CLI's path (the same use case) is refused by the same rule.
        let merchant = app
            .store
            .merchant_by_key_hash(&sha256_hex(app.api_key.as_bytes()))
            .await
            .unwrap()
            .unwrap();
        let direct = app
            .core()
            .create_endpoint(
                &new_endpoint_id(),
                merchant.id,
                "http://127.0.0.1:9/hooks/cli",
                &["*".to_string()],
                "",
                &Actor::system(),
            )
            .await;
        assert!(
            matches!(direct, Err(EndpointError::Limit(16))),
            "{direct:?}"
        );
        // Another merchant has its own 16.
        let other = app.add_merchant("other").await;
        let a = app
            .post_raw(
                &other,
                "/v1/webhook_endpoints",
                Some("ep-other"),
                &json!({"url": "http://127.0.0.1:9/hooks/other", "enabled_events": ["*"]})
                    .to_string(),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.json());
        // A deleted endpoint frees its place; the refused request's key stayed free.
        let list: Value = app.get("/v1/webhook_endpoints").await.json();
        let first = list["data"][0]["id"].as_str().unwrap().to_string();
        let gone = app
            .send(
                app.client
                    .delete(format!("{}/v1/webhook_endpoints/{first}", app.base))
                    .bearer_auth(&app.api_key),
            )
            .await;
        assert_eq!(gone.status, 200, "{:?}", gone.json());
        let again = register_at(&app, "http://127.0.0.1:9/hooks/16", "ep-16").await;
        assert_eq!(again.status, 201, "{:?}", again.json());
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM webhook_endpoints WHERE status <> 'deleted'",
                &[]
            )
            .await,
            17,
            "16 of the merchant's and 1 of the other's"
        );
    }
);

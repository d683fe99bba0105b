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

/// The value of `converge_rate_limited_total{scope="merchant"}` in `/metrics` (0 before its
/// first count).
async fn rate_limited_count(app: &TestApp) -> f64 {
    let text = String::from_utf8(app.get("/metrics").await.body).unwrap();
    text.lines()
        .find(|l| l.starts_with("converge_rate_limited_total{scope=\"merchant\"}"))
        .and_then(|l| l.split_whitespace().last())
        .map_or(0.0, |v| v.parse().unwrap())
}

on_both_backends!(
    a_flood_from_one_api_key_gets_429_with_retry_after_and_ratelimit_headers,
    |s| {
        s.http.merchant_rate_per_sec = 1;
        s.http.merchant_burst = 5;
    },
    |app| {
        let other = app.add_merchant("quiet").await;
        // `/metrics` is not behind the limit; the recorder is shared by every test in this
        // binary, so the count is compared, not read as a total.
        let before = rate_limited_count(&app).await;
        let mut answers = Vec::new();
        for _ in 0..12 {
            answers.push(app.get("/v1/webhook_endpoints").await);
        }
        let ok = answers.iter().filter(|a| a.status == 200).count();
        let refused: Vec<&Answer> = answers.iter().filter(|a| a.status == 429).collect();
        assert!((5..=7).contains(&ok), "the burst of 5 (and a refill): {ok}");
        assert_eq!(ok + refused.len(), 12);
        let first_ok = &answers[0];
        assert_eq!(first_ok.header("ratelimit-policy"), "\"merchant\";q=5;w=5");
        assert_eq!(first_ok.header("ratelimit"), "\"merchant\";r=4;t=1");
        let r = refused[0];
        r.assert_error(429, "rate_limited");
        assert!(r.header("retry-after").parse::<u64>().unwrap() >= 1);
        assert_eq!(r.header("ratelimit-policy"), "\"merchant\";q=5;w=5");
        assert!(
            r.header("ratelimit").starts_with("\"merchant\";r=0;t="),
            "{}",
            r.header("ratelimit")
        );
        let after = rate_limited_count(&app).await;
        assert!(
            after - before >= refused.len() as f64,
            "{before} -> {after}, {} refused",
            refused.len()
        );
        // The bucket is the key's: another merchant's key is not refused.
        assert_eq!(
            app.get_as(&other, "/v1/webhook_endpoints").await.status,
            200
        );
        // A refused POST claims no Idempotency-Key (the bucket is empty now; should a token
        // have come meanwhile, the POST runs and a second one is refused).
        let mut refused_key = None;
        for i in 0..3 {
            let key = format!("k-flood-{i}");
            let a = app
                .post(
                    "/v1/payments",
                    Some(&key),
                    &json!({"amount": 1000, "currency": "CNY", "merchant_order_id": format!("o-flood-{i}")}),
                )
                .await;
            if a.status == 429 {
                a.assert_error(429, "rate_limited");
                refused_key = Some(key);
                break;
            }
        }
        let key = refused_key.expect("a POST beyond the limit is refused");
        // The document lists the 429 on the merchant routes, not on the channel's callbacks.
        let doc = app.get("/openapi.json").await.json();
        let limited = &doc["paths"]["/v1/payments"]["post"]["responses"]["429"];
        assert!(limited["headers"]["Retry-After"].is_object(), "{limited}");
        assert!(limited["headers"]["RateLimit"].is_object(), "{limited}");
        assert!(doc["paths"]["/v1/webhook_endpoints"]["get"]["responses"]["429"].is_object());
        assert!(doc["paths"]["/v1/channel/callbacks"]["post"]["responses"]["429"].is_null());
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM idempotency_keys WHERE idem_key = $1",
                &[&key]
            )
            .await,
            0
        );
    }
);

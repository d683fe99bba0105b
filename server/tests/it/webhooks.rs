//! The outbox and merchant webhooks over real HTTP, on both backends (DESIGN.md "Outbox,
//! merchant notifications, event stream"): one event per outcome in the transition's
//! transaction, Standard Webhooks signatures, the retry schedule, the error pool, 410, the
//! URL refusals, rotation, and bad receivers. Deliveries go to the webhook sink
//! (`channel::webhook_sink`), a real HTTP server.

use crate::support::*;

use std::time::Duration;

use converge_server::channel::webhook_sink::{self, SinkConfig, SinkHandle};
use converge_server::domain::webhooks::{secret_key, sign};
use converge_server::store::ErrorItemStatus;
use serde_json::{Value, json};

/// A sink on a free port.
async fn sink() -> SinkHandle {
    webhook_sink::spawn(
        SinkConfig {
            fault_rate: 0.0,
            seed: 1,
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("sink starts")
}

/// Registers an endpoint at `url` for `events`; the 201 body.
async fn register(app: &TestApp, url: &str, events: &[&str]) -> Value {
    let a = app
        .post(
            "/v1/webhook_endpoints",
            Some(&format!("we-{url}-{}", events.join(","))),
            &json!({"url": url, "enabled_events": events}),
        )
        .await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    a.json()
}

/// What the sink received on `path`, once it holds at least `n` deliveries there.
async fn received(s: &SinkHandle, path: &str, n: usize) -> Vec<Value> {
    let client = reqwest::Client::new();
    eventually(
        Duration::from_secs(15),
        &format!("{n} deliveries on {path}"),
        || async {
            let all: Value = client
                .get(format!("{}/received", s.url))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            let got: Vec<Value> = all["deliveries"]
                .as_array()?
                .iter()
                .filter(|d| d["path"] == path)
                .cloned()
                .collect();
            (got.len() >= n).then_some(got)
        },
    )
    .await
}

/// The delivery rows of an event type, once one reaches `status`.
async fn delivery_with_status(app: &TestApp, status: &str) -> i64 {
    eventually(
        Duration::from_secs(15),
        &format!("a delivery to become {status}"),
        || async {
            let n = app
                .sql_i64(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status = $1",
                    &[status],
                )
                .await;
            (n > 0).then_some(n)
        },
    )
    .await
}

/// Checks a received delivery's signature against `secret` exactly as the Standard
/// Webhooks spec computes it (the npm library does the same in scripts/webhooks-check.sh).
fn signed_by(d: &Value, secret: &str) -> bool {
    let key = secret_key(secret).unwrap();
    let expected = sign(
        &key,
        d["webhook_id"].as_str().unwrap(),
        d["webhook_timestamp"].as_str().unwrap().parse().unwrap(),
        d["body"].as_str().unwrap().as_bytes(),
    );
    d["webhook_signature"]
        .as_str()
        .unwrap()
        .split(' ')
        .any(|s| s == expected)
}

on_both_backends!(
    a_success_is_delivered_once_signed_with_the_endpoint_secret,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        let ep = register(
            &app,
            &format!("{}/hooks/ok", sink.url),
            &["payment.succeeded"],
        )
        .await;
        let secret = ep["secret"].as_str().unwrap().to_string();
        assert!(secret.starts_with("whsec_"), "{ep}");
        assert_eq!(ep["enabled_events"], json!(["payment.succeeded"]));
        let p = app.pay("k-o-1", "o-1", 1000).await;
        assert_eq!(p["status"], "SUCCESS");
        let got = received(&sink, "/hooks/ok", 1).await;
        let d = &got[0];
        assert!(signed_by(d, &secret), "{d}");
        let body: Value = serde_json::from_str(d["body"].as_str().unwrap()).unwrap();
        assert_eq!(body["type"], "payment.succeeded");
        assert_eq!(body["data"]["id"], p["id"]);
        assert_eq!(body["data"]["status"], "SUCCESS");
        assert!(body["data"]["version"].as_i64().unwrap() > 1, "{body}");
        assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
        let id = p["id"].as_str().unwrap();
        assert_eq!(
            app.sql_strings("SELECT id FROM events WHERE aggregateid = $1", &[id])
                .await,
            vec![d["webhook_id"].as_str().unwrap().to_string()]
        );
        delivery_with_status(&app, "succeeded").await;
        // A worker re-running the posting step of a settled payment writes no second event.
        let settled = app.store.payment(id).await.unwrap().unwrap();
        app.running
            .state
            .core
            .retry_posting(settled, "worker")
            .await
            .unwrap();
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM events WHERE aggregateid = $1", &[id])
                .await,
            1
        );
        // The failed payment's event is not one this endpoint subscribes to.
        let f = app.pay("k-o-2", "o-2", 1051).await;
        assert_eq!(f["status"], "FAILED");
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM events WHERE type = 'payment.failed'",
                &[]
            )
            .await,
            1
        );
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM webhook_deliveries", &[])
                .await,
            1
        );
    }
);

on_both_backends!(
    failed_attempts_retry_with_the_same_webhook_id_until_a_2xx,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        register(&app, &format!("{}/hooks/fail/2", sink.url), &["*"]).await;
        app.pay("k-o-1", "o-1", 1000).await;
        let got = received(&sink, "/hooks/fail/2", 3).await;
        assert!(got.iter().all(|d| d["webhook_id"] == got[0]["webhook_id"]));
        assert_eq!(
            got.iter()
                .map(|d| d["answered"].as_i64().unwrap())
                .collect::<Vec<_>>(),
            vec![500, 500, 200]
        );
        delivery_with_status(&app, "succeeded").await;
        assert_eq!(
            app.sql_i64("SELECT attempts FROM webhook_deliveries", &[])
                .await,
            3
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM webhook_attempts WHERE error IS NOT NULL",
                &[]
            )
            .await,
            2
        );
    }
);

on_both_backends!(
    an_exhausted_delivery_goes_to_the_error_pool_and_can_be_redelivered,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        let ep = register(&app, &format!("{}/hooks/always-fail", sink.url), &["*"]).await;
        app.pay("k-o-1", "o-1", 1000).await;
        // The test schedule has three attempts: 0s, 100ms, 200ms.
        received(&sink, "/hooks/always-fail", 3).await;
        delivery_with_status(&app, "dead").await;
        // The item is written when the worker records the job's end, just after the delivery.
        let items = eventually(Duration::from_secs(10), "the error-pool item", || async {
            let items = app
                .store
                .error_items(Some(ErrorItemStatus::Open), Some("webhook_exhausted"), 10)
                .await
                .unwrap();
            (!items.is_empty()).then_some(items)
        })
        .await;
        assert_eq!(items.len(), 1, "{items:?}");
        let evidence: Value = serde_json::from_str(&items[0].evidence).unwrap();
        assert_eq!(evidence["endpoint_id"], ep["id"]);
        assert_eq!(evidence["attempts"], 3);
        assert_eq!(evidence["last_status"], 500);
        assert!(
            items[0].summary.contains("payment.succeeded"),
            "{}",
            items[0].summary
        );
        // Redelivered by ops: a new round of attempts, the same webhook-id.
        let id = app.sql_i64("SELECT id FROM webhook_deliveries", &[]).await;
        let core = &app.running.state.core;
        let put_back = core
            .redeliver(
                &[id],
                "receiver fixed",
                "webhook_delivery",
                &converge_server::service::actor::Actor::system(),
            )
            .await
            .unwrap();
        assert_eq!(put_back, vec![id]);
        let got = received(&sink, "/hooks/always-fail", 6).await;
        assert!(got.iter().all(|d| d["webhook_id"] == got[0]["webhook_id"]));
        // The delivery turns dead when its last attempt is recorded; the job reaches the
        // error pool right after, when the worker writes its result.
        let items = eventually(Duration::from_secs(10), "the second report", || async {
            let items = app
                .store
                .error_items(None, Some("webhook_exhausted"), 10)
                .await
                .unwrap();
            items.iter().any(|i| i.occurrences == 2).then_some(items)
        })
        .await;
        assert_eq!(items.len(), 1, "one item per delivery: {items:?}");
        assert_eq!(items[0].occurrences, 2);
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'webhook_redelivered'",
                &[]
            )
            .await,
            1
        );
    }
);

on_both_backends!(
    a_410_disables_the_endpoint_and_later_events_skip_it,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        let ep = register(&app, &format!("{}/hooks/gone", sink.url), &["*"]).await;
        app.pay("k-o-1", "o-1", 1000).await;
        received(&sink, "/hooks/gone", 1).await;
        delivery_with_status(&app, "abandoned").await;
        let path = format!("/v1/webhook_endpoints/{}", ep["id"].as_str().unwrap());
        let shown = eventually(Duration::from_secs(5), "endpoint disabled", || async {
            let e = app.get(&path).await.json();
            (e["status"] == "disabled").then_some(e)
        })
        .await;
        assert!(shown["disabled_reason"].as_str().unwrap().contains("410"));
        assert!(
            shown.get("secret").is_none(),
            "the secret is shown once: {shown}"
        );
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action = 'webhook_endpoint_disabled' AND actor = 'system'",
                &[]
            )
            .await,
            1
        );
        app.pay("k-o-2", "o-2", 1000).await;
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM webhook_deliveries", &[])
                .await,
            1,
            "a disabled endpoint gets no new deliveries"
        );
    }
);

on_both_backends!(
    bad_receivers_are_failed_attempts_with_their_reason,
    |s| {
        s.worker.no_workers = false;
        s.webhooks.webhook_timeout_ms = 700;
        s.webhooks.webhook_retry_schedule =
            converge_server::domain::webhooks::RetrySchedule::parse("0s").unwrap();
    },
    |app| {
        let sink = sink().await;
        // A receiver that accepts the connection and closes it without an answer.
        let closer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let closer_addr = closer.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((conn, _)) = closer.accept().await {
                drop(conn);
            }
        });
        let cases = [
            (
                format!("{}/hooks/redirect", sink.url),
                "redirect 302 not followed",
            ),
            (format!("{}/hooks/big", sink.url), "HTTP 500"),
            (format!("{}/hooks/hang", sink.url), "timed out"),
            (format!("http://{closer_addr}/hooks"), "error"),
        ];
        for (url, _) in &cases {
            register(&app, url, &["payment.succeeded"]).await;
        }
        app.pay("k-o-1", "o-1", 1000).await;
        eventually(Duration::from_secs(20), "four dead deliveries", || async {
            let n = app
                .sql_i64(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'dead'",
                    &[],
                )
                .await;
            (n == 4).then_some(())
        })
        .await;
        for (url, reason) in &cases {
            let errors = app
                .sql_strings(
                    "SELECT a.error FROM webhook_attempts a JOIN webhook_deliveries d ON d.id = a.delivery_id \
                     JOIN webhook_endpoints w ON w.id = d.endpoint_id WHERE w.url = $1",
                    &[url],
                )
                .await;
            assert_eq!(errors.len(), 1, "{url}: {errors:?}");
            assert!(errors[0].contains(reason), "{url}: {errors:?}");
        }
        let kept = app
            .sql_i64(
                "SELECT CAST(MAX(LENGTH(response)) AS BIGINT) FROM webhook_attempts",
                &[],
            )
            .await;
        assert!(
            kept <= 1024,
            "only the first KiB of an answer is kept: {kept}"
        );
        eventually(Duration::from_secs(10), "four error-pool items", || async {
            let n = app
                .store
                .error_items(Some(ErrorItemStatus::Open), Some("webhook_exhausted"), 10)
                .await
                .unwrap()
                .len();
            (n == 4).then_some(())
        })
        .await;
        // The server is still serving.
        assert_eq!(app.get("/health").await.status, 200);
    }
);

on_both_backends!(
    endpoint_urls_and_event_lists_are_checked_with_stable_codes,
    |s| {
        s.webhooks.webhook_allow_private = false;
    },
    |app| {
        let cases: Vec<(Value, &str)> = vec![
            (
                json!({"url": "http://127.0.0.1:9/x", "enabled_events": ["*"]}),
                "url_address_refused",
            ),
            (
                json!({"url": "http://10.0.0.7/x", "enabled_events": ["*"]}),
                "url_address_refused",
            ),
            (
                json!({"url": "http://169.254.169.254/latest", "enabled_events": ["*"]}),
                "url_address_refused",
            ),
            (
                json!({"url": "http://[::1]:8080/x", "enabled_events": ["*"]}),
                "url_address_refused",
            ),
            (
                json!({"url": "http://localhost:8080/x", "enabled_events": ["*"]}),
                "url_address_refused",
            ),
            (
                json!({"url": "ftp://example.com/x", "enabled_events": ["*"]}),
                "url_scheme_not_allowed",
            ),
            (
                json!({"url": "https://user:pw@example.com/x", "enabled_events": ["*"]}),
                "url_user_info_not_allowed",
            ),
            (
                json!({"url": format!("https://example.com/{}", "a".repeat(2100)), "enabled_events": ["*"]}),
                "url_too_long",
            ),
            (
                json!({"url": "not a url", "enabled_events": ["*"]}),
                "invalid_url",
            ),
            (
                json!({"url": "https://93.184.216.34/x", "enabled_events": ["payment.exploded"]}),
                "invalid_enabled_events",
            ),
            (
                json!({"url": "https://93.184.216.34/x", "enabled_events": []}),
                "invalid_enabled_events",
            ),
        ];
        for (i, (body, code)) in cases.iter().enumerate() {
            let a = app
                .post("/v1/webhook_endpoints", Some(&format!("bad-{i}")), body)
                .await;
            a.assert_error(400, code);
        }
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM webhook_endpoints", &[])
                .await,
            0
        );
        // A refused request left its key free: the same key with a good body works.
        let ok = app
            .post(
                "/v1/webhook_endpoints",
                Some("bad-0"),
                &json!({"url": "https://93.184.216.34/hooks", "enabled_events": ["refund.failed"]}),
            )
            .await;
        assert_eq!(ok.status, 201, "{:?}", ok.json());
    }
);

// Issue 36: 6to4, site-local and IPv4-translated addresses reach inside the network too.
on_both_backends!(
    six_to_four_site_local_and_translated_ipv6_urls_are_refused,
    |s| {
        s.webhooks.webhook_allow_private = false;
    },
    |app| {
        for (i, host) in [
            "[2002:7f00:1::1]",
            "[2002:a00:7::1]",
            "[fec0::1]",
            "[::ffff:0:7f00:1]",
            "[::ffff:0:a9fe:a9fe]",
        ]
        .iter()
        .enumerate()
        {
            let body = json!({"url": format!("http://{host}:8080/x"), "enabled_events": ["*"]});
            app.post("/v1/webhook_endpoints", Some(&format!("v6-{i}")), &body)
                .await
                .assert_error(400, "url_address_refused");
        }
        assert_eq!(
            app.sql_i64("SELECT COUNT(*) FROM webhook_endpoints", &[])
                .await,
            0
        );
    }
);

// Issue 36: a refusal must not map the internal DNS for a merchant: an internal host and one
// that does not resolve get the same answer, and it names no address.
on_both_backends!(
    internal_and_unresolvable_hosts_get_one_answer_naming_no_address,
    |s| {
        s.webhooks.webhook_allow_private = false;
    },
    |app| {
        async fn refusal(app: &TestApp, url: &str, key: &str) -> String {
            let a = app
                .post(
                    "/v1/webhook_endpoints",
                    Some(key),
                    &json!({"url": url, "enabled_events": ["*"]}),
                )
                .await;
            a.assert_error(400, "url_address_refused");
            String::from_utf8(a.body).unwrap()
        }
        let internal = refusal(&app, "http://localhost:8080/x", "one-1").await;
        let literal = refusal(&app, "http://10.1.2.3/x", "one-2").await;
        let unresolvable = refusal(&app, "https://hooks.invalid/x", "one-3").await;
        assert_eq!(internal, unresolvable, "the same answer byte for byte");
        assert_eq!(internal, literal);
        for leak in ["127.0.0.1", "::1", "10.1.2.3", "localhost", "hooks.invalid"] {
            assert!(!internal.contains(leak), "{leak} in {internal}");
            assert!(!unresolvable.contains(leak), "{leak} in {unresolvable}");
        }
    }
);

on_both_backends!(
    endpoints_are_listed_replayed_deleted_and_private_to_their_merchant,
    |app| {
        let body = json!({"url": "https://93.184.216.34/hooks", "enabled_events": ["payment.failed", "refund.succeeded"], "description": "orders"});
        let first = app.post("/v1/webhook_endpoints", Some("ep-1"), &body).await;
        assert_eq!(first.status, 201);
        let again = app.post("/v1/webhook_endpoints", Some("ep-1"), &body).await;
        assert_eq!(again.body, first.body, "a replay answers byte for byte");
        assert_eq!(again.header("idempotent-replayed"), "true");
        let ep = first.json();
        let id = ep["id"].as_str().unwrap();
        assert!(id.starts_with("we_"));
        let list = app.get("/v1/webhook_endpoints").await.json();
        assert_eq!(list["data"].as_array().unwrap().len(), 1);
        assert!(list["data"][0].get("secret").is_none());
        let other = app.add_merchant("other").await;
        app.get_as(&other, &format!("/v1/webhook_endpoints/{id}"))
            .await
            .assert_error(404, "not_found");
        let deleted = app
            .send(
                app.client
                    .delete(format!("{}/v1/webhook_endpoints/{id}", app.base))
                    .bearer_auth(&app.api_key),
            )
            .await;
        assert_eq!(deleted.status, 200);
        assert_eq!(deleted.json()["status"], "deleted");
        // Gone from its URL (schemathesis: a deleted resource must not answer 200), kept in
        // the list with its status.
        app.get(&format!("/v1/webhook_endpoints/{id}"))
            .await
            .assert_error(404, "not_found");
        let list = app.get("/v1/webhook_endpoints").await.json();
        assert_eq!(list["data"][0]["status"], "deleted");
        app.post(
            &format!("/v1/webhook_endpoints/{id}/rotate_secret"),
            Some("rot-1"),
            &json!({}),
        )
        .await
        .assert_error(409, "webhook_endpoint_deleted");
        app.post("/v1/webhook_endpoints", None, &body)
            .await
            .assert_error(400, "idempotency_key_missing");
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM audit_log WHERE action IN ('webhook_endpoint_created', 'webhook_endpoint_deleted') \
                 AND actor = 'merchant:acme'",
                &[]
            )
            .await,
            2
        );
    }
);

on_both_backends!(a_frozen_merchant_cannot_register_endpoints, |app| {
    assert!(app.store.set_merchant_frozen("acme", true).await.unwrap());
    app.post(
        "/v1/webhook_endpoints",
        Some("f-1"),
        &json!({"url": "https://93.184.216.34/hooks", "enabled_events": ["*"]}),
    )
    .await
    .assert_error(403, "merchant_frozen");
    assert_eq!(app.get("/v1/webhook_endpoints").await.status, 200);
});

on_both_backends!(
    a_rotated_secret_signs_beside_the_old_one_during_the_overlap,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        let ep = register(&app, &format!("{}/hooks/ok", sink.url), &["*"]).await;
        let old = ep["secret"].as_str().unwrap().to_string();
        let rotated = app
            .post(
                &format!(
                    "/v1/webhook_endpoints/{}/rotate_secret",
                    ep["id"].as_str().unwrap()
                ),
                Some("rot-1"),
                &json!({}),
            )
            .await;
        assert_eq!(rotated.status, 200, "{:?}", rotated.json());
        let new = rotated.json()["secret"].as_str().unwrap().to_string();
        assert_ne!(new, old);
        assert!(rotated.json()["previous_secret_expires_at"].is_string());
        app.pay("k-o-1", "o-1", 1000).await;
        let d = &received(&sink, "/hooks/ok", 1).await[0];
        assert_eq!(
            d["webhook_signature"].as_str().unwrap().split(' ').count(),
            2
        );
        assert!(signed_by(d, &old) && signed_by(d, &new), "{d}");
    }
);

on_both_backends!(
    refunds_emit_their_events_and_the_payment_refunded_event,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        register(&app, &format!("{}/hooks/ok", sink.url), &["*"]).await;
        let p = app.pay("k-o-1", "o-1", 1000).await;
        let id = p["id"].as_str().unwrap();
        let r = app
            .post(
                &format!("/v1/payments/{id}/refunds"),
                Some("r-1"),
                &json!({"amount": 1000}),
            )
            .await;
        assert_eq!(r.status, 201, "{:?}", r.json());
        let got = received(&sink, "/hooks/ok", 3).await;
        let mut types: Vec<String> = got
            .iter()
            .map(|d| {
                serde_json::from_str::<Value>(d["body"].as_str().unwrap()).unwrap()["type"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        types.sort();
        assert_eq!(
            types,
            vec!["payment.refunded", "payment.succeeded", "refund.succeeded"]
        );
        let events = app.store.payment_outbox_events(id).await.unwrap();
        assert_eq!(events.len(), 3);
        assert!(events.windows(2).all(|w| w[0].seq < w[1].seq));
    }
);

/// `converge verify` an hour from now: everything is past the window.
async fn verify_later(app: &TestApp) -> converge_server::verify::Report {
    converge_server::verify::run(
        app.store.as_ref(),
        None,
        converge_server::verify::Window {
            now_ms: chrono::Utc::now().timestamp_millis() + 3_600_000,
            window_ms: 60_000,
            action_window_ms: 0,
        },
    )
    .await
    .unwrap()
}

on_both_backends!(
    verify_passes_when_every_event_is_delivered,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        register(&app, &format!("{}/hooks/ok", sink.url), &["*"]).await;
        app.pay("k-o-1", "o-1", 1000).await;
        app.pay("k-o-2", "o-2", 1051).await;
        received(&sink, "/hooks/ok", 2).await;
        eventually(Duration::from_secs(10), "both delivered", || async {
            let n = app
                .sql_i64(
                    "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'succeeded'",
                    &[],
                )
                .await;
            (n == 2).then_some(())
        })
        .await;
        let report = verify_later(&app).await;
        assert!(report.ok(), "{}", report.render());
        assert!(
            report.render().contains(
                "[PASS] 6. events and deliveries: 2 events, 2 deliveries (2 succeeded, 0 pending)"
            ),
            "{}",
            report.render()
        );
    }
);

/// Runs one writing statement on the test database (a fault no code path of converge makes).
async fn exec(url: &str, sql: &str, arg: &str) {
    if url.starts_with("postgres") {
        let pool = sqlx::PgPool::connect(url).await.unwrap();
        sqlx::query(sql).bind(arg).execute(&pool).await.unwrap();
        pool.close().await;
    } else {
        let pool = sqlx::SqlitePool::connect(&format!("sqlite:{url}"))
            .await
            .unwrap();
        sqlx::query(sql).bind(arg).execute(&pool).await.unwrap();
        pool.close().await;
    }
}

on_both_backends!(
    verify_names_an_undelivered_event_and_an_outcome_without_its_event,
    |app| {
        app.skip_invariant_check(
            "makes an outcome without its event and an undelivered event on purpose: the breaches it proves verify names",
        );
        // No workers: the delivery stays pending.
        let sink = sink().await;
        register(&app, &format!("{}/hooks/ok", sink.url), &["*"]).await;
        let p = app.pay("k-o-1", "o-1", 1000).await;
        let id = p["id"].as_str().unwrap();
        let report = verify_later(&app).await;
        let text = report.render();
        assert!(!report.ok(), "{text}");
        assert!(text.contains(&format!("BREACH {id}: event")), "{text}");
        assert!(
            text.contains("is pending past the window and not in the error pool"),
            "{text}"
        );
        assert!(text.contains("[FAIL] 6. events and deliveries"), "{text}");
        exec(
            &app.db_url,
            "UPDATE payments SET status = 'FAILED' WHERE id = $1",
            id,
        )
        .await;
        let text = verify_later(&app).await.render();
        assert!(
            text.contains(&format!(
                "BREACH {id}: payment reached FAILED but the outbox has no event for it"
            )),
            "{text}"
        );
    }
);

on_both_backends!(
    the_console_lists_deliveries_by_status_and_refuses_an_unknown_status_or_type,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        register(
            &app,
            &format!("{}/hooks/ok", sink.url),
            &["payment.succeeded"],
        )
        .await;
        let p = app.pay("k-o-1", "o-1", 1000).await;
        delivery_with_status(&app, "succeeded").await;
        add_ops_user(&app, "vera", "viewer").await;
        let vera = ops_session(&app, "vera").await;
        let get = |query: &'static str| {
            let vera = vera.clone();
            let url = format!("{}/ops/v1/webhooks/deliveries{query}", app.base);
            async move {
                let r = vera.get(url).send().await.expect("sent");
                let status = r.status().as_u16();
                (status, r.json::<Value>().await.expect("JSON"))
            }
        };
        let (status, list) = get("?status=succeeded&type=payment.succeeded").await;
        assert_eq!(status, 200, "{list}");
        let items = list["items"].as_array().unwrap();
        assert_eq!(items.len(), 1, "{list}");
        assert_eq!(items[0]["aggregateid"], p["id"]);
        assert_eq!(items[0]["status"], "succeeded");
        let (_, none) = get("?status=dead").await;
        assert_eq!(none["items"], json!([]), "no delivery is dead");
        let (status, e) = get("?status=sent").await;
        assert_eq!(status, 400, "{e}");
        assert_eq!(e["error"]["code"], "invalid_status", "{e}");
        assert_eq!(
            e["error"]["message"],
            "status must be one of pending, succeeded, dead, abandoned"
        );
        let (status, e) = get("?type=payment.teleported").await;
        assert_eq!(status, 400, "{e}");
        assert_eq!(e["error"]["code"], "invalid_event_type", "{e}");
        let (status, e) = get("?from=yesterday").await;
        assert_eq!(status, 400, "{e}");
        assert_eq!(e["error"]["code"], "invalid_time", "{e}");
        let (status, e) = get("?before=0").await;
        assert_eq!(status, 400, "{e}");
        assert_eq!(e["error"]["code"], "invalid_cursor", "{e}");
    }
);

on_both_backends!(
    the_deliveries_list_pages_newest_first_below_the_last_id_of_a_page,
    |s| {
        s.worker.no_workers = false;
    },
    |app| {
        let sink = sink().await;
        register(
            &app,
            &format!("{}/hooks/ok", sink.url),
            &["payment.succeeded"],
        )
        .await;
        for i in 0..3 {
            app.pay(&format!("k-page-{i}"), &format!("o-page-{i}"), 1000 + i)
                .await;
        }
        eventually(Duration::from_secs(15), "three deliveries", || async {
            let n = app
                .sql_i64("SELECT COUNT(*) FROM webhook_deliveries", &[])
                .await;
            (n == 3).then_some(n)
        })
        .await;
        add_ops_user(&app, "vera", "viewer").await;
        let vera = ops_session(&app, "vera").await;
        let ids = |query: String| {
            let vera = vera.clone();
            let url = format!("{}/ops/v1/webhooks/deliveries{query}", app.base);
            async move {
                let list: Value = vera.get(url).send().await.unwrap().json().await.unwrap();
                list["items"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|d| d["id"].as_i64().unwrap())
                    .collect::<Vec<_>>()
            }
        };
        let all = ids(String::new()).await;
        assert_eq!(all.len(), 3, "{all:?}");
        assert!(all.windows(2).all(|w| w[0] > w[1]), "newest first: {all:?}");
        let first = ids("?limit=2".into()).await;
        assert_eq!(first, all[..2]);
        let next = ids(format!("?limit=2&before={}", first[1])).await;
        assert_eq!(
            next,
            all[2..],
            "the older page starts below the last id shown"
        );
        assert!(ids(format!("?before={}", all[2])).await.is_empty());
    }
);

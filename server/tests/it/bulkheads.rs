//! Bulkheads between merchants and endpoints (issue 37, "Fairness between merchants and
//! endpoints"): the per-merchant endpoint cap, the merchant API's rate limit per key, the
//! per-endpoint in-flight cap and circuit breaker of webhook deliveries.

use crate::support::*;

use std::sync::Arc;

use converge_server::channel::webhook_sink;
use converge_server::domain::breaker::BreakerState;
use converge_server::domain::clock::{Clock, ManualClock, SystemClock};
use converge_server::domain::fingerprint::sha256_hex;
use converge_server::service::Core;
use converge_server::service::actor::Actor;
use converge_server::service::delivery_gate::{INFLIGHT_RECHECK_MS, Passage, merchant_key};
use converge_server::service::resolve::Step;
use converge_server::service::webhooks::{EndpointError, new_endpoint_id};
use converge_server::worker::Worker;
use serde_json::{Value, json};

/// The default merchant's id.
async fn merchant_id(app: &TestApp) -> i64 {
    app.store
        .merchant_by_key_hash(&sha256_hex(app.api_key.as_bytes()))
        .await
        .unwrap()
        .unwrap()
        .id
}

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

/// A sink for deliveries on a free port, and an endpoint of the default merchant at `path`
/// of it; the endpoint's id.
async fn sink_endpoint(app: &TestApp, path: &str) -> (webhook_sink::SinkHandle, String) {
    let sink = webhook_sink::spawn(
        webhook_sink::SinkConfig {
            fault_rate: 0.0,
            seed: 1,
        },
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .expect("sink starts");
    let a = register_at(app, &format!("{}{path}", sink.url), &format!("ep{path}")).await;
    assert_eq!(a.status, 201, "{:?}", a.json());
    let id = a.json()["id"].as_str().unwrap().to_string();
    (sink, id)
}

/// Deliveries the sink has received.
async fn received(sink: &webhook_sink::SinkHandle) -> usize {
    let all: Value = reqwest::get(format!("{}/received", sink.url))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    all["deliveries"].as_array().unwrap().len()
}

/// The app's core on a clock the test moves (from a second after now), and a worker over it
/// that claims one job at a time.
fn on_test_clock(app: &TestApp) -> (Core, ManualClock, Arc<Worker>) {
    let clock = ManualClock::new(SystemClock.now_ms() + 1_000);
    let mut core = app.core().clone();
    core.clock = Arc::new(clock.clone());
    let mut cfg = app.running.settings.worker.config();
    cfg.batch = 1;
    let worker = Worker::new(core.clone(), cfg);
    (core, clock, worker)
}

/// The webhook job's (attempts, run_at, last_error), and the delivery's attempts.
async fn webhook_job(app: &TestApp) -> (i64, i64, String, i64) {
    let attempts = app
        .sql_i64("SELECT attempts FROM jobs WHERE kind = 'webhook'", &[])
        .await;
    let run_at = app
        .sql_i64("SELECT run_at FROM jobs WHERE kind = 'webhook'", &[])
        .await;
    let error = app
        .sql_strings(
            "SELECT COALESCE(last_error, '') FROM jobs WHERE kind = 'webhook'",
            &[],
        )
        .await
        .remove(0);
    let delivered = app
        .sql_i64("SELECT attempts FROM webhook_deliveries", &[])
        .await;
    (attempts, run_at, error, delivered)
}

on_both_backends!(
    the_breaker_opens_on_its_failure_rate_defers_without_attempts_and_one_probe_closes_it,
    |s| {
        s.webhooks.webhook_breaker_min_failures = 3;
        s.webhooks.webhook_breaker_cooldown_secs = 30;
        s.webhooks.webhook_retry_schedule =
            converge_server::domain::webhooks::RetrySchedule::parse("0s,1s,1s,1s,1s,1s").unwrap();
    },
    |app| {
        // 500 three times for each event, then 200.
        let (sink, ep) = sink_endpoint(&app, "/hooks/fail/3").await;
        app.pay("k-b-1", "o-b-1", 1000).await;
        let (core, clock, worker) = on_test_clock(&app);
        for n in 1..=3 {
            let ran = worker.drain_once().await.unwrap();
            assert_eq!(ran.len(), 1, "attempt {n}: {ran:?}");
            assert_eq!(received(&sink).await, n);
            clock.advance(1_500); // the schedule's 1 s, jitter included
        }
        let opened = app.store.endpoint_breaker(&ep).await.unwrap();
        assert_eq!((opened.failures, opened.opens), (3, 1), "{opened:?}");
        let open_until = opened.open_until.expect("open after 3 failures");
        // Open: the due delivery is put back to the end of the cool-down, no attempt made or
        // spent (the job's claim is given back, the delivery's count stays).
        let ran = worker.drain_once().await.unwrap();
        assert_eq!(ran.len(), 1, "{ran:?}");
        let (job_attempts, run_at, error, delivery_attempts) = webhook_job(&app).await;
        assert_eq!((job_attempts, delivery_attempts), (3, 3));
        assert_eq!(run_at, open_until);
        assert!(error.contains("circuit breaker open"), "{error}");
        assert_eq!(received(&sink).await, 3);
        assert!(worker.drain_once().await.unwrap().is_empty(), "nothing due");
        // Shown as open on the console's overview until the cool-down ends.
        let row = |rows: &[converge_wire::EndpointRow]| {
            rows.iter().find(|r| r.id == ep).unwrap().breaker_open_until
        };
        assert_eq!(
            row(&core.endpoint_rows(None).await.unwrap()),
            Some(open_until)
        );
        // Half-open after the cool-down: one probe; another delivery waits for its lease.
        clock.advance(open_until - clock.now_ms());
        let probe = core
            .delivery_gate(&ep, merchant_id(&app).await, clock.now_ms())
            .await
            .unwrap();
        assert!(matches!(probe, Passage::Go { .. }), "{probe:?}");
        let other = core
            .delivery_gate(&ep, merchant_id(&app).await, clock.now_ms())
            .await
            .unwrap();
        let Passage::Wait(Step::WaitUntil { at, .. }) = other else {
            panic!("a second probe: {other:?}")
        };
        assert!(at > clock.now_ms(), "waits for the probe's lease");
        // That probe never attempted (dropped): its lease lapses and the job's probe runs.
        drop(probe);
        clock.advance(at - clock.now_ms());
        let ran = worker.drain_once().await.unwrap();
        assert_eq!(ran.len(), 1, "{ran:?}");
        assert_eq!(received(&sink).await, 4, "one probe attempt");
        let (_, _, _, delivery_attempts) = webhook_job(&app).await;
        assert_eq!(delivery_attempts, 4);
        assert_eq!(
            app.sql_strings("SELECT status FROM webhook_deliveries", &[])
                .await,
            vec!["succeeded".to_string()]
        );
        let closed = app.store.endpoint_breaker(&ep).await.unwrap();
        assert_eq!(
            closed,
            BreakerState::default(),
            "the probe's success closes it"
        );
        assert!(app.store.open_breakers().await.unwrap().is_empty());
        converge_server::worker::monitor::refresh(&core, &app.running.settings.stuck.thresholds())
            .await
            .unwrap();
        let metrics = String::from_utf8(app.get("/metrics").await.body).unwrap();
        assert!(
            metrics.contains("converge_webhook_breaker_open "),
            "the gauge is exported"
        );
        assert!(
            metrics.contains("converge_webhook_breaker_open_longest_seconds "),
            "the longest-held gauge is exported"
        );
        assert!(metrics.contains("converge_webhook_deferred_total{reason=\"breaker_open\"}"));
    }
);

on_both_backends!(
    the_in_flight_caps_put_a_delivery_back_without_spending_an_attempt,
    |s| {
        s.webhooks.webhook_inflight_per_endpoint = 1;
        s.webhooks.webhook_inflight_per_merchant = 2;
    },
    |app| {
        let (sink, ep) = sink_endpoint(&app, "/hooks/ok").await;
        app.pay("k-i-1", "o-i-1", 1000).await;
        let (core, clock, worker) = on_test_clock(&app);
        // Another attempt to the endpoint holds its one slot.
        let held = core
            .notifier
            .inflight
            .try_take(&ep, 1)
            .expect("a free slot");
        let ran = worker.drain_once().await.unwrap();
        assert_eq!(ran.len(), 1, "{ran:?}");
        let (job_attempts, run_at, error, delivery_attempts) = webhook_job(&app).await;
        assert_eq!((job_attempts, delivery_attempts), (0, 0), "nothing spent");
        assert_eq!(run_at, clock.now_ms() + INFLIGHT_RECHECK_MS);
        assert!(error.contains("in flight"), "{error}");
        assert_eq!(received(&sink).await, 0);
        // The slot given back, the delivery goes at its next look.
        drop(held);
        clock.advance(INFLIGHT_RECHECK_MS);
        assert_eq!(worker.drain_once().await.unwrap().len(), 1);
        assert_eq!(received(&sink).await, 1);
        let (_, _, _, delivery_attempts) = webhook_job(&app).await;
        assert_eq!(delivery_attempts, 1);
        assert_eq!(core.notifier.inflight.in_flight(&ep), 0);
        // The merchant's cap: its endpoints together (here 2: this delivery's slot and one of
        // another endpoint's attempts, held by the test).
        let other = core
            .notifier
            .inflight
            .try_take(&merchant_key(merchant_id(&app).await), 2)
            .unwrap();
        let _another = core
            .notifier
            .inflight
            .try_take(&merchant_key(merchant_id(&app).await), 2)
            .unwrap();
        app.pay("k-i-2", "o-i-2", 1000).await;
        clock.advance(1_000);
        assert_eq!(worker.drain_once().await.unwrap().len(), 1);
        assert_eq!(received(&sink).await, 1, "the merchant's slots are taken");
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM jobs WHERE kind = 'webhook' AND attempts = 0 \
                 AND last_error LIKE '%webhook attempts in flight%'",
                &[]
            )
            .await,
            1
        );
        drop(other);
        clock.advance(INFLIGHT_RECHECK_MS);
        assert_eq!(worker.drain_once().await.unwrap().len(), 1);
        assert_eq!(received(&sink).await, 2);
    }
);

on_both_backends!(
    a_probe_that_closes_the_breaker_sends_the_waiting_deliveries_at_once,
    |s| {
        s.webhooks.webhook_breaker_min_failures = 3;
        s.webhooks.webhook_breaker_cooldown_secs = 30;
    },
    |app| {
        let (sink, ep) = sink_endpoint(&app, "/hooks/ok").await;
        let (core, clock, worker) = on_test_clock(&app);
        let mid = merchant_id(&app).await;
        for i in 0..3 {
            let before = app.store.endpoint_breaker(&ep).await.unwrap();
            core.record_breaker_outcome(&ep, &before, false, clock.now_ms() + i)
                .await
                .unwrap();
        }
        let open_until = app
            .store
            .endpoint_breaker(&ep)
            .await
            .unwrap()
            .open_until
            .expect("open after 3 failures");
        app.pay("k-h-1", "o-h-1", 1000).await;
        app.pay("k-h-2", "o-h-2", 1000).await;
        let last_run = || app.sql_i64("SELECT MAX(run_at) FROM jobs WHERE kind = 'webhook'", &[]);
        let first_run = || app.sql_i64("SELECT MIN(run_at) FROM jobs WHERE kind = 'webhook'", &[]);
        // Both deliveries meet the open breaker: put back to its end, nothing attempted.
        while !worker.drain_once().await.unwrap().is_empty() {}
        assert_eq!(received(&sink).await, 0);
        assert_eq!(first_run().await, open_until);
        // Half-open: the probe is taken (held here), so both wait on its lease.
        clock.advance(open_until - clock.now_ms());
        let probe = core.delivery_gate(&ep, mid, clock.now_ms()).await.unwrap();
        let Passage::Go { ref breaker, .. } = probe else {
            panic!("the probe: {probe:?}")
        };
        let breaker = breaker.clone();
        while !worker.drain_once().await.unwrap().is_empty() {}
        assert!(
            first_run().await > clock.now_ms(),
            "waiting on the probe's lease"
        );
        assert_eq!(received(&sink).await, 0);
        // The probe's attempt succeeded: the breaker closes and both are due now, not at the
        // end of the probe's lease.
        core.record_breaker_outcome(&ep, &breaker, true, clock.now_ms())
            .await
            .unwrap();
        drop(probe);
        assert_eq!(
            app.store.endpoint_breaker(&ep).await.unwrap(),
            BreakerState::default()
        );
        assert_eq!(last_run().await, clock.now_ms());
        while !worker.drain_once().await.unwrap().is_empty() {}
        let deliveries = app
            .sql_i64("SELECT COUNT(*) FROM webhook_deliveries", &[])
            .await;
        assert!(deliveries >= 2, "{deliveries}");
        assert_eq!(
            received(&sink).await as i64,
            deliveries,
            "all delivered at once"
        );
    }
);

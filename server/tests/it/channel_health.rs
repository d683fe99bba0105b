//! Channel health (issue 41), on both backends: charges sent through the real paths to the
//! sandbox are recorded as attempts with their outcome and reason, the dashboard counts them
//! per connector and colours the tile on the configured thresholds, the failures are grouped
//! by reason, and the payments list filters by reason; the store's reads of attempts
//! (conformance) and the minute and hour buckets with their latency percentiles.

use converge_server::domain::channel_health::{
    AttemptOutcome, ChannelThresholds, FailureReason, HealthLevel,
};
use converge_server::store::{NewChannelAttempt, PaymentFilter};
use serde_json::Value;

use crate::support::*;

async fn viewer(app: &TestApp) -> reqwest::Client {
    add_ops_user(app, "vera", "viewer").await;
    ops_session(app, "vera").await
}

/// Six charges through the merchant API, each answered as its amount's last digits say
/// (DESIGN.md "Sandbox channel"): three charged, one declined (51), one timing out with
/// nothing committed (53), one 5xx (56). With no workers, nothing is sent again, so these
/// are exactly the attempts. Returns the payment ids by their digits.
async fn six_charges(app: &TestApp) -> Vec<(i64, String)> {
    let mut ids = Vec::new();
    for (i, amount) in [1000, 1001, 1002, 1051, 1053, 1056].into_iter().enumerate() {
        let p = app
            .pay(&format!("k-h{i}"), &format!("o-h{i}"), amount)
            .await;
        ids.push((amount % 100, p["id"].as_str().unwrap().to_string()));
    }
    ids
}

fn id_of(ids: &[(i64, String)], digits: i64) -> String {
    ids.iter().find(|(d, _)| *d == digits).unwrap().1.clone()
}

fn sandbox_tile(d: &Value) -> &Value {
    let tiles = d["channels"]["connectors"].as_array().expect("connectors");
    assert_eq!(tiles.len(), 1, "{tiles:?}");
    assert_eq!(tiles[0]["connector"], "sandbox");
    &tiles[0]
}

fn ids_of(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

on_both_backends!(
    the_dashboard_counts_a_connector_s_attempts_and_turns_its_tile_red,
    |app| {
        let ids = six_charges(&app).await;
        let c = viewer(&app).await;
        let (s, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
        assert_eq!(s, 200, "{d}");
        let tile = sandbox_tile(&d);
        for window in ["last_5m", "last_hour"] {
            let b = &tile[window];
            assert_eq!(
                (
                    b["attempts"].as_i64(),
                    b["successes"].as_i64(),
                    b["declines"].as_i64(),
                    b["undecidable"].as_i64()
                ),
                (Some(6), Some(3), Some(1), Some(2)),
                "{window}: {b}"
            );
            assert!(
                b["p50_ms"].as_i64().is_some() && b["p99_ms"].as_i64() >= b["p50_ms"].as_i64(),
                "{b}"
            );
        }
        // 2 of 6 undecidable is 33 %: past the default red line of 30 %.
        assert_eq!(tile["level"], "red", "{tile}");
        assert_eq!(
            (
                d["channels"]["amber_pct"].as_i64(),
                d["channels"]["red_pct"].as_i64()
            ),
            (Some(10), Some(30))
        );
        assert_eq!(tile["minutes"].as_array().unwrap().len(), 60);
        assert_eq!(tile["hours"].as_array().unwrap().len(), 24);
        let per_minute: i64 = tile["minutes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["attempts"].as_i64().unwrap())
            .sum();
        let per_hour: i64 = tile["hours"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| h["attempts"].as_i64().unwrap())
            .sum();
        assert_eq!((per_minute, per_hour), (6, 6));

        let mut failures: Vec<(String, i64)> = d["channels"]["failures"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["reason"].as_str().unwrap().to_string(),
                    f["count"].as_i64().unwrap(),
                )
            })
            .collect();
        failures.sort();
        assert_eq!(
            failures,
            [
                ("5xx".to_string(), 1),
                ("decline:card_declined".to_string(), 1),
                ("timeout".to_string(), 1)
            ]
        );

        // Each reason's link finds exactly its payment.
        for (reason, digits) in [
            ("timeout", 53),
            ("5xx", 56),
            ("decline%3Acard_declined", 51),
        ] {
            let (s, page) = ops_get(&c, &app, &format!("/ops/v1/payments?reason={reason}")).await;
            assert_eq!(s, 200, "{page}");
            assert_eq!(ids_of(&page), [id_of(&ids, digits)], "{reason}");
        }
        let (_, none) = ops_get(&c, &app, "/ops/v1/payments?reason=fenced").await;
        assert_eq!(ids_of(&none), Vec::<String>::new());
        // Combined with the other filters (AND).
        let (_, both) = ops_get(&c, &app, "/ops/v1/payments?reason=timeout&status=SUCCESS").await;
        assert_eq!(ids_of(&both), Vec::<String>::new());
        for bad in ["bogus", "decline%3A", "DECLINE%3Ax"] {
            let (s, v) = ops_get(&c, &app, &format!("/ops/v1/payments?reason={bad}")).await;
            assert_eq!(
                (s, v["error"]["code"].as_str()),
                (400, Some("invalid_reason")),
                "{bad}: {v}"
            );
        }
        // The export selects alike.
        let a = app
            .send(c.get(format!("{}/ops/v1/payments/export?reason=5xx", app.base)))
            .await;
        assert_eq!(a.status, 200);
        let csv = String::from_utf8(a.body).unwrap();
        assert_eq!(csv.lines().count(), 2, "header and one row: {csv}");
        assert!(csv.contains(&id_of(&ids, 56)), "{csv}");
    }
);

on_both_backends!(
    the_tile_s_thresholds_come_from_the_settings,
    |s| {
        s.stuck.channel_amber_pct = 20;
        s.stuck.channel_red_pct = 50;
    },
    |app| {
        six_charges(&app).await;
        let c = viewer(&app).await;
        let (_, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
        // The same 33 % is amber between 20 % and 50 %.
        assert_eq!(sandbox_tile(&d)["level"], "amber", "{d}");
        assert_eq!(
            (
                d["channels"]["amber_pct"].as_i64(),
                d["channels"]["red_pct"].as_i64()
            ),
            (Some(20), Some(50))
        );
    }
);

on_both_backends!(
    attempts_are_counted_in_metrics_by_connector_and_outcome,
    |app| {
        six_charges(&app).await;
        converge_server::worker::monitor::refresh(
            &app.running.state.core,
            &app.running.settings.stuck.thresholds(),
        )
        .await
        .unwrap();
        let text = String::from_utf8(app.get("/metrics").await.body).unwrap();
        // The recorder is process-wide (other tests charge too): each outcome is there.
        for outcome in ["success", "decline", "timeout", "5xx"] {
            assert!(
                text.lines()
                    .any(|l| l.starts_with("converge_channel_attempts_total{")
                        && l.contains("connector=\"sandbox\"")
                        && l.contains(&format!("outcome=\"{outcome}\""))),
                "{outcome} in:\n{text}"
            );
        }
        // (Its value is whatever the last monitor of any test's app set: tests tweak it.)
        assert!(
            text.lines()
                .any(|l| l.starts_with("converge_channel_red_threshold_ratio ")),
            "{text}"
        );
        assert!(
            text.contains("converge_channel_attempt_duration_seconds_bucket{connector=\"sandbox\""),
            "{text}"
        );
    }
);

fn attempt(
    payment: &str,
    connector: &str,
    outcome: AttemptOutcome,
    reason: Option<FailureReason>,
    ms: i64,
    at: i64,
) -> NewChannelAttempt {
    NewChannelAttempt {
        payment_id: payment.to_string(),
        connector: connector.to_string(),
        outcome,
        reason,
        duration_ms: ms,
        at,
    }
}

on_both_backends!(
    the_store_reads_attempts_by_time_and_groups_failures_by_reason,
    |app| {
        let now = app.running.state.core.clock.now_ms();
        let p = app.pay("k-s", "o-s", 1000).await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let q = app.pay("k-t", "o-t", 1001).await["id"]
            .as_str()
            .unwrap()
            .to_string();
        let old = now - 2 * 86_400_000;
        for a in [
            attempt(
                &q,
                "backup",
                AttemptOutcome::Undecidable,
                Some(FailureReason::Timeout),
                900,
                now - 60_000,
            ),
            attempt(
                &q,
                "backup",
                AttemptOutcome::Undecidable,
                Some(FailureReason::Timeout),
                950,
                now - 50_000,
            ),
            attempt(
                &q,
                "backup",
                AttemptOutcome::Decline,
                Some(FailureReason::declined("do_not_honor")),
                30,
                now - 40_000,
            ),
            // Two days old: outside every window read below.
            attempt(
                &q,
                "backup",
                AttemptOutcome::Undecidable,
                Some(FailureReason::Dropped),
                10,
                old,
            ),
            attempt(
                &q,
                "backup",
                AttemptOutcome::Undecidable,
                Some(FailureReason::Dropped),
                -5,
                old,
            ),
        ] {
            app.store.record_channel_attempt(&a).await.unwrap();
        }
        let since = now - 3_600_000;
        let rows = app.store.channel_attempts_since(since).await.unwrap();
        // The charge of `p` and of `q` through the API, and the three recent ones.
        let backup: Vec<(String, i64)> = rows
            .iter()
            .filter(|r| r.connector == "backup")
            .map(|r| (r.outcome.clone(), r.duration_ms))
            .collect();
        assert_eq!(
            backup,
            [
                ("undecidable".to_string(), 900),
                ("undecidable".to_string(), 950),
                ("decline".to_string(), 30)
            ]
        );
        assert_eq!(
            rows.iter().filter(|r| r.connector == "sandbox").count(),
            2,
            "{rows:?}"
        );
        assert!(
            rows.windows(2).all(|w| w[0].created_at <= w[1].created_at),
            "oldest first"
        );

        let groups: Vec<(String, i64)> = app
            .store
            .failure_groups_since(since)
            .await
            .unwrap()
            .into_iter()
            .map(|g| (g.reason, g.count))
            .collect();
        assert_eq!(
            groups,
            [
                ("timeout".to_string(), 2),
                ("decline:do_not_honor".to_string(), 1)
            ]
        );
        let all_time = app.store.failure_groups_since(0).await.unwrap();
        let dropped = all_time
            .iter()
            .find(|g| g.reason == "dropped")
            .expect("dropped");
        assert_eq!((dropped.count, dropped.last_at), (2, old));

        let search = |reason: &str| PaymentFilter {
            reason: Some(reason.to_string()),
            limit: 50,
            ..Default::default()
        };
        let found = |v: Vec<converge_server::store::Payment>| {
            v.into_iter().map(|p| p.id).collect::<Vec<_>>()
        };
        assert_eq!(
            found(app.store.search_payments(&search("timeout")).await.unwrap()),
            [q.clone()]
        );
        assert_eq!(
            found(
                app.store
                    .search_payments(&search("decline:do_not_honor"))
                    .await
                    .unwrap()
            ),
            [q.clone()]
        );
        assert!(found(app.store.search_payments(&search("5xx")).await.unwrap()).is_empty());
        assert!(found(app.store.search_payments(&search("fenced")).await.unwrap()).is_empty());
        assert_ne!(p, q);

        // The purge takes what was answered before its cut-off, and nothing after.
        assert_eq!(app.store.purge_channel_attempts(old + 1).await.unwrap(), 2);
        assert_eq!(app.store.purge_channel_attempts(old + 1).await.unwrap(), 0);
        assert!(
            app.store
                .failure_groups_since(0)
                .await
                .unwrap()
                .iter()
                .all(|g| g.reason != "dropped")
        );
        assert_eq!(app.store.channel_attempts_since(0).await.unwrap().len(), 5);
    }
);

#[test]
fn buckets_count_per_minute_and_hour_with_nearest_rank_percentiles() {
    use converge_server::service::dashboard::channel_health;
    use converge_server::store::ChannelAttemptRow;
    let now = 1_000 * 3_600_000 + 30 * 60_000 + 5_000; // hour 1000, minute 30, 5 s in
    let row = |outcome: &str, ms: i64, at: i64| ChannelAttemptRow {
        connector: "sandbox".into(),
        outcome: outcome.into(),
        duration_ms: ms,
        created_at: at,
    };
    let mut rows = vec![
        // Three hours ago: in the day only.
        row("success", 5, now - 3 * 3_600_000),
        // 20 minutes ago: the hour, not the five minutes.
        row("decline", 40, now - 20 * 60_000),
    ];
    // The current minute: 7 successes, 3 timeouts, durations 10..=100.
    for i in 0..10 {
        let outcome = if i < 7 { "success" } else { "undecidable" };
        rows.push(row(outcome, (i + 1) * 10, now - 1_000));
    }
    rows.sort_by_key(|r| r.created_at);
    let t = ChannelThresholds {
        amber_pct: 10,
        red_pct: 30,
    };
    let v = channel_health(rows, Vec::new(), &t, now);
    let c = &v.connectors[0];
    assert_eq!(
        (
            c.last_5m.attempts,
            c.last_5m.successes,
            c.last_5m.undecidable
        ),
        (10, 7, 3)
    );
    assert_eq!((c.last_5m.p50_ms, c.last_5m.p99_ms), (Some(50), Some(100)));
    assert_eq!((c.last_hour.attempts, c.last_hour.declines), (11, 1));
    assert_eq!(c.level, HealthLevel::Red, "3 of 10 is the red line itself");
    assert_eq!(c.minutes.len(), 60);
    assert_eq!(
        c.minutes[59].start,
        now - 5_000,
        "the last minute is the current one"
    );
    assert_eq!(c.minutes[59].attempts, 10);
    assert_eq!(
        c.minutes[39].attempts, 1,
        "20 minutes before the current one"
    );
    assert_eq!(c.hours.len(), 24);
    assert_eq!(c.hours[23].attempts, 11);
    assert_eq!(
        c.hours[20].attempts, 1,
        "three hours before the current one"
    );
    assert_eq!(c.hours[20].p50_ms, Some(5));
    assert_eq!(c.hours[0].p50_ms, None);
    let t = ChannelThresholds {
        amber_pct: 25,
        red_pct: 40,
    };
    let rows = vec![
        row("undecidable", 1, now),
        row("success", 1, now),
        row("success", 1, now),
    ];
    assert_eq!(
        channel_health(rows, Vec::new(), &t, now).connectors[0].level,
        HealthLevel::Amber
    );
}

on_both_backends!(
    a_fenced_payment_is_a_failure_of_its_own_reason,
    |s| {
        // Workers on and quick, no resubmission: the timed-out charge (53, nothing committed)
        // is queried, not found, and its key fenced, so the payment fails.
        s.worker.no_workers = false;
        s.jobs.submit_delay_ms = 200;
        s.jobs.query_delay_ms = 100;
        s.worker.poll_ms = 20;
        s.worker.backoff_base_ms = 20;
        s.worker.backoff_cap_ms = 200;
        s.jobs.resubmit_budget = 0;
        s.jobs.max_attempts = 30;
    },
    |app| {
        let id = app.pay("k-fence", "o-fence", 1053).await["id"]
            .as_str()
            .unwrap()
            .to_string();
        app.wait_for_status(&id, "FAILED", std::time::Duration::from_secs(20))
            .await;
        let c = viewer(&app).await;
        let (_, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
        let count = |reason: &str| {
            d["channels"]["failures"]
                .as_array()
                .unwrap()
                .iter()
                .find(|f| f["reason"] == reason)
                .and_then(|f| f["count"].as_i64())
        };
        assert_eq!(count("fenced"), Some(1), "{d}");
        // The request's charge timed out; the submit job may have sent it again meanwhile
        // (the same key, so the channel charges at most once): each is an attempt.
        assert!(count("timeout").is_some_and(|n| n >= 1), "{d}");
        for reason in ["fenced", "timeout"] {
            let (s, page) = ops_get(&c, &app, &format!("/ops/v1/payments?reason={reason}")).await;
            assert_eq!(s, 200, "{page}");
            assert_eq!(ids_of(&page), [id.clone()], "{reason}");
        }
    }
);

on_both_backends!(
    the_dashboard_shows_each_lanes_backlog_and_the_merchant_who_holds_it,
    |app| {
        use converge_server::store::{JobKind, NewJob};
        let p = app.pay("k-lane", "o-lane", 1000).await;
        let pid = p["id"].as_str().expect("id").to_string();
        let now = chrono::Utc::now().timestamp_millis();
        for _ in 0..3 {
            let job = NewJob {
                kind: JobKind::Refund,
                payment_id: Some(pid.clone()),
                refund_id: None,
                run_at: now - 60_000,
                max_attempts: 5,
            };
            app.store.enqueue_job(&job, "", now).await.unwrap();
        }
        let c = viewer(&app).await;
        let (s, d) = ops_get(&c, &app, "/ops/v1/dashboard").await;
        assert_eq!(s, 200, "{d}");
        let lanes = d["queue"]["lanes"].as_array().expect("lanes");
        let names: Vec<_> = lanes.iter().map(|l| l["lane"].as_str().unwrap()).collect();
        assert_eq!(names, ["forward", "compensation", "delivery", "background"]);
        let comp = &lanes[1];
        assert_eq!(comp["due"], 3, "{comp}");
        assert_eq!(comp["top"], serde_json::json!([["acme", 3]]), "{comp}");
        assert!(comp["oldest_due_at"].as_i64().unwrap() <= now - 60_000);
    }
);

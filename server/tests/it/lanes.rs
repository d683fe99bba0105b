//! The job lanes running in a serving process (issue 37; README "Lanes and fairness"): a slow
//! job holds one worker slot of its lane, never the lane, on both backends. The claim's
//! fairness and each lane's kinds are proven at the store in `conformance.rs`; the token
//! bucket with an injected clock in `domain::lanes`.

use crate::support::*;

use std::time::{Duration, Instant};

use converge_server::channel::webhook_sink::{self, SinkConfig};
use serde_json::{Value, json};

/// How many deliveries the sink at `url` received on `path`.
async fn received_on(url: &str, path: &str) -> usize {
    let all: Value = reqwest::get(format!("{url}/received"))
        .await
        .expect("sink answers")
        .json()
        .await
        .expect("json");
    all["deliveries"]
        .as_array()
        .map_or(0, |d| d.iter().filter(|x| x["path"] == path).count())
}

on_both_backends!(
    a_hanging_delivery_holds_one_slot_and_the_lane_keeps_delivering_others,
    |s| {
        s.worker.no_workers = false;
        s.worker.poll_ms = 50;
        s.lanes.lane_delivery_slots = 2;
        // Far beyond the test: the hanging attempt holds its slot throughout.
        s.webhooks.webhook_timeout_ms = 30_000;
    },
    |app| {
        let sink = webhook_sink::spawn(
            SinkConfig {
                fault_rate: 0.0,
                seed: 1,
            },
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .expect("sink starts");
        let endpoint = |path: &str| {
            json!({"url": format!("{}{path}", sink.url), "enabled_events": ["*"]}).to_string()
        };
        // Merchant A's endpoint hangs; merchant B's answers at once.
        let a = app
            .post_raw(
                &app.api_key,
                "/v1/webhook_endpoints",
                Some("ep-a"),
                &endpoint("/hooks/hang"),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.json());
        let b_key = app.add_merchant("bravo").await;
        let b = app
            .post_raw(
                &b_key,
                "/v1/webhook_endpoints",
                Some("ep-b"),
                &endpoint("/hooks/ok"),
            )
            .await;
        assert_eq!(b.status, 201, "{:?}", b.json());
        app.pay("k-a-1", "a-1", 1000).await;
        eventually(
            Duration::from_secs(10),
            "A's delivery hangs at the sink",
            || async { (received_on(&sink.url, "/hooks/hang").await >= 1).then_some(()) },
        )
        .await;
        // While A's attempt holds one of the lane's two slots, each of B's payments is
        // delivered through the other, one after another: with a batch that waits for its
        // slowest job, none would be before A's 30 s timeout.
        let start = Instant::now();
        for i in 1..=3 {
            let body = json!({"amount": 1000 + i, "currency": "CNY", "merchant_order_id": format!("b-{i}")}).to_string();
            let p = app
                .post_raw(&b_key, "/v1/payments", Some(&format!("k-b-{i}")), &body)
                .await;
            assert_eq!(p.status, 201, "{:?}", p.json());
            eventually(
                Duration::from_secs(10),
                &format!("B's delivery {i}"),
                || async { (received_on(&sink.url, "/hooks/ok").await >= i).then_some(()) },
            )
            .await;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "B's deliveries took {:?}",
            start.elapsed()
        );
        // B's last job is still finishing when the sink has its request: wait for it to end,
        // then only A's remains, in its one slot.
        eventually(
            Duration::from_secs(10),
            "A's delivery still runs, in its one slot, and nothing else",
            || async {
                let leased = app
                    .sql_i64(
                        "SELECT COUNT(*) FROM jobs WHERE kind = 'webhook' AND status = 'leased'",
                        &[],
                    )
                    .await;
                (leased == 1).then_some(())
            },
        )
        .await;
    }
);

/// Runs `sql` on the app's database (a write the store has no call for).
async fn exec(app: &TestApp, sql: &str) {
    match app.store.db_pool() {
        converge_server::store::DbPool::Sqlite(p) => {
            sqlx::query(sql).execute(&p).await.unwrap();
        }
        converge_server::store::DbPool::Postgres(p) => {
            sqlx::query(sql).execute(&p).await.unwrap();
        }
    }
}

on_both_backends!(
    a_refund_storm_toward_one_channel_leaves_another_channel_its_tokens,
    |s| {
        s.lanes.compensation_rate_per_sec = 2;
    },
    |app| {
        use converge_server::domain::clock::{Clock, ManualClock, SystemClock};
        use converge_server::domain::lanes::Lane;
        use converge_server::service::connectors::DEFAULT_CONNECTOR;
        use converge_server::store::{JobKind, NewJob};
        use converge_server::worker::Worker;
        use converge_server::worker::lanes::{LaneConfig, LaneRunner};
        use std::sync::Arc;
        // Merchant A's five payments went to channel "storm", B's one to the sandbox.
        let mut storm = Vec::new();
        for i in 0..5 {
            let p = app.pay(&format!("k-s-{i}"), &format!("s-{i}"), 1000).await;
            storm.push(p["id"].as_str().unwrap().to_string());
        }
        let b_key = app.add_merchant("bravo").await;
        let body = json!({"amount": 700, "currency": "CNY", "merchant_order_id": "b-1"});
        let b = app
            .post_raw(&b_key, "/v1/payments", Some("k-b-1"), &body.to_string())
            .await;
        assert_eq!(b.status, 201, "{:?}", b.json());
        let b_id = b.json()["id"].as_str().unwrap().to_string();
        for id in &storm {
            exec(
                &app,
                &format!("UPDATE payments SET connector = 'storm' WHERE id = '{id}'"),
            )
            .await;
        }
        let clock = ManualClock::new(SystemClock.now_ms() + 60_000);
        let mut core = app.core().clone();
        core.clock = Arc::new(clock.clone());
        let sandbox = core.connectors.named(DEFAULT_CONNECTOR);
        core.connectors = Arc::new(
            core.connectors
                .as_ref()
                .clone()
                .with_connector("storm", sandbox),
        );
        // The storm's refunds are all older than B's one.
        let job = |pid: &str, run_at: i64| NewJob {
            kind: JobKind::Refund,
            payment_id: Some(pid.to_string()),
            refund_id: None,
            run_at,
            max_attempts: 5,
        };
        let now = clock.now_ms();
        let mut storm_jobs = Vec::new();
        for (i, id) in storm.iter().enumerate() {
            let j = app
                .store
                .enqueue_job(&job(id, now - 10_000 + i as i64), "", now)
                .await
                .unwrap();
            storm_jobs.push(j);
        }
        let b_job = app
            .store
            .enqueue_job(&job(&b_id, now - 1_000), "", now)
            .await
            .unwrap();
        let worker = Worker::new(core, app.running.settings.worker.config());
        let lane = LaneRunner::new(
            worker,
            LaneConfig {
                lane: Lane::Compensation,
                slots: 8,
                rate_per_sec: 2.0,
            },
        );
        // One claim at a stopped clock: the storm's channel gets its two tokens' worth,
        // and B's refund its own channel's token (one bucket for all would have given the
        // storm's older refunds both and B's none).
        assert_eq!(lane.claim_once().await.unwrap(), 3);
        let claimed = |id: i64| {
            let app = &app;
            async move {
                app.sql_i64(&format!("SELECT attempts FROM jobs WHERE id = {id}"), &[])
                    .await
            }
        };
        assert_eq!(claimed(b_job).await, 1, "B's refund was claimed");
        let mut storm_claimed = 0;
        for j in &storm_jobs {
            storm_claimed += claimed(*j).await;
        }
        assert_eq!(storm_claimed, 2, "the storm's channel, at its rate");
        // Its bucket empty, the storm's channel gets nothing more until a token comes.
        assert_eq!(lane.claim_once().await.unwrap(), 0);
        clock.advance(500);
        lane.claim_once().await.unwrap();
        let mut storm_claimed = 0;
        for j in &storm_jobs {
            storm_claimed += claimed(*j).await;
        }
        assert_eq!(storm_claimed, 3, "one token in half a second at 2 a second");
    }
);

on_both_backends!(
    an_empty_claim_for_other_channels_waits_a_poll_interval_then_takes_their_jobs,
    |s| {
        s.lanes.compensation_rate_per_sec = 10;
    },
    |app| {
        use converge_server::domain::clock::{Clock, ManualClock, SystemClock};
        use converge_server::domain::lanes::Lane;
        use converge_server::store::{JobKind, NewJob};
        use converge_server::worker::Worker;
        use converge_server::worker::lanes::{LaneConfig, LaneRunner};
        use std::sync::Arc;
        // A payment routed to a connector since removed from the configuration.
        let p = app.pay("k-gone-1", "gone-1", 1000).await;
        let id = p["id"].as_str().unwrap().to_string();
        exec(
            &app,
            &format!("UPDATE payments SET connector = 'gone' WHERE id = '{id}'"),
        )
        .await;
        let clock = ManualClock::new(SystemClock.now_ms() + 60_000);
        let mut core = app.core().clone();
        core.clock = Arc::new(clock.clone());
        let config = app.running.settings.worker.config();
        let poll = i64::try_from(config.poll.as_millis()).unwrap();
        let worker = Worker::new(core, config);
        let lane = LaneRunner::new(
            worker,
            LaneConfig {
                lane: Lane::Compensation,
                slots: 4,
                rate_per_sec: 10.0,
            },
        );
        // Nothing due: the claim for the other channels finds nothing.
        assert_eq!(lane.claim_once().await.unwrap(), 0);
        let now = clock.now_ms();
        let job = NewJob {
            kind: JobKind::Refund,
            payment_id: Some(id.clone()),
            refund_id: None,
            run_at: now - 1_000,
            max_attempts: 5,
        };
        let queued = app.store.enqueue_job(&job, "", now).await.unwrap();
        let attempts = || {
            let app = &app;
            async move {
                app.sql_i64(
                    &format!("SELECT attempts FROM jobs WHERE id = {queued}"),
                    &[],
                )
                .await
            }
        };
        // Within the poll interval that claim is not made again: the job waits.
        clock.advance(poll - 1);
        assert_eq!(lane.claim_once().await.unwrap(), 0);
        assert_eq!(attempts().await, 0, "not claimed within the poll interval");
        // A poll interval after the empty claim, it is.
        clock.advance(1);
        assert_eq!(lane.claim_once().await.unwrap(), 1);
        assert_eq!(attempts().await, 1, "claimed once the interval passed");
    }
);

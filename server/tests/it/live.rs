//! Live pages (issue 17): the store's change marker on both backends, and `GET /ops/v1/live`,
//! the event stream that tells the console what changed in any process on the database,
//! needs a session, and never keeps that session alive.

use std::sync::Arc;
use std::time::{Duration, Instant};

use converge_server::store::{AuditEntry, CreatePayment, NewPayment, Store};
use tokio::sync::mpsc;

const NOW: i64 = 1_764_547_200_000;

fn new_payment(merchant_id: i64, order: &str) -> NewPayment {
    NewPayment {
        id: format!("pay_live_{order}"),
        merchant_id,
        merchant_order_id: order.into(),
        amount: 1999,
        currency: "CNY".into(),
        description: String::new(),
        params_hash: "h".into(),
        channel_key: format!("ck_live_{order}"),
        connector: "sandbox".into(),
        now: NOW,
        submit_due_at: NOW + 60_000,
        max_attempts: 5,
        recovery_key: None,
        capture_mode: Default::default(),
    }
}

async fn create(store: &Arc<dyn Store>, merchant_id: i64, order: &str) -> String {
    match store
        .create_payment(&new_payment(merchant_id, order))
        .await
        .expect("payment")
    {
        CreatePayment::Created(p) => p.id,
        other => panic!("payment {order} existed: {other:?}"),
    }
}

fn request_audit(payment_id: &str) -> AuditEntry {
    AuditEntry {
        at: NOW,
        actor: "olga".into(),
        roles: "viewer,operator".into(),
        action: "action_requested".into(),
        target: format!("payment:{payment_id}"),
        reason: "customer asked".into(),
        before: String::new(),
        after: String::new(),
        meta: "{}".into(),
    }
}

store_conformance!(
    the_change_marker_moves_with_each_change_and_names_what_changed,
    |store| {
        let m = store
            .create_merchant("acme", "live-hash", NOW)
            .await
            .expect("merchant")
            .id;
        let m0 = store.change_marker().await.unwrap();
        assert_eq!(
            store.change_marker().await.unwrap(),
            m0,
            "no change, same marker"
        );

        let a = create(&store, m, "a").await;
        let m1 = store.change_marker().await.unwrap();
        assert_ne!(m1, m0, "a new payment moves the marker");
        let set = store.changes_since(&m0, 100).await.unwrap();
        assert!(set.payments.contains(&a), "{set:?}");
        assert!(!set.actions && !set.truncated, "{set:?}");

        store.append_audit(&request_audit(&a)).await.unwrap();
        let m2 = store.change_marker().await.unwrap();
        assert_ne!(m2, m1, "an audit record moves the marker");
        let set = store.changes_since(&m1, 100).await.unwrap();
        assert!(set.actions, "a request is an approvals change: {set:?}");
        assert!(set.payments.contains(&a), "{set:?}");

        // Sign-ins are audited too, but they are no request.
        let mut login = request_audit(&a);
        login.action = "login".into();
        login.target = "user:olga".into();
        store.append_audit(&login).await.unwrap();
        let set = store
            .changes_since(&store.change_marker().await.unwrap(), 100)
            .await
            .unwrap();
        assert!(!set.actions, "{set:?}");

        // A pause's records name the pauses (issue 41), and no money request.
        let mut pause = request_audit(&a);
        pause.action = "pause_requested".into();
        pause.target = "pause:pz_1".into();
        let before = store.change_marker().await.unwrap();
        store.append_audit(&pause).await.unwrap();
        let set = store.changes_since(&before, 100).await.unwrap();
        assert!(set.pauses && !set.actions, "{set:?}");

        // More payments than the limit: named up to the limit, and said to be more.
        let m3 = store.change_marker().await.unwrap();
        let later = converge_server::store::ChangeMarker {
            payments_at: NOW + 1,
            jobs_at: NOW + 1,
            ..m3
        };
        let mut ids = Vec::new();
        for order in ["b", "c", "d"] {
            let mut p = new_payment(m, order);
            p.now = NOW + 5;
            match store.create_payment(&p).await.unwrap() {
                CreatePayment::Created(p) => ids.push(p.id),
                other => panic!("{other:?}"),
            }
        }
        let set = store.changes_since(&later, 2).await.unwrap();
        assert!(set.truncated, "{set:?}");
        assert_eq!(set.payments.len(), 2, "{set:?}");
        let set = store.changes_since(&later, 100).await.unwrap();
        assert!(!set.truncated);
        for id in &ids {
            assert!(set.payments.contains(id), "{id} in {set:?}");
        }
        assert!(!set.payments.contains(&a), "{set:?}");
    }
);

/// One server-sent event: its name and data.
type Sse = (String, String);

/// Opens `GET /ops/v1/live` with `client`; the events arrive on the receiver as they are
/// read, then `("closed", "")` when the stream ends.
async fn open_stream(client: &reqwest::Client, base: &str) -> mpsc::UnboundedReceiver<Sse> {
    let mut resp = client
        .get(format!("{base}/ops/v1/live"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream opened");
    assert_eq!(resp.status().as_u16(), 200);
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut buf = String::new();
        while let Ok(Some(chunk)) = resp.chunk().await {
            buf.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buf.find("\n\n") {
                let block: String = buf.drain(..end + 2).collect();
                let (mut name, mut data) = (String::from("message"), String::new());
                let mut comment = true;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim().to_string();
                        comment = false;
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim());
                        comment = false;
                    }
                }
                if !comment {
                    let _ = tx.send((name, data));
                }
            }
        }
        let _ = tx.send(("closed".into(), String::new()));
    });
    rx
}

/// Waits up to `within` for an event that `pick` accepts; returns it and how long it took.
async fn wait_for(
    events: &mut mpsc::UnboundedReceiver<Sse>,
    within: Duration,
    what: &str,
    pick: impl Fn(&Sse) -> bool,
) -> (Sse, Duration) {
    let start = Instant::now();
    loop {
        let left = within.saturating_sub(start.elapsed());
        match tokio::time::timeout(left, events.recv()).await {
            Ok(Some(ev)) if pick(&ev) => return (ev, start.elapsed()),
            Ok(Some(ev)) if ev.0 == "closed" => panic!("the stream closed before {what}"),
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => panic!("no {what} within {within:?}"),
        }
    }
}

fn names(ev: &Sse, topic: &str) -> bool {
    ev.0 == "change"
        && serde_json::from_str::<serde_json::Value>(&ev.1)
            .ok()
            .and_then(|v| v["topics"].as_array().cloned())
            .is_some_and(|t| t.iter().any(|t| t == topic))
}

on_both_backends!(the_live_stream_needs_a_session, |app| {
    let r = reqwest::Client::new()
        .get(format!("{}/ops/v1/live", app.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_authenticated");
});

on_both_backends!(
    the_live_stream_reports_a_change_made_through_another_store_within_a_second,
    |app| {
        app.skip_invariant_check(
            "writes payments straight into the store, dated the fixed NOW of a year ago and never submitted: PENDING past any window by construction",
        );
        crate::support::add_ops_user(&app, "vera", "viewer").await;
        let client = crate::support::ops_session(&app, "vera").await;
        let mut events = open_stream(&client, &app.base).await;
        wait_for(&mut events, Duration::from_secs(5), "ready", |e| {
            e.0 == "ready"
        })
        .await;

        // Another handle on the same database: what another `serve`, a worker or a callback
        // handler on it would write with.
        let other = converge_server::startup::open_store(&app.db_url)
            .await
            .expect("second store");
        let id = create(&other, app.merchant_id, "seen-live").await;
        let topic = format!("payment:{id}");
        let (_, took) = wait_for(&mut events, Duration::from_secs(1), &topic, |e| {
            names(e, &topic)
        })
        .await;
        assert!(took < Duration::from_secs(1), "{took:?}");

        other.append_audit(&request_audit(&id)).await.unwrap();
        let (ev, took) = wait_for(&mut events, Duration::from_secs(1), "approvals", |e| {
            names(e, "approvals")
        })
        .await;
        assert!(took < Duration::from_secs(1), "{took:?}");
        assert!(names(&ev, &topic) && names(&ev, "dashboard"), "{ev:?}");

        // A payment made through another serving process's merchant API.
        let (peer, _peer_core) = app.spawn_peer(|_| {}).await;
        let r = app
            .client
            .post(format!("{peer}/v1/payments"))
            .bearer_auth(&app.api_key)
            .header("Idempotency-Key", "live-via-peer")
            .json(&serde_json::json!({"merchant_order_id": "via-peer", "amount": 1250, "currency": "CNY"}))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        let made: serde_json::Value = r.json().await.unwrap();
        let topic = format!("payment:{}", made["id"].as_str().unwrap());
        let (_, took) = wait_for(&mut events, Duration::from_secs(1), &topic, |e| {
            names(e, &topic)
        })
        .await;
        assert!(took < Duration::from_secs(1), "{took:?}");
        other.close().await;
    }
);

on_both_backends!(
    the_live_stream_does_not_keep_the_session_alive_and_ends_with_it,
    |s| {
        s.session.idle_timeout_secs = 2;
    },
    |app| {
        app.skip_invariant_check(
            "writes payments straight into the store, dated the fixed NOW of a year ago and never submitted: PENDING past any window by construction",
        );
        crate::support::add_ops_user(&app, "vera", "viewer").await;
        let client = crate::support::ops_session(&app, "vera").await;
        let opened = Instant::now();
        let mut events = open_stream(&client, &app.base).await;
        wait_for(&mut events, Duration::from_secs(5), "ready", |e| {
            e.0 == "ready"
        })
        .await;
        // Changes keep coming while nobody uses the console.
        let other = converge_server::startup::open_store(&app.db_url)
            .await
            .expect("second store");
        for order in ["idle-1", "idle-2", "idle-3"] {
            create(&other, app.merchant_id, order).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // The idle timeout (2 s) plus one session check (2 s), and some slack.
        let (ev, _) = wait_for(&mut events, Duration::from_secs(8), "the end", |e| {
            e.0 == "end"
        })
        .await;
        assert_eq!(ev.1, "session_ended");
        assert!(
            opened.elapsed() >= Duration::from_secs(2),
            "not before the idle timeout"
        );
        wait_for(&mut events, Duration::from_secs(2), "the close", |e| {
            e.0 == "closed"
        })
        .await;
        let me = client
            .get(format!("{}/ops/v1/me", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(me.status().as_u16(), 401, "the session is over");
        let again = client
            .get(format!("{}/ops/v1/live", app.base))
            .send()
            .await
            .unwrap();
        assert_eq!(again.status().as_u16(), 401, "and no stream opens on it");
        other.close().await;
    }
);

on_both_backends!(signing_out_ends_the_live_stream, |app| {
    crate::support::add_ops_user(&app, "vera", "viewer").await;
    let client = crate::support::ops_session(&app, "vera").await;
    let mut events = open_stream(&client, &app.base).await;
    wait_for(&mut events, Duration::from_secs(5), "ready", |e| {
        e.0 == "ready"
    })
    .await;
    let out = client
        .post(format!("{}/ops/v1/logout", app.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(out.status().as_u16(), 204);
    // Within one session check (2 s).
    let (ev, _) = wait_for(&mut events, Duration::from_secs(4), "the end", |e| {
        e.0 == "end"
    })
    .await;
    assert_eq!(ev.1, "session_ended");
});

/// `GET /ops/v1/live` with `client`: the status and, when it opened, the response (held open).
async fn try_stream(client: &reqwest::Client, base: &str) -> (u16, reqwest::Response) {
    let r = client
        .get(format!("{base}/ops/v1/live"))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("sent");
    (r.status().as_u16(), r)
}

// Issue 36: one session cannot hold the server's connections and tasks with unbounded
// streams. A second session of the same user has its own allowance, and a stream that closes
// gives its place back.
on_both_backends!(a_session_holds_at_most_eight_live_streams, |app| {
    use converge_server::ops::live::MAX_STREAMS_PER_SESSION;
    assert_eq!(MAX_STREAMS_PER_SESSION, 8);
    crate::support::add_ops_user(&app, "vera", "viewer").await;
    let client = crate::support::ops_session(&app, "vera").await;
    let mut open = Vec::new();
    for i in 0..MAX_STREAMS_PER_SESSION {
        let (status, r) = try_stream(&client, &app.base).await;
        assert_eq!(status, 200, "stream {i}");
        open.push(r);
    }
    let (status, r) = try_stream(&client, &app.base).await;
    assert_eq!(status, 429);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_many_live_streams");
    // Another session (another tab signed in afresh, or another person) is not affected.
    let other = crate::support::ops_session(&app, "vera").await;
    let (status, _kept) = try_stream(&other, &app.base).await;
    assert_eq!(status, 200, "another session opens its own");
    // Closing one stream frees its place: the server sees the closed connection at once
    // (hyper watches for end of input while it streams), without waiting for a write.
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (status, r) = try_stream(&client, &app.base).await;
        if status == 200 {
            open.push(r);
            break;
        }
        assert_eq!(status, 429);
        assert!(
            Instant::now() < deadline,
            "the closed stream's place never came back"
        );
    }
    let (status, _) = try_stream(&client, &app.base).await;
    assert_eq!(status, 429, "still eight at most");
});

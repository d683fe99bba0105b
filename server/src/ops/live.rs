//! Live pages (issue 17): `GET /ops/v1/live`, a server-sent event stream that tells the
//! console what changed, so the dashboard, the approvals inbox and an open payment page
//! fetch again within a second of a change made by any process on the database.
//!
//! The database is the one thing every `serve` and `worker` process shares, so an in-process
//! signal would miss a change made next door. Instead each serving process runs one watcher
//! task, only while someone is subscribed: every [`WATCH_EVERY`] it reads the store's
//! [`ChangeMarker`] (one query of index probes), and when the marker moved it asks which
//! payments changed ([`crate::store::Live::changes_since`]) and sends one [`Change`] to all its
//! subscribers through a broadcast channel. The stream is a background request by
//! construction: it never touches the session, so an open console still reaches its idle
//! timeout; and it checks the session again every [`SESSION_CHECK_EVERY`] (fresh from the
//! session store, as another request or a logout may have changed it), ending with an `end`
//! event when the session is over.

use converge_wire::ErrorCode;
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::Serialize;
use tokio::sync::{broadcast, watch};
use tower_sessions::Session;
use tower_sessions::session::Id;

use super::OpsState;
use super::session::{Activity, SessionBackend};
use crate::domain::roles::Permission;
use crate::error::{ApiError, ErrorBody};
use crate::store::{ChangeMarker, ChangeSet, Store};

/// How often the watcher reads the change marker: changes reach the console within about
/// this long plus one fetch.
pub const WATCH_EVERY: Duration = Duration::from_millis(300);
/// The dashboard's ages and time windows move with the clock, not only with the data: it is
/// named at least this often even when nothing changed.
pub const CLOCK_EVERY: Duration = Duration::from_secs(15);
/// How often an open stream checks that its session is still valid.
pub const SESSION_CHECK_EVERY: Duration = Duration::from_secs(2);
/// Comment lines keep idle connections (and proxies between) from timing out.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The browser's reconnection delay after a dropped stream (the SSE `retry` field).
pub const RETRY: Duration = Duration::from_secs(2);
/// Payments named one by one in a change; beyond this the change says `payment:*`.
pub const MAX_PAYMENTS: i64 = 100;
/// Streams one session may hold open at once in one process (one per console tab; a browser
/// opens at most six connections to a host over HTTP/1.1 anyway). Beyond it a new stream is
/// refused with 429 `too_many_live_streams`, so one session cannot tie up the server's
/// connections and tasks (issue 36).
pub const MAX_STREAMS_PER_SESSION: usize = 8;

/// Topic: anything the dashboard shows.
pub const DASHBOARD: &str = "dashboard";
/// Topic: the approvals inbox (a request made, decided or gone stale).
pub const APPROVALS: &str = "approvals";
/// Topic: some payment changed (lists of payments).
pub const PAYMENTS: &str = "payments";
/// Topic: every payment page should look again (too many changed to name).
pub const ALL_PAYMENTS: &str = "payment:*";
/// Topic: the emergency switch's pauses (the banner on every page, the pauses page).
pub const PAUSES: &str = "pauses";

/// The data of a `change` event: what changed, as topics. `dashboard`, `approvals`,
/// `pauses`, `payments`, `payment:<id>` (that payment's page) or `payment:*` (every payment
/// page).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(example = json!({"topics": ["dashboard", "approvals", "payments", "payment:pay_7f3a9c2e4b1d8f6a0c5e2b9d"]}))]
pub struct Change {
    /// What changed.
    pub topics: Vec<String>,
}

impl Change {
    /// Everything, for a subscriber that fell behind and lost changes.
    pub fn everything() -> Self {
        Change {
            topics: [DASHBOARD, APPROVALS, PAUSES, PAYMENTS, ALL_PAYMENTS]
                .map(String::from)
                .to_vec(),
        }
    }

    /// The topics of `set`: the dashboard always (it summarises every table the marker
    /// watches), the approvals inbox when a request or a pause moved or a payment with a
    /// pending request did (it may be stale now), the pauses when one moved, each changed
    /// payment.
    pub fn of(set: &ChangeSet) -> Self {
        let mut topics = vec![DASHBOARD.to_string()];
        if set.actions || set.pending || set.pauses {
            topics.push(APPROVALS.into());
        }
        if set.pauses {
            topics.push(PAUSES.into());
        }
        if !set.payments.is_empty() || set.truncated {
            topics.push(PAYMENTS.into());
        }
        if set.truncated {
            topics.push(ALL_PAYMENTS.into());
        }
        topics.extend(set.payments.iter().map(|id| format!("payment:{id}")));
        Change { topics }
    }
}

/// One process's watcher and its subscribers.
pub struct LiveHub {
    store: Arc<dyn Store>,
    sessions: SessionBackend,
    tx: broadcast::Sender<Arc<Change>>,
    /// Whether the watcher task runs; it stops when the last subscriber has gone.
    running: Mutex<bool>,
    stop: watch::Sender<bool>,
    /// Open streams per session (only sessions with at least one).
    open: Mutex<HashMap<Id, usize>>,
}

/// One open stream's place in its session's count, given back when the stream is dropped
/// (the client went away, the session ended, the server stops).
struct Slot {
    hub: Arc<LiveHub>,
    session: Id,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.hub.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.session) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.session);
            }
        }
    }
}

impl LiveHub {
    /// A hub over `store`, checking sessions in `sessions`. Nothing runs until the first
    /// subscriber.
    pub fn new(store: Arc<dyn Store>, sessions: SessionBackend) -> Arc<Self> {
        let (tx, _) = broadcast::channel(64);
        let (stop, _) = watch::channel(false);
        Arc::new(LiveHub {
            store,
            sessions,
            tx,
            running: Mutex::new(false),
            stop,
            open: Mutex::new(HashMap::new()),
        })
    }

    /// A place for one more stream of `session`, or None when it holds
    /// [`MAX_STREAMS_PER_SESSION`] already.
    fn take_slot(self: &Arc<Self>, session: Id) -> Option<Slot> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(session).or_insert(0);
        if *n >= MAX_STREAMS_PER_SESSION {
            return None;
        }
        *n += 1;
        Some(Slot {
            hub: self.clone(),
            session,
        })
    }

    /// A receiver of every change from now on; starts the watcher if it is not running.
    pub fn subscribe(self: &Arc<Self>) -> broadcast::Receiver<Arc<Change>> {
        let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let rx = self.tx.subscribe();
        if !*running {
            *running = true;
            tokio::spawn(self.clone().watch());
        }
        rx
    }

    /// Ends every open stream (with `end` `server_stopping`): a server shutting down
    /// gracefully waits for its open requests, and a stream would never finish by itself.
    pub fn close(&self) {
        self.stop.send_replace(true);
    }

    /// Subscribers right now (for tests and logs).
    pub fn subscribers(&self) -> usize {
        self.tx.receiver_count()
    }

    async fn watch(self: Arc<Self>) {
        let mut last = self.store.change_marker().await.ok();
        let mut tick = tokio::time::interval(WATCH_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_sent = Instant::now();
        let mut failing = false;
        loop {
            tick.tick().await;
            {
                // Under the lock `subscribe` takes, so a subscriber arriving now either is
                // counted here or finds the watcher stopped and starts another.
                let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
                if self.tx.receiver_count() == 0 {
                    *running = false;
                    return;
                }
            }
            let change = match self.poll(last.as_ref()).await {
                Ok((marker, change)) => {
                    if failing {
                        tracing::info!("live console: change watch works again");
                        failing = false;
                    }
                    last = Some(marker);
                    change
                }
                Err(e) => {
                    // Once per outage, not three times a second.
                    if !failing {
                        tracing::warn!(error = %e, "live console: cannot read the change marker");
                        failing = true;
                    }
                    continue;
                }
            };
            let change = change.or_else(|| {
                (last_sent.elapsed() >= CLOCK_EVERY).then(|| Change {
                    topics: vec![DASHBOARD.into()],
                })
            });
            if let Some(c) = change {
                last_sent = Instant::now();
                let _ = self.tx.send(Arc::new(c));
            }
        }
    }

    /// The marker now and, when it moved since `last`, what changed (everything when there
    /// is no earlier marker to compare with).
    async fn poll(
        &self,
        last: Option<&ChangeMarker>,
    ) -> Result<(ChangeMarker, Option<Change>), crate::store::StoreError> {
        let marker = self.store.change_marker().await?;
        let change = match last {
            Some(prev) if *prev == marker => None,
            Some(prev) => Some(Change::of(
                &self.store.changes_since(prev, MAX_PAYMENTS).await?,
            )),
            None => Some(Change::everything()),
        };
        Ok((marker, change))
    }
}

fn not_signed_in() -> ApiError {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        ErrorCode::NotAuthenticated,
        "sign in first",
    )
}

/// The data of the `ready` event.
#[derive(Debug, Clone, Copy, Serialize, utoipa::ToSchema)]
pub struct Ready {
    /// The server's time, epoch ms UTC.
    pub now: i64,
    /// When a payment or a job last changed, epoch ms UTC (0: never): a page loaded before
    /// that should fetch again.
    pub changed_at: i64,
}

/// Where an open stream is.
enum Phase {
    Hello(Ready),
    Open,
    Done,
}

struct Subscription {
    phase: Phase,
    rx: broadcast::Receiver<Arc<Change>>,
    stop: watch::Receiver<bool>,
    check: tokio::time::Interval,
    st: OpsState,
    session: Id,
    _slot: Slot,
}

impl Subscription {
    /// Whether the session is still valid, read fresh from the session store (the request's
    /// own copy was loaded when the stream opened). A background check: it never extends
    /// the session. A store error keeps the stream: the next check tries again.
    async fn session_valid(&self) -> bool {
        let fresh = Session::new(
            Some(self.session),
            Arc::new(self.st.live.sessions.clone()),
            None,
        );
        let now = self.st.core.clock.now_ms();
        match self
            .st
            .auth
            .current(
                self.st.core.store.as_ref(),
                &fresh,
                now,
                Activity::Background,
            )
            .await
        {
            Ok(p) => p.is_some(),
            Err(e) => {
                tracing::warn!(error = %e, "live console: session check failed");
                true
            }
        }
    }
}

fn change_event(c: &Change) -> Event {
    Event::default()
        .event("change")
        .data(serde_json::to_string(c).unwrap_or_default())
}

fn end_event(why: &str) -> Event {
    Event::default().event("end").data(why)
}

async fn next_event(mut s: Subscription) -> Option<(Result<Event, Infallible>, Subscription)> {
    match s.phase {
        Phase::Done => return None,
        Phase::Hello(ready) => {
            s.phase = Phase::Open;
            let hello = Event::default()
                .event("ready")
                .retry(RETRY)
                .data(serde_json::to_string(&ready).unwrap_or_default());
            return Some((Ok(hello), s));
        }
        Phase::Open => {}
    }
    loop {
        // Decided first, acted on after: the branches borrow `s`, the answer moves it.
        let next = tokio::select! {
            r = s.rx.recv() => match r {
                Ok(c) => Next::Change(c),
                Err(broadcast::error::RecvError::Lagged(_)) => Next::Lagged,
                Err(broadcast::error::RecvError::Closed) => Next::Stop,
            },
            _ = s.check.tick() => Next::Check,
            _ = s.stop.wait_for(|stop| *stop) => Next::Stop,
        };
        match next {
            Next::Change(c) => return Some((Ok(change_event(&c)), s)),
            // Changes were lost: look at everything again.
            Next::Lagged => return Some((Ok(change_event(&Change::everything())), s)),
            Next::Check => {
                if !s.session_valid().await {
                    s.phase = Phase::Done;
                    return Some((Ok(end_event("session_ended")), s));
                }
            }
            Next::Stop => {
                s.phase = Phase::Done;
                return Some((Ok(end_event("server_stopping")), s));
            }
        }
    }
}

/// What woke an open stream.
enum Next {
    Change(Arc<Change>),
    Lagged,
    Check,
    Stop,
}

#[utoipa::path(
    get,
    path = "/live",
    tag = "ops",
    operation_id = "ops_live",
    summary = "Live changes (server-sent events)",
    description = "A `text/event-stream` that never ends by itself. First `event: ready` with `data` a JSON `{\"now\": ms, \"changed_at\": ms}` (when a payment or job last changed: a page loaded before then should fetch again); then `event: change` with `data` a JSON `{\"topics\": [...]}` whenever anything the console shows changed, in any process sharing the database (about 0.3 s after the change); `dashboard` is also named every 15 s for its clock-driven figures. Topics: `dashboard`, `approvals`, `payments`, `payment:<id>`, `payment:*` (too many to name). Comment lines keep the connection open. The stream is a background request (it never restarts the session's idle timeout); when the session ends (idle or absolute timeout, logout, user disabled) or the server stops, it sends `event: end` with `data` `session_ended` or `server_stopping` and closes. After a dropped stream, refetch what is shown: changes made meanwhile are not replayed.",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "The event stream (`ready`, `change` with a Change as data, `end`)", content_type = "text/event-stream", body = String, example = json!("event: ready\ndata: {\"now\":1764547200500,\"changed_at\":1764547200120}\nretry: 2000\n\nevent: change\ndata: {\"topics\":[\"dashboard\",\"approvals\",\"payments\",\"payment:pay_7f3a9c2e4b1d8f6a0c5e2b9d\"]}\n\n")),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "The user's roles do not allow this", body = ErrorBody, example = json!({"error": {"code": "forbidden", "message": "your roles do not allow this"}})),
        (status = 429, description = "This session already holds the most live streams one session may open (8); close one first", body = ErrorBody, example = json!({"error": {"code": "too_many_live_streams", "message": "this session already has 8 live streams open; close one first"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
pub async fn live(
    State(st): State<OpsState>,
    session: Session,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let now = st.core.clock.now_ms();
    // Background whatever the request says: watching is not using.
    let p = st
        .auth
        .current(st.core.store.as_ref(), &session, now, Activity::Background)
        .await?
        .ok_or_else(not_signed_in)?;
    p.require(Permission::View)?;
    let id = session.id().ok_or_else(not_signed_in)?;
    let slot = st.live.take_slot(id).ok_or_else(|| {
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::TooManyLiveStreams,
            format!(
                "this session already has {MAX_STREAMS_PER_SESSION} live streams open; close one first"
            ),
        )
    })?;
    // When the data last changed, for the `ready` event: a page loaded just before the stream
    // opened may have missed a change in between, and only the browser knows when it loaded.
    let marker = st.core.store.change_marker().await?;
    let hello = Ready {
        now,
        changed_at: marker.payments_at.max(marker.jobs_at),
    };
    let mut check = tokio::time::interval_at(
        tokio::time::Instant::now() + SESSION_CHECK_EVERY,
        SESSION_CHECK_EVERY,
    );
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let sub = Subscription {
        phase: Phase::Hello(hello),
        rx: st.live.subscribe(),
        stop: st.live.stop.subscribe(),
        check,
        session: id,
        st,
        _slot: slot,
    };
    let stream = futures_util::stream::unfold(sub, next_event);
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_names_the_dashboard_and_each_payment() {
        let set = ChangeSet {
            payments: ["pay_a".to_string(), "pay_b".to_string()].into(),
            ..ChangeSet::default()
        };
        assert_eq!(
            Change::of(&set).topics,
            ["dashboard", "payments", "payment:pay_a", "payment:pay_b"]
        );
    }

    #[test]
    fn a_moved_request_or_a_pending_payment_names_the_approvals() {
        for set in [
            ChangeSet {
                actions: true,
                ..ChangeSet::default()
            },
            ChangeSet {
                pending: true,
                payments: ["pay_a".to_string()].into(),
                ..ChangeSet::default()
            },
        ] {
            assert!(Change::of(&set).topics.contains(&APPROVALS.to_string()));
        }
        assert!(
            !Change::of(&ChangeSet::default())
                .topics
                .contains(&APPROVALS.to_string())
        );
    }

    #[test]
    fn a_moved_pause_names_the_pauses_and_the_approvals() {
        let set = ChangeSet {
            pauses: true,
            ..ChangeSet::default()
        };
        assert_eq!(
            Change::of(&set).topics,
            ["dashboard", "approvals", "pauses"]
        );
    }

    #[test]
    fn too_many_payments_send_every_payment_page_looking() {
        let set = ChangeSet {
            truncated: true,
            ..ChangeSet::default()
        };
        assert!(Change::of(&set).topics.contains(&ALL_PAYMENTS.to_string()));
    }
}

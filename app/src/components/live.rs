//! Live pages (issue 17): one `EventSource` per console tab on `GET /ops/v1/live`, opened by
//! the signed-in frame. Pages say which topics they show ([`use_live`]: `dashboard`,
//! `approvals`, `payment:<id>`) and get a counter that moves when one of them changed; they
//! put it in their resources' sources and fetch again with a background server function,
//! which does not keep the session alive. While the stream is down (the browser reconnects
//! by itself; a refused stream is opened again every [`RECONNECT_SECS`]) every page polls
//! every [`POLL_SECS`] instead, and only while the tab is visible.
//!
//! A page is never redrawn under someone working on it: while a form is open or busy
//! (anything in the page marked `data-live-hold`) or a field in the page has the focus, the
//! update waits, and it lands when they are done. A redraw that takes the focused button or
//! message with it gives the focus to its new copy (same `id` or `data-testid`), so keyboard
//! users keep their place.

// The server renders the pages but never holds the stream: the feed's machinery is used by
// the browser build only.
#![cfg_attr(not(feature = "hydrate"), allow(dead_code))]

use std::sync::Arc;

use leptos::prelude::*;

/// How the console learns of changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// The stream is opening (the first moments of a page).
    Connecting,
    /// The stream is open: pages update as soon as something changes.
    Live,
    /// The stream is down: pages poll.
    Polling,
}

/// Seconds between polls while the stream is down.
pub const POLL_SECS: u64 = 5;
/// Seconds before a stream the server refused (or that ended) is opened again.
pub const RECONNECT_SECS: u64 = 10;
/// The timer's period, ms: how soon a held-back update lands once the page is free.
const TICK_MS: u64 = 250;
/// A page fetches again at most once a second, in ticks.
const MIN_GAP_TICKS: u64 = 1000 / TICK_MS;

type Wants = Arc<dyn Fn(&str) -> bool + Send + Sync>;

struct Sub {
    id: u64,
    wants: Wants,
    version: RwSignal<u64>,
    /// A change arrived that the page has not fetched yet.
    owed: bool,
    /// Tick of the last fetch.
    last: u64,
}

/// The stream's state, shared by the frame and its pages.
#[derive(Clone, Copy)]
pub struct LiveFeed {
    /// How pages are kept fresh now.
    pub mode: RwSignal<Mode>,
    subs: StoredValue<Vec<Sub>>,
    next_id: StoredValue<u64>,
    /// Timer ticks since the frame started.
    ticks: StoredValue<u64>,
    last_poll: StoredValue<u64>,
}

impl LiveFeed {
    fn new() -> Self {
        LiveFeed {
            mode: RwSignal::new(Mode::Connecting),
            subs: StoredValue::new(Vec::new()),
            next_id: StoredValue::new(0),
            ticks: StoredValue::new(0),
            last_poll: StoredValue::new(0),
        }
    }

    /// Marks the pages that show any of `topics` (all of them for `None`) as owing a fetch,
    /// then fetches what may be fetched now.
    fn changed(&self, topics: Option<&[String]>) {
        self.subs.update_value(|subs| {
            for s in subs.iter_mut() {
                if topics.is_none_or(|t| t.iter().any(|t| (s.wants)(t))) {
                    s.owed = true;
                }
            }
        });
        self.flush();
    }

    /// Fetches for every page that owes one, unless the page is held or fetched less than a
    /// second ago (those wait for a later tick).
    fn flush(&self) {
        if held() {
            return;
        }
        let now = self.ticks.get_value();
        let mut due = Vec::new();
        self.subs.update_value(|subs| {
            for s in subs.iter_mut() {
                if s.owed && now.saturating_sub(s.last) >= MIN_GAP_TICKS {
                    s.owed = false;
                    s.last = now;
                    due.push(s.version);
                }
            }
        });
        if !due.is_empty() {
            keep_focus();
            for v in due {
                v.update(|n| *n = n.wrapping_add(1));
            }
        }
    }
}

/// Provides the feed to the frame's pages and, in the browser, opens the stream and starts
/// the timer; both stop when the frame goes (sign-out).
pub fn provide_live() -> LiveFeed {
    let feed = LiveFeed::new();
    provide_context(feed);
    #[cfg(feature = "hydrate")]
    Effect::new(move |_| browser::start(feed));
    feed
}

/// A counter that moves whenever something a page shows changed: `wants` says which
/// topics (`dashboard`, `approvals`, `pauses`, `payments`, `payment:<id>`, `payment:*`) it shows. Outside
/// the signed-in frame it never moves.
pub fn use_live(wants: impl Fn(&str) -> bool + Send + Sync + 'static) -> ReadSignal<u64> {
    let version = RwSignal::new(0u64);
    if let Some(feed) = use_context::<LiveFeed>() {
        let id = feed.next_id.get_value();
        feed.next_id.set_value(id + 1);
        let last = feed.ticks.get_value();
        feed.subs.update_value(|subs| {
            subs.push(Sub {
                id,
                wants: Arc::new(wants),
                version,
                owed: false,
                last,
            })
        });
        on_cleanup(move || {
            let _ = feed
                .subs
                .try_update_value(|subs| subs.retain(|s| s.id != id));
        });
    }
    version.read_only()
}

/// Whether the page's next fetch should be a background one: true once `live` moved past
/// what `seen` remembers (and remembers it). For resources keyed on a live counter beside
/// the person's own refresh counter.
pub fn moved(live: u64, seen: StoredValue<u64>) -> bool {
    let moved = live != seen.get_value();
    seen.set_value(live);
    moved
}

/// The console's state of the stream, small in the footer.
#[component]
pub fn LiveBadge() -> impl IntoView {
    let feed = use_context::<LiveFeed>();
    let mode = move || feed.map_or(Mode::Connecting, |f| f.mode.get());
    view! {
        <span
            class=move || match mode() {
                Mode::Live => "live-state live",
                Mode::Polling => "live-state polling",
                Mode::Connecting => "live-state",
            }
            data-testid="live-state"
            data-mode=move || match mode() {
                Mode::Live => "live",
                Mode::Polling => "polling",
                Mode::Connecting => "connecting",
            }
            title=move || match mode() {
                Mode::Live => "Pages update as soon as something changes.".to_string(),
                Mode::Polling => format!("The live stream is down: pages look again every {POLL_SECS} s."),
                Mode::Connecting => "Connecting to the live stream.".to_string(),
            }
        >
            {move || match mode() {
                Mode::Live => "live".to_string(),
                Mode::Polling => format!("polling every {POLL_SECS} s"),
                Mode::Connecting => "connecting…".to_string(),
            }}
        </span>
    }
}

/// Whether someone is working on the page: a form open or busy (`data-live-hold`), a field
/// with the focus, or the tab hidden (nobody looks; the update lands when it shows again).
fn held() -> bool {
    #[cfg(feature = "hydrate")]
    {
        let doc = document();
        if doc.hidden() {
            return true;
        }
        if doc
            .query_selector("main [data-live-hold]")
            .ok()
            .flatten()
            .is_some()
        {
            return true;
        }
        if let Some(el) = doc.active_element() {
            let tag = el.tag_name().to_ascii_lowercase();
            if matches!(tag.as_str(), "input" | "textarea" | "select")
                && el.closest("main").ok().flatten().is_some()
            {
                return true;
            }
        }
        false
    }
    #[cfg(not(feature = "hydrate"))]
    false
}

/// When a redraw removes the focused element of the page, focuses its new copy (found by
/// `id` or `data-testid`), or the page itself when it has none.
fn keep_focus() {
    #[cfg(feature = "hydrate")]
    browser::keep_focus();
}

#[cfg(feature = "hydrate")]
mod browser {
    use std::cell::RefCell;
    use std::time::Duration;

    use leptos::prelude::*;
    use wasm_bindgen::JsCast;
    use wasm_bindgen::closure::Closure;
    use web_sys::{EventSource, MessageEvent};

    use super::{LiveFeed, Mode, POLL_SECS, RECONNECT_SECS, TICK_MS};

    type Listener = Closure<dyn FnMut(web_sys::Event)>;

    thread_local! {
        /// The open stream and its listeners (dropped with it).
        static STREAM: RefCell<Option<(EventSource, Vec<Listener>)>> = const { RefCell::new(None) };
    }

    #[derive(serde::Deserialize)]
    struct Change {
        topics: Vec<String>,
    }

    #[derive(serde::Deserialize)]
    struct Ready {
        now: i64,
        changed_at: i64,
    }

    /// How long before hydration a server-rendered page may have fetched its data, ms.
    const RENDER_SLACK_MS: i64 = 5_000;

    pub fn start(feed: LiveFeed) {
        connect(feed);
        // Whether the stream was ever open, and the tick it was last seen closed.
        let closed_at = StoredValue::new(None::<u64>);
        if let Ok(handle) = set_interval_with_handle(
            move || tick(feed, closed_at),
            Duration::from_millis(TICK_MS),
        ) {
            on_cleanup(move || {
                handle.clear();
                disconnect();
            });
        }
    }

    fn tick(feed: LiveFeed, closed_at: StoredValue<Option<u64>>) {
        let now = feed.ticks.get_value() + 1;
        feed.ticks.set_value(now);
        let per_sec = 1000 / TICK_MS;
        let closed = STREAM.with_borrow(|s| {
            s.as_ref()
                .is_none_or(|(es, _)| es.ready_state() == EventSource::CLOSED)
        });
        if closed {
            let since = closed_at.get_value().unwrap_or(now);
            closed_at.set_value(Some(since));
            if now - since >= RECONNECT_SECS * per_sec {
                closed_at.set_value(None);
                connect(feed);
            }
        } else {
            closed_at.set_value(None);
        }
        if feed.mode.get_untracked() != Mode::Live
            && now - feed.last_poll.get_value() >= POLL_SECS * per_sec
            && !document().hidden()
        {
            feed.last_poll.set_value(now);
            feed.changed(None);
        } else {
            feed.flush();
        }
    }

    fn disconnect() {
        if let Some((es, _listeners)) = STREAM.with_borrow_mut(Option::take) {
            es.close();
        }
    }

    fn connect(feed: LiveFeed) {
        disconnect();
        let Ok(es) = EventSource::new("/ops/v1/live") else {
            feed.mode.set(Mode::Polling);
            return;
        };
        let mut listeners: Vec<Listener> = Vec::new();
        let mut on = |name: &str, f: Box<dyn FnMut(web_sys::Event)>| {
            let c = Closure::wrap(f);
            let _ = es.add_event_listener_with_callback(name, c.as_ref().unchecked_ref());
            listeners.push(c);
        };
        // Opened again: what changed while the stream was down is not replayed, so every page
        // looks again. Opened for the first time: only if the data changed since about when
        // the page loaded (it may have missed that change).
        let opened_before = StoredValue::new(false);
        on(
            "ready",
            Box::new(move |ev: web_sys::Event| {
                let was = feed.mode.get_untracked();
                feed.mode.set(Mode::Live);
                let recent = ev
                    .dyn_ref::<MessageEvent>()
                    .and_then(|m| m.data().as_string())
                    .and_then(|d| serde_json::from_str::<Ready>(&d).ok())
                    .is_none_or(|r| {
                        let loaded_ms = (feed.ticks.get_value() * TICK_MS) as i64 + RENDER_SLACK_MS;
                        r.now - r.changed_at <= loaded_ms
                    });
                if opened_before.get_value() || was == Mode::Polling || recent {
                    feed.changed(None);
                }
                opened_before.set_value(true);
            }),
        );
        on(
            "change",
            Box::new(move |ev: web_sys::Event| {
                let Some(data) = ev
                    .dyn_ref::<MessageEvent>()
                    .and_then(|m| m.data().as_string())
                else {
                    return;
                };
                if let Ok(c) = serde_json::from_str::<Change>(&data) {
                    feed.changed(Some(&c.topics));
                }
            }),
        );
        // The session ended or the server is stopping: stop the browser's own retries; the
        // timer opens the stream again later (refused while signed out, so pages poll and
        // their fetches meet the sign-in page).
        on(
            "end",
            Box::new(move |_: web_sys::Event| {
                STREAM.with_borrow(|s| {
                    if let Some((es, _)) = s {
                        es.close();
                    }
                });
                feed.mode.set(Mode::Polling);
            }),
        );
        on(
            "error",
            Box::new(move |_: web_sys::Event| {
                feed.mode.set(Mode::Polling);
            }),
        );
        STREAM.with_borrow_mut(|s| *s = Some((es, listeners)));
    }

    pub fn keep_focus() {
        let doc = document();
        let Some(el) = doc.active_element() else {
            return;
        };
        let Ok(Some(main)) = doc.query_selector("main") else {
            return;
        };
        if el == main || !main.contains(Some(el.as_ref())) {
            return;
        }
        let key = el
            .get_attribute("id")
            .map(|id| format!("#{id}"))
            .or_else(|| {
                el.get_attribute("data-testid")
                    .map(|t| format!("[data-testid=\"{t}\"]"))
            });
        // The redraw follows the fetch: look for a few seconds.
        let tries = StoredValue::new(0u32);
        let handle = StoredValue::new(None::<IntervalHandle>);
        let check = move || {
            let n = tries.get_value() + 1;
            tries.set_value(n);
            let done = if el.is_connected() {
                n > 40
            } else {
                // Unless the person has moved the focus since.
                let lost = document()
                    .active_element()
                    .is_none_or(|a| a.tag_name().eq_ignore_ascii_case("body"));
                if lost {
                    let target = key
                        .as_deref()
                        .and_then(|k| main.query_selector(k).ok().flatten())
                        .unwrap_or_else(|| main.clone());
                    if let Some(h) = target.dyn_ref::<web_sys::HtmlElement>() {
                        let opts = web_sys::FocusOptions::new();
                        opts.set_prevent_scroll(true);
                        let _ = h.focus_with_options(&opts);
                    }
                }
                true
            };
            if done && let Some(h) = handle.get_value() {
                h.clear();
            }
        };
        if let Ok(h) = set_interval_with_handle(check, Duration::from_millis(75)) {
            handle.set_value(Some(h));
        }
    }
}

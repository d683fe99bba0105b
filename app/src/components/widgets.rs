//! Small presentational pieces: status pills, amounts, times, error notes.

use leptos::prelude::*;
use leptos_router::components::Redirect;

use crate::api::{error_message, is_not_signed_in};
use crate::format;

/// A coloured pill with a status name: a status of any lifecycle (payments, jobs, refunds,
/// requests, deliveries, endpoints, error-pool items, keys, pauses), coloured by its family
/// ([`format::Pill`]).
#[component]
pub fn StatusPill(
    /// The status, or `format::Pill::payment(name)` for a payment status given by name.
    #[prop(into)]
    status: format::Pill,
) -> impl IntoView {
    let class = format!("pill {}", status.tone.class());
    view! { <span class=class>{status.name}</span> }
}

/// An amount in major units with its currency, right-aligned in tables by its class.
#[component]
pub fn Money(
    /// Minor units.
    amount: i64,
    /// ISO 4217 code.
    #[prop(into)]
    currency: String,
) -> impl IntoView {
    view! { <span class="num">{format::money(amount, &currency)}</span> }
}

/// Whether times are shown in the browser's zone (true) or in UTC (false, the default and what
/// the server renders). Provided by the console layout, switched from its top bar and
/// remembered in the browser (`localStorage["converge.times"]`).
#[derive(Debug, Clone, Copy)]
pub struct LocalTimes(pub RwSignal<bool>);

/// The key the choice is remembered under.
const TIMES_KEY: &str = "converge.times";

impl LocalTimes {
    /// The choice, starting as UTC: the server cannot know the browser's zone, and the first
    /// render must match what the server sent. [`restore`](Self::restore) then applies the
    /// remembered choice once hydrated.
    pub fn new() -> Self {
        LocalTimes(RwSignal::new(false))
    }

    /// Applies the choice remembered in this browser, if any.
    pub fn restore(self) {
        #[cfg(feature = "hydrate")]
        if let Some(v) = storage().and_then(|s| s.get_item(TIMES_KEY).ok().flatten()) {
            self.0.set(v == "local");
        }
    }

    /// Switches and remembers the choice.
    pub fn set(self, local: bool) {
        self.0.set(local);
        #[cfg(feature = "hydrate")]
        if let Some(s) = storage() {
            let _ = s.set_item(TIMES_KEY, if local { "local" } else { "utc" });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = TIMES_KEY;
    }
}

impl Default for LocalTimes {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "hydrate")]
fn storage() -> Option<web_sys::Storage> {
    web_sys::window()?.local_storage().ok().flatten()
}

/// Minutes east of UTC of the browser's zone at the instant `ms` (daylight saving included);
/// 0 on the server.
fn zone_offset_minutes(ms: i64) -> i32 {
    #[cfg(feature = "hydrate")]
    {
        let d = js_sys::Date::new(&wasm_bindgen::JsValue::from_f64(ms as f64));
        // JavaScript gives minutes *west* of UTC.
        -(d.get_timezone_offset() as i32)
    }
    #[cfg(not(feature = "hydrate"))]
    {
        let _ = ms;
        0
    }
}

/// The zone the console's time filters read in, following the top bar's switch (issue 41):
/// `None` for UTC, or the browser's offset now (`+08:00`) when times are shown local. Filter
/// values are `datetime-local` text, sent on as RFC 3339 in this zone
/// ([`format::as_rfc3339_in`]).
pub fn filter_zone() -> Signal<Option<String>> {
    let local = use_context::<LocalTimes>().map(|l| l.0);
    Signal::derive(move || {
        local
            .is_some_and(|l| l.get())
            .then(|| format::offset_text(zone_offset_minutes(now_ms())))
    })
}

/// A time filter's label with the zone it reads in: `From (UTC)`, `From (UTC+08:00, local)`.
pub fn zone_label(what: &str, zone: Option<&str>) -> String {
    match zone {
        Some(z) => format!("{what} (UTC{z}, local)"),
        None => format!("{what} (UTC)"),
    }
}

/// Now, epoch ms UTC, by the browser's clock (0 on the server, where filters are UTC).
fn now_ms() -> i64 {
    #[cfg(feature = "hydrate")]
    {
        js_sys::Date::now() as i64
    }
    #[cfg(not(feature = "hydrate"))]
    {
        0
    }
}

/// A time, in UTC or in the browser's zone as the top bar's switch says, always with its zone
/// written out; the UTC instant is in `datetime` and the tooltip.
#[component]
pub fn Time(
    /// Epoch ms UTC.
    ms: i64,
) -> impl IntoView {
    let local = use_context::<LocalTimes>().map(|l| l.0);
    let text = move || {
        if local.is_some_and(|l| l.get()) {
            format::zoned(ms, zone_offset_minutes(ms))
        } else {
            format::utc(ms)
        }
    };
    view! { <time class="time" datetime=format::iso(ms) title=format::utc(ms)>{text}</time> }
}

/// The sign-in page that comes back to the page being shown.
pub fn here_via_login() -> String {
    let location = leptos_router::hooks::use_location();
    // `search` comes without its `?`.
    let search = location.search.get_untracked();
    let here = if search.is_empty() {
        location.pathname.get_untracked()
    } else {
        format!("{}?{search}", location.pathname.get_untracked())
    };
    crate::format::login_returning_to(&here)
}

/// The `on_form_data` of a console filter `Form` (method GET): drops the entry with an empty
/// name. Leptos's `form_data_from_event` appends the submitting button's name and value even
/// when the button has no name, which put a stray `&=` at the end of every filtered URL
/// (issue 41). Runs only in the browser.
pub fn without_nameless_field() -> std::sync::Arc<dyn Fn(&leptos::web_sys::FormData)> {
    std::sync::Arc::new(|data: &leptos::web_sys::FormData| data.delete(""))
}

/// A button that copies `text` to the clipboard and says "Copied" (issue 41: a new key had
/// no Copy button). Where the browser refuses (no permission, not a secure context) it says
/// to select the text and copy it by hand.
#[component]
pub fn CopyButton(
    /// What to copy.
    #[prop(into)]
    text: String,
    /// `data-testid` of the button.
    #[prop(optional)]
    testid: Option<&'static str>,
) -> impl IntoView {
    let copied = RwSignal::new(None::<bool>);
    let copy = move |_| {
        #[cfg(feature = "hydrate")]
        {
            let text = text.clone();
            leptos::task::spawn_local(async move {
                let done = match web_sys::window() {
                    Some(w) => wasm_bindgen_futures::JsFuture::from(
                        w.navigator().clipboard().write_text(&text),
                    )
                    .await
                    .is_ok(),
                    None => false,
                };
                copied.set(Some(done));
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = &text;
    };
    view! {
        <button type="button" class="small" data-testid=testid on:click=copy>
            {move || if copied.get() == Some(true) { "Copied" } else { "Copy" }}
        </button>
        <span class="muted small" role="status">
            {move || (copied.get() == Some(false)).then_some(" The browser refused: select the key and copy it.")}
        </span>
    }
}

/// A server-function error for people: its sentence in an alert box, or, when the session is
/// gone, a redirect to the sign-in page.
#[component]
pub fn ErrorNote(
    /// What failed.
    error: ServerFnError,
) -> impl IntoView {
    if is_not_signed_in(&error) {
        return view! { <Redirect path=here_via_login()/> }.into_any();
    }
    view! { <p class="error-note" role="alert">{error_message(&error)}</p> }.into_any()
}

/// A placeholder while data loads.
#[component]
pub fn Loading() -> impl IntoView {
    view! { <p class="loading" aria-live="polite">"Loading…"</p> }
}

/// A JSON result as labelled fields (amounts with a currency in major units; amounts without
/// one in `currency` when given, else labelled as minor units; times formatted:
/// [`format::json_fields_in`]), the raw JSON behind a toggle; text that is not a JSON object
/// is shown as it is.
#[component]
pub fn JsonFields(
    /// The JSON text.
    text: String,
    /// The payment's ISO 4217 code, for amounts that carry none of their own.
    #[prop(optional)]
    currency: Option<String>,
) -> impl IntoView {
    let fields = format::json_fields_in(&text, currency.as_deref());
    if fields.is_empty() {
        return view! { <span class="mono">{text}</span> }.into_any();
    }
    let raw = format::pretty_json(&text);
    view! {
        <dl class="fields">
            {fields.into_iter().map(|(k, v)| view! { <div><dt>{k}</dt><dd>{v}</dd></div> }).collect_view()}
        </dl>
        <details>
            <summary>"JSON"</summary>
            <pre class="evidence">{raw}</pre>
        </details>
    }
    .into_any()
}

/// The page's flash (`flash_ref`, a `tabindex="-1"` paragraph) takes the focus whenever a
/// message is set: the row an action removed leaves the list with the button that had the
/// focus, and a keyboard user would be left at the top of the page.
pub fn focus_flash_when_set(flash: RwSignal<Option<String>>, flash_ref: NodeRef<leptos::html::P>) {
    Effect::new(move |_| {
        if flash.get().is_some()
            && let Some(el) = flash_ref.get_untracked()
        {
            // After the frame that writes the text: an empty flash is not displayed, and
            // what is not displayed cannot take the focus.
            request_animation_frame(move || {
                let _ = el.focus();
            });
        }
    });
}

//! The top bar's search box (issue 17, "Find anything, by any id"): any id or the start of
//! one, any case. `/` focuses it from anywhere but another field. Enter lands on the one thing
//! that matches, on the results page when several do, or says that nothing matches. Before
//! the page is hydrated the form is a plain GET of the results page.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_navigate;

use crate::api::error_message;
use crate::api_lookup::find_ids;
use crate::format::query_escape;

/// Whether a `/` typed now belongs to the element with the focus (a field, a list box, an
/// editable region) rather than being the shortcut.
#[cfg(feature = "hydrate")]
fn typing_elsewhere() -> bool {
    use wasm_bindgen::JsCast;
    let Some(el) = document().active_element() else {
        return false;
    };
    let tag = el.tag_name().to_ascii_uppercase();
    matches!(tag.as_str(), "INPUT" | "TEXTAREA" | "SELECT")
        || el
            .dyn_ref::<leptos::web_sys::HtmlElement>()
            .is_some_and(|h| h.is_content_editable())
}

/// The search form of the top bar.
#[component]
pub fn SearchBox() -> impl IntoView {
    let navigate = use_navigate();
    let input = NodeRef::<leptos::html::Input>::new();
    let value = RwSignal::new(String::new());
    let message = RwSignal::new(String::new());
    let busy = RwSignal::new(false);

    #[cfg(feature = "hydrate")]
    {
        let handle =
            leptos::leptos_dom::helpers::window_event_listener(leptos::ev::keydown, move |ev| {
                if ev.key() != "/" || ev.ctrl_key() || ev.meta_key() || ev.alt_key() {
                    return;
                }
                if typing_elsewhere() {
                    return;
                }
                if let Some(el) = input.get_untracked() {
                    ev.prevent_default();
                    let _ = el.focus();
                    el.select();
                }
            });
        on_cleanup(move || handle.remove());
    }

    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let q = value.get_untracked().trim().to_string();
        if q.is_empty() {
            message.set("Type an id, or the start of one.".into());
            return;
        }
        busy.set(true);
        message.set(String::new());
        let navigate = navigate.clone();
        spawn_local(async move {
            match find_ids(q.clone()).await {
                Ok(r) if r.hits.is_empty() => {
                    message.set(format!("Nothing matches “{q}”."));
                }
                Ok(r) if r.hits.len() == 1 && !r.truncated => {
                    navigate(&r.hits[0].link, Default::default());
                }
                Ok(_) => navigate(
                    &format!("/search?q={}", query_escape(&q)),
                    Default::default(),
                ),
                Err(e) => message.set(error_message(&e)),
            }
            busy.set(false);
        });
    };

    view! {
        <form class="find" role="search" action="/search" method="get" on:submit=on_submit>
            <label for="find-q" class="visually-hidden">"Find by id"</label>
            <input
                id="find-q"
                name="q"
                type="search"
                maxlength="255"
                autocomplete="off"
                spellcheck="false"
                placeholder="Find by id  ( / )"
                aria-keyshortcuts="/"
                aria-describedby="find-msg"
                data-testid="find-input"
                node_ref=input
                prop:value=move || value.get()
                on:input=move |ev| {
                    value.set(event_target_value(&ev));
                    message.set(String::new());
                }
            />
            <button type="submit" class="secondary small" data-testid="find-submit" disabled=move || busy.get()>
                "Find"
            </button>
            <span id="find-msg" class="find-msg" role="status" data-testid="find-message">
                {move || message.get()}
            </span>
        </form>
    }
}

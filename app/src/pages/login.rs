//! The sign-in page (DESIGN.md "Ops console": login). The form posts through the `login`
//! server function, which renews the session id; then the console opens on the dashboard.
//! Empty fields are caught in the browser first, which only works once the page is hydrated
//! (the browser test relies on that, and on the `data-hydrated` marker).

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::hooks::use_navigate;

use crate::api;

/// Username and password form.
#[component]
pub fn LoginPage() -> impl IntoView {
    let username = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let message = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    let navigate = use_navigate();
    // Back to the page that sent the person here (a deep link opened while signed out, or a
    // session that ended mid-page), if it is a page of this console.
    let query = leptos_router::hooks::use_query_map();
    let next_page = StoredValue::new(crate::format::after_sign_in(
        query.get_untracked().get("next").as_deref(),
    ));

    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        if busy.get_untracked() {
            return;
        }
        let user = username.get_untracked().trim().to_string();
        let pass = password.get_untracked();
        if user.is_empty() || pass.is_empty() {
            message.set(Some("Enter your username and password.".into()));
            return;
        }
        busy.set(true);
        message.set(None);
        let navigate = navigate.clone();
        spawn_local(async move {
            match api::login(user, pass).await {
                Ok(_) => navigate(&next_page.get_value(), Default::default()),
                Err(e) => {
                    password.set(String::new());
                    message.set(Some(api::error_message(&e)));
                    busy.set(false);
                }
            }
        });
    };

    // The form POSTs to the server function, so a submit before hydration never puts the
    // password in a URL.
    view! {
        <main class="login" data-hydrated=move || hydrated.get().to_string()>
            <header class="brand">
                <h1>"converge"</h1>
                <p class="tagline">"payment operations console"</p>
            </header>
            <form class="card" method="post" action="/api/login" on:submit=on_submit>
                <h2>"Sign in"</h2>
                <label>
                    "Username"
                    <input
                        type="text"
                        name="username"
                        autocomplete="username"
                        autofocus
                        bind:value=username
                    />
                </label>
                <label>
                    "Password"
                    <input
                        type="password"
                        name="password"
                        autocomplete="current-password"
                        bind:value=password
                    />
                </label>
                <button type="submit" data-testid="sign-in" disabled=move || busy.get()>
                    {move || if busy.get() { "Signing in…" } else { "Sign in" }}
                </button>
                <p class="form-message" role="alert" data-testid="form-message">
                    {move || message.get()}
                </p>
            </form>
        </main>
    }
}

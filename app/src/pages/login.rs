//! The sign-in page (DESIGN.md "Ops console": login). Until ops accounts exist the form
//! checks its input in the browser and says so; the check runs only once the page is
//! hydrated, which the browser test relies on.

use leptos::ev::SubmitEvent;
use leptos::prelude::*;

use super::status::StatusBadge;

/// Username and password form.
#[component]
pub fn LoginPage() -> impl IntoView {
    let username = RwSignal::new(String::new());
    let password = RwSignal::new(String::new());
    let message = RwSignal::new(None::<String>);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));

    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let text = if username.get().trim().is_empty() || password.get().is_empty() {
            "Enter your username and password."
        } else {
            "No ops account matches yet: accounts are created with `converge user add`."
        };
        message.set(Some(text.to_string()));
    };

    view! {
        <main class="login" data-hydrated=move || hydrated.get().to_string()>
            <header class="brand">
                <h1>"converge"</h1>
                <p class="tagline">"payment operations console"</p>
            </header>
            <form class="card" on:submit=on_submit>
                <h2>"Sign in"</h2>
                <label>
                    "Username"
                    <input type="text" name="username" autocomplete="username" bind:value=username/>
                </label>
                <label>
                    "Password"
                    <input type="password" name="password" autocomplete="current-password" bind:value=password/>
                </label>
                <button type="submit" data-testid="sign-in">"Sign in"</button>
                <p class="form-message" role="alert" data-testid="form-message">{move || message.get()}</p>
            </form>
            <footer>
                <StatusBadge/>
            </footer>
        </main>
    }
}

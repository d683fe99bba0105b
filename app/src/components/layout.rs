//! The frame of every signed-in page: a top bar with the navigation, the signed-in user, its
//! roles and a sign-out button. Without a valid session the frame redirects to `/login`
//! before any page content renders (on the server the redirect is a real 302, because the
//! session check is a blocking resource that the response waits for).

use leptos::ev::SubmitEvent;
use leptos::prelude::*;
use leptos::task::spawn_local;
use leptos_router::components::{A, Outlet, Redirect};
use leptos_router::hooks::use_navigate;

use super::widgets::{ErrorNote, Loading, LocalTimes, here_via_login};
use crate::api;
use crate::dto::{PauseWords, Principal, Role};

/// The signed-in user as loaded by the frame; pages read it to show or hide controls (the
/// server checks every call regardless).
#[derive(Debug, Clone, Copy)]
pub struct Me(pub Resource<Result<Option<Principal>, ServerFnError>>);

/// Layout route of the console: checks the session, then renders the top bar and the page.
#[component]
pub fn ConsoleLayout() -> impl IntoView {
    let me = Resource::new_blocking(|| (), |_| api::me());
    provide_context(Me(me));
    let times = LocalTimes::new();
    provide_context(times);
    // After hydration: the server rendered UTC, the browser may remember "local".
    Effect::new(move |_| times.restore());
    // One live stream for every page of the frame (issue 17 "Live pages").
    super::live::provide_live();
    focus_main_on_navigation();
    view! {
        <Suspense fallback=Loading>
            {move || Suspend::new(async move {
                match me.await {
                    Ok(Some(p)) => {
                        let username = p.username.clone();
                        view! {
                            <TopBar principal=p/>
                            <PauseBanner/>
                            <SessionEndedBox username/>
                            <main class="page" id="main" tabindex="-1">
                                <Outlet/>
                            </main>
                            <footer class="page-foot">
                                <TimesSwitch times/>
                                <crate::pages::status::StatusBadge/>
                                <super::live::LiveBadge/>
                            </footer>
                        }
                            .into_any()
                    }
                    // Signed out on a deep link: sign in, then back to it.
                    Ok(None) => view! { <Redirect path=here_via_login()/> }.into_any(),
                    Err(e) => view! { <main class="page"><ErrorNote error=e/></main> }.into_any(),
                }
            })}
        </Suspense>
    }
}

/// After a client-side navigation to another page, the focus goes to the page's `main`
/// region, where a full page load would start a keyboard or screen-reader user, rather than
/// staying on the link in the top bar (issue 41: 15 Tabs from the navigation to Approve).
/// A change of query (a filter) keeps the focus where it is.
fn focus_main_on_navigation() {
    let location = leptos_router::hooks::use_location();
    Effect::new(move |before: Option<String>| {
        let path = location.pathname.get();
        #[cfg(feature = "hydrate")]
        if before.as_ref().is_some_and(|b| *b != path) {
            use wasm_bindgen::JsCast;
            // After the frame that mounts the new page: a page in the main WebAssembly (the
            // approvals page) mounts in the same tick as the path changes, and a focus given
            // before that was lost (found by keyboard.spec.ts).
            request_animation_frame(|| {
                if let Some(main) = document()
                    .get_element_by_id("main")
                    .and_then(|e| e.dyn_into::<leptos::web_sys::HtmlElement>().ok())
                {
                    let _ = main.focus();
                }
            });
        }
        #[cfg(not(feature = "hydrate"))]
        let _ = before;
        path
    });
}

/// Shown when a request the user made found the session gone (idle timeout, signed out in
/// another tab, disabled, password reset): says so, and signs the same user in again right
/// here, so the page and every field typed on it stay as they were; the user then sends the
/// form again (issue 17). Signing in as someone else goes through the sign-in page and back.
#[component]
fn SessionEndedBox(username: String) -> impl IntoView {
    let ended = RwSignal::from(api::session_ended());
    let password = RwSignal::new(String::new());
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let done = RwSignal::new(false);
    let password_ref = NodeRef::<leptos::html::Input>::new();
    Effect::new(move |_| {
        if ended.get() {
            done.set(false);
            if let Some(el) = password_ref.get() {
                let _ = el.focus();
            }
        }
    });
    let user = StoredValue::new(username.clone());
    let on_submit = move |ev: SubmitEvent| {
        ev.prevent_default();
        let pass = password.get_untracked();
        busy.set(true);
        failure.set(None);
        spawn_local(async move {
            match api::login(user.get_value(), pass).await {
                Ok(_) => {
                    password.set(String::new());
                    ended.set(false);
                    done.set(true);
                }
                Err(e) => failure.set(Some(api::error_message(&e))),
            }
            busy.set(false);
        });
    };
    view! {
        <Show when=move || ended.get()>
            <section class="session-ended" role="alert" aria-labelledby="session-ended-h" data-testid="session-ended">
                <h2 id="session-ended-h">"Your session has ended"</h2>
                <p>
                    "Nothing you typed on this page is lost. Sign in again as "
                    <strong>{user.get_value()}</strong>
                    " to carry on, then send your form again."
                </p>
                <form class="inline-form" on:submit=on_submit>
                    <input type="text" name="username" autocomplete="username" hidden value=user.get_value()/>
                    <label>
                        "Password"
                        <input
                            type="password"
                            autocomplete="current-password"
                            required
                            data-testid="session-ended-password"
                            node_ref=password_ref
                            bind:value=password
                        />
                    </label>
                    <button type="submit" data-testid="session-ended-sign-in" disabled=move || busy.get()>
                        "Sign in again"
                    </button>
                    <a href=here_via_login()>"Sign in as someone else"</a>
                    <span class="form-message" role="alert">{move || failure.get()}</span>
                </form>
            </section>
        </Show>
        <Show when=move || done.get()>
            <p class="flash" role="status" data-testid="session-restored">
                "Signed in again. Your page is as you left it: send your form again."
            </p>
        </Show>
    }
}

/// The switch between UTC and the browser's zone for every time on the console's pages
/// (issue 17), remembered in this browser.
#[component]
fn TimesSwitch(times: LocalTimes) -> impl IntoView {
    let local = times.0;
    view! {
        <div class="times-switch" role="group" aria-label="Show times in">
            <span class="muted small">"Times: "</span>
            <button
                type="button"
                class="secondary small"
                data-testid="times-utc"
                aria-pressed=move || (!local.get()).to_string()
                on:click=move |_| times.set(false)
            >
                "UTC"
            </button>
            <button
                type="button"
                class="secondary small"
                data-testid="times-local"
                aria-pressed=move || local.get().to_string()
                on:click=move |_| times.set(true)
            >
                "Local"
            </button>
        </div>
    }
}

/// Whether the signed-in user holds `role`, for showing controls (false while unknown).
pub fn signed_in_has(role: Role) -> Signal<bool> {
    let me = use_context::<Me>();
    Signal::derive(move || {
        me.and_then(|m| m.0.get())
            .and_then(|r| r.ok().flatten())
            .is_some_and(|p| p.has(role))
    })
}

/// The signed-in user's name (None while unknown), e.g. to tell a requester from an approver.
pub fn signed_in_name() -> Signal<Option<String>> {
    let me = use_context::<Me>();
    Signal::derive(move || {
        me.and_then(|m| m.0.get())
            .and_then(|r| r.ok().flatten())
            .map(|p| p.username)
    })
}

/// Brand, navigation, user and sign-out.
#[component]
fn TopBar(principal: Principal) -> impl IntoView {
    let navigate = use_navigate();
    let busy = RwSignal::new(false);
    let failure = RwSignal::new(None::<String>);
    let hydrated = RwSignal::new(false);
    Effect::new(move |_| hydrated.set(true));
    let sign_out = move |ev: SubmitEvent| {
        ev.prevent_default();
        busy.set(true);
        let navigate = navigate.clone();
        spawn_local(async move {
            match api::logout().await {
                Ok(()) => navigate("/login", Default::default()),
                Err(e) => {
                    failure.set(Some(api::error_message(&e)));
                    busy.set(false);
                }
            }
        });
    };
    let is_admin = principal.has(Role::Admin);
    // Admins decide privilege requests there (issue 36).
    let sees_approvals = principal.has(Role::Approver) || principal.has(Role::Operator) || is_admin;
    // Requests waiting for an approver, counted again on every page change and whenever the
    // live stream says the requests changed.
    let location = leptos_router::hooks::use_location();
    let live = super::live::use_live(|t| t == "approvals");
    let pending = Resource::new(
        move || (location.pathname.get(), live.get()),
        |_| crate::api_actions::pending_approvals(),
    );
    let is_auditor = principal.has(Role::Auditor);
    let roles = principal.roles.join(", ");
    // Sign-out is a form posting to the server function, so it works even before the page is
    // hydrated (the server then redirects to /login); once hydrated it is a fetch.
    view! {
        <header class="topbar" data-hydrated=move || hydrated.get().to_string()>
            <a class="skip-link" href="#main">"Skip to content"</a>
            <A href="/" attr:class="brand-link">"converge"</A>
            <nav class="mainnav" aria-label="Main">
                <A href="/" exact=true>"Dashboard"</A>
                <A href="/payments">"Payments"</A>
                <A href="/error-pool">"Error pool"</A>
                <A href="/webhooks">"Webhooks"</A>
                {sees_approvals
                    .then(|| {
                        view! {
                            <A href="/approvals">
                                "Approvals"
                                <Suspense fallback=|| ()>
                                    {move || {
                                        pending
                                            .get()
                                            .and_then(Result::ok)
                                            .filter(|n| *n > 0)
                                            .map(|n| {
                                                view! {
                                                    <span class="nav-count" data-testid="approvals-count">
                                                        {n.to_string()}
                                                        <span class="visually-hidden">" waiting"</span>
                                                    </span>
                                                }
                                            })
                                    }}
                                </Suspense>
                            </A>
                        }
                    })}
                {sees_approvals.then(|| view! { <A href="/pauses">"Pauses"</A> })}
                {is_auditor.then(|| view! { <A href="/audit">"Audit"</A> })}
                {is_admin.then(|| view! { <A href="/admin/users">"Users"</A> })}
                {is_admin.then(|| view! { <A href="/admin/merchants">"Merchants"</A> })}
            </nav>
            <super::search_box::SearchBox/>
            <div class="who">
                <span class="user" data-testid="current-user">{principal.username.clone()}</span>
                <span class="roles" data-testid="current-roles">{roles}</span>
                <form method="post" action="/api/logout" on:submit=sign_out>
                    <button
                        type="submit"
                        class="secondary small"
                        data-testid="sign-out"
                        disabled=move || busy.get()
                    >
                        "Sign out"
                    </button>
                </form>
                <span class="form-message" role="alert">{move || failure.get()}</span>
            </div>
        </header>
    }
}

/// How often an open page looks again for pauses, seconds (besides every page change).
const PAUSE_POLL_SECS: u64 = 5;

/// The emergency switch's banner: while any pause is in force, every page names what is
/// paused, since when, by whose approval and why, with a link to the pauses page. Read on
/// every page change and every [`PAUSE_POLL_SECS`] while the tab is visible (background
/// requests, which do not keep the session alive).
#[component]
fn PauseBanner() -> impl IntoView {
    let location = leptos_router::hooks::use_location();
    let tick = RwSignal::new(0u64);
    Effect::new(move |_| {
        if let Ok(handle) = set_interval_with_handle(
            move || {
                if !document().hidden() {
                    tick.update(|t| *t = t.wrapping_add(1));
                }
            },
            std::time::Duration::from_secs(PAUSE_POLL_SECS),
        ) {
            on_cleanup(move || handle.clear());
        }
    });
    // And at once when the live stream says a pause moved (issue 41: the banner took up to
    // five seconds); the poll stays for when the stream is down.
    let live = super::live::use_live(|t| t == "pauses");
    let active = Resource::new(
        move || (location.pathname.get(), tick.get(), live.get()),
        |_| crate::api_pauses::active_pauses(),
    );
    view! {
        <Transition fallback=|| ()>
            {move || {
                active
                    .get()
                    .and_then(Result::ok)
                    .filter(|items| !items.is_empty())
                    .map(|items| {
                        view! {
                            <div class="pause-banner" role="status" data-testid="pause-banner">
                                <strong>"Emergency switch: paused"</strong>
                                <ul>
                                    {items
                                        .into_iter()
                                        .map(|p| {
                                            let since = p.approved_at.unwrap_or(p.requested_at);
                                            view! {
                                                <li data-target=p.target.clone()>
                                                    <span class="what">{p.what()}</span>
                                                    " since "
                                                    <time>{crate::format::utc(since)}</time>
                                                    {format!(
                                                        " (requested by {}, approved by {}): {}",
                                                        p.requested_by,
                                                        p.approved_by.unwrap_or_default(),
                                                        p.reason,
                                                    )}
                                                </li>
                                            }
                                        })
                                        .collect_view()}
                                </ul>
                                <A href="/pauses">"Manage pauses"</A>
                            </div>
                        }
                    })
            }}
        </Transition>
    }
}

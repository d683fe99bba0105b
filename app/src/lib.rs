//! converge's ops console: a Leptos app rendered on the server and hydrated to WebAssembly.
//! Pages and components live here; server functions are thin adapters over the `server`
//! crate (only compiled with the `ssr` feature), so the browser bundle carries no backend code.

// Leptos views are deeply nested types; the larger pages exceed the default limit of 128.
#![recursion_limit = "256"]

pub mod api;
pub mod api_actions;
pub mod api_lookup;
pub mod api_merchants;
pub mod api_passkeys;
pub mod api_pauses;
pub mod api_queues;
pub mod api_webhooks;
pub mod app;
pub mod components;
pub mod dto;
pub mod format;
pub mod pages;
pub mod webauthn;

/// Browser entry point: hydrates the server-rendered page.
#[cfg(feature = "hydrate")]
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    console_error_panic_hook::set_once();
    // `leptos::mount::hydrate_lazy`, spelled out so that the mark below is set when hydration
    // has finished: the console's pages are lazy routes (app.rs), whose chunks hydration may
    // have to fetch first, so hydration is asynchronous.
    wasm_bindgen_futures::spawn_local(async {
        let owner = leptos::mount::hydrate_from_async(leptos::tachys::dom::body(), app::App).await;
        owner.forget();
        // Time to interactive (issue 15): bench/tti.mjs reads this mark from the performance
        // timeline. It is set once the page's views are hydrated and their event handlers
        // attached; a failed mark only loses the measurement, never the page.
        if let Some(p) = web_sys::window().and_then(|w| w.performance()) {
            let _ = p.mark("converge:hydrated");
        }
    });
}

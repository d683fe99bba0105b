//! Backend status shown at the foot of every signed-in page: which database converge runs on
//! and whether it answers. Only for signed-in users: the sign-in page tells nobody what runs
//! behind it (OWASP: do not disclose technology details to unauthenticated users).

use leptos::prelude::*;
use serde::{Deserialize, Serialize};

/// What the console shows about the backend.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendHealth {
    /// `sqlite` or `postgres`.
    pub backend: String,
    /// The database answered a round trip just now (and, on SQLite, its file is still there).
    pub reachable: bool,
}

/// Reads the backend status through the `server` crate's store.
#[server(endpoint = "backend_status")]
pub async fn backend_status() -> Result<BackendHealth, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (state, _) = crate::api::ssr::authorize(Permission::View).await?;
    let store = &state.core.store;
    let backend = match store.backend() {
        converge_server::store::Backend::Sqlite => "sqlite",
        converge_server::store::Backend::Postgres => "postgres",
    };
    Ok(BackendHealth {
        backend: backend.into(),
        reachable: store.health().await.is_ok(),
    })
}

/// A one-line badge with the backend status.
#[component]
pub fn StatusBadge() -> impl IntoView {
    let status = Resource::new(|| (), |_| backend_status());
    view! {
        <Suspense fallback=|| view! { <span class="badge">"checking database…"</span> }>
            {move || {
                status
                    .get()
                    .map(|r| match r {
                        Ok(s) if s.reachable => {
                            view! { <span class="badge ok" data-testid="db-status">{format!("database: {} ✓", s.backend)}</span> }
                                .into_any()
                        }
                        Ok(s) => {
                            view! { <span class="badge bad" data-testid="db-status">{format!("database: {} unreachable", s.backend)}</span> }
                                .into_any()
                        }
                        Err(_) => view! { <span class="badge bad" data-testid="db-status">"status unavailable"</span> }.into_any(),
                    })
            }}
        </Suspense>
    }
}

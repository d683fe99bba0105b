//! Server functions of the console: thin adapters over the `server` crate, reached by the
//! browser at stable URLs under `/api/`. Each one finds the signed-in user in the session and
//! checks its permission on the server, exactly as the `/ops/v1` handlers do: hiding a button
//! in the page is never the check. Errors carry one human sentence; "not signed in" also
//! asks the browser to go to `/login`.

use leptos::prelude::*;

use crate::dto::{
    ConsoleChange, Dashboard, ErrorItem, Merchant, PaymentDetail, PaymentPage, PaymentSearch,
    Principal, PrivilegeApproved, PrivilegeInbox, PrivilegeRequest, UserView,
};

/// The message of the error every server function returns when there is no valid session
/// (never signed in, signed out, expired, or the user was disabled).
pub const NOT_SIGNED_IN: &str = "not signed in";

/// The human sentence inside a server-function error, without the framework's prefix. A
/// "not signed in" answer to something the user sent (a form, a button) also raises
/// [`session_ended`], so the console offers to sign in again on the spot, keeping what was
/// typed (issue 17), instead of a bare "not signed in" beside a bar that still shows the user.
pub fn error_message(e: &ServerFnError) -> String {
    if is_not_signed_in(e) {
        #[cfg(feature = "hydrate")]
        session_ended().set(true);
        return SESSION_ENDED.into();
    }
    match e {
        ServerFnError::ServerError(m) => m.clone(),
        ServerFnError::Request(_) => "cannot reach converge; check the connection and retry".into(),
        other => other.to_string(),
    }
}

/// What a form says when its request found the session gone.
pub const SESSION_ENDED: &str =
    "Your session has ended. What you typed is kept: sign in again above, then send it again.";

/// Whether the session was found gone by a request the user made on this page (browser only;
/// always false on the server, where one value would be shared by every request). The
/// console layout shows a sign-in box while it is set.
pub fn session_ended() -> ArcRwSignal<bool> {
    static ENDED: std::sync::OnceLock<ArcRwSignal<bool>> = std::sync::OnceLock::new();
    ENDED.get_or_init(|| ArcRwSignal::new(false)).clone()
}

/// Whether `e` means the session is gone, so the page should send the user to `/login`.
pub fn is_not_signed_in(e: &ServerFnError) -> bool {
    matches!(e, ServerFnError::ServerError(m) if m == NOT_SIGNED_IN)
}

/// Server-side helpers shared by the server functions.
#[cfg(feature = "ssr")]
pub(crate) mod ssr {
    use converge_server::domain::roles::Permission;
    use converge_server::error::ApiError;
    use converge_server::ops::OpsState;
    use converge_server::ops::principal::Principal as ServerPrincipal;
    pub use converge_server::ops::session::Activity;
    use leptos::prelude::*;
    use tower_sessions::Session;

    use super::NOT_SIGNED_IN;

    /// The backend state the `converge` binary provides to every Leptos request.
    pub fn state() -> Result<OpsState, ServerFnError> {
        use_context::<OpsState>()
            .ok_or_else(|| ServerFnError::new("the console is not connected to the backend"))
    }

    /// The request's session (the session layer wraps the console's routes too).
    pub async fn session() -> Result<Session, ServerFnError> {
        leptos_axum::extract::<Session>().await.map_err(|e| {
            tracing::error!(error = ?e, "session layer missing for a server function");
            ServerFnError::new("sessions are unavailable; retry shortly")
        })
    }

    /// The client's IP address (for login rate limiting and the audit log), exactly as the
    /// `/ops/v1` handlers see it: derived once per request by the backend's client-address
    /// layer (`X-Forwarded-For` only from `--trusted-proxy` peers); `unknown` when the server
    /// runs without connect info.
    pub async fn client_addr() -> String {
        leptos_axum::extract::<converge_server::ops::handlers::ClientAddr>()
            .await
            .map(|c| c.0)
            .unwrap_or_else(|_| "unknown".into())
    }

    /// The signed-in user, or the "not signed in" error plus a redirect to `/login` (which
    /// the browser's router follows when a hydrated page called us). The call counts as the
    /// person's activity unless `activity` (or the request's background header) says it is
    /// a background refresh.
    pub async fn principal_as(
        st: &OpsState,
        activity: Activity,
    ) -> Result<ServerPrincipal, ServerFnError> {
        let session = session().await?;
        let now = st.core.clock.now_ms();
        let activity = match activity {
            Activity::Background => Activity::Background,
            Activity::Person => leptos_axum::extract::<axum::http::HeaderMap>()
                .await
                .map_or(Activity::Person, |h| Activity::of(&h)),
        };
        match st
            .auth
            .current(st.core.store.as_ref(), &session, now, activity)
            .await
            .map_err(|e| api_error(e.into()))?
        {
            Some(p) => Ok(p),
            None => {
                // A plain HTML form post (no WebAssembly yet) is sent to the sign-in page; a
                // call from the console's code gets 401 `not_authenticated` like `/ops/v1`,
                // and the page offers to sign in again in place (issue 17).
                let wants_page = leptos_axum::extract::<axum::http::HeaderMap>()
                    .await
                    .ok()
                    .and_then(|h| {
                        h.get(axum::http::header::ACCEPT)
                            .and_then(|v| v.to_str().ok())
                            .map(|v| v.contains("text/html"))
                    })
                    .unwrap_or(false);
                if wants_page {
                    leptos_axum::redirect("/login");
                    return Err(ServerFnError::new(NOT_SIGNED_IN));
                }
                Err(refuse(
                    axum::http::StatusCode::UNAUTHORIZED,
                    converge_wire::ErrorCode::NotAuthenticated,
                    NOT_SIGNED_IN,
                    None,
                ))
            }
        }
    }

    /// The state and the signed-in user, once the user is known to hold `permission`.
    pub async fn authorize(
        permission: Permission,
    ) -> Result<(OpsState, ServerPrincipal), ServerFnError> {
        authorize_as(permission, Activity::Person).await
    }

    /// [`authorize`] for a request that is a person's action or a background refresh.
    pub async fn authorize_as(
        permission: Permission,
        activity: Activity,
    ) -> Result<(OpsState, ServerPrincipal), ServerFnError> {
        let st = state()?;
        let p = principal_as(&st, activity).await?;
        p.require(permission).map_err(api_error)?;
        Ok((st, p))
    }

    /// The header that carries a refusal's stable code beside the human sentence in the body
    /// (the same codes as the `/ops/v1` endpoints' `error.code`).
    pub const ERROR_CODE_HEADER: &str = "converge-error-code";

    /// A refusal: the response gets `status` (a 4xx, not the framework's default 500) and
    /// the stable `code` in [`ERROR_CODE_HEADER`]; the browser shows `message`. The browser's
    /// server-function client treats every 4xx as the error it carries.
    pub fn refuse(
        status: axum::http::StatusCode,
        code: converge_wire::ErrorCode,
        message: impl Into<String>,
        retry_after: Option<u64>,
    ) -> ServerFnError {
        if let Some(options) = use_context::<leptos_axum::ResponseOptions>() {
            options.set_status(status);
            options.insert_header(
                axum::http::HeaderName::from_static(ERROR_CODE_HEADER),
                axum::http::HeaderValue::from_static(code.as_str()),
            );
            if let Some(secs) = retry_after {
                options.insert_header(
                    axum::http::header::RETRY_AFTER,
                    axum::http::HeaderValue::from(secs),
                );
            }
        }
        ServerFnError::new(message.into())
    }

    /// An API error as a server-function error with its status, code and human message
    /// (internal causes were logged by `ApiError::internal` and are not sent).
    pub fn api_error(e: ApiError) -> ServerFnError {
        // A server function's answer carries no response extension: its cause is logged here,
        // once, in the request's span.
        if let Some(cause) = &e.cause {
            if e.status.is_server_error() {
                tracing::error!(code = e.code.as_str(), cause = %cause, "server function error");
            } else {
                tracing::warn!(code = e.code.as_str(), cause = %cause, "server function error");
            }
        }
        if e.is_internal() {
            return refuse(
                e.status,
                e.code,
                "internal error; retry, and tell the on-call if it persists",
                None,
            );
        }
        refuse(e.status, e.code, e.message, e.retry_after)
    }

    /// The audit actor of the current console request.
    pub async fn actor(p: &ServerPrincipal) -> converge_server::service::actor::Actor {
        converge_server::ops::audit::actor(p, &client_addr().await)
    }

    /// The browser's view of a principal: its name and role names.
    pub fn principal_dto(p: &ServerPrincipal) -> crate::dto::Principal {
        crate::dto::Principal {
            username: p.username.clone(),
            roles: p.roles.iter().map(|r| r.as_str().to_string()).collect(),
        }
    }

    /// A user change refused, with the same status and code as `/ops/v1`.
    pub fn user_error(e: converge_server::service::users::UserError) -> ServerFnError {
        api_error(e.into())
    }

    /// A privilege refusal as the console shows it (the user's, the merchant's or the
    /// request's answer).
    pub fn privilege_error(
        e: converge_server::service::privilege::PrivilegeError,
    ) -> ServerFnError {
        api_error(e.into())
    }
}

/// Signs in: checks the credentials (throttled per client address and per (account, client
/// address), counted in the database), renews the session id and stores the user in the
/// session.
#[server(endpoint = "login")]
pub async fn login(username: String, password: String) -> Result<Principal, ServerFnError> {
    let st = ssr::state()?;
    let session = ssr::session().await?;
    let addr = ssr::client_addr().await;
    let p = st
        .auth
        .login(
            st.core.store.as_ref(),
            &session,
            username.trim(),
            &password,
            &addr,
            st.core.clock.as_ref(),
        )
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(ssr::principal_dto(&p))
}

/// Signs out: the session is destroyed (its id deleted from the store), not just emptied.
#[server(endpoint = "logout")]
pub async fn logout() -> Result<(), ServerFnError> {
    let st = ssr::state()?;
    let session = ssr::session().await?;
    let addr = ssr::client_addr().await;
    let now = st.core.clock.now_ms();
    st.auth
        .logout(st.core.store.as_ref(), &session, &addr, now)
        .await
        .map_err(|e| {
            tracing::error!(error = %e, "console logout failed");
            ServerFnError::new("could not end the session; retry")
        })?;
    // A plain form post (before hydration) gets a 302 to the sign-in page.
    leptos_axum::redirect("/login");
    Ok(())
}

/// The signed-in user, or None without a valid session (no error: the layout decides).
#[server(endpoint = "me")]
pub async fn me() -> Result<Option<Principal>, ServerFnError> {
    let st = ssr::state()?;
    let session = ssr::session().await?;
    let now = st.core.clock.now_ms();
    let activity = leptos_axum::extract::<axum::http::HeaderMap>()
        .await
        .map_or(ssr::Activity::Person, |h| ssr::Activity::of(&h));
    let p = st
        .auth
        .current(st.core.store.as_ref(), &session, now, activity)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(p.as_ref().map(ssr::principal_dto))
}

/// The dashboard now (viewer), opened or refreshed by the person.
#[server(endpoint = "dashboard")]
pub async fn load_dashboard() -> Result<Dashboard, ServerFnError> {
    dashboard_as(false).await
}

/// The dashboard now (viewer), for the page's automatic refresh: a background request,
/// which does not keep the session alive (ASVS 5.0 V7.3.1), so a console left open on the
/// dashboard still signs out at the idle timeout.
#[server(endpoint = "dashboard_refresh")]
pub async fn refresh_dashboard() -> Result<Dashboard, ServerFnError> {
    dashboard_as(true).await
}

#[cfg(feature = "ssr")]
async fn dashboard_as(background: bool) -> Result<Dashboard, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let activity = if background {
        ssr::Activity::Background
    } else {
        ssr::Activity::Person
    };
    let (st, _) = ssr::authorize_as(Permission::View, activity).await?;
    st.core
        .dashboard()
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Every merchant (viewer): names for filters and lists.
#[server(endpoint = "merchants")]
pub async fn merchants() -> Result<Vec<Merchant>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    st.core
        .store
        .merchants()
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// One page of payments matching `query`, newest first, 50 a page (viewer).
#[server(endpoint = "payments")]
pub async fn search_payments(
    // Default when absent: a query with no filter has no fields to encode, so the browser's
    // call (URL-encoded arguments) carries no `query` at all, which would otherwise fail to
    // deserialize on every client-side visit of /payments.
    #[server(default)] query: PaymentSearch,
) -> Result<PaymentPage, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    // The form's `YYYY-MM-DDTHH:MM` (a datetime-local field) is the console's; the server
    // reads RFC 3339. The page size is the console's too.
    let q = PaymentSearch {
        from: crate::format::as_rfc3339(query.from),
        to: crate::format::as_rfc3339(query.to),
        limit: Some(50),
        ..query
    };
    st.core
        .search_payments(&q)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// A payment's whole story (viewer).
#[server(endpoint = "payment")]
pub async fn load_payment(id: String) -> Result<PaymentDetail, ServerFnError> {
    payment_as(id, ssr::Activity::Person).await
}

/// A payment's whole story (viewer), fetched again because the live stream (or its polling
/// fallback) said it changed: a background request, which does not keep the session alive.
#[server(endpoint = "payment_refresh")]
pub async fn refresh_payment(id: String) -> Result<PaymentDetail, ServerFnError> {
    payment_as(id, ssr::Activity::Background).await
}

#[cfg(feature = "ssr")]
async fn payment_as(id: String, activity: ssr::Activity) -> Result<PaymentDetail, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize_as(Permission::View, activity).await?;
    let id = id.trim();
    if id.is_empty() || id.len() > 64 {
        return Err(ssr::api_error(
            converge_server::error::ApiError::bad_request(
                converge_wire::ErrorCode::InvalidPaymentId,
                "give a payment id such as pay_…",
            ),
        ));
    }
    match st
        .core
        .payment_detail(id)
        .await
        .map_err(|e| ssr::api_error(e.into()))?
    {
        Some(d) => Ok(d),
        None => Err(ssr::api_error(converge_server::error::ApiError::new(
            axum::http::StatusCode::NOT_FOUND,
            converge_wire::ErrorCode::NotFound,
            format!("no payment with id {id}"),
        ))),
    }
}

/// Resolves an open error-pool item with a note (operator).
#[server(endpoint = "resolve_error")]
pub async fn resolve_error(id: i64, note: String) -> Result<ErrorItem, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ResolveErrors).await?;
    let item = st
        .core
        .resolve_error_item(&ssr::actor(&p).await, id, &note)
        .await
        .map_err(|e| ssr::api_error(converge_server::error::ApiError::from(e)))?;
    Ok(item)
}

/// Every console user (admin).
#[server(endpoint = "users")]
pub async fn list_users() -> Result<Vec<UserView>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::ManageUsers).await?;
    st.core.list_users().await.map_err(ssr::user_error)
}

/// Adds a user with `roles` (comma-separated) and `password` (admin). A user with
/// operator, approver or admin becomes a request another admin approves (issue 36).
#[server(endpoint = "add_user")]
pub async fn add_user(
    username: String,
    roles: String,
    password: String,
) -> Result<ConsoleChange<UserView>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .console_add_user(
            &ssr::actor(&p).await,
            &st.auth.credentials.hasher,
            &username,
            &roles,
            &password,
        )
        .await
        .map_err(ssr::privilege_error)
}

/// Disables a user, which ends its sessions (admin; not yourself).
#[server(endpoint = "disable_user")]
pub async fn disable_user(username: String) -> Result<(), ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .set_user_disabled(
            &username,
            true,
            st.core.clock.now_ms(),
            &ssr::actor(&p).await,
        )
        .await
        .map_err(ssr::user_error)?;
    Ok(())
}

/// Asks to enable a disabled user: a request another admin approves (admin; issue 36).
#[server(endpoint = "enable_user")]
pub async fn enable_user(username: String) -> Result<ConsoleChange<()>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .console_enable_user(&ssr::actor(&p).await, &username)
        .await
        .map_err(ssr::privilege_error)
}

/// Replaces a user's roles (admin; comma-separated; audited `user_roles_changed`). The
/// user's open sessions get the new roles at their next request; an admin cannot remove
/// their own admin role (400 `invalid_user`), nor take it from the last admin (409
/// `last_admin`). Granting operator, approver or admin becomes a request another admin
/// approves (issue 36).
#[server(endpoint = "set_user_roles")]
pub async fn set_user_roles(
    username: String,
    roles: String,
) -> Result<ConsoleChange<UserView>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .console_set_roles(&ssr::actor(&p).await, &username, &roles)
        .await
        .map_err(ssr::privilege_error)
}

/// The privilege requests waiting for an admin, and the latest decided ones (admin).
#[server(endpoint = "privilege_requests")]
pub async fn privilege_requests() -> Result<PrivilegeInbox, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .privilege_inbox(50)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Approves and runs a privilege request with the admin's password again (another admin
/// than its requester and its target). An issued key comes back this once.
#[server(endpoint = "approve_privilege")]
pub async fn approve_privilege(
    id: String,
    reason: String,
    password: String,
) -> Result<PrivilegeApproved, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    let addr = ssr::client_addr().await;
    st.core
        .approve_privilege_with_step_up(st.step_up(&p, &addr, &password), &id, &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Rejects a privilege request (another admin than its requester and its target).
#[server(endpoint = "reject_privilege")]
pub async fn reject_privilege(
    id: String,
    reason: String,
) -> Result<PrivilegeRequest, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .reject_privilege(&ssr::actor(&p).await, &id, &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Sets a new password for a user, which ends its sessions (admin). Someone else's who holds
/// operator, approver or admin becomes a request another admin approves (issue 36).
#[server(endpoint = "reset_password")]
pub async fn reset_password(
    username: String,
    password: String,
) -> Result<ConsoleChange<()>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    st.core
        .console_reset_password(
            &ssr::actor(&p).await,
            &st.auth.credentials.hasher,
            &username,
            &password,
        )
        .await
        .map_err(ssr::privilege_error)
}

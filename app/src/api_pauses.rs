//! Server functions of the emergency switch (issue 17 "Emergency switch"): the pauses page
//! and the banner every console page shows while a pause is in force. Thin adapters over
//! `converge_server::service::pauses`, the use cases the `/ops/v1/pauses` endpoints call;
//! roles are checked exactly as there (operators request and end, a different approver
//! approves after re-entering its password; ending takes the password again, and before
//! the minimum duration an approver too).

use leptos::prelude::*;

use crate::dto::{PauseItem, PauseOverview};

#[cfg(feature = "ssr")]
mod ssr {
    pub use crate::api::ssr::*;

    pub fn action_error(
        e: converge_server::service::actions::ActionError,
    ) -> leptos::prelude::ServerFnError {
        api_error(converge_server::error::ApiError::from(e))
    }
}

/// The pauses (viewer): pending and active ones, then the last 30 that ended.
#[server(endpoint = "pauses")]
pub async fn list_pauses() -> Result<PauseOverview, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    let items = st
        .core
        .pause_list(30)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(PauseOverview {
        items,
        now: st.core.clock.now_ms(),
    })
}

/// The pauses in force now (viewer), for the banner on every page. A background request:
/// it does not keep the session alive.
#[server(endpoint = "active_pauses")]
pub async fn active_pauses() -> Result<Vec<PauseItem>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize_as(Permission::View, ssr::Activity::Background).await?;
    st.core
        .pauses_in_force()
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// How many pause requests wait for an approver (added to the count beside "Approvals").
#[server(endpoint = "pending_pauses")]
pub async fn pending_pauses() -> Result<usize, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize_as(Permission::View, ssr::Activity::Background).await?;
    st.core
        .pauses_awaiting_approval()
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Requests a pause of `target` (`submissions`, `job:<kind>`, `endpoint:<id>`) with a
/// reason (operator). It takes effect when a different approver approves it.
#[server(endpoint = "request_pause")]
pub async fn request_pause(target: String, reason: String) -> Result<PauseItem, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::RequestActions).await?;
    let pause = st
        .core
        .request_pause(&ssr::actor(&p).await, &target, &reason)
        .await
        .map_err(ssr::action_error)?;
    Ok(pause)
}

/// Approves a pending pause (an approver other than the requester, after re-entering its
/// password), or an active pause's early end request (an approver other than who asked).
#[server(endpoint = "approve_pause")]
pub async fn approve_pause(
    id: String,
    password: String,
    reason: String,
) -> Result<PauseItem, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ApproveActions).await?;
    let addr = ssr::client_addr().await;
    let pause = st
        .core
        .approve_pause_with_step_up(st.step_up(&p, &addr, &password), id.trim(), &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(pause)
}

/// Rejects a pending pause (an approver other than the requester), or an active pause's
/// early end request (it stays in force).
#[server(endpoint = "reject_pause")]
pub async fn reject_pause(id: String, reason: String) -> Result<PauseItem, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::ApproveActions).await?;
    let pause = st
        .core
        .reject_pause(&ssr::actor(&p).await, id.trim(), &reason)
        .await
        .map_err(ssr::action_error)?;
    Ok(pause)
}

/// Ends a pause (operator, after re-entering its password): an active pause in force for
/// the minimum duration is resumed, a pending one cancelled; a younger active pause comes
/// back still active with an early end request (`end_requested_by`) that a different
/// approver approves or rejects (issue 36).
#[server(endpoint = "resume_pause")]
pub async fn resume_pause(
    id: String,
    password: String,
    reason: String,
) -> Result<PauseItem, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::pauses::PauseEnd;
    let (st, p) = ssr::authorize(Permission::RequestActions).await?;
    if password.is_empty() {
        return Err(ssr::api_error(converge_server::error::ApiError::new(
            axum::http::StatusCode::FORBIDDEN,
            converge_wire::ErrorCode::StepUpRequired,
            "re-enter your password to end or cancel a pause",
        )));
    }
    let addr = ssr::client_addr().await;
    let end = st
        .core
        .end_pause_with_step_up(st.step_up(&p, &addr, &password), id.trim(), &reason)
        .await
        .map_err(|e| ssr::api_error(e.into()))?;
    Ok(match end {
        PauseEnd::Ended(pause) | PauseEnd::Requested(pause) => pause,
    })
}

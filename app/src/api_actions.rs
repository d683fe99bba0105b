//! Server functions of ops actions and the audit log (DESIGN.md "Ops console"): thin
//! adapters over `Core::request_action` and friends with the same permission checks as the
//! `/ops/v1/actions` and `/ops/v1/audit` handlers (request and cancel: operators; approve,
//! reject and execute: approvers, approval after a step-up password check; lists: viewers;
//! verify: auditors). The server refuses whatever the page shows.

use leptos::prelude::*;

use crate::dto::{ActionRecord, ApprovalInbox, AuditVerify, BulkItem, BulkOutcome};

#[cfg(feature = "ssr")]
mod ssr {
    use converge_server::ops::principal::Principal;
    use converge_server::service::actions::ActionError;
    use converge_server::service::actor::Actor;
    use leptos::prelude::*;

    use crate::api::ssr::{api_error, client_addr};

    /// The audit actor of this request.
    pub async fn actor(p: &Principal) -> Actor {
        converge_server::ops::audit::actor(p, &client_addr().await)
    }

    /// An action refused, in words (the same code and message as the JSON API).
    pub fn action_error(e: ActionError) -> ServerFnError {
        api_error(converge_server::error::ApiError::from(e))
    }
}

/// Requests an action on a payment (operator): `query` and `retry` run at once, `reverse`,
/// `force_transition`, `capture` and `void` wait for an approver. A pending request blocks a
/// second one. A capture carries its amount (integer minor units) and whether it is final.
#[server(endpoint = "request_action")]
pub async fn request_action(
    kind: String,
    payment_id: String,
    reason: String,
    target_status: Option<String>,
    evidence: Option<String>,
    capture_amount: Option<i64>,
    capture_final: Option<bool>,
) -> Result<ActionRecord, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::actions::ActionRequest;
    let (st, p) = crate::api::ssr::authorize(Permission::RequestActions).await?;
    let blank = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
    let req = ActionRequest {
        kind: kind.trim().to_string(),
        payment_id: payment_id.trim().to_string(),
        reason,
        target_status: blank(target_status),
        evidence: blank(evidence),
        capture_amount,
        capture_final,
    };
    let a = st
        .core
        .request_action(&ssr::actor(&p).await, &req)
        .await
        .map_err(ssr::action_error)?;
    Ok(a)
}

/// How many requests wait for an approver (the count beside "Approvals" in the navigation).
/// Background: the count comes with every page and with live changes; it is never what the
/// person is doing, so it does not keep the session alive.
#[server(endpoint = "pending_approvals")]
pub async fn pending_approvals() -> Result<i64, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) =
        crate::api::ssr::authorize_as(Permission::View, crate::api::ssr::Activity::Background)
            .await?;
    st.core
        .approvals_waiting()
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))
}

/// The approvals inbox (viewer): pending requests and the `recent` latest decided ones, each
/// with its payment's merchant, amount and status now, and the server's clock.
#[server(endpoint = "approval_inbox")]
pub async fn approvals_inbox(recent: i64) -> Result<ApprovalInbox, ServerFnError> {
    inbox_as(recent, crate::api::ssr::Activity::Person).await
}

/// [`approvals_inbox`], fetched again because the live stream (or its polling fallback) said
/// the requests changed: a background request, which does not keep the session alive.
#[server(endpoint = "approval_inbox_refresh")]
pub async fn refresh_approvals_inbox(recent: i64) -> Result<ApprovalInbox, ServerFnError> {
    inbox_as(recent, crate::api::ssr::Activity::Background).await
}

#[cfg(feature = "ssr")]
async fn inbox_as(
    recent: i64,
    activity: crate::api::ssr::Activity,
) -> Result<ApprovalInbox, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = crate::api::ssr::authorize_as(Permission::View, activity).await?;
    st.core
        .approval_inbox(recent.clamp(0, 200))
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))
}

/// Approves and executes a pending request (an approver other than the requester, after
/// re-entering its own password).
#[server(endpoint = "approve_action")]
pub async fn approve_action(
    id: String,
    password: String,
    reason: String,
) -> Result<ActionRecord, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = crate::api::ssr::authorize(Permission::ApproveActions).await?;
    let addr = crate::api::ssr::client_addr().await;
    let a = st
        .core
        .approve_action_with_step_up(st.step_up(&p, &addr, &password), id.trim(), &reason)
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))?;
    Ok(a)
}

/// Rejects a pending request (an approver other than the requester).
#[server(endpoint = "reject_action")]
pub async fn reject_action(id: String, reason: String) -> Result<ActionRecord, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = crate::api::ssr::authorize(Permission::ApproveActions).await?;
    let a = st
        .core
        .reject_action(&ssr::actor(&p).await, id.trim(), &reason)
        .await
        .map_err(ssr::action_error)?;
    Ok(a)
}

/// Cancels one's own pending request (operator).
#[server(endpoint = "cancel_action")]
pub async fn cancel_action(id: String) -> Result<ActionRecord, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = crate::api::ssr::authorize(Permission::RequestActions).await?;
    let a = st
        .core
        .cancel_action(&ssr::actor(&p).await, id.trim())
        .await
        .map_err(ssr::action_error)?;
    Ok(a)
}

/// Runs an approved or failed action again (approver; every step is idempotent).
#[server(endpoint = "execute_action")]
pub async fn execute_action(id: String) -> Result<ActionRecord, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = crate::api::ssr::authorize(Permission::ApproveActions).await?;
    let a = st
        .core
        .execute_action(&ssr::actor(&p).await, id.trim())
        .await
        .map_err(ssr::action_error)?;
    Ok(a)
}

/// The exact payments a bulk retry of the selection would retry now (operator):
/// `source` is `stuck` (optionally one `status`) or `error_pool` (optionally one `kind`,
/// optionally only the payments of the item `ids`).
#[server(endpoint = "bulk_retry_preview")]
pub async fn bulk_retry_preview(
    source: String,
    status: Option<String>,
    kind: Option<String>,
    ids: Option<Vec<i64>>,
) -> Result<Vec<BulkItem>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::bulk::Selection;
    let (st, _) = crate::api::ssr::authorize(Permission::RequestActions).await?;
    let sel = Selection {
        source,
        status,
        kind,
        ids,
    };
    let items = st
        .core
        .bulk_retry_preview(&sel)
        .await
        .map_err(ssr::action_error)?;
    Ok(items)
}

/// Retries the previewed `(payment_id, version)` items the selection still holds at that
/// version (operator); rate-limited per user like `POST /ops/v1/actions/bulk-retry`.
#[server(endpoint = "bulk_retry")]
pub async fn bulk_retry(
    source: String,
    status: Option<String>,
    kind: Option<String>,
    ids: Option<Vec<i64>>,
    items: Vec<(String, i64)>,
    reason: String,
) -> Result<BulkOutcome, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::bulk::{Confirmed, Selection};
    let (st, p) = crate::api::ssr::authorize(Permission::RequestActions).await?;
    let sel = Selection {
        source,
        status,
        kind,
        ids,
    };
    let items: Vec<Confirmed> = items
        .into_iter()
        .map(|(payment_id, version)| Confirmed {
            payment_id,
            version,
        })
        .collect();
    let out = st
        .core
        .bulk_retry(&ssr::actor(&p).await, &sel, &items, &reason)
        .await
        .map_err(|e| crate::api::ssr::api_error(e.into()))?;
    Ok(out)
}

/// Re-computes the whole audit chain against the signed checkpoints (auditor), as
/// `GET /ops/v1/audit/verify` does, and reports the first broken record.
#[server(endpoint = "verify_audit")]
pub async fn verify_audit() -> Result<AuditVerify, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = crate::api::ssr::authorize(Permission::Audit).await?;
    converge_server::ops::audit::run_verify(&st, &p)
        .await
        .map_err(crate::api::ssr::api_error)
}

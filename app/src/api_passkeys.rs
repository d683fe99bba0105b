//! Server functions of passkeys for step-up (issue 36): a user's own passkeys (list, register
//! after re-entering the password, remove), the begin of a step-up by passkey, approvals by
//! passkey (a money action, a pause, a privilege request), and the admins' rule that
//! approvals require one. Thin adapters over `converge_server::service::passkeys` and the
//! step-up approvals, the use cases the `/ops/v1/passkeys` endpoints call, with the roles
//! checked exactly as there. The browser's part of each ceremony is [`crate::webauthn`].

use leptos::prelude::*;

use crate::dto::{
    ActionRecord, PasskeyChallenge, PasskeyPolicy, PasskeyView, PauseItem, PrivilegeApproved,
};

#[cfg(feature = "ssr")]
mod ssr {
    pub use crate::api::ssr::*;

    pub fn passkey_error(
        e: converge_server::service::passkeys::PasskeyError,
    ) -> leptos::prelude::ServerFnError {
        api_error(converge_server::error::ApiError::from(e))
    }

    pub fn step_up_error(
        e: converge_server::service::step_up::StepUpError,
    ) -> leptos::prelude::ServerFnError {
        api_error(converge_server::error::ApiError::from(e))
    }
}

/// The signed-in user's own passkeys.
#[server(endpoint = "passkeys")]
pub async fn list_passkeys() -> Result<Vec<PasskeyView>, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::View).await?;
    st.core
        .passkeys(&p.username)
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Begins registering a passkey for the signed-in user.
#[server(endpoint = "passkey_registration_begin")]
pub async fn begin_passkey_registration() -> Result<PasskeyChallenge, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    st.core
        .begin_passkey_registration(&st.auth.passkeys, &p.actor(&addr))
        .await
        .map_err(ssr::passkey_error)
}

/// Finishes registering a passkey named `name`: `credential` is the browser's answer as JSON,
/// `password` the user's own (step-up).
#[server(endpoint = "passkey_register")]
pub async fn register_passkey(
    challenge_id: String,
    name: String,
    credential: String,
    password: String,
) -> Result<PasskeyView, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::passkeys::parse_registration;
    use converge_server::service::step_up::Proof;
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    let credential = parse_registration(&credential).map_err(ssr::passkey_error)?;
    st.core
        .register_passkey_with_step_up(
            &st.auth.passkeys,
            st.step_up_with(&p, &addr, Proof::Password(&password)),
            &challenge_id,
            &name,
            &credential,
        )
        .await
        .map_err(ssr::passkey_error)
}

/// Removes one of the signed-in user's own passkeys.
#[server(endpoint = "passkey_remove")]
pub async fn remove_passkey(id: String) -> Result<(), ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    st.core
        .remove_passkey(&p.actor(&addr), id.trim())
        .await
        .map_err(ssr::passkey_error)
}

/// Begins a step-up by passkey for the signed-in user (its passkeys allowed).
#[server(endpoint = "passkey_step_up_begin")]
pub async fn begin_passkey_step_up() -> Result<PasskeyChallenge, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, p) = ssr::authorize(Permission::View).await?;
    let addr = ssr::client_addr().await;
    st.core
        .begin_passkey_step_up(&st.auth.passkeys, &p.actor(&addr))
        .await
        .map_err(ssr::passkey_error)
}

/// Approves and executes maker-checker request `id` with a passkey: `credential` answers
/// step-up ceremony `challenge_id` (as [`crate::api_actions::approve_action`] with the
/// password).
#[server(endpoint = "approve_action_passkey")]
pub async fn approve_action_by_passkey(
    id: String,
    challenge_id: String,
    credential: String,
    reason: String,
) -> Result<ActionRecord, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::passkeys::parse_assertion;
    use converge_server::service::step_up::Proof;
    let (st, p) = ssr::authorize(Permission::ApproveActions).await?;
    let addr = ssr::client_addr().await;
    let credential = parse_assertion(&credential).map_err(ssr::passkey_error)?;
    let proof = Proof::Passkey {
        challenge_id: &challenge_id,
        credential: &credential,
    };
    st.core
        .approve_action_with_step_up(st.step_up_with(&p, &addr, proof), id.trim(), &reason)
        .await
        .map_err(ssr::step_up_error)
}

/// Approves pause `id` with a passkey (as [`crate::api_pauses::approve_pause`] with the
/// password).
#[server(endpoint = "approve_pause_passkey")]
pub async fn approve_pause_by_passkey(
    id: String,
    challenge_id: String,
    credential: String,
    reason: String,
) -> Result<PauseItem, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::passkeys::parse_assertion;
    use converge_server::service::step_up::Proof;
    let (st, p) = ssr::authorize(Permission::ApproveActions).await?;
    let addr = ssr::client_addr().await;
    let credential = parse_assertion(&credential).map_err(ssr::passkey_error)?;
    let proof = Proof::Passkey {
        challenge_id: &challenge_id,
        credential: &credential,
    };
    st.core
        .approve_pause_with_step_up(st.step_up_with(&p, &addr, proof), id.trim(), &reason)
        .await
        .map_err(ssr::step_up_error)
}

/// Approves and runs privilege request `id` with a passkey (as
/// [`crate::api::approve_privilege`] with the password): another admin than its requester and
/// its target. An issued key comes back this once.
#[server(endpoint = "approve_privilege_passkey")]
pub async fn approve_privilege_by_passkey(
    id: String,
    reason: String,
    challenge_id: String,
    credential: String,
) -> Result<PrivilegeApproved, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::passkeys::parse_assertion;
    use converge_server::service::step_up::Proof;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    let addr = ssr::client_addr().await;
    let credential = parse_assertion(&credential).map_err(ssr::passkey_error)?;
    let proof = Proof::Passkey {
        challenge_id: &challenge_id,
        credential: &credential,
    };
    st.core
        .approve_privilege_with_step_up(st.step_up_with(&p, &addr, proof), &id, &reason)
        .await
        .map_err(ssr::step_up_error)
}

/// Whether approvals require a passkey.
#[server(endpoint = "passkey_policy")]
pub async fn get_passkey_policy() -> Result<PasskeyPolicy, ServerFnError> {
    use converge_server::domain::roles::Permission;
    let (st, _) = ssr::authorize(Permission::View).await?;
    st.core
        .passkey_policy()
        .await
        .map_err(|e| ssr::api_error(e.into()))
}

/// Sets whether approvals require a passkey (admins): proven with the admin's password, or,
/// when `challenge_id` and `credential` are given, with a passkey (the only proof accepted
/// while passkeys are required).
#[server(endpoint = "passkey_policy_set")]
pub async fn set_passkey_policy(
    required: bool,
    reason: String,
    password: String,
    challenge_id: String,
    credential: String,
) -> Result<PasskeyPolicy, ServerFnError> {
    use converge_server::domain::roles::Permission;
    use converge_server::service::passkeys::parse_assertion;
    use converge_server::service::step_up::Proof;
    let (st, p) = ssr::authorize(Permission::ManageUsers).await?;
    let addr = ssr::client_addr().await;
    let assertion = if credential.is_empty() {
        None
    } else {
        Some(parse_assertion(&credential).map_err(ssr::passkey_error)?)
    };
    let proof = match &assertion {
        Some(c) => Proof::Passkey {
            challenge_id: &challenge_id,
            credential: c,
        },
        None => Proof::Password(&password),
    };
    st.core
        .set_passkey_policy_with_step_up(st.step_up_with(&p, &addr, proof), required, &reason)
        .await
        .map_err(ssr::step_up_error)
}

//! `/ops/v1/passkeys` and `/ops/v1/settings/passkeys`: a console user's own passkeys for
//! step-up (issue 36; W3C Web Authentication Level 3), the begin of a step-up by passkey, and
//! the admins' rule that approvals require one ([`crate::service::passkeys`]). The approval
//! endpoints (`/actions/{id}/approve`, `/pauses/{id}/approve`,
//! `/privilege-requests/{id}/approve`) take a [`PasskeyAssertion`] instead of the password.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use converge_wire::ErrorCode;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use webauthn_rs::prelude::{PublicKeyCredential, RegisterPublicKeyCredential};

use super::OpsState;
use super::auth::Principal;
use super::extract::ClientAddr;
use super::extract::Empty;
use crate::domain::roles::Permission;
use crate::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::service::passkeys::{PasskeyChallenge, PasskeyPolicy, PasskeyView};
use crate::service::step_up::Proof;

/// The passkey routes.
pub fn routes() -> utoipa_axum::router::OpenApiRouter<OpsState> {
    use utoipa_axum::routes;
    utoipa_axum::router::OpenApiRouter::new()
        .routes(routes!(list, register))
        .routes(routes!(begin_registration))
        .routes(routes!(remove))
        .routes(routes!(begin_step_up))
        .routes(routes!(policy, set_policy))
}

/// A passkey's answer to a step-up ceremony: the ceremony's id from
/// `POST /ops/v1/passkeys/step-up` and what `navigator.credentials.get` gave, as JSON
/// (base64url buffers).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PasskeyAssertion {
    /// The ceremony's id.
    pub challenge_id: String,
    /// The `PublicKeyCredential` (`id`, `rawId`, `type`, `response` with
    /// `authenticatorData`, `clientDataJSON`, `signature`, `userHandle`). One that is not a
    /// WebAuthn assertion is refused like one that does not verify (403 `passkey_refused`).
    #[schema(schema_with = crate::schema::assertion_credential_schema)]
    pub credential: serde_json::Value,
}

/// A [`PasskeyAssertion`] whose credential parsed as a WebAuthn assertion.
pub struct Assertion {
    challenge_id: String,
    credential: PublicKeyCredential,
}

/// The body's assertion, parsed. Errors: 403 `passkey_refused` for a credential that is not
/// a WebAuthn assertion: a proof that does not hold, answered as one that does not verify.
pub fn assertion(a: Option<&PasskeyAssertion>) -> Result<Option<Assertion>, ApiError> {
    a.map(|a| {
        serde_json::from_value(a.credential.clone())
            .map(|credential| Assertion {
                challenge_id: a.challenge_id.clone(),
                credential,
            })
            .map_err(|_| ApiError::from(crate::service::passkeys::PasskeyError::Refused))
    })
    .transpose()
}

/// The proof of an approval's body: its passkey assertion when it has one, else its
/// password. Errors: 403 `step_up_required` with neither (a change that needs step-up and
/// got none, as a pause's end without a password).
pub fn proof<'a>(
    password: Option<&'a str>,
    passkey: Option<&'a Assertion>,
) -> Result<Proof<'a>, ApiError> {
    match (passkey, password) {
        (Some(a), _) => Ok(Proof::Passkey {
            challenge_id: &a.challenge_id,
            credential: &a.credential,
        }),
        (None, Some(p)) => Ok(Proof::Password(p)),
        (None, None) => Err(ApiError::new(
            StatusCode::FORBIDDEN,
            ErrorCode::StepUpRequired,
            "re-enter your password, or answer with a passkey",
        )),
    }
}

/// `{"items": [...]}`: the signed-in user's passkeys.
#[derive(Debug, Serialize, ToSchema)]
pub struct PasskeyList {
    /// Oldest first, at most 10.
    pub items: Vec<PasskeyView>,
}

/// One passkey.
#[derive(Debug, Serialize, ToSchema)]
pub struct PasskeyEnvelope {
    /// The passkey registered.
    pub passkey: PasskeyView,
}

/// Body of a registration's finish.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RegisterBody {
    /// The ceremony's id, from `POST /ops/v1/passkeys/registrations`.
    challenge_id: String,
    /// A name for it (1 to 64 characters, no control characters).
    #[schema(schema_with = crate::schema::passkey_name_schema)]
    name: String,
    /// What `navigator.credentials.create` gave, as JSON (base64url buffers). One that is
    /// not a WebAuthn registration is refused (403 `passkey_refused`).
    #[schema(schema_with = crate::schema::registration_credential_schema)]
    credential: serde_json::Value,
    /// The user's own password (step-up), or
    #[serde(default)]
    password: Option<String>,
    /// an existing passkey's assertion (required for a further passkey while passkeys are
    /// required).
    #[serde(default)]
    passkey: Option<PasskeyAssertion>,
}

/// Body of a change of the passkey rule.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyBody {
    /// True: approvals require a passkey.
    required: bool,
    /// Why.
    #[schema(schema_with = crate::schema::reason_schema)]
    reason: String,
    /// The admin's own password (step-up; refused while passkeys are required), or
    #[serde(default)]
    password: Option<String>,
    /// a passkey assertion.
    #[serde(default)]
    passkey: Option<PasskeyAssertion>,
}

/// Lists the signed-in user's own passkeys.
#[utoipa::path(
    get,
    path = "/passkeys",
    tag = "ops",
    operation_id = "ops_list_passkeys",
    summary = "List your own passkeys",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "Your passkeys, with nothing of their keys", body = PasskeyList),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn list(State(st): State<OpsState>, p: Principal) -> Result<Json<PasskeyList>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(PasskeyList {
        items: st.core.passkeys(&p.username).await?,
    }))
}

/// Begins registering a passkey: the options for `navigator.credentials.create`.
#[utoipa::path(
    post,
    path = "/passkeys/registrations",
    tag = "ops",
    operation_id = "ops_begin_passkey_registration",
    summary = "Begin registering a passkey",
    description = "Answers the ceremony's id (single use, two minutes) and the `publicKey` options for `navigator.credentials.create`. The relying party is `--webauthn-origin`'s host.",
    security(("console_session" = [])),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 200, description = "The ceremony", body = PasskeyChallenge),
        (status = 400, description = "The body is not `{}`", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "the request body must be a JSON object"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Cross-site", body = ErrorBody, example = json!({"error": {"code": "csrf_rejected", "message": "cross-origin request refused"}})),
        (status = 409, description = "As many passkeys as allowed already", body = ErrorBody, example = json!({"error": {"code": "too_many_passkeys", "message": "at most 10 passkeys per user; remove one first"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn begin_registration(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<PasskeyChallenge>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(
        st.core
            .begin_passkey_registration(&st.auth.passkeys, &p.actor(&addr))
            .await?,
    ))
}

/// Finishes registering a passkey, after step-up.
#[utoipa::path(
    post,
    path = "/passkeys",
    tag = "ops",
    operation_id = "ops_register_passkey",
    summary = "Register a passkey (password again)",
    description = "Audited `passkey_registered`. The proof is the password; while approvals require passkeys, a user who has one proves a further one with a passkey (a password alone cannot add the passkey that then approves).",
    security(("console_session" = [])),
    request_body(content = RegisterBody, content_type = "application/json"),
    responses(
        (status = 201, description = "Registered", body = PasskeyEnvelope),
        (status = 400, description = "A bad name (`invalid_passkey`) or a body that is not valid", body = ErrorBody, example = json!({"error": {"code": "invalid_passkey", "message": "name the passkey (1 to 64 characters)"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Cross-site (`csrf_rejected`), no proof (`step_up_required`), a proof that did not hold (`step_up_refused`), a ceremony unknown, used or expired or an answer that does not verify (`passkey_refused`), or the password while a passkey is required (`passkey_required`)", body = ErrorBody, example = json!({"error": {"code": "step_up_refused", "message": "not registered: re-enter your own password"}})),
        (status = 409, description = "Already registered (`passkey_exists`), or too many (`too_many_passkeys`)", body = ErrorBody, example = json!({"error": {"code": "passkey_exists", "message": "this passkey is already registered"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many failed password checks", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 4 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn register(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<RegisterBody>,
) -> Result<(StatusCode, Json<PasskeyEnvelope>), ApiError> {
    p.require(Permission::View)?;
    let asserted = assertion(b.passkey.as_ref())?;
    let proof = proof(b.password.as_deref(), asserted.as_ref())?;
    let credential: RegisterPublicKeyCredential = serde_json::from_value(b.credential)
        .map_err(|_| ApiError::from(crate::service::passkeys::PasskeyError::Refused))?;
    let passkey = st
        .core
        .register_passkey_with_step_up(
            &st.auth.passkeys,
            st.step_up_with(&p, &addr, proof),
            &b.challenge_id,
            &b.name,
            &credential,
        )
        .await?;
    Ok((StatusCode::CREATED, Json(PasskeyEnvelope { passkey })))
}

/// Removes one of the signed-in user's own passkeys.
#[utoipa::path(
    post,
    path = "/passkeys/{id}/remove",
    tag = "ops",
    operation_id = "ops_remove_passkey",
    summary = "Remove one of your passkeys",
    description = "Audited `passkey_removed`. Its assertions are refused from then on.",
    security(("console_session" = [])),
    params(("id" = String, Path, description = "The passkey's id (`pk_...`)")),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 204, description = "Removed"),
        (status = 400, description = "The body is not `{}`", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "the request body must be a JSON object"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Cross-site", body = ErrorBody, example = json!({"error": {"code": "csrf_rejected", "message": "cross-origin request refused"}})),
        (status = 404, description = "You have no such passkey", body = ErrorBody, example = json!({"error": {"code": "not_found", "message": "passkey not found"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn remove(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiPath(id): ApiPath<String>,
    ApiJson(_): ApiJson<Empty>,
) -> Result<StatusCode, ApiError> {
    p.require(Permission::View)?;
    st.core.remove_passkey(&p.actor(&addr), &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Begins a step-up by passkey: the options for `navigator.credentials.get`.
#[utoipa::path(
    post,
    path = "/passkeys/step-up",
    tag = "ops",
    operation_id = "ops_begin_passkey_step_up",
    summary = "Begin a step-up by passkey (for an approval)",
    description = "Answers the ceremony's id (single use, two minutes) and the `publicKey` options for `navigator.credentials.get`, your passkeys allowed. Send the ceremony's id and the browser's answer as `passkey` in the approval's body instead of `password`.",
    security(("console_session" = [])),
    request_body(content = Empty, content_type = "application/json"),
    responses(
        (status = 200, description = "The ceremony", body = PasskeyChallenge),
        (status = 400, description = "The body is not `{}`", body = ErrorBody, example = json!({"error": {"code": "invalid_request", "message": "the request body must be a JSON object"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Cross-site", body = ErrorBody, example = json!({"error": {"code": "csrf_rejected", "message": "cross-origin request refused"}})),
        (status = 409, description = "You have no passkey", body = ErrorBody, example = json!({"error": {"code": "no_passkeys", "message": "you have no passkey: register one first"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn begin_step_up(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(_): ApiJson<Empty>,
) -> Result<Json<PasskeyChallenge>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(
        st.core
            .begin_passkey_step_up(&st.auth.passkeys, &p.actor(&addr))
            .await?,
    ))
}

/// Whether approvals require a passkey.
#[utoipa::path(
    get,
    path = "/settings/passkeys",
    tag = "ops",
    operation_id = "ops_passkey_policy",
    summary = "Whether approvals require a passkey",
    security(("console_session" = [])),
    responses(
        (status = 200, description = "The rule, and who set it last", body = PasskeyPolicy),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn policy(State(st): State<OpsState>, p: Principal) -> Result<Json<PasskeyPolicy>, ApiError> {
    p.require(Permission::View)?;
    Ok(Json(st.core.passkey_policy().await?))
}

/// Sets whether approvals require a passkey (admins, after step-up).
#[utoipa::path(
    put,
    path = "/settings/passkeys",
    tag = "ops",
    operation_id = "ops_set_passkey_policy",
    summary = "Require passkeys for approvals, or stop requiring them (admins)",
    description = "Audited `passkeys_required_changed` (before and after). While passkeys are required the admin proves the change with a passkey, in either direction: a password alone can neither approve nor turn the rule off.",
    security(("console_session" = [])),
    request_body(content = PolicyBody, content_type = "application/json"),
    responses(
        (status = 200, description = "The rule as it is now", body = PasskeyPolicy),
        (status = 400, description = "No reason, or neither or both proofs", body = ErrorBody, example = json!({"error": {"code": "invalid_reason", "message": "a reason is required"}})),
        (status = 401, description = "Not signed in (no or expired session)", body = ErrorBody, example = json!({"error": {"code": "not_authenticated", "message": "sign in first"}})),
        (status = 403, description = "Not an admin (`forbidden`), cross-site (`csrf_rejected`), a proof that did not hold (`step_up_refused`), or the password while passkeys are required (`passkey_required`)", body = ErrorBody, example = json!({"error": {"code": "passkey_required", "message": "approvals require a passkey: approve with your passkey"}})),
        (status = 415, description = "State changes must be application/json", body = ErrorBody, example = json!({"error": {"code": "unsupported_media_type", "message": "send Content-Type: application/json"}})),
        (status = 429, description = "Too many failed password checks", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "rate_limited", "message": "too many password attempts; retry in 4 s"}})),
        (status = 503, description = "Database unavailable", body = ErrorBody, headers(("Retry-After" = u64, description = "Seconds to wait before retrying")), example = json!({"error": {"code": "database_unavailable", "message": "database unavailable; retry later"}}))
    )
)]
async fn set_policy(
    State(st): State<OpsState>,
    p: Principal,
    ClientAddr(addr): ClientAddr,
    ApiJson(b): ApiJson<PolicyBody>,
) -> Result<Json<PasskeyPolicy>, ApiError> {
    p.require(Permission::ManageUsers)?;
    let asserted = assertion(b.passkey.as_ref())?;
    let proof = proof(b.password.as_deref(), asserted.as_ref())?;
    Ok(Json(
        st.core
            .set_passkey_policy_with_step_up(
                st.step_up_with(&p, &addr, proof),
                b.required,
                &b.reason,
            )
            .await?,
    ))
}

//! Passkeys for step-up (issue 36; W3C Web Authentication Level 3; OWASP Authentication Cheat
//! Sheet, "Reauthentication"): a console user registers WebAuthn credentials and proves an
//! approval with one instead of the password ([`super::step_up`] decides which proof it
//! takes), and an admin can require passkeys for approvals.
//!
//! The ceremonies' state (the challenge) stays on the server, in the database, single use and
//! for [`CHALLENGE_TTL_MS`]; the browser gets only the options and sends back the ceremony's
//! id with its answer. A credential's signature counter must rise with every assertion: one
//! that does not is a cloned credential (WebAuthn §7.2 step 22), refused and audited
//! (`passkey_counter_regressed`).

use converge_wire::ErrorCode;
use webauthn_rs::prelude::{
    CreationChallengeResponse, Passkey, PasskeyAuthentication, PasskeyRegistration,
    PublicKeyCredential, RegisterPublicKeyCredential, RequestChallengeResponse, Uuid,
    WebauthnError,
};

use super::Core;
use super::actions::ActionError;
use super::actor::Actor;
use super::step_up::{StepUp, StepUpError, StepUpUse};
use crate::store::{ConsoleSetting, PasskeyRecord, PasskeyUse, StoreError};

pub use converge_wire::passkeys::{PasskeyChallenge, PasskeyPolicy, PasskeyView};

pub use super::relying_party::{CHALLENGE_TTL_MS, RelyingParty};

/// The console setting that makes approvals require a passkey (`true`/`false`).
pub const PASSKEYS_REQUIRED: &str = "passkeys_required";

/// Most passkeys one user may register.
pub const MAX_PASSKEYS_PER_USER: usize = 10;

const REGISTER: &str = "register";
const STEP_UP: &str = "step_up";

/// Why a passkey change or ceremony did not happen.
#[derive(Debug, thiserror::Error)]
pub enum PasskeyError {
    /// The name is blank or too long, or the browser's answer does not parse (400
    /// `invalid_passkey`).
    #[error("{0}")]
    Invalid(String),
    /// The registration was not accepted: its ceremony is unknown, used or expired, or the
    /// browser's answer does not verify (400 `passkey_refused`).
    #[error("passkey not registered: start again")]
    Refused,
    /// The credential is already registered (409 `passkey_exists`).
    #[error("this passkey is already registered")]
    Exists,
    /// The user has as many passkeys as allowed (409 `too_many_passkeys`).
    #[error("at most {MAX_PASSKEYS_PER_USER} passkeys per user; remove one first")]
    TooMany,
    /// No passkey to assert with (409 `no_passkeys`).
    #[error("you have no passkey: register one first")]
    NoPasskeys,
    /// No such passkey of this user (404 `not_found`).
    #[error("passkey not found")]
    NotFound,
    /// The proof asked again did not hold (403 `step_up_refused`), audited.
    #[error("not registered: re-enter your own password")]
    StepUpRefused,
    /// The step-up was not admitted (`RateLimited`), needs a passkey, or its record failed.
    #[error(transparent)]
    StepUp(#[from] StepUpError),
    /// Storage failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// The browser's answer to a step-up ceremony (`navigator.credentials.get`), from its JSON
/// text (base64url buffers). Errors: `Invalid`.
pub fn parse_assertion(json: &str) -> Result<PublicKeyCredential, PasskeyError> {
    serde_json::from_str(json)
        .map_err(|e| PasskeyError::Invalid(format!("not a passkey assertion: {e}")))
}

/// The browser's answer to a registration (`navigator.credentials.create`), from its JSON
/// text (base64url buffers). Errors: `Invalid`.
pub fn parse_registration(json: &str) -> Result<RegisterPublicKeyCredential, PasskeyError> {
    serde_json::from_str(json)
        .map_err(|e| PasskeyError::Invalid(format!("not a passkey registration: {e}")))
}

/// The base64url text (unpadded) of a credential id, as stored.
fn credential_id_text(raw: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(raw)
}

/// A stable WebAuthn user handle for `username`: not the name itself (the handle is stored
/// on the authenticator), the first 16 bytes of its SHA-256.
fn user_handle(username: &str) -> Uuid {
    use sha2::Digest;
    let d = sha2::Sha256::digest(format!("converge-user:{username}").as_bytes());
    let mut b = [0u8; 16];
    b.copy_from_slice(&d[..16]);
    Uuid::from_bytes(b)
}

fn view(r: &PasskeyRecord) -> PasskeyView {
    PasskeyView {
        id: r.id.clone(),
        name: r.name.clone(),
        sign_count: r.sign_count,
        created_at: r.created_at,
        last_used_at: r.last_used_at,
        confirmed: r.confirmed_at.is_some(),
    }
}

fn challenge(id: String, options: &impl serde::Serialize) -> Result<PasskeyChallenge, StoreError> {
    Ok(PasskeyChallenge {
        challenge_id: id,
        options: serde_json::to_string(options)
            .map_err(|e| StoreError::Corrupt(format!("webauthn options: {e}")))?,
    })
}

impl Core {
    /// `username`'s passkeys, oldest first, without their keys.
    pub async fn passkeys(&self, username: &str) -> Result<Vec<PasskeyView>, StoreError> {
        Ok(self
            .store
            .passkeys_of(username)
            .await?
            .iter()
            .map(view)
            .collect())
    }

    /// Whether approvals require a passkey, and who said so last.
    pub async fn passkey_policy(&self) -> Result<PasskeyPolicy, StoreError> {
        Ok(match self.store.console_setting(PASSKEYS_REQUIRED).await? {
            Some(s) => PasskeyPolicy {
                required: s.value == "true",
                updated_by: Some(s.updated_by),
                updated_at: Some(s.updated_at),
            },
            None => PasskeyPolicy {
                required: false,
                updated_by: None,
                updated_at: None,
            },
        })
    }

    /// Sets whether approvals require a passkey, as admin `who` (audited
    /// `passkeys_required_changed`, before and after). The caller has checked the role and
    /// the step-up ([`Self::set_passkey_policy_with_step_up`]).
    async fn set_passkey_policy(
        &self,
        who: &Actor,
        required: bool,
        reason: &str,
    ) -> Result<PasskeyPolicy, StoreError> {
        let before = self.passkey_policy().await?.required;
        let now = self.clock.now_ms();
        let e = who.entry(
            now,
            "passkeys_required_changed",
            "console:passkeys_required",
            reason,
            serde_json::json!({ "required": before }).to_string(),
            serde_json::json!({ "required": required }).to_string(),
        );
        let s = ConsoleSetting {
            name: PASSKEYS_REQUIRED.into(),
            value: required.to_string(),
            updated_by: who.username.clone(),
            updated_at: now,
        };
        self.store.set_console_setting(&s, &e).await?;
        self.passkey_policy().await
    }

    /// Sets whether approvals require a passkey, as admin `step_up.who` after its step-up
    /// (audited `passkeys_required_changed`). While passkeys are required the step-up must
    /// itself be a passkey ([`StepUpUse::Approval`]), in either direction: a password alone,
    /// however obtained, can neither approve nor turn the rule off. A proof that does not hold
    /// is audited (`step_up_refused`) and answered 403 `step_up_refused`. The caller has
    /// checked the admin role.
    pub async fn set_passkey_policy_with_step_up(
        &self,
        step_up: StepUp<'_>,
        required: bool,
        reason: &str,
    ) -> Result<PasskeyPolicy, StepUpError> {
        crate::domain::actions::check_reason(reason).map_err(StepUpError::InvalidReason)?;
        let ((), ok) = self
            .prove_step_up(&step_up, StepUpUse::Approval, async {})
            .await?;
        if !ok {
            self.audit_step_up_refused(&step_up.who, "console:passkeys_required")
                .await?;
            return Err(StepUpError::Action(ActionError::Forbidden(
                ErrorCode::StepUpRefused,
                "not changed: prove it is you again".into(),
            )));
        }
        Ok(self
            .set_passkey_policy(&step_up.who, required, reason)
            .await?)
    }

    /// Finishes registration `challenge_id` of `step_up.who` after its step-up: the password for a
    /// first passkey, and while passkeys are required an existing confirmed passkey for a further
    /// one. A first passkey registered while passkeys are required proves only the password, so a
    /// password alone must not make the passkey that then approves: it is stored unconfirmed and a
    /// `confirm_passkey` privilege request (expiring after the approval time,
    /// [`super::console::ConsoleSettings::action_ttl_ms`]) waits for another admin (issue 36). A
    /// proof that does not hold is audited (`step_up_refused`). Errors: as
    /// [`Self::finish_passkey_registration`], `StepUpRefused`, `StepUp`.
    pub async fn register_passkey_with_step_up(
        &self,
        rp: &RelyingParty,
        step_up: StepUp<'_>,
        challenge_id: &str,
        name: &str,
        credential: &RegisterPublicKeyCredential,
    ) -> Result<PasskeyView, PasskeyError> {
        let has_one = self
            .store
            .passkeys_of(&step_up.who.username)
            .await?
            .iter()
            .any(|r| r.confirmed_at.is_some());
        let usage = if has_one {
            StepUpUse::Approval
        } else {
            StepUpUse::Other
        };
        let ((), ok) = self.prove_step_up(&step_up, usage, async {}).await?;
        if !ok {
            self.audit_step_up_refused(&step_up.who, &format!("user:{}", step_up.who.username))
                .await?;
            return Err(PasskeyError::StepUpRefused);
        }
        let confirmed = has_one || !self.passkey_policy().await?.required;
        let who = &step_up.who;
        let view = self
            .finish_passkey_registration(rp, who, challenge_id, name, credential, confirmed)
            .await?;
        if !confirmed {
            self.ask_to_confirm_passkey(who).await?;
        }
        Ok(view)
    }

    async fn audit_step_up_refused(&self, who: &Actor, target: &str) -> Result<(), StoreError> {
        let e = who.entry(
            self.clock.now_ms(),
            "step_up_refused",
            target,
            "the password or passkey asked again did not hold",
            String::new(),
            String::new(),
        );
        self.store.append_audit(&e).await?;
        Ok(())
    }

    /// Begins registering a passkey for `who`: the options for `navigator.credentials.create`
    /// (its own passkeys excluded) and the ceremony's id. Errors: `TooMany`, `Store`.
    pub async fn begin_passkey_registration(
        &self,
        rp: &RelyingParty,
        who: &Actor,
    ) -> Result<PasskeyChallenge, PasskeyError> {
        let mine = self.store.passkeys_of(&who.username).await?;
        if mine.len() >= MAX_PASSKEYS_PER_USER {
            return Err(PasskeyError::TooMany);
        }
        let exclude = mine
            .iter()
            .filter_map(|r| serde_json::from_str::<Passkey>(&r.passkey).ok())
            .map(|p| p.cred_id().clone())
            .collect::<Vec<_>>();
        let (options, state): (CreationChallengeResponse, PasskeyRegistration) = rp
            .webauthn
            .start_passkey_registration(
                user_handle(&who.username),
                &who.username,
                &who.username,
                Some(exclude),
            )
            .map_err(|e| PasskeyError::Invalid(format!("cannot start a registration: {e}")))?;
        let id = self.put_ceremony(&who.username, REGISTER, &state).await?;
        Ok(challenge(id, &options)?)
    }

    /// Finishes registration `challenge_id` of `who` with the browser's answer, named `name`,
    /// audited `passkey_registered`. The caller has re-checked the password (a stolen session
    /// alone must not add a passkey that then approves). Errors: `Invalid` (name), `Refused`
    /// (ceremony unknown, used, expired, or an answer that does not verify), `Exists`,
    /// `TooMany`, `Store`.
    async fn finish_passkey_registration(
        &self,
        rp: &RelyingParty,
        who: &Actor,
        challenge_id: &str,
        name: &str,
        credential: &RegisterPublicKeyCredential,
        confirmed: bool,
    ) -> Result<PasskeyView, PasskeyError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
            return Err(PasskeyError::Invalid(
                "name the passkey (1 to 64 characters)".into(),
            ));
        }
        let now = self.clock.now_ms();
        let Some(state) = self
            .store
            .take_challenge(challenge_id, &who.username, REGISTER, now)
            .await?
        else {
            return Err(PasskeyError::Refused);
        };
        let state: PasskeyRegistration =
            serde_json::from_str(&state).map_err(|_| PasskeyError::Refused)?;
        let passkey = rp
            .webauthn
            .finish_passkey_registration(credential, &state)
            .map_err(|e| {
                tracing::info!(user = ?who.username, error = %e, "passkey registration refused");
                PasskeyError::Refused
            })?;
        if self.store.passkeys_of(&who.username).await?.len() >= MAX_PASSKEYS_PER_USER {
            return Err(PasskeyError::TooMany);
        }
        let record = PasskeyRecord {
            id: crate::ids::new_id("pk"),
            username: who.username.clone(),
            credential_id: credential_id_text(passkey.cred_id()),
            name: name.to_string(),
            passkey: serde_json::to_string(&passkey)
                .map_err(|e| StoreError::Corrupt(format!("passkey: {e}")))?,
            sign_count: 0,
            created_at: now,
            last_used_at: None,
            confirmed_at: confirmed.then_some(now),
        };
        let e = who.entry(
            now,
            "passkey_registered",
            &format!("user:{}", who.username),
            "",
            String::new(),
            serde_json::json!({ "passkey": record.id, "name": record.name, "confirmed": confirmed })
                .to_string(),
        );
        if !self.store.add_passkey(&record, &e).await? {
            return Err(PasskeyError::Exists);
        }
        Ok(view(&record))
    }

    /// Removes `who`'s own passkey `id`, audited `passkey_removed`. Errors: `NotFound`,
    /// `Store`.
    pub async fn remove_passkey(&self, who: &Actor, id: &str) -> Result<(), PasskeyError> {
        let e = who.entry(
            self.clock.now_ms(),
            "passkey_removed",
            &format!("user:{}", who.username),
            "",
            serde_json::json!({ "passkey": id.chars().take(64).collect::<String>() }).to_string(),
            String::new(),
        );
        if self.store.remove_passkey(&who.username, id, &e).await? {
            Ok(())
        } else {
            Err(PasskeyError::NotFound)
        }
    }

    /// Begins a step-up by passkey for `who`: the options for `navigator.credentials.get`
    /// (its passkeys allowed) and the ceremony's id, which the approval carries back with the
    /// assertion. Errors: `NoPasskeys`, `Store`.
    pub async fn begin_passkey_step_up(
        &self,
        rp: &RelyingParty,
        who: &Actor,
    ) -> Result<PasskeyChallenge, PasskeyError> {
        let keys = self
            .store
            .passkeys_of(&who.username)
            .await?
            .iter()
            .filter(|r| r.confirmed_at.is_some())
            .filter_map(|r| serde_json::from_str::<Passkey>(&r.passkey).ok())
            .collect::<Vec<_>>();
        if keys.is_empty() {
            return Err(PasskeyError::NoPasskeys);
        }
        let (options, state): (RequestChallengeResponse, PasskeyAuthentication) = rp
            .webauthn
            .start_passkey_authentication(&keys)
            .map_err(|e| PasskeyError::Invalid(format!("cannot start a step-up: {e}")))?;
        let id = self.put_ceremony(&who.username, STEP_UP, &state).await?;
        Ok(challenge(id, &options)?)
    }

    async fn put_ceremony(
        &self,
        username: &str,
        purpose: &str,
        state: &impl serde::Serialize,
    ) -> Result<String, StoreError> {
        let id = format!("wac_{}", crate::ids::new_token());
        let state = serde_json::to_string(state)
            .map_err(|e| StoreError::Corrupt(format!("webauthn state: {e}")))?;
        let now = self.clock.now_ms();
        self.store
            .put_challenge(&id, username, purpose, &state, now + CHALLENGE_TTL_MS, now)
            .await?;
        Ok(id)
    }

    /// Whether `credential` answers `who`'s step-up ceremony `challenge_id` with one of its
    /// passkeys: the ceremony is taken (single use) whatever the outcome, the user must exist
    /// and be enabled, and the signature counter must rise (stored conditionally, so two
    /// assertions with one counter value cannot both pass). A counter that does not rise is
    /// refused and audited `passkey_counter_regressed`. False for every refusal; `Err` only
    /// when storage failed.
    pub(super) async fn verify_passkey_assertion(
        &self,
        rp: &RelyingParty,
        who: &Actor,
        challenge_id: &str,
        credential: &PublicKeyCredential,
    ) -> Result<bool, StoreError> {
        let now = self.clock.now_ms();
        let state = self
            .store
            .take_challenge(challenge_id, &who.username, STEP_UP, now)
            .await?;
        let user = self.store.user_by_name(&who.username).await?;
        let (Some(state), Some(user)) = (state, user) else {
            return Ok(false);
        };
        if user.disabled {
            return Ok(false);
        }
        let Ok(state) = serde_json::from_str::<PasskeyAuthentication>(&state) else {
            return Ok(false);
        };
        let result = match rp
            .webauthn
            .finish_passkey_authentication(credential, &state)
        {
            Ok(r) => r,
            Err(WebauthnError::CredentialPossibleCompromise) => {
                let id = self.passkey_of_credential(who, &credential.raw_id).await?;
                self.audit_counter_regressed(who, id.as_deref()).await?;
                return Ok(false);
            }
            Err(e) => {
                tracing::info!(user = ?who.username, error = %e, "passkey assertion refused");
                return Ok(false);
            }
        };
        let mine = self.store.passkeys_of(&who.username).await?;
        // An unconfirmed passkey proves nothing yet (it is not offered by the begin either).
        let found = mine
            .into_iter()
            .filter(|r| r.confirmed_at.is_some())
            .find_map(|r| {
                let p = serde_json::from_str::<Passkey>(&r.passkey).ok()?;
                (p.cred_id() == result.cred_id()).then_some((r, p))
            });
        let Some((record, mut passkey)) = found else {
            // Removed between the begin and the finish.
            return Ok(false);
        };
        passkey.update_credential(&result);
        let json = serde_json::to_string(&passkey)
            .map_err(|e| StoreError::Corrupt(format!("passkey: {e}")))?;
        match self
            .store
            .record_passkey_use(&record.id, &json, i64::from(result.counter()), now)
            .await?
        {
            PasskeyUse::Recorded => Ok(true),
            PasskeyUse::CounterNotRaised => {
                self.audit_counter_regressed(who, Some(&record.id)).await?;
                Ok(false)
            }
        }
    }

    /// The id of `who`'s passkey whose credential id is `raw_id`, if any.
    async fn passkey_of_credential(
        &self,
        who: &Actor,
        raw_id: &[u8],
    ) -> Result<Option<String>, StoreError> {
        let text = credential_id_text(raw_id);
        Ok(self
            .store
            .passkeys_of(&who.username)
            .await?
            .into_iter()
            .find(|r| r.credential_id == text)
            .map(|r| r.id))
    }

    async fn audit_counter_regressed(
        &self,
        who: &Actor,
        passkey: Option<&str>,
    ) -> Result<(), StoreError> {
        tracing::warn!(user = ?who.username, passkey = ?passkey, "passkey counter did not rise: possibly cloned");
        let e = who.entry(
            self.clock.now_ms(),
            "passkey_counter_regressed",
            &format!("user:{}", who.username),
            "the signature counter did not rise: a cloned credential",
            String::new(),
            serde_json::json!({ "passkey": passkey }).to_string(),
        );
        self.store.append_audit(&e).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use webauthn_rs::prelude::Url;

    #[test]
    fn an_origin_without_a_host_name_is_no_relying_party() {
        let ip = Url::parse("http://127.0.0.1:3000").unwrap();
        assert!(RelyingParty::new(&ip).is_err());
        let host = Url::parse("http://localhost:3000").unwrap();
        assert_eq!(
            RelyingParty::new(&host).unwrap().origin().as_str(),
            "http://localhost:3000/"
        );
    }

    #[test]
    fn a_user_handle_is_stable_and_not_the_name() {
        assert_eq!(user_handle("ann"), user_handle("ann"));
        assert_ne!(user_handle("ann"), user_handle("bob"));
    }
}

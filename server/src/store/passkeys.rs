//! Storage of console users' passkeys (issue 36, passkeys for step-up): the WebAuthn
//! credentials each user registered, with their signature counters, the single-use server-side
//! state of a ceremony between its begin and its finish, and the console-wide settings an admin
//! changes at run time (whether approvals require a passkey).

use async_trait::async_trait;

use super::StoreError;
use super::governance::AuditEntry;

/// One registered passkey.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct PasskeyRecord {
    /// `pk_` + 24 hex.
    pub id: String,
    /// Its owner.
    pub username: String,
    /// The WebAuthn credential id, base64url without padding; unique across users.
    pub credential_id: String,
    /// What its owner called it.
    pub name: String,
    /// The webauthn-rs `Passkey` as JSON (public key, counter). Never shown.
    pub passkey: String,
    /// The signature counter as last accepted.
    pub sign_count: i64,
    /// Epoch ms UTC.
    pub created_at: i64,
    /// Epoch ms UTC of the last accepted assertion.
    pub last_used_at: Option<i64>,
    /// Epoch ms UTC from which it may prove a step-up: its registration, or, for a first
    /// passkey registered while passkeys are required, another admin's confirmation; None
    /// while it waits for that (issue 36).
    pub confirmed_at: Option<i64>,
}

/// How a use of a passkey was recorded ([`Passkeys::record_passkey_use`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PasskeyUse {
    /// The counter rose (or both it and the stored one are 0): recorded.
    Recorded,
    /// The counter did not rise above the stored one (or the passkey is gone): nothing
    /// written. Two assertions racing with one counter value cannot both pass.
    CounterNotRaised,
}

/// Passkeys, ceremony state and console settings.
#[async_trait]
pub trait Passkeys: Send + Sync + 'static {
    /// Inserts a passkey with its audit record in one transaction; false (nothing written)
    /// when its credential id is already registered, to anyone.
    async fn add_passkey(&self, p: &PasskeyRecord, audit: &AuditEntry) -> Result<bool, StoreError>;
    /// Confirms `username`'s unconfirmed passkeys registered at or before `registered_by`
    /// (epoch ms UTC: the confirming request's creation, so a passkey added after the request
    /// is not confirmed by it), at `now`, with `audit` in the same transaction. Returns how
    /// many it confirmed.
    async fn confirm_passkeys(
        &self,
        username: &str,
        registered_by: i64,
        now: i64,
        audit: &AuditEntry,
    ) -> Result<u64, StoreError>;
    /// `username`'s passkeys, oldest first.
    async fn passkeys_of(&self, username: &str) -> Result<Vec<PasskeyRecord>, StoreError>;
    /// Removes `username`'s passkey `id` with its audit record in one transaction; false
    /// (nothing written) when `username` has no passkey `id`.
    async fn remove_passkey(
        &self,
        username: &str,
        id: &str,
        audit: &AuditEntry,
    ) -> Result<bool, StoreError>;
    /// Stores passkey `id`'s new state and counter `sign_count` after an accepted assertion,
    /// only if `sign_count` is above the stored counter (or both are 0: an authenticator
    /// without a counter).
    async fn record_passkey_use(
        &self,
        id: &str,
        passkey: &str,
        sign_count: i64,
        now: i64,
    ) -> Result<PasskeyUse, StoreError>;
    /// Keeps a ceremony's state until `expires_at` (epoch ms UTC), dropping the expired ones.
    async fn put_challenge(
        &self,
        id: &str,
        username: &str,
        purpose: &str,
        state: &str,
        expires_at: i64,
        now: i64,
    ) -> Result<(), StoreError>;
    /// Takes (deletes) ceremony `id` of `username` for `purpose`: its state when it has not
    /// expired at `now`, else `None`. A second take of the same id finds nothing.
    async fn take_challenge(
        &self,
        id: &str,
        username: &str,
        purpose: &str,
        now: i64,
    ) -> Result<Option<String>, StoreError>;
    /// A console setting's value, when one was ever set.
    async fn console_setting(&self, name: &str) -> Result<Option<ConsoleSetting>, StoreError>;
    /// Sets a console setting, with its audit record in one transaction.
    async fn set_console_setting(
        &self,
        s: &ConsoleSetting,
        audit: &AuditEntry,
    ) -> Result<(), StoreError>;
}

/// A console setting as last set.
#[derive(Debug, Clone, PartialEq, Eq, sqlx::FromRow)]
pub struct ConsoleSetting {
    /// Its name (`passkeys_required`).
    pub name: String,
    /// Its value (`true`, `false`).
    pub value: String,
    /// Who set it.
    pub updated_by: String,
    /// Epoch ms UTC.
    pub updated_at: i64,
}

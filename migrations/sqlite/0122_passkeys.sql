-- Passkeys for step-up (issue 36): an approver may register WebAuthn credentials and approve
-- with one instead of the password. passkey: the webauthn-rs Passkey as JSON (credential id,
-- public key, signature counter); sign_count: its signature counter as last accepted, which an
-- assertion must raise (W3C WebAuthn Level 3, 7.2 step 22: a counter that does not grow is a
-- cloned credential). credential_id: base64url, unique across users. Times are epoch ms UTC.
-- Mirrors ../postgres/0122_passkeys.sql.
CREATE TABLE passkeys (
    id              TEXT    PRIMARY KEY,
    username        TEXT    NOT NULL,
    credential_id   TEXT    NOT NULL UNIQUE,
    name            TEXT    NOT NULL,
    passkey         TEXT    NOT NULL,
    sign_count      INTEGER  NOT NULL DEFAULT 0,
    created_at      INTEGER  NOT NULL,
    last_used_at    INTEGER
);
CREATE INDEX passkeys_username ON passkeys (username, created_at);
-- A ceremony's server-side state (the challenge) between its begin and its finish: single
-- use (taken by a DELETE) and short-lived. purpose: register or step_up.
CREATE TABLE webauthn_challenges (
    id              TEXT    PRIMARY KEY,
    username        TEXT    NOT NULL,
    purpose         TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    expires_at      INTEGER  NOT NULL
);
CREATE INDEX webauthn_challenges_expires ON webauthn_challenges (expires_at);
-- Console-wide settings an admin changes at run time (name: passkeys_required, value: true
-- or false), each change audited with it.
CREATE TABLE console_settings (
    name            TEXT    PRIMARY KEY,
    value           TEXT    NOT NULL,
    updated_by      TEXT    NOT NULL,
    updated_at      INTEGER  NOT NULL
);

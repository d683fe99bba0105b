-- A merchant's own PSP account (issue 38): which connector its new payments go to, and the
-- account's credentials, sealed at rest like webhook secrets (domain/secret_box.rs, purpose
-- "converge merchant_connectors"). One row per merchant; switching back to the default
-- connector keeps the row with routed = FALSE, so the payments still open on the account
-- are queried, captured and refunded there.
CREATE TABLE merchant_connectors (
    merchant_id     BIGINT PRIMARY KEY REFERENCES merchants (id),
    kind            TEXT NOT NULL CHECK (kind IN ('stripe')),
    routed          BOOLEAN NOT NULL,
    api_base        TEXT NOT NULL,
    -- Sealed: the secret key (sk_...) and the webhook signing secrets (whsec_..., one per
    -- line: several while one is rolled).
    secret_key      TEXT NOT NULL,
    webhook_secrets TEXT NOT NULL,
    -- The last four characters of the secret key, the only part ever shown.
    key_hint        TEXT NOT NULL,
    payment_method  TEXT NOT NULL,
    updated_at      BIGINT NOT NULL
);

-- Ops console users (PostgreSQL). Mirrors ../sqlite/0003_users.sql.
-- roles: comma-separated subset of viewer,operator,approver,auditor,admin.
-- session_epoch: bumped when a user is disabled or its password reset, which ends its sessions.

CREATE TABLE users (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    username      TEXT    NOT NULL UNIQUE,
    password_hash TEXT    NOT NULL,
    roles         TEXT    NOT NULL,
    disabled      BOOLEAN NOT NULL DEFAULT FALSE,
    session_epoch BIGINT  NOT NULL DEFAULT 0,
    created_at    BIGINT  NOT NULL,
    updated_at    BIGINT  NOT NULL
);

CREATE INDEX payments_merchant_created ON payments (merchant_id, created_at);
CREATE INDEX payments_status_created ON payments (status, created_at);

-- converge core schema (SQLite). Times are INTEGER milliseconds since the epoch, UTC;
-- amounts are INTEGER minor units. Mirrors ../postgres/0001_core.sql table for table.

CREATE TABLE merchants (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL UNIQUE,
    api_key_hash TEXT    NOT NULL UNIQUE,
    frozen       BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   INTEGER NOT NULL
);

CREATE TABLE payments (
    id                TEXT    PRIMARY KEY,
    merchant_id       INTEGER NOT NULL REFERENCES merchants(id),
    merchant_order_id TEXT    NOT NULL,
    amount            INTEGER NOT NULL CHECK (amount > 0),
    currency          TEXT    NOT NULL,
    description       TEXT    NOT NULL DEFAULT '',
    params_hash       TEXT    NOT NULL,
    status            TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    channel_key       TEXT    NOT NULL UNIQUE,
    submit_attempts   INTEGER NOT NULL DEFAULT 0,
    refunded_amount   INTEGER NOT NULL DEFAULT 0 CHECK (refunded_amount >= 0 AND refunded_amount <= amount),
    last_error        TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    UNIQUE (merchant_id, merchant_order_id)
);
CREATE INDEX payments_status_updated ON payments (status, updated_at);
CREATE INDEX payments_created ON payments (created_at);

CREATE TABLE payment_events (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    payment_id  TEXT    NOT NULL REFERENCES payments(id),
    event_id    TEXT    NOT NULL,
    event       TEXT    NOT NULL,
    from_status TEXT    NOT NULL,
    to_status   TEXT,
    applied     BOOLEAN NOT NULL,
    source      TEXT    NOT NULL,
    detail      TEXT    NOT NULL DEFAULT '',
    created_at  INTEGER NOT NULL,
    UNIQUE (payment_id, event_id)
);

CREATE TABLE idempotency_keys (
    merchant_id      INTEGER NOT NULL REFERENCES merchants(id),
    scope            TEXT    NOT NULL,
    idem_key         TEXT    NOT NULL,
    route            TEXT    NOT NULL,
    fingerprint      TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    resource_id      TEXT,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BLOB,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, idem_key)
);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

CREATE TABLE idempotency_outcomes (
    route   TEXT    NOT NULL,
    outcome TEXT    NOT NULL,
    minute  INTEGER NOT NULL,
    count   INTEGER NOT NULL,
    PRIMARY KEY (route, outcome, minute)
);

CREATE TABLE refunds (
    id          TEXT    PRIMARY KEY,
    payment_id  TEXT    NOT NULL REFERENCES payments(id),
    amount      INTEGER NOT NULL CHECK (amount > 0),
    reason      TEXT    NOT NULL DEFAULT '',
    status      TEXT    NOT NULL,
    last_error  TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL
);
CREATE INDEX refunds_payment ON refunds (payment_id);

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    kind             TEXT    NOT NULL,
    payment_id       TEXT,
    refund_id        TEXT,
    status           TEXT    NOT NULL,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_at           INTEGER NOT NULL,
    lease_owner      TEXT,
    lease_token      TEXT,
    lease_expires_at INTEGER,
    last_error       TEXT,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL
);
CREATE INDEX jobs_due ON jobs (status, run_at);
CREATE INDEX jobs_payment ON jobs (payment_id);

CREATE TABLE ledger_batches (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    payment_id TEXT    NOT NULL REFERENCES payments(id),
    refund_id  TEXT,
    kind       TEXT    NOT NULL,
    currency   TEXT    NOT NULL,
    created_at INTEGER NOT NULL
);
-- At most one charge batch per payment (DESIGN.md "Ledger").
CREATE UNIQUE INDEX ledger_one_charge_per_payment ON ledger_batches (payment_id) WHERE kind = 'charge';
CREATE UNIQUE INDEX ledger_one_batch_per_refund ON ledger_batches (refund_id) WHERE refund_id IS NOT NULL;

CREATE TABLE ledger_entries (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    batch_id  INTEGER NOT NULL REFERENCES ledger_batches(id),
    account   TEXT    NOT NULL,
    direction TEXT    NOT NULL CHECK (direction IN ('debit', 'credit')),
    amount    INTEGER NOT NULL CHECK (amount > 0),
    currency  TEXT    NOT NULL
);
CREATE INDEX ledger_entries_batch ON ledger_entries (batch_id);

CREATE TABLE channel_callbacks (
    event_id    TEXT    PRIMARY KEY,
    channel_key TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    received_at INTEGER NOT NULL
);

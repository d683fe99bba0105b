-- The transactional outbox and merchant webhooks (SQLite). Mirrors ../postgres/0007_outbox_webhooks.sql.
-- DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §6.1, seed 000 §6.

-- One row per outcome, inserted in the transaction of the transition that causes it and never
-- updated: the column names are Debezium's Outbox Event Router defaults (id, aggregatetype,
-- aggregateid, type, payload), so the table can be captured as it is. `seq` is the insertion
-- order, for relays that publish in order.
CREATE TABLE events (
    seq           INTEGER PRIMARY KEY AUTOINCREMENT,
    id            TEXT    NOT NULL UNIQUE,
    merchant_id   INTEGER NOT NULL,
    aggregatetype TEXT    NOT NULL,
    aggregateid   TEXT    NOT NULL,
    type          TEXT    NOT NULL,
    payload       TEXT    NOT NULL,
    created_at    INTEGER NOT NULL
);
-- An outcome is written once, however often its transition is replayed or raced.
CREATE UNIQUE INDEX events_one_per_outcome ON events (aggregatetype, aggregateid, type);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE webhook_endpoints (
    id                  TEXT    PRIMARY KEY,
    merchant_id         INTEGER NOT NULL REFERENCES merchants(id),
    url                 TEXT    NOT NULL,
    description         TEXT    NOT NULL DEFAULT '',
    -- ',type,type,' (or ',*,'): matched with LIKE in the event's transaction.
    enabled_events      TEXT    NOT NULL,
    secret              TEXT    NOT NULL,
    previous_secret     TEXT,
    previous_expires_at INTEGER,
    status              TEXT    NOT NULL CHECK (status IN ('enabled', 'disabled', 'deleted')),
    disabled_reason     TEXT,
    failing_since       INTEGER,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (merchant_id, status);

-- One delivery per (event, endpoint); its attempts are rows of webhook_attempts.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id        TEXT    NOT NULL REFERENCES events(id),
    endpoint_id     TEXT    NOT NULL REFERENCES webhook_endpoints(id),
    status          TEXT    NOT NULL CHECK (status IN ('pending', 'succeeded', 'dead', 'abandoned')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER,
    last_status     INTEGER,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL,
    delivered_at    INTEGER,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, status, updated_at);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (status, created_at);

CREATE TABLE webhook_attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  INTEGER NOT NULL REFERENCES webhook_deliveries(id),
    attempted_at INTEGER NOT NULL,
    duration_ms  INTEGER NOT NULL,
    status_code  INTEGER,
    response     TEXT    NOT NULL DEFAULT '',
    error        TEXT
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id);

-- When this schema arrived: `converge verify` expects an event for every outcome reached
-- since then (payments settled before it never had one).
CREATE TABLE schema_marks (
    name TEXT PRIMARY KEY,
    at   INTEGER NOT NULL
);
INSERT INTO schema_marks (name, at) VALUES ('outbox', CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER));

-- The transactional outbox and merchant webhooks (PostgreSQL). Mirrors ../sqlite/0007_outbox_webhooks.sql.
-- DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §6.1, seed 000 §6.

-- One row per outcome, inserted in the transaction of the transition that causes it and never
-- updated: the column names are Debezium's Outbox Event Router defaults (id, aggregatetype,
-- aggregateid, type, payload), so the table can be captured as it is. `seq` is the insertion
-- order, for relays that publish in order.
CREATE TABLE events (
    seq           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    merchant_id   BIGINT  NOT NULL,
    aggregatetype TEXT    NOT NULL,
    aggregateid   TEXT    NOT NULL,
    type          TEXT    NOT NULL,
    payload       TEXT    NOT NULL,
    created_at    BIGINT  NOT NULL
);
-- An outcome is written once, however often its transition is replayed or raced.
CREATE UNIQUE INDEX events_one_per_outcome ON events (aggregatetype, aggregateid, type);
CREATE INDEX events_created ON events (created_at);

CREATE TABLE webhook_endpoints (
    id                  TEXT    PRIMARY KEY,
    merchant_id         BIGINT  NOT NULL REFERENCES merchants(id),
    url                 TEXT    NOT NULL,
    description         TEXT    NOT NULL DEFAULT '',
    -- ',type,type,' (or ',*,'): matched with LIKE in the event's transaction.
    enabled_events      TEXT    NOT NULL,
    secret              TEXT    NOT NULL,
    previous_secret     TEXT,
    previous_expires_at BIGINT ,
    status              TEXT    NOT NULL CHECK (status IN ('enabled', 'disabled', 'deleted')),
    disabled_reason     TEXT,
    failing_since       BIGINT ,
    created_at          BIGINT  NOT NULL,
    updated_at          BIGINT  NOT NULL
);
CREATE INDEX webhook_endpoints_merchant ON webhook_endpoints (merchant_id, status);

-- One delivery per (event, endpoint); its attempts are rows of webhook_attempts.
CREATE TABLE webhook_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        TEXT    NOT NULL REFERENCES events(id),
    endpoint_id     TEXT    NOT NULL REFERENCES webhook_endpoints(id),
    status          TEXT    NOT NULL CHECK (status IN ('pending', 'succeeded', 'dead', 'abandoned')),
    attempts        BIGINT  NOT NULL DEFAULT 0,
    next_attempt_at BIGINT ,
    last_status     BIGINT ,
    last_error      TEXT,
    created_at      BIGINT  NOT NULL,
    updated_at      BIGINT  NOT NULL,
    delivered_at    BIGINT ,
    UNIQUE (event_id, endpoint_id)
);
CREATE INDEX webhook_deliveries_endpoint ON webhook_deliveries (endpoint_id, status, updated_at);
CREATE INDEX webhook_deliveries_status ON webhook_deliveries (status, created_at);

CREATE TABLE webhook_attempts (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    delivery_id  BIGINT  NOT NULL REFERENCES webhook_deliveries(id),
    attempted_at BIGINT  NOT NULL,
    duration_ms  BIGINT  NOT NULL,
    status_code  BIGINT ,
    response     TEXT    NOT NULL DEFAULT '',
    error        TEXT
);
CREATE INDEX webhook_attempts_delivery ON webhook_attempts (delivery_id);

-- When this schema arrived: `converge verify` expects an event for every outcome reached
-- since then (payments settled before it never had one).
CREATE TABLE schema_marks (
    name TEXT PRIMARY KEY,
    at   BIGINT NOT NULL
);
INSERT INTO schema_marks (name, at) VALUES ('outbox', CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT));

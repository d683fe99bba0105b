-- Compensation queue payloads, the error pool, and reconciliation runs (PostgreSQL).
-- Mirrors ../sqlite/0002_queue.sql.

ALTER TABLE jobs ADD COLUMN payload TEXT NOT NULL DEFAULT '';

CREATE TABLE error_pool (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind            TEXT    NOT NULL,
    dedupe_key      TEXT    NOT NULL UNIQUE,
    payment_id      TEXT,
    summary         TEXT    NOT NULL,
    evidence        TEXT    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'open',
    occurrences     BIGINT  NOT NULL DEFAULT 1,
    first_seen      BIGINT  NOT NULL,
    last_seen       BIGINT  NOT NULL,
    resolution_note TEXT,
    resolved_by     TEXT,
    resolved_at     BIGINT
);
CREATE INDEX error_pool_status_kind ON error_pool (status, kind, first_seen);
CREATE INDEX error_pool_payment ON error_pool (payment_id);

CREATE TABLE reconciliations (
    day         TEXT    PRIMARY KEY,
    source      TEXT    NOT NULL,
    row_count   BIGINT  NOT NULL,
    differences BIGINT  NOT NULL,
    imported_at BIGINT  NOT NULL
);

-- Compensation queue payloads, the error pool, and reconciliation runs (SQLite).
-- Mirrors ../postgres/0002_queue.sql.

ALTER TABLE jobs ADD COLUMN payload TEXT NOT NULL DEFAULT '';

CREATE TABLE error_pool (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    kind            TEXT    NOT NULL,
    dedupe_key      TEXT    NOT NULL UNIQUE,
    payment_id      TEXT,
    summary         TEXT    NOT NULL,
    evidence        TEXT    NOT NULL,
    status          TEXT    NOT NULL DEFAULT 'open',
    occurrences     INTEGER NOT NULL DEFAULT 1,
    first_seen      INTEGER NOT NULL,
    last_seen       INTEGER NOT NULL,
    resolution_note TEXT,
    resolved_by     TEXT,
    resolved_at     INTEGER
);
CREATE INDEX error_pool_status_kind ON error_pool (status, kind, first_seen);
CREATE INDEX error_pool_payment ON error_pool (payment_id);

CREATE TABLE reconciliations (
    day         TEXT    PRIMARY KEY,
    source      TEXT    NOT NULL,
    row_count   INTEGER NOT NULL,
    differences INTEGER NOT NULL,
    imported_at INTEGER NOT NULL
);

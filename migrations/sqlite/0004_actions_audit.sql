-- Ops actions under maker-checker, and the hash-chained audit log (SQLite).
-- Mirrors ../postgres/0004_actions_audit.sql.

CREATE TABLE actions (
    id              TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL,
    payment_id      TEXT    NOT NULL REFERENCES payments(id),
    requested_by    TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    evidence        TEXT    NOT NULL DEFAULT '',
    target_status   TEXT,
    payment_version INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    decided_by      TEXT,
    decision_reason TEXT,
    result          TEXT,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    decided_at      INTEGER,
    executed_at     INTEGER
);
-- One open request per payment: a pending request blocks a duplicate.
CREATE UNIQUE INDEX actions_one_pending_per_payment ON actions (payment_id) WHERE status = 'pending';
CREATE INDEX actions_status_created ON actions (status, created_at);

CREATE TABLE audit_log (
    seq          INTEGER PRIMARY KEY,
    at           INTEGER NOT NULL,
    actor        TEXT    NOT NULL,
    roles        TEXT    NOT NULL,
    action       TEXT    NOT NULL,
    target       TEXT    NOT NULL,
    reason       TEXT    NOT NULL,
    before_state TEXT    NOT NULL,
    after_state  TEXT    NOT NULL,
    request_meta TEXT    NOT NULL,
    prev_hash    TEXT    NOT NULL,
    hash         TEXT    NOT NULL
);
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX audit_log_target ON audit_log (target);

-- Append-only: history is never edited.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only');
END;

-- Ops actions under maker-checker, and the hash-chained audit log (PostgreSQL).
-- Mirrors ../sqlite/0004_actions_audit.sql.

CREATE TABLE actions (
    id              TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL,
    payment_id      TEXT    NOT NULL REFERENCES payments(id),
    requested_by    TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    evidence        TEXT    NOT NULL DEFAULT '',
    target_status   TEXT,
    payment_version BIGINT  NOT NULL,
    status          TEXT    NOT NULL,
    decided_by      TEXT,
    decision_reason TEXT,
    result          TEXT,
    created_at      BIGINT  NOT NULL,
    expires_at      BIGINT  NOT NULL,
    decided_at      BIGINT,
    executed_at     BIGINT
);
-- One open request per payment: a pending request blocks a duplicate.
CREATE UNIQUE INDEX actions_one_pending_per_payment ON actions (payment_id) WHERE status = 'pending';
CREATE INDEX actions_status_created ON actions (status, created_at);

CREATE TABLE audit_log (
    seq          BIGINT  PRIMARY KEY,
    at           BIGINT  NOT NULL,
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
CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END
$$;
CREATE TRIGGER audit_log_no_update_or_delete BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

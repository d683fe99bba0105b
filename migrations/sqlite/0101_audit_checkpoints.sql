-- Signed audit checkpoints (issue 13; DESIGN.md "Ops console": Ed25519 over sequence, head
-- hash and time, key outside the database). Mirrors ../postgres/0101_audit_checkpoints.sql.
CREATE TABLE audit_checkpoints (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    seq       INTEGER NOT NULL,
    head_hash TEXT    NOT NULL,
    at        INTEGER NOT NULL,
    key_id    TEXT    NOT NULL,
    signature TEXT    NOT NULL
);
CREATE INDEX audit_checkpoints_seq ON audit_checkpoints (seq);

CREATE TRIGGER audit_checkpoints_no_update BEFORE UPDATE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit_checkpoints is append-only');
END;
CREATE TRIGGER audit_checkpoints_no_delete BEFORE DELETE ON audit_checkpoints
BEGIN
    SELECT RAISE(ABORT, 'audit_checkpoints is append-only');
END;

-- INSERT OR REPLACE deletes the old row without firing DELETE triggers (unless
-- recursive_triggers is on), so the UPDATE/DELETE triggers alone let it rewrite a record.
-- BEFORE INSERT runs before conflict resolution: only the next seq may be inserted, so no
-- insert of any kind can replace a record or leave a gap.
CREATE TRIGGER audit_log_append_next_only BEFORE INSERT ON audit_log
WHEN NEW.seq <> COALESCE((SELECT MAX(seq) FROM audit_log), 0) + 1
BEGIN
    SELECT RAISE(ABORT, 'audit_log is append-only: only the next seq may be inserted');
END;

-- Signed audit checkpoints (issue 13; DESIGN.md "Ops console": Ed25519 over sequence, head
-- hash and time, key outside the database). Mirrors ../sqlite/0101_audit_checkpoints.sql.
CREATE TABLE audit_checkpoints (
    id        BIGSERIAL PRIMARY KEY,
    seq       BIGINT  NOT NULL,
    head_hash TEXT    NOT NULL,
    at        BIGINT  NOT NULL,
    key_id    TEXT    NOT NULL,
    signature TEXT    NOT NULL
);
CREATE INDEX audit_checkpoints_seq ON audit_checkpoints (seq);

CREATE TRIGGER audit_checkpoints_no_update_or_delete BEFORE UPDATE OR DELETE ON audit_checkpoints
    FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();

-- TRUNCATE fires no row trigger: refuse it with statement triggers, on both tables.
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_checkpoints_no_truncate BEFORE TRUNCATE ON audit_checkpoints
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- Like SQLite's: only the next seq may be inserted (no gap, no rewrite through a conflict).
CREATE FUNCTION audit_log_next_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.seq <> COALESCE((SELECT MAX(seq) FROM audit_log), 0) + 1 THEN
        RAISE EXCEPTION 'audit_log is append-only: only the next seq may be inserted';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER audit_log_append_next_only BEFORE INSERT ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_next_only();

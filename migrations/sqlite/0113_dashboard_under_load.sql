-- The dashboard under load (issue 15, "Under load"). Mirrors ../postgres/0113_dashboard_under_load.sql,
-- whose comments give the measurement. SQLite keeps no dead row versions in its indexes, so the
-- two partial indexes PostgreSQL gets (stuck-able payments, live jobs) are not needed here: its
-- existing (status, updated_at) and (status, run_at) indexes already read only live rows.

-- Done jobs counted per minute of their updated_at and kind: the dashboard's "done in the last
-- hour" and "in the last 5 minutes" sum these rows (plus the one partial minute at the start of
-- the window, counted from jobs), instead of counting every done job of the window. Kept by the
-- triggers below in the same transaction as the write to jobs, so it always equals
--   SELECT updated_at / 60000, kind, COUNT(*) FROM jobs WHERE status = 'done' GROUP BY 1, 2
-- summed over shards (one writer: always shard 0 here).
CREATE TABLE jobs_done_minutes (
    minute INTEGER NOT NULL,
    kind   TEXT    NOT NULL,
    shard  INTEGER NOT NULL,
    n      INTEGER NOT NULL,
    PRIMARY KEY (minute, kind, shard)
);

INSERT INTO jobs_done_minutes (minute, kind, shard, n)
    SELECT updated_at / 60000, kind, 0, COUNT(*) FROM jobs WHERE status = 'done' GROUP BY 1, 2;

CREATE TRIGGER jobs_done_minutes_insert AFTER INSERT ON jobs WHEN NEW.status = 'done'
BEGIN
    INSERT INTO jobs_done_minutes (minute, kind, shard, n) VALUES (NEW.updated_at / 60000, NEW.kind, 0, 1)
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_done_minutes_update AFTER UPDATE OF status, updated_at, kind ON jobs
    WHEN OLD.status = 'done' OR NEW.status = 'done'
BEGIN
    INSERT INTO jobs_done_minutes (minute, kind, shard, n)
        SELECT OLD.updated_at / 60000, OLD.kind, 0, -1 WHERE OLD.status = 'done'
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = n - 1;
    INSERT INTO jobs_done_minutes (minute, kind, shard, n)
        SELECT NEW.updated_at / 60000, NEW.kind, 0, 1 WHERE NEW.status = 'done'
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER jobs_done_minutes_delete AFTER DELETE ON jobs WHEN OLD.status = 'done'
BEGIN
    INSERT INTO jobs_done_minutes (minute, kind, shard, n) VALUES (OLD.updated_at / 60000, OLD.kind, 0, -1)
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = n - 1;
END;

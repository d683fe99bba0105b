-- The dashboard under load (issue 15, "Under load"; BENCHMARKS.md "Under load"). While creates
-- run, every payment passes through PENDING, PROCESSING and CHANNEL_SUCCESS, and every job
-- through due (and leased) to done; each of those updates leaves a dead version behind in every
-- index until VACUUM, which at 10 M payments does not come for hours. The dashboard's reads
-- walked those versions: stuck_counts read (status) ranges of payments_status_created holding
-- ~21 k dead versions per state and visited their heap pages through a bitmap, and
-- queue_stats counted every job done in the last hour, one heap visit each (EXPLAIN figures
-- in BENCHMARKS.md).

-- Only the payments that can be stuck (the states of StuckThresholds::per_state, whose
-- predicate is STUCK_WHERE in server/src/store/queue.rs): a small index that stuck_counts
-- reads whole with an index-only scan instead of a bitmap over the table, and that
-- stuck_payments walks oldest first (the stuck payments are its first entries) instead of
-- walking payments_updated past every payment that is not stuck. An access path, not the
-- rule: the planner uses it only when a query's WHERE implies this one, so a state added to
-- the stuck rule and not here changes the plan, never the answer.
CREATE INDEX payments_stuckable ON payments (updated_at, status)
    WHERE status IN ('PENDING', 'PROCESSING', 'UNKNOWN', 'CHANNEL_SUCCESS', 'SUSPENSE');

-- The live jobs (due, leased, dead) with what queue_stats reads of them, so its live half is an
-- index-only scan of the few live jobs rather than heap visits of every due version.
CREATE INDEX jobs_live ON jobs (kind, status) INCLUDE (run_at, attempts)
    WHERE status IN ('due', 'leased', 'dead');

-- Done jobs counted per minute of their updated_at and kind: the dashboard's "done in the last
-- hour" and "in the last 5 minutes" sum these rows (plus the one partial minute at the start of
-- the window, counted from jobs), instead of counting every done job of the window. Kept by the
-- triggers below in the same transaction as the write to jobs, so it always equals
--   SELECT updated_at / 60000, kind, COUNT(*) FROM jobs WHERE status = 'done' GROUP BY 1, 2
-- summed over shards. `shard` spreads concurrent writers over rows (the backend's pid modulo 16)
-- so that transactions completing jobs at once do not queue on one row's lock.
CREATE TABLE jobs_done_minutes (
    minute BIGINT  NOT NULL,
    kind   TEXT    NOT NULL,
    shard  INTEGER NOT NULL,
    n      BIGINT  NOT NULL,
    PRIMARY KEY (minute, kind, shard)
);

INSERT INTO jobs_done_minutes (minute, kind, shard, n)
    SELECT updated_at / 60000, kind, 0, COUNT(*) FROM jobs WHERE status = 'done' GROUP BY 1, 2;

-- One statement-level trigger per operation: a batch of completions (Queue::complete_jobs,
-- up to 500 jobs in one UPDATE) is one upsert per (minute, kind), not one per job.
CREATE FUNCTION jobs_done_minutes_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO jobs_done_minutes (minute, kind, shard, n)
            SELECT updated_at / 60000, kind, pg_backend_pid() % 16, COUNT(*)
            FROM new_rows WHERE status = 'done' GROUP BY 1, 2
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = jobs_done_minutes.n + EXCLUDED.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO jobs_done_minutes (minute, kind, shard, n)
            SELECT m, k, pg_backend_pid() % 16, SUM(d) FROM (
                SELECT updated_at / 60000 AS m, kind AS k, 1 AS d FROM new_rows WHERE status = 'done'
                UNION ALL
                SELECT updated_at / 60000, kind, -1 FROM old_rows WHERE status = 'done'
            ) c GROUP BY m, k HAVING SUM(d) <> 0
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = jobs_done_minutes.n + EXCLUDED.n;
    ELSE
        INSERT INTO jobs_done_minutes (minute, kind, shard, n)
            SELECT updated_at / 60000, kind, pg_backend_pid() % 16, -COUNT(*)
            FROM old_rows WHERE status = 'done' GROUP BY 1, 2
        ON CONFLICT (minute, kind, shard) DO UPDATE SET n = jobs_done_minutes.n + EXCLUDED.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER jobs_done_minutes_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_done_minutes_keep();
CREATE TRIGGER jobs_done_minutes_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_done_minutes_keep();
CREATE TRIGGER jobs_done_minutes_delete AFTER DELETE ON jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION jobs_done_minutes_keep();

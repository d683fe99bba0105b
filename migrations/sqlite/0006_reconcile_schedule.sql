-- The daily reconciliation is queued once per UTC day by whichever process gets there first:
-- the day's row and its reconcile job are written in one transaction (SQLite).
CREATE TABLE reconcile_schedule (
    day          TEXT    PRIMARY KEY,
    job_id       INTEGER NOT NULL,
    scheduled_at INTEGER NOT NULL
);

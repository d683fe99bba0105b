-- The emergency switch (issue 17 "Emergency switch"; seed 004 §8.4): a pause of submissions to
-- the channel, of one job kind, or of webhook deliveries to one endpoint. An operator requests
-- it ('pending'), a different approver approves it ('active'), an operator resumes it
-- ('resumed'); a pending request may instead be rejected or cancelled. target: `submissions`,
-- `job:<kind>` or `endpoint:<id>`. Times are epoch ms UTC.
-- Mirrors ../postgres/0104_pauses.sql.
CREATE TABLE pauses (
    id              TEXT    PRIMARY KEY,
    target          TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    requested_by    TEXT    NOT NULL,
    requested_at    INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    approved_by     TEXT,
    approved_at     INTEGER,
    decision_reason TEXT,
    resumed_by      TEXT,
    resumed_at      INTEGER,
    resume_reason   TEXT
);
-- One open (pending or active) pause per target.
CREATE UNIQUE INDEX pauses_one_open_per_target ON pauses (target) WHERE status IN ('pending', 'active');
CREATE INDEX pauses_status ON pauses (status, requested_at);

-- Ending an emergency-switch pause early needs an approver (issue 36, "No one moves money
-- alone"): an active pause younger than --pause-min-duration-secs is not resumed at once, it
-- carries an end request (who, when, why, until when approvable) that a different approver
-- approves (then it is 'resumed') or rejects (then these are cleared and it stays active).
-- Times are epoch ms UTC. Mirrors ../postgres/0116_pause_end_requests.sql.
ALTER TABLE pauses ADD COLUMN end_requested_by TEXT;
ALTER TABLE pauses ADD COLUMN end_requested_at INTEGER;
ALTER TABLE pauses ADD COLUMN end_reason TEXT;
ALTER TABLE pauses ADD COLUMN end_expires_at INTEGER;

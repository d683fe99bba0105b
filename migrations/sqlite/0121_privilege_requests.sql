-- The two-person rule on privilege (issue 36): a change that gives power (a console user
-- created with operator, approver or admin; any of those roles granted; a disabled user
-- enabled; a merchant API key issued; a merchant unfrozen) is a request that another admin
-- approves with step-up. kind: add_user, set_roles, enable_user, issue_key,
-- unfreeze_merchant; target: the username or merchant name; roles: the role set asked for
-- (add_user, set_roles); password_hash: the new user's (add_user only; never shown).
-- status follows the maker-checker life of actions (pending, approved, rejected, expired,
-- cancelled, executed, failed). Times are epoch ms UTC.
-- Mirrors ../postgres/0121_privilege_requests.sql.
CREATE TABLE privilege_requests (
    id              TEXT    PRIMARY KEY,
    kind            TEXT    NOT NULL,
    target          TEXT    NOT NULL,
    roles           TEXT    NOT NULL DEFAULT '',
    password_hash   TEXT    NOT NULL DEFAULT '',
    requested_by    TEXT    NOT NULL,
    reason          TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    decided_by      TEXT,
    decision_reason TEXT,
    result          TEXT,
    created_at      INTEGER  NOT NULL,
    expires_at      INTEGER  NOT NULL,
    decided_at      INTEGER,
    executed_at     INTEGER
);
-- One open request per change and target: a pending request blocks a duplicate.
CREATE UNIQUE INDEX privilege_requests_one_pending ON privilege_requests (kind, target) WHERE status = 'pending';
CREATE INDEX privilege_requests_status_created ON privilege_requests (status, created_at);
-- The approval-conflict check reads the grants made to one user.
CREATE INDEX privilege_requests_target ON privilege_requests (target, executed_at);

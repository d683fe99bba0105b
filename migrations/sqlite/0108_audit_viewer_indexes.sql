-- The audit viewer's filters and the error pool's work queue (issue 17 "Work queues people
-- act on"): the audit records of a payment include those of its actions, found by payment;
-- the error pool is listed grouped by kind, newest first within a kind.
CREATE INDEX actions_payment ON actions (payment_id, created_at);
CREATE INDEX error_pool_kind_seen ON error_pool (kind, last_seen);

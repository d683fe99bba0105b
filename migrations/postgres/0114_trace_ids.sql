-- The W3C trace id of the request (or job) that wrote each payment event and job (issue 14,
-- seed article 004 §8.4: one id follows a payment through every step). NULL for rows written
-- outside any trace (start-up tasks, one-off commands) and before this migration.
ALTER TABLE payment_events ADD COLUMN trace_id TEXT;
ALTER TABLE jobs ADD COLUMN trace_id TEXT;

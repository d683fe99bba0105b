-- Channel health (issue 41, "The incident must show on the dashboard"): one row per charge
-- sent to a connector, written by the service as soon as the answer is in
-- (service/payments.rs, `send_charge`), with how it was answered and how long it took. The
-- payment's events say what the answer did to the payment; this table says how the channel
-- behaved, so the dashboard's per-connector counts, undecidable share and latency
-- percentiles, and the payments list's failure-reason filter, read it. Mirrors
-- ../sqlite/0125_channel_attempts.sql.
--   outcome:     success | decline | undecidable (wire AttemptOutcome)
--   reason:      '' for a success, else the FailureReason key: decline:<reason>, timeout,
--                5xx, dropped, garbled
--   duration_ms: from sending the request to having the answer
CREATE TABLE channel_attempts (
    id          BIGSERIAL PRIMARY KEY,
    payment_id  TEXT    NOT NULL,
    connector   TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    duration_ms BIGINT  NOT NULL CHECK (duration_ms >= 0),
    created_at  BIGINT  NOT NULL
);
-- The dashboard reads the last 24 hours.
CREATE INDEX channel_attempts_created ON channel_attempts (created_at);
-- The payments list's reason filter looks a payment's attempts up by reason.
CREATE INDEX channel_attempts_payment_reason ON channel_attempts (payment_id, reason);
-- The fenced failures of the last 24 hours (the dashboard's `fenced` group).
CREATE INDEX payment_events_fenced ON payment_events (created_at)
    WHERE event = 'query_not_found_fenced';

-- The circuit breaker opens on a failure rate, not a run of failures (issue 37): it keeps the
-- outcomes of each endpoint's last attempts (the window, at most 62) and opens when enough of
-- them failed and their share exceeds a threshold, so a flaky receiver keeps it closed.
--   attempts: attempts in the window (at most the window's size).
--   recent:   their outcomes, one bit each, the latest in bit 0 (1 a failure).
--   failures: (now) the failures in the window, the ones in recent.
ALTER TABLE webhook_breakers ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0 CHECK (attempts >= 0);
ALTER TABLE webhook_breakers ADD COLUMN recent BIGINT NOT NULL DEFAULT 0;

-- When each endpoint's circuit breaker opened (issue 37): the first opening of the current
-- run of openings, epoch ms UTC; NULL while closed. Kept through reopenings (failed probes),
-- cleared when a success closes it, so the gauge converge_webhook_breaker_open_longest_seconds
-- and the alert ConvergeWebhookBreakerOpen see how long an endpoint has been held.
ALTER TABLE webhook_breakers ADD COLUMN opened_at BIGINT;
UPDATE webhook_breakers SET opened_at = updated_at WHERE open_until IS NOT NULL;

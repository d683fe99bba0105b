-- A webhook job's delivery (its payload, the delivery id as text), looked up by `converge
-- verify`'s invariant 6 for each pending delivery past the window: is it still within its
-- retry schedule (a live job due or leased after the cutoff)? Partial: only webhook jobs.
CREATE INDEX jobs_webhook_delivery ON jobs (payload) WHERE kind = 'webhook';

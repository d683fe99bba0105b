-- The circuit breaker of each webhook endpoint (issue 37, bulkheads): after a run of failed
-- attempts the endpoint's deliveries wait out a cool-down (doubling with each reopening, up to
-- a cap) without spending attempts or workers, then one probe attempt decides. Stored so every
-- server sees the same state. No row: closed, no failures. Times are epoch ms UTC.
--   failures:    failed attempts in a row (a success sets 0).
--   opens:       times opened in a row without a success between (the cool-down's exponent).
--   open_until:  NULL while closed; the end of the cool-down while open (half-open after it).
--   probe_until: while half-open, the lease of the one probe attempt in flight.
--   version:     bumped by each change (a write checks it: no lost update).
CREATE TABLE webhook_breakers (
    endpoint_id TEXT    PRIMARY KEY REFERENCES webhook_endpoints(id),
    failures    BIGINT  NOT NULL DEFAULT 0 CHECK (failures >= 0),
    opens       BIGINT  NOT NULL DEFAULT 0 CHECK (opens >= 0),
    open_until  BIGINT,
    probe_until BIGINT,
    version     BIGINT  NOT NULL DEFAULT 0,
    updated_at  BIGINT  NOT NULL
);

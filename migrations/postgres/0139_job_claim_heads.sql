-- A lane's claim reads a bounded number of rows whatever the backlog (issue 37: a storm of
-- 22,000 due refunds made every claim of every lane rank all of them). The claim
-- (store/queue.rs `fair_claim_sql`) walks this partial index: the live kinds, then per kind
-- the merchants with live jobs, then per (kind, merchant) its oldest claimable jobs, each an
-- index seek. Mirrors ../sqlite/0139_job_claim_heads.sql.

-- The channel (connector) of the job's payment, so a claim channel by channel (the
-- compensation rate, per channel) is read from the index instead of a payments lookup per
-- job. NULL for jobs of no payment. Live jobs only, as for merchant_id (0132).
ALTER TABLE jobs ADD COLUMN connector TEXT;
UPDATE jobs SET connector = p.connector FROM payments p
    WHERE p.id = jobs.payment_id AND jobs.status IN ('due', 'leased', 'dead');

-- Set by the database on insert, like the merchant: a payment's connector never changes
-- after it is routed, so the value copied here stays true.
CREATE OR REPLACE FUNCTION jobs_merchant_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.payment_id IS NOT NULL AND (NEW.merchant_id IS NULL OR NEW.connector IS NULL) THEN
        SELECT COALESCE(NEW.merchant_id, p.merchant_id), p.connector
            INTO NEW.merchant_id, NEW.connector
            FROM payments p WHERE p.id = NEW.payment_id;
    END IF;
    RETURN NEW;
END;
$$;

CREATE INDEX jobs_claim_heads ON jobs (kind, merchant_id, run_at, id, connector)
    WHERE status IN ('due', 'leased');

-- Closing a payment's or a refund's due jobs (`... WHERE payment_id = $2 AND status = 'due'`)
-- took the (status, ...) indexes and read every due job (22,000 in a refund storm, ~2 ms per
-- statement on SQLite); with both columns here each is one seek. The single-column
-- jobs_payment is a prefix of the new index.
DROP INDEX jobs_payment;
CREATE INDEX jobs_payment_status ON jobs (payment_id, status);
CREATE INDEX jobs_refund_status ON jobs (refund_id, status) WHERE refund_id IS NOT NULL;

-- Lanes and fairness (issue 37, README "Lanes and fairness"): each job names the merchant it
-- works for, so a lane's claim can take due jobs round-robin across merchants (one merchant's
-- backlog cannot hold back another's due job). NULL for jobs of no payment (reconciliation):
-- they share one turn of their own. Mirrors ../sqlite/0132_job_merchant.sql.
ALTER TABLE jobs ADD COLUMN merchant_id BIGINT;

-- The live jobs are the only ones a claim, a gauge or a wake reads; done jobs keep NULL (a
-- backfill of every done job would rewrite the whole table for nothing).
UPDATE jobs SET merchant_id = p.merchant_id FROM payments p
    WHERE p.id = jobs.payment_id AND jobs.status IN ('due', 'leased', 'dead');

-- Set by the database on every insert, whichever writer queues the job (payments, refunds,
-- the webhook outbox, ops retries): the merchant is the job's payment's, so no writer can
-- forget it.
CREATE FUNCTION jobs_merchant_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.payment_id IS NOT NULL AND NEW.merchant_id IS NULL THEN
        NEW.merchant_id := (SELECT p.merchant_id FROM payments p WHERE p.id = NEW.payment_id);
    END IF;
    RETURN NEW;
END;
$$;
CREATE TRIGGER jobs_merchant_insert BEFORE INSERT ON jobs
    FOR EACH ROW EXECUTE FUNCTION jobs_merchant_fill();

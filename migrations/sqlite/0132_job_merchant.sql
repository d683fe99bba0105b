-- Lanes and fairness (issue 37, README "Lanes and fairness"): each job names the merchant it
-- works for, so a lane's claim can take due jobs round-robin across merchants (one merchant's
-- backlog cannot hold back another's due job). NULL for jobs of no payment (reconciliation):
-- they share one turn of their own. Mirrors ../postgres/0132_job_merchant.sql.
ALTER TABLE jobs ADD COLUMN merchant_id INTEGER;

-- The live jobs are the only ones a claim, a gauge or a wake reads; done jobs keep NULL (a
-- backfill of every done job would rewrite the whole table for nothing).
UPDATE jobs SET merchant_id = (SELECT p.merchant_id FROM payments p WHERE p.id = jobs.payment_id)
    WHERE payment_id IS NOT NULL AND status IN ('due', 'leased', 'dead');

-- Set by the database on every insert, whichever writer queues the job (payments, refunds,
-- the webhook outbox, ops retries): the merchant is the job's payment's, so no writer can
-- forget it. An update of the row just inserted (SQLite has no BEFORE trigger that can set
-- NEW's columns); it touches neither status, updated_at nor kind, so the done-minute counts
-- of 0113 are not involved.
CREATE TRIGGER jobs_merchant_insert AFTER INSERT ON jobs
    WHEN NEW.payment_id IS NOT NULL AND NEW.merchant_id IS NULL
BEGIN
    UPDATE jobs SET merchant_id = (SELECT p.merchant_id FROM payments p WHERE p.id = NEW.payment_id)
        WHERE id = NEW.id;
END;

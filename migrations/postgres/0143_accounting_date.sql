-- Every ledger batch carries its accounting date (issue 35 "Money rules"): the day finance
-- counts it on, YYYY-MM-DD, by the server's accounting time zone and cut-off
-- (--accounting-timezone, --accounting-cutoff; domain/accounting.rs), fixed when the batch is
-- posted. Batches posted before this migration were on UTC days closing at midnight, the
-- default, and are dated so.
ALTER TABLE ledger_batches ADD COLUMN accounting_date TEXT NOT NULL DEFAULT '';
UPDATE ledger_batches SET accounting_date = to_char(to_timestamp(created_at / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD');
CREATE INDEX ledger_batches_accounting_date ON ledger_batches (accounting_date);

-- Fees per capture (issue 35 "Money rules"). A merchant's pricing is a percentage (parts per
-- million of the captured amount), a fixed fee (minor units) and a fixed fee per merchant
-- refund (refund_fee, minor units, 0: none); each change is a new version,
-- never an edit, so every fee batch names the version that priced it. A payment keeps the sum
-- of its fees (fee_amount, minor units), written in the transaction of the batch it prices.
CREATE TABLE merchant_pricing (
    merchant_id BIGINT  NOT NULL REFERENCES merchants(id),
    version     BIGINT  NOT NULL CHECK (version > 0),
    percent_ppm BIGINT  NOT NULL CHECK (percent_ppm BETWEEN 0 AND 1000000),
    fixed_fee   BIGINT  NOT NULL CHECK (fixed_fee >= 0),
    refund_fee  BIGINT  NOT NULL DEFAULT 0 CHECK (refund_fee >= 0),
    created_at  BIGINT  NOT NULL,
    PRIMARY KEY (merchant_id, version)
);

ALTER TABLE payments ADD COLUMN fee_amount BIGINT NOT NULL DEFAULT 0;
ALTER TABLE ledger_batches ADD COLUMN pricing_version BIGINT;

-- A capture and a refund have one batch of their own and at most one fee batch each; a charge
-- at most one fee batch.
DROP INDEX ledger_one_batch_per_capture;
CREATE UNIQUE INDEX ledger_one_batch_per_capture ON ledger_batches (capture_id)
    WHERE capture_id IS NOT NULL AND kind = 'capture';
DROP INDEX ledger_one_batch_per_refund;
CREATE UNIQUE INDEX ledger_one_batch_per_refund ON ledger_batches (refund_id)
    WHERE refund_id IS NOT NULL AND kind = 'refund';
CREATE UNIQUE INDEX ledger_one_fee_per_line ON ledger_batches
    (payment_id, COALESCE(capture_id, ''), COALESCE(refund_id, '')) WHERE kind = 'fee';

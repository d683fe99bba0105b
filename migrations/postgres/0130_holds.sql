-- Authorize now, capture later (issue 34; seed 000 §4.1, seed 004 §5.1). A payment says how it
-- takes its money (capture_mode 'automatic', as before, or 'manual': a hold). A hold's
-- figures live on the payment, written only by its transitions: captured_amount and
-- released_amount (minor units), hold_expires_at (epoch ms UTC, set when the channel holds the
-- funds) and the one capture in flight while CAPTURING (capture_id, capture_amount,
-- capture_last). Each capture is a record of its own (payment_captures): its amount, whether
-- it was final, where it went (pending, captured, refused) and why.
ALTER TABLE payments ADD COLUMN capture_mode TEXT NOT NULL DEFAULT 'automatic'
    CHECK (capture_mode IN ('automatic', 'manual'));
ALTER TABLE payments ADD COLUMN captured_amount BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN released_amount BIGINT NOT NULL DEFAULT 0;
ALTER TABLE payments ADD COLUMN hold_expires_at BIGINT;
ALTER TABLE payments ADD COLUMN capture_id TEXT;
ALTER TABLE payments ADD COLUMN capture_amount BIGINT;
ALTER TABLE payments ADD COLUMN capture_last BOOLEAN;

CREATE TABLE payment_captures (
    id           TEXT    PRIMARY KEY,
    payment_id   TEXT    NOT NULL REFERENCES payments(id),
    amount       BIGINT NOT NULL CHECK (amount > 0),
    last         BOOLEAN NOT NULL,
    status       TEXT    NOT NULL CHECK (status IN ('pending', 'captured', 'refused')),
    reason       TEXT,
    source       TEXT    NOT NULL,
    requested_at BIGINT  NOT NULL,
    settled_at   BIGINT
);
CREATE INDEX payment_captures_payment ON payment_captures (payment_id, requested_at);
-- At most one capture in flight per payment (the state machine's CAPTURING says so too).
CREATE UNIQUE INDEX payment_captures_one_pending ON payment_captures (payment_id) WHERE status = 'pending';

-- Each hold is posted once, each capture once, and the rest released once.
ALTER TABLE ledger_batches ADD COLUMN capture_id TEXT;
CREATE UNIQUE INDEX ledger_one_batch_per_capture ON ledger_batches (capture_id) WHERE capture_id IS NOT NULL;
CREATE UNIQUE INDEX ledger_one_hold_per_payment ON ledger_batches (payment_id) WHERE kind = 'hold';
CREATE UNIQUE INDEX ledger_one_release_per_payment ON ledger_batches (payment_id) WHERE kind = 'release';

-- payment.captured is told once per capture: an outcome is one per aggregate, type and
-- occurrence ('' for every outcome told once per aggregate; the capture id for a capture).
ALTER TABLE events ADD COLUMN occurrence TEXT NOT NULL DEFAULT '';
DROP INDEX events_one_per_outcome;
CREATE UNIQUE INDEX events_one_per_outcome ON events (aggregatetype, aggregateid, type, occurrence);

-- TCC by business key (seed 004 §5.1): a cancel for a merchant_order_id converge never saw
-- (empty rollback) leaves a tombstone, and a create (Try) for it afterwards is refused, so
-- no hold hangs. Written in the transaction of the decision it guards; kept past the key
-- retention (purged by its own retention).
CREATE TABLE order_tombstones (
    merchant_id       BIGINT NOT NULL,
    merchant_order_id TEXT   NOT NULL,
    created_at        BIGINT NOT NULL,
    PRIMARY KEY (merchant_id, merchant_order_id)
);

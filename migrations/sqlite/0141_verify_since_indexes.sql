-- `converge verify` scoped to what changed since a mark (the simulator's check after every
-- step, issue 39) reads the tombstones and the ledger batches written since then. Without
-- these indexes SQLite scanned every payment for the tombstones and every batch for the
-- unbalanced ones, on every check.
CREATE INDEX order_tombstones_created ON order_tombstones (created_at);
CREATE INDEX ledger_batches_created ON ledger_batches (created_at);

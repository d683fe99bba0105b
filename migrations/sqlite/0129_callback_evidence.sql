-- A channel callback is recorded in one transaction with what it decided (issue 33): its raw
-- body and signature header as received (the evidence a dispute or a reconciliation reads:
-- seed 004 §8.4; DESIGN.md "Payment state machine"), its
-- receive time (received_at, epoch ms UTC, as before) and its outcome (applied, ignored,
-- conflicting, unknown_payment). There is no 'received' claim any more: an unsettled claim
-- left by an older server whose handler died is dropped, so the channel's redelivery is
-- handled afresh. body, signature: NULL for callbacks recorded before this migration.
ALTER TABLE channel_callbacks ADD COLUMN body BLOB;
ALTER TABLE channel_callbacks ADD COLUMN signature TEXT;
DELETE FROM channel_callbacks WHERE outcome = 'received';

-- The database work a create cannot avoid (issue 15), for pgbench: the two atomic phases of
-- POST /v1/payments on converge's own schema, with nothing else (no events, no outbox, no
-- metrics). One pgbench "transaction" is one create: two database transactions.
--   phase 1: claim the Idempotency-Key (with its recovery point), insert the payment
--            (already submitted) and its submit job;
--   phase 2: the status update, the ledger batch with its two entries, the key's response.
-- Needs a database migrated by converge with merchant 1 (bench.sh makes one).
\set n random(1, 1000000000000)
BEGIN;
INSERT INTO idempotency_keys (merchant_id, scope, idem_key, route, fingerprint, state, lease_token,
    lease_expires_at, created_at, expires_at, resource_id)
  VALUES (1, 'POST /v1/payments', 'k-' || :client_id || '-' || :n, 'POST /v1/payments',
    'fingerprint', 'running', 'lease', 60000, 0, 86400000, 'pay-' || :client_id || '-' || :n);
INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, params_hash,
    status, version, channel_key, created_at, updated_at)
  VALUES ('pay-' || :client_id || '-' || :n, 1, 'o-' || :client_id || '-' || :n, 1999, 'CNY', '',
    'params', 'PROCESSING', 2, 'ck-' || :client_id || '-' || :n, 0, 0);
INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, created_at, updated_at)
  VALUES ('submit', 'pay-' || :client_id || '-' || :n, NULL, 'due', 0, 5, 60000, 0, 0);
COMMIT;
BEGIN;
UPDATE payments SET status = 'SUCCESS', version = version + 1, updated_at = 1
  WHERE id = 'pay-' || :client_id || '-' || :n AND status = 'PROCESSING' AND version = 2;
INSERT INTO ledger_batches (payment_id, refund_id, kind, currency, created_at)
  VALUES ('pay-' || :client_id || '-' || :n, NULL, 'charge', 'CNY', 1) RETURNING id AS batch \gset
INSERT INTO ledger_entries (batch_id, account, direction, amount, currency)
  VALUES (:batch, 'merchant:1:receivable', 'debit', 1999, 'CNY'),
         (:batch, 'merchant:1:payable', 'credit', 1999, 'CNY');
UPDATE idempotency_keys SET state = 'done', response_status = 201, response_headers = '[]',
    response_body = convert_to('{"status":"SUCCESS"}', 'UTF8'), lease_token = NULL, lease_expires_at = NULL
  WHERE merchant_id = 1 AND idem_key = 'k-' || :client_id || '-' || :n AND state = 'running' AND lease_token = 'lease';
COMMIT;

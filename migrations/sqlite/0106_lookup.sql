-- Find anything by any id, and the Idempotency-Key page (issue 17). Mirrors
-- ../postgres/0106_lookup.sql.

-- What later requests with a stored key got (replay, in_use, reused), per key: the route-level
-- counts in idempotency_outcomes cannot say which key was replayed or reused. One row per
-- (key, outcome), so a client retrying in a loop adds to a count, not a row per request.
-- Deleted with their key by the retention purge.
CREATE TABLE idempotency_key_outcomes (
    merchant_id INTEGER NOT NULL,
    idem_key    TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    count       INTEGER NOT NULL,
    first_at    INTEGER NOT NULL,
    last_at     INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, idem_key, outcome)
);

-- Prefix search, case-insensitive: SQLite's NOCASE folds ASCII letters, and a range on an
-- index in that collation is a prefix match. Generated ids (payments, refunds, channel keys,
-- actions) are lower-case and their primary or unique indexes serve a range as they are.
CREATE INDEX payments_order_nocase ON payments (merchant_order_id COLLATE NOCASE);
CREATE INDEX idempotency_keys_key_nocase ON idempotency_keys (idem_key COLLATE NOCASE);
-- The keys of a payment (and of its refunds), for the payment page.
CREATE INDEX idempotency_keys_resource ON idempotency_keys (resource_id);

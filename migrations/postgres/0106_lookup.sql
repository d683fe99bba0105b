-- Find anything by any id, and the Idempotency-Key page (issue 17). Mirrors
-- ../sqlite/0106_lookup.sql.

-- What later requests with a stored key got (replay, in_use, reused), per key: the route-level
-- counts in idempotency_outcomes cannot say which key was replayed or reused. One row per
-- (key, outcome), so a client retrying in a loop adds to a count, not a row per request.
-- Deleted with their key by the retention purge.
CREATE TABLE idempotency_key_outcomes (
    merchant_id BIGINT  NOT NULL,
    idem_key    TEXT    NOT NULL,
    outcome     TEXT    NOT NULL,
    count       BIGINT  NOT NULL,
    first_at    BIGINT  NOT NULL,
    last_at     BIGINT  NOT NULL,
    PRIMARY KEY (merchant_id, idem_key, outcome)
);

-- Prefix search: a range in the "C" collation (byte order) is a prefix match whatever the
-- database's own collation is; in a linguistic one ('en_US') a range over an index does not
-- hold exactly the strings with a prefix, and LIKE cannot use a default-collation index at
-- all. Mixed-case values are searched through lower().
CREATE INDEX payments_id_prefix ON payments ((id COLLATE "C"));
CREATE INDEX payments_channel_key_prefix ON payments ((channel_key COLLATE "C"));
CREATE INDEX payments_order_prefix ON payments ((lower(merchant_order_id) COLLATE "C"));
CREATE INDEX idempotency_keys_key_prefix ON idempotency_keys ((lower(idem_key) COLLATE "C"));
CREATE INDEX refunds_id_prefix ON refunds ((id COLLATE "C"));
CREATE INDEX actions_id_prefix ON actions ((id COLLATE "C"));
-- The keys of a payment (and of its refunds), for the payment page.
CREATE INDEX idempotency_keys_resource ON idempotency_keys (resource_id);

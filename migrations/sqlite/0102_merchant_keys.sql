-- Several API keys per merchant (issue 13 "Merchant keys"; DESIGN.md "Merchant keys"): id,
-- visible prefix (ck_live_..., for secret scanners and people), created, last used, revoked.
-- A request is authenticated by looking the key's SHA-256 up here on every request, so a
-- revoked key is refused at once by every server sharing the database.
CREATE TABLE merchant_keys (
    id           TEXT    PRIMARY KEY,
    merchant_id  INTEGER  NOT NULL REFERENCES merchants(id),
    prefix       TEXT    NOT NULL,
    key_hash     TEXT    NOT NULL UNIQUE,
    created_at   INTEGER  NOT NULL,
    last_used_at INTEGER,
    revoked_at   INTEGER
);
CREATE INDEX merchant_keys_merchant ON merchant_keys (merchant_id, created_at);

-- Each existing merchant's key becomes its first key (prefix unknown: only its hash is kept).
INSERT INTO merchant_keys (id, merchant_id, prefix, key_hash, created_at)
    SELECT 'mk_' || substr(api_key_hash, 1, 24), id, '', api_key_hash, created_at FROM merchants;

-- The outbox relayed to NATS JetStream (PostgreSQL). Mirrors ../sqlite/0008_event_stream.sql.
-- DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §11.2: sent but not
-- marked is allowed to be sent again, and the broker's duplicate window removes the repeat.

-- One row per event the relay handed to the broker: its stream sequence, or the broker's
-- refusal. The event row itself is never updated.
CREATE TABLE event_publications (
    event_id     TEXT    PRIMARY KEY REFERENCES events(id),
    stream_seq   BIGINT ,
    duplicate    BOOLEAN NOT NULL DEFAULT FALSE,
    refused      TEXT,
    published_at BIGINT  NOT NULL
);
CREATE INDEX event_publications_at ON event_publications (published_at);

-- The publishing position is held under a lease: one relay publishes at a time, so
-- per-payment order holds with several `serve` processes on one database.
CREATE TABLE relay_leases (
    name         TEXT    PRIMARY KEY,
    owner        TEXT    NOT NULL,
    token        TEXT    NOT NULL,
    expires_at   BIGINT  NOT NULL,
    connected    BOOLEAN NOT NULL DEFAULT FALSE,
    last_error   TEXT,
    heartbeat_at BIGINT  NOT NULL
);

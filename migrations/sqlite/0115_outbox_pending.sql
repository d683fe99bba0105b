-- The outbox's backlog without reading every event (issue 15, "Under load"). Mirrors
-- ../postgres/0115_outbox_pending.sql, whose comments give the measurement: one row per event
-- without a publication, kept by the triggers below in the same transaction, so it always
-- equals the events with no row in event_publications (`converge verify` checks it).
CREATE TABLE outbox_pending (
    seq        INTEGER PRIMARY KEY,
    event_id   TEXT    NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
);

INSERT INTO outbox_pending (seq, event_id, created_at)
    SELECT e.seq, e.id, e.created_at FROM events e
    WHERE NOT EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = e.id);

CREATE INDEX event_publications_refused ON event_publications (event_id) WHERE refused IS NOT NULL;

CREATE TRIGGER outbox_pending_event_insert AFTER INSERT ON events
BEGIN
    INSERT INTO outbox_pending (seq, event_id, created_at) VALUES (NEW.seq, NEW.id, NEW.created_at);
END;

CREATE TRIGGER outbox_pending_event_delete AFTER DELETE ON events
BEGIN
    DELETE FROM outbox_pending WHERE event_id = OLD.id;
END;

CREATE TRIGGER outbox_pending_publication_insert AFTER INSERT ON event_publications
BEGIN
    DELETE FROM outbox_pending WHERE event_id = NEW.event_id;
END;

-- A publication forgotten while its event stays (the purge deletes the event right after,
-- which removes this row again).
CREATE TRIGGER outbox_pending_publication_delete AFTER DELETE ON event_publications
BEGIN
    INSERT OR IGNORE INTO outbox_pending (seq, event_id, created_at)
        SELECT seq, id, created_at FROM events WHERE id = OLD.event_id;
END;

-- The outbox's backlog without reading every event (issue 15, "Under load"; BENCHMARKS.md
-- "Under load"). The relay's next batch and the console's relay status found the unpublished
-- events by an anti-join of `events` against `event_publications`: a scan of every retained
-- event, published or not, on every relay poll and every dashboard refresh (142 ms p50 of a
-- 283 ms refresh at 10 M payments under the create load).
--
-- One row per event without a publication, kept by the triggers below in the same transaction
-- as the write to `events` or `event_publications`, so it always equals
--   SELECT seq, id, created_at FROM events e
--   WHERE NOT EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = e.id)
-- (`converge verify` checks that equality: invariant 6). Its size is the backlog, not the
-- retention.
CREATE TABLE outbox_pending (
    seq        BIGINT PRIMARY KEY,
    event_id   TEXT   NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);

INSERT INTO outbox_pending (seq, event_id, created_at)
    SELECT e.seq, e.id, e.created_at FROM events e
    WHERE NOT EXISTS (SELECT 1 FROM event_publications p WHERE p.event_id = e.id);

-- Refused publications are counted by the relay status on every refresh.
CREATE INDEX event_publications_refused ON event_publications (event_id) WHERE refused IS NOT NULL;

CREATE FUNCTION outbox_pending_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'events' THEN
        IF TG_OP = 'INSERT' THEN
            INSERT INTO outbox_pending (seq, event_id, created_at) VALUES (NEW.seq, NEW.id, NEW.created_at);
        ELSE
            DELETE FROM outbox_pending WHERE event_id = OLD.id;
        END IF;
    ELSIF TG_OP = 'INSERT' THEN
        DELETE FROM outbox_pending WHERE event_id = NEW.event_id;
    ELSE
        -- A publication forgotten while its event stays (the purge deletes the event right
        -- after, which removes this row again).
        INSERT INTO outbox_pending (seq, event_id, created_at)
            SELECT seq, id, created_at FROM events WHERE id = OLD.event_id
            ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER outbox_pending_event_insert AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION outbox_pending_keep();
CREATE TRIGGER outbox_pending_event_delete AFTER DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION outbox_pending_keep();
CREATE TRIGGER outbox_pending_publication_insert AFTER INSERT ON event_publications
    FOR EACH ROW EXECUTE FUNCTION outbox_pending_keep();
CREATE TRIGGER outbox_pending_publication_delete AFTER DELETE ON event_publications
    FOR EACH ROW EXECUTE FUNCTION outbox_pending_keep();

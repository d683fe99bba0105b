-- The live console's change marker (issue 17 "Live pages"): every serving process asks the
-- database a few times a second whether anything the console shows changed, as the largest
-- updated_at of payments and of jobs (the other parts of the marker are primary keys). With
-- these indexes each is one index probe; without them, a full scan per poll.
-- Mirrors ../sqlite/0107_live_markers.sql.
CREATE INDEX payments_updated ON payments (updated_at);
CREATE INDEX jobs_updated ON jobs (updated_at);

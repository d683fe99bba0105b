-- The claim (issue 15, queue drain): due jobs in (run_at, id) order straight from an index,
-- so a claim locks its batch without reading and sorting every due job first (it did: a
-- claim's cost grew with the queue, BENCHMARKS.md "Profiles and fixes"). Replaces jobs_due,
-- whose (status, run_at) ranges the console's queue panel also reads.
CREATE INDEX jobs_due_order ON jobs (status, run_at, id);
DROP INDEX jobs_due;

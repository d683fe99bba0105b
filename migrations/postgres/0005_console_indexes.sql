-- Indexes the console's queries need at scale (issue "Ops console I", Performance; figures and
-- plans in BENCHMARKS.md): a search by merchant_order_id alone, and the dashboard's count of
-- jobs done in the last hour. Without them both were full scans (53 ms and 99 ms at 1 M
-- payments on PostgreSQL).
CREATE INDEX payments_order ON payments (merchant_order_id);
CREATE INDEX jobs_status_updated ON jobs (status, updated_at);

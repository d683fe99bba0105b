//! The queue's SQL both backends share, and `insert_job`, the one writer of a new job row
//! (payments and refunds queue theirs with it); claiming differs and lives in each backend
//! ([`SqlBackend::claim_due_jobs`](super::SqlBackend::claim_due_jobs)).

/// Columns of a leased job.
pub(crate) const LEASED_COLUMNS: &str =
    "id, kind, payment_id, refund_id, payload, attempts, max_attempts, lease_token, trace_id";

macro_rules! impl_queue {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Queue for $store {
            async fn claim_jobs_of(
                &self,
                owner: &str,
                batch: i64,
                lease_ms: i64,
                now: i64,
                filter: &$crate::store::KindFilter,
            ) -> Result<Vec<$crate::store::LeasedJob>, $crate::store::StoreError> {
                if batch <= 0 || filter.takes_nothing() {
                    return Ok(Vec::new());
                }
                self.claim_due_jobs(owner, batch, lease_ms, now, filter).await
            }

            async fn lane_loads(
                &self,
                now: i64,
                top: usize,
            ) -> Result<Vec<$crate::store::LaneLoad>, $crate::store::StoreError> {
                let rows = sqlx::query_as::<_, $crate::store::LaneRow>($crate::store::lane_rows_sql())
                    .bind(now)
                    .fetch_all(self.reader())
                    .await?;
                Ok($crate::store::lane_loads(&rows, top))
            }

            async fn complete_job(&self, id: i64, token: &str, now: i64) -> Result<bool, $crate::store::StoreError> {
                let sql = $crate::store::queue::unleased(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Done), ", lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, \
                     updated_at = $1 WHERE id = $2 AND status = ", converge_wire::job_sql!(Leased), " AND lease_token = $3").into(),
                    "lease_token = $3",
                );
                let r = sqlx::query(&sql)
                .bind(now)
                .bind(id)
                .bind(token)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn complete_jobs(
                &self,
                leases: &[(i64, &str)],
                now: i64,
            ) -> Result<Vec<i64>, $crate::store::StoreError> {
                let mut done = Vec::with_capacity(leases.len());
                for chunk in leases.chunks($crate::store::COMPLETE_JOBS_CHUNK) {
                    let sql = $crate::store::complete_jobs_sql(chunk.len());
                    let mut q = sqlx::query_scalar::<_, i64>(&sql).bind(now);
                    for (id, token) in chunk {
                        q = q.bind(*id).bind(*token);
                    }
                    done.extend(q.fetch_all(self.writer()).await?);
                }
                Ok(done)
            }

            async fn retry_job(
                &self,
                id: i64,
                token: &str,
                run_at: i64,
                error: &str,
                refund_attempt: bool,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let sql = $crate::store::queue::unleased(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Due), ", run_at = $1, last_error = $2, attempts = attempts - $3, \
                     lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, updated_at = $4 \
                     WHERE id = $5 AND status = ", converge_wire::job_sql!(Leased), " AND lease_token = $6").into(),
                    "lease_token = $6",
                );
                let r = sqlx::query(&sql)
                .bind(run_at)
                .bind(error)
                .bind(i64::from(refund_attempt))
                .bind(now)
                .bind(id)
                .bind(token)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn bury_job(
                &self,
                id: i64,
                token: &str,
                error: &str,
                item: &$crate::store::NewErrorItem,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let sql = $crate::store::queue::unleased(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Dead), ", last_error = $1, lease_owner = NULL, lease_token = NULL, \
                     lease_expires_at = NULL, updated_at = $2 WHERE id = $3 AND status = ", converge_wire::job_sql!(Leased), " AND lease_token = $4").into(),
                    "lease_token = $4",
                );
                let r = sqlx::query(&sql)
                .bind(error)
                .bind(now)
                .bind(id)
                .bind(token)
                .execute(&mut *tx)
                .await?;
                if r.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                upsert_error(&mut tx, item).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn enqueue_job(
                &self,
                job: &$crate::store::NewJob,
                payload: &str,
                now: i64,
            ) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, i64>(
                    concat!("INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, \
                     created_at, updated_at) VALUES ($1, $2, $3, $4, ", converge_wire::job_sql!(Due), ", 0, $5, $6, $7, $7) RETURNING id"),
                )
                .bind(job.kind.as_str())
                .bind(job.payment_id.as_deref())
                .bind(job.refund_id.as_deref())
                .bind(payload)
                .bind(job.max_attempts)
                .bind(job.run_at)
                .bind(now)
                .fetch_one(self.writer())
                .await?)
            }

            async fn job(&self, id: i64) -> Result<Option<$crate::store::Job>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Job>(
                    "SELECT id, kind, payment_id, refund_id, status, attempts, max_attempts, run_at, last_error \
                     FROM jobs WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn wake_jobs(&self, payment_id: &str, now: i64) -> Result<u64, $crate::store::StoreError> {
                let r = sqlx::query(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Due), ", run_at = $1, attempts = CASE WHEN status = ", converge_wire::job_sql!(Dead), " THEN 0 ELSE attempts END, \
                     updated_at = $1 WHERE payment_id = $2 AND status IN (", converge_wire::job_sql!(Due), ", ", converge_wire::job_sql!(Dead), ")"),
                )
                .bind(now)
                .bind(payment_id)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected())
            }

            async fn hasten_jobs(
                &self,
                payment_id: &str,
                kinds: &[$crate::domain::jobs::JobKind],
                now: i64,
            ) -> Result<u64, $crate::store::StoreError> {
                let mut woken = 0;
                // One statement per kind: a handful at most, and no dynamic IN list to build.
                for kind in kinds {
                    let r = sqlx::query(
                        concat!("UPDATE jobs SET run_at = $1, updated_at = $1 WHERE payment_id = $2 AND kind = $3 AND status = ",
                         converge_wire::job_sql!(Due), " AND run_at > $1"),
                    )
                    .bind(now)
                    .bind(payment_id)
                    .bind(kind.as_str())
                    .execute(self.writer())
                    .await?;
                    woken += r.rows_affected();
                }
                Ok(woken)
            }

            async fn wakeable_jobs(&self, payment_id: &str) -> Result<u64, $crate::store::StoreError> {
                let n: i64 = sqlx::query_scalar(
                    concat!("SELECT COUNT(*) FROM jobs WHERE payment_id = $1 AND status IN (", converge_wire::job_sql!(Due), ", ", converge_wire::job_sql!(Dead), ")"),
                )
                .bind(payment_id)
                .fetch_one(self.reader())
                .await?;
                Ok(u64::try_from(n).unwrap_or(0))
            }

            async fn schedule_reconcile(
                &self,
                day: &str,
                job: &$crate::store::NewJob,
                now: i64,
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let first = sqlx::query(
                    "INSERT INTO reconcile_schedule (day, job_id, scheduled_at) VALUES ($1, 0, $2) \
                     ON CONFLICT (day) DO NOTHING",
                )
                .bind(day)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
                if !first {
                    return Ok(None);
                }
                let id = sqlx::query_scalar::<_, i64>(
                    concat!("INSERT INTO jobs (kind, payment_id, refund_id, payload, status, attempts, max_attempts, run_at, \
                     created_at, updated_at) VALUES ($1, NULL, NULL, $2, ", converge_wire::job_sql!(Due), ", 0, $3, $4, $5, $5) RETURNING id"),
                )
                .bind(job.kind.as_str())
                .bind(day)
                .bind(job.max_attempts)
                .bind(job.run_at)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query("UPDATE reconcile_schedule SET job_id = $1 WHERE day = $2")
                    .bind(id)
                    .bind(day)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                Ok(Some(id))
            }

            async fn queue_stats(&self, done_since_minute: i64) -> Result<Vec<$crate::store::QueueStat>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::QueueStat>(&$crate::store::queue_stats_sql())
                    .bind(done_since_minute)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn report_error(&self, item: &$crate::store::NewErrorItem) -> Result<i64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let id = upsert_error(&mut tx, item).await?;
                tx.commit().await?;
                Ok(id)
            }

            async fn resolve_error(&self, id: i64, note: &str, by: &str, now: i64) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    concat!("UPDATE error_pool SET status = ", converge_wire::error_item_sql!(Resolved), ", resolution_note = $1, resolved_by = $2, resolved_at = $3 \
                     WHERE id = $4 AND status = ", converge_wire::error_item_sql!(Open)),
                )
                .bind(note)
                .bind(by)
                .bind(now)
                .bind(id)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn resolve_error_by_key(
                &self,
                dedupe_key: &str,
                note: &str,
                by: &str,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    concat!("UPDATE error_pool SET status = ", converge_wire::error_item_sql!(Resolved), ", resolution_note = $1, resolved_by = $2, resolved_at = $3 \
                     WHERE dedupe_key = $4 AND status = ", converge_wire::error_item_sql!(Open)),
                )
                .bind(note)
                .bind(by)
                .bind(now)
                .bind(dedupe_key)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn error_items(
                &self,
                status: Option<$crate::store::ErrorItemStatus>,
                kind: Option<&str>,
                limit: i64,
            ) -> Result<Vec<$crate::store::ErrorItem>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ErrorItem>(
                    "SELECT * FROM error_pool WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR kind = $2) \
                     ORDER BY last_seen DESC, id DESC LIMIT $3",
                )
                .bind(status.map(|s| s.as_str()))
                .bind(kind)
                .bind(limit)
                .fetch_all(self.reader())
                .await?)
            }

            async fn error_kinds(
                &self,
                status: Option<$crate::store::ErrorItemStatus>,
            ) -> Result<Vec<$crate::store::KindCount>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::KindCount>(
                    "SELECT kind, COUNT(*) AS count FROM error_pool WHERE ($1 IS NULL OR status = $1) \
                     GROUP BY kind ORDER BY kind",
                )
                .bind(status.map(|s| s.as_str()))
                .fetch_all(self.reader())
                .await?)
            }

            async fn error_items_page(
                &self,
                f: &$crate::store::ErrorFilter,
            ) -> Result<Vec<$crate::store::ErrorItem>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ErrorItem>(
                    "SELECT * FROM error_pool WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR kind = $2) \
                     AND ($3 IS NULL OR id = $3) \
                     ORDER BY kind, last_seen DESC, id DESC LIMIT $4 OFFSET $5",
                )
                .bind(f.status.map(|s| s.as_str()))
                .bind(f.kind.as_deref())
                .bind(f.id)
                .bind(f.limit.clamp(1, 500))
                .bind(f.offset.max(0))
                .fetch_all(self.reader())
                .await?)
            }

            async fn resolve_error_audited(
                &self,
                id: i64,
                occurrences: i64,
                note: &str,
                by: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = sqlx::query(
                    concat!("UPDATE error_pool SET status = ", converge_wire::error_item_sql!(Resolved), ", resolution_note = $1, resolved_by = $2, resolved_at = $3 \
                     WHERE id = $4 AND status = ", converge_wire::error_item_sql!(Open), " AND occurrences = $5"),
                )
                .bind(note)
                .bind(by)
                .bind(now)
                .bind(id)
                .bind(occurrences)
                .execute(&mut *tx)
                .await?;
                if r.rows_affected() != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn error_item(&self, id: i64) -> Result<Option<$crate::store::ErrorItem>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ErrorItem>("SELECT * FROM error_pool WHERE id = $1")
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn payment_error_items(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::ErrorItem>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ErrorItem>(
                    "SELECT * FROM error_pool WHERE payment_id = $1 ORDER BY id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn stuck_counts(
                &self,
                cutoffs: &[($crate::domain::state::PaymentStatus, i64); $crate::domain::stuck::STUCK_STATES],
                now: i64,
            ) -> Result<Vec<(String, String, i64)>, $crate::store::StoreError> {
                let sql = $crate::store::stuck_counts_sql();
                let mut q = sqlx::query_as::<_, (String, String, i64)>(&sql).bind(now);
                for (_, cutoff) in cutoffs {
                    q = q.bind(*cutoff);
                }
                Ok(q.fetch_all(self.reader()).await?)
            }

            async fn holds_expiring(
                &self,
                before: i64,
            ) -> Result<Vec<(String, i64, i64, i64)>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, (String, i64, i64, i64)>(&$crate::store::holds_expiring_sql())
                    .bind(before)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn stuck_payments(
                &self,
                cutoffs: &[($crate::domain::state::PaymentStatus, i64); $crate::domain::stuck::STUCK_STATES],
                limit: i64,
            ) -> Result<Vec<$crate::store::StuckPayment>, $crate::store::StoreError> {
                let sql = $crate::store::stuck_payments_sql();
                let mut q = sqlx::query_as::<_, $crate::store::StuckPayment>(&sql).bind(limit);
                for (_, cutoff) in cutoffs {
                    q = q.bind(*cutoff);
                }
                Ok(q.fetch_all(self.reader()).await?)
            }

            async fn charged_payments_created(
                &self,
                from: i64,
                to: i64,
            ) -> Result<Vec<$crate::store::ChargedPayment>, $crate::store::StoreError> {
                let sql = format!(
                    "SELECT id, channel_key, amount, currency, status FROM payments \
                     WHERE created_at >= $1 AND created_at < $2 AND status IN ({}) \
                     AND capture_mode = 'automatic' ORDER BY id",
                    $crate::store::queue::status_list(|s| s.is_charged())
                );
                Ok(sqlx::query_as::<_, $crate::store::ChargedPayment>(&sql)
                .bind(from)
                .bind(to)
                .fetch_all(self.reader())
                .await?)
            }

            async fn captures_settled(
                &self,
                from: i64,
                to: i64,
            ) -> Result<Vec<$crate::store::ChargedPayment>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ChargedPayment>(concat!(
                    "SELECT p.id, p.channel_key, CAST(SUM(c.amount) AS BIGINT) AS amount, p.currency, p.status \
                     FROM payment_captures c JOIN payments p ON p.id = c.payment_id \
                     WHERE c.status = ", converge_wire::capture_sql!(Captured), " AND c.settled_at >= $1 AND c.settled_at < $2 \
                     GROUP BY p.id, p.channel_key, p.currency, p.status ORDER BY p.id",
                ))
                .bind(from)
                .bind(to)
                .fetch_all(self.reader())
                .await?)
            }

            async fn record_reconciliation(
                &self,
                day: &str,
                source: &str,
                rows: i64,
                items: &[$crate::store::NewErrorItem],
                now: i64,
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                for item in items {
                    upsert_error(&mut tx, item).await?;
                }
                sqlx::query(
                    "INSERT INTO reconciliations (day, source, row_count, differences, imported_at) \
                     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (day) DO UPDATE SET source = $2, row_count = $3, \
                     differences = $4, imported_at = $5",
                )
                .bind(day)
                .bind(source)
                .bind(rows)
                .bind(items.len() as i64)
                .bind(now)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }
        }

        async fn upsert_error(
            tx: &mut $crate::store::backend::Tx<$store>,
            item: &$crate::store::NewErrorItem,
        ) -> Result<i64, $crate::store::StoreError> {
            Ok(sqlx::query_scalar::<_, i64>(
                concat!("INSERT INTO error_pool (kind, dedupe_key, payment_id, summary, evidence, status, occurrences, \
                 first_seen, last_seen) VALUES ($1, $2, $3, $4, $5, ", converge_wire::error_item_sql!(Open), ", 1, $6, $6) \
                 ON CONFLICT (dedupe_key) DO UPDATE SET \
                 first_seen = CASE WHEN $6 < error_pool.first_seen THEN $6 ELSE error_pool.first_seen END, \
                 last_seen = CASE WHEN $6 > error_pool.last_seen THEN $6 ELSE error_pool.last_seen END, \
                 summary = CASE WHEN $6 >= error_pool.last_seen THEN $4 ELSE error_pool.summary END, \
                 evidence = CASE WHEN $6 >= error_pool.last_seen THEN $5 ELSE error_pool.evidence END, \
                 occurrences = error_pool.occurrences + 1, \
                 status = CASE WHEN $7 AND (error_pool.resolved_at IS NULL OR error_pool.resolved_at <= $6) THEN ", converge_wire::error_item_sql!(Open), " ELSE error_pool.status END, \
                 resolution_note = CASE WHEN $7 AND (error_pool.resolved_at IS NULL OR error_pool.resolved_at <= $6) THEN NULL ELSE error_pool.resolution_note END, \
                 resolved_by = CASE WHEN $7 AND (error_pool.resolved_at IS NULL OR error_pool.resolved_at <= $6) THEN NULL ELSE error_pool.resolved_by END, \
                 resolved_at = CASE WHEN $7 AND (error_pool.resolved_at IS NULL OR error_pool.resolved_at <= $6) THEN NULL ELSE error_pool.resolved_at END \
                 RETURNING id"),
            )
            .bind(&item.kind)
            .bind(&item.dedupe_key)
            .bind(item.payment_id.as_deref())
            .bind(&item.summary)
            .bind(&item.evidence)
            .bind(item.now)
            .bind(item.reopen)
            .fetch_one(&mut **tx)
            .await?)
        }

        async fn insert_job(
            tx: &mut $crate::store::backend::Tx<$store>,
            job: &$crate::store::NewJob,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            sqlx::query(
                concat!("INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, \
                 created_at, updated_at, trace_id) VALUES ($1, $2, $3, ", converge_wire::job_sql!(Due), ", 0, $4, $5, $6, $6, $7)"),
            )
            .bind(job.kind.as_str())
            .bind(job.payment_id.as_deref())
            .bind(job.refund_id.as_deref())
            .bind(job.max_attempts)
            .bind(job.run_at)
            .bind(now)
            // The job runs in the trace of the request or job that wrote it (worker).
            .bind($crate::telemetry::current_trace())
            .execute(&mut **tx)
            .await?;
            Ok(())
        }
    };
}

//! The pauses' SQL both backends share. Expanded after `impl_governance!`, whose
//! `append_audit_in` writes each step's audit record in the step's transaction.

macro_rules! impl_pauses {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Pauses for $store {
            async fn create_pause(
                &self,
                p: &$crate::store::NewPause,
                audit: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::CreatePause, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let inserted = sqlx::query_as::<_, $crate::store::PauseRecord>(
                    concat!("INSERT INTO pauses (id, target, reason, status, requested_by, requested_at, expires_at) \
                     VALUES ($1, $2, $3, ", converge_wire::pause_sql!(Pending), ", $4, $5, $6) RETURNING *"),
                )
                .bind(&p.id)
                .bind(&p.target)
                .bind(&p.reason)
                .bind(&p.requested_by)
                .bind(p.now)
                .bind(p.expires_at)
                .fetch_one(&mut *tx)
                .await;
                let record = match inserted.map_err($crate::store::StoreError::from) {
                    Ok(r) => $crate::store::PauseRecord::from(r),
                    Err($crate::store::StoreError::Conflict(_)) => {
                        tx.rollback().await?;
                        return Ok($crate::store::CreatePause::OpenExists);
                    }
                    Err(e) => return Err(e),
                };
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok($crate::store::CreatePause::Created(record))
            }

            async fn pause(&self, id: &str) -> Result<Option<$crate::store::PauseRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::PauseRecord>("SELECT * FROM pauses WHERE id = $1")
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn pauses(&self, limit: i64) -> Result<Vec<$crate::store::PauseRecord>, $crate::store::StoreError> {
                let mut open = sqlx::query_as::<_, $crate::store::PauseRecord>(
                    concat!("SELECT * FROM pauses WHERE status IN (", converge_wire::pause_sql!(Pending), ", ", converge_wire::pause_sql!(Active), ") ORDER BY requested_at, id"),
                )
                .fetch_all(self.reader())
                .await?;
                let ended = sqlx::query_as::<_, $crate::store::PauseRecord>(
                    concat!("SELECT * FROM pauses WHERE status NOT IN (", converge_wire::pause_sql!(Pending), ", ", converge_wire::pause_sql!(Active), ") \
                     ORDER BY requested_at DESC, id DESC LIMIT $1"),
                )
                .bind(limit)
                .fetch_all(self.reader())
                .await?;
                open.extend(ended);
                Ok(open)
            }

            async fn active_pause_targets(&self) -> Result<Vec<String>, $crate::store::StoreError> {
                let rows: Vec<(String,)> =
                    sqlx::query_as(concat!("SELECT target FROM pauses WHERE status = ", converge_wire::pause_sql!(Active), " ORDER BY target"))
                        .fetch_all(self.reader())
                        .await?;
                Ok(rows.into_iter().map(|(t,)| t).collect())
            }

            async fn move_pause(
                &self,
                m: &$crate::store::PauseMove,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let current = sqlx::query_as::<_, $crate::store::PauseRecord>("SELECT * FROM pauses WHERE id = $1")
                    .bind(&m.id)
                    .fetch_optional(&mut *tx)
                    .await?;
                let allowed = current.is_some_and(|c| {
                    c.status == m.from
                        && (!m.not_by_requester || c.requested_by != m.by)
                        && m.unexpired_at.is_none_or(|now| c.expires_at > now)
                        && (!m.end_approval
                            || c.open_end_request(m.now).is_some_and(|by| by != m.by))
                });
                if !allowed {
                    tx.rollback().await?;
                    return Ok(false);
                }
                let decision = matches!(
                    m.to,
                    $crate::domain::pause::PauseStatus::Active
                        | $crate::domain::pause::PauseStatus::Rejected
                );
                // Conditional on the status just read: two deciders racing cannot both pass.
                let sql = if decision {
                    "UPDATE pauses SET status = $1, approved_by = $2, decision_reason = $3, approved_at = $4 \
                     WHERE id = $5 AND status = $6"
                } else {
                    "UPDATE pauses SET status = $1, resumed_by = $2, resume_reason = $3, resumed_at = $4 \
                     WHERE id = $5 AND status = $6"
                };
                let moved = sqlx::query(sql)
                    .bind(m.to.as_str())
                    .bind(&m.by)
                    .bind(&m.reason)
                    .bind(m.now)
                    .bind(&m.id)
                    .bind(m.from.as_str())
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                if moved != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn request_pause_end(
                &self,
                r: &$crate::store::PauseEndRequest,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let moved = sqlx::query(
                    concat!("UPDATE pauses SET end_requested_by = $1, end_reason = $2, end_requested_at = $3, \
                     end_expires_at = $4 WHERE id = $5 AND status = ", converge_wire::pause_sql!(Active), " \
                     AND (end_requested_by IS NULL OR end_expires_at <= $3)"),
                )
                .bind(&r.by)
                .bind(&r.reason)
                .bind(r.now)
                .bind(r.expires_at)
                .bind(&r.id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if moved != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn reject_pause_end(
                &self,
                id: &str,
                by: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let moved = sqlx::query(
                    concat!("UPDATE pauses SET end_requested_by = NULL, end_reason = NULL, end_requested_at = NULL, \
                     end_expires_at = NULL WHERE id = $1 AND status = ", converge_wire::pause_sql!(Active), " \
                     AND end_requested_by IS NOT NULL AND end_requested_by <> $2 AND end_expires_at > $3"),
                )
                .bind(id)
                .bind(by)
                .bind(now)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if moved != 1 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }
        }
    };
}

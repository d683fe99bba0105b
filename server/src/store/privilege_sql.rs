//! The privilege requests' SQL both backends share. Expanded after `impl_governance!`, whose
//! `append_audit_in` writes each step's audit record in the step's transaction.

macro_rules! impl_privileges {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Privileges for $store {
            async fn create_privilege_request(
                &self,
                r: &$crate::store::NewPrivilegeRequest,
                audit: &$crate::store::AuditEntry,
            ) -> Result<Option<$crate::store::PrivilegeRequest>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let inserted = sqlx::query_as::<_, $crate::store::PrivilegeRequest>(
                    concat!("INSERT INTO privilege_requests (id, kind, target, roles, password_hash, requested_by, \
                     reason, status, created_at, expires_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, ", converge_wire::action_sql!(Pending), ", $8, $9) RETURNING *"),
                )
                .bind(&r.id)
                .bind(&r.kind)
                .bind(&r.target)
                .bind(&r.roles)
                .bind(&r.password_hash)
                .bind(&r.requested_by)
                .bind(&r.reason)
                .bind(r.now)
                .bind(r.expires_at)
                .fetch_one(&mut *tx)
                .await;
                let record = match inserted.map_err($crate::store::StoreError::from) {
                    Ok(r) => r,
                    Err($crate::store::StoreError::Conflict(_)) => {
                        tx.rollback().await?;
                        return Ok(None);
                    }
                    Err(e) => return Err(e),
                };
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(Some(record))
            }

            async fn privilege_request(
                &self,
                id: &str,
            ) -> Result<Option<$crate::store::PrivilegeRequest>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::PrivilegeRequest>(
                    "SELECT * FROM privilege_requests WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn privilege_password_hash(
                &self,
                id: &str,
            ) -> Result<Option<String>, $crate::store::StoreError> {
                Ok(sqlx::query_scalar("SELECT password_hash FROM privilege_requests WHERE id = $1")
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn privilege_requests(
                &self,
                pending: bool,
                limit: i64,
            ) -> Result<Vec<$crate::store::PrivilegeRequest>, $crate::store::StoreError> {
                let sql = if pending {
                    concat!("SELECT * FROM privilege_requests WHERE status = ", converge_wire::action_sql!(Pending), " \
                     ORDER BY created_at DESC, id DESC LIMIT $1")
                } else {
                    concat!("SELECT * FROM privilege_requests WHERE status <> ", converge_wire::action_sql!(Pending), " \
                     ORDER BY created_at DESC, id DESC LIMIT $1")
                };
                Ok(sqlx::query_as::<_, $crate::store::PrivilegeRequest>(sql)
                    .bind(limit)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn move_privilege_request(
                &self,
                m: &$crate::store::ActionMove,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let current = sqlx::query_as::<_, $crate::store::PrivilegeRequest>(
                    "SELECT * FROM privilege_requests WHERE id = $1",
                )
                .bind(&m.id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(current) = current else {
                    tx.rollback().await?;
                    return Ok(false);
                };
                let allowed = m.from.contains(&current.status)
                    && m.not_by_requester.as_ref().is_none_or(|by| by != &current.requested_by)
                    && m.unexpired_at.is_none_or(|now| current.expires_at > now);
                if !allowed {
                    tx.rollback().await?;
                    return Ok(false);
                }
                // Conditional on the status just read: two deciders racing cannot both pass.
                let (decided_by, decision_reason) = m.decision.clone().unzip();
                let moved = sqlx::query(
                    concat!("UPDATE privilege_requests SET status = $1, \
                     decided_by = COALESCE($2, decided_by), decision_reason = COALESCE($3, decision_reason), \
                     decided_at = CASE WHEN $2 IS NULL THEN decided_at ELSE $4 END, \
                     result = COALESCE($5, result), executed_at = CASE WHEN $5 IS NULL THEN executed_at ELSE $4 END, \
                     password_hash = CASE WHEN $1 IN (", converge_wire::action_sql!(Pending), ", ", converge_wire::action_sql!(Approved), ") THEN password_hash ELSE '' END \
                     WHERE id = $6 AND status = $7"),
                )
                .bind(m.to.as_str())
                .bind(decided_by.as_deref())
                .bind(decision_reason.as_deref())
                .bind(m.now)
                .bind(m.result.as_deref())
                .bind(&m.id)
                .bind(current.status.as_str())
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

            async fn grants_to(
                &self,
                username: &str,
                kinds: &[&str],
                since: i64,
            ) -> Result<Vec<$crate::store::Grant>, $crate::store::StoreError> {
                let mut q = sqlx::QueryBuilder::<$crate::store::backend::DbOf<$store>>::new(
                    concat!("SELECT requested_by, decided_by, executed_at AS at FROM privilege_requests \
                     WHERE status = ", converge_wire::action_sql!(Executed), " AND target = "),
                );
                q.push_bind(username);
                q.push(" AND executed_at >= ");
                q.push_bind(since);
                q.push(" AND kind IN (");
                let mut list = q.separated(", ");
                for k in kinds {
                    list.push_bind(*k);
                }
                if kinds.is_empty() {
                    q.push("NULL");
                }
                q.push(
                    ") UNION ALL SELECT actor AS requested_by, NULL AS decided_by, at FROM audit_log \
                     WHERE action = 'user_added' AND target = ",
                );
                q.push_bind(format!("user:{username}"));
                q.push(" AND at >= ");
                q.push_bind(since);
                Ok(q.build_query_as::<$crate::store::Grant>()
                    .fetch_all(self.reader())
                    .await?)
            }
        }
    };
}

//! The governance SQL both backends share, and `append_audit_in`, the one writer of the audit
//! chain (every audited write calls it in its own transaction); each backend serialises
//! audit appends with its [`SqlBackend::lock_audit`](super::SqlBackend::lock_audit).

macro_rules! impl_governance {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        async fn append_audit_in(
            tx: &mut $crate::store::backend::Tx<$store>,
            e: &$crate::store::AuditEntry,
        ) -> Result<$crate::store::AuditRecord, $crate::store::StoreError> {
            <$store as $crate::store::backend::SqlBackend>::lock_audit(tx).await?;
            let head: Option<(i64, String)> = sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
                .fetch_optional(&mut **tx)
                .await?;
            let (seq, hash) = head.unwrap_or((0, $crate::domain::audit::GENESIS.to_string()));
            let r = $crate::domain::audit::chain(seq, &hash, e.clone());
            sqlx::query(
                "INSERT INTO audit_log (seq, at, actor, roles, action, target, reason, before_state, after_state, \
                 request_meta, prev_hash, hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            )
            .bind(r.seq)
            .bind(r.at)
            .bind(&r.actor)
            .bind(&r.roles)
            .bind(&r.action)
            .bind(&r.target)
            .bind(&r.reason)
            .bind(&r.before_state)
            .bind(&r.after_state)
            .bind(&r.request_meta)
            .bind(&r.prev_hash)
            .bind(&r.hash)
            .execute(&mut **tx)
            .await?;
            Ok(r)
        }

        #[async_trait::async_trait]
        impl $crate::store::Governance for $store {
            async fn append_audit(
                &self,
                e: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::AuditRecord, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = append_audit_in(&mut tx, e).await?;
                tx.commit().await?;
                Ok(r)
            }

            async fn audit_head(&self) -> Result<(i64, String), $crate::store::StoreError> {
                let head: Option<(i64, String)> = sqlx::query_as("SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1")
                    .fetch_optional(self.reader())
                    .await?;
                Ok(head.unwrap_or((0, $crate::domain::audit::GENESIS.to_string())))
            }

            async fn audit_page(
                &self,
                after_seq: i64,
                limit: i64,
                f: &$crate::store::AuditFilter,
            ) -> Result<Vec<$crate::store::AuditRecord>, $crate::store::StoreError> {
                let page = $crate::store::AuditPageQuery::new(after_seq, limit, f);
                if let Some(rows) = self.audit_page_direct(&page).await? {
                    return Ok(rows);
                }
                let mut q = sqlx::query_as::<_, $crate::store::AuditRecord>(&page.sql);
                for a in &page.args {
                    q = match a {
                        $crate::store::AuditArg::Int(v) => q.bind(*v),
                        $crate::store::AuditArg::Text(v) => q.bind(v.as_str()),
                    };
                }
                Ok(q.fetch_all(self.reader()).await?)
            }

            async fn audit_actions(&self) -> Result<Vec<String>, $crate::store::StoreError> {
                // Neither backend skips through an index for DISTINCT; the recursive form
                // asks the index for the next larger action, once per action.
                Ok(sqlx::query_scalar::<_, String>(
                    "WITH RECURSIVE a(action) AS ( \
                       SELECT MIN(action) FROM audit_log \
                       UNION ALL \
                       SELECT (SELECT MIN(l.action) FROM audit_log l WHERE l.action > a.action) \
                       FROM a WHERE a.action IS NOT NULL) \
                     SELECT action FROM a WHERE action IS NOT NULL ORDER BY action",
                )
                .fetch_all(self.reader())
                .await?)
            }

            async fn audit_list(
                &self,
                f: &$crate::store::AuditListFilter,
            ) -> Result<Vec<$crate::store::AuditRow>, $crate::store::StoreError> {
                #[derive(sqlx::FromRow)]
                struct Row {
                    #[sqlx(flatten)]
                    record: $crate::store::AuditRecord,
                    payment_id: Option<String>,
                }
                let (sql, texts) = $crate::store::audit_list_sql(f);
                let bound = match (f.after_seq, f.before_seq) {
                    (Some(after), _) => after,
                    (None, Some(before)) => before,
                    (None, None) => i64::MAX,
                };
                let mut q = sqlx::query_as::<_, Row>(&sql)
                    .bind(bound)
                    .bind(f.from.unwrap_or(i64::MIN))
                    .bind(f.to.unwrap_or(i64::MAX))
                    .bind(f.limit.clamp(1, 500));
                for t in texts {
                    q = q.bind(t);
                }
                let mut rows: Vec<$crate::store::AuditRow> = q
                    .fetch_all(self.reader())
                    .await?
                    .into_iter()
                    .map(|r| $crate::store::AuditRow { record: r.record, payment_id: r.payment_id })
                    .collect();
                if f.after_seq.is_some() {
                    rows.reverse();
                }
                Ok(rows)
            }

            async fn audit_for_target(&self, target: &str) -> Result<Vec<$crate::store::AuditRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::AuditRecord>("SELECT * FROM audit_log WHERE target = $1 ORDER BY seq")
                    .bind(target)
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn add_checkpoint(&self, c: &$crate::store::Checkpoint) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "INSERT INTO audit_checkpoints (seq, head_hash, at, key_id, signature) VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(c.seq)
                .bind(&c.head_hash)
                .bind(c.at)
                .bind(&c.key_id)
                .bind(&c.signature)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn latest_checkpoint(&self) -> Result<Option<$crate::store::Checkpoint>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Checkpoint>(
                    "SELECT seq, head_hash, at, key_id, signature FROM audit_checkpoints \
                     ORDER BY seq DESC, at DESC, id DESC LIMIT 1",
                )
                .fetch_optional(self.reader())
                .await?)
            }

            async fn checkpoints(&self) -> Result<Vec<$crate::store::Checkpoint>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Checkpoint>(
                    "SELECT seq, head_hash, at, key_id, signature FROM audit_checkpoints ORDER BY seq, at, id",
                )
                .fetch_all(self.reader())
                .await?)
            }

            async fn create_action(
                &self,
                a: &$crate::store::NewAction,
                audit: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::CreateAction, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let inserted = sqlx::query_as::<_, $crate::store::ActionRecord>(
                    "INSERT INTO actions (id, kind, payment_id, requested_by, reason, evidence, target_status, \
                     payment_version, status, created_at, expires_at, capture_amount, capture_final) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13) RETURNING *",
                )
                .bind(&a.id)
                .bind(&a.kind)
                .bind(&a.payment_id)
                .bind(&a.requested_by)
                .bind(&a.reason)
                .bind(&a.evidence)
                .bind(a.target_status.as_deref())
                .bind(a.payment_version)
                .bind(&a.status)
                .bind(a.now)
                .bind(a.expires_at)
                .bind(a.capture_amount)
                .bind(a.capture_final)
                .fetch_one(&mut *tx)
                .await;
                let record = match inserted.map_err($crate::store::StoreError::from) {
                    Ok(r) => r.into(),
                    Err($crate::store::StoreError::Conflict(_)) => {
                        tx.rollback().await?;
                        return Ok($crate::store::CreateAction::PendingExists);
                    }
                    Err(e) => return Err(e),
                };
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok($crate::store::CreateAction::Created(record))
            }

            async fn action(&self, id: &str) -> Result<Option<$crate::store::ActionRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ActionRecord>("SELECT * FROM actions WHERE id = $1")
                    .bind(id)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn actions(
                &self,
                status: Option<&str>,
                payment_id: Option<&str>,
                limit: i64,
            ) -> Result<Vec<$crate::store::ActionRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ActionRecord>(
                    "SELECT * FROM actions WHERE ($1 IS NULL OR status = $1) AND ($2 IS NULL OR payment_id = $2) \
                     ORDER BY created_at DESC, id DESC LIMIT $3",
                )
                .bind(status)
                .bind(payment_id)
                .bind(limit)
                .fetch_all(self.reader())
                .await?)
            }

            async fn approval_requests(
                &self,
                kinds: &[&str],
                pending: bool,
                limit: i64,
            ) -> Result<Vec<$crate::store::ApprovalRow>, $crate::store::StoreError> {
                let mut q = sqlx::QueryBuilder::<$crate::store::backend::DbOf<$store>>::new(
                    "SELECT a.*, m.name AS merchant, p.amount, p.currency, p.refunded_amount, \
                     p.status AS payment_status, p.version AS payment_version_now FROM actions a \
                     LEFT JOIN payments p ON p.id = a.payment_id LEFT JOIN merchants m ON m.id = p.merchant_id \
                     WHERE a.status ",
                );
                q.push(if pending { concat!("= ", converge_wire::action_sql!(Pending)) } else { concat!("<> ", converge_wire::action_sql!(Pending)) });
                q.push(" AND a.kind IN (");
                let mut kinds_list = q.separated(", ");
                for k in kinds {
                    kinds_list.push_bind(*k);
                }
                // An empty kind list selects nothing rather than being a syntax error.
                if kinds.is_empty() {
                    q.push("NULL");
                }
                q.push(") ORDER BY a.created_at DESC, a.id DESC LIMIT ");
                q.push_bind(limit);
                #[derive(sqlx::FromRow)]
                struct Row {
                    #[sqlx(flatten)]
                    action: $crate::store::ActionRecord,
                    merchant: Option<String>,
                    amount: Option<i64>,
                    currency: Option<String>,
                    refunded_amount: Option<i64>,
                    payment_status: Option<String>,
                    payment_version_now: Option<i64>,
                }
                Ok(q.build_query_as::<Row>()
                    .fetch_all(self.reader())
                    .await?
                    .into_iter()
                    .map(|r| $crate::store::ApprovalRow {
                        action: r.action,
                        merchant: r.merchant,
                        amount: r.amount,
                        currency: r.currency,
                        refunded_amount: r.refunded_amount,
                        payment_status: r.payment_status,
                        payment_version_now: r.payment_version_now,
                    })
                    .collect())
            }

            async fn pending_approval_count(&self, kinds: &[&str]) -> Result<i64, $crate::store::StoreError> {
                let mut q = sqlx::QueryBuilder::<$crate::store::backend::DbOf<$store>>::new(
                    concat!("SELECT COUNT(*) FROM actions WHERE status = ", converge_wire::action_sql!(Pending), " AND kind IN ("),
                );
                let mut kinds_list = q.separated(", ");
                for k in kinds {
                    kinds_list.push_bind(*k);
                }
                if kinds.is_empty() {
                    q.push("NULL");
                }
                q.push(")");
                let n: i64 = q.build_query_scalar().fetch_one(self.reader()).await?;
                Ok(n)
            }

            async fn move_action(
                &self,
                m: &$crate::store::ActionMove,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let current: Option<$crate::store::ActionRecord> = sqlx::query_as::<_, $crate::store::ActionRecord>("SELECT * FROM actions WHERE id = $1")
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
                // Conditional on the status just read: two approvers racing cannot both pass.
                let (decided_by, decision_reason) = m.decision.clone().unzip();
                let moved = sqlx::query(
                    "UPDATE actions SET status = $1, \
                     decided_by = COALESCE($2, decided_by), decision_reason = COALESCE($3, decision_reason), \
                     decided_at = CASE WHEN $2 IS NULL THEN decided_at ELSE $4 END, \
                     result = COALESCE($5, result), executed_at = CASE WHEN $5 IS NULL THEN executed_at ELSE $4 END \
                     WHERE id = $6 AND status = $7",
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
        }
    };
}

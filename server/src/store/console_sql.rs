//! The console's SQL both backends share.

macro_rules! impl_console {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        /// Appends `audit` and commits when the change `applied`; rolls back otherwise.
        /// After a guarded user update changed nothing: `Conflict(LAST_ADMIN)` when the user
        /// exists (so the guard refused it), else Ok (no such user); rolls back either way.
        async fn last_admin_or_missing(
            mut tx: $crate::store::backend::Tx<$store>,
            username: &str,
        ) -> Result<(), $crate::store::StoreError> {
            let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM users WHERE username = $1")
                .bind(username)
                .fetch_one(&mut *tx)
                .await?;
            tx.rollback().await?;
            if n > 0 {
                return Err($crate::store::StoreError::Conflict($crate::store::LAST_ADMIN.into()));
            }
            Ok(())
        }

        async fn audited(
            mut tx: $crate::store::backend::Tx<$store>,
            applied: bool,
            audit: &$crate::store::AuditEntry,
        ) -> Result<bool, $crate::store::StoreError> {
            if !applied {
                tx.rollback().await?;
                return Ok(false);
            }
            append_audit_in(&mut tx, audit).await?;
            tx.commit().await?;
            Ok(true)
        }

        #[async_trait::async_trait]
        impl $crate::store::Console for $store {
            fn db_pool(&self) -> $crate::store::DbPool {
                self.pool_handle()
            }

            async fn create_user(
                &self,
                username: &str,
                password_hash: &str,
                roles: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::User, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let u = sqlx::query_as::<_, $crate::store::User>(
                    "INSERT INTO users (username, password_hash, roles, disabled, session_epoch, created_at, updated_at) \
                     VALUES ($1, $2, $3, FALSE, 0, $4, $4) RETURNING *",
                )
                .bind(username)
                .bind(password_hash)
                .bind(roles)
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(u)
            }

            async fn user_by_name(&self, username: &str) -> Result<Option<$crate::store::User>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::User>("SELECT * FROM users WHERE username = $1")
                    .bind(username)
                    .fetch_optional(self.reader())
                    .await?)
            }

            async fn users(&self) -> Result<Vec<$crate::store::User>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::User>("SELECT * FROM users ORDER BY username")
                    .fetch_all(self.reader())
                    .await?)
            }

            async fn set_user_disabled(
                &self,
                username: &str,
                disabled: bool,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                // The audit lock first: two admins disabling or demoting each other at once
                // take turns, and the second one's statement sees the first one's commit.
                <$store as $crate::store::backend::SqlBackend>::lock_audit(&mut tx).await?;
                let r = sqlx::query(&format!(
                    "UPDATE users SET disabled = $1, session_epoch = session_epoch + 1, updated_at = $2 \
                     WHERE username = $3 AND ($1 = FALSE OR {})",
                    $crate::store::KEEPS_AN_ADMIN
                ))
                .bind(disabled)
                .bind(now)
                .bind(username)
                .execute(&mut *tx)
                .await?;
                let applied = r.rows_affected() == 1;
                if !applied {
                    last_admin_or_missing(tx, username).await?;
                    return Ok(false);
                }
                audited(tx, applied, audit).await
            }

            async fn set_user_password(
                &self,
                username: &str,
                password_hash: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = sqlx::query(
                    "UPDATE users SET password_hash = $1, session_epoch = session_epoch + 1, updated_at = $2 WHERE username = $3",
                )
                .bind(password_hash)
                .bind(now)
                .bind(username)
                .execute(&mut *tx)
                .await?;
                audited(tx, r.rows_affected() == 1, audit).await
            }

            async fn set_user_roles(
                &self,
                username: &str,
                roles: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                <$store as $crate::store::backend::SqlBackend>::lock_audit(&mut tx).await?;
                let keeps_admin = roles.split(',').any(|r| r.trim() == "admin");
                let r = sqlx::query(&format!(
                    "UPDATE users SET roles = $1, updated_at = $2 WHERE username = $3 AND ($4 OR {})",
                    $crate::store::KEEPS_AN_ADMIN
                ))
                .bind(roles)
                .bind(now)
                .bind(username)
                .bind(keeps_admin)
                .execute(&mut *tx)
                .await?;
                let applied = r.rows_affected() == 1;
                if !applied {
                    last_admin_or_missing(tx, username).await?;
                    return Ok(false);
                }
                audited(tx, applied, audit).await
            }

            async fn record_sign_in(&self, username: &str, at: i64) -> Result<(), $crate::store::StoreError> {
                sqlx::query("UPDATE users SET last_sign_in_at = $1 WHERE username = $2")
                    .bind(at)
                    .bind(username)
                    .execute(self.writer())
                    .await?;
                Ok(())
            }

            async fn merchants(&self) -> Result<Vec<$crate::store::Merchant>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Merchant>(
                    "SELECT id, name, frozen, created_at FROM merchants ORDER BY name",
                )
                .fetch_all(self.reader())
                .await?)
            }

            async fn search_payments(
                &self,
                f: &$crate::store::PaymentFilter,
            ) -> Result<Vec<$crate::store::Payment>, $crate::store::StoreError> {
                let (sql, args) = $crate::store::search_sql(f);
                let mut q = sqlx::query_as::<_, $crate::store::PaymentRow>(&sql);
                for a in args {
                    q = match a {
                        $crate::store::SearchArg::Text(t) => q.bind(t),
                        $crate::store::SearchArg::Int(i) => q.bind(i),
                    };
                }
                q.fetch_all(self.reader()).await?.into_iter().map($crate::store::Payment::try_from).collect()
            }

            async fn payment_refunds(&self, payment_id: &str) -> Result<Vec<$crate::store::Refund>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Refund>(
                    "SELECT id, payment_id, amount, reason, status, last_error, created_at, updated_at \
                     FROM refunds WHERE payment_id = $1 ORDER BY created_at, id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn payment_ledger(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::LedgerEntryRow>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::LedgerEntryRow>(
                    "SELECT b.id AS batch_id, b.kind, e.account, e.direction, e.amount, e.currency, b.created_at, \
                     b.accounting_date FROM ledger_batches b JOIN ledger_entries e ON e.batch_id = b.id \
                     WHERE b.payment_id = $1 ORDER BY b.id, e.id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn outcome_series(&self, since_minute: i64) -> Result<Vec<(i64, String, i64)>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, (i64, String, i64)>(
                    "SELECT minute, outcome, CAST(SUM(count) AS BIGINT) FROM idempotency_outcomes \
                     WHERE minute >= $1 GROUP BY minute, outcome ORDER BY minute, outcome",
                )
                .bind(since_minute)
                .fetch_all(self.reader())
                .await?)
            }

            async fn jobs_done_since(&self, since_minute: i64) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, i64>(&$crate::store::jobs_done_since_sql())
                    .bind(since_minute)
                    .fetch_one(self.reader())
                    .await?)
            }

            async fn begin_auth_attempt(
                &self,
                account: &str,
                addr: &str,
                kind: $crate::domain::throttle::AttemptKind,
                policy: &$crate::domain::throttle::ThrottlePolicy,
                now: i64,
            ) -> Result<$crate::store::AttemptAdmission, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                <$store as $crate::store::backend::SqlBackend>::lock_auth(&mut tx, addr).await?;
                let (addr_failures, addr_oldest_at) = sqlx::query_as::<_, (i64, Option<i64>)>(
                    "SELECT COUNT(*), MIN(at) FROM auth_attempts \
                     WHERE addr = $1 AND at > $2 AND outcome <> 'ok'",
                )
                .bind(addr)
                .bind(policy.window_start(now))
                .fetch_one(&mut *tx)
                .await?;
                // A sign-in counts the pair's failures of both kinds, a step-up only its own
                // kind's (domain::throttle); the last success of either kind resets both.
                let (pair_failures, pair_last_at) = sqlx::query_as::<_, (i64, Option<i64>)>(
                    "SELECT COUNT(*), MAX(at) FROM auth_attempts \
                     WHERE addr = $1 AND account = $2 AND at > $3 AND outcome <> 'ok' \
                     AND ($4 = 'login' OR kind = $4) \
                     AND id > COALESCE((SELECT MAX(id) FROM auth_attempts \
                         WHERE addr = $1 AND account = $2 AND outcome = 'ok'), 0)",
                )
                .bind(addr)
                .bind(account)
                .bind(policy.pair_since(now))
                .bind(kind.as_str())
                .fetch_one(&mut *tx)
                .await?;
                let pair_known = sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM (SELECT 1 FROM auth_attempts \
                     WHERE addr = $1 AND account = $2 AND at > $3 AND outcome = 'ok' LIMIT 1) k",
                )
                .bind(addr)
                .bind(account)
                .bind(policy.pair_since(now))
                .fetch_one(&mut *tx)
                .await?
                    > 0;
                let history = $crate::domain::throttle::AttemptHistory {
                    addr_failures,
                    addr_oldest_at,
                    pair_failures,
                    pair_last_at,
                    pair_known,
                };
                if let $crate::domain::throttle::Admission::Refused { retry_after_ms } =
                    policy.admit(&history, kind, now)
                {
                    tx.rollback().await?;
                    return Ok($crate::store::AttemptAdmission::Refused { retry_after_ms });
                }
                let id = sqlx::query_scalar::<_, i64>(
                    "INSERT INTO auth_attempts (account, addr, kind, outcome, at) \
                     VALUES ($1, $2, $3, 'pending', $4) RETURNING id",
                )
                .bind(account)
                .bind(addr)
                .bind(kind.as_str())
                .bind(now)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok($crate::store::AttemptAdmission::Admitted { id })
            }

            async fn finish_auth_attempt(
                &self,
                id: i64,
                ok: bool,
                now: i64,
            ) -> Result<(), $crate::store::StoreError> {
                sqlx::query("UPDATE auth_attempts SET outcome = $1, at = $2 WHERE id = $3")
                    .bind(if ok { "ok" } else { "failed" })
                    .bind(now)
                    .bind(id)
                    .execute(self.writer())
                    .await?;
                Ok(())
            }

            async fn purge_auth_attempts(&self, before: i64) -> Result<u64, $crate::store::StoreError> {
                Ok(sqlx::query("DELETE FROM auth_attempts WHERE at < $1")
                    .bind(before)
                    .execute(self.writer())
                    .await?
                    .rows_affected())
            }

            async fn error_counts(&self) -> Result<Vec<$crate::store::ErrorKindCount>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::ErrorKindCount>(
                    concat!("SELECT kind, CAST(SUM(CASE WHEN status = ", converge_wire::error_item_sql!(Open), " THEN 1 ELSE 0 END) AS BIGINT) AS open, \
                     MIN(CASE WHEN status = ", converge_wire::error_item_sql!(Open), " THEN first_seen END) AS oldest_open \
                     FROM error_pool GROUP BY kind ORDER BY kind"),
                )
                .fetch_all(self.reader())
                .await?)
            }
        }
    };
}

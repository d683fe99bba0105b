//! The live console's SQL both backends share ([`super::live`]).

macro_rules! impl_live {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Live for $store {
            async fn change_marker(
                &self,
            ) -> Result<$crate::store::ChangeMarker, $crate::store::StoreError> {
                // Each subquery is a MAX over a primary key or an index: one probe apiece.
                Ok(sqlx::query_as::<_, $crate::store::ChangeMarker>(
                    "SELECT \
                     COALESCE((SELECT MAX(updated_at) FROM payments), 0) AS payments_at, \
                     COALESCE((SELECT MAX(id) FROM payment_events), 0) AS payment_event, \
                     COALESCE((SELECT MAX(updated_at) FROM jobs), 0) AS jobs_at, \
                     COALESCE((SELECT MAX(id) FROM error_pool), 0) AS error_item, \
                     COALESCE((SELECT MAX(seq) FROM audit_log), 0) AS audit_seq, \
                     COALESCE((SELECT MAX(id) FROM webhook_attempts), 0) AS webhook_attempt",
                )
                .fetch_one(self.reader())
                .await?)
            }

            async fn changes_since(
                &self,
                since: &$crate::store::ChangeMarker,
                limit: i64,
            ) -> Result<$crate::store::ChangeSet, $crate::store::StoreError> {
                let limit = limit.clamp(1, 1000);
                // One more than the limit tells a full answer from a truncated one.
                let take = limit + 1;
                let mut ids: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
                let mut truncated = false;
                let mut add = |rows: Vec<(String,)>| {
                    if rows.len() as i64 > limit {
                        truncated = true;
                    }
                    ids.extend(rows.into_iter().map(|(id,)| id));
                };
                add(sqlx::query_as(
                    "SELECT id FROM payments WHERE updated_at >= $1 ORDER BY updated_at LIMIT $2",
                )
                .bind(since.payments_at)
                .bind(take)
                .fetch_all(self.reader())
                .await?);
                add(sqlx::query_as(
                    "SELECT DISTINCT payment_id FROM payment_events WHERE id > $1 LIMIT $2",
                )
                .bind(since.payment_event)
                .bind(take)
                .fetch_all(self.reader())
                .await?);
                add(sqlx::query_as(
                    "SELECT DISTINCT payment_id FROM jobs \
                     WHERE updated_at >= $1 AND payment_id IS NOT NULL LIMIT $2",
                )
                .bind(since.jobs_at)
                .bind(take)
                .fetch_all(self.reader())
                .await?);
                add(sqlx::query_as(
                    "SELECT DISTINCT payment_id FROM error_pool \
                     WHERE id > $1 AND payment_id IS NOT NULL LIMIT $2",
                )
                .bind(since.error_item)
                .bind(take)
                .fetch_all(self.reader())
                .await?);
                // A notification of a refund belongs to the refund's payment.
                add(sqlx::query_as(
                    "SELECT DISTINCT COALESCE(r.payment_id, e.aggregateid) \
                     FROM webhook_attempts a \
                     JOIN webhook_deliveries d ON d.id = a.delivery_id \
                     JOIN events e ON e.id = d.event_id \
                     LEFT JOIN refunds r ON e.aggregatetype = 'refund' AND r.id = e.aggregateid \
                     WHERE a.id > $1 LIMIT $2",
                )
                .bind(since.webhook_attempt)
                .bind(take)
                .fetch_all(self.reader())
                .await?);
                let audit: Vec<(String, String)> = sqlx::query_as(
                    "SELECT action, target FROM audit_log WHERE seq > $1 ORDER BY seq LIMIT $2",
                )
                .bind(since.audit_seq)
                .bind(take)
                .fetch_all(self.reader())
                .await?;
                if audit.len() as i64 > limit {
                    truncated = true;
                }
                let (mut actions, mut pauses) = (false, false);
                for (action, target) in audit {
                    actions |= action.starts_with("action_") || action.starts_with("privilege_");
                    pauses |= action.starts_with("pause_");
                    if let Some(id) = target.strip_prefix("payment:") {
                        ids.insert(id.to_string());
                    }
                }
                let pending: Vec<(String,)> = sqlx::query_as(
                    concat!("SELECT payment_id FROM actions WHERE status = ", converge_wire::action_sql!(Pending), " LIMIT 1000"),
                )
                .fetch_all(self.reader())
                .await?;
                let pending = pending.iter().any(|(id,)| ids.contains(id));
                if ids.len() as i64 > limit {
                    truncated = true;
                    ids = ids.into_iter().take(limit as usize).collect();
                }
                Ok($crate::store::ChangeSet {
                    payments: ids,
                    truncated,
                    actions,
                    pauses,
                    pending,
                })
            }
        }
    };
}

//! The refunds' SQL both backends share ([`Refunds`](super::Refunds); conventions in
//! `backend.rs`): merchant refunds with their reservation on the payment, and the reservation
//! of an ops reversal.

macro_rules! impl_refunds {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        /// Reserves and inserts a refund with its job inside the caller's transaction
        /// ([`Refunds::create_refund`](crate::store::Refunds::create_refund)); a refusal
        /// writes nothing, and the caller rolls back.
        async fn insert_refund_in(
            tx: &mut $crate::store::backend::Tx<$store>,
            n: &$crate::store::NewRefund,
        ) -> Result<$crate::store::CreateRefund, $crate::store::StoreError> {
            use $crate::store::{CreateRefund, Payment, PaymentRow, Refund};
            let sql = format!(
                "UPDATE payments SET refunded_amount = refunded_amount + $1, version = version + 1, updated_at = $2 \
                 WHERE id = $3 AND status IN ({}) AND refunded_amount + $1 <= CASE WHEN capture_mode = 'manual' THEN captured_amount ELSE amount END \
                 AND reversal_id IS NULL",
                $crate::store::queue::status_list($crate::domain::refunds::refundable)
            );
            let reserved = match () {
                // Planted bug 4: what remains is read, nothing is reserved.
                #[cfg(feature = "planted-bugs")]
                () if $crate::planted::on($crate::planted::Bug::RefundWithoutReserve) => {
                    let check = sql.replace(
                        "UPDATE payments SET refunded_amount = refunded_amount + $1, version = version + 1, updated_at = $2",
                        "SELECT COUNT(*) FROM payments",
                    ).replace("WHERE id = $3", "WHERE $2 = $2 AND id = $3");
                    let n_ok: i64 = sqlx::query_scalar(&check)
                        .bind(n.amount)
                        .bind(n.now)
                        .bind(&n.payment_id)
                        .fetch_one(&mut **tx)
                        .await?;
                    n_ok as u64
                }
                () => sqlx::query(&sql)
                    .bind(n.amount)
                    .bind(n.now)
                    .bind(&n.payment_id)
                    .execute(&mut **tx)
                    .await?
                    .rows_affected(),
            };
            if reserved == 0 {
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE id = $1",
                    $crate::store::payments_sql::PAYMENT_COLUMNS
                ))
                .bind(&n.payment_id)
                .fetch_optional(&mut **tx)
                .await?;
                return Ok(match row.map(Payment::try_from).transpose()? {
                    None => CreateRefund::NoPayment,
                    Some(p) if !$crate::domain::refunds::refundable(p.status) => {
                        CreateRefund::NotRefundable(p.status)
                    }
                    Some(p) if p.reversal_id.is_some() => CreateRefund::Reversing,
                    Some(p) => CreateRefund::ExceedsRemaining { remaining: p.unrefunded() },
                });
            }
            let refund = sqlx::query_as::<_, Refund>(
                concat!("INSERT INTO refunds (id, payment_id, amount, reason, status, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, ", converge_wire::refund_sql!(Pending), ", $5, $5) \
                 RETURNING id, payment_id, amount, reason, status, last_error, created_at, updated_at"),
            )
            .bind(&n.id)
            .bind(&n.payment_id)
            .bind(n.amount)
            .bind(&n.reason)
            .bind(n.now)
            .fetch_one(&mut **tx)
            .await?;
            insert_job(
                tx,
                &$crate::store::NewJob {
                    kind: $crate::store::JobKind::Refund,
                    payment_id: Some(n.payment_id.clone()),
                    refund_id: Some(n.id.clone()),
                    run_at: n.job_due_at,
                    max_attempts: n.max_attempts,
                },
                n.now,
            )
            .await?;
            Ok(CreateRefund::Created(refund))
        }

        #[async_trait::async_trait]
        impl $crate::store::Refunds for $store {
            async fn create_refund(
                &self,
                n: &$crate::store::NewRefund,
            ) -> Result<$crate::store::CreateRefund, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let created = insert_refund_in(&mut tx, n).await?;
                if matches!(created, $crate::store::CreateRefund::Created(_)) {
                    tx.commit().await?;
                } else {
                    tx.rollback().await?;
                }
                Ok(created)
            }

            async fn open_refund(
                &self,
                c: &$crate::store::keys::KeyClaim,
                n: &$crate::store::NewRefund,
            ) -> Result<$crate::store::OpenedRefund, $crate::store::StoreError> {
                use $crate::store::keys::ClaimStep;
                use $crate::store::OpenedRefund;
                let mut tx = self.begin_write().await?;
                // The recovery point goes in with the claim, so a retry after a crash resumes
                // this one refund id: refunds have no business key to catch a second one.
                match claim_in_tx(&mut tx, c, Some(&n.id)).await? {
                    ClaimStep::Inserted => {}
                    other => {
                        tx.commit().await?;
                        return Ok(OpenedRefund::Key(other.into()));
                    }
                }
                let created = insert_refund_in(&mut tx, n).await?;
                if matches!(created, $crate::store::CreateRefund::Created(_)) {
                    tx.commit().await?;
                } else {
                    // Refused: the claim goes with it, and the key stays free.
                    tx.rollback().await?;
                }
                Ok(OpenedRefund::Opened(created))
            }

            async fn refund(&self, id: &str) -> Result<Option<$crate::store::Refund>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Refund>(
                    "SELECT id, payment_id, amount, reason, status, last_error, created_at, updated_at \
                     FROM refunds WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?)
            }

            async fn pending_refund_count(&self, payment_id: &str) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, i64>(
                    concat!("SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = ", converge_wire::refund_sql!(Pending)),
                )
                .bind(payment_id)
                .fetch_one(self.reader())
                .await?)
            }

            async fn refund_succeeded(
                &self,
                id: &str,
                posting: &$crate::store::LedgerPosting,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let payment_id: Option<String> = sqlx::query_scalar(
                    concat!("UPDATE refunds SET status = ", converge_wire::refund_sql!(Succeeded), ", updated_at = $1 WHERE id = $2 AND status = ", converge_wire::refund_sql!(Pending), " \
                     RETURNING payment_id"),
                )
                .bind(now)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some(payment_id) = payment_id else {
                    tx.rollback().await?;
                    return Ok(false);
                };
                insert_posting(&mut tx, &payment_id, posting, now).await?;
                let merchant_id: i64 = sqlx::query_scalar("SELECT merchant_id FROM payments WHERE id = $1")
                    .bind(&payment_id)
                    .fetch_one(&mut *tx)
                    .await?;
                insert_fee(&mut tx, &payment_id, merchant_id, posting, now).await?;
                sqlx::query(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Done), ", updated_at = $1 WHERE refund_id = $2 AND status = ", converge_wire::job_sql!(Due)),
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                refund_event(&mut tx, self.outbox_plan(), id, $crate::domain::webhooks::EventType::RefundSucceeded, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn refund_failed(&self, id: &str, error: &str, now: i64) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let row: Option<(String, i64)> = sqlx::query_as(
                    concat!("UPDATE refunds SET status = ", converge_wire::refund_sql!(Failed), ", last_error = $1, updated_at = $2 \
                     WHERE id = $3 AND status = ", converge_wire::refund_sql!(Pending), " RETURNING payment_id, amount"),
                )
                .bind(error)
                .bind(now)
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((payment_id, amount)) = row else {
                    tx.rollback().await?;
                    return Ok(false);
                };
                sqlx::query(
                    "UPDATE payments SET refunded_amount = refunded_amount - $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3",
                )
                .bind(amount)
                .bind(now)
                .bind(&payment_id)
                .execute(&mut *tx)
                .await?;
                sqlx::query(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Done), ", updated_at = $1 WHERE refund_id = $2 AND status = ", converge_wire::job_sql!(Due)),
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                refund_event(&mut tx, self.outbox_plan(), id, $crate::domain::webhooks::EventType::RefundFailed, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn reserve_reversal(
                &self,
                r: &$crate::store::ReserveReversal,
            ) -> Result<$crate::store::ReversalReservation, $crate::store::StoreError> {
                use $crate::store::{Payment, PaymentRow, ReversalReservation};
                let mut tx = self.begin_write().await?;
                let sql = format!(
                    concat!("UPDATE payments SET reversal_id = $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3 AND version = $4 AND status IN ({}) AND reversal_id IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = $3 AND r.status = ", converge_wire::refund_sql!(Pending), ")"),
                    $crate::store::queue::status_list($crate::domain::actions::reversible)
                );
                let reserved = sqlx::query(&sql)
                .bind(&r.action_id)
                .bind(r.now)
                .bind(&r.payment_id)
                .bind(r.pinned_version)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if reserved == 1 {
                    insert_job(&mut tx, &r.job, r.now).await?;
                }
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE id = $1",
                    $crate::store::payments_sql::PAYMENT_COLUMNS
                ))
                .bind(&r.payment_id)
                .fetch_optional(&mut *tx)
                .await?;
                let pending_refunds: i64 = sqlx::query_scalar(
                    concat!("SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = ", converge_wire::refund_sql!(Pending)),
                )
                .bind(&r.payment_id)
                .fetch_one(&mut *tx)
                .await?;
                tx.commit().await?;
                let Some(payment) = row.map(Payment::try_from).transpose()? else {
                    return Ok(ReversalReservation::NoPayment);
                };
                Ok(if reserved == 1 {
                    ReversalReservation::Reserved(payment)
                } else if payment.reversal_id.as_deref() == Some(r.action_id.as_str()) {
                    ReversalReservation::AlreadyHeld(payment)
                } else {
                    ReversalReservation::Refused { payment, pending_refunds }
                })
            }

            async fn release_reversal(
                &self,
                payment_id: &str,
                action_id: &str,
                now: i64,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let sql = format!(
                    "UPDATE payments SET reversal_id = NULL, version = version + 1, updated_at = $1 \
                     WHERE id = $2 AND reversal_id = $3 AND status IN ({})",
                    $crate::store::queue::status_list($crate::domain::actions::reversible)
                );
                let released = sqlx::query(&sql)
                .bind(now)
                .bind(payment_id)
                .bind(action_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                sqlx::query(
                    concat!("UPDATE jobs SET status = ", converge_wire::job_sql!(Done), ", updated_at = $1 \
                     WHERE payment_id = $2 AND kind = 'reverse' AND status = ", converge_wire::job_sql!(Due)),
                )
                .bind(now)
                .bind(payment_id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(released == 1)
            }
        }

        /// The outbox row of a refund's outcome, in the caller's transaction.
        async fn refund_event(
            tx: &mut $crate::store::backend::Tx<$store>,
            plan: &$crate::store::WebhookPlan,
            refund_id: &str,
            event_type: $crate::domain::webhooks::EventType,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            let refund = sqlx::query_as::<_, $crate::store::Refund>(
                "SELECT id, payment_id, amount, reason, status, last_error, created_at, updated_at \
                 FROM refunds WHERE id = $1",
            )
            .bind(refund_id)
            .fetch_one(&mut **tx)
            .await?;
            let merchant_id: i64 = sqlx::query_scalar("SELECT merchant_id FROM payments WHERE id = $1")
                .bind(&refund.payment_id)
                .fetch_one(&mut **tx)
                .await?;
            insert_outbox_event(
                tx,
                plan,
                merchant_id,
                event_type,
                &refund.id,
                "",
                &$crate::store::views::refund_payload(&refund),
                now,
            )
            .await
        }
    };
}

//! The channel callbacks' SQL both backends share ([`Callbacks`](super::Callbacks);
//! conventions in `backend.rs`).

/// The outcome a recorded callback's row keeps (`channel_callbacks.outcome`).
pub(crate) fn outcome_of(decision: &super::CallbackDecision<'_>) -> &'static str {
    match decision {
        super::CallbackDecision::UnknownPayment => "unknown_payment",
        super::CallbackDecision::Ignore(_) => "ignored",
        super::CallbackDecision::Conflict(..) => "conflicting",
        super::CallbackDecision::Apply { .. } => "applied",
    }
}

macro_rules! impl_callbacks {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Callbacks for $store {
            async fn record_callback(
                &self,
                receipt: &$crate::store::CallbackReceipt<'_>,
                decision: $crate::store::CallbackDecision<'_>,
            ) -> Result<$crate::store::CallbackRecorded, $crate::store::StoreError> {
                use $crate::store::{CallbackDecision, CallbackRecorded};
                let mut tx = self.begin_write().await?;
                // The event id's key serialises concurrent deliveries: a second insert waits
                // for the first transaction and then finds the row (or, if it rolled back,
                // records in its place).
                let r = sqlx::query(
                    "INSERT INTO channel_callbacks (event_id, channel_key, kind, outcome, received_at, body, signature) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (event_id) DO NOTHING",
                )
                .bind(receipt.event_id)
                .bind(receipt.channel_key)
                .bind(receipt.kind)
                .bind($crate::store::callbacks_sql::outcome_of(&decision))
                .bind(receipt.received_at)
                .bind(receipt.body)
                .bind(receipt.signature)
                .execute(&mut *tx)
                .await?;
                if r.rows_affected() == 0 {
                    tx.rollback().await?;
                    return Ok(CallbackRecorded::Duplicate);
                }
                let recorded = match decision {
                    CallbackDecision::UnknownPayment => CallbackRecorded::Recorded,
                    CallbackDecision::Ignore(ignored) => {
                        insert_ignored_event(&mut *tx, ignored).await?;
                        CallbackRecorded::Recorded
                    }
                    CallbackDecision::Conflict(ignored, item) => {
                        insert_ignored_event(&mut *tx, ignored).await?;
                        upsert_error(&mut tx, item).await?;
                        CallbackRecorded::Recorded
                    }
                    CallbackDecision::Apply { transition, lost } => {
                        apply_callback_step(&mut tx, self.outbox_plan(), receipt.event_id, transition, lost).await?
                    }
                };
                tx.commit().await?;
                Ok(recorded)
            }

            async fn callback_body(&self, event_id: &str) -> Result<Option<Vec<u8>>, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, Option<Vec<u8>>>(
                    "SELECT body FROM channel_callbacks WHERE event_id = $1",
                )
                .bind(event_id)
                .fetch_optional(self.reader())
                .await?
                .flatten())
            }
        }

        /// A callback's transition in the callback's transaction: applied with its row's
        /// effects, or, when another writer moved the payment first, recorded as the `lost`
        /// ignored event (and the receipt's outcome says `ignored`).
        async fn apply_callback_step(
            tx: &mut $crate::store::backend::Tx<$store>,
            plan: &$crate::store::WebhookPlan,
            event_id: &str,
            t: &$crate::store::Transition,
            lost: &(dyn Fn(&$crate::store::Payment) -> $crate::store::IgnoredEvent + Send + Sync),
        ) -> Result<$crate::store::CallbackRecorded, $crate::store::StoreError> {
            use $crate::store::payments_sql::Step;
            use $crate::store::{CallbackRecorded, Payment, PaymentRow};
            let rule = $crate::store::payments_sql::rule_for(t)?
                .map_err(|refused| $crate::store::StoreError::Corrupt(format!("store refused {refused}")))?;
            match apply_step(tx, plan, t, rule).await? {
                Step::Applied(after) => {
                    let steps = std::slice::from_ref(t);
                    let jobs = $crate::store::payments_sql::batch_jobs(steps, &[rule]);
                    write_jobs(tx, &t.payment_id, t.now, &jobs).await?;
                    return Ok(CallbackRecorded::Applied(after));
                }
                Step::Duplicate => {}
                // The step's own event row was written before its conditional update found
                // the payment moved: it is not history, so it goes.
                Step::Stale => {
                    sqlx::query("DELETE FROM payment_events WHERE payment_id = $1 AND event_id = $2")
                        .bind(&t.payment_id)
                        .bind(&t.event_id)
                        .execute(&mut **tx)
                        .await?;
                }
            }
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "SELECT {} FROM payments WHERE id = $1",
                $crate::store::payments_sql::PAYMENT_COLUMNS
            ))
            .bind(&t.payment_id)
            .fetch_optional(&mut **tx)
            .await?
            .ok_or_else(|| $crate::store::StoreError::Corrupt(format!("payment {} vanished", t.payment_id)))?;
            let current = Payment::try_from(row)?;
            insert_ignored_event(&mut **tx, &lost(&current)).await?;
            sqlx::query("UPDATE channel_callbacks SET outcome = 'ignored' WHERE event_id = $1")
                .bind(event_id)
                .execute(&mut **tx)
                .await?;
            Ok(CallbackRecorded::Lost(current))
        }
    };
}

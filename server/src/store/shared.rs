//! The SQL both backends share. SQLite and PostgreSQL agree on `$N` parameters,
//! `ON CONFLICT ... DO NOTHING`, `RETURNING` and partial unique indexes, so one text serves
//! both; each backend supplies `reader()`, `writer()` and `begin_write()` (SQLite starts write
//! transactions with `BEGIN IMMEDIATE` so a read-then-write transaction never fails to
//! upgrade), and `impl_store!` writes the [`Store`](super::Store) impl around them.

/// Columns of `payments` in [`PaymentRow`](super::records::PaymentRow) order.
pub(crate) const PAYMENT_COLUMNS: &str = "id, merchant_id, merchant_order_id, amount, currency, description, \
     params_hash, status, version, channel_key, submit_attempts, refunded_amount, last_error, created_at, updated_at, reversal_id";

/// How a claim inside a transaction went (`claim_in_tx`).
pub(crate) enum ClaimStep {
    /// A new claim was inserted.
    Inserted,
    /// A lapsed claim with the same request was taken over; its recovery point.
    TakenOver(Option<String>),
    /// Another request holds or completed the key.
    Existing(super::KeyRecord),
}

/// How one transition inside a transaction went (`apply_step`).
pub(crate) enum Step {
    /// Applied: the payment after it.
    Applied(super::Payment),
    /// The (payment, event id) was recorded before.
    Duplicate,
    /// The payment is no longer at (from, version).
    Stale,
}

macro_rules! impl_store {
    ($store:ty, $backend:expr) => {
        async fn insert_merchant(
            tx: &mut sqlx::Transaction<'static, Db>,
            name: &str,
            key: &$crate::store::NewMerchantKey,
        ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
            let m: $crate::store::Merchant = sqlx::query_as::<_, $crate::store::DbMerchant>(
                "INSERT INTO merchants (name, api_key_hash, frozen, created_at) VALUES ($1, $2, FALSE, $3) \
                 RETURNING id, name, frozen, created_at",
            )
            .bind(name)
            .bind(&key.key_hash)
            .bind(key.now)
            .fetch_one(&mut **tx)
            .await?
            .into();
            insert_merchant_key(tx, m.id, key).await?;
            Ok(m)
        }

        async fn insert_merchant_key(
            tx: &mut sqlx::Transaction<'static, Db>,
            merchant_id: i64,
            key: &$crate::store::NewMerchantKey,
        ) -> Result<$crate::store::MerchantKey, $crate::store::StoreError> {
            Ok(sqlx::query_as::<_, $crate::store::DbMerchantKey>(
                "INSERT INTO merchant_keys (id, merchant_id, prefix, key_hash, created_at) VALUES ($1, $2, $3, $4, $5) \
                 RETURNING id, merchant_id, prefix, created_at, last_used_at, revoked_at",
            )
            .bind(&key.id)
            .bind(merchant_id)
            .bind(&key.prefix)
            .bind(&key.key_hash)
            .bind(key.now)
            .fetch_one(&mut **tx)
            .await?
            .into())
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn backend(&self) -> $crate::store::Backend {
                $backend
            }

            async fn ping(&self) -> Result<(), $crate::store::StoreError> {
                sqlx::query("SELECT 1").execute(self.reader()).await.map_err($crate::store::StoreError::Unavailable)?;
                Ok(())
            }

            async fn close(&self) {
                self.close_pools().await;
            }

            async fn create_merchant(
                &self,
                name: &str,
                api_key_hash: &str,
                now: i64,
            ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let key = $crate::store::NewMerchantKey {
                    id: format!("mk_{}", &api_key_hash[..api_key_hash.len().min(24)]),
                    prefix: String::new(),
                    key_hash: api_key_hash.to_string(),
                    now,
                };
                let m = insert_merchant(&mut tx, name, &key).await?;
                tx.commit().await?;
                Ok(m)
            }

            async fn set_merchant_frozen_audited(
                &self,
                name: &str,
                frozen: bool,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = sqlx::query("UPDATE merchants SET frozen = $1 WHERE name = $2")
                    .bind(frozen)
                    .bind(name)
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

            async fn create_merchant_with_key(
                &self,
                name: &str,
                key: &$crate::store::NewMerchantKey,
                audit: &$crate::store::AuditEntry,
            ) -> Result<$crate::store::Merchant, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let m = insert_merchant(&mut tx, name, key).await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(m)
            }

            async fn add_merchant_key(
                &self,
                name: &str,
                key: &$crate::store::NewMerchantKey,
                audit: &$crate::store::AuditEntry,
            ) -> Result<Option<$crate::store::MerchantKey>, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let id: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(merchant_id) = id else {
                    tx.rollback().await?;
                    return Ok(None);
                };
                let k = insert_merchant_key(&mut tx, merchant_id, key).await?;
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(Some(k))
            }

            async fn merchant_keys(
                &self,
                name: &str,
            ) -> Result<Option<Vec<$crate::store::MerchantKey>>, $crate::store::StoreError> {
                let id: Option<i64> = sqlx::query_scalar("SELECT id FROM merchants WHERE name = $1")
                    .bind(name)
                    .fetch_optional(self.reader())
                    .await?;
                let Some(merchant_id) = id else {
                    return Ok(None);
                };
                Ok(Some(
                    sqlx::query_as::<_, $crate::store::DbMerchantKey>(
                        "SELECT id, merchant_id, prefix, created_at, last_used_at, revoked_at FROM merchant_keys \
                         WHERE merchant_id = $1 ORDER BY created_at, id",
                    )
                    .bind(merchant_id)
                    .fetch_all(self.reader())
                    .await?
                    .into_iter()
                    .map(Into::into)
                    .collect(),
                ))
            }

            async fn revoke_merchant_key(
                &self,
                name: &str,
                key_id: &str,
                now: i64,
                audit: &$crate::store::AuditEntry,
            ) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let revoked = sqlx::query(
                    "UPDATE merchant_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL \
                     AND merchant_id = (SELECT id FROM merchants WHERE name = $3)",
                )
                .bind(now)
                .bind(key_id)
                .bind(name)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if revoked == 0 {
                    tx.rollback().await?;
                    return Ok(false);
                }
                append_audit_in(&mut tx, audit).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn touch_merchant_key(&self, api_key_hash: &str, now: i64) -> Result<(), $crate::store::StoreError> {
                sqlx::query(
                    "UPDATE merchant_keys SET last_used_at = $1 WHERE key_hash = $2 \
                     AND (last_used_at IS NULL OR last_used_at < $3)",
                )
                .bind(now)
                .bind(api_key_hash)
                .bind(now - 60_000)
                .execute(self.writer())
                .await?;
                Ok(())
            }

            async fn merchant_by_key_hash(
                &self,
                api_key_hash: &str,
            ) -> Result<Option<$crate::store::Merchant>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::DbMerchant>(
                    "SELECT m.id, m.name, m.frozen, m.created_at FROM merchant_keys k \
                     JOIN merchants m ON m.id = k.merchant_id \
                     WHERE k.key_hash = $1 AND k.revoked_at IS NULL",
                )
                .bind(api_key_hash)
                .fetch_optional(self.reader())
                .await?
                .map(Into::into))
            }

            async fn merchant(&self, id: i64) -> Result<Option<$crate::store::Merchant>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::DbMerchant>(
                    "SELECT id, name, frozen, created_at FROM merchants WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(self.reader())
                .await?
                .map(Into::into))
            }

            async fn set_merchant_frozen(&self, name: &str, frozen: bool) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query("UPDATE merchants SET frozen = $1 WHERE name = $2")
                    .bind(frozen)
                    .bind(name)
                    .execute(self.writer())
                    .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn claim_key(
                &self,
                c: &$crate::store::KeyClaim,
            ) -> Result<$crate::store::ClaimResult, $crate::store::StoreError> {
                use $crate::store::ClaimResult;
                let mut tx = self.begin_write().await?;
                let step = claim_in_tx(&mut tx, c, None).await?;
                tx.commit().await?;
                Ok(match step {
                    $crate::store::shared::ClaimStep::Inserted => ClaimResult::Claimed { resource_id: None },
                    $crate::store::shared::ClaimStep::TakenOver(resource_id) => ClaimResult::Claimed { resource_id },
                    $crate::store::shared::ClaimStep::Existing(rec) => ClaimResult::Existing(rec),
                })
            }

            async fn set_key_resource(
                &self,
                k: &$crate::store::KeyRef,
                resource_id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    "UPDATE idempotency_keys SET resource_id = $1 \
                     WHERE merchant_id = $2 AND idem_key = $3 AND state = 'running' AND lease_token = $4",
                )
                .bind(resource_id)
                .bind(k.merchant_id)
                .bind(&k.idem_key)
                .bind(&k.lease_token)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn complete_key(
                &self,
                k: &$crate::store::KeyRef,
                resp: &$crate::store::StoredResponse,
            ) -> Result<bool, $crate::store::StoreError> {
                complete_key_in(self.writer(), k, resp).await
            }

            async fn release_key(&self, k: &$crate::store::KeyRef) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    "DELETE FROM idempotency_keys \
                     WHERE merchant_id = $1 AND idem_key = $2 AND state = 'running' AND lease_token = $3",
                )
                .bind(k.merchant_id)
                .bind(&k.idem_key)
                .bind(&k.lease_token)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn purge_keys(&self, now: i64) -> Result<u64, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let r = sqlx::query("DELETE FROM idempotency_keys WHERE expires_at < $1")
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                // Outcomes outlive no key: also those of a key released (its request was
                // refused) while later requests were told it was in use.
                sqlx::query(
                    "DELETE FROM idempotency_key_outcomes WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k \
                     WHERE k.merchant_id = idempotency_key_outcomes.merchant_id \
                     AND k.idem_key = idempotency_key_outcomes.idem_key)",
                )
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(r.rows_affected())
            }

            async fn add_outcome_counts(
                &self,
                routes: &[$crate::store::RouteOutcomeDelta],
                keys: &[$crate::store::KeyOutcomeDelta],
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                for r in routes {
                    sqlx::query(
                        "INSERT INTO idempotency_outcomes (route, outcome, minute, count) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (route, outcome, minute) DO UPDATE SET count = idempotency_outcomes.count + $4",
                    )
                    .bind(&r.route)
                    .bind(&r.outcome)
                    .bind(r.minute)
                    .bind(r.count)
                    .execute(&mut *tx)
                    .await?;
                }
                for k in keys {
                    sqlx::query(
                        "INSERT INTO idempotency_key_outcomes (merchant_id, idem_key, outcome, count, first_at, last_at) \
                         VALUES ($1, $2, $3, $4, $5, $6) \
                         ON CONFLICT (merchant_id, idem_key, outcome) DO UPDATE SET \
                         count = idempotency_key_outcomes.count + $4, \
                         first_at = CASE WHEN $5 < idempotency_key_outcomes.first_at THEN $5 ELSE idempotency_key_outcomes.first_at END, \
                         last_at = CASE WHEN $6 > idempotency_key_outcomes.last_at THEN $6 ELSE idempotency_key_outcomes.last_at END",
                    )
                    .bind(k.merchant_id)
                    .bind(&k.idem_key)
                    .bind(&k.outcome)
                    .bind(k.count)
                    .bind(k.first_at)
                    .bind(k.last_at)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            async fn outcome_counts(
                &self,
                since_minute: i64,
            ) -> Result<Vec<(String, String, i64)>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, (String, String, i64)>(
                    "SELECT route, outcome, CAST(SUM(count) AS BIGINT) FROM idempotency_outcomes \
                     WHERE minute >= $1 GROUP BY route, outcome ORDER BY route, outcome",
                )
                .bind(since_minute)
                .fetch_all(self.reader())
                .await?)
            }

            async fn create_payment(
                &self,
                n: &$crate::store::NewPayment,
            ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
                use $crate::store::CreatePayment;
                let mut tx = self.begin_write().await?;
                let created = insert_payment(&mut tx, n).await?;
                if let (CreatePayment::Created(_), Some(k)) = (&created, &n.recovery_key) {
                    sqlx::query(
                        "UPDATE idempotency_keys SET resource_id = $1 \
                         WHERE merchant_id = $2 AND idem_key = $3 AND state = 'running' AND lease_token = $4",
                    )
                    .bind(&n.id)
                    .bind(k.merchant_id)
                    .bind(&k.idem_key)
                    .bind(&k.lease_token)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(created)
            }

            async fn open_payment(
                &self,
                o: &$crate::store::OpenPayment,
            ) -> Result<$crate::store::OpenedPayment, $crate::store::StoreError> {
                use $crate::store::{ClaimResult, CreatePayment, OpenedPayment};
                use $crate::store::shared::{ClaimStep, Step};
                let n = &o.payment;
                if let Some(t) = &o.submit {
                    if let Err(refused) = $crate::domain::state::check(t.from, t.event, t.to) {
                        return Err($crate::store::StoreError::Corrupt(format!("store refused {refused}")));
                    }
                }
                let mut tx = self.begin_write().await?;
                // The recovery point goes in with the claim: the payment below is inserted in
                // the same transaction, and unset again when its merchant_order_id is taken.
                match claim_in_tx(&mut tx, &o.claim, Some(&n.id)).await? {
                    ClaimStep::Inserted => {}
                    ClaimStep::TakenOver(resource_id) => {
                        tx.commit().await?;
                        return Ok(OpenedPayment::Key(ClaimResult::Claimed { resource_id }));
                    }
                    ClaimStep::Existing(rec) => {
                        tx.commit().await?;
                        return Ok(OpenedPayment::Key(ClaimResult::Existing(rec)));
                    }
                }
                let mut created = match insert_payment(&mut tx, n).await? {
                    CreatePayment::Created(p) => p,
                    CreatePayment::Existing(p) => {
                        sqlx::query(
                            "UPDATE idempotency_keys SET resource_id = NULL WHERE merchant_id = $1 AND idem_key = $2",
                        )
                        .bind(o.claim.merchant_id)
                        .bind(&o.claim.idem_key)
                        .execute(&mut *tx)
                        .await?;
                        tx.commit().await?;
                        return Ok(OpenedPayment::Existing(p));
                    }
                };
                if let Some(t) = &o.submit {
                    match apply_step(&mut tx, &self.webhook_plan, t).await? {
                        Step::Applied(p) => created = p,
                        Step::Duplicate | Step::Stale => {
                            tx.rollback().await?;
                            return Err($crate::store::StoreError::Corrupt(format!(
                                "the submit transition of new payment {} did not follow its insert",
                                n.id
                            )));
                        }
                    }
                }
                tx.commit().await?;
                Ok(OpenedPayment::Created(created))
            }

            async fn payment(&self, id: &str) -> Result<Option<$crate::store::Payment>, $crate::store::StoreError> {
                let row = sqlx::query_as::<_, $crate::store::PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE id = $1",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(id)
                .fetch_optional(self.reader())
                .await?;
                row.map($crate::store::Payment::try_from).transpose()
            }

            async fn payment_by_channel_key(
                &self,
                channel_key: &str,
            ) -> Result<Option<$crate::store::Payment>, $crate::store::StoreError> {
                let row = sqlx::query_as::<_, $crate::store::PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE channel_key = $1",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(channel_key)
                .fetch_optional(self.reader())
                .await?;
                row.map($crate::store::Payment::try_from).transpose()
            }

            async fn apply_transition(
                &self,
                t: &$crate::store::Transition,
            ) -> Result<$crate::store::TransitionResult, $crate::store::StoreError> {
                Ok(self.apply_transitions(std::slice::from_ref(t), None).await?.result)
            }

            async fn apply_transitions(
                &self,
                steps: &[$crate::store::Transition],
                completion: Option<&$crate::store::KeyCompletion<'_>>,
            ) -> Result<$crate::store::TransitionsResult, $crate::store::StoreError> {
                use $crate::store::{TransitionResult, TransitionsResult};
                use $crate::store::shared::Step;
                let written = |result| TransitionsResult { result, stored: None };
                let Some(first) = steps.first() else {
                    return Err($crate::store::StoreError::Corrupt("no transition to apply".into()));
                };
                // Whoever the caller is (request, worker, ops action), only a whitelisted
                // (from, event) -> to is ever written (DESIGN.md "Payment state machine"); the
                // store is the last place a caller's slip can be stopped before it is history.
                for (i, t) in steps.iter().enumerate() {
                    if let Err(refused) = $crate::domain::state::check(t.from, t.event, t.to) {
                        return Ok(written(TransitionResult::Refused(refused)));
                    }
                    // A batch is one payment's chain: each step starts where the last ended.
                    if i > 0 {
                        let prev = &steps[i - 1];
                        if t.payment_id != prev.payment_id || t.from != prev.to || t.version != prev.version + 1 {
                            return Err($crate::store::StoreError::Corrupt(format!(
                                "transition {} of payment {} does not follow the one before it",
                                t.event, t.payment_id
                            )));
                        }
                    }
                }
                let mut tx = self.begin_write().await?;
                let mut after = None;
                for t in steps {
                    match apply_step(&mut tx, &self.webhook_plan, t).await? {
                        Step::Applied(p) => after = Some(p),
                        Step::Duplicate => {
                            tx.rollback().await?;
                            return Ok(written(TransitionResult::DuplicateEvent));
                        }
                        Step::Stale => {
                            tx.rollback().await?;
                            let current = self.payment(&first.payment_id).await?.ok_or_else(|| {
                                $crate::store::StoreError::Corrupt(format!("payment {} vanished", first.payment_id))
                            })?;
                            return Ok(written(TransitionResult::Stale(current)));
                        }
                    }
                }
                let Some(after) = after else {
                    return Err($crate::store::StoreError::Corrupt("no transition applied".into()));
                };
                let mut stored = None;
                if let Some(c) = completion {
                    let resp = (c.render)(&after);
                    if complete_key_in(&mut *tx, c.key, &resp).await? {
                        stored = Some(resp);
                    }
                }
                tx.commit().await?;
                Ok(TransitionsResult { result: TransitionResult::Applied(after), stored })
            }

            async fn record_ignored_event(&self, e: &$crate::store::IgnoredEvent) -> Result<bool, $crate::store::StoreError> {
                let r = sqlx::query(
                    "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                     source, detail, created_at) VALUES ($1, $2, $3, $4, NULL, FALSE, $5, $6, $7) \
                     ON CONFLICT (payment_id, event_id) DO NOTHING",
                )
                .bind(&e.payment_id)
                .bind(&e.event_id)
                .bind(e.event.as_str())
                .bind(e.from.as_str())
                .bind(&e.source)
                .bind(&e.detail)
                .bind(e.now)
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn payment_events(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::EventRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::EventRecord>(
                    "SELECT event_id, event, from_status, to_status, applied, source, detail, created_at \
                     FROM payment_events WHERE payment_id = $1 ORDER BY id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn payment_jobs(&self, payment_id: &str) -> Result<Vec<$crate::store::Job>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::Job>(
                    "SELECT id, kind, payment_id, refund_id, status, attempts, max_attempts, run_at, last_error \
                     FROM jobs WHERE payment_id = $1 ORDER BY id",
                )
                .bind(payment_id)
                .fetch_all(self.reader())
                .await?)
            }

            async fn create_refund(
                &self,
                n: &$crate::store::NewRefund,
            ) -> Result<$crate::store::CreateRefund, $crate::store::StoreError> {
                use $crate::store::{CreateRefund, Payment, PaymentRow, Refund};
                let mut tx = self.begin_write().await?;
                let reserved = sqlx::query(
                    "UPDATE payments SET refunded_amount = refunded_amount + $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3 AND status = 'SUCCESS' AND refunded_amount + $1 <= amount AND reversal_id IS NULL",
                )
                .bind(n.amount)
                .bind(n.now)
                .bind(&n.payment_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                if reserved == 0 {
                    let row = sqlx::query_as::<_, PaymentRow>(&format!(
                        "SELECT {} FROM payments WHERE id = $1",
                        $crate::store::shared::PAYMENT_COLUMNS
                    ))
                    .bind(&n.payment_id)
                    .fetch_optional(&mut *tx)
                    .await?;
                    tx.rollback().await?;
                    return Ok(match row.map(Payment::try_from).transpose()? {
                        None => CreateRefund::NoPayment,
                        Some(p) if p.status != $crate::domain::state::PaymentStatus::Success => {
                            CreateRefund::NotRefundable(p.status)
                        }
                        Some(p) if p.reversal_id.is_some() => CreateRefund::Reversing,
                        Some(p) => CreateRefund::ExceedsRemaining { remaining: p.amount - p.refunded_amount },
                    });
                }
                let refund = sqlx::query_as::<_, Refund>(
                    "INSERT INTO refunds (id, payment_id, amount, reason, status, created_at, updated_at) \
                     VALUES ($1, $2, $3, $4, 'pending', $5, $5) \
                     RETURNING id, payment_id, amount, reason, status, last_error, created_at, updated_at",
                )
                .bind(&n.id)
                .bind(&n.payment_id)
                .bind(n.amount)
                .bind(&n.reason)
                .bind(n.now)
                .fetch_one(&mut *tx)
                .await?;
                insert_job(
                    &mut tx,
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
                tx.commit().await?;
                Ok(CreateRefund::Created(refund))
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
                    "SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = 'pending'",
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
                    "UPDATE refunds SET status = 'succeeded', updated_at = $1 WHERE id = $2 AND status = 'pending' \
                     RETURNING payment_id",
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
                sqlx::query(
                    "UPDATE jobs SET status = 'done', updated_at = $1 WHERE refund_id = $2 AND status = 'due'",
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                refund_event(&mut tx, &self.webhook_plan, id, $crate::domain::webhooks::EventType::RefundSucceeded, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn refund_failed(&self, id: &str, error: &str, now: i64) -> Result<bool, $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                let row: Option<(String, i64)> = sqlx::query_as(
                    "UPDATE refunds SET status = 'failed', last_error = $1, updated_at = $2 \
                     WHERE id = $3 AND status = 'pending' RETURNING payment_id, amount",
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
                    "UPDATE jobs SET status = 'done', updated_at = $1 WHERE refund_id = $2 AND status = 'due'",
                )
                .bind(now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
                refund_event(&mut tx, &self.webhook_plan, id, $crate::domain::webhooks::EventType::RefundFailed, now).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn reserve_reversal(
                &self,
                r: &$crate::store::ReserveReversal,
            ) -> Result<$crate::store::ReversalReservation, $crate::store::StoreError> {
                use $crate::store::{Payment, PaymentRow, ReversalReservation};
                let mut tx = self.begin_write().await?;
                let reserved = sqlx::query(
                    "UPDATE payments SET reversal_id = $1, version = version + 1, updated_at = $2 \
                     WHERE id = $3 AND version = $4 AND status IN ('SUCCESS', 'SUSPENSE') AND reversal_id IS NULL \
                     AND NOT EXISTS (SELECT 1 FROM refunds r WHERE r.payment_id = $3 AND r.status = 'pending')",
                )
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
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(&r.payment_id)
                .fetch_optional(&mut *tx)
                .await?;
                let pending_refunds: i64 = sqlx::query_scalar(
                    "SELECT COUNT(*) FROM refunds WHERE payment_id = $1 AND status = 'pending'",
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
                let released = sqlx::query(
                    "UPDATE payments SET reversal_id = NULL, version = version + 1, updated_at = $1 \
                     WHERE id = $2 AND reversal_id = $3 AND status IN ('SUCCESS', 'SUSPENSE')",
                )
                .bind(now)
                .bind(payment_id)
                .bind(action_id)
                .execute(&mut *tx)
                .await?
                .rows_affected();
                sqlx::query(
                    "UPDATE jobs SET status = 'done', updated_at = $1 \
                     WHERE payment_id = $2 AND kind = 'reverse' AND status = 'due'",
                )
                .bind(now)
                .bind(payment_id)
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(released == 1)
            }

            async fn ledger_totals(&self) -> Result<Vec<$crate::store::LedgerTotal>, $crate::store::StoreError> {
                // One statement (one snapshot). SQL sums would overflow 64 bits on a long
                // enough history (SQLite raises "integer overflow", PostgreSQL's cast to
                // BIGINT fails), so each group of LEDGER_SUM_GROUP entries is summed in two
                // halves that cannot overflow and the halves are added here in 128 bits.
                let rows: Vec<(String, String, i64, i64)> = sqlx::query_as(
                    "SELECT currency, direction, \
                     CAST(SUM(amount / 4294967296) AS BIGINT), CAST(SUM(amount % 4294967296) AS BIGINT) \
                     FROM ledger_entries GROUP BY currency, direction, id / $1",
                )
                .bind($crate::store::LEDGER_SUM_GROUP)
                .fetch_all(self.reader())
                .await?;
                let mut sums: std::collections::BTreeMap<String, (i128, i128)> = Default::default();
                for (currency, direction, high, low) in rows {
                    let part = i128::from(high) * 4_294_967_296 + i128::from(low);
                    let e = sums.entry(currency).or_default();
                    if direction == "debit" {
                        e.0 += part;
                    } else {
                        e.1 += part;
                    }
                }
                Ok(sums
                    .into_iter()
                    .map(|(currency, (debits, credits))| $crate::store::LedgerTotal { currency, debits, credits })
                    .collect())
            }

            async fn ledger_batch_count(&self, payment_id: &str, kind: &str) -> Result<i64, $crate::store::StoreError> {
                Ok(sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM ledger_batches WHERE payment_id = $1 AND kind = $2",
                )
                .bind(payment_id)
                .bind(kind)
                .fetch_one(self.reader())
                .await?)
            }

            async fn claim_callback(
                &self,
                event_id: &str,
                channel_key: &str,
                kind: &str,
                now: i64,
                stale_before: i64,
            ) -> Result<$crate::store::CallbackClaim, $crate::store::StoreError> {
                // 'received' is an unsettled claim; taking over one that is old enough means
                // its handler died between the claim and the settlement.
                let r = sqlx::query(
                    "INSERT INTO channel_callbacks (event_id, channel_key, kind, outcome, received_at) \
                     VALUES ($1, $2, $3, 'received', $4) ON CONFLICT (event_id) DO UPDATE \
                     SET received_at = excluded.received_at \
                     WHERE channel_callbacks.outcome = 'received' AND channel_callbacks.received_at <= $5",
                )
                .bind(event_id)
                .bind(channel_key)
                .bind(kind)
                .bind(now)
                .bind(stale_before)
                .execute(self.writer())
                .await?;
                if r.rows_affected() == 1 {
                    return Ok($crate::store::CallbackClaim::Claimed);
                }
                let outcome = sqlx::query_scalar::<_, String>(
                    "SELECT outcome FROM channel_callbacks WHERE event_id = $1",
                )
                .bind(event_id)
                .fetch_optional(self.writer())
                .await?;
                Ok(match outcome.as_deref() {
                    Some("received") => $crate::store::CallbackClaim::InProgress,
                    Some(_) => $crate::store::CallbackClaim::Settled,
                    // Dropped by a failed handler between the two statements: not settled.
                    None => $crate::store::CallbackClaim::InProgress,
                })
            }

            async fn settle_callback(
                &self,
                event_id: &str,
                outcome: Option<&str>,
            ) -> Result<(), $crate::store::StoreError> {
                let q = match outcome {
                    Some(o) => sqlx::query(
                        "UPDATE channel_callbacks SET outcome = $2 WHERE event_id = $1 AND outcome = 'received'",
                    )
                    .bind(event_id)
                    .bind(o),
                    None => sqlx::query(
                        "DELETE FROM channel_callbacks WHERE event_id = $1 AND outcome = 'received'",
                    )
                    .bind(event_id),
                };
                q.execute(self.writer()).await?;
                Ok(())
            }
        }

        /// A PENDING payment with its `created` event and submit job, in the caller's
        /// transaction; or, when the merchant_order_id is taken, the payment that has it.
        async fn insert_payment(
            tx: &mut sqlx::Transaction<'static, Db>,
            n: &$crate::store::NewPayment,
        ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
            use $crate::store::{CreatePayment, Payment, PaymentRow};
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'PENDING', 1, $8, $9, $9) \
                 ON CONFLICT (merchant_id, merchant_order_id) DO NOTHING RETURNING {}",
                $crate::store::shared::PAYMENT_COLUMNS
            ))
            .bind(&n.id)
            .bind(n.merchant_id)
            .bind(&n.merchant_order_id)
            .bind(n.amount)
            .bind(&n.currency)
            .bind(&n.description)
            .bind(&n.params_hash)
            .bind(&n.channel_key)
            .bind(n.now)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else {
                let row = sqlx::query_as::<_, PaymentRow>(&format!(
                    "SELECT {} FROM payments WHERE merchant_id = $1 AND merchant_order_id = $2",
                    $crate::store::shared::PAYMENT_COLUMNS
                ))
                .bind(n.merchant_id)
                .bind(&n.merchant_order_id)
                .fetch_one(&mut **tx)
                .await?;
                return Ok(CreatePayment::Existing(Payment::try_from(row)?));
            };
            sqlx::query(
                "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                 source, detail, created_at) VALUES ($1, 'created', 'created', 'PENDING', 'PENDING', TRUE, 'api', '', $2)",
            )
            .bind(&n.id)
            .bind(n.now)
            .execute(&mut **tx)
            .await?;
            insert_job(
                tx,
                &$crate::store::NewJob {
                    kind: $crate::store::JobKind::Submit,
                    payment_id: Some(n.id.clone()),
                    refund_id: None,
                    run_at: n.submit_due_at,
                    max_attempts: n.max_attempts,
                },
                n.now,
            )
            .await?;
            Ok(CreatePayment::Created(Payment::try_from(row)?))
        }

        /// The claim of [`Store::claim_key`] inside the caller's transaction; a new claim is
        /// inserted with `resource_id` as its recovery point.
        async fn claim_in_tx(
            tx: &mut sqlx::Transaction<'static, Db>,
            c: &$crate::store::KeyClaim,
            resource_id: Option<&str>,
        ) -> Result<$crate::store::shared::ClaimStep, $crate::store::StoreError> {
            use $crate::store::KeyRecord;
            use $crate::store::shared::ClaimStep;
            // On PostgreSQL (READ COMMITTED) the holder may release the key (its request was
            // refused) between our insert finding it and our read: the read then finds
            // nothing and the key is free again, so try the insert once more. Each retry
            // means another request claimed and released the key, so this ends quickly.
            let mut attempts = 0;
            let rec = loop {
                attempts += 1;
                let inserted = sqlx::query(
                    "INSERT INTO idempotency_keys (merchant_id, scope, idem_key, route, fingerprint, state, \
                     lease_token, lease_expires_at, created_at, expires_at, resource_id) \
                     VALUES ($1, $2, $3, $4, $5, 'running', $6, $7, $8, $9, $10) \
                     ON CONFLICT (merchant_id, idem_key) DO NOTHING",
                )
                .bind(c.merchant_id)
                .bind(&c.scope)
                .bind(&c.idem_key)
                .bind(&c.route)
                .bind(&c.fingerprint)
                .bind(&c.lease_token)
                .bind(c.lease_expires_at)
                .bind(c.now)
                .bind(c.expires_at)
                .bind(resource_id)
                .execute(&mut **tx)
                .await?
                .rows_affected();
                if inserted == 1 {
                    return Ok(ClaimStep::Inserted);
                }
                let rec = sqlx::query_as::<_, KeyRecord>(
                    "SELECT merchant_id, scope, idem_key, route, fingerprint, state, lease_token, lease_expires_at, \
                     resource_id, response_status, response_headers, response_body, created_at, expires_at \
                     FROM idempotency_keys WHERE merchant_id = $1 AND idem_key = $2",
                )
                .bind(c.merchant_id)
                .bind(&c.idem_key)
                .fetch_optional(&mut **tx)
                .await?;
                match rec {
                    Some(rec) => break rec,
                    None if attempts < 10 => continue,
                    None => {
                        return Err($crate::store::StoreError::Conflict(format!(
                            "idempotency key {:?} kept being claimed and released",
                            c.idem_key
                        )));
                    }
                }
            };
            let lapsed = rec.state == "running" && rec.lease_expires_at.unwrap_or(i64::MIN) <= c.now;
            if lapsed && rec.fingerprint == c.fingerprint && rec.scope == c.scope {
                let taken = sqlx::query(
                    "UPDATE idempotency_keys SET lease_token = $1, lease_expires_at = $2 \
                     WHERE merchant_id = $3 AND idem_key = $4 AND state = 'running' AND lease_token = $5",
                )
                .bind(&c.lease_token)
                .bind(c.lease_expires_at)
                .bind(c.merchant_id)
                .bind(&c.idem_key)
                .bind(rec.lease_token.as_deref().unwrap_or(""))
                .execute(&mut **tx)
                .await?
                .rows_affected();
                if taken == 1 {
                    return Ok(ClaimStep::TakenOver(rec.resource_id));
                }
            }
            Ok(ClaimStep::Existing(rec))
        }

        /// One transition inside the caller's transaction (the body of
        /// [`Store::apply_transition`], after the whitelist check): the event, the conditional
        /// update on (id, status, version), the posting, the jobs and the outbox row.
        async fn apply_step(
            tx: &mut sqlx::Transaction<'static, Db>,
            plan: &$crate::store::WebhookPlan,
            t: &$crate::store::Transition,
        ) -> Result<$crate::store::shared::Step, $crate::store::StoreError> {
            use $crate::store::{Payment, PaymentRow};
            use $crate::store::shared::Step;
            let recorded = sqlx::query(
                "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                 source, detail, created_at) VALUES ($1, $2, $3, $4, $5, TRUE, $6, $7, $8) \
                 ON CONFLICT (payment_id, event_id) DO NOTHING",
            )
            .bind(&t.payment_id)
            .bind(&t.event_id)
            .bind(t.event.as_str())
            .bind(t.from.as_str())
            .bind(t.to.as_str())
            .bind(&t.source)
            .bind(&t.detail)
            .bind(t.now)
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if recorded == 0 {
                return Ok(Step::Duplicate);
            }
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "UPDATE payments SET status = $1, version = version + 1, updated_at = $2, \
                 submit_attempts = submit_attempts + $3, \
                 last_error = CASE WHEN $1 = 'SUCCESS' THEN NULL ELSE COALESCE($4, last_error) END \
                 WHERE id = $5 AND status = $6 AND version = $7 RETURNING {}",
                $crate::store::shared::PAYMENT_COLUMNS
            ))
            .bind(t.to.as_str())
            .bind(t.now)
            .bind(i64::from(t.count_submit))
            .bind(t.last_error.as_deref())
            .bind(&t.payment_id)
            .bind(t.from.as_str())
            .bind(t.version)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else {
                return Ok(Step::Stale);
            };
            let after = Payment::try_from(row)?;
            if let Some(posting) = &t.posting {
                insert_posting(tx, &t.payment_id, posting, t.now).await?;
            }
            for job in &t.enqueue {
                insert_job(tx, job, t.now).await?;
            }
            if !t.close_jobs.is_empty() {
                // One statement for every kind the step closes.
                let kinds: Vec<String> = (0..t.close_jobs.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    "UPDATE jobs SET status = 'done', updated_at = $1 \
                     WHERE payment_id = $2 AND status = 'due' AND kind IN ({})",
                    kinds.join(", ")
                );
                let mut q = sqlx::query(&sql).bind(t.now).bind(&t.payment_id);
                for kind in &t.close_jobs {
                    q = q.bind(kind.as_str());
                }
                q.execute(&mut **tx).await?;
            }
            // The outcome's outbox row commits with the transition or not at all.
            if let Some(event_type) = $crate::domain::webhooks::EventType::for_payment_status(t.to) {
                insert_outbox_event(
                    tx,
                    plan,
                    after.merchant_id,
                    event_type,
                    &after.id,
                    &$crate::store::views::payment_payload(&after),
                    t.now,
                )
                .await?;
            }
            Ok(Step::Applied(after))
        }

        /// Stores the answer and marks the key done, inside the caller's transaction; false
        /// when the claim's lease was lost.
        async fn complete_key_in<'e, E: sqlx::Executor<'e, Database = Db>>(
            e: E,
            k: &$crate::store::KeyRef,
            resp: &$crate::store::StoredResponse,
        ) -> Result<bool, $crate::store::StoreError> {
            let headers = serde_json::to_string(&resp.headers).unwrap_or_else(|_| "[]".into());
            let r = sqlx::query(
                "UPDATE idempotency_keys SET state = 'done', response_status = $1, response_headers = $2, \
                 response_body = $3, lease_token = NULL, lease_expires_at = NULL \
                 WHERE merchant_id = $4 AND idem_key = $5 AND state = 'running' AND lease_token = $6",
            )
            .bind(i64::from(resp.status))
            .bind(headers)
            .bind(&resp.body)
            .bind(k.merchant_id)
            .bind(&k.idem_key)
            .bind(&k.lease_token)
            .execute(e)
            .await?;
            Ok(r.rows_affected() == 1)
        }

        /// The outbox row of a refund's outcome, in the caller's transaction.
        async fn refund_event(
            tx: &mut sqlx::Transaction<'static, Db>,
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
                &$crate::store::views::refund_payload(&refund),
                now,
            )
            .await
        }

        async fn insert_job(
            tx: &mut sqlx::Transaction<'static, Db>,
            job: &$crate::store::NewJob,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            sqlx::query(
                "INSERT INTO jobs (kind, payment_id, refund_id, status, attempts, max_attempts, run_at, \
                 created_at, updated_at) VALUES ($1, $2, $3, 'due', 0, $4, $5, $6, $6)",
            )
            .bind(job.kind.as_str())
            .bind(job.payment_id.as_deref())
            .bind(job.refund_id.as_deref())
            .bind(job.max_attempts)
            .bind(job.run_at)
            .bind(now)
            .execute(&mut **tx)
            .await?;
            Ok(())
        }

        async fn insert_posting(
            tx: &mut sqlx::Transaction<'static, Db>,
            payment_id: &str,
            posting: &$crate::store::LedgerPosting,
            now: i64,
        ) -> Result<(), $crate::store::StoreError> {
            let batch_id: i64 = sqlx::query_scalar(
                "INSERT INTO ledger_batches (payment_id, refund_id, kind, currency, created_at) \
                 VALUES ($1, $2, $3, $4, $5) RETURNING id",
            )
            .bind(payment_id)
            .bind(posting.refund_id.as_deref())
            .bind(posting.kind)
            .bind(&posting.currency)
            .bind(now)
            .fetch_one(&mut **tx)
            .await?;
            // Every line of the batch in one statement.
            let rows: Vec<String> = (0..posting.lines.len())
                .map(|i| format!("($1, ${}, ${}, ${}, $2)", 3 * i + 3, 3 * i + 4, 3 * i + 5))
                .collect();
            let sql = format!(
                "INSERT INTO ledger_entries (batch_id, account, direction, amount, currency) VALUES {}",
                rows.join(", ")
            );
            let mut q = sqlx::query(&sql).bind(batch_id).bind(&posting.currency);
            for line in &posting.lines {
                q = q
                    .bind(&line.account)
                    .bind(if line.debit { "debit" } else { "credit" })
                    .bind(line.amount);
            }
            q.execute(&mut **tx).await?;
            Ok(())
        }
    };
}

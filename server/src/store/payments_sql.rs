//! The payments' SQL both backends share ([`Payments`](super::Payments); conventions in
//! `backend.rs`): creation with its submit job, and the transitions of the state machine with
//! the effects their row gives. The Idempotency-Key steps a create takes are `keys_sql.rs`'s.

/// Columns of `payments` in [`PaymentRow`](super::records::PaymentRow) order.
pub(crate) const PAYMENT_COLUMNS: &str = "id, merchant_id, merchant_order_id, amount, currency, description, \
     params_hash, status, version, channel_key, submit_attempts, refunded_amount, last_error, created_at, updated_at, reversal_id";

/// How one transition inside a transaction went (`apply_step`).
// Matched once where it is returned: boxing the large variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Step {
    /// Applied: the payment after it.
    Applied(super::Payment),
    /// The (payment, event id) was recorded before.
    Duplicate,
    /// The payment is no longer at (from, version).
    Stale,
}

/// The state-machine row a transition applies ([`check`](crate::domain::state::check)):
/// refused when the triple is not whitelisted. Before any write, the caller's ledger lines and
/// follow-up job are checked against the row's effects (paired with the service, which builds
/// them from the same row): a mismatch is a caller's bug, reported as corrupt, never written.
pub(crate) fn rule_for(
    t: &super::Transition,
) -> Result<
    Result<&'static crate::domain::state::Rule, crate::domain::state::TransitionError>,
    super::StoreError,
> {
    let rule = match crate::domain::state::check(t.from, t.event, t.to) {
        Ok(rule) => rule,
        Err(refused) => return Ok(Err(refused)),
    };
    let follow_up: Vec<_> = t.enqueue.iter().map(|j| j.kind).collect();
    let expected: Vec<_> = rule.effects.follow_up.iter().map(|f| f.kind).collect();
    if t.posting.is_some() != rule.effects.ledger.is_some() || follow_up != expected {
        return Err(super::StoreError::Corrupt(format!(
            "{} --{}--> {} of payment {} does not carry its row's effects (ledger {:?}, follow-up {:?}; given {}, {:?})",
            t.from,
            t.event,
            t.to,
            t.payment_id,
            rule.effects.ledger,
            expected,
            if t.posting.is_some() {
                "lines"
            } else {
                "no lines"
            },
            follow_up
        )));
    }
    Ok(Ok(rule))
}

macro_rules! impl_payments {
    ($store:ty) => {
        const _: () = $crate::store::backend::is_backend::<$store>();

        #[async_trait::async_trait]
        impl $crate::store::Payments for $store {
            async fn create_payment(
                &self,
                n: &$crate::store::NewPayment,
            ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
                use $crate::store::CreatePayment;
                let mut tx = self.begin_write().await?;
                let created = insert_payment(&mut tx, n).await?;
                if let (CreatePayment::Created(_), Some(k)) = (&created, &n.recovery_key) {
                    // A lost lease leaves the key as it is (`NewPayment::recovery_key`).
                    set_key_resource_in(&mut *tx, k, &n.id).await?;
                }
                tx.commit().await?;
                Ok(created)
            }

            async fn open_payment(
                &self,
                o: &$crate::store::OpenPayment,
            ) -> Result<$crate::store::OpenedPayment, $crate::store::StoreError> {
                use $crate::idempotency::store::ClaimResult;
                use $crate::store::{CreatePayment, OpenedPayment};
                use $crate::store::keys_sql::ClaimStep;
                use $crate::store::payments_sql::Step;
                let n = &o.payment;
                let submit = match &o.submit {
                    Some(t) => match $crate::store::payments_sql::rule_for(t)? {
                        Ok(rule) => Some((t, rule)),
                        Err(refused) => {
                            return Err($crate::store::StoreError::Corrupt(format!("store refused {refused}")));
                        }
                    },
                    None => None,
                };
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
                        clear_key_resource_in(&mut tx, o.claim.merchant_id, &o.claim.idem_key).await?;
                        tx.commit().await?;
                        return Ok(OpenedPayment::Existing(p));
                    }
                };
                if let Some((t, rule)) = submit {
                    match apply_step(&mut tx, self.outbox_plan(), t, rule).await? {
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
                    $crate::store::payments_sql::PAYMENT_COLUMNS
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
                    $crate::store::payments_sql::PAYMENT_COLUMNS
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
                completion: Option<&$crate::idempotency::store::KeyCompletion<'_>>,
            ) -> Result<$crate::store::TransitionsResult, $crate::store::StoreError> {
                use $crate::store::{TransitionResult, TransitionsResult};
                use $crate::store::payments_sql::Step;
                let written = |result| TransitionsResult { result, stored: None };
                let Some(first) = steps.first() else {
                    return Err($crate::store::StoreError::Corrupt("no transition to apply".into()));
                };
                // Whoever the caller is (request, worker, ops action), only a whitelisted
                // (from, event) -> to is ever written (DESIGN.md "Payment state machine"); the
                // store is the last place a caller's slip can be stopped before it is history.
                let mut rules = Vec::with_capacity(steps.len());
                for (i, t) in steps.iter().enumerate() {
                    match $crate::store::payments_sql::rule_for(t)? {
                        Ok(rule) => rules.push(rule),
                        Err(refused) => return Ok(written(TransitionResult::Refused(refused))),
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
                for (t, rule) in steps.iter().zip(rules) {
                    match apply_step(&mut tx, self.outbox_plan(), t, rule).await? {
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
                     source, detail, created_at, trace_id) VALUES ($1, $2, $3, $4, NULL, FALSE, $5, $6, $7, $8) \
                     ON CONFLICT (payment_id, event_id) DO NOTHING",
                )
                .bind(&e.payment_id)
                .bind(&e.event_id)
                .bind(e.event.as_str())
                .bind(e.from.as_str())
                .bind(&e.source)
                .bind(&e.detail)
                .bind(e.now)
                .bind($crate::telemetry::current_trace())
                .execute(self.writer())
                .await?;
                Ok(r.rows_affected() == 1)
            }

            async fn payment_events(
                &self,
                payment_id: &str,
            ) -> Result<Vec<$crate::store::EventRecord>, $crate::store::StoreError> {
                Ok(sqlx::query_as::<_, $crate::store::EventRecord>(
                    "SELECT event_id, event, from_status, to_status, applied, source, detail, created_at, trace_id \
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
        }

        /// A PENDING payment with its `created` event and submit job, in the caller's
        /// transaction; or, when the merchant_order_id is taken, the payment that has it.
        async fn insert_payment(
            tx: &mut $crate::store::backend::Tx<$store>,
            n: &$crate::store::NewPayment,
        ) -> Result<$crate::store::CreatePayment, $crate::store::StoreError> {
            use $crate::store::{CreatePayment, Payment, PaymentRow};
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "INSERT INTO payments (id, merchant_id, merchant_order_id, amount, currency, description, \
                 params_hash, status, version, channel_key, created_at, updated_at) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, 'PENDING', 1, $8, $9, $9) \
                 ON CONFLICT (merchant_id, merchant_order_id) DO NOTHING RETURNING {}",
                $crate::store::payments_sql::PAYMENT_COLUMNS
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
                    $crate::store::payments_sql::PAYMENT_COLUMNS
                ))
                .bind(n.merchant_id)
                .bind(&n.merchant_order_id)
                .fetch_one(&mut **tx)
                .await?;
                return Ok(CreatePayment::Existing(Payment::try_from(row)?));
            };
            sqlx::query(
                "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                 source, detail, created_at, trace_id) VALUES ($1, 'created', 'created', 'PENDING', 'PENDING', TRUE, 'api', '', $2, $3)",
            )
            .bind(&n.id)
            .bind(n.now)
            .bind($crate::telemetry::current_trace())
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

        /// One transition inside the caller's transaction (the body of
        /// [`Payments::apply_transition`](crate::store::Payments::apply_transition), after
        /// `rule_for`): the event, the conditional update on (id, status, version), then the
        /// row's effects in the order
        /// [`Effects`]($crate::domain::state::Effects) gives, and the outbox row.
        async fn apply_step(
            tx: &mut $crate::store::backend::Tx<$store>,
            plan: &$crate::store::WebhookPlan,
            t: &$crate::store::Transition,
            rule: &'static $crate::domain::state::Rule,
        ) -> Result<$crate::store::payments_sql::Step, $crate::store::StoreError> {
            use $crate::store::{Payment, PaymentRow};
            use $crate::store::payments_sql::Step;
            let recorded = sqlx::query(
                "INSERT INTO payment_events (payment_id, event_id, event, from_status, to_status, applied, \
                 source, detail, created_at, trace_id) VALUES ($1, $2, $3, $4, $5, TRUE, $6, $7, $8, $9) \
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
            .bind($crate::telemetry::current_trace())
            .execute(&mut **tx)
            .await?
            .rows_affected();
            if recorded == 0 {
                return Ok(Step::Duplicate);
            }
            let row = sqlx::query_as::<_, PaymentRow>(&format!(
                "UPDATE payments SET status = $1, version = version + 1, updated_at = $2, \
                 submit_attempts = submit_attempts + $3, \
                 last_error = CASE WHEN $8 THEN NULL ELSE COALESCE($4, last_error) END \
                 WHERE id = $5 AND status = $6 AND version = $7 RETURNING {}",
                $crate::store::payments_sql::PAYMENT_COLUMNS
            ))
            .bind(t.to.as_str())
            .bind(t.now)
            .bind(i64::from(rule.effects.counts_submit))
            .bind(t.last_error.as_deref())
            .bind(&t.payment_id)
            .bind(t.from.as_str())
            .bind(t.version)
            .bind(rule.effects.clears_error)
            .fetch_optional(&mut **tx)
            .await?;
            let Some(row) = row else {
                return Ok(Step::Stale);
            };
            let after = Payment::try_from(row)?;
            if let Some(posting) = &t.posting {
                insert_posting(tx, &t.payment_id, posting, t.now).await?;
            }
            let closes = rule.effects.closes;
            if !closes.is_empty() {
                // One statement for every kind the step closes, before its follow-up job is
                // written: a row may close the kind it queues anew (a forced UNKNOWN).
                let kinds: Vec<String> = (0..closes.len()).map(|i| format!("${}", i + 3)).collect();
                let sql = format!(
                    "UPDATE jobs SET status = 'done', updated_at = $1 \
                     WHERE payment_id = $2 AND status = 'due' AND kind IN ({})",
                    kinds.join(", ")
                );
                let mut q = sqlx::query(&sql).bind(t.now).bind(&t.payment_id);
                for kind in closes {
                    q = q.bind(kind.as_str());
                }
                q.execute(&mut **tx).await?;
            }
            for job in &t.enqueue {
                insert_job(tx, job, t.now).await?;
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
    };
}

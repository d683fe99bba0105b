//! An ops reversal and a merchant refund racing on one payment (issue 13, "Money"): the
//! reversal reserves the payment before its channel refund, so the two can never both be
//! issued, and the refund the channel made is always recorded. The interleaving is forced with
//! a channel that holds the reversal's refund until the test lets it go.

use std::sync::Arc;
use std::time::Duration;

use converge_server::channel::{
    CancelOutcome, Channel, ChargeOutcome, QueryOutcome, RefundOutcome, StatementError,
};
use converge_server::ops::password::PasswordHasherPool;
use converge_server::service::actor::Actor;
use converge_server::service::connectors::DEFAULT_CONNECTOR;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::TestApp;

/// The real channel, except that refunds whose key starts with `hold` wait at the channel's
/// door: `entered` fires when one arrives, and it goes on only after `release`.
struct HeldRefunds {
    inner: Arc<dyn Channel>,
    hold: &'static str,
    entered: Notify,
    release: Notify,
}

#[async_trait::async_trait]
impl Channel for HeldRefunds {
    async fn charge(&self, key: &str, amount: i64, currency: &str) -> ChargeOutcome {
        self.inner.charge(key, amount, currency).await
    }
    async fn query(&self, key: &str) -> QueryOutcome {
        self.inner.query(key).await
    }
    async fn cancel(&self, key: &str) -> CancelOutcome {
        self.inner.cancel(key).await
    }
    async fn refund(&self, key: &str, refund_key: &str, amount: i64) -> RefundOutcome {
        if refund_key.starts_with(self.hold) {
            self.entered.notify_one();
            self.release.notified().await;
        }
        self.inner.refund(key, refund_key, amount).await
    }
    async fn statement(&self, day: &str) -> Result<String, StatementError> {
        self.inner.statement(day).await
    }
}

/// Total refunded at the channel against the payment's charge, minor units.
async fn refunded_at_channel(app: &TestApp, channel_key: &str) -> i64 {
    let list = app.sandbox_get("/charges?limit=5000").await.json();
    list["charges"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["key"] == channel_key)
        .map(|c| c["refunded"].as_i64().unwrap())
        .sum()
}

async fn paid(app: &TestApp, order: &str, amount: i64) -> String {
    let a = app
        .post(
            "/v1/payments",
            Some(&format!("k-{order}")),
            &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order}),
        )
        .await;
    assert_eq!(a.json()["status"], "SUCCESS");
    a.json()["id"].as_str().unwrap().to_string()
}

fn approver() -> Actor {
    Actor {
        username: "ap".into(),
        roles: "approver".into(),
        meta: "{}".into(),
    }
}

on_both_backends!(
    a_refund_racing_a_reversal_at_the_channel_is_refused_and_the_reversal_is_recorded,
    |app| {
        let h = PasswordHasherPool::new(1);
        for (name, roles) in [("op", "operator"), ("ap", "approver")] {
            app.core()
                .add_user(
                    &h,
                    name,
                    roles,
                    "correct-horse-battery",
                    0,
                    &crate::support::setup_actor(),
                )
                .await
                .unwrap();
        }
        let payment = paid(&app, "race-1", 5_000).await;
        let op = crate::support::ops_session(&app, "op").await;
        let r = op
            .post(format!("{}/ops/v1/actions", app.base))
            .json(&json!({"kind": "reverse", "payment_id": payment, "reason": "disputed"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 201);
        let action: Value = r.json().await.unwrap();
        let action_id = action["action"]["id"].as_str().unwrap().to_string();

        // The approver's execution reaches the channel and is held there.
        let held = Arc::new(HeldRefunds {
            inner: app.running.state.core.connectors.named(DEFAULT_CONNECTOR),
            hold: "act_",
            entered: Notify::new(),
            release: Notify::new(),
        });
        let mut core = app.running.state.core.clone();
        core.connectors = Arc::new(
            core.connectors
                .as_ref()
                .clone()
                .with_connector(DEFAULT_CONNECTOR, held.clone()),
        );
        let approving = tokio::spawn({
            let id = action_id.clone();
            async move {
                core.approve_action(&approver(), &id, "checked the dispute")
                    .await
            }
        });
        tokio::time::timeout(Duration::from_secs(10), held.entered.notified())
            .await
            .expect("the reversal reaches the channel");

        // Meanwhile the merchant refunds part of the payment: refused, nothing reaches the
        // channel, nothing is reserved.
        let refund = app
            .post(
                &format!("/v1/payments/{payment}/refunds"),
                Some("race-refund"),
                &json!({"amount": 1_000, "reason": "customer asked"}),
            )
            .await;
        refund.assert_error(409, "payment_reversing");

        held.release.notify_one();
        let done = approving.await.unwrap().expect("approved and executed");
        assert_eq!(done.status.as_str(), "executed", "{done:?}");

        let p = app.store.payment(&payment).await.unwrap().unwrap();
        assert_eq!(p.status.as_str(), "REVERSED");
        assert_eq!(p.refunded_amount, 0);
        assert_eq!(refunded_at_channel(&app, &p.channel_key).await, 5_000);
        assert_eq!(
            app.store
                .ledger_batch_count(&payment, "reversal")
                .await
                .unwrap(),
            1
        );
        for t in app.store.ledger_totals().await.unwrap() {
            assert_eq!(t.debits, t.credits, "{t:?}");
        }
        // The recovery job closed with the reversal.
        let jobs = app.store.payment_jobs(&payment).await.unwrap();
        assert!(
            jobs.iter()
                .filter(|j| j.kind == "reverse")
                .all(|j| j.status.as_str() == "done"),
            "{jobs:?}"
        );
    }
);

on_both_backends!(
    a_reversal_approved_while_a_merchant_refund_is_pending_is_refused_before_the_channel,
    |app| {
        let h = PasswordHasherPool::new(1);
        for (name, roles) in [("op", "operator"), ("ap", "approver")] {
            app.core()
                .add_user(
                    &h,
                    name,
                    roles,
                    "correct-horse-battery",
                    0,
                    &crate::support::setup_actor(),
                )
                .await
                .unwrap();
        }
        let payment = paid(&app, "race-2", 5_000).await;
        let p = app.store.payment(&payment).await.unwrap().unwrap();
        // The merchant's refund is reserved and held at the channel's door.
        let held = Arc::new(HeldRefunds {
            inner: app.running.state.core.connectors.named(DEFAULT_CONNECTOR),
            hold: "re_",
            entered: Notify::new(),
            release: Notify::new(),
        });
        let mut core = app.running.state.core.clone();
        core.connectors = Arc::new(
            core.connectors
                .as_ref()
                .clone()
                .with_connector(DEFAULT_CONNECTOR, held.clone()),
        );
        let created = core.insert_refund(&payment, 1_000, "asked").await.unwrap();
        let converge_server::store::CreateRefund::Created(refund) = created else {
            panic!("{created:?}")
        };
        let refunding = tokio::spawn({
            let core = core.clone();
            async move { core.drive_refund(refund, "api").await }
        });
        tokio::time::timeout(Duration::from_secs(10), held.entered.notified())
            .await
            .expect("the refund reaches the channel");
        // An action pinned at the reserved version still may not reverse while the refund
        // is in flight: the reservation is refused and the channel never sees the reversal.
        let action = converge_server::store::NewAction {
            id: "act_pinned".into(),
            kind: "reverse".into(),
            payment_id: payment.clone(),
            requested_by: "op".into(),
            reason: "disputed".into(),
            evidence: String::new(),
            target_status: None,
            capture_amount: None,
            capture_final: None,
            payment_version: p.version + 1,
            status: "approved".into(),
            now: 0,
            expires_at: i64::MAX,
        };
        let audit = approver().entry(
            0,
            "action_requested",
            "t",
            "r",
            String::new(),
            String::new(),
        );
        app.store.create_action(&action, &audit).await.unwrap();
        let out = app
            .running
            .state
            .core
            .execute_action(&approver(), "act_pinned")
            .await
            .unwrap();
        assert_eq!(out.status.as_str(), "failed", "{out:?}");
        assert!(
            out.result
                .as_deref()
                .unwrap_or_default()
                .contains("pending"),
            "{out:?}"
        );
        held.release.notify_one();
        let r = refunding.await.unwrap().unwrap();
        assert_eq!(r.status.as_str(), "succeeded");
        let after = app.store.payment(&payment).await.unwrap().unwrap();
        assert_eq!(after.status.as_str(), "SUCCESS");
        assert_eq!(after.reversal_id, None);
        assert_eq!(refunded_at_channel(&app, &p.channel_key).await, 1_000);
    }
);

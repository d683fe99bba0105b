//! Channel callbacks (DESIGN.md "Merchant HTTP API" and "Payment state machine": late or
//! stale callbacks never move a payment backwards or out of a terminal state; they are
//! acknowledged, recorded as ignored, and counted).

use super::payments::Extras;
use super::{Core, ServiceError};
use crate::domain::state::{PaymentEvent, PaymentStatus, transition};
use crate::store::{IgnoredEvent, JobKind};

/// A verified callback from the channel.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct CallbackEvent {
    /// The channel's unique event id; a repeat is acknowledged once.
    pub event_id: String,
    /// `charge.succeeded` or `charge.failed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payment's channel key.
    pub channel_key: String,
    /// Minor units.
    pub amount: i64,
    /// ISO 4217.
    pub currency: String,
    /// When the channel sent it, unix seconds UTC.
    pub created_at: i64,
}

/// What a callback did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallbackOutcome {
    /// It moved the payment to this status.
    Applied(PaymentStatus),
    /// Recorded as ignored (stale, late, mismatched or unknown type).
    Ignored(String),
    /// This event id was handled before.
    Duplicate,
    /// No payment has this channel key.
    UnknownPayment,
}

impl Core {
    /// Applies a verified channel callback.
    pub async fn handle_callback(
        &self,
        ev: &CallbackEvent,
    ) -> Result<CallbackOutcome, ServiceError> {
        let now = self.clock.now_ms();
        if !self
            .store
            .record_callback(&ev.event_id, &ev.channel_key, &ev.kind, "received", now)
            .await?
        {
            metrics::counter!("converge_callbacks_total", "outcome" => "duplicate").increment(1);
            return Ok(CallbackOutcome::Duplicate);
        }
        let Some(p) = self.store.payment_by_channel_key(&ev.channel_key).await? else {
            metrics::counter!("converge_callbacks_total", "outcome" => "unknown_payment")
                .increment(1);
            return Ok(CallbackOutcome::UnknownPayment);
        };
        let succeeded = match ev.kind.as_str() {
            "charge.succeeded" => true,
            "charge.failed" => false,
            other => {
                return self
                    .ignore(
                        &p,
                        ev,
                        PaymentEvent::ChannelError,
                        format!("unknown callback type {other:?}"),
                    )
                    .await;
            }
        };
        let event = match (succeeded, p.status) {
            (true, PaymentStatus::Unknown) => PaymentEvent::QuerySucceeded,
            (true, _) => PaymentEvent::ChannelSucceeded,
            (false, PaymentStatus::Unknown) => PaymentEvent::QueryDeclined,
            (false, _) => PaymentEvent::ChannelDeclined,
        };
        if succeeded && (ev.amount != p.amount || ev.currency != p.currency) {
            let why = format!(
                "callback says {} {}, payment is {} {}",
                ev.amount, ev.currency, p.amount, p.currency
            );
            return self.ignore(&p, ev, event, why).await;
        }
        if let Err(refused) = transition(p.status, event) {
            return self
                .ignore(&p, ev, event, format!("stale callback: {refused}"))
                .await;
        }
        let extras = Extras {
            detail: format!("callback {}", ev.event_id),
            last_error: (!succeeded).then(|| "declined (callback)".to_string()),
            close_jobs: vec![JobKind::Submit, JobKind::Query],
            ..Extras::default()
        };
        let mut after = self.apply(&p, event, "callback", extras).await?;
        if after.status == PaymentStatus::ChannelSuccess {
            after = self.drive(after, "callback").await?;
        }
        metrics::counter!("converge_callbacks_total", "outcome" => "applied").increment(1);
        Ok(CallbackOutcome::Applied(after.status))
    }

    async fn ignore(
        &self,
        p: &crate::store::Payment,
        ev: &CallbackEvent,
        event: PaymentEvent,
        why: String,
    ) -> Result<CallbackOutcome, ServiceError> {
        self.store
            .record_ignored_event(&IgnoredEvent {
                payment_id: p.id.clone(),
                event_id: format!("cb:{}", ev.event_id),
                event,
                from: p.status,
                source: "callback".into(),
                detail: why.clone(),
                now: self.clock.now_ms(),
            })
            .await?;
        metrics::counter!("converge_callbacks_total", "outcome" => "ignored").increment(1);
        Ok(CallbackOutcome::Ignored(why))
    }
}

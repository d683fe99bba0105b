//! A manual-capture payment's hold (issue 34), told on its page: what was authorized, each
//! capture (its amount, whether it was final, where it went, when, and who asked), what was
//! released and why (a void, a final capture, the expiry), when the hold lapses, and what it
//! still holds. Every amount in major units with its currency, as the rest of the page.

use leptos::prelude::*;

use crate::components::panel::{DataTable, Panel};
use crate::components::widgets::{Money, StatusPill, Time};
use crate::dto::{CaptureRecord, EventRecord, Payment, PaymentStatus};
use crate::format::{Pill, Tone};

/// Why a hold's rest was released, and when (the event that released it): `None` while
/// nothing was released.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Release {
    /// In words: "voided", "final capture", "expired", "expired after a partial capture".
    pub why: &'static str,
    /// When, epoch ms UTC (None when no event of it is on record).
    pub at: Option<i64>,
}

/// The events that release a hold's rest, each with its reason in words.
const RELEASING: [(&str, &str); 4] = [
    ("channel_voided", "voided"),
    ("channel_captured_final", "final capture"),
    ("hold_lapsed", "expired"),
    ("hold_lapsed_captured", "expired after a partial capture"),
];

/// Why and when `p`'s hold released what it released, read from its applied events (the last
/// releasing one), or from its status when no event says (VOIDED, EXPIRED, SUCCESS).
pub(super) fn release_of(p: &Payment, events: &[EventRecord]) -> Option<Release> {
    let released = p.hold.as_ref().map_or(0, |h| h.released);
    if released == 0 {
        return None;
    }
    let by_event = events
        .iter()
        .filter(|e| e.applied)
        .filter_map(|e| {
            RELEASING
                .iter()
                .find(|(name, _)| *name == e.event)
                .map(|(_, why)| Release {
                    why,
                    at: Some(e.created_at),
                })
        })
        .last();
    by_event.or_else(|| {
        let why = match p.status {
            PaymentStatus::Voided => "voided",
            PaymentStatus::Expired => "expired",
            _ => "final capture",
        };
        Some(Release { why, at: None })
    })
}

/// A capture's status as a pill: captured green, refused red, pending busy.
fn capture_pill(status: &str) -> Pill {
    let tone = match status {
        "captured" => Tone::Ok,
        "refused" => Tone::Bad,
        "pending" => Tone::Busy,
        _ => Tone::Other,
    };
    Pill {
        name: status.to_string(),
        tone,
    }
}

/// The hold's panel (`<section id="hold">`): its figures, then its captures, oldest first.
#[component]
pub(super) fn HoldStory(
    payment: Payment,
    captures: Vec<CaptureRecord>,
    events: Vec<EventRecord>,
) -> impl IntoView {
    let p = payment;
    let hold = p.hold.clone().unwrap_or_default();
    let currency = p.currency.clone();
    let release = release_of(&p, &events);
    let released_text = release.as_ref().map(|r| format!(" ({})", r.why));
    let released_at = release.and_then(|r| r.at);
    let expires = hold.expires_at;
    let empty = captures.is_empty().then_some("No captures.");
    view! {
        <Panel id="hold" title="Hold" class="facts" testid="hold">
            <dl>
                <dt>"Authorized"</dt>
                <dd data-testid="hold-authorized"><Money amount=p.amount currency=currency.clone()/></dd>
                <dt>"Captured"</dt>
                <dd data-testid="hold-captured"><Money amount=hold.captured currency=currency.clone()/></dd>
                <dt>"Released"</dt>
                <dd data-testid="hold-released">
                    <Money amount=hold.released currency=currency.clone()/>
                    {released_text}
                    {released_at.map(|ms| view! { " at " <Time ms/> })}
                </dd>
                <dt>"Still held"</dt>
                <dd data-testid="hold-held"><Money amount=p.held_amount() currency=currency.clone()/></dd>
                <dt>"Expires"</dt>
                <dd data-testid="hold-expires">
                    {match expires {
                        Some(ms) => view! { <Time ms/> }.into_any(),
                        None => view! { "— (not authorized yet)" }.into_any(),
                    }}
                </dd>
            </dl>
            <DataTable
                columns=&["Capture", "Amount", "Final", "Status", "Requested", "Settled", "Source", "Reason"]
                numeric=&["Amount"]
                testid="hold-captures"
                empty
                empty_testid="hold-no-captures"
            >
                {captures
                    .into_iter()
                    .map(|c| {
                        let testid = format!("capture-{}", c.id);
                        let status = c.status.to_string();
                        view! {
                            <tr data-testid=testid>
                                <td class="mono">{c.id}</td>
                                <td class="num"><Money amount=c.amount currency=currency.clone()/></td>
                                <td>{if c.last { "final" } else { "partial" }}</td>
                                <td><StatusPill status=capture_pill(&status)/></td>
                                <td><Time ms=c.requested_at/></td>
                                <td>
                                    {match c.settled_at {
                                        Some(ms) => view! { <Time ms/> }.into_any(),
                                        None => view! { "—" }.into_any(),
                                    }}
                                </td>
                                <td class="mono">{c.source}</td>
                                <td>{c.reason.unwrap_or_default()}</td>
                            </tr>
                        }
                    })
                    .collect_view()}
            </DataTable>
        </Panel>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dto::{CaptureMode, Hold};

    fn manual(status: PaymentStatus, captured: i64, released: i64) -> Payment {
        Payment {
            id: "pay_1".into(),
            merchant_id: 1,
            merchant_order_id: "o".into(),
            amount: 10_000,
            currency: "CNY".into(),
            description: String::new(),
            params_hash: String::new(),
            status,
            version: 3,
            channel_key: "k".into(),
            submit_attempts: 1,
            refunded_amount: 0,
            last_error: None,
            created_at: 0,
            updated_at: 0,
            reversal_id: None,
            connector: "sandbox".into(),
            capture_mode: CaptureMode::Manual,
            hold: Some(Hold {
                expires_at: Some(1),
                captured,
                released,
                pending_capture: None,
            }),
            fee: 0,
        }
    }

    fn event(name: &str, at: i64) -> EventRecord {
        EventRecord {
            event_id: format!("{name}@{at}"),
            event: name.into(),
            from_status: "AUTHORIZED".into(),
            to_status: Some("SUCCESS".into()),
            applied: true,
            source: "api".into(),
            detail: String::new(),
            created_at: at,
            trace_id: None,
        }
    }

    #[test]
    fn a_release_says_why_and_when_from_the_event_that_made_it() {
        let p = manual(PaymentStatus::Success, 6_500, 3_500);
        let events = [
            event("channel_captured", 10),
            event("channel_captured_final", 20),
        ];
        assert_eq!(
            release_of(&p, &events),
            Some(Release {
                why: "final capture",
                at: Some(20)
            })
        );
        let lapsed = [
            event("channel_captured", 10),
            event("hold_lapsed_captured", 30),
        ];
        assert_eq!(
            release_of(&p, &lapsed).map(|r| r.why),
            Some("expired after a partial capture")
        );
        let voided = manual(PaymentStatus::Voided, 0, 10_000);
        assert_eq!(
            release_of(&voided, &[event("channel_voided", 5)]),
            Some(Release {
                why: "voided",
                at: Some(5)
            })
        );
        // No event on record: the status says why.
        assert_eq!(release_of(&voided, &[]).map(|r| r.why), Some("voided"));
        // Nothing released yet: nothing to say.
        assert_eq!(
            release_of(&manual(PaymentStatus::Authorized, 4_000, 0), &[]),
            None
        );
    }
}

//! The merchants' webhook endpoints, simulated: converge's [`WebhookSender`] seam answered
//! from the seed instead of the network (issue 39: "webhook endpoints (2xx, 5xx, hangs,
//! 410)").
//!
//! Each endpoint has a temper drawn when it is registered: steady (almost always 2xx), flaky
//! (often 5xx, 429 with `Retry-After`, or a hang, until it recovers: an outage of the
//! merchant's server), or leaving (answers 410 Gone after a while, which disables it). A
//! hang is the attempt's time limit passing: the simulated clock moves by it, and the
//! attempt fails as a timeout does. Now and then the process dies right after an endpoint
//! answered, before converge heard it ([`SimEndpoints::crashing_with`]): the merchant has the
//! event, converge does not know, and delivers it again once the attempt's lease lapses (at
//! least once, the same `webhook-id`). Every POST writes a line for the trace
//! ([`SimEndpoints::drain_log`]).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use converge_server::domain::clock::{Clock, ManualClock};
use converge_server::service::webhooks::{PostAnswer, WebhookSender};

use crate::channel::SimChannel;
use crate::rng::Rng;

/// Per mille of answered POSTs after which the process dies before it hears the answer.
const CRASH_AFTER_POST: u64 = 20;

/// How an endpoint answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Temper {
    /// 2xx, a 5xx now and then.
    Steady,
    /// Steady, except from the first time to the second (epoch ms UTC, an outage of the
    /// merchant's server): 5xx, 429 with `Retry-After`, hangs, and 2xx a third of the time.
    Flaky(i64, i64),
    /// 2xx until its `n`th POST, 410 Gone from then on.
    Leaving(u64),
}

#[derive(Debug)]
struct Inner {
    rng: Rng,
    tempers: BTreeMap<String, (Temper, u64)>,
    log: Vec<String>,
}

/// The endpoints of every merchant, shared by every process the world restarts (they are
/// the merchants' servers, not converge's memory).
#[derive(Debug, Clone)]
pub struct SimEndpoints {
    inner: Arc<Mutex<Inner>>,
    clock: ManualClock,
    /// One attempt's time limit, ms: what a hang costs in simulated time.
    timeout_ms: i64,
    /// Whose crash ends the process after an answered POST (None: never).
    crash: Option<SimChannel>,
}

impl SimEndpoints {
    /// Endpoints answering from `rng`, a hang moving `clock` by `timeout_ms`.
    pub fn new(rng: Rng, clock: ManualClock, timeout_ms: i64) -> Self {
        SimEndpoints {
            inner: Arc::new(Mutex::new(Inner {
                rng,
                tempers: BTreeMap::new(),
                log: Vec::new(),
            })),
            clock,
            timeout_ms,
            crash: None,
        }
    }

    /// These endpoints, with the process dying after [`CRASH_AFTER_POST`] per mille of the
    /// answered POSTs through `channel`'s crash ([`SimChannel::crash_process`]), which the
    /// world's guard turns into a restart.
    pub fn crashing_with(mut self, channel: SimChannel) -> Self {
        self.crash = Some(channel);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Draws the temper of the endpoint at `url` (half steady; a third flaky, down for 5 to
    /// 90 minutes starting within 3 hours of `now_ms`; the rest leaving after 3 to 40
    /// POSTs) and returns it.
    pub fn open(&self, url: &str, now_ms: i64) -> Temper {
        let mut g = self.lock();
        let temper = match g.rng.below(6) {
            0..=2 => Temper::Steady,
            3 | 4 => {
                let from = now_ms + g.rng.between(0, 3 * 3_600_000);
                Temper::Flaky(from, from + g.rng.between(300_000, 90 * 60_000))
            }
            _ => Temper::Leaving(3 + g.rng.below(38)),
        };
        g.tempers.insert(url.to_string(), (temper, 0));
        temper
    }

    /// The POSTs' lines since the last call, in order.
    pub fn drain_log(&self) -> Vec<String> {
        std::mem::take(&mut self.lock().log)
    }

    /// What the endpoint at `url` does with its next POST: a status and a `Retry-After`, or
    /// a hang (None).
    fn answer(&self, url: &str) -> Option<(u16, Option<String>)> {
        let mut g = self.lock();
        let Some((temper, posts)) = g.tempers.get(url).copied() else {
            return Some((404, None));
        };
        g.tempers.insert(url.to_string(), (temper, posts + 1));
        let roll = g.rng.below(100);
        let now = self.clock.now_ms();
        match temper {
            Temper::Leaving(n) if posts >= n => Some((410, None)),
            Temper::Leaving(_) => Some((200, None)),
            t if is_down(t, now) => match roll {
                0..=32 => Some((204, None)),
                33..=59 => Some((500, None)),
                60..=74 => Some((429, Some((1 + g.rng.below(120)).to_string()))),
                _ => None,
            },
            _ if roll < 97 => Some((200, None)),
            _ => Some((503, None)),
        }
    }
}

/// A flaky endpoint before it recovered.
fn is_down(temper: Temper, now_ms: i64) -> bool {
    matches!(temper, Temper::Flaky(from, until) if (from..until).contains(&now_ms))
}

#[async_trait]
impl WebhookSender for SimEndpoints {
    async fn post(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        _body: String,
    ) -> Result<PostAnswer, String> {
        let id = headers
            .iter()
            .find(|(n, _)| *n == "webhook-id")
            .map_or("?", |(_, v)| v.as_str());
        let host = url.split('/').nth(2).unwrap_or(url);
        let answer = self.answer(url);
        let crash = match &self.crash {
            Some(channel) if answer.is_some() && self.lock().rng.chance(CRASH_AFTER_POST) => {
                Some(channel)
            }
            _ => None,
        };
        let line = match &answer {
            Some((status, Some(after))) => {
                format!("POST {host} {id} -> {status} retry-after {after}")
            }
            Some((status, None)) => format!("POST {host} {id} -> {status}"),
            None => format!("POST {host} {id} -> hangs {} ms", self.timeout_ms),
        };
        self.lock().log.push(line);
        if let Some(channel) = crash {
            channel.crash_process("process crashes before it hears the endpoint's answer");
            std::future::pending::<()>().await;
        }
        match answer {
            Some((status, retry_after)) => Ok(PostAnswer {
                status,
                retry_after,
                ..PostAnswer::default()
            }),
            None => {
                self.clock.advance(self.timeout_ms);
                Err(format!("timed out after {} ms", self.timeout_ms))
            }
        }
    }
}

//! Merchant notifications as plain Rust: the outbox's event types (defined in converge-wire,
//! which the console shares), Standard Webhooks signing,
//! endpoint URL rules, the retry schedule and how an endpoint's answer is judged
//! (DESIGN.md "Outbox, merchant notifications, event stream"; seed 004 §6.1, §6.3, §11.1;
//! seed 000 §1.3 item 3, §6; the Standard Webhooks specification, `standard-webhooks.md`).

use converge_wire::ErrorCode;
use std::net::IpAddr;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, Mac};
use sha2::Sha256;

pub use converge_wire::{DeliveryStatus, EndpointStatus, EventType};

/// An endpoint's subscription: every type (`*`) or a set of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subscription {
    /// `["*"]`: every type, including types added later.
    All,
    /// The listed types, deduplicated, in [`EventType::ALL`] order.
    Only(Vec<EventType>),
}

impl Subscription {
    /// Parses an `enabled_events` list. Errors (one line): an empty list, an unknown type,
    /// `*` mixed with types.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        if names.is_empty() {
            return Err("enabled_events must name at least one event type (or \"*\")".into());
        }
        if names.iter().any(|n| n.as_ref() == "*") {
            return if names.len() == 1 {
                Ok(Subscription::All)
            } else {
                Err("\"*\" subscribes to every event type; list it alone".into())
            };
        }
        let mut types = Vec::new();
        for n in names {
            types.push(n.as_ref().parse::<EventType>()?);
        }
        Ok(Subscription::Only(
            EventType::ALL
                .into_iter()
                .filter(|t| types.contains(t))
                .collect(),
        ))
    }

    /// The stored form, `,a,b,` (or `,*,`), matched in SQL by `LIKE '%,' || type || ',%'`.
    pub fn to_stored(&self) -> String {
        match self {
            Subscription::All => ",*,".into(),
            Subscription::Only(ts) => format!(
                ",{},",
                ts.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(",")
            ),
        }
    }

    /// Reads the stored form back; unknown names (a newer version's types) are dropped.
    pub fn from_stored(s: &str) -> Self {
        let names: Vec<&str> = s.split(',').filter(|p| !p.is_empty()).collect();
        if names.contains(&"*") {
            return Subscription::All;
        }
        Subscription::Only(
            EventType::ALL
                .into_iter()
                .filter(|t| names.contains(&t.as_str()))
                .collect(),
        )
    }

    /// The names as the API shows them.
    pub fn names(&self) -> Vec<String> {
        match self {
            Subscription::All => vec!["*".into()],
            Subscription::Only(ts) => ts.iter().map(|t| t.as_str().to_string()).collect(),
        }
    }

    /// Whether an event of type `t` is delivered to this subscription.
    pub fn includes(&self, t: EventType) -> bool {
        match self {
            Subscription::All => true,
            Subscription::Only(ts) => ts.contains(&t),
        }
    }
}

/// Bytes of randomness in a signing secret (the Standard Webhooks spec asks for 24 to 64).
pub const SECRET_BYTES: usize = 32;
/// The prefix of a signing secret as merchants see it.
pub const SECRET_PREFIX: &str = "whsec_";

/// A signing secret in Standard Webhooks form: `whsec_` + base64 of `bytes`.
pub fn format_secret(bytes: &[u8]) -> String {
    format!("{SECRET_PREFIX}{}", B64.encode(bytes))
}

/// The key bytes of a `whsec_...` secret. Errors when the prefix or the base64 is wrong, or
/// the key is shorter than 24 bytes.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let b64 = secret
        .strip_prefix(SECRET_PREFIX)
        .ok_or_else(|| format!("a signing secret starts with {SECRET_PREFIX}"))?;
    let key = B64
        .decode(b64)
        .map_err(|e| format!("signing secret is not base64: {e}"))?;
    if key.len() < 24 {
        return Err("a signing secret holds at least 24 bytes".into());
    }
    Ok(key)
}

/// One `v1,<base64 HMAC-SHA256>` signature of `{msg_id}.{timestamp}.{body}` (Standard
/// Webhooks "Signature scheme"); `timestamp` in seconds since the epoch.
pub fn sign(key: &[u8], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    // HMAC accepts keys of any length, so this cannot fail.
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(msg_id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", B64.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per key, space-separated (the spec allows
/// several, so a receiver that still holds the old secret during a rotation verifies too).
pub fn signature_header(keys: &[Vec<u8>], msg_id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|k| sign(k, msg_id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Longest endpoint URL, in characters (JSON Schema's `maxLength` counts characters).
pub const MAX_URL_LEN: usize = 2048;

/// Why an endpoint URL is refused; each maps to a stable 400 code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefusal {
    /// Not a URL, or no host.
    #[error("url is not an absolute http(s) URL: {0}")]
    Invalid(String),
    /// A scheme other than http or https.
    #[error("url scheme must be https or http")]
    Scheme,
    /// `user:pass@` in the URL.
    #[error("url must not carry user info")]
    UserInfo,
    /// Longer than [`MAX_URL_LEN`].
    #[error("url is longer than {MAX_URL_LEN} characters")]
    TooLong,
    /// The host is or resolves to an internal address. The address stays on the server:
    /// the answer is [`ADDRESS_REFUSED`], the same as for [`UrlRefusal::Unresolvable`].
    #[error("{ADDRESS_REFUSED}")]
    Internal(IpAddr),
    /// The host name does not resolve. The answer is [`ADDRESS_REFUSED`].
    #[error("{ADDRESS_REFUSED}")]
    Unresolvable(String),
}

/// The one answer to a URL refused for its host's address, internal or unresolvable alike:
/// telling them apart, or echoing the address a name resolved to, would give every merchant
/// a map of the internal DNS (issue 36; OWASP SSRF Prevention).
pub const ADDRESS_REFUSED: &str = "url host must resolve, and only to public addresses; internal and unresolvable hosts are refused unless the server runs with --webhook-allow-private";

impl UrlRefusal {
    /// The stable error code the API answers with.
    pub fn code(&self) -> ErrorCode {
        match self {
            UrlRefusal::Invalid(_) => ErrorCode::InvalidUrl,
            UrlRefusal::Scheme => ErrorCode::UrlSchemeNotAllowed,
            UrlRefusal::UserInfo => ErrorCode::UrlUserInfoNotAllowed,
            UrlRefusal::TooLong => ErrorCode::UrlTooLong,
            UrlRefusal::Internal(_) | UrlRefusal::Unresolvable(_) => ErrorCode::UrlAddressRefused,
        }
    }
}

/// Checks the form of an endpoint URL (scheme, user info, length, host); resolution is the
/// caller's, then [`check_addresses`].
pub fn check_url_form(raw: &str) -> Result<url::Url, UrlRefusal> {
    if raw.chars().count() > MAX_URL_LEN {
        return Err(UrlRefusal::TooLong);
    }
    let u = url::Url::parse(raw).map_err(|e| UrlRefusal::Invalid(e.to_string()))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(UrlRefusal::Scheme);
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(UrlRefusal::UserInfo);
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(UrlRefusal::Invalid("no host".into()));
    }
    Ok(u)
}

/// Refuses the first internal address among `addrs` (every address a name resolves to must
/// be public, or a second record could point inside), unless `allow_private`.
pub fn check_addresses(addrs: &[IpAddr], allow_private: bool) -> Result<(), UrlRefusal> {
    if allow_private {
        return Ok(());
    }
    match addrs.iter().find(|a| is_internal(**a)) {
        Some(a) => Err(UrlRefusal::Internal(*a)),
        None => Ok(()),
    }
}

/// Loopback, private (RFC 1918, ULA), link-local, carrier-grade NAT, unspecified,
/// multicast, broadcast, documentation and benchmarking ranges, the deprecated site-local
/// range, and every IPv6 form that carries an IPv4 address a gateway or relay would reach
/// (mapped, compatible, translated, NAT64, 6to4, Teredo): anything a webhook must never reach
/// from inside the payment network (OWASP SSRF Prevention Cheat Sheet; IANA special-purpose
/// address registries).
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || o[0] == 0
                || (o[0] == 100 && (64..=127).contains(&o[1])) // 100.64/10 CGNAT
                || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) // 198.18/15 benchmarking
                || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0/24 IETF
                || o[0] >= 240 // reserved
                || (o[0] == 192 && o[1] == 88 && o[2] == 99) // 192.88.99/24 6to4 relay anycast
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_internal(IpAddr::V4(v4));
            }
            let s = v6.segments();
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00 // fc00::/7 unique local
                || (s[0] & 0xffc0) == 0xfe80 // fe80::/10 link-local
                || (s[0] == 0x2001 && s[1] == 0x0db8) // documentation
                || (s[0] & 0xffc0) == 0xfec0 // fec0::/10 site-local (deprecated, still routed inside)
                || (s[0] == 0x64 && s[1] == 0xff9b) // 64:ff9b::/96 and 64:ff9b:1::/48 NAT64 reach IPv4 inside
                || s[0] == 0x2002 // 2002::/16 6to4: the relay reaches the embedded IPv4
                || (s[0] == 0x2001 && s[1] == 0) // 2001::/32 Teredo: likewise
                || (s[..4] == [0, 0, 0, 0] && s[4] == 0xffff && s[5] == 0) // ::ffff:0:0:0/96 IPv4-translated
                || s[..4] == [0x100, 0, 0, 0] // 100::/64 discard-only
                || s[..6] == [0, 0, 0, 0, 0, 0] // IPv4-compatible
        }
    }
}

/// The delays between attempts, in milliseconds: attempt 1 runs `delays[0]` after the
/// event, attempt n+1 runs `delays[n]` after attempt n failed. The default is the seed's
/// callback schedule as PSPs use it: at once, 30 s, 1 min, 5 min, 30 min, 2 h, 5 h, 10 h, 24 h.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(pub Vec<u64>);

/// The default schedule in its flag form.
pub const DEFAULT_SCHEDULE: &str = "0s,30s,1m,5m,30m,2h,5h,10h,24h";

impl RetrySchedule {
    /// Parses `0s,30s,1m,...`: each item a whole number with `ms`, `s`, `m`, `h` or `d`.
    /// Errors name the bad item; at least one item, at most 30, each at most 7 days.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut out = Vec::new();
        for item in spec.split(',') {
            let item = item.trim();
            let split = item
                .find(|c: char| !c.is_ascii_digit())
                .ok_or_else(|| format!("{item:?} has no unit (ms, s, m, h or d)"))?;
            let (num, unit) = item.split_at(split);
            let n: u64 = num
                .parse()
                .map_err(|_| format!("{item:?} does not start with a whole number"))?;
            let scale = match unit {
                "ms" => 1,
                "s" => 1_000,
                "m" => 60_000,
                "h" => 3_600_000,
                "d" => 86_400_000,
                _ => return Err(format!("{item:?}: unit must be ms, s, m, h or d")),
            };
            let ms = n
                .checked_mul(scale)
                .filter(|ms| *ms <= 7 * 86_400_000)
                .ok_or_else(|| format!("{item:?} is longer than 7 days"))?;
            out.push(ms);
        }
        if out.is_empty() || out.len() > 30 {
            return Err("a retry schedule has 1 to 30 items".into());
        }
        Ok(RetrySchedule(out))
    }

    /// Attempts in all.
    pub fn attempts(&self) -> usize {
        self.0.len()
    }

    /// The wait before attempt `next` (1-based) with up to ±10 % jitter drawn from `unit`
    /// (in [0, 1)), so deliveries that failed together do not retry together; `None` when
    /// the schedule has no attempt `next`.
    pub fn delay_ms(&self, next: usize, unit: f64) -> Option<u64> {
        let base = *self.0.get(next.checked_sub(1)?)?;
        let jitter = (base as f64 * 0.2 * (unit.clamp(0.0, 1.0) - 0.5)) as i64;
        Some(base.saturating_add_signed(jitter))
    }
}

impl Default for RetrySchedule {
    fn default() -> Self {
        RetrySchedule::parse(DEFAULT_SCHEDULE).expect("the default schedule parses")
    }
}

/// How one attempt ended, judged from the endpoint's answer (Standard Webhooks: only 2xx is
/// success; redirects are not followed; 410 Gone disables the endpoint).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptVerdict {
    /// 2xx: delivered.
    Delivered,
    /// 410: the receiver asks never to be called again.
    Gone,
    /// Anything else: try again per the schedule, not earlier than `not_before_ms` when the
    /// endpoint said so (429/503 `Retry-After`).
    Failed {
        /// Why, for the attempt's record.
        reason: String,
        /// The endpoint's `Retry-After`, ms.
        not_before_ms: Option<u64>,
    },
}

/// Judges an HTTP answer; `retry_after` is the raw header value.
pub fn judge(status: u16, retry_after: Option<&str>) -> AttemptVerdict {
    match status {
        200..=299 => AttemptVerdict::Delivered,
        410 => AttemptVerdict::Gone,
        300..=399 => AttemptVerdict::Failed {
            reason: format!("redirect {status} not followed"),
            not_before_ms: None,
        },
        429 | 503 => AttemptVerdict::Failed {
            reason: format!("HTTP {status}"),
            not_before_ms: retry_after
                .and_then(parse_retry_after_secs)
                .map(|s| s * 1000),
        },
        _ => AttemptVerdict::Failed {
            reason: format!("HTTP {status}"),
            not_before_ms: None,
        },
    }
}

/// `Retry-After` as delay-seconds (RFC 9110 §10.2.3), capped at a day; the HTTP-date form is
/// not honoured (the schedule's own delay applies).
fn parse_retry_after_secs(v: &str) -> Option<u64> {
    v.trim().parse::<u64>().ok().map(|s| s.min(86_400))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::state::PaymentStatus;

    #[test]
    fn signature_matches_the_standard_webhooks_reference_example() {
        // The example in the Standard Webhooks specification.
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            sign(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn secrets_round_trip_and_short_ones_are_refused() {
        let s = format_secret(&[7u8; SECRET_BYTES]);
        assert!(s.starts_with("whsec_"));
        assert_eq!(secret_key(&s).unwrap(), vec![7u8; SECRET_BYTES]);
        assert!(secret_key(&format_secret(&[1u8; 10])).is_err());
        assert!(secret_key("sk_abc").is_err());
    }

    #[test]
    fn rotation_header_carries_both_signatures() {
        let h = signature_header(&[vec![1; 32], vec![2; 32]], "m", 1, b"{}");
        let parts: Vec<_> = h.split(' ').collect();
        assert_eq!(parts.len(), 2);
        assert!(parts.iter().all(|p| p.starts_with("v1,")));
        assert_ne!(parts[0], parts[1]);
    }

    #[test]
    fn subscriptions_parse_store_and_match() {
        let s =
            Subscription::parse(&["refund.failed", "payment.succeeded", "refund.failed"]).unwrap();
        assert_eq!(s.to_stored(), ",payment.succeeded,refund.failed,");
        assert_eq!(Subscription::from_stored(&s.to_stored()), s);
        assert!(s.includes(EventType::RefundFailed));
        assert!(!s.includes(EventType::PaymentFailed));
        assert_eq!(Subscription::parse(&["*"]).unwrap(), Subscription::All);
        assert!(Subscription::parse(&["*", "payment.failed"]).is_err());
        assert!(Subscription::parse::<&str>(&[]).is_err());
        let e = Subscription::parse(&["payment.exploded"]).unwrap_err();
        assert!(e.contains("payment.exploded"), "{e}");
    }

    #[test]
    fn every_outcome_status_has_one_event_and_others_none() {
        for s in PaymentStatus::ALL {
            let e = EventType::for_payment_status(s);
            // REQUIRES_ACTION is the one open status told: the merchant must bring the
            // customer to the channel's challenge (issue 38).
            assert_eq!(
                e.is_some(),
                s.is_settled() || s == PaymentStatus::RequiresAction,
                "{s}: a settled status (an outcome, or a hold) is told once"
            );
        }
    }

    #[test]
    fn url_form_refusals_have_their_codes() {
        assert_eq!(
            check_url_form("ftp://x.example/").unwrap_err().code(),
            "url_scheme_not_allowed"
        );
        assert_eq!(
            check_url_form("https://u:p@x.example/").unwrap_err().code(),
            "url_user_info_not_allowed"
        );
        let long = format!("https://x.example/{}", "a".repeat(MAX_URL_LEN));
        assert_eq!(check_url_form(&long).unwrap_err().code(), "url_too_long");
        assert_eq!(
            check_url_form("not a url").unwrap_err().code(),
            "invalid_url"
        );
        assert!(check_url_form("https://hooks.example.com/converge?x=1").is_ok());
    }

    #[test]
    fn internal_addresses_are_refused_unless_allowed() {
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "64:ff9b::a00:1",
        ] {
            let ip: IpAddr = a.parse().unwrap();
            assert!(is_internal(ip), "{a}");
            assert_eq!(
                check_addresses(&[ip], false).unwrap_err().code(),
                "url_address_refused"
            );
            assert!(check_addresses(&[ip], true).is_ok());
        }
        for a in ["93.184.216.34", "8.8.8.8", "2606:4700::1111"] {
            assert!(!is_internal(a.parse().unwrap()), "{a}");
        }
        let mixed: Vec<IpAddr> = vec!["8.8.8.8".parse().unwrap(), "10.0.0.1".parse().unwrap()];
        assert!(check_addresses(&mixed, false).is_err());
    }

    #[test]
    fn ipv6_ranges_that_reach_ipv4_or_a_site_are_internal() {
        for a in [
            // 6to4 of 127.0.0.1, of 10.0.0.1, and of a public address: the relay decides
            // where it goes, not converge.
            "2002:7f00:1::1",
            "2002:a00:1::",
            "2002:5db8:d822::1",
            // Site-local, the whole /10.
            "fec0::1",
            "feff:ffff::1",
            // IPv4-translated (SIIT), ::ffff:0:a.b.c.d.
            "::ffff:0:7f00:1",
            "::ffff:0:0a00:1",
            "::ffff:0:5db8:d822",
            // Local-use NAT64, Teredo, discard-only.
            "64:ff9b:1::a00:1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "100::1",
        ] {
            let ip: IpAddr = a.parse().unwrap();
            assert!(is_internal(ip), "{a}");
            assert_eq!(
                check_addresses(&[ip], false).unwrap_err().code(),
                "url_address_refused"
            );
        }
        // Their neighbours stay public.
        for a in [
            "2003::1",
            "2001:1::1",
            "2001:4860:4860::8888",
            "fe00::1",
            "::fffe:0:0:1",
            "101::1",
        ] {
            assert!(!is_internal(a.parse().unwrap()), "{a}");
        }
    }

    #[test]
    fn a_refused_address_gets_one_answer_that_names_no_address() {
        let internal = check_addresses(&["10.20.30.40".parse().unwrap()], false).unwrap_err();
        let unresolvable = UrlRefusal::Unresolvable("billing.corp.internal".into());
        assert_eq!(internal.code(), unresolvable.code());
        assert_eq!(internal.to_string(), unresolvable.to_string());
        let text = internal.to_string();
        assert!(
            !text.contains("10.20.30.40") && !text.contains("billing"),
            "{text}"
        );
    }

    #[test]
    fn schedule_parses_units_and_refuses_nonsense() {
        let s = RetrySchedule::default();
        assert_eq!(s.attempts(), 9);
        assert_eq!(s.0[..3], [0, 30_000, 60_000]);
        assert_eq!(s.0[8], 86_400_000);
        assert_eq!(
            RetrySchedule::parse("0s,100ms,200ms").unwrap().0,
            vec![0, 100, 200]
        );
        for bad in ["", "10", "5x", "-1s", "8d", "1s,,2s"] {
            assert!(RetrySchedule::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn schedule_jitter_stays_within_ten_percent() {
        let s = RetrySchedule::parse("0s,100s").unwrap();
        assert_eq!(s.delay_ms(1, 0.99), Some(0));
        assert_eq!(s.delay_ms(2, 0.5), Some(100_000));
        let lo = s.delay_ms(2, 0.0).unwrap();
        let hi = s.delay_ms(2, 0.999).unwrap();
        assert!((90_000..=110_000).contains(&lo) && (90_000..=110_000).contains(&hi));
        assert!(lo < hi);
        assert_eq!(s.delay_ms(3, 0.5), None);
        assert_eq!(s.delay_ms(0, 0.5), None);
    }

    #[test]
    fn answers_are_judged_as_the_spec_says() {
        assert_eq!(judge(204, None), AttemptVerdict::Delivered);
        assert_eq!(judge(410, None), AttemptVerdict::Gone);
        assert!(
            matches!(judge(302, None), AttemptVerdict::Failed { reason, .. } if reason.contains("redirect"))
        );
        assert_eq!(
            judge(429, Some("120")),
            AttemptVerdict::Failed {
                reason: "HTTP 429".into(),
                not_before_ms: Some(120_000)
            }
        );
        assert!(matches!(
            judge(500, Some("5")),
            AttemptVerdict::Failed {
                not_before_ms: None,
                ..
            }
        ));
    }
}

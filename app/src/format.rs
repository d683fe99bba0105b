//! How the console writes times, ages and amounts. Pure functions, identical on the server
//! and in the browser (a difference would break hydration), so no clock and no locale:
//! times are UTC, computed from epoch milliseconds with the civil-calendar algorithm
//! rather than a date library, to keep the WebAssembly bundle small.

/// `2026-11-30 05:48:43 UTC` for epoch milliseconds.
pub fn utc(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `2026-11-28 13:48:43 +08:00`: the instant `ms` (epoch ms UTC) as a clock `offset_minutes`
/// east of UTC shows it (the browser's zone when the console's switch says "local"). The offset
/// is always written, so a local time is never mistaken for UTC.
pub fn zoned(ms: i64, offset_minutes: i32) -> String {
    if offset_minutes == 0 {
        return utc(ms);
    }
    let shifted = ms + i64::from(offset_minutes) * 60_000;
    let secs = shifted.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let sign = if offset_minutes < 0 { '-' } else { '+' };
    let off = offset_minutes.unsigned_abs();
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} {sign}{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        off / 60,
        off % 60
    )
}

/// `2026-11-28T05:48:43.120Z`: the machine-readable form for `<time datetime>`.
pub fn iso(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms.rem_euclid(1000)
    )
}

/// `05:48:43 UTC`: the time of day only, for "updated at" lines.
pub fn utc_time(ms: i64) -> String {
    let rem = ms.div_euclid(1000).rem_euclid(86_400);
    format!(
        "{:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// An endpoint's circuit breaker as the Webhooks page shows it: `breaker closed`, `breaker
/// open until 05:48:43 UTC`, `breaker half-open`.
pub fn breaker(status: converge_wire::BreakerStatus, open_until: Option<i64>) -> String {
    match (status, open_until) {
        (converge_wire::BreakerStatus::Open, Some(t)) => {
            format!("breaker open until {}", utc_time(t))
        }
        (s, _) => format!("breaker {}", s.label()),
    }
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// A duration in ms as people read it: `42s`, `3m 12s`, `2h 05m`, `3d 4h`.
pub fn age(ms: i64) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h {:02}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86_400, s % 86_400 / 3600),
    }
}

/// A threshold in ms, compactly: `0` → `at once`, `60000` → `1m`, `90000` → `1m 30s`.
pub fn threshold(ms: i64) -> String {
    if ms <= 0 {
        "at once".into()
    } else if ms % 60_000 == 0 && ms < 3_600_000 {
        format!("{}m", ms / 60_000)
    } else {
        age(ms)
    }
}

/// An amount in integer minor units shown in major units with its currency:
/// `1999, "CNY"` → `19.99 CNY`, `500, "JPY"` → `500 JPY`, `-250, "USD"` → `-2.50 USD`. The
/// decimals come from the one currency table, `converge_wire::money`, which the server's
/// summaries read too.
pub fn money(minor: i64, currency: &str) -> String {
    format!(
        "{} {currency}",
        converge_wire::money::major(minor, currency)
    )
}

/// A rate 0..=1 as a percentage with one decimal: `0.25` → `25.0%`.
pub fn percent(rate: f64) -> String {
    if rate.is_finite() {
        format!("{:.1}%", rate * 100.0)
    } else {
        "–".into()
    }
}

/// The first `max` characters of `s`, with `…` when cut (error texts can be long).
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// Pretty-prints a JSON document for display; text that is not JSON is returned unchanged.
pub fn pretty_json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}

/// A JSON document (error-pool evidence, an action's result) as labelled fields people read:
/// nested objects become `Channel · Amount`-style labels, an object with `amount` and
/// `currency` becomes one amount in major units, integers under keys ending in `_at` (or
/// `at`, `first_seen`, `last_seen`; epoch seconds or milliseconds) become UTC times, and
/// `null` is skipped. Text that is not a JSON object gives no fields (the caller shows it
/// raw).
pub fn json_fields(text: &str) -> Vec<(String, String)> {
    json_fields_in(text, None)
}

/// [`json_fields`] where amounts without a currency of their own (`refunded_amount`,
/// `refunded_at_channel`) are in `currency` (the payment's); without one they stay integers
/// labelled "(minor units)", never a bare number that reads as major units.
pub fn json_fields_in(text: &str, currency: Option<&str>) -> Vec<(String, String)> {
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(text) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    fields_of(&map, "", currency, &mut out);
    out
}

fn is_amount_key(key: &str) -> bool {
    key == "amount" || key.ends_with("_amount") || key == "refunded_at_channel"
}

fn label_of(key: &str) -> String {
    let words = key.replace('_', " ");
    let mut c = words.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn is_time_key(key: &str) -> bool {
    key == "at" || key.ends_with("_at") || key == "first_seen" || key == "last_seen"
}

fn fields_of(
    map: &serde_json::Map<String, serde_json::Value>,
    prefix: &str,
    currency: Option<&str>,
    out: &mut Vec<(String, String)>,
) {
    use serde_json::Value;
    let join = |k: &str| {
        if prefix.is_empty() {
            label_of(k)
        } else {
            format!("{prefix} · {}", label_of(k))
        }
    };
    // An amount with its currency is one figure, in major units.
    let money_pair = match (map.get("amount"), map.get("currency")) {
        (Some(Value::Number(a)), Some(Value::String(c))) => a.as_i64().map(|a| money(a, c)),
        _ => None,
    };
    if let Some(m) = &money_pair {
        let label = if prefix.is_empty() {
            "Amount".to_string()
        } else {
            prefix.to_string()
        };
        out.push((label, m.clone()));
    }
    // Sorted here, not by the map: whether serde_json keeps insertion order is a feature
    // another crate may switch on for the server only, and the server and the browser must
    // render the same list.
    let mut keys: Vec<&String> = map.keys().collect();
    keys.sort();
    for k in keys {
        let v = &map[k];
        if money_pair.is_some() && (k == "amount" || k == "currency") {
            continue;
        }
        // A currency some amount of this object was shown in is said there, not again.
        let priced = || {
            map.iter()
                .any(|(a, n)| is_amount_key(a) && n.as_i64().is_some())
        };
        if k == "currency" && v.is_string() && priced() {
            continue;
        }
        match v {
            Value::Null => {}
            Value::Object(inner) => fields_of(inner, &join(k), currency, out),
            Value::Number(n) if is_amount_key(k) && n.as_i64().is_some() => {
                let minor = n.as_i64().unwrap_or_default();
                let own = map.get("currency").and_then(Value::as_str);
                match own.or(currency) {
                    Some(c) => out.push((join(k), money(minor, c))),
                    None => out.push((format!("{} (minor units)", join(k)), minor.to_string())),
                }
            }
            Value::Number(n) if is_time_key(k) && n.as_i64().is_some_and(|t| t > 0) => {
                // Seconds (the channel's callbacks) or milliseconds (converge's own): 1e11
                // seconds is the year 5138, 1e11 ms is 1973.
                let t = n.as_i64().unwrap_or_default();
                let ms = if t < 100_000_000_000 { t * 1000 } else { t };
                out.push((join(k), utc(ms)));
            }
            Value::String(s) => out.push((join(k), s.clone())),
            other => out.push((join(k), other.to_string())),
        }
    }
}

/// A maker-checker request's kind as the console names it: `force_transition → SUCCESS`
/// for a forced move, `capture (partial)` or `capture (final)` for a capture (its amount is
/// shown in major units where the currency is known), the bare kind otherwise.
pub fn action_kind(a: &crate::dto::ActionRecord) -> String {
    match (&a.target_status, a.capture_final) {
        (Some(t), _) => format!("{} → {t}", a.kind),
        (None, Some(last)) => format!("{} ({})", a.kind, if last { "final" } else { "partial" }),
        (None, None) => a.kind.clone(),
    }
}

/// Who decided a request and why (`bob: checked with the bank`), `—` when nobody has.
pub fn action_decision(a: &crate::dto::ActionRecord) -> String {
    a.decided_by
        .clone()
        .map(
            |d| match a.decision_reason.clone().filter(|r| !r.is_empty()) {
                Some(r) => format!("{d}: {r}"),
                None => d,
            },
        )
        .unwrap_or_else(|| "—".into())
}

/// The colour family of a status pill: one per kind of state, whichever lifecycle it belongs
/// to, so ops staff read every table the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Reached what was wanted (SUCCESS, a succeeded refund, an executed request).
    Ok,
    /// Ended without it (FAILED, a dead job, a disabled endpoint).
    Bad,
    /// Needs a person's eyes (UNKNOWN, SUSPENSE, an open error-pool item, an active pause).
    Warn,
    /// Still moving on its own (PROCESSING, a due job, a pending delivery).
    Busy,
    /// Closed without an outcome of its own (a withdrawn request), or a name not known.
    Other,
}

impl Tone {
    /// The stylesheet's class for the family (`style/main.css`, `.st-*`).
    pub fn class(self) -> &'static str {
        match self {
            Tone::Ok => "st-ok",
            Tone::Bad => "st-bad",
            Tone::Warn => "st-warn",
            Tone::Busy => "st-busy",
            Tone::Other => "st-other",
        }
    }
}

/// What a status pill shows: the status's stored name and its colour family. Built from any
/// lifecycle's status ([`Toned`]), or from a payment status name as an event record carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pill {
    /// The name as stored and sent (`SUCCESS`, `due`, `open`, ...).
    pub name: String,
    /// Its colour family.
    pub tone: Tone,
}

impl Pill {
    /// A payment status given by name (an event's `from_status`); a name that is not one
    /// is shown as it is, uncoloured.
    pub fn payment(name: &str) -> Pill {
        match name.parse::<crate::dto::PaymentStatus>() {
            Ok(status) => status.into(),
            Err(_) => Pill {
                name: name.to_string(),
                tone: Tone::Other,
            },
        }
    }
}

/// A status of one of the console's lifecycles with its colour family: each lifecycle's match
/// is exhaustive, so a new status does not compile until it has a colour. The pill shows its
/// stored name (`Display`).
pub trait Toned: Copy + std::fmt::Display {
    /// The status's colour family.
    fn tone(self) -> Tone;
}

impl<T: Toned> From<T> for Pill {
    fn from(s: T) -> Pill {
        Pill {
            name: s.to_string(),
            tone: s.tone(),
        }
    }
}

impl Toned for crate::dto::PaymentStatus {
    fn tone(self) -> Tone {
        use crate::dto::PaymentStatus as P;
        match self {
            P::Success | P::Refunded => Tone::Ok,
            P::Failed | P::Reversed => Tone::Bad,
            P::Unknown | P::Suspense => Tone::Warn,
            P::Pending | P::Processing | P::ChannelSuccess => Tone::Busy,
            // Waiting for the customer's 3-D Secure step (issue 38): in flight, not a fault.
            P::RequiresAction => Tone::Busy,
            // A hold (issue 34): open or in flight until captured, voided or lapsed; a hold
            // that ended without a capture closed without an outcome of its own.
            P::Authorizing | P::Authorized | P::Capturing | P::Voiding => Tone::Busy,
            P::Voided | P::Expired | P::Canceled => Tone::Other,
        }
    }
}

impl Toned for crate::dto::JobStatus {
    fn tone(self) -> Tone {
        use crate::dto::JobStatus as J;
        match self {
            J::Done => Tone::Ok,
            J::Dead => Tone::Bad,
            J::Due | J::Leased => Tone::Busy,
        }
    }
}

impl Toned for crate::dto::RefundStatus {
    fn tone(self) -> Tone {
        use crate::dto::RefundStatus as R;
        match self {
            R::Succeeded => Tone::Ok,
            R::Failed => Tone::Bad,
            R::Pending => Tone::Busy,
        }
    }
}

impl Toned for crate::dto::ActionStatus {
    fn tone(self) -> Tone {
        use crate::dto::ActionStatus as A;
        match self {
            A::Executed => Tone::Ok,
            // Run and stopped short: a person executes it again.
            A::Failed => Tone::Bad,
            A::Pending | A::Approved => Tone::Busy,
            // Closed undone, as a rejected or cancelled pause is.
            A::Rejected | A::Expired | A::Cancelled | A::Stale => Tone::Other,
        }
    }
}

impl Toned for crate::dto::DeliveryStatus {
    fn tone(self) -> Tone {
        use crate::dto::DeliveryStatus as D;
        match self {
            D::Succeeded => Tone::Ok,
            D::Dead => Tone::Bad,
            D::Pending => Tone::Busy,
            D::Abandoned => Tone::Other,
        }
    }
}

impl Toned for crate::dto::EndpointStatus {
    fn tone(self) -> Tone {
        use crate::dto::EndpointStatus as E;
        match self {
            E::Enabled => Tone::Ok,
            E::Disabled => Tone::Bad,
            E::Deleted => Tone::Other,
        }
    }
}

impl Toned for crate::dto::ErrorItemStatus {
    fn tone(self) -> Tone {
        use crate::dto::ErrorItemStatus as I;
        match self {
            I::Resolved => Tone::Ok,
            I::Open => Tone::Warn,
        }
    }
}

impl Toned for crate::dto::KeyState {
    fn tone(self) -> Tone {
        use crate::dto::KeyState as K;
        match self {
            K::Done => Tone::Ok,
            K::Running => Tone::Busy,
        }
    }
}

impl Toned for crate::dto::PauseStatus {
    fn tone(self) -> Tone {
        use crate::dto::PauseStatus as S;
        match self {
            // In force: work is held until someone resumes it.
            S::Active => Tone::Warn,
            S::Pending => Tone::Busy,
            S::Resumed => Tone::Ok,
            S::Rejected | S::Cancelled => Tone::Other,
        }
    }
}

/// An endpoint's delivery health over 24 h as the console says it: "no attempts", or
/// "12 attempts, 91.7 % ok".
pub fn endpoint_health(attempts: i64, succeeded: i64) -> String {
    if attempts == 0 {
        "no attempts".to_string()
    } else {
        format!(
            "{attempts} attempts, {} ok",
            percent(succeeded as f64 / attempts as f64)
        )
    }
}

/// Percent-encodes a query-string value (everything but unreserved characters).
pub fn query_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for b in v.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The sign-in page that returns to `here` (a path with its query) once signed in:
/// `/payments/pay_1` → `/login?next=%2Fpayments%2Fpay_1`; the dashboard needs no `next`.
pub fn login_returning_to(here: &str) -> String {
    if here.is_empty() || here == "/" || here.starts_with("/login") {
        "/login".into()
    } else {
        format!("/login?next={}", query_escape(here))
    }
}

/// Where to go after signing in: `next` when it is a path on this console, else the
/// dashboard. Only a single leading `/` is accepted, so `//evil.example`, `/\evil.example`,
/// `https://...` and control characters cannot turn the sign-in page into an open redirect
/// (OWASP Unvalidated Redirects and Forwards Cheat Sheet).
pub fn after_sign_in(next: Option<&str>) -> String {
    match next {
        Some(n)
            if n.starts_with('/')
                && !n.starts_with("//")
                && !n.starts_with("/\\")
                && !n.starts_with("/login")
                && !n.chars().any(|c| c.is_control() || c == '\\') =>
        {
            n.to_string()
        }
        _ => "/".into(),
    }
}

/// A query string (`?a=1&b=x%20y`) of the non-blank pairs; empty when all are blank.
pub fn query_string(pairs: &[(&str, Option<&str>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(k, v)| {
            v.map(str::trim)
                .filter(|v| !v.is_empty())
                .map(|v| format!("{k}={}", query_escape(v)))
        })
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

/// A zone offset as the time filters write it: `+08:00`, `-05:30`; `+00:00` for UTC.
pub fn offset_text(minutes_east: i32) -> String {
    let sign = if minutes_east < 0 { '-' } else { '+' };
    let off = minutes_east.unsigned_abs();
    format!("{sign}{:02}:{:02}", off / 60, off % 60)
}

/// Whether `tz` is an offset as [`offset_text`] writes it (`+08:00`): what a filter URL's
/// `tz=` may hold; anything else is ignored and the filter reads as UTC.
pub fn is_offset(tz: &str) -> bool {
    let b = tz.as_bytes();
    b.len() == 6
        && matches!(b[0], b'+' | b'-')
        && b[1..3].iter().all(u8::is_ascii_digit)
        && b[3] == b':'
        && b[4..6].iter().all(u8::is_ascii_digit)
}

/// [`as_rfc3339`] in a zone: a `datetime-local` value (`YYYY-MM-DDTHH:MM[:SS]`) meant in `tz`
/// (an [`is_offset`] offset such as `+08:00`; `None` or anything else: UTC) becomes RFC 3339
/// with that offset, so the server reads the instant the person meant (issue 41: with local
/// times switched on, the filters still read as UTC).
pub fn as_rfc3339_in(v: Option<String>, tz: Option<&str>) -> Option<String> {
    let utc = as_rfc3339(v.clone())?;
    let naive = v.is_some_and(|v| utc != v.trim() && utc.ends_with('Z'));
    match tz.filter(|t| is_offset(t)) {
        Some(t) if naive => Some(format!("{}{t}", &utc[..utc.len() - 1])),
        _ => Some(utc),
    }
}

/// A time filter as the search expects it: `YYYY-MM-DDTHH:MM[:SS]` (what a browser's
/// datetime-local input sends, meant as UTC here) becomes RFC 3339 with `Z`; anything else is
/// passed on trimmed, for the search to accept (`YYYY-MM-DD`, RFC 3339) or refuse with its
/// own message.
pub fn as_rfc3339(v: Option<String>) -> Option<String> {
    let v = v?.trim().to_string();
    let b = v.as_bytes();
    let shaped = |len: usize, colon: usize| {
        b.len() == len && b.get(10) == Some(&b'T') && b.get(colon) == Some(&b':')
    };
    Some(if shaped(16, 13) {
        format!("{v}:00Z")
    } else if shaped(19, 16) {
        format!("{v}Z")
    } else {
        v
    })
}

/// The flash of a console change that became a privilege request (issue 36): its id and
/// what it asks, waiting for another admin on the Approvals page.
pub fn awaiting(r: &converge_wire::PrivilegeRequest) -> String {
    format!(
        "Request {} ({}) awaits another admin's approval on the Approvals page.",
        r.id, r.reason
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_breaker_reads_closed_open_until_a_utc_time_or_half_open() {
        use converge_wire::BreakerStatus;
        assert_eq!(breaker(BreakerStatus::Closed, None), "breaker closed");
        assert_eq!(
            breaker(BreakerStatus::Open, Some(3_723_000)),
            "breaker open until 01:02:03 UTC"
        );
        assert_eq!(breaker(BreakerStatus::HalfOpen, None), "breaker half-open");
    }

    #[test]
    fn a_filter_time_meant_in_a_zone_carries_its_offset() {
        let v = |s: &str| Some(s.to_string());
        assert_eq!(
            as_rfc3339_in(v("2026-12-03T10:00"), Some("+08:00")).as_deref(),
            Some("2026-12-03T10:00:00+08:00")
        );
        assert_eq!(
            as_rfc3339_in(v("2026-12-03T10:00:30"), Some("-05:30")).as_deref(),
            Some("2026-12-03T10:00:30-05:30")
        );
        // UTC without a zone, or with one that is not an offset.
        assert_eq!(
            as_rfc3339_in(v("2026-12-03T10:00"), None).as_deref(),
            Some("2026-12-03T10:00:00Z")
        );
        assert_eq!(
            as_rfc3339_in(v("2026-12-03T10:00"), Some("Asia/Shanghai")).as_deref(),
            Some("2026-12-03T10:00:00Z")
        );
        // A day or a full RFC 3339 time says its own zone.
        assert_eq!(
            as_rfc3339_in(v("2026-12-03"), Some("+08:00")).as_deref(),
            Some("2026-12-03")
        );
        assert_eq!(
            as_rfc3339_in(v("2026-12-03T10:00:00Z"), Some("+08:00")).as_deref(),
            Some("2026-12-03T10:00:00Z")
        );
        assert_eq!(offset_text(480), "+08:00");
        assert_eq!(offset_text(-330), "-05:30");
        assert_eq!(offset_text(0), "+00:00");
        assert!(is_offset("+08:00") && !is_offset("08:00") && !is_offset("+8:00"));
    }

    use super::*;

    #[test]
    fn a_request_names_its_forced_target_and_who_decided_why() {
        let mut a = crate::dto::ActionRecord {
            id: "act_1".into(),
            kind: "force_transition".into(),
            payment_id: "pay_1".into(),
            requested_by: "alice".into(),
            reason: "bank confirmed".into(),
            evidence: String::new(),
            target_status: Some("SUCCESS".into()),
            payment_version: 3,
            status: crate::dto::ActionStatus::Pending,
            decided_by: None,
            decision_reason: None,
            result: None,
            created_at: 0,
            expires_at: 1,
            decided_at: None,
            executed_at: None,
            capture_amount: None,
            capture_final: None,
        };
        assert_eq!(action_kind(&a), "force_transition → SUCCESS");
        let capture = crate::dto::ActionRecord {
            kind: "capture".into(),
            target_status: None,
            capture_amount: Some(4_000),
            capture_final: Some(false),
            ..a.clone()
        };
        assert_eq!(action_kind(&capture), "capture (partial)");
        let last = crate::dto::ActionRecord {
            capture_final: Some(true),
            ..capture
        };
        assert_eq!(action_kind(&last), "capture (final)");
        assert_eq!(action_decision(&a), "—");
        a.decided_by = Some("bob".into());
        a.decision_reason = Some(String::new());
        assert_eq!(action_decision(&a), "bob", "an empty reason is not shown");
        a.decision_reason = Some("checked".into());
        assert_eq!(action_decision(&a), "bob: checked");
        a.target_status = None;
        a.kind = "reverse".into();
        assert_eq!(action_kind(&a), "reverse");
    }

    #[test]
    fn local_times_carry_their_offset_and_cross_midnight() {
        // 2026-11-28 20:30:00 UTC.
        let ms = 1_795_897_800_000;
        assert_eq!(utc(ms), "2026-11-28 20:30:00 UTC");
        assert_eq!(zoned(ms, 0), "2026-11-28 20:30:00 UTC");
        assert_eq!(zoned(ms, 480), "2026-11-29 04:30:00 +08:00");
        assert_eq!(zoned(ms, -210), "2026-11-28 17:00:00 -03:30");
        assert_eq!(iso(ms + 7), "2026-11-28T20:30:00.007Z");
    }

    #[test]
    fn sign_in_returns_only_to_paths_on_this_console() {
        assert_eq!(
            login_returning_to("/payments/pay_1?x=a b"),
            "/login?next=%2Fpayments%2Fpay_1%3Fx%3Da%20b"
        );
        assert_eq!(login_returning_to("/"), "/login");
        assert_eq!(login_returning_to("/login?next=%2F"), "/login");
        assert_eq!(
            after_sign_in(Some("/payments/pay_1?x=1")),
            "/payments/pay_1?x=1"
        );
        for bad in [
            "//evil.example/x",
            "/\\evil.example",
            "https://evil.example",
            "javascript:alert(1)",
            "/a\nb",
            "/login",
            "",
        ] {
            assert_eq!(after_sign_in(Some(bad)), "/", "{bad:?}");
        }
        assert_eq!(after_sign_in(None), "/");
    }

    #[test]
    fn utc_times_match_known_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_796_017_725_947), "2026-11-30 05:48:45 UTC");
        assert_eq!(utc(951_782_400_000), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc(-1000), "1969-12-31 23:59:59 UTC");
        assert_eq!(utc_time(1_796_017_725_947), "05:48:45 UTC");
    }

    #[test]
    fn ages_read_naturally() {
        assert_eq!(age(-5), "0s");
        assert_eq!(age(42_000), "42s");
        assert_eq!(age(192_000), "3m 12s");
        assert_eq!(age(7_500_000), "2h 05m");
        assert_eq!(age(273_600_000), "3d 4h");
        assert_eq!(threshold(0), "at once");
        assert_eq!(threshold(120_000), "2m");
        assert_eq!(threshold(90_000), "1m 30s");
    }

    #[test]
    fn amounts_use_the_currency_exponent() {
        assert_eq!(money(1999, "CNY"), "19.99 CNY");
        assert_eq!(money(5, "USD"), "0.05 USD");
        assert_eq!(money(-250, "USD"), "-2.50 USD");
        assert_eq!(money(500, "JPY"), "500 JPY");
        assert_eq!(money(1234, "KWD"), "1.234 KWD");
        assert_eq!(money(i64::MIN, "USD"), "-92233720368547758.08 USD");
    }

    #[test]
    fn helpers_never_panic_on_odd_input() {
        assert_eq!(percent(0.25), "25.0%");
        assert_eq!(percent(f64::NAN), "–");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("åäö", 3), "åäö");
        assert_eq!(pretty_json("not json"), "not json");
        assert!(pretty_json(r#"{"a":1}"#).contains("\"a\": 1"));
    }

    #[test]
    fn payment_statuses_and_the_other_lifecycles_get_their_family_colour() {
        use crate::dto::{JobStatus, PauseStatus, PaymentStatus};
        assert_eq!(
            Pill::from(PaymentStatus::ChannelSuccess).tone.class(),
            "st-busy"
        );
        assert_eq!(Pill::from(PaymentStatus::Refunded).tone, Tone::Ok);
        assert_eq!(Pill::from(PaymentStatus::Reversed).tone, Tone::Bad);
        assert_eq!(Pill::from(PaymentStatus::Suspense).tone, Tone::Warn);
        assert_eq!(Pill::from(JobStatus::Due).tone, Tone::Busy);
        assert_eq!(Pill::from(JobStatus::Dead).tone, Tone::Bad);
        assert_eq!(Pill::from(PauseStatus::Active).tone, Tone::Warn);
        assert_eq!(
            Pill::payment("SUSPENSE"),
            Pill::from(PaymentStatus::Suspense)
        );
        assert_eq!(Pill::payment("SUSPENSE").name, "SUSPENSE");
        // Payment statuses are upper case: the lower-case spelling is not one of them.
        assert_eq!(Pill::payment("success").tone, Tone::Other);
        assert_eq!(Pill::payment("success").name, "success");
    }

    #[test]
    fn evidence_reads_as_fields_with_amounts_and_times_formatted() {
        let f = json_fields(
            r#"{"channel":{"amount":18857,"currency":"CNY"},"local":{"amount":18800,"currency":"CNY"},"channel_key":"ck_1","last_error":null,"created_at":1796017725947,"attempts":3}"#,
        );
        assert_eq!(
            f,
            vec![
                ("Attempts".to_string(), "3".to_string()),
                ("Channel".to_string(), "188.57 CNY".to_string()),
                ("Channel key".to_string(), "ck_1".to_string()),
                (
                    "Created at".to_string(),
                    "2026-11-30 05:48:45 UTC".to_string()
                ),
                ("Local".to_string(), "188.00 CNY".to_string()),
            ]
        );
        let f = json_fields(
            r#"{"payment":{"id":"pay_1","status":"SUCCESS","amount":500,"currency":"JPY"}}"#,
        );
        assert_eq!(
            f,
            vec![
                ("Payment".to_string(), "500 JPY".to_string()),
                ("Payment · Id".to_string(), "pay_1".to_string()),
                ("Payment · Status".to_string(), "SUCCESS".to_string()),
            ]
        );
        assert_eq!(
            json_fields(r#"{"status":"REVERSED","refunded_at_channel":3100}"#),
            vec![
                (
                    "Refunded at channel (minor units)".to_string(),
                    "3100".to_string()
                ),
                ("Status".to_string(), "REVERSED".to_string()),
            ],
            "an amount without a currency is never shown as if in major units"
        );
        assert_eq!(
            json_fields(r#"{"status":"REVERSED","refunded_at_channel":3100,"currency":"CNY"}"#),
            vec![
                ("Refunded at channel".to_string(), "31.00 CNY".to_string()),
                ("Status".to_string(), "REVERSED".to_string()),
            ],
            "the currency is said with the amount, not on a row of its own"
        );
        assert_eq!(
            json_fields_in(r#"{"refunded_at_channel":3100}"#, Some("CNY")),
            vec![("Refunded at channel".to_string(), "31.00 CNY".to_string())]
        );
        assert_eq!(
            json_fields(r#"{"created_at":1796017725}"#),
            vec![(
                "Created at".to_string(),
                "2026-11-30 05:48:45 UTC".to_string()
            )],
            "epoch seconds too"
        );
        assert!(json_fields("not json").is_empty());
        assert!(json_fields("[1,2]").is_empty());
    }

    #[test]
    fn datetime_local_values_become_utc_rfc3339() {
        let f = |v: &str| as_rfc3339(Some(v.to_string()));
        assert_eq!(f("2026-11-30T05:48"), Some("2026-11-30T05:48:00Z".into()));
        assert_eq!(
            f(" 2026-11-30T05:48:07 "),
            Some("2026-11-30T05:48:07Z".into())
        );
        assert_eq!(f("2026-11-30"), Some("2026-11-30".into()));
        assert_eq!(
            f("2026-11-30T05:48:07+08:00"),
            Some("2026-11-30T05:48:07+08:00".into())
        );
        assert_eq!(f("garbage"), Some("garbage".into()));
        assert_eq!(as_rfc3339(None), None);
    }

    #[test]
    fn query_strings_escape_and_skip_blanks() {
        assert_eq!(query_escape("a b&c/é"), "a%20b%26c%2F%C3%A9");
        assert_eq!(
            query_string(&[
                ("status", Some("UNKNOWN")),
                ("merchant", Some(" ")),
                ("to", None)
            ]),
            "?status=UNKNOWN"
        );
        assert_eq!(query_string(&[("x", None)]), "");
    }
}

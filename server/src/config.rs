//! Settings for `converge serve` and `converge worker`: flags with environment equivalents
//! (DESIGN.md "Command line"). Every timing is configurable so tests and demos run fast.

use std::net::SocketAddr;
use std::time::Duration;

use crate::domain::backoff::{RetryOverrides, RetryPolicy};
use crate::store::JobKind;

// Timings are bounded so that adding one to a clock reading can never overflow: a mistyped
// huge value is refused at start-up with clap's one-line error, not a panic later.
/// Millisecond timings: 0 to 30 days.
fn ms_range_u64() -> clap::builder::RangedU64ValueParser<u64> {
    clap::builder::RangedU64ValueParser::new().range(0..=2_592_000_000)
}
/// Millisecond thresholds: 0 to 30 days.
fn ms_range_i64() -> clap::builder::RangedI64ValueParser<i64> {
    clap::builder::RangedI64ValueParser::new().range(0..=2_592_000_000)
}
/// Second timings: 0 to 10 years.
fn secs_range_u64() -> clap::builder::RangedU64ValueParser<u64> {
    clap::builder::RangedU64ValueParser::new().range(0..=315_360_000)
}

/// Parses `--retry-policy` (see [`RetryOverrides::parse`]) against the job kinds.
fn parse_retry_overrides(spec: &str) -> Result<RetryOverrides, String> {
    RetryOverrides::parse(spec, &JobKind::ALL.map(JobKind::as_str))
}

/// Shortest secret accepted at start-up, in bytes (`--callback-secret`): an HMAC-SHA256 key
/// should be at least as long as the hash's output (RFC 2104 section 3), 32 bytes.
pub const MIN_SECRET_BYTES: usize = 32;

/// Refuses a secret shorter than [`MIN_SECRET_BYTES`], naming the flag, in one line.
pub fn check_secret(flag: &str, secret: &str) -> Result<(), String> {
    if secret.len() < MIN_SECRET_BYTES {
        return Err(format!(
            "{flag} must be at least {MIN_SECRET_BYTES} bytes (it has {}); make one with `openssl rand -hex 32`",
            secret.len()
        ));
    }
    Ok(())
}

impl Settings {
    /// The Host names the console answers to: `--allowed-hosts`, or by default the bind
    /// address, `localhost`, `127.0.0.1` and `::1`; lowercase, without port or brackets.
    pub fn allowed_host_names(&self) -> Vec<String> {
        let mut hosts: Vec<String> = if self.allowed_hosts.is_empty() {
            vec![
                self.bind.ip().to_string(),
                "localhost".into(),
                "127.0.0.1".into(),
                "::1".into(),
            ]
        } else {
            self.allowed_hosts.clone()
        };
        for h in &mut hosts {
            *h = h
                .trim()
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase();
        }
        hosts.retain(|h| !h.is_empty());
        hosts
    }
}

/// The host name of a `Host` header value (`name:port`, `[v6]:port`), lowercase.
pub fn host_name(value: &str) -> String {
    let v = value.trim();
    let name = if let Some(rest) = v.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default()
    } else {
        v.rsplit_once(':')
            .filter(|(_, port)| port.chars().all(|c| c.is_ascii_digit()))
            .map_or(v, |(name, _)| name)
    };
    name.trim_end_matches('.').to_ascii_lowercase()
}

/// Settings of the core (API, workers, in-process sandbox channel).
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Database: a SQLite path (`data/converge.db`, `sqlite:PATH`) or `postgres://USER:PASS@HOST/DB`.
    // Secret-bearing values (a password in a URL, the HMAC key) are hidden from `--help`, which
    // would otherwise print them from the environment.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "data/converge.db",
        hide_env_values = true
    )]
    pub database_url: String,

    /// Address the HTTP server listens on (API, console, /health, /metrics).
    #[arg(long, env = "CONVERGE_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,

    /// Host names (comma-separated, no port) the console and the ops API answer to; requests
    /// naming another Host get 403 `host_not_allowed`, so a DNS-rebinding page cannot read
    /// them. Default: the bind address, `localhost`, `127.0.0.1` and `::1`. The merchant API,
    /// `/health` and `/metrics` answer any Host.
    #[arg(long, env = "CONVERGE_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Base URL of an external channel (e.g. a `converge channel-sim`); without it the sandbox
    /// channel starts in-process.
    #[arg(long, env = "CONVERGE_CHANNEL_URL", hide_env_values = true)]
    pub channel_url: Option<String>,

    /// Address of the in-process sandbox channel (port 0: any free port).
    #[arg(long, env = "CONVERGE_CHANNEL_BIND", default_value = "127.0.0.1:0")]
    pub channel_bind: SocketAddr,

    /// SQLite file of the in-process sandbox channel's own store.
    #[arg(long, env = "CONVERGE_CHANNEL_DB", default_value = "data/channel.db")]
    pub channel_db: String,

    /// HMAC secret shared with the channel for signed callbacks, at least 32 bytes. Required
    /// with --channel-url; a random one is made for the in-process sandbox.
    #[arg(long, env = "CONVERGE_CALLBACK_SECRET", hide_env_values = true)]
    pub callback_secret: Option<String>,

    /// How long the core waits for a channel answer before the payment becomes UNKNOWN (ms).
    #[arg(long, env = "CONVERGE_CHANNEL_TIMEOUT_MS", default_value_t = 2_000, value_parser = ms_range_u64())]
    pub channel_timeout_ms: u64,

    /// How long an Idempotency-Key and its response are kept (seconds; at least 24 h in
    /// production per DESIGN.md).
    #[arg(long, env = "CONVERGE_KEY_RETENTION_SECS", default_value_t = 86_400, value_parser = secs_range_u64())]
    pub key_retention_secs: u64,

    /// How long a request's claim on a key lasts before a retry may resume it (ms).
    #[arg(long, env = "CONVERGE_KEY_LEASE_MS", default_value_t = 30_000, value_parser = ms_range_u64())]
    pub key_lease_ms: u64,

    /// Delay before a payment's submit job becomes due, so the request finishes it first (ms).
    #[arg(long, env = "CONVERGE_SUBMIT_DELAY_MS", default_value_t = 10_000, value_parser = ms_range_u64())]
    pub submit_delay_ms: u64,

    /// Delay before the first query of an UNKNOWN payment (ms).
    #[arg(long, env = "CONVERGE_QUERY_DELAY_MS", default_value_t = 2_000, value_parser = ms_range_u64())]
    pub query_delay_ms: u64,

    /// Attempts before a job goes to the error pool.
    #[arg(long, env = "CONVERGE_MAX_ATTEMPTS", default_value_t = 8)]
    pub max_attempts: i64,

    /// Largest request body accepted on the merchant API (bytes).
    #[arg(long, env = "CONVERGE_BODY_LIMIT", default_value_t = 64 * 1024)]
    pub body_limit: usize,

    /// How often expired Idempotency-Keys are purged (seconds).
    #[arg(long, env = "CONVERGE_PURGE_INTERVAL_SECS", default_value_t = 600, value_parser = secs_range_u64())]
    pub purge_interval_secs: u64,

    /// Times a not-found payment is resubmitted with its channel key (after the first
    /// submission) before the key is cancelled at the channel and the payment fails.
    #[arg(long, env = "CONVERGE_RESUBMIT_BUDGET", default_value_t = 3)]
    pub resubmit_budget: i64,

    /// Do not run the compensation workers in this process (`serve` only).
    #[arg(long, env = "CONVERGE_NO_WORKERS")]
    pub no_workers: bool,

    /// Jobs a worker claims at once.
    #[arg(long, env = "CONVERGE_WORKER_BATCH", default_value_t = 16)]
    pub worker_batch: i64,

    /// How long a worker sleeps when no job is due (ms).
    #[arg(long, env = "CONVERGE_POLL_MS", default_value_t = 500, value_parser = ms_range_u64())]
    pub poll_ms: u64,

    /// How long a claimed job stays leased to its worker (ms).
    #[arg(long, env = "CONVERGE_LEASE_MS", default_value_t = 30_000, value_parser = ms_range_u64())]
    pub lease_ms: u64,

    /// First retry ceiling of the exponential backoff (ms; full jitter below it).
    #[arg(long, env = "CONVERGE_BACKOFF_BASE_MS", default_value_t = 1_000, value_parser = ms_range_u64())]
    pub backoff_base_ms: u64,

    /// Largest retry ceiling (ms).
    #[arg(long, env = "CONVERGE_BACKOFF_CAP_MS", default_value_t = 300_000, value_parser = clap::value_parser!(u64).range(1..=crate::domain::backoff::MAX_CAP_MS))]
    pub backoff_cap_ms: u64,

    /// Per-kind retry limits, `KIND=CAP_MS/MAX_ATTEMPTS[,...]` (either side of `/` may be
    /// empty), e.g. `query=60000/20,post_ledger=/50`. Kinds: submit, query, post_ledger,
    /// refund, webhook, reconcile, purge. Kinds not named use --backoff-cap-ms and
    /// --max-attempts.
    #[arg(long, env = "CONVERGE_RETRY_POLICY", default_value = "", value_parser = parse_retry_overrides)]
    pub retry_policy: RetryOverrides,

    /// When the previous UTC day's channel statement is reconciled: this long after midnight
    /// UTC (seconds). The reconcile job is queued once a day by whichever process gets there
    /// first; `converge reconcile --date D` runs one by hand.
    #[arg(long, env = "CONVERGE_RECONCILE_AFTER_SECS", default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(0..86_400))]
    pub reconcile_after_secs: u64,

    /// Do not queue the daily reconciliation from this process.
    #[arg(long, env = "CONVERGE_NO_DAILY_RECONCILE")]
    pub no_daily_reconcile: bool,

    /// Ed25519 private key (PKCS#8 PEM, from `converge audit keygen`) that signs audit
    /// checkpoints. Keep it outside the database. Without it no checkpoint is signed.
    #[arg(long, env = "CONVERGE_AUDIT_SIGNING_KEY")]
    pub audit_signing_key: Option<std::path::PathBuf>,

    /// Seconds between periodic audit checkpoints (one is also signed on every export).
    #[arg(long, env = "CONVERGE_AUDIT_CHECKPOINT_SECS", default_value_t = 300)]
    pub audit_checkpoint_secs: u64,

    /// Seed of the backoff jitter (0: from the OS).
    #[arg(long, env = "CONVERGE_SEED", default_value_t = 0)]
    pub seed: u64,

    /// PENDING longer than this is stuck (ms).
    #[arg(long, env = "CONVERGE_STUCK_PENDING_MS", default_value_t = 60_000, value_parser = ms_range_i64())]
    pub stuck_pending_ms: i64,

    /// PROCESSING longer than this is stuck (ms).
    #[arg(long, env = "CONVERGE_STUCK_PROCESSING_MS", default_value_t = 120_000, value_parser = ms_range_i64())]
    pub stuck_processing_ms: i64,

    /// UNKNOWN longer than this is stuck (ms).
    #[arg(long, env = "CONVERGE_STUCK_UNKNOWN_MS", default_value_t = 300_000, value_parser = ms_range_i64())]
    pub stuck_unknown_ms: i64,

    /// CHANNEL_SUCCESS longer than this is stuck (ms).
    #[arg(
        long,
        env = "CONVERGE_STUCK_CHANNEL_SUCCESS_MS",
        default_value_t = 60_000, value_parser = ms_range_i64()
    )]
    pub stuck_channel_success_ms: i64,

    /// SUSPENSE longer than this is stuck (ms; 0: at once).
    #[arg(long, env = "CONVERGE_STUCK_SUSPENSE_MS", default_value_t = 0, value_parser = ms_range_i64())]
    pub stuck_suspense_ms: i64,

    /// How often the stuck and queue gauges of /metrics are refreshed (ms).
    #[arg(long, env = "CONVERGE_MONITOR_MS", default_value_t = 15_000, value_parser = ms_range_u64())]
    pub monitor_ms: u64,

    /// Console sessions end after this long without a request (seconds).
    #[arg(long, env = "CONVERGE_IDLE_TIMEOUT_SECS", default_value_t = 900, value_parser = secs_range_u64())]
    pub idle_timeout_secs: u64,

    /// Console sessions end this long after login, active or not (seconds).
    #[arg(long, env = "CONVERGE_ABSOLUTE_TIMEOUT_SECS", default_value_t = 28_800, value_parser = secs_range_u64())]
    pub absolute_timeout_secs: u64,

    /// Mark the session cookie Secure (set when converge is served over TLS, e.g. behind a
    /// TLS-terminating proxy).
    #[arg(long, env = "CONVERGE_SECURE_COOKIES")]
    pub secure_cookies: bool,

    /// Failed password checks (sign-ins and approvals) one account may have from one client
    /// address before each further attempt from there waits a delay that doubles
    /// (--login-delay-base-ms, 2x, 4x, ... up to --login-delay-max-secs). Counted in the
    /// database, so every server sharing it agrees; other addresses are not slowed.
    #[arg(long, env = "CONVERGE_LOGIN_LIMIT_PER_USER", default_value_t = 5)]
    pub login_limit_per_user: usize,

    /// Failed password checks allowed per client address in the login window, whatever the
    /// account (counted in the database).
    #[arg(long, env = "CONVERGE_LOGIN_LIMIT_PER_ADDR", default_value_t = 30)]
    pub login_limit_per_addr: usize,

    /// The per-address login window (seconds).
    #[arg(long, env = "CONVERGE_LOGIN_WINDOW_SECS", default_value_t = 300, value_parser = secs_range_u64())]
    pub login_window_secs: u64,

    /// The first delay of an (account, address) past --login-limit-per-user (ms).
    #[arg(long, env = "CONVERGE_LOGIN_DELAY_BASE_MS", default_value_t = 1_000, value_parser = ms_range_u64())]
    pub login_delay_base_ms: u64,

    /// The longest delay of an (account, address) (seconds).
    #[arg(long, env = "CONVERGE_LOGIN_DELAY_MAX_SECS", default_value_t = 900, value_parser = secs_range_u64())]
    pub login_delay_max_secs: u64,

    /// Proxies (IP addresses or CIDRs; repeat the flag or separate with commas) whose
    /// `X-Forwarded-For` is believed: from one of them the client address is the rightmost
    /// hop that is not itself a trusted proxy. From any other peer the header is ignored and
    /// the peer's address is the client's. Default: none.
    #[arg(long = "trusted-proxy", env = "CONVERGE_TRUSTED_PROXY", value_delimiter = ',', value_parser = parse_cidr)]
    pub trusted_proxies: Vec<crate::domain::netaddr::Cidr>,

    /// Password hashes computed at once (each argon2id hash takes ~19 MiB and one core).
    #[arg(long, env = "CONVERGE_HASH_PERMITS", default_value_t = 2)]
    pub hash_permits: usize,

    /// How long a pending action request stays approvable (seconds).
    #[arg(long, env = "CONVERGE_ACTION_TTL_SECS", default_value_t = 86_400, value_parser = secs_range_u64())]
    pub action_ttl_secs: u64,

    /// In-process sandbox: delay of digits-52 answers (ms).
    #[arg(long, env = "CONVERGE_SANDBOX_SLOW_MS", default_value_t = 5_000, value_parser = ms_range_u64())]
    pub sandbox_slow_ms: u64,

    /// In-process sandbox: hang of digits-53 requests (ms).
    #[arg(long, env = "CONVERGE_SANDBOX_HANG_MS", default_value_t = 5_000, value_parser = ms_range_u64())]
    pub sandbox_hang_ms: u64,

    /// In-process sandbox: delay between a commit and its callbacks (ms). Tests that need the
    /// core's timeout to come first (digits 52 ending UNKNOWN, then settled by the callback)
    /// widen the gap with it.
    #[arg(
        long,
        env = "CONVERGE_SANDBOX_CALLBACK_DELAY_MS",
        default_value_t = 200, value_parser = ms_range_u64()
    )]
    pub sandbox_callback_delay_ms: u64,

    /// Waits before each webhook attempt, comma-separated, each a whole number with `ms`,
    /// `s`, `m`, `h` or `d`: the first is the delay of the first attempt, each later one the
    /// wait after a failed attempt (±10 % jitter). After the last attempt the delivery is dead
    /// and an error-pool item (`webhook_exhausted`) names it.
    #[arg(long, env = "CONVERGE_WEBHOOK_RETRY_SCHEDULE", default_value = crate::domain::webhooks::DEFAULT_SCHEDULE, value_parser = parse_schedule)]
    pub webhook_retry_schedule: crate::domain::webhooks::RetrySchedule,

    /// How long one webhook attempt may take, connection to last byte (ms).
    #[arg(long, env = "CONVERGE_WEBHOOK_TIMEOUT_MS", default_value_t = 15_000, value_parser = clap::value_parser!(u64).range(1..=300_000))]
    pub webhook_timeout_ms: u64,

    /// Allow webhook endpoints on loopback, private and link-local addresses (tests and local
    /// development only: in production they let a merchant reach inside the network).
    #[arg(long, env = "CONVERGE_WEBHOOK_ALLOW_PRIVATE")]
    pub webhook_allow_private: bool,

    /// How long a rotated-out webhook secret keeps signing beside the new one (seconds).
    #[arg(long, env = "CONVERGE_WEBHOOK_SECRET_OVERLAP_SECS", default_value_t = 86_400, value_parser = secs_range_u64())]
    pub webhook_secret_overlap_secs: u64,

    /// An endpoint whose every attempt failed for this long is disabled (seconds).
    #[arg(long, env = "CONVERGE_WEBHOOK_DISABLE_AFTER_SECS", default_value_t = 432_000, value_parser = secs_range_u64())]
    pub webhook_disable_after_secs: u64,

    /// NATS server to relay the outbox to (JetStream), `nats://HOST:PORT`; without it no
    /// relay runs.
    #[arg(long, env = "CONVERGE_NATS_URL", hide_env_values = true)]
    pub nats_url: Option<String>,

    /// Subject prefix: events go to `{prefix}.{aggregatetype}.{type}`.
    #[arg(long, env = "CONVERGE_NATS_PREFIX", default_value = "converge")]
    pub nats_prefix: String,

    /// JetStream stream the relay publishes to (created with subjects `{prefix}.>` when
    /// missing).
    #[arg(long, env = "CONVERGE_NATS_STREAM", default_value = "CONVERGE")]
    pub nats_stream: String,

    /// Duplicate window of a stream the relay creates (seconds); it and an existing stream's
    /// window must be at least 3 x --relay-lease-ms.
    #[arg(long, env = "CONVERGE_NATS_DUPLICATE_WINDOW_SECS", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86_400 * 7))]
    pub nats_duplicate_window_secs: u64,

    /// How long the relay's hold on the publishing position lasts without renewal (ms).
    #[arg(long, env = "CONVERGE_RELAY_LEASE_MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub relay_lease_ms: u64,

    /// Published events are purged after this long (seconds), once their webhook
    /// deliveries are finished.
    #[arg(long, env = "CONVERGE_EVENT_RETENTION_SECS", default_value_t = 604_800, value_parser = secs_range_u64())]
    pub event_retention_secs: u64,
}

impl Settings {
    /// The relay's configuration when `--nats-url` is given. Errors (one line): a duplicate
    /// window too short for the relay lease, a prefix or stream name NATS would refuse.
    pub fn relay(&self) -> Result<Option<crate::worker::relay::RelayConfig>, String> {
        let Some(url) = self.nats_url.clone() else {
            return Ok(None);
        };
        if self.nats_prefix.is_empty()
            || self
                .nats_prefix
                .split('.')
                .any(|t| t.is_empty() || t.contains(['*', '>', ' ']))
        {
            return Err(format!(
                "--nats-prefix {:?} is not a subject prefix (dot-separated tokens without spaces, * or >)",
                self.nats_prefix
            ));
        }
        if self.nats_stream.is_empty() || self.nats_stream.contains(['.', '*', '>', ' ', '/', '\\'])
        {
            return Err(format!(
                "--nats-stream {:?} is not a stream name (no spaces, dots, *, >, / or \\)",
                self.nats_stream
            ));
        }
        let cfg = crate::worker::relay::RelayConfig {
            url,
            prefix: self.nats_prefix.clone(),
            stream: self.nats_stream.clone(),
            duplicate_window: Duration::from_secs(self.nats_duplicate_window_secs),
            lease_ms: self.relay_lease_ms as i64,
            batch: 256,
            poll: Duration::from_millis(self.poll_ms.clamp(10, 1_000)),
            retention_ms: self.event_retention_secs.saturating_mul(1000) as i64,
            owner: format!("{}-{}", std::process::id(), crate::ids::new_id("relay")),
        };
        if cfg.duplicate_window < cfg.min_window() {
            return Err(format!(
                "--nats-duplicate-window-secs {} is shorter than 3 x --relay-lease-ms ({} ms): a re-publish after a crash would not be deduplicated",
                self.nats_duplicate_window_secs, self.relay_lease_ms
            ));
        }
        Ok(Some(cfg))
    }
}

fn parse_cidr(s: &str) -> Result<crate::domain::netaddr::Cidr, String> {
    s.parse()
}

fn parse_schedule(s: &str) -> Result<crate::domain::webhooks::RetrySchedule, String> {
    crate::domain::webhooks::RetrySchedule::parse(s)
}

impl Settings {
    /// Defaults for tests: in-memory SQLite, port 0 everywhere, fast timings.
    pub fn for_tests(database_url: &str) -> Self {
        Settings {
            database_url: database_url.to_string(),
            bind: "127.0.0.1:0".parse().expect("literal address"),
            channel_url: None,
            channel_bind: "127.0.0.1:0".parse().expect("literal address"),
            channel_db: ":memory:".into(),
            callback_secret: Some("test-callback-secret-0123456789abcdef".into()),
            allowed_hosts: Vec::new(),
            channel_timeout_ms: 300,
            key_retention_secs: 86_400,
            key_lease_ms: 2_000,
            submit_delay_ms: 60_000,
            query_delay_ms: 60_000,
            max_attempts: 5,
            body_limit: 16 * 1024,
            purge_interval_secs: 600,
            sandbox_slow_ms: 800,
            sandbox_hang_ms: 800,
            sandbox_callback_delay_ms: 200,
            resubmit_budget: 2,
            no_workers: true,
            worker_batch: 16,
            poll_ms: 50,
            lease_ms: 5_000,
            backoff_base_ms: 50,
            backoff_cap_ms: 400,
            retry_policy: RetryOverrides::default(),
            reconcile_after_secs: 3_600,
            no_daily_reconcile: true,
            audit_signing_key: None,
            audit_checkpoint_secs: 300,
            seed: 7,
            stuck_pending_ms: 60_000,
            stuck_processing_ms: 120_000,
            stuck_unknown_ms: 300_000,
            stuck_channel_success_ms: 60_000,
            stuck_suspense_ms: 0,
            monitor_ms: 1_000,
            idle_timeout_secs: 900,
            absolute_timeout_secs: 28_800,
            secure_cookies: false,
            login_limit_per_user: 5,
            login_limit_per_addr: 30,
            login_window_secs: 300,
            login_delay_base_ms: 1_000,
            login_delay_max_secs: 900,
            trusted_proxies: Vec::new(),
            hash_permits: 2,
            action_ttl_secs: 86_400,
            webhook_retry_schedule: crate::domain::webhooks::RetrySchedule::parse("0s,100ms,200ms")
                .expect("literal schedule"),
            webhook_timeout_ms: 2_000,
            webhook_allow_private: true,
            webhook_secret_overlap_secs: 86_400,
            webhook_disable_after_secs: 432_000,
            nats_url: None,
            nats_prefix: "converge".into(),
            nats_stream: "CONVERGE".into(),
            nats_duplicate_window_secs: 120,
            relay_lease_ms: 10_000,
            event_retention_secs: 604_800,
        }
    }

    /// What webhook delivery needs from the settings.
    pub fn webhooks(&self) -> crate::service::webhooks::WebhookSettings {
        crate::service::webhooks::WebhookSettings {
            schedule: self.webhook_retry_schedule.clone(),
            timeout: Duration::from_millis(self.webhook_timeout_ms),
            allow_private: self.webhook_allow_private,
            secret_overlap_ms: self.webhook_secret_overlap_secs.saturating_mul(1000) as i64,
            disable_after_ms: self.webhook_disable_after_secs.saturating_mul(1000) as i64,
        }
    }

    /// The stuck thresholds.
    pub fn stuck_thresholds(&self) -> crate::domain::stuck::StuckThresholds {
        crate::domain::stuck::StuckThresholds {
            pending_ms: self.stuck_pending_ms,
            processing_ms: self.stuck_processing_ms,
            unknown_ms: self.stuck_unknown_ms,
            channel_success_ms: self.stuck_channel_success_ms,
            suspense_ms: self.stuck_suspense_ms,
        }
    }

    /// The retry backoff every kind uses unless it has its own cap.
    pub fn backoff(&self) -> crate::domain::backoff::Backoff {
        crate::domain::backoff::Backoff {
            base_ms: self.backoff_base_ms,
            cap_ms: self.backoff_cap_ms,
        }
    }

    /// The retry rules of the workers: [`Self::backoff`] with the per-kind overrides.
    pub fn retry(&self) -> RetryPolicy {
        RetryPolicy {
            default: self.backoff(),
            overrides: self.retry_policy.clone(),
        }
    }

    /// The sign-in throttling rules (`--login-*`).
    pub fn throttle(&self) -> crate::domain::throttle::ThrottlePolicy {
        crate::domain::throttle::ThrottlePolicy {
            per_addr: self.login_limit_per_addr.clamp(1, i64::MAX as usize) as i64,
            window_ms: (self.login_window_secs.max(1) as i64).saturating_mul(1000),
            free: self.login_limit_per_user.clamp(1, i64::MAX as usize) as i64,
            base_delay_ms: self.login_delay_base_ms as i64,
            max_delay_ms: (self.login_delay_max_secs as i64).saturating_mul(1000),
            pair_lookback_ms: crate::domain::throttle::PAIR_LOOKBACK_MS,
        }
    }

    /// The channel timeout as a [`Duration`].
    pub fn channel_timeout(&self) -> Duration {
        Duration::from_millis(self.channel_timeout_ms)
    }
}

//! Settings for `converge serve`, `converge worker` and `converge relay`: flags with
//! environment equivalents (DESIGN.md "Command line"). Every timing is configurable so tests
//! and demos run fast.
//!
//! [`Settings`] is one group per component, each a clap `flatten`ed struct listed under its
//! own heading in `converge serve --help`. Start-up ([`crate::startup`]) hands each component
//! only its group, or what the group builds: the workers get [`WorkerSettings::config`], the
//! relay [`RelaySettings::config`], console sign-in [`SessionSettings`], the merchant API
//! [`HttpSettings::body_limit`] and [`IdempotencySettings`], and so on. A group's checks are
//! its own methods ([`ChannelSettings::target`], [`AuditSettings::signing_key`],
//! [`RelaySettings::config`]); start-up runs them before anything starts, so a bad setting is
//! one line and a non-zero exit.
//!
//! A field is named as its flag (`--worker-batch` is `worker.worker_batch`), and each flag's
//! environment variable is `CONVERGE_` and the flag in capitals (`DATABASE_URL` excepted), as
//! a unit test below checks: scripts, benchmarks and the browser tests pass them by name.

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

fn parse_cidr(s: &str) -> Result<crate::domain::netaddr::Cidr, String> {
    s.parse()
}

fn parse_schedule(s: &str) -> Result<crate::domain::webhooks::RetrySchedule, String> {
    crate::domain::webhooks::RetrySchedule::parse(s)
}

/// Seconds to milliseconds, saturating at `i64::MAX`.
fn secs_to_ms(secs: u64) -> i64 {
    (secs.min(i64::MAX as u64) as i64).saturating_mul(1000)
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

/// Settings of the core (API, workers, in-process sandbox channel): the database and one
/// group per component.
#[derive(Debug, Clone, clap::Args)]
pub struct Settings {
    /// Database: a SQLite path (`data/converge.db`, `sqlite:PATH`) or `postgres://USER:PASS@HOST/DB`.
    // Secret-bearing values (a password in a URL, the HMAC key) are hidden from `--help`, which
    // would otherwise print them from the environment.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "data/converge.db",
        hide_env_values = true,
        help_heading = "Database"
    )]
    pub database_url: String,

    /// Directory for the files converge generates itself: the audit checkpoint signing key
    /// (`audit-signing-key.pem`, made on first start when --audit-signing-key is not given)
    /// and the key that seals secrets at rest (`secrets.key`, unless --secrets-key-file).
    /// Default: the SQLite database file's directory (`data/`); with PostgreSQL none, so no
    /// audit key is generated (give every server the same --audit-signing-key, or this, on
    /// storage all of them share) and the secrets key is `data/secrets.key`.
    #[arg(long, env = "CONVERGE_DATA_DIR", help_heading = "Database")]
    pub data_dir: Option<std::path::PathBuf>,

    /// The HTTP server: address, Host names, client addresses, body limit.
    #[command(flatten)]
    pub http: HttpSettings,

    /// The channel the core calls.
    #[command(flatten)]
    pub channel: ChannelSettings,

    /// The in-process sandbox channel (without --channel-url).
    #[command(flatten)]
    pub sandbox: SandboxSettings,

    /// Idempotency-Keys: lease, retention, purge.
    #[command(flatten)]
    pub idempotency: IdempotencySettings,

    /// The jobs a payment's steps queue: delays, attempts, resubmissions.
    #[command(flatten)]
    pub jobs: JobSettings,

    /// The compensation workers.
    #[command(flatten)]
    pub worker: WorkerSettings,

    /// The job lanes: worker slots per lane, the compensation rate, the API's connections.
    #[command(flatten)]
    pub lanes: LaneSettings,

    /// Stuck thresholds and the gauges' refresh.
    #[command(flatten)]
    pub stuck: StuckSettings,

    /// Console sessions and sign-in throttling.
    #[command(flatten)]
    pub session: SessionSettings,

    /// Maker-checker actions.
    #[command(flatten)]
    pub actions: ActionSettings,

    /// Audit checkpoints.
    #[command(flatten)]
    pub audit: AuditSettings,

    /// The key that seals secrets at rest.
    #[command(flatten)]
    pub secrets: SecretsSettings,

    /// Webhook delivery.
    #[command(flatten)]
    pub webhooks: WebhookSettings,

    /// The event-stream relay (NATS JetStream).
    #[command(flatten)]
    pub relay: RelaySettings,

    /// The daily reconciliation.
    #[command(flatten)]
    pub reconcile: ReconcileSettings,

    /// The accounting days.
    #[command(flatten)]
    pub accounting: AccountingSettings,
}

impl Settings {
    /// Defaults for tests: in-memory SQLite, port 0 everywhere, fast timings.
    pub fn for_tests(database_url: &str) -> Self {
        Settings {
            database_url: database_url.to_string(),
            data_dir: None,
            http: HttpSettings {
                bind: "127.0.0.1:0".parse().expect("literal address"),
                allowed_hosts: Vec::new(),
                trusted_proxies: Vec::new(),
                body_limit: 16 * 1024,
                merchant_rate_per_sec: 1_000,
                merchant_burst: 2_000,
            },
            channel: ChannelSettings {
                channel_url: None,
                callback_secret: Some("test-callback-secret-0123456789abcdef".into()),
                channel_timeout_ms: 600,
                connectors: Vec::new(),
                routes: Vec::new(),
            },
            sandbox: SandboxSettings {
                channel_bind: "127.0.0.1:0".parse().expect("literal address"),
                channel_db: ":memory:".into(),
                sandbox_slow_ms: 800,
                sandbox_hang_ms: 800,
                sandbox_callback_delay_ms: 200,
            },
            idempotency: IdempotencySettings {
                key_retention_secs: 86_400,
                key_lease_ms: 2_000,
                purge_interval_secs: 600,
                tombstone_retention_days: 30,
            },
            jobs: JobSettings {
                submit_delay_ms: 60_000,
                query_delay_ms: 60_000,
                max_attempts: 5,
                resubmit_budget: 2,
                authorization_ttl_secs: crate::service::DEFAULT_AUTHORIZATION_TTL_SECS,
                action_window_secs: crate::service::customer_action::DEFAULT_ACTION_WINDOW_SECS,
            },
            worker: WorkerSettings::for_tests(),
            lanes: LaneSettings::for_tests(),
            stuck: StuckSettings::for_tests(),
            session: SessionSettings::for_tests(),
            actions: ActionSettings {
                action_ttl_secs: 86_400,
                action_limit_per_minute: 60,
                // Tests end their pauses at once unless they test the minimum.
                pause_min_duration_secs: 0,
                approval_conflict_window_secs:
                    crate::domain::privilege::DEFAULT_CONFLICT_WINDOW_SECS,
            },
            audit: AuditSettings {
                audit_signing_key: None,
                audit_checkpoint_secs: 300,
                audit_key_generated: false,
            },
            // One key file for every test process, outside the repository (a PostgreSQL test's
            // default would be `data/` under the crate).
            secrets: SecretsSettings {
                secrets_key_file: Some(std::env::temp_dir().join("converge-test-secrets.key")),
            },
            webhooks: WebhookSettings::for_tests(),
            relay: RelaySettings::for_tests(),
            reconcile: ReconcileSettings {
                reconcile_after_secs: 3_600,
                no_daily_reconcile: true,
            },
            accounting: AccountingSettings {
                accounting_timezone: "UTC".into(),
                accounting_cutoff: "00:00".into(),
            },
        }
    }

    /// The console's origin for passkeys: `--webauthn-origin`, else `http://localhost:` and
    /// the port of `--bind` (a browser on the machine itself; an IP address cannot be a
    /// WebAuthn relying party id).
    pub fn webauthn_origin(&self) -> url::Url {
        self.session.webauthn_origin.clone().unwrap_or_else(|| {
            url::Url::parse(&format!("http://localhost:{}", self.http.bind.port()))
                .expect("a literal origin")
        })
    }
}

impl WorkerSettings {
    /// [`Settings::for_tests`]' worker: off (tests run jobs themselves), short polls and
    /// backoff, a fixed seed.
    fn for_tests() -> Self {
        WorkerSettings {
            no_workers: true,
            worker_batch: 16,
            poll_ms: 50,
            lease_ms: 5_000,
            backoff_base_ms: 50,
            backoff_cap_ms: 400,
            retry_policy: RetryOverrides::default(),
            seed: 7,
        }
    }
}

impl StuckSettings {
    /// [`Settings::for_tests`]' stuck states: the command line's thresholds and channel-health
    /// levels, a monitor every second.
    fn for_tests() -> Self {
        StuckSettings {
            stuck_pending_ms: 60_000,
            stuck_processing_ms: 120_000,
            stuck_unknown_ms: 300_000,
            stuck_channel_success_ms: 60_000,
            stuck_suspense_ms: 0,
            stuck_authorizing_ms: 120_000,
            stuck_capturing_ms: 120_000,
            stuck_voiding_ms: 120_000,
            stuck_requires_action_ms: 900_000,
            channel_amber_pct: 10,
            channel_red_pct: 30,
            monitor_ms: 1_000,
        }
    }
}

impl SessionSettings {
    /// [`Settings::for_tests`]' sessions: the command line's timeouts and sign-in limits,
    /// cookies without `Secure` (the tests speak plain HTTP).
    fn for_tests() -> Self {
        SessionSettings {
            idle_timeout_secs: 900,
            absolute_timeout_secs: 28_800,
            secure_cookies: false,
            login_limit_per_user: 5,
            login_limit_per_addr: 30,
            login_window_secs: 300,
            login_delay_base_ms: 1_000,
            login_delay_max_secs: 900,
            hash_permits: 2,
            webauthn_origin: None,
        }
    }
}

impl WebhookSettings {
    /// [`Settings::for_tests`]' webhooks: three quick attempts, private addresses allowed
    /// (the tests' receivers listen on 127.0.0.1).
    fn for_tests() -> Self {
        WebhookSettings {
            webhook_retry_schedule: crate::domain::webhooks::RetrySchedule::parse("0s,100ms,200ms")
                .expect("literal schedule"),
            webhook_timeout_ms: 2_000,
            webhook_allow_private: true,
            webhook_secret_overlap_secs: 86_400,
            webhook_disable_after_secs: 432_000,
            max_endpoints_per_merchant: crate::service::webhooks::DEFAULT_MAX_ENDPOINTS,
            webhook_inflight_per_endpoint: crate::service::webhooks::DEFAULT_INFLIGHT_PER_ENDPOINT,
            webhook_inflight_per_merchant: crate::service::webhooks::DEFAULT_INFLIGHT_PER_MERCHANT,
            // Off in effect (more failures than the window holds): tests fail one endpoint many
            // times (retry schedules, redeliveries); the breaker's own tests set it.
            webhook_breaker_window: 20,
            webhook_breaker_min_failures: crate::domain::breaker::MAX_WINDOW,
            webhook_breaker_failure_pct: 50,
            webhook_breaker_cooldown_secs: 30,
            webhook_breaker_max_cooldown_secs: 600,
        }
    }
}

impl RelaySettings {
    /// [`Settings::for_tests`]' relay: no stream, the command line's names and windows.
    fn for_tests() -> Self {
        RelaySettings {
            nats_url: None,
            nats_prefix: "converge".into(),
            nats_stream: "CONVERGE".into(),
            nats_duplicate_window_secs: 120,
            relay_lease_ms: 10_000,
            event_retention_secs: 604_800,
        }
    }
}

/// The HTTP server (`crate::startup`'s layers and the merchant API's body limit).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "HTTP server")]
pub struct HttpSettings {
    /// Address the HTTP server listens on (API, console, /health, /metrics).
    #[arg(long, env = "CONVERGE_BIND", default_value = "127.0.0.1:3000")]
    pub bind: SocketAddr,

    /// Host names (comma-separated, no port) the console and the ops API answer to; requests
    /// naming another Host get 403 `host_not_allowed`, so a DNS-rebinding page cannot read
    /// them. Default: the bind address, `localhost`, `127.0.0.1` and `::1`. The merchant API,
    /// `/health` and `/metrics` answer any Host.
    #[arg(long, env = "CONVERGE_ALLOWED_HOSTS", value_delimiter = ',')]
    pub allowed_hosts: Vec<String>,

    /// Proxies (IP addresses or CIDRs; repeat the flag or separate with commas) whose
    /// `X-Forwarded-For` is believed: from one of them the client address is the rightmost
    /// hop that is not itself a trusted proxy. From any other peer the header is ignored and
    /// the peer's address is the client's. Default: none.
    #[arg(long = "trusted-proxy", env = "CONVERGE_TRUSTED_PROXY", value_delimiter = ',', value_parser = parse_cidr)]
    pub trusted_proxies: Vec<crate::domain::netaddr::Cidr>,

    /// Largest request body accepted on the merchant API (bytes).
    #[arg(long, env = "CONVERGE_BODY_LIMIT", default_value_t = 64 * 1024)]
    pub body_limit: usize,

    /// Merchant API requests a second per API key (a token bucket's refill, counted in each
    /// server process on its own); over it, 429 `rate_limited` with `Retry-After`. The
    /// default is above what one server on 2 CPUs serves (BENCHMARKS.md: about 360 creates a
    /// second), so load and chaos runs never meet it.
    #[arg(long, env = "CONVERGE_MERCHANT_RATE_PER_SEC", default_value_t = 1_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub merchant_rate_per_sec: u32,

    /// Merchant API requests one API key may send at once before the per-second rate
    /// applies (the token bucket's size).
    #[arg(long, env = "CONVERGE_MERCHANT_BURST", default_value_t = 2_000, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub merchant_burst: u32,
}

impl HttpSettings {
    /// The merchant API's bucket per API key.
    pub fn merchant_bucket(&self) -> crate::domain::bucket::BucketPolicy {
        crate::domain::bucket::BucketPolicy {
            rate_per_sec: self.merchant_rate_per_sec,
            burst: self.merchant_burst,
        }
    }
}

impl HttpSettings {
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

/// The channel the core calls: an external one, or the in-process sandbox
/// ([`SandboxSettings`]).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Channel")]
pub struct ChannelSettings {
    /// Base URL of an external channel (e.g. a `converge channel-sim`); without it the sandbox
    /// channel starts in-process.
    #[arg(long, env = "CONVERGE_CHANNEL_URL", hide_env_values = true)]
    pub channel_url: Option<String>,

    /// HMAC secret shared with the channel for signed callbacks, at least 32 bytes. Required
    /// with --channel-url; a random one is made for the in-process sandbox.
    #[arg(long, env = "CONVERGE_CALLBACK_SECRET", hide_env_values = true)]
    pub callback_secret: Option<String>,

    /// How long the core waits for a channel answer before the payment becomes UNKNOWN (ms).
    #[arg(long, env = "CONVERGE_CHANNEL_TIMEOUT_MS", default_value_t = 2_000, value_parser = ms_range_u64())]
    pub channel_timeout_ms: u64,

    /// Another connector, `NAME=URL`, speaking the sandbox's protocol (e.g. a second
    /// `converge channel-sim`); repeatable, comma-separated in the environment. The default
    /// connector (the sandbox or --channel-url) is named `sandbox`.
    #[arg(long = "connector", env = "CONVERGE_CONNECTOR", hide_env_values = true, value_delimiter = ',', value_parser = parse_connector_spec)]
    pub connectors: Vec<ConnectorSpec>,

    /// A route, `MERCHANT_ID[/METHOD]=CONNECTOR`: that merchant's new payments (paid by that
    /// method, when given) go to that connector; everything else goes to `sandbox`.
    /// Repeatable, comma-separated in the environment.
    #[arg(long = "route", env = "CONVERGE_ROUTE", value_delimiter = ',', value_parser = parse_route_spec)]
    pub routes: Vec<RouteSpec>,
}

/// A `--connector NAME=URL`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectorSpec {
    /// Its name, as routes and payments name it.
    pub name: String,
    /// Its base URL.
    pub url: String,
}

/// A `--route MERCHANT_ID[/METHOD]=CONNECTOR`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteSpec {
    /// The merchant's database id.
    pub merchant_id: i64,
    /// The payment method, or `None` for any.
    pub method: Option<String>,
    /// The connector's name.
    pub connector: String,
}

fn parse_connector_spec(s: &str) -> Result<ConnectorSpec, String> {
    let (name, url) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=URL"))?;
    crate::service::connectors::check_name(name)?;
    if name == crate::service::connectors::DEFAULT_CONNECTOR {
        return Err(format!(
            "{name:?} is the default connector's name (the sandbox or --channel-url)"
        ));
    }
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "connector {name}: {:?} is not an http(s) URL",
            crate::store::redact(url)
        ));
    }
    Ok(ConnectorSpec {
        name: name.to_owned(),
        url: url.to_owned(),
    })
}

fn parse_route_spec(s: &str) -> Result<RouteSpec, String> {
    let (from, connector) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not MERCHANT_ID[/METHOD]=CONNECTOR"))?;
    let (merchant, method) = match from.split_once('/') {
        Some((m, method)) if !method.is_empty() => (m, Some(method.to_owned())),
        Some(_) => return Err(format!("{s:?}: empty payment method")),
        None => (from, None),
    };
    let merchant_id = merchant
        .parse::<i64>()
        .ok()
        .filter(|id| *id > 0)
        .ok_or_else(|| format!("{s:?}: {merchant:?} is not a merchant id"))?;
    crate::service::connectors::check_name(connector)?;
    Ok(RouteSpec {
        merchant_id,
        method,
        connector: connector.to_owned(),
    })
}

/// The channel a process calls, from checked [`ChannelSettings`] ([`ChannelSettings::target`]).
pub enum ChannelTarget {
    /// An external channel (`--channel-url`) and the HMAC key of its callbacks.
    External {
        /// The channel's base URL.
        url: String,
        /// The callbacks' HMAC-SHA256 key (at least [`MIN_SECRET_BYTES`]).
        callback_secret: Vec<u8>,
    },
    /// The in-process sandbox, with `--callback-secret` when one was given (start-up makes a
    /// random one otherwise).
    Sandbox {
        /// The callbacks' HMAC-SHA256 key, when given (at least [`MIN_SECRET_BYTES`]).
        callback_secret: Option<Vec<u8>>,
    },
}

/// How the callback secret is named in messages.
const CALLBACK_SECRET_FLAG: &str = "--callback-secret (CONVERGE_CALLBACK_SECRET)";

impl ChannelSettings {
    /// Which channel to call, checked. Errors (one line): a callback secret shorter than
    /// [`MIN_SECRET_BYTES`]; `--channel-url` without `--callback-secret`.
    pub fn target(&self) -> Result<ChannelTarget, String> {
        if let Some(secret) = &self.callback_secret {
            check_secret(CALLBACK_SECRET_FLAG, secret)?;
        }
        let callback_secret = self.callback_secret.clone().map(String::into_bytes);
        match (&self.channel_url, callback_secret) {
            (Some(url), Some(callback_secret)) => Ok(ChannelTarget::External {
                url: url.clone(),
                callback_secret,
            }),
            (Some(_), None) => Err(format!(
                "--channel-url needs {CALLBACK_SECRET_FLAG}, the channel's HMAC key"
            )),
            (None, callback_secret) => Ok(ChannelTarget::Sandbox { callback_secret }),
        }
    }

    /// The channel timeout as a [`Duration`].
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.channel_timeout_ms)
    }
}

/// The in-process sandbox channel, started when there is no `--channel-url`.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "In-process sandbox channel")]
pub struct SandboxSettings {
    /// Address of the in-process sandbox channel (port 0: any free port).
    #[arg(long, env = "CONVERGE_CHANNEL_BIND", default_value = "127.0.0.1:0")]
    pub channel_bind: SocketAddr,

    /// SQLite file of the in-process sandbox channel's own store.
    #[arg(long, env = "CONVERGE_CHANNEL_DB", default_value = "data/channel.db")]
    pub channel_db: String,

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
}

impl SandboxSettings {
    /// The sandbox's configuration, sending signed callbacks (`callback_secret`) to
    /// `callback_url`; it listens on `channel_bind`.
    pub fn config(
        &self,
        callback_url: String,
        callback_secret: Vec<u8>,
    ) -> crate::channel::sandbox::SandboxConfig {
        crate::channel::sandbox::SandboxConfig {
            database_url: self.channel_db.clone(),
            callback_url: Some(callback_url),
            callback_secret,
            slow_ms: self.sandbox_slow_ms,
            hang_ms: self.sandbox_hang_ms,
            callback_delay_ms: self.sandbox_callback_delay_ms,
            ..crate::channel::sandbox::SandboxConfig::default()
        }
    }
}

/// Idempotency-Keys ([`crate::idempotency`]): how long a claim holds, how long a key is kept,
/// how often expired ones are purged.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Idempotency keys")]
pub struct IdempotencySettings {
    /// How long an Idempotency-Key and its response are kept (seconds; at least 24 h in
    /// production per DESIGN.md).
    #[arg(long, env = "CONVERGE_KEY_RETENTION_SECS", default_value_t = 86_400, value_parser = secs_range_u64())]
    pub key_retention_secs: u64,

    /// How long a request's claim on a key lasts before a retry may resume it (ms).
    #[arg(long, env = "CONVERGE_KEY_LEASE_MS", default_value_t = 30_000, value_parser = ms_range_u64())]
    pub key_lease_ms: u64,

    /// How often expired Idempotency-Keys are purged (seconds).
    #[arg(long, env = "CONVERGE_PURGE_INTERVAL_SECS", default_value_t = 600, value_parser = secs_range_u64())]
    pub purge_interval_secs: u64,

    /// How long the tombstone of an order cancelled before its create is kept (days; TCC by
    /// business key, issue 34): while it is, a create for that merchant_order_id is refused.
    /// Kept at least as long as an Idempotency-Key and an authorization (a late Try retried
    /// under its key, or a hold, cannot outlive it); purged with the keys.
    #[arg(long, env = "CONVERGE_TOMBSTONE_RETENTION_DAYS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub tombstone_retention_days: u64,
}

impl IdempotencySettings {
    /// How long a key is kept, ms.
    pub fn retention_ms(&self) -> i64 {
        secs_to_ms(self.key_retention_secs)
    }

    /// How long a claim holds before a retry may take it over, ms.
    pub fn lease_ms(&self) -> i64 {
        self.key_lease_ms as i64
    }

    /// The purge period (at least a second).
    pub fn purge_every(&self) -> Duration {
        Duration::from_secs(self.purge_interval_secs.max(1))
    }

    /// How long an order's tombstone is kept, ms: `--tombstone-retention-days`, and never
    /// less than a key's retention or `authorization_ttl_ms` (an authorization's life), so
    /// neither a retried create under its key nor a hold outlives the tombstone.
    pub fn tombstone_retention_ms(&self, authorization_ttl_ms: i64) -> i64 {
        secs_to_ms(self.tombstone_retention_days.saturating_mul(86_400))
            .max(self.retention_ms())
            .max(authorization_ttl_ms)
    }
}

/// The jobs a payment's steps queue: when they are due, how many attempts they get, how often
/// a lost payment is resubmitted ([`crate::service::Timings`]).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Payment jobs")]
pub struct JobSettings {
    /// Delay before a payment's submit job becomes due, so the request finishes it first (ms).
    #[arg(long, env = "CONVERGE_SUBMIT_DELAY_MS", default_value_t = 10_000, value_parser = ms_range_u64())]
    pub submit_delay_ms: u64,

    /// Delay before the first query of an UNKNOWN payment (ms).
    #[arg(long, env = "CONVERGE_QUERY_DELAY_MS", default_value_t = 2_000, value_parser = ms_range_u64())]
    pub query_delay_ms: u64,

    /// Attempts before a job goes to the error pool.
    #[arg(long, env = "CONVERGE_MAX_ATTEMPTS", default_value_t = 8)]
    pub max_attempts: i64,

    /// Times a not-found payment is resubmitted with its channel key (after the first
    /// submission) before the key is cancelled at the channel and the payment fails.
    #[arg(long, env = "CONVERGE_RESUBMIT_BUDGET", default_value_t = 3)]
    pub resubmit_budget: i64,

    /// How long a manual-capture payment's authorization holds the funds (seconds; the
    /// connector may hold them for less and says so). At its expiry the hold is voided, at
    /// the channel and here, and can no longer be captured (issue 34).
    #[arg(long, env = "CONVERGE_AUTHORIZATION_TTL_SECS", default_value_t = crate::service::DEFAULT_AUTHORIZATION_TTL_SECS, value_parser = clap::value_parser!(u64).range(1..=31_536_000))]
    pub authorization_ttl_secs: u64,

    /// How long a payment waits for the customer to authenticate (3-D Secure, REQUIRES_ACTION)
    /// before its key is cancelled at the channel and it fails (seconds; issue 38).
    #[arg(long, env = "CONVERGE_ACTION_WINDOW_SECS", default_value_t = crate::service::customer_action::DEFAULT_ACTION_WINDOW_SECS, value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub action_window_secs: u64,
}

impl JobSettings {
    /// The services' timings.
    pub fn timings(&self) -> crate::service::Timings {
        crate::service::Timings {
            submit_delay_ms: self.submit_delay_ms as i64,
            query_delay_ms: self.query_delay_ms as i64,
            max_attempts: self.max_attempts,
            resubmit_budget: self.resubmit_budget,
            // `ActionSettings` sets it where a serving core is built (startup).
            approval_conflict_window_ms: secs_to_ms(
                crate::domain::privilege::DEFAULT_CONFLICT_WINDOW_SECS,
            ),
            authorization_ttl_ms: secs_to_ms(self.authorization_ttl_secs),
            action_window_ms: secs_to_ms(self.action_window_secs),
        }
    }
}

/// The compensation workers ([`crate::worker`]): whether they run, how they claim and how
/// they retry.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Workers")]
pub struct WorkerSettings {
    /// Do not run the compensation workers in this process (`serve` only).
    #[arg(long, env = "CONVERGE_NO_WORKERS")]
    pub no_workers: bool,

    /// Jobs a one-off drain claims at once (tests, the drain benchmark); the serving lanes
    /// claim up to their free slots (--lane-*-slots).
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

    /// Seed of the backoff jitter (0: from the OS).
    #[arg(long, env = "CONVERGE_SEED", default_value_t = 0)]
    pub seed: u64,
}

impl WorkerSettings {
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

    /// How long an idle worker sleeps (at least 1 ms).
    pub fn poll(&self) -> Duration {
        Duration::from_millis(self.poll_ms.max(1))
    }

    /// A worker's configuration, under a lease owner name of its own.
    pub fn config(&self) -> crate::worker::WorkerConfig {
        crate::worker::WorkerConfig {
            owner: format!("{}-{}", std::process::id(), crate::ids::new_id("w")),
            batch: self.worker_batch.max(1),
            lease_ms: self.lease_ms as i64,
            poll: self.poll(),
            retry: self.retry(),
            seed: self.seed,
        }
    }
}

/// The job lanes ([`crate::worker::lanes`]; README "Lanes and fairness"): each lane's worker
/// slots, the compensation lane's rate toward the channel, and the database connections kept
/// for the API. Connections: each lane holds at most its slots + 2 (one per running job, its
/// claim, its completion writer), and the PostgreSQL pool is sized to the sum of those plus
/// `--api-db-connections` ([`Self::pool_size`]), so no lane can take another's connections
/// or the API's. Defaults fit 2 CPUs.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Lanes")]
pub struct LaneSettings {
    /// Worker slots of the forward lane (submit, query, capture, post_ledger): its jobs
    /// running at once in this process.
    #[arg(long, env = "CONVERGE_LANE_FORWARD_SLOTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub lane_forward_slots: u32,

    /// Worker slots of the compensation lane (refund, reverse, void_hold, expire_hold).
    #[arg(long, env = "CONVERGE_LANE_COMPENSATION_SLOTS", default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub lane_compensation_slots: u32,

    /// Worker slots of the delivery lane (webhooks).
    #[arg(long, env = "CONVERGE_LANE_DELIVERY_SLOTS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub lane_delivery_slots: u32,

    /// Worker slots of the background lane (reconciliation, and any other kind).
    #[arg(long, env = "CONVERGE_LANE_BACKGROUND_SLOTS", default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub lane_background_slots: u32,

    /// Compensation jobs (refunds, reversals, voids, expiries) sent toward each channel
    /// (connector) per second at most, oldest first; per process and per channel (0: no
    /// limit).
    #[arg(long, env = "CONVERGE_COMPENSATION_RATE_PER_SEC", default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub compensation_rate_per_sec: u32,

    /// PostgreSQL connections kept for the API's requests and the process's other loops
    /// (relay, gauges, purges), on top of the lanes' (each lane's slots + 2).
    #[arg(long, env = "CONVERGE_API_DB_CONNECTIONS", default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub api_db_connections: u32,
}

impl LaneSettings {
    /// Small lanes for tests.
    pub fn for_tests() -> Self {
        LaneSettings {
            lane_forward_slots: 4,
            lane_compensation_slots: 2,
            lane_delivery_slots: 4,
            lane_background_slots: 1,
            compensation_rate_per_sec: 50,
            api_db_connections: 4,
        }
    }

    /// Each lane's configuration, in [`Lane::ALL`](crate::domain::lanes::Lane::ALL) order.
    pub fn configs(&self) -> Vec<crate::worker::lanes::LaneConfig> {
        use crate::domain::lanes::Lane;
        Lane::ALL
            .into_iter()
            .map(|lane| {
                let (slots, rate) = match lane {
                    Lane::Forward => (self.lane_forward_slots, 0),
                    Lane::Compensation => {
                        (self.lane_compensation_slots, self.compensation_rate_per_sec)
                    }
                    Lane::Delivery => (self.lane_delivery_slots, 0),
                    Lane::Background => (self.lane_background_slots, 0),
                };
                crate::worker::lanes::LaneConfig {
                    lane,
                    slots: slots as usize,
                    rate_per_sec: f64::from(rate),
                }
            })
            .collect()
    }

    /// The PostgreSQL pool's size: every lane's slots + 2, plus `--api-db-connections`.
    pub fn pool_size(&self) -> u32 {
        self.configs()
            .iter()
            .map(|c| c.slots as u32 + 2)
            .sum::<u32>()
            + self.api_db_connections
    }
}

/// When a payment counts as stuck, and how often the stuck and queue gauges are refreshed
/// ([`crate::worker::monitor`], the dashboard, bulk retries).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Stuck payments")]
pub struct StuckSettings {
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

    /// AUTHORIZING (a hold's authorization in flight) longer than this is stuck (ms).
    #[arg(long, env = "CONVERGE_STUCK_AUTHORIZING_MS", default_value_t = 120_000, value_parser = ms_range_i64())]
    pub stuck_authorizing_ms: i64,

    /// CAPTURING (a capture in flight) longer than this is stuck (ms).
    #[arg(long, env = "CONVERGE_STUCK_CAPTURING_MS", default_value_t = 120_000, value_parser = ms_range_i64())]
    pub stuck_capturing_ms: i64,

    /// VOIDING (a void in flight) longer than this is stuck (ms).
    #[arg(long, env = "CONVERGE_STUCK_VOIDING_MS", default_value_t = 120_000, value_parser = ms_range_i64())]
    pub stuck_voiding_ms: i64,

    /// REQUIRES_ACTION (waiting for the customer's 3-D Secure step) longer than this is stuck
    /// (ms).
    #[arg(long, env = "CONVERGE_STUCK_REQUIRES_ACTION_MS", default_value_t = 900_000, value_parser = ms_range_i64())]
    pub stuck_requires_action_ms: i64,

    /// A connector's channel-health tile turns amber when this percentage of its charge
    /// attempts of the last 5 minutes were undecidable (timeout, 5xx, dropped, garbled).
    #[arg(long, env = "CONVERGE_CHANNEL_AMBER_PCT", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub channel_amber_pct: u32,

    /// A connector's channel-health tile turns red at this percentage of undecidable charge
    /// attempts (above the amber one; also the ConvergeChannelUndecidable alert's threshold,
    /// exported as converge_channel_red_threshold_ratio).
    #[arg(long, env = "CONVERGE_CHANNEL_RED_PCT", default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub channel_red_pct: u32,

    /// How often the stuck and queue gauges of /metrics are refreshed (ms).
    #[arg(long, env = "CONVERGE_MONITOR_MS", default_value_t = 15_000, value_parser = ms_range_u64())]
    pub monitor_ms: u64,
}

impl StuckSettings {
    /// The stuck thresholds.
    pub fn thresholds(&self) -> crate::domain::stuck::StuckThresholds {
        crate::domain::stuck::StuckThresholds {
            pending_ms: self.stuck_pending_ms,
            processing_ms: self.stuck_processing_ms,
            unknown_ms: self.stuck_unknown_ms,
            channel_success_ms: self.stuck_channel_success_ms,
            suspense_ms: self.stuck_suspense_ms,
            authorizing_ms: self.stuck_authorizing_ms,
            capturing_ms: self.stuck_capturing_ms,
            voiding_ms: self.stuck_voiding_ms,
            requires_action_ms: self.stuck_requires_action_ms,
            channel: crate::domain::channel_health::ChannelThresholds {
                amber_pct: self.channel_amber_pct,
                red_pct: self.channel_red_pct,
            },
        }
    }

    /// The gauges' refresh period (at least 100 ms).
    pub fn monitor_every(&self) -> Duration {
        Duration::from_millis(self.monitor_ms.max(100))
    }
}

/// Console sessions and sign-in ([`crate::ops::auth::Auth`], the session layer): lifetimes,
/// the Secure cookie, throttling of password checks, concurrent hashes.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Console sessions and sign-in")]
pub struct SessionSettings {
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

    /// Password hashes computed at once (each argon2id hash takes ~19 MiB and one core).
    #[arg(long, env = "CONVERGE_HASH_PERMITS", default_value_t = 2)]
    pub hash_permits: usize,

    /// The console's origin as browsers see it (scheme, host, port), for passkeys (WebAuthn):
    /// its host is the relying party id, so a passkey works only there. An IP address cannot
    /// be one. Default: http://localhost:<port of --bind>.
    #[arg(long, env = "CONVERGE_WEBAUTHN_ORIGIN", value_parser = parse_webauthn_origin)]
    pub webauthn_origin: Option<url::Url>,
}

/// `--webauthn-origin`: an http(s) origin naming a host, with no path.
fn parse_webauthn_origin(s: &str) -> Result<url::Url, String> {
    let u = url::Url::parse(s.trim()).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(u.scheme(), "http" | "https") || u.domain().is_none() || u.path() != "/" {
        return Err(
            "give an origin such as https://console.example.com (a host name, no path)".into(),
        );
    }
    Ok(u)
}

impl SessionSettings {
    /// The sign-in throttling rules (`--login-*`).
    pub fn throttle(&self) -> crate::domain::throttle::ThrottlePolicy {
        crate::domain::throttle::ThrottlePolicy {
            per_addr: self.login_limit_per_addr.clamp(1, i64::MAX as usize) as i64,
            window_ms: secs_to_ms(self.login_window_secs.max(1)),
            free: self.login_limit_per_user.clamp(1, i64::MAX as usize) as i64,
            base_delay_ms: self.login_delay_base_ms as i64,
            max_delay_ms: secs_to_ms(self.login_delay_max_secs),
            pair_lookback_ms: crate::domain::throttle::PAIR_LOOKBACK_MS,
        }
    }

    /// Idle session lifetime, ms.
    pub fn idle_ms(&self) -> i64 {
        secs_to_ms(self.idle_timeout_secs)
    }

    /// Absolute session lifetime, ms.
    pub fn absolute_ms(&self) -> i64 {
        secs_to_ms(self.absolute_timeout_secs)
    }
}

/// Maker-checker action requests ([`crate::service::actions`]).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Maker-checker actions")]
pub struct ActionSettings {
    /// How long a pending action request stays approvable (seconds).
    #[arg(long, env = "CONVERGE_ACTION_TTL_SECS", default_value_t = 86_400, value_parser = secs_range_u64())]
    pub action_ttl_secs: u64,

    /// Single `query` and `retry` actions one console user may run a minute (each reaches
    /// the channel or wakes jobs at once, with no approver in between); beyond it 429
    /// `rate_limited` with `Retry-After`.
    #[arg(long, env = "CONVERGE_ACTION_LIMIT_PER_MINUTE", default_value_t = 60, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub action_limit_per_minute: u32,
    /// How long an emergency-switch pause holds before one operator may end it (seconds,
    /// from its approval): ending it sooner is a request a different approver approves, as
    /// starting it was. Ending or cancelling always takes the password again (step-up).
    #[arg(long, env = "CONVERGE_PAUSE_MIN_DURATION_SECS", default_value_t = 900, value_parser = secs_range_u64())]
    pub pause_min_duration_secs: u64,
    /// How long an admin who created a user's account, or asked for or approved a grant of
    /// power to them, may not approve that user's money actions (seconds; issue 36).
    #[arg(long = "approval-conflict-window-secs", env = "CONVERGE_APPROVAL_CONFLICT_WINDOW_SECS", default_value_t = crate::domain::privilege::DEFAULT_CONFLICT_WINDOW_SECS, value_parser = secs_range_u64())]
    pub approval_conflict_window_secs: u64,
}

impl ActionSettings {
    /// How long a pending request stays approvable, ms.
    pub fn ttl_ms(&self) -> i64 {
        secs_to_ms(self.action_ttl_secs)
    }

    /// How long a pause holds before one operator may end it, ms.
    pub fn pause_min_ms(&self) -> i64 {
        secs_to_ms(self.pause_min_duration_secs)
    }

    /// The approval-conflict window, ms (`--approval-conflict-window-secs`).
    pub fn conflict_window_ms(&self) -> i64 {
        secs_to_ms(self.approval_conflict_window_secs)
    }
}

/// Audit checkpoints: the signing key and how often one is signed.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Audit log")]
pub struct AuditSettings {
    /// Ed25519 private key (PKCS#8 PEM, from `converge audit keygen`) that signs audit
    /// checkpoints. Keep it outside the database. Without it, `converge serve` generates one
    /// in its data directory on first start (see --data-dir); with PostgreSQL and no
    /// --data-dir no checkpoint is signed. Several servers sharing one PostgreSQL must all
    /// be given the same key.
    #[arg(long, env = "CONVERGE_AUDIT_SIGNING_KEY")]
    pub audit_signing_key: Option<std::path::PathBuf>,

    /// Seconds between periodic audit checkpoints (one is also signed on every export).
    #[arg(long, env = "CONVERGE_AUDIT_CHECKPOINT_SECS", default_value_t = 60)]
    pub audit_checkpoint_secs: u64,

    /// Whether `audit_signing_key` is the key converge generated in its data directory
    /// (not a flag: set by the command line after [`default_signing_key`]), so start-up
    /// refuses it when the log's checkpoints were signed by another key.
    #[arg(skip)]
    pub audit_key_generated: bool,
}

impl AuditSettings {
    /// The checkpoint signing key read from `--audit-signing-key`, if one is given. Errors
    /// (one line, naming the file): unreadable, or not an Ed25519 PKCS#8 PEM key.
    pub fn signing_key(&self) -> Result<Option<ed25519_dalek::SigningKey>, String> {
        self.audit_signing_key
            .as_deref()
            .map(load_signing_key)
            .transpose()
    }

    /// The period of checkpoints (at least a second).
    pub fn checkpoint_every(&self) -> Duration {
        Duration::from_secs(self.audit_checkpoint_secs.max(1))
    }
}

/// Reads an audit signing key (PKCS#8 PEM, from `converge audit keygen`). Errors are one line
/// naming the file.
pub fn load_signing_key(path: &std::path::Path) -> Result<ed25519_dalek::SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        format!(
            "cannot read the audit signing key {}: {e} (make one with `converge audit keygen --out FILE`)",
            path.display()
        )
    })?;
    crate::domain::checkpoint::signing_key_from_pem(&text)
        .map_err(|e| format!("audit signing key {}: {e}", path.display()))
}

/// Secrets sealed at rest ([`crate::domain::secret_box`]): where the key is.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = "Secrets at rest")]
pub struct SecretsSettings {
    /// The key that seals webhook signing secrets (and stored answers that carry one) in the
    /// database: a file holding 32 random bytes in base64. Default: `secrets.key` in the data
    /// directory (beside a SQLite database; `data/` under the working directory for
    /// PostgreSQL), made on first start, mode 0600. Every process of one database must use the
    /// same key: copy the file to each host, or give its path here. Back it up apart from the
    /// database: without it the sealed secrets are lost (merchants rotate theirs).
    #[arg(long, env = "CONVERGE_SECRETS_KEY_FILE")]
    pub secrets_key_file: Option<std::path::PathBuf>,
}

impl SecretsSettings {
    /// The key file for the database at `database_url`: `--secrets-key-file`, else
    /// [`SECRETS_KEY_FILE`] in the data directory (`dir`, `--data-dir`, else [`data_dir`]'s,
    /// else `data/` for PostgreSQL); None for an in-memory SQLite database, whose secrets die
    /// with it (a random key serves).
    pub fn key_path(
        &self,
        database_url: &str,
        dir: Option<&std::path::Path>,
    ) -> Option<std::path::PathBuf> {
        if let Some(p) = &self.secrets_key_file {
            return Some(p.clone());
        }
        if let Some(d) = data_dir(database_url, dir) {
            return Some(d.join(SECRETS_KEY_FILE));
        }
        // PostgreSQL without --data-dir: unlike the audit key, a secrets key is always needed
        // (secrets are never stored in plain text), so `data/` under the working directory
        // serves, and start-up refuses a process whose key does not open the database's.
        match crate::store::classify(database_url) {
            Ok(crate::store::Target::Postgres(_)) => {
                Some(std::path::Path::new("data").join(SECRETS_KEY_FILE))
            }
            _ => None,
        }
    }

    /// The sealing key for the database at `database_url` ([`SecretsSettings::key_path`]),
    /// made when its file does not exist yet. The second value is the path of a key file made
    /// by this call, for the caller to print once. Errors (one line naming the file): the file
    /// or its directory cannot be read or written, or does not hold a key.
    pub fn secret_box(
        &self,
        database_url: &str,
        dir: Option<&std::path::Path>,
    ) -> Result<
        (
            crate::domain::secret_box::SecretBox,
            Option<std::path::PathBuf>,
        ),
        String,
    > {
        use crate::domain::secret_box::{SecretBox, key_from_text, key_to_text, random_key};
        let Some(path) = self.key_path(database_url, dir) else {
            return Ok((SecretBox::random(), None));
        };
        let made = !path.exists()
            && create_private_once(&path, key_to_text(&random_key()).as_bytes())
                .map_err(|e| format!("cannot make the secrets key {}: {e}", path.display()))?;
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("cannot read the secrets key {}: {e}", path.display()))?;
        let key =
            key_from_text(&text).map_err(|e| format!("secrets key {}: {e}", path.display()))?;
        Ok((SecretBox::new(key), made.then_some(path)))
    }
}

/// The file name of the key that seals secrets at rest in the data directory.
pub const SECRETS_KEY_FILE: &str = "secrets.key";

/// Makes the file `path` (and its directory) holding `bytes`, readable by its owner only
/// (0600), unless it exists. True when this call made it. Two processes starting at once make
/// one file between them: it is written whole under a temporary name and then hard-linked to
/// its name, which fails if the name exists, so the loser reads the winner's whole file.
fn create_private_once(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<bool> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(parent)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("key");
    let tmp = parent.join(format!(".{name}.{}.tmp", crate::ids::new_token()));
    let linked = write_private(&tmp, bytes).and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// The file name of the audit checkpoint signing key converge generates in its data
/// directory when no `--audit-signing-key` is given.
pub const GENERATED_AUDIT_KEY_FILE: &str = "audit-signing-key.pem";

/// converge's data directory, for the files it generates: `data_dir` when given (`--data-dir`),
/// else the directory of a SQLite database file (`data/` for `data/converge.db`, `.` for a
/// bare file name). `None` for PostgreSQL without `--data-dir` (several servers may share the
/// database but not a directory, so none is guessed), for an in-memory SQLite database and
/// for a URL that is not a database's.
pub fn data_dir(
    database_url: &str,
    data_dir: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    use crate::store::Target;
    if let Some(d) = data_dir {
        return Some(d.to_path_buf());
    }
    match crate::store::classify(database_url).ok()? {
        Target::Sqlite(":memory:") | Target::Postgres(_) => None,
        Target::Sqlite(file) => Some(
            std::path::Path::new(file)
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .to_path_buf(),
        ),
    }
}

/// Where the generated audit signing key is (or would be) for this database: the data
/// directory's [`GENERATED_AUDIT_KEY_FILE`]; `None` when there is no data directory.
pub fn generated_key_path(
    database_url: &str,
    dir: Option<&std::path::Path>,
) -> Option<std::path::PathBuf> {
    data_dir(database_url, dir).map(|d| d.join(GENERATED_AUDIT_KEY_FILE))
}

/// The audit signing key for a process that was given none (issue 36, "checkpoints by
/// default"): the key in the data directory, generated there first when there is none.
/// Returns the key's path and whether this call generated it; `None` when there is no data
/// directory ([`data_dir`]).
///
/// A new key is written with mode 0600 under a temporary name and then hard-linked to its
/// name, which fails if the name exists: two processes starting together on one directory
/// end with one key, the loser reading the winner's. Errors are one line naming the file.
pub fn default_signing_key(
    database_url: &str,
    dir: Option<&std::path::Path>,
) -> Result<Option<(std::path::PathBuf, bool)>, String> {
    let Some(path) = generated_key_path(database_url, dir) else {
        return Ok(None);
    };
    if path.exists() {
        load_signing_key(&path)?;
        return Ok(Some((path, false)));
    }
    let key = crate::service::audit_export::generate_signing_key();
    let pem = crate::domain::checkpoint::signing_key_to_pem(&key)?;
    match create_private_once(&path, pem.as_bytes()) {
        Ok(true) => Ok(Some((path, true))),
        // Another process made it first: use that one.
        Ok(false) => {
            load_signing_key(&path)?;
            Ok(Some((path, false)))
        }
        Err(e) => Err(format!(
            "cannot write the audit signing key {}: {e} (is the data directory writable? else give --audit-signing-key or --data-dir)",
            path.display()
        )),
    }
}

/// Writes `bytes` to a new file at `path` readable by its owner only (mode 0600).
fn write_private(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

/// Webhook delivery ([`crate::service::webhooks`]): retry schedule, timeout, allowed
/// addresses, secret rotation, disabling.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Webhooks")]
pub struct WebhookSettings {
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

    /// The most live (not deleted) webhook endpoints one merchant may have; registering one
    /// more is refused with 400 `endpoint_limit`.
    #[arg(long, env = "CONVERGE_MAX_ENDPOINTS_PER_MERCHANT", default_value_t = crate::service::webhooks::DEFAULT_MAX_ENDPOINTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub max_endpoints_per_merchant: usize,

    /// Delivery attempts one endpoint may have in flight in this server process; a delivery
    /// beyond it is put back for a second without spending an attempt, so a few hanging
    /// endpoints cannot hold every delivery worker.
    #[arg(long, env = "CONVERGE_WEBHOOK_INFLIGHT_PER_ENDPOINT", default_value_t = crate::service::webhooks::DEFAULT_INFLIGHT_PER_ENDPOINT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=1_000))]
    pub webhook_inflight_per_endpoint: usize,

    /// Delivery attempts one merchant's endpoints together may have in flight in this server
    /// process; a delivery beyond it is put back for a second without spending an attempt, so
    /// one merchant's many hanging endpoints leave workers for the others.
    #[arg(long, env = "CONVERGE_WEBHOOK_INFLIGHT_PER_MERCHANT", default_value_t = crate::service::webhooks::DEFAULT_INFLIGHT_PER_MERCHANT, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=10_000))]
    pub webhook_inflight_per_merchant: usize,

    /// The attempts an endpoint's circuit breaker takes its failure rate over (its last ones).
    #[arg(long, env = "CONVERGE_WEBHOOK_BREAKER_WINDOW", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::domain::breaker::MAX_WINDOW)))]
    pub webhook_breaker_window: u32,

    /// Failures among the window's attempts below which an endpoint's circuit breaker never
    /// opens.
    #[arg(long, env = "CONVERGE_WEBHOOK_BREAKER_MIN_FAILURES", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=i64::from(crate::domain::breaker::MAX_WINDOW)))]
    pub webhook_breaker_min_failures: u32,

    /// The share of failures among the window's attempts (percent) above which an endpoint's
    /// circuit breaker opens (with at least --webhook-breaker-min-failures of them): its
    /// deliveries then wait out a cool-down without attempts, and one probe decides after it.
    #[arg(long, env = "CONVERGE_WEBHOOK_BREAKER_FAILURE_PCT", default_value_t = 50, value_parser = clap::value_parser!(u32).range(0..=99))]
    pub webhook_breaker_failure_pct: u32,

    /// The first cool-down of an open circuit breaker (seconds); it doubles with each
    /// failed probe, up to --webhook-breaker-max-cooldown-secs.
    #[arg(long, env = "CONVERGE_WEBHOOK_BREAKER_COOLDOWN_SECS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub webhook_breaker_cooldown_secs: u64,

    /// The longest cool-down of an open circuit breaker (seconds).
    #[arg(long, env = "CONVERGE_WEBHOOK_BREAKER_MAX_COOLDOWN_SECS", default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub webhook_breaker_max_cooldown_secs: u64,
}

impl WebhookSettings {
    /// What webhook delivery needs, in its units.
    pub fn delivery(&self) -> crate::service::webhooks::WebhookSettings {
        crate::service::webhooks::WebhookSettings {
            schedule: self.webhook_retry_schedule.clone(),
            timeout: Duration::from_millis(self.webhook_timeout_ms),
            allow_private: self.webhook_allow_private,
            secret_overlap_ms: secs_to_ms(self.webhook_secret_overlap_secs),
            disable_after_ms: secs_to_ms(self.webhook_disable_after_secs),
            max_endpoints_per_merchant: self.max_endpoints_per_merchant,
            inflight_per_endpoint: self.webhook_inflight_per_endpoint,
            inflight_per_merchant: self.webhook_inflight_per_merchant,
            breaker: crate::domain::breaker::BreakerPolicy {
                window: self.webhook_breaker_window,
                min_failures: self.webhook_breaker_min_failures,
                failure_share_pct: self.webhook_breaker_failure_pct,
                base_cooldown_ms: secs_to_ms(self.webhook_breaker_cooldown_secs),
                max_cooldown_ms: secs_to_ms(self.webhook_breaker_max_cooldown_secs),
            },
            // The workers' `--seed` (WorkerSettings), set where both are known (startup).
            jitter_seed: 0,
        }
    }
}

/// The event-stream relay ([`crate::worker::relay`]): the outbox to NATS JetStream, and how
/// long published events are kept.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Event-stream relay (NATS JetStream)")]
pub struct RelaySettings {
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

impl RelaySettings {
    /// The relay's configuration when `--nats-url` is given; it sleeps `poll` (the workers'
    /// `--poll-ms`, kept within 10 ms..1 s) when nothing waits. Errors (one line): a duplicate
    /// window too short for the relay lease, a prefix or stream name NATS would refuse.
    pub fn config(
        &self,
        poll: Duration,
    ) -> Result<Option<crate::worker::relay::RelayConfig>, String> {
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
            poll: poll.clamp(Duration::from_millis(10), Duration::from_secs(1)),
            retention_ms: secs_to_ms(self.event_retention_secs),
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

/// The daily reconciliation of the channel's statement ([`crate::service::reconcile`]).
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Reconciliation")]
pub struct ReconcileSettings {
    /// When the previous UTC day's channel statement is reconciled: this long after midnight
    /// UTC (seconds). The reconcile job is queued once a day by whichever process gets there
    /// first; `converge reconcile --date D` runs one by hand.
    #[arg(long, env = "CONVERGE_RECONCILE_AFTER_SECS", default_value_t = 3_600, value_parser = clap::value_parser!(u64).range(0..86_400))]
    pub reconcile_after_secs: u64,

    /// Do not queue the daily reconciliation from this process.
    #[arg(long, env = "CONVERGE_NO_DAILY_RECONCILE")]
    pub no_daily_reconcile: bool,
}

impl ReconcileSettings {
    /// How long after midnight UTC the previous day is reconciled, ms.
    pub fn after_ms(&self) -> i64 {
        secs_to_ms(self.reconcile_after_secs)
    }
}

/// The accounting days every ledger batch is dated by (issue 35;
/// [`crate::domain::accounting`]): a time zone and the local time a day closes at.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = "Accounting")]
pub struct AccountingSettings {
    /// The accounting days' IANA time zone, such as Asia/Shanghai or Europe/Berlin.
    #[arg(long, env = "CONVERGE_ACCOUNTING_TIMEZONE", default_value = "UTC", value_parser = accounting_timezone)]
    pub accounting_timezone: String,

    /// The local time (HH:MM) an accounting day closes at: a posting at or after it belongs
    /// to the next day (00:00: days close at midnight).
    #[arg(long, env = "CONVERGE_ACCOUNTING_CUTOFF", default_value = "00:00", value_parser = accounting_cutoff)]
    pub accounting_cutoff: String,
}

impl AccountingSettings {
    /// The calendar. Errors: a zone or cut-off the parsers would refuse (settings built by
    /// hand).
    pub fn calendar(
        &self,
    ) -> Result<
        crate::domain::accounting::AccountingCalendar,
        crate::domain::accounting::AccountingError,
    > {
        crate::domain::accounting::AccountingCalendar::new(
            &self.accounting_timezone,
            &self.accounting_cutoff,
        )
    }
}

fn accounting_timezone(zone: &str) -> Result<String, String> {
    crate::domain::accounting::AccountingCalendar::new(zone, "00:00")
        .map(|_| zone.to_string())
        .map_err(|e| e.to_string())
}

fn accounting_cutoff(cutoff: &str) -> Result<String, String> {
    crate::domain::accounting::AccountingCalendar::new("UTC", cutoff)
        .map(|_| cutoff.to_string())
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        settings: Settings,
    }

    #[test]
    fn the_settings_command_passes_clap_s_own_checks() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_flag_has_the_environment_variable_named_after_it() {
        let cmd = Cli::command();
        let mut seen = 0;
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else {
                continue;
            };
            let env = arg
                .get_env()
                .unwrap_or_else(|| panic!("--{long} has no environment variable"))
                .to_string_lossy()
                .into_owned();
            let expected = if long == "database-url" {
                "DATABASE_URL".to_string()
            } else {
                format!("CONVERGE_{}", long.to_ascii_uppercase().replace('-', "_"))
            };
            assert_eq!(env, expected, "--{long}");
            seen += 1;
        }
        assert_eq!(seen, 94, "every setting is a flag");
    }

    #[test]
    fn the_data_directory_is_the_sqlite_files_unless_given_and_none_for_postgres() {
        use std::path::{Path, PathBuf};
        assert_eq!(
            data_dir("data/converge.db", None),
            Some(PathBuf::from("data"))
        );
        assert_eq!(
            data_dir("sqlite:///abs/c.db", None),
            Some(PathBuf::from("/abs"))
        );
        assert_eq!(data_dir("c.db", None), Some(PathBuf::from(".")));
        assert_eq!(data_dir(":memory:", None), None);
        assert_eq!(data_dir("postgres://u@h/db", None), None);
        assert_eq!(
            data_dir("postgres://u@h/db", Some(Path::new("/srv/converge"))),
            Some(PathBuf::from("/srv/converge"))
        );
    }

    #[test]
    fn a_generated_key_is_private_and_reused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("temp dir");
        let db = dir.path().join("sub/c.db");
        let db = db.to_str().expect("utf-8 path");
        let (path, new) = default_signing_key(db, None).unwrap().expect("a key");
        assert!(new);
        assert_eq!(path, dir.path().join("sub").join(GENERATED_AUDIT_KEY_FILE));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let first = load_signing_key(&path).unwrap();
        let (again, new) = default_signing_key(db, None).unwrap().expect("the key");
        assert_eq!((again, new), (path.clone(), false));
        assert_eq!(
            load_signing_key(&path).unwrap().to_bytes(),
            first.to_bytes()
        );
        assert_eq!(
            default_signing_key("postgres://u@h/db", None).unwrap(),
            None
        );
    }

    #[test]
    fn a_flag_lands_in_its_group() {
        let s = Cli::try_parse_from([
            "converge",
            "--worker-batch",
            "3",
            "--trusted-proxy",
            "10.0.0.0/8,127.0.0.1",
            "--login-limit-per-user",
            "9",
            "--nats-url",
            "nats://127.0.0.1:4222",
        ])
        .expect("flags parse")
        .settings;
        assert_eq!(s.worker.worker_batch, 3);
        assert_eq!(s.http.trusted_proxies.len(), 2);
        assert_eq!(s.session.login_limit_per_user, 9);
        assert_eq!(s.relay.nats_url.as_deref(), Some("nats://127.0.0.1:4222"));
    }

    #[test]
    fn connectors_and_routes_parse_and_bad_ones_are_refused() {
        let s = Cli::try_parse_from([
            "converge",
            "--connector",
            "second=http://127.0.0.1:7071",
            "--route",
            "7=second,8/card=second",
        ])
        .expect("flags parse")
        .settings;
        assert_eq!(
            s.channel.connectors,
            vec![ConnectorSpec {
                name: "second".into(),
                url: "http://127.0.0.1:7071".into()
            }]
        );
        assert_eq!(s.channel.routes.len(), 2);
        assert_eq!(s.channel.routes[1].method.as_deref(), Some("card"));
        for (flag, bad) in [
            ("--connector", "sandbox=http://x"),
            ("--connector", "second"),
            ("--connector", "second=ftp://x"),
            ("--route", "acme=second"),
            ("--route", "0=second"),
            ("--route", "7/=second"),
            ("--route", "7=Second"),
        ] {
            assert!(
                Cli::try_parse_from(["converge", flag, bad]).is_err(),
                "{flag} {bad}"
            );
        }
    }

    #[test]
    fn the_accounting_calendar_parses_and_a_bad_zone_or_cutoff_is_refused() {
        let s = Cli::try_parse_from([
            "converge",
            "--accounting-timezone",
            "Europe/Berlin",
            "--accounting-cutoff",
            "23:00",
        ])
        .expect("flags parse")
        .settings;
        let calendar = s.accounting.calendar().expect("a valid calendar");
        assert_eq!(calendar.describe(), "Europe/Berlin, days close at 23:00");
        let default = Cli::try_parse_from(["converge"])
            .expect("no flags")
            .settings;
        assert_eq!(
            default.accounting.calendar().unwrap().describe(),
            "UTC, days close at 00:00"
        );
        for (flag, bad) in [
            ("--accounting-timezone", "Mars/Olympus"),
            ("--accounting-timezone", ""),
            ("--accounting-cutoff", "24:00"),
            ("--accounting-cutoff", "11pm"),
        ] {
            assert!(
                Cli::try_parse_from(["converge", flag, bad]).is_err(),
                "{flag} {bad}"
            );
        }
    }

    #[test]
    fn a_channel_url_without_a_callback_secret_is_refused_in_one_line() {
        let mut s = Settings::for_tests(":memory:");
        s.channel.channel_url = Some("http://127.0.0.1:9".into());
        s.channel.callback_secret = None;
        let e = s.channel.target().err().expect("refused");
        assert!(e.contains("--channel-url needs --callback-secret"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn a_short_callback_secret_is_refused_for_the_sandbox_too() {
        let mut s = Settings::for_tests(":memory:");
        s.channel.callback_secret = Some("short".into());
        let e = s.channel.target().err().expect("refused");
        assert!(e.contains("at least 32 bytes"), "{e}");
    }

    #[test]
    fn without_a_channel_url_the_sandbox_is_the_target() {
        let mut s = Settings::for_tests(":memory:");
        s.channel.callback_secret = None;
        assert!(matches!(
            s.channel.target(),
            Ok(ChannelTarget::Sandbox {
                callback_secret: None
            })
        ));
    }

    #[test]
    fn bad_relay_names_are_refused_before_any_connection() {
        let mut s = Settings::for_tests(":memory:");
        s.relay.nats_url = Some("nats://127.0.0.1:4222".into());
        assert!(s.relay.config(s.worker.poll()).unwrap().is_some());
        s.relay.nats_prefix = "a..b".into();
        let e = s.relay.config(s.worker.poll()).unwrap_err();
        assert!(e.contains("--nats-prefix"), "{e}");
        s.relay.nats_prefix = "converge".into();
        s.relay.nats_stream = "A.B".into();
        let e = s.relay.config(s.worker.poll()).unwrap_err();
        assert!(e.contains("--nats-stream"), "{e}");
    }

    #[test]
    fn without_a_nats_url_no_relay_runs() {
        let s = Settings::for_tests(":memory:");
        assert!(s.relay.config(s.worker.poll()).unwrap().is_none());
    }

    #[test]
    fn a_missing_audit_signing_key_file_is_one_line_naming_it() {
        let mut s = Settings::for_tests(":memory:");
        assert!(s.audit.signing_key().unwrap().is_none());
        s.audit.audit_signing_key = Some("/nonexistent/converge-audit.pem".into());
        let e = s.audit.signing_key().expect_err("refused");
        assert!(e.contains("/nonexistent/converge-audit.pem"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn tombstones_are_kept_their_days_and_never_less_than_a_key_or_a_hold() {
        let day = 86_400_000;
        let parse = |args: &[&str]| {
            Cli::try_parse_from([&["converge"], args].concat())
                .expect("flags parse")
                .settings
                .idempotency
        };
        let ttl = 7 * day;
        assert_eq!(parse(&[]).tombstone_retention_ms(ttl), 30 * day);
        let short = parse(&["--tombstone-retention-days", "2"]);
        assert_eq!(short.tombstone_retention_ms(ttl), ttl);
        let keys_kept_longer = parse(&[
            "--tombstone-retention-days",
            "1",
            "--key-retention-secs",
            "259200",
        ]);
        assert_eq!(keys_kept_longer.tombstone_retention_ms(day), 3 * day);
        for bad in ["0", "3651", "x"] {
            assert!(Cli::try_parse_from(["converge", "--tombstone-retention-days", bad]).is_err());
        }
    }
}

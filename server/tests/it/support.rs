//! Test support: both backends, a served core on 127.0.0.1:0, a merchant client.
//!
//! PostgreSQL tests use a real server: `CONVERGE_TEST_PG_URL` (or a `postgres://`
//! `DATABASE_URL`) names an account that may create databases; each test gets its own fresh
//! database. Without one, PostgreSQL tests print "SKIPPED" and pass, unless
//! `CONVERGE_REQUIRE_PG=1` (set by `.ci/run` and the README's test command), which turns the
//! skip into a failure.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use converge_server::config::Settings;
use converge_server::domain::fingerprint::sha256_hex;
use converge_server::startup::{self, Running};
use converge_server::store::{self, Store};
use rand::Rng;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// Which backend a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Db {
    Sqlite,
    Postgres,
}

/// The admin URL of the test PostgreSQL server, if any.
pub fn pg_admin_url() -> Option<String> {
    let url = std::env::var("CONVERGE_TEST_PG_URL").ok().or_else(|| {
        std::env::var("DATABASE_URL")
            .ok()
            .filter(|u| u.starts_with("postgres://") || u.starts_with("postgresql://"))
    });
    if url.is_none() && std::env::var("CONVERGE_REQUIRE_PG").as_deref() == Ok("1") {
        panic!(
            "CONVERGE_REQUIRE_PG=1 but no CONVERGE_TEST_PG_URL: PostgreSQL tests may not be skipped"
        );
    }
    url
}

/// A database URL for a fresh database on `db`; None when PostgreSQL is not configured.
/// The returned TempDir (SQLite) must outlive the store.
pub async fn fresh_url(db: Db) -> Option<(String, Option<tempfile::TempDir>)> {
    match db {
        Db::Sqlite => {
            let dir = tempfile::tempdir().expect("temp dir");
            let path = dir.path().join("converge.db");
            Some((path.to_string_lossy().into_owned(), Some(dir)))
        }
        Db::Postgres => {
            let admin = pg_admin_url()?;
            let name = format!(
                "converge_test_{}",
                hex::encode(rand::rng().random::<[u8; 6]>())
            );
            admin_exec(&admin, &format!("CREATE DATABASE {name}"))
                .await
                .unwrap_or_else(|e| panic!("create test database {name}: {e}"));
            let mut url = url::Url::parse(&admin).expect("CONVERGE_TEST_PG_URL is a URL");
            url.set_path(&name);
            Some((url.to_string(), None))
        }
    }
}

/// Runs one statement on the test server's admin database, retrying a few times: on a busy
/// two-core CI machine `CREATE DATABASE` can meet an autovacuum worker still on `template1`
/// ("being accessed by other users") and a connection can be slow to come; neither is what a
/// test is about.
async fn admin_exec(admin: &str, sql: &str) -> Result<(), String> {
    let mut last = String::new();
    for attempt in 0..6u64 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(250 * attempt)).await;
        }
        let pool = match sqlx::postgres::PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect(admin)
            .await
        {
            Ok(pool) => pool,
            Err(e) => {
                last = format!("connect: {e}");
                continue;
            }
        };
        let done = sqlx::query(sql).execute(&pool).await;
        pool.close().await;
        match done {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

/// Makes the PostgreSQL database `url` names read-only (`on`) or writable again, as a
/// failover's window shows it to converge (issue 40: a demoted primary, or one restarted
/// read-only before its promotion): `default_transaction_read_only` set on the database and
/// its open connections ended, so every pooled connection reconnects under the new setting.
pub async fn set_read_only(url: &str, on: bool) {
    let admin = pg_admin_url().expect("a PostgreSQL test");
    let name = url::Url::parse(url)
        .expect("database URL")
        .path()
        .trim_start_matches('/')
        .to_string();
    let set = if on {
        "SET default_transaction_read_only = on"
    } else {
        "RESET default_transaction_read_only"
    };
    admin_exec(&admin, &format!("ALTER DATABASE {name} {set}"))
        .await
        .expect("alter database");
    admin_exec(
        &admin,
        &format!("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'"),
    )
    .await
    .expect("end the database's connections");
}

/// Drops the PostgreSQL database `url` names (a test's own, made by [`fresh_url`]), so a
/// passing run leaves nothing behind; a failing test keeps its database for inspection.
/// SQLite files go with their TempDir, so this is a no-op for them.
pub async fn drop_database(url: &str) {
    let Some(admin) = pg_admin_url().filter(|_| url.starts_with("postgres")) else {
        return;
    };
    let name = url::Url::parse(url)
        .expect("database URL")
        .path()
        .trim_start_matches('/')
        .to_string();
    if !name.starts_with("converge_test_") {
        return;
    }
    // A database left behind is harmless (scripts/pg.sh drops leftovers before each run), so
    // failing to drop it must not fail a test that passed.
    if let Err(e) = admin_exec(
        &admin,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    )
    .await
    {
        eprintln!("note: test database {name} left behind: {e}");
    }
}

/// A fresh, migrated store on `db` and its URL; None when PostgreSQL is not configured.
pub async fn fresh_store(db: Db) -> Option<(Arc<dyn Store>, String, Option<tempfile::TempDir>)> {
    let (url, dir) = fresh_url(db).await?;
    let mut opened = store::connect(&url).await;
    for attempt in 1..4u64 {
        if opened.is_ok() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500 * attempt)).await;
        opened = store::connect(&url).await;
    }
    let store = opened.unwrap_or_else(|e| panic!("open the test store at {url}: {e}"));
    Some((store, url, dir))
}

/// A read-only handle on a test database for raw SQL, on either backend: for assertions the
/// [`Store`] trait has no read for. `$1`, `$2`... bind text arguments.
#[derive(Clone)]
pub enum RawDb {
    Sqlite(sqlx::SqlitePool),
    Postgres(sqlx::PgPool),
}

impl RawDb {
    /// Connects to the database at `url` (a SQLite path or a `postgres://` URL).
    pub async fn connect(url: &str) -> RawDb {
        if url.starts_with("postgres") {
            RawDb::Postgres(
                sqlx::PgPool::connect(url)
                    .await
                    .expect("connect for raw reads"),
            )
        } else {
            let opts = sqlx::sqlite::SqliteConnectOptions::new()
                .filename(url)
                .read_only(true);
            RawDb::Sqlite(
                sqlx::SqlitePool::connect_with(opts)
                    .await
                    .expect("open for raw reads"),
            )
        }
    }

    /// The single integer `sql` selects.
    pub async fn i64(&self, sql: &str, args: &[&str]) -> i64 {
        macro_rules! run {
            ($pool:expr) => {{
                let mut q = sqlx::query_scalar::<_, i64>(sql);
                for a in args {
                    q = q.bind(*a);
                }
                q.fetch_one($pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }};
        }
        match self {
            RawDb::Sqlite(p) => run!(p),
            RawDb::Postgres(p) => run!(p),
        }
    }

    /// The first column of every row `sql` selects, as text.
    pub async fn strings(&self, sql: &str, args: &[&str]) -> Vec<String> {
        macro_rules! run {
            ($pool:expr) => {{
                let mut q = sqlx::query_scalar::<_, String>(sql);
                for a in args {
                    q = q.bind(*a);
                }
                q.fetch_all($pool)
                    .await
                    .unwrap_or_else(|e| panic!("{sql}: {e}"))
            }};
        }
        match self {
            RawDb::Sqlite(p) => run!(p),
            RawDb::Postgres(p) => run!(p),
        }
    }

    /// Closes the pool.
    pub async fn close(&self) {
        match self {
            RawDb::Sqlite(p) => p.close().await,
            RawDb::Postgres(p) => p.close().await,
        }
    }
}

/// A single integer read with raw SQL from the database at `url` (one-off connection).
pub async fn sql_i64(url: &str, sql: &str, args: &[&str]) -> i64 {
    let db = RawDb::connect(url).await;
    let v = db.i64(sql, args).await;
    db.close().await;
    v
}

/// Text values of the first column of every row of `sql` at `url` (one-off connection).
pub async fn sql_strings(url: &str, sql: &str, args: &[&str]) -> Vec<String> {
    let db = RawDb::connect(url).await;
    let v = db.strings(sql, args).await;
    db.close().await;
    v
}

/// Polls `probe` every 20 ms until it returns `Some`, or panics with `what` after `within`.
/// For background effects (callbacks, late answers): never a fixed sleep.
pub async fn eventually<T, F, Fut>(within: Duration, what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether an app's teardown check ran, or why it was skipped.
#[derive(Debug, Default)]
pub struct TeardownState {
    done: std::sync::atomic::AtomicBool,
    opt_out: std::sync::Mutex<Option<String>>,
}

/// DESIGN.md "Convergence invariants" checked on what a test left, with the checks of
/// `converge verify` (`converge_server::verify::run`, the in-process sandbox's charge list
/// for invariant 1, a 300 s window as `converge verify`'s default): as crates.io's test app
/// asserts on drop, every test that spawns an app ends by proving that it neither lost nor
/// doubled money, nor broke the ledger, the stored responses, the audit chain or the outbox.
/// [`on_both_backends!`] runs it after the body; a test that leaves a breach on purpose opts
/// out with [`TestApp::skip_invariant_check`].
#[derive(Clone)]
pub struct Teardown {
    store: Arc<dyn Store>,
    channel: Option<String>,
    state: Arc<TeardownState>,
}

impl Teardown {
    /// Runs the checks unless the test opted out; panics with the report on any breach.
    pub async fn check(&self) {
        use converge_server::verify::{self, ChargeSource, HttpChargeSource, Window};
        self.state
            .done
            .store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(reason) = self.state.opt_out.lock().expect("opt-out lock").clone() {
            eprintln!("teardown invariant check skipped: {reason}");
            return;
        }
        let source = self
            .channel
            .as_deref()
            .map(|u| HttpChargeSource::new(u, Duration::from_secs(30)).expect("sandbox URL"));
        let window = Window {
            now_ms: converge_server::domain::clock::Clock::now_ms(
                &converge_server::domain::clock::SystemClock,
            ),
            window_ms: 300_000,
            action_window_ms: converge_server::service::customer_action::DEFAULT_ACTION_WINDOW_SECS
                as i64
                * 1000,
        };
        let report = verify::run(
            self.store.as_ref(),
            source.as_ref().map(|s| s as &dyn ChargeSource),
            window,
        )
        .await
        .unwrap_or_else(|e| panic!("teardown invariant check could not run: {e}"));
        assert!(
            report.ok(),
            "teardown invariant check: {}\n{}",
            report.summary(),
            report.render()
        );
    }
}

/// A served core with one merchant.
pub struct TestApp {
    pub base: String,
    pub api_key: String,
    pub merchant_id: i64,
    pub client: reqwest::Client,
    pub running: Running,
    pub store: Arc<dyn Store>,
    /// The backend under test.
    pub db: Db,
    /// The core's database URL (for [`sql_i64`] and [`drop_database`]).
    pub db_url: String,
    /// The HMAC secret channel callbacks are signed with.
    pub callback_secret: Vec<u8>,
    raw: tokio::sync::OnceCell<RawDb>,
    /// Whether the teardown check ran or was opted out of ([`TestApp::teardown`]).
    teardown: Arc<TeardownState>,
    _dir: Option<tempfile::TempDir>,
}

impl TestApp {
    /// Serves the core on 127.0.0.1:0 over `db` with test settings, tweaked by `tweak`.
    pub async fn spawn_with(db: Db, tweak: impl FnOnce(&mut Settings)) -> Option<TestApp> {
        let (url, dir) = fresh_url(db).await?;
        let mut settings = Settings::for_tests(&url);
        tweak(&mut settings);
        let callback_secret = settings
            .channel
            .callback_secret
            .clone()
            .unwrap_or_default()
            .into_bytes();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let running = startup::build(settings, addr).await.expect("core starts");
        let router = running.router.clone();
        tokio::spawn(async move {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
            )
            .await
            .expect("serve");
        });
        let store = running.state.core.store.clone();
        let api_key = format!("sk_test_{}", hex::encode(rand::rng().random::<[u8; 16]>()));
        let merchant = store
            .create_merchant("acme", &sha256_hex(api_key.as_bytes()), 0)
            .await
            .expect("merchant");
        Some(TestApp {
            base: format!("http://{addr}"),
            api_key,
            merchant_id: merchant.id,
            client: reqwest::Client::new(),
            running,
            store,
            db,
            db_url: url,
            callback_secret,
            raw: tokio::sync::OnceCell::new(),
            teardown: Arc::default(),
            _dir: dir,
        })
    }

    /// The teardown check of this app, taken before the test body runs (which may move or
    /// drop the app): [`Teardown::check`] runs `converge verify`'s invariant checks on what
    /// the test left.
    pub fn teardown(&self) -> Teardown {
        Teardown {
            store: self.store.clone(),
            channel: self.running.sandbox.as_ref().map(|s| s.url.clone()),
            state: self.teardown.clone(),
        }
    }

    /// Opts this test out of the teardown check because it leaves a breach on purpose
    /// (`reason` says which and why; printed when the check is skipped).
    pub fn skip_invariant_check(&self, reason: &str) {
        *self.teardown.opt_out.lock().expect("opt-out lock") = Some(reason.to_string());
    }

    /// A second server on this app's database (test settings tweaked by `tweak`), as a
    /// second `converge serve` sharing it would be; returns its base URL and its core.
    /// The peer calls this app's channel (the in-process sandbox, when there is one), as
    /// processes sharing a database share their channel: so every charge is in the one list
    /// the teardown check reconciles against.
    pub async fn spawn_peer(&self, tweak: impl FnOnce(&mut Settings)) -> (String, Running) {
        let mut settings = Settings::for_tests(&self.db_url);
        if let Some(sandbox) = &self.running.sandbox {
            settings.channel.channel_url = Some(sandbox.url.clone());
            settings.channel.callback_secret =
                Some(String::from_utf8(self.callback_secret.clone()).expect("test secret is text"));
        }
        tweak(&mut settings);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let running = startup::build(settings, addr).await.expect("peer starts");
        let base = serve_on(listener, running.router.clone());
        (base, running)
    }

    /// [`spawn_with`](Self::spawn_with) with the default test settings.
    pub async fn spawn(db: Db) -> Option<TestApp> {
        Self::spawn_with(db, |_| {}).await
    }

    /// A payment of "acme" that was in flight when the merchant was frozen, so its charge
    /// lands and its ledger posting fails: SUSPENSE with an open error-pool item. Freezes
    /// "acme" (and leaves it frozen). A frozen merchant's API refuses new payments (403
    /// `merchant_frozen`), so the payment is made below the API, through the core, as one
    /// created just before the freeze would be; then driven as the request would drive it.
    /// Returns the payment id.
    pub async fn suspended_payment(&self, order: &str, amount: i64) -> String {
        use converge_server::service::payments::{InsertOutcome, PaymentInput};
        let core = &self.running.state.core;
        let input = PaymentInput {
            amount,
            currency: "CNY".into(),
            merchant_order_id: order.into(),
            description: String::new(),
            capture_mode: Default::default(),
        };
        let InsertOutcome::Created(p) = core
            .insert_payment(self.merchant_id, &input, None)
            .await
            .expect("insert")
        else {
            panic!("order {order} exists already");
        };
        assert!(self.store.set_merchant_frozen("acme", true).await.unwrap());
        let p = core.drive(p, "test").await.expect("drive");
        assert_eq!(p.status.as_str(), "SUSPENSE", "{p:?}");
        p.id
    }

    /// Creates a payment of `amount` CNY minor units for order `order` with Idempotency-Key
    /// `key`, as the merchant does; asserts the 201 and returns the answer's body.
    pub async fn pay(&self, key: &str, order: &str, amount: i64) -> Value {
        let a = self
            .post(
                "/v1/payments",
                Some(key),
                &json!({"amount": amount, "currency": "CNY", "merchant_order_id": order}),
            )
            .await;
        assert_eq!(a.status, 201, "{:?}", a.json());
        a.json()
    }

    /// Adds another merchant; returns its API key.
    pub async fn add_merchant(&self, name: &str) -> String {
        let key = format!("sk_test_{}", hex::encode(rand::rng().random::<[u8; 16]>()));
        self.store
            .create_merchant(name, &sha256_hex(key.as_bytes()), 0)
            .await
            .expect("merchant");
        key
    }

    /// POSTs raw `body` to `path` as `api_key` with an optional Idempotency-Key.
    pub async fn post_raw(
        &self,
        api_key: &str,
        path: &str,
        key: Option<&str>,
        body: &str,
    ) -> Answer {
        let mut req = self
            .client
            .post(format!("{}{}", self.base, path))
            .bearer_auth(api_key)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        Answer::from(req.send().await.expect("request sent")).await
    }

    /// POSTs JSON to `path` as the default merchant.
    pub async fn post(&self, path: &str, key: Option<&str>, body: &Value) -> Answer {
        self.post_raw(&self.api_key.clone(), path, key, &body.to_string())
            .await
    }

    /// GETs `path` as the default merchant.
    pub async fn get(&self, path: &str) -> Answer {
        self.get_as(&self.api_key.clone(), path).await
    }

    /// GETs `path` as `api_key`.
    pub async fn get_as(&self, api_key: &str, path: &str) -> Answer {
        let req = self
            .client
            .get(format!("{}{}", self.base, path))
            .bearer_auth(api_key);
        Answer::from(req.send().await.expect("request sent")).await
    }

    /// Sends `req` (built on [`client`](Self::client)) and reads the answer in full.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Answer {
        Answer::from(req.send().await.expect("request sent")).await
    }

    /// POSTs a channel callback: raw `body` with an optional `Converge-Signature` header.
    pub async fn post_callback(&self, body: &[u8], signature: Option<&str>) -> Answer {
        let mut req = self
            .client
            .post(format!("{}/v1/channel/callbacks", self.base))
            .header("content-type", "application/json")
            .body(body.to_vec());
        if let Some(sig) = signature {
            req = req.header(converge_server::channel::signature::SIGNATURE_HEADER, sig);
        }
        self.send(req).await
    }

    /// GETs `path` on the in-process sandbox channel (e.g. `/stats`, `/attempts/{key}`).
    pub async fn sandbox_get(&self, path: &str) -> Answer {
        let base = &self
            .running
            .sandbox
            .as_ref()
            .expect("in-process sandbox")
            .url;
        self.send(self.client.get(format!("{base}{path}"))).await
    }

    /// Charge attempts the sandbox saw for `channel_key` (0 when it never saw the key).
    pub async fn channel_attempts(&self, channel_key: &str) -> i64 {
        let a = self.sandbox_get(&format!("/attempts/{channel_key}")).await;
        if a.status == 404 {
            0
        } else {
            a.json()["attempts"].as_i64().expect("attempts")
        }
    }

    /// Charges the sandbox committed, all keys together.
    pub async fn channel_charges(&self) -> i64 {
        self.sandbox_get("/stats").await.json()["charges"]
            .as_i64()
            .expect("charges")
    }

    /// Raw read access to the core's database (one pool, opened on first use).
    pub async fn raw(&self) -> &RawDb {
        self.raw.get_or_init(|| RawDb::connect(&self.db_url)).await
    }

    /// A single integer read with raw SQL from the core's database.
    pub async fn sql_i64(&self, sql: &str, args: &[&str]) -> i64 {
        self.raw().await.i64(sql, args).await
    }

    /// The first column of every row `sql` selects from the core's database, as text.
    pub async fn sql_strings(&self, sql: &str, args: &[&str]) -> Vec<String> {
        self.raw().await.strings(sql, args).await
    }

    /// How many payments the core stored.
    /// What payment `payment_id`'s ledger batches leave on `account`, debits positive.
    pub async fn account_net(&self, payment_id: &str, account: &str) -> i64 {
        self.sql_i64(
            "SELECT CAST(COALESCE(SUM(CASE WHEN e.direction = 'debit' THEN e.amount ELSE -e.amount END), 0) AS BIGINT) \
             FROM ledger_entries e JOIN ledger_batches b ON b.id = e.batch_id \
             WHERE b.payment_id = $1 AND e.account = $2",
            &[payment_id, account],
        )
        .await
    }

    pub async fn payment_count(&self) -> i64 {
        self.sql_i64("SELECT COUNT(*) FROM payments", &[]).await
    }

    /// GETs a payment until its status is `status`, or panics after `within`.
    pub async fn wait_for_status(&self, id: &str, status: &str, within: Duration) -> Value {
        let path = format!("/v1/payments/{id}");
        eventually(
            within,
            &format!("payment {id} to become {status}"),
            || async {
                let p = self.get(&path).await.json();
                (p["status"] == status).then_some(p)
            },
        )
        .await
    }
}

impl Drop for TestApp {
    /// An app must not end without its teardown check (or an explicit opt-out): a test that
    /// spawns one outside [`on_both_backends!`] calls `app.teardown().check().await` itself.
    fn drop(&mut self) {
        let state = &self.teardown;
        if std::thread::panicking()
            || state.done.load(std::sync::atomic::Ordering::SeqCst)
            || state.opt_out.lock().map(|o| o.is_some()).unwrap_or(true)
        {
            return;
        }
        panic!(
            "TestApp dropped without its teardown invariant check: run `app.teardown().check().await` (or opt out with `skip_invariant_check`)"
        );
    }
}

/// Serves `router` on `listener` with connect info (as `converge serve` does); returns the
/// base URL.
pub fn serve_on(listener: tokio::net::TcpListener, router: axum::Router) -> String {
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
        )
        .await
        .expect("serve");
    });
    format!("http://{addr}")
}

/// Serves `router` on a fresh port of 127.0.0.1; returns the base URL.
pub async fn serve_router(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    serve_on(listener, router)
}

/// A response read in full.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    async fn from(resp: reqwest::Response) -> Answer {
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let body = resp.bytes().await.expect("body").to_vec();
        Answer {
            status,
            headers,
            body,
        }
    }

    /// The body as JSON.
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    /// `error.code` of an error body.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// A header's value as text ("" when absent).
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    }

    /// Asserts `status` and the error shape `{"error":{"code","message"}}` with `code`,
    /// served as JSON.
    #[track_caller]
    pub fn assert_error(&self, status: u16, code: &str) {
        let text = String::from_utf8_lossy(&self.body);
        assert_eq!(self.status, status, "status of {text}");
        assert!(
            self.header("content-type").starts_with("application/json"),
            "content type of {text}"
        );
        let v: Value =
            serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"));
        assert_eq!(v["error"]["code"], code, "code of {text}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "message of {text}"
        );
        assert_eq!(
            v.as_object().map(|o| o.len()),
            Some(1),
            "only `error` at the top of {text}"
        );
    }
}

/// Runs `$body` (an async block using `app: TestApp`) once per backend, as
/// `mod $name { fn sqlite(); fn postgres(); }`.
#[macro_export]
macro_rules! on_both_backends {
    ($name:ident, |$app:ident| $body:block) => {
        $crate::on_both_backends!($name, |_s| {}, |$app| $body);
    };
    ($name:ident, |$s:ident| $tweak:block, |$app:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;
            #[allow(unused_imports)]
            use $crate::support::*;

            async fn run(db: Db) {
                let Some($app) = TestApp::spawn_with(db, |$s| $tweak).await else {
                    eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
                    return;
                };
                let url = $app.db_url.clone();
                let teardown = $app.teardown();
                $body
                teardown.check().await;
                drop_database(&url).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                run(Db::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                run(Db::Postgres).await;
            }
        }
    };
}

/// Like [`on_both_backends!`] for store-level tests: `$store` is an `Arc<dyn Store>`.
#[macro_export]
macro_rules! store_conformance {
    ($name:ident, |$store:ident| $body:block) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            async fn run(db: $crate::support::Db) {
                let Some(($store, url, _dir)) = $crate::support::fresh_store(db).await else {
                    eprintln!("SKIPPED on PostgreSQL: set CONVERGE_TEST_PG_URL");
                    return;
                };
                $body
                $store.close().await;
                $crate::support::drop_database(&url).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn sqlite() {
                run($crate::support::Db::Sqlite).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
            async fn postgres() {
                run($crate::support::Db::Postgres).await;
            }
        }
    };
}

/// The password of every console user the tests add.
pub const OPS_PASSWORD: &str = "correct-horse-battery";

/// Adds console user `name` with `roles` (comma-separated) and [`OPS_PASSWORD`].
/// The actor of test set-up changes (users added before a test runs) in the audit log.
pub fn setup_actor() -> converge_server::service::actor::Actor {
    converge_server::service::actor::Actor {
        username: "cli:test-setup".into(),
        roles: String::new(),
        meta: "{}".into(),
    }
}

/// A core over `store`, for tests that hold only a store: the CLI's
/// ([`converge_server::startup::records_core`]).
pub fn core_of(store: &Arc<dyn Store>) -> converge_server::service::Core {
    converge_server::startup::records_core(store.clone())
}

impl TestApp {
    /// The running server's use cases.
    pub fn core(&self) -> &converge_server::service::Core {
        &self.running.state.core
    }
}

pub async fn add_ops_user(app: &TestApp, name: &str, roles: &str) {
    app.core()
        .add_user(
            &converge_server::ops::password::PasswordHasherPool::new(1),
            name,
            roles,
            OPS_PASSWORD,
            0,
            &setup_actor(),
        )
        .await
        .expect("user");
}

/// A client with its own cookie jar, signed in to the console as `name`.
pub async fn ops_session(app: &TestApp, name: &str) -> reqwest::Client {
    let c = reqwest::Client::builder()
        .cookie_store(true)
        .build()
        .expect("client");
    let r = c
        .post(format!("{}/ops/v1/login", app.base))
        .json(&serde_json::json!({"username": name, "password": OPS_PASSWORD}))
        .send()
        .await
        .expect("sent");
    assert_eq!(r.status().as_u16(), 200, "login {name}");
    c
}

/// `t` with the follow-up job its state-machine row calls for (`Effects::follow_up`), due at
/// `t.now`, unless the test set its own: the store refuses a step without it.
pub fn with_follow_up(
    mut t: converge_server::store::Transition,
) -> converge_server::store::Transition {
    if t.enqueue.is_empty()
        && let Ok(rule) = converge_server::domain::state::check(t.from, t.event, t.to)
    {
        t.enqueue = rule
            .effects
            .follow_up
            .map(|f| converge_server::store::NewJob {
                kind: f.kind,
                payment_id: Some(t.payment_id.clone()),
                refund_id: None,
                run_at: t.now,
                max_attempts: 5,
            })
            .into_iter()
            .collect();
    }
    t
}

/// A console request as a signed-in user, in the manner of crates.io's `RequestHelper`: every
/// console test sends through [`ops_get`] and [`ops_post`], so how a request is made and its
/// answer read is written once. `c` carries the user's session cookie ([`ops_session`]); the
/// answer is the status and the JSON body (`null` when the body is not JSON).
pub async fn ops_get(c: &reqwest::Client, app: &TestApp, path: &str) -> (u16, Value) {
    status_and_json(app.send(c.get(format!("{}{path}", app.base))).await)
}

/// [`ops_get`]'s POST, with a JSON body (a `Value` or a reference to one).
pub async fn ops_post(
    c: &reqwest::Client,
    app: &TestApp,
    path: &str,
    body: impl std::borrow::Borrow<Value>,
) -> (u16, Value) {
    let req = c.post(format!("{}{path}", app.base)).json(body.borrow());
    status_and_json(app.send(req).await)
}

fn status_and_json(a: Answer) -> (u16, Value) {
    let v = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
    (a.status, v)
}

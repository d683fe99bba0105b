//! Console sessions: tower-sessions with its sqlx store on the same database as everything
//! else (SQLite or PostgreSQL, chosen at start-up). Cookies are HttpOnly and SameSite=Strict
//! (+ Secure when served over TLS); sessions expire after an idle timeout that only a
//! person's requests slide (background refreshes do not; ASVS 5.0 V7.3.1), and the login
//! time stored in the session enforces an absolute timeout (OWASP Session Management Cheat
//! Sheet).
//!
//! Logout is durable: a saved session is only ever *updated*, never inserted again (only
//! `create`, under a fresh random id, inserts). tower-sessions saves a request's session when
//! the request ends, so a request that loaded the session before a logout and ends after it
//! would otherwise write the destroyed session back; here its save finds no row and writes
//! nothing.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tower_sessions::cookie::SameSite;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, ExpiredDeletion, SessionStore};
use tower_sessions::{Expiry, SessionManagerLayer};
use tower_sessions_sqlx_store::{PostgresStore, SqliteStore};

use crate::store::DbPool;

/// Name of the session cookie.
pub const COOKIE: &str = "converge_session";
/// Session key of the signed-in user.
pub const USER_KEY: &str = "ops.user";
/// Request header that marks a request as a background refresh (any value but `0`): it is
/// served as usual but does not count as the person's activity, so it does not keep the
/// session alive. The console's dashboard polling uses a server function that is background
/// by itself; scripts polling `/ops/v1/*` set this header.
pub const BACKGROUND_HEADER: &str = "x-converge-background";

/// Whether a request is a person's action or a background refresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Activity {
    /// A person did something: the idle timeout starts again.
    Person,
    /// Automatic polling: the idle timeout runs on.
    Background,
}

impl Activity {
    /// [`Activity::Background`] when `headers` carry [`BACKGROUND_HEADER`] (not `0`).
    pub fn of(headers: &axum::http::HeaderMap) -> Self {
        match headers.get(BACKGROUND_HEADER) {
            Some(v) if v.as_bytes() != b"0" => Activity::Background,
            _ => Activity::Person,
        }
    }
}

/// What a session remembers about its user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionUser {
    /// Login name.
    pub username: String,
    /// The user's session epoch at login; a bump (disable, password reset) ends the session.
    pub epoch: i64,
    /// Login time, epoch ms UTC (for the absolute timeout).
    pub login_at: i64,
    /// When a person last used the session, epoch ms UTC (for the idle timeout; 0 in
    /// sessions made before it was kept: the login time stands in).
    #[serde(default)]
    pub last_active: i64,
}

/// The session store of whichever database converge runs on: tower-sessions' sqlx store,
/// except that [`SessionStore::save`] only updates a session that still exists.
#[derive(Debug, Clone)]
pub enum SessionBackend {
    /// SQLite table `tower_sessions`.
    Sqlite(SqliteStore, sqlx::SqlitePool),
    /// PostgreSQL table `tower_sessions.session`.
    Postgres(PostgresStore, sqlx::PgPool),
}

impl SessionBackend {
    /// The store on `pool`, its table created if missing.
    pub async fn new(pool: DbPool) -> Result<Self, sqlx::Error> {
        Ok(match pool {
            DbPool::Sqlite(p) => {
                let s = SqliteStore::new(p.clone());
                s.migrate().await?;
                SessionBackend::Sqlite(s, p)
            }
            DbPool::Postgres(p) => {
                let s = PostgresStore::new(p.clone());
                s.migrate().await?;
                SessionBackend::Postgres(s, p)
            }
        })
    }

    /// The layer that loads and saves sessions: idle timeout `idle`, Secure cookie when
    /// `secure`. A session is saved only when changed: [`super::auth::Auth::current`] changes
    /// it (its last activity) on a person's requests, which is what slides the stored
    /// session's expiry and the cookie's; background refreshes change nothing.
    pub fn layer(&self, idle: time::Duration, secure: bool) -> SessionManagerLayer<SessionBackend> {
        SessionManagerLayer::new(self.clone())
            .with_name(COOKIE)
            .with_http_only(true)
            .with_same_site(SameSite::Strict)
            .with_secure(secure)
            .with_path("/")
            .with_expiry(Expiry::OnInactivity(idle))
            .with_always_save(false)
    }
}

#[async_trait]
impl SessionStore for SessionBackend {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s, _) => s.create(record).await,
            SessionBackend::Postgres(s, _) => s.create(record).await,
        }
    }

    /// Updates the stored session if it still exists and has not expired; never inserts
    /// (tower-sessions' own save is an upsert, which would bring a logged-out session back).
    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let data =
            rmp_serde::to_vec(record).map_err(|e| session_store::Error::Encode(e.to_string()))?;
        let now = time::OffsetDateTime::now_utc();
        let done = match self {
            SessionBackend::Sqlite(_, pool) => sqlx::query(
                "UPDATE tower_sessions SET data = $1, expiry_date = $2 WHERE id = $3 AND expiry_date > $4",
            )
            .bind(data)
            .bind(record.expiry_date)
            .bind(record.id.to_string())
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ()),
            SessionBackend::Postgres(_, pool) => sqlx::query(
                r#"UPDATE "tower_sessions"."session" SET data = $1, expiry_date = $2 WHERE id = $3 AND expiry_date > $4"#,
            )
            .bind(data)
            .bind(record.expiry_date)
            .bind(record.id.to_string())
            .bind(now)
            .execute(pool)
            .await
            .map(|_| ()),
        };
        done.map_err(|e| session_store::Error::Backend(e.to_string()))
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            SessionBackend::Sqlite(s, _) => s.load(id).await,
            SessionBackend::Postgres(s, _) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s, _) => s.delete(id).await,
            SessionBackend::Postgres(s, _) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for SessionBackend {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s, _) => s.delete_expired().await,
            SessionBackend::Postgres(s, _) => s.delete_expired().await,
        }
    }
}

//! Console sessions: tower-sessions with its sqlx store on the same database as everything
//! else (SQLite or PostgreSQL, chosen at start-up). Cookies are HttpOnly and SameSite=Strict
//! (+ Secure when served over TLS); sessions expire after an idle timeout, and the login
//! time stored in the session enforces an absolute timeout (OWASP Session Management Cheat
//! Sheet).

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

/// What a session remembers about its user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionUser {
    /// Login name.
    pub username: String,
    /// The user's session epoch at login; a bump (disable, password reset) ends the session.
    pub epoch: i64,
    /// Login time, epoch ms UTC (for the absolute timeout).
    pub login_at: i64,
}

/// The session store of whichever database converge runs on.
#[derive(Debug, Clone)]
pub enum SessionBackend {
    /// SQLite table `tower_sessions`.
    Sqlite(SqliteStore),
    /// PostgreSQL table `tower_sessions.session`.
    Postgres(PostgresStore),
}

impl SessionBackend {
    /// The store on `pool`, its table created if missing.
    pub async fn new(pool: DbPool) -> Result<Self, sqlx::Error> {
        Ok(match pool {
            DbPool::Sqlite(p) => {
                let s = SqliteStore::new(p);
                s.migrate().await?;
                SessionBackend::Sqlite(s)
            }
            DbPool::Postgres(p) => {
                let s = PostgresStore::new(p);
                s.migrate().await?;
                SessionBackend::Postgres(s)
            }
        })
    }

    /// The layer that loads and saves sessions: idle timeout `idle`, Secure cookie when
    /// `secure`.
    pub fn layer(&self, idle: time::Duration, secure: bool) -> SessionManagerLayer<SessionBackend> {
        SessionManagerLayer::new(self.clone())
            .with_name(COOKIE)
            .with_http_only(true)
            .with_same_site(SameSite::Strict)
            .with_secure(secure)
            .with_path("/")
            .with_expiry(Expiry::OnInactivity(idle))
            // Saving on every request is what slides the idle deadline.
            .with_always_save(true)
    }
}

#[async_trait]
impl SessionStore for SessionBackend {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s) => s.create(record).await,
            SessionBackend::Postgres(s) => s.create(record).await,
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s) => s.save(record).await,
            SessionBackend::Postgres(s) => s.save(record).await,
        }
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        match self {
            SessionBackend::Sqlite(s) => s.load(id).await,
            SessionBackend::Postgres(s) => s.load(id).await,
        }
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s) => s.delete(id).await,
            SessionBackend::Postgres(s) => s.delete(id).await,
        }
    }
}

#[async_trait]
impl ExpiredDeletion for SessionBackend {
    async fn delete_expired(&self) -> session_store::Result<()> {
        match self {
            SessionBackend::Sqlite(s) => s.delete_expired().await,
            SessionBackend::Postgres(s) => s.delete_expired().await,
        }
    }
}

//! What every one-off command starts from: the store of `--database-url` (opened, migrated,
//! closed when the command is done, whatever its outcome), a [`Core`] built by the server's
//! own start-up ([`startup::one_off_core`]), the CLI's actor in the audit log, and the time.

use std::future::Future;
use std::sync::Arc;

use anyhow::Result;
use converge_server::domain::secret_box::SecretBox;
use converge_server::service::Core;
use converge_server::service::webhooks::WebhookSettings;
use converge_server::startup;
use converge_server::store::Store;

use super::DbArgs;

/// Runs `f` over the store of `db`, then closes the store (also when `f` failed, so a
/// PostgreSQL pool ends its connections and a SQLite database checkpoints its WAL), then
/// answers `f`'s result. Errors: the store's start-up error (one line), or `f`'s.
pub(super) async fn with_store<T, F, Fut>(db: &DbArgs, f: F) -> Result<T>
where
    F: FnOnce(Arc<dyn Store>) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let store = startup::open_store(&db.database_url).await?;
    let result = f(store.clone()).await;
    store.close().await;
    result
}

/// [`with_store`] with a core over the store for a command that only reads and writes
/// records ([`startup::records_core`]): users, merchants and their keys, the audit log.
pub(super) async fn with_records_core<T, F, Fut>(db: &DbArgs, f: F) -> Result<T>
where
    F: FnOnce(Core) -> Fut,
    Fut: Future<Output = Result<T>>,
{
    with_store(db, |store| f(startup::records_core(store))).await
}

/// `converge migrate`: opening the store applies the migrations.
pub(super) async fn migrate(db: &DbArgs) -> Result<()> {
    with_store(db, |_| async { Ok(()) }).await?;
    println!(
        "migrations applied to {}",
        converge_server::store::redact(&db.database_url)
    );
    Ok(())
}

/// A core over `store` for a command that drives no payment itself: the server's
/// [`startup::one_off_core`], calling the channel at `channel_url` (none: every channel call
/// fails at once), requests bounded by `channel_timeout`.
pub(super) fn one_off_core(
    store: Arc<dyn Store>,
    channel_url: Option<&str>,
    channel_timeout: std::time::Duration,
    webhooks: WebhookSettings,
    secrets: SecretBox,
) -> Core {
    startup::one_off_core(store, channel_url, channel_timeout, webhooks, secrets)
}

/// The key that seals secrets at rest for the database of `db`, as `serve` opens it
/// ([`startup::open_secrets`]): made on first use, checked against the database's sealed
/// secrets. Errors: one line naming the key file.
pub(super) async fn secrets(db: &DbArgs, store: &dyn Store) -> Result<SecretBox> {
    Ok(startup::open_secrets(&db.secrets, &db.database_url, None, store).await?)
}

/// The OS user running the command (`USER`, else `LOGNAME`, else `unknown`).
fn os_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "unknown".into())
}

/// The actor of a CLI change in the audit log: `cli:` and the OS user.
pub(super) fn cli_actor() -> converge_server::service::actor::Actor {
    converge_server::service::actor::Actor::cli(&os_user())
}

/// Now, epoch milliseconds UTC.
pub(super) fn now_ms() -> i64 {
    use converge_server::domain::clock::{Clock, SystemClock};
    SystemClock.now_ms()
}

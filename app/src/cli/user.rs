//! `converge user ...`: console users, over the same use cases the console's admin pages run.

use anyhow::{Context, Result};
use clap::Subcommand;

use super::DbArgs;
use super::start::{self, cli_actor, now_ms};

#[derive(Debug, Subcommand)]
pub(super) enum UserCommand {
    /// Add a console user; the password is read from standard input (one line).
    Add {
        /// Login name (a-z A-Z 0-9 . _ - @).
        name: String,
        /// Roles: viewer, operator, approver, auditor, admin (comma-separated).
        #[arg(long = "role", required = true)]
        roles: String,
        /// Read the password from standard input (required: passwords never go in arguments).
        #[arg(long, required = true)]
        password_stdin: bool,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Disable a user (ends its sessions).
    Disable {
        /// Login name.
        name: String,
        #[command(flatten)]
        db: DbArgs,
    },
}

/// Runs one `converge user` subcommand.
pub(super) async fn run(action: UserCommand) -> Result<()> {
    use converge_server::ops::password::PasswordHasherPool;
    match action {
        UserCommand::Add {
            name,
            roles,
            password_stdin: _,
            db,
        } => {
            let mut password = String::new();
            std::io::stdin()
                .read_line(&mut password)
                .context("reading the password from standard input")?;
            let password = password.trim_end_matches(['\r', '\n']);
            let u = start::with_records_core(&db, |core| async move {
                Ok(core
                    .add_user(
                        &PasswordHasherPool::new(1),
                        &name,
                        &roles,
                        password,
                        now_ms(),
                        &cli_actor(),
                    )
                    .await?)
            })
            .await?;
            println!(
                "user {:?} added with roles {}",
                u.username,
                u.roles.join(",")
            );
            Ok(())
        }
        UserCommand::Disable { name, db } => {
            let who = name.as_str();
            start::with_records_core(&db, |core| async move {
                Ok(core
                    .set_user_disabled(who, true, now_ms(), &cli_actor())
                    .await?)
            })
            .await?;
            println!("user {name:?} disabled; its sessions have ended");
            Ok(())
        }
    }
}

//! `converge audit ...`: verify the audit chain (in the database, or an NDJSON export
//! offline), make a checkpoint signing key, print its public half, sign a checkpoint, export
//! the log.

use anyhow::{Context, Result, bail};
use clap::{Args, Subcommand};
use converge_server::config;

use super::DbArgs;
use super::start::{self, cli_actor, now_ms};

/// Where the audit checkpoint signing key is.
#[derive(Debug, Args)]
pub(super) struct SigningKeyArg {
    /// Ed25519 private key, PKCS#8 PEM (`converge audit keygen`), kept outside the database.
    #[arg(long, env = "CONVERGE_AUDIT_SIGNING_KEY")]
    audit_signing_key: Option<std::path::PathBuf>,
    /// The data directory whose generated key (`audit-signing-key.pem`) is used when
    /// --audit-signing-key is not given (default: the SQLite database's directory).
    #[arg(long, env = "CONVERGE_DATA_DIR")]
    data_dir: Option<std::path::PathBuf>,
}

impl SigningKeyArg {
    /// The key given with --audit-signing-key, else the one `converge serve` generated in the
    /// data directory, if it exists (never generated here: a one-off command that made a key
    /// would sign with one the servers do not have).
    fn path(&self, db: &DbArgs) -> Option<std::path::PathBuf> {
        self.audit_signing_key.clone().or_else(|| {
            config::generated_key_path(&db.database_url, self.data_dir.as_deref())
                .filter(|p| p.exists())
        })
    }

    /// [`Self::path`]'s key, read. Errors: one line naming the file.
    fn load(&self, db: &DbArgs) -> Result<Option<converge_server::domain::checkpoint::SigningKey>> {
        self.path(db)
            .map(|p| config::load_signing_key(&p))
            .transpose()
            .map_err(anyhow::Error::msg)
    }
}

#[derive(Debug, Subcommand)]
pub(super) enum AuditCommand {
    /// Re-compute the hash chain and check it against the signed checkpoints (the first
    /// missing or differing record is named); with --file, verify an NDJSON export offline.
    Verify {
        /// An NDJSON export to verify offline (needs --public-key or --audit-signing-key).
        #[arg(long)]
        file: Option<std::path::PathBuf>,
        /// The checkpoint key's public half, PEM (printed by `converge audit keygen`).
        #[arg(long)]
        public_key: Option<std::path::PathBuf>,
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Make an Ed25519 checkpoint signing key: writes the private key (PKCS#8 PEM, mode 0600)
    /// to --out and prints the public key (PEM) for auditors.
    Keygen {
        /// Where to write the private key; an existing file is never overwritten.
        #[arg(long)]
        out: std::path::PathBuf,
    },
    /// Print the public half (PEM) of the checkpoint signing key: --audit-signing-key's, else
    /// the one `converge serve` generated in its data directory. Auditors verify exports and
    /// checkpoints with it (`audit verify --file EXPORT --public-key FILE`, or openssl).
    PublicKey {
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Sign a checkpoint of the audit chain's head now (after verifying the records since the
    /// last one) and print it.
    Checkpoint {
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
    /// Write the audit log to standard output (the export is itself audited).
    Export {
        /// csv (spreadsheet-safe) or ndjson (exact, for re-verification).
        #[arg(long, default_value = "csv")]
        format: String,
        /// Only records at or after this UTC time (RFC 3339 or YYYY-MM-DD).
        #[arg(long)]
        from: Option<String>,
        /// Only records before this UTC time.
        #[arg(long)]
        to: Option<String>,
        /// Only this actor.
        #[arg(long)]
        actor: Option<String>,
        /// Only this action (e.g. action_approved).
        #[arg(long)]
        action: Option<String>,
        /// Sign a checkpoint covering the export (else the latest stored one is carried).
        #[command(flatten)]
        key: SigningKeyArg,
        #[command(flatten)]
        db: DbArgs,
    },
}

fn cli_time(field: &str, v: &Option<String>) -> Result<Option<i64>> {
    v.as_deref()
        .map(|v| {
            converge_server::domain::clock::parse_utc(v)
                .map_err(|e| anyhow::anyhow!("--{field}: {e}"))
        })
        .transpose()
}

/// Runs one `converge audit` subcommand.
pub(super) async fn run(action: AuditCommand) -> Result<()> {
    match action {
        AuditCommand::Verify {
            file,
            public_key,
            key,
            db,
        } => verify(file, public_key, key, db).await,
        AuditCommand::Keygen { out } => keygen(&out),
        AuditCommand::PublicKey { key, db } => public_key(&key, &db),
        AuditCommand::Checkpoint { key, db } => sign_checkpoint(&key, &db).await,
        AuditCommand::Export {
            format,
            from,
            to,
            actor,
            action,
            key,
            db,
        } => {
            let filter = ExportFilter {
                from,
                to,
                actor,
                action,
            };
            export(&format, filter, &key, &db).await
        }
    }
}

/// `audit verify`: an NDJSON export offline with --file, else the database's chain against
/// its signed checkpoints (signatures checked when a public key is at hand).
async fn verify(
    file: Option<std::path::PathBuf>,
    public_key: Option<std::path::PathBuf>,
    key: SigningKeyArg,
    db: DbArgs,
) -> Result<()> {
    use converge_server::domain::checkpoint;
    use converge_server::service::audit_export as audit_log;
    let public = match (&public_key, &key.audit_signing_key) {
        (Some(p), _) => Some(
            checkpoint::verifying_key_from_pem(
                &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
            )
            .map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?,
        ),
        (None, _) => key.load(&db)?.map(|k| k.verifying_key()),
    };
    if let Some(file) = file {
        let Some(public) = public else {
            bail!("--file needs --public-key (the checkpoint key's public half)");
        };
        let f =
            std::fs::File::open(&file).with_context(|| format!("opening {}", file.display()))?;
        let (records, c) = audit_log::verify_export(std::io::BufReader::new(f), &public)
            .map_err(|e| anyhow::anyhow!("{}: {e}", file.display()))?;
        println!(
            "export intact: {records} records; signed checkpoint seq {} head {} at {} (key {})",
            c.seq,
            c.head_hash,
            converge_server::domain::clock::rfc3339(c.at),
            c.key_id
        );
        return Ok(());
    }
    let v = start::with_records_core(&db, |core| async move {
        Ok(core.verify_audit(public.as_ref()).await?)
    })
    .await?;
    if let Some(b) = v.broken {
        bail!("audit chain broken at record {}: {}", b.seq, b.reason);
    }
    let cp = match &v.latest {
        Some(c) => format!(
            "latest signed checkpoint seq {} at {} (key {}), {} checkpoints, signatures {}",
            c.seq,
            converge_server::domain::clock::rfc3339(c.at),
            c.key_id,
            v.checkpoints,
            if v.signatures_checked {
                "verified"
            } else {
                "not checked (give --public-key)"
            }
        ),
        None => "no signed checkpoint yet (`converge serve` signs them with its key)".into(),
    };
    println!(
        "audit chain intact: {} records, head {} {}; {cp}",
        v.records, v.head.seq, v.head.hash
    );
    Ok(())
}

/// `audit keygen`: a new private key written to `out` (never over an existing file), its
/// public half printed.
fn keygen(out: &std::path::Path) -> Result<()> {
    use converge_server::domain::checkpoint;
    use converge_server::service::audit_export as audit_log;
    let key = audit_log::generate_signing_key();
    let pem = checkpoint::signing_key_to_pem(&key).map_err(anyhow::Error::msg)?;
    write_new_private_file(out, pem.as_bytes())?;
    print!(
        "{}",
        checkpoint::verifying_key_to_pem(&key.verifying_key()).map_err(anyhow::Error::msg)?
    );
    eprintln!(
        "private key written to {} (key id {}); the public key above verifies its checkpoints",
        out.display(),
        checkpoint::key_id(&key.verifying_key())
    );
    Ok(())
}

/// `audit public-key`: the signing key's public half (PEM) on stdout, its id on stderr.
fn public_key(key: &SigningKeyArg, db: &DbArgs) -> Result<()> {
    use converge_server::domain::checkpoint;
    let Some(k) = key.load(db)? else {
        bail!(
            "no audit signing key: give --audit-signing-key, or run `converge serve` once on this database to generate one in its data directory (--data-dir)"
        );
    };
    print!(
        "{}",
        checkpoint::verifying_key_to_pem(&k.verifying_key()).map_err(anyhow::Error::msg)?
    );
    eprintln!("key id {}", checkpoint::key_id(&k.verifying_key()));
    Ok(())
}

/// `audit checkpoint`: signs a checkpoint of the chain's head now and prints it.
async fn sign_checkpoint(key: &SigningKeyArg, db: &DbArgs) -> Result<()> {
    let Some(key) = key.load(db)? else {
        bail!(
            "audit checkpoint needs --audit-signing-key (CONVERGE_AUDIT_SIGNING_KEY), or the key `converge serve` generates in its data directory"
        );
    };
    let c = start::with_records_core(db, |core| async move {
        Ok(core.take_checkpoint(&key, now_ms(), false).await?)
    })
    .await?
    .context("no checkpoint signed")?;
    println!(
        "checkpoint seq {} head {} at {} key {} signature {}",
        c.seq, c.head_hash, c.at, c.key_id, c.signature
    );
    Ok(())
}

/// `audit export`'s filter options, as given (times unparsed).
struct ExportFilter {
    from: Option<String>,
    to: Option<String>,
    actor: Option<String>,
    action: Option<String>,
}

/// `audit export`: the log (filtered) to stdout in `format`, with the chain's head and the
/// checkpoint that covers it on stderr; the export is itself audited.
async fn export(format: &str, given: ExportFilter, key: &SigningKeyArg, db: &DbArgs) -> Result<()> {
    use converge_server::service::audit_export::{self as audit_log, Format};
    use converge_server::store::AuditFilter;
    use futures_util::StreamExt;
    use std::io::Write;
    let key = key.load(db)?;
    let format: Format = format.parse().map_err(|m: String| anyhow::anyhow!(m))?;
    let ExportFilter {
        from,
        to,
        actor,
        action,
    } = given;
    let filter = AuditFilter {
        from: cli_time("from", &from)?,
        to: cli_time("to", &to)?,
        actor,
        action,
    };
    let what = serde_json::json!({"format": format!("{format:?}"), "from": from, "to": to, "actor": filter.actor, "action": filter.action});
    start::with_records_core(db, |mut core| async move {
        // The export's checkpoint is signed with the key given here.
        core.console.audit_key = key.map(std::sync::Arc::new);
        let (head, cp) = core.begin_export(&cli_actor(), &what).await?;
        eprintln!("audit chain head at export: {} {}", head.seq, head.hash);
        match &cp {
            Some(c) => eprintln!(
                "signed checkpoint: seq {} head {} at {} key {}",
                c.seq, c.head_hash, c.at, c.key_id
            ),
            None => eprintln!("no signed checkpoint: the export cannot prove it is whole"),
        }
        let mut rows = Box::pin(audit_log::stream_with_checkpoint(
            core.store.clone(),
            filter,
            format,
            cp,
        ));
        let mut out = std::io::stdout().lock();
        while let Some(chunk) = rows.next().await {
            out.write_all(&chunk?).context("writing the export")?;
        }
        out.flush()?;
        Ok(())
    })
    .await
}

/// Writes `bytes` to a new file readable by its owner only; an existing file is an error.
fn write_new_private_file(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(path).with_context(|| {
        format!(
            "cannot create {} (an existing key is never overwritten)",
            path.display()
        )
    })?;
    f.write_all(bytes)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

//! Real `converge` processes: start, SIGKILL, restart, stop. Output goes to a log file per
//! process (appended across restarts); every child is killed when its handle drops, so a
//! failed run leaves nothing running.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::process::{Child, Command};

/// The `converge` binary and the directory it runs from (the repository root, where the
/// Leptos configuration in Cargo.toml is).
#[derive(Debug, Clone)]
pub struct Converge {
    /// Path to the binary (`target/release/converge` or `target/debug/converge`).
    pub bin: PathBuf,
    /// Environment given to every process started (after RUST_LOG).
    pub env: Vec<(String, String)>,
    /// Working directory of every process.
    pub root: PathBuf,
}

impl Converge {
    /// Checks that `bin` exists and `root` is a directory. Errors: one line naming the path.
    pub fn new(bin: &Path, root: &Path) -> Result<Self> {
        if !bin.is_file() {
            bail!(
                "no converge binary at {} (build it, or give --converge PATH)",
                bin.display()
            );
        }
        if !root.is_dir() {
            bail!("--root {} is not a directory", root.display());
        }
        let bin = bin
            .canonicalize()
            .with_context(|| format!("resolving {}", bin.display()))?;
        Ok(Self {
            bin,
            root: root.to_path_buf(),
            env: Vec::new(),
        })
    }

    /// The same binary, every process it starts given `name=value` in its environment.
    pub fn with_env(mut self, name: &str, value: &str) -> Self {
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    fn command(&self, args: &[String]) -> Command {
        let mut c = Command::new(&self.bin);
        c.args(args).current_dir(&self.root).kill_on_drop(true);
        if std::env::var_os("RUST_LOG").is_none() {
            c.env("RUST_LOG", "warn,sqlx=error");
        }
        c.envs(self.env.iter().map(|(k, v)| (k, v)));
        c
    }

    /// Runs a short subcommand to the end; returns its stdout. Errors: its stderr's last line
    /// and exit status when it fails.
    pub async fn run(&self, args: &[&str]) -> Result<String> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let out = self
            .command(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .context("running converge")?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            bail!(
                "converge {} failed ({}): {}",
                args.join(" "),
                out.status,
                err.trim().lines().last().unwrap_or("")
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// [`run`](Self::run) with `input` on standard input (e.g. `user add --password-stdin`).
    /// Errors: as `run`.
    pub async fn run_with_stdin(&self, args: &[&str], input: &str) -> Result<String> {
        use tokio::io::AsyncWriteExt;
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let mut child = self
            .command(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("running converge")?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin
                .write_all(input.as_bytes())
                .await
                .context("writing to converge's standard input")?;
        }
        let out = child.wait_with_output().await.context("running converge")?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            bail!(
                "converge {} failed ({}): {}",
                args.join(" "),
                out.status,
                err.trim().lines().last().unwrap_or("")
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Runs a subcommand to the end and returns (exit success, stdout, stderr).
    pub async fn run_status(&self, args: &[&str]) -> Result<(bool, String, String)> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let out = self
            .command(&args)
            .stdin(Stdio::null())
            .output()
            .await
            .context("running converge")?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

/// A long-running `converge` process (serve, worker, channel-sim).
pub struct Proc {
    /// Name for messages.
    pub name: String,
    conv: Converge,
    args: Vec<String>,
    log: PathBuf,
    health: String,
    child: Option<Child>,
    /// Times it was started.
    pub starts: u32,
}

impl Proc {
    /// Starts `converge ARGS`, logging to `log`, and waits until `health` (a URL) answers 200.
    pub async fn start(
        conv: &Converge,
        name: &str,
        args: Vec<String>,
        log: PathBuf,
        health: String,
    ) -> Result<Self> {
        let mut p = Proc {
            name: name.into(),
            conv: conv.clone(),
            args,
            log,
            health,
            child: None,
            starts: 0,
        };
        p.spawn().await?;
        Ok(p)
    }

    async fn spawn(&mut self) -> Result<()> {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("opening {}", self.log.display()))?;
        let err = file.try_clone()?;
        let child = self
            .conv
            .command(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(file))
            .stderr(Stdio::from(err))
            .spawn()
            .with_context(|| format!("starting {}", self.name))?;
        self.child = Some(child);
        self.starts += 1;
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()?;
        loop {
            if let Some(c) = self.child.as_mut()
                && let Some(status) = c.try_wait()?
            {
                bail!(
                    "{} exited during start-up ({status}); see {}",
                    self.name,
                    self.log.display()
                );
            }
            if let Ok(r) = client.get(&self.health).send().await
                && r.status().is_success()
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                bail!(
                    "{} did not answer {} within 60 s; see {}",
                    self.name,
                    self.health,
                    self.log.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(Child::id)
    }

    /// SIGKILL: no shutdown of any kind, like a power cut of the process.
    pub async fn kill9(&mut self) -> Result<()> {
        if let Some(mut c) = self.child.take() {
            c.start_kill().context("SIGKILL")?;
            c.wait().await?;
        }
        Ok(())
    }

    /// Starts it again with the same arguments and waits for health.
    pub async fn restart(&mut self) -> Result<()> {
        self.kill9().await?;
        self.spawn().await
    }

    /// SIGTERM, then SIGKILL after `grace`.
    // The workspace denies unsafe code; kill(2) has no safe wrapper in std.
    #[allow(unsafe_code)]
    pub async fn stop(&mut self, grace: Duration) {
        if let Some(mut c) = self.child.take() {
            if let Some(pid) = c.id() {
                // SAFETY: kill(2) with a pid we spawned and still own (not yet reaped).
                unsafe {
                    libc::kill(pid as libc::pid_t, libc::SIGTERM);
                }
            }
            if tokio::time::timeout(grace, c.wait()).await.is_err() {
                let _ = c.start_kill();
                let _ = c.wait().await;
            }
        }
    }
}

/// A free local TCP port (bound, read, released; a race with another process is unlikely).
pub fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

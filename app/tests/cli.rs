//! Start-up bad input, through the real `converge` binary (issue 2 "Bad input"): a malformed
//! or empty `DATABASE_URL`, an unreachable PostgreSQL, a port in use, an unwritable data
//! directory, a bad setting in the environment, an unknown subcommand. Each must exit
//! non-zero with exactly one line on stderr that names the problem, and never panic.
//!
//! Every run starts in its own scratch directory with converge's variables removed from the
//! environment, so nothing lands in the repository and the caller's `DATABASE_URL` (e.g.
//! scripts/test.sh's PostgreSQL) cannot change what is tested.
#![cfg(feature = "ssr")]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_converge");

/// A scratch directory under the system temp dir, removed on drop.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "converge-cli-{}-{name}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos())
        ));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        Scratch(dir)
    }

    fn path(&self, rel: &str) -> String {
        self.0.join(rel).to_string_lossy().into_owned()
    }

    /// A regular file at `rel`: a path below it cannot be created, not even by root.
    fn file(&self, rel: &str) -> String {
        let p = self.0.join(rel);
        std::fs::write(&p, b"not a directory").expect("write file");
        p.to_string_lossy().into_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `converge args` in `dir` with `env` set on top of a cleaned environment; kills it
/// (and fails) if it is still running after 40 s, i.e. if it started instead of refusing.
fn converge(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A panic would show its backtrace; the assertions below forbid both.
        .env("RUST_BACKTRACE", "1");
    for (k, _) in std::env::vars() {
        if k == "DATABASE_URL" || k.starts_with("CONVERGE_") || k.starts_with("LEPTOS_") {
            cmd.env_remove(k);
        }
    }
    cmd.envs(env.iter().copied());
    let mut child = cmd.spawn().expect("start converge");
    let deadline = Instant::now() + Duration::from_secs(40);
    while child.try_wait().expect("wait").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "converge {args:?} kept running instead of refusing; stderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().expect("output")
}

/// Asserts a refusal: non-zero exit, one line on stderr (a trailing newline allowed), no
/// panic, every `needle` in it and no `secret`. Returns the line.
fn refused(out: &Output, needles: &[&str], secret: Option<&str>) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let line = stderr.strip_suffix('\n').unwrap_or(&stderr);
    assert!(!out.status.success(), "exit status 0; stderr: {stderr}");
    assert!(!line.is_empty(), "nothing on stderr");
    assert!(
        !line.contains('\n'),
        "more than one line on stderr:\n{stderr}"
    );
    assert!(
        !line.contains("panicked") && !line.to_lowercase().contains("backtrace"),
        "panic: {line}"
    );
    for needle in needles {
        assert!(line.contains(needle), "{needle:?} not in: {line}");
    }
    if let Some(secret) = secret {
        assert!(!line.contains(secret), "the password shows: {line}");
    }
    line.to_string()
}

#[test]
fn empty_database_url_is_refused() {
    let dir = Scratch::new("empty");
    let out = converge(&dir.0, &["migrate", "--database-url", ""], &[]);
    refused(&out, &["database URL is empty"], None);
    let out = converge(
        &dir.0,
        &["serve", "--bind", "127.0.0.1:0"],
        &[("DATABASE_URL", "")],
    );
    refused(&out, &["database URL is empty"], None);
}

#[test]
fn malformed_database_urls_are_refused_without_showing_the_password() {
    let dir = Scratch::new("malformed");
    for (url, needle) in [
        ("postgres:/u:SECRETPW@127.0.0.1/db", "postgres://"),
        ("localhost:5432/db", "unsupported database URL"),
        (
            "mysql://u:SECRETPW@127.0.0.1/db",
            "unsupported database URL",
        ),
        (
            "postgres://u:SECRETPW@127.0.0.1:notaport/db",
            "bad PostgreSQL URL",
        ),
    ] {
        let out = converge(&dir.0, &["migrate", "--database-url", url], &[]);
        refused(&out, &[needle], Some("SECRETPW"));
        let out = converge(
            &dir.0,
            &["serve", "--bind", "127.0.0.1:0"],
            &[("DATABASE_URL", url)],
        );
        refused(&out, &[needle], Some("SECRETPW"));
    }
    assert!(
        std::fs::read_dir(&dir.0).expect("scratch").next().is_none(),
        "a malformed URL was taken for a SQLite file"
    );
}

#[test]
fn serve_help_hides_the_database_url() {
    let dir = Scratch::new("help");
    let out = converge(
        &dir.0,
        &["serve", "--help"],
        &[("DATABASE_URL", "postgres://u:SECRETPW@h/db")],
    );
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("DATABASE_URL"), "{help}");
    assert!(!help.contains("SECRETPW"), "{help}");
}

#[test]
fn unreachable_postgres_names_the_cause() {
    let dir = Scratch::new("unreachable");
    let out = converge(
        &dir.0,
        &["serve", "--bind", "127.0.0.1:0"],
        &[("DATABASE_URL", "postgres://u:SECRETPW@127.0.0.1:1/db")],
    );
    let line = refused(
        &out,
        &["cannot reach PostgreSQL", "127.0.0.1:1"],
        Some("SECRETPW"),
    );
    assert!(
        line.to_lowercase().contains("connection refused"),
        "the cause is not named: {line}"
    );
}

#[test]
fn port_in_use_is_refused() {
    let dir = Scratch::new("port");
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr").to_string();
    let out = converge(
        &dir.0,
        &["serve", "--bind", &addr],
        &[("DATABASE_URL", &dir.path("c.db"))],
    );
    refused(&out, &["cannot listen on", &addr, "--bind"], None);
}

#[test]
fn unwritable_data_directory_is_refused() {
    let dir = Scratch::new("unwritable");
    let file = dir.file("file");
    let db = format!("{file}/data/c.db");
    let out = converge(
        &dir.0,
        &["serve", "--bind", "127.0.0.1:0"],
        &[("DATABASE_URL", &db)],
    );
    refused(
        &out,
        &["cannot open SQLite database", &db, "DATABASE_URL"],
        None,
    );
    let out = converge(&dir.0, &["migrate", "--database-url", &db], &[]);
    refused(&out, &["cannot open SQLite database"], None);
}

#[test]
fn unwritable_sandbox_store_names_the_setting() {
    let dir = Scratch::new("sandbox");
    let file = dir.file("file");
    let out = converge(
        &dir.0,
        &["serve", "--bind", "127.0.0.1:0"],
        &[
            ("DATABASE_URL", &dir.path("c.db")),
            ("CONVERGE_CHANNEL_DB", &format!("{file}/data/channel.db")),
        ],
    );
    refused(
        &out,
        &["sandbox channel did not start", "--channel-db"],
        None,
    );
}

#[test]
fn bad_setting_in_the_environment_reads_like_the_flag() {
    let dir = Scratch::new("env");
    let bare = converge(&dir.0, &[], &[("CONVERGE_BIND", "nonsense")]);
    let line = refused(&bare, &["invalid value 'nonsense'", "--bind"], None);
    assert!(!line.contains("error: error"), "{line}");
    let serve = converge(&dir.0, &["serve"], &[("CONVERGE_BIND", "nonsense")]);
    assert_eq!(refused(&serve, &[], None), line);
    assert_eq!(bare.status.code(), Some(2), "clap's usage-error status");
}

#[test]
fn unknown_subcommand_is_refused() {
    let dir = Scratch::new("subcommand");
    let out = converge(&dir.0, &["bogus"], &[]);
    refused(&out, &["unrecognized subcommand", "bogus"], None);
}

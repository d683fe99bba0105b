//! `converge`: one binary for the payment core, the ops console and its tools
//! (DESIGN.md "Command line"). Every failure ends with one line on stderr and a non-zero exit.

// The console's view types are deeply nested; monomorphising them in the binary needs more
// than the default limit of 128 (the library sets the same).
#![recursion_limit = "256"]

mod cli;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match cli::Cli::parse_command_line() {
        Ok(cli) => cli,
        // --help and --version (stdout, exit 0), and the help clap shows for a bare
        // `converge merchant`: clap prints them as it always does.
        Err(e)
            if !e.use_stderr()
                || e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand =>
        {
            e.exit()
        }
        Err(e) => {
            eprintln!("{}", cli::one_line(&e));
            // clap's exit status for usage errors.
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

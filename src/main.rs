//! The `astrolabe` binary: parse the command line, run, print, map errors to exit codes
//! (0 ok, 2 bad input, 1 internal error, 3 computed but the plan does not fit: the output
//! is printed first). A closed pipe (`| head`) is success.

use astrolabe::cli::{self, Cli};
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = match cli::execute(&cli, std::io::stdout().is_terminal()) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(e.exit_code() as u8);
        }
    };
    let written = match &out.path {
        Some(path) => match std::fs::write(path, &out.text) {
            Ok(()) => Ok(()),
            Err(e) => {
                eprintln!("error: {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(out.text.as_bytes())
                .and_then(|()| stdout.flush())
        }
    };
    match written {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(1);
        }
    }
    if let Some(msg) = &out.failure {
        eprintln!("error: {msg}");
    }
    ExitCode::from(out.exit_code)
}

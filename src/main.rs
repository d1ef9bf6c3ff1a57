//! The `astrolabe` binary: parse the command line, run, print, map errors to exit codes
//! (0 ok, 2 bad input, 1 internal error, 3 computed but the plan does not fit: the output
//! is printed first). One rule for closed pipes, as ripgrep's: a broken pipe on any output
//! (`| head`, `--all /dev/stdout | head`) is success, exit 0, nothing more printed. A
//! closed standard error never panics: the message is dropped, the exit code stays.

use astrolabe::cli::{self, Cli};
use clap::Parser;
use std::io::{IsTerminal, Write};
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = match cli::execute(&cli, std::io::stdout().is_terminal()) {
        Ok(out) => out,
        Err(e) if e.is_broken_pipe() => return ExitCode::SUCCESS,
        Err(e) => return fail(&e.to_string(), e.exit_code() as u8),
    };
    match write(out.path.as_deref(), &out.text) {
        Ok(()) => {}
        Err(e) if e.is_broken_pipe() => return ExitCode::SUCCESS,
        Err(e) => return fail(&e.to_string(), e.exit_code() as u8),
    }
    if let Some(msg) = &out.failure {
        // Writing to a closed standard error fails; there is nowhere left to report it.
        let _ = writeln!(std::io::stderr(), "error: {msg}");
    }
    ExitCode::from(out.exit_code)
}

/// Reports `msg` on standard error (if it is open) and returns `code`.
fn fail(msg: &str, code: u8) -> ExitCode {
    let _ = writeln!(std::io::stderr(), "error: {msg}");
    ExitCode::from(code)
}

/// Writes the rendered output to FILE or standard output.
fn write(path: Option<&std::path::Path>, text: &str) -> astrolabe::Result<()> {
    let io = |p: &std::path::Path| {
        let p = p.to_path_buf();
        move |source| astrolabe::Error::Io { path: p, source }
    };
    match path {
        Some(p) => std::fs::write(p, text).map_err(io(p)),
        None => {
            let mut stdout = std::io::stdout().lock();
            stdout
                .write_all(text.as_bytes())
                .and_then(|()| stdout.flush())
                .map_err(io(std::path::Path::new("<standard output>")))
        }
    }
}

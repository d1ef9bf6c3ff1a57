//! The `astrolabe` binary: parse the command line, run, print, map errors to exit codes
//! (0 ok, 2 bad input, 1 internal error). A closed pipe (`| head`) is success.

use astrolabe::cli::{self, Cli};
use clap::Parser;
use std::io::Write;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let out = cli::output_args(&cli).clone();
    let result = cli::run(&cli).and_then(|report| report.render(out.format));
    match result {
        Ok(text) => match &out.output {
            Some(path) => match std::fs::write(path, text) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("error: {}: {e}", path.display());
                    ExitCode::from(2)
                }
            },
            None => {
                let mut stdout = std::io::stdout().lock();
                match stdout
                    .write_all(text.as_bytes())
                    .and_then(|()| stdout.flush())
                {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                    Err(e) => {
                        eprintln!("error: {e}");
                        ExitCode::from(1)
                    }
                }
            }
        },
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

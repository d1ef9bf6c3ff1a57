//! `astrolabe schema`, `astrolabe completions` and `astrolabe man`: text generated from the
//! program's own definitions (the JSON Schemas from the result types with schemars, the
//! completion scripts with clap_complete, the man page with clap_mangen).

use super::{Cli, OutputArgs};
use crate::error::{Error, Result};
use crate::report::{Report, values};
use clap::{Args, CommandFactory};
use clap_complete::Shell;

/// Flags of `astrolabe schema`.
#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which output: estimate, sweep, sweep-all-row, compare, collective.
    #[arg(default_value = "estimate")]
    pub name: String,
    /// Output file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `astrolabe completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: Shell,
    /// Output file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `astrolabe man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Output file.
    #[command(flatten)]
    pub out: OutputArgs,
}

fn text(t: String) -> Report {
    Report {
        text: Some(t),
        ..Report::default()
    }
}

/// Runs `astrolabe schema NAME`.
pub fn run_schema(a: &SchemaArgs) -> Result<Report> {
    values::schema(&a.name).map(text)
}

/// Runs `astrolabe completions SHELL`.
pub fn run_completions(a: &CompletionsArgs) -> Result<Report> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "astrolabe", &mut buf);
    String::from_utf8(buf)
        .map(text)
        .map_err(|e| Error::Internal(format!("completions: {e}")))
}

/// Runs `astrolabe man`.
pub fn run_man(_: &ManArgs) -> Result<Report> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(Cli::command())
        .render(&mut buf)
        .map_err(|e| Error::Internal(format!("man page: {e}")))?;
    String::from_utf8(buf)
        .map(text)
        .map_err(|e| Error::Internal(format!("man page: {e}")))
}

//! `astrolabe astra` and `astrolabe export`: flags and execution.

use super::OutputArgs;
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;

/// Flags of `astrolabe astra`.
#[derive(Debug, Args)]
pub struct AstraArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `astrolabe export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe astra`.
pub fn run(args: &AstraArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'astra' is not built yet".into()))
}

/// Runs `astrolabe export`.
pub fn run_export(args: &ExportArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'export' is not built yet".into()))
}

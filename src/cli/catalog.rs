//! `astrolabe list` and `astrolabe show`: flags and execution.

use super::OutputArgs;
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;

/// Flags of `astrolabe list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `astrolabe show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe list`.
pub fn run_list(args: &ListArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'list' is not built yet".into()))
}

/// Runs `astrolabe show`.
pub fn run_show(args: &ShowArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'show' is not built yet".into()))
}

//! `astrolabe compare`: flags and execution.

use super::OutputArgs;
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;

/// Flags of `astrolabe compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe compare`.
pub fn run(args: &CompareArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'compare' is not built yet".into()))
}

//! `astrolabe sweep`: flags and execution.

use super::OutputArgs;
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;

/// Flags of `astrolabe sweep`.
#[derive(Debug, Args)]
pub struct SweepArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe sweep`.
pub fn run(args: &SweepArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'sweep' is not built yet".into()))
}

//! `astrolabe estimate`: flags and execution.

use super::OutputArgs;
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;

/// Flags of `astrolabe estimate`.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe estimate`.
pub fn run(args: &EstimateArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'estimate' is not built yet".into()))
}

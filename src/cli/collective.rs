//! `astrolabe collective`: flags and execution.

use super::OutputArgs;
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;

/// Flags of `astrolabe collective`.
#[derive(Debug, Args)]
pub struct CollectiveArgs {
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe collective`.
pub fn run(args: &CollectiveArgs) -> Result<Report> {
    let _ = args;
    Err(Error::Unsupported("'collective' is not built yet".into()))
}

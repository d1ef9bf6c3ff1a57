//! Command-line definitions (clap derive). Each subcommand's flags and its `run` live in
//! their own file; `run` returns a [`Report`] and never prints, `main.rs` prints.

pub mod astra;
pub mod calibrate;
pub mod calibrate_more;
pub mod catalog;
pub mod collective;
pub mod compare;
pub mod estimate;
pub mod plan_flags;
pub mod sensitivity;
pub mod sweep;

use crate::error::Result;
use crate::report::{Format, Report};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Closed-form cost model for distributed deep-learning training.
#[derive(Debug, Parser)]
#[command(name = "astrolabe", version, about, propagate_version = true)]
pub struct Cli {
    /// What to compute.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Time of one collective on a multi-dimensional topology (nccl-tests style table).
    Collective(collective::CollectiveArgs),
    /// Time, breakdown and memory of one training iteration for a model, system and plan.
    Estimate(Box<estimate::EstimateArgs>),
    /// Search parallelism plans and topologies, ranked.
    Sweep(Box<sweep::SweepArgs>),
    /// Evaluate a baseline and variants side by side.
    Compare(compare::CompareArgs),
    /// List the built-in models, devices, systems and scenarios.
    List(catalog::ListArgs),
    /// Print a built-in preset as TOML that can be copied and edited.
    Show(catalog::ShowArgs),
    /// Read ASTRA-sim inputs (network YAML, system JSON, Chakra traces) and estimate them.
    Astra(astra::AstraArgs),
    /// Write inputs for other tools (ASTRA-sim network, system and Chakra traces).
    Export(astra::ExportArgs),
    /// Fit the model to measurements of your cluster (nccl-tests logs, GEMM times, step times).
    Calibrate(calibrate::CalibrateArgs),
    /// Elasticity of the iteration time to every parameter, ranked; goal-seek a target.
    Sensitivity(Box<sensitivity::SensitivityArgs>),
}

/// Output flags shared by every command.
#[derive(Debug, Clone, Args)]
pub struct OutputArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Table, global = true)]
    pub format: Format,
    /// Write the output to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE", global = true)]
    pub output: Option<PathBuf>,
    /// Leave out wall times and rates, so identical runs give byte-identical output.
    #[arg(long, global = true)]
    pub no_timing: bool,
}

/// Runs a parsed command line and returns what to print.
pub fn run(cli: &Cli) -> Result<Report> {
    match &cli.command {
        Command::Collective(a) => collective::run(a),
        Command::Estimate(a) => estimate::run(a),
        Command::Sweep(a) => sweep::run(a),
        Command::Compare(a) => compare::run(a),
        Command::List(a) => catalog::run_list(a),
        Command::Show(a) => catalog::run_show(a),
        Command::Astra(a) => astra::run(a),
        Command::Export(a) => astra::run_export(a),
        Command::Calibrate(a) => calibrate::run(a),
        Command::Sensitivity(a) => sensitivity::run(a),
    }
}

/// The output flags of whichever command was given.
pub fn output_args(cli: &Cli) -> &OutputArgs {
    match &cli.command {
        Command::Collective(a) => &a.out,
        Command::Estimate(a) => &a.out,
        Command::Sweep(a) => &a.out,
        Command::Compare(a) => &a.out,
        Command::List(a) => &a.out,
        Command::Show(a) => &a.out,
        Command::Astra(a) => &a.out,
        Command::Export(a) => &a.out,
        Command::Calibrate(a) => &a.out,
        Command::Sensitivity(a) => &a.est.out,
    }
}

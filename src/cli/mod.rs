//! Command-line definitions (clap derive). Each subcommand's flags and its `run` live in
//! their own file; `run` returns a [`Report`] and never prints, `main.rs` prints. Every
//! `--help` ends with examples ([`examples`]); `completions` and `man` are generated from
//! these definitions (clap_complete, clap_mangen).

pub mod astra;
pub mod calibrate;
pub mod calibrate_more;
pub mod catalog;
pub mod collective;
pub mod compare;
pub mod estimate;
pub mod examples;
pub mod plan_flags;
pub mod sensitivity;
pub mod sweep;
mod tools;

pub use tools::{CompletionsArgs, ManArgs, SchemaArgs};

use crate::error::Result;
use crate::report::{Format, Render, Report};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Closed-form cost model for distributed deep-learning training.
#[derive(Debug, Parser)]
#[command(
    name = "astrolabe",
    version,
    about,
    propagate_version = true,
    after_help = examples::TOP
)]
pub struct Cli {
    /// What to compute.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Time of one collective on a multi-dimensional topology (nccl-tests style table).
    #[command(after_help = examples::COLLECTIVE)]
    Collective(collective::CollectiveArgs),
    /// Time, breakdown and memory of one training iteration for a model, system and plan.
    #[command(after_help = examples::ESTIMATE)]
    Estimate(Box<estimate::EstimateArgs>),
    /// Search parallelism plans and topologies, ranked.
    #[command(after_help = examples::SWEEP)]
    Sweep(Box<sweep::SweepArgs>),
    /// Evaluate a baseline and variants side by side.
    #[command(after_help = examples::COMPARE)]
    Compare(compare::CompareArgs),
    /// List the built-in models, devices, systems and scenarios.
    #[command(after_help = examples::LIST)]
    List(catalog::ListArgs),
    /// Print a built-in preset as TOML that can be copied and edited.
    #[command(after_help = examples::SHOW)]
    Show(catalog::ShowArgs),
    /// Read ASTRA-sim inputs (network YAML, system JSON, Chakra traces) and estimate them.
    #[command(after_help = examples::ASTRA)]
    Astra(astra::AstraArgs),
    /// Write inputs for other tools (ASTRA-sim network, system and Chakra traces).
    #[command(after_help = examples::EXPORT)]
    Export(astra::ExportArgs),
    /// Fit the model to measurements of your cluster (nccl-tests logs, GEMM times, step times).
    Calibrate(calibrate::CalibrateArgs),
    /// Elasticity of the iteration time to every parameter, ranked; goal-seek a target.
    Sensitivity(Box<sensitivity::SensitivityArgs>),
    /// Print the JSON Schema of a command's JSON output (estimate, sweep, compare, …).
    #[command(after_help = examples::SCHEMA)]
    Schema(SchemaArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = examples::COMPLETIONS)]
    Completions(CompletionsArgs),
    /// Print the man page (roff).
    #[command(after_help = examples::MAN)]
    Man(ManArgs),
}

/// Output flags shared by every command.
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Output format (default: from -o's extension (.json, .csv, .md), else table).
    #[arg(long, value_enum, global = true)]
    pub format: Option<Format>,
    /// Write the output to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE", global = true)]
    pub output: Option<PathBuf>,
    /// Leave out wall times and rates, so identical runs give byte-identical output.
    #[arg(long, global = true)]
    pub no_timing: bool,
    /// The table to write: CSV writes one per file (default the main one, e.g. `summary`;
    /// or `time`), the terminal and Markdown only that one (default all).
    #[arg(long, value_name = "NAME", global = true)]
    pub table: Option<String>,
    /// Table: the columns to show, by their CSV names (e.g. tp,pp,iteration_time_s).
    #[arg(long, value_delimiter = ',', value_name = "KEYS", global = true)]
    pub columns: Vec<String>,
}

impl OutputArgs {
    /// The format: `--format`, else the one `-o`'s extension implies, else the table.
    pub fn format(&self) -> Format {
        self.format
            .or_else(|| self.output.as_deref().and_then(Format::from_path))
            .unwrap_or_default()
    }

    /// How to render: `terminal` says whether the output goes to a terminal (box drawing
    /// and fitting its width there, plain ASCII elsewhere and with `NO_COLOR` set).
    pub fn render(&self, terminal: bool) -> Render {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let terminal = terminal && self.output.is_none();
        Render {
            format: self.format(),
            table: self.table.clone(),
            columns: self.columns.clone(),
            ascii: !terminal || no_color,
            width: None,
        }
    }
}

/// What a command line produced: the text to write, where, and the exit status after.
#[derive(Debug)]
pub struct Output {
    /// The rendered text.
    pub text: String,
    /// The file to write it to (`-o`); standard output when `None`.
    pub path: Option<PathBuf>,
    /// Exit status once written: 0, or 3 for a computed plan that does not fit.
    pub exit_code: u8,
    /// What to say on standard error after the output (with a non-zero status).
    pub failure: Option<String>,
}

/// Runs a parsed command line and renders it; `terminal` says whether standard output is
/// a terminal. This is all `main` (and the Python package) call.
pub fn execute(cli: &Cli, terminal: bool) -> Result<Output> {
    let out = output_args(cli);
    let report = run(cli)?;
    let text = match &report.text {
        Some(t) => t.clone(),
        None => report.render(&out.render(terminal))?,
    };
    Ok(Output {
        text,
        path: out.output.clone(),
        exit_code: report.exit_code,
        failure: report.failure,
    })
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
        Command::Schema(a) => tools::run_schema(a),
        Command::Completions(a) => tools::run_completions(a),
        Command::Man(a) => tools::run_man(a),
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
        Command::Schema(a) => &a.out,
        Command::Completions(a) => &a.out,
        Command::Man(a) => &a.out,
    }
}

//! `astrolabe estimate`: flags and execution. Flags build a [`PlanSpec`]; with
//! `--scenario` the file's model, system and plan are the base and flags given on the
//! command line override them.

use super::OutputArgs;
use super::plan_flags::PlanFlags;
use crate::catalog;
use crate::error::{Error, Result};
use crate::estimate::{self, report, scenario::ScenarioSpec};
use crate::parallel::PlanSpec;
use crate::report::Report;
use crate::units::parse_count;
use clap::Args;
use std::path::{Path, PathBuf};

/// Flags of `astrolabe estimate`.
#[derive(Debug, Args)]
pub struct EstimateArgs {
    /// Model: a built-in name (gpt3-175b, llama3-70b, …; see `astrolabe list`) or a TOML path.
    #[arg(long)]
    pub model: Option<String>,
    /// System: a built-in name (dgx-a100, dgx-h100, tpu-v4, …) or a TOML path.
    #[arg(long)]
    pub system: Option<String>,
    /// A scenario TOML (model, system, `[plan]`, tokens); other flags override it.
    #[arg(long, value_name = "FILE.toml")]
    pub scenario: Option<PathBuf>,
    /// The parallelism plan.
    #[command(flatten)]
    pub plan: PlanFlags,
    /// Token budget, e.g. 300B: prints time and GPU-hours to train.
    #[arg(long)]
    pub tokens: Option<String>,
    /// Show each term's formula with the numbers put in.
    #[arg(long)]
    pub explain: bool,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe estimate`.
pub fn run(a: &EstimateArgs) -> Result<Report> {
    let (sc, _, tokens) = scenario(a)?;
    let (e, lines) = if a.explain {
        estimate::explain(&sc.model, &sc.system, &sc.plan)?
    } else {
        (
            estimate::evaluate(&sc.model, &sc.system, &sc.plan)?,
            Vec::new(),
        )
    };
    report::build(&sc.model, &sc.system, &e, tokens, lines)
}

/// The scenario the flags describe (with `--scenario` as the base), its plan as written,
/// and the token budget.
pub fn scenario(a: &EstimateArgs) -> Result<(estimate::scenario::Scenario, PlanSpec, Option<f64>)> {
    let (mut spec, base) = match &a.scenario {
        Some(path) => {
            let text = crate::limits::read_text(path)?;
            let s: ScenarioSpec = catalog::parse_toml(&text, path)?;
            (s, path.parent().unwrap_or(Path::new(".")).to_path_buf())
        }
        None => {
            let missing = |f: &str| Error::input(f, "required (or give --scenario FILE.toml)");
            let model = a.model.clone().ok_or_else(|| missing("--model"))?;
            let system = a.system.clone().ok_or_else(|| missing("--system"))?;
            let s = ScenarioSpec {
                model,
                system,
                tokens: None,
                plan: PlanSpec::default(),
            };
            (s, PathBuf::from("."))
        }
    };
    if a.scenario.is_some() {
        if let Some(m) = &a.model {
            spec.model = m.clone();
        }
        if let Some(s) = &a.system {
            spec.system = s.clone();
        }
    }
    spec.plan = a.plan.apply(spec.plan)?;
    if a.tokens.is_some() {
        spec.tokens = a.tokens.clone();
    }
    let sc = estimate::scenario::Scenario::from_spec(&spec, &base)?;
    let tokens = match &a.tokens {
        Some(t) => Some(parse_count("--tokens", t)?),
        None => sc.tokens,
    };
    Ok((sc, spec.plan, tokens))
}

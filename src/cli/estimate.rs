//! `astrolabe estimate`: flags and execution. Flags build a [`PlanSpec`] over today's
//! practice ([`PlanSpec::practice`]); with `--scenario` the file's model, system and plan
//! are the base and flags given on the command line override them. The output names the
//! defaults used; a plan that does not fit exits 3 after printing.

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
    let (sc, _, tokens, given) = scenario(a)?;
    let (e, lines) = if a.explain {
        estimate::explain(&sc.model, &sc.system, &sc.plan)?
    } else {
        (
            estimate::evaluate(&sc.model, &sc.system, &sc.plan)?,
            Vec::new(),
        )
    };
    report::build(
        &sc.model,
        &sc.system,
        &e,
        tokens,
        lines,
        a.plan.defaults_used(&given),
    )
}

/// What [`scenario`] returns: the scenario, its plan as written, the token budget and the
/// `[plan]` keys the scenario file gave (for naming the defaults used).
pub type Described = (
    estimate::scenario::Scenario,
    PlanSpec,
    Option<f64>,
    toml::Table,
);

/// The scenario the flags describe (with `--scenario` as the base), its plan as written,
/// the token budget and the plan keys the file gave.
pub fn scenario(a: &EstimateArgs) -> Result<Described> {
    let mut given = toml::Table::new();
    let (mut spec, base) = match &a.scenario {
        Some(path) => {
            let text = crate::limits::read_text(path)?;
            let s: ScenarioSpec = catalog::parse_toml(&text, path)?;
            if let Ok(mut t) = text.parse::<toml::Table>()
                && let Some(toml::Value::Table(p)) = t.remove("plan")
            {
                given = p;
            }
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
                plan: PlanSpec::practice(),
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
    if spec.plan.pp > 1 && spec.plan.global_batch.is_none() {
        return Err(Error::input(
            "--global-batch",
            format!(
                "required with pp = {}: the pipeline bubble (p-1)/(v·m) depends on the micro-batches per iteration m = global_batch / (dp·micro_batch); give the recipe's global batch in sequences (GPT-3 175B: 1536, Llama 3 70B on 64 GPUs: 128)",
                spec.plan.pp
            ),
        ));
    }
    if a.tokens.is_some() {
        spec.tokens = a.tokens.clone();
    }
    let sc = estimate::scenario::Scenario::from_spec(&spec, &base)?;
    let tokens = match &a.tokens {
        Some(t) => Some(parse_count("--tokens", t)?),
        None => sc.tokens,
    };
    Ok((sc, spec.plan, tokens, given))
}

//! `astrolabe estimate`: flags and execution. Flags build a [`PlanSpec`]; with
//! `--scenario` the file's model, system and plan are the base and flags given on the
//! command line override them.

use super::OutputArgs;
use crate::catalog;
use crate::compute::Precision;
use crate::error::{Error, Result};
use crate::estimate::{self, report, scenario::ScenarioSpec};
use crate::parallel::{Optimizer, Order, PlanSpec, Recompute, Schedule};
use crate::report::Report;
use crate::units::{parse_bytes, parse_count};
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
    /// Number of devices (default: the whole system).
    #[arg(long)]
    pub gpus: Option<u32>,
    /// Data-parallel degree (default: gpus / (tp·pp)).
    #[arg(long)]
    pub dp: Option<u32>,
    /// Tensor-parallel degree.
    #[arg(long)]
    pub tp: Option<u32>,
    /// Pipeline-parallel degree.
    #[arg(long)]
    pub pp: Option<u32>,
    /// Expert-parallel degree (MoE, within DP).
    #[arg(long)]
    pub ep: Option<u32>,
    /// Sequence parallelism on the TP group.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// Micro-batch size (sequences).
    #[arg(long)]
    pub micro_batch: Option<u32>,
    /// Global batch size (sequences).
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// Pipeline schedule: gpipe, 1f1b, interleaved.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Model chunks per stage for the interleaved schedule (implies --schedule interleaved).
    #[arg(long, value_name = "V")]
    pub virtual_stages: Option<u32>,
    /// Activation recomputation: none, selective, full.
    #[arg(long)]
    pub recompute: Option<String>,
    /// ZeRO stage 0–3 (3 = FSDP).
    #[arg(long)]
    pub zero: Option<u8>,
    /// Same as --zero 3.
    #[arg(long)]
    pub fsdp: bool,
    /// Do not overlap the DP gradient reduction with backward.
    #[arg(long)]
    pub no_dp_overlap: bool,
    /// DP bucket size, e.g. 25MB.
    #[arg(long)]
    pub dp_bucket: Option<String>,
    /// Overlap TP communication with GEMMs.
    #[arg(long)]
    pub tp_overlap: bool,
    /// Matrix precision: bf16, fp16, fp8, tf32, fp32.
    #[arg(long)]
    pub precision: Option<String>,
    /// Optimizer layout: adam (16 B/param) or adam-fp32-grads (18 B/param, Megatron-LM).
    #[arg(long)]
    pub optimizer: Option<String>,
    /// Fused (flash) attention.
    #[arg(long)]
    pub flash_attention: bool,
    /// Group order on the network: tp-dp-pp or tp-pp-dp.
    #[arg(long)]
    pub order: Option<String>,
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

fn parse_enum<T: serde::de::DeserializeOwned>(flag: &str, v: &str, valid: &[&str]) -> Result<T> {
    let norm = v.trim().to_ascii_lowercase().replace('_', "-");
    toml::Value::String(norm)
        .try_into()
        .map_err(|_| Error::unknown("value", v, valid).context(flag))
}

/// Applies the flags given on the command line over `base`.
pub fn apply_flags(a: &EstimateArgs, mut p: PlanSpec) -> Result<PlanSpec> {
    macro_rules! set {
        ($($f:ident),*) => { $(if let Some(v) = a.$f { p.$f = v; })* };
    }
    set!(tp, pp, ep, micro_batch);
    if a.gpus.is_some() {
        p.gpus = a.gpus;
    }
    if a.dp.is_some() {
        p.dp = a.dp;
    }
    if a.global_batch.is_some() {
        p.global_batch = a.global_batch;
    }
    p.sequence_parallel |= a.sequence_parallel;
    p.tp_overlap |= a.tp_overlap;
    p.flash_attention |= a.flash_attention;
    if a.no_dp_overlap {
        p.dp_overlap = false;
    }
    if let Some(s) = &a.schedule {
        p.schedule = parse_enum::<Schedule>("--schedule", s, &["gpipe", "1f1b", "interleaved"])?;
    }
    if let Some(v) = a.virtual_stages {
        p.virtual_stages = v;
        if v > 1 {
            p.schedule = Schedule::Interleaved;
        }
    }
    if let Some(s) = &a.recompute {
        p.recompute = parse_enum::<Recompute>("--recompute", s, &["none", "selective", "full"])?;
    }
    if let Some(z) = a.zero {
        p.zero = z;
    }
    if a.fsdp {
        p.zero = 3;
    }
    if let Some(b) = &a.dp_bucket {
        p.dp_bucket = parse_bytes("--dp-bucket", b)?;
    }
    if let Some(s) = &a.precision {
        p.precision = Precision::parse(s).map_err(|e| e.context("--precision"))?;
    }
    if let Some(s) = &a.optimizer {
        p.optimizer = parse_enum::<Optimizer>("--optimizer", s, &["adam", "adam-fp32-grads"])?;
    }
    if let Some(s) = &a.order {
        p.order = parse_enum::<Order>("--order", s, &["tp-dp-pp", "tp-pp-dp"])?;
    }
    Ok(p)
}

/// Runs `astrolabe estimate`.
pub fn run(a: &EstimateArgs) -> Result<Report> {
    let (mut spec, base) = match &a.scenario {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?;
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
    spec.plan = apply_flags(a, spec.plan)?;
    if a.tokens.is_some() {
        spec.tokens = a.tokens.clone();
    }
    let sc = estimate::scenario::Scenario::from_spec(&spec, &base)?;
    let tokens = match &a.tokens {
        Some(t) => Some(parse_count("--tokens", t)?),
        None => sc.tokens,
    };
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

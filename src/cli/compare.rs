//! `astrolabe compare`: flags and execution. Either a scenario file (or built-in scenario
//! name) with a baseline and `[[variant]]`s, or the flag form: repeat `--model` and/or
//! `--system` to compare them under one plan.

use super::OutputArgs;
use crate::compare::{self, Scenario};
use crate::error::{Error, Result};
use crate::report::Report;
use clap::Args;
use std::path::PathBuf;
use toml::{Table, Value};

/// Flags of `astrolabe compare`.
#[derive(Debug, Args)]
pub struct CompareArgs {
    /// Scenario file, or the name of a built-in scenario (`astrolabe list`).
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<String>,
    /// Model (built-in name or file); repeat to compare models.
    #[arg(long = "model", value_name = "MODEL")]
    pub models: Vec<String>,
    /// System (built-in name or file); repeat to compare systems.
    #[arg(long = "system", value_name = "SYSTEM")]
    pub systems: Vec<String>,
    /// Devices used (default: the whole system).
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
    /// Expert-parallel degree.
    #[arg(long)]
    pub ep: Option<u32>,
    /// Micro-batch size (sequences).
    #[arg(long)]
    pub micro_batch: Option<u32>,
    /// Global batch size (sequences).
    #[arg(long)]
    pub global_batch: Option<u32>,
    /// Pipeline schedule: gpipe, 1f1b, interleaved.
    #[arg(long)]
    pub schedule: Option<String>,
    /// Model chunks per stage (interleaved schedule).
    #[arg(long)]
    pub virtual_stages: Option<u32>,
    /// Activation recomputation: none, selective, full.
    #[arg(long)]
    pub recompute: Option<String>,
    /// Sequence parallelism on the TP group.
    #[arg(long)]
    pub sequence_parallel: bool,
    /// ZeRO stage 0–3.
    #[arg(long)]
    pub zero: Option<u8>,
    /// Matrix precision: bf16, fp16, fp8, tf32, fp32.
    #[arg(long)]
    pub precision: Option<String>,
    /// Price of one GPU-hour, to add cost rows (any currency).
    #[arg(long, value_name = "PRICE")]
    pub gpu_hour_price: Option<f64>,
    /// Token budget ("300B"): adds time and GPU-hours to train it.
    #[arg(long, value_name = "COUNT")]
    pub tokens: Option<String>,
    /// Also draw the time breakdown as stacked bars into FILE.svg.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

impl CompareArgs {
    /// The `[plan]` table the plan flags describe (only the flags given).
    fn plan_table(&self) -> Table {
        let mut t = Table::new();
        let ints = [
            ("gpus", self.gpus),
            ("dp", self.dp),
            ("tp", self.tp),
            ("pp", self.pp),
            ("ep", self.ep),
            ("micro_batch", self.micro_batch),
            ("global_batch", self.global_batch),
            ("virtual_stages", self.virtual_stages),
            ("zero", self.zero.map(u32::from)),
        ];
        for (k, v) in ints {
            if let Some(v) = v {
                t.insert(k.into(), Value::Integer(i64::from(v)));
            }
        }
        for (k, v) in [
            ("schedule", &self.schedule),
            ("recompute", &self.recompute),
            ("precision", &self.precision),
        ] {
            if let Some(v) = v {
                t.insert(k.into(), Value::String(v.clone()));
            }
        }
        if self.sequence_parallel {
            t.insert("sequence_parallel".into(), Value::Boolean(true));
        }
        t
    }

    fn has_plan_flags(&self) -> bool {
        !self.plan_table().is_empty()
    }
}

/// Runs `astrolabe compare`.
pub fn run(args: &CompareArgs) -> Result<Report> {
    let mut scenario = match &args.scenario {
        Some(s) => {
            if !args.models.is_empty() || !args.systems.is_empty() || args.has_plan_flags() {
                return Err(Error::input(
                    "compare",
                    "give either a scenario file or --model/--system/plan flags, not both \
                     (write the change as a [[variant]] in the file)",
                ));
            }
            compare::load(s)?
        }
        None => Scenario::from_flags(&args.models, &args.systems, args.plan_table())?,
    };
    if let Some(t) = &args.tokens {
        scenario.tokens = Some(crate::units::parse_count("--tokens", t)?);
    }
    if let Some(p) = args.gpu_hour_price {
        scenario.gpu_hour_price = Some(p);
    }
    let cmp = scenario.evaluate()?;
    let mut report = compare::report(&cmp)?;
    if let Some(path) = &args.plot {
        let svg = compare::breakdown_svg(&cmp)?;
        crate::plot::write_svg(path, &svg)?;
        report
            .notes
            .push(format!("plot written to {}", path.display()));
    }
    Ok(report)
}

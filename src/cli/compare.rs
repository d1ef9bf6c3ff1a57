//! `astrolabe compare`: flags and execution. Either a scenario file (or built-in scenario
//! name) with a baseline and `[[variant]]`s, or the flag form: repeat `--model` and/or
//! `--system` to compare them under one plan.

use super::OutputArgs;
use super::plan_flags::PlanFlags;
use crate::compare::{self, Scenario};
use crate::error::{Error, Result};
use crate::report::compare::CompareResult;
use crate::report::{Data, Report};
use clap::Args;
use std::path::PathBuf;

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
    /// The parallelism plan (overrides the scenario's `[plan]`).
    #[command(flatten)]
    pub plan: PlanFlags,
    /// Price of one GPU-hour, to add cost rows (any currency): PRICE for every column, or
    /// NAME=PRICE for the columns of one system or one column label (repeat per system,
    /// e.g. --gpu-hour-price dgx-h100=2.5 --gpu-hour-price dgx-b200=4).
    #[arg(long, value_name = "[NAME=]PRICE")]
    pub gpu_hour_price: Vec<String>,
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

/// Runs `astrolabe compare`.
pub fn run(args: &CompareArgs) -> Result<Report> {
    let mut scenario = match &args.scenario {
        Some(s) => {
            if !args.models.is_empty()
                || !args.systems.is_empty()
                || !args.plan.to_table().is_empty()
            {
                return Err(Error::input(
                    "compare",
                    "give either a scenario file or --model/--system/plan flags, not both \
                     (write the change as a [[variant]] in the file)",
                ));
            }
            compare::load(s)?
        }
        None => Scenario::from_flags(&args.models, &args.systems, args.plan.to_table())?,
    };
    if let Some(t) = &args.tokens {
        scenario.tokens = Some(crate::units::parse_count("--tokens", t)?);
    }
    for p in &args.gpu_hour_price {
        let (name, price) = match p.split_once('=') {
            Some((n, v)) => (Some(n.trim()), v),
            None => (None, p.as_str()),
        };
        scenario.set_price(name, parse_price(price)?)?;
    }
    let cmp = scenario.evaluate()?;
    let mut report = compare::report(&cmp)?;
    report.data = Some(Data::Compare(Box::new(CompareResult::new(&cmp))));
    if let Some(path) = &args.plot {
        let svg = compare::breakdown_svg(&cmp)?;
        crate::plot::write_svg(path, &svg)?;
        report
            .notes
            .push(format!("plot written to {}", path.display()));
    }
    Ok(report)
}

/// A price per GPU-hour: a finite number ≥ 0 (−0 is 0).
fn parse_price(s: &str) -> Result<f64> {
    match s.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p + 0.0),
        _ => Err(Error::input(
            "--gpu-hour-price",
            format!("'{s}' is not a price: expected a finite number ≥ 0, e.g. 2.5 or dgx-h100=2.5"),
        )),
    }
}

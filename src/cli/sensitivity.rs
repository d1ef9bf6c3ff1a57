//! `astrolabe sensitivity <estimate flags>`: the elasticity of the iteration time to every
//! system parameter and plan knob, ranked; with `--target-iteration`, `--target-mfu` or
//! `--target-days` and `--vary PARAM`, the value of that parameter that meets the target.

use super::estimate::{EstimateArgs, scenario};
use crate::error::{Error, Result};
use crate::report::{Cell, Report, Table};
use crate::sensitivity::{self, Param, Seek, Target};
use crate::units::{Bandwidth, Bytes, FlopRate, Seconds, parse_seconds};
use clap::Args;

/// Flags of `astrolabe sensitivity`.
#[derive(Debug, Args)]
pub struct SensitivityArgs {
    /// The estimate to analyse (the same flags as `estimate`).
    #[command(flatten)]
    pub est: EstimateArgs,
    /// Goal-seek: the iteration time to reach, e.g. 20s.
    #[arg(long, value_name = "TIME")]
    pub target_iteration: Option<String>,
    /// Goal-seek: the MFU to reach, e.g. 0.5.
    #[arg(long, value_name = "FRACTION")]
    pub target_mfu: Option<f64>,
    /// Goal-seek: the days to train --tokens to reach, e.g. 30.
    #[arg(long, value_name = "DAYS")]
    pub target_days: Option<f64>,
    /// Goal-seek: the parameter to vary (peak.bf16, hbm_bandwidth, dim1.bandwidth,
    /// dim0.latency, …; the sensitivity table lists them).
    #[arg(long, value_name = "PARAM")]
    pub vary: Option<String>,
}

/// Runs `astrolabe sensitivity`.
pub fn run(a: &SensitivityArgs) -> Result<Report> {
    let (sc, spec, tokens, _) = scenario(&a.est)?;
    let mut report = Report::default();
    let mut t = Table::new(
        "sensitivity",
        &[
            ("parameter", "parameter"),
            ("value", "value"),
            ("elasticity", "∂ln T/∂ln x"),
            ("how", "how"),
        ],
    );
    for e in sensitivity::elasticities(&sc.model, &sc.system, &spec)? {
        let (v, unit) = e.value;
        t.push(vec![
            Cell::text(e.name),
            Cell::q(human(v, unit), v),
            e.elasticity
                .map_or(Cell::text("n/a"), |x| Cell::num((x * 1e4).round() / 1e4)),
            Cell::text(e.note),
        ])?;
    }
    report.tables.push(t);
    report.notes.push(
        "ε = ∂ln T/∂ln x: % change of the iteration time per % of x (−1: time ∝ 1/x; 0: no effect)"
            .into(),
    );
    let target = match (&a.target_iteration, a.target_mfu, a.target_days) {
        (None, None, None) => return Ok(report),
        (Some(s), None, None) => Target::Iteration(parse_seconds("--target-iteration", s)?.get()),
        (None, Some(m), None) if m > 0.0 && m < 1.0 => Target::Mfu(m),
        (None, Some(m), None) => {
            return Err(Error::input(
                "--target-mfu",
                format!("must be in (0, 1), got {m}"),
            ));
        }
        (None, None, Some(d)) if d > 0.0 => Target::Days(
            d,
            tokens.ok_or_else(|| {
                Error::input("--target-days", "needs --tokens (the budget to train)")
            })?,
        ),
        (None, None, Some(d)) => {
            return Err(Error::input(
                "--target-days",
                format!("must be > 0, got {d}"),
            ));
        }
        _ => {
            return Err(Error::input(
                "--target-*",
                "give one of --target-iteration, --target-mfu, --target-days",
            ));
        }
    };
    let name = a.vary.as_deref().ok_or_else(|| {
        Error::input(
            "--vary",
            "goal-seek needs the parameter to vary, e.g. --vary dim1.bandwidth",
        )
    })?;
    let p = Param::parse(name, &sc.system)?;
    let (now, unit) = p.value(&sc.system);
    report.notes.push(match sensitivity::goal_seek(&sc.model, &sc.system, &spec, p, target)? {
        Seek::Reached { value, factor, metric } => format!(
            "goal-seek: {name} = {} (×{factor:.4} of {}) reaches {metric:.6}",
            human(value, unit),
            human(now, unit)
        ),
        Seek::Unreachable { best, limit } => format!(
            "goal-seek: unreachable by varying {name} alone (best {best:.4} at ×10⁻⁴ or ×10⁴); what remains there — {limit}"
        ),
    });
    Ok(report)
}

/// A value in readable units by its SI unit.
fn human(v: f64, unit: &str) -> String {
    match unit {
        "FLOP/s" => FlopRate::new(v).to_string(),
        "B/s" => Bandwidth::new(v).to_string(),
        "B" => Bytes::new(v).to_string(),
        "s" => Seconds::new(v).to_string(),
        _ => format!("{v}"),
    }
}

//! The typed result of `astrolabe sweep` ([`SweepResult`]) and of each `--all` row
//! ([`SweepAllRow`]): the same field names as an estimate (`iteration_time_s`,
//! `tokens_per_s`, `mfu` as a fraction, `memory_per_device_bytes`, `fits`, `plan`).

use super::values::{PlanValue, Records, record};
use crate::error::Result;
use crate::estimate::Estimate;
use schemars::JsonSchema;
use serde::Serialize;

/// A sweep: what was searched, what was dropped and why, the ranked plans and the Pareto
/// front.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SweepResult {
    /// Schema version (see docs/schema.md).
    pub schema_version: u32,
    /// Model name.
    pub model: String,
    /// System name.
    pub system: String,
    /// Global batch, sequences.
    pub global_batch: u32,
    /// Ranking objective: time, tokens, mfu, memory, headroom or cost.
    pub sort: String,
    /// The two Pareto objectives.
    pub pareto_objectives: [String; 2],
    /// Configurations in the grid (the Cartesian product of every axis).
    pub configurations: u64,
    /// Configurations the evaluation loop went through (the progress bar's count).
    pub evaluated: u64,
    /// Full estimates computed (evaluated configurations that were not redundant).
    pub estimates: u64,
    /// With hardware axes: points that took the estimate of a point differing only in HBM
    /// capacity (which changes only the fit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shared: Option<u64>,
    /// With hardware axes: points skipped because a lower bound of their key (the
    /// compute floor) is worse than the k-th best found and dominated on the Pareto front.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pruned: Option<u64>,
    /// Configurations dropped, all reasons.
    pub dropped: u64,
    /// Configurations valid and fitting in memory.
    pub valid: u64,
    /// Wall time of the evaluation, seconds (absent with `--no-timing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
    /// Full estimates per second (absent with `--no-timing`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub estimates_per_s: Option<f64>,
    /// The best plans, best first.
    pub top: Vec<SweepRow>,
    /// The Pareto front, sorted by its first objective.
    pub pareto: Vec<SweepRow>,
    /// Drops per reason, in the order found.
    pub drops: Vec<DropRow>,
    /// With `--bandwidth-budget`: the best plan's traffic and bandwidth split per dimension.
    pub bandwidth: Vec<BandwidthRow>,
    /// Remarks.
    pub notes: Vec<String>,
}

/// One ranked plan.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SweepRow {
    /// Rank, 1 = best (position on the front for `pareto`).
    pub rank: u32,
    /// Network name (the system's own unless networks are compared).
    pub network: String,
    /// The plan.
    pub plan: PlanValue,
    /// Time of one training iteration, seconds.
    pub iteration_time_s: f64,
    /// 80 % prediction band of `iteration_time_s` (`crate::band`).
    pub band: crate::band::Band,
    /// Tokens per second.
    pub tokens_per_s: f64,
    /// Model FLOPs utilisation, a fraction.
    pub mfu: f64,
    /// Memory per device, bytes.
    pub memory_per_device_bytes: f64,
    /// Capacity less the reserve less the memory per device, bytes (≥ 0 for ranked plans).
    pub memory_headroom_bytes: f64,
    /// Fits in device memory with the reserve (always true for ranked plans).
    pub fits: bool,
    /// Configurations this row stands for: itself and the variants that tie with it (the
    /// same structural plan on the same system, differing only in knobs, with time and
    /// memory in the same 0.1% bins; docs/sweep.md).
    pub variants: u32,
    /// The plan fields in which those variants differ from this row, comma-separated
    /// (`order`, `dp_overlap`, …); empty when the row stands alone.
    pub variant_axes: String,
}

impl SweepRow {
    /// A ranked row from an estimate.
    pub fn new(rank: u32, network: &str, e: &Estimate, band: crate::band::Band) -> SweepRow {
        SweepRow {
            rank,
            network: network.to_string(),
            plan: PlanValue::from(&e.plan),
            iteration_time_s: e.time.total.get(),
            band,
            tokens_per_s: e.metrics.tokens_per_s,
            mfu: e.metrics.mfu,
            memory_per_device_bytes: e.memory.total.get(),
            memory_headroom_bytes: e.memory.headroom(),
            fits: e.memory.fits,
            variants: 1,
            variant_axes: String::new(),
        }
    }
}

/// One `--all` row: every evaluated configuration, in grid order. Metrics are null for a
/// configuration that was dropped (its `status` says why).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct SweepAllRow {
    /// Index in the grid.
    pub index: u64,
    /// Network name.
    pub network: String,
    /// "ok", or the reason it was dropped.
    pub status: String,
    /// The plan.
    pub plan: PlanValue,
    /// Time of one training iteration, seconds.
    pub iteration_time_s: Option<f64>,
    /// Tokens per second.
    pub tokens_per_s: Option<f64>,
    /// Model FLOPs utilisation, a fraction.
    pub mfu: Option<f64>,
    /// Memory per device, bytes.
    pub memory_per_device_bytes: Option<f64>,
    /// Fits in device memory.
    pub fits: bool,
}

/// A drop reason and how many configurations it removed.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct DropRow {
    /// What was wrong.
    pub reason: String,
    /// How many configurations.
    pub count: u64,
}

/// One network dimension's traffic and bandwidth for the best plan.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct BandwidthRow {
    /// Dimension index, innermost = 0.
    pub dim: u32,
    /// Building block.
    pub kind: String,
    /// Bytes through this dimension per device per iteration.
    pub traffic_bytes: f64,
    /// The system's bandwidth scaled to the budget, bytes/s.
    pub given_bytes_per_s: f64,
    /// The optimal split B_d ∝ √traffic_d, bytes/s.
    pub optimal_bytes_per_s: f64,
}

impl SweepResult {
    /// CSV tables: `top` (default), `pareto`, `drops`, `bandwidth`, `summary`.
    pub fn tables(&self) -> Result<Vec<Records>> {
        let rows = |v: &[SweepRow]| v.iter().map(record).collect::<Result<Vec<_>>>();
        let mut summary = record(self)?;
        if let Some(o) = summary.as_object_mut() {
            for k in ["top", "pareto", "drops", "bandwidth"] {
                o.remove(k);
            }
        }
        Ok(vec![
            ("top", rows(&self.top)?),
            ("pareto", rows(&self.pareto)?),
            (
                "drops",
                self.drops.iter().map(record).collect::<Result<_>>()?,
            ),
            (
                "bandwidth",
                self.bandwidth.iter().map(record).collect::<Result<_>>()?,
            ),
            ("summary", vec![summary]),
        ])
    }

    /// The reason that dropped the most configurations, with its count.
    pub fn main_drop(&self) -> Option<&DropRow> {
        self.drops
            .iter()
            .filter(|d| !d.reason.starts_with("redundant"))
            .max_by_key(|d| d.count)
    }
}

//! The typed result of `astrolabe compare` ([`CompareResult`]): one record per column
//! (baseline first), each with an estimate's fields (`iteration_time_s`, `mfu`, `plan`, …)
//! plus its name, its speed-up over the baseline and its cost. CSV writes one row per
//! variant (records, not transposed).

use super::estimate::EstimateResult;
use super::values::{Records, SCHEMA_VERSION, record};
use crate::compare::Comparison;
use crate::error::Result;
use schemars::JsonSchema;
use serde::Serialize;

/// A comparison of a baseline and its variants.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CompareResult {
    /// Schema version (see docs/schema.md).
    pub schema_version: u32,
    /// Scenario name.
    pub name: String,
    /// What it compares.
    pub description: String,
    /// Where it comes from.
    pub source: String,
    /// The baseline first, then the variants in file order.
    pub variants: Vec<CompareVariant>,
}

/// One evaluated column.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CompareVariant {
    /// Column label.
    pub name: String,
    /// Baseline iteration time / this iteration time (1 for the baseline).
    pub speedup: f64,
    /// Device-hours to train 10⁹ tokens.
    pub gpu_hours_per_billion_tokens: f64,
    /// Price per device-hour, when given.
    pub gpu_hour_price: Option<f64>,
    /// Cost to train 10⁹ tokens (price units), when a price is given.
    pub cost_per_billion_tokens: Option<f64>,
    /// The estimate's fields.
    #[serde(flatten)]
    pub estimate: EstimateResult,
}

impl CompareResult {
    /// The typed value of an evaluated comparison.
    pub fn new(cmp: &Comparison) -> CompareResult {
        let base = cmp
            .columns
            .first()
            .map_or(f64::NAN, |c| c.estimate.time.total.get());
        let variants = cmp
            .columns
            .iter()
            .map(|c| {
                let gh = c.estimate.gpu_hours(1e9);
                CompareVariant {
                    name: c.name.clone(),
                    speedup: base / c.estimate.time.total.get(),
                    gpu_hours_per_billion_tokens: gh,
                    gpu_hour_price: c.gpu_hour_price,
                    cost_per_billion_tokens: c.gpu_hour_price.map(|p| p * gh),
                    estimate: EstimateResult::new(
                        &c.model,
                        &c.system,
                        &c.estimate,
                        cmp.tokens,
                        Vec::new(),
                    ),
                }
            })
            .collect();
        CompareResult {
            schema_version: SCHEMA_VERSION,
            name: cmp.name.clone(),
            description: cmp.description.clone(),
            source: cmp.source.clone(),
            variants,
        }
    }

    /// CSV tables: `variants` (one row per column, the baseline first).
    pub fn tables(&self) -> Result<Vec<Records>> {
        let rows = self
            .variants
            .iter()
            .map(|v| {
                let mut r = record(v)?;
                if let Some(o) = r.as_object_mut() {
                    o.remove("placement");
                    o.remove("schema_version");
                }
                Ok(r)
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(vec![("variants", rows)])
    }
}

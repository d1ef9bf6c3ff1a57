//! Scenario files: a model, a system, a plan and an optional token budget in one TOML
//! file (`astrolabe estimate --scenario run.toml`):
//!
//! ```toml
//! model = "gpt3-175b"        # built-in name, or a path relative to this file
//! system = "dgx-a100"
//! tokens = "300B"            # optional: report time and GPU-hours for this budget
//! [plan]
//! gpus = 64
//! tp = 8
//! pp = 8
//! global_batch = 64
//! recompute = "selective"
//! sequence_parallel = true
//! ```

use crate::catalog;
use crate::error::Result;
use crate::model::Model;
use crate::parallel::{Plan, PlanSpec};
use crate::system::System;
use crate::units::parse_count;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A scenario file as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    /// Model name or path.
    pub model: String,
    /// System name or path.
    pub system: String,
    /// Token budget, e.g. "300B".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<String>,
    /// The plan.
    #[serde(default)]
    pub plan: PlanSpec,
}

/// A validated scenario, ready for [`super::evaluate`].
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The model.
    pub model: Model,
    /// The system, cut to the plan's device count.
    pub system: System,
    /// The plan.
    pub plan: Plan,
    /// Token budget.
    pub tokens: Option<f64>,
}

/// A file infers what the command line infers: more than one virtual stage with the
/// 1F1B schedule (the default) is the interleaved schedule, as `--virtual-stages V`
/// implies `--schedule interleaved`.
pub fn infer_schedule(plan: &mut PlanSpec) {
    if plan.virtual_stages > 1 && plan.schedule == crate::parallel::Schedule::OneFOneB {
        plan.schedule = crate::parallel::Schedule::Interleaved;
    }
}

fn resolve(name: &str, base: &Path) -> String {
    if catalog::is_path(name) && Path::new(name).is_relative() {
        base.join(name).to_string_lossy().into_owned()
    } else {
        name.to_string()
    }
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Scenario> {
        let text = crate::limits::read_text(path)?;
        let spec: ScenarioSpec = catalog::parse_toml(&text, path)?;
        Scenario::from_spec(&spec, path.parent().unwrap_or(Path::new(".")))
            .map_err(|e| e.context(path.display()))
    }

    /// Validates a spec; relative paths resolve against `base`.
    pub fn from_spec(spec: &ScenarioSpec, base: &Path) -> Result<Scenario> {
        let model = catalog::model(&resolve(&spec.model, base))?;
        let mut system = catalog::system(&resolve(&spec.system, base))?;
        if let Some(g) = spec.plan.gpus {
            system = system.with_gpus(g)?;
        }
        let mut pspec = spec.plan.clone();
        infer_schedule(&mut pspec);
        let plan = super::plan(&model, &system, &pspec)?;
        let tokens = match &spec.tokens {
            Some(t) => Some(parse_count("tokens", t)?),
            None => None,
        };
        Ok(Scenario {
            model,
            system,
            plan,
            tokens,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parallel::Schedule;

    fn inferred(virtual_stages: u32, schedule: Schedule) -> Schedule {
        let mut p = PlanSpec {
            virtual_stages,
            schedule,
            ..PlanSpec::default()
        };
        infer_schedule(&mut p);
        p.schedule
    }

    #[test]
    fn virtual_stages_make_the_default_schedule_interleaved() {
        // As `--virtual-stages V` implies `--schedule interleaved` on the command line.
        assert_eq!(inferred(2, Schedule::OneFOneB), Schedule::Interleaved);
        assert_eq!(inferred(12, Schedule::OneFOneB), Schedule::Interleaved);
        // One virtual stage keeps 1F1B; a schedule the file names is kept.
        assert_eq!(inferred(1, Schedule::OneFOneB), Schedule::OneFOneB);
        assert_eq!(inferred(0, Schedule::OneFOneB), Schedule::OneFOneB);
        assert_eq!(inferred(2, Schedule::Gpipe), Schedule::Gpipe);
    }
}

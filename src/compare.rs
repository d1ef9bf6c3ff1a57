//! Side-by-side comparison of a baseline scenario and its variants (`astrolabe compare`).
//!
//! A scenario file holds a baseline — `model`, `system` and `[plan]` exactly as an
//! estimate scenario (each of `model` and `system` a built-in name, a path, or an inline
//! table) — and a list of `[[variant]]` tables, each with a `name` and overrides of ANY
//! field of the model, the system (including `system.device`) or the plan. A variant is
//! built by deep-merging its overrides onto the baseline's TOML tables ([`merge`]) and then
//! deserialising the result into the typed specs, which deny unknown fields; so a
//! misspelt or non-existent key is an error naming the file, the line and the variant, and
//! so is a variant whose plan does not validate. Built-in scenarios are in [`builtin`].

pub mod builtin;
mod eval;
pub mod merge;
mod render;

pub use render::{breakdown_svg, report};

use crate::catalog;
use crate::error::{Error, Result};
use crate::estimate::Estimate;
use crate::model::Model;
use crate::parallel::Plan;
use crate::system::System;
use merge::Lines;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use toml::{Table, Value};

/// A scenario file as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileSpec {
    #[serde(default)]
    name: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    source: String,
    /// Column label of the baseline.
    #[serde(default = "baseline_label")]
    baseline: String,
    model: Value,
    system: Value,
    #[serde(default)]
    plan: Table,
    /// Price of one device-hour (any currency; the report says "per GPU-hour").
    gpu_hour_price: Option<f64>,
    /// Token budget ("300B"), as in an estimate scenario: adds time-to-train rows.
    tokens: Option<String>,
    #[serde(default)]
    variant: Vec<VariantSpec>,
}

fn baseline_label() -> String {
    "baseline".into()
}

/// One `[[variant]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VariantSpec {
    name: String,
    #[serde(default)]
    description: String,
    model: Option<Value>,
    system: Option<Value>,
    plan: Option<Table>,
    gpu_hour_price: Option<f64>,
}

/// A variant: its name and its overrides (a table with keys `model`, `system`, `plan`).
#[derive(Clone, Debug)]
pub struct Variant {
    /// Column label.
    pub name: String,
    /// One-line description.
    pub description: String,
    /// Overrides, merged onto the baseline.
    pub overrides: Table,
    /// Price per device-hour, if it differs from the baseline's.
    pub gpu_hour_price: Option<f64>,
}

/// A parsed (not yet evaluated) comparison.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Short name.
    pub name: String,
    /// What it compares.
    pub description: String,
    /// Where the comparison comes from.
    pub source: String,
    /// Column label of the baseline.
    pub baseline_label: String,
    /// The baseline: `model`, `system`, `plan` as TOML values.
    pub baseline: Table,
    /// Price per device-hour of every column without its own.
    pub gpu_hour_price: Option<f64>,
    /// Price per device-hour of the baseline column alone (`--gpu-hour-price NAME=PRICE`).
    pub baseline_price: Option<f64>,
    /// Token budget for the time-to-train rows.
    pub tokens: Option<f64>,
    /// The variants, in file order.
    pub variants: Vec<Variant>,
    /// Where it was read from (for errors and relative paths).
    pub origin: PathBuf,
    /// Source lines of the overrides.
    pub lines: Lines,
}

/// One evaluated column.
#[derive(Clone, Debug)]
pub struct Column {
    /// Label.
    pub name: String,
    /// The validated model.
    pub model: Model,
    /// The validated system, cut to the plan's devices.
    pub system: System,
    /// The validated plan.
    pub plan: Plan,
    /// Its estimate.
    pub estimate: Estimate,
    /// Price per device-hour.
    pub gpu_hour_price: Option<f64>,
}

/// An evaluated comparison: column 0 is the baseline.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// Short name.
    pub name: String,
    /// What it compares.
    pub description: String,
    /// Where it comes from.
    pub source: String,
    /// Baseline first, then the variants.
    pub columns: Vec<Column>,
    /// Token budget for the time-to-train rows.
    pub tokens: Option<f64>,
}

/// Reads a scenario by built-in name or path.
pub fn load(name_or_path: &str) -> Result<Scenario> {
    if catalog::is_path(name_or_path) {
        let p = PathBuf::from(name_or_path);
        let text = crate::limits::read_text(&p)?;
        return parse(&text, &p);
    }
    let text = builtin::source(name_or_path)?;
    let origin = Path::new("<built-in>")
        .join(builtin::FOLDER)
        .join(format!("{name_or_path}.toml"));
    parse(text, &origin)
}

/// Parses scenario text; `origin` names it in errors and anchors relative paths.
pub fn parse(text: &str, origin: &Path) -> Result<Scenario> {
    let f: FileSpec = catalog::parse_toml(text, origin)?;
    let mut baseline = Table::new();
    baseline.insert("model".into(), f.model);
    baseline.insert("system".into(), f.system);
    baseline.insert("plan".into(), Value::Table(f.plan));
    let variants = f
        .variant
        .into_iter()
        .map(|v| {
            let mut o = Table::new();
            for (k, val) in [("model", v.model), ("system", v.system)] {
                if let Some(val) = val {
                    o.insert(k.into(), val);
                }
            }
            if let Some(p) = v.plan {
                o.insert("plan".into(), Value::Table(p));
            }
            Variant {
                name: v.name,
                description: v.description,
                overrides: o,
                gpu_hour_price: v.gpu_hour_price.map(|p| p + 0.0),
            }
        })
        .collect();
    let name = if f.name.is_empty() {
        origin
            .file_stem()
            .map_or(String::new(), |s| s.to_string_lossy().into_owned())
    } else {
        f.name
    };
    Ok(Scenario {
        name,
        description: f.description,
        source: f.source,
        baseline_label: f.baseline,
        baseline,
        gpu_hour_price: f.gpu_hour_price.map(|p| p + 0.0),
        baseline_price: None,
        tokens: f
            .tokens
            .map(|t| crate::units::parse_count("tokens", &t))
            .transpose()
            .map_err(|e| e.context(origin.display()))?,
        variants,
        origin: origin.to_path_buf(),
        lines: merge::lines(text),
    })
}

impl Scenario {
    /// Sets the price per device-hour: of every column (`name` None), or of the columns
    /// whose label or system (the name given for it) is `name`.
    pub fn set_price(&mut self, name: Option<&str>, price: f64) -> Result<()> {
        let Some(name) = name else {
            self.gpu_hour_price = Some(price);
            return Ok(());
        };
        let system_of = |t: &Table| match t.get("system") {
            Some(Value::String(s)) => Some(s.clone()),
            _ => None,
        };
        let base_system = system_of(&self.baseline);
        let mut found = false;
        if self.baseline_label == name || base_system.as_deref() == Some(name) {
            self.baseline_price = Some(price);
            found = true;
        }
        for v in &mut self.variants {
            let system = match v.overrides.get("system") {
                Some(_) => system_of(&v.overrides),
                None => base_system.clone(),
            };
            if v.name == name || system.as_deref() == Some(name) {
                v.gpu_hour_price = Some(price);
                found = true;
            }
        }
        if found {
            return Ok(());
        }
        let mut names: Vec<String> = vec![self.baseline_label.clone()];
        names.extend(base_system);
        for v in &self.variants {
            names.push(v.name.clone());
            names.extend(system_of(&v.overrides));
        }
        names.dedup();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Err(Error::unknown("system or column", name, &names).context("--gpu-hour-price"))
    }

    /// A scenario built from flags: the first model and system are the baseline; every
    /// other (model, system) pair is a variant. `plan` is the `[plan]` table.
    pub fn from_flags(models: &[String], systems: &[String], plan: Table) -> Result<Scenario> {
        let (Some(m0), Some(s0)) = (models.first(), systems.first()) else {
            return Err(Error::input(
                "compare",
                "give a scenario file, or --model and --system (repeat either to compare)",
            ));
        };
        let label = |m: &str, s: &str| match (models.len() > 1, systems.len() > 1) {
            (true, true) => format!("{m} @ {s}"),
            (true, false) => m.to_string(),
            _ => s.to_string(),
        };
        let mut baseline = Table::new();
        baseline.insert("model".into(), Value::String(m0.clone()));
        baseline.insert("system".into(), Value::String(s0.clone()));
        baseline.insert("plan".into(), Value::Table(plan));
        let mut variants = Vec::new();
        for (i, m) in models.iter().enumerate() {
            for (j, s) in systems.iter().enumerate() {
                if i == 0 && j == 0 {
                    continue;
                }
                let mut o = Table::new();
                o.insert("model".into(), Value::String(m.clone()));
                o.insert("system".into(), Value::String(s.clone()));
                variants.push(Variant {
                    name: label(m, s),
                    description: String::new(),
                    overrides: o,
                    gpu_hour_price: None,
                });
            }
        }
        Ok(Scenario {
            name: "compare".into(),
            description: String::new(),
            source: String::new(),
            baseline_label: label(m0, s0),
            baseline,
            gpu_hour_price: None,
            baseline_price: None,
            tokens: None,
            variants,
            origin: PathBuf::from("<command line>"),
            lines: Lines::default(),
        })
    }
}

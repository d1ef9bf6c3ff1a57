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
pub mod merge;
mod render;

pub use render::{breakdown_svg, report};

use crate::catalog::{self, Kind};
use crate::compute::{Device, DeviceSpec};
use crate::error::{Error, Result};
use crate::estimate::{self, Estimate};
use crate::model::{Model, ModelSpec};
use crate::parallel::{Plan, PlanSpec};
use crate::system::{System, SystemSpec};
use merge::{Leaf, Lines};
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
    /// Price per device-hour of the baseline.
    pub gpu_hour_price: Option<f64>,
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
        let text = std::fs::read_to_string(&p).map_err(|source| Error::Io {
            path: p.clone(),
            source,
        })?;
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
                gpu_hour_price: v.gpu_hour_price,
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
        gpu_hour_price: f.gpu_hour_price,
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
            tokens: None,
            variants,
            origin: PathBuf::from("<command line>"),
            lines: Lines::default(),
        })
    }

    /// Evaluates the baseline and every variant.
    pub fn evaluate(&self) -> Result<Comparison> {
        let base = self.expand(self.baseline.clone())?;
        let mut columns = vec![self.column_or_blame(
            &self.baseline_label,
            &base,
            &self.lines.baseline,
            self.gpu_hour_price,
        )?];
        for (i, v) in self.variants.iter().enumerate() {
            let (line, leaves) = self.lines.variants.get(i).cloned().unwrap_or_default();
            let price = v.gpu_hour_price.or(self.gpu_hour_price);
            let col = self
                .apply(&base, &v.overrides)
                .and_then(|doc| self.column(&v.name, &doc, price))
                .map_err(|e| self.blame_variant(&base, v, line, &leaves, e))?;
            columns.push(col);
        }
        Ok(Comparison {
            name: self.name.clone(),
            description: self.description.clone(),
            source: self.source.clone(),
            columns,
            tokens: self.tokens,
        })
    }

    fn column_or_blame(
        &self,
        name: &str,
        doc: &Table,
        leaves: &[Leaf],
        price: Option<f64>,
    ) -> Result<Column> {
        self.column(name, doc, price).map_err(|e| {
            let msg = e.to_string();
            match merge::blame(&msg, leaves) {
                Some(l) => self.file_error(format!("line {}, baseline: {msg}", l.line)),
                None => self.file_error(format!("baseline: {msg}")),
            }
        })
    }

    /// Finds which override of variant `v` causes `e`: each override alone on the
    /// baseline; failing that (the overrides only clash together), the variant's line.
    fn blame_variant(
        &self,
        base: &Table,
        v: &Variant,
        line: usize,
        leaves: &[Leaf],
        e: Error,
    ) -> Error {
        for leaf in leaves {
            let Some(one) = merge::only(&v.overrides, leaf) else {
                continue;
            };
            let failed = match self.apply(base, &one) {
                Ok(doc) => self.column(&v.name, &doc, None).err(),
                Err(e) => Some(e),
            };
            if let Some(err) = failed {
                return self.at(
                    leaf.line,
                    &v.name,
                    Error::input(leaf.dotted(), err.to_string()),
                );
            }
        }
        self.at(line, &v.name, e)
    }

    fn at(&self, line: usize, variant: &str, e: Error) -> Error {
        if line == 0 {
            return self.file_error(format!("variant '{variant}': {e}"));
        }
        self.file_error(format!("line {line}, variant '{variant}': {e}"))
    }

    fn file_error(&self, message: String) -> Error {
        Error::File {
            path: self.origin.clone(),
            message,
        }
    }

    /// Baseline (expanded) + overrides, expanded again (an override may name a preset).
    fn apply(&self, base: &Table, over: &Table) -> Result<Table> {
        let mut doc = base.clone();
        merge::merge(&mut doc, over, "")?;
        self.expand(doc)
    }

    /// Replaces preset names by their TOML tables: `model`, `system`, `system.device`.
    /// Each is a name (or path), a table, or a table with `preset = "name"` whose other
    /// keys override that preset.
    fn expand(&self, mut doc: Table) -> Result<Table> {
        let dir = self
            .origin
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        if let Some(v) = doc.remove("model") {
            doc.insert("model".into(), resolve(Kind::Model, v, &dir)?.0);
        }
        let mut sys_dir = dir.clone();
        if let Some(v) = doc.remove("system") {
            let (t, origin) = resolve(Kind::System, v, &dir)?;
            if let Some(o) = origin {
                sys_dir = o.parent().map(Path::to_path_buf).unwrap_or_default();
            }
            doc.insert("system".into(), t);
        }
        if let Some(Value::Table(sys)) = doc.get_mut("system")
            && let Some(v) = sys.remove("device")
        {
            sys.insert("device".into(), resolve(Kind::Device, v, &sys_dir)?.0);
        }
        Ok(doc)
    }

    /// Deserialises and validates one column, and evaluates it.
    fn column(&self, name: &str, doc: &Table, price: Option<f64>) -> Result<Column> {
        let section = |k: &str| doc.get(k).cloned().unwrap_or(Value::Table(Table::new()));
        let mspec: ModelSpec = typed("model", section("model"))?;
        let mut sys = match section("system") {
            Value::Table(t) => t,
            other => {
                return Err(Error::input(
                    "system",
                    format!("expected a name or a table, got {}", other.type_str()),
                ));
            }
        };
        let dev = sys.remove("device").unwrap_or(Value::Table(Table::new()));
        let dspec: DeviceSpec = typed("system.device", dev)?;
        sys.insert("device".into(), Value::String(dspec.name.clone()));
        let sspec: SystemSpec = typed("system", Value::Table(sys))?;
        let pspec: PlanSpec = typed("plan", section("plan"))?;
        let model = Model::from_spec(mspec)?;
        let device = Device::from_spec(dspec)?;
        let mut system = System::new(sspec, device)?;
        if let Some(g) = pspec.gpus
            && u64::from(g) != system.gpus()
        {
            system = system.with_gpus(g)?;
        }
        let plan = estimate::plan(&model, &system, &pspec)?;
        let estimate = estimate::evaluate(&model, &system, &plan)?;
        if let Some(p) = price
            && !(p >= 0.0 && p.is_finite())
        {
            return Err(Error::input(
                "gpu_hour_price",
                "must be a finite number ≥ 0",
            ));
        }
        Ok(Column {
            name: name.to_string(),
            model,
            system,
            plan,
            estimate,
            gpu_hour_price: price,
        })
    }
}

/// Deserialises one section, naming it in the error.
fn typed<T: serde::de::DeserializeOwned>(what: &str, v: Value) -> Result<T> {
    v.try_into()
        .map_err(|e: toml::de::Error| Error::input(what, e.message().trim().to_string()))
}

/// Resolves one preset value: a name or path becomes the preset's table; a table with
/// `preset = "name"` becomes that preset with the table's other keys merged on top; any
/// other value is returned as is. Also returns the file it came from when it is a path.
fn resolve(kind: Kind, v: Value, dir: &Path) -> Result<(Value, Option<PathBuf>)> {
    let file = |s: &str, origin: PathBuf| catalog::is_path(s).then_some(origin);
    match v {
        Value::String(s) => {
            let (t, origin) = preset(kind, &s, dir)?;
            Ok((t, file(&s, origin)))
        }
        Value::Table(mut over) => match over.remove("preset") {
            Some(Value::String(s)) => {
                let (t, origin) = preset(kind, &s, dir)?;
                let Value::Table(mut base) = t else {
                    return Err(Error::Internal("preset is not a table".into()));
                };
                merge::merge(&mut base, &over, kind.name())?;
                Ok((Value::Table(base), file(&s, origin)))
            }
            Some(other) => Err(Error::input(
                format!("{}.preset", kind.name()),
                format!("expected a preset name, got {}", other.type_str()),
            )),
            None => Ok((Value::Table(over), None)),
        },
        other => Ok((other, None)),
    }
}

/// A preset (built-in name, or path relative to `dir`) as a TOML table, with its origin.
fn preset(kind: Kind, name: &str, dir: &Path) -> Result<(Value, PathBuf)> {
    let arg = if catalog::is_path(name) && Path::new(name).is_relative() {
        dir.join(name).to_string_lossy().into_owned()
    } else {
        name.to_string()
    };
    let (text, origin) = catalog::read(kind, &arg)?;
    let t: Table = catalog::parse_toml(&text, &origin)?;
    Ok((Value::Table(t), origin))
}

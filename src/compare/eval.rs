//! Evaluation of a [`Scenario`]: expand preset names into TOML tables, merge each
//! variant's overrides onto the baseline, deserialise into the typed specs, validate and
//! estimate; when a variant fails, find which of its overrides causes it (each override
//! alone on the baseline) so the error names that line.

use super::merge::{self, Leaf};
use super::{Column, Comparison, Scenario, Variant};
use crate::catalog::{self, Kind};
use crate::compute::{Device, DeviceSpec};
use crate::error::{Error, Result};
use crate::estimate;
use crate::model::{Model, ModelSpec};
use crate::parallel::PlanSpec;
use crate::system::{System, SystemSpec};
use std::path::{Path, PathBuf};
use toml::{Table, Value};

impl Scenario {
    /// Evaluates the baseline and every variant.
    pub fn evaluate(&self) -> Result<Comparison> {
        let base = self.expand(self.baseline.clone())?;
        let mut columns = vec![self.column_or_blame(
            &self.baseline_label,
            &base,
            &self.lines.baseline,
            self.baseline_price.or(self.gpu_hour_price),
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
        let mut pspec: PlanSpec = typed("plan", section("plan"))?;
        crate::estimate::scenario::infer_schedule(&mut pspec);
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
        // A flag's or the scenario's price, else the system file's own.
        let price = price.or(system.spec.gpu_hour_price);
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
    let text = match &v {
        Value::Table(t) => toml::to_string(t).ok(),
        _ => None,
    };
    v.try_into().map_err(|e: toml::de::Error| {
        let msg = e.message().trim().to_string();
        match text.as_deref().and_then(key_of_error::<T>) {
            Some(key) => Error::input(format!("{what}: {key}"), msg),
            None => Error::input(what, msg),
        }
    })
}

/// The dotted key a type error is about: the merged table is written back as TOML and
/// parsed again, and toml's span of the error points at the offending `key = value`
/// line (under its `[section]` header, if any).
fn key_of_error<T: serde::de::DeserializeOwned>(text: &str) -> Option<String> {
    let span = toml::from_str::<T>(text).err()?.span()?;
    let start = text[..span.start.min(text.len())]
        .rfind('\n')
        .map_or(0, |i| i + 1);
    let (key, _) = text[start..].split_once('=')?;
    let section = text[..start]
        .lines()
        .rev()
        .find_map(|l| l.trim().strip_prefix('[')?.strip_suffix(']'));
    Some(match section {
        Some(s) => format!("{}.{}", s.trim_matches(['[', ']']), key.trim()),
        None => key.trim().to_string(),
    })
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

//! `astrolabe list` and `astrolabe show`: what is built in, and one preset as TOML that
//! can be saved, edited and passed back as a path. `show` prints the embedded file itself
//! (comments with sources included), so it loads back to the same validated value.

use super::OutputArgs;
use crate::catalog::{self, Kind};
use crate::compare::builtin;
use crate::error::{Error, Result};
use crate::report::{Cell, Format, Report, Table};
use clap::{Args, ValueEnum};
use serde::Deserialize;
use toml::Value;

/// Flags of `astrolabe list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only this kind.
    #[arg(value_enum)]
    pub kind: Option<ShowKind>,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// What `show` and `list` can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ShowKind {
    /// Workloads (`models/`).
    Model,
    /// Accelerators (`presets/devices/`).
    Device,
    /// Devices + network (`presets/systems/`).
    System,
    /// Comparisons (`presets/scenarios/`).
    Scenario,
}

impl ShowKind {
    const ALL: [ShowKind; 4] = [Self::Model, Self::Device, Self::System, Self::Scenario];

    fn name(self) -> &'static str {
        match self {
            ShowKind::Model => "model",
            ShowKind::Device => "device",
            ShowKind::System => "system",
            ShowKind::Scenario => "scenario",
        }
    }

    fn catalog(self) -> Option<Kind> {
        match self {
            ShowKind::Model => Some(Kind::Model),
            ShowKind::Device => Some(Kind::Device),
            ShowKind::System => Some(Kind::System),
            ShowKind::Scenario => None,
        }
    }

    /// Built-in names of this kind.
    pub fn names(self) -> Vec<&'static str> {
        match self.catalog() {
            Some(k) => catalog::names(k),
            None => builtin::names(),
        }
    }

    /// The embedded TOML text of `name`.
    pub fn source(self, name: &str) -> Result<&'static str> {
        match self.catalog() {
            Some(k) => catalog::source(k, name),
            None => builtin::source(name),
        }
    }
}

/// Flags of `astrolabe show`.
#[derive(Debug, Args)]
pub struct ShowArgs {
    /// model, device, system or scenario.
    #[arg(value_enum)]
    pub kind: ShowKind,
    /// Built-in name (see `astrolabe list`).
    pub name: String,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The `description` of a preset's TOML (every kind has one at the top level).
fn description(text: &str) -> String {
    #[derive(Deserialize)]
    struct D {
        #[serde(default)]
        description: String,
    }
    toml::from_str::<D>(text)
        .map(|d| d.description)
        .unwrap_or_default()
}

/// Runs `astrolabe list`.
pub fn run_list(args: &ListArgs) -> Result<Report> {
    let mut t = Table::new(
        "catalog",
        &[
            ("kind", "kind"),
            ("name", "name"),
            ("description", "description"),
        ],
    );
    for kind in ShowKind::ALL {
        if args.kind.is_some_and(|k| k != kind) {
            continue;
        }
        for name in kind.names() {
            let text = kind.source(name)?;
            t.push(vec![
                Cell::text(kind.name()),
                Cell::text(name),
                Cell::text(description(text)),
            ])?;
        }
    }
    let mut notes = vec!["`astrolabe show KIND NAME` prints one as TOML to copy and edit".into()];
    if args.kind.is_none_or(|k| k == ShowKind::Model) {
        let aliases: Vec<String> = crate::catalog::MODEL_ALIASES
            .iter()
            .map(|(a, n)| format!("{a} = {n}"))
            .collect();
        notes.push(format!("model aliases: {}", aliases.join(", ")));
    }
    Ok(Report {
        tables: vec![t],
        notes,
        ..Report::default()
    })
}

/// Runs `astrolabe show`: the TOML text for `--format table`; for JSON, CSV and
/// Markdown, a table of (key, value) with dotted keys.
pub fn run_show(args: &ShowArgs) -> Result<Report> {
    let text = args.kind.source(&args.name)?;
    if args.out.format() == Format::Table {
        let header = format!(
            "# astrolabe show {} {}: save to a file, edit, and pass its path instead of the name\n",
            args.kind.name(),
            args.name
        );
        return Ok(Report {
            text: Some(format!("{header}{}\n", text.trim_end())),
            ..Report::default()
        });
    }
    let doc: toml::Table = toml::from_str(text).map_err(|e| {
        Error::Internal(format!(
            "built-in {} '{}': {e}",
            args.kind.name(),
            args.name
        ))
    })?;
    let mut t = Table::new(args.name.clone(), &[("key", "key"), ("value", "value")]);
    let mut flat = Vec::new();
    flatten("", &Value::Table(doc), &mut flat);
    for (k, v) in flat {
        t.push(vec![Cell::text(k), Cell::text(v)])?;
    }
    Ok(Report {
        tables: vec![t],
        ..Report::default()
    })
}

/// Dotted keys and their values (`network.dims.0.bandwidth`, `240 GB/s`).
fn flatten(at: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let key = |k: &str| {
        if at.is_empty() {
            k.to_string()
        } else {
            format!("{at}.{k}")
        }
    };
    match v {
        Value::Table(t) => t.iter().for_each(|(k, v)| flatten(&key(k), v, out)),
        Value::Array(a) if a.iter().all(Value::is_table) && !a.is_empty() => a
            .iter()
            .enumerate()
            .for_each(|(i, v)| flatten(&key(&i.to_string()), v, out)),
        Value::String(s) => out.push((at.to_string(), s.clone())),
        other => out.push((at.to_string(), other.to_string())),
    }
}

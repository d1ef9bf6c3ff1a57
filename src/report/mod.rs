//! Output: every command builds a [`Report`] (tables plus notes and `--explain`
//! derivations) and renders it in the format the user asked for. Tables show human units
//! in each cell ("17.51 ms"); JSON and CSV carry SI numbers under keys that name their unit
//! (`time_s`, `busbw_Bps`). One file per format behind the [`Exporter`] trait, as
//! hyperfine's `export/`.

mod csv;
mod json;
mod markdown;
mod table;

use crate::error::{Error, Result};
use serde::Serialize;

/// Output formats accepted by `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// A terminal table with human units.
    #[default]
    Table,
    /// JSON with SI numbers.
    Json,
    /// CSV with SI numbers, one header row per table.
    Csv,
    /// A GitHub-flavoured Markdown table with human units.
    Markdown,
}

/// One column: `key` is the machine name with its SI unit (`time_s`), `header` the
/// human heading (`time`).
#[derive(Clone, Debug, Serialize)]
pub struct Column {
    /// Machine name used in JSON and CSV; ends with the SI unit when there is one.
    pub key: String,
    /// Human heading for tables and Markdown.
    pub header: String,
}

/// One cell: how it prints for humans and what it is for machines.
#[derive(Clone, Debug)]
pub enum Cell {
    /// Text, the same for both.
    Text(String),
    /// A number in SI units with its human rendering.
    Value { human: String, si: f64 },
    /// An empty cell (null in JSON).
    Empty,
}

impl Cell {
    /// A quantity: its human rendering (via `Display`) and its SI value.
    pub fn q<T: std::fmt::Display>(human: T, si: f64) -> Cell {
        Cell::Value {
            human: human.to_string(),
            si,
        }
    }
    /// A plain number printed with about four significant digits.
    pub fn num(v: f64) -> Cell {
        Cell::Value {
            human: crate::units::sig(v),
            si: v,
        }
    }
    /// An integer count.
    pub fn int(v: u64) -> Cell {
        Cell::Value {
            human: v.to_string(),
            si: v as f64,
        }
    }
    /// A text cell.
    pub fn text(s: impl Into<String>) -> Cell {
        Cell::Text(s.into())
    }
    fn human(&self) -> &str {
        match self {
            Cell::Text(s) => s,
            Cell::Value { human, .. } => human,
            Cell::Empty => "",
        }
    }
}

/// A titled table.
#[derive(Clone, Debug, Default)]
pub struct Table {
    /// Short name, used as the JSON key and printed above the table.
    pub title: String,
    /// The columns.
    pub columns: Vec<Column>,
    /// The rows; each has one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    /// An empty table with these (key, header) columns.
    pub fn new(title: impl Into<String>, cols: &[(&str, &str)]) -> Table {
        Table {
            title: title.into(),
            columns: cols
                .iter()
                .map(|(k, h)| Column {
                    key: k.to_string(),
                    header: h.to_string(),
                })
                .collect(),
            rows: Vec::new(),
        }
    }
    /// Appends a row; it must have one cell per column.
    pub fn push(&mut self, row: Vec<Cell>) -> Result<()> {
        if row.len() != self.columns.len() {
            return Err(Error::Internal(format!(
                "table '{}' row has {} cells for {} columns",
                self.title,
                row.len(),
                self.columns.len()
            )));
        }
        let mut row = row;
        for (cell, col) in row.iter_mut().zip(&self.columns) {
            finite(cell, &self.title, &col.key)?;
        }
        self.rows.push(row);
        Ok(())
    }
}

/// The last guard against printing NaN, ∞ or −0: a non-finite number means the inputs
/// were beyond what the model can compute (an input error, exit 2); −0 prints as 0.
fn finite(cell: &mut Cell, table: &str, key: &str) -> Result<()> {
    if let Cell::Value { human, si } = cell {
        if !si.is_finite() {
            return Err(Error::Unsupported(format!(
                "'{key}' in table '{table}' is {si}: the inputs are beyond the range the model \
                 can compute; use smaller sizes or latencies, or larger rates"
            )));
        }
        if *si == 0.0 && si.is_sign_negative() {
            *si = 0.0;
            if let Some(rest) = human.strip_prefix('-') {
                *human = rest.to_string();
            }
        }
    }
    Ok(())
}

/// What a command prints.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// Tables, in order.
    pub tables: Vec<Table>,
    /// One-line remarks (the chosen algorithm, what was dropped and why).
    pub notes: Vec<String>,
    /// `--explain` derivations: each formula with the numbers put in.
    pub explain: Vec<String>,
}

/// One output format.
pub trait Exporter {
    /// Renders the whole report.
    fn render(&self, r: &Report) -> Result<String>;
}

impl Report {
    /// Renders in `fmt`.
    pub fn render(&self, fmt: Format) -> Result<String> {
        match fmt {
            Format::Table => table::TableExporter.render(self),
            Format::Json => json::JsonExporter.render(self),
            Format::Csv => csv::CsvExporter.render(self),
            Format::Markdown => markdown::MarkdownExporter.render(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut t = Table::new("demo", &[("size_B", "size"), ("time_s", "time")]);
        t.push(vec![
            Cell::q("1 GiB", 1073741824.0),
            Cell::q("17.51 ms", 0.017507),
        ])
        .unwrap();
        Report {
            tables: vec![t],
            notes: vec!["ring chosen".into()],
            explain: vec![],
        }
    }

    #[test]
    fn every_format_carries_the_numbers() {
        let r = sample();
        let t = r.render(Format::Table).unwrap();
        assert!(t.contains("17.51 ms") && t.contains("ring chosen"));
        let j: serde_json::Value = serde_json::from_str(&r.render(Format::Json).unwrap()).unwrap();
        assert_eq!(j["tables"]["demo"][0]["time_s"], 0.017507);
        let c = r.render(Format::Csv).unwrap();
        assert!(c.starts_with("size_B,time_s\n1073741824,0.017507"), "{c}");
        let m = r.render(Format::Markdown).unwrap();
        assert!(m.contains("| 1 GiB | 17.51 ms |"), "{m}");
    }

    #[test]
    fn wrong_row_length_is_an_error() {
        let mut t = Table::new("x", &[("a", "a")]);
        assert!(t.push(vec![]).is_err());
    }
}

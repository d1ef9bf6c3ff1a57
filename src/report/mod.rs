//! Output: every command builds a [`Report`]: the typed value it computed ([`Data`]:
//! [`estimate::EstimateResult`], [`sweep::SweepResult`], [`compare::CompareResult`],
//! [`collective::CollectiveResult`]), which JSON and CSV serialize directly (serde, with a
//! `schema_version`), and the human views of that value (tables, notes and `--explain`
//! derivations). Tables show human units in each cell ("17.51 ms"); JSON and CSV carry SI
//! numbers under keys that name their unit (`iteration_time_s`). One file per format
//! behind the [`Exporter`] trait, as hyperfine's `export/`. Commands without a typed value
//! (`list`, `show`, `astra`) serialize their tables.

pub mod collective;
pub mod compare;
mod csv;
pub mod estimate;
mod json;
mod markdown;
pub mod sweep;
mod table;
pub mod values;

pub use values::{Data, PlanValue, SCHEMA_VERSION};

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
    /// CSV with SI numbers: one table (see --table), one header row.
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
    /// The human rendering.
    pub fn human(&self) -> &str {
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
    /// Column keys the terminal view shows by default (all when empty); `--columns`
    /// chooses others.
    pub default_columns: Vec<String>,
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
            default_columns: Vec::new(),
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
    /// Tables, in order (the human view).
    pub tables: Vec<Table>,
    /// One-line remarks (the chosen algorithm, what was dropped and why).
    pub notes: Vec<String>,
    /// `--explain` derivations: each formula with the numbers put in.
    pub explain: Vec<String>,
    /// The typed value JSON and CSV serialize, when the command has one.
    pub data: Option<Data>,
    /// Exit status once the output is printed: 0, or 3 when the plan does not fit.
    pub exit_code: u8,
    /// With a non-zero `exit_code`: what to say on standard error after the output.
    pub failure: Option<String>,
    /// Text printed as it is in every format (a completion script, a man page, a schema).
    pub text: Option<String>,
}

/// How to render: the format and the view options of the table and CSV formats.
#[derive(Clone, Debug, Default)]
pub struct Render {
    /// The format.
    pub format: Format,
    /// CSV: which table (by name); the command's main table when unset.
    pub table: Option<String>,
    /// Table and Markdown: the columns to show (machine keys); a default set when empty.
    pub columns: Vec<String>,
    /// Table: plain ASCII (not a terminal, or `NO_COLOR`) instead of box drawing.
    pub ascii: bool,
    /// Table: the width to fit, in characters (the terminal's).
    pub width: Option<u16>,
}

/// One output format.
pub trait Exporter {
    /// Renders the whole report.
    fn render(&self, r: &Report, opts: &Render) -> Result<String>;
}

impl Report {
    /// Renders with `opts`.
    pub fn render(&self, opts: &Render) -> Result<String> {
        match opts.format {
            Format::Table => table::TableExporter.render(&self.pick(opts)?, opts),
            Format::Json => json::JsonExporter.render(self, opts),
            Format::Csv => csv::CsvExporter.render(self, opts),
            Format::Markdown => markdown::MarkdownExporter.render(&self.pick(opts)?, opts),
        }
    }

    /// The human view with only the table `--table` names (all without it). A `--columns`
    /// key that no table has is an error, with the closest key.
    fn pick(&self, opts: &Render) -> Result<Report> {
        let mut keys: Vec<&str> = Vec::new();
        for c in self.tables.iter().flat_map(|t| &t.columns) {
            if !keys.contains(&c.key.as_str()) {
                keys.push(&c.key);
            }
        }
        let known = |w: &str| keys.iter().any(|k| key_matches(k, w));
        if let Some(bad) = opts.columns.iter().find(|c| !known(c)) {
            return Err(Error::unknown("column", bad, &keys).context("--columns"));
        }
        let Some(name) = &opts.table else {
            return Ok(self.clone());
        };
        let tables: Vec<Table> = self
            .tables
            .iter()
            .filter(|t| &t.title == name)
            .cloned()
            .collect();
        if tables.is_empty() {
            let names: Vec<&str> = self.tables.iter().map(|t| t.title.as_str()).collect();
            return Err(Error::unknown("table", name, &names).context("--table"));
        }
        Ok(Report {
            tables,
            ..self.clone()
        })
    }

    /// The names of the tables `--table` accepts in CSV.
    pub fn table_names(&self) -> Result<Vec<String>> {
        Ok(match &self.data {
            Some(d) => d.tables()?.iter().map(|t| t.0.to_string()).collect(),
            None => self.tables.iter().map(|t| t.title.clone()).collect(),
        })
    }
}

impl Format {
    /// The format a file name implies: .json/.jsonl, .csv, .md, else the table.
    pub fn from_path(path: &std::path::Path) -> Option<Format> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "json" | "jsonl" => Some(Format::Json),
            "csv" => Some(Format::Csv),
            "md" | "markdown" => Some(Format::Markdown),
            "txt" => Some(Format::Table),
            _ => None,
        }
    }
}

impl Table {
    /// The indices of the columns to show for `wanted` keys (all when empty; a key no
    /// column has is ignored here and reported by the caller).
    pub fn shown(&self, wanted: &[String]) -> Vec<usize> {
        let all = (0..self.columns.len()).collect();
        if wanted.is_empty() {
            return if self.default_columns.is_empty() {
                all
            } else {
                (0..self.columns.len())
                    .filter(|&i| self.default_columns.contains(&self.columns[i].key))
                    .collect()
            };
        }
        let v: Vec<usize> = (0..self.columns.len())
            .filter(|&i| wanted.iter().any(|w| key_matches(&self.columns[i].key, w)))
            .collect();
        if v.is_empty() { all } else { v }
    }

    /// How many rows the terminal and Markdown views print: all up to
    /// [`crate::limits::TABLE_ROWS`], else that many and a note naming how many more
    /// there are and how to get them.
    pub fn printed_rows(&self) -> Result<(usize, Option<String>)> {
        let max = crate::limits::TABLE_ROWS.max()?;
        let n = self.rows.len();
        if n as u64 <= max {
            return Ok((n, None));
        }
        let more = n - max as usize;
        Ok((
            max as usize,
            Some(format!(
                "… {} more rows of '{}' not printed: use --format csv or --format json for every row (or {}={n})",
                thousands(more as u64),
                self.title,
                crate::limits::TABLE_ROWS.env
            )),
        ))
    }
}

/// A count with thousands separators: 999000 → "999,000".
pub fn thousands(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::with_capacity(d.len() + d.len() / 3);
    for (i, c) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether a column keyed `key` answers to the name `wanted` given to `--columns`: its
/// full CSV/JSON name (`plan.dp`) or the part after the last dot (`dp`).
pub fn key_matches(key: &str, wanted: &str) -> bool {
    key == wanted || key.rsplit_once('.').is_some_and(|(_, last)| last == wanted)
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
            ..Report::default()
        }
    }

    fn fmt(format: Format) -> Render {
        Render {
            format,
            ..Render::default()
        }
    }

    #[test]
    fn every_format_carries_the_numbers() {
        let r = sample();
        let t = r.render(&fmt(Format::Table)).unwrap();
        assert!(t.contains("17.51 ms") && t.contains("ring chosen"));
        let j: serde_json::Value =
            serde_json::from_str(&r.render(&fmt(Format::Json)).unwrap()).unwrap();
        assert_eq!(j["tables"]["demo"][0]["time_s"], 0.017507);
        let c = r.render(&fmt(Format::Csv)).unwrap();
        assert!(c.starts_with("size_B,time_s\n1073741824,0.017507"), "{c}");
        let m = r.render(&fmt(Format::Markdown)).unwrap();
        assert!(m.contains("| 1 GiB | 17.51 ms |"), "{m}");
    }

    #[test]
    fn ascii_tables_have_no_box_drawing() {
        let opts = Render {
            ascii: true,
            ..fmt(Format::Table)
        };
        let t = sample().render(&opts).unwrap();
        assert!(
            t.contains("17.51 ms") && !t.contains('│') && !t.contains('─'),
            "{t}"
        );
    }

    #[test]
    fn format_follows_the_file_extension() {
        use std::path::Path;
        assert_eq!(Format::from_path(Path::new("x.json")), Some(Format::Json));
        assert_eq!(Format::from_path(Path::new("a/b.CSV")), Some(Format::Csv));
        assert_eq!(Format::from_path(Path::new("r.md")), Some(Format::Markdown));
        assert_eq!(Format::from_path(Path::new("noext")), None);
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(thousands(999_000), "999,000");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }

    #[test]
    fn columns_answer_to_their_csv_name_and_its_last_part() {
        assert!(key_matches("plan.dp", "plan.dp") && key_matches("plan.dp", "dp"));
        assert!(key_matches("rank", "rank"));
        assert!(!key_matches("plan.dp", "plan") && !key_matches("plan.dp_overlap", "dp"));
    }

    #[test]
    fn wrong_row_length_is_an_error() {
        let mut t = Table::new("x", &[("a", "a")]);
        assert!(t.push(vec![]).is_err());
    }
}

//! CSV with SI numbers: ONE table per file, one header row, rows are records (pandas'
//! `read_csv` reads it). A command with a typed value writes its main table (the estimate's
//! `summary`, the sweep's `top`, …) unless `--table NAME` picks another; integers print
//! without ".0"; nested objects become `plan.tp`-style columns. Notes and explanations are
//! left out (they are not data).

use super::values::csv_table;
use super::{Cell, Exporter, Render, Report, Table};
use crate::error::{Error, Result};

/// Renders one table as CSV (csv crate), SI values.
pub struct CsvExporter;

fn unknown(name: &str, names: &[String]) -> Error {
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    Error::unknown("table", name, &names).context("--table")
}

fn plain(t: &Table) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    let err = |e: csv::Error| Error::Internal(format!("csv: {e}"));
    w.write_record(t.columns.iter().map(|c| c.key.as_str()))
        .map_err(err)?;
    for row in &t.rows {
        w.write_record(row.iter().map(|c| match c {
            Cell::Text(s) => s.clone(),
            Cell::Value { si, .. } => format!("{}", si + 0.0),
            Cell::Empty => String::new(),
        }))
        .map_err(err)?;
    }
    let bytes = w
        .into_inner()
        .map_err(|e| Error::Internal(format!("csv: {e}")))?;
    String::from_utf8(bytes).map_err(|e| Error::Internal(format!("csv: {e}")))
}

impl Exporter for CsvExporter {
    fn render(&self, r: &Report, opts: &Render) -> Result<String> {
        let names = r.table_names()?;
        let want = opts.table.as_deref();
        if let Some(d) = &r.data {
            let tables = d.tables()?;
            let pick = match want {
                Some(n) => tables.iter().find(|t| t.0 == n),
                None => tables.first(),
            };
            return match pick {
                Some((_, records)) => csv_table(records),
                None => Err(unknown(want.unwrap_or(""), &names)),
            };
        }
        let pick = match want {
            Some(n) => r.tables.iter().find(|t| t.title == n),
            None => r.tables.first(),
        };
        match pick {
            Some(t) => plain(t),
            None if want.is_none() => Ok(String::new()),
            None => Err(unknown(want.unwrap_or(""), &names)),
        }
    }
}

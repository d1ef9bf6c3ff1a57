//! CSV with SI numbers. A report with several tables writes them one after another,
//! each with its header row, separated by a blank line; notes and explanations are left
//! out (they are not data).

use super::{Cell, Exporter, Report};
use crate::error::{Error, Result};

/// Renders tables as CSV (csv crate), SI values.
pub struct CsvExporter;

impl Exporter for CsvExporter {
    fn render(&self, r: &Report) -> Result<String> {
        let mut out = String::new();
        for (i, t) in r.tables.iter().enumerate() {
            if i > 0 {
                out.push('\n');
            }
            let mut w = csv::Writer::from_writer(Vec::new());
            let err = |e: csv::Error| Error::Internal(format!("csv: {e}"));
            w.write_record(t.columns.iter().map(|c| c.key.as_str()))
                .map_err(err)?;
            for row in &t.rows {
                w.write_record(row.iter().map(|c| match c {
                    Cell::Text(s) => s.clone(),
                    Cell::Value { si, .. } => format!("{si}"),
                    Cell::Empty => String::new(),
                }))
                .map_err(err)?;
            }
            let bytes = w
                .into_inner()
                .map_err(|e| Error::Internal(format!("csv: {e}")))?;
            out.push_str(&String::from_utf8_lossy(&bytes));
        }
        Ok(out)
    }
}

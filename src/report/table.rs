//! Terminal tables (comfy-table), human units in the cells.

use super::{Exporter, Report};
use crate::error::Result;
use comfy_table::{Table as Ct, presets::UTF8_FULL_CONDENSED};

/// Renders tables with comfy-table, notes after, explanations last.
pub struct TableExporter;

impl Exporter for TableExporter {
    fn render(&self, r: &Report) -> Result<String> {
        let mut out = String::new();
        for t in &r.tables {
            if !t.title.is_empty() {
                out.push_str(&t.title);
                out.push('\n');
            }
            let mut ct = Ct::new();
            ct.load_style(UTF8_FULL_CONDENSED);
            ct.set_header(t.columns.iter().map(|c| c.header.as_str()));
            for row in &t.rows {
                ct.add_row(row.iter().map(|c| c.human()));
            }
            out.push_str(&ct.to_string());
            out.push('\n');
        }
        for n in &r.notes {
            out.push_str(n);
            out.push('\n');
        }
        if !r.explain.is_empty() {
            out.push_str("\nExplanation\n");
            for e in &r.explain {
                out.push_str("  ");
                out.push_str(e);
                out.push('\n');
            }
        }
        Ok(out)
    }
}

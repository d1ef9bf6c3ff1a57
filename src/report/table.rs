//! Terminal tables (comfy-table), human units in the cells. Box drawing on a terminal,
//! plain ASCII when the output is not one (a pipe, a file) or `NO_COLOR` is set; on a
//! terminal the table wraps its cells to fit the width.

use super::{Exporter, Render, Report};
use crate::error::Result;
use comfy_table::presets::{ASCII_FULL_CONDENSED, UTF8_FULL_CONDENSED};
use comfy_table::{ContentArrangement, Table as Ct};

/// Renders tables with comfy-table, notes after, explanations last.
pub struct TableExporter;

impl Exporter for TableExporter {
    fn render(&self, r: &Report, opts: &Render) -> Result<String> {
        let mut out = String::new();
        for t in &r.tables {
            if !t.title.is_empty() {
                out.push_str(&t.title);
                out.push('\n');
            }
            let shown = t.shown(&opts.columns);
            let mut ct = Ct::new();
            ct.load_style(if opts.ascii {
                ASCII_FULL_CONDENSED
            } else {
                UTF8_FULL_CONDENSED
            });
            if !opts.ascii {
                // On a terminal: wrap cells to fit its width (comfy-table reads it).
                ct.set_content_arrangement(ContentArrangement::Dynamic);
            }
            if let Some(w) = opts.width {
                ct.set_content_arrangement(ContentArrangement::Dynamic);
                ct.set_width(w);
            }
            ct.set_header(shown.iter().map(|&i| t.columns[i].header.as_str()));
            let (n, more) = t.printed_rows()?;
            for row in &t.rows[..n] {
                ct.add_row(shown.iter().map(|&i| row[i].human()));
            }
            out.push_str(&ct.to_string());
            out.push('\n');
            if let Some(m) = more {
                out.push_str(&m);
                out.push('\n');
            }
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

//! GitHub-flavoured Markdown tables, human units in the cells.

use super::{Exporter, Render, Report};
use crate::error::Result;

/// Renders each table as a Markdown table under a `###` title.
pub struct MarkdownExporter;

impl Exporter for MarkdownExporter {
    fn render(&self, r: &Report, opts: &Render) -> Result<String> {
        let mut out = String::new();
        for t in &r.tables {
            if !t.title.is_empty() {
                out.push_str(&format!("### {}\n\n", t.title));
            }
            let shown = t.shown(&opts.columns);
            let head: Vec<&str> = shown
                .iter()
                .map(|&i| t.columns[i].header.as_str())
                .collect();
            out.push_str(&format!("| {} |\n", head.join(" | ")));
            out.push_str(&format!("|{}\n", "---|".repeat(head.len())));
            let (n, more) = t.printed_rows()?;
            for row in &t.rows[..n] {
                let cells: Vec<String> = shown
                    .iter()
                    .map(|&i| row[i].human().replace('|', "\\|"))
                    .collect();
                out.push_str(&format!("| {} |\n", cells.join(" | ")));
            }
            if let Some(m) = more {
                out.push_str(&format!("\n{m}\n"));
            }
            out.push('\n');
        }
        for n in &r.notes {
            out.push_str(&format!("- {n}\n"));
        }
        if !r.explain.is_empty() {
            out.push_str("\n```text\n");
            for e in &r.explain {
                out.push_str(e);
                out.push('\n');
            }
            out.push_str("```\n");
        }
        Ok(out)
    }
}

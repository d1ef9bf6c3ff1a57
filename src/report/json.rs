//! JSON with SI numbers. A command with a typed value ([`super::Data`]) serializes it
//! (top-level `iteration_time_s`, `schema_version`, …; see docs/schema.md); the others
//! write `{"tables": {title: [row objects]}, "notes": [...], "explain": [...]}`.

use super::values::pretty;
use super::{Cell, Exporter, Render, Report};
use crate::error::Result;
use serde_json::{Map, Value, json};

/// Renders the report as one pretty-printed JSON object.
pub struct JsonExporter;

fn cell(c: &Cell) -> Value {
    match c {
        Cell::Text(s) => Value::String(s.clone()),
        Cell::Value { si, .. } => serde_json::Number::from_f64(*si)
            .map(Value::Number)
            .unwrap_or(Value::Null),
        Cell::Empty => Value::Null,
    }
}

impl Exporter for JsonExporter {
    fn render(&self, r: &Report, _opts: &Render) -> Result<String> {
        if let Some(d) = &r.data {
            return d.to_json();
        }
        let mut tables = Map::new();
        for t in &r.tables {
            let rows: Vec<Value> = t
                .rows
                .iter()
                .map(|row| {
                    Value::Object(
                        t.columns
                            .iter()
                            .zip(row)
                            .map(|(c, v)| (c.key.clone(), cell(v)))
                            .collect(),
                    )
                })
                .collect();
            tables.insert(t.title.clone(), Value::Array(rows));
        }
        pretty(&json!({ "tables": tables, "notes": r.notes, "explain": r.explain }))
    }
}

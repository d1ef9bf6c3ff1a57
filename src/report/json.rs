//! JSON with SI numbers: `{"tables": {title: [row objects]}, "notes": [...], "explain": [...]}`.

use super::{Cell, Exporter, Report};
use crate::error::{Error, Result};
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
    fn render(&self, r: &Report) -> Result<String> {
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
        let v = json!({ "tables": tables, "notes": r.notes, "explain": r.explain });
        let mut s = serde_json::to_string_pretty(&v).map_err(|e| Error::Internal(e.to_string()))?;
        s.push('\n');
        Ok(s)
    }
}

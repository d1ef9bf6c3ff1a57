//! Deep merge of TOML tables (a variant's overrides onto the baseline) and the source
//! lines of each override, so that an error can name the line that caused it.
//!
//! Merge rules: a table merges key by key, recursively; any other value replaces what was
//! there. An array can be changed element by element by writing the index as a key
//! (`[variant.system.network.dims.0]`): the element is merged with that table. An index
//! past the end of the array is an error (there is nothing to override). A table with a
//! `preset = "name"` key replaces what was there (it starts from that preset instead).

use crate::error::{Error, Result};
use toml::de::{DeTable, DeValue};
use toml::{Table, Value};

/// One overridden value: its dotted path (`plan.tp`, `system.network.dims.0.bandwidth`)
/// and the 1-based line of its key in the file.
#[derive(Clone, Debug, PartialEq)]
pub struct Leaf {
    /// Dotted key path below the variant.
    pub path: Vec<String>,
    /// 1-based source line.
    pub line: usize,
}

impl Leaf {
    /// `plan.tp`.
    pub fn dotted(&self) -> String {
        self.path.join(".")
    }
}

/// Merges `over` into `base` in place. `at` is the path of `base`, for errors.
pub fn merge(base: &mut Table, over: &Table, at: &str) -> Result<()> {
    for (k, v) in over {
        let here = join(at, k);
        match (base.get_mut(k), v) {
            // `preset = "name"` starts afresh from that preset: replace, resolve later.
            (_, Value::Table(o)) if o.contains_key("preset") => {
                base.insert(k.clone(), v.clone());
            }
            (Some(Value::Table(b)), Value::Table(o)) => merge(b, o, &here)?,
            (Some(Value::Array(b)), Value::Table(o)) => merge_indexed(b, o, &here)?,
            _ => {
                base.insert(k.clone(), v.clone());
            }
        }
    }
    Ok(())
}

/// Merges `{ "0" = {...}, "2" = {...} }` into the elements of an array.
fn merge_indexed(base: &mut [Value], over: &Table, at: &str) -> Result<()> {
    for (k, v) in over {
        let here = join(at, k);
        let len = base.len();
        let i: usize = k.parse().map_err(|_| {
            Error::input(
                &here,
                format!("'{at}' is an array: index it with a number 0..{len}"),
            )
        })?;
        let Some(slot) = base.get_mut(i) else {
            return Err(Error::input(
                &here,
                format!("no such element: '{at}' has {len} element(s)"),
            ));
        };
        match (slot, v) {
            (Value::Table(b), Value::Table(o)) => merge(b, o, &here)?,
            (slot, v) => *slot = v.clone(),
        }
    }
    Ok(())
}

fn join(at: &str, k: &str) -> String {
    if at.is_empty() {
        k.to_string()
    } else {
        format!("{at}.{k}")
    }
}

/// 1-based line of byte `offset` in `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text.as_bytes()[..offset.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// Spans of a scenario file: the line of each `[[variant]]` and the leaves it overrides,
/// and the leaves of the baseline's `model`, `system` and `plan`.
#[derive(Clone, Debug, Default)]
pub struct Lines {
    /// Per variant: (line of the variant, its override leaves).
    pub variants: Vec<(usize, Vec<Leaf>)>,
    /// Leaves of the baseline's model, system and plan.
    pub baseline: Vec<Leaf>,
}

/// Reads the spans of `text` (already known to parse).
pub fn lines(text: &str) -> Lines {
    let Ok(doc) = DeTable::parse(text) else {
        return Lines::default();
    };
    let mut out = Lines::default();
    for (k, v) in doc.get_ref().iter() {
        let key = k.get_ref().as_ref();
        match (key, v.get_ref()) {
            ("variant", DeValue::Array(items)) => {
                for item in items.iter() {
                    let mut leaves = Vec::new();
                    collect(text, item.get_ref(), &mut Vec::new(), &mut leaves);
                    leaves.retain(|l| l.path.first().is_some_and(|p| p != "name"));
                    let first_key = first_key_line(text, item.get_ref());
                    let line = header_line(text, item.span().start).min(first_key);
                    out.variants.push((line, leaves));
                }
            }
            ("model" | "system" | "plan", _) => {
                let mut path = vec![key.to_string()];
                let before = out.baseline.len();
                collect(text, v.get_ref(), &mut path, &mut out.baseline);
                if out.baseline.len() == before {
                    out.baseline.push(Leaf {
                        path,
                        line: line_of(text, k.span().start),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// The line of the `[[variant]]` header that precedes `offset` (or `offset`'s own line).
fn header_line(text: &str, offset: usize) -> usize {
    let upto = &text[..offset.min(text.len())];
    match upto.rfind("[[variant]]") {
        Some(i) if upto[i..].lines().count() <= 1 => line_of(text, i),
        _ => line_of(text, offset),
    }
}

fn first_key_line(text: &str, v: &DeValue<'_>) -> usize {
    match v {
        DeValue::Table(t) => t
            .iter()
            .map(|(k, _)| line_of(text, k.span().start))
            .min()
            .unwrap_or(usize::MAX),
        _ => usize::MAX,
    }
}

fn collect(text: &str, v: &DeValue<'_>, path: &mut Vec<String>, out: &mut Vec<Leaf>) {
    let DeValue::Table(t) = v else {
        return;
    };
    for (k, child) in t.iter() {
        path.push(k.get_ref().to_string());
        match child.get_ref() {
            DeValue::Table(_) => collect(text, child.get_ref(), path, out),
            _ => out.push(Leaf {
                path: path.clone(),
                line: line_of(text, k.span().start),
            }),
        }
        path.pop();
    }
}

/// The override table holding only `leaf` (taken from the full override `over`).
pub fn only(over: &Table, leaf: &Leaf) -> Option<Table> {
    let (last, init) = leaf.path.split_last()?;
    let mut src = over;
    for k in init {
        src = src.get(k)?.as_table()?;
    }
    let mut t = Table::new();
    t.insert(last.clone(), src.get(last)?.clone());
    for k in init.iter().rev() {
        let mut outer = Table::new();
        outer.insert(k.clone(), Value::Table(t));
        t = outer;
    }
    Some(t)
}

/// The leaf an error message points at: the one whose path holds the field of a serde
/// "unknown field `x`" message, else the last one whose key appears as `key:` in it
/// (validation errors read "invalid plan: tp: …").
pub fn blame<'a>(message: &str, leaves: &'a [Leaf]) -> Option<&'a Leaf> {
    let unknown = message
        .split("unknown field `")
        .nth(1)
        .and_then(|s| s.split('`').next());
    if let Some(field) = unknown {
        return leaves.iter().find(|l| l.path.iter().any(|p| p == field));
    }
    leaves.iter().rev().find(|l| {
        l.path.last().is_some_and(|k| {
            message.contains(&format!(" {k}:")) || message.starts_with(&format!("{k}:"))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(s: &str) -> Table {
        toml::from_str(s).expect("test TOML parses")
    }

    #[test]
    fn tables_merge_scalars_replace() {
        let mut b = table("a = 1\n[t]\nx = 1\ny = 2\n");
        merge(&mut b, &table("a = 5\n[t]\ny = 3\nz = 4\n"), "").unwrap();
        assert_eq!(b, table("a = 5\n[t]\nx = 1\ny = 3\nz = 4\n"));
    }

    #[test]
    fn arrays_merge_by_index_and_reject_missing_elements() {
        let mut b = table("[[d]]\nbw = 1\nn = 2\n[[d]]\nbw = 3\n");
        merge(&mut b, &table("[d.1]\nbw = 9\n"), "").unwrap();
        assert_eq!(b, table("[[d]]\nbw = 1\nn = 2\n[[d]]\nbw = 9\n"));
        let e = merge(&mut b, &table("[d.4]\nbw = 9\n"), "").unwrap_err();
        assert!(e.to_string().contains("d.4: no such element"), "{e}");
    }

    #[test]
    fn leaves_carry_their_lines() {
        let text = "model = \"m\"\n\n[[variant]]\nname = \"v\"\n[variant.plan]\ntp = 2\n\n[[variant]]\nname = \"w\"\nsystem.network.dims.0.size = 4\n";
        let l = lines(text);
        assert_eq!(l.variants.len(), 2);
        assert_eq!(l.variants[0].0, 3);
        assert_eq!(
            l.variants[0].1,
            vec![Leaf {
                path: vec!["plan".into(), "tp".into()],
                line: 6
            }]
        );
        assert_eq!(l.variants[1].0, 8);
        assert_eq!(l.variants[1].1[0].line, 10);
        assert_eq!(l.baseline[0].line, 1);
    }

    #[test]
    fn only_extracts_one_leaf() {
        let over = table("[plan]\ntp = 2\npp = 4\n");
        let leaf = Leaf {
            path: vec!["plan".into(), "pp".into()],
            line: 3,
        };
        assert_eq!(only(&over, &leaf), Some(table("[plan]\npp = 4\n")));
    }
}

//! `--all FILE`: every evaluated configuration streamed to a CSV or JSON-lines file as
//! the sweep runs, in grid order, SI units. Rows that do not fit in memory carry their
//! reason and no metrics; structurally invalid and redundant combinations are only counted
//! (see the summary).

use super::driver::Outcome;
use super::grid::Grid;
use super::search::{HOT_REASONS, Hit};
use crate::error::{Error, Result};
use crate::parallel::Plan;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const HEADER: [&str; 27] = [
    "index",
    "network",
    "gpus",
    "dp",
    "tp",
    "pp",
    "ep",
    "micro_batch",
    "schedule",
    "v",
    "zero",
    "recompute",
    "sequence_parallel",
    "dp_overlap",
    "tp_overlap",
    "order",
    "flash_attention",
    "cp",
    "cp_kind",
    "seq_len",
    "precision",
    "etp",
    "status",
    "iteration_time_s",
    "tokens_per_s",
    "mfu",
    "memory_B",
];

/// A streaming writer for `--all`.
pub struct Writer {
    path: PathBuf,
    json: bool,
    csv: Option<csv::Writer<BufWriter<File>>>,
    raw: Option<BufWriter<File>>,
    err: Option<String>,
}

impl Writer {
    /// Creates FILE; `.json`/`.jsonl` write JSON lines, anything else CSV.
    pub fn create(path: &Path, _grid: &Grid) -> Result<Writer> {
        let f = File::create(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let json = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("json" | "jsonl")
        );
        let mut w = Writer {
            path: path.to_path_buf(),
            json,
            csv: None,
            raw: None,
            err: None,
        };
        if json {
            w.raw = Some(BufWriter::new(f));
        } else {
            let mut c = csv::Writer::from_writer(BufWriter::new(f));
            c.write_record(HEADER).map_err(|e| w.fail(e))?;
            w.csv = Some(c);
        }
        Ok(w)
    }

    fn fail(&self, e: impl std::fmt::Display) -> Error {
        Error::File {
            path: self.path.clone(),
            message: e.to_string(),
        }
    }

    /// Writes one row; the first error is kept and reported by [`Writer::finish`].
    pub fn row(&mut self, grid: &Grid, i: u64, o: &Outcome<Hit>) {
        if self.err.is_some() {
            return;
        }
        // Redundant knob combinations repeat another row: they are not evaluated.
        let Some((plan, si)) = grid.decode(i) else {
            return;
        };
        let mut rec: Vec<String> = describe(&plan, &grid.systems[si].0, i);
        match o {
            Outcome::Kept { item, .. } => {
                let e = &item.est;
                rec.push("ok".into());
                rec.push(e.time.total.get().to_string());
                rec.push(e.metrics.tokens_per_s.to_string());
                rec.push(e.metrics.mfu.to_string());
                rec.push(e.memory.total.get().to_string());
            }
            Outcome::Dropped(r) => {
                rec.push(
                    HOT_REASONS
                        .get(*r)
                        .copied()
                        .unwrap_or("dropped")
                        .to_string(),
                );
                rec.extend(std::iter::repeat_n(String::new(), 4));
            }
        }
        let res = if self.json {
            let obj: serde_json::Map<String, serde_json::Value> = HEADER
                .iter()
                .zip(rec)
                .map(|(k, v)| (k.to_string(), json_value(&v)))
                .collect();
            self.raw.as_mut().map(|w| {
                writeln!(w, "{}", serde_json::Value::Object(obj)).map_err(|e| e.to_string())
            })
        } else {
            self.csv
                .as_mut()
                .map(|w| w.write_record(&rec).map_err(|e| e.to_string()))
        };
        if let Some(Err(e)) = res {
            self.err = Some(e);
        }
    }

    /// Flushes the file and reports the first write error, if any.
    pub fn finish(mut self) -> Result<()> {
        if let Some(e) = self.err.take() {
            return Err(self.fail(e));
        }
        if let Some(mut c) = self.csv.take() {
            c.flush().map_err(|e| self.fail(e))?;
        }
        if let Some(mut r) = self.raw.take() {
            r.flush().map_err(|e| self.fail(e))?;
        }
        Ok(())
    }
}

fn json_value(s: &str) -> serde_json::Value {
    if let Some(n) = s.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
        return serde_json::Value::Number(n);
    }
    match s {
        "true" => serde_json::Value::Bool(true),
        "false" => serde_json::Value::Bool(false),
        "" => serde_json::Value::Null,
        _ => serde_json::Value::String(s.to_string()),
    }
}

/// The plan's columns of a row.
pub fn describe(p: &Plan, network: &str, i: u64) -> Vec<String> {
    vec![
        i.to_string(),
        network.to_string(),
        p.gpus.to_string(),
        p.dp.to_string(),
        p.tp.to_string(),
        p.pp.to_string(),
        p.ep.to_string(),
        p.micro_batch.to_string(),
        schedule_name(p).to_string(),
        p.v.to_string(),
        p.zero.to_string(),
        recompute_name(p).to_string(),
        p.sp.to_string(),
        p.dp_overlap.to_string(),
        p.tp_overlap.to_string(),
        order_name(p).to_string(),
        p.flash_attention.to_string(),
        p.cp.to_string(),
        p.cp_kind.name().to_string(),
        p.seq_len.to_string(),
        precision_name(p),
        p.etp.to_string(),
    ]
}

/// The precision, with the FP8 recipe when it is FP8 ("fp8:delayed").
pub fn precision_name(p: &Plan) -> String {
    match p.precision {
        crate::compute::Precision::Fp8 => format!("fp8:{}", p.fp8_recipe.name()),
        x => x.name().to_string(),
    }
}

/// "gpipe", "1f1b", "interleaved".
pub fn schedule_name(p: &Plan) -> &'static str {
    use crate::parallel::Schedule::*;
    match p.schedule {
        Gpipe => "gpipe",
        OneFOneB => "1f1b",
        Interleaved => "interleaved",
    }
}

/// "none", "selective", "full".
pub fn recompute_name(p: &Plan) -> &'static str {
    use crate::parallel::Recompute::*;
    match p.recompute {
        None => "none",
        Selective => "selective",
        Full => "full",
    }
}

/// "tp-dp-pp", "tp-pp-dp".
pub fn order_name(p: &Plan) -> &'static str {
    use crate::parallel::Order::*;
    match p.order {
        TpDpPp => "tp-dp-pp",
        TpPpDp => "tp-pp-dp",
    }
}

//! `--all FILE`: every evaluated configuration streamed to a CSV or JSON-lines file as
//! the sweep runs, in grid order, SI units, one [`SweepAllRow`] per line (the same field
//! names as an estimate; CSV flattens the plan into `plan.*` columns). Rows that do not fit
//! in memory carry their reason and no metrics; structurally invalid and redundant
//! combinations are only counted (see the summary).

use super::driver::Outcome;
use super::grid::Grid;
use super::search::{HOT_REASONS, Hit};
use crate::error::{Error, Result};
use crate::report::PlanValue;
use crate::report::sweep::SweepAllRow;
use crate::report::values::flatten;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// A streaming writer for `--all`.
pub struct Writer {
    path: PathBuf,
    csv: Option<csv::Writer<BufWriter<File>>>,
    raw: Option<BufWriter<File>>,
    header: bool,
    err: Option<Error>,
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
        let (csv, raw) = if json {
            (None, Some(BufWriter::new(f)))
        } else {
            (Some(csv::Writer::from_writer(BufWriter::new(f))), None)
        };
        Ok(Writer {
            path: path.to_path_buf(),
            csv,
            raw,
            header: false,
            err: None,
        })
    }

    /// An I/O error keeps its kind, so a closed pipe can be told apart (success).
    fn io_fail(&self, source: std::io::Error) -> Error {
        Error::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn csv_fail(&self, e: csv::Error) -> Error {
        let message = e.to_string();
        match e.into_kind() {
            csv::ErrorKind::Io(io) => self.io_fail(io),
            _ => Error::File {
                path: self.path.clone(),
                message,
            },
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
        let mut row = SweepAllRow {
            index: i,
            network: grid.systems[si].0.clone(),
            status: "ok".into(),
            plan: PlanValue::from(&plan),
            iteration_time_s: None,
            tokens_per_s: None,
            mfu: None,
            memory_per_device_bytes: None,
            fits: false,
        };
        match o {
            Outcome::Kept { item, .. } => {
                let e = &item.est;
                row.iteration_time_s = Some(e.time.total.get());
                row.tokens_per_s = Some(e.metrics.tokens_per_s);
                row.mfu = Some(e.metrics.mfu);
                row.memory_per_device_bytes = Some(e.memory.total.get());
                row.fits = e.memory.fits;
            }
            Outcome::Dropped(r) => {
                row.status = HOT_REASONS.get(*r).copied().unwrap_or("dropped").into();
            }
        }
        if let Err(e) = self.write(&row) {
            self.err = Some(e);
        }
    }

    fn write(&mut self, row: &SweepAllRow) -> Result<()> {
        let ser = |e: serde_json::Error| Error::Internal(format!("sweep row: {e}"));
        if self.raw.is_some() {
            let line = serde_json::to_string(row).map_err(ser)?;
            let r = self.raw.as_mut().map(|w| writeln!(w, "{line}"));
            return match r {
                Some(Err(e)) => Err(self.io_fail(e)),
                _ => Ok(()),
            };
        }
        let value = serde_json::to_value(row).map_err(ser)?;
        let mut cells = Vec::new();
        flatten("", &value, &mut cells);
        let Some(w) = self.csv.as_mut() else {
            return Ok(());
        };
        let mut res = Ok(());
        if !self.header {
            self.header = true;
            res = w.write_record(cells.iter().map(|c| c.0.as_str()));
        }
        if res.is_ok() {
            res = w.write_record(cells.iter().map(|c| c.1.as_str()));
        }
        res.map_err(|e| self.csv_fail(e))
    }

    /// Flushes the file and reports the first write error, if any.
    pub fn finish(mut self) -> Result<()> {
        if let Some(e) = self.err.take() {
            return Err(e);
        }
        if let Some(mut c) = self.csv.take() {
            c.flush().map_err(|e| self.io_fail(e))?;
        }
        if let Some(mut r) = self.raw.take() {
            r.flush().map_err(|e| self.io_fail(e))?;
        }
        Ok(())
    }
}

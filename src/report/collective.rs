//! The typed result of `astrolabe collective` ([`CollectiveResult`]): one row per message
//! size with nccl-tests' columns (size in bytes, `nranks`, time, algbw, busbw), SI units in
//! JSON and CSV; the terminal table keeps one unit per column as nccl-tests does
//! (size (B), time (us), algbw and busbw (GB/s)).

use super::values::{Records, record};
use super::{Cell, Table};
use crate::error::Result;
use schemars::JsonSchema;
use serde::Serialize;

/// One collective over a range of sizes.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CollectiveResult {
    /// Schema version (see docs/schema.md).
    pub schema_version: u32,
    /// The collective ("all-reduce", …).
    pub collective: String,
    /// The network, innermost dimension first.
    pub topology: String,
    /// Ranks (NPUs) taking part.
    pub nranks: u64,
    /// Chunks the buffer is split into.
    pub chunks: u32,
    /// Phase schedule across dimensions: baseline or themis.
    pub schedule: String,
    /// One row per size.
    pub rows: Vec<CollectiveRow>,
    /// For a single size: each phase's details.
    pub phases: Vec<PhaseRow>,
    /// Remarks.
    pub notes: Vec<String>,
    /// `--explain` derivations (empty without it).
    pub explain: Vec<String>,
}

/// One message size.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CollectiveRow {
    /// Buffer per rank, bytes (nccl-tests convention).
    pub size_bytes: f64,
    /// Ranks taking part.
    pub nranks: u64,
    /// Time of the collective, seconds.
    pub time_s: f64,
    /// Algorithm bandwidth, size / time, bytes/s.
    pub algbw_bytes_per_s: f64,
    /// Bus bandwidth (nccl-tests), bytes/s.
    pub busbw_bytes_per_s: f64,
    /// The algorithm on each dimension ("d0 ring, d1 in-network").
    pub algorithm: String,
}

/// One phase of a multi-dimensional collective.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct PhaseRow {
    /// Phase number, from 1.
    pub phase: u32,
    /// Network dimension.
    pub dim: u32,
    /// The collective this phase runs.
    pub collective: String,
    /// Its algorithm.
    pub algorithm: String,
    /// Bytes per rank in this phase.
    pub size_bytes: f64,
    /// Latency term, seconds.
    pub latency_s: f64,
    /// Transfer term, seconds.
    pub transfer_s: f64,
    /// Phase time, seconds.
    pub time_s: f64,
}

impl CollectiveResult {
    /// CSV tables: `rows` (one per size, the default) and `phases`.
    pub fn tables(&self) -> Result<Vec<Records>> {
        Ok(vec![
            ("rows", self.rows.iter().map(record).collect::<Result<_>>()?),
            (
                "phases",
                self.phases.iter().map(record).collect::<Result<_>>()?,
            ),
        ])
    }

    /// The nccl-tests-style table: one unit per column.
    pub fn table(&self) -> Result<Table> {
        let mut t = Table::new(
            &self.collective,
            &[
                ("size_bytes", "size (B)"),
                ("nranks", "nranks"),
                ("time_s", "time (us)"),
                ("algbw_bytes_per_s", "algbw (GB/s)"),
                ("busbw_bytes_per_s", "busbw (GB/s)"),
                ("algorithm", "algorithm"),
            ],
        );
        for r in &self.rows {
            t.push(vec![
                Cell::q(format!("{:.0}", r.size_bytes), r.size_bytes),
                Cell::int(r.nranks),
                Cell::q(format!("{:.2}", r.time_s * 1e6), r.time_s),
                Cell::q(
                    format!("{:.2}", r.algbw_bytes_per_s / 1e9),
                    r.algbw_bytes_per_s,
                ),
                Cell::q(
                    format!("{:.2}", r.busbw_bytes_per_s / 1e9),
                    r.busbw_bytes_per_s,
                ),
                Cell::text(&r.algorithm),
            ])?;
        }
        Ok(t)
    }

    /// The phase table (single size), one unit per column.
    pub fn phase_table(&self) -> Result<Table> {
        let mut t = Table::new(
            "phases",
            &[
                ("phase", "phase"),
                ("dim", "dim"),
                ("collective", "collective"),
                ("algorithm", "algorithm"),
                ("size_bytes", "size (B)"),
                ("latency_s", "latency (us)"),
                ("transfer_s", "transfer (us)"),
                ("time_s", "time (us)"),
            ],
        );
        let us = |s: f64| Cell::q(format!("{:.2}", s * 1e6), s);
        for p in &self.phases {
            t.push(vec![
                Cell::int(p.phase.into()),
                Cell::int(p.dim.into()),
                Cell::text(&p.collective),
                Cell::text(&p.algorithm),
                Cell::q(format!("{:.0}", p.size_bytes), p.size_bytes),
                us(p.latency_s),
                us(p.transfer_s),
                us(p.time_s),
            ])?;
        }
        Ok(t)
    }
}

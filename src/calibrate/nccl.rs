//! `calibrate nccl`: fits each network dimension's latency α and bandwidth B to
//! nccl-tests logs by weighted linear least squares ([`super::fit::wls`]).
//!
//! Model (the one `collective` uses by default, `collective/nccl.rs`): a log of P ranks on
//! N nodes spans dimension 0 (P/N GPUs per node) and, when N > 1, dimension 1 (N nodes).
//! Its time at size n is linear in the unknowns α_d and θ_d = 1/B_d:
//!
//! T(n) = Σ_d s_d·α_d + n·c_{d*}·θ_{d*}
//!
//! - all-reduce, reduce-scatter, all-gather: NCCL's ring across all ranks; s_d and c_d
//!   from `collective::nccl::ring_terms` (one node: s = w(p−1), c = w(p−1)/p with w = 2
//!   for all-reduce, 1 otherwise), d* the dimension whose port is busiest (c_d·θ_d largest
//!   under the starting values);
//! - all-to-all on one node: s = 1, c = (p−1)/p (every GPU sends (p−1)/p of its buffer
//!   through its port at once); send/recv: s = 1, c = 1; broadcast: NCCL's pipelined
//!   chain, s = p − 1, c = 1.
//!
//! Each measurement is weighted by 1/T², so the fit minimises relative errors and small
//! (latency-bound) and large (bandwidth-bound) messages both count. Unknowns no log
//! constrains keep the starting (preset) value; when logs determine only a combination of
//! unknowns (one multi-node log constrains s₀α₀ + s₁α₁), the minimum-norm split is taken
//! and said.

use super::fit::{Fit, wls};
use super::nccl_log::NcclLog;
use crate::collective::Collective;
use crate::collective::calibrated::Regime;
use crate::collective::nccl::ring_terms;
use crate::error::{Error, Result};
use crate::network::{Dim, DimKind};
use crate::units::{Bandwidth, Seconds};

/// The outcome of a calibration.
#[derive(Clone, Debug)]
pub struct NcclFit {
    /// The fitted dimensions (0: inside a node; 1: across nodes, when any log spans nodes).
    pub dims: Vec<Dim>,
    /// One-sigma uncertainty of (α_d in s, B_d in B/s), per dimension; `None` when no log
    /// constrains it (the starting value was kept).
    pub stderr: Vec<(Option<f64>, Option<f64>)>,
    /// The weighted least-squares result (residuals in seconds, row order of the logs).
    pub fit: Fit,
    /// Per log: R² of its own rows and (size, measured, fitted) per row.
    pub logs: Vec<LogFit>,
    /// Remarks (identifiability).
    pub notes: Vec<String>,
}

/// One log's share of the fit.
#[derive(Clone, Debug)]
pub struct LogFit {
    /// The log.
    pub log: NcclLog,
    /// (size in bytes, measured s, fitted s) by size; fitted by the log's regimes, as
    /// `collective` computes it from the written system.
    pub rows: Vec<(f64, f64, f64)>,
    /// R² of this log's rows, weighted by 1/T² as in the fit.
    pub r2: f64,
    /// The regimes of its size ranges (`dim` 0: inside a node, 1: across nodes).
    pub regimes: Vec<Regime>,
    /// Per row, the index of its regime.
    pub regime_of_row: Vec<usize>,
}

impl LogFit {
    /// The rows sorted by |relative residual|, worst first.
    pub fn worst(&self, k: usize) -> Vec<(f64, f64)> {
        let mut v: Vec<(f64, f64)> = self
            .rows
            .iter()
            .map(|&(n, m, f)| (n, (f - m) / m))
            .collect();
        v.sort_by(|a, b| b.1.abs().total_cmp(&a.1.abs()));
        v.truncate(k);
        v
    }
}

/// (s_d per dimension, c per dimension) of one log under the model above; `start` gives
/// the bandwidths that decide the bottleneck.
fn terms(log: &NcclLog, start: &[Dim]) -> Result<([f64; 2], [f64; 2])> {
    let ppn = log.ranks / log.nodes;
    let mut s = [0.0; 2];
    let mut c = [0.0; 2];
    let p = ppn as f64;
    use Collective::*;
    match (log.op, log.nodes) {
        (AllReduce | ReduceScatter | AllGather, _) => {
            let sizes: Vec<u32> = [ppn, log.nodes].into_iter().filter(|&x| x > 1).collect();
            let dims: Vec<usize> = [(0, ppn), (1, log.nodes)]
                .into_iter()
                .filter(|&(_, x)| x > 1)
                .map(|(d, _)| d)
                .collect();
            let mut t = [(0.0, 0.0); 2];
            ring_terms(log.op, &sizes, &mut t);
            let mut worst = (0usize, -1.0);
            for (i, &d) in dims.iter().enumerate() {
                s[d] = t[i].0;
                let load = t[i].1 / start[d.min(start.len() - 1)].bandwidth.get();
                if load > worst.1 {
                    worst = (i, load);
                }
            }
            c[dims[worst.0]] = t[worst.0].1;
        }
        (AllToAll, 1) => (s[0], c[0]) = (1.0, (p - 1.0) / p),
        (SendRecv, 1) => (s[0], c[0]) = (1.0, 1.0),
        // Across nodes: the whole buffer on each dimension in turn, pipelined (one step on
        // each, `compose.rs`); the network carries (N−1)/N of an all-to-all buffer and all
        // of a send/recv message, and bounds the transfer.
        (AllToAll | SendRecv, nodes) => {
            let n = nodes as f64;
            s = [if ppn > 1 { 1.0 } else { 0.0 }, 1.0];
            c[1] = if log.op == AllToAll {
                (n - 1.0) / n
            } else {
                1.0
            };
        }
        (Broadcast, 1) => (s[0], c[0]) = (p - 1.0, 1.0),
        (op, n) => {
            return Err(Error::Unsupported(format!(
                "{}: {} across {n} nodes cannot be fitted yet (all-reduce, reduce-scatter and all-gather can; other collectives from one node)",
                log.source,
                op.name()
            )));
        }
    }
    Ok((s, c))
}

/// Fits α and B of the dimensions the logs span, starting from `start` (dimension 0 is
/// inside a node, dimension 1 across nodes; a missing one is copied from dimension 0).
/// Which dimension bounds a multi-node log's bandwidth depends on the bandwidths, so the
/// fit is repeated from its own result until the fitted values no longer change (at most
/// 8 rounds).
pub fn fit(logs: &[NcclLog], start: &[Dim]) -> Result<NcclFit> {
    let multi = logs.iter().any(|l| l.nodes > 1);
    let nd = if multi { 2 } else { 1 };
    let mut dims: Vec<Dim> = (0..nd).map(|d| start[d.min(start.len() - 1)]).collect();
    dims[0].size = logs.iter().map(|l| l.ranks / l.nodes).max().unwrap_or(1);
    if multi {
        dims[1].size = logs.iter().map(|l| l.nodes).max().unwrap_or(1);
    }
    let mut f = solve(logs, dims)?;
    for _ in 0..8 {
        let g = solve(logs, f.dims.clone())?;
        let same = g.dims == f.dims;
        f = g;
        if same {
            break;
        }
    }
    // A multi-node regime keeps the inner dimension's own bandwidth; one line through a
    // log's LL and Simple ranges understates it, so it is raised to the fastest that a
    // single-node regime measured (else a fast multi-node ring would look NVLink-bound).
    let fastest = f
        .logs
        .iter()
        .filter(|l| l.log.nodes == 1)
        .flat_map(|l| &l.regimes)
        .map(|r| r.bandwidth)
        .fold(f.dims[0].bandwidth, |a, b| a.max(b));
    if multi && fastest > f.dims[0].bandwidth {
        f.notes.push(format!(
            "dimension 0 bandwidth {} (least squares over every size) raised to {}, the fastest single-node regime, so that regimes across nodes see the NVLink bandwidth measured",
            f.dims[0].bandwidth, fastest
        ));
        f.dims[0].bandwidth = fastest;
        f.logs = log_fits(logs, &f.dims)?;
    }
    Ok(f)
}

/// One weighted least-squares solve with the bottlenecks that `dims` imply.
fn solve(logs: &[NcclLog], mut dims: Vec<Dim>) -> Result<NcclFit> {
    let (mut x, mut y, mut w) = (vec![], vec![], vec![]);
    for l in logs {
        let (s, c) = terms(l, &dims)?;
        for &(n, t) in &l.rows {
            x.push(vec![s[0], s[1], c[0] * n, c[1] * n]);
            y.push(t);
            w.push(1.0 / (t * t));
        }
    }
    // Keep only the columns some row uses.
    let used: Vec<usize> = (0..4).filter(|&j| x.iter().any(|r| r[j] != 0.0)).collect();
    let xs: Vec<Vec<f64>> = x
        .iter()
        .map(|r| used.iter().map(|&j| r[j]).collect())
        .collect();
    let f = wls(&xs, &y, &w)?;
    let mut notes = vec![];
    if f.rank < used.len() {
        notes.push(format!(
            "the logs determine {} of {} unknowns: the latency split between dimensions is the minimum-norm one; add a single-node log to separate them",
            f.rank,
            used.len()
        ));
    }
    let mut coef = [None; 4];
    let mut se = [None; 4];
    for (i, &j) in used.iter().enumerate() {
        coef[j] = Some(f.coef[i]);
        se[j] = Some(f.stderr[i]);
    }
    let mut stderr = vec![];
    for (d, dim) in dims.iter_mut().enumerate() {
        if let Some(a) = coef[d] {
            dim.latency = Seconds::new(a.max(0.0));
        }
        let mut sb = None;
        if let Some(theta) = coef[2 + d] {
            if theta.is_nan() || theta <= 0.0 {
                return Err(Error::Unsupported(format!(
                    "dimension {d}: the fitted time does not grow with size (1/B = {theta:e} s/B); are the sizes varied?"
                )));
            }
            dim.bandwidth = Bandwidth::new(1.0 / theta);
            sb = se[2 + d].map(|s| s / (theta * theta));
        }
        stderr.push((se[d], sb));
    }
    let logs = log_fits(logs, &dims)?;
    Ok(NcclFit {
        dims,
        stderr,
        fit: f,
        logs,
        notes,
    })
}

/// Each log's regimes on the fitted `dims` (`super::regimes`) and its rows as they give them.
fn log_fits(logs: &[NcclLog], dims: &[Dim]) -> Result<Vec<LogFit>> {
    logs.iter()
        .map(|l| {
            let g = super::regimes::fit(l, dims)?;
            let rows: Vec<(f64, f64, f64)> = g.rows.iter().map(|r| (r.0, r.1, r.2)).collect();
            Ok(LogFit {
                log: l.clone(),
                r2: r2_log(&rows),
                rows,
                regimes: g.regimes,
                regime_of_row: g.rows.iter().map(|r| r.3).collect(),
            })
        })
        .collect()
}

/// R² of one log's fitted times, weighted by 1/T² like the fit.
fn r2_log(rows: &[(f64, f64, f64)]) -> f64 {
    let w: Vec<f64> = rows.iter().map(|r| 1.0 / (r.1 * r.1)).collect();
    let sw: f64 = w.iter().sum();
    let mean = rows.iter().zip(&w).map(|(r, w)| w * r.1).sum::<f64>() / sw;
    let sst: f64 = rows
        .iter()
        .zip(&w)
        .map(|(r, w)| w * (r.1 - mean).powi(2))
        .sum();
    let ssr: f64 = rows
        .iter()
        .zip(&w)
        .map(|(r, w)| w * (r.2 - r.1).powi(2))
        .sum();
    if sst > 0.0 { 1.0 - ssr / sst } else { 1.0 }
}

/// Starting dimensions when no system is given: one NVSwitch-like switch per node and one
/// switch across nodes (only their kinds matter to the fit; the values are replaced).
pub fn default_start(ppn: u32, nodes: u32) -> Result<Vec<Dim>> {
    Ok(vec![
        Dim::new(
            DimKind::Switch,
            ppn.max(1),
            Bandwidth::new(100e9),
            Seconds::new(1e-6),
        )?,
        Dim::new(
            DimKind::Switch,
            nodes.max(1),
            Bandwidth::new(25e9),
            Seconds::new(5e-6),
        )?,
    ])
}

//! `astrolabe calibrate nccl|gemm|step`: flags, execution and the tables of fitted values,
//! residuals and fit quality. The fits themselves live in `crate::calibrate`.

use super::OutputArgs;
use crate::calibrate::nccl::{self, NcclFit};
use crate::calibrate::nccl_log::{self, Hints};
use crate::catalog::{self, Kind};
use crate::collective::{Collective, explain::fmt_bytes};
use crate::error::{Error, Result};
use crate::network::{CalibratedSpec, DimSpec};
use crate::report::{Cell, Report, Table};
use crate::system::SystemSpec;
use crate::units::{Bandwidth, Bytes, Seconds};
use clap::{Args, Subcommand};
use std::path::{Path, PathBuf};

/// Flags of `astrolabe calibrate`.
#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// What to fit.
    #[command(subcommand)]
    pub what: CalibrateCommand,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// The calibrations.
#[derive(Debug, Subcommand)]
pub enum CalibrateCommand {
    /// Fit each network dimension's latency and bandwidth to nccl-tests logs.
    Nccl(NcclArgs),
    /// Fit a device's GEMM efficiency to measured GEMM times (CSV: m,n,k,dtype,time).
    Gemm(super::calibrate_more::GemmArgs),
    /// Fit global efficiency factors to measured iteration times (CSV of plans and times).
    Step(super::calibrate_more::StepArgs),
}

/// Flags of `astrolabe calibrate nccl`.
#[derive(Debug, Args)]
pub struct NcclArgs {
    /// nccl-tests output files (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
    /// alltoall_perf, sendrecv_perf).
    #[arg(required = true, value_name = "LOG")]
    pub logs: Vec<PathBuf>,
    /// The system the fit starts from and whose other keys (device, collectives) the
    /// written file keeps: a built-in name or a TOML path.
    #[arg(long)]
    pub system: Option<String>,
    /// The collective, when the log does not say (all-reduce, all-gather, …).
    #[arg(long)]
    pub op: Option<String>,
    /// Number of ranks, when the log has no '# Rank' lines.
    #[arg(long)]
    pub ranks: Option<u32>,
    /// Number of nodes, when the log has no '# Rank' lines.
    #[arg(long)]
    pub nodes: Option<u32>,
    /// Write the fitted system TOML here (needs --system); use it as `--system FILE`.
    #[arg(long, value_name = "FILE.toml")]
    pub write: Option<PathBuf>,
}

/// Runs `astrolabe calibrate`.
pub fn run(a: &CalibrateArgs) -> Result<Report> {
    match &a.what {
        CalibrateCommand::Nccl(n) => run_nccl(n),
        CalibrateCommand::Gemm(g) => super::calibrate_more::run_gemm(g),
        CalibrateCommand::Step(s) => super::calibrate_more::run_step(s),
    }
}

fn run_nccl(a: &NcclArgs) -> Result<Report> {
    let hints = Hints {
        op: a.op.as_deref().map(Collective::parse).transpose()?,
        ranks: a.ranks,
        nodes: a.nodes,
    };
    let logs = a
        .logs
        .iter()
        .map(|p| nccl_log::read(p, hints))
        .collect::<Result<Vec<_>>>()?;
    let base = a.system.as_deref().map(system_spec).transpose()?;
    let start = match &base {
        Some((spec, origin)) => {
            let t = crate::network::Topology::from_specs(&spec.network.dims)
                .map_err(|e| e.context(origin.display()))?;
            let d = t.dims();
            vec![d[0], d[d.len() - 1]]
        }
        None => nccl::default_start(logs[0].ranks / logs[0].nodes, logs[0].nodes)?,
    };
    let f = nccl::fit(&logs, &start)?;
    let mut report = Report::default();
    report.tables.push(fitted_table(&f)?);
    report.tables.push(regime_table(&f)?);
    report.tables.push(quality_table(&f)?);
    report.tables.push(residual_table(&f)?);
    report.notes = f.notes.clone();
    report.notes.push(format!(
        "weighted least squares (weights 1/T²: relative errors, small and large messages both count) over {} measurements; model T = Σ_d s_d·α_d + c·n/B (collective/nccl.rs)",
        f.fit.residuals.len()
    ));
    report.notes.push(
        "each log is split into size ranges (NCCL's protocol and algorithm switches) with a regime each: the algorithm as NCCL's tuner orders its choices (the log does not say which ran), α per step and B fitted on the range; 'fitted' is what `collective` computes from the written system (calibrate/regimes.rs)"
            .into(),
    );
    if let Some(path) = &a.write {
        let (spec, _) = base.ok_or_else(|| {
            Error::input(
                "--write",
                "needs --system (the preset whose device and other keys the fitted file keeps)",
            )
        })?;
        report.notes.extend(write_system(spec, &f, path)?);
        report.notes.push(format!(
            "fitted system written to {} (use it as --system {})",
            path.display(),
            path.display()
        ));
    }
    Ok(report)
}

/// The system spec (as written) of a built-in name or path.
pub(super) fn system_spec(name: &str) -> Result<(SystemSpec, PathBuf)> {
    let (text, origin) = catalog::read(Kind::System, name)?;
    let spec: SystemSpec = catalog::parse_toml(&text, &origin)?;
    Ok((spec, origin))
}

/// Writes `spec` to `path` after `edit`, as TOML the other commands read.
pub(super) fn write_spec(
    mut spec: SystemSpec,
    path: &Path,
    edit: impl FnOnce(&mut SystemSpec),
) -> Result<()> {
    edit(&mut spec);
    spec.name = format!("{}-fitted", spec.name.trim_end_matches("-fitted"));
    let text =
        toml::to_string_pretty(&spec).map_err(|e| Error::Internal(format!("writing TOML: {e}")))?;
    std::fs::write(path, format!("# Written by `astrolabe calibrate`.\n{text}")).map_err(|source| {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    })
}

/// Writes the fitted α and B of each dimension and every log's regimes (on the outermost
/// dimension the log spans); of two logs of one collective on the same group only the
/// first's regimes are written, which is returned as a note.
fn write_system(spec: SystemSpec, f: &NcclFit, path: &Path) -> Result<Vec<String>> {
    let mut notes = vec![];
    write_spec(spec, path, |s| {
        let last = s.network.dims.len() - 1;
        let index = |d: usize| if d == 0 { 0 } else { last };
        for (d, dim) in f.dims.iter().enumerate() {
            let spec: &mut DimSpec = &mut s.network.dims[index(d)];
            spec.bandwidth = Bandwidth::new(six(dim.bandwidth.get()));
            spec.latency = Seconds::new(six(dim.latency.get()));
            spec.calibrated.clear();
        }
        for l in &f.logs {
            let Some(r0) = l.regimes.first() else {
                continue;
            };
            let spec: &mut DimSpec = &mut s.network.dims[index(r0.dim)];
            let op = r0.op.name();
            if spec
                .calibrated
                .iter()
                .any(|c| c.collective == op && c.group == r0.group)
            {
                notes.push(format!(
                    "{}: a {op} on a group of {} was calibrated by an earlier log; its regimes are not written",
                    l.log.source, r0.group
                ));
                continue;
            }
            spec.calibrated.extend(l.regimes.iter().map(|r| {
                let mut c = CalibratedSpec::from(r);
                c.latency = Seconds::new(six(r.latency.get()));
                c.bandwidth = Bandwidth::new(six(r.bandwidth.get()));
                c
            }));
        }
    })?;
    Ok(notes)
}

/// `v` to six significant digits, so the file reads "199.999 GB/s" (the fit's own
/// uncertainty is far larger than the 5·10⁻⁶ this changes).
fn six(v: f64) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let e = 5 - v.abs().log10().floor() as i32;
    let k = 10f64.powi(e.abs());
    if e >= 0 {
        (v * k).round() / k
    } else {
        (v / k).round() * k
    }
}

fn regime_table(f: &NcclFit) -> Result<Table> {
    let mut t = Table::new(
        "regimes (written to the system; `collective` runs them)",
        &[
            ("log", "log"),
            ("collective", "collective"),
            ("dim", "dim"),
            ("group", "group"),
            ("from_B", "from"),
            ("algorithm", "algorithm"),
            ("protocol", "protocol"),
            ("latency_s", "α"),
            ("bandwidth_Bps", "B"),
        ],
    );
    for (i, l) in f.logs.iter().enumerate() {
        for r in &l.regimes {
            t.push(vec![
                Cell::int(i as u64 + 1),
                Cell::text(r.op.name()),
                Cell::int(r.dim as u64),
                Cell::int(r.group as u64),
                Cell::q(fmt_bytes(r.from), r.from.get()),
                Cell::text(r.algorithm.name()),
                Cell::text(r.protocol.name()),
                Cell::q(r.latency, r.latency.get()),
                Cell::q(r.bandwidth, r.bandwidth.get()),
            ])?;
        }
    }
    Ok(t)
}

fn fitted_table(f: &NcclFit) -> Result<Table> {
    let mut t = Table::new(
        "fitted network",
        &[
            ("dim", "dim"),
            ("size", "size"),
            ("latency_s", "α"),
            ("latency_sigma_s", "± α"),
            ("bandwidth_Bps", "B"),
            ("bandwidth_sigma_Bps", "± B"),
        ],
    );
    for (d, (dim, (sa, sb))) in f.dims.iter().zip(&f.stderr).enumerate() {
        let q = |v: Option<f64>, mk: fn(f64) -> String| match v {
            Some(v) => Cell::q(mk(v), v),
            None => Cell::text("kept"),
        };
        t.push(vec![
            Cell::int(d as u64),
            Cell::int(dim.size as u64),
            Cell::q(dim.latency, dim.latency.get()),
            q(*sa, |v| Seconds::new(v).to_string()),
            Cell::q(dim.bandwidth, dim.bandwidth.get()),
            q(*sb, |v| Bandwidth::new(v).to_string()),
        ])?;
    }
    Ok(t)
}

fn quality_table(f: &NcclFit) -> Result<Table> {
    let mut t = Table::new(
        "fit quality",
        &[
            ("log", "log"),
            ("collective", "collective"),
            ("ranks", "ranks"),
            ("nodes", "nodes"),
            ("rows", "rows"),
            ("r2", "R²"),
            ("worst", "worst sizes (residual)"),
        ],
    );
    for l in &f.logs {
        let worst: Vec<String> = l
            .worst(3)
            .iter()
            .map(|(n, r)| format!("{} ({:+.1}%)", fmt_bytes(Bytes::new(*n)), r * 100.0))
            .collect();
        t.push(vec![
            Cell::text(l.log.source.clone()),
            Cell::text(l.log.op.name()),
            Cell::int(l.log.ranks as u64),
            Cell::int(l.log.nodes as u64),
            Cell::int(l.rows.len() as u64),
            Cell::num((l.r2 * 1e4).round() / 1e4),
            Cell::text(worst.join(", ")),
        ])?;
    }
    Ok(t)
}

fn residual_table(f: &NcclFit) -> Result<Table> {
    let mut t = Table::new(
        "residuals",
        &[
            ("log", "log"),
            ("size_B", "size"),
            ("measured_s", "measured"),
            ("fitted_s", "fitted"),
            ("residual", "residual %"),
            ("algorithm", "algorithm"),
            ("protocol", "protocol"),
        ],
    );
    for (i, l) in f.logs.iter().enumerate() {
        for (&(n, m, p), &k) in l.rows.iter().zip(&l.regime_of_row) {
            let r = &l.regimes[k];
            t.push(vec![
                Cell::int(i as u64 + 1),
                Cell::q(fmt_bytes(Bytes::new(n)), n),
                Cell::q(Seconds::new(m), m),
                Cell::q(Seconds::new(p), p),
                Cell::q(format!("{:+.1}", (p - m) / m * 100.0), (p - m) / m),
                Cell::text(r.algorithm.name()),
                Cell::text(r.protocol.name()),
            ])?;
        }
    }
    Ok(t)
}

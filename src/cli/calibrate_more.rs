//! `astrolabe calibrate step` and `calibrate gemm`: CSV input, tables of fitted values with
//! uncertainties and residuals, and the TOML they write.

use super::calibrate::{system_spec, write_spec};
use crate::calibrate::gemm::{self, GemmPoint};
use crate::calibrate::step::{self, StepPoint};
use crate::catalog::{self, Kind};
use crate::compute::{DeviceSpec, Precision};
use crate::error::{Error, Result};
use crate::estimate;
use crate::parallel::PlanSpec;
use crate::report::{Cell, Report, Table};
use crate::units::{Seconds, parse_seconds};
use clap::Args;
use std::path::{Path, PathBuf};

/// Flags of `astrolabe calibrate step`.
#[derive(Debug, Args)]
pub struct StepArgs {
    /// CSV with a header: `model,system,time` (time with a unit, e.g. "60.1 s"), an
    /// optional `label`, and any plan keys (`gpus,tp,pp,micro_batch,global_batch,
    /// virtual_stages,recompute,sequence_parallel,precision,optimizer,…`).
    #[arg(value_name = "CSV")]
    pub csv: PathBuf,
    /// Fit the compute factor only (communication as modelled).
    #[arg(long)]
    pub compute_only: bool,
    /// Write the first row's system with the fitted `[calibration]` here.
    #[arg(long, value_name = "FILE.toml")]
    pub write: Option<PathBuf>,
}

/// Flags of `astrolabe calibrate gemm`.
#[derive(Debug, Args)]
pub struct GemmArgs {
    /// CSV with a header `m,n,k,dtype,time` (time with a unit, e.g. "1.25 ms").
    #[arg(value_name = "CSV")]
    pub csv: PathBuf,
    /// The device measured: a built-in name or a TOML path.
    #[arg(long)]
    pub device: String,
    /// Write the device with the fitted efficiencies here.
    #[arg(long, value_name = "FILE.toml")]
    pub write: Option<PathBuf>,
}

fn records(path: &Path) -> Result<(csv::StringRecord, Vec<csv::StringRecord>)> {
    let file_err = |m: String| Error::File {
        path: path.to_path_buf(),
        message: m,
    };
    let mut r = csv::ReaderBuilder::new()
        .comment(Some(b'#'))
        .trim(csv::Trim::All)
        .from_path(path)
        .map_err(|e| file_err(e.to_string()))?;
    let head = r.headers().map_err(|e| file_err(e.to_string()))?.clone();
    let rows = r
        .records()
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| file_err(e.to_string()))?;
    Ok((head, rows))
}

fn column(head: &csv::StringRecord, name: &str, path: &Path) -> Result<usize> {
    head.iter()
        .position(|h| h == name)
        .ok_or_else(|| Error::File {
            path: path.to_path_buf(),
            message: format!("no '{name}' column in the header"),
        })
}

/// The plan keys of one row as a TOML table, parsed into a [`PlanSpec`] (so names and
/// values are checked as in a scenario file).
fn plan_of(
    head: &csv::StringRecord,
    rec: &csv::StringRecord,
    skip: &[usize],
    origin: &Path,
) -> Result<PlanSpec> {
    let mut toml = String::new();
    for (i, (k, v)) in head.iter().zip(rec.iter()).enumerate() {
        if skip.contains(&i) || v.is_empty() {
            continue;
        }
        let bare = v.parse::<i64>().is_ok() || v == "true" || v == "false";
        toml += &if bare {
            format!("{k} = {v}\n")
        } else {
            format!("{k} = {v:?}\n")
        };
    }
    catalog::parse_toml(&toml, origin)
}

/// Runs `astrolabe calibrate step`.
pub fn run_step(a: &StepArgs) -> Result<Report> {
    let (head, recs) = records(&a.csv)?;
    let (cm, cs, ct) = (
        column(&head, "model", &a.csv)?,
        column(&head, "system", &a.csv)?,
        column(&head, "time", &a.csv)?,
    );
    let cl = head.iter().position(|h| h == "label");
    let skip: Vec<usize> = [Some(cm), Some(cs), Some(ct), cl]
        .into_iter()
        .flatten()
        .collect();
    let mut points = vec![];
    for (i, r) in recs.iter().enumerate() {
        let origin = PathBuf::from(format!("{} row {}", a.csv.display(), i + 2));
        let model = catalog::model(&r[cm])?;
        let base = catalog::system(&r[cs])?;
        let spec = plan_of(&head, r, &skip, &origin)?;
        let system = match spec.gpus {
            Some(g) => base.with_gpus(g)?,
            None => base,
        };
        let plan =
            estimate::plan(&model, &system, &spec).map_err(|e| e.context(origin.display()))?;
        let measured = parse_seconds("time", &r[ct]).map_err(|e| e.context(origin.display()))?;
        points.push(StepPoint {
            label: cl.map_or_else(|| format!("row {}", i + 2), |c| r[c].to_string()),
            model,
            system,
            plan,
            measured: measured.get(),
        });
    }
    let f = step::fit(&points, !a.compute_only)?;
    let mut report = Report::default();
    let mut t = Table::new(
        "fitted factors",
        &[("factor", "factor"), ("value", "time ×"), ("sigma", "±")],
    );
    t.push(vec![
        Cell::text("compute"),
        Cell::num(f.factors.compute),
        Cell::num(f.sigma.0),
    ])?;
    let comm_sigma = f.sigma.1.map_or(Cell::text("not fitted"), Cell::num);
    t.push(vec![
        Cell::text("communication"),
        Cell::num(f.factors.communication),
        comm_sigma,
    ])?;
    report.tables.push(t);
    let mut r = Table::new(
        "measurements",
        &[
            ("label", "label"),
            ("measured_s", "measured"),
            ("fitted_s", "fitted"),
            ("residual", "residual %"),
            ("loo", "leave-one-out %"),
        ],
    );
    for (l, m, p, loo) in &f.rows {
        r.push(vec![
            Cell::text(l.clone()),
            Cell::q(Seconds::new(*m), *m),
            Cell::q(Seconds::new(*p), *p),
            Cell::q(format!("{:+.2}", (p - m) / m * 100.0), (p - m) / m),
            Cell::q(format!("{:+.2}", loo * 100.0), *loo),
        ])?;
    }
    report.tables.push(r);
    report.notes.push("T ≈ a·compute + b·exposed communication, weighted least squares (1/T²), iterated about the factors (calibrate/step.rs)".into());
    if let Some(path) = &a.write {
        let first = recs
            .first()
            .ok_or_else(|| Error::input("--write", "the CSV has no rows"))?;
        let (spec, _) = system_spec(&first[cs])?;
        write_spec(spec, path, |s| {
            s.calibration.compute *= f.factors.compute;
            s.calibration.communication *= f.factors.communication;
        })?;
        report.notes.push(format!(
            "system with [calibration] written to {}",
            path.display()
        ));
    }
    Ok(report)
}

/// Runs `astrolabe calibrate gemm`.
pub fn run_gemm(a: &GemmArgs) -> Result<Report> {
    let (head, recs) = records(&a.csv)?;
    let c = |n: &str| column(&head, n, &a.csv);
    let (cm, cn, ck, cd, ct) = (c("m")?, c("n")?, c("k")?, c("dtype")?, c("time")?);
    let device = catalog::device(&a.device)?;
    let mut pts = vec![];
    for (i, r) in recs.iter().enumerate() {
        let at = format!("{} row {}", a.csv.display(), i + 2);
        let num = |c: usize| -> Result<f64> {
            r[c].parse::<f64>()
                .ok()
                .filter(|v| *v >= 1.0)
                .ok_or_else(|| Error::input(&at, format!("'{}' is not a dimension ≥ 1", &r[c])))
        };
        let precision = Precision::parse(&r[cd]).map_err(|e| e.context(&at))?;
        pts.push(GemmPoint {
            m: num(cm)?,
            n: num(cn)?,
            k: num(ck)?,
            peak: device.peak(precision).map_err(|e| e.context(&at))?.get(),
            time: parse_seconds("time", &r[ct])
                .map_err(|e| e.context(&at))?
                .get(),
        });
    }
    let f = gemm::fit(&device, &pts)?;
    let mut report = Report::default();
    let mut t = Table::new(
        "fitted GEMM efficiency",
        &[
            ("parameter", "parameter"),
            ("value", "value"),
            ("sigma", "±"),
        ],
    );
    t.push(vec![
        Cell::text("gemm (plateau efficiency)"),
        Cell::num(f.gemm),
        Cell::num(f.sigma[0]),
    ])?;
    t.push(vec![
        Cell::text("gemm_k_overhead (K₀)"),
        Cell::num(f.k0),
        Cell::num(f.sigma[1]),
    ])?;
    t.push(vec![
        Cell::text("kernel_overhead"),
        Cell::q(Seconds::new(f.overhead), f.overhead),
        Cell::q(Seconds::new(f.sigma[2]), f.sigma[2]),
    ])?;
    report.tables.push(t);
    let mut r = Table::new(
        "residuals",
        &[
            ("m", "m"),
            ("n", "n"),
            ("k", "k"),
            ("measured_s", "measured"),
            ("fitted_s", "fitted"),
            ("residual", "residual %"),
        ],
    );
    for (p, fit) in pts.iter().zip(&f.fitted) {
        r.push(vec![
            Cell::int(p.m as u64),
            Cell::int(p.n as u64),
            Cell::int(p.k as u64),
            Cell::q(Seconds::new(p.time), p.time),
            Cell::q(Seconds::new(*fit), *fit),
            Cell::q(
                format!("{:+.1}", (fit - p.time) / p.time * 100.0),
                (fit - p.time) / p.time,
            ),
        ])?;
    }
    report.tables.push(r);
    report.notes.push(format!("R² = {:.4} (weights 1/t²); model t = 2mnk·(k + K₀)/(k·peak·e·q) + o (compute.rs gemm_time)", f.r2));
    if let Some(path) = &a.write {
        let (text, origin) = catalog::read(Kind::Device, &a.device)?;
        let mut spec: DeviceSpec = catalog::parse_toml(&text, &origin)?;
        spec.name = format!("{}-fitted", spec.name);
        spec.efficiency.gemm = f.gemm.min(1.0);
        spec.efficiency.gemm_k_overhead = f.k0.round().max(0.0) as u32;
        spec.efficiency.kernel_overhead = Seconds::new(f.overhead.max(0.0));
        let worst = written_error(&spec, &pts)?;
        let out = toml::to_string_pretty(&spec).map_err(|e| Error::Internal(e.to_string()))?;
        std::fs::write(
            path,
            format!("# Written by `astrolabe calibrate gemm`.\n{out}"),
        )
        .map_err(|source| Error::Io {
            path: path.clone(),
            source,
        })?;
        report
            .notes
            .push(format!("device written to {}", path.display()));
        // Rounded up so the claim holds.
        report.notes.push(format!(
            "the written device reproduces the measurements within {:.3}% (its gemm_k_overhead is a whole number, gemm at most 1, kernel_overhead at least 0)",
            (worst * 1e5).ceil() / 1e3
        ));
    }
    Ok(report)
}

/// Largest relative error of the device `spec` (as written) over the measured GEMMs.
fn written_error(spec: &DeviceSpec, pts: &[GemmPoint]) -> Result<f64> {
    let dev = crate::compute::Device::from_spec(spec.clone())?;
    Ok(pts
        .iter()
        .map(|p| {
            let t = dev
                .gemm_time(crate::units::FlopRate::new(p.peak), p.m, p.n, p.k, 1.0)
                .get();
            (t - p.time).abs() / p.time
        })
        .fold(0.0, f64::max))
}

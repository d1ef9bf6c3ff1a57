//! `calibrate step`: fits global time factors to measured iteration times.
//!
//! An estimate splits an iteration into compute C (forward, backward, recomputation,
//! optimizer and the pipeline bubble, which is idle compute time) and exposed
//! communication E: T = C + E. With a compute factor a and a communication factor b
//! (`[calibration]` of a system, [`CalibrationSpec`]) the model is
//!
//! T_i ≈ a·C_i + b·E_i,
//!
//! linear in (a, b), fitted by weighted least squares with weights 1/T_i² (relative
//! errors). Exposed communication depends on a and b through the overlap windows, so the
//! fit is repeated about the current factors (C_i, E_i re-evaluated with them, multipliers
//! solved, factors updated) until the multipliers are 1 within 1e-9 (Gauss-Newton on a
//! model that is linear up to the overlap clamp). The communication factor is fitted only
//! from three measurements up (with as many measurements as factors the fit is exact: no
//! uncertainty, no leave-one-out check, and two rows that differ mainly in communication
//! give wild factors); otherwise, or when asked, only the compute factor is fitted:
//! T_i ≈ a·C_i + E_i.
//!
//! Each factor is printed with its one-sigma uncertainty (zero when the fit is exact), and
//! every measurement with its leave-one-out error: the fit repeated without it, at the final
//! linearisation, predicts it.

use super::fit::wls;
use crate::error::{Error, Result};
use crate::estimate::{self, Estimate};
use crate::model::Model;
use crate::parallel::Plan;
use crate::system::{CalibrationSpec, System};

/// One measured iteration: what ran and how long it took.
#[derive(Clone, Debug)]
pub struct StepPoint {
    /// A name for tables.
    pub label: String,
    /// The model.
    pub model: Model,
    /// The system (uncalibrated, or with earlier factors that the new ones multiply).
    pub system: System,
    /// The plan.
    pub plan: Plan,
    /// Measured iteration time, seconds.
    pub measured: f64,
}

/// The fitted factors and how well they explain the measurements.
#[derive(Clone, Debug)]
pub struct StepFit {
    /// The factors (multiplying whatever the systems already had).
    pub factors: CalibrationSpec,
    /// One-sigma uncertainty of (compute, communication); communication `None` when it was
    /// not fitted.
    pub sigma: (f64, Option<f64>),
    /// Per point: (label, measured s, fitted s, leave-one-out relative error).
    pub rows: Vec<(String, f64, f64, f64)>,
}

fn split(e: &Estimate) -> (f64, f64) {
    let t = &e.time;
    let c = t.forward + t.backward + t.recompute + t.optimizer + t.bubble;
    (c.get(), t.total.get() - c.get())
}

fn evaluate(p: &StepPoint, cal: CalibrationSpec) -> Result<(f64, f64)> {
    let s = p.system.calibrated(cal)?;
    Ok(split(&estimate::evaluate(&p.model, &s, &p.plan)?))
}

/// Design rows and targets about the current factors: x = [C, E] (two factors) or [C] with
/// target T − E (compute only).
fn design(ce: &[(f64, f64)], y: &[f64], two: bool) -> (Vec<Vec<f64>>, Vec<f64>) {
    ce.iter()
        .zip(y)
        .map(|(&(c, e), &t)| {
            if two {
                (vec![c, e], t)
            } else {
                (vec![c], t - e)
            }
        })
        .unzip()
}

/// Fits the factors; `communication` asks for the communication factor too (used only
/// with at least three points).
pub fn fit(points: &[StepPoint], communication: bool) -> Result<StepFit> {
    if points.is_empty() {
        return Err(Error::input(
            "calibrate step",
            "needs at least one measured step",
        ));
    }
    let two = communication && points.len() >= 3;
    let y: Vec<f64> = points.iter().map(|p| p.measured).collect();
    let w: Vec<f64> = y.iter().map(|t| 1.0 / (t * t)).collect();
    let mut cal = CalibrationSpec::default();
    let mut ce = vec![];
    let mut last = None;
    for _ in 0..50 {
        ce = points
            .iter()
            .map(|p| evaluate(p, cal))
            .collect::<Result<Vec<_>>>()?;
        let (x, t) = design(&ce, &y, two);
        let f = wls(&x, &t, &w)?;
        let da = f.coef[0];
        let db = if two { f.coef[1] } else { 1.0 };
        if !(da > 0.0 && db > 0.0) {
            return Err(Error::Unsupported(format!(
                "the measurements imply a non-positive factor (compute ×{da:.3}, communication ×{db:.3}); fit the compute factor alone (--compute-only) or add measurements"
            )));
        }
        cal.compute *= da;
        cal.communication *= db;
        let done = (da - 1.0).abs() < 1e-9 && (db - 1.0).abs() < 1e-9;
        last = Some((f, cal));
        if done {
            break;
        }
    }
    let (f, _) = last.ok_or_else(|| Error::Internal("no iteration".into()))?;
    let sigma = (
        f.stderr[0] * cal.compute,
        two.then(|| f.stderr[1] * cal.communication),
    );
    let (x, t) = design(&ce, &y, two);
    let mut rows = vec![];
    for (i, p) in points.iter().enumerate() {
        let fitted = ce[i].0 + ce[i].1;
        rows.push((
            p.label.clone(),
            p.measured,
            fitted,
            loo(&x, &t, &w, &ce, i, two)?,
        ));
    }
    Ok(StepFit {
        factors: cal,
        sigma,
        rows,
    })
}

/// Relative error of point `i` predicted by the fit without it (NaN-free: with a single
/// point there is nothing left to fit, and the error is reported as 0).
fn loo(
    x: &[Vec<f64>],
    t: &[f64],
    w: &[f64],
    ce: &[(f64, f64)],
    i: usize,
    two: bool,
) -> Result<f64> {
    if x.len() < 2 {
        return Ok(0.0);
    }
    let keep = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, &a)| a)
            .collect()
    };
    let xs: Vec<Vec<f64>> = x
        .iter()
        .enumerate()
        .filter(|&(j, _)| j != i)
        .map(|(_, r)| r.clone())
        .collect();
    let f = wls(&xs, &keep(t), &keep(w))?;
    let (c, e) = ce[i];
    let pred = if two {
        f.coef[0] * c + f.coef[1] * e
    } else {
        f.coef[0] * c + e
    };
    let measured = if two { t[i] } else { t[i] + e };
    Ok((pred - measured) / measured)
}

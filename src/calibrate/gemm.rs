//! `calibrate gemm`: fits a device's GEMM efficiency parameters to measured GEMM times.
//!
//! The device model (`compute.rs`, `Device::gemm_time`): an M×N×K GEMM at peak P takes
//! t = 2MNK / (P·e·q·K/(K + K₀)) + o, with e the plateau efficiency, q the tile/wave
//! quantisation factor (fixed by the device's tile and compute units), K₀ the per-tile
//! fixed cost in units of K and o the kernel overhead. With u = 1/e and v = K₀/e it is
//! linear:
//!
//! t = (2MNK/(P·q))·u + (2MN/(P·q))·v + o,
//!
//! fitted by weighted least squares (weights 1/t², relative errors) and mapped back:
//! e = 1/u, K₀ = v/u (uncertainties propagated to first order).

use super::fit::wls;
use crate::compute::Device;
use crate::error::{Error, Result};

/// One measured GEMM.
#[derive(Clone, Copy, Debug)]
pub struct GemmPoint {
    /// Rows of the output.
    pub m: f64,
    /// Columns of the output.
    pub n: f64,
    /// Inner dimension.
    pub k: f64,
    /// Matrix peak of the datatype, FLOP/s.
    pub peak: f64,
    /// Measured time, seconds.
    pub time: f64,
}

/// Fitted GEMM parameters.
#[derive(Clone, Debug)]
pub struct GemmFit {
    /// Plateau efficiency e.
    pub gemm: f64,
    /// K₀.
    pub k0: f64,
    /// Kernel overhead o, seconds.
    pub overhead: f64,
    /// One-sigma uncertainties of (e, K₀, o).
    pub sigma: [f64; 3],
    /// Weighted R².
    pub r2: f64,
    /// Fitted time per point, seconds.
    pub fitted: Vec<f64>,
}

/// Tile/wave quantisation factor q of the device for an M×N GEMM.
fn quantisation(d: &Device, p: &GemmPoint) -> f64 {
    let e = &d.spec.efficiency;
    let k0 = e.gemm_k_overhead as f64;
    d.gemm_efficiency(p.m, p.n, p.k, 1.0) / (e.gemm * p.k / (p.k + k0))
}

/// Fits (e, K₀, o) of `device` to `points` (at least 3, with varied K).
pub fn fit(device: &Device, points: &[GemmPoint]) -> Result<GemmFit> {
    if points.len() < 3 {
        return Err(Error::input(
            "calibrate gemm",
            format!("needs at least 3 measured GEMMs, got {}", points.len()),
        ));
    }
    let x: Vec<Vec<f64>> = points
        .iter()
        .map(|p| {
            let base = 2.0 * p.m * p.n / (p.peak * quantisation(device, p));
            vec![base * p.k, base, 1.0]
        })
        .collect();
    let y: Vec<f64> = points.iter().map(|p| p.time).collect();
    let w: Vec<f64> = y.iter().map(|t| 1.0 / (t * t)).collect();
    let f = wls(&x, &y, &w)?;
    let (u, v, o) = (f.coef[0], f.coef[1], f.coef[2]);
    if u.is_nan() || u <= 0.0 {
        return Err(Error::Unsupported(
            "the fitted GEMM time does not grow with the work; are M, N, K varied?".into(),
        ));
    }
    let fitted = x.iter().map(|r| r[0] * u + r[1] * v + r[2] * o).collect();
    Ok(GemmFit {
        gemm: 1.0 / u,
        k0: v / u,
        overhead: o,
        sigma: [
            f.stderr[0] / (u * u),
            ((f.stderr[1] / u).powi(2) + (v * f.stderr[0] / (u * u)).powi(2)).sqrt(),
            f.stderr[2],
        ],
        r2: f.r2,
        fitted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn recovers_the_parameters_of_synthetic_gemms() {
        // Times made by the device model with e = 0.7, K₀ = 200, o = 6 µs (written out:
        // t = 2MNK/(P·0.7·q·K/(K + 200)) + 6 µs); the fit recovers them.
        let d = crate::catalog::device("a100-80gb").unwrap();
        let peak = 312e12;
        let mut pts = vec![];
        for &(m, n, k) in &[
            (4096.0, 4096.0, 4096.0),
            (8192.0, 1024.0, 512.0),
            (2048.0, 2048.0, 128.0),
            (1024.0, 12288.0, 1536.0),
            (512.0, 512.0, 64.0),
        ] {
            let p = GemmPoint {
                m,
                n,
                k,
                peak,
                time: 0.0,
            };
            let q = quantisation(&d, &p);
            let time = 2.0 * m * n * k / (peak * 0.7 * q * k / (k + 200.0)) + 6e-6;
            pts.push(GemmPoint { time, ..p });
        }
        let f = fit(&d, &pts).unwrap();
        assert_relative_eq!(f.gemm, 0.7, max_relative = 1e-6);
        assert_relative_eq!(f.k0, 200.0, max_relative = 1e-6);
        assert_relative_eq!(f.overhead, 6e-6, max_relative = 1e-6);
    }
}

//! Weighted linear least squares with nalgebra, and the quality numbers every fit prints.
//!
//! Minimises Σ_i w_i (y_i − x_iᵀβ)² by the singular value decomposition of
//! W^{1/2}·X·S (S scales each column to unit norm, so seconds-per-step and
//! seconds-per-byte columns are solved on equal footing). Singular values below
//! 1e-10 × the largest are dropped: the solution is then the minimum-norm one and `rank`
//! says how many combinations the data determine. Uncertainties are the square roots of
//! the diagonal of σ²·(XᵀWX)⁺ with σ² = Σ w r² / (m − k) (the usual WLS covariance,
//! e.g. Seber & Lee, "Linear Regression Analysis", 2003, §3.10). R² is the weighted
//! coefficient of determination 1 − Σ w r² / Σ w (y − ȳ_w)².

use crate::error::{Error, Result};
use nalgebra::{DMatrix, DVector};

/// The result of one weighted least-squares fit.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// Fitted coefficients β, one per column of X.
    pub coef: Vec<f64>,
    /// One-sigma uncertainty of each coefficient (0 when m = k).
    pub stderr: Vec<f64>,
    /// Weighted R² (1 when the data have no spread).
    pub r2: f64,
    /// y − Xβ, one per row.
    pub residuals: Vec<f64>,
    /// Number of independent combinations of the coefficients the data determine.
    pub rank: usize,
}

/// Fits y ≈ Xβ with weights w (rows of `x` all of the same length, w > 0).
pub fn wls(x: &[Vec<f64>], y: &[f64], w: &[f64]) -> Result<Fit> {
    let m = x.len();
    let k = x.first().map_or(0, Vec::len);
    if m == 0 || k == 0 || y.len() != m || w.len() != m {
        return Err(Error::input(
            "fit",
            "needs at least one measurement and one unknown",
        ));
    }
    if x.iter().any(|r| r.len() != k) || w.iter().any(|&v| !(v > 0.0 && v.is_finite())) {
        return Err(Error::Internal("wls: ragged design or bad weight".into()));
    }
    let mut a = DMatrix::from_fn(m, k, |i, j| x[i][j] * w[i].sqrt());
    let b = DVector::from_fn(m, |i, _| y[i] * w[i].sqrt());
    let scale: Vec<f64> = (0..k)
        .map(|j| {
            let n = a.column(j).norm();
            if n > 0.0 { n } else { 1.0 }
        })
        .collect();
    for (j, s) in scale.iter().enumerate() {
        a.column_mut(j).scale_mut(1.0 / s);
    }
    let svd = a.svd(true, true);
    let smax = svd.singular_values.max();
    let tol = smax * 1e-10;
    let rank = svd.singular_values.iter().filter(|&&s| s > tol).count();
    let z = svd
        .solve(&b, tol)
        .map_err(|e| Error::Internal(format!("least squares: {e}")))?;
    let coef: Vec<f64> = (0..k).map(|j| z[j] / scale[j]).collect();
    let residuals: Vec<f64> = (0..m)
        .map(|i| y[i] - x[i].iter().zip(&coef).map(|(a, c)| a * c).sum::<f64>())
        .collect();
    let ssr: f64 = residuals.iter().zip(w).map(|(r, w)| w * r * r).sum();
    let sw: f64 = w.iter().sum();
    let mean = y.iter().zip(w).map(|(y, w)| w * y).sum::<f64>() / sw;
    let sst: f64 = y.iter().zip(w).map(|(y, w)| w * (y - mean).powi(2)).sum();
    let r2 = if sst > 0.0 { 1.0 - ssr / sst } else { 1.0 };
    let sigma2 = if m > rank {
        ssr / (m - rank) as f64
    } else {
        0.0
    };
    let v_t = svd
        .v_t
        .as_ref()
        .ok_or_else(|| Error::Internal("svd without V".into()))?;
    let stderr = (0..k)
        .map(|j| {
            let var: f64 = (0..svd.singular_values.len())
                .filter(|&s| svd.singular_values[s] > tol)
                .map(|s| (v_t[(s, j)] / svd.singular_values[s]).powi(2))
                .sum();
            (sigma2 * var).sqrt() / scale[j]
        })
        .collect();
    Ok(Fit {
        coef,
        stderr,
        r2,
        residuals,
        rank,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn recovers_an_exact_line_and_its_r2() {
        // y = 3 + 2x on x = 0..4: exact, R² = 1, residuals 0.
        let x: Vec<Vec<f64>> = (0..5).map(|i| vec![1.0, i as f64]).collect();
        let y: Vec<f64> = (0..5).map(|i| 3.0 + 2.0 * i as f64).collect();
        let f = wls(&x, &y, &[1.0; 5]).unwrap();
        assert_relative_eq!(f.coef[0], 3.0, max_relative = 1e-12);
        assert_relative_eq!(f.coef[1], 2.0, max_relative = 1e-12);
        assert_relative_eq!(f.r2, 1.0, max_relative = 1e-12);
        assert_eq!(f.rank, 2);
    }

    #[test]
    fn hand_worked_noisy_line() {
        // x = 0, 1, 2; y = 1, 2, 4 (unit weights): slope = Sxy/Sxx = 3/2, intercept =
        // ȳ − slope·x̄ = 7/3 − 3/2 = 5/6; residuals 1/6, −1/3, 1/6; SSR = 1/6, SST = 14/3,
        // R² = 1 − (1/6)/(14/3) = 27/28; σ² = SSR/(3 − 2) = 1/6, se(slope) = √(σ²/Sxx) = √(1/12).
        let x = vec![vec![1.0, 0.0], vec![1.0, 1.0], vec![1.0, 2.0]];
        let f = wls(&x, &[1.0, 2.0, 4.0], &[1.0; 3]).unwrap();
        assert_relative_eq!(f.coef[1], 1.5, max_relative = 1e-12);
        assert_relative_eq!(f.coef[0], 5.0 / 6.0, max_relative = 1e-12);
        assert_relative_eq!(f.r2, 27.0 / 28.0, max_relative = 1e-12);
        assert_relative_eq!(f.stderr[1], (1.0f64 / 12.0).sqrt(), max_relative = 1e-9);
    }

    #[test]
    fn an_unidentifiable_pair_reports_rank_one() {
        let x = vec![vec![1.0, 2.0], vec![2.0, 4.0]];
        let f = wls(&x, &[1.0, 2.0], &[1.0, 1.0]).unwrap();
        assert_eq!(f.rank, 1);
    }
}

//! Bandwidth allocation: given a per-NPU bandwidth budget B to split across the network
//! dimensions, which split minimises communication time?
//!
//! In the bandwidth-bound regime every collective phase on dimension d costs V_d / B_d,
//! where V_d is the bytes the NPU pushes through dimension d per iteration (summed over
//! every collective of every class). The total communication time is then
//! `T(B_1..B_D) = Σ_d V_d / B_d`, to be minimised subject to `Σ_d B_d = B`.
//! Lagrange: ∂/∂B_d [Σ V_j/B_j + λ(Σ B_j − B)] = −V_d/B_d² + λ = 0, so
//! `B_d = sqrt(V_d/λ)`, i.e. **B_d ∝ √V_d**:
//!
//! `B_d* = B · √V_d / Σ_j √V_j`, and `T* = (Σ_d √V_d)² / B`.
//!
//! (Cauchy–Schwarz gives the same bound. LIBRA, Won et al., ISPASS 2024, arXiv 2109.11762,
//! optimises per-dimension bandwidth of multi-dimensional networks numerically; this is the
//! closed form of the bandwidth-bound case.) V_d is measured, not assumed: the estimate's
//! total communication time is evaluated once with the given bandwidths and once per
//! dimension with that dimension made (nearly) free; the drop is V_d / B_d.

use crate::collective::MAX_DIMS;
use crate::error::{Error, Result};
use crate::estimate::{self, Estimate};
use crate::model::Model;
use crate::parallel::Plan;
use crate::system::System;
use crate::units::Bandwidth;

/// Factor by which a dimension's bandwidth is raised to make it "free" when probing.
const FREE: f64 = 1e6;

/// Communication time of an estimate, exposed plus hidden, all classes (seconds).
pub fn comm_time(e: &Estimate) -> f64 {
    e.time
        .comm
        .iter()
        .map(|c| (c.exposed + c.hidden).get())
        .sum()
}

/// Bytes per NPU per iteration through each dimension, V_d, measured by probing (see the
/// module docs). Entries beyond the topology's dimensions are zero.
pub fn traffic(model: &Model, system: &System, plan: &Plan) -> Result<[f64; MAX_DIMS]> {
    let base = comm_time(&estimate::evaluate(model, system, plan)?);
    let mut v = [0.0; MAX_DIMS];
    for (d, out) in v.iter_mut().enumerate().take(system.topology.dims().len()) {
        let mut s = system.clone();
        let dim = &mut s.topology.dims_mut()[d];
        let b = dim.bandwidth.get();
        dim.bandwidth = Bandwidth::new(b * FREE);
        let fast = comm_time(&estimate::evaluate(model, &s, plan)?);
        *out = ((base - fast) * b / (1.0 - 1.0 / FREE)).max(0.0);
    }
    Ok(v)
}

/// The optimal split `B_d = B · √V_d / Σ √V_j` of `budget` over dimensions with traffic
/// `v`. Dimensions with no traffic get nothing.
pub fn optimal_split(v: &[f64], budget: Bandwidth) -> Result<Vec<Bandwidth>> {
    let s: f64 = v.iter().map(|x| x.max(0.0).sqrt()).sum();
    if s <= 0.0 {
        return Err(Error::Unsupported(
            "no network traffic: every group is a single device, nothing to allocate".into(),
        ));
    }
    Ok(v.iter().map(|x| budget * (x.max(0.0).sqrt() / s)).collect())
}

/// Bandwidth-bound communication time `Σ_d V_d / B_d` of a split (seconds); dimensions
/// with no traffic cost nothing whatever their bandwidth.
pub fn bound_time(v: &[f64], split: &[Bandwidth]) -> f64 {
    v.iter()
        .zip(split)
        .filter(|(x, _)| **x > 0.0)
        .map(|(x, b)| x / b.get())
        .sum()
}

/// `system` with its dimensions' bandwidths replaced by `split`; dimensions given nothing
/// keep a trickle of 1e-6 of the budget so the topology stays valid.
pub fn with_split(system: &System, split: &[Bandwidth]) -> System {
    let budget: f64 = split.iter().map(|b| b.get()).sum();
    let mut s = system.clone();
    for (dim, b) in s.topology.dims_mut().iter_mut().zip(split) {
        dim.bandwidth = Bandwidth::new(b.get().max(budget * 1e-6));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn square_root_rule_by_hand() {
        // V = (4, 1) bytes, B = 3 B/s: √4 : √1 = 2 : 1 → (2, 1); T* = 4/2 + 1/1 = 3 = (2+1)²/3.
        let s = optimal_split(&[4.0, 1.0], Bandwidth::new(3.0)).unwrap();
        assert_relative_eq!(s[0].get(), 2.0);
        assert_relative_eq!(s[1].get(), 1.0);
        assert_relative_eq!(bound_time(&[4.0, 1.0], &s), 3.0);
    }

    #[test]
    fn closed_form_beats_every_grid_split() {
        let v = [7.0e9, 2.0e9, 0.5e9];
        let budget = Bandwidth::new(600e9);
        let best = bound_time(&v, &optimal_split(&v, budget).unwrap());
        let n = 60;
        let mut grid_best = f64::MAX;
        for i in 1..n {
            for j in 1..n - i {
                let f = [i as f64 / n as f64, j as f64 / n as f64];
                let split = [budget * f[0], budget * f[1], budget * (1.0 - f[0] - f[1])];
                let t = bound_time(&v, &split);
                assert!(t >= best * (1.0 - 1e-12), "grid {f:?} beat the closed form");
                grid_best = grid_best.min(t);
            }
        }
        // The grid's best approaches the closed form (within the grid's resolution).
        assert!(grid_best / best < 1.01, "{grid_best} vs {best}");
    }

    #[test]
    fn no_traffic_is_an_error() {
        assert!(optimal_split(&[0.0, 0.0], Bandwidth::new(1.0)).is_err());
    }
}

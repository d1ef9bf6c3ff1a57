//! Recursive halving / doubling (Rabenseifner's algorithm) on one dimension.
//!
//! Sources: Thakur, Rabenseifner & Gropp, "Optimization of collective communication
//! operations in MPICH", IJHPCA 19(1), 2005: §4.4 (reduce-scatter by recursive halving,
//! all-reduce and reduce as reduce-scatter + all-gather / gather), §4.1 (all-gather by
//! recursive doubling), §4.3 (broadcast as scatter + all-gather, van de Geijn), and the
//! binomial (minimum spanning tree) scatter/gather of Chan et al., "Collective
//! communication: theory, practice, and experience", CCPE 19(13), 2007, Table 1.
//!
//! **p not a power of two** is handled the way Thakur et al. §4.4 do for Rabenseifner's
//! algorithm, not by rounding: with p' = 2^⌊log₂ p⌋ and r = p − p' extra NPUs (e = 1 if r > 0, else 0),
//! each extra NPU first hands its data to a partner among the p' (one extra step), the p'
//! run the power-of-two algorithm, and the partners hand the result back (one more step).
//! The extra steps move: the whole vector n before a reduction, the own piece n/p before an
//! all-gather or gather, the whole result n after an all-reduce, broadcast or all-gather,
//! the final piece n/p after a reduce-scatter or scatter. (Volumes are exact; which block
//! sits where is not modelled.)
//!
//! Each stage is one exchange with one partner, so the block gives it `b`:
//! B/k on a Switch, one link B/(p−1) on a FullyConnected block, and on a Ring block (p > 2)
//! one direction of the links, B/2, shared by the d exchanges that cross each link when the
//! partner is d hops away (stage cost d·α + d·m/(B/2)). Largest messages go to the nearest
//! partners (partner distance 1, 2, 4, … as the message halves).
//!
//! Closed forms on Switch and FullyConnected (q = ⌊log₂ p⌋):
//! - reduce-scatter, all-gather: (q + 2e)α + ((p'−1)/p' + e(1 + 1/p)) · n/b
//! - all-reduce: (2q + 2e)α + (2(p'−1)/p' + 2e) · n/b (p a power of two:
//!   2log₂p·α + 2(p−1)/p·n/b, DESIGN.md's table)
//! - broadcast (scatter + all-gather), reduce (reduce-scatter + gather):
//!   (2q + e)α + (2(p'−1)/p' + e) · n/b
//! - gather, scatter (binomial tree): (q + e)α + ((p'−1)/p' + e/p) · n/b
//!
//! On a Ring block each power-of-two core costs (p'−1)α + (q/2)·n/(B/2) instead of
//! q·α + (p'−1)/p'·n/b (every stage moves n/2 over the busiest link).
//! All-to-all and send/recv are not halving-doubling collectives: [`Error::Unsupported`].

use super::Collective;
use super::cost::{self, Cost};
use crate::error::{Error, Result};
use crate::network::{Dim, DimKind};

/// Accumulates stages: `steps` in α, `factor` in units of n/b.
struct Stages {
    congested: bool,
    steps: f64,
    factor: f64,
}

impl Stages {
    /// One exchange of `m`·n bytes with a partner `d` hops away.
    fn stage(&mut self, m: f64, d: f64) {
        let d = if self.congested { d } else { 1.0 };
        self.steps += d;
        self.factor += d * m;
    }
    /// Recursive halving over p' = 2^q: stage k sends n/2^k to distance 2^(k−1).
    fn halving(&mut self, q: u32) {
        (1..=q).for_each(|k| self.stage(0.5f64.powi(k as i32), 2f64.powi(k as i32 - 1)));
    }
    /// Recursive doubling over p' = 2^q: stage j sends 2^(j−1)/p'·n to distance p'/2^j.
    fn doubling(&mut self, q: u32) {
        let pp = 2f64.powi(q as i32);
        (1..=q).for_each(|j| self.stage(2f64.powi(j as i32 - 1) / pp, pp / 2f64.powi(j as i32)));
    }
    /// Binomial scatter or gather over p' = 2^q: stage j moves n/2^j over distance 2^(j−1).
    fn binomial(&mut self, q: u32) {
        self.halving(q);
    }
}

/// Whether halving-doubling implements `op` (everything but all-to-all and send/recv).
pub fn applies(op: Collective, _dim: &Dim) -> bool {
    !matches!(op, Collective::AllToAll | Collective::SendRecv)
}

/// The halving-doubling cost of `op` on `dim` (see the module documentation).
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    if !applies(op, dim) {
        return Err(Error::Unsupported(format!(
            "halving-doubling does not implement {} (use ring or direct)",
            op.name()
        )));
    }
    if dim.size <= 1 {
        return Ok(Cost::ZERO);
    }
    let q = dim.size.ilog2();
    let extra = !dim.size.is_power_of_two();
    let p = cost::p(dim);
    let congested = dim.kind == DimKind::Ring && dim.size > 2;
    let mut s = Stages {
        congested,
        steps: 0.0,
        factor: 0.0,
    };
    let pre = |s: &mut Stages, m: f64| {
        if extra {
            s.stage(m, 1.0)
        }
    };
    use Collective::*;
    match op {
        ReduceScatter | AllReduce | Reduce => pre(&mut s, 1.0),
        AllGather | Gather => pre(&mut s, 1.0 / p),
        _ => {}
    }
    match op {
        ReduceScatter => s.halving(q),
        AllGather => s.doubling(q),
        AllReduce => {
            s.halving(q);
            s.doubling(q);
        }
        Broadcast => {
            s.binomial(q);
            s.doubling(q);
        }
        Reduce => {
            s.halving(q);
            s.binomial(q);
        }
        _ => s.binomial(q),
    }
    match op {
        AllReduce | AllGather | Broadcast => pre(&mut s, 1.0),
        ReduceScatter | Scatter => pre(&mut s, 1.0 / p),
        _ => {}
    }
    let (bandwidth, bandwidth_expr) = stage_bandwidth(dim);
    let (steps_expr, factor_expr) = exprs(op, congested);
    Ok(Cost {
        steps: s.steps,
        factor: s.factor,
        bandwidth,
        steps_expr,
        factor_expr,
        bandwidth_expr,
    })
}

/// The bandwidth of one partner exchange: Switch B/k, FullyConnected B/(p−1), Ring B/2
/// (B for p = 2).
fn stage_bandwidth(dim: &Dim) -> (crate::units::Bandwidth, &'static str) {
    match dim.kind {
        DimKind::Switch => (cost::all_port_bandwidth(dim), cost::all_port_expr(dim)),
        DimKind::FullyConnected | DimKind::Ring => (
            cost::neighbour_bandwidth(dim),
            super::ring::neighbour_expr(dim),
        ),
    }
}

/// Symbolic steps and factor (q = ⌊log₂p⌋, p' = 2^q, e = [p ≠ p']).
fn exprs(op: Collective, ring: bool) -> (&'static str, &'static str) {
    use Collective::*;
    match (op, ring) {
        (ReduceScatter | AllGather, false) => ("q + 2e", "(p'−1)/p' + e(1 + 1/p)"),
        (ReduceScatter | AllGather, true) => ("p'−1 + 2e", "q/2 + e(1 + 1/p)"),
        (AllReduce, false) => ("2q + 2e", "2(p'−1)/p' + 2e"),
        (AllReduce, true) => ("2(p'−1) + 2e", "q + 2e"),
        (Broadcast | Reduce, false) => ("2q + e", "2(p'−1)/p' + e"),
        (Broadcast | Reduce, true) => ("2(p'−1) + e", "q + e"),
        (_, false) => ("q + e", "(p'−1)/p' + e/p"),
        (_, true) => ("p'−1 + e", "q/2 + e/p"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Bandwidth, Seconds};
    use approx::assert_relative_eq;

    fn sw(p: u32) -> Dim {
        Dim::new(DimKind::Switch, p, Bandwidth::new(1.0), Seconds::new(1.0)).unwrap()
    }

    #[test]
    fn power_of_two_matches_rabenseifner() {
        let c = cost(Collective::AllReduce, &sw(8)).unwrap();
        assert_relative_eq!(c.steps, 2.0 * 3.0);
        assert_relative_eq!(c.factor, 2.0 * 7.0 / 8.0);
    }

    #[test]
    fn non_power_of_two_adds_pre_and_post_steps() {
        // p = 6: p' = 4, q = 2, r = 2.
        let c = cost(Collective::AllReduce, &sw(6)).unwrap();
        assert_relative_eq!(c.steps, 2.0 * 2.0 + 2.0);
        assert_relative_eq!(c.factor, 2.0 * 3.0 / 4.0 + 2.0);
        let c = cost(Collective::ReduceScatter, &sw(6)).unwrap();
        assert_relative_eq!(c.steps, 2.0 + 2.0);
        assert_relative_eq!(c.factor, 3.0 / 4.0 + 1.0 + 1.0 / 6.0);
    }

    /// The expressions `--explain` prints are the closed forms the module documents, and
    /// they give the computed counts when evaluated by hand (p = 6: q = 2, p' = 4, e = 1;
    /// p = 8 ring: q = 3, p' = 8, e = 0).
    #[test]
    fn explain_expressions_are_the_closed_forms() {
        let ring8 = Dim::new(DimKind::Ring, 8, Bandwidth::new(1.0), Seconds::new(1.0)).unwrap();
        let c = cost(Collective::ReduceScatter, &sw(6)).unwrap();
        assert_eq!(
            (c.steps_expr, c.factor_expr),
            ("q + 2e", "(p'−1)/p' + e(1 + 1/p)")
        );
        assert_relative_eq!(c.steps, 2.0 + 2.0);
        assert_relative_eq!(c.factor, 3.0 / 4.0 + (1.0 + 1.0 / 6.0));
        let c = cost(Collective::AllGather, &ring8).unwrap();
        assert_eq!(
            (c.steps_expr, c.factor_expr),
            ("p'−1 + 2e", "q/2 + e(1 + 1/p)")
        );
        assert_relative_eq!(c.steps, 7.0);
        assert_relative_eq!(c.factor, 1.5);
        let c = cost(Collective::AllReduce, &ring8).unwrap();
        assert_eq!((c.steps_expr, c.factor_expr), ("2(p'−1) + 2e", "q + 2e"));
        assert_relative_eq!(c.steps, 14.0);
        assert_relative_eq!(c.factor, 3.0);
        let c = cost(Collective::Broadcast, &sw(6)).unwrap();
        assert_eq!((c.steps_expr, c.factor_expr), ("2q + e", "2(p'−1)/p' + e"));
        assert_relative_eq!(c.steps, 4.0 + 1.0);
        assert_relative_eq!(c.factor, 1.5 + 1.0);
        let c = cost(Collective::Gather, &sw(6)).unwrap();
        assert_eq!((c.steps_expr, c.factor_expr), ("q + e", "(p'−1)/p' + e/p"));
        assert_relative_eq!(c.steps, 3.0);
        assert_relative_eq!(c.factor, 3.0 / 4.0 + 1.0 / 6.0);
        let c = cost(Collective::Scatter, &ring8).unwrap();
        assert_eq!((c.steps_expr, c.factor_expr), ("p'−1 + e", "q/2 + e/p"));
        assert_relative_eq!(c.steps, 7.0);
        assert_relative_eq!(c.factor, 1.5);
    }

    #[test]
    fn ring_block_core_moves_half_per_stage() {
        let d = Dim::new(DimKind::Ring, 8, Bandwidth::new(1.0), Seconds::new(1.0)).unwrap();
        let c = cost(Collective::ReduceScatter, &d).unwrap();
        assert_relative_eq!(c.steps, 1.0 + 2.0 + 4.0);
        assert_relative_eq!(c.factor, 3.0 / 2.0);
        assert_relative_eq!(c.bandwidth.get(), 0.5);
    }
}

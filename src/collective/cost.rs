//! The per-step pieces every per-dimension closed form is built from, kept separate so a
//! second model (the ASTRA-sim-faithful one in `astra/`) can reuse them: the [`Cost`] of one
//! collective on one dimension as *latency steps × α + bytes through the bottleneck port ÷
//! the bandwidth the algorithm can use there*, the hop counts of a building block, and the
//! share of the NPU's injection bandwidth `B` each traffic pattern can use on each block.
//!
//! What `B` means (DESIGN.md "What bandwidth means"): the NPU's total injection bandwidth
//! into the dimension, one direction, summed over its links. So:
//! - **Ring block** (p > 2): two links, B/2 each way. Patterns that keep both busy
//!   (two counter-rotating half-rings, shortest-path routing) use the full B; one
//!   neighbour link alone gives B/2. With p = 2 both links reach the same neighbour: B.
//! - **FullyConnected block**: p−1 links of B/(p−1); a pattern that talks to u peers at once
//!   uses u·B/(p−1).
//! - **Switch block**: one port of B. With oversubscription k, traffic that every NPU
//!   injects across the switch at once gets B/k; a single flow (send/recv) still gets B.

use crate::network::{Dim, DimKind};
use crate::units::{Bandwidth, Bytes, Seconds};

/// The cost of one collective on one dimension, independent of the message size:
/// `t(n) = steps · α + factor · n / bandwidth`.
///
/// `steps` counts the α's on the critical path (a step routed over h hops counts h);
/// `factor · n` is the number of bytes through the NPU's busiest port (or link) and
/// `bandwidth` what the algorithm can use of it. The `*_expr` fields write the same three
/// terms symbolically for `--explain`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cost {
    /// Latency steps (α multiples) on the critical path.
    pub steps: f64,
    /// Bytes through the bottleneck per byte of the phase size n.
    pub factor: f64,
    /// Bandwidth available to those bytes.
    pub bandwidth: Bandwidth,
    /// `steps` written symbolically, e.g. `2(p−1)`.
    pub steps_expr: &'static str,
    /// `factor` written symbolically, e.g. `2(p−1)/p`.
    pub factor_expr: &'static str,
    /// `bandwidth` written symbolically, e.g. `B` or `B/k`.
    pub bandwidth_expr: &'static str,
}

impl Cost {
    /// The cost of a collective on a group of one NPU: nothing.
    pub const ZERO: Cost = Cost {
        steps: 0.0,
        factor: 0.0,
        bandwidth: Bandwidth::new(1.0),
        steps_expr: "0",
        factor_expr: "0",
        bandwidth_expr: "B",
    };

    /// Latency part: `steps · α`.
    pub fn latency(&self, dim: &Dim) -> Seconds {
        dim.latency * self.steps
    }

    /// Bandwidth part: `factor · n / bandwidth`.
    pub fn transfer(&self, n: Bytes) -> Seconds {
        if self.factor == 0.0 {
            return Seconds::ZERO;
        }
        (n * self.factor) / self.bandwidth
    }

    /// `steps · α + factor · n / bandwidth`.
    pub fn time(&self, dim: &Dim, n: Bytes) -> Seconds {
        self.latency(dim) + self.transfer(n)
    }
}

/// The dimension's size as a float.
pub fn p(dim: &Dim) -> f64 {
    dim.size as f64
}

/// Shortest-path hops to the farthest NPU: ⌊p/2⌋ on a bidirectional ring, 1 on a
/// FullyConnected or Switch block (a switch traversal counts as one step).
pub fn farthest_hops(dim: &Dim) -> f64 {
    match dim.kind {
        DimKind::Ring => (dim.size / 2).max(1) as f64,
        DimKind::FullyConnected | DimKind::Switch => 1.0,
    }
}

/// Bandwidth of the single link (or path) to one neighbour, for point-to-point traffic:
/// Ring B/2 (p > 2) or B (p = 2); FullyConnected B/(p−1); Switch B (one flow is not limited
/// by oversubscription).
pub fn neighbour_bandwidth(dim: &Dim) -> Bandwidth {
    let b = dim.bandwidth;
    match dim.kind {
        DimKind::Ring if dim.size > 2 => b / 2.0,
        DimKind::Ring | DimKind::Switch => b,
        DimKind::FullyConnected => b / (p(dim) - 1.0).max(1.0),
    }
}

/// Bandwidth every NPU gets when all of them inject across the block at once and spread
/// their traffic over all their links: B on Ring and FullyConnected, B/k on a Switch with
/// oversubscription k (the switch's uplinks carry 1/k of the injection rate).
pub fn all_port_bandwidth(dim: &Dim) -> Bandwidth {
    match dim.kind {
        DimKind::Switch => dim.bandwidth / dim.oversubscription,
        DimKind::Ring | DimKind::FullyConnected => dim.bandwidth,
    }
}

/// Symbolic form of [`all_port_bandwidth`].
pub fn all_port_expr(dim: &Dim) -> &'static str {
    match dim.kind {
        DimKind::Switch if dim.oversubscription > 1.0 => "B/k",
        _ => "B",
    }
}

/// Bandwidth a (bidirectional) ring algorithm gets on the block.
///
/// - Ring block: the full B, as two counter-rotating rings each carrying half the data at
///   B/2 (NCCL runs rings in both directions; Patarasuk & Yuan 2009 for the optimality).
/// - FullyConnected block: K_p splits into ⌊(p−1)/2⌋ edge-disjoint Hamiltonian cycles
///   (Walecki's construction), each run as a bidirectional ring on its own links (as NCCL
///   runs several channels), so the rings use 2⌊(p−1)/2⌋ of the p−1 links:
///   B·2⌊(p−1)/2⌋/(p−1) (all of B for odd p, B·(p−2)/(p−1) for even p; B for p = 2).
/// - Switch block: B/k.
pub fn ring_bandwidth(dim: &Dim) -> Bandwidth {
    match dim.kind {
        DimKind::FullyConnected if dim.size > 2 => {
            let links = (p(dim) - 1.0) / 2.0;
            dim.bandwidth * (2.0 * links.floor() / (p(dim) - 1.0))
        }
        _ => all_port_bandwidth(dim),
    }
}

/// Symbolic form of [`ring_bandwidth`].
pub fn ring_bandwidth_expr(dim: &Dim) -> &'static str {
    match dim.kind {
        DimKind::FullyConnected if dim.size > 2 => "B·2⌊(p−1)/2⌋/(p−1)",
        _ => all_port_expr(dim),
    }
}

/// Bytes through an NPU's links per byte of n when every NPU sends n/p to every other over
/// shortest paths (all-to-all pattern): (p−1)/p on FullyConnected and Switch blocks, where
/// each piece crosses one link; ⌊p²/4⌋/p on a bidirectional ring, where the pieces travel
/// min(d, p−d) hops and Σ_{d=1}^{p−1} min(d, p−d) = ⌊p²/4⌋ (equivalently the bisection
/// bound: p·n/4 bytes must cross 2 links × B/2 each way).
pub fn all_to_all_factor(dim: &Dim) -> f64 {
    let pf = p(dim);
    match dim.kind {
        DimKind::Ring => ((dim.size as u64 * dim.size as u64) / 4) as f64 / pf,
        DimKind::FullyConnected | DimKind::Switch => (pf - 1.0) / pf,
    }
}

/// Symbolic form of [`all_to_all_factor`].
pub fn all_to_all_expr(dim: &Dim) -> &'static str {
    match dim.kind {
        DimKind::Ring => "⌊p²/4⌋/p",
        DimKind::FullyConnected | DimKind::Switch => "(p−1)/p",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn dim(kind: DimKind, p: u32) -> Dim {
        Dim::new(kind, p, Bandwidth::new(100e9), Seconds::new(1e-6)).unwrap()
    }

    #[test]
    fn block_bandwidths() {
        assert_relative_eq!(ring_bandwidth(&dim(DimKind::Ring, 8)).get(), 100e9);
        // K_8: 3 Hamiltonian cycles use 6 of 7 links.
        assert_relative_eq!(
            ring_bandwidth(&dim(DimKind::FullyConnected, 8)).get(),
            100e9 * 6.0 / 7.0
        );
        assert_relative_eq!(
            ring_bandwidth(&dim(DimKind::FullyConnected, 7)).get(),
            100e9
        );
        assert_relative_eq!(neighbour_bandwidth(&dim(DimKind::Ring, 8)).get(), 50e9);
        assert_relative_eq!(neighbour_bandwidth(&dim(DimKind::Ring, 2)).get(), 100e9);
        assert_relative_eq!(
            neighbour_bandwidth(&dim(DimKind::FullyConnected, 5)).get(),
            25e9
        );
    }

    #[test]
    fn oversubscribed_switch_shares_its_uplinks() {
        // k = 4: every NPU injecting at once gets B/4 = 25 GB/s, written "B/k"; a single flow
        // still gets B; without oversubscription the symbol stays "B".
        let mut sw = dim(DimKind::Switch, 8);
        assert_eq!(all_port_expr(&sw), "B");
        sw.oversubscription = 4.0;
        assert_relative_eq!(all_port_bandwidth(&sw).get(), 25e9);
        assert_eq!(all_port_expr(&sw), "B/k");
        assert_eq!(ring_bandwidth_expr(&sw), "B/k");
        assert_relative_eq!(neighbour_bandwidth(&sw).get(), 100e9);
        assert_eq!(all_port_expr(&dim(DimKind::Ring, 8)), "B");
        // A fully connected pair is one link both ways: all of B, no Hamiltonian cycles.
        assert_eq!(
            ring_bandwidth_expr(&dim(DimKind::FullyConnected, 8)),
            "B·2⌊(p−1)/2⌋/(p−1)"
        );
        assert_eq!(ring_bandwidth_expr(&dim(DimKind::FullyConnected, 2)), "B");
        assert_relative_eq!(
            ring_bandwidth(&dim(DimKind::FullyConnected, 2)).get(),
            100e9
        );
    }

    #[test]
    fn ring_all_to_all_hops() {
        // p = 8: distances 1,2,3,4,3,2,1 sum to 16 = ⌊64/4⌋.
        assert_relative_eq!(all_to_all_factor(&dim(DimKind::Ring, 8)), 16.0 / 8.0);
        // p = 5: 1+2+2+1 = 6.
        assert_relative_eq!(all_to_all_factor(&dim(DimKind::Ring, 5)), 6.0 / 5.0);
        assert_relative_eq!(all_to_all_factor(&dim(DimKind::Ring, 2)), 0.5);
        assert_relative_eq!(all_to_all_factor(&dim(DimKind::Switch, 4)), 0.75);
        assert_eq!(all_to_all_expr(&dim(DimKind::Ring, 8)), "⌊p²/4⌋/p");
        assert_eq!(all_to_all_expr(&dim(DimKind::FullyConnected, 8)), "(p−1)/p");
        assert_eq!(all_to_all_expr(&dim(DimKind::Switch, 8)), "(p−1)/p");
    }
}

//! The direct algorithm on one dimension: every NPU sends each peer its piece at once, in
//! one step (on a FullyConnected block each piece has its own link; on a Switch all go
//! through the one port; on a Ring block the pieces are routed over shortest paths, so the
//! step takes ⌊p/2⌋ hops and each piece loads min(d, p−d) links).
//!
//! With h = [`cost::farthest_hops`] (⌊p/2⌋ on a Ring block, else 1), `B_a` =
//! [`cost::all_port_bandwidth`] (B, or B/k on an oversubscribed Switch) and `f_a2a` =
//! [`cost::all_to_all_factor`] ((p−1)/p, or ⌊p²/4⌋/p on a Ring block):
//!
//! | collective | time | source |
//! |---|---|---|
//! | reduce-scatter, all-gather, all-to-all | h·α + f_a2a · n/B_a | Thakur et al. 2005 §3 (pairwise/direct exchange); DESIGN.md table |
//! | all-reduce | 2h·α + 2·f_a2a · n/B_a | direct reduce-scatter then direct all-gather |
//! | broadcast, reduce | h·α + (p−1) · n/B_a | flat tree: the root sends (receives) n to (from) each of p−1 peers |
//! | gather, scatter | h·α + (p−1)/p · n/B_a | flat tree: the root's port moves (p−1) pieces of n/p |
//! | send/recv | α + n/B_nbr | one link to the peer |

use super::Collective;
use super::cost::{self, Cost};
use crate::error::Result;
use crate::network::{Dim, DimKind};

/// The direct algorithm's cost of `op` on `dim` (see the module table). Applies to every
/// collective.
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    if dim.size <= 1 {
        return Ok(Cost::ZERO);
    }
    let p = cost::p(dim);
    let h = cost::farthest_hops(dim);
    let ring = dim.kind == DimKind::Ring;
    let hops_expr = if ring { "⌊p/2⌋" } else { "1" };
    let f = cost::all_to_all_factor(dim);
    let f_expr = cost::all_to_all_expr(dim);
    let bandwidth = cost::all_port_bandwidth(dim);
    let bandwidth_expr = cost::all_port_expr(dim);
    let c = |steps, steps_expr, factor, factor_expr| Cost {
        steps,
        factor,
        bandwidth,
        steps_expr,
        factor_expr,
        bandwidth_expr,
    };
    Ok(match op {
        Collective::ReduceScatter | Collective::AllGather | Collective::AllToAll => {
            c(h, hops_expr, f, f_expr)
        }
        Collective::AllReduce => c(
            2.0 * h,
            if ring { "2⌊p/2⌋" } else { "2" },
            2.0 * f,
            if ring { "2⌊p²/4⌋/p" } else { "2(p−1)/p" },
        ),
        Collective::Broadcast | Collective::Reduce => c(h, hops_expr, p - 1.0, "p−1"),
        Collective::Gather | Collective::Scatter => c(h, hops_expr, (p - 1.0) / p, "(p−1)/p"),
        Collective::SendRecv => Cost {
            steps: 1.0,
            factor: 1.0,
            bandwidth: cost::neighbour_bandwidth(dim),
            steps_expr: "1",
            factor_expr: "1",
            bandwidth_expr: super::ring::neighbour_expr(dim),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Bandwidth, Bytes, Seconds};
    use approx::assert_relative_eq;

    #[test]
    fn fully_connected_all_to_all_uses_every_link() {
        // 7 pieces of n/8, each on its own link of 140/7 = 20 GB/s, one step of 1 us.
        let d = Dim::new(
            DimKind::FullyConnected,
            8,
            Bandwidth::new(140e9),
            Seconds::new(1e-6),
        )
        .unwrap();
        let t = cost(Collective::AllToAll, &d)
            .unwrap()
            .time(&d, Bytes::new(8e8));
        assert_relative_eq!(t.get(), 1e-6 + 1e8 / 20e9, max_relative = 1e-12);
    }

    #[test]
    fn ring_block_routes_over_hops() {
        // p = 6: ⌊6/2⌋ = 3 hops; hop sum 1+2+3+2+1 = 9 = ⌊36/4⌋.
        let d = Dim::new(DimKind::Ring, 6, Bandwidth::new(1e9), Seconds::new(1e-6)).unwrap();
        let c = cost(Collective::AllToAll, &d).unwrap();
        assert_relative_eq!(c.steps, 3.0);
        assert_relative_eq!(c.factor, 9.0 / 6.0);
    }
}

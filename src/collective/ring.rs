//! The ring algorithm on one dimension (bandwidth-optimal, p−1 latency steps per pass).
//!
//! With `B_r` the bandwidth a bidirectional ring gets on the block
//! ([`cost::ring_bandwidth`]: B on a Ring block, B·2⌊(p−1)/2⌋/(p−1) on a FullyConnected
//! block, B/k on a Switch) and n the nccl-tests buffer size:
//!
//! | collective | time | source |
//! |---|---|---|
//! | reduce-scatter, all-gather | (p−1)α + (p−1)/p · n/B_r | Thakur, Rabenseifner & Gropp 2005, §4.1 (ring allgather); Chan et al. 2007, Table 1 |
//! | all-reduce | 2(p−1)α + 2(p−1)/p · n/B_r | reduce-scatter + all-gather (Patarasuk & Yuan 2009; NCCL ring) |
//! | all-to-all | (p−1)α + ⌊p²/4⌋/p · n/B_r | pieces relayed min(d, p−d) hops (hop/bisection argument) |
//! | broadcast, reduce | (p−1)α + n/B_r | pipelined chain, two directions (NCCL ring broadcast/reduce; nccl-tests busbw factor 1) |
//! | gather, scatter | (p−1)α + (p−1)/p · n/B_r | pipelined chain towards/from the root; the root's port moves (p−1)/p·n |
//! | send/recv | α + n/B_nbr | one link to the next NPU ([`cost::neighbour_bandwidth`]) |

use super::Collective;
use super::cost::{self, Cost};
use crate::error::Result;
use crate::network::Dim;

/// The ring algorithm's cost of `op` on `dim` (see the module table). Applies to every
/// collective.
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    if dim.size <= 1 {
        return Ok(Cost::ZERO);
    }
    let p = cost::p(dim);
    let bandwidth = cost::ring_bandwidth(dim);
    let bandwidth_expr = cost::ring_bandwidth_expr(dim);
    let c = |steps, steps_expr, factor, factor_expr| Cost {
        steps,
        factor,
        bandwidth,
        steps_expr,
        factor_expr,
        bandwidth_expr,
    };
    Ok(match op {
        Collective::ReduceScatter
        | Collective::AllGather
        | Collective::Gather
        | Collective::Scatter => c(p - 1.0, "p−1", (p - 1.0) / p, "(p−1)/p"),
        Collective::AllReduce => c(2.0 * (p - 1.0), "2(p−1)", 2.0 * (p - 1.0) / p, "2(p−1)/p"),
        Collective::AllToAll => c(
            p - 1.0,
            "p−1",
            ((dim.size as u64).pow(2) / 4) as f64 / p,
            "⌊p²/4⌋/p",
        ),
        Collective::Broadcast | Collective::Reduce => c(p - 1.0, "p−1", 1.0, "1"),
        Collective::SendRecv => Cost {
            steps: 1.0,
            factor: 1.0,
            bandwidth: cost::neighbour_bandwidth(dim),
            steps_expr: "1",
            factor_expr: "1",
            bandwidth_expr: neighbour_expr(dim),
        },
    })
}

/// Symbolic form of [`cost::neighbour_bandwidth`].
pub(super) fn neighbour_expr(dim: &Dim) -> &'static str {
    use crate::network::DimKind;
    match dim.kind {
        DimKind::Ring if dim.size > 2 => "B/2",
        DimKind::Ring | DimKind::Switch => "B",
        DimKind::FullyConnected => "B/(p−1)",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::DimKind;
    use crate::units::{Bandwidth, Bytes, Seconds};
    use approx::assert_relative_eq;

    #[test]
    fn acceptance_all_reduce_ring_of_8() {
        let d = Dim::new(DimKind::Ring, 8, Bandwidth::new(1e11), Seconds::new(500e-9)).unwrap();
        let t = cost(Collective::AllReduce, &d)
            .unwrap()
            .time(&d, Bytes::new(1e9));
        assert_relative_eq!(
            t.get(),
            2.0 * 7.0 * 500e-9 + 2.0 * 7.0 / 8.0 * 1e9 / 1e11,
            max_relative = 1e-12
        );
        assert_relative_eq!(t.get(), 17.507e-3, max_relative = 1e-12);
    }
}

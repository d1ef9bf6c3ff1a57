//! NCCL's double binary tree on one dimension (all-reduce, broadcast, reduce).
//!
//! Two binary trees over the p NPUs, each carrying half the buffer, built so that every NPU
//! is an inner node in at most one of them (Sanders, Speck & Träff, "Two-tree algorithms
//! for full bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009;
//! NCCL 2.4 "double binary trees"). Pipelined in small chunks, the latency is the tree
//! depth per pass, ⌈log₂p⌉α, as in NCCL's tuning model (`src/graph/tuning.cc`: tree
//! all-reduce latency 2·log₂(nodes)·interLat).
//!
//! Bytes through the busiest NPU:
//! - broadcast / reduce: an inner node forwards its tree's n/2 to two children (or takes
//!   it from them): n. T = ⌈log₂p⌉α + n/b.
//! - all-reduce = reduce up both trees then broadcast down, pipelined: an inner node sends
//!   n/2 to its parent, n/2 to each child, and (as a leaf of the other tree) n/2 to that
//!   parent: 2n. T = 2⌈log₂p⌉α + 2n/b for p ≥ 3; for p = 2 the trees are one edge and
//!   each NPU sends n: T = 2α + n/b.
//!
//! `b` by block: Switch B/k (one port); FullyConnected: the u links in use, each
//! B/(p−1), so b = B·min(u, p−1)/(p−1) with u = 4 for all-reduce (parent and two children
//! in one tree, parent in the other) and u = 2 for broadcast/reduce (two children); tree
//! edges are assumed distinct. A Ring block has no tree: NCCL trees span switched
//! networks, so the tree on a ring is [`Error::Unsupported`], as are the collectives other
//! than all-reduce, broadcast and reduce.

use super::Collective;
use super::cost::{self, Cost};
use crate::error::{Error, Result};
use crate::network::{Dim, DimKind};

/// Whether the double binary tree implements `op` on `dim`: all-reduce, broadcast and
/// reduce, on a Switch or FullyConnected block.
pub fn applies(op: Collective, dim: &Dim) -> bool {
    matches!(
        op,
        Collective::AllReduce | Collective::Broadcast | Collective::Reduce
    ) && dim.kind != DimKind::Ring
}

/// The double-binary-tree cost of `op` on `dim` (see the module documentation).
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    let all_reduce = match op {
        Collective::AllReduce => true,
        Collective::Broadcast | Collective::Reduce => false,
        _ => {
            return Err(Error::Unsupported(format!(
                "double-binary-tree implements all-reduce, broadcast and reduce, not {}",
                op.name()
            )));
        }
    };
    if dim.kind == DimKind::Ring {
        return Err(Error::Unsupported(format!(
            "double-binary-tree needs a switch or fully_connected dimension, not a ring ({} on a ring: use ring or halving-doubling)",
            op.name()
        )));
    }
    if dim.size <= 1 {
        return Ok(Cost::ZERO);
    }
    let p = cost::p(dim);
    let depth = (dim.size as f64).log2().ceil();
    let (bandwidth, bandwidth_expr) = match dim.kind {
        DimKind::FullyConnected => {
            let u: f64 = if all_reduce { 4.0 } else { 2.0 };
            (
                dim.bandwidth * (u.min(p - 1.0) / (p - 1.0)),
                if all_reduce {
                    "B·min(4, p−1)/(p−1)"
                } else {
                    "B·min(2, p−1)/(p−1)"
                },
            )
        }
        _ => (cost::all_port_bandwidth(dim), cost::all_port_expr(dim)),
    };
    let (steps, steps_expr, factor, factor_expr) = if !all_reduce {
        (depth, "⌈log₂p⌉", 1.0, "1")
    } else if dim.size == 2 {
        (2.0, "2⌈log₂p⌉", 1.0, "1 (p = 2)")
    } else {
        (2.0 * depth, "2⌈log₂p⌉", 2.0, "2")
    };
    Ok(Cost {
        steps,
        factor,
        bandwidth,
        steps_expr,
        factor_expr,
        bandwidth_expr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Bandwidth, Bytes, Seconds};
    use approx::assert_relative_eq;

    #[test]
    fn all_reduce_on_a_switch() {
        // p = 16: depth 4 each way; an inner node sends 2n.
        let d = Dim::new(
            DimKind::Switch,
            16,
            Bandwidth::new(50e9),
            Seconds::new(2e-6),
        )
        .unwrap();
        let t = cost(Collective::AllReduce, &d)
            .unwrap()
            .time(&d, Bytes::new(1e9));
        assert_relative_eq!(t.get(), 8.0 * 2e-6 + 2.0 * 1e9 / 50e9, max_relative = 1e-12);
    }

    #[test]
    fn fully_connected_uses_the_links_a_node_has() {
        // B = 30 GB/s per NPU over its p − 1 links, α = 1 µs, n = 1 GB.
        let fc = |p: u32| {
            Dim::new(
                DimKind::FullyConnected,
                p,
                Bandwidth::new(30e9),
                Seconds::new(1e-6),
            )
            .unwrap()
        };
        let t = |op: Collective, p: u32| cost(op, &fc(p)).unwrap().time(&fc(p), Bytes::new(1e9));
        // p = 4, all-reduce: the 4 links it would use are capped at the 3 it has, so
        // b = B·3/3 = 30 GB/s; T = 2·⌈log₂4⌉·α + 2n/b = 4 µs + 66.67 ms.
        assert_relative_eq!(
            t(Collective::AllReduce, 4).get(),
            4e-6 + 2.0 * 1e9 / 30e9,
            max_relative = 1e-12
        );
        // p = 8: 4 of 7 links, b = 30·4/7 GB/s; T = 2·3·α + 2n/b = 6 µs + 116.67 ms.
        assert_relative_eq!(
            t(Collective::AllReduce, 8).get(),
            6e-6 + 2.0 * 1e9 * 7.0 / 120e9,
            max_relative = 1e-12
        );
        // p = 2, broadcast: one link of the two it would use, b = B; T = α + n/B.
        assert_relative_eq!(
            t(Collective::Broadcast, 2).get(),
            1e-6 + 1e9 / 30e9,
            max_relative = 1e-12
        );
    }

    #[test]
    fn not_on_a_ring() {
        let d = Dim::new(DimKind::Ring, 8, Bandwidth::new(1e9), Seconds::new(1e-6)).unwrap();
        assert!(!applies(Collective::AllReduce, &d));
        assert!(matches!(
            cost(Collective::AllReduce, &d),
            Err(Error::Unsupported(_))
        ));
    }
}

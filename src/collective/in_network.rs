//! In-network reduction on a Switch dimension (Mellanox SHARP: Graham et al., "Scalable
//! Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016; NVIDIA NVLink SHARP / NVLS).
//!
//! NCCL's NVLS all-reduce is a reduce-scatter by `multimem.ld_reduce` (the switch reads
//! every NPU's copy of each 1/p shard, its own included, and returns the sum to the
//! shard's owner: each NPU's port sends n and receives n/p) followed, pipelined, by an
//! all-gather by `multimem.st` (each NPU sends its reduced shard once, the switch
//! multicasts it: sends n/p, receives n). Each direction of the port therefore carries
//! n(1 + 1/p), and the switch sustains a fraction η of the port's bandwidth (NCCL's tuning
//! model, `nvlsEfficiency`: 0.85 on Hopper, 0.74 on Blackwell; NVIDIA/nccl
//! `src/graph/tuning.cc`):
//!
//! T = 2α + n(1 + 1/p) / (η·B/k)
//!
//! Reduce-scatter, all-gather, reduce and broadcast move n through the busiest direction:
//! T = 2α + n/(η·B/k). The latency is one step up and one down.
//!
//! Check against measurement (one DGX H100, B = 370 GB/s effective NVLink4, η = 0.85,
//! p = 8): algbw = 370·0.85·8/9 = 280 GB/s, busbw = 2(p−1)/p · algbw = 489 GB/s; NCCL
//! reaches algbw ≈ 275 GB/s, busbw ≈ 480 GB/s (sjeaugey, NVIDIA/nccl-tests#212), and
//! algbw 258 GB/s on 5 GPUs (model: 262; NVIDIA/nccl#1455). The bytes on the wire never
//! exceed the link (n(1 + 1/p)/T ≤ η·B); nccl-tests' busbw of an in-network all-reduce is
//! "the NVLink bandwidth a ring would need" to be as fast (AddyLaddy, NVIDIA/nccl-tests#366),
//! which is why it may exceed B.
//!
//! It needs a Switch dimension declared with `in-network`; all-to-all, gather, scatter and
//! send/recv have nothing to reduce or multicast: both are [`Error::Unsupported`].

use super::Collective;
use super::cost::{self, Cost};
use crate::error::{Error, Result};
use crate::network::{Dim, DimKind};

/// Whether in-network reduction implements `op` on `dim`: a reduction or multicast
/// collective on a Switch declared `in-network`.
pub fn applies(op: Collective, dim: &Dim) -> bool {
    use Collective::*;
    matches!(
        op,
        AllReduce | ReduceScatter | AllGather | Reduce | Broadcast
    ) && dim.kind == DimKind::Switch
        && dim.in_network
}

/// The in-network cost of `op` on `dim`.
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    use Collective::*;
    if !matches!(
        op,
        AllReduce | ReduceScatter | AllGather | Reduce | Broadcast
    ) {
        return Err(Error::Unsupported(format!(
            "in-network reduction does not apply to {} (only all-reduce, reduce-scatter, all-gather, reduce, broadcast)",
            op.name()
        )));
    }
    if dim.kind != DimKind::Switch || !dim.in_network {
        return Err(Error::Unsupported(format!(
            "in-network needs a switch dimension with in-network reduction (e.g. 'switch(8, 450GB/s, 1us, in-network)'), not a {}{}, for {}",
            dim.kind.name(),
            if dim.kind == DimKind::Switch {
                " without in-network"
            } else {
                ""
            },
            op.name()
        )));
    }
    if dim.size <= 1 {
        return Ok(Cost::ZERO);
    }
    let (factor, factor_expr) = if op == AllReduce {
        (1.0 + 1.0 / cost::p(dim), "1 + 1/p")
    } else {
        (1.0, "1")
    };
    Ok(Cost {
        steps: 2.0,
        factor,
        bandwidth: cost::all_port_bandwidth(dim) * dim.in_network_efficiency,
        steps_expr: "2",
        factor_expr,
        bandwidth_expr: if dim.in_network_efficiency < 1.0 {
            "η·B/k"
        } else {
            cost::all_port_expr(dim)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::{Bandwidth, Bytes, Seconds};
    use approx::assert_relative_eq;

    #[test]
    fn all_reduce_is_two_steps_and_one_pass() {
        let mut d = Dim::new(
            DimKind::Switch,
            8,
            Bandwidth::new(450e9),
            Seconds::new(1e-6),
        )
        .unwrap();
        assert!(!applies(Collective::AllReduce, &d));
        d.in_network = true;
        let t = cost(Collective::AllReduce, &d)
            .unwrap()
            .time(&d, Bytes::new(1e9));
        // 2α + n(1 + 1/8)/B
        assert_relative_eq!(t.get(), 2e-6 + 1.125e9 / 450e9, max_relative = 1e-12);
        assert!(cost(Collective::AllToAll, &d).is_err());
    }

    /// `--explain` names the efficiency only when the switch applies one: `η·B/k` at
    /// η = 0.85, the plain all-port bandwidth `B` at η = 1 (a non-oversubscribed switch).
    #[test]
    fn explained_bandwidth_names_the_efficiency_when_there_is_one() {
        let mut d = Dim::new(DimKind::Switch, 8, Bandwidth::new(370e9), Seconds::new(0.0)).unwrap();
        d.in_network = true;
        assert_eq!(cost(Collective::AllReduce, &d).unwrap().bandwidth_expr, "B");
        d.in_network_efficiency = 0.85;
        assert_eq!(
            cost(Collective::AllReduce, &d).unwrap().bandwidth_expr,
            "η·B/k"
        );
    }

    #[test]
    fn nvls_on_one_h100_node_matches_nccl_tests() {
        // B = 370 GB/s, η = 0.85, p = 8, n = 8 GiB: algbw → 370·0.85·8/9 = 279.6 GB/s,
        // busbw = 1.75 × algbw = 489 GB/s (NCCL: ≈ 275 and ≈ 480, nccl-tests#212).
        let mut d = Dim::new(DimKind::Switch, 8, Bandwidth::new(370e9), Seconds::new(0.0)).unwrap();
        d.in_network = true;
        d.in_network_efficiency = 0.85;
        let n = Bytes::new(8.0 * 1024f64.powi(3));
        let t = cost(Collective::AllReduce, &d).unwrap().time(&d, n);
        let algbw = n.get() / t.get();
        assert_relative_eq!(algbw, 370e9 * 0.85 * 8.0 / 9.0, max_relative = 1e-12);
        assert!((algbw * 1.75 / 480e9 - 1.0).abs() < 0.03);
        // bytes on the wire per second never exceed the link
        assert!(n.get() * 1.125 / t.get() <= 370e9);
    }
}

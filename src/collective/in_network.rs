//! In-network reduction on a Switch dimension (Mellanox SHARP: Graham et al., "Scalable
//! Hierarchical Aggregation Protocol (SHArP)", COMHPC 2016; NVIDIA NVLink SHARP / NVLS).
//!
//! Each NPU sends its data up once; the switch reduces (or multicasts) and sends the result
//! down once; sending and receiving overlap, so the busiest direction of the NPU's port
//! carries n: T = 2α + n/(B/k) for all-reduce (DESIGN.md: ≈ 2α + n/B), reduce-scatter
//! (sends n, receives n/p), all-gather (sends n/p, receives n, switch multicast), reduce
//! and broadcast. The latency is one step up and one down.
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
    Ok(Cost {
        steps: 2.0,
        factor: 1.0,
        bandwidth: cost::all_port_bandwidth(dim),
        steps_expr: "2",
        factor_expr: "1",
        bandwidth_expr: cost::all_port_expr(dim),
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
        assert_relative_eq!(t.get(), 2e-6 + 1e9 / 450e9, max_relative = 1e-12);
        assert!(cost(Collective::AllToAll, &d).is_err());
    }
}

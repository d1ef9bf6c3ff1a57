//! Our default (physical) collective model, [`crate::collective::time`], on ASTRA-sim's
//! inputs, and the reasons the two differ.
//!
//! Mapping of one ASTRA-sim dimension (per-link bandwidth `bw` GB/s with GB = 2^30 B,
//! per-hop latency `L`, endpoint delay `E`) to one of our [`Dim`]s (per-NPU injection
//! bandwidth B, one direction, summed over the NPU's links; per-step latency α):
//!
//! | block | B | α |
//! |---|---|---|
//! | Ring | 2 · bw · 2^30 (one link each way round) | L + E |
//! | FullyConnected | (p − 1) · bw · 2^30 (one link to every peer) | L + E |
//! | Switch | bw · 2^30 (one link into the switch) | 2L + E (NPU → switch → NPU) |
//!
//! Sizes follow nccl-tests in our model: an all-gather of Chakra `comm_size` s per NPU
//! has an output of N · s, which is what is passed. Chunks = preferred-dataset-splits.

use super::model::{Impl, Op, impls};
use super::network_yaml::{AstraDim, AstraNetwork};
use super::system_json::AstraSystem;
use super::trace::Workload;
use crate::collective::{self, Algorithm, Collective, CollectiveTime, Options};
use crate::error::Result;
use crate::network::{Dim, DimKind};
use crate::units::{Bandwidth, Bytes, Seconds};

/// The physical-model dimensions for an ASTRA-sim network (first `k` dimensions).
pub fn dims(net: &AstraNetwork, sys: &AstraSystem, k: usize) -> Result<Vec<Dim>> {
    let e = sys.endpoint_delay_ns as f64;
    net.dims[..k.min(net.dims.len())]
        .iter()
        .map(|d| {
            let link = d.bandwidth_gbps * (1u64 << 30) as f64;
            let (b, alpha_ns) = match d.kind {
                DimKind::Ring => (2.0 * link, d.latency_ns + e),
                DimKind::FullyConnected => ((d.npus.max(2) - 1) as f64 * link, d.latency_ns + e),
                DimKind::Switch => (link, 2.0 * d.latency_ns + e),
            };
            Dim::new(
                d.kind,
                d.npus,
                Bandwidth::new(b),
                Seconds::new(alpha_ns * 1e-9),
            )
        })
        .collect()
}

fn algorithm(list: &[Impl]) -> Algorithm {
    let base = |i: &Impl| match i {
        Impl::Ring | Impl::OneRing => Algorithm::Ring,
        Impl::Direct(_) | Impl::OneDirect(_) => Algorithm::Direct,
        Impl::HalvingDoubling | Impl::OneHalvingDoubling => Algorithm::HalvingDoubling,
        Impl::DoubleBinaryTree => Algorithm::DoubleBinaryTree,
    };
    match list.first().map(base) {
        Some(a) if list.iter().all(|i| base(i) == a) => a,
        _ => Algorithm::Auto,
    }
}

/// Our model's time for the same collective (`comm_size` in Chakra's convention).
pub fn time(
    op: Op,
    comm_size: u64,
    net: &AstraNetwork,
    sys: &AstraSystem,
) -> Result<CollectiveTime> {
    let list = impls(sys, op);
    let dims = dims(net, sys, list.len().max(1))?;
    let npus: u64 = dims.iter().map(|d| d.size as u64).product();
    let (c, size) = match op {
        Op::AllReduce => (Collective::AllReduce, comm_size),
        Op::ReduceScatter => (Collective::ReduceScatter, comm_size),
        Op::AllGather => (Collective::AllGather, comm_size * npus),
        Op::AllToAll => (Collective::AllToAll, comm_size),
    };
    let opts = Options {
        algorithm: algorithm(list),
        chunks: sys.splits.max(1),
        schedule: crate::collective::Schedule::Baseline,
    };
    collective::time(c, Bytes::new(size as f64), &dims, &opts)
}

/// Why ASTRA-sim's analytical number differs from the physical one for this setup.
pub fn reasons(op: Op, net: &AstraNetwork, sys: &AstraSystem) -> Vec<String> {
    let mut out = Vec::new();
    let list = impls(sys, op);
    if list
        .iter()
        .any(|i| matches!(i, Impl::Direct(_) | Impl::OneDirect(_)))
    {
        out.push(
            "direct: ASTRA-sim's congestion-unaware backend gives each of the p−1 concurrent \
             messages the full link bandwidth, so a direct collective costs about one message \
             time; the physical model shares the NPU's injection bandwidth among them"
                .into(),
        );
    }
    if net.dims.iter().any(|d| d.kind == DimKind::Switch) {
        out.push(
            "Switch: ASTRA-sim charges 2 hops of latency per message and no switch \
             contention; the physical model uses one step latency α = 2L + E"
                .into(),
        );
    }
    if op == Op::AllToAll && list.contains(&Impl::Ring) {
        out.push(
            "ring all-to-all: ASTRA-sim relays p(p−1)/2 serial neighbour steps; the physical \
             model sends (p−1)/p of the buffer over the ring's bandwidth"
                .into(),
        );
    }
    out.push(format!(
        "ASTRA-sim adds the endpoint delay ({} ns) at every packet and 3 passes over local \
         memory ({} GB/s) per reduced message, rounds every message down to whole ns and \
         pads small collectives to one byte per NPU per chunk",
        sys.endpoint_delay_ns, sys.local_mem_bw_gbps
    ));
    out
}

/// Replaces every collective's duration in `w` by our physical model's time (whole
/// collective as one piece of the NPU's queue). A communicator group smaller than the
/// system becomes one dimension of the group's size on its slowest link's building
/// block (ring algorithm, as ASTRA-sim runs groups).
pub fn workload_times(w: &mut Workload, net: &AstraNetwork, sys: &AstraSystem) -> Result<()> {
    let mut ring_sys = sys.clone();
    for list in [
        &mut ring_sys.all_reduce,
        &mut ring_sys.all_gather,
        &mut ring_sys.reduce_scatter,
        &mut ring_sys.all_to_all,
    ] {
        *list = vec![Impl::Ring];
    }
    for c in &mut w.collectives {
        let whole = c.members.len() as u64 == net.npus();
        let ns = if c.members.len() < 2 {
            0.0
        } else if whole {
            time(c.op, c.size, net, sys)?.total.get() * 1e9
        } else if let Some((d, h)) = super::trace::group_link(&c.members, net) {
            let base = &net.dims[d];
            let one = AstraNetwork {
                dims: vec![AstraDim {
                    npus: c.members.len() as u32,
                    latency_ns: base.latency_ns * h as f64 / base.hops(1).max(1) as f64,
                    ..*base
                }],
            };
            time(c.op, c.size, &one, &ring_sys)?.total.get() * 1e9
        } else {
            0.0
        };
        c.ns = super::trace::float_ns(ns.round(), "collective (physical model)")?;
        (c.pieces, c.piece_ns) = if c.ns == 0 { (0, 0) } else { (1, c.ns) };
    }
    super::trace::check_total(&w.npus, &w.collectives)
}

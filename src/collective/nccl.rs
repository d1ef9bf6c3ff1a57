//! The NCCL schedule ([`Schedule::Nccl`], the default): a multi-dimensional collective as
//! NCCL runs it, following NCCL's own cost model (NVIDIA/nccl `src/graph/tuning.cc`,
//! `ncclTopoTuneModel`: time = latency + size / bandwidth, the bandwidth being the
//! bottleneck of a pipelined path, the latency paid once per step of the path).
//!
//! Two candidates, the faster kept when the algorithm is `auto` (which, for all-reduce,
//! reduce-scatter and all-gather, chooses among NCCL's algorithms only: ring, tree,
//! in-network NVLS/CollNet):
//!
//! **Pipelined hierarchical phases** (NCCL's trees, NVLS-tree and CollNet chains): the
//! phases of `compose.rs` (reduce-scatter inwards-out, all-reduce on the outermost
//! dimension, all-gather back), each with its own per-dimension algorithm, with the buffer
//! streamed through them in small chunks. Every phase's latency is on the path once; the
//! bytes flow at the rate of the busiest dimension:
//!
//! T = Σ_s latency_s + max_d Σ_{s on d} transfer_s(n).
//!
//! **One ring across all ranks** (NCCL's ring, `--algorithm ring`, for all-reduce,
//! reduce-scatter and all-gather): P = Π p_d ranks in one ring ordered with dimension 0
//! varying fastest, run as several channels, each entering and leaving every group
//! through a different NPU (rail-optimised: one NIC per GPU), so every NPU's port on
//! every dimension carries an equal share. Of the P ring edges, E_{≥d} = P/Π_{j<d} p_j
//! cross dimension d or an outer one (E_{≥0} = P), so E_d = E_{≥d} − E_{≥d+1} cross exactly
//! dimension d. With passes w = 2 for all-reduce and 1 for reduce-scatter and all-gather,
//! each edge carries w(P−1)/P · n, and each of the w(P−1) steps crosses one edge:
//!
//! T = Σ_d s_d·α_d + max_d (E_d/P) · w(P−1)/P · n / b_d,
//! s_d = w·E_d steps on dimension d, one fewer edge on the outermost (w(P−1) in all),
//!
//! b_d the bandwidth a ring gets on that block (`cost::ring_bandwidth`). This is NCCL's
//! ring model: busBw = nChannels · bwInter, latency (nsteps − nInterSteps)·intraLat +
//! nInterSteps·interLat with nInterSteps = 2(nNodes − 1) for all-reduce. On 16 DGX A100
//! nodes (8 GPUs on NVSwitch at 240 GB/s, one 24 GB/s NIC per GPU): E₁/P = 1/8, so the
//! NICs bound the ring at 8 × 24 = 192 GB/s busbw; NCCL measures ≈ 190 GB/s.
//!
//! Chunks (`Options::chunks`) do not apply: the pipeline is NCCL's own.

use super::compose::{EMPTY_SLOT, Slot, plan};
use super::{
    Algorithm, Collective, CollectiveTime, MAX_DIMS, Options, Phase, cost::Cost,
    cost::ring_bandwidth,
};
use crate::error::{Error, Result};
use crate::network::Dim;
use crate::units::{Bytes, Seconds};

/// NCCL's algorithms for all-reduce, reduce-scatter and all-gather: ring, tree and
/// NVLS/CollNet (in-network); `auto` picks the fastest of those that apply to each phase.
/// Other collectives (all-to-all, send/recv, …) take the fastest applicable algorithm.
const NCCL_ALGORITHMS: [Algorithm; 3] = [
    Algorithm::Ring,
    Algorithm::DoubleBinaryTree,
    Algorithm::InNetwork,
];

/// The algorithm and cost of one phase under the NCCL schedule. `lenient`: a forced
/// algorithm that does not implement this phase (a tree's reduce-scatter inside a node)
/// falls back to `auto` (calibrated regimes, `calibrated.rs`).
fn select(s: &Slot, alg: Algorithm, d: &Dim, n: Bytes, lenient: bool) -> Result<(Algorithm, Cost)> {
    let nccl_op = matches!(
        s.op,
        Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather
    );
    let alg = if lenient && !super::applies(s.op, alg, d) {
        Algorithm::Auto
    } else {
        alg
    };
    if alg != Algorithm::Auto || !nccl_op {
        return super::select(s.op, alg, d, n);
    }
    let mut best: Option<(Algorithm, Cost, Seconds)> = None;
    for a in NCCL_ALGORITHMS {
        if let Ok(c) = super::dim_cost(s.op, a, d) {
            let t = c.time(d, n);
            if best.is_none_or(|(_, _, bt)| t < bt) {
                best = Some((a, c, t));
            }
        }
    }
    best.map(|(a, c, _)| (a, c))
        .ok_or_else(|| Error::Internal(format!("no NCCL algorithm for {}", s.op.name())))
}

/// The pipelined hierarchical phases of `op` into `out`; returns their count.
fn phases(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    order: &[usize],
    alg: Algorithm,
    lenient: bool,
    out: &mut [Phase; 2 * MAX_DIMS],
) -> Result<usize> {
    let mut slots = [EMPTY_SLOT; 2 * MAX_DIMS];
    let ns = plan(op, dims, order, false, &mut slots);
    for (ph, s) in out.iter_mut().zip(&slots[..ns]) {
        let d = &dims[s.dim];
        let n = size * s.frac;
        let (algorithm, c) = select(s, alg, d, n, lenient).map_err(|e| match e {
            Error::Unsupported(msg) => {
                Error::Unsupported(format!("dimension {} ({d}): {msg}", s.dim))
            }
            other => other,
        })?;
        *ph = Phase {
            dim: s.dim,
            op: s.op,
            algorithm,
            size: n,
            latency: c.latency(d),
            transfer: c.transfer(n),
        };
    }
    Ok(ns)
}

/// Whether the ring across all ranks is a candidate for `op` with algorithm `alg` over
/// `k` active dimensions.
fn flat_ring_applies(op: Collective, alg: Algorithm, k: usize) -> bool {
    k > 1
        && matches!(alg, Algorithm::Auto | Algorithm::Ring)
        && matches!(
            op,
            Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather
        )
}

/// The ring across all ranks over groups of `sizes` NPUs (innermost first, all > 1):
/// per dimension, (latency steps s_d, bytes through each NPU's port there per byte of n).
/// See the module documentation for the formula.
pub(crate) fn ring_terms(op: Collective, sizes: &[u32], out: &mut [(f64, f64)]) {
    let w = if op == Collective::AllReduce {
        2.0
    } else {
        1.0
    };
    let total: f64 = sizes.iter().map(|&p| p as f64).product();
    let mut inner = 1.0; // Π_{j<d} p_j
    for (i, &p) in sizes.iter().enumerate() {
        let at_or_above = total / inner;
        let above = if i + 1 == sizes.len() {
            0.0
        } else {
            at_or_above / p as f64
        };
        let edges = at_or_above - above;
        let steps = w * (edges - if above == 0.0 { 1.0 } else { 0.0 });
        out[i] = (steps, (edges / total) * w * (total - 1.0) / total);
        inner *= p as f64;
    }
}

/// The ring across all ranks, per active dimension: (steps·α, transfer) in `order`.
fn flat_ring(op: Collective, size: Bytes, dims: &[Dim], order: &[usize], out: &mut [Phase]) {
    let mut sizes = [1u32; MAX_DIMS];
    for (s, &d) in sizes.iter_mut().zip(order) {
        *s = dims[d].size;
    }
    let mut terms = [(0.0, 0.0); MAX_DIMS];
    ring_terms(op, &sizes[..order.len()], &mut terms);
    for (i, &d) in order.iter().enumerate() {
        let dim = &dims[d];
        let (steps, per_n) = terms[i];
        out[i] = Phase {
            dim: d,
            op,
            algorithm: Algorithm::Ring,
            size,
            latency: dim.latency * steps,
            transfer: (size * per_n) / ring_bandwidth(dim),
        };
    }
}

/// Σ latency + max transfer over `phases` grouped by dimension.
fn pipelined_total(phases: &[Phase]) -> Seconds {
    let mut busy = [Seconds::ZERO; MAX_DIMS];
    let mut lat = Seconds::ZERO;
    for p in phases {
        lat += p.latency;
        busy[p.dim] += p.transfer;
    }
    lat + busy.iter().fold(Seconds::ZERO, |a, &b| a.max(b))
}

/// Fills `out` with the faster NCCL candidate (see the module documentation).
pub(super) fn time(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    order: &[usize],
    opts: &Options,
    out: &mut CollectiveTime,
) -> Result<()> {
    time_with(op, size, dims, order, opts, false, out)
}

/// [`time`], with `lenient` as in [`select`].
pub(super) fn time_with(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    order: &[usize],
    opts: &Options,
    lenient: bool,
    out: &mut CollectiveTime,
) -> Result<()> {
    let k = order.len();
    let flat = flat_ring_applies(op, opts.algorithm, k);
    if opts.algorithm != Algorithm::Ring || !flat {
        out.n_phases = phases(
            op,
            size,
            dims,
            order,
            opts.algorithm,
            lenient,
            &mut out.phases,
        )?;
        out.total = pipelined_total(out.phases());
    }
    if flat {
        let mut ring = [super::compose::EMPTY_PHASE; MAX_DIMS];
        flat_ring(op, size, dims, order, &mut ring);
        let t = pipelined_total(&ring[..k]);
        if opts.algorithm == Algorithm::Ring || t < out.total {
            out.phases[..k].copy_from_slice(&ring[..k]);
            out.n_phases = k;
            out.total = t;
            out.flat_ring = true;
        }
    }
    Ok(())
}

/// [`time`]'s total without building the phase list; allocates nothing.
pub(super) fn total(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    order: &[usize],
    alg: Algorithm,
) -> Result<Seconds> {
    let k = order.len();
    let flat = flat_ring_applies(op, alg, k);
    let mut best = Seconds::new(f64::INFINITY);
    if alg != Algorithm::Ring || !flat {
        let mut ph = [super::compose::EMPTY_PHASE; 2 * MAX_DIMS];
        let ns = phases(op, size, dims, order, alg, false, &mut ph)?;
        best = pipelined_total(&ph[..ns]);
    }
    if flat {
        let mut ring = [super::compose::EMPTY_PHASE; MAX_DIMS];
        flat_ring(op, size, dims, order, &mut ring);
        best = best.min(pipelined_total(&ring[..k]));
    }
    Ok(best)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::DimKind;
    use crate::units::Bandwidth;
    use approx::assert_relative_eq;

    fn dgx_a100(nodes: u32) -> [Dim; 2] {
        [
            Dim::new(
                DimKind::Switch,
                8,
                Bandwidth::new(240e9),
                Seconds::new(3.4e-6),
            )
            .unwrap(),
            Dim::new(
                DimKind::Switch,
                nodes,
                Bandwidth::new(24e9),
                Seconds::new(14e-6),
            )
            .unwrap(),
        ]
    }

    #[test]
    fn flat_ring_on_16_dgx_a100_nodes() {
        // P = 128, w = 2: per edge 2·127/128·n. Inter-node: E₁ = 16 edges, 2·(16 − 1) = 30
        // steps (NCCL nInterSteps = 2(nNodes − 1)); intra-node 2·112 = 224 = 2·127 − 30.
        // Transfer: NIC carries (16/128)·2·127/128·n / 24 GB/s; NVLink (112/128)·… / 240 GB/s.
        let dims = dgx_a100(16);
        let n = 1024f64.powi(3);
        let o = Options {
            algorithm: Algorithm::Ring,
            ..Options::default()
        };
        let t = super::super::time(Collective::AllReduce, Bytes::new(n), &dims, &o).unwrap();
        assert!(t.flat_ring);
        let lat = 224.0 * 3.4e-6 + 30.0 * 14e-6;
        let nic = (16.0 / 128.0) * 2.0 * 127.0 / 128.0 * n / 24e9;
        assert_relative_eq!(t.total.get(), lat + nic, max_relative = 1e-12);
        // busbw → 8 × 24 GB/s = 192 GB/s as latency vanishes
        let busbw = 2.0 * 127.0 / 128.0 * n / nic;
        assert_relative_eq!(busbw, 192e9, max_relative = 1e-12);
    }

    #[test]
    fn pipelined_phases_pay_latency_once_and_the_busiest_dimension() {
        // Ring everywhere is the flat ring; direct on both: RS(d0) 7/8·n/240, AR(d1)
        // 2·15/16·(n/8)/24 = bottleneck; latency α₀ + 2α₁ + α₀.
        let dims = dgx_a100(16);
        let n = 1e9;
        let o = Options {
            algorithm: Algorithm::Direct,
            ..Options::default()
        };
        let t = super::super::total(Collective::AllReduce, Bytes::new(n), &dims, &o).unwrap();
        let expect = 2.0 * 3.4e-6 + 2.0 * 14e-6 + 2.0 * 15.0 / 16.0 * (n / 8.0) / 24e9;
        assert_relative_eq!(t.get(), expect, max_relative = 1e-12);
    }

    #[test]
    fn auto_takes_the_flat_ring_when_it_is_faster() {
        // switch(2, 10 GB/s, 1 µs) × switch(8, 100 GB/s, 1 µs), all-reduce of n = 1 GiB.
        // Flat ring over P = 16 (w = 2): 8 of its 16 edges cross the outer dimension, 8 the
        // inner; steps 2·(8 − 1) = 14 outer and 2·15 − 14 = 16 inner; the inner port
        // carries (8/16)·2·15/16·n at 10 GB/s, the bottleneck: 30 µs + 0.9375·n / 10 GB/s.
        // Hierarchical: the inner reduce-scatter and all-gather each move n/2 through the
        // 10 GB/s port, n / 10 GB/s together, slower; so `auto` keeps the flat ring.
        let slow = Dim::new(DimKind::Switch, 2, Bandwidth::new(10e9), Seconds::new(1e-6)).unwrap();
        let fast = Dim::new(
            DimKind::Switch,
            8,
            Bandwidth::new(100e9),
            Seconds::new(1e-6),
        )
        .unwrap();
        let dims = [slow, fast];
        let n = 1024f64.powi(3);
        let flat = 30e-6 + 0.5 * 2.0 * 15.0 / 16.0 * n / 10e9;
        let o = Options::default();
        let t = super::super::time(Collective::AllReduce, Bytes::new(n), &dims, &o).unwrap();
        assert!(t.flat_ring);
        assert_relative_eq!(t.total.get(), flat, max_relative = 1e-12);
        let total = super::super::total(Collective::AllReduce, Bytes::new(n), &dims, &o).unwrap();
        assert_relative_eq!(total.get(), flat, max_relative = 1e-12);
    }

    #[test]
    fn a_forced_ring_is_the_flat_ring_even_when_phases_are_faster() {
        // 16 DGX A100 nodes, 1 GiB: the flat ring of flat_ring_on_16_dgx_a100_nodes
        // (224·3.4 µs + 30·14 µs + (16/128)·2·127/128·n / 24 GB/s) is what `ring` means,
        // though ring phases per dimension would be faster (the outer all-reduce on n/8:
        // 2·15/16·n/8 / 24 GB/s < 2·127/128·n/8 / 24 GB/s); `total` agrees with `time`.
        let dims = dgx_a100(16);
        let n = 1024f64.powi(3);
        let o = Options {
            algorithm: Algorithm::Ring,
            ..Options::default()
        };
        let flat = 224.0 * 3.4e-6 + 30.0 * 14e-6 + (16.0 / 128.0) * 2.0 * 127.0 / 128.0 * n / 24e9;
        let total = super::super::total(Collective::AllReduce, Bytes::new(n), &dims, &o).unwrap();
        assert_relative_eq!(total.get(), flat, max_relative = 1e-12);
        let auto = super::super::total(
            Collective::AllReduce,
            Bytes::new(n),
            &dims,
            &Options::default(),
        )
        .unwrap();
        assert!(auto.get() < 0.95 * flat, "{auto:?}");
    }

    #[test]
    fn one_dimension_is_its_own_ring_not_a_flat_ring() {
        // On one switch of 8 the ring across all ranks is that dimension's ring: the
        // phase list stays the hierarchical one (not labelled a flat ring) and the time
        // is the ring's, 2·7 steps of α plus 2·7/8·n through each port:
        // 14 · 3.4 µs + 2·7/8 · 1 GB / 240 GB/s.
        let dims = [dgx_a100(1)[0]];
        let n = 1e9;
        let o = Options {
            algorithm: Algorithm::Ring,
            ..Options::default()
        };
        let t = super::super::time(Collective::AllReduce, Bytes::new(n), &dims, &o).unwrap();
        assert!(!t.flat_ring);
        assert_eq!(t.n_phases, 1);
        let expect = 14.0 * 3.4e-6 + 2.0 * 7.0 / 8.0 * n / 240e9;
        assert_relative_eq!(t.total.get(), expect, max_relative = 1e-12);
    }

    #[test]
    fn a_tie_keeps_the_ring() {
        // Two ranks: the ring (2·(2−1) = 2 steps, 2·1/2·n bytes) and the double binary
        // tree (2·log₂2 = 2 steps, n bytes) cost the same; a tie keeps the earliest of
        // NCCL_ALGORITHMS (ring, tree, in-network), so the table names the ring.
        let d = Dim::new(
            DimKind::Switch,
            2,
            Bandwidth::new(100e9),
            Seconds::new(1e-6),
        )
        .unwrap();
        let n = Bytes::new(1024.0 * 1024.0);
        let s = Slot {
            dim: 0,
            op: Collective::AllReduce,
            frac: 1.0,
        };
        let ring = super::super::dim_cost(Collective::AllReduce, Algorithm::Ring, &d).unwrap();
        let tree =
            super::super::dim_cost(Collective::AllReduce, Algorithm::DoubleBinaryTree, &d).unwrap();
        assert_eq!(ring.time(&d, n), tree.time(&d, n), "the case is a tie");
        let (a, _) = select(&s, Algorithm::Auto, &d, n, false).unwrap();
        assert_eq!(a, Algorithm::Ring);
    }
}

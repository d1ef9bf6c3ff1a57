//! Collective communication costs (alpha-beta) on multi-dimensional topologies.
//!
//! This module owns: the [`Collective`] and [`Algorithm`] names, the per-dimension
//! closed forms (one file per algorithm), and the composition across dimensions
//! (hierarchical phases, chunk pipelining, Themis-style balancing).
//!
//! Size convention (nccl-tests): `size` is the buffer per NPU: the whole buffer for
//! all-reduce, broadcast, reduce; the whole *output* for all-gather and gather; the whole
//! *input* for reduce-scatter and scatter; the whole send buffer for all-to-all; the
//! message for send/recv.
//!
//! The public entry point is [`time`]; it allocates nothing, so the estimate and sweep hot
//! loops can call it millions of times per second.

pub mod calibrated;
mod compose;
pub mod cost;
pub mod direct;
pub mod explain;
pub mod halving_doubling;
pub mod in_network;
pub(crate) mod nccl;
pub mod parameter_server;
pub mod ring;
mod themis;
pub mod tree;

pub use compose::MAX_CHUNKS;
pub use cost::Cost;

use crate::error::{Error, Result};
use crate::network::Dim;
use crate::units::{Bandwidth, Bytes, Seconds};

/// Maximum number of network dimensions a topology may have.
pub const MAX_DIMS: usize = 8;

/// A collective operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Collective {
    /// Every NPU ends with the sum of all buffers.
    AllReduce,
    /// Every NPU ends with 1/p of the sum.
    ReduceScatter,
    /// Every NPU ends with the concatenation of all 1/p pieces.
    AllGather,
    /// Every NPU sends a distinct 1/p of its buffer to every other.
    AllToAll,
    /// One root sends its buffer to all.
    Broadcast,
    /// All buffers are summed onto one root.
    Reduce,
    /// One root collects a 1/p piece from every NPU.
    Gather,
    /// One root sends a distinct 1/p piece to every NPU.
    Scatter,
    /// One NPU sends its buffer to one other.
    SendRecv,
}

impl Collective {
    /// Every collective, in display order.
    pub const ALL: [Collective; 9] = [
        Collective::AllReduce,
        Collective::ReduceScatter,
        Collective::AllGather,
        Collective::AllToAll,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
        Collective::SendRecv,
    ];

    /// The command-line name (`all-reduce`).
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all-reduce",
            Collective::ReduceScatter => "reduce-scatter",
            Collective::AllGather => "all-gather",
            Collective::AllToAll => "all-to-all",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
            Collective::SendRecv => "send-recv",
        }
    }

    /// Parses a name; `_` and `-` are interchangeable and case is ignored. Unknown names
    /// get a did-you-mean.
    pub fn parse(s: &str) -> Result<Collective> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        let alias = match norm.as_str() {
            "allreduce" => "all-reduce",
            "reducescatter" => "reduce-scatter",
            "allgather" => "all-gather",
            "alltoall" | "all2all" => "all-to-all",
            "sendrecv" | "send" | "recv" | "p2p" => "send-recv",
            other => other,
        };
        Collective::ALL
            .into_iter()
            .find(|c| c.name() == alias)
            .ok_or_else(|| {
                let names: Vec<&str> = Collective::ALL.iter().map(|c| c.name()).collect();
                Error::unknown("collective", s, &names)
            })
    }
}

/// The algorithm a dimension runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// Pick the fastest applicable algorithm per dimension.
    Auto,
    /// Ring (bandwidth-optimal, p−1 latency steps per pass).
    Ring,
    /// Direct: every NPU exchanges with every other at once.
    Direct,
    /// Recursive halving / doubling (Rabenseifner); recursive doubling handles p not a power of 2.
    HalvingDoubling,
    /// NCCL's double binary tree.
    DoubleBinaryTree,
    /// Parameter server: everyone pushes to one server and pulls back (incast at the server).
    ParameterServer,
    /// In-network reduction in the switch (SHARP, NVLS).
    InNetwork,
}

impl Algorithm {
    /// Every algorithm, in display order.
    pub const ALL: [Algorithm; 7] = [
        Algorithm::Auto,
        Algorithm::Ring,
        Algorithm::Direct,
        Algorithm::HalvingDoubling,
        Algorithm::DoubleBinaryTree,
        Algorithm::ParameterServer,
        Algorithm::InNetwork,
    ];

    /// The command-line name (`halving-doubling`).
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Auto => "auto",
            Algorithm::Ring => "ring",
            Algorithm::Direct => "direct",
            Algorithm::HalvingDoubling => "halving-doubling",
            Algorithm::DoubleBinaryTree => "double-binary-tree",
            Algorithm::ParameterServer => "parameter-server",
            Algorithm::InNetwork => "in-network",
        }
    }

    /// Parses a name with did-you-mean.
    pub fn parse(s: &str) -> Result<Algorithm> {
        let norm = s.trim().to_ascii_lowercase().replace('_', "-");
        let alias = match norm.as_str() {
            "halvingdoubling" | "hd" | "rabenseifner" | "recursive-doubling" => "halving-doubling",
            "tree" | "dbt" | "doublebinarytree" => "double-binary-tree",
            "ps" | "parameterserver" => "parameter-server",
            "sharp" | "nvls" | "innetwork" => "in-network",
            other => other,
        };
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == alias)
            .ok_or_else(|| {
                let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                Error::unknown("algorithm", s, &names)
            })
    }
}

/// How phases of a multi-dimensional collective are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// As NCCL runs it (`nccl.rs`): phases pipelined (latency once, the busiest dimension
    /// sets the rate) and, for all-reduce, reduce-scatter and all-gather, one ring across
    /// all ranks; the faster is kept under `auto`. Chunks do not apply.
    #[default]
    Nccl,
    /// Fixed order: reduce-scatter innermost → outermost, all-gather back, `chunks`
    /// pipelined (ASTRA-sim's baseline).
    Baseline,
    /// Themis-style (ISCA'22) greedy per-chunk ordering that balances the dimensions' load.
    Themis,
}

/// Options of one collective evaluation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Options {
    /// Algorithm on every dimension (`Auto` picks per dimension).
    pub algorithm: Algorithm,
    /// Number of chunks the buffer is split into to pipeline phases across dimensions (≥ 1).
    pub chunks: u32,
    /// Phase scheduling across dimensions.
    pub schedule: Schedule,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            algorithm: Algorithm::Auto,
            chunks: 1,
            schedule: Schedule::Nccl,
        }
    }
}

impl Schedule {
    /// Every schedule, in display order.
    pub const ALL: [Schedule; 3] = [Schedule::Nccl, Schedule::Baseline, Schedule::Themis];

    /// The command-line and TOML name.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::Nccl => "nccl",
            Schedule::Baseline => "baseline",
            Schedule::Themis => "themis",
        }
    }

    /// Parses a name with did-you-mean.
    pub fn parse(s: &str) -> Result<Schedule> {
        let norm = s.trim().to_ascii_lowercase();
        Schedule::ALL
            .into_iter()
            .find(|x| x.name() == norm)
            .ok_or_else(|| Error::unknown("schedule", s, &["nccl", "baseline", "themis"]))
    }
}

/// The time of one phase (one dimension's share of the collective).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Phase {
    /// Index of the dimension this phase runs on.
    pub dim: usize,
    /// The collective this phase performs on that dimension (all-reduce becomes
    /// reduce-scatter / all-reduce / all-gather phases).
    pub op: Collective,
    /// The algorithm it runs.
    pub algorithm: Algorithm,
    /// Bytes per NPU entering this phase (nccl-tests convention for `op`).
    pub size: Bytes,
    /// Latency part of its time (α terms).
    pub latency: Seconds,
    /// Bandwidth part of its time (β terms).
    pub transfer: Seconds,
}

impl Phase {
    /// Latency + transfer.
    pub fn time(&self) -> Seconds {
        self.latency + self.transfer
    }
}

/// The cost of a collective: total time and the phases that make it up. Fixed-size, so it
/// lives on the stack.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollectiveTime {
    /// End-to-end time.
    pub total: Seconds,
    /// Number of valid entries in `phases`.
    pub n_phases: usize,
    /// The phases in execution order (first `n_phases` are valid).
    pub phases: [Phase; 2 * MAX_DIMS],
    /// The schedule the result follows: `Themis` only when it was asked for and its greedy
    /// ordering beat the baseline order.
    pub schedule: Schedule,
    /// The phases are one ring across all ranks (one entry per dimension it crosses), not
    /// hierarchical phases (NCCL schedule only).
    pub flat_ring: bool,
}

impl CollectiveTime {
    /// The valid phases.
    pub fn phases(&self) -> &[Phase] {
        &self.phases[..self.n_phases]
    }
}

/// The time of `op` on `size` bytes per NPU spanning all of `dims` (a group of Π p_d NPUs).
///
/// Dimensions of size 1 are skipped; a group of one costs exactly zero. The composition
/// across dimensions (hierarchical phases, chunk pipelining, Themis balancing) is described
/// in `compose.rs`; the per-dimension closed forms in the algorithm files.
///
/// Errors: an algorithm that does not apply (halving-doubling all-to-all, in-network on a
/// ring), more than [`MAX_DIMS`] dimensions, a zero chunk count, a negative size.
pub fn time(op: Collective, size: Bytes, dims: &[Dim], opts: &Options) -> Result<CollectiveTime> {
    compose::time(op, size, dims, opts)
}

/// `time(op, size, dims, opts)?.total` without building the phase list: the same number,
/// computed on the hot path of estimates and sweeps. Allocates nothing.
pub fn total(op: Collective, size: Bytes, dims: &[Dim], opts: &Options) -> Result<Seconds> {
    compose::total(op, size, dims, opts)
}

/// The cost of `op` on one dimension with algorithm `alg` (not `Auto`).
pub fn dim_cost(op: Collective, alg: Algorithm, dim: &Dim) -> Result<Cost> {
    match alg {
        Algorithm::Ring => ring::cost(op, dim),
        Algorithm::Direct => direct::cost(op, dim),
        Algorithm::HalvingDoubling => halving_doubling::cost(op, dim),
        Algorithm::DoubleBinaryTree => tree::cost(op, dim),
        Algorithm::ParameterServer => parameter_server::cost(op, dim),
        Algorithm::InNetwork => in_network::cost(op, dim),
        Algorithm::Auto => Err(Error::Internal(
            "dim_cost needs a concrete algorithm; use select()".into(),
        )),
    }
}

/// Whether `alg` implements `op` on `dim` (checked without allocating; `Auto` always does).
pub fn applies(op: Collective, alg: Algorithm, dim: &Dim) -> bool {
    match alg {
        Algorithm::Auto | Algorithm::Ring | Algorithm::Direct => true,
        Algorithm::HalvingDoubling => halving_doubling::applies(op, dim),
        Algorithm::DoubleBinaryTree => tree::applies(op, dim),
        Algorithm::ParameterServer => parameter_server::applies(op, dim),
        Algorithm::InNetwork => in_network::applies(op, dim),
    }
}

/// The algorithm `alg` resolves to for `op` on `dim` with `size` bytes, and its cost.
/// `Auto` tries every algorithm that applies and keeps the fastest (ties go to the earlier
/// one in [`Algorithm::ALL`]).
pub fn select(op: Collective, alg: Algorithm, dim: &Dim, size: Bytes) -> Result<(Algorithm, Cost)> {
    if alg != Algorithm::Auto {
        return dim_cost(op, alg, dim).map(|c| (alg, c));
    }
    let mut best: Option<(Algorithm, Cost, Seconds)> = None;
    for a in &Algorithm::ALL[1..] {
        if !applies(op, *a, dim) {
            continue;
        }
        if let Ok(c) = dim_cost(op, *a, dim) {
            let t = c.time(dim, size);
            if best.is_none_or(|(_, _, bt)| t < bt) {
                best = Some((*a, c, t));
            }
        }
    }
    best.map(|(a, c, _)| (a, c))
        .ok_or_else(|| Error::Internal(format!("no algorithm applies to {}", op.name())))
}

/// nccl-tests bus-bandwidth factor for `op` on a group of `p` NPUs
/// (nccl-tests `doc/PERFORMANCE.md`): 2(p−1)/p for all-reduce; (p−1)/p for reduce-scatter,
/// all-gather, all-to-all, gather and scatter; 1 for broadcast, reduce and send/recv.
pub fn busbw_factor(op: Collective, p: u64) -> f64 {
    let pf = p as f64;
    if p <= 1 {
        return 1.0;
    }
    match op {
        Collective::AllReduce => 2.0 * (pf - 1.0) / pf,
        Collective::ReduceScatter
        | Collective::AllGather
        | Collective::AllToAll
        | Collective::Gather
        | Collective::Scatter => (pf - 1.0) / pf,
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
    }
}

/// nccl-tests algorithm bandwidth n / T and bus bandwidth n / T · factor; both zero for a
/// zero time (a group of one).
pub fn bandwidths(op: Collective, size: Bytes, p: u64, t: Seconds) -> (Bandwidth, Bandwidth) {
    if t.get() <= 0.0 {
        return (Bandwidth::ZERO, Bandwidth::ZERO);
    }
    let alg = size / t;
    (alg, alg * busbw_factor(op, p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::DimKind;
    use approx::assert_relative_eq;

    fn ring8() -> Dim {
        Dim::new(DimKind::Ring, 8, Bandwidth::new(1e11), Seconds::new(500e-9)).unwrap()
    }

    #[test]
    fn acceptance_example() {
        let t = time(
            Collective::AllReduce,
            Bytes::new(1e9),
            &[ring8()],
            &Options::default(),
        )
        .unwrap();
        let expect = 2.0 * 7.0 * 500e-9 + 2.0 * 7.0 / 8.0 * 1e9 / 1e11;
        assert_relative_eq!(t.total.get(), expect, max_relative = 1e-12);
        assert_eq!(t.phases()[0].algorithm, Algorithm::Ring);
        let (_, bus) = bandwidths(Collective::AllReduce, Bytes::new(1e9), 8, t.total);
        assert_relative_eq!(bus.get(), 1e9 / expect * 1.75, max_relative = 1e-12);
        assert!((bus.get() / 1e9 - 99.96).abs() < 0.005);
    }

    #[test]
    fn two_dim_all_reduce_phases() {
        // ring(4, 200GB/s, 0.5us) x switch(8, 50GB/s, 1us), ring everywhere, n = 1 GB:
        // RS on ring 4 with n, AR on switch 8 with n/4, AG on ring 4 with n.
        let r = Dim::new(
            DimKind::Ring,
            4,
            Bandwidth::new(200e9),
            Seconds::new(0.5e-6),
        )
        .unwrap();
        let s = Dim::new(DimKind::Switch, 8, Bandwidth::new(50e9), Seconds::new(1e-6)).unwrap();
        let o = Options {
            algorithm: Algorithm::Ring,
            schedule: Schedule::Baseline,
            ..Options::default()
        };
        let t = time(Collective::AllReduce, Bytes::new(1e9), &[r, s], &o).unwrap();
        let rs = 3.0 * 0.5e-6 + 0.75 * 1e9 / 200e9;
        let ar = 14.0 * 1e-6 + 2.0 * 7.0 / 8.0 * 0.25e9 / 50e9;
        assert_eq!(t.n_phases, 3);
        assert_relative_eq!(t.total.get(), 2.0 * rs + ar, max_relative = 1e-12);
    }

    #[test]
    fn auto_keeps_the_earlier_algorithm_on_a_tie() {
        // Two ranks on a switch, all-reduce of n: the ring takes 2·(2−1) = 2 steps of n/2
        // (2α + n/B) and the double binary tree 2·log₂2 = 2 steps moving n (2α + n/B):
        // equal, so `auto` keeps the ring, the earlier of `Algorithm::ALL`.
        let d = Dim::new(
            DimKind::Switch,
            2,
            Bandwidth::new(100e9),
            Seconds::new(1e-6),
        )
        .unwrap();
        let n = Bytes::new(1024.0 * 1024.0);
        let op = Collective::AllReduce;
        let ring = dim_cost(op, Algorithm::Ring, &d).unwrap().time(&d, n);
        let tree = dim_cost(op, Algorithm::DoubleBinaryTree, &d)
            .unwrap()
            .time(&d, n);
        assert_relative_eq!(
            ring.get(),
            2e-6 + 1024.0 * 1024.0 / 100e9,
            max_relative = 1e-12
        );
        assert_eq!(ring, tree, "the case is a tie");
        let (a, c) = select(op, Algorithm::Auto, &d, n).unwrap();
        assert_eq!(a, Algorithm::Ring);
        assert_eq!(c.time(&d, n), ring);
    }
}

//! The ASTRA-sim-faithful model of one collective on the congestion-unaware analytical
//! backend, in integer nanoseconds, as ASTRA-sim computes it (HEAD 518bd51; the mechanism
//! is described in `validation/astra/ASTRA_NOTES.md` and read from `Sys.cc`,
//! `Ring.cc`, `AllToAll.cc`, `HalvingDoubling.cc`, `DoubleBinaryTreeAllReduce.cc`,
//! `MemBus.cc`, `BasicTopology.cpp`):
//!
//! 1. **Chunking** (`Sys::generate_collective`, `determine_chunk_size`): c = ⌊D/S⌋; except
//!    for all-gather, if the system's NPU count N > c then c = N and D = S·N (padding).
//!    ⌈D/c⌉ chunks (streams) of c bytes each (the last one padded to c).
//! 2. **Phases** per chunk (one per involved dimension with p > 1): RS/AG/A2A one per
//!    dimension, ascending (all-gather descending); all-reduce `localBWAware` = RS on every
//!    dimension but the last, AR on the last, AG back; `baseline` = AR on every dimension.
//!    Each phase's output size feeds the next (RS: c/p, AG: c·p).
//! 3. **Phase time**: closed forms in [`phases`] (message T(m) = ⌊h·L + m/β⌋, endpoint
//!    delay E per inserted packet, local reduction R(m) = 3·⌊m/LMBW⌋).
//! 4. **Queues** ([`schedule`]): one queue per dimension running at most
//!    ⌈A/queues⌉ chunks at once; waiting chunks ordered by priority (LIFO: newest first).
//!
//! The result reproduces all congestion-unaware reference runs to the nanosecond.

use super::network_yaml::AstraNetwork;
use super::phases::{self, LogicalDim, PhaseOp};
use super::schedule;
use super::system_json::{AstraSystem, Optimization, Policy};
use crate::error::{Error, Result};

pub use super::phases::Impl;

/// The collectives ASTRA-sim's `COMM_COLL_NODE` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// ALL_REDUCE
    AllReduce,
    /// REDUCE_SCATTER
    ReduceScatter,
    /// ALL_GATHER (`comm_size` is the per-NPU input)
    AllGather,
    /// ALL_TO_ALL
    AllToAll,
}

impl Op {
    /// Maps the crate's collective names; other collectives do not exist in ASTRA-sim's
    /// native implementations.
    pub fn from_collective(c: crate::collective::Collective) -> Result<Op> {
        use crate::collective::Collective as C;
        match c {
            C::AllReduce => Ok(Op::AllReduce),
            C::ReduceScatter => Ok(Op::ReduceScatter),
            C::AllGather => Ok(Op::AllGather),
            C::AllToAll => Ok(Op::AllToAll),
            other => Err(Error::Unsupported(format!(
                "ASTRA-sim has no native '{}'; use all-reduce, reduce-scatter, all-gather or all-to-all",
                other.name()
            ))),
        }
    }
    /// Name as in the crate (`all-reduce`).
    pub fn name(self) -> &'static str {
        match self {
            Op::AllReduce => "all-reduce",
            Op::ReduceScatter => "reduce-scatter",
            Op::AllGather => "all-gather",
            Op::AllToAll => "all-to-all",
        }
    }
    fn phase_op(self) -> PhaseOp {
        match self {
            Op::AllReduce => PhaseOp::AllReduce,
            Op::ReduceScatter => PhaseOp::ReduceScatter,
            Op::AllGather => PhaseOp::AllGather,
            Op::AllToAll => PhaseOp::AllToAll,
        }
    }
}

/// Command-line knobs of ASTRA-sim's analytical frontend.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Knobs {
    /// `--num-queues-per-dim` (default 1).
    pub queues_per_dim: u32,
    /// `--injection-scale`: multiplies the endpoint delay (default 1).
    pub injection_scale: f64,
    /// `--comm-scale`: multiplies every collective's size (default 1).
    pub comm_scale: f64,
    /// Model the congestion-aware backend (1-D Switch rules; see `phases`) instead of the
    /// congestion-unaware one.
    pub congestion_aware: bool,
}

impl Default for Knobs {
    fn default() -> Self {
        Knobs {
            queues_per_dim: 1,
            injection_scale: 1.0,
            comm_scale: 1.0,
            congestion_aware: false,
        }
    }
}

/// Maximum phases per chunk (RS + AR + AG over 8 dimensions).
pub const MAX_PHASES: usize = 16;

/// One phase of a chunk: where it runs and how long it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PhaseTime {
    /// Queue (network dimension) index.
    pub dim: usize,
    /// What the phase does.
    pub op: PhaseOp,
    /// Implementation.
    pub imp: Impl,
    /// Bytes entering the phase.
    pub bytes: u64,
    /// Duration for one chunk, ns.
    pub ns: u64,
}

/// The result for one collective.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Breakdown {
    /// Finish time, ns.
    pub total_ns: u64,
    /// Bytes after scaling and padding (D').
    pub size: u64,
    /// Chunk size c.
    pub chunk: u64,
    /// Number of chunks (streams).
    pub chunks: u64,
    /// Concurrent chunks per queue.
    pub active: u32,
    /// Number of valid phases.
    pub n_phases: usize,
    /// Phases of one chunk in order.
    pub phases: [PhaseTime; MAX_PHASES],
}

impl Breakdown {
    /// The valid phases.
    pub fn phases(&self) -> &[PhaseTime] {
        &self.phases[..self.n_phases]
    }
}

/// The implementation list of `op` in `sys`.
pub fn impls(sys: &AstraSystem, op: Op) -> &[Impl] {
    match op {
        Op::AllReduce => &sys.all_reduce,
        Op::ReduceScatter => &sys.reduce_scatter,
        Op::AllGather => &sys.all_gather,
        Op::AllToAll => &sys.all_to_all,
    }
}

/// Time of `op` with Chakra `comm_size` bytes over the whole system (or the dimensions
/// flagged in `involved`, Chakra's `involved_dim`).
pub fn collective(
    op: Op,
    comm_size: u64,
    net: &AstraNetwork,
    sys: &AstraSystem,
    knobs: &Knobs,
    involved: Option<&[bool]>,
) -> Result<Breakdown> {
    let list = impls(sys, op);
    if list.is_empty() {
        return Err(Error::input(
            format!("{}-implementation", op.name()),
            "is missing from the system JSON",
        ));
    }
    if list.len() > net.dims.len() {
        return Err(Error::input(
            format!("{}-implementation", op.name()),
            format!(
                "lists {} dimensions but the network has {}",
                list.len(),
                net.dims.len()
            ),
        ));
    }
    // The implementation list's length sets the logical dimensions (GeneralComplexTopology).
    let mut dims = [LogicalDim::default(); 8];
    let k = list.len().min(8);
    let flat = list[0].is_one();
    for (i, d) in dims.iter_mut().enumerate().take(k) {
        *d = LogicalDim::physical(&net.dims[i], i);
        if knobs.congestion_aware {
            *d = d.congestion_aware();
        }
    }
    let (dims, imps): (&[LogicalDim], &[Impl]) = if flat {
        // one* implementations run one logical ring/direct/HD over all NPUs.
        dims[0] = LogicalDim::flattened(net, k);
        if knobs.congestion_aware {
            dims[0] = dims[0].congestion_aware();
        }
        (&dims[..1], &list[..1])
    } else {
        (&dims[..k], &list[..k])
    };
    let total_nodes = net.npus();
    run(op, comm_size, dims, imps, total_nodes, sys, knobs, involved)
}

/// The shared engine: chunking, phases and queues over explicit logical dimensions.
#[allow(clippy::too_many_arguments)]
pub fn run(
    op: Op,
    comm_size: u64,
    dims: &[LogicalDim],
    imps: &[Impl],
    total_nodes: u64,
    sys: &AstraSystem,
    knobs: &Knobs,
    involved: Option<&[bool]>,
) -> Result<Breakdown> {
    let (size, chunk, chunks) = chunking(op, comm_size, total_nodes, sys, knobs)?;
    let mut b = Breakdown {
        total_ns: 0,
        size,
        chunk,
        chunks,
        active: 0,
        n_phases: 0,
        phases: [PhaseTime::default(); MAX_PHASES],
    };
    let e = (sys.endpoint_delay_ns as f64 * knobs.injection_scale).round();
    if e.is_nan() || e > phases::MAX_NS as f64 {
        return Err(Error::input(
            "endpoint-delay × --injection-scale",
            format!("is {e:?} ns, more than 2^62 ns (about 146 years), beyond ASTRA-sim's clock"),
        ));
    }
    let e = e as u64;
    if e == 0 {
        return Err(Error::input(
            "endpoint-delay × --injection-scale",
            "is 0 ns: ASTRA-sim aborts (EventQueue.cpp: assert(event_time > current_time))",
        ));
    }
    let used =
        |i: usize| dims[i].npus > 1 && involved.is_none_or(|v| v.get(i).copied().unwrap_or(false));
    let order = phase_plan(op, sys.optimization, dims.len(), &used);
    let mut bytes = chunk;
    for (dim, pop) in order.iter().flatten().copied() {
        let imp = imps[dim];
        let ns = phases::phase_ns(imp, pop, bytes, &dims[dim], e, sys.local_mem_bw_gbps)
            .map_err(|err| err.context(format!("{} of {} B", op.name(), comm_size)))?;
        b.phases[b.n_phases] = PhaseTime {
            dim: dims[dim].queue,
            op: pop,
            imp,
            bytes,
            ns,
        };
        b.n_phases += 1;
        bytes = phases::output_bytes(imp, pop, bytes, dims[dim].npus);
    }
    let q = knobs.queues_per_dim.max(1);
    b.active = sys.active_chunks.div_ceil(q) * q;
    let lifo = sys.policy == Policy::Lifo;
    // The schedule finishes within chunks × Σ phases; bounding that keeps it from wrapping.
    let serial: u128 = b.phases().iter().map(|p| u128::from(p.ns)).sum();
    phases::fit_ns(serial * u128::from(chunks), "collective")?;
    b.total_ns = schedule::finish_ns(b.phases(), chunks, b.active, lifo);
    Ok(b)
}

/// Chunking of `Sys::generate_collective`: returns (padded size D', chunk c, ⌈D'/c⌉).
pub fn chunking(
    op: Op,
    comm_size: u64,
    total_nodes: u64,
    sys: &AstraSystem,
    knobs: &Knobs,
) -> Result<(u64, u64, u64)> {
    let scaled = (comm_size as f64 * knobs.comm_scale).floor();
    let max = crate::units::BYTES_RANGE.max;
    if scaled.is_nan() || scaled > max {
        return Err(Error::input(
            "size × --comm-scale",
            format!("is {scaled:?} B, more than the maximum of 1 PiB ({max} B)"),
        ));
    }
    let mut d = scaled as u64;
    if d == 0 {
        return Err(Error::input(
            "size",
            "is 0 bytes: ASTRA-sim cannot complete a zero-byte collective",
        ));
    }
    let s = sys.splits as u64;
    let mut c = d / s;
    if op != Op::AllGather && total_nodes > c {
        c = total_nodes;
        d = s * c;
    }
    if c == 0 {
        return Err(Error::input(
            "size",
            format!(
                "all-gather of {d} B split into {s} chunks gives 0-byte chunks, which ASTRA-sim \
                 cannot run; use at least {s} B or fewer preferred-dataset-splits"
            ),
        ));
    }
    let chunks = d.div_ceil(c);
    crate::limits::CHUNKS.check(chunks, "preferred-dataset-splits (chunks per collective)")?;
    Ok((d, c, chunks))
}

type Plan = [Option<(usize, PhaseOp)>; MAX_PHASES];

/// The phase order of one chunk (`Sys::generate_collective`).
fn phase_plan(op: Op, opt: Optimization, n: usize, used: &dyn Fn(usize) -> bool) -> Plan {
    let mut plan: Plan = [None; MAX_PHASES];
    let mut k = 0;
    let mut push = |d: usize, p: PhaseOp| {
        if k < MAX_PHASES {
            plan[k] = Some((d, p));
            k += 1;
        }
    };
    match (op, opt) {
        (Op::AllReduce, Optimization::LocalBwAware) => {
            let last = (0..n).rev().find(|&d| used(d));
            if let Some(last) = last {
                (0..last)
                    .filter(|&d| used(d))
                    .for_each(|d| push(d, PhaseOp::ReduceScatter));
                push(last, PhaseOp::AllReduce);
                (0..last)
                    .rev()
                    .filter(|&d| used(d))
                    .for_each(|d| push(d, PhaseOp::AllGather));
            }
        }
        (Op::AllGather, _) => (0..n)
            .rev()
            .filter(|&d| used(d))
            .for_each(|d| push(d, op.phase_op())),
        _ => (0..n)
            .filter(|&d| used(d))
            .for_each(|d| push(d, op.phase_op())),
    }
    plan
}

//! Whole Chakra workloads: reads `<prefix>.<rank>.et` for every NPU of the network (in
//! parallel), turns each node into a compact task with its cost, and hands the per-NPU
//! DAGs to [`super::critical`] for the critical path.
//!
//! Costs, as ASTRA-sim's `Workload` and `Roofline` assign them:
//! - COMP_NODE with roofline: ⌊1e9 · num_ops / min(LMBW · num_ops / tensor_size, peak)⌋ ns,
//!   LMBW = local-mem-bw ×1e9 B/s, peak = peak-perf ×1e12 FLOP/s (`num_ops` and
//!   `tensor_size` are read as FLOP and bytes, whatever the generator meant); nodes with
//!   tensor_size 0 or num_ops 0 cost nothing. Without roofline: the recorded
//!   `duration_micros` ×1000.
//!   A COMP_NODE with `is_cpu_op` true runs on the host CPU: ASTRA-sim replays its
//!   recorded duration whatever the roofline says (`Workload::issue`, astra-sim 518bd513).
//! - MEM_LOAD/STORE_NODE with a remote memory (`sys.remote`, any type but
//!   NO_MEMORY_EXPANSION): `remote-mem-latency + ⌊tensor_size / remote-mem-bw⌋` ns
//!   (`Workload::issue_remote_mem` → `AnalyticalRemoteMemory::get_remote_mem_runtime`),
//!   waiting in its node's or the pool's FIFO queue for the shared types
//!   ([`Workload::mem_queue`]). Without one: tensor_size / LMBW (local memory; ASTRA-sim
//!   itself stops at the first MEM node under NO_MEMORY_EXPANSION).
//! - COMM_COLL_NODE: [`super::model`] for the whole system (no `pg_name`) or for the
//!   communicator group named by `pg_name` (`--comm-group-configuration`): one logical
//!   dimension over the group's members, whose links are those of the slowest network
//!   dimension between consecutive members (ASTRA-sim routes each message in the first
//!   dimension where the two ranks differ).
//! - COMM_SEND/RECV_NODE: one message T_h(comm_size) between the two ranks.

use super::chakra::{self, node_type};
use super::lean;
use super::model::{self, Knobs, Op};
use super::network_yaml::AstraNetwork;
use super::phases::{Impl, LogicalDim, MAX_NS, fit_ns};
use super::system_json::AstraSystem;
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::collections::HashMap;
use std::path::Path;

mod build;
use build::{Interner, intern, link};

/// What a task does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Computation on the NPU's compute unit.
    Comp,
    /// Computation on the host CPU (a COMP_NODE with `is_cpu_op`).
    Cpu,
    /// Memory access (remote, or local without a remote memory).
    Mem,
    /// Collective number `.0` of [`Workload::collectives`].
    Coll(u32),
    /// Send to rank `.0` with tag `.1`.
    Send(u32, u64),
    /// Receive from rank `.0` with tag `.1`.
    Recv(u32, u64),
    /// Costs nothing (metadata and unknown node types).
    Nop,
}

/// One node of one NPU's DAG.
#[derive(Clone, Copy, Debug)]
pub struct Task {
    /// Chakra node id (issue order among ready nodes).
    pub id: u64,
    /// What it does.
    pub kind: Kind,
    /// Duration in ns (compute, memory, message time).
    pub ns: u64,
    /// Number of dependencies.
    pub deps: u32,
}

/// One NPU's DAG: tasks and successor lists (CSR).
#[derive(Clone, Debug, Default)]
pub struct Npu {
    /// Tasks in file order.
    pub tasks: Vec<Task>,
    /// `succ[succ_start[i]..succ_start[i+1]]` are the tasks that wait for task i.
    pub succ_start: Vec<u32>,
    /// Successor indices.
    pub succ: Vec<u32>,
}

/// A distinct collective of the workload: its group and its cost.
#[derive(Clone, Debug, PartialEq)]
pub struct CollInfo {
    /// Collective.
    pub op: Op,
    /// comm_size, bytes.
    pub size: u64,
    /// Group key (`pg_name`, or "" for all NPUs).
    pub group: String,
    /// Members (ranks).
    pub members: Vec<u32>,
    /// Duration of the whole collective (the closed-form model), ns.
    pub ns: u64,
    /// Pieces it runs in, `active` at a time (its chunks when it has one
    /// phase; 1 piece of `ns` for multi-phase collectives).
    pub pieces: u64,
    /// Duration of one piece, ns.
    pub piece_ns: u64,
}

/// A whole workload ready for the critical path.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    /// One DAG per NPU.
    pub npus: Vec<Npu>,
    /// Distinct collectives.
    pub collectives: Vec<CollInfo>,
    /// Pieces a collective runs at once (active-chunks-per-dimension, rounded up to a
    /// multiple of the queues per dimension).
    pub active: u32,
    /// Per NPU: the remote-memory queue its MEM nodes wait in, one access at a time
    /// (its node's for PER_NODE_MEMORY_EXPANSION, the pool's for MEMORY_POOL), or none
    /// (empty when no NPU has one).
    pub mem_queue: Vec<Option<u32>>,
}

/// Communicator groups: `{"<id>": [ranks...], ...}` (ASTRA-sim `--comm-group-configuration`).
pub fn read_comm_groups(text: &str, what: &str) -> Result<HashMap<String, Vec<u32>>> {
    serde_json::from_str(text).map_err(|e| Error::File {
        path: what.into(),
        message: format!("{e} (expected {{\"<group id>\": [rank, ...], ...}})"),
    })
}

/// Inputs shared by every NPU's conversion.
pub struct Ctx<'a> {
    /// The network.
    pub net: &'a AstraNetwork,
    /// The system.
    pub sys: &'a AstraSystem,
    /// Frontend knobs.
    pub knobs: &'a Knobs,
    /// Communicator groups, if given.
    pub groups: Option<&'a HashMap<String, Vec<u32>>>,
}

impl<'a> Ctx<'a> {
    /// The inputs, with default frontend knobs when `knobs` is None.
    pub fn new(
        net: &'a AstraNetwork,
        sys: &'a AstraSystem,
        knobs: &'a Knobs,
        groups: Option<&'a HashMap<String, Vec<u32>>>,
    ) -> Ctx<'a> {
        Ctx {
            net,
            sys,
            knobs,
            groups,
        }
    }
}

/// Reads every NPU's trace under `prefix` (in parallel, with the lean reader) and converts it.
pub fn load(prefix: &Path, ctx: &Ctx) -> Result<Workload> {
    let n = ctx.net.npus() as usize;
    check_count(n, ctx)?;
    // Decode and convert each file in one step, so only the compact tasks of every NPU
    // stay in memory (not the decoded records of all files at once). Results are gathered
    // in rank order, so an error is always the lowest rank's (not whichever thread failed
    // first).
    let nodes = std::sync::atomic::AtomicU64::new(0);
    let per: Vec<(Npu, Vec<CollKey>)> = (0..n)
        .into_par_iter()
        .map(|r| {
            let path = chakra::rank_path(prefix, r);
            let bytes = crate::limits::read_bytes(&path)?;
            let recs = lean::decode(&bytes, &path.display().to_string())?;
            drop(bytes);
            let seen =
                nodes.fetch_add(recs.recs.len() as u64, std::sync::atomic::Ordering::Relaxed);
            crate::limits::TRACE_NODES.check(seen + recs.recs.len() as u64, "workload")?;
            convert_npu(&recs, r, ctx)
        })
        .collect::<Vec<_>>()
        .into_iter()
        .collect::<Result<_>>()?;
    merge(per, ctx)
}

fn check_count(n: usize, ctx: &Ctx) -> Result<()> {
    if n as u64 != ctx.net.npus() {
        return Err(Error::input(
            "workload",
            format!("{n} traces for a network of {} NPUs", ctx.net.npus()),
        ));
    }
    ctx.sys.remote.check_npus(n as u64, "remote memory")
}

/// Converts decoded traces (one per NPU, rank order) into a [`Workload`].
pub fn convert(files: &[chakra::TraceFile], ctx: &Ctx) -> Result<Workload> {
    let recs: Vec<lean::Recs> = files.iter().map(lean::from_trace).collect();
    convert_recs(&recs, ctx)
}

type CollKey = (Op, u64, Box<str>, Vec<bool>);

/// Converts lean records (one per NPU, rank order) into a [`Workload`]: NPUs in
/// parallel, then the distinct collectives are costed once each.
pub fn convert_recs(files: &[lean::Recs], ctx: &Ctx) -> Result<Workload> {
    check_count(files.len(), ctx)?;
    let per: Vec<(Npu, Vec<CollKey>)> = files
        .par_iter()
        .enumerate()
        .map(|(rank, f)| convert_npu(f, rank, ctx))
        .collect::<Vec<_>>()
        .into_iter()
        .collect::<Result<_>>()?;
    merge(per, ctx)
}

/// Numbers the distinct collectives of all NPUs, costs each once, and points every
/// collective task at its global entry.
fn merge(per: Vec<(Npu, Vec<CollKey>)>, ctx: &Ctx) -> Result<Workload> {
    let mut colls: Vec<CollInfo> = Vec::new();
    let mut index: HashMap<CollKey, u32> = HashMap::new();
    let mut npus = Vec::with_capacity(per.len());
    for (mut npu, keys) in per {
        let mut global = Vec::with_capacity(keys.len());
        for key in keys {
            let id = match index.get(&key) {
                Some(&i) => i,
                None => {
                    colls.push(coll_info(&key, ctx)?);
                    index.insert(key, colls.len() as u32 - 1);
                    colls.len() as u32 - 1
                }
            };
            global.push(id);
        }
        for t in &mut npu.tasks {
            if let Kind::Coll(local) = t.kind {
                t.kind = Kind::Coll(global[local as usize]);
            }
        }
        npus.push(npu);
    }
    check_total(&npus, &colls)?;
    let q = ctx.knobs.queues_per_dim.max(1);
    let mem_queue = (0..npus.len() as u32)
        .map(|r| ctx.sys.remote.queue(r))
        .collect::<Vec<_>>();
    let shared = mem_queue.iter().any(Option::is_some);
    Ok(Workload {
        npus,
        collectives: colls,
        active: ctx.sys.active_chunks.div_ceil(q) * q,
        mem_queue: if shared { mem_queue } else { Vec::new() },
    })
}

/// One NPU's tasks; `Kind::Coll` holds an index into the returned keys.
fn convert_npu(f: &lean::Recs, rank: usize, ctx: &Ctx) -> Result<(Npu, Vec<CollKey>)> {
    let mut keys = Interner::default();
    let mut tasks = Vec::with_capacity(f.recs.len());
    for r in &f.recs {
        let t = task_cost(r, rank, ctx, &mut keys)
            .map_err(|e| e.context(format!("rank {rank} node {}", r.id)))?;
        tasks.push(t);
    }
    Ok((link(f, tasks, rank)?, keys.keys))
}

fn task_cost(r: &lean::Rec, rank: usize, ctx: &Ctx, keys: &mut Interner) -> Result<Task> {
    let mut t = Task {
        id: r.id,
        kind: Kind::Nop,
        ns: 0,
        deps: 0,
    };
    let lmbw = ctx.sys.local_mem_bw_gbps;
    match r.ty {
        node_type::COMP if r.uint(lean::IS_CPU_OP)?.unwrap_or(0) != 0 => {
            t.kind = Kind::Cpu;
            t.ns = fit_ns(u128::from(r.duration_micros) * 1000, "duration_micros")?;
        }
        node_type::COMP => {
            t.kind = Kind::Comp;
            t.ns = comp_ns(r, ctx.sys)?;
        }
        node_type::MEM_LOAD | node_type::MEM_STORE => {
            t.kind = Kind::Mem;
            let size = r.uint(lean::TENSOR_SIZE)?.unwrap_or(0);
            let ns = if ctx.sys.remote.is_remote() {
                ctx.sys.remote.access_ns(size)
            } else {
                (size as f64 / lmbw).floor()
            };
            t.ns = float_ns(ns, "memory access")?;
        }
        node_type::COMM_COLL => {
            t.kind = Kind::Coll(intern(keys, r)?);
        }
        node_type::COMM_SEND | node_type::COMM_RECV => {
            let send = r.ty == node_type::COMM_SEND;
            let (k, peer_key) = if send {
                (lean::COMM_DST, "comm_dst")
            } else {
                (lean::COMM_SRC, "comm_src")
            };
            let peer = r
                .uint(k)?
                .ok_or_else(|| Error::input(peer_key, "missing"))?;
            if peer >= ctx.net.npus() {
                return Err(Error::input(
                    peer_key,
                    format!("rank {peer} is outside the network"),
                ));
            }
            let tag = r.uint(lean::COMM_TAG)?.unwrap_or(0);
            let size = r.uint(lean::COMM_SIZE)?.unwrap_or(0);
            t.ns = fit_ns(p2p_ns(ctx.net, rank as u64, peer, size).into(), "message")?;
            t.kind = if send {
                Kind::Send(peer as u32, tag)
            } else {
                Kind::Recv(peer as u32, tag)
            };
        }
        _ => {}
    }
    Ok(t)
}

/// Roofline (or recorded) time of a compute node, ns.
fn comp_ns(r: &lean::Rec, sys: &AstraSystem) -> Result<u64> {
    if !sys.roofline {
        return fit_ns(u128::from(r.duration_micros) * 1000, "duration_micros");
    }
    let ops = r.uint(lean::NUM_OPS)?.unwrap_or(0) as f64;
    let bytes = r.uint(lean::TENSOR_SIZE)?.unwrap_or(0) as f64;
    if ops == 0.0 || bytes == 0.0 {
        return Ok(0);
    }
    let peak = sys.peak_perf_tflops * 1e12;
    if peak <= 0.0 {
        return Err(Error::input(
            "peak-perf",
            "must be > 0 TFLOP/s when roofline-enabled is 1",
        ));
    }
    let perf = (sys.local_mem_bw_gbps * 1e9 * ops / bytes).min(peak);
    float_ns((1e9 * ops / perf).floor(), "compute (roofline)")
}

/// A duration computed in floating point as whole ns, refused beyond [`MAX_NS`] (or when
/// not finite) rather than saturated.
pub fn float_ns(ns: f64, what: &str) -> Result<u64> {
    if ns.is_nan() || ns > MAX_NS as f64 {
        return fit_ns(u128::MAX, what);
    }
    Ok(ns as u64)
}

/// The workload's finish time is at most the sum of every task's duration (some task runs
/// at every instant until the end), so bounding that sum keeps the critical path from
/// wrapping its u64 clock.
pub fn check_total(npus: &[Npu], colls: &[CollInfo]) -> Result<()> {
    let mut sum: u128 = 0;
    for t in npus.iter().flat_map(|n| &n.tasks) {
        sum += u128::from(match t.kind {
            Kind::Coll(c) => colls[c as usize].ns,
            _ => t.ns,
        });
    }
    fit_ns(sum, "workload (sum of every task's duration)").map(|_| ())
}

/// Message time between two ranks: T_h(m) in the first dimension where they differ.
pub fn p2p_ns(net: &AstraNetwork, a: u64, b: u64, size: u64) -> u64 {
    match net.route(a, b) {
        Some((d, h)) => {
            let dim = &net.dims[d];
            (h as f64 * dim.latency_ns + size as f64 / dim.beta_bytes_per_ns()).floor() as u64
        }
        None => 0,
    }
}

fn coll_info(key: &CollKey, ctx: &Ctx) -> Result<CollInfo> {
    let (op, size, group, involved) = key;
    let n = ctx.net.npus() as u32;
    let members: Vec<u32> = if group.is_empty() {
        (0..n).collect()
    } else {
        let groups = ctx.groups.ok_or_else(|| {
            Error::input(
                "--comm-group-configuration",
                format!("the trace names communicator group '{group}'; give the groups JSON"),
            )
        })?;
        groups.get(&**group).cloned().ok_or_else(|| {
            let names: Vec<&str> = groups.keys().map(|s| s.as_str()).collect();
            Error::unknown("communicator group", group, &names)
        })?
    };
    if let Some(&bad) = members.iter().find(|&&m| m >= n) {
        return Err(Error::input(
            format!("communicator group '{group}'"),
            format!("rank {bad} is outside the network of {n} NPUs"),
        ));
    }
    let whole =
        members.len() as u32 == n && members.iter().enumerate().all(|(i, &m)| m == i as u32);
    let inv = (!involved.is_empty()).then_some(involved.as_slice());
    let b = if whole {
        Some(model::collective(
            *op, *size, ctx.net, ctx.sys, ctx.knobs, inv,
        )?)
    } else {
        group_breakdown(*op, *size, &members, ctx)?
    };
    let (ns, pieces, piece_ns) = match b {
        None => (0, 0, 0),
        Some(b) => match b.phases() {
            [] => (0, 0, 0),
            [one] => (b.total_ns, b.chunks, one.ns),
            _ => (b.total_ns, 1, b.total_ns),
        },
    };
    Ok(CollInfo {
        op: *op,
        size: *size,
        group: group.to_string(),
        members,
        ns,
        pieces,
        piece_ns,
    })
}

/// A collective over a communicator group smaller than the system: ASTRA-sim
/// (`CommunicatorGroup::get_collective_plan`) runs it as one ring over the members
/// (`RingTopology`, implementation `Ring` whatever the system JSON says); each message
/// takes the links of the first dimension where the two ranks differ; here every step
/// is costed on the slowest such link of the ring.
fn group_breakdown(
    op: Op,
    size: u64,
    members: &[u32],
    ctx: &Ctx,
) -> Result<Option<model::Breakdown>> {
    if members.len() < 2 {
        return Ok(None);
    }
    let Some((d, h)) = group_link(members, ctx.net) else {
        return Ok(None);
    };
    let mut ld = LogicalDim::spanning(&ctx.net.dims[d], members.len() as u64);
    ld.fixed_hops = h;
    if ctx.knobs.congestion_aware {
        ld.aware = true;
        if ctx.net.dims[d].kind == crate::network::DimKind::Switch {
            ld.extra_serial = 1.0;
        }
    }
    let b = model::run(
        op,
        size,
        &[ld],
        &[Impl::Ring],
        ctx.net.npus(),
        ctx.sys,
        ctx.knobs,
        None,
    )?;
    Ok(Some(b))
}

/// The slowest link (dimension, hops) between consecutive members of a group's ring.
pub fn group_link(members: &[u32], net: &AstraNetwork) -> Option<(usize, u64)> {
    let mut worst: Option<(f64, usize, u64)> = None;
    for (i, &a) in members.iter().enumerate() {
        let b = members[(i + 1) % members.len()];
        if let Some((d, h)) = net.route(a as u64, b as u64) {
            let dim = &net.dims[d];
            let cost = h as f64 * dim.latency_ns + 1e6 / dim.beta_bytes_per_ns();
            if worst.is_none_or(|w| cost > w.0) {
                worst = Some((cost, d, h));
            }
        }
    }
    worst.map(|(_, d, h)| (d, h))
}

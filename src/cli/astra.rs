//! `astrolabe astra` (estimate ASTRA-sim inputs: one collective or a whole Chakra
//! workload) and `astrolabe export astra` (write ASTRA-sim inputs): flags and execution.

use super::OutputArgs;
use crate::astra::model::{self, Breakdown, Knobs, Op};
use crate::astra::network_yaml::AstraNetwork;
use crate::astra::system_json::{self, AstraSystem};
use crate::astra::{critical, physical, trace};
use crate::collective::Collective;
use crate::error::{Error, Result};
use crate::report::{Cell, Report, Table};
use crate::units::{Bytes, Seconds, parse_bytes};
use clap::{Args, Subcommand, ValueEnum};
use std::path::{Path, PathBuf};

mod export_cmd;
pub use export_cmd::run_export;

/// Which model `astrolabe astra` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// ASTRA-sim's congestion-unaware analytical backend, reproduced to the nanosecond.
    Astra,
    /// Also our default physical model on the same inputs, side by side with reasons.
    Physical,
}

/// Which ASTRA-sim network backend to reproduce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// AstraSim_Analytical_Congestion_Unaware (exact).
    Unaware,
    /// AstraSim_Analytical_Congestion_Aware: store-and-forward links; Switch and
    /// FullyConnected/Ring with ring-style algorithms only.
    Aware,
}

/// Flags of `astrolabe astra`.
#[derive(Debug, Args)]
pub struct AstraArgs {
    /// ASTRA-sim network YAML (topology, npus_count, bandwidth, latency).
    #[arg(long, value_name = "FILE.yml")]
    pub network: PathBuf,
    /// ASTRA-sim system JSON.
    #[arg(long, value_name = "FILE.json")]
    pub system: PathBuf,
    /// ASTRA-sim remote-memory JSON: NO_MEMORY_EXPANSION, PER_NPU_MEMORY_EXPANSION,
    /// PER_NODE_MEMORY_EXPANSION or MEMORY_POOL; times the workload's MEM nodes.
    #[arg(long, value_name = "FILE.json")]
    pub remote_memory: Option<PathBuf>,
    /// Chakra workload prefix: reads PREFIX.RANK.et for every NPU of the network.
    #[arg(long, value_name = "PREFIX", conflicts_with_all = ["collective", "size"])]
    pub workload: Option<PathBuf>,
    /// Communicator groups of the workload (a JSON object mapping each group id to its list
    /// of ranks), as ASTRA-sim's flag of the same name.
    #[arg(long, value_name = "FILE.json", requires = "workload")]
    pub comm_group_configuration: Option<PathBuf>,
    /// One collective instead of a workload: all-reduce, reduce-scatter, all-gather,
    /// all-to-all.
    #[arg(long, requires = "size")]
    pub collective: Option<String>,
    /// Collective size as Chakra's comm_size: the whole buffer, except for all-gather,
    /// where it is the per-NPU input (the output is npus × size). E.g. 64MiB, 1048576B.
    #[arg(long, requires = "collective")]
    pub size: Option<String>,
    /// astra (default): ASTRA-sim's analytical backend; physical: also our model, compared.
    #[arg(long, value_enum, default_value_t = ModelKind::Astra)]
    pub model: ModelKind,
    /// The ASTRA-sim binary to reproduce: unaware (congestion-unaware) or aware.
    #[arg(long, value_enum, default_value_t = Backend::Unaware)]
    pub backend: Backend,
    /// ASTRA-sim's --num-queues-per-dim.
    #[arg(long, default_value_t = 1)]
    pub num_queues_per_dim: u32,
    /// ASTRA-sim's --comm-scale (multiplies collective sizes).
    #[arg(long, default_value_t = 1.0)]
    pub comm_scale: f64,
    /// ASTRA-sim's --injection-scale (multiplies the endpoint delay).
    #[arg(long, default_value_t = 1.0)]
    pub injection_scale: f64,
    /// Print each phase's closed form with the numbers put in.
    #[arg(long)]
    pub explain: bool,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Flags of `astrolabe export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// What to write.
    #[command(subcommand)]
    pub target: ExportTarget,
    /// Output format and file (of the summary).
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Export targets.
#[derive(Debug, Subcommand)]
pub enum ExportTarget {
    /// ASTRA-sim inputs: network.yml, system.json, remote_memory.json and Chakra ETs.
    Astra(ExportAstraArgs),
}

/// Flags of `astrolabe export astra`.
#[derive(Debug, Args)]
pub struct ExportAstraArgs {
    /// Directory to write into (created if missing).
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Our topology syntax, e.g. "ring(4, 400GB/s, 500ns) x switch(8, 50GB/s, 1us)".
    #[arg(long, conflicts_with = "network")]
    pub topology: Option<String>,
    /// Or an ASTRA-sim network YAML to copy.
    #[arg(long, value_name = "FILE.yml")]
    pub network: Option<PathBuf>,
    /// An ASTRA-sim system JSON to copy (default: LIFO, endpoint-delay 10, 4 splits,
    /// localBWAware, local-mem-bw 1600, --algorithm on every dimension). With --model:
    /// the Astrolabe system (a preset name or TOML), as in `astrolabe estimate`.
    #[arg(long, value_name = "FILE.json")]
    pub system: Option<PathBuf>,
    /// A model (preset name or TOML): export one training iteration from flags, as
    /// `astrolabe estimate --model M --system S --tp ...` (needs --system).
    #[arg(long, conflicts_with_all = ["topology", "network", "scenario"])]
    pub model: Option<String>,
    /// The parallelism plan (with --model or --scenario; overrides the scenario's).
    #[command(flatten)]
    pub plan: super::plan_flags::PlanFlags,
    /// Implementation for the default system JSON: ring, direct, halvingDoubling, ...
    #[arg(long, default_value = "ring", conflicts_with = "system")]
    pub algorithm: String,
    /// Microbenchmark collective: all-reduce, reduce-scatter, all-gather, all-to-all.
    #[arg(long, default_value = "all-reduce")]
    pub collective: String,
    /// Microbenchmark size as Chakra's comm_size (all-gather: per-NPU input).
    #[arg(long, default_value = "64MiB")]
    pub size: String,
    /// A scenario TOML: writes the per-NPU Chakra traces of one training iteration and
    /// the communicator groups (`comm_groups.json`) instead of a microbenchmark.
    #[arg(long, value_name = "FILE.toml", conflicts_with_all = ["topology", "network", "system"])]
    pub scenario: Option<PathBuf>,
}

fn read_text(path: &Path) -> Result<String> {
    crate::limits::read_text(path)
}

fn parse_size(s: &str) -> Result<u64> {
    let b = parse_bytes("--size", s)?.get();
    if !(b >= 1.0 && b.fract() == 0.0 && b < 9.2e18) {
        return Err(Error::input(
            "--size",
            format!("expected a whole number of bytes ≥ 1, got {s}"),
        ));
    }
    Ok(b as u64)
}

fn parse_op(s: &str) -> Result<Op> {
    Op::from_collective(Collective::parse(s)?)
}

/// Runs `astrolabe astra`.
pub fn run(args: &AstraArgs) -> Result<Report> {
    let net = AstraNetwork::read(&args.network)?;
    let mut sys = AstraSystem::read(&args.system)?;
    if let Some(p) = &args.remote_memory {
        let what = p.display().to_string();
        sys.remote = system_json::read_remote_memory(&read_text(p)?, &what)?;
        sys.remote.check_npus(net.npus(), &what)?;
    }
    if args.num_queues_per_dim == 0 {
        return Err(Error::input("--num-queues-per-dim", "must be at least 1"));
    }
    for (flag, v) in [
        ("--comm-scale", args.comm_scale),
        ("--injection-scale", args.injection_scale),
    ] {
        if !(v > 0.0 && v.is_finite()) {
            return Err(Error::input(flag, format!("must be > 0, got {v}")));
        }
    }
    let knobs = Knobs {
        queues_per_dim: args.num_queues_per_dim,
        injection_scale: args.injection_scale,
        comm_scale: args.comm_scale,
        congestion_aware: args.backend == Backend::Aware,
    };
    let mut report = match (&args.workload, &args.collective, &args.size) {
        (Some(prefix), _, _) => run_workload(args, prefix, &net, &sys, &knobs)?,
        (None, Some(c), Some(s)) => {
            run_collective(args, parse_op(c)?, parse_size(s)?, &net, &sys, &knobs)?
        }
        _ => {
            return Err(Error::input(
                "astra",
                "give --workload PREFIX, or --collective and --size",
            ));
        }
    };
    if !sys.ignored.is_empty() {
        report.notes.push(format!(
            "system keys read but without effect on the congestion-unaware timing: {}",
            sys.ignored.join(", ")
        ));
    }
    Ok(report)
}

/// How the workload's MEM nodes were timed, when it has any.
fn memory_note(w: &trace::Workload, sys: &AstraSystem) -> Option<String> {
    let mem = w.npus.iter().flat_map(|n| &n.tasks);
    let n = mem.filter(|t| t.kind == trace::Kind::Mem).count();
    if n == 0 {
        return None;
    }
    let r = &sys.remote;
    Some(match r.tier(w.npus.len() as u64) {
        Some(t) => format!(
            "{n} MEM nodes on the remote memory ({}): remote-mem-latency + ⌊tensor_size / \
             remote-mem-bw⌋ = {} ns + bytes / {} GB/s each; as a tier: {} per NPU with every \
             NPU moving data",
            r.memory_type.name(),
            r.latency_ns,
            r.bw_gbps,
            t.bandwidth
        ),
        None => format!(
            "{n} MEM nodes timed as local memory (tensor_size / local-mem-bw): no remote memory \
             given; ASTRA-sim itself stops at the first MEM node under NO_MEMORY_EXPANSION \
             (AnalyticalRemoteMemory::issue)"
        ),
    })
}

fn secs(ns: u64) -> Cell {
    let s = ns as f64 * 1e-9;
    Cell::q(Seconds::new(s), s)
}

fn run_collective(
    args: &AstraArgs,
    op: Op,
    size: u64,
    net: &AstraNetwork,
    sys: &AstraSystem,
    knobs: &Knobs,
) -> Result<Report> {
    let b = model::collective(op, size, net, sys, knobs, None)?;
    let mut t = Table::new(
        "astra",
        &[
            ("model", "model"),
            ("collective", "collective"),
            ("comm_size_B", "comm_size"),
            ("npus", "NPUs"),
            ("time_s", "time"),
            ("time_ns", "time (ns)"),
            ("chunks", "chunks"),
            ("chunk_B", "chunk"),
        ],
    );
    let npus = net.npus();
    t.push(vec![
        Cell::text("astra"),
        Cell::text(op.name()),
        Cell::q(Bytes::new(size as f64), size as f64),
        Cell::int(npus),
        secs(b.total_ns),
        Cell::int(b.total_ns),
        Cell::int(b.chunks),
        Cell::q(Bytes::new(b.chunk as f64), b.chunk as f64),
    ])?;
    let mut report = Report::default();
    if args.model == ModelKind::Physical {
        compare(&mut report, &mut t, op, size, net, sys, &b)?;
    }
    report.tables.insert(0, t);
    report.tables.push(phase_table(&b, net)?);
    if args.explain {
        report.explain = explain(&b, net, sys, knobs);
    }
    Ok(report)
}

fn compare(
    report: &mut Report,
    t: &mut Table,
    op: Op,
    size: u64,
    net: &AstraNetwork,
    sys: &AstraSystem,
    b: &Breakdown,
) -> Result<()> {
    match physical::time(op, size, net, sys) {
        Ok(p) => {
            let s = p.total.get();
            t.push(vec![
                Cell::text("physical"),
                Cell::text(op.name()),
                Cell::q(Bytes::new(size as f64), size as f64),
                Cell::int(net.npus()),
                Cell::q(Seconds::new(s), s),
                Cell::int((s * 1e9).round() as u64),
                Cell::int(sys.splits as u64),
                Cell::Empty,
            ])?;
            report.notes.push(format!(
                "physical / astra = {:.3}",
                s * 1e9 / b.total_ns.max(1) as f64
            ));
        }
        Err(e) => report.notes.push(format!("physical model: {e}")),
    }
    report.notes.push(
        "mapping: per-NPU bandwidth B = 2·bw (Ring), (p−1)·bw (FullyConnected), bw (Switch) \
         with bw in GB/s of 2^30 B; step latency α = L + E (Ring, FullyConnected), 2L + E (Switch)"
            .into(),
    );
    for r in physical::reasons(op, net, sys) {
        report.notes.push(format!("why they differ: {r}"));
    }
    Ok(())
}

fn phase_table(b: &Breakdown, net: &AstraNetwork) -> Result<Table> {
    let mut t = Table::new(
        "phases",
        &[
            ("dim", "dim"),
            ("block", "block"),
            ("phase", "phase"),
            ("algorithm", "algorithm"),
            ("bytes_B", "bytes in"),
            ("time_per_chunk_s", "time per chunk"),
        ],
    );
    for p in b.phases() {
        t.push(vec![
            Cell::int(p.dim as u64),
            Cell::text(net.dims[p.dim].kind.astra_name()),
            Cell::text(format!("{:?}", p.op)),
            Cell::text(p.imp.astra_name()),
            Cell::q(Bytes::new(p.bytes as f64), p.bytes as f64),
            secs(p.ns),
        ])?;
    }
    Ok(t)
}

fn explain(b: &Breakdown, net: &AstraNetwork, sys: &AstraSystem, knobs: &Knobs) -> Vec<String> {
    let e = (sys.endpoint_delay_ns as f64 * knobs.injection_scale).round();
    let mut out = vec![format!(
        "chunk c = ⌊D/S⌋ = ⌊{}/{}⌋ (padded to N = {} B if smaller, except all-gather) = {} B; chunks = ⌈D'/c⌉ = {}",
        b.size,
        sys.splits,
        net.npus(),
        b.chunk,
        b.chunks
    )];
    use crate::astra::model::Impl;
    use crate::astra::phases::PhaseOp;
    for p in b.phases() {
        let d = &net.dims[p.dim];
        let form = match (p.imp, p.op) {
            (Impl::Direct(w), PhaseOp::AllReduce)
                if w.is_none_or(|w| u64::from(w) + 1 >= d.npus as u64) =>
            {
                "direct all-reduce: max_j (s_j + T_j) + E, T_j the message to distance j, s_j = max(g_(j), first g ≥ E + max T), g = 2E + R + T sorted"
            }
            _ => "closed form in astra::phases",
        };
        out.push(format!(
            "{:?} on dim {} ({} p={}, {}): T_h(m) = ⌊h·{} ns + m / {:.4} B/ns⌋, E = {e} ns, R(m) = 3·⌊m / {} B/ns⌋ → {} ns per chunk ({form})",
            p.op, p.dim, d.kind.astra_name(), d.npus, p.imp.astra_name(), d.latency_ns,
            d.beta_bytes_per_ns(), sys.local_mem_bw_gbps, p.ns
        ));
    }
    out.push(format!(
        "queues: {} chunk(s) per dimension at once; total = {} ns (⌈chunks/A⌉·t for one phase, else the queue schedule)",
        b.active, b.total_ns
    ));
    out
}

fn run_workload(
    args: &AstraArgs,
    prefix: &Path,
    net: &AstraNetwork,
    sys: &AstraSystem,
    knobs: &Knobs,
) -> Result<Report> {
    let groups = match &args.comm_group_configuration {
        Some(p) => Some(trace::read_comm_groups(
            &read_text(p)?,
            &p.display().to_string(),
        )?),
        None => None,
    };
    let ctx = trace::Ctx {
        net,
        sys,
        knobs,
        groups: groups.as_ref(),
    };
    let w = trace::load(prefix, &ctx)?;
    let est = critical::critical_path(&w)?;
    let mut t = Table::new(
        "workload",
        &[
            ("model", "model"),
            ("npus", "NPUs"),
            ("finish_s", "finish"),
            ("finish_ns", "finish (ns)"),
            ("tasks", "nodes"),
            ("collectives", "distinct collectives"),
        ],
    );
    let mut row = |name: &str, finish: u64| {
        t.push(vec![
            Cell::text(name),
            Cell::int(net.npus()),
            secs(finish),
            Cell::int(finish),
            Cell::int(est.tasks as u64),
            Cell::int(w.collectives.len() as u64),
        ])
    };
    row("astra", est.finish_ns)?;
    let mut notes = Vec::new();
    if args.model == ModelKind::Physical {
        let mut pw = w.clone();
        physical::workload_times(&mut pw, net, sys)?;
        let p = critical::critical_path(&pw)?;
        row("physical", p.finish_ns)?;
        notes.push(format!(
            "physical / astra = {:.3}: same DAGs and slots, each collective costed by our \
             model (a group smaller than the system as one dimension on its slowest link)",
            p.finish_ns as f64 / est.finish_ns.max(1) as f64
        ));
    }
    let mut per = Table::new(
        "npus",
        &[
            ("rank", "rank"),
            ("finish_s", "finish"),
            ("compute_s", "compute"),
            ("in_collectives_s", "in collectives"),
        ],
    );
    for r in 0..est.npu_finish_ns.len() {
        per.push(vec![
            Cell::int(r as u64),
            secs(est.npu_finish_ns[r]),
            secs(est.npu_compute_ns[r]),
            secs(est.npu_comm_ns[r]),
        ])?;
    }
    let mut report = Report::default();
    report.tables.push(t);
    report.tables.push(per);
    report.notes.extend(notes);
    report.notes.push(
        "critical path through the per-NPU DAGs: per NPU one compute unit, one CPU unit and \
         one communication slot (a collective, send or memory access in flight, as ASTRA-sim's \
         HardwareResource), the lowest ready node id first; collectives synchronise their group"
            .into(),
    );
    report.notes.extend(memory_note(&w, sys));
    Ok(report)
}

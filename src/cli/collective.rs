//! `astrolabe collective`: flags, input validation (sizes, size ranges, the network from
//! `--topology`, `--system` or a TOML `--network` file) and the nccl-tests-style table.

use super::OutputArgs;
use crate::collective::{self, Algorithm, Collective, CollectiveTime, Options, Schedule};
use crate::error::{Error, Result};
use crate::network::{DimSpec, Topology};
use crate::report::collective::{CollectiveResult, CollectiveRow, PhaseRow};
use crate::report::{Data, Report, SCHEMA_VERSION};
use crate::units::{Bytes, parse_bytes};
use clap::Args;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Flags of `astrolabe collective`.
#[derive(Debug, Args)]
pub struct CollectiveArgs {
    /// The collective: all-reduce, reduce-scatter, all-gather, all-to-all, broadcast, reduce,
    /// gather, scatter, send-recv.
    pub op: String,
    /// Buffer per NPU (nccl-tests convention), e.g. 1GB or 64MiB; or a range 8..128M
    /// (nccl-tests suffixes K, M, G are powers of 1024; one row per step of -f).
    #[arg(long, allow_hyphen_values = true, required_unless_present = "minbytes")]
    pub size: Option<String>,
    /// Smallest size, as nccl-tests' -b (with -e and -f instead of --size).
    #[arg(short = 'b', long, requires = "maxbytes", conflicts_with = "size")]
    pub minbytes: Option<String>,
    /// Largest size, as nccl-tests' -e.
    #[arg(short = 'e', long, requires = "minbytes")]
    pub maxbytes: Option<String>,
    /// Multiplication factor between sizes, as nccl-tests' -f.
    #[arg(short = 'f', long, default_value_t = 2)]
    pub stepfactor: u32,
    /// Network, innermost dimension first, e.g. "ring(4, 200GB/s, 0.5us) x switch(8, 50GB/s, 1us)".
    /// Options inside a dimension: in-network, oversub=K.
    #[arg(long, conflicts_with_all = ["system", "network"])]
    pub topology: Option<String>,
    /// A system's network: a catalog system (dgx-a100, …), dgx-h100, or a system TOML file.
    #[arg(long, conflicts_with = "network")]
    pub system: Option<String>,
    /// Number of nodes (size of the outermost dimension) for --system.
    #[arg(long, requires = "system")]
    pub nodes: Option<u32>,
    /// A TOML file with [[network.dims]] tables (kind, size, bandwidth, latency,
    /// in_network, oversubscription).
    #[arg(long, value_name = "FILE.toml")]
    pub network: Option<PathBuf>,
    /// Algorithm on every dimension: auto, ring, direct, halving-doubling,
    /// double-binary-tree, parameter-server, in-network.
    #[arg(long, default_value = "auto")]
    pub algorithm: String,
    /// Split the buffer into N chunks that pipeline across dimensions.
    #[arg(long, default_value_t = 1)]
    pub chunks: u32,
    /// Phase scheduling across dimensions: baseline or themis.
    #[arg(long, default_value = "nccl")]
    pub schedule: String,
    /// Print every term's formula with the numbers put in.
    #[arg(long)]
    pub explain: bool,
    /// Draw busbw against message size, one line per applicable algorithm, to an SVG file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,
    /// Output format and file.
    #[command(flatten)]
    pub out: OutputArgs,
}

/// Runs `astrolabe collective`.
pub fn run(args: &CollectiveArgs) -> Result<Report> {
    let op = Collective::parse(&args.op)?;
    let opts = Options {
        algorithm: Algorithm::parse(&args.algorithm)?,
        chunks: args.chunks,
        schedule: parse_schedule(&args.schedule)?,
    };
    let sizes = match (&args.size, &args.minbytes, &args.maxbytes) {
        (Some(s), _, _) => parse_sizes(s, args.stepfactor)?,
        (None, Some(b), Some(e)) => parse_sizes(&format!("{b}..{e}"), args.stepfactor)?,
        _ => return Err(Error::input("--size", "give --size SIZE or -b MIN -e MAX")),
    };
    let topo = topology(args)?;
    let dims = topo.dims();
    let runs = sizes
        .iter()
        .map(|&s| collective::calibrated::time(op, s, &topo, &opts).map(|c| (s, c)))
        .collect::<Result<Vec<_>>>()?;
    let results: Vec<(Bytes, CollectiveTime)> = runs.iter().map(|(s, c)| (*s, c.time)).collect();
    let mut v = value(op, &topo, &opts, &results);
    v.notes
        .extend(collective::calibrated::notes(&runs, dims.len()));
    if args.explain {
        for (s, c) in &runs {
            v.explain.extend(collective::explain::explain(
                op,
                *s,
                &c.dims[..dims.len()],
                &c.options,
                &c.time,
            )?);
        }
    }
    if let Some(path) = &args.plot {
        crate::plot::write_svg(path, &busbw_plot(op, &sizes, dims, &opts, topo.npus())?)?;
        v.notes.push(format!("plot written to {}", path.display()));
    }
    let mut tables = vec![v.table()?];
    if !v.phases.is_empty() && v.rows.len() == 1 {
        tables.push(v.phase_table()?);
    }
    Ok(Report {
        tables,
        notes: v.notes.clone(),
        explain: v.explain.clone(),
        data: Some(Data::Collective(Box::new(v))),
        ..Report::default()
    })
}

/// busbw (GB/s) against size for the chosen option and for every algorithm that applies
/// to every dimension at every size.
fn busbw_plot(
    op: Collective,
    sizes: &[Bytes],
    dims: &[crate::network::Dim],
    opts: &Options,
    p: u64,
) -> Result<String> {
    let line = |o: &Options| -> Option<Vec<(f64, f64)>> {
        sizes
            .iter()
            .map(|&s| {
                let t = collective::time(op, s, dims, o).ok()?.total;
                Some((s.get(), collective::bandwidths(op, s, p, t).1.get() / 1e9))
            })
            .collect()
    };
    let mut series = Vec::new();
    for alg in Algorithm::ALL {
        let o = Options {
            algorithm: alg,
            ..*opts
        };
        if let Some(pts) = line(&o) {
            series.push((alg.name().to_string(), pts));
        }
    }
    crate::plot::lines(
        &format!("{} busbw on {p} NPUs", op.name()),
        "message size",
        "busbw (GB/s)",
        &series,
        true,
    )
}

fn parse_schedule(s: &str) -> Result<Schedule> {
    Schedule::parse(s)
}

/// A size as nccl-tests writes it: a bare number of bytes ("8"), or K, M, G for powers of
/// 1024 ("128M" = 128 MiB; nccl-tests `parsesize`); anything else as [`parse_bytes`]
/// ("1GB" = 1e9, "64MiB").
pub fn parse_size(s: &str) -> Result<Bytes> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if matches!(c, 'k' | 'K' | 'm' | 'M' | 'g' | 'G') => {
            let m = match c.to_ascii_uppercase() {
                'K' => 1024.0,
                'M' => 1048576.0,
                _ => 1073741824.0,
            };
            (&t[..i], m)
        }
        _ => (t, 1.0),
    };
    // A bare count goes through the same checks (range, zero, sign) as a unit string.
    let size = match num.trim().parse::<f64>() {
        Ok(n) if n.is_finite() => parse_bytes("--size", &format!("{:e}B", n * mult))?,
        _ => parse_bytes("--size", t)?,
    };
    if size.get() == 0.0 {
        return Err(Error::input(
            "--size",
            format!("'{s}' is zero; a collective moves at least 1 byte, e.g. '64MiB'"),
        ));
    }
    Ok(size)
}

/// "1GB" → `[1e9]`; "8..128M" → 8 B, 16 B, …, 128 MiB (each `factor` times the last,
/// nccl-tests `-b 8 -e 128M -f 2`).
pub fn parse_sizes(s: &str, factor: u32) -> Result<Vec<Bytes>> {
    let Some((a, b)) = s.split_once("..") else {
        return Ok(vec![parse_size(s)?]);
    };
    let (a, b) = (parse_size(a)?, parse_size(b)?);
    if a.get() <= 0.0 || b < a {
        return Err(Error::input(
            "--size",
            format!("range '{s}' must go from a size > 0 up to a larger one, e.g. '8..128M'"),
        ));
    }
    if factor < 2 {
        return Err(Error::input(
            "-f",
            format!("step factor {factor} must be ≥ 2"),
        ));
    }
    let mut v = vec![];
    let mut x = a;
    while x.get() <= b.get() * (1.0 + 1e-12) {
        if v.len() == 128 {
            return Err(Error::input(
                "--size",
                format!("range '{s}' has more than 128 sizes"),
            ));
        }
        v.push(x);
        x = x * f64::from(factor);
    }
    Ok(v)
}

/// The topology from whichever of `--topology`, `--system`, `--network` was given.
fn topology(args: &CollectiveArgs) -> Result<Topology> {
    match (&args.topology, &args.system, &args.network) {
        (Some(t), _, _) => Topology::parse(t),
        (_, Some(name), _) => system_topology(name, args.nodes),
        (_, _, Some(path)) => read_network(path),
        _ => Err(Error::input(
            "collective",
            "no network given; use --topology 'ring(8, 100GB/s, 500ns)', --system dgx-h100 or --network FILE.toml",
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkFile {
    network: NetworkSection,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NetworkSection {
    dims: Vec<DimSpec>,
}

/// Reads `[[network.dims]]` from a TOML file; errors carry the path (and toml's own line,
/// column and snippet).
pub fn read_network(path: &Path) -> Result<Topology> {
    let text = crate::limits::read_text(path)?;
    let file: NetworkFile = toml::from_str(&text).map_err(|e| Error::File {
        path: path.to_path_buf(),
        message: e.to_string().trim_end().to_string(),
    })?;
    Topology::from_specs(&file.network.dims).map_err(|e| e.context(path.display()))
}

/// The typed value: one row per size, and the phases of a single size.
fn value(
    op: Collective,
    topo: &Topology,
    opts: &Options,
    results: &[(Bytes, CollectiveTime)],
) -> CollectiveResult {
    let npus = topo.npus();
    let rows = results
        .iter()
        .map(|(size, t)| {
            let (alg, bus) = collective::bandwidths(op, *size, npus, t.total);
            CollectiveRow {
                size_bytes: size.get(),
                nranks: npus,
                time_s: t.total.get(),
                algbw_bytes_per_s: alg.get(),
                busbw_bytes_per_s: bus.get(),
                algorithm: algorithms(t),
            }
        })
        .collect();
    let phases = match results {
        [(_, t)] => t
            .phases()
            .iter()
            .enumerate()
            .map(|(i, p)| PhaseRow {
                phase: i as u32 + 1,
                dim: p.dim as u32,
                collective: p.op.name().to_string(),
                algorithm: p.algorithm.name().to_string(),
                size_bytes: p.size.get(),
                latency_s: p.latency.get(),
                transfer_s: p.transfer.get(),
                time_s: p.time().get(),
            })
            .collect(),
        _ => Vec::new(),
    };
    CollectiveResult {
        schema_version: SCHEMA_VERSION,
        collective: op.name().to_string(),
        topology: topo.to_string(),
        nranks: npus,
        chunks: opts.chunks,
        schedule: match opts.schedule {
            Schedule::Nccl => "nccl".into(),
            Schedule::Baseline => "baseline".into(),
            Schedule::Themis => "themis".into(),
        },
        rows,
        phases,
        notes: notes(op, topo, opts, results),
        explain: Vec::new(),
    }
}

/// "d0 ring, d1 in-network" (an entry per dimension, in order of first use).
fn algorithms(t: &CollectiveTime) -> String {
    if t.flat_ring {
        return "ring across all ranks".into();
    }
    let mut per_dim: Vec<(usize, Vec<&str>)> = vec![];
    for p in t.phases() {
        let name = p.algorithm.name();
        match per_dim.iter_mut().find(|(d, _)| *d == p.dim) {
            Some((_, v)) if !v.contains(&name) => v.push(name),
            Some(_) => {}
            None => per_dim.push((p.dim, vec![name])),
        }
    }
    if per_dim.is_empty() {
        return "none (group of 1)".into();
    }
    per_dim
        .iter()
        .map(|(d, v)| format!("d{d} {}", v.join("/")))
        .collect::<Vec<_>>()
        .join(", ")
}

fn notes(
    op: Collective,
    topo: &Topology,
    opts: &Options,
    results: &[(Bytes, CollectiveTime)],
) -> Vec<String> {
    let mut v = vec![
        format!("topology: {topo} ({} NPUs)", topo.npus()),
        format!(
            "size = buffer per rank (nccl-tests); nranks = {} NPUs; algbw = size/time; busbw = algbw × {}",
            topo.npus(),
            collective::explain::factor_expr(op)
        ),
    ];
    if opts.chunks > 1 {
        v.push(format!(
            "{} chunks; phase times are each phase's busy time over all chunks",
            opts.chunks
        ));
    }
    if opts.schedule == Schedule::Nccl && results.iter().any(|(_, t)| t.n_phases > 1) {
        v.push(
            "nccl schedule: phases pipelined (latency once, the busiest dimension sets the \
             rate), or one ring across all ranks (NCCL's tuning model, src/graph/tuning.cc)"
                .into(),
        );
    }
    if results.iter().any(|(_, t)| {
        t.phases()
            .iter()
            .any(|p| p.algorithm == Algorithm::InNetwork)
    }) {
        v.push(
            "in-network (NVLS/SHARP): the wire carries n(1 + 1/p) at most η·B; its busbw is the \
             bandwidth a ring would need to match it (nccl-tests' convention), so it may exceed B"
                .into(),
        );
    }
    if opts.schedule == Schedule::Themis {
        let used = results
            .iter()
            .filter(|(_, t)| t.schedule == Schedule::Themis)
            .count();
        v.push(format!(
            "themis schedule used for {used} of {} sizes (the baseline order is kept where it is as fast{})",
            results.len(),
            if opts.chunks > 1 { "" } else { "; themis needs --chunks > 1" }
        ));
    }
    v
}

/// The network of `--system NAME`: a system of the catalog (`crate::catalog`, built-in
/// presets or a path to a system TOML file) if it has one by that name, else one of the
/// fallback networks below; `--nodes N` sets the size of the outermost dimension.
pub fn system_topology(name: &str, nodes: Option<u32>) -> Result<Topology> {
    let topo = match crate::catalog::system_topology(name) {
        Ok(t) => t,
        Err(Error::UnknownName { .. }) => fallback_system(name)?,
        Err(e) => return Err(e),
    };
    let Some(n) = nodes else {
        return Ok(topo);
    };
    let mut dims = topo.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        // A preset is never grown silently: its file states how many nodes it has.
        let have = last.size;
        last.size = n;
        if n > have {
            let grown = Topology::new(dims.clone()).map_or(String::new(), |t| t.to_string());
            return Err(Error::input(
                "--nodes",
                format!(
                    "{n} is more than system '{name}' has ({have}); to model more, give the \
                     network itself: --topology '{grown}'"
                ),
            ));
        }
        *last = last.validated("--nodes")?;
    }
    topo.with_dims(dims)
}

/// Fallback system networks for names the catalog does not have (two dimensions: the
/// NVSwitch inside a node, then one rail switch across 16 nodes, each GPU with its own
/// NIC), at line rate:
/// - `dgx-a100`: NVLink3, 12 links × 25 GB/s = 300 GB/s per GPU per direction (600 GB/s
///   bidirectional, NVIDIA A100 datasheet); 8 × HDR 200 Gb/s ConnectX-6 = 25 GB/s per GPU
///   (DGX A100 user guide).
/// - `dgx-h100`: NVLink4, 18 links, 450 GB/s per GPU per direction (900 GB/s bidirectional,
///   NVIDIA H100 datasheet) through third-generation NVSwitch with NVLink SHARP (in-network
///   reduction); 8 × NDR 400 Gb/s ConnectX-7 = 50 GB/s per GPU (DGX H100 user guide).
///
/// Per-step latencies: NCCL's tuning model hardware latencies for the Simple protocol
/// (NVIDIA/nccl `src/graph/tuning.cc`): NVLink 3.4 µs, network 14 µs.
fn fallback_system(name: &str) -> Result<Topology> {
    let s = match name.trim().to_ascii_lowercase().replace('_', "-").as_str() {
        "dgx-a100" => "switch(8, 300GB/s, 3.4us) x switch(16, 25GB/s, 14us)",
        "dgx-h100" => "switch(8, 450GB/s, 3.4us, in-network) x switch(16, 50GB/s, 14us)",
        _ => {
            let mut names = crate::catalog::names(crate::catalog::Kind::System);
            for n in ["dgx-a100", "dgx-h100"] {
                if !names.contains(&n) {
                    names.push(n);
                }
            }
            return Err(Error::unknown("system", name, &names));
        }
    };
    Topology::parse(s)
}

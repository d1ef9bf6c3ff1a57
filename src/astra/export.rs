//! Writers: ASTRA-sim inputs for a collective microbenchmark, so a configuration can go
//! straight into full simulation:
//!
//! - `network.yml` ([`AstraNetwork::to_yaml`]), `system.json` ([`AstraSystem::to_json`]),
//!   `remote_memory.json` (`NO_MEMORY_EXPANSION`, or the offload tier as a per-NPU remote
//!   memory for an offloaded training iteration: [`super::system_json::RemoteMemory::per_npu`]);
//! - `<name>.<rank>.et` for every NPU, laid out exactly as ASTRA-sim's microbenchmark
//!   generators (`examples/workload/microbenchmarks/generator_scripts/*.py`) write them:
//!   `GlobalMetadata{version: "0.0.4"}`, then one `Node{id: 0, name, type: COMM_COLL_NODE,
//!   attr: [is_cpu_op = false (bool_val), comm_type (int64_val), comm_size (int64_val)]}`,
//!   each preceded by its varint length.
//!
//! Our topology → ASTRA-sim network (the inverse of [`super::physical`]'s mapping):
//! link bandwidth = B/2 on a Ring, B/(p−1) on a FullyConnected, B on a Switch, in GB/s of
//! 2^30 B; hop latency = α on Ring and FullyConnected, α/2 on a Switch (2 hops).

use super::chakra::{self, AttributeProto, GlobalMetadata, Node, TraceFile, comm_type, node_type};
use super::model::{Impl, Op};
use super::network_yaml::{AstraDim, AstraNetwork};
use super::system_json::{AstraSystem, Optimization, Policy};
use crate::error::{Error, Result};
use crate::network::{DimKind, Topology};
use std::path::{Path, PathBuf};

/// ASTRA-sim's network for one of our topologies (mapping in the module doc).
pub fn network_from_topology(t: &Topology) -> AstraNetwork {
    let gib = (1u64 << 30) as f64;
    AstraNetwork {
        dims: t
            .dims()
            .iter()
            .map(|d| {
                let b = d.bandwidth.get() / gib;
                let l = d.latency.get() * 1e9;
                let (bw, lat) = match d.kind {
                    DimKind::Ring => (b / 2.0, l),
                    DimKind::FullyConnected => (b / (d.size.max(2) - 1) as f64, l),
                    DimKind::Switch => (b, l / 2.0),
                };
                AstraDim {
                    kind: d.kind,
                    npus: d.size,
                    bandwidth_gbps: bw,
                    latency_ns: lat,
                }
            })
            .collect(),
    }
}

/// A system JSON with ASTRA-sim's usual microbenchmark settings and `imp` on every
/// dimension: LIFO, endpoint-delay 10 ns, 1 active chunk, 4 splits, localBWAware,
/// local-mem-bw 1600 GB/s, roofline off.
pub fn default_system(dims: usize, imp: Impl) -> AstraSystem {
    let list = vec![imp; dims];
    let a2a = if imp == Impl::HalvingDoubling {
        vec![Impl::Direct(None); dims]
    } else {
        list.clone()
    };
    AstraSystem {
        policy: Policy::Lifo,
        endpoint_delay_ns: 10,
        active_chunks: 1,
        splits: 4,
        optimization: Optimization::LocalBwAware,
        local_mem_bw_gbps: 1600.0,
        peak_perf_tflops: 900.0,
        roofline: false,
        all_reduce: list.clone(),
        all_gather: list.clone(),
        reduce_scatter: list,
        all_to_all: a2a,
        ignored: Vec::new(),
        remote: super::system_json::RemoteMemory::NONE,
    }
}

/// The Chakra trace of one NPU for a microbenchmark of `op` with `comm_size` bytes.
pub fn microbenchmark_trace(op: Op, comm_size: u64, name: &str) -> TraceFile {
    let ct = match op {
        Op::AllReduce => comm_type::ALL_REDUCE,
        Op::ReduceScatter => comm_type::REDUCE_SCATTER,
        Op::AllGather => comm_type::ALL_GATHER,
        Op::AllToAll => comm_type::ALL_TO_ALL,
    };
    TraceFile {
        metadata: GlobalMetadata {
            version: "0.0.4".into(),
            attr: Vec::new(),
        },
        nodes: vec![Node {
            id: 0,
            name: name.to_string(),
            r#type: node_type::COMM_COLL,
            attr: vec![
                AttributeProto::boolean("is_cpu_op", false),
                AttributeProto::int64("comm_type", ct),
                AttributeProto::int64("comm_size", comm_size as i64),
            ],
            ..Default::default()
        }],
    }
}

/// The files written by [`write_microbenchmark`].
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
    /// The workload prefix to pass as `--workload-configuration`.
    pub prefix: PathBuf,
}

/// An export in progress: every file goes into a temporary directory beside the target
/// (`.DIR.partial-PID`), and only a complete export is moved into place
/// ([`Staging::commit`]); dropped uncommitted (an error, a refused limit), the temporary
/// directory is removed, so a failed export leaves no partial files.
struct Staging {
    target: PathBuf,
    tmp: PathBuf,
    names: Vec<String>,
    bytes: std::sync::atomic::AtomicU64,
    max_bytes: u64,
    committed: bool,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Staging {
    fn new(target: &Path) -> Result<Staging> {
        let max_bytes = crate::limits::BYTES_WRITTEN.max()?;
        let parent = match target.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        std::fs::create_dir_all(&parent).map_err(io_err(&parent))?;
        let leaf = target
            .file_name()
            .map_or_else(|| "export".into(), |n| n.to_string_lossy().into_owned());
        let tmp = parent.join(format!(".{leaf}.partial-{}", std::process::id()));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(io_err(&tmp))?;
        }
        std::fs::create_dir(&tmp).map_err(io_err(&tmp))?;
        Ok(Staging {
            target: target.to_path_buf(),
            tmp,
            names: Vec::new(),
            bytes: std::sync::atomic::AtomicU64::new(0),
            max_bytes,
            committed: false,
        })
    }

    /// Counts `n` more bytes against [`crate::limits::BYTES_WRITTEN`] before they are
    /// written.
    fn reserve(&self, n: u64) -> Result<()> {
        use std::sync::atomic::Ordering;
        let total = self.bytes.fetch_add(n, Ordering::Relaxed) + n;
        if total > self.max_bytes {
            return crate::limits::BYTES_WRITTEN.check(total, "export astra: bytes to write");
        }
        Ok(())
    }

    /// Writes `bytes` as `name` in the temporary directory.
    fn write(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        self.write_shared(name, bytes)?;
        self.names.push(name.to_string());
        Ok(())
    }

    /// [`Staging::write`] from several threads; the caller records the names.
    fn write_shared(&self, name: &str, bytes: &[u8]) -> Result<()> {
        self.reserve(bytes.len() as u64)?;
        let p = self.tmp.join(name);
        std::fs::write(&p, bytes).map_err(io_err(&p))
    }

    /// Moves the complete export into the target directory: a rename of the whole
    /// directory when the target does not exist, else file by file (replacing files of
    /// the same name). Returns the final paths, in writing order.
    fn commit(mut self) -> Result<Vec<PathBuf>> {
        if !self.target.exists() {
            std::fs::rename(&self.tmp, &self.target).map_err(io_err(&self.target))?;
        } else {
            for n in &self.names {
                let to = self.target.join(n);
                std::fs::rename(self.tmp.join(n), &to).map_err(io_err(&to))?;
            }
            std::fs::remove_dir_all(&self.tmp).map_err(io_err(&self.tmp))?;
        }
        self.committed = true;
        Ok(self.names.iter().map(|n| self.target.join(n)).collect())
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.committed {
            // Best effort: the export already failed with its own error.
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// A lower bound of one Chakra node's encoded size, bytes: its length varint (1), id
/// (2), type (2), name (2 + at least 10 characters) and two attributes (at least 8 each).
/// Checked by a test against generated traces.
pub const MIN_NODE_BYTES: u64 = 32;

/// Refuses an export of `files` files and `nodes` trace nodes above
/// [`crate::limits::FILES_WRITTEN`], [`crate::limits::TRACE_NODES`] or (by the lower
/// bound [`MIN_NODE_BYTES`] per node) [`crate::limits::BYTES_WRITTEN`], before anything is
/// written.
pub fn check_size(files: u64, nodes: u128) -> Result<()> {
    use crate::limits::{BYTES_WRITTEN, FILES_WRITTEN, TRACE_NODES};
    FILES_WRITTEN.check(files, "export astra: files to write")?;
    TRACE_NODES.check(nodes, "export astra: trace nodes to write")?;
    BYTES_WRITTEN.check(
        nodes.saturating_mul(u128::from(MIN_NODE_BYTES)),
        "export astra: bytes to write (at least)",
    )
}

/// Writes network.yml, system.json, remote_memory.json (`sys.remote`) and one `.et` per
/// NPU into `dir`.
pub fn write_microbenchmark(
    dir: &Path,
    net: &AstraNetwork,
    sys: &AstraSystem,
    op: Op,
    comm_size: u64,
) -> Result<Written> {
    if comm_size > i64::MAX as u64 {
        return Err(Error::input(
            "--size",
            "too large for Chakra's int64 comm_size",
        ));
    }
    let n = net.npus();
    check_size(n + 3, u128::from(n))?;
    let mut st = Staging::new(dir)?;
    write_configs(&mut st, net, sys)?;
    let base = op.name().replace('-', "_");
    let name = format!("{base}_{n}npus_{comm_size}B");
    let trace = chakra::encode(&microbenchmark_trace(op, comm_size, &name));
    let bar = progress(n, "traces written");
    for r in 0..n as usize {
        st.write(&rank_name(&base, r), &trace)?;
        bar.inc(1);
    }
    bar.finish_and_clear();
    let files = st.commit()?;
    Ok(Written {
        files,
        prefix: dir.join(&base),
    })
}

/// `<prefix>.<rank>.et`, the file name of one rank's trace.
fn rank_name(prefix: &str, rank: usize) -> String {
    chakra::rank_path(Path::new(prefix), rank)
        .display()
        .to_string()
}

/// A progress bar on standard error when it is a terminal (hidden otherwise, so tests
/// and pipes stay quiet).
fn progress(n: u64, what: &str) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(n);
    if let Ok(style) = indicatif::ProgressStyle::with_template(&format!(
        "{{spinner}} [{{elapsed_precise}}] {{wide_bar}} {{human_pos}}/{{human_len}} {what} (eta {{eta}})"
    )) {
        b.set_style(style);
    }
    b
}

/// Writes the three configuration files every export has: network.yml, system.json and
/// remote_memory.json (`sys.remote`: `NO_MEMORY_EXPANSION` unless the plan offloads).
fn write_configs(st: &mut Staging, net: &AstraNetwork, sys: &AstraSystem) -> Result<()> {
    st.write("network.yml", net.to_yaml().as_bytes())?;
    st.write("system.json", sys.to_json().as_bytes())?;
    st.write("remote_memory.json", sys.remote.to_json().as_bytes())
}

/// The system JSON for a training iteration on `device` in `precision`: the microbenchmark
/// defaults with ring everywhere and the roofline on, peak-perf = matrix peak × sustained
/// GEMM efficiency (TFLOP/s) and local-mem-bw = HBM bandwidth × sustained memory
/// efficiency (decimal GB/s), so that ASTRA-sim's roofline sees the device our estimate
/// uses.
pub fn iteration_system(
    dims: usize,
    device: &crate::compute::Device,
    precision: crate::compute::Precision,
) -> Result<AstraSystem> {
    let mut sys = default_system(dims, Impl::Ring);
    let e = &device.spec.efficiency;
    sys.roofline = true;
    sys.peak_perf_tflops = device.peak(precision)?.get() * e.gemm / 1e12;
    sys.local_mem_bw_gbps = device.spec.memory_bandwidth.get() * e.memory / 1e9;
    Ok(sys)
}

/// Writes network.yml, system.json, remote_memory.json, `comm_groups.json` and
/// `workload.<rank>.et` for every NPU of a training iteration into `dir` (ranks are
/// generated, encoded and written in parallel, one at a time per thread). `check` runs on
/// the complete files (given their workload prefix) before they are moved into `dir`: when
/// it fails, nothing is left.
pub fn write_iteration<T>(
    dir: &Path,
    net: &AstraNetwork,
    sys: &AstraSystem,
    generator: &super::iteration::Generator,
    check: impl FnOnce(&Path) -> Result<T>,
) -> Result<(Written, T)> {
    if generator.npus() as u64 != net.npus() {
        return Err(Error::input(
            "export astra",
            format!(
                "the plan has {} ranks but the network {} NPUs",
                generator.npus(),
                net.npus()
            ),
        ));
    }
    check_size(u64::from(generator.npus()) + 4, generator.total_nodes())?;
    let mut st = Staging::new(dir)?;
    write_configs(&mut st, net, sys)?;
    let groups = super::iteration::groups_json(&generator.groups());
    st.write("comm_groups.json", groups.as_bytes())?;
    let bar = progress(u64::from(generator.npus()), "traces written");
    use rayon::prelude::*;
    let names: Vec<String> = (0..generator.npus())
        .into_par_iter()
        .map(|r| {
            let name = rank_name("workload", r as usize);
            let bytes = chakra::encode(&generator.trace(r));
            st.write_shared(&name, &bytes)?;
            bar.inc(1);
            Ok(name)
        })
        .collect::<Result<_>>()?;
    bar.finish_and_clear();
    st.names.extend(names);
    let checked = check(&st.tmp.join("workload"))?;
    let files = st.commit()?;
    let written = Written {
        files,
        prefix: dir.join("workload"),
    };
    Ok((written, checked))
}

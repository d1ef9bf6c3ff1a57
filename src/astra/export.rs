//! Writers: ASTRA-sim inputs for a collective microbenchmark, so a configuration can go
//! straight into full simulation:
//!
//! - `network.yml` ([`AstraNetwork::to_yaml`]), `system.json` ([`AstraSystem::to_json`]),
//!   `remote_memory.json` (`NO_MEMORY_EXPANSION`);
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
use super::system_json::{AstraSystem, Optimization, Policy, REMOTE_MEMORY_JSON};
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

fn write(path: PathBuf, text: &str, files: &mut Vec<PathBuf>) -> Result<()> {
    std::fs::write(&path, text).map_err(|source| Error::Io {
        path: path.clone(),
        source,
    })?;
    files.push(path);
    Ok(())
}

/// Writes network.yml, system.json, remote_memory.json and one `.et` per NPU into `dir`.
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
    let mut files = write_configs(dir, net, sys)?;
    let n = net.npus();
    let base = op.name().replace('-', "_");
    let name = format!("{base}_{n}npus_{comm_size}B");
    let prefix = dir.join(&base);
    let trace = microbenchmark_trace(op, comm_size, &name);
    for r in 0..n as usize {
        let p = chakra::rank_path(&prefix, r);
        chakra::write_file(&p, &trace)?;
        files.push(p);
    }
    Ok(Written { files, prefix })
}

/// Creates `dir` and writes the three configuration files every export has:
/// network.yml, system.json and remote_memory.json. Returns their paths.
/// Checks first that the whole export (the configs and one trace per NPU) stays within
/// [`crate::limits::FILES_WRITTEN`], so nothing is written when it would not.
fn write_configs(dir: &Path, net: &AstraNetwork, sys: &AstraSystem) -> Result<Vec<PathBuf>> {
    crate::limits::FILES_WRITTEN.check(net.npus() + 4, "export astra: files to write")?;
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut files = Vec::new();
    write(dir.join("network.yml"), &net.to_yaml(), &mut files)?;
    write(dir.join("system.json"), &sys.to_json(), &mut files)?;
    write(
        dir.join("remote_memory.json"),
        REMOTE_MEMORY_JSON,
        &mut files,
    )?;
    Ok(files)
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
/// generated, encoded and written in parallel, one at a time per thread).
pub fn write_iteration(
    dir: &Path,
    net: &AstraNetwork,
    sys: &AstraSystem,
    generator: &super::iteration::Generator,
) -> Result<Written> {
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
    let mut files = write_configs(dir, net, sys)?;
    let groups = super::iteration::groups_json(&generator.groups());
    write(dir.join("comm_groups.json"), &groups, &mut files)?;
    let prefix = dir.join("workload");
    use rayon::prelude::*;
    let traces: Vec<PathBuf> = (0..generator.npus())
        .into_par_iter()
        .map(|r| {
            let p = chakra::rank_path(&prefix, r as usize);
            chakra::write_file(&p, &generator.trace(r)).map(|_| p)
        })
        .collect::<Result<_>>()?;
    files.extend(traces);
    Ok(Written { files, prefix })
}

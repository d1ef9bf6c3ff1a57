//! ASTRA-sim's system JSON (`Sys::initialize_sys`, `CollectiveImplLookup.cc`) and its
//! remote-memory JSON. Every key ASTRA-sim reads is accepted; any other key is an error
//! with its line and column (ASTRA-sim itself would ignore it silently, which hides typos).
//! Keys ASTRA-sim reads but that do not change the congestion-unaware timing
//! (`local-reduction-delay`, tracing, LogGP `L o g G`, `boost-mode`, which this version
//! ignores) are accepted and listed in [`AstraSystem::ignored`].
//!
//! Units as ASTRA-sim reads them: `endpoint-delay` ns, `local-mem-bw` GB/s **decimal**
//! (×1e9), `peak-perf` TFLOP/s (×1e12).

use crate::astra::model::Impl;
use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::Path;

/// Order of chunks waiting in a queue (`scheduling-policy`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Policy {
    /// The most recently created chunk first (priority counter increases).
    #[serde(rename = "LIFO")]
    Lifo,
    /// The oldest chunk first.
    #[serde(rename = "FIFO")]
    Fifo,
    /// Priorities from the workload (all equal for microbenchmarks: behaves as FIFO).
    #[serde(rename = "EXPLICIT")]
    Explicit,
}

/// `collective-optimization`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Optimization {
    /// A full all-reduce on every dimension.
    #[serde(rename = "baseline")]
    Baseline,
    /// Reduce-scatter inward, all-reduce on the last dimension, all-gather back.
    #[serde(rename = "localBWAware")]
    LocalBwAware,
}

/// The serde mirror of the JSON file: every key ASTRA-sim's `initialize_sys` reads.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct Raw {
    scheduling_policy: Option<Policy>,
    endpoint_delay: Option<f64>,
    active_chunks_per_dimension: Option<f64>,
    preferred_dataset_splits: Option<f64>,
    collective_optimization: Option<Optimization>,
    local_reduction_delay: Option<Value>,
    local_mem_bw: Option<f64>,
    peak_perf: Option<f64>,
    roofline_enabled: Option<Value>,
    trace_enabled: Option<Value>,
    replay_only: Option<Value>,
    track_local_mem: Option<Value>,
    local_mem_trace_filename: Option<Value>,
    model_shared_bus: Option<Value>,
    boost_mode: Option<Value>,
    intra_dimension_scheduling: Option<String>,
    inter_dimension_scheduling: Option<String>,
    #[serde(rename = "L")]
    l: Option<Value>,
    o: Option<Value>,
    g: Option<Value>,
    #[serde(rename = "G")]
    g_big: Option<Value>,
    all_reduce_implementation: Option<Vec<String>>,
    all_gather_implementation: Option<Vec<String>>,
    reduce_scatter_implementation: Option<Vec<String>>,
    all_to_all_implementation: Option<Vec<String>>,
    all_reduce_implementation_custom: Option<Value>,
    all_gather_implementation_custom: Option<Value>,
    reduce_scatter_implementation_custom: Option<Value>,
    all_to_all_implementation_custom: Option<Value>,
    per_node_custom_implementation: Option<Value>,
}

/// A validated system configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct AstraSystem {
    /// `scheduling-policy` (default LIFO).
    pub policy: Policy,
    /// `endpoint-delay` E, ns (default 10). Must be ≥ 1: 0 crashes ASTRA-sim.
    pub endpoint_delay_ns: u64,
    /// `active-chunks-per-dimension` A (default 1).
    pub active_chunks: u32,
    /// `preferred-dataset-splits` S, the number of chunks (must be ≥ 1).
    pub splits: u32,
    /// `collective-optimization` (default baseline).
    pub optimization: Optimization,
    /// `local-mem-bw`, GB/s decimal (must be > 0).
    pub local_mem_bw_gbps: f64,
    /// `peak-perf`, TFLOP/s.
    pub peak_perf_tflops: f64,
    /// `roofline-enabled`.
    pub roofline: bool,
    /// Implementations per dimension for all-reduce, all-gather, reduce-scatter, all-to-all.
    pub all_reduce: Vec<Impl>,
    /// `all-gather-implementation`.
    pub all_gather: Vec<Impl>,
    /// `reduce-scatter-implementation`.
    pub reduce_scatter: Vec<Impl>,
    /// `all-to-all-implementation`.
    pub all_to_all: Vec<Impl>,
    /// Keys read but without effect on the congestion-unaware timing.
    pub ignored: Vec<String>,
    /// The remote memory (a separate file, `--remote-memory-configuration`; none unless
    /// set).
    pub remote: RemoteMemory,
}

fn flag(v: &Option<Value>, key: &str, what: &str) -> Result<bool> {
    match v {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(Value::Number(n)) if n.as_f64() == Some(0.0) => Ok(false),
        Some(Value::Number(n)) if n.as_f64() == Some(1.0) => Ok(true),
        Some(other) => Err(Error::input(
            format!("{what}: '{key}'"),
            format!("expected 0 or 1, got {other}"),
        )),
    }
}

fn count(v: Option<f64>, default: f64, key: &str, what: &str, why_zero: &str) -> Result<u32> {
    let x = v.unwrap_or(default);
    if !(x.fract() == 0.0 && x >= 0.0 && x <= u32::MAX as f64) {
        return Err(Error::input(
            format!("{what}: '{key}'"),
            format!("expected a whole number, got {x}"),
        ));
    }
    if x == 0.0 {
        return Err(Error::input(
            format!("{what}: '{key}'"),
            why_zero.to_string(),
        ));
    }
    Ok(x as u32)
}

fn impls(v: &Option<Vec<String>>, key: &str, what: &str) -> Result<Vec<Impl>> {
    let list = v.as_deref().unwrap_or(&[]);
    list.iter()
        .enumerate()
        .map(|(i, s)| Impl::parse(s).map_err(|e| e.context(format!("{what}: '{key}'[{i}]"))))
        .collect()
}

impl AstraSystem {
    /// Parses JSON text; `what` names the source in errors.
    pub fn parse(text: &str, what: &str) -> Result<AstraSystem> {
        let raw: Raw = serde_json::from_str(text).map_err(|e| Error::File {
            path: what.into(),
            message: e.to_string(),
        })?;
        Self::validate(raw, what)
    }

    fn validate(raw: Raw, what: &str) -> Result<AstraSystem> {
        let e = raw.endpoint_delay.unwrap_or(10.0);
        if !(e.fract() == 0.0 && e >= 0.0) {
            return Err(Error::input(
                format!("{what}: 'endpoint-delay'"),
                format!("expected whole nanoseconds, got {e}"),
            ));
        }
        if e == 0.0 {
            return Err(Error::input(
                format!("{what}: 'endpoint-delay'"),
                "must be at least 1 ns: with 0 ASTRA-sim schedules an event at the current \
                 time and aborts (EventQueue.cpp: assert(event_time > current_time))",
            ));
        }
        let lmbw = raw.local_mem_bw.unwrap_or(0.0);
        if !(lmbw > 0.0 && lmbw.is_finite()) {
            return Err(Error::input(
                format!("{what}: 'local-mem-bw'"),
                "must be set and > 0 GB/s: ASTRA-sim's default 0 divides the local reduction \
                 time by zero",
            ));
        }
        let key = |k: &str| format!("{what}: '{k}'");
        use crate::units::{BANDWIDTH_RANGE, FLOP_RATE_RANGE, SECONDS_RANGE};
        SECONDS_RANGE.check(&key("endpoint-delay"), &format!("{e:?} ns"), e * 1e-9)?;
        BANDWIDTH_RANGE.check(&key("local-mem-bw"), &format!("{lmbw:?} GB/s"), lmbw * 1e9)?;
        let peak = raw.peak_perf.unwrap_or(0.0);
        if peak.is_nan() || peak.is_sign_negative() {
            return Err(Error::input(
                key("peak-perf"),
                format!("expected TFLOP/s ≥ 0, got {peak}"),
            ));
        }
        FLOP_RATE_RANGE.check(&key("peak-perf"), &format!("{peak:?} TFLOP/s"), peak * 1e12)?;
        let mut ignored = Vec::new();
        for (key, present) in [
            ("local-reduction-delay", raw.local_reduction_delay.is_some()),
            ("boost-mode", raw.boost_mode.is_some()),
            ("trace-enabled", raw.trace_enabled.is_some()),
            ("replay-only", raw.replay_only.is_some()),
            ("track-local-mem", raw.track_local_mem.is_some()),
            (
                "local-mem-trace-filename",
                raw.local_mem_trace_filename.is_some(),
            ),
            ("model-shared-bus", raw.model_shared_bus.is_some()),
            ("L", raw.l.is_some()),
            ("o", raw.o.is_some()),
            ("g", raw.g.is_some()),
            ("G", raw.g_big.is_some()),
        ] {
            if present {
                ignored.push(key.to_string());
            }
        }
        for (key, v) in [
            (
                "all-reduce-implementation-custom",
                &raw.all_reduce_implementation_custom,
            ),
            (
                "all-gather-implementation-custom",
                &raw.all_gather_implementation_custom,
            ),
            (
                "reduce-scatter-implementation-custom",
                &raw.reduce_scatter_implementation_custom,
            ),
            (
                "all-to-all-implementation-custom",
                &raw.all_to_all_implementation_custom,
            ),
            (
                "per-node-custom-implementation",
                &raw.per_node_custom_implementation,
            ),
        ] {
            if v.is_some() {
                return Err(Error::Unsupported(format!(
                    "{what}: '{key}': custom (Chakra-defined) collective implementations are not modelled"
                )));
            }
        }
        for (key, v, default) in [
            (
                "intra-dimension-scheduling",
                &raw.intra_dimension_scheduling,
                "FIFO",
            ),
            (
                "inter-dimension-scheduling",
                &raw.inter_dimension_scheduling,
                "ascending",
            ),
        ] {
            if let Some(s) = v
                && !s.eq_ignore_ascii_case(default)
            {
                return Err(Error::Unsupported(format!(
                    "{what}: '{key}': only '{default}' is modelled, got '{s}'"
                )));
            }
        }
        Ok(AstraSystem {
            policy: raw.scheduling_policy.unwrap_or(Policy::Lifo),
            endpoint_delay_ns: e as u64,
            active_chunks: count(
                raw.active_chunks_per_dimension,
                1.0,
                "active-chunks-per-dimension",
                what,
                "must be at least 1: no chunk could ever run",
            )?,
            splits: count(
                raw.preferred_dataset_splits,
                0.0,
                "preferred-dataset-splits",
                what,
                "must be set and at least 1: ASTRA-sim's default 0 divides the collective \
                 size by zero when it computes the chunk size",
            )?,
            optimization: raw
                .collective_optimization
                .unwrap_or(Optimization::Baseline),
            local_mem_bw_gbps: lmbw,
            peak_perf_tflops: peak,
            roofline: flag(&raw.roofline_enabled, "roofline-enabled", what)?,
            all_reduce: impls(
                &raw.all_reduce_implementation,
                "all-reduce-implementation",
                what,
            )?,
            all_gather: impls(
                &raw.all_gather_implementation,
                "all-gather-implementation",
                what,
            )?,
            reduce_scatter: impls(
                &raw.reduce_scatter_implementation,
                "reduce-scatter-implementation",
                what,
            )?,
            all_to_all: impls(
                &raw.all_to_all_implementation,
                "all-to-all-implementation",
                what,
            )?,
            ignored,
            remote: RemoteMemory::NONE,
        })
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<AstraSystem> {
        let text = crate::limits::read_text(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// The JSON text of this configuration (the keys ASTRA-sim reads).
    pub fn to_json(&self) -> String {
        let names = |v: &[Impl]| v.iter().map(|i| i.astra_name()).collect::<Vec<_>>();
        let j = serde_json::json!({
            "scheduling-policy": self.policy,
            "endpoint-delay": self.endpoint_delay_ns,
            "active-chunks-per-dimension": self.active_chunks,
            "preferred-dataset-splits": self.splits,
            "all-reduce-implementation": names(&self.all_reduce),
            "all-gather-implementation": names(&self.all_gather),
            "reduce-scatter-implementation": names(&self.reduce_scatter),
            "all-to-all-implementation": names(&self.all_to_all),
            "collective-optimization": self.optimization,
            "local-mem-bw": self.local_mem_bw_gbps,
            "roofline-enabled": self.roofline as u8,
            "peak-perf": self.peak_perf_tflops,
        });
        // Serialising a json! value cannot fail.
        serde_json::to_string_pretty(&j).unwrap_or_default() + "\n"
    }
}

/// `memory-type` of ASTRA-sim's analytical remote memory
/// (`extern/remote_memory_backend/analytical/AnalyticalRemoteMemory.hh` at astra-sim
/// 518bd513, submodule astra-memory-analytical 641cce85).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryType {
    /// `NO_MEMORY_EXPANSION`: no remote memory; ASTRA-sim stops at the first MEM node.
    NoExpansion,
    /// `PER_NPU_MEMORY_EXPANSION`: each NPU has its own remote memory; its accesses do
    /// not queue behind other NPUs'.
    PerNpu,
    /// `PER_NODE_MEMORY_EXPANSION`: one remote memory per node of `num-npus-per-node`
    /// NPUs, one access at a time (a FIFO queue per node).
    PerNode,
    /// `MEMORY_POOL`: one remote memory for every NPU, one access at a time.
    Pool,
}

impl MemoryType {
    /// Every type with its JSON name.
    pub const ALL: [(MemoryType, &'static str); 4] = [
        (MemoryType::NoExpansion, "NO_MEMORY_EXPANSION"),
        (MemoryType::PerNpu, "PER_NPU_MEMORY_EXPANSION"),
        (MemoryType::PerNode, "PER_NODE_MEMORY_EXPANSION"),
        (MemoryType::Pool, "MEMORY_POOL"),
    ];

    /// The JSON name.
    pub fn name(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(t, _)| *t == self)
            .map_or("", |(_, n)| n)
    }
}

/// ASTRA-sim's remote-memory JSON (`--remote-memory-configuration`), as
/// `AnalyticalRemoteMemory`'s constructor reads it: `memory-type`, `remote-mem-latency`
/// (ns, `uint64_t`), `remote-mem-bw` (GB/s decimal, `uint64_t`: bytes per ns), and for
/// `PER_NODE_MEMORY_EXPANSION` `num-nodes` and `num-npus-per-node` (`int`).
///
/// A MEM_LOAD_NODE or MEM_STORE_NODE of `tensor_size` S bytes takes
/// `remote-mem-latency + ⌊S / remote-mem-bw⌋` ns
/// (`AnalyticalRemoteMemory::get_remote_mem_runtime`), queued FIFO behind the node's or
/// the pool's access in flight for the shared types (`issue`, `call`).
#[derive(Clone, Debug, PartialEq)]
pub struct RemoteMemory {
    /// `memory-type`.
    pub memory_type: MemoryType,
    /// `remote-mem-latency`, ns per access.
    pub latency_ns: u64,
    /// `remote-mem-bw`, GB/s decimal (= bytes per ns).
    pub bw_gbps: u64,
    /// `num-nodes` (`PER_NODE_MEMORY_EXPANSION`).
    pub num_nodes: u32,
    /// `num-npus-per-node` (`PER_NODE_MEMORY_EXPANSION`).
    pub npus_per_node: u32,
}

/// The serde mirror of the remote-memory JSON: every key `AnalyticalRemoteMemory` reads.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawMemory {
    memory_type: Option<String>,
    remote_mem_latency: Option<f64>,
    remote_mem_bw: Option<f64>,
    num_nodes: Option<f64>,
    num_npus_per_node: Option<f64>,
}

/// A whole number for a key ASTRA-sim reads into an integer type (nlohmann's conversion
/// of a JSON float truncates it silently, so fractions are refused here).
fn whole(v: Option<f64>, key: &str, what: &str, unit: &str, max: f64) -> Result<Option<f64>> {
    match v {
        None => Ok(None),
        Some(x) if x.fract() == 0.0 && x >= 0.0 && x <= max => Ok(Some(x)),
        Some(x) => Err(Error::input(
            format!("{what}: '{key}'"),
            format!(
                "expected a whole number of {unit} (ASTRA-sim reads an integer; {x} would be truncated or overflow)"
            ),
        )),
    }
}

impl RemoteMemory {
    /// No remote memory (`{"memory-type": "NO_MEMORY_EXPANSION"}`).
    pub const NONE: RemoteMemory = RemoteMemory {
        memory_type: MemoryType::NoExpansion,
        latency_ns: 0,
        bw_gbps: 0,
        num_nodes: 0,
        npus_per_node: 0,
    };

    /// Parses JSON text; `what` names the source in errors. Refused, as ASTRA-sim would
    /// misbehave on them: a missing `memory-type` (left uninitialised), an unknown one
    /// (exits), `remote-mem-bw` 0 or missing with remote memory (divides by zero),
    /// `num-npus-per-node` or `num-nodes` 0 or missing for `PER_NODE_MEMORY_EXPANSION`
    /// (divides by zero, indexes past its queues).
    pub fn parse(text: &str, what: &str) -> Result<RemoteMemory> {
        let raw: RawMemory = serde_json::from_str(text).map_err(|e| Error::File {
            path: what.into(),
            message: e.to_string(),
        })?;
        let key = |k: &str| format!("{what}: '{k}'");
        let names: Vec<&str> = MemoryType::ALL.iter().map(|(_, n)| *n).collect();
        let name = raw.memory_type.ok_or_else(|| {
            Error::input(
                key("memory-type"),
                format!("missing (expected one of {})", names.join(", ")),
            )
        })?;
        let memory_type = MemoryType::ALL
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(t, _)| *t)
            .ok_or_else(|| {
                Error::unknown("memory-type", &name, &names).context(key("memory-type"))
            })?;
        let u64max = u64::MAX as f64;
        let i32max = i32::MAX as f64;
        let latency = whole(
            raw.remote_mem_latency,
            "remote-mem-latency",
            what,
            "ns",
            u64max,
        )?;
        let bw = whole(raw.remote_mem_bw, "remote-mem-bw", what, "GB/s", u64max)?;
        let nodes = whole(raw.num_nodes, "num-nodes", what, "nodes", i32max)?;
        let per = whole(
            raw.num_npus_per_node,
            "num-npus-per-node",
            what,
            "NPUs",
            i32max,
        )?;
        let remote = memory_type != MemoryType::NoExpansion;
        if remote && bw.unwrap_or(0.0) == 0.0 {
            return Err(Error::input(
                key("remote-mem-bw"),
                "must be set and at least 1 GB/s with remote memory: ASTRA-sim's default 0 \
                 divides every access by zero",
            ));
        }
        let per_node = memory_type == MemoryType::PerNode;
        for (k, v) in [("num-nodes", nodes), ("num-npus-per-node", per)] {
            if per_node && v.unwrap_or(0.0) == 0.0 {
                return Err(Error::input(
                    key(k),
                    "must be set and at least 1 for PER_NODE_MEMORY_EXPANSION: ASTRA-sim's \
                     default 0 divides the NPU id by zero or has no queue for the node",
                ));
            }
        }
        Ok(RemoteMemory {
            memory_type,
            latency_ns: latency.unwrap_or(0.0) as u64,
            bw_gbps: bw.unwrap_or(0.0) as u64,
            num_nodes: if per_node {
                nodes.unwrap_or(0.0) as u32
            } else {
                0
            },
            npus_per_node: if per_node {
                per.unwrap_or(0.0) as u32
            } else {
                0
            },
        })
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<RemoteMemory> {
        let text = crate::limits::read_text(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Whether MEM nodes go to a remote memory (any type but `NO_MEMORY_EXPANSION`).
    pub fn is_remote(&self) -> bool {
        self.memory_type != MemoryType::NoExpansion
    }

    /// Time of one access of `bytes`, ns: `remote-mem-latency + ⌊bytes / remote-mem-bw⌋`
    /// (`AnalyticalRemoteMemory::get_remote_mem_runtime`, double division then a cast).
    pub fn access_ns(&self, bytes: u64) -> f64 {
        self.latency_ns as f64 + (bytes as f64 / self.bw_gbps.max(1) as f64).floor()
    }

    /// The access queue NPU `npu`'s requests wait in: its node's
    /// (`npu / num-npus-per-node`) for `PER_NODE_MEMORY_EXPANSION`, the one pool queue
    /// for `MEMORY_POOL`, none otherwise (each NPU's accesses run independently).
    pub fn queue(&self, npu: u32) -> Option<u32> {
        match self.memory_type {
            MemoryType::PerNode => Some(npu / self.npus_per_node.max(1)),
            MemoryType::Pool => Some(0),
            _ => None,
        }
    }

    /// Checks that the nodes cover a network of `npus` NPUs (ASTRA-sim indexes its
    /// per-node queues by `npu / num-npus-per-node` without a bound check).
    pub fn check_npus(&self, npus: u64, what: &str) -> Result<()> {
        let covered = u64::from(self.num_nodes) * u64::from(self.npus_per_node);
        if self.memory_type == MemoryType::PerNode && covered < npus {
            return Err(Error::input(
                format!("{what}: 'num-nodes'"),
                format!(
                    "{} nodes × {} NPUs per node cover {covered} NPUs, but the network has {npus}",
                    self.num_nodes, self.npus_per_node
                ),
            ));
        }
        Ok(())
    }

    /// The remote memory as one of our tiers (`kind = "remote"`), per NPU, for a network
    /// of `npus` NPUs: bandwidth `remote-mem-bw` (bytes per ns = GB/s) divided by the NPUs
    /// sharing one access queue (1 per NPU, `num-npus-per-node` per node, all NPUs for the
    /// pool: one access at a time, so each gets that share when all move data, as a
    /// tier's `bandwidth` is defined), latency `remote-mem-latency`. ASTRA-sim's JSON has
    /// no capacity: the tier's is unbounded (infinite). None for `NO_MEMORY_EXPANSION`.
    pub fn tier(&self, npus: u64) -> Option<crate::offload::Tier> {
        let shared = match self.memory_type {
            MemoryType::NoExpansion => return None,
            MemoryType::PerNpu => 1.0,
            MemoryType::PerNode => self.npus_per_node.max(1) as f64,
            MemoryType::Pool => npus.max(1) as f64,
        };
        Some(crate::offload::Tier {
            kind: crate::offload::TierKind::Remote,
            capacity: crate::units::Bytes::new(f64::INFINITY),
            bandwidth: crate::units::Bandwidth::new(self.bw_gbps as f64 * 1e9 / shared),
            latency: crate::units::Seconds::new(self.latency_ns as f64 * 1e-9),
            adam_rate: 0.0,
        })
    }

    /// A per-NPU remote memory standing for one of our tiers (what `export astra` writes
    /// for an offloaded plan): `PER_NPU_MEMORY_EXPANSION`, because a tier's bandwidth is
    /// already each GPU's share with every sharer moving data, so accesses need no further
    /// queue; `remote-mem-bw` = bandwidth in GB/s and `remote-mem-latency` = latency in
    /// ns, both rounded to whole numbers (ASTRA-sim reads integers; at least 1 GB/s).
    pub fn per_npu(tier: &crate::offload::Tier) -> RemoteMemory {
        RemoteMemory {
            memory_type: MemoryType::PerNpu,
            latency_ns: (tier.latency.get() * 1e9).round() as u64,
            bw_gbps: ((tier.bandwidth.get() / 1e9).round() as u64).max(1),
            num_nodes: 0,
            npus_per_node: 0,
        }
    }

    /// The JSON text (the keys ASTRA-sim reads for this type).
    pub fn to_json(&self) -> String {
        if !self.is_remote() {
            return REMOTE_MEMORY_JSON.to_string();
        }
        let mut j = serde_json::json!({ "memory-type": self.memory_type.name() });
        j["remote-mem-latency"] = self.latency_ns.into();
        j["remote-mem-bw"] = self.bw_gbps.into();
        if self.memory_type == MemoryType::PerNode {
            j["num-nodes"] = self.num_nodes.into();
            j["num-npus-per-node"] = self.npus_per_node.into();
        }
        // Serialising a json! value cannot fail.
        serde_json::to_string_pretty(&j).unwrap_or_default() + "\n"
    }
}

/// Parses a remote-memory JSON (see [`RemoteMemory::parse`]).
pub fn read_remote_memory(text: &str, what: &str) -> Result<RemoteMemory> {
    RemoteMemory::parse(text, what)
}

/// The remote-memory JSON Astrolabe writes when nothing is offloaded.
pub const REMOTE_MEMORY_JSON: &str = "{\n    \"memory-type\": \"NO_MEMORY_EXPANSION\"\n}\n";

#[cfg(test)]
mod tests {
    use super::*;

    const SYS: &str = r#"{"scheduling-policy": "LIFO", "endpoint-delay": 10,
        "active-chunks-per-dimension": 1, "preferred-dataset-splits": 4,
        "all-reduce-implementation": ["ring", "halvingDoubling"],
        "all-gather-implementation": ["ring"], "reduce-scatter-implementation": ["direct"],
        "all-to-all-implementation": ["ring"], "collective-optimization": "localBWAware",
        "local-mem-bw": 1600, "boost-mode": 0, "roofline-enabled": 0, "peak-perf": 900}"#;

    #[test]
    fn parses_every_key_and_round_trips() {
        let s = AstraSystem::parse(SYS, "s.json").unwrap();
        assert_eq!((s.splits, s.active_chunks, s.endpoint_delay_ns), (4, 1, 10));
        assert_eq!(s.all_reduce, vec![Impl::Ring, Impl::HalvingDoubling]);
        assert_eq!(s.ignored, vec!["boost-mode"]);
        let back = AstraSystem::parse(&s.to_json(), "x").unwrap();
        assert_eq!(back.all_reduce, s.all_reduce);
        assert_eq!(back.optimization, Optimization::LocalBwAware);
    }

    #[test]
    fn unknown_key_is_an_error_with_line() {
        let e = AstraSystem::parse(&SYS.replace("\"boost-mode\"", "\"boost-mod\""), "s.json")
            .unwrap_err()
            .to_string();
        assert!(e.contains("boost-mod") && e.contains("line"), "{e}");
    }

    #[test]
    fn crashing_values_are_clear_errors() {
        for (from, to, key) in [
            (
                "\"endpoint-delay\": 10",
                "\"endpoint-delay\": 0",
                "endpoint-delay",
            ),
            (
                "\"preferred-dataset-splits\": 4",
                "\"preferred-dataset-splits\": 0",
                "preferred",
            ),
            (
                "\"local-mem-bw\": 1600",
                "\"local-mem-bw\": 0",
                "local-mem-bw",
            ),
        ] {
            let e = AstraSystem::parse(&SYS.replace(from, to), "s")
                .unwrap_err()
                .to_string();
            assert!(e.contains(key) && e.contains("ASTRA-sim"), "{e}");
        }
    }

    #[test]
    fn remote_memory() {
        assert!(read_remote_memory(REMOTE_MEMORY_JSON, "m").is_ok());
        assert!(read_remote_memory("{\"memory-type\": \"X\", \"y\": 1}", "m").is_err());
    }
}

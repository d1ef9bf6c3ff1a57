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

/// The remote-memory JSON: `{"memory-type": "NO_MEMORY_EXPANSION"}` is the only kind
/// the analytical backend's microbenchmarks use; others are reported as unsupported.
pub fn read_remote_memory(text: &str, what: &str) -> Result<()> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Mem {
        #[serde(rename = "memory-type")]
        memory_type: String,
    }
    let m: Mem = serde_json::from_str(text).map_err(|e| Error::File {
        path: what.into(),
        message: e.to_string(),
    })?;
    if m.memory_type != "NO_MEMORY_EXPANSION" {
        return Err(Error::Unsupported(format!(
            "{what}: memory-type '{}' is not modelled (only NO_MEMORY_EXPANSION)",
            m.memory_type
        )));
    }
    Ok(())
}

/// The remote-memory JSON Astrolabe writes.
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

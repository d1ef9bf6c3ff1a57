//! The sweep file (`--scenario sweep.toml`): the serde mirror of what a user writes, and
//! the parsing of axis values shared with the command-line flags.
//!
//! ```toml
//! model = "gpt3-175b"
//! system = "dgx-a100"
//! gpus = [512]
//! global_batch = 1536
//! top = 20
//! sort = "mfu"
//! pareto = "time,memory"
//!
//! [axes]
//! tp = [4, 8]
//! schedule = ["1f1b", "interleaved:2"]
//! recompute = ["selective", "full"]
//!
//! [[networks]]
//! name = "W-1D"
//! topology = "switch(512, 350GB/s, 500ns)"
//! ```

use crate::compute::{Fp8Recipe, Precision};
use crate::error::{Error, Result};
use crate::network::Topology;
use crate::parallel::{CpKind, Order, Recompute, Schedule};
use serde::de::{DeserializeOwned, IntoDeserializer};
use serde::{Deserialize, Serialize};

/// A sweep file as written.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SweepFile {
    /// Model name or path.
    pub model: Option<String>,
    /// System name or path.
    pub system: Option<String>,
    /// Device counts.
    pub gpus: Option<Vec<u32>>,
    /// Global batch (sequences).
    pub global_batch: Option<u32>,
    /// Entries to rank.
    pub top: Option<usize>,
    /// Ranking objective.
    pub sort: Option<String>,
    /// Two Pareto objectives, "a,b".
    pub pareto: Option<String>,
    /// Refuse grids larger than this.
    pub max_configs: Option<u64>,
    /// Per-NPU bandwidth budget to split across dimensions, e.g. "600 GB/s".
    pub bandwidth_budget: Option<String>,
    /// Axis lists.
    #[serde(default)]
    pub axes: AxesFile,
    /// Networks to compare.
    #[serde(default)]
    pub networks: Vec<NetworkEntry>,
}

/// `[axes]`: each a list of values; absent means the default list.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AxesFile {
    /// Tensor-parallel degrees.
    pub tp: Option<Vec<u32>>,
    /// Pipeline degrees.
    pub pp: Option<Vec<u32>>,
    /// Expert-parallel degrees.
    pub ep: Option<Vec<u32>>,
    /// Micro-batch sizes.
    pub micro_batch: Option<Vec<u32>>,
    /// Schedules: "gpipe", "1f1b", "interleaved:V".
    pub schedule: Option<Vec<String>>,
    /// ZeRO stages.
    pub zero: Option<Vec<u8>>,
    /// "none", "selective", "full".
    pub recompute: Option<Vec<String>>,
    /// Sequence parallel values.
    pub sequence_parallel: Option<Vec<bool>>,
    /// DP overlap values.
    pub dp_overlap: Option<Vec<bool>>,
    /// TP overlap values.
    pub tp_overlap: Option<Vec<bool>>,
    /// "tp-dp-pp", "tp-pp-dp".
    pub order: Option<Vec<String>>,
    /// Flash attention values.
    pub flash_attention: Option<Vec<bool>>,
    /// Embedding and loss as pipeline layers: values.
    pub account_for_ends: Option<Vec<bool>>,
    /// Offload plans ("none", "optimizer", "zero-offload", "optimizer+activations", …).
    pub offload: Option<Vec<String>>,
    /// Context-parallel degrees.
    pub cp: Option<Vec<u32>>,
    /// Context-parallel kinds: "ring", "a2a".
    pub cp_kind: Option<Vec<String>>,
    /// Sequence lengths.
    pub seq_len: Option<Vec<u32>>,
    /// Precisions: "bf16", "fp8", "fp8:current", "fp8:block", "mxfp8", "nvfp4", ….
    pub precision: Option<Vec<String>>,
    /// Expert tensor-parallel degrees (each must divide tp).
    pub etp: Option<Vec<u32>>,
    /// How ZeRO-3 runs in every plan with zero = 3: "fsdp" or "deepspeed-2021" (a setting).
    pub zero3_impl: Option<String>,
    /// Backward TP collectives beside the other GEMM in every plan (a setting).
    pub tp_bwd_overlap: Option<bool>,
    /// MoE all-to-alls beside another micro-batch's compute in every plan (a setting).
    pub ep_overlap: Option<bool>,
    /// Shared experts beside their micro-batch's all-to-alls in every plan (a setting).
    pub shared_expert_overlap: Option<bool>,
    /// MoE token dispatch in every plan: "alltoall" or "hierarchical" (a setting).
    pub ep_dispatch: Option<String>,
    /// Local experts' GEMMs in every plan: "streams" or "fused" (a setting).
    pub grouped_gemm: Option<String>,
    /// Loss kernels in every plan: "unfused" or "te" (a setting).
    pub cross_entropy: Option<String>,
    /// Fused-attention kernel in every plan: "te" or "fa2" (a setting).
    pub attention_kernel: Option<String>,
    /// Optimizer layout in every plan: "adam", "adam-fp32-grads", "adam-bf16-moments" or
    /// "adam-bf16-state" (a setting).
    pub optimizer: Option<String>,
    /// Weights only in the 8- or 4-bit format in every low-precision plan (a setting).
    pub fp8_params: Option<bool>,
    /// 8-bit fused attention in every low-precision plan with flash attention (a setting).
    pub fp8_attention: Option<bool>,
    /// CUDA-graph-captured parts in every plan: "none", "full" or scope names (a setting).
    pub cuda_graphs: Option<String>,
    /// Submodules recomputed in every plan without full recomputation: "none" or a comma
    /// list of layernorm, mla_up_proj, moe_act, mlp, moe, shared_experts, core_attn (a setting).
    pub recompute_modules: Option<String>,
    /// Memory reserve per device in every plan, e.g. "4GiB" (a setting).
    pub memory_reserve: Option<String>,
}

/// `[[networks]]`: a named topology in the command-line syntax.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkEntry {
    /// Label in the results.
    pub name: String,
    /// Topology string, e.g. "ring(16, 200GB/s, 500ns) x switch(32, 50GB/s, 1us)".
    pub topology: String,
}

/// Parses a kebab-case enum value through its serde names, listing the valid ones.
fn parse_enum<T: DeserializeOwned>(what: &str, s: &str, valid: &[&str]) -> Result<T> {
    let de: serde::de::value::StrDeserializer<'_, serde::de::value::Error> =
        s.trim().into_deserializer();
    T::deserialize(de).map_err(|_| unknown_in(what, s, valid))
}

/// Parses a schedule: `gpipe`, `1f1b`, `interleaved:V` (V ≥ 2 chunks per stage),
/// `interleaved:all` (every V that splits the stages into equal chunks: `(Interleaved, 0)`).
pub fn parse_schedule(s: &str) -> Result<(Schedule, u32)> {
    const VALID: [&str; 5] = [
        "gpipe",
        "1f1b",
        "interleaved:V",
        "interleaved:all",
        "dualpipe",
    ];
    if let Some(v) = s.trim().strip_prefix("interleaved") {
        let v = v.strip_prefix(':').unwrap_or("2");
        if v == "all" {
            return Ok((Schedule::Interleaved, 0));
        }
        let v: u32 = v.parse().ok().filter(|&v| v >= 2).ok_or_else(|| {
            Error::input(
                "schedule",
                format!("'{s}': expected interleaved:V with V ≥ 2, or interleaved:all"),
            )
        })?;
        return Ok((Schedule::Interleaved, v));
    }
    Ok((parse_enum("schedule", s, &VALID)?, 1))
}

/// Parses a recomputation mode.
pub fn parse_recompute(s: &str) -> Result<Recompute> {
    parse_enum("recompute", s, &["none", "selective", "full", "op"])
}

/// Parses a group order.
pub fn parse_order(s: &str) -> Result<Order> {
    parse_enum("order", s, &["tp-dp-pp", "tp-pp-dp"])
}

/// Parses a context-parallel kind.
pub fn parse_cp_kind(s: &str) -> Result<CpKind> {
    parse_enum("cp_kind", s, &["ring", "a2a"])
}

/// Parses a precision with an optional FP8 recipe: `fp8:current` (default `delayed`).
pub fn parse_precision(s: &str) -> Result<(Precision, Fp8Recipe)> {
    let (p, r) = s.split_once(':').unwrap_or((s, "delayed"));
    let p = Precision::parse(p).map_err(|e| e.context("precision"))?;
    let r = parse_enum("fp8 recipe", r, &["delayed", "current", "block"])?;
    Ok((p, r))
}

/// Parses `NAME=TOPOLOGY` (or a bare topology, named after itself).
pub fn parse_network(s: &str) -> Result<(String, Topology)> {
    match s.split_once('=') {
        Some((name, topo)) if !name.contains('(') => {
            Ok((name.trim().to_string(), Topology::parse(topo)?))
        }
        _ => {
            let t = Topology::parse(s)?;
            Ok((t.to_string(), t))
        }
    }
}

/// An unknown value of a named setting, with did-you-mean against `valid`.
fn unknown_in(what: &str, name: &str, valid: &[&str]) -> Error {
    Error::input(what, Error::unknown("value", name, valid).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_schedules_and_modes() {
        assert_eq!(parse_schedule("1f1b").unwrap(), (Schedule::OneFOneB, 1));
        assert_eq!(parse_schedule("gpipe").unwrap(), (Schedule::Gpipe, 1));
        assert_eq!(
            parse_schedule("interleaved:4").unwrap(),
            (Schedule::Interleaved, 4)
        );
        assert!(parse_schedule("interleaved:1").is_err());
        // Every depth that splits the stages into equal chunks, expanded by the grid.
        assert_eq!(
            parse_schedule("interleaved:all").unwrap(),
            (Schedule::Interleaved, 0)
        );
        let e = parse_schedule("interleaved:any").unwrap_err().to_string();
        assert!(e.contains("interleaved:all"), "{e}");
        let e = parse_schedule("1f1").unwrap_err().to_string();
        assert!(e.contains("did you mean '1f1b'"), "{e}");
        assert_eq!(parse_recompute("full").unwrap(), Recompute::Full);
        assert_eq!(parse_order("tp-pp-dp").unwrap(), Order::TpPpDp);
        assert_eq!(parse_cp_kind("a2a").unwrap(), CpKind::A2a);
        assert_eq!(
            parse_precision("fp8:current").unwrap(),
            (Precision::Fp8, Fp8Recipe::Current)
        );
        assert!(parse_precision("fp8:sometimes").is_err());
    }

    #[test]
    fn file_denies_unknown_keys() {
        let e = toml::from_str::<SweepFile>("modle = \"x\"")
            .unwrap_err()
            .to_string();
        assert!(e.contains("modle"), "{e}");
        let e = toml::from_str::<SweepFile>("[axes]\ntpp = [1]")
            .unwrap_err()
            .to_string();
        assert!(e.contains("tpp"), "{e}");
    }

    #[test]
    fn named_networks() {
        let (n, t) = parse_network("W-1D=switch(512, 350GB/s, 500ns)").unwrap();
        assert_eq!(n, "W-1D");
        assert_eq!(t.npus(), 512);
    }
}

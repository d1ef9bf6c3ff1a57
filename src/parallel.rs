//! Parallelism plans. [`PlanSpec`] mirrors what the user wrote (flags or a `[plan]` table);
//! [`Plan`] is the validated, `Copy` form: the degrees multiply to the device count, tensor
//! parallelism divides the heads, pipeline stages divide the layers, the global batch is a
//! multiple of dp × micro-batch. [`Placement`] maps each group onto network dimensions,
//! innermost first (TP on the fastest), as DESIGN.md §4.

mod context;
mod knobs;
mod layout;
mod placement;
mod stages;

pub use context::CpKind;
pub use knobs::{
    AttentionKernel, CrossEntropy, CudaGraphs, DEEPSPEED_2021_RATE, EpDispatch, GroupedGemm,
    LoraTargets, Optimizer, Order, Recompute, RecomputeModules, Schedule, Zero3Impl,
};
pub use layout::Layout;
pub use placement::{Placement, Span};
pub use stages::{SplitSpec, Stages};

use crate::compute::{Fp8Recipe, Precision};
use crate::error::{Error, Result};
use crate::model::{Model, ModelKind};
use crate::units::Bytes;
use serde::{Deserialize, Serialize};

/// A plan as written (flags or a scenario's `[plan]` table). Unset fields of a `[plan]`
/// table (and unset flags) take [`PlanSpec::practice`], today's Megatron-LM/NeMo settings;
/// `PlanSpec::default()` is the bare textbook plan (every optimisation off) that formula
/// tests start from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default = "PlanSpec::practice")]
pub struct PlanSpec {
    /// Total devices (default: the whole system).
    pub gpus: Option<u32>,
    /// Data-parallel degree (default: gpus / (tp·pp)).
    pub dp: Option<u32>,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree.
    pub pp: u32,
    /// Expert-parallel degree (MoE; carved out of DP).
    pub ep: u32,
    /// Context-parallel degree (sequence split for attention; Megatron-LM `--cp`).
    pub cp: u32,
    /// Context-parallel algorithm: ring (KV blocks point to point) or a2a (Ulysses).
    pub cp_kind: CpKind,
    /// Sequence length (default: the model's).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seq_len: Option<u32>,
    /// Packed sequences: tokens per sample (attention spans each sample; unset: one sample
    /// per sequence).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub packed_sample_len: Option<u32>,
    /// Explicit layers per pipeline stage (length pp).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers_per_stage: Option<Vec<u32>>,
    /// Megatron-core's pipeline layout string (`--pipeline-model-parallel-layout`, e.g.
    /// `Et*4|(t*4|)*14tmL`): sets the layers per stage and, unless given, the virtual
    /// stages ([`Layout`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pipeline_layout: Option<String>,
    /// Layers on the first stage (the rest split evenly; Megatron-LM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_stage_layers: Option<u32>,
    /// Layers on the last stage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_stage_layers: Option<u32>,
    /// Count the embedding as one layer in the pipeline split (Megatron-LM).
    pub account_for_embedding: bool,
    /// Count the output head and loss as one layer in the pipeline split.
    pub account_for_loss: bool,
    /// FP8 scaling recipe (for `precision = "fp8"`).
    pub fp8_recipe: Fp8Recipe,
    /// Low-precision parameters: with an 8- or 4-bit precision the model keeps its
    /// weights only in that format (no 16-bit copy; the fp32 master lives with the
    /// optimizer) and gathers them in it (Megatron-core `fp8_param_gather` /
    /// `fp4_param_gather`, set by Megatron-Bridge's FP8, MXFP8 and NVFP4 recipes).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fp8_params: bool,
    /// With an 8- or 4-bit precision, the first and the last this many layers run in BF16
    /// (Megatron-core `--first-last-layers-bf16` with `--num-layers-at-start-in-bf16` and
    /// `--num-layers-at-end-in-bf16`: `fp8_utils.py`/`fp4_utils.py` give those layers no
    /// FP8/FP4 context; Megatron-Bridge's NVFP4 recipes keep the last 4 (gpt-oss 20B,
    /// Llama 3 8B) or 14 (Nemotron 3 Super) layers in BF16).
    #[serde(default)]
    pub bf16_first_layers: u32,
    /// See `bf16_first_layers`.
    #[serde(default)]
    pub bf16_last_layers: u32,
    /// LoRA adapter rank (0: full training or SFT; > 0: frozen base weights).
    pub lora_rank: u32,
    /// Which linear layers get LoRA adapters.
    pub lora_targets: LoraTargets,
    /// HSDP shard-group size (ZeRO-3 within groups of this many DP ranks, replicated
    /// across them); unset: shard over all of DP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hsdp: Option<u32>,
    /// Expert tensor parallelism: the TP degree of the expert MLPs (Megatron-LM
    /// `--expert-tensor-parallel-size`; default: tp). Must divide tp.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub etp: Option<u32>,
    /// Tokens of the busiest expert over the mean (routing load imbalance, ≥ 1); with a
    /// capacity factor and padding, the capacity factor.
    pub moe_imbalance: f64,
    /// Sequence parallelism (Korthikanti et al. 2022 §4.2.2) on the TP group.
    pub sequence_parallel: bool,
    /// Micro-batch size b (sequences).
    pub micro_batch: u32,
    /// Global batch B (sequences; default dp × micro_batch).
    pub global_batch: Option<u32>,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Model chunks per stage for the interleaved schedule.
    pub virtual_stages: u32,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// Submodules recomputed besides (Megatron-core `recompute_modules`: layernorm,
    /// mla_up_proj, moe_act).
    #[serde(default)]
    pub recompute_modules: RecomputeModules,
    /// ZeRO stage 0–3 (3 = FSDP).
    pub zero: u8,
    /// How ZeRO-3 runs (only with `zero = 3`); unset: `fsdp` with HSDP (an FSDP
    /// feature), else `deepspeed-2021` (ZeRO-3 as DeepSpeed ran it in the published
    /// comparisons, SC'21 Table 2).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero3_impl: Option<Zero3Impl>,
    /// Overlap the DP gradient reduction with backward, in buckets.
    pub dp_overlap: bool,
    /// DP bucket size (gradient bytes per bucket); unset = the framework's default
    /// ([`Plan::dp_bucket_bytes`]).
    #[serde(with = "opt_bytes", skip_serializing_if = "Option::is_none")]
    pub dp_bucket: Option<Bytes>,
    /// Device memory set aside for the CUDA context, communication buffers, library
    /// workspaces and allocator fragmentation; unset = the device's
    /// ([`crate::compute::Device::memory_reserve`]).
    #[serde(with = "opt_bytes", skip_serializing_if = "Option::is_none")]
    pub memory_reserve: Option<Bytes>,
    /// Overlap TP communication with compute.
    pub tp_overlap: bool,
    /// Run the backward's TP collectives of a column-parallel layer beside its other GEMM
    /// (the input-gradient all-reduce under the weight-gradient GEMM: Megatron-LM's
    /// asynchronous tensor-parallel all-reduce, on since Sept. 2021); false: they block,
    /// as in Megatron-LM before it (the SC'21 runs).
    pub tp_bwd_overlap: bool,
    /// Overlap the MoE dispatch and combine all-to-alls of one micro-batch with the compute
    /// of another (Megatron-core `overlap_moe_expert_parallel_comm`, the 1F1B A2A overlap;
    /// DeepSeek-V3's DualPipe does the same per chunk pair).
    pub ep_overlap: bool,
    /// Run the shared experts on a side stream beside the dispatch and combine all-to-alls
    /// of their own micro-batch (Megatron-core `moe_shared_expert_overlap`).
    pub shared_expert_overlap: bool,
    /// Matrix precision.
    pub precision: Precision,
    /// Optimizer state layout.
    pub optimizer: Optimizer,
    /// Fused (flash) attention: no s×s activations, attention recomputed in backward.
    pub flash_attention: bool,
    /// Which fused-attention kernel: "te" (default, the device's `flash_*` rates) or "fa2"
    /// (FlashAttention-2, PyTorch SDPA's default; the device's `fa2_*` rates).
    #[serde(default)]
    pub attention_kernel: AttentionKernel,
    /// Fused attention with 8-bit inputs (Transformer Engine's FP8 dot-product attention;
    /// Megatron-core `fp8_dot_product_attention`): the device's `fp8_attention` or
    /// `mxfp8_attention` speed-ups over the 16-bit kernel. Needs flash attention, the `te`
    /// kernel and an 8- or 4-bit precision.
    #[serde(default)]
    pub fp8_attention: bool,
    /// Group order on the network.
    pub order: Order,
    /// How MoE tokens are dispatched.
    pub ep_dispatch: EpDispatch,
    /// How a rank runs its local experts' GEMMs.
    pub grouped_gemm: GroupedGemm,
    /// How the last stage computes the loss: "unfused" (default) or "te".
    #[serde(default)]
    pub cross_entropy: CrossEntropy,
    /// The layer parts captured as CUDA graphs (no host calls per operation).
    #[serde(default)]
    pub cuda_graphs: CudaGraphs,
    /// What leaves HBM for a slower memory tier (`crate::offload`): "optimizer",
    /// "zero-offload", "zero-infinity", …; default none.
    #[serde(skip_serializing_if = "crate::offload::Offload::is_none")]
    pub offload: crate::offload::Offload,
}

impl Default for PlanSpec {
    fn default() -> Self {
        PlanSpec {
            gpus: None,
            dp: None,
            tp: 1,
            pp: 1,
            ep: 1,
            cp: 1,
            cp_kind: CpKind::Ring,
            seq_len: None,
            packed_sample_len: None,
            layers_per_stage: None,
            pipeline_layout: None,
            first_stage_layers: None,
            last_stage_layers: None,
            account_for_embedding: false,
            account_for_loss: false,
            fp8_recipe: Fp8Recipe::Delayed,
            fp8_params: false,
            bf16_first_layers: 0,
            bf16_last_layers: 0,
            lora_rank: 0,
            lora_targets: LoraTargets::All,
            hsdp: None,
            etp: None,
            moe_imbalance: 1.0,
            sequence_parallel: false,
            micro_batch: 1,
            global_batch: None,
            schedule: Schedule::OneFOneB,
            virtual_stages: 1,
            recompute: Recompute::None,
            recompute_modules: RecomputeModules::NONE,
            zero: 0,
            zero3_impl: None,
            dp_overlap: true,
            dp_bucket: None,
            memory_reserve: None,
            tp_overlap: false,
            tp_bwd_overlap: true,
            ep_overlap: false,
            shared_expert_overlap: false,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            flash_attention: false,
            attention_kernel: AttentionKernel::Te,
            fp8_attention: false,
            order: Order::TpDpPp,
            ep_dispatch: EpDispatch::Alltoall,
            grouped_gemm: GroupedGemm::Streams,
            cross_entropy: CrossEntropy::Unfused,
            cuda_graphs: CudaGraphs::NONE,
            offload: crate::offload::Offload::NONE,
        }
    }
}

impl PlanSpec {
    /// What current Megatron-LM and NeMo pre-training recipes turn on, the defaults of every
    /// command: fused (flash) attention (Dao et al. 2022; Transformer Engine's default),
    /// sequence parallelism with tensor parallelism (Korthikanti et al. 2022; NeMo sets
    /// `sequence_parallel` whenever TP > 1), TP communication overlapped with GEMMs
    /// (NeMo's `tp_comm_overlap`) and the distributed optimizer (Megatron-LM
    /// `--use-distributed-optimizer`: optimizer states sharded over DP, i.e. ZeRO-1).
    pub fn practice() -> PlanSpec {
        PlanSpec {
            sequence_parallel: true,
            tp_overlap: true,
            flash_attention: true,
            zero: 1,
            ..PlanSpec::default()
        }
    }

    /// The settings of `practice()` that differ from `PlanSpec::default()`, as
    /// (key, value) for "defaults used" notes.
    pub const PRACTICE: [(&'static str, &'static str); 4] = [
        ("flash_attention", "true"),
        ("sequence_parallel", "true (when tp > 1)"),
        ("tp_overlap", "true"),
        ("zero", "1 (distributed optimizer)"),
    ];
}

/// A validated plan. `Copy`, so sweeps can build millions of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// Devices = dp · tp · pp · cp.
    pub gpus: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Tensor-parallel degree t.
    pub tp: u32,
    /// Pipeline stages p.
    pub pp: u32,
    /// Expert-parallel degree (etp·ep divides tp·cp·dp: MoE parallel folding).
    pub ep: u32,
    /// Context-parallel degree c (devices = dp · tp · pp · c).
    pub cp: u32,
    /// Context-parallel algorithm.
    pub cp_kind: CpKind,
    /// Sequence length s (the model's unless overridden).
    pub seq_len: u32,
    /// Tokens per packed sample, at most `seq_len` (`seq_len`: unpacked).
    pub sample_len: u32,
    /// Layers per pipeline stage.
    pub stages: Stages,
    /// FP8 scaling recipe.
    pub fp8_recipe: Fp8Recipe,
    /// Weights kept only in the low-precision format (`PlanSpec::fp8_params`; false in 16-bit).
    pub fp8_params: bool,
    /// Layers run in BF16 at the start and at the end of the model
    /// (`PlanSpec::bf16_first_layers`, `bf16_last_layers`; zero in 16-bit).
    pub bf16_layers: [u32; 2],
    /// LoRA rank (0 = every weight trains).
    pub lora_rank: u32,
    /// LoRA target layers.
    pub lora_targets: LoraTargets,
    /// HSDP shard-group size (0 = none: ZeRO shards over all of DP × CP).
    pub hsdp: u32,
    /// Expert tensor-parallel degree (divides tp).
    pub etp: u32,
    /// Busiest expert's tokens over the mean (≥ 1).
    pub moe_imbalance: f64,
    /// Sequence parallel.
    pub sp: bool,
    /// Micro-batch b.
    pub micro_batch: u32,
    /// Global batch B.
    pub global_batch: u32,
    /// Micro-batches per iteration per pipeline, m = B / (dp · b).
    pub micro_batches: u32,
    /// Schedule.
    pub schedule: Schedule,
    /// Chunks per stage v (1 unless interleaved).
    pub v: u32,
    /// Recomputation.
    pub recompute: Recompute,
    /// Submodules recomputed besides.
    pub recompute_modules: RecomputeModules,
    /// ZeRO stage.
    pub zero: u8,
    /// How ZeRO-3 runs.
    pub zero3_impl: Zero3Impl,
    /// DP overlap.
    pub dp_overlap: bool,
    /// DP bucket as given (None: the framework's default, [`Plan::dp_bucket_bytes`]).
    pub dp_bucket: Option<Bytes>,
    /// Memory reserve as given (None: the device's).
    pub memory_reserve: Option<Bytes>,
    /// TP overlap.
    pub tp_overlap: bool,
    /// Backward TP collectives beside the other GEMM (asynchronous all-reduce).
    pub tp_bwd_overlap: bool,
    /// EP all-to-alls beside another micro-batch's compute.
    pub ep_overlap: bool,
    /// Shared experts beside their micro-batch's dispatch and combine.
    pub shared_expert_overlap: bool,
    /// Precision.
    pub precision: Precision,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Flash attention.
    pub flash_attention: bool,
    /// The fused-attention kernel.
    pub attention_kernel: AttentionKernel,
    /// 8-bit fused attention (`PlanSpec::fp8_attention`).
    pub fp8_attention: bool,
    /// Group order.
    pub order: Order,
    /// MoE token dispatch.
    pub ep_dispatch: EpDispatch,
    /// Local experts' GEMMs.
    pub grouped_gemm: GroupedGemm,
    /// The loss kernels.
    pub cross_entropy: CrossEntropy,
    /// CUDA-graph-captured parts.
    pub cuda_graphs: CudaGraphs,
    /// The embedding counted as a layer of the pipeline split.
    pub account_for_embedding: bool,
    /// The output head and loss counted as a layer of the pipeline split.
    pub account_for_loss: bool,
    /// Offload plan (`crate::offload`).
    pub offload: crate::offload::Offload,
}

/// `spec` with its pipeline layout resolved into the explicit split and the virtual
/// stages: a layout of `p·v` entries implies `v` (and the interleaved schedule when
/// `v > 1`) unless the plan sets them; it replaces the other ways to split the layers.
fn with_layout(spec: &PlanSpec, text: &str, model: &Model) -> Result<(PlanSpec, Option<u32>)> {
    let ModelKind::Transformer(t) = &model.kind else {
        return Err(bad("pipeline_layout", "needs a transformer model".into()));
    };
    if spec.layers_per_stage.is_some()
        || spec.first_stage_layers.is_some()
        || spec.last_stage_layers.is_some()
        || spec.account_for_embedding
        || spec.account_for_loss
    {
        return Err(bad(
            "pipeline_layout",
            "sets the split itself: drop layers_per_stage, first/last_stage_layers and \
             account_for_embedding/loss"
                .into(),
        ));
    }
    let l = layout::resolve(text, spec.pp, t.layers, t.mtp_layers)?;
    let mut s = spec.clone();
    s.pipeline_layout = None;
    s.layers_per_stage = Some(l.per_rank);
    if s.virtual_stages == 1 && s.schedule == Schedule::OneFOneB {
        s.virtual_stages = l.v;
        if l.v > 1 {
            s.schedule = Schedule::Interleaved;
        }
    } else if s.virtual_stages != l.v {
        return Err(bad(
            "pipeline_layout",
            format!(
                "{} virtual stages on pp = {} ranks is v = {}, but the plan sets virtual_stages = {}",
                l.v * spec.pp,
                spec.pp,
                l.v,
                s.virtual_stages
            ),
        ));
    }
    Ok((s, l.mtp_rank))
}

pub(crate) fn bad(key: &str, msg: String) -> Error {
    Error::Unsupported(format!("invalid plan: {key}: {msg}"))
}

/// HSDP: the shard group (at least 2: a group of 1 shards nothing) divides DP and holds
/// whole EP groups; it shards ZeRO-3 style (zero = 3) and is not combined with CP here.
fn check_hsdp(g: u32, dp: u32, s: &PlanSpec) -> Result<()> {
    if g == 1 {
        return Err(bad(
            "hsdp",
            "a shard group of 1 shards nothing: that is plain data parallelism (--zero 0, or \
             --zero 1 for the distributed optimizer); --fsdp shards over all DP ranks"
                .into(),
        ));
    }
    if g == 0 || !dp.is_multiple_of(g) || !g.is_multiple_of(s.ep) {
        return Err(bad(
            "hsdp",
            format!(
                "shard group {g} must divide dp = {dp} and be a multiple of ep = {}",
                s.ep
            ),
        ));
    }
    if s.zero != 3 {
        return Err(bad(
            "hsdp",
            "needs zero = 3 (the shards are ZeRO-3/FSDP shards)".into(),
        ));
    }
    if s.cp > 1 {
        return Err(bad("hsdp", "with cp > 1 is not modelled".into()));
    }
    Ok(())
}

/// Expert parallelism. Under MoE parallel folding (the default `tp-dp-pp` order) the MoE
/// layers map ETP × EP × expert-DP onto each stage's TP × CP × DP ranks, so `etp·ep` must
/// divide `tp·cp·dp` (EP may exceed DP: Liu et al. 2025, arXiv 2504.14960). With the
/// `tp-pp-dp` order EP stays inside DP and must divide it.
fn check_ep(s: &PlanSpec, dp: u32) -> Result<()> {
    let etp = s.etp.unwrap_or(s.tp);
    let block = u64::from(s.tp) * u64::from(s.cp) * u64::from(dp);
    let expert = u64::from(etp) * u64::from(s.ep);
    if s.order == Order::TpPpDp && !dp.is_multiple_of(s.ep) {
        return Err(bad(
            "ep",
            format!(
                "{} must divide dp = {dp} with order tp-pp-dp (no folding)",
                s.ep
            ),
        ));
    }
    if expert == 0 || !block.is_multiple_of(expert) {
        return Err(bad(
            "ep",
            format!(
                "etp·ep = {etp}·{} must divide tp·cp·dp = {}·{}·{dp} (MoE parallel folding: \
                 the expert groups fold over each pipeline stage's ranks)",
                s.ep, s.tp, s.cp
            ),
        ));
    }
    Ok(())
}

/// Whether full recomputation can run beside a plan's CUDA graphs: with none, or with the
/// full-iteration graph (Megatron-core refuses it with Transformer Engine's scoped graphs).
/// `Plan::new` refuses it otherwise; a sweep drops it.
pub fn full_recompute_graphs(g: CudaGraphs) -> bool {
    g == CudaGraphs::NONE || g == CudaGraphs::FULL
}

/// Whether 8-bit attention can run in a plan: Transformer Engine's fused cuDNN kernel
/// (flash attention with the `te` kernel) inside an 8- or 4-bit recipe. `Plan::new` refuses
/// it otherwise, naming the reason; a sweep leaves it off there.
pub fn fp8_attention_runs(precision: Precision, flash: bool, kernel: AttentionKernel) -> bool {
    flash && kernel == AttentionKernel::Te && precision.is_low()
}

impl Plan {
    /// Expert-data-parallel degree under MoE parallel folding: the ranks of a pipeline
    /// stage holding the same experts, `t·c·d / (etp·ep)` (Liu et al. 2025, arXiv
    /// 2504.14960 §3; Megatron-core builds the expert-DP group from these ranks and its
    /// distributed optimizer shards the expert parameters over it).
    pub fn expert_dp(&self) -> u32 {
        (self.tp * self.cp * self.dp / (self.etp * self.ep).max(1)).max(1)
    }

    /// Gradient bytes per DP bucket of the gradient reduction (ZeRO 0–2): the one given, or
    /// Megatron-LM's default of `max(4·10⁷, 10⁶·dp)` parameters, "larger DP sizes need
    /// larger buckets to ensure collectives do not become latency-bound" (Megatron-core
    /// `DistributedDataParallelConfig`). Each bucket is one collective and pays its
    /// latency, so buckets trade latency against overlap. Without DP overlap Megatron-LM
    /// does not bucket (one collective). ZeRO-3's default is DeepSpeed's prefetch bucket
    /// (`estimate::transformer::comm::zero3`).
    pub fn dp_bucket_bytes(&self) -> Bytes {
        if let Some(b) = self.dp_bucket {
            return b;
        }
        let g = self.optimizer.bytes_per_param().1;
        Bytes::new((1e6 * self.dp as f64).max(4e7) * g)
    }

    /// Validates `spec` for `model` on `system_gpus` devices (used when `gpus` is unset).
    pub fn new(spec: &PlanSpec, model: &Model, system_gpus: u32) -> Result<Plan> {
        if let Some(text) = &spec.pipeline_layout {
            let (s, mtp_rank) = with_layout(spec, text, model)?;
            let mut plan = Plan::new(&s, model, system_gpus)?;
            // MTP modules on a rank other than the last (Megatron-core `mtp_standalone`). Only
            // an interleaved layout can do it: with v = 1 the ranks after the modules' would
            // hold no layer, which `layout::resolve` refuses, so DualPipe (v = 1) never sees it.
            if let Some(r) = mtp_rank.filter(|&r| r + 1 < plan.pp) {
                let layers = s.layers_per_stage.as_ref().map_or(0, |l| l[r as usize]);
                plan.stages.mtp_apart = Some((r, layers));
            }
            return Ok(plan);
        }
        let s = spec;
        for (k, v) in [
            ("tp", s.tp),
            ("pp", s.pp),
            ("ep", s.ep),
            ("cp", s.cp),
            ("micro_batch", s.micro_batch),
            ("seq_len", s.seq_len.unwrap_or(1)),
            ("packed_sample_len", s.packed_sample_len.unwrap_or(1)),
        ] {
            if v == 0 {
                return Err(bad(k, "must be ≥ 1".into()));
            }
        }
        let gpus = s.gpus.unwrap_or(system_gpus);
        // Degrees are u32; their products are checked so that a huge degree is an error,
        // never a wrapped (wrong) count.
        let mul = |a: u32, b: u32, what: &str| {
            a.checked_mul(b)
                .ok_or_else(|| bad(what, format!("{a} × {b} is too large")))
        };
        let tp_pp = mul(mul(s.tp, s.pp, "tp")?, s.cp, "cp")?;
        let dp = match s.dp {
            Some(d) => d,
            None if gpus.is_multiple_of(tp_pp) => gpus / tp_pp,
            None => {
                return Err(bad(
                    "gpus",
                    format!("{gpus} is not a multiple of tp·pp·cp = {tp_pp}"),
                ));
            }
        };
        if dp == 0 || mul(dp, tp_pp, "dp")? != gpus {
            return Err(bad(
                "dp",
                format!(
                    "dp·tp·pp·cp = {}·{}·{}·{} ≠ gpus = {gpus}",
                    dp, s.tp, s.pp, s.cp
                ),
            ));
        }
        let dp_mb = mul(dp, s.micro_batch, "micro_batch")?;
        let gb = s.global_batch.unwrap_or(dp_mb);
        if gb == 0 {
            return Err(bad("global_batch", "must be ≥ 1 sequence".into()));
        }
        if let Some(b) = s.dp_bucket
            && (b.get().is_nan() || b.get() <= 0.0)
        {
            return Err(bad("dp_bucket", "must be > 0 bytes, e.g. \"25MB\"".into()));
        }
        if let Some(b) = s.memory_reserve
            && !(b.get() >= 0.0 && b.get().is_finite())
        {
            return Err(bad(
                "memory_reserve",
                "must be ≥ 0 bytes, e.g. \"6GiB\"".into(),
            ));
        }
        if !gb.is_multiple_of(dp_mb) {
            return Err(bad(
                "global_batch",
                format!("{gb} is not a multiple of dp·micro_batch = {dp_mb}"),
            ));
        }
        let m = gb / (dp * s.micro_batch);
        let v = match s.schedule {
            Schedule::Interleaved => s.virtual_stages,
            _ if s.virtual_stages != 1 => {
                return Err(bad(
                    "virtual_stages",
                    "needs schedule = \"interleaved\"".into(),
                ));
            }
            _ => 1,
        };
        if v == 0 {
            return Err(bad("virtual_stages", "must be ≥ 1".into()));
        }
        if s.schedule == Schedule::DualPipe && (!s.pp.is_multiple_of(2) || !m.is_multiple_of(2)) {
            return Err(bad(
                "schedule",
                format!(
                    "dualpipe needs an even pp and an even number of micro-batches \
                     (pp = {}, micro-batches = {m}; DeepSeek-V3 report §3.2.1)",
                    s.pp
                ),
            ));
        }
        if s.schedule == Schedule::Interleaved && s.pp > 1 && !m.is_multiple_of(s.pp) {
            return Err(bad(
                "global_batch",
                format!(
                    "interleaving needs micro-batches ({m}) divisible by pp ({})",
                    s.pp
                ),
            ));
        }
        if s.fp8_params && !s.precision.is_low() {
            return Err(bad(
                "fp8_params",
                format!(
                    "needs an 8- or 4-bit precision (fp8, mxfp8, nvfp4), got {}",
                    s.precision.name()
                ),
            ));
        }
        if s.fp8_params && s.zero == 0 {
            // Megatron-LM arguments.py: "--fp8-param-gather only supported with distributed
            // optimizer, torch fsdp2, megatron fsdp": the fp32 master lives in the sharded
            // optimizer.
            return Err(bad(
                "fp8_params",
                "needs the distributed optimizer or FSDP (zero ≥ 1), which keep the fp32 master weights"
                    .into(),
            ));
        }
        if s.zero > 3 {
            return Err(bad(
                "zero",
                format!("stage {} does not exist; expected 0–3", s.zero),
            ));
        }
        if s.zero == 2 && s.pp > 1 {
            // DeepSpeed's pipeline engine asserts ZeRO stage < 2
            // (deepspeed/runtime/pipe/engine.py); Megatron-core's distributed optimizer is
            // ZeRO-1 and its FSDP is ZeRO-3 (which torchtitan also composes with PP).
            return Err(bad(
                "zero",
                format!(
                    "ZeRO-2 with pp = {} runs in no framework (DeepSpeed's pipeline engine refuses ZeRO-2 and -3; Megatron-core has ZeRO-1 or FSDP); use zero = 1, or 3 (FSDP, as torchtitan runs it with PP)",
                    s.pp
                ),
            ));
        }
        if s.attention_kernel == AttentionKernel::Fa2 && !s.flash_attention {
            return Err(bad(
                "attention_kernel",
                "fa2 is a fused-attention kernel and the plan has flash attention off; turn it on (--flash-attention) or drop the kernel".into(),
            ));
        }
        if s.fp8_attention
            && !fp8_attention_runs(s.precision, s.flash_attention, s.attention_kernel)
        {
            let why = if !s.flash_attention {
                "runs in the fused attention kernel and the plan has flash attention off; turn it on (--flash-attention)".to_string()
            } else if s.attention_kernel != AttentionKernel::Te {
                "is Transformer Engine's cuDNN kernel; use --attention-kernel te".into()
            } else {
                format!(
                    "needs an fp8, mxfp8 or nvfp4 precision (Transformer Engine runs it inside the FP8 recipe), not {}",
                    s.precision.name()
                )
            };
            return Err(bad("fp8_attention", format!("8-bit attention {why}")));
        }
        if s.recompute == Recompute::Full && !full_recompute_graphs(s.cuda_graphs) {
            // Megatron-core `TransformerConfig.__post_init__` (d98e8a64dd): with CUDA graphs,
            // "full recompute is only supported with full iteration CUDA graph".
            return Err(bad(
                "recompute",
                format!(
                    "full recomputation runs with the full-iteration CUDA graph or none (Megatron-core: \"full recompute is only supported with full iteration CUDA graph\"), not the scopes {}; use --cuda-graphs full or none, or --recompute selective",
                    s.cuda_graphs
                ),
            ));
        }
        check_ep(s, dp)?;
        if let Some(g) = s.hsdp {
            check_hsdp(g, dp, s)?;
        }
        if s.etp.is_some_and(|e| e == 0 || !s.tp.is_multiple_of(e)) {
            return Err(bad("etp", format!("must divide tp = {}", s.tp)));
        }
        if !(s.moe_imbalance >= 1.0 && s.moe_imbalance.is_finite()) {
            return Err(bad(
                "moe_imbalance",
                format!("must be ≥ 1, got {}", s.moe_imbalance),
            ));
        }
        let (layers, model_seq) = match &model.kind {
            ModelKind::Transformer(t) => (t.layers, t.s as u32),
            _ => (s.pp, 1),
        };
        let split = SplitSpec {
            explicit: s.layers_per_stage.as_deref(),
            first: s.first_stage_layers,
            last: s.last_stage_layers,
            embedding_as_layer: s.account_for_embedding,
            loss_as_layer: s.account_for_loss,
        };
        let plan = Plan {
            gpus,
            dp,
            tp: s.tp,
            pp: s.pp,
            ep: s.ep,
            cp: s.cp,
            cp_kind: s.cp_kind,
            seq_len: s.seq_len.unwrap_or(model_seq),
            sample_len: s
                .packed_sample_len
                .unwrap_or(u32::MAX)
                .min(s.seq_len.unwrap_or(model_seq)),
            stages: Stages::new(layers, s.pp, &split)?,
            fp8_recipe: s.fp8_recipe,
            fp8_params: s.fp8_params,
            bf16_layers: [s.bf16_first_layers, s.bf16_last_layers],
            lora_rank: s.lora_rank,
            lora_targets: s.lora_targets,
            hsdp: s.hsdp.unwrap_or(0),
            etp: s.etp.unwrap_or(s.tp),
            moe_imbalance: s.moe_imbalance,
            sp: s.sequence_parallel && s.tp > 1,
            micro_batch: s.micro_batch,
            global_batch: gb,
            micro_batches: m,
            schedule: s.schedule,
            v,
            recompute: s.recompute,
            recompute_modules: s.recompute_modules,
            zero: s.zero,
            zero3_impl: s.zero3_impl.unwrap_or(if s.hsdp.is_some() {
                Zero3Impl::Fsdp
            } else {
                Zero3Impl::Deepspeed2021
            }),
            dp_overlap: s.dp_overlap,
            dp_bucket: s.dp_bucket,
            memory_reserve: s.memory_reserve,
            tp_overlap: s.tp_overlap,
            tp_bwd_overlap: s.tp_bwd_overlap,
            ep_overlap: s.ep_overlap,
            shared_expert_overlap: s.shared_expert_overlap,
            precision: s.precision,
            optimizer: s.optimizer,
            flash_attention: s.flash_attention,
            attention_kernel: s.attention_kernel,
            fp8_attention: s.fp8_attention,
            order: s.order,
            ep_dispatch: s.ep_dispatch,
            grouped_gemm: s.grouped_gemm,
            cross_entropy: s.cross_entropy,
            cuda_graphs: s.cuda_graphs,
            account_for_embedding: s.account_for_embedding,
            account_for_loss: s.account_for_loss,
            offload: s.offload,
        };
        crate::offload::check_plan(&plan, model)?;
        plan.check_bf16_layers(layers)?;
        let ends = u32::from(s.account_for_embedding) + u32::from(s.account_for_loss);
        plan.check_model(model, ends)?;
        Ok(plan)
    }

    /// What Megatron-core accepts of BF16 first and last layers (`TransformerConfig`
    /// `__post_init__`): a low precision to leave (not FP8 delayed scaling, "Delayed
    /// scaling does not support first / last layer in BF16"), and at most the layers of
    /// one pipeline stage at each end (here: of the first and of the last stage; with one
    /// stage, the two ends may not overlap).
    fn check_bf16_layers(&self, layers: u32) -> Result<()> {
        let [a, z] = self.bf16_layers;
        if a == 0 && z == 0 {
            return Ok(());
        }
        let key = if a > 0 {
            "bf16_first_layers"
        } else {
            "bf16_last_layers"
        };
        if !self.precision.is_low() {
            return Err(bad(
                key,
                format!(
                    "keeps layers in BF16 out of an 8- or 4-bit precision; the plan runs {}",
                    self.precision.name()
                ),
            ));
        }
        if self.precision == Precision::Fp8 && self.fp8_recipe == Fp8Recipe::Delayed {
            return Err(bad(
                key,
                "FP8 delayed scaling cannot keep layers in BF16 (Megatron-core); use --fp8-recipe current, or mxfp8".into(),
            ));
        }
        let st = self.stages;
        if a > st.first {
            return Err(bad(
                "bf16_first_layers",
                format!(
                    "{a} is more than the {} layers of the first stage",
                    st.first
                ),
            ));
        }
        if z > st.last {
            return Err(bad(
                "bf16_last_layers",
                format!("{z} is more than the {} layers of the last stage", st.last),
            ));
        }
        if self.pp == 1 && a + z > layers {
            return Err(bad(
                "bf16_last_layers",
                format!("{a} first and {z} last BF16 layers overlap in a model of {layers}"),
            ));
        }
        Ok(())
    }

    /// What Megatron-core accepts of `recompute_modules` (`TransformerConfig`
    /// `__post_init__`): `mla_up_proj` only with MLA, `moe_act` only with MoE, `moe` not
    /// with the EP overlap (`overlap_moe_expert_parallel_comm`), `shared_experts` not with
    /// the shared-expert overlap (absent here); full recomputation already recomputes every
    /// module. Where Megatron-core silently skips a module no layer has (`mlp` in a model
    /// without dense MLP layers, `moe` or `shared_experts` without MoE layers or shared
    /// experts, `core_attn` without attention layers), this refuses it, as a misspelt plan;
    /// `core_attn` beside `--recompute selective` would recompute the attention core twice.
    fn check_recompute_modules(&self, t: &crate::model::Transformer) -> Result<()> {
        use RecomputeModules as R;
        let r = self.recompute_modules;
        let counts = t.hybrid.as_ref().map(|hy| hy.counts);
        let dense_mlp = match counts {
            Some(c) => c.mlp > 0,
            None => t.experts <= 1 || t.dense_layers > 0,
        };
        let moe = t.experts > 1;
        let attention = counts.is_none_or(|c| c.attention > 0);
        let msg = if r == R::NONE {
            return Ok(());
        } else if self.recompute == Recompute::Full {
            "full recomputation already recomputes every module; use --recompute none or selective with --recompute-modules"
        } else if self.recompute == Recompute::Op {
            "per-op recomputation (--recompute op) already recomputes the norms and activations; use --recompute none or selective with --recompute-modules"
        } else if r.has(R::MLA_UP_PROJ) && t.attn.mla.is_none() {
            "mla_up_proj needs a model with multi-latent attention"
        } else if r.has(R::MOE_ACT) && !moe {
            "moe_act needs an MoE model"
        } else if r.has(R::MOE) && !moe {
            "moe needs an MoE model"
        } else if r.has(R::MOE) && self.ep_overlap {
            "moe cannot be recomputed with the EP overlap (Megatron-core: disable moe in recompute_modules when enabling overlap_moe_expert_parallel_comm)"
        } else if r.has(R::SHARED_EXPERTS) && !(moe && t.shared_f > 0.0) {
            "shared_experts needs an MoE model with shared experts"
        } else if r.has(R::MLP) && !dense_mlp {
            "mlp recomputes dense MLP layers, and this model has none (its MoE layers take moe)"
        } else if r.has(R::CORE_ATTN) && !attention {
            "core_attn needs a model with attention layers"
        } else if r.has(R::CORE_ATTN) && self.recompute == Recompute::Selective {
            "--recompute selective already recomputes the core attention; give core_attn with --recompute none"
        } else {
            return Ok(());
        };
        Err(bad("recompute_modules", msg.to_string()))
    }

    /// The EP overlap as Megatron-core allows it (`TransformerConfig.__post_init__` at
    /// d98e8a64dd, `overlap_moe_expert_parallel_comm`): expert parallelism ("only supported
    /// with expert model parallelism"); with a pipeline, virtual stages ("must be specified
    /// when pipeline_model_parallel_size > 1": the combined 1F1B runs in the interleaved
    /// schedule; DualPipe pairs its own chunks); no full recomputation ("disable full
    /// recomputation"); at most one MTP layer; no `moe` or `mlp` CUDA-graph scope ("not
    /// supported with overlap_moe_expert_parallel_comm"). `moe` recomputed and the
    /// shared-expert overlap are refused by their own checks.
    fn check_ep_overlap(&self, t: &crate::model::Transformer) -> Result<()> {
        if !self.ep_overlap {
            return Ok(());
        }
        let msg = if self.ep <= 1 {
            "needs expert parallelism (ep > 1): Megatron-core's overlap pairs the MoE all-to-alls"
                .to_string()
        } else if self.pp > 1
            && !matches!(self.schedule, Schedule::Interleaved | Schedule::DualPipe)
        {
            format!(
                "with pp = {} needs virtual stages (--virtual-stages ≥ 2): Megatron-core runs the overlap in its interleaved schedule",
                self.pp
            )
        } else if self.recompute == Recompute::Full {
            "cannot run with full recomputation (Megatron-core: disable full recomputation when enabling overlap_moe_expert_parallel_comm); use --recompute selective or --recompute-modules".to_string()
        } else if t.mtp_layers > 1 {
            format!(
                "runs with at most one MTP layer (Megatron-core), and this model has {}",
                t.mtp_layers
            )
        } else if self.cuda_graphs != CudaGraphs::FULL
            && (self.cuda_graphs.has(CudaGraphs::MOE) || self.cuda_graphs.has(CudaGraphs::MLP))
        {
            "cannot run with the moe or mlp CUDA-graph scope (Megatron-core); capture attn, moe_router and moe_preprocess, or the full iteration".to_string()
        } else {
            return Ok(());
        };
        Err(bad("ep_overlap", msg))
    }

    /// The shared-expert overlap as Megatron-core allows it (`TransformerConfig.__post_init__`
    /// and `MoELayer` at d98e8a64dd): a model with shared experts; not beside the 1F1B
    /// all-to-all overlap ("disable moe_shared_expert_overlap when enabling
    /// overlap_moe_expert_parallel_comm"), nor DualPipe, which pairs the all-to-alls the
    /// same way; not with a LatentMoE in training; not with `shared_experts` recomputed
    /// ("shared_experts recompute cannot work with --moe-shared-expert-overlap").
    fn check_shared_expert_overlap(&self, t: &crate::model::Transformer) -> Result<()> {
        if !self.shared_expert_overlap {
            return Ok(());
        }
        let msg = if !(t.experts > 1 && t.shared_f > 0.0) {
            "needs an MoE model with shared experts"
        } else if self.ep_overlap {
            "cannot run beside the EP overlap (Megatron-core: disable moe_shared_expert_overlap when enabling overlap_moe_expert_parallel_comm)"
        } else if self.schedule == Schedule::DualPipe {
            "cannot run with DualPipe, whose chunk pairs already overlap the all-to-alls"
        } else if t.latent_params > 0.0 {
            "does not run with MoE latent projections in training (Megatron-core MoELayer)"
        } else if self.recompute_modules.has(RecomputeModules::SHARED_EXPERTS) {
            "cannot run with shared_experts recomputed (Megatron-core: shared_experts recompute cannot work with --moe-shared-expert-overlap)"
        } else {
            return Ok(());
        };
        Err(bad("shared_expert_overlap", msg.to_string()))
    }

    /// What the model allows of the plan: TP dividing the attention heads and fitting the
    /// KV heads, a layer (or an end) in every model chunk, the recompute modules, CP's
    /// limits and EP dividing the experts; data parallelism only for non-transformer
    /// models.
    /// `ends`: the embedding and loss counted as layers of the pipeline split (0–2); a
    /// model chunk may then hold only one of them (Megatron-LM's
    /// `account_for_{embedding,loss}_in_pipeline_split`: Llama 3.1 405B's 126 layers + 2
    /// on 16 stages × 8 chunks).
    fn check_model(&self, model: &Model, ends: u32) -> Result<()> {
        match &model.kind {
            ModelKind::Transformer(t) => {
                if !t.heads.is_multiple_of(self.tp) {
                    return Err(bad(
                        "tp",
                        format!(
                            "{} does not divide the {} attention heads",
                            self.tp, t.heads
                        ),
                    ));
                }
                if !t.kv_heads.is_multiple_of(self.tp) && !self.tp.is_multiple_of(t.kv_heads) {
                    return Err(bad(
                        "tp",
                        format!("{} and the {} KV heads do not divide", self.tp, t.kv_heads),
                    ));
                }
                if t.layers + ends < self.pp * self.v {
                    return Err(bad(
                        "pp",
                        format!(
                            "pp·v = {}·{} model chunks for {} layers leave a chunk empty",
                            self.pp,
                            self.v,
                            t.layers + ends
                        ),
                    ));
                }
                self.check_recompute_modules(t)?;
                self.check_shared_expert_overlap(t)?;
                self.check_ep_overlap(t)?;
                context::check(self, t)?;
                if !t.experts.is_multiple_of(self.ep) {
                    return Err(bad(
                        "ep",
                        format!("{} does not divide the {} experts", self.ep, t.experts),
                    ));
                }
            }
            ModelKind::Dlrm(_) | ModelKind::Layered(_) => {
                if self.tp > 1 || self.pp > 1 || self.ep > 1 || self.cp > 1 {
                    return Err(bad(
                        "tp/pp/ep/cp",
                        format!("'{}' supports data parallelism only", model.name()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Layers of an even pipeline stage: L / p (the split may be uneven: see `stages`).
    pub fn layers_per_stage(&self, layers: u32) -> u32 {
        layers / self.pp
    }

    /// Pipeline bubble as a fraction of the ideal (bubble-free) time:
    /// `(p − 1) / (v · m)`; GPipe and 1F1B have v = 1 (Narayanan et al. SC'21 §2.2).
    /// DualPipe: `(p/2 − 1)·(F&B + B − 3W)` against the `m` chunk pairs `F + B` a device
    /// runs (`m/2` micro-batches on each of its two stages), with a full backward
    /// `B = 2F` (input and weight gradient), `W = F` and `F&B = F + B`:
    /// `(p/2 − 1)·2F / (3F·m) = (p − 2)/(3m)` (see `estimate::transformer::pipeline`).
    pub fn bubble_fraction(&self) -> f64 {
        let m = self.micro_batches as f64;
        if self.schedule == Schedule::DualPipe {
            return (self.pp as f64 - 2.0).max(0.0) / (3.0 * m);
        }
        (self.pp - 1) as f64 / (self.v as f64 * m)
    }
}

/// `Option<Bytes>` as an optional unit string ("25MB").
pub(crate) mod opt_bytes {
    use crate::units::{Bytes, serde_units};
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Bytes>, D::Error> {
        #[derive(Deserialize)]
        struct W(#[serde(with = "serde_units::bytes")] Bytes);
        Ok(Some(W::deserialize(d)?.0))
    }

    pub fn serialize<S: Serializer>(v: &Option<Bytes>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => serde_units::bytes::serialize(b, s),
            None => s.serialize_none(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_in_a_plan_file_read_as_units_and_round_trip() {
        let s: PlanSpec = toml::from_str("dp_bucket = \"25MB\"").unwrap();
        assert_eq!(s.dp_bucket.map(|b| b.get()), Some(25e6));
        let unset: PlanSpec = toml::from_str("").unwrap();
        assert_eq!(unset.dp_bucket, None);
        let back: PlanSpec = toml::from_str(&toml::to_string(&s).unwrap()).unwrap();
        assert_eq!(back.dp_bucket, s.dp_bucket);
    }

    #[test]
    fn dlrm_and_layered_models_take_data_parallelism_only() {
        for name in ["dlrm", "resnet50"] {
            let m = crate::catalog::model(name).unwrap();
            let plan = |tp, pp, ep, cp| {
                let s = PlanSpec {
                    gpus: Some(8),
                    tp,
                    pp,
                    ep,
                    cp,
                    global_batch: Some(64),
                    ..PlanSpec::default()
                };
                Plan::new(&s, &m, 8)
            };
            assert!(plan(1, 1, 1, 1).is_ok(), "{name}");
            // Each dimension alone is refused.
            for (tp, pp, ep, cp) in [(2, 1, 1, 1), (1, 2, 1, 1), (1, 1, 2, 1), (1, 1, 1, 2)] {
                let e = plan(tp, pp, ep, cp).unwrap_err().to_string();
                assert!(
                    e.contains("supports data parallelism only"),
                    "{name} {tp} {pp} {ep} {cp}: {e}"
                );
            }
        }
    }

    #[test]
    fn every_model_chunk_holds_a_layer_or_an_end() {
        // Llama 3 8B's 32 layers: pp·v chunks up to 32, or 34 with the embedding and the
        // loss counted in the split.
        let m = crate::catalog::model("llama3-8b").unwrap();
        let plan = |pp, v, ends: bool| {
            let s = PlanSpec {
                gpus: Some(pp),
                pp,
                virtual_stages: v,
                schedule: if v > 1 {
                    Schedule::Interleaved
                } else {
                    Schedule::OneFOneB
                },
                global_batch: Some(4 * pp),
                account_for_embedding: ends,
                account_for_loss: ends,
                ..PlanSpec::default()
            };
            Plan::new(&s, &m, pp)
        };
        let empty = |r: Result<Plan>| r.unwrap_err().to_string().contains("leave a chunk empty");
        assert_eq!(plan(4, 8, false).unwrap().layers_per_stage(32), 8);
        assert!(empty(plan(4, 9, false)));
        assert!(plan(2, 17, true).is_ok());
        assert!(empty(plan(2, 17, false)));
        assert!(empty(plan(2, 18, true)));
    }

    #[test]
    fn the_default_dp_bucket_grows_with_dp_beyond_forty() {
        // Megatron-core's default: max(4·10⁷, 10⁶·dp) parameters at the optimizer's
        // gradient bytes (2 B for BF16 gradients, 4 B with FP32 ones).
        let m = crate::catalog::model("llama3-8b").unwrap();
        let bucket = |gpus, optimizer| {
            let s = PlanSpec {
                gpus: Some(gpus),
                global_batch: Some(256),
                optimizer,
                ..PlanSpec::default()
            };
            Plan::new(&s, &m, gpus).unwrap().dp_bucket_bytes().get()
        };
        assert_eq!(bucket(32, Optimizer::Adam), 4e7 * 2.0);
        assert_eq!(bucket(64, Optimizer::Adam), 6.4e7 * 2.0);
        assert_eq!(bucket(128, Optimizer::AdamFp32Grads), 1.28e8 * 4.0);
    }

    #[test]
    fn an_hsdp_shard_group_divides_dp_holds_whole_ep_groups_and_shards_zero_3() {
        let s = |ep, zero, cp| PlanSpec {
            ep,
            zero,
            cp,
            ..PlanSpec::default()
        };
        let msg = |r: Result<()>| r.unwrap_err().to_string();
        // A group of 8 in DP 16 holding two EP groups of 4, ZeRO-3, no CP: accepted.
        assert!(check_hsdp(8, 16, &s(4, 3, 1)).is_ok());
        assert!(msg(check_hsdp(1, 16, &s(1, 3, 1))).contains("a shard group of 1"));
        // Each condition alone refuses: a group of 0, one that does not divide DP, one
        // that splits an EP group.
        for (g, ep) in [(0, 1), (3, 1), (4, 8)] {
            let m = msg(check_hsdp(g, 16, &s(ep, 3, 1)));
            assert!(
                m.contains(&format!("shard group {g} must divide dp = 16")),
                "{m}"
            );
        }
        assert!(msg(check_hsdp(8, 16, &s(4, 1, 1))).contains("needs zero = 3"));
        assert!(msg(check_hsdp(8, 16, &s(4, 3, 2))).contains("with cp > 1"));
    }

    /// DeepSeek-V3 (61 layers, one MTP module) on PP 4 with its recipes' layout.
    fn layout_plan(edit: impl Fn(&mut PlanSpec)) -> Result<Plan> {
        let m = crate::catalog::model("deepseek-v3").unwrap();
        let mut s = PlanSpec {
            pp: 4,
            global_batch: Some(64),
            pipeline_layout: Some("Et*4|(t*4|)*14tmL".into()),
            ..PlanSpec::default()
        };
        edit(&mut s);
        Plan::new(&s, &m, 16)
    }

    #[test]
    fn a_pipeline_layout_sets_the_split_and_the_virtual_stages() {
        // 16 entries on 4 ranks: v = 4, the interleaved schedule, ranks 16, 16, 16, 13.
        let p = layout_plan(|_| {}).unwrap();
        assert_eq!((p.v, p.schedule), (4, Schedule::Interleaved));
        let st = p.stages;
        assert_eq!(
            (st.first, st.mid_max, st.mid_sum, st.last),
            (16, 16, 32, 13)
        );
        // The same v given explicitly is accepted; another v, or a schedule that is not
        // 1F1B's default without v, is refused.
        let given = layout_plan(|s| {
            s.virtual_stages = 4;
            s.schedule = Schedule::Interleaved;
        });
        assert_eq!(given.unwrap().v, 4);
        let other = layout_plan(|s| {
            s.virtual_stages = 2;
            s.schedule = Schedule::Interleaved;
        });
        assert!(
            other
                .unwrap_err()
                .to_string()
                .contains("virtual_stages = 2")
        );
        let gpipe = layout_plan(|s| s.schedule = Schedule::Gpipe);
        assert!(
            gpipe
                .unwrap_err()
                .to_string()
                .contains("virtual_stages = 1")
        );
        // One entry per rank: v = 1 keeps the 1F1B schedule.
        let flat = layout_plan(|s| {
            s.pipeline_layout = Some("Et*16|t*16|t*16|t*13mL".into());
        })
        .unwrap();
        assert_eq!((flat.v, flat.schedule), (1, Schedule::OneFOneB));
    }

    #[test]
    fn a_pipeline_layout_refuses_the_other_ways_to_split() {
        let edits: [fn(&mut PlanSpec); 5] = [
            |s| s.layers_per_stage = Some(vec![16, 16, 16, 13]),
            |s| s.first_stage_layers = Some(16),
            |s| s.last_stage_layers = Some(13),
            |s| s.account_for_embedding = true,
            |s| s.account_for_loss = true,
        ];
        for e in edits {
            let err = layout_plan(e).unwrap_err().to_string();
            assert!(err.contains("sets the split itself"), "{err}");
        }
    }
}

//! The plan's named settings: pipeline schedule, recomputation, optimizer layout, ZeRO-3
//! implementation, LoRA targets and group order, with their serde names.

use serde::{Deserialize, Serialize};

/// Pipeline schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// All forwards, then all backwards (Huang et al. 2019); holds m micro-batches.
    Gpipe,
    /// One-forward-one-backward (PipeDream-Flush; Narayanan et al. 2021).
    #[default]
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// Interleaved 1F1B with v model chunks per stage (Narayanan et al. SC'21 §2.2).
    Interleaved,
    /// DeepSeek's DualPipe (DeepSeek-AI 2024, DeepSeek-V3 technical report §3.2.1): micro-
    /// batches fed from both ends of the pipeline, each device holding stage `i` and stage
    /// `p−1−i`; a forward and a backward chunk run as a pair whose all-to-all and pipeline
    /// transfers hide behind each other's compute. Bubble `(p/2 − 1)(F&B + B − 3W)`,
    /// parameters 2×, activations of `p + 1` micro-batches (Table 2).
    #[serde(rename = "dualpipe")]
    DualPipe,
}

/// Activation recomputation (Korthikanti et al. 2022).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Recompute {
    /// Keep every activation.
    #[default]
    None,
    /// Recompute the attention core (QKᵀ, softmax, dropout, attention·V) only (§5).
    Selective,
    /// Keep each layer's input; recompute the whole forward in backward.
    Full,
    /// torchtitan's per-operation selective checkpointing (`mode = "selective"`,
    /// `selective_ac_option = "op"`, torchtitan/distributed/activation_checkpoint.py): a
    /// block keeps the outputs of its matmuls, attention and reduce-scatters and
    /// recomputes everything else, except that every second matmul of the block is
    /// recomputed too (Llama: `wk`, `wo` and `w3` of `wq, wk, wv, wo, w1, w3, w2`).
    Op,
}

/// Optimizer state layout, bytes per parameter for weights + gradients + states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// Mixed-precision Adam, 16 B/param: 2 weight + 2 gradient + 12 (fp32 master, m, v)
    /// (Rajbhandari et al., ZeRO, SC'20 §3.1).
    #[default]
    Adam,
    /// Megatron-LM Adam with fp32 main gradients, 18 B/param: 2 weight + 4 gradient + 12.
    /// Reproduces Korthikanti et al. 2022 Figure 1 (45.5625 GiB for 22B on 8 GPUs).
    AdamFp32Grads,
    /// Adam with both moments in BF16, 14 B/param: 2 weight + 4 gradient (fp32 main
    /// gradients) + 8 (fp32 master 4, m 2, v 2). Megatron-core's precision-aware optimizer
    /// (`use_precision_aware_optimizer`, `exp_avg_dtype = exp_avg_sq_dtype = bf16`, main
    /// gradients and parameters fp32; Megatron-Bridge's DeepSeek recipes,
    /// `perf_recipes/deepseek/common.py`); DeepSeek-V3 trained so (DeepSeek-AI 2024, §3.3.3,
    /// "Low-Precision Optimizer States").
    AdamBf16Moments,
    /// Adam with its whole state in BF16, 10 B/param: 2 weight + 2 gradient + 6 (master
    /// copy, m and v, 2 B each). Apex's `DistributedFusedAdam` with `dtype = bf16` keeps its
    /// parameter shard, `exp_avg` and `exp_avg_sq` in that dtype (`StateBucket` in
    /// apex/contrib/optimizers/distributed_fused_adam.py); NeMo 1.x ran it so for
    /// Nemotron-4 340B (NeMo-Framework-Launcher conf/training/nemotron/nemotron_340b.yaml,
    /// June 2024, 7c842fcd: `optim: distributed_fused_adam`, `dtype: bf16`,
    /// `grad_sync_dtype: bf16`; the other 2024 recipes keep the FP32 default).
    AdamBf16State,
}

impl Optimizer {
    /// (weight, gradient, optimizer-state) bytes per parameter.
    pub fn bytes_per_param(self) -> (f64, f64, f64) {
        match self {
            Optimizer::Adam => (2.0, 2.0, 12.0),
            Optimizer::AdamFp32Grads => (2.0, 4.0, 12.0),
            Optimizer::AdamBf16Moments => (2.0, 4.0, 8.0),
            Optimizer::AdamBf16State => (2.0, 2.0, 6.0),
        }
    }
}

/// How ZeRO-3 runs: which collectives it issues per layer, how many parameter gathers a
/// layer needs per micro-batch, how fast the parameters move and what stays resident.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Zero3Impl {
    /// PyTorch FSDP / FSDP2 and Megatron-FSDP with one unit per transformer block (Zhao et
    /// al., VLDB'23 §3): one flat all-gather and one reduce-scatter per layer at the
    /// collective's NCCL rate; the gather before a layer's backward also serves its
    /// recomputed forward (2 gathers per micro-batch); two layers' weights and gradients
    /// resident (the computed and the prefetched).
    Fsdp,
    /// DeepSpeed ZeRO-3 as of 2021 (v0.3–0.5, the runs of Narayanan et al. SC'21 Table 2):
    /// gathers in prefetch buckets of 5·10⁷ parameters, re-gathered for the recomputed
    /// forward (3 gathers with full recomputation; the backward's then fetched on demand,
    /// as the prefetch trace follows the forward's module order), parameters and
    /// gradients moved at most
    /// at [`DEEPSPEED_2021_RATE`] per GPU whatever the link, and at most
    /// `stage3_max_live_parameters` = 10⁹ gathered parameters (or the largest weight)
    /// resident with one reduce bucket of 5·10⁸ gradients.
    #[default]
    #[serde(rename = "deepspeed-2021")]
    Deepspeed2021,
}

impl Zero3Impl {
    /// "fsdp", "deepspeed-2021".
    pub fn name(self) -> &'static str {
        match self {
            Zero3Impl::Fsdp => "fsdp",
            Zero3Impl::Deepspeed2021 => "deepspeed-2021",
        }
    }
}

/// Per-GPU rate at which DeepSpeed ZeRO-3 (2021) moved gathered parameters, bytes/s.
/// Source: DeepSpeed issue #1174 (2021-06, DeepSpeed 0.3.16, 8×A100 with NVLink): a 5B-
/// parameter BERT's forward took 480 ms under ZeRO-3 against 60 ms under ZeRO-2, i.e.
/// gathering 2 B × 5·10⁹ = 10 GB took ≈ 420 ms ≈ 24 GB/s — on NVLink, where NCCL's
/// all-gather runs an order of magnitude faster. SC'21 Table 2's communication-bound
/// ZeRO-3 rows imply the same per-GPU rate (docs/overlap.md).
pub const DEEPSPEED_2021_RATE: f64 = 24e9;

/// The linear layers that get LoRA adapters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum LoraTargets {
    /// Every linear layer (PEFT/NeMo 2 `all-linear`: QKV, projection, MLP in and out).
    #[default]
    All,
    /// The fused QKV projection only (NeMo 1.x default `target_modules: [attention_qkv]`).
    Qkv,
}

/// How MoE tokens reach their experts' ranks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum EpDispatch {
    /// One all-to-all over the EP group per direction, every (token, expert) pair sent to
    /// its expert's rank (Megatron-core `alltoall` token dispatcher).
    #[default]
    Alltoall,
    /// Hierarchical: across nodes each token travels once per destination node, then is
    /// forwarded to its experts' ranks inside the NVLink domain (DeepSeek-V3 report
    /// §3.2.2; DeepEP; Megatron-core's `flex` dispatcher with DeepEP or HybridEP).
    Hierarchical,
}

/// How a rank runs the GEMMs of its local experts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GroupedGemm {
    /// One GEMM per local expert, spread round-robin over 4 CUDA streams: Transformer
    /// Engine's `GroupedLinear` default path (`multi_stream_cublas_gemm`,
    /// `get_num_compute_streams() = 4`, transformer_engine/common/gemm/cublaslt_gemm.cu and
    /// common/util/multi_stream.cpp), used by Megatron-core's `TEGroupedMLP`.
    #[default]
    Streams,
    /// One grouped kernel over all local experts (CUTLASS/cuBLASLt grouped GEMM, or the
    /// CuTe DSL fused grouped MLP that NVIDIA's Blackwell DeepSeek and gpt-oss recipes turn
    /// on with `NVTE_CUTEDSL_FUSED_GROUPED_MLP=1`): the experts' tiles share the waves.
    Fused,
}

/// Which fused-attention kernel runs the attention core (with `flash_attention` on).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionKernel {
    /// The kernel Transformer Engine picks, at the device preset's `flash_*` rates (cuDNN's
    /// fused attention on Hopper and Blackwell: `get_attention_backend` prefers
    /// FusedAttention on sm90 and later).
    #[default]
    Te,
    /// FlashAttention-2, at the device's `fa2_*` rates: PyTorch's
    /// `scaled_dot_product_attention`, whose fixed backend priority puts its bundled
    /// FlashAttention-2 kernels first (pytorch/pytorch#142132: 329 TFLOP/s on H100 where
    /// cuDNN reaches 631; huggingface/transformers#48163, 2026: still the default on
    /// Hopper), and the `flash-attn` 2 package. What torchtitan, OLMo-core and Hugging Face
    /// training scripts run unless told otherwise.
    Fa2,
}

/// How the last stage computes the loss over the vocabulary-parallel logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CrossEntropy {
    /// Megatron-core's `VocabParallelCrossEntropy` in eager PyTorch operations (Megatron-LM's
    /// default: `cross_entropy_loss_fusion` off): 38 B per logit in 6 kernels forward.
    #[default]
    Unfused,
    /// Transformer Engine's fused kernels (`cross_entropy_loss_fusion` with
    /// `cross_entropy_fusion_impl = "te"`, Megatron-Bridge's benchmark recipes): an online
    /// softmax pass and a pass writing the FP32 gradient, 8 B per logit in 2 kernels.
    Te,
}

/// Which parts of each layer run as captured CUDA graphs (Megatron-core
/// `--cuda-graph-impl` and `--cuda-graph-modules`, docs/user-guide/features/cuda_graph.md):
/// a captured part replays its kernels with one graph launch instead of one host call per
/// operation. A bit set over [`CudaGraphs::SCOPES`]; `full` is `--cuda-graph-impl
/// full_iteration` (the whole forward-backward, which for MoE needs padded expert capacity
/// so that no token count reaches the host).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct CudaGraphs(u8);

impl CudaGraphs {
    /// The attention block (`attn`).
    pub const ATTN: CudaGraphs = CudaGraphs(1);
    /// A dense MLP block (`mlp`).
    pub const MLP: CudaGraphs = CudaGraphs(2);
    /// The MoE router (`moe_router`).
    pub const MOE_ROUTER: CudaGraphs = CudaGraphs(4);
    /// The MoE dispatch preprocessing (`moe_preprocess`).
    pub const MOE_PREPROCESS: CudaGraphs = CudaGraphs(8);
    /// The routed experts with their dispatch and combine (`moe`; needs padded capacity).
    pub const MOE: CudaGraphs = CudaGraphs(16);
    /// A Mamba mixer (`mamba`).
    pub const MAMBA: CudaGraphs = CudaGraphs(32);
    /// Nothing captured (Megatron-core's default, `--cuda-graph-impl none`).
    pub const NONE: CudaGraphs = CudaGraphs(0);
    /// The whole iteration (`--cuda-graph-impl full_iteration`).
    pub const FULL: CudaGraphs = CudaGraphs(63);
    /// Scope names as Megatron-core spells them, with their bits.
    pub const SCOPES: [(&'static str, CudaGraphs); 6] = [
        ("attn", CudaGraphs::ATTN),
        ("mlp", CudaGraphs::MLP),
        ("moe_router", CudaGraphs::MOE_ROUTER),
        ("moe_preprocess", CudaGraphs::MOE_PREPROCESS),
        ("moe", CudaGraphs::MOE),
        ("mamba", CudaGraphs::MAMBA),
    ];
    /// Whether every part of `s` is captured.
    pub fn has(self, s: CudaGraphs) -> bool {
        self.0 & s.0 == s.0
    }
    /// Parses `none`, `full` or a comma-separated list of scope names.
    pub fn parse(s: &str) -> Result<CudaGraphs, String> {
        match s.trim() {
            "full" | "full_iteration" => Ok(CudaGraphs::FULL),
            _ => parse_set(
                s,
                &CudaGraphs::SCOPES.map(|(n, b)| (n, b.0)),
                "CUDA graph scope",
            )
            .map(CudaGraphs)
            .map_err(|e| e.replace("expected none", "expected none, full,")),
        }
    }
}

/// Bits of `none` or a comma list of `names`; `what` names the kind in the error.
fn parse_set(s: &str, names: &[(&str, u8)], what: &str) -> Result<u8, String> {
    if s.trim() == "none" {
        return Ok(0);
    }
    let mut bits = 0;
    for w in s.split(',').map(str::trim) {
        match names.iter().find(|(n, _)| *n == w) {
            Some((_, b)) => bits |= b,
            None => {
                let all: Vec<&str> = names.iter().map(|(n, _)| *n).collect();
                return Err(format!(
                    "unknown {what} {w:?}: expected none or a comma list of {}",
                    all.join(", ")
                ));
            }
        }
    }
    Ok(bits)
}

/// `none` or the comma list of the `names` whose bits `bits` holds.
fn show_set(bits: u8, names: &[(&str, u8)], f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
    if bits == 0 {
        return f.write_str("none");
    }
    let on: Vec<&str> = names
        .iter()
        .filter(|(_, b)| bits & b == *b)
        .map(|(n, _)| *n)
        .collect();
    f.write_str(&on.join(","))
}

impl std::fmt::Display for CudaGraphs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            CudaGraphs::FULL => f.write_str("full"),
            g => show_set(g.0, &CudaGraphs::SCOPES.map(|(n, b)| (n, b.0)), f),
        }
    }
}

/// The submodules Megatron-core recomputes in the backward under selective recomputation
/// (`--recompute-modules`, `TransformerConfig.recompute_modules`; its docstring names the
/// choices), beside the core attention that `Recompute::Selective` stands for. Four
/// discard a tensor after its consumer's forward and rebuild it before that consumer's
/// backward (output-discarding checkpointing, `CheckpointWithoutOutput`):
/// - `layernorm`: the outputs of the two pre-norms (`input_layernorm`,
///   `pre_mlp_layernorm`), the inputs of the QKV (or MLA down-) projections and of FC1;
/// - `mla_up_proj`: MLA's query, key and value, rebuilt from the latents by the
///   up-projections and the rotary embedding (`qkv_up_proj_and_rope_apply`);
/// - `moe_act`: the routed experts' activation output, the input of their FC2.
///
/// Four checkpoint a whole submodule (`tensor_parallel.checkpoint`: its forward runs
/// without keeping anything but its input, and runs again before its backward):
/// - `core_attn`: the attention core (`Attention._checkpointed_attention_forward`, taken
///   whatever the kernel: Megatron-core warns that fused attention has little to gain);
/// - `mlp`: a dense layer's MLP (`TransformerLayer.recompute_mlp`, not on MoE layers);
/// - `moe`: an MoE layer whole, router, dispatch, experts and combine
///   (`MoELayer.moe_layer_recompute`);
/// - `shared_experts`: an MoE layer's shared experts (`MoELayer.shared_experts_recompute`).
///
/// DeepSeek-V3 trained with the first three (DeepSeek-AI 2024, §3.3.2: recomputation of
/// RMSNorm and the MLA up-projections, and of the SwiGLU output in the MoE); NVIDIA's
/// recipes add the others (Megatron-Bridge `perf_recipes`: DeepSeek-V3 on H100
/// `mla_up_proj, mlp`; Nemotron 3 Super on H100 `layernorm, moe_act, moe, core_attn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RecomputeModules(u8);

impl RecomputeModules {
    /// The pre-norms' outputs.
    pub const LAYERNORM: RecomputeModules = RecomputeModules(1);
    /// MLA's up-projections and rotary embedding.
    pub const MLA_UP_PROJ: RecomputeModules = RecomputeModules(2);
    /// The routed experts' activation function.
    pub const MOE_ACT: RecomputeModules = RecomputeModules(4);
    /// A dense layer's MLP, checkpointed whole.
    pub const MLP: RecomputeModules = RecomputeModules(8);
    /// An MoE layer, checkpointed whole.
    pub const MOE: RecomputeModules = RecomputeModules(16);
    /// An MoE layer's shared experts, checkpointed whole.
    pub const SHARED_EXPERTS: RecomputeModules = RecomputeModules(32);
    /// The attention core, checkpointed whole.
    pub const CORE_ATTN: RecomputeModules = RecomputeModules(64);
    /// None.
    pub const NONE: RecomputeModules = RecomputeModules(0);
    /// Module names as Megatron-core spells them, with their bits.
    pub const MODULES: [(&'static str, RecomputeModules); 7] = [
        ("layernorm", RecomputeModules::LAYERNORM),
        ("mla_up_proj", RecomputeModules::MLA_UP_PROJ),
        ("moe_act", RecomputeModules::MOE_ACT),
        ("mlp", RecomputeModules::MLP),
        ("moe", RecomputeModules::MOE),
        ("shared_experts", RecomputeModules::SHARED_EXPERTS),
        ("core_attn", RecomputeModules::CORE_ATTN),
    ];
    /// Whether `m` is recomputed.
    pub fn has(self, m: RecomputeModules) -> bool {
        self.0 & m.0 == m.0 && m.0 != 0
    }
    /// Parses `none` or a comma-separated list of module names.
    pub fn parse(s: &str) -> Result<RecomputeModules, String> {
        let names = RecomputeModules::MODULES.map(|(n, b)| (n, b.0));
        parse_set(s, &names, "recompute module").map(RecomputeModules)
    }
}

impl std::fmt::Display for RecomputeModules {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        show_set(self.0, &RecomputeModules::MODULES.map(|(n, b)| (n, b.0)), f)
    }
}

impl TryFrom<String> for RecomputeModules {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        RecomputeModules::parse(&s)
    }
}

impl From<RecomputeModules> for String {
    fn from(g: RecomputeModules) -> String {
        g.to_string()
    }
}

impl TryFrom<String> for CudaGraphs {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        CudaGraphs::parse(&s)
    }
}

impl From<CudaGraphs> for String {
    fn from(g: CudaGraphs) -> String {
        g.to_string()
    }
}

/// Order in which groups take network dimensions, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// TP innermost, then DP (with EP inside it), then PP (Megatron-LM's default).
    #[default]
    TpDpPp,
    /// TP innermost, then PP, then DP.
    TpPpDp,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero3_impl_names_are_the_keys_a_scenario_takes() {
        // The name printed in tables, JSON and CSV (`plan.zero3_impl`) is the value a
        // scenario file's `zero3_impl` accepts, for every implementation.
        for (z, name) in [
            (Zero3Impl::Fsdp, "fsdp"),
            (Zero3Impl::Deepspeed2021, "deepspeed-2021"),
        ] {
            assert_eq!(z.name(), name);
            let back: Zero3Impl = serde_json::from_str(&format!("\"{}\"", z.name())).unwrap();
            assert_eq!(back, z);
        }
    }

    #[test]
    fn sets_print_as_the_lists_they_parse_from() {
        // What tables and CSV print for a CUDA graph capture or a set of recomputed
        // modules is the comma list that flag takes, in the scopes' order, and parses back
        // to the same set: every one of the 64 captures and 128 module sets.
        let cg = |s: &str| CudaGraphs::parse(s).unwrap();
        assert_eq!(CudaGraphs::NONE.to_string(), "none");
        assert_eq!(CudaGraphs::FULL.to_string(), "full");
        assert_eq!(cg("moe_router, attn").to_string(), "attn,moe_router");
        assert_eq!(
            cg("mamba,moe_preprocess,mlp").to_string(),
            "mlp,moe_preprocess,mamba"
        );
        for bits in 0..=63u8 {
            let g = CudaGraphs(bits);
            assert_eq!(cg(&g.to_string()), g, "{bits}");
        }
        let rm = |s: &str| RecomputeModules::parse(s).unwrap();
        assert_eq!(RecomputeModules::NONE.to_string(), "none");
        assert_eq!(rm("moe_act,layernorm").to_string(), "layernorm,moe_act");
        for bits in 0..=127u8 {
            let m = RecomputeModules(bits);
            assert_eq!(rm(&m.to_string()), m, "{bits}");
            assert_eq!(String::from(m), m.to_string());
        }
        // A scenario file's values go through serde the same way, both directions.
        let g: CudaGraphs = serde_json::from_str("\"moe,attn\"").unwrap();
        assert_eq!(g, CudaGraphs(CudaGraphs::ATTN.0 | CudaGraphs::MOE.0));
        assert_eq!(String::from(g), "attn,moe");
        assert!(serde_json::from_str::<CudaGraphs>("\"atn\"").is_err());
        let m: RecomputeModules = serde_json::from_str("\"mla_up_proj\"").unwrap();
        assert_eq!(m, RecomputeModules::MLA_UP_PROJ);
        assert!(serde_json::from_str::<RecomputeModules>("\"mla\"").is_err());
    }
}

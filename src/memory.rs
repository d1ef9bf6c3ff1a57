//! Bytes resident per device: model states (weights, gradients, optimizer states, sharded
//! by ZeRO), activations kept for backward (Korthikanti et al. 2022 §4, Eq. 1–6, and the
//! number of micro-batches a pipeline schedule keeps in flight), and communication buffers.

use crate::compute::{Fp8Recipe, Precision};
use crate::model::Transformer;
use crate::parallel::{LoraTargets, Optimizer, Plan, Recompute, RecomputeModules, Schedule};
use crate::units::Bytes;

/// Memory per device. `Copy`; part of an `Estimate`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Memory {
    /// Parameters (bf16/fp16 copy).
    pub weights: Bytes,
    /// Gradients.
    pub gradients: Bytes,
    /// Optimizer states (fp32 master weights, Adam m and v).
    pub optimizer: Bytes,
    /// Activations kept for backward.
    pub activations: Bytes,
    /// Communication buffers and staging (DP buckets, TP/PP messages, logits).
    pub buffers: Bytes,
    /// Sum of the above.
    pub total: Bytes,
    /// Device capacity.
    pub capacity: Bytes,
    /// Capacity set aside for the CUDA context, communication buffers, workspaces and
    /// fragmentation ([`crate::compute::Device::memory_reserve`]).
    pub reserve: Bytes,
    /// `total + reserve ≤ capacity` (and, with an offload plan, each tier's bytes within
    /// its share).
    pub fits: bool,
    /// Bytes this device keeps in host memory and on NVMe (offload plans, `crate::offload`).
    pub host: Bytes,
    /// See `host`.
    pub nvme: Bytes,
    /// The host or NVMe bytes exceed this device's share of the tier.
    pub tier_overflow: bool,
}

impl Memory {
    /// Sums the parts and compares against `capacity − reserve`.
    pub fn new(
        states: [f64; 3],
        activations: f64,
        buffers: f64,
        capacity: Bytes,
        reserve: Bytes,
    ) -> Memory {
        let total = states[0] + states[1] + states[2] + activations + buffers;
        Memory {
            weights: Bytes::new(states[0]),
            gradients: Bytes::new(states[1]),
            optimizer: Bytes::new(states[2]),
            activations: Bytes::new(activations),
            buffers: Bytes::new(buffers),
            total: Bytes::new(total),
            capacity,
            reserve,
            fits: total + reserve.get() <= capacity.get(),
            host: Bytes::ZERO,
            nvme: Bytes::ZERO,
            tier_overflow: false,
        }
    }

    /// The offload hook: the bytes a plan keeps on the host and on NVMe, each checked
    /// against this device's share of the tier (`None`: the system has no such tier, so
    /// any bytes there do not fit).
    pub fn with_tiers(mut self, host: f64, nvme: f64, caps: [Option<Bytes>; 2]) -> Memory {
        let within = |b: f64, cap: Option<Bytes>| b <= 0.0 || cap.is_some_and(|c| b <= c.get());
        self.host = Bytes::new(host);
        self.nvme = Bytes::new(nvme);
        self.tier_overflow = !(within(host, caps[0]) && within(nvme, caps[1]));
        self.fits &= !self.tier_overflow;
        self
    }

    /// The same use on a device of another capacity and reserve (sweeps over HBM sizes).
    pub fn on_capacity(mut self, capacity: Bytes, reserve: Bytes) -> Memory {
        self.capacity = capacity;
        self.reserve = reserve;
        self.fits = self.total.get() + reserve.get() <= capacity.get() && !self.tier_overflow;
        self
    }

    /// What is left: `capacity − reserve − total` (negative when the plan does not fit).
    pub fn headroom(&self) -> f64 {
        self.capacity.get() - self.reserve.get() - self.total.get()
    }
}

/// The reserve a plan runs with on `dev`: the plan's `memory_reserve` if given, else the
/// device's.
pub fn reserve(dev: &crate::compute::Device, plan: &Plan) -> Bytes {
    plan.memory_reserve.unwrap_or_else(|| dev.memory_reserve())
}

/// Model-state bytes (weights, gradients, optimizer) for `params` parameters held by a
/// device: `(w, g, o)·params` bytes with (2, 2, 12) for mixed-precision Adam (ZeRO §3.1)
/// or (2, 4, 12) with fp32 main gradients (Megatron-LM); ZeRO-1 divides the optimizer
/// states by the DP degree, ZeRO-2 also the gradients, ZeRO-3/FSDP also the weights
/// (Rajbhandari et al. SC'20 §5).
pub fn model_states(params: f64, opt: Optimizer, zero: u8, dp: u32) -> [f64; 3] {
    let (w, g, o) = opt.bytes_per_param();
    let n = dp as f64;
    let shard = |stage: u8| if zero >= stage { n } else { 1.0 };
    [
        params * w / shard(3),
        params * g / shard(2),
        params * o / shard(1),
    ]
}

/// Activation bytes of one transformer layer for one micro-batch of `b` sequences,
/// generalising Korthikanti et al. 2022 Eq. 1–6 (fp16/bf16 activations, dropout):
///
/// - no recomputation: `s·b·h·(R + S/t + 5·a·s/(h·t))`, with SP `s·b·h·(R + S)/t + …`
///   where `R = 10` (LayerNorm inputs 4, LayerNorm outputs feeding QKV and FC1 4, dropout
///   masks 2) is replicated across TP ranks unless SP is on, and `S = 24` for GPT
///   (Q 2, K and V 4·kv/a, projection input 2, MLP 4·f/h or 6·f/h for SwiGLU, × top_k for
///   MoE) is split; `5as/h` (softmax output 2, dropout mask 1, dropout output 2) is `2as/h`
///   without dropout and 0 with flash attention;
/// - selective recomputation drops the `as/h` term (Eq. 5: `34·sbh/t` with SP);
/// - full recomputation keeps the layer input only: `2·s·b·h` (`/t` with SP).
///
/// With FP8-family precisions the linear layers keep their *quantized* input for the
/// weight-gradient GEMM, not the 16-bit one (Transformer Engine,
/// `transformer_engine/pytorch/module/linear.py`, `_Linear.forward`: the saved `inputmat`
/// is the quantized tensor with only its column-wise data): the two LayerNorm outputs and
/// the FC2 input take `q` bytes per element instead of 2 ([`saved_input_bytes`]: 1 for
/// FP8, `1 + 1/32` for MXFP8, `0.5 + 1/16` for NVFP4). The projection's quantized input is
/// an extra copy beside the 16-bit attention output that fused attention keeps for its
/// own backward (`2 + q`); without fused attention it replaces it (`q`). So
/// `R = 4 + 2q (+2 dropout)` and the projection input and FC2 input (`f/h·q`, the FC1
/// output `2·f/h` or `4·f/h` gated staying 16-bit) change; at `q = 2` this is the count
/// above.
///
/// An MoE layer also keeps its routed tokens' copies as the experts' GEMM input
/// (`dispatched_input`: `q·k·etp` more in the split term) and its shared experts' MLP
/// terms. The attention's Q, K, V and output are counted at their true widths, MLA's with
/// its latents (`attention_terms`). Megatron-core's `recompute_modules`
/// (`parallel::RecomputeModules`) drop what they rebuild: `layernorm` the norms' outputs
/// (`R` loses `2q`), `mla_up_proj` MLA's Q, K and V, `moe_act` the experts' FC2 input;
/// the whole-submodule checkpoints keep their input only: `core_attn` drops the scores of
/// unfused attention (`5·a·s/h`, as selective recomputation; fused attention keeps
/// nothing beside its inputs and output, which the projection keeps anyway), `mlp` (dense
/// layers) and `moe` (MoE layers) the MLP's split terms, the routed copies and the shared
/// experts', keeping the norm's output in 16-bit (2 B for `q`), `shared_experts` the
/// shared experts' terms.
///
/// With LoRA (`plan.lora_rank > 0`) the base weights are frozen, and a frozen linear layer
/// keeps no input: Transformer Engine saves a linear's input only when its weight needs a
/// gradient (`linear.py`: `backward_needs_input = is_grad_enabled and weight.requires_grad`;
/// `layernorm_mlp.py` drops the norm output and the FC2 input of frozen FC1/FC2 weights).
/// An adapted layer's adapter keeps that input instead, in 16-bit (its down-projection
/// `A` needs it for its weight gradient; NeMo/Megatron-Bridge's `LoRALinear` feeds the
/// adapter the base layer's input): each saved GEMM input is 2 B where adapted, 0 where
/// not (`lora_input_bytes`), in place of `q`. The attention output that fused attention
/// keeps (2 B) is the projection adapter's input too, so with LoRA the projection adds
/// nothing beside it. MLA's latents and hybrid layers keep the count above.
///
/// Dropout is assumed present when the model has biases (GPT, BERT) and absent otherwise
/// (LLaMA).
pub fn layer_activation_bytes(m: &Transformer, plan: &Plan, dropout: bool) -> f64 {
    let (s, h, t) = (m.s, m.h, plan.tp as f64);
    let sbh = s * plan.micro_batch as f64 * h;
    let split_by = |sp: bool| if sp { t } else { 1.0 };
    if plan.recompute == Recompute::Full {
        return 2.0 * sbh / split_by(plan.sp);
    }
    if plan.recompute == Recompute::Op {
        return sbh * op_checkpoint_terms(m, plan);
    }
    let q = saved_input_bytes(plan.precision, plan.fp8_recipe);
    // Bytes each GEMM input is kept at: (QKV, projection, MLP/experts' FC1 and FC2).
    let (qkv_in, proj_kept, mlp_in) = match lora_input_bytes(plan) {
        Some((qkv, rest)) => (qkv, rest, rest),
        None => (q, q, q),
    };
    let modules = plan.recompute_modules;
    let act_kept = !modules.has(RecomputeModules::MOE_ACT);
    // A checkpointed MLP (`mlp` on a dense layer, `moe` on an MoE layer) keeps only its
    // input, the norm's 16-bit output.
    let ckpt = mlp_checkpointed(modules, m.experts > 1);
    let mlp = if ckpt {
        0.0
    } else {
        mlp_term(m, m.f, m.top_k as f64, mlp_in, act_kept || m.experts <= 1)
    };
    let shared = if ckpt || modules.has(RecomputeModules::SHARED_EXPERTS) {
        0.0
    } else {
        mlp_term(m, m.shared_f, 1.0, mlp_in, true)
    };
    let proj_in = if plan.lora_rank > 0 && plan.flash_attention {
        2.0
    } else if q < 2.0 && plan.flash_attention {
        2.0 + q
    } else {
        proj_kept
    };
    let scores = if plan.flash_attention
        || plan.recompute == Recompute::Selective
        || modules.has(RecomputeModules::CORE_ATTN)
    {
        0.0
    } else {
        (if dropout { 5.0 } else { 2.0 }) * m.heads as f64 * s / h
    };
    // A norm's input (2 B) and its output feeding a GEMM (`q` B, or as LoRA keeps it;
    // recomputed with `layernorm`).
    let norm = |kept: f64| {
        if modules.has(RecomputeModules::LAYERNORM) {
            2.0
        } else {
            2.0 + kept
        }
    };
    let (attention, latents) = attention_terms(m, plan, q, proj_in);
    if let Some(hy) = &m.hybrid {
        let x = (norm(q), attention, q);
        return sbh * hybrid_layer_terms(m, hy, plan, dropout, x, scores);
    }
    let dispatched = if ckpt {
        0.0
    } else {
        dispatched_input(m, plan, mlp_in)
    };
    let split = attention + mlp + shared + dispatched;
    let mlp_norm = if ckpt { norm(2.0) } else { norm(mlp_in) };
    let replicated = norm(qkv_in) + mlp_norm + if dropout { 2.0 } else { 0.0 };
    sbh * (replicated / split_by(plan.sp) + latents + split / t + scores / t)
}

/// Activations of one micro-batch's MTP modules (`mtp_layers` depths, on the last stage):
/// each depth keeps what the model's own layers keep, one transformer layer
/// ([`layer_activation_bytes`]), or a hybrid model's `mtp_pattern` layers at their kinds'
/// terms (the pattern's mean × its length). The depth's `2h → h` projection input and its two
/// norms (`MultiTokenPredictionLayer`: `enorm`, `hnorm`, `eh_proj`) are not counted: `4 +
/// 2·q` per `s·b·h` beside a layer's tens.
pub fn mtp_activation_bytes(m: &Transformer, plan: &Plan, dropout: bool) -> f64 {
    if m.mtp_layers == 0 {
        return 0.0;
    }
    let per_depth = match &m.hybrid {
        Some(hy) => {
            let n = hy.mtp.total();
            let module = Transformer {
                layers: n,
                hybrid: Some(crate::model::Hybrid {
                    counts: hy.mtp,
                    ..*hy
                }),
                ..*m
            };
            layer_activation_bytes(&module, plan, dropout) * n as f64
        }
        None => layer_activation_bytes(m, plan, dropout),
    };
    m.mtp_layers as f64 * per_depth
}

/// torchtitan's per-op checkpointing (`Recompute::Op`), bytes per `s·b·h` of one layer: the
/// block's input (2 B, the checkpoint's), and the outputs of the operations the policy
/// saves, in 16-bit: the query and value projections (`wq`, `wv`: `2·(a·d_qk + kv·d_v)`),
/// the attention output and its FP32 log-sum-exp per head (`2·a·d_v + 4·a`), `w1`'s output
/// (`2·f`) and, gated, `w2`'s (2, the reduce-scatter's output with SP); `wk`, `wo`, `w3`
/// (ungated `w2`) and every norm, rotary and activation output are recomputed
/// (torchtitan/distributed/activation_checkpoint.py). Column-parallel outputs split over
/// TP; the input and `w2`'s output are replicated unless SP shards the sequence.
fn op_checkpoint_terms(m: &Transformer, plan: &Plan) -> f64 {
    let at = &m.attn;
    let t = plan.tp as f64;
    let split = 2.0 * (at.heads * at.qk_d + at.kv_heads * at.v_d + at.heads * at.v_d)
        + 4.0 * at.heads
        + 2.0 * m.f;
    let replicated = 2.0 + if m.gated { 2.0 } else { 0.0 };
    let sp = if plan.sp { t } else { 1.0 };
    split / t / m.h + replicated / sp
}

/// Under LoRA, the bytes per element a GEMM input is kept at for (QKV, every other linear
/// layer): 2 where the layer has an adapter (its 16-bit input, saved by the adapter), 0
/// where it is frozen without one (Transformer Engine keeps no input for a frozen weight).
/// QKV always has one; the others with `LoraTargets::All`. `None` without LoRA.
fn lora_input_bytes(plan: &Plan) -> Option<(f64, f64)> {
    if plan.lora_rank == 0 {
        return None;
    }
    let rest = if plan.lora_targets == LoraTargets::All {
        2.0
    } else {
        0.0
    };
    Some((2.0, rest))
}

/// One attention block's saved tensors per `s·b·h`: (split over TP, replicated). Fused
/// attention keeps its query (`a·d_qk` columns), key (`kv·d_qk`) and value (`kv·d_v`) in
/// 16-bit, and the output projection its input, the attention output (`a·d_v` columns at
/// `proj_in` bytes): `(2·(a·d_qk + kv·(d_qk + d_v)) + proj_in·a·d_v)/h`, Korthikanti's
/// `2 + 4·kv/a + 2` when `a·d = h` (it is not for Qwen3, whose 64 heads of 128 are twice
/// its hidden 4096). MLA (Megatron-core `MLASelfAttention`) also keeps its latents on
/// every TP rank (the down-projections are replicated): each latent's norm input and its
/// normalised copy feeding the up-projection, `(2 + q)·(r_q + r_kv)`, and the rotary key,
/// `2·d_rope`; with `mla_up_proj` the query, key and value are dropped after the
/// attention's forward and rebuilt from the latents for its backward
/// (`CheckpointWithoutOutput` around `qkv_up_proj_and_rope_apply`). With QK-norm
/// (`qk_norm`, not MLA) the two norms keep their inputs and an FP32 rsigma per head:
/// `+ (2·d_qk + 4)·(a + kv)/h`.
fn attention_terms(m: &Transformer, plan: &Plan, q: f64, proj_in: f64) -> (f64, f64) {
    let at = &m.attn;
    let (a, kv, dqk, dv) = (at.heads, at.kv_heads, at.qk_d, at.v_d);
    let out = proj_in * a * dv;
    match at.mla {
        None => {
            // QK-norm's Transformer Engine norms keep their inputs (the pre-norm queries and
            // keys, 2 B each) and an FP32 rsigma per head and token.
            let qkn = if m.qk_norm {
                2.0 * (a + kv) * dqk + 4.0 * (a + kv)
            } else {
                0.0
            };
            ((2.0 * (a * dqk + kv * (dqk + dv)) + out + qkn) / m.h, 0.0)
        }
        Some([qr, kvr, rope]) => {
            let qkv = if plan.recompute_modules.has(RecomputeModules::MLA_UP_PROJ) {
                0.0
            } else {
                2.0 * (a * dqk + kv * (dqk + dv))
            };
            (
                (qkv + out) / m.h,
                ((2.0 + q) * (qr + kvr) + 2.0 * rope) / m.h,
            )
        }
    }
}

/// An MoE layer's routed tokens saved by the experts' first GEMM, per `s·b·h` before the
/// split by `t`: each token reaches its `k` experts as `k` copies of its hidden state
/// (`etp/t` of the micro-batch per rank with expert TP, `moe_frontier` docs), and
/// Transformer Engine's `GroupedLinear` keeps its input for the weight-gradient GEMM at
/// `q` bytes per element (`grouped_linear.py`, `_GroupedLinear.forward`): `q·k·etp`. The
/// routing weights are applied inside the activation (Megatron-core `TEGroupedMLP`:
/// `weighted_bias_swiglu`), so the un-permutation keeps no copy of its own (Transformer
/// Engine's `moe_unpermute` saves its input only when given the weights). Zero for dense
/// layers, whose FC1 input is the norm's output already counted.
///
/// A LatentMoE's copies are ℓ wide, `q·k·etp·ℓ/h`, and its `ℓ → h` projection keeps its
/// input, the combined latent tokens, at `q` bytes: `+ q·ℓ/h` (its `h → ℓ` projection's
/// input is the norm's output, counted already).
fn dispatched_input(m: &Transformer, plan: &Plan, q: f64) -> f64 {
    if m.experts <= 1 {
        return 0.0;
    }
    let width = m.eh / m.h;
    let latent = if m.latent_params > 0.0 {
        q * width
    } else {
        0.0
    };
    q * m.top_k as f64 * plan.etp as f64 * width + latent
}

/// The MLP's split activations per `s·b·h` for `k` experts of width `f`, with the FC2
/// input kept at `q` bytes per element: `(2 + q)·f/h` (`(4 + q)·f/h` SwiGLU) each; `4·f/h`
/// (`6·f/h`) in 16-bit. Without the FC2 input (`act_kept` false: the activation is
/// recomputed, `moe_act`) `2·f/h` (`4·f/h`).
fn mlp_term(m: &Transformer, f: f64, k: f64, q: f64, act_kept: bool) -> f64 {
    let fc2_in = if act_kept { q } else { 0.0 };
    (if m.gated { 4.0 } else { 2.0 } + fc2_in) * f / m.h * k
}

/// A hybrid model's layer activations per `s·b·h`, averaged over its layers
/// (`model::mamba`): every layer keeps its pre-norm's input and output, `R₁ = 2 + q` (4 in
/// 16-bit; +1 with a dropout mask) replicated unless SP; then its block's split terms:
/// attention `2 + 4·kv/a` plus the projection input and the scores, a dense MLP
/// [`mlp_term`], an MoE layer the same × top_k, a Mamba layer [`Mamba::activation_bytes`] at `t` = 1 over `h`:
/// `(2·(2·d_in + 2·g·N + H) + 6·d_in)/h`, a Gated DeltaNet layer [`Gdn::activation_bytes`]
/// likewise. A transformer layer is one attention and one MLP block (`R = 2·R₁`).
///
/// [`Mamba::activation_bytes`]: crate::model::Mamba::activation_bytes
/// [`Gdn::activation_bytes`]: crate::model::Gdn::activation_bytes
fn hybrid_layer_terms(
    m: &Transformer,
    hy: &crate::model::Hybrid,
    plan: &Plan,
    dropout: bool,
    (norm, attention, q): (f64, f64, f64),
    scores: f64,
) -> f64 {
    let t = plan.tp as f64;
    let modules = plan.recompute_modules;
    let n = hy.counts;
    let (ckpt_mlp, ckpt_moe) = (
        mlp_checkpointed(modules, false),
        mlp_checkpointed(modules, true),
    );
    // A checkpointed block keeps its input, the norm's 16-bit output, in place of the
    // GEMM's `q`-byte copy: `+ (2 − q)` for each such layer (nothing with `layernorm`,
    // which drops that output).
    let norm16 = if modules.has(RecomputeModules::LAYERNORM) {
        0.0
    } else {
        2.0 - q
    };
    let ckpt_layers = if ckpt_mlp { n.mlp } else { 0 } + if ckpt_moe { n.moe } else { 0 };
    let r1 = norm + if dropout { 1.0 } else { 0.0 } + norm16 * ckpt_layers as f64 / m.layers as f64;
    let rep = r1 / if plan.sp { t } else { 1.0 };
    let mamba = hy.mamba.map_or(0.0, |mb| mb.activation_bytes(1.0) / m.h);
    let gdn = hy.gdn.map_or(0.0, |g| g.activation_bytes(1.0) / m.h);
    let dense = if ckpt_mlp {
        0.0
    } else {
        mlp_term(m, m.dense_f, 1.0, q, true)
    };
    let shared = if modules.has(RecomputeModules::SHARED_EXPERTS) {
        0.0
    } else {
        mlp_term(m, m.shared_f, 1.0, q, true)
    };
    let moe = if ckpt_moe {
        0.0
    } else {
        mlp_term(
            m,
            m.f,
            m.top_k as f64,
            q,
            !modules.has(RecomputeModules::MOE_ACT),
        ) + shared
            + dispatched_input(m, plan, q)
    };
    let split = n.attention as f64 * (attention + scores)
        + n.mlp as f64 * dense
        + n.moe as f64 * moe
        + n.mamba as f64 * mamba
        + n.gdn as f64 * gdn;
    rep + split / t / m.layers as f64
}

/// Whether the MLP block of a dense (`moe` false) or MoE layer is checkpointed whole:
/// `mlp` for dense layers, `moe` for MoE layers (Megatron-core applies `mlp` only where
/// the layer is not an MoE layer).
fn mlp_checkpointed(modules: RecomputeModules, moe: bool) -> bool {
    modules.has(if moe {
        RecomputeModules::MOE
    } else {
        RecomputeModules::MLP
    })
}

/// Bytes per element of a linear layer's input saved for its weight-gradient GEMM: 2 in
/// 16-bit; one column-wise quantized copy with FP8-family precisions (Transformer
/// Engine): FP8 1 (blockwise `+4/128` for its FP32 scale per 128), MXFP8 `1 + 1/32`
/// (E8M0 scale per 32, OCP MX v1.0), NVFP4 `0.5 + 1/16` (E4M3 scale per 16).
pub fn saved_input_bytes(p: Precision, r: Fp8Recipe) -> f64 {
    match (p, r) {
        (Precision::Fp8, Fp8Recipe::Block) => 1.0 + 4.0 / 128.0,
        (Precision::Fp8, _) => 1.0,
        (Precision::Mxfp8, _) => 1.0 + 1.0 / 32.0,
        (Precision::Nvfp4, _) => 0.5 + 1.0 / 16.0,
        _ => 2.0,
    }
}

/// Micro-batches whose activations the first pipeline stage holds at its peak, in units
/// of the stage's full layer stack: GPipe keeps all `m`; 1F1B keeps `min(p, m)`
/// (Narayanan et al. SC'21 §2.2); DualPipe keeps `p + 1` (DeepSeek-V3 technical report,
/// Table 2); the interleaved schedule as [`stage_layer_microbatches`] counts it, divided
/// by the stage's layers (uniform chunks: `p + (p−1)/v`, Korthikanti et al. 2022 §4.2.3).
pub fn in_flight(plan: &Plan) -> f64 {
    let (p, m) = (plan.pp as f64, plan.micro_batches as f64);
    match plan.schedule {
        Schedule::DualPipe => (p + 1.0).min(m),
        Schedule::Gpipe => m,
        Schedule::Interleaved if plan.v > 1 => {
            let layers = plan.stages.first as f64;
            stage_layer_microbatches(plan, 0, layers) / layers
        }
        Schedule::OneFOneB | Schedule::Interleaved => p.min(m),
    }
}

/// The pipeline rank whose activations peak, as (rank, its layers, layer-micro-batches
/// in flight): the first stage holds `in_flight` micro-batches of its layers; the second
/// (a middle stage, `p > 2`) one fewer under 1F1B (`p − 1`) and, interleaved,
/// [`stage_layer_microbatches`] at rank 1, which exceeds rank 0 when the first stage
/// gives up a layer to the embedding (Llama 3 405B: 7 layers on rank 0, 8 on rank 1).
pub fn peak_stage(plan: &Plan) -> (u32, u32, f64) {
    let st = plan.stages;
    let first = (0, st.first, st.first as f64 * in_flight(plan));
    if plan.pp <= 2 {
        return first;
    }
    let second = if plan.schedule == Schedule::Interleaved && plan.v > 1 {
        stage_layer_microbatches(plan, 1, st.mid_max as f64)
    } else {
        st.mid_max as f64 * in_flight(plan) * (plan.pp - 1) as f64 / plan.pp as f64
    };
    if second > first.2 {
        (1, st.mid_max, second)
    } else {
        first
    }
}

/// Layer-micro-batches (layers × micro-batches) whose activations pipeline rank `r`,
/// holding `layers` layers, keeps at its peak under Megatron-core's interleaved 1F1B
/// (`megatron/core/pipeline_parallel/schedules.py`, `get_pp_rank_microbatches` and
/// `get_schedule_table`, at d98e8a6): rank `r` runs `W = 2·(p−r−1) + (v−1)·p` warm-up
/// chunk forwards and one more before its first backward, `F = min(W + 1, m·v)`; the
/// forwards go in groups of `p` micro-batches per chunk, so the first `p·v` cover every
/// chunk of `p` micro-batches (`p·layers`) and the remaining `F − p·v` run the first
/// chunk of the next group (`c₀` layers each). Peak `p·layers + (F − p·v)·c₀`; with equal
/// chunks (`c₀ = layers/v`) on rank 0 that is `layers·(p + (p−1)/v)`, Korthikanti et al.'s
/// factor. With the embedding counted as a layer the first chunk of rank 0 holds one layer
/// fewer (`c₀ = layers − (v−1)·⌈layers/v⌉`), which lowers the peak. Plans need `p | m`
/// here (Megatron-core's groups of `p` micro-batches), so `m ≥ p`.
pub fn stage_layer_microbatches(plan: &Plan, r: u32, layers: f64) -> f64 {
    let (p, v, m) = (plan.pp as f64, plan.v as f64, plan.micro_batches as f64);
    let warmup = 2.0 * (p - r as f64 - 1.0) + (v - 1.0) * p;
    let forwards = (warmup + 1.0).min(m * v);
    let chunk = (layers / v).ceil();
    let first = layers - (v - 1.0) * chunk;
    let c0 = if first >= 1.0 { first } else { layers / v };
    let extra = (forwards - p * v).max(0.0);
    // Past m − p extra forwards the next group is exhausted; further ones run chunk 1.
    let on_first = extra.min(m - p);
    p * layers + on_first * c0 + (extra - on_first) * chunk
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::parallel::PlanSpec;
    use approx::assert_relative_eq;

    const GIB: f64 = 1073741824.0;

    fn plan(tp: u32, pp: u32, b: u32, gb: u32, rc: Recompute, sp: bool) -> (Transformer, Plan) {
        let m = catalog::model("gpt3-175b").unwrap();
        let spec = PlanSpec {
            tp,
            pp,
            micro_batch: b,
            global_batch: Some(gb),
            recompute: rc,
            sequence_parallel: sp,
            ..PlanSpec::default()
        };
        let p = Plan::new(&spec, &m, tp * pp).unwrap();
        (*m.transformer().unwrap(), p)
    }

    #[test]
    fn korthikanti_equations_by_hand() {
        // GPT-3: s=2048, h=12288, a=96, b=1, t=8: 5as/h = 80.
        let (m, p) = plan(8, 1, 1, 1, Recompute::None, false);
        let sbh = 2048.0 * 12288.0;
        assert_relative_eq!(
            layer_activation_bytes(&m, &p, true),
            sbh * (10.0 + 24.0 / 8.0 + 80.0 / 8.0)
        );
        let (m, p) = plan(8, 1, 1, 1, Recompute::None, true);
        assert_relative_eq!(
            layer_activation_bytes(&m, &p, true),
            sbh * (34.0 + 80.0) / 8.0
        );
        let (m, p) = plan(8, 1, 1, 1, Recompute::Selective, true);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), 34.0 * sbh / 8.0);
        let (m, p) = plan(1, 1, 1, 1, Recompute::None, false);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), sbh * (34.0 + 80.0));
        let (m, p) = plan(8, 1, 1, 1, Recompute::Full, false);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), 2.0 * sbh);
        // Full recomputation with SP: the layer input sharded over the 8 TP ranks.
        let (m, p) = plan(8, 1, 1, 1, Recompute::Full, true);
        assert_relative_eq!(layer_activation_bytes(&m, &p, true), 2.0 * sbh / 8.0);
    }

    #[test]
    fn offloaded_bytes_fit_each_tier_or_overflow() {
        // 10 GiB of states and 20 of activations on 80 GiB with 4 GiB reserved: fits.
        let gib = |x: f64| x * GIB;
        let base = || {
            Memory::new(
                [gib(2.0), gib(2.0), gib(6.0)],
                gib(20.0),
                0.0,
                Bytes::new(gib(80.0)),
                Bytes::new(gib(4.0)),
            )
        };
        assert!(base().fits);
        // 50 GiB on a host share of 64 and nothing on NVMe, on a system without NVMe: fits
        // (no bytes need no tier).
        let m = base().with_tiers(gib(50.0), 0.0, [Some(Bytes::new(gib(64.0))), None]);
        assert!(m.fits && !m.tier_overflow);
        assert_eq!((m.host.get(), m.nvme.get()), (gib(50.0), 0.0));
        // Exactly the share fits; one byte more, or any bytes on a missing tier, do not.
        let m = base().with_tiers(gib(64.0), 0.0, [Some(Bytes::new(gib(64.0))), None]);
        assert!(m.fits);
        let m = base().with_tiers(gib(64.0) + 1.0, 0.0, [Some(Bytes::new(gib(64.0))), None]);
        assert!(!m.fits && m.tier_overflow);
        let m = base().with_tiers(0.0, 1.0, [Some(Bytes::new(gib(64.0))), None]);
        assert!(!m.fits && m.tier_overflow);
        // On another device the same 30 GiB need 30 + 4 of its capacity: 34 GiB fits,
        // 32 does not.
        assert!(
            base()
                .on_capacity(Bytes::new(gib(34.0)), Bytes::new(gib(4.0)))
                .fits
        );
        assert!(
            !base()
                .on_capacity(Bytes::new(gib(32.0)), Bytes::new(gib(4.0)))
                .fits
        );
        // A tier overflow stays when the plan moves to a larger device.
        let m = m.on_capacity(Bytes::new(gib(192.0)), Bytes::new(gib(4.0)));
        assert!(!m.fits);
        assert_eq!(m.headroom(), gib(192.0 - 4.0 - 30.0));
    }

    #[test]
    fn saved_inputs_take_the_quantized_formats_bytes() {
        // One byte per FP8 element; blockwise FP8 adds an FP32 scale per 128 elements
        // (4/128 = 0.03125); MXFP8 an E8M0 byte per 32 (0.03125); NVFP4 half a byte and an
        // E4M3 byte per 16 (0.0625); 16-bit inputs stay 2.
        assert_eq!(saved_input_bytes(Precision::Fp8, Fp8Recipe::Delayed), 1.0);
        assert_eq!(saved_input_bytes(Precision::Fp8, Fp8Recipe::Current), 1.0);
        assert_eq!(saved_input_bytes(Precision::Fp8, Fp8Recipe::Block), 1.03125);
        assert_eq!(
            saved_input_bytes(Precision::Mxfp8, Fp8Recipe::Delayed),
            1.03125
        );
        assert_eq!(
            saved_input_bytes(Precision::Nvfp4, Fp8Recipe::Delayed),
            0.5625
        );
        assert_eq!(saved_input_bytes(Precision::Bf16, Fp8Recipe::Delayed), 2.0);
    }

    #[test]
    fn per_op_checkpointing_keeps_what_torchtitans_policy_saves() {
        // Llama 3 8B (h 4096, 32 heads and 8 KV heads of 128, f 14336, gated), per s·b:
        // wq 2·4096 + wv 2·1024 + attention output 2·4096 + log-sum-exp 4·32 + w1 2·14336
        // = 47 232 B split over TP; the block input and w2's output, 2 + 2 B per h.
        let m = catalog::model("llama3-8b").unwrap();
        let at = |tp: u32, sp: bool| {
            let spec = PlanSpec {
                tp,
                global_batch: Some(1),
                recompute: Recompute::Op,
                sequence_parallel: sp,
                flash_attention: true,
                ..PlanSpec::default()
            };
            let p = Plan::new(&spec, &m, tp).unwrap();
            let t = m.transformer().unwrap();
            layer_activation_bytes(t, &p, false) / (t.s * t.h)
        };
        assert_relative_eq!(at(1, false), 47232.0 / 4096.0 + 4.0, max_relative = 1e-12);
        assert_relative_eq!(
            at(8, true),
            (47232.0 / 4096.0 + 4.0) / 8.0,
            max_relative = 1e-12
        );
        assert_relative_eq!(
            at(8, false),
            47232.0 / 4096.0 / 8.0 + 4.0,
            max_relative = 1e-12
        );
        // Ungated (Megatron GPT 1.7B: h 2304, 24 heads of 96, f 9216): wq, wv and the
        // attention output 3·2·2304 + log-sum-exp 4·24 + w1 2·9216 = 32 352 B per s·b, and
        // only the block input replicated (no w2 output kept): 32 352/2304 + 2.
        let gpt = catalog::model("megatron-2021-1.7b").unwrap();
        let spec = PlanSpec {
            global_batch: Some(1),
            recompute: Recompute::Op,
            flash_attention: true,
            ..PlanSpec::default()
        };
        let p = Plan::new(&spec, &gpt, 1).unwrap();
        let t = gpt.transformer().unwrap();
        assert_relative_eq!(
            layer_activation_bytes(t, &p, false) / (t.s * t.h),
            32352.0 / 2304.0 + 2.0,
            max_relative = 1e-12
        );
    }

    #[test]
    fn figure1_model_states_18_bytes_per_param() {
        // Korthikanti Fig. 1: 22B on 8 GPUs = 45.5625 GiB = 12·48·6144²/8 params × 18 B.
        let params = 12.0 * 48.0 * 6144f64.powi(2) / 8.0;
        let s = model_states(params, Optimizer::AdamFp32Grads, 0, 1);
        assert_relative_eq!((s[0] + s[1] + s[2]) / GIB, 45.5625, max_relative = 1e-12);
        let s16 = model_states(params, Optimizer::Adam, 0, 1);
        assert!((s16.iter().sum::<f64>() / GIB - 40.5).abs() < 1e-9);
        // ZeRO-3 over 4 shards everything by 4.
        let z = model_states(params, Optimizer::Adam, 3, 4);
        assert_relative_eq!(z.iter().sum::<f64>() * 4.0, s16.iter().sum::<f64>());
    }

    /// A Llama 3 405B plan (126 layers) on `tp·pp` GPUs with `v` virtual stages.
    fn llama405(
        pp: u32,
        v: u32,
        gb: u32,
        embedding: bool,
        precision: Precision,
    ) -> (Transformer, Plan) {
        let m = catalog::model("llama3-405b").unwrap();
        let spec = PlanSpec {
            tp: 8,
            pp,
            global_batch: Some(gb),
            virtual_stages: v,
            schedule: if v > 1 {
                Schedule::Interleaved
            } else {
                Schedule::OneFOneB
            },
            account_for_embedding: embedding,
            account_for_loss: embedding,
            sequence_parallel: true,
            flash_attention: true,
            precision,
            ..PlanSpec::default()
        };
        let p = Plan::new(&spec, &m, 8 * pp).unwrap();
        (*m.transformer().unwrap(), p)
    }

    #[test]
    fn fp8_keeps_quantized_gemm_inputs() {
        // Llama 3 405B, s = 8192, h = 16384, f = 53248 (f/h = 3.25), kv/a = 8/128, t = 8,
        // SP, flash attention, no dropout. BF16: R = 4 + 2·2 = 8; S = Q 2 + KV 4/16 +
        // projection input 2 + MLP (4 + 2)·3.25 = 23.75; (8 + 23.75)/8 per s·h.
        let sh = 8192.0 * 16384.0;
        let (m, p) = llama405(16, 1, 16, false, Precision::Bf16);
        assert_relative_eq!(layer_activation_bytes(&m, &p, false), sh * 31.75 / 8.0);
        // FP8: the LayerNorm outputs 1 B each (R = 4 + 2 = 6), the projection's FP8 input
        // beside the 16-bit attention output (2 + 1), FC2's input 1 B (MLP (4 + 1)·3.25):
        // S = 2 + 0.25 + 3 + 16.25 = 21.5; (6 + 21.5)/8.
        let (m, p) = llama405(16, 1, 16, false, Precision::Fp8);
        assert_relative_eq!(layer_activation_bytes(&m, &p, false), sh * 27.5 / 8.0);
        // NVFP4: q = 0.5625: R = 5.125, S = 2 + 0.25 + 2.5625 + 4.5625·3.25 = 19.640625.
        let (m, p) = llama405(16, 1, 16, false, Precision::Nvfp4);
        assert_relative_eq!(
            layer_activation_bytes(&m, &p, false),
            sh * (5.125 + 19.640625) / 8.0
        );
        assert_relative_eq!(
            saved_input_bytes(Precision::Mxfp8, Fp8Recipe::Delayed),
            1.03125
        );
    }

    #[test]
    fn lora_keeps_only_the_adapters_inputs() {
        // The plan of the test above with LoRA (rank 16). Every linear adapted, FP8: each
        // saved GEMM input is the adapter's 16-bit copy, R = 2·(2 + 2) = 8; S = Q 2 + KV
        // 0.25 + the attention output 2 (the projection adapter's input) + MLP
        // (4 + 2)·3.25 = 23.75: (8 + 23.75)/8, as BF16 without LoRA.
        let sh = 8192.0 * 16384.0;
        let (m, mut p) = llama405(16, 1, 16, false, Precision::Fp8);
        p.lora_rank = 16;
        assert_relative_eq!(layer_activation_bytes(&m, &p, false), sh * 31.75 / 8.0);
        // QKV only: the attention norm's output kept for the QKV adapter (R = 4 + 2 = 6);
        // the frozen projection, FC1 and FC2 keep nothing: S = 2 + 0.25 + 2 + 4·3.25 = 17.25.
        p.lora_targets = LoraTargets::Qkv;
        assert_relative_eq!(layer_activation_bytes(&m, &p, false), sh * 23.25 / 8.0);
        // In BF16 the same: nothing saved depends on q any more.
        let (m, mut p) = llama405(16, 1, 16, false, Precision::Bf16);
        p.lora_rank = 16;
        p.lora_targets = LoraTargets::Qkv;
        assert_relative_eq!(layer_activation_bytes(&m, &p, false), sh * 23.25 / 8.0);
    }

    #[test]
    fn interleaved_warmup_as_megatron_core_counts_it() {
        // Equal chunks: p = 16, v = 2, m = 64 (gb 64 on dp 1), 126 layers → stages of 7/8:
        // rank 1 (8 layers, chunks of 4): W = 2·14 + 16 = 44, F = 45, 13 forwards past the
        // first p·v = 32 on chunk 0 → 16·8 + 13·4 = 180. Korthikanti's factor would give
        // 8·(16 + 15/2)·15/16 = 176.25 for the second stage.
        let (_, p) = llama405(16, 2, 64, false, Precision::Bf16);
        assert_eq!((p.stages.first, p.stages.mid_max), (7, 8));
        assert_relative_eq!(stage_layer_microbatches(&p, 1, 8.0), 180.0);
        // With the embedding and loss counted as layers (Megatron-Bridge's Llama 3.1 405B
        // recipes) and v = 4: 128 units over 64 virtual stages of 2; rank 0 holds
        // 1 + 2 + 2 + 2 = 7 layers. W = 30 + 48 = 78, F = 79: 16·7 + 15·1 = 127 (equal
        // chunks would give 7·(16 + 15/4) = 138.25).
        let (_, p) = llama405(16, 4, 64, true, Precision::Bf16);
        assert_eq!(p.stages.first, 7);
        assert_relative_eq!(stage_layer_microbatches(&p, 0, 7.0), 127.0);
        // Rank 1 (8 layers, chunks of 2): W = 28 + 48 = 76, F = 77: 16·8 + 13·2 = 154; it is
        // the peak.
        assert_relative_eq!(stage_layer_microbatches(&p, 1, 8.0), 154.0);
        assert_eq!(peak_stage(&p), (1, 8, 154.0));
        // m = 16: the warm-up stops at m·v = 64 forwards, 16·7 = 112 (no extra chunk).
        let (_, p) = llama405(16, 4, 16, true, Precision::Bf16);
        assert_relative_eq!(stage_layer_microbatches(&p, 0, 7.0), 112.0);
        // 1F1B: the first stage keeps p micro-batches of its layers, 16·7 = 112, the second
        // p − 1 of its 8: 120 (the peak).
        let (_, p) = llama405(16, 1, 16, false, Precision::Bf16);
        assert_eq!(peak_stage(&p), (1, 8, 120.0));
        // The interleaved schedule with one chunk per stage is 1F1B (Megatron-core runs the
        // plain schedule without virtual stages): with m = 32, 16 micro-batches in flight on
        // the first stage, not the interleaved warm-up's 2·15 + 1 = 31.
        let (_, mut p) = llama405(16, 1, 32, false, Precision::Bf16);
        assert_eq!(in_flight(&p), 16.0);
        p.schedule = Schedule::Interleaved;
        assert_eq!(in_flight(&p), 16.0);
        assert_eq!(peak_stage(&p), (1, 8, 120.0));
    }

    #[test]
    fn chunks_that_do_not_divide_the_stage_count_as_equal_shares() {
        // GPT-3 (96 layers) on 16 stages of 6 with v = 4: whole chunks of ⌈6/4⌉ = 2 leave the
        // first chunk none, so each forward past the first p·v counts 6/4 = 1.5 layers. Rank
        // 0, m = 64: W = 2·15 + 3·16 = 78, F = 79, 15 extra: 16·6 + 15·1.5 = 118.5.
        let m = catalog::model("gpt3-175b").unwrap();
        let spec = PlanSpec {
            tp: 8,
            pp: 16,
            virtual_stages: 4,
            schedule: Schedule::Interleaved,
            global_batch: Some(64),
            ..PlanSpec::default()
        };
        let p = Plan::new(&spec, &m, 128).unwrap();
        assert_eq!((p.stages.first, p.micro_batches), (6, 64));
        assert_relative_eq!(stage_layer_microbatches(&p, 0, 6.0), 118.5);
    }

    #[test]
    fn a_hybrid_layer_with_dropout_keeps_its_mask() {
        // A hybrid layer keeps its pre-norm's input and output (4 B per s·b·h in 16-bit)
        // and, with dropout, the 1-byte mask beside them: replicated without SP, over the
        // 8 TP ranks with it. Nemotron-H 56B at TP 8.
        let m = catalog::model("nemotron-h-56b").unwrap();
        let t = m.transformer().unwrap();
        let sbh = t.s * t.h;
        for (sp, share) in [(false, 1.0), (true, 1.0 / 8.0)] {
            let spec = PlanSpec {
                tp: 8,
                sequence_parallel: sp,
                flash_attention: true,
                global_batch: Some(1),
                ..PlanSpec::default()
            };
            let p = Plan::new(&spec, &m, 8).unwrap();
            let mask = layer_activation_bytes(t, &p, true) - layer_activation_bytes(t, &p, false);
            assert_relative_eq!(mask, sbh * share, max_relative = 1e-12);
        }
        // Unfused attention keeps its softmax output (2 B per score, `2·a·s/h` per s·b·h)
        // in each of the 10 attention layers, over TP 8 and averaged over the 118 layers:
        // 10·2·64·8192/8192/8/118 per s·b·h.
        let at = |flash_attention| {
            let spec = PlanSpec {
                tp: 8,
                flash_attention,
                global_batch: Some(1),
                ..PlanSpec::default()
            };
            layer_activation_bytes(t, &Plan::new(&spec, &m, 8).unwrap(), false)
        };
        assert_relative_eq!(
            at(false) - at(true),
            sbh * 10.0 * 128.0 / 8.0 / 118.0,
            max_relative = 1e-12
        );
    }

    #[test]
    fn a_tie_between_the_first_and_second_stage_reports_the_first() {
        // Megatron GPT 3.6B (30 layers) on 4 stages, 6 on the first, 8 on each other, 1F1B
        // with 8 micro-batches: the first stage holds 4 micro-batches of 6 layers (24), the
        // second 3 of 8 (24). On the tie the first stage is the one reported.
        let m = catalog::model("megatron-2021-3.6b").unwrap();
        let spec = PlanSpec {
            pp: 4,
            first_stage_layers: Some(6),
            global_batch: Some(8),
            ..PlanSpec::default()
        };
        let p = Plan::new(&spec, &m, 4).unwrap();
        assert_eq!((p.stages.first, p.stages.mid_max), (6, 8));
        assert_eq!(peak_stage(&p), (0, 6, 24.0));
    }

    #[test]
    fn reserve_and_headroom_by_hand() {
        // 80 GiB: 1.5 GiB + 3 % = 3.9 GiB; 70 GiB used leaves 6.1 GiB; 77 GiB does not fit.
        let dev = catalog::device("h100-sxm").unwrap();
        assert_relative_eq!(dev.memory_reserve().get() / GIB, 3.9, max_relative = 1e-12);
        let fits = |used: f64| {
            Memory::new(
                [used * GIB, 0.0, 0.0],
                0.0,
                0.0,
                dev.memory(),
                dev.memory_reserve(),
            )
        };
        assert_relative_eq!(fits(70.0).headroom() / GIB, 6.1, max_relative = 1e-12);
        assert!(fits(76.0).fits && !fits(76.2).fits);
        let (_, mut p) = llama405(16, 1, 16, false, Precision::Bf16);
        assert_eq!(reserve(&dev, &p), dev.memory_reserve());
        p.memory_reserve = Some(Bytes::new(0.0));
        assert_eq!(reserve(&dev, &p).get(), 0.0);
        let m = fits(78.0).on_capacity(dev.memory(), Bytes::new(GIB));
        assert!(m.fits && (m.headroom() / GIB - 1.0).abs() < 1e-12);
    }
}

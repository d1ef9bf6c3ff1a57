//! What a device holds and updates: its parameters (the stage with the most), the
//! optimizer step over its shard, and its memory (model states, activations in flight,
//! communication buffers, ZeRO-3's gathered weights).

use super::{Ctx, lowp};
use crate::memory::{self, Memory};
use crate::model::Transformer;
use crate::parallel::Plan;
use crate::units::Seconds;

/// Parameters one device holds ([`held`]).
pub(super) fn stage_params(m: &Transformer, plan: &Plan) -> f64 {
    held(m, plan).0
}

/// What the busiest device holds, as (parameters, layers): the stage with the most, its
/// layers (experts divided by EP) split over TP, plus the input embedding (`V·h/t`, with
/// learned positions and the final norm) on the first stage and the output head (`V·h/t`)
/// on the last. With p > 1 each end holds one `V·h` matrix whether the weights are tied or
/// not: Megatron-core builds the word embedding on the first stage and the output layer on
/// the last (a tied model keeps a copy there whose gradient it all-reduces with the
/// first's; `language_module.py`, `setup_embeddings_and_output_layer`, in
/// `megatron/core/models/common/language_module/`). `embedding_params` counts the untied
/// head beside the input embedding, so with p = 1 it is all on the one stage. The MTP
/// modules sit on the last stage beside the head (Megatron-core builds them in the
/// post-process stage), [`mtp_params`] of them, and with p > 1 that stage keeps its own copy
/// of the word embedding for them (`GPTModel` builds `self.embedding` where `mtp_process`;
/// its gradient is all-reduced with the first stage's, `finalize_model_grads.py`
/// `_allreduce_word_embedding_grads`): `V·h/t` more unless the weights are tied, when that
/// copy is the output layer already counted. A pipeline layout may put the modules on
/// another rank (`Stages::mtp_apart`, Megatron-core's `mtp_standalone`): there they and a
/// copy of the embedding (none on rank 0, which has it) join that rank's layers.
///
/// DualPipe: device `i` holds stage `i` of one direction and stage `p − 1 − i` of the
/// other (DeepSeek's DualPipe, `examples/example_dualpipe.py`; "parameter 2×", DeepSeek-V3
/// report Table 2), so the busiest device holds the heavier of the pair of ends
/// (`P_first + P_last`) and the busiest pair of middle stages
/// ([`crate::parallel::Stages::dualpipe_mid_pair`] layers).
pub(super) fn held(m: &Transformer, plan: &Plan) -> (f64, u32) {
    let st = plan.stages;
    let t = plan.tp as f64;
    let layer = layer_params(m, plan) * t;
    let emb = m.embedding_params / t;
    let mtp = mtp_params(m, plan);
    if plan.pp == 1 {
        return (st.first as f64 * layer / t + emb + mtp, st.first);
    }
    let head = m.v * m.h / t;
    let input = if m.tied { emb } else { emb - head };
    let mut first = st.first as f64 * layer / t + input;
    let mut last = st.last as f64 * layer / t + head;
    // The MTP modules and their embedding copy: with the loss on the last stage, or on the
    // rank a layout puts them (Megatron-core `mtp_standalone`): rank 0 has the embedding
    // already, a middle rank keeps its own copy, tied or not (it has no output layer).
    let mut apart = 0.0;
    match st.mtp_apart {
        None => last += mtp + mtp_embedding(m, plan),
        Some((0, _)) => first += mtp,
        Some((_, layers)) => apart = layers as f64 * layer / t + mtp + head,
    }
    if plan.schedule == crate::parallel::Schedule::DualPipe {
        let pair = st.dualpipe_mid_pair();
        let mid = pair as f64 * layer / t;
        return if first + last >= mid {
            (first + last, st.first + st.last)
        } else {
            (mid, pair)
        };
    }
    let most = first
        .max(last)
        .max(st.mid_max as f64 * layer / t)
        .max(apart);
    (most, st.max_layers())
}

/// The share of the optimizer state a device keeps of the parameters it holds: under
/// DualPipe with a distributed optimizer the two copies of each stage (on devices `i` and
/// `p − 1 − i`) reduce their gradients together and shard one optimizer state, as two more
/// data-parallel replicas would (an assumption: the report states only "parameter 2×";
/// DeepSeek-V3 trained with ZeRO-1), ½; otherwise 1.
pub(super) fn optimizer_share(plan: &Plan) -> f64 {
    // DualPipe needs an even pp (the plan refuses pp = 1).
    if plan.schedule == crate::parallel::Schedule::DualPipe && plan.zero >= 1 {
        0.5
    } else {
        1.0
    }
}

/// The word-embedding copy the MTP modules' stage keeps when the pipeline has more than one
/// stage and the weights are untied: `V·h/t` (a tied model's output layer is that copy).
pub(super) fn mtp_embedding(m: &Transformer, plan: &Plan) -> f64 {
    if m.mtp_layers == 0 || plan.pp <= 1 || m.tied {
        return 0.0;
    }
    m.v * m.h / plan.tp as f64
}

/// Parameters of the MTP modules on one device of the last stage: `Transformer::mtp_params`
/// with the local routed experts (`E/ep`, split `etp` ways), split over TP, but for a
/// LatentMoE's projections, which every TP rank holds whole ([`latent_replicated`]): per
/// weight copy, one per MoE layer of the module.
pub(super) fn mtp_params(m: &Transformer, plan: &Plan) -> f64 {
    let t = plan.tp as f64;
    let routed = m.experts as f64 / plan.ep as f64 * (t / plan.etp as f64);
    let moe = m.hybrid.map_or(1.0, |hy| hy.mtp.moe as f64);
    m.mtp_params(routed) / t + m.mtp_copies() * moe * latent_replicated(m, t)
}

/// What a LatentMoE layer's two projections add on a device beyond an even split over TP:
/// they are replicated (Megatron-core `MoELayer`: `parallel_mode="duplicated"`), so each
/// rank holds `2·h·ℓ` whole, `(1 − 1/t)` of it beyond `P/t`. Zero without a latent.
fn latent_replicated(m: &Transformer, t: f64) -> f64 {
    m.latent_params * (1.0 - 1.0 / t)
}

/// Parameters of one transformer layer on one device: attention, the local experts'
/// MLPs (E/ep of them, split etp ways), shared experts and norms, split over TP, and a
/// LatentMoE's projections whole ([`latent_replicated`]).
/// A hybrid model's layer is the mean over its pattern (`Transformer::hybrid_layer_params`
/// with the local routed experts).
pub(super) fn layer_params(m: &Transformer, plan: &Plan) -> f64 {
    let t = plan.tp as f64;
    if let Some(hy) = &m.hybrid {
        let routed = m.experts as f64 / plan.ep as f64 * (t / plan.etp as f64);
        let moe = hy.counts.moe as f64 / m.layers as f64;
        return m.hybrid_layer_params(hy, routed) / t + moe * latent_replicated(m, t);
    }
    (m.attn_params
        + m.experts as f64 / plan.ep as f64 * m.mlp_params * (t / plan.etp as f64)
        + m.shared_params
        + m.latent_params
        + m.other_layer_params)
        / t
        + latent_replicated(m, t)
}

/// Parameters of one layer on one device that belong to routed experts: the `E/ep` local
/// experts split `etp` ways, `E/ep · P_expert / etp` (a hybrid model's layer: the mean over
/// its pattern, as [`layer_params`]).
pub(super) fn routed_layer_params(m: &Transformer, plan: &Plan) -> f64 {
    if m.experts <= 1 {
        return 0.0;
    }
    let per = m.experts as f64 / plan.ep as f64 * m.mlp_params / plan.etp as f64;
    match &m.hybrid {
        Some(hy) => per * hy.counts.moe as f64 / m.layers as f64,
        None => per,
    }
}

/// Trainable routed-expert parameters of the layers the busiest device holds ([`held`];
/// none with LoRA: the adapters are dense).
pub(super) fn routed_trainable(c: &Ctx) -> f64 {
    if c.plan.lora_rank > 0 {
        return 0.0;
    }
    routed_layer_params(c.m, c.plan) * held(c.m, c.plan).1 as f64
}

/// The ZeRO shard groups of a device's parameters: (dense, routed experts). The dense
/// ones shard over DP × CP (Megatron-LM's data-parallel group with context parallel), or
/// HSDP's shard group; Megatron-core's distributed optimizer keeps the routed experts'
/// parameters in buffers of their own, sharded over the expert-DP group (`t·c·d/(etp·ep)`
/// ranks, [`Plan::expert_dp`]); HSDP shards both over its group.
pub(super) fn shard_groups(plan: &Plan) -> (u32, u32) {
    if plan.hsdp > 1 {
        (plan.hsdp, plan.hsdp)
    } else {
        (plan.dp * plan.cp, plan.expert_dp())
    }
}

/// Of `trainable` parameters, those in this device's ZeRO shard ([`shard_groups`]):
/// `(P − P_routed)/n + P_routed/edp`.
pub(super) fn sharded(c: &Ctx, trainable: f64) -> f64 {
    let routed = routed_trainable(c);
    let (n, edp) = shard_groups(c.plan);
    (trainable - routed) / n as f64 + routed / edp as f64
}

/// Parameters whose low-precision copies a device holds and refreshes each iteration: all
/// `params` of its stage, or under ZeRO-3 its shard ([`sharded`]).
fn weight_copies(c: &Ctx, params: f64) -> f64 {
    if c.plan.zero >= 3 {
        sharded(c, params)
    } else {
        params
    }
}

/// The low-precision weight copies of a device holding `params` parameters: (parameters
/// with copies, bytes per parameter of the copies).
pub(super) fn weight_copy_terms(c: &Ctx, params: f64) -> (f64, f64) {
    let p = c.plan;
    (
        weight_copies(c, params),
        lowp::weight_copy_bytes(p.precision, p.fp8_recipe, c.any_layout()),
    )
}

/// Optimizer step, memory-bound over the local optimizer shard (Megatron-LM's
/// mixed-precision optimizer, apex multi-tensor kernels), bytes per parameter with
/// gradient bytes `g` and optimizer-state bytes `o` (fp32 master, m and v: 12, or 8 with
/// BF16 moments): gradient-norm clipping reads the gradient (`g`); Adam reads the gradient
/// and reads/writes the master weight, m and v (`g + 2o`); the master is copied to the
/// 16-bit model weight (read 4, write 2); gradients are zeroed (`g`). With fp16 dynamic
/// loss scaling the gradients are also unscaled and checked for inf/NaN in place (`2g`).
/// Total `6 + 2o + 3g` (`30 + 3g` with fp32 moments; + `2g` for fp16).
pub(super) fn optimizer_time(c: &Ctx, trainable: f64, params: f64) -> Seconds {
    let (_, g, o) = c.plan.optimizer.bytes_per_param();
    let local = if c.plan.zero >= 1 {
        sharded(c, trainable)
    } else {
        trainable
    } * optimizer_share(c.plan);
    // Low-precision weight copies are refreshed once per iteration (Transformer Engine
    // caches them across micro-batches): read 2 B, write the copies. With low-precision
    // parameters there is no 16-bit weight to read: the copies are written from the
    // gathered data.
    let recast = lowp::weight_copy_bytes(c.plan.precision, c.plan.fp8_recipe, c.any_layout());
    let recast = if recast > 0.0 {
        let read = if c.plan.fp8_params { 0.0 } else { 2.0 };
        weight_copies(c, params) * (read + recast)
    } else {
        0.0
    };
    let unscale = if c.plan.precision == crate::compute::Precision::Fp16 {
        2.0 * g
    } else {
        0.0
    };
    c.mem(local * (adam_step_bytes(g, o) + unscale) + recast, 8.0)
}

/// Bytes per parameter Adam's step moves over its shard, `6 + 2o + 3g` ([`optimizer_time`]).
pub(super) fn adam_step_bytes(g: f64, o: f64) -> f64 {
    6.0 + 2.0 * o + 3.0 * g
}

/// Memory of the stage with the most activations: the first stage holds `in_flight`
/// micro-batches of its layers, the second one fewer (1F1B); ZeRO shards over DP × CP
/// (routed experts over expert-DP, [`shard_groups`]);
/// CP divides every activation by `c`; FP8-family precisions keep their weight copies.
pub(super) fn stage_memory(c: &Ctx, params: f64, trainable: f64, plan: &Plan) -> Memory {
    let (shard, edp) = shard_groups(plan);
    let routed = routed_trainable(c);
    let dense = memory::model_states(trainable - routed, plan.optimizer, plan.zero, shard);
    let experts = memory::model_states(routed, plan.optimizer, plan.zero, edp);
    let mut states = [0, 1, 2].map(|i| dense[i] + experts[i]);
    // DualPipe: `params` are both stages' ([`held`]); their optimizer state is shared.
    states[2] *= optimizer_share(plan);
    // LoRA: every base weight is frozen (16-bit, not sharded); the adapters (`trainable`)
    // are parameters besides them, with their own states above.
    if plan.lora_rank > 0 {
        states[0] += params * 2.0;
    }
    // Low-precision weight copies: of every parameter, or under ZeRO-3 of the device's
    // shard. Megatron-FSDP keeps its FP8 parameters sharded and gathers them in FP8
    // (`fp8_param_gather`); a gathered layer lives in the prefetch buffers. With
    // low-precision parameters the copies are the weights: the 16-bit ones go
    // (`w` B per parameter of the same count).
    let (copies, b) = weight_copy_terms(c, params);
    states[0] += copies * b;
    if plan.fp8_params {
        let w = plan.optimizer.bytes_per_param().0;
        states[0] = (states[0] - copies * w).max(0.0);
    }
    let per_layer = memory::layer_activation_bytes(c.m, plan, c.m.bias) / plan.cp as f64;
    // Without a pipeline the one stage also holds the MTP modules' activations (one
    // micro-batch in flight); with one, the first stage (whose memory this is) holds none.
    let mtp = if plan.pp == 1 {
        memory::mtp_activation_bytes(c.m, plan, c.m.bias) / plan.cp as f64
    } else {
        0.0
    };
    let acts = per_layer * memory::peak_stage(plan).2 + mtp;
    let logits = if plan.pp == 1 {
        c.tokens * c.m.v / plan.tp as f64 * 4.0
    } else {
        0.0
    };
    // DP buckets: with ZeRO-0/1 they are views into the unsharded gradient buffer (counted
    // in `gradients`); with ZeRO-2 the gradients are sharded and the unsharded bucket being
    // filled and the one being reduce-scattered are extra.
    let bucket = if plan.dp * plan.cp > 1 && plan.zero == 2 {
        2.0 * plan.dp_bucket_bytes().get()
    } else {
        0.0
    };
    let prefetch = if plan.zero == 3 && plan.dp * plan.cp > 1 {
        if super::comm::unsharded_across_micro_batches(plan) {
            // The stage's weights gathered and its gradients unsharded for the whole step.
            let (_, g, _) = plan.optimizer.bytes_per_param();
            params * (c.gathered_param_bytes() + g)
        } else {
            zero3_resident(c)
        }
    } else {
        0.0
    };
    let buffers = 2.0 * c.r * c.e + bucket + logits + prefetch;
    Memory::new(
        states,
        acts,
        buffers,
        c.dev.memory(),
        memory::reserve(c.dev, plan),
    )
}

/// Bytes of gathered ZeRO-3 weights and unsharded gradients resident besides the shards.
/// FSDP: the weights of the layer being computed and of the one prefetched, and the
/// gradients of the layer just computed and of the one being reduce-scattered (Zhao et al.
/// VLDB'23 §3.3: prefetching keeps two layers' worth), `2·P_l·(w + g)` with `w` the bytes
/// a gathered weight takes (`e`, or the low-precision format with `--fp8-params`:
/// Megatron-FSDP gathers FP8 parameters in FP8). DeepSpeed 2021: at
/// most `stage3_max_live_parameters` = 10⁹ gathered parameters, or the largest weight
/// matrix when it is larger (a parameter is gathered whole), plus one prefetch bucket of
/// 5·10⁷, and one gradient reduce bucket of `reduce_bucket_size` = 5·10⁸ (DeepSpeed
/// `zero/config.py`): `(max(10⁹, W_max) + 5·10⁷)·e + 5·10⁸·g`, each capped by two layers.
fn zero3_resident(c: &Ctx) -> f64 {
    let (_, g, _) = c.plan.optimizer.bytes_per_param();
    let two_layers = 2.0 * c.layer_params;
    match c.plan.zero3_impl {
        crate::parallel::Zero3Impl::Fsdp => two_layers * (c.gathered_param_bytes() + g),
        crate::parallel::Zero3Impl::Deepspeed2021 => {
            let m = c.m;
            let mlp_in = if m.gated { 2.0 } else { 1.0 } * m.h * m.f;
            let largest = mlp_in.max(m.h * m.attn.qkv_width(1.0)) / c.plan.tp as f64;
            (1e9_f64.max(largest) + 5e7).min(two_layers) * c.e + 5e8_f64.min(two_layers) * g
        }
    }
}

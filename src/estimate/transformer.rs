//! Transformer iteration time (Megatron-LM style TP/SP/PP/DP/EP), per tensor-parallel rank
//! and micro-batch, composed into an iteration:
//!
//! `T = m · T_stage,max + (p − 1)/v · T_stage,mid + T_optimizer + T_DP,exposed`
//!
//! where a stage's time per micro-batch is its forward, backward and recomputation
//! compute plus its exposed TP/SP/EP/PP communication. The first stage also runs the
//! embedding, the last the final norm, logits and cross-entropy; the steady state runs at
//! the slowest stage, the fill and drain (bubble, Narayanan et al. SC'21 §2.2) at the
//! middle ones.
//!
//! Compute per layer: every GEMM timed from its shape (`Device::gemm_time`: tile and wave
//! quantisation, short-K penalty), backward GEMMs as their own shapes (data gradient
//! M×K×N and weight gradient K×N×M), the attention core as batched GEMMs, and
//! memory-bound kernels (LayerNorm, bias-dropout-add, GeLU/SwiGLU, softmax, attention
//! dropout) from the bytes they move; LayerNorm and dropout-add run on the whole
//! `b·s·h` on every TP rank unless sequence parallelism splits them (Korthikanti et al.
//! 2022 §4.2.2).

mod comm;
mod cp;
mod host;
mod hsdp;
mod layer;
mod lora;
mod lowp;
mod offload;
mod state;
mod tp;

use super::memo::{Colls, LayerKey, Recent};
use super::{Comm, CommClass, Estimate, GroupDims, Times, Trace, finish};
use crate::compute::Device;
use crate::error::Result;
use crate::memory::{self, Memory};
use crate::model::Transformer;
use crate::parallel::{Placement, Plan, Recompute};
use crate::system::System;
use crate::units::{Bytes, FlopRate, Seconds};
use comm::{Neighbours, dp_comm, embedding_sync, pp_hop, pp_windows, zero3};
use layer::{ends, layer};
use state::{layer_params, optimizer_time, stage_memory, stage_params};

/// The per-layer cache of a [`super::Memo`].
pub(crate) type LayerMemo = Recent<LayerKey, Parts, 16>;

/// Time of one pass of one layer (or one embedding/head block) for one micro-batch.
#[derive(Clone, Copy, Debug, Default)]
struct Pass {
    /// GEMM time (what TP overlap can hide communication behind).
    gemm: Seconds,
    /// Memory-bound kernel time.
    mem: Seconds,
    /// TP (or SP) communication on the critical path (exposed by its window).
    tp: Seconds,
    /// TP (or SP) communication hidden under compute.
    tp_hidden: Seconds,
    /// Interference: compute slowed by the TP communication it overlaps.
    slow: Seconds,
    /// Bytes of that communication.
    tp_bytes: f64,
    /// EP all-to-all on the critical path.
    ep: Seconds,
    /// EP all-to-all hidden under another micro-batch's compute (`ep_overlap`).
    ep_hidden: Seconds,
    /// The part of `slow` that the EP all-to-alls cause (beside the paired pass, or the
    /// shared experts): what a pass run alone does not pay ([`ep_lone`]).
    ep_slow: Seconds,
    /// Bytes of that communication.
    ep_bytes: f64,
    /// CP communication exposed.
    cp: Seconds,
    /// CP communication hidden behind the attention blocks.
    cp_hidden: Seconds,
    /// Bytes of that communication.
    cp_bytes: f64,
    /// GPU time idle while the host issues the pass's operations (`host` module):
    /// [`host::pass_idle`] of the two fields below.
    host: Seconds,
    /// `T_host`: the host's time to issue the pass's operations.
    host_time: Seconds,
    /// A dropless MoE forward's expert launches that its dispatch and experts do not hide,
    /// `max(0, T_exp − (D + E))` ([`host::moe_forward_idle`]); zero for other passes.
    host_post: Seconds,
}

impl Pass {
    fn compute(&self) -> Seconds {
        self.gemm + self.mem
    }
    /// Compute time not already hiding TP or CP communication: the window left for DP.
    fn free(&self) -> Seconds {
        (self.compute() - self.tp_hidden - self.cp_hidden).max(Seconds::ZERO)
    }
    fn add(self, o: Pass, k: f64) -> Pass {
        Pass {
            gemm: self.gemm + o.gemm * k,
            mem: self.mem + o.mem * k,
            tp: self.tp + o.tp * k,
            tp_hidden: self.tp_hidden + o.tp_hidden * k,
            slow: self.slow + o.slow * k,
            tp_bytes: self.tp_bytes + o.tp_bytes * k,
            ep: self.ep + o.ep * k,
            ep_hidden: self.ep_hidden + o.ep_hidden * k,
            ep_slow: self.ep_slow + o.ep_slow * k,
            ep_bytes: self.ep_bytes + o.ep_bytes * k,
            cp: self.cp + o.cp * k,
            cp_hidden: self.cp_hidden + o.cp_hidden * k,
            cp_bytes: self.cp_bytes + o.cp_bytes * k,
            host: self.host + o.host * k,
            host_time: self.host_time + o.host_time * k,
            host_post: self.host_post + o.host_post * k,
        }
    }
}

/// Forward, backward and recomputation of one block.
#[derive(Clone, Copy, Debug, Default)]
struct Block {
    fwd: Pass,
    bwd: Pass,
    rec: Pass,
}

impl Block {
    fn add(self, o: Block, k: f64) -> Block {
        Block {
            fwd: self.fwd.add(o.fwd, k),
            bwd: self.bwd.add(o.bwd, k),
            rec: self.rec.add(o.rec, k),
        }
    }
}

/// Which block of a layer a [`Ctx`] times: a transformer layer (attention + MLP), or one
/// layer of a hybrid model (`model::mamba`): attention only, MLP (dense or MoE) only, a
/// Mamba mixer or a Gated DeltaNet mixer (`model::gdn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Part {
    Layer,
    Attention,
    Mlp,
    Mamba,
    Gdn,
}

impl Part {
    /// The block has the attention's column/row-parallel pair of linears (a Mamba or Gated
    /// DeltaNet layer's input and output projections take their place).
    fn attention_pair(self) -> bool {
        self != Part::Mlp
    }
    /// The block has the MLP's column/row-parallel pair.
    fn mlp_pair(self) -> bool {
        matches!(self, Part::Layer | Part::Mlp)
    }
}

struct Ctx<'a> {
    m: &'a Transformer,
    /// The block of the layer being timed.
    part: Part,
    dev: &'a Device,
    peak: FlopRate,
    /// Peak of the attention-core GEMMs: BF16 when the linear layers run in FP8
    /// (Transformer Engine keeps attention in 16-bit).
    attn_peak: FlopRate,
    /// The fused-attention kernel's `(forward, backward, n0)` rates
    /// ([`Device::attention_rates`] for `plan.attention_kernel`).
    attn_rates: (f64, f64, u32),
    /// The chunked gated delta rule's `[α, β]` `(forward, backward)`
    /// ([`Device::gdn_rates`]; zero for models without Gated DeltaNet layers).
    gdn_rates: ([Seconds; 2], [Seconds; 2]),
    /// With `plan.fp8_attention`: the 8-bit kernel's speed-ups over the 16-bit one,
    /// `(forward, backward)`, and whether its backward computes every causal tile under a
    /// sliding window ([`Device::fp8_attention_speedup`],
    /// `EfficiencySpec::fp8_attention_bwd_full`).
    fp8_attn: Option<(f64, f64, bool)>,
    plan: &'a Plan,
    place: &'a Placement,
    /// The gradient-reduction group: DP, or DP × CP with context parallelism.
    grad_span: &'a crate::parallel::Span,
    /// Main-loop speedup of the linear GEMMs over 16-bit (peak / 16-bit peak).
    speedup: f64,
    /// Options of the collectives (the system's `[collective]` table).
    coll: &'a crate::collective::Options,
    /// Options of the data-parallel reduction (`dp_algorithm` applied).
    dp_coll: &'a crate::collective::Options,
    /// Bytes per activation element.
    e: f64,
    /// Tokens per micro-batch on this rank, b·s/c.
    tokens: f64,
    /// Elements of the residual stream on this rank, b·s·h/c.
    r: f64,
    /// The part of the residual stream each TP rank touches in replicated ops.
    rep: f64,
    /// Interference κ of the device (`windows` module).
    kappa: f64,
    /// Slowdown σ of the device's EP all-to-alls beside compute (`windows::ep_pair`).
    sigma: f64,
    /// Innermost dimensions forming the NVLink domain (chunked TP overlap inside it).
    scale_up_dims: u32,
    /// Parameters of one transformer layer on this device (experts divided by EP, all / t).
    layer_params: f64,
    /// TP and DP groups span a common network dimension (their traffic shares it).
    tp_dp_share: bool,
    /// A sweep worker's collective cache (`estimate::memo`), used by the DP and ZeRO-3
    /// buckets, the pipeline hop and the embedding synchronisation; `None` computes them.
    colls: Option<Colls<'a>>,
}

/// Transformer Engine's compute streams for per-expert GEMMs (`get_num_compute_streams`).
pub(crate) const TE_STREAMS: f64 = 4.0;

impl Ctx<'_> {
    /// Whether the device's FP8 GEMMs take every operand layout (no transposed copies).
    fn any_layout(&self) -> bool {
        self.dev.spec.fp8_any_layout
    }
    /// Bytes per parameter of the data-parallel parameter all-gathers
    /// ([`lowp::gathered_param_bytes`]).
    fn gathered_param_bytes(&self) -> f64 {
        let p = self.plan;
        lowp::gathered_param_bytes(p.precision, p.fp8_recipe, p.fp8_params, self.e)
    }
    fn gemm(&self, m: f64, n: f64, k: f64, batch: f64) -> Seconds {
        self.dev
            .gemm_time_at(self.peak, self.speedup, m, n, k, batch)
    }
    /// The GEMMs of `g` local experts, M×N×K each, with `plan.grouped_gemm`:
    ///
    /// - `streams` (Transformer Engine's `GroupedLinear` default: one cuBLAS GEMM per expert,
    ///   expert i on stream i mod S, S = 4 compute streams; `multi_stream_cublas_gemm` in
    ///   transformer_engine/common/gemm/cublaslt_gemm.cu, `get_num_compute_streams` in
    ///   common/util/multi_stream.cpp): at most S GEMMs run at once, so their tiles share
    ///   waves S at a time, each round paying one launch,
    ///   `T = ⌊g/S⌋·T(M,N,K,×S) + T(M,N,K,×(g mod S))`;
    /// - `fused` (one grouped kernel): `T = T(M,N,K,×g)`, every expert's tiles in one
    ///   wave schedule and one launch.
    ///
    /// With small experts and few tokens per expert (fine-grained MoE at low EP) a round
    /// of S GEMMs fills a fraction of the SMs: the grouped-GEMM efficiency falls with the
    /// tokens per expert and the expert width, as measured for Transformer Engine's grouped
    /// GEMMs (Megatron-core MoE docs: `moe_grouped_gemm`; MoE Parallel Folding, arXiv
    /// 2504.14960 §5).
    fn experts_gemm(&self, m: f64, n: f64, k: f64, g: f64) -> Seconds {
        match self.plan.grouped_gemm {
            crate::parallel::GroupedGemm::Fused => self.gemm(m, n, k, g),
            // Four or fewer experts: no full round, one partial round of `g`. A multiple
            // of four leaves no partial round (a GEMM repeated zero times costs nothing).
            crate::parallel::GroupedGemm::Streams => {
                let rounds = (g / TE_STREAMS).floor();
                let rest = g - rounds * TE_STREAMS;
                self.gemm(m, n, k, TE_STREAMS) * rounds + self.gemm(m, n, k, rest)
            }
        }
    }
    fn attn_gemm(&self, m: f64, n: f64, k: f64, batch: f64) -> Seconds {
        self.dev.gemm_time(self.attn_peak, m, n, k, batch)
    }
    /// A 16-bit linear layer (the output head: not a Transformer Engine module, so never
    /// FP8): forward M×N×K and its backward, data gradient M×K×N, weight gradient K×N×M.
    fn linear16(&self, m: f64, n: f64, k: f64, batch: f64) -> (Seconds, Seconds) {
        (
            self.attn_gemm(m, n, k, batch),
            self.attn_gemm(m, k, n, batch) + self.attn_gemm(k, n, m, batch),
        )
    }
    fn mem(&self, bytes: f64, kernels: f64) -> Seconds {
        self.dev.memory_time(Bytes::new(bytes), kernels)
    }
}

/// A stage's time per micro-batch and its parts.
#[derive(Clone, Copy, Debug, Default)]
struct StageTime {
    /// Compute + exposed TP/SP + EP + CP + interference.
    total: Seconds,
    /// Exposed TP/SP.
    tp: Seconds,
    /// Hidden TP/SP.
    tp_hidden: Seconds,
    /// EP all-to-all (exposed).
    ep: Seconds,
    /// CP exposed.
    cp: Seconds,
    /// Interference from overlapped TP.
    slow: Seconds,
    /// GPU idle waiting for the host.
    host: Seconds,
}

/// Per-micro-batch time of a stage: compute + the TP/SP its windows leave exposed + EP +
/// exposed CP + interference (pipeline transfers are windows of their own,
/// `comm::pp_windows`).
fn stage_time(b: &Block) -> StageTime {
    let ps = [&b.fwd, &b.bwd, &b.rec];
    let sum = |f: fn(&Pass) -> Seconds| ps.iter().map(|p| f(p)).sum::<Seconds>();
    let (tp, tp_hidden, ep, cp, slow, host) = (
        sum(|p| p.tp),
        sum(|p| p.tp_hidden),
        sum(|p| p.ep),
        sum(|p| p.cp),
        sum(|p| p.slow),
        sum(|p| p.host),
    );
    StageTime {
        total: sum(|p| p.compute()) + tp + ep + cp + slow + host,
        tp,
        tp_hidden,
        ep,
        cp,
        slow,
        host,
    }
}

/// Evaluates a transformer plan.
pub(super) fn evaluate<T: Trace>(
    m: &Transformer,
    sys: &System,
    plan: &Plan,
    place: &Placement,
    tr: &mut T,
    memo: Option<(&mut LayerMemo, Colls)>,
) -> Result<Estimate> {
    let dev = &sys.device;
    let seq;
    let m = if plan.seq_len as f64 == m.s {
        m
    } else {
        seq = m.with_seq_len(plan.seq_len);
        &seq
    };
    let peak = dev.gemm_peak(plan.precision)?;
    let attn_peak = if plan.precision.is_low() {
        dev.peak(crate::compute::Precision::Bf16).unwrap_or(peak)
    } else {
        peak
    };
    let attn_rates = dev.attention_rates(plan.attention_kernel)?;
    let gdn_rates = match m.hybrid.and_then(|h| h.gdn) {
        Some(_) => dev.gdn_rates()?,
        None => ([Seconds::ZERO; 2], [Seconds::ZERO; 2]),
    };
    let fp8_attn = if plan.fp8_attention {
        let (f, b) = dev.fp8_attention_speedup(plan.precision)?;
        Some((f, b, dev.spec.efficiency.fp8_attention_bwd_full))
    } else {
        None
    };
    let (t, b) = (plan.tp as f64, plan.micro_batch as f64);
    let tokens = b * m.s / plan.cp as f64;
    let r = tokens * m.h;
    let rep = if plan.sp { r / t } else { r };
    let e = plan.precision.activation_bytes();
    let dp_cp;
    let grad_span = if plan.cp > 1 {
        dp_cp = place.dp_with_cp();
        &dp_cp
    } else {
        &place.dp
    };
    hybrid_plan_checks(m, plan)?;
    let c = Ctx {
        m,
        part: Part::Layer,
        grad_span,
        dev,
        peak,
        attn_peak,
        attn_rates,
        gdn_rates,
        fp8_attn,
        plan,
        place,
        speedup: peak.get() / attn_peak.get(),
        coll: &sys.collective,
        dp_coll: &sys.dp_collective,
        e,
        tokens,
        r,
        rep,
        kappa: dev.spec.efficiency.overlap_slowdown,
        sigma: dev.spec.efficiency.ep_comm_slowdown,
        scale_up_dims: sys.spec.scale_up_dims,
        layer_params: layer_params(m, plan),
        tp_dp_share: share_dims(&place.tp, grad_span),
        colls: memo.as_ref().map(|m| m.1),
    };
    explain_header(&c, tr);
    // Borrowed from the memo, not copied out of it (a sweep's hot loop).
    let owned;
    let parts = match memo {
        Some((memo, colls)) => {
            let key = LayerKey::new(colls.system(), plan, place, c.tp_dp_share);
            memo.get_or_insert(key, || parts(&c, tr))?
        }
        None => {
            owned = parts(&c, tr)?;
            &owned
        }
    };
    let (lay, tpw) = (&parts.lay, &parts.tpw);
    // The first `dense_layers` layers (dense MLP) sit on the first stage; MTP modules
    // (one layer, or a hybrid model's `mtp_pattern`, and one more head each) on the last,
    // or, when a pipeline layout puts them apart (Megatron-core `mtp_standalone`), their
    // layers on that rank and their heads with the loss on the last (`process_mtp_loss`
    // runs in the post-process stage).
    let (mut first, mut last) = (&parts.first, &parts.last);
    let (with_dense, with_mtp, with_mtp_all, first_mtp);
    let nd = m.dense_layers.min(plan.stages.first) as f64;
    if nd > 0.0 {
        with_dense = first.add(parts.dense, nd).add(*lay, -nd);
        first = &with_dense;
    }
    let mtp = m.mtp_layers as f64;
    let mut apart = None;
    if mtp > 0.0 {
        with_mtp = last.add(*last, mtp);
        match plan.stages.mtp_apart {
            None => {
                with_mtp_all = with_mtp.add(parts.mtp, mtp);
                last = &with_mtp_all;
            }
            Some((0, _)) => {
                first_mtp = first.add(parts.mtp, mtp);
                first = &first_mtp;
                last = &with_mtp;
            }
            Some((_, layers)) => {
                apart = Some((layers, Block::default().add(parts.mtp, mtp)));
                last = &with_mtp;
            }
        }
    }
    let bf16_ends;
    if plan.bf16_layers != [0, 0] {
        bf16_ends = bf16_layers(&c, parts, (first, last), tr)?;
        (first, last) = (&bf16_ends.0, &bf16_ends.1);
    }
    let (worst, st, bubble) = pipeline(&c, lay, first, last, apart, tr);
    let mb = plan.micro_batches as f64;
    let mut times = Times {
        forward: worst.fwd.compute() * mb,
        backward: worst.bwd.compute() * mb,
        recompute: worst.rec.compute() * mb,
        bubble,
        interference: st.slow * mb,
        host: st.host * mb,
        ..Times::default()
    };
    let tp_bytes = (worst.fwd.tp_bytes + worst.bwd.tp_bytes + worst.rec.tp_bytes) * mb;
    let class = if plan.sp {
        CommClass::Sp
    } else {
        CommClass::Tp
    };
    let tp_bytes = if place.tp.size > 1 { tp_bytes } else { 0.0 };
    times.comm[class as usize] = Comm {
        exposed: st.tp * mb,
        hidden: st.tp_hidden * mb,
        bytes: Bytes::new(tp_bytes),
    };
    let ep_bytes = (worst.fwd.ep_bytes + worst.bwd.ep_bytes + worst.rec.ep_bytes) * mb;
    times.comm[CommClass::Ep as usize] = Comm {
        exposed: st.ep * mb,
        hidden: (worst.fwd.ep_hidden + worst.bwd.ep_hidden + worst.rec.ep_hidden) * mb,
        bytes: Bytes::new(ep_bytes),
    };
    times.comm[CommClass::Cp as usize] = Comm {
        exposed: st.cp * mb,
        hidden: (worst.fwd.cp_hidden + worst.bwd.cp_hidden + worst.rec.cp_hidden) * mb,
        bytes: Bytes::new((worst.fwd.cp_bytes + worst.bwd.cp_bytes + worst.rec.cp_bytes) * mb),
    };
    let lone = ep_lone(&c, &worst, tr);
    let ep = &mut times.comm[CommClass::Ep as usize];
    ep.exposed += lone.hidden;
    ep.hidden = ep.hidden - lone.hidden;
    times.interference = times.interference - lone.slow;
    let params = stage_params(m, plan);
    // With LoRA only the adapters of the largest stage train (gradients, optimizer, DP).
    let trainable = if plan.lora_rank > 0 {
        lora::layer_adapter_params(&c) * plan.stages.max_layers() as f64
    } else {
        params
    };
    pipeline_comm(&c, st.total, &mut times, tr)?;
    let nb = Neighbours {
        tp_fwd: tpw.busy.0,
        tp_bwd: tpw.busy.1,
        layers: plan.stages.max_layers() as f64,
    };
    let (dp, slow) = if plan.zero == 3 {
        zero3(&c, trainable, lay, &worst, &nb, tr)?
    } else {
        dp_comm(&c, trainable, &worst, &nb, tr)?
    };
    times.comm[CommClass::Dp as usize] = dp;
    times.interference += slow;
    times.optimizer = optimizer_time(&c, trainable, params);
    tr.line(|| {
        let (_, g, o) = plan.optimizer.bytes_per_param();
        format!(
            "optimizer: {params:.4e} parameters on this device; Adam over the local shard moves 6 + 2·o + 3·g = 6 + 2·{o} + 3·{g} = {} B per parameter (master, m and v read and written, the gradient read twice and zeroed, the 16-bit weight written) → {}",
            state::adam_step_bytes(g, o),
            times.optimizer
        )
    });
    let off = if plan.offload.any() {
        Some(offload::time(
            &c,
            &sys.tiers,
            &worst,
            (params, trainable),
            &mut times,
            tr,
        )?)
    } else {
        None
    };
    let (times, metrics) = finish(
        times,
        flops(m, plan),
        (dev.peak16(peak).get(), peak.get()),
        plan,
        m.s,
    );
    let mut memory = stage_memory(&c, params, trainable, plan);
    if let Some(x) = &off {
        memory = offload::memory(&c, &sys.tiers, x, &times.offload, memory);
    }
    explain_summary(&c, (st.total, st.slow), lone, &times, &metrics, &memory, tr);
    explain_weights(&c, params, &memory, tr);
    let groups = [&place.tp, &place.ep, &place.dp, &place.pp].map(GroupDims::from);
    Ok(Estimate {
        plan: *plan,
        time: times,
        memory,
        metrics,
        groups,
        tokens_per_sample: m.s,
    })
}

/// The first and last stages' blocks with the plan's BF16 layers (`Plan::bf16_layers`,
/// Megatron-core `first_last_layers_bf16`): those layers run without the FP8/FP4 context
/// (`fp8_utils.py` / `fp4_utils.py`, `get_fp*_context` by layer number), so each is the
/// 16-bit layer, timed as a BF16 plan times it (BF16 GEMM peak, 2-byte activations, no
/// quantization casts or low-precision weights), in place of the low-precision one:
/// `first' = first + a·(T₁₆ − T)` over the first `a` layers (the model's dense layers
/// among them as dense layers), `last' = last + z·(T₁₆ − T)`. A hybrid model's layer is
/// its pattern's mean layer, as everywhere (`hybrid_parts`).
fn bf16_layers<T: Trace>(
    c: &Ctx,
    low: &Parts,
    (first, last): (&Block, &Block),
    tr: &mut T,
) -> Result<(Block, Block)> {
    let bf16 = crate::compute::Precision::Bf16;
    let plan16 = Plan {
        precision: bf16,
        fp8_params: false,
        fp8_attention: false,
        bf16_layers: [0, 0],
        ..*c.plan
    };
    // A low-precision plan already runs its attention at the 16-bit peak (`attn_peak`) and
    // keeps 2-byte activations (`Precision::activation_bytes`): only the GEMMs' peak and
    // their low-precision speed-up change.
    let c16 = Ctx {
        plan: &plan16,
        peak: c.attn_peak,
        speedup: 1.0,
        fp8_attn: None,
        ..*c
    };
    let p16 = parts(&c16, &mut crate::estimate::NoTrace)?;
    let [a, z] = c.plan.bf16_layers.map(f64::from);
    let d = (c.m.dense_layers.min(c.plan.stages.first) as f64).min(a);
    let first = first
        .add(p16.dense, d)
        .add(low.dense, -d)
        .add(p16.lay, a - d)
        .add(low.lay, -(a - d));
    let last = last.add(p16.lay, z).add(low.lay, -z);
    tr.line(|| {
        let (t, t16) = (stage_time(&low.lay).total, stage_time(&p16.lay).total);
        let (td, td16) = (stage_time(&low.dense).total, stage_time(&p16.dense).total);
        format!(
            "BF16 layers (first {a}, last {z}; Megatron-core first_last_layers_bf16): a layer per micro-batch T = {t} at the plan's precision, T₁₆ = {t16} in BF16 (a dense layer {td}, {td16}); first stage + {d}·(T₁₆,dense − T_dense) + {}·(T₁₆ − T) = {}, last stage + z·(T₁₆ − T) = {}",
            a - d,
            (td16 - td) * d + (t16 - t) * (a - d),
            (t16 - t) * z
        )
    });
    Ok((first, last))
}

/// The per-layer blocks of a plan, which a sweep's [`super::Memo`] reuses across plans
/// that differ only in what these do not read.
#[derive(Clone, Copy)]
pub(crate) struct Parts {
    /// One transformer layer and its TP links (busy profile, residual-stream collectives).
    lay: Block,
    tpw: tp::TpLinks,
    /// One dense-MLP layer (MoE models' first layers; `lay` otherwise).
    dense: Block,
    /// The embedding (first stage) and the head (last stage).
    first: Block,
    last: Block,
    /// The layers of one MTP module: one layer (`lay`), or a hybrid model's `mtp_pattern`.
    mtp: Block,
}

fn parts<T: Trace>(c: &Ctx, tr: &mut T) -> Result<Parts> {
    if let Some(hy) = &c.m.hybrid {
        return hybrid_parts(c, hy, tr);
    }
    let (lay, tpw) = layer(c, tr)?;
    let dense = if c.m.dense_layers > 0 {
        let dm = c.m.dense_layer();
        layer(&Ctx { m: &dm, ..*c }, tr)?.0
    } else {
        lay
    };
    let (first, last) = ends(c, &tpw, tr)?;
    Ok(Parts {
        lay,
        tpw,
        dense,
        first,
        last,
        mtp: lay,
    })
}

/// The blocks of a hybrid model (`model::mamba`): each kind of layer timed on its own
/// (`M` a Mamba mixer, `*` attention, `-` the dense MLP of `ffn_hidden`, `E` the MoE), and
/// the layer of a stage taken as their mean over the pattern,
/// `T_layer = Σ_k (L_k/L)·T_k`, so that a stage of `n` layers holds `n·T_layer` (its
/// share of every kind; exact for a stage that holds whole periods of the pattern, and
/// for one stage). The TP links' busy time is averaged the same way.
fn hybrid_parts<T: Trace>(c: &Ctx, hy: &crate::model::Hybrid, tr: &mut T) -> Result<Parts> {
    use crate::model::LayerKind;
    let l = c.m.layers as f64;
    let dense = c.m.dense_layer();
    let mut lay = Block::default();
    let mut mtp = Block::default();
    let mut tpw: Option<tp::TpLinks> = None;
    // An MTP pattern's kinds are among the model's (`Transformer::from_spec`).
    let mtp_counts = hy.mtp.kinds();
    for (i, (kind, n)) in hy.counts.kinds().into_iter().enumerate() {
        if n == 0 {
            continue;
        }
        let (m, part, name) = match kind {
            LayerKind::Mamba => (c.m, Part::Mamba, "Mamba (M)"),
            LayerKind::Gdn => (c.m, Part::Gdn, "Gated DeltaNet (G)"),
            LayerKind::Attention => (c.m, Part::Attention, "attention (*)"),
            LayerKind::Mlp => (&dense, Part::Mlp, "MLP (-)"),
            LayerKind::Moe => (c.m, Part::Mlp, "MoE (E)"),
        };
        tr.line(|| format!(" {name} layers: {n} of {}", c.m.layers));
        let (b, w) = layer(&Ctx { m, part, ..*c }, tr)?;
        let k = n as f64 / l;
        lay = lay.add(b, k);
        mtp = mtp.add(b, mtp_counts[i].1 as f64);
        tpw = Some(match tpw {
            None => w.scaled(k),
            Some(acc) => acc.plus(&w.scaled(k)),
        });
    }
    // The host runs ahead of the GPU across blocks up to the next MoE token-count copy, so
    // the blocks' host and GPU times add before the idle is taken (a pattern of attention
    // and MLP blocks is then the transformer layer they make).
    for blk in [&mut lay, &mut mtp] {
        for p in [&mut blk.fwd, &mut blk.bwd, &mut blk.rec] {
            p.host = host::pass_idle(p);
        }
    }
    // The pattern has at least one layer (its length is `layers` ≥ 1).
    let tpw =
        tpw.ok_or_else(|| crate::error::Error::input("transformer.hybrid_pattern", "is empty"))?;
    tr.line(|| {
        let k = hy.counts;
        format!(
            " mean layer = ({})/{}: forward {}, backward {}",
            kinds_sum(&k),
            c.m.layers,
            host::gpu(&lay.fwd),
            host::gpu(&lay.bwd)
        )
    });
    tr.line(|| {
        format!(
            " mean layer's host (it runs ahead across blocks to the next MoE token-count copy): GPU idle = max(0, P̄, T̄_host − T̄_GPU) = max(0, {}, {} − {}) = {} forward, max(0, {} − {}) = {} backward",
            lay.fwd.host_post,
            lay.fwd.host_time,
            host::gpu(&lay.fwd),
            lay.fwd.host,
            lay.bwd.host_time,
            host::gpu(&lay.bwd),
            lay.bwd.host
        )
    });
    if c.m.mtp_layers > 0 {
        tr.line(|| {
            format!(
                " MTP module = {} (mtp_pattern), run {} times: forward {}, backward {} each",
                kinds_sum(&hy.mtp),
                c.m.mtp_layers,
                host::gpu(&mtp.fwd),
                host::gpu(&mtp.bwd)
            )
        });
    }
    let (first, last) = ends(c, &tpw, tr)?;
    Ok(Parts {
        lay,
        tpw,
        dense: lay,
        first,
        last,
        mtp,
    })
}

/// `n_M·T_M + n_G·T_G + n_*·T_* + n_-·T_- + n_E·T_E` with a pattern's layer counts put in.
fn kinds_sum(k: &crate::model::LayerCounts) -> String {
    format!(
        "{}·T_M + {}·T_G + {}·T_* + {}·T_- + {}·T_E",
        k.mamba, k.gdn, k.attention, k.mlp, k.moe
    )
}

/// What a hybrid model needs of a plan (Megatron-LM `MambaMixer` and
/// `MambaContextParallel` asserts): TP divides the Mamba heads and groups; with CP, CP
/// divides the heads per TP rank and the groups per TP rank divide CP or CP them; TP × CP
/// divides the Gated DeltaNet key and value heads (`TransformerConfig.__post_init__`). LoRA
/// is not modelled for hybrid models.
fn hybrid_plan_checks(m: &Transformer, plan: &Plan) -> Result<()> {
    let bad = |flag: &str, msg: String| Err(crate::error::Error::input(flag, msg));
    if let Some(g) = m.hybrid.and_then(|h| h.gdn) {
        // Megatron-LM `TransformerConfig.__post_init__`: the key and the value heads are each
        // divisible by TP·CP (heads split over TP, then over CP by its all-to-all).
        let tc = (plan.tp * plan.cp) as f64;
        if g.key_heads % tc != 0.0 || g.value_heads % tc != 0.0 {
            return bad(
                if plan.cp > 1 { "--cp" } else { "--tp" },
                format!(
                    "TP × CP = {} must divide the Gated DeltaNet key heads ({}) and value heads ({}) (Megatron-LM splits both over TP, then CP)",
                    plan.tp * plan.cp,
                    g.key_heads,
                    g.value_heads
                ),
            );
        }
        if plan.lora_rank > 0 {
            return bad(
                "--lora-rank",
                "LoRA is not modelled for hybrid models".to_string(),
            );
        }
    }
    let Some(mb) = m.hybrid.and_then(|h| h.mamba) else {
        return Ok(());
    };
    let (t, cp) = (plan.tp as f64, plan.cp as f64);
    if mb.heads % t != 0.0 || mb.groups % t != 0.0 {
        return bad(
            "--tp",
            format!(
                "{} must divide the Mamba heads ({}) and groups ({}) (Megatron-LM splits both over TP)",
                plan.tp, mb.heads, mb.groups
            ),
        );
    }
    let (ht, gt) = (mb.heads / t, mb.groups / t);
    if cp > 1.0 && (ht % cp != 0.0 || (gt % cp != 0.0 && cp % gt != 0.0)) {
        return bad(
            "--cp",
            format!(
                "{} must divide the Mamba heads per TP rank ({ht}), and divide or be a multiple of the groups per TP rank ({gt})",
                plan.cp
            ),
        );
    }
    if plan.lora_rank > 0 {
        return bad(
            "--lora-rank",
            "LoRA is not modelled for hybrid Mamba models".to_string(),
        );
    }
    Ok(())
}

/// Whether two groups (each of size > 1) span a common network dimension.
fn share_dims(a: &crate::parallel::Span, b: &crate::parallel::Span) -> bool {
    a.size > 1 && b.size > 1 && a.index[..a.n].iter().any(|d| b.index[..b.n].contains(d))
}

/// What the EP overlap's passes run alone add to the iteration ([`ep_lone`]).
#[derive(Clone, Copy, Debug, Default)]
struct Lone {
    /// Micro-batch chunk passes of each direction run alone on pipeline rank 0, `W`.
    passes: f64,
    /// The all-to-all those passes expose that the paired passes hid.
    hidden: Seconds,
    /// The interference the pairing charged those passes and they do not pay.
    slow: Seconds,
}

/// Megatron-core's 1F1B all-to-all overlap pairs one micro-batch's forward with another's
/// backward only in the steady state; the forwards before the first pair and the
/// backwards after the last run alone, their all-to-alls exposed:
///
/// - without a pipeline one forward and one backward ("the forward step for the first
///   microbatch is executed alone, no a2a overlapping", and the last backward;
///   `combined_1f1b_schedule_for_no_pipelining`, megatron/core/pipeline_parallel/
///   combined_1f1b.py at d98e8a64dd);
/// - with one, the interleaved schedule's warm-up forwards and as many cool-down
///   backwards, one model chunk each, on pipeline rank 0
///   `W = min(m·v, 2·(p − 1) + (v − 1)·p + 1)`: the warm-up of
///   `get_pp_rank_microbatches` (schedules.py) with its micro-batch group of `p` and the
///   one extra forward the overlap schedules "to ensure the forward and backward
///   computations are independent in all 1f1b steps" (Megatron-core requires virtual
///   stages for the overlap with a pipeline).
///
/// A chunk is `1/v` of the stage, so the iteration gains
/// `(W/v)·(H_f − S_f + H_b − S_b)`, with `H` the all-to-all the stage's pass hides per
/// micro-batch and `S` the interference its pairing charges (`Pass::ep_hidden`,
/// `Pass::ep_slow`; Megatron-core refuses the overlap with full recomputation,
/// `Plan::check_ep_overlap`). With one micro-batch nothing pairs: the overlap then hides
/// nothing.
/// DualPipe's own ends are in its bubble ([`pipeline`]).
fn ep_lone<T: Trace>(c: &Ctx, worst: &Block, tr: &mut T) -> Lone {
    let plan = c.plan;
    if !plan.ep_overlap || plan.schedule == crate::parallel::Schedule::DualPipe {
        return Lone::default();
    }
    let (p, v) = (plan.pp as f64, plan.v as f64);
    let n = plan.micro_batches as f64 * v;
    let warm = 2.0 * (p - 1.0) + (v - 1.0) * p + 1.0;
    let w = if plan.pp == 1 { 1.0 } else { n.min(warm) };
    let k = w / v;
    let hidden = (worst.fwd.ep_hidden + worst.bwd.ep_hidden) * k;
    let slow = (worst.fwd.ep_slow + worst.bwd.ep_slow) * k;
    tr.line(|| {
        format!(
            "EP overlap's lone passes: W = {} forward and backward chunk passes alone on pipeline rank 0 ({}), 1/v = 1/{} of the stage each: (W/v)·(H_f − S_f + H_b − S_b) = {w}/{v}·(({} − {}) + ({} − {})) = {}",
            w,
            if plan.pp == 1 {
                "no pipeline: the first forward and the last backward".to_string()
            } else {
                format!("min(m·v, 2·(p − 1) + (v − 1)·p + 1) = min({n}, {warm})")
            },
            v,
            worst.fwd.ep_hidden,
            worst.fwd.ep_slow,
            worst.bwd.ep_hidden,
            worst.bwd.ep_slow,
            hidden - slow
        )
    });
    Lone {
        passes: w,
        hidden,
        slow,
    }
}

/// Pipeline transfers (windows: fill and drain exposed, steady state beside the stage's
/// compute) and the tied-embedding synchronisation, into `times`.
fn pipeline_comm<T: Trace>(c: &Ctx, stage: Seconds, times: &mut Times, tr: &mut T) -> Result<()> {
    let plan = c.plan;
    let (hop, hop_bytes) = pp_hop(c)?;
    let w = pp_windows(c, hop, stage);
    let (emb_sync, emb_bytes) = embedding_sync(c)?;
    let mb = plan.micro_batches as f64;
    times.comm[CommClass::Pp as usize] = Comm {
        exposed: w.exposed + emb_sync,
        hidden: w.hidden,
        bytes: Bytes::new(hop_bytes * 2.0 * plan.v as f64 * mb + emb_bytes),
    };
    times.interference += w.slowdown;
    if plan.pp > 1 {
        tr.line(|| {
            format!(
                "PP windows: one transfer {hop}; fill + drain 2·(p−1) = {} transfers exposed; steady state 2·v = {} transfers per micro-batch {} ×{} → exposed {}, hidden {}; embedding sync {emb_sync}",
                2 * (plan.pp - 1),
                2 * plan.v,
                if plan.schedule == crate::parallel::Schedule::Interleaved {
                    format!("beside the stage's {stage} (bulk: interleaved schedule, overlap_p2p_comm)")
                } else if plan.schedule == crate::parallel::Schedule::DualPipe {
                    format!("beside the stage's {stage} (bulk: DualPipe overlaps them with the paired chunk)")
                } else {
                    "blocking between compute steps (1F1B/GPipe): exposed".to_string()
                },
                plan.micro_batches,
                w.exposed,
                w.hidden
            )
        });
    }
    Ok(())
}

/// The stage compositions (`plan.stages`: even or uneven split), plus the embedding on
/// the first stage and the head on the last (both on the only stage when p = 1).
/// Returns the slowest stage, its time per micro-batch and parts, and the bubble. With
/// stage times `T_i`, a 1F1B pipeline of `m` micro-batches takes
/// `Σ_i T_i + (m − 1)·max_i T_i` (the fill and drain pass through every other stage once;
/// Narayanan et al. SC'21 §2.2 for equal stages, where it is `(m + p − 1)·T`);
/// interleaving over `v` chunks divides the fill and drain by `v`:
/// bubble = `(Σ_i T_i − max_i T_i) / v`. Pipeline transfers are windows of their own.
fn pipeline<T: Trace>(
    c: &Ctx,
    lay: &Block,
    first: &Block,
    last: &Block,
    apart: Option<(u32, Block)>,
    tr: &mut T,
) -> (Block, StageTime, Seconds) {
    let plan = c.plan;
    let st = plan.stages;
    let n = |k: u32| Block::default().add(*lay, k as f64);
    let dual = plan.schedule == crate::parallel::Schedule::DualPipe && plan.pp > 1;
    let (worst, sum) = if plan.pp == 1 {
        let all = n(st.first).add(*first, 1.0).add(*last, 1.0);
        let t = stage_time(&all);
        ((all, t), t.total)
    } else if dual {
        // DualPipe: device i runs stage i for the m/2 micro-batches of one direction and
        // stage p − 1 − i for the m/2 of the other, so the first and last stage share a
        // device. Per micro-batch the busiest device spends half its pair.
        let ends = n(st.first)
            .add(*first, 1.0)
            .add(n(st.last), 1.0)
            .add(*last, 1.0);
        let mids = n(st.dualpipe_mid_pair());
        let pair = if stage_time(&mids).total > stage_time(&ends).total {
            mids
        } else {
            ends
        };
        let half = Block::default().add(pair, 0.5);
        let t = stage_time(&half);
        ((half, t), t.total)
    } else {
        let f = n(st.first).add(*first, 1.0);
        let l = n(st.last).add(*last, 1.0);
        let mid = n(st.mid_max);
        let mids = stage_time(&n(1)).total * st.mid_sum as f64;
        let (tf, tl) = (stage_time(&f), stage_time(&l));
        let mut sum = tf.total + tl.total + mids;
        let mut worst = if tl.total > tf.total {
            (l, tl)
        } else {
            (f, tf)
        };
        if st.mid_max > 0 {
            let tm = stage_time(&mid);
            if tm.total > worst.1.total {
                worst = (mid, tm);
            }
        }
        // The middle rank holding the MTP modules: its layers (counted in the middle
        // stages' sum) and the modules.
        if let Some((layers, modules)) = apart {
            let r = n(layers).add(modules, 1.0);
            let tr_ = stage_time(&r);
            sum = sum + tr_.total - stage_time(&n(layers)).total;
            if tr_.total > worst.1.total {
                worst = (r, tr_);
            }
        }
        (worst, sum)
    };
    let (worst, stt) = worst;
    let bubble = if plan.pp == 1 {
        Seconds::ZERO
    } else if dual {
        dualpipe_bubble(plan.pp, &worst)
    } else {
        (sum - stt.total) / plan.v as f64
    };
    if dual {
        tr.line(|| {
            format!(
                "stages: layers first {}, middle up to {} ({} in all), last {}; DualPipe: device i runs stages i and p−1−i, m/2 micro-batches each; busiest pair (first + last, or {} middle layers) per micro-batch ½(T_i + T_p−1−i) = {}",
                st.first,
                st.mid_max,
                st.mid_sum,
                st.last,
                st.dualpipe_mid_pair(),
                stt.total
            )
        });
        tr.line(|| {
            let (f, b) = forward_backward(&worst);
            format!(
                "bubble = (p/2 − 1)·(F + B/2) of that half pair (DeepSeek-V3 Table 2, (p/2 − 1)(F&B + B − 3W), F&B = F + B, W = B/2) = {}·({f} + {b}/2) = {bubble}",
                plan.pp / 2 - 1,
            )
        });
    } else {
        tr.line(|| {
            format!(
                "stages: layers first {}, middle up to {} ({} in all), last {}; slowest stage per micro-batch {}",
                st.first, st.mid_max, st.mid_sum, st.last, stt.total
            )
        });
        if let Some((r, layers)) = st.mtp_apart {
            tr.line(|| {
                format!(
                    "MTP modules apart from the loss (the layout's mtp_standalone): on pipeline rank {r} beside its {layers} layers; their heads with the loss on the last rank"
                )
            });
        }
        tr.line(|| {
            format!(
                "bubble = (Σ_i T_i − max_i T_i)/v = ({sum} − {})/{} = {bubble}",
                stt.total, plan.v
            )
        });
    }
    (worst, stt, bubble)
}

/// DualPipe's bubble (DeepSeek-V3 technical report, Table 2; the DualPipe repository's
/// README): `(p/2 − 1)·(F&B + B − 3W)`, with `F` a forward chunk, `B` a full backward
/// chunk (input and weight gradients), `W` its weight-gradient part and `F&B` a forward
/// and a backward chunk run as an overlapped pair. The pair's compute runs in series,
/// `F&B = F + B`; a linear layer's backward runs one GEMM for the input and one for the
/// weight gradient per forward GEMM, `W = B/2`, so the bubble is
/// `(p/2 − 1)·(F + 2B − 3B/2) = (p/2 − 1)·(F + B/2)`, the chunk being the busiest
/// device's half pair (recomputation counts with the backward).
fn dualpipe_bubble(pp: u32, half: &Block) -> Seconds {
    let (f, b) = forward_backward(half);
    (f + b * 0.5) * (pp as f64 / 2.0 - 1.0).max(0.0)
}

/// A chunk's forward time and its backward time, recomputation included.
fn forward_backward(chunk: &Block) -> (Seconds, Seconds) {
    let f = stage_time(&Block {
        fwd: chunk.fwd,
        ..Block::default()
    });
    let b = stage_time(&Block {
        bwd: chunk.bwd,
        rec: chunk.rec,
        ..Block::default()
    });
    (f.total, b.total)
}

/// (model, hardware) FLOPs per iteration: `3 · F_fwd/token · B · s` (`2 ·` with LoRA,
/// whose frozen weights have no weight gradient); hardware adds the
/// recomputed forward (full: the layers' forward; selective: the attention core; op: every
/// second matmul of each layer; the recompute modules' GEMMs: MLA's up-projections, the
/// attention core, the dense MLPs, the MoE blocks, the shared experts).
fn flops(m: &Transformer, plan: &Plan) -> (f64, f64) {
    let tokens = plan.global_batch as f64 * m.s;
    // LoRA: forward and data gradient only (frozen weights have no weight gradient).
    let passes = if plan.lora_rank > 0 { 2.0 } else { 3.0 };
    let model = passes * m.forward_flops_per_token() * tokens;
    let extra = match plan.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => m.layers as f64 * m.attention_core_flops_per_token(),
        Recompute::Full => m.forward_flops_per_token() - 2.0 * m.v * m.h,
        Recompute::Op => {
            let (a, f) = m.op_recompute_flops_per_token();
            m.layers as f64 * (a + f)
        }
    };
    // MLA's up-projections again with `mla_up_proj` (2·n·k per token each).
    let extra = extra
        + if plan
            .recompute_modules
            .has(crate::parallel::RecomputeModules::MLA_UP_PROJ)
        {
            let up: f64 = m
                .attn
                .up_projections(m.h, 1.0)
                .map(|(n, k)| 2.0 * n * k)
                .sum();
            m.layers as f64 * up
        } else {
            0.0
        };
    // The whole-submodule checkpoints' forwards (`core_attn`, `mlp`, `moe`,
    // `shared_experts`).
    use crate::parallel::RecomputeModules as R;
    let r = plan.recompute_modules;
    let [dense, moe, shared] = m.mlp_block_flops();
    let on = |x: R| if r.has(x) { 1.0 } else { 0.0 };
    let extra = extra
        + on(R::CORE_ATTN) * m.layers as f64 * m.attention_core_flops_per_token()
        + on(R::MLP) * dense
        + on(R::MOE) * moe
        + on(R::SHARED_EXPERTS) * shared;
    (model, model + extra * tokens)
}

fn explain_header<T: Trace>(c: &Ctx, tr: &mut T) {
    let (dev, plan, m) = (c.dev, c.plan, c.m);
    tr.line(|| {
        let e = &dev.spec.efficiency;
        format!(
            "GEMM time = 2·M·N·K / (peak · e), e = {} · q(M,N on {} units, {}×{} tiles) · K/(K+{}); peak {} ({}{})",
            e.gemm, dev.spec.compute_units, e.gemm_tile[0], e.gemm_tile[1], e.gemm_k_overhead, c.peak, plan.precision.name(),
            fp4_cap_note(dev, plan.precision)
        )
    });
    tr.line(|| {
        let e = &dev.spec.efficiency;
        format!(
            "memory-bound time = bytes / ({} · {}) + kernels · {}",
            dev.spec.memory_bandwidth, e.memory, e.kernel_overhead
        )
    });
    tr.line(|| {
        format!(
            "per layer, per micro-batch (b={}, s={}, h={}, t={}):",
            plan.micro_batch, m.s, m.h, plan.tp
        )
    });
}

/// ": min(datasheet, r × 8-bit peak)" when [`Device::gemm_peak`] caps the 4-bit rate.
fn fp4_cap_note(dev: &Device, p: crate::compute::Precision) -> String {
    let (Ok(data), Ok(run)) = (dev.peak(p), dev.gemm_peak(p)) else {
        return String::new();
    };
    match dev.spec.efficiency.gemm_fp4_vs_fp8 {
        Some(r) if run.get() < data.get() => format!(
            ": min(datasheet {data}, gemm_fp4_vs_fp8 {r} × 8-bit peak {})",
            FlopRate::new(run.get() / r)
        ),
        _ => String::new(),
    }
}

#[allow(clippy::too_many_arguments)]
/// The weights' line of `--explain`: 16-bit weights, low-precision copies and, with
/// `--fp8-params`, the 16-bit weights those copies replace.
fn explain_weights<T: Trace>(c: &Ctx, params: f64, mem: &Memory, tr: &mut T) {
    let (copies, b) = state::weight_copy_terms(c, params);
    if b == 0.0 {
        return;
    }
    let plan = c.plan;
    let w = plan.optimizer.bytes_per_param().0;
    let dropped = if plan.fp8_params { copies * w } else { 0.0 };
    let sixteen = mem.weights.get() - copies * b + dropped;
    tr.line(|| {
        format!(
            "weights = 16-bit {} + {} copies {:.4e} params × {b} B ({}){} = {}",
            Bytes::new(sixteen),
            plan.precision.name(),
            copies,
            match (plan.precision, c.any_layout()) {
                (crate::compute::Precision::Fp8, true) =>
                    "one per weight: the device's FP8 GEMMs take every layout",
                (crate::compute::Precision::Fp8, false) => "row-wise and transposed",
                _ => "row- and column-wise with their scales",
            },
            if plan.fp8_params {
                format!(
                    " − those params' 16-bit weights × {w} B ({}; --fp8-params: the copies are the weights)",
                    Bytes::new(dropped)
                )
            } else {
                String::new()
            },
            mem.weights
        )
    });
}

fn explain_summary<T: Trace>(
    c: &Ctx,
    (stage, stage_slow): (Seconds, Seconds),
    lone: Lone,
    t: &Times,
    x: &super::Metrics,
    mem: &Memory,
    tr: &mut T,
) {
    let (plan, m) = (c.plan, c.m);
    tr.line(|| {
        format!(
            "iteration = m·T_stage + bubble + optimizer + exposed PP + exposed DP + DP/PP interference{}{} = {}·{stage} + {} + {} + {} + {} + {}{}{} = {}",
            if plan.offload.any() { " + exposed offload" } else { "" },
            if lone.passes > 0.0 { " + EP overlap's lone passes" } else { "" },
            plan.micro_batches,
            t.bubble,
            t.optimizer,
            t.comm[CommClass::Pp as usize].exposed,
            t.comm[CommClass::Dp as usize].exposed,
            t.interference + lone.slow - stage_slow * plan.micro_batches as f64,
            if plan.offload.any() { format!(" + {}", t.offload.exposed()) } else { String::new() },
            if lone.passes > 0.0 { format!(" + {}", lone.hidden - lone.slow) } else { String::new() },
            t.total
        )
    });
    tr.line(|| {
        let peak16 = c.dev.peak16(c.peak);
        let at_plan = if peak16 == c.peak {
            String::new()
        } else {
            format!(
                "; of the {} peak ({}, NVIDIA's convention): {:.1}%",
                plan.precision.name(),
                c.peak,
                100.0 * x.mfu_at_precision_peak
            )
        };
        format!(
            "MFU = 3·F_fwd/token·tokens / (T·peak_bf16·N) = {:.4e} / ({} · {} · {}) = {:.1}%{at_plan}",
            x.model_flops,
            t.total,
            peak16,
            plan.gpus,
            100.0 * x.mfu
        )
    });
    tr.line(|| {
        let (rank, layers, lmb) = memory::peak_stage(plan);
        let mtp = if plan.pp == 1 && m.mtp_layers > 0 {
            format!(
                " + the {} MTP depths' {} / cp",
                m.mtp_layers,
                Bytes::new(memory::mtp_activation_bytes(m, plan, m.bias))
            )
        } else {
            String::new()
        };
        format!(
            "activations = per layer {} / cp × layer-micro-batches in flight on pipeline rank {rank} ({layers} layers × {:.3}){mtp} = {} (Korthikanti et al. 2022 Eq. 1-6; Megatron-core's interleaved warm-up)",
            Bytes::new(memory::layer_activation_bytes(m, plan, m.bias)),
            lmb / layers as f64,
            mem.activations
        )
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Seconds {
        Seconds::new(x)
    }

    #[test]
    fn the_dp_window_is_the_compute_not_hiding_tp_or_cp() {
        // 5 ms of GEMMs and 1 ms of memory-bound kernels, of which 2 ms hide TP and 0.5 ms
        // hide CP: 6 − 2 − 0.5 = 3.5 ms are left for DP.
        let p = Pass {
            gemm: s(5e-3),
            mem: s(1e-3),
            tp_hidden: s(2e-3),
            cp_hidden: s(0.5e-3),
            ..Pass::default()
        };
        assert!((p.compute().get() - 6e-3).abs() < 1e-15);
        assert!((p.free().get() - 3.5e-3).abs() < 1e-15);
        // Hiding more than there is leaves no window, not a negative one.
        let q = Pass {
            tp_hidden: s(7e-3),
            ..p
        };
        assert_eq!(q.free().get(), 0.0);
    }
}

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
mod hsdp;
mod layer;
mod lora;
mod lowp;

use super::{Comm, CommClass, Estimate, GroupDims, Times, Trace, finish, overlap};
use crate::compute::Device;
use crate::error::Result;
use crate::memory::{self, Memory};
use crate::model::Transformer;
use crate::parallel::{Placement, Plan, Recompute};
use crate::system::System;
use crate::units::{Bytes, FlopRate, Seconds};
use comm::{dp_comm, embedding_sync, pp_comm};
use layer::{ends, layer};

/// Time of one pass of one layer (or one embedding/head block) for one micro-batch.
#[derive(Clone, Copy, Debug, Default)]
struct Pass {
    /// GEMM time (what TP overlap can hide communication behind).
    gemm: Seconds,
    /// Memory-bound kernel time.
    mem: Seconds,
    /// TP (or SP) communication not yet overlapped.
    tp: Seconds,
    /// TP (or SP) communication already hidden under compute.
    tp_hidden: Seconds,
    /// Bytes of that communication.
    tp_bytes: f64,
    /// EP all-to-all.
    ep: Seconds,
    /// Bytes of that communication.
    ep_bytes: f64,
    /// CP communication exposed.
    cp: Seconds,
    /// CP communication hidden behind the attention blocks.
    cp_hidden: Seconds,
    /// Bytes of that communication.
    cp_bytes: f64,
}

impl Pass {
    fn compute(&self) -> Seconds {
        self.gemm + self.mem
    }
    /// Compute time not already hiding TP communication: the window left for DP.
    fn free(&self, tp_overlap: bool) -> Seconds {
        let tp = if tp_overlap {
            self.tp.min(self.gemm)
        } else {
            Seconds::ZERO
        };
        (self.compute() - self.tp_hidden - tp).max(Seconds::ZERO)
    }
    fn add(self, o: Pass, k: f64) -> Pass {
        Pass {
            gemm: self.gemm + o.gemm * k,
            mem: self.mem + o.mem * k,
            tp: self.tp + o.tp * k,
            tp_hidden: self.tp_hidden + o.tp_hidden * k,
            tp_bytes: self.tp_bytes + o.tp_bytes * k,
            ep: self.ep + o.ep * k,
            ep_bytes: self.ep_bytes + o.ep_bytes * k,
            cp: self.cp + o.cp * k,
            cp_hidden: self.cp_hidden + o.cp_hidden * k,
            cp_bytes: self.cp_bytes + o.cp_bytes * k,
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

struct Ctx<'a> {
    m: &'a Transformer,
    dev: &'a Device,
    peak: FlopRate,
    /// Peak of the attention-core GEMMs: BF16 when the linear layers run in FP8
    /// (Transformer Engine keeps attention in 16-bit).
    attn_peak: FlopRate,
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
}

impl Ctx<'_> {
    fn gemm(&self, m: f64, n: f64, k: f64, batch: f64) -> Seconds {
        self.dev
            .gemm_time_at(self.peak, self.speedup, m, n, k, batch)
    }
    fn attn_gemm(&self, m: f64, n: f64, k: f64, batch: f64) -> Seconds {
        self.dev.gemm_time(self.attn_peak, m, n, k, batch)
    }
    /// Forward M×N×K and its backward: data gradient M×K×N, weight gradient K×N×M.
    fn linear(&self, m: f64, n: f64, k: f64, batch: f64) -> (Seconds, Seconds) {
        (
            self.gemm(m, n, k, batch),
            self.gemm(m, k, n, batch) + self.gemm(k, n, m, batch),
        )
    }
    fn mem(&self, bytes: f64, kernels: f64) -> Seconds {
        self.dev.memory_time(Bytes::new(bytes), kernels)
    }
}

/// Per-micro-batch time of a stage: compute + exposed TP/SP/EP/CP (TP hidden behind GEMMs
/// when TP overlap is on) + PP; returns (time, exposed tp, hidden tp, ep + cp).
fn stage_time(b: &Block, pp: Seconds, tp_overlap: bool) -> (Seconds, Seconds, Seconds, Seconds) {
    let mut exp = Seconds::ZERO;
    let mut hid = Seconds::ZERO;
    for p in [&b.fwd, &b.bwd, &b.rec] {
        let (e, h) = overlap(p.tp, p.gemm, tp_overlap);
        exp += e;
        hid += h + p.tp_hidden;
    }
    let ep = b.fwd.ep + b.bwd.ep + b.rec.ep + b.fwd.cp + b.bwd.cp + b.rec.cp;
    (
        b.fwd.compute() + b.bwd.compute() + b.rec.compute() + exp + ep + pp,
        exp,
        hid,
        ep,
    )
}

/// Evaluates a transformer plan.
pub(super) fn evaluate<T: Trace>(
    m: &Transformer,
    sys: &System,
    plan: &Plan,
    place: &Placement,
    tr: &mut T,
) -> Result<Estimate> {
    let dev = &sys.device;
    let seq;
    let m = if plan.seq_len as f64 == m.s {
        m
    } else {
        seq = m.with_seq_len(plan.seq_len);
        &seq
    };
    let peak = dev.peak(plan.precision)?;
    let attn_peak = if plan.precision.is_low() {
        dev.peak(crate::compute::Precision::Bf16).unwrap_or(peak)
    } else {
        peak
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
    let c = Ctx {
        m,
        grad_span,
        dev,
        peak,
        attn_peak,
        plan,
        place,
        speedup: peak.get() / attn_peak.get(),
        coll: &sys.collective,
        dp_coll: &sys.dp_collective,
        e,
        tokens,
        r,
        rep,
    };
    explain_header(&c, tr);
    let lay = layer(&c, tr)?;
    let dense = if m.dense_layers > 0 {
        let dm = m.dense_layer();
        layer(&Ctx { m: &dm, ..c }, tr)?
    } else {
        lay
    };
    let (first, last) = ends(&c, tr)?;
    // The first `dense_layers` layers (dense MLP) sit on the first stage; MTP modules
    // (one layer and one more head each) on the last.
    let nd = m.dense_layers.min(plan.stages.first) as f64;
    let first = if nd > 0.0 {
        first.add(dense, nd).add(lay, -nd)
    } else {
        first
    };
    let mtp = m.mtp_layers as f64;
    let last = if mtp > 0.0 {
        last.add(lay, mtp).add(last, mtp)
    } else {
        last
    };
    let (pp1, pp_bytes) = pp_comm(&c)?;
    let (worst, st, bubble) = pipeline(&c, &lay, &first, &last, pp1, tr);
    let mb = plan.micro_batches as f64;
    let mut times = Times {
        forward: worst.fwd.compute() * mb,
        backward: worst.bwd.compute() * mb,
        recompute: worst.rec.compute() * mb,
        bubble,
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
        exposed: st.1 * mb,
        hidden: st.2 * mb,
        bytes: Bytes::new(tp_bytes),
    };
    let ep_bytes = (worst.fwd.ep_bytes + worst.bwd.ep_bytes + worst.rec.ep_bytes) * mb;
    let cp_exposed = worst.fwd.cp + worst.bwd.cp + worst.rec.cp;
    times.comm[CommClass::Ep as usize] = Comm {
        exposed: (st.3 - cp_exposed) * mb,
        hidden: Seconds::ZERO,
        bytes: Bytes::new(ep_bytes),
    };
    times.comm[CommClass::Cp as usize] = Comm {
        exposed: cp_exposed * mb,
        hidden: (worst.fwd.cp_hidden + worst.bwd.cp_hidden + worst.rec.cp_hidden) * mb,
        bytes: Bytes::new((worst.fwd.cp_bytes + worst.bwd.cp_bytes + worst.rec.cp_bytes) * mb),
    };
    let params = stage_params(m, plan);
    // With LoRA only the adapters of the largest stage train (gradients, optimizer, DP).
    let trainable = if plan.lora_rank > 0 {
        lora::layer_adapter_params(&c) * plan.stages.max_layers() as f64
    } else {
        params
    };
    let (emb_sync, emb_bytes) = embedding_sync(&c)?;
    let pp_bytes = Bytes::new(pp_bytes * mb + emb_bytes);
    times.comm[CommClass::Pp as usize] = Comm {
        exposed: pp1 * mb + emb_sync,
        hidden: Seconds::ZERO,
        bytes: pp_bytes,
    };
    times.comm[CommClass::Dp as usize] = dp_comm(&c, trainable, &worst, tr)?;
    times.optimizer = optimizer_time(&c, trainable, params);
    tr.line(|| {
        format!(
            "optimizer: {params:.4e} parameters on this device → {}",
            times.optimizer
        )
    });
    let (times, metrics) = finish(times, flops(m, plan), peak.get(), plan, m.s);
    let memory = stage_memory(&c, params, trainable, plan);
    explain_summary(&c, st.0, &times, &metrics, &memory, tr);
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

/// The stage compositions (`plan.stages`: even or uneven split), plus the embedding on
/// the first stage and the head on the last (both on the only stage when p = 1).
/// Returns the slowest stage, its (time, exposed TP, hidden TP, EP + CP) per
/// micro-batch, and the bubble. With stage times `T_i`, a 1F1B pipeline of `m`
/// micro-batches takes `Σ_i T_i + (m − 1)·max_i T_i` (the fill and drain pass through
/// every other stage once; Narayanan et al. SC'21 §2.2 for equal stages, where it is
/// `(m + p − 1)·T`); interleaving over `v` chunks divides the fill and drain by `v`:
/// bubble = `(Σ_i T_i − max_i T_i) / v`.
fn pipeline<T: Trace>(
    c: &Ctx,
    lay: &Block,
    first: &Block,
    last: &Block,
    pp1: Seconds,
    tr: &mut T,
) -> (Block, (Seconds, Seconds, Seconds, Seconds), Seconds) {
    let plan = c.plan;
    let st = plan.stages;
    let run = |b: &Block| stage_time(b, pp1, plan.tp_overlap);
    let n = |k: u32| Block::default().add(*lay, k as f64);
    let (worst, sum) = if plan.pp == 1 {
        let all = n(st.first).add(*first, 1.0).add(*last, 1.0);
        let t = run(&all);
        ((all, t), t.0)
    } else {
        let f = n(st.first).add(*first, 1.0);
        let l = n(st.last).add(*last, 1.0);
        let mid = n(st.mid_max);
        let per_layer_mid = run(&n(1)).0 - pp1;
        let mids = per_layer_mid * st.mid_sum as f64 + pp1 * (plan.pp - 2) as f64;
        let (tf, tl) = (run(&f), run(&l));
        let sum = tf.0 + tl.0 + mids;
        let mut worst = if tl.0 > tf.0 { (l, tl) } else { (f, tf) };
        if st.mid_max > 0 {
            let tm = run(&mid);
            if tm.0 > worst.1.0 {
                worst = (mid, tm);
            }
        }
        (worst, sum)
    };
    let (worst, stt) = worst;
    let bubble = if plan.pp == 1 {
        Seconds::ZERO
    } else {
        (sum - stt.0) / plan.v as f64
    };
    tr.line(|| {
        format!(
            "stages: layers first {}, middle up to {} ({} in all), last {}; slowest stage per micro-batch {}; PP per micro-batch {pp1}",
            st.first, st.mid_max, st.mid_sum, st.last, stt.0
        )
    });
    tr.line(|| {
        format!(
            "bubble = (Σ_i T_i − max_i T_i)/v = ({sum} − {})/{} = {bubble}",
            stt.0, plan.v
        )
    });
    (worst, stt, bubble)
}

/// (model, hardware) FLOPs per iteration: `3 · F_fwd/token · B · s` (`2 ·` with LoRA,
/// whose frozen weights have no weight gradient); hardware adds the
/// recomputed forward (full: the layers' forward; selective: the attention core).
fn flops(m: &Transformer, plan: &Plan) -> (f64, f64) {
    let tokens = plan.global_batch as f64 * m.s;
    // LoRA: forward and data gradient only (frozen weights have no weight gradient).
    let passes = if plan.lora_rank > 0 { 2.0 } else { 3.0 };
    let model = passes * m.forward_flops_per_token() * tokens;
    let extra = match plan.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => m.layers as f64 * m.attention_core_flops_per_token(),
        Recompute::Full => m.forward_flops_per_token() - 2.0 * m.v * m.h,
    };
    (model, model + extra * tokens)
}

fn explain_header<T: Trace>(c: &Ctx, tr: &mut T) {
    let (dev, plan, m) = (c.dev, c.plan, c.m);
    tr.line(|| {
        let e = &dev.spec.efficiency;
        format!(
            "GEMM time = 2·M·N·K / (peak · e), e = {} · q(M,N on {} units, {}×{} tiles) · K/(K+{}); peak {} ({})",
            e.gemm, dev.spec.compute_units, e.gemm_tile[0], e.gemm_tile[1], e.gemm_k_overhead, c.peak, plan.precision.name()
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

fn explain_summary<T: Trace>(
    c: &Ctx,
    stage: Seconds,
    t: &Times,
    x: &super::Metrics,
    mem: &Memory,
    tr: &mut T,
) {
    let (plan, m) = (c.plan, c.m);
    tr.line(|| {
        format!(
            "iteration = m·T_stage + bubble + optimizer + exposed DP = {}·{stage} + {} + {} + {} = {}",
            plan.micro_batches, t.bubble, t.optimizer, t.comm[CommClass::Dp as usize].exposed, t.total
        )
    });
    tr.line(|| {
        format!(
            "MFU = 3·F_fwd/token·tokens / (T·peak·N) = {:.4e} / ({} · {} · {}) = {:.1}%",
            x.model_flops,
            t.total,
            c.peak,
            plan.gpus,
            100.0 * x.mfu
        )
    });
    tr.line(|| {
        format!(
            "activations = per layer {} / cp × first-stage layers {} × in flight {:.3} = {} (Korthikanti et al. 2022 Eq. 1-6)",
            Bytes::new(memory::layer_activation_bytes(m, plan, m.bias)),
            plan.stages.first,
            memory::in_flight(plan),
            mem.activations
        )
    });
}

/// Parameters held by the device of the stage with the most: its layers (experts
/// divided by EP) split over TP, plus the embedding (V·h/t) on the first and, untied or
/// with tied weights and p > 1, the output head on the last.
fn stage_params(m: &Transformer, plan: &Plan) -> f64 {
    let st = plan.stages;
    let t = plan.tp as f64;
    let layer = m.attn_params
        + m.experts as f64 / plan.ep as f64 * m.mlp_params * (t / plan.etp as f64)
        + m.shared_params
        + m.other_layer_params;
    let emb = m.embedding_params / t;
    if plan.pp == 1 {
        return st.first as f64 * layer / t + emb;
    }
    let head = if m.tied { m.v * m.h / t } else { emb };
    let first = st.first as f64 * layer / t + emb;
    let last = st.last as f64 * layer / t + head;
    first.max(last).max(st.mid_max as f64 * layer / t)
}

/// Optimizer step, memory-bound over the local optimizer shard (Megatron-LM's
/// mixed-precision optimizer, apex multi-tensor kernels), bytes per parameter with
/// gradient bytes `g`: gradient-norm clipping reads the gradient (`g`); Adam reads the
/// gradient and reads/writes the fp32 master weight, m and v (`g + 24`); the master is
/// copied to the 16-bit model weight (read 4, write 2); gradients are zeroed (`g`). With
/// fp16 dynamic loss scaling the gradients are also unscaled and checked for inf/NaN
/// in place (`2g`). Total `30 + 3g` (+ `2g` for fp16).
fn optimizer_time(c: &Ctx, trainable: f64, params: f64) -> Seconds {
    let g = c.plan.optimizer.bytes_per_param().1;
    let shard = if c.plan.zero >= 1 {
        (c.plan.dp * c.plan.cp) as f64
    } else {
        1.0
    };
    // Low-precision weight copies are refreshed once per iteration (Transformer Engine
    // caches them across micro-batches): read 2 B, write the copies.
    let recast = lowp::weight_copy_bytes(c.plan.precision, c.plan.fp8_recipe);
    let recast = if recast > 0.0 {
        params * (2.0 + recast)
    } else {
        0.0
    };
    let unscale = if c.plan.precision == crate::compute::Precision::Fp16 {
        2.0 * g
    } else {
        0.0
    };
    c.mem(trainable / shard * (30.0 + 3.0 * g + unscale) + recast, 8.0)
}

/// Memory of the stage with the most activations: the first stage holds `in_flight`
/// micro-batches of its layers, the second one fewer (1F1B); ZeRO shards over DP × CP;
/// CP divides every activation by `c`; FP8-family precisions keep their weight copies.
fn stage_memory(c: &Ctx, params: f64, trainable: f64, plan: &Plan) -> Memory {
    let shard = if plan.hsdp > 1 {
        plan.hsdp
    } else {
        plan.dp * plan.cp
    };
    let mut states = memory::model_states(trainable, plan.optimizer, plan.zero, shard);
    // Frozen (LoRA) weights: 16-bit, not sharded.
    states[0] += (params - trainable) * 2.0;
    states[0] += params * lowp::weight_copy_bytes(plan.precision, plan.fp8_recipe);
    let per_layer = memory::layer_activation_bytes(c.m, plan, c.m.bias) / plan.cp as f64;
    let st = plan.stages;
    let fl = memory::in_flight(plan);
    let second = if plan.pp > 2 {
        st.mid_max as f64 * fl * (plan.pp - 1) as f64 / plan.pp as f64
    } else {
        0.0
    };
    let acts = per_layer * (st.first as f64 * fl).max(second);
    let logits = if plan.pp == 1 {
        c.tokens * c.m.v / plan.tp as f64 * 4.0
    } else {
        0.0
    };
    let bucket = if plan.dp * plan.cp > 1 {
        2.0 * plan.dp_bucket.get()
    } else {
        0.0
    };
    let buffers = 2.0 * c.r * c.e + bucket + logits;
    Memory::new(states, acts, buffers, c.dev.memory())
}

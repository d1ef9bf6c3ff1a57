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

use super::{Comm, CommClass, Estimate, GroupDims, Times, Trace, coll, finish, overlap};
use crate::collective::Collective as C;
use crate::compute::Device;
use crate::error::Result;
use crate::memory::{self, Memory};
use crate::model::Transformer;
use crate::parallel::{Placement, Plan, Recompute};
use crate::system::System;
use crate::units::{Bytes, FlopRate, Seconds};

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
    plan: &'a Plan,
    place: &'a Placement,
    /// Bytes per activation element.
    e: f64,
    /// Tokens per micro-batch b·s.
    tokens: f64,
    /// Elements of the residual stream b·s·h.
    r: f64,
    /// The part of the residual stream each TP rank touches in replicated ops.
    rep: f64,
}

impl Ctx<'_> {
    fn gemm(&self, m: f64, n: f64, k: f64, batch: f64) -> Seconds {
        self.dev.gemm_time(self.peak, m, n, k, batch)
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

/// Linear layers of one transformer layer: forward and backward GEMM time, and the
/// weight-gradient and data-gradient time of the column-parallel layers (QKV, MLP in),
/// behind which Megatron-LM overlaps backward TP communication.
fn linears<T: Trace>(c: &Ctx, tr: &mut T) -> (Seconds, Seconds, Seconds, Seconds) {
    let (m, t) = (c.m, c.plan.tp as f64);
    let kv_rank = (m.kv_heads as f64 / t).max(1.0);
    let qkv_n = m.h / t + 2.0 * kv_rank * m.d;
    let g = if m.gated { 2.0 } else { 1.0 };
    let mut shapes = [
        (c.tokens, qkv_n, m.h, 1.0),
        (c.tokens, m.h, m.h / t, 1.0),
        (0.0, 0.0, 0.0, 0.0),
        (0.0, 0.0, 0.0, 0.0),
        (0.0, 0.0, 0.0, 0.0),
    ];
    if m.experts > 1 {
        let (e, ep, k) = (m.experts as f64, c.plan.ep as f64, m.top_k as f64);
        let per_expert = c.tokens * k * ep / e;
        shapes[2] = (per_expert, g * m.f / t, m.h, e / ep);
        shapes[3] = (per_expert, m.h, m.f / t, e / ep);
        shapes[4] = (c.tokens, e, m.h, 1.0);
    } else {
        shapes[2] = (c.tokens, g * m.f / t, m.h, 1.0);
        shapes[3] = (c.tokens, m.h, m.f / t, 1.0);
    }
    let (mut f, mut b) = (Seconds::ZERO, Seconds::ZERO);
    let (mut wgrad, mut dgrad) = (Seconds::ZERO, Seconds::ZERO);
    for (i, &(mm, n, k, batch)) in shapes.iter().enumerate() {
        if mm <= 0.0 {
            continue;
        }
        let (tf, tb) = c.linear(mm, n, k, batch);
        f += tf;
        b += tb;
        if i == 0 || i == 2 {
            let dg = c.gemm(mm, k, n, batch);
            dgrad += dg;
            wgrad += tb - dg;
        }
        tr.line(|| {
            let name = ["QKV", "attention projection", "MLP in", "MLP out", "router"][i];
            format!(
                "  GEMM {name}: M={mm} N={n} K={k} ×{batch}: efficiency {:.1}% of peak → fwd {tf}, bwd {tb}",
                100.0 * c.dev.gemm_efficiency(mm, n, k, batch)
            )
        });
    }
    (f, b, wgrad, dgrad)
}

/// Attention core (QKᵀ, softmax, dropout, attention·V) on a rank's a/t heads:
/// (forward, backward) time; unfused as Megatron-LM 2022, or fused (flash).
fn attention<T: Trace>(c: &Ctx, tr: &mut T) -> (Seconds, Seconds) {
    let (m, s) = (c.m, c.m.s);
    let batch = c.plan.micro_batch as f64 * m.heads as f64 / c.plan.tp as f64;
    let eff = c.dev.spec.efficiency.attention;
    let qk = c.gemm(s, s, m.d, batch);
    let av = c.gemm(s, m.d, s, batch);
    if c.plan.flash_attention {
        // Fused kernel: 2 GEMMs forward, 5 backward (recomputes QKᵀ); causal skips half.
        let half = if m.causal { 0.5 } else { 1.0 };
        let f = (qk + av) * (half / eff);
        tr.line(|| format!("  attention (fused): fwd {f}, bwd = 2.5 × fwd"));
        return (f, f * 2.5);
    }
    let scores = batch * s * s;
    let drop = if m.bias { 5.0 } else { 0.0 };
    let f = (qk + av) / eff + c.mem(scores * (4.0 + drop), 2.0);
    let bwd_gemm =
        (c.gemm(s, m.d, s, batch) * 2.0 + c.gemm(s, s, m.d, batch) + c.gemm(s, m.d, s, batch))
            / eff;
    let b = bwd_gemm + c.mem(scores * (6.0 + drop), 2.0);
    tr.line(|| {
        format!(
            "  attention core: {batch} × (s×s) scores; QKᵀ {qk}, attention·V {av}; softmax+dropout move {} → fwd {f}, bwd {b}",
            Bytes::new(scores * (4.0 + drop))
        )
    });
    (f, b)
}

/// One transformer layer for one micro-batch on one TP rank.
fn layer<T: Trace>(c: &Ctx, tr: &mut T) -> Result<Block> {
    let m = c.m;
    let (lin_f, lin_b, wgrad, dgrad) = linears(c, tr);
    let (att_f, att_b) = attention(c, tr);
    let act = c.tokens * m.f / c.plan.tp as f64 * m.top_k as f64;
    let (act_f, act_b) = if m.gated { (6.0, 10.0) } else { (4.0, 6.0) };
    let (bda_f, bda_b) = if m.bias { (7.0, 5.0) } else { (6.0, 2.0) };
    // Forward: LayerNorm ×2 (read + write, 4 B/elem) and bias-dropout-add ×2 (7 B/elem)
    // on the replicated stream. Backward: LayerNorm ×2 (read x, dy, write dx: 6 B/elem),
    // dropout ×2 (5 B/elem), autograd's sum of the two gradients reaching each residual
    // input ×2 (6 B/elem), and bias gradients (column sums: read the output gradient of
    // QKV and of the two row-parallel layers, 2 B/elem).
    let qkv_out = c.tokens
        * (m.h + 2.0 * (m.kv_heads as f64 / c.plan.tp as f64).max(1.0) * m.d * c.plan.tp as f64)
        / c.plan.tp as f64;
    let bias_grads = if m.bias {
        2.0 * qkv_out + 2.0 * 2.0 * c.rep
    } else {
        0.0
    };
    let mem_f = c.mem(c.rep * 2.0 * (4.0 + bda_f) + act * act_f, 5.0);
    let mem_b = c.mem(
        c.rep * 2.0 * (6.0 + bda_b + 6.0) + act * act_b + bias_grads,
        10.0,
    );
    tr.line(|| format!("  memory-bound: LayerNorm ×2, bias-dropout-add ×2 on {} elements, activation on {act}: fwd {mem_f}, bwd {mem_b}", c.rep));
    let tp = tp_comm(c)?;
    let (ep1, ep_b1) = ep_comm(c)?;
    let fwd = Pass {
        gemm: lin_f + att_f,
        mem: mem_f,
        tp: tp.fwd,
        tp_hidden: Seconds::ZERO,
        tp_bytes: tp.bytes,
        ep: ep1,
        ep_bytes: ep_b1,
    };
    // Backward (Megatron-LM 2022, LinearWithGradAccumulationAndAsyncCommunication): the
    // column-parallel layers' input-gradient all-reduce (reduce-scatter with SP) runs
    // asynchronously under their weight-gradient GEMMs, and with SP the re-gathered input
    // under their data-gradient GEMMs; the all-gather conjugate to the row-parallel
    // reduce-scatter is exposed.
    let (e1, h1) = overlap(tp.bwd_under_wgrad, wgrad, true);
    let (e2, h2) = overlap(tp.bwd_under_dgrad, dgrad, true);
    let bwd = Pass {
        gemm: lin_b + att_b,
        mem: mem_b,
        tp: tp.bwd_exposed + e1 + e2,
        tp_hidden: h1 + h2,
        tp_bytes: tp.bytes_bwd,
        ..fwd
    };
    let (tp1, tp_b1) = (tp.fwd, tp.bytes);
    let rec = match c.plan.recompute {
        Recompute::None => Pass::default(),
        Recompute::Full => fwd,
        Recompute::Selective if c.plan.flash_attention => Pass::default(),
        Recompute::Selective => Pass {
            gemm: att_f,
            ..Pass::default()
        },
    };
    tr.line(|| {
        format!(
            "  TP/SP per layer and pass: {tp1} ({}); EP: {ep1}",
            Bytes::new(tp_b1)
        )
    });
    tr.line(|| {
        let t = |p: &Pass| p.compute() + p.tp + p.ep;
        format!(
            "  layer total: forward {}, backward {}, recompute {}",
            t(&fwd),
            t(&bwd),
            t(&rec)
        )
    });
    Ok(Block { fwd, bwd, rec })
}

/// TP communication of one layer and micro-batch.
struct TpComm {
    /// Forward: exposed.
    fwd: Seconds,
    /// Backward, always exposed.
    bwd_exposed: Seconds,
    /// Backward, overlappable with the column-parallel weight-gradient GEMMs.
    bwd_under_wgrad: Seconds,
    /// Backward, overlappable with the column-parallel data-gradient GEMMs.
    bwd_under_dgrad: Seconds,
    /// Bytes per device, forward.
    bytes: f64,
    /// Bytes per device, backward.
    bytes_bwd: f64,
}

/// Megatron-LM TP: two all-reduces of b·s·h elements per layer in forward (after the
/// row-parallel layers) and two in backward (before the column-parallel ones) (Shoeybi
/// et al. 2019 §3); with SP each becomes an all-gather / reduce-scatter pair, and backward
/// re-gathers the column-parallel inputs once more (Korthikanti §4.2.2).
fn tp_comm(c: &Ctx) -> Result<TpComm> {
    let bytes = c.r * c.e;
    if c.plan.sp {
        let ag = coll(C::AllGather, bytes, &c.place.tp)?;
        let rs = coll(C::ReduceScatter, bytes, &c.place.tp)?;
        Ok(TpComm {
            fwd: (ag + rs) * 2.0,
            bwd_exposed: ag * 2.0,
            bwd_under_wgrad: rs * 2.0,
            bwd_under_dgrad: ag * 2.0,
            bytes: 4.0 * bytes,
            bytes_bwd: 6.0 * bytes,
        })
    } else {
        let ar = coll(C::AllReduce, bytes, &c.place.tp)?;
        Ok(TpComm {
            fwd: ar * 2.0,
            bwd_exposed: Seconds::ZERO,
            bwd_under_wgrad: ar * 2.0,
            bwd_under_dgrad: Seconds::ZERO,
            bytes: 2.0 * bytes,
            bytes_bwd: 2.0 * bytes,
        })
    }
}

/// MoE dispatch and combine: two all-to-alls of b·s·k·h elements per layer and pass.
fn ep_comm(c: &Ctx) -> Result<(Seconds, f64)> {
    if c.m.experts <= 1 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let bytes = c.tokens * c.m.top_k as f64 * c.m.h * c.e;
    Ok((coll(C::AllToAll, bytes, &c.place.ep)? * 2.0, 2.0 * bytes))
}

/// Embedding on the first stage and final norm + logits + cross-entropy on the last.
fn ends<T: Trace>(c: &Ctx, tr: &mut T) -> Result<(Block, Block)> {
    let (m, t) = (c.m, c.plan.tp as f64);
    let bytes = c.r * c.e;
    let ar_or_rs = if c.plan.sp {
        C::ReduceScatter
    } else {
        C::AllReduce
    };
    let emb_tp = coll(ar_or_rs, bytes, &c.place.tp)?;
    let first = Block {
        fwd: Pass {
            mem: c.mem(15.0 * c.r, 3.0),
            tp: emb_tp,
            tp_bytes: bytes,
            ..Pass::default()
        },
        bwd: Pass {
            mem: c.mem(8.0 * c.r, 2.0),
            ..Pass::default()
        },
        rec: Pass::default(),
    };
    let vt = m.v / t;
    let (lg_f, lg_b) = c.linear(c.tokens, vt, m.h, 1.0);
    let small = coll(C::AllReduce, c.tokens * 4.0, &c.place.tp)? * 3.0;
    let head_tp = if c.plan.sp {
        coll(C::AllGather, bytes, &c.place.tp)?
    } else {
        Seconds::ZERO
    };
    let back_tp = coll(ar_or_rs, bytes, &c.place.tp)?;
    let last = Block {
        fwd: Pass {
            gemm: lg_f,
            mem: c.mem(4.0 * c.rep + 16.0 * c.tokens * vt, 4.0),
            tp: small + head_tp,
            tp_bytes: if c.plan.sp { bytes } else { 0.0 } + 12.0 * c.tokens,
            ..Pass::default()
        },
        bwd: Pass {
            gemm: lg_b,
            mem: c.mem(6.0 * c.rep + 8.0 * c.tokens * vt, 3.0),
            tp: back_tp,
            tp_bytes: bytes,
            ..Pass::default()
        },
        rec: Pass::default(),
    };
    tr.line(|| {
        format!(
            "  logits GEMM M={} N={vt} K={}: fwd {lg_f}, bwd {lg_b}",
            c.tokens, m.h
        )
    });
    Ok((first, last))
}

/// Per-micro-batch time of a stage: compute + exposed TP/SP/EP (TP hidden behind GEMMs
/// when TP overlap is on) + PP; returns (time, exposed tp, hidden tp, ep).
fn stage_time(b: &Block, pp: Seconds, tp_overlap: bool) -> (Seconds, Seconds, Seconds, Seconds) {
    let mut exp = Seconds::ZERO;
    let mut hid = Seconds::ZERO;
    for p in [&b.fwd, &b.bwd, &b.rec] {
        let (e, h) = overlap(p.tp, p.gemm, tp_overlap);
        exp += e;
        hid += h + p.tp_hidden;
    }
    let ep = b.fwd.ep + b.bwd.ep + b.rec.ep;
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
    let peak = dev.peak(plan.precision)?;
    let e = plan.precision.activation_bytes();
    let (t, b) = (plan.tp as f64, plan.micro_batch as f64);
    let r = b * m.s * m.h;
    let c = Ctx {
        m,
        dev,
        peak,
        plan,
        place,
        e,
        tokens: b * m.s,
        r,
        rep: if plan.sp { r / t } else { r },
    };
    tr.line(|| {
        let e = &dev.spec.efficiency;
        format!(
            "GEMM time = 2·M·N·K / (peak · e), e = {} · q(M,N on {} units, {}×{} tiles) · K/(K+{}); peak {} ({})",
            e.gemm, dev.spec.compute_units, e.gemm_tile[0], e.gemm_tile[1], e.gemm_k_overhead, peak, plan.precision.name()
        )
    });
    tr.line(|| {
        format!(
            "memory-bound time = bytes / ({} · {}) + kernels · {}",
            dev.spec.memory_bandwidth,
            dev.spec.efficiency.memory,
            dev.spec.efficiency.kernel_overhead
        )
    });
    tr.line(|| {
        format!(
            "per layer, per micro-batch (b={}, s={}, h={}, t={}):",
            plan.micro_batch, m.s, m.h, plan.tp
        )
    });
    let lay = layer(&c, tr)?;
    let (first, last) = ends(&c, tr)?;
    let lp = (m.layers / plan.pp) as f64;
    let mid = Block::default().add(lay, lp);
    let (pp1, pp_bytes) = pp_comm(&c)?;
    let candidates = if plan.pp == 1 {
        [
            mid.add(first, 1.0).add(last, 1.0),
            mid.add(first, 1.0).add(last, 1.0),
        ]
    } else {
        [mid.add(first, 1.0), mid.add(last, 1.0)]
    };
    let s0 = stage_time(&candidates[0], pp1, plan.tp_overlap);
    let s1 = stage_time(&candidates[1], pp1, plan.tp_overlap);
    let (worst, st) = if s1.0 > s0.0 {
        (candidates[1], s1)
    } else {
        (candidates[0], s0)
    };
    let mb = plan.micro_batches as f64;
    let mid_time = stage_time(&mid, pp1, plan.tp_overlap).0;
    let bubble = mid_time * ((plan.pp - 1) as f64 / plan.v as f64);
    tr.line(|| {
        format!(
            "stage per micro-batch: {} (slowest), {mid_time} (middle); PP per micro-batch {pp1}",
            st.0
        )
    });
    tr.line(|| {
        format!(
            "bubble = (p−1)/v · T_mid = {}/{} · {mid_time} = {bubble}",
            plan.pp - 1,
            plan.v
        )
    });
    let mut times = Times {
        forward: worst.fwd.compute() * mb,
        backward: worst.bwd.compute() * mb,
        recompute: worst.rec.compute() * mb,
        bubble,
        ..Times::default()
    };
    let tp_bytes = if place.tp.size > 1 {
        (worst.fwd.tp_bytes + worst.bwd.tp_bytes + worst.rec.tp_bytes) * mb
    } else {
        0.0
    };
    let class = if plan.sp {
        CommClass::Sp
    } else {
        CommClass::Tp
    };
    times.comm[class as usize] = Comm {
        exposed: st.1 * mb,
        hidden: st.2 * mb,
        bytes: Bytes::new(tp_bytes),
    };
    let ep_bytes = (worst.fwd.ep_bytes + worst.bwd.ep_bytes + worst.rec.ep_bytes) * mb;
    times.comm[CommClass::Ep as usize] = Comm {
        exposed: st.3 * mb,
        hidden: Seconds::ZERO,
        bytes: Bytes::new(ep_bytes),
    };
    let params = stage_params(m, plan);
    let (emb_sync, emb_bytes) = embedding_sync(&c)?;
    times.comm[CommClass::Pp as usize] = Comm {
        exposed: pp1 * mb + emb_sync,
        hidden: Seconds::ZERO,
        bytes: Bytes::new(pp_bytes * mb + emb_bytes),
    };
    times.comm[CommClass::Dp as usize] = dp_comm(&c, params, &worst, tr)?;
    times.optimizer = optimizer_time(&c, params);
    tr.line(|| {
        format!(
            "optimizer: {params:.4e} parameters on this device → {}",
            times.optimizer
        )
    });
    let tokens = plan.global_batch as f64 * m.s;
    let model_flops = 3.0 * m.forward_flops_per_token() * tokens;
    let extra = match plan.recompute {
        Recompute::None => 0.0,
        Recompute::Selective => m.layers as f64 * m.attention_core_flops_per_token(),
        Recompute::Full => m.forward_flops_per_token() - 2.0 * m.v * m.h,
    };
    let (times, metrics) = finish(
        times,
        (model_flops, model_flops + extra * tokens),
        peak.get(),
        plan,
        m.s,
    );
    let memory = stage_memory(&c, params, plan);
    tr.line(|| {
        format!(
            "iteration = m·T_stage + bubble + optimizer + exposed DP = {mb}·{} + {} + {} + {} = {}",
            st.0,
            times.bubble,
            times.optimizer,
            times.comm[CommClass::Dp as usize].exposed,
            times.total
        )
    });
    tr.line(|| {
        format!(
            "MFU = 3·F_fwd/token·tokens / (T·peak·N) = {:.4e} / ({} · {} · {}) = {:.1}%",
            model_flops,
            times.total,
            peak,
            plan.gpus,
            100.0 * metrics.mfu
        )
    });
    tr.line(|| {
        format!(
            "activations = per layer {} × L/p = {} × in flight {:.3} = {} (Korthikanti et al. 2022 Eq. 1-6)",
            Bytes::new(memory::layer_activation_bytes(m, plan, m.bias)),
            m.layers / plan.pp,
            memory::in_flight(plan),
            memory.activations
        )
    });
    Ok(Estimate {
        plan: *plan,
        time: times,
        memory,
        metrics,
        groups: [
            GroupDims::from(&place.tp),
            GroupDims::from(&place.ep),
            GroupDims::from(&place.dp),
            GroupDims::from(&place.pp),
        ],
        tokens_per_sample: m.s,
    })
}

/// Pipeline send/recv per micro-batch and stage: `2·v` transfers of `b·s·h` elements,
/// split over the TP ranks (scatter/gather optimisation, Narayanan et al. SC'21 §4.1) and
/// gathered back over TP when SP does not already keep them split.
fn pp_comm(c: &Ctx) -> Result<(Seconds, f64)> {
    if c.plan.pp <= 1 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let t = c.plan.tp as f64;
    let bytes = c.r * c.e / t;
    let mut one = coll(C::SendRecv, bytes, &c.place.pp)?;
    if !c.plan.sp {
        one += coll(C::AllGather, c.r * c.e, &c.place.tp)?;
    }
    let n = 2.0 * c.plan.v as f64;
    Ok((one * n, bytes * n))
}

/// Tied embeddings with p > 1: the first and last stage all-reduce the embedding
/// gradient (V·h/t) once per iteration (Megatron-LM).
fn embedding_sync(c: &Ctx) -> Result<(Seconds, f64)> {
    let n = c.place.pp.n;
    if c.plan.pp <= 1 || !c.m.tied || n == 0 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let mut pair = c.place.pp;
    pair.size = 2;
    pair.n = 1;
    pair.index[0] = pair.index[n - 1];
    pair.dims[0] = crate::network::Dim {
        size: 2,
        ..c.place.pp.dims[n - 1]
    };
    let g = c.plan.optimizer.bytes_per_param().1;
    let bytes = c.m.v * c.m.h / c.plan.tp as f64 * g;
    Ok((coll(C::AllReduce, bytes, &pair)?, bytes))
}

/// Parameters held by the device of the largest stage: `L/p` layers (experts divided by
/// EP) split over TP, plus the embedding (V·h/t) on the first and, with tied weights and
/// p > 1, a copy on the last stage.
fn stage_params(m: &Transformer, plan: &Plan) -> f64 {
    let lp = (m.layers / plan.pp) as f64;
    let layer =
        m.attn_params + m.experts as f64 / plan.ep as f64 * m.mlp_params + m.other_layer_params;
    let emb = m.embedding_params / plan.tp as f64;
    let ends = if plan.pp == 1 {
        emb
    } else {
        emb.max(if m.tied {
            m.v * m.h / plan.tp as f64
        } else {
            emb
        })
    };
    lp * layer / plan.tp as f64 + ends
}

/// Optimizer step, memory-bound over the local optimizer shard (Megatron-LM's
/// mixed-precision optimizer, apex multi-tensor kernels), bytes per parameter with
/// gradient bytes `g`: gradient-norm clipping reads the gradient (`g`); Adam reads the
/// gradient and reads/writes the fp32 master weight, m and v (`g + 24`); the master is
/// copied to the 16-bit model weight (read 4, write 2); gradients are zeroed (`g`). With
/// fp16 dynamic loss scaling the gradients are also unscaled and checked for inf/NaN
/// in place (`2g`). Total `30 + 3g` (+ `2g` for fp16).
fn optimizer_time(c: &Ctx, params: f64) -> Seconds {
    let g = c.plan.optimizer.bytes_per_param().1;
    let shard = if c.plan.zero >= 1 {
        c.plan.dp as f64
    } else {
        1.0
    };
    let unscale = if c.plan.precision == crate::compute::Precision::Fp16 {
        2.0 * g
    } else {
        0.0
    };
    c.mem(params / shard * (30.0 + 3.0 * g + unscale), 8.0)
}

/// Data-parallel gradient reduction. ZeRO-0: all-reduce; ZeRO-1/2: reduce-scatter +
/// all-gather of the weights; ZeRO-3/FSDP: all-gather of the weights in every forward and
/// backward and a reduce-scatter per micro-batch, hidden behind that pass's compute. With
/// bucketed overlap the reduction hides behind the last micro-batch's backward except
/// the last bucket.
fn dp_comm<T: Trace>(c: &Ctx, params: f64, worst: &Block, tr: &mut T) -> Result<Comm> {
    let plan = c.plan;
    let g = plan.optimizer.bytes_per_param().1;
    let (grad, weights) = (params * g, params * c.e);
    let dp = &c.place.dp;
    if plan.zero == 3 {
        let ag = coll(C::AllGather, weights, dp)?;
        let rs = coll(C::ReduceScatter, grad, dp)?;
        let mb = plan.micro_batches as f64;
        let passes = if plan.recompute == Recompute::Full {
            3.0
        } else {
            2.0
        };
        let (ef, hf) = overlap(ag, worst.fwd.free(plan.tp_overlap), plan.dp_overlap);
        let (eb, hb) = overlap(ag + rs, worst.bwd.free(plan.tp_overlap), plan.dp_overlap);
        let (er, hr) = if passes > 2.0 {
            overlap(ag, worst.rec.free(plan.tp_overlap), plan.dp_overlap)
        } else {
            (Seconds::ZERO, Seconds::ZERO)
        };
        tr.line(|| {
            format!("ZeRO-3: all-gather {ag} per pass, reduce-scatter {rs} per micro-batch")
        });
        return Ok(Comm {
            exposed: (ef + eb + er) * mb,
            hidden: (hf + hb + hr) * mb,
            bytes: Bytes::new(mb * (passes * weights + grad)),
        });
    }
    let (reduce, gather) = if plan.zero == 0 {
        (coll(C::AllReduce, grad, dp)?, Seconds::ZERO)
    } else {
        (
            coll(C::ReduceScatter, grad, dp)?,
            coll(C::AllGather, weights, dp)?,
        )
    };
    let last_bucket = reduce * (plan.dp_bucket.get() / grad).min(1.0);
    let (mut exposed, mut hidden) = overlap(
        reduce - last_bucket,
        worst.bwd.free(plan.tp_overlap),
        plan.dp_overlap,
    );
    exposed += last_bucket;
    let (eg, hg) = overlap(gather, worst.fwd.free(plan.tp_overlap), plan.dp_overlap);
    exposed += eg;
    hidden += hg;
    tr.line(|| format!("DP (ZeRO-{}): gradient {} → reduction {reduce}, weight gather {gather}; exposed {exposed}", plan.zero, Bytes::new(grad)));
    let bytes = grad + if plan.zero > 0 { weights } else { 0.0 };
    Ok(Comm {
        exposed,
        hidden,
        bytes: Bytes::new(if dp.size > 1 { bytes } else { 0.0 }),
    })
}

/// Memory of the first pipeline stage (the most activations in flight).
fn stage_memory(c: &Ctx, params: f64, plan: &Plan) -> Memory {
    let states = memory::model_states(params, plan.optimizer, plan.zero, plan.dp);
    let per_layer = memory::layer_activation_bytes(c.m, plan, c.m.bias);
    let lp = (c.m.layers / plan.pp) as f64;
    let acts = per_layer * lp * memory::in_flight(plan);
    let logits = if plan.pp == 1 {
        c.tokens * c.m.v / plan.tp as f64 * 4.0
    } else {
        0.0
    };
    let bucket = if plan.dp > 1 {
        2.0 * plan.dp_bucket.get()
    } else {
        0.0
    };
    let buffers = 2.0 * c.r * c.e + bucket + logits;
    Memory::new(states, acts, buffers, c.dev.memory())
}

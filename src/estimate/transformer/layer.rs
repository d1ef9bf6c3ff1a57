//! Compute of one transformer layer (and of the embedding and output head) for one
//! micro-batch on one tensor-parallel rank: shape-timed GEMMs, the attention core, and
//! memory-bound kernels from the bytes they move.

use super::comm::ep_comm;
use super::tp::tp_windows;
use super::{Block, Ctx, Pass};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::windows::Busy;
use crate::estimate::{Trace, coll};
use crate::parallel::Recompute;
use crate::units::{Bytes, Seconds};

/// Linear layers of one transformer layer, per GEMM: QKV, attention projection, MLP in,
/// MLP out (`[0..4]`), forward, data-gradient and weight-gradient time, plus the MoE router
/// (forward, backward). The TP windows pair each collective with one of these GEMMs.
pub(super) struct Linears {
    pub(super) fwd: [Seconds; 4],
    pub(super) dgrad: [Seconds; 4],
    pub(super) wgrad: [Seconds; 4],
    pub(super) router: (Seconds, Seconds),
}

impl Linears {
    fn total(&self) -> (Seconds, Seconds) {
        let sum = |a: &[Seconds; 4]| a.iter().copied().sum::<Seconds>();
        (
            sum(&self.fwd) + self.router.0,
            sum(&self.dgrad) + sum(&self.wgrad) + self.router.1,
        )
    }
}

/// The GEMMs of one transformer layer, each timed from its shape.
pub(super) fn linears<T: Trace>(c: &Ctx, tr: &mut T) -> Linears {
    let (m, t) = (c.m, c.plan.tp as f64);
    let kv_rank = (m.kv_heads as f64 / t).max(1.0);
    let qkv_n = m.h / t + 2.0 * kv_rank * m.d;
    let g = if m.gated { 2.0 } else { 1.0 };
    let mut shapes = [
        (c.tokens, qkv_n, m.h, 1.0),
        (c.tokens, m.h, m.h / t, 1.0),
        (c.tokens, g * m.f / t, m.h, 1.0),
        (c.tokens, m.h, m.f / t, 1.0),
        (0.0, 0.0, 0.0, 0.0),
    ];
    if m.experts > 1 {
        let (e, ep, k) = (m.experts as f64, c.plan.ep as f64, m.top_k as f64);
        let per_expert = c.tokens * k * ep / e;
        shapes[2] = (per_expert, g * m.f / t, m.h, e / ep);
        shapes[3] = (per_expert, m.h, m.f / t, e / ep);
        shapes[4] = (c.tokens, e, m.h, 1.0);
    }
    let z = Seconds::ZERO;
    let mut out = Linears {
        fwd: [z; 4],
        dgrad: [z; 4],
        wgrad: [z; 4],
        router: (z, z),
    };
    for (i, &(mm, n, k, batch)) in shapes.iter().enumerate() {
        if mm <= 0.0 {
            continue;
        }
        let (tf, tb) = c.linear(mm, n, k, batch);
        let dg = c.gemm(mm, k, n, batch);
        if i < 4 {
            out.fwd[i] = tf;
            out.dgrad[i] = dg;
            out.wgrad[i] = tb - dg;
        } else {
            out.router = (tf, tb);
        }
        tr.line(|| {
            let name = ["QKV", "attention projection", "MLP in", "MLP out", "router"][i];
            format!(
                "  GEMM {name}: M={mm} N={n} K={k} ×{batch}: efficiency {:.1}% of peak → fwd {tf}, bwd {tb}",
                100.0 * c.dev.gemm_efficiency(mm, n, k, batch)
            )
        });
    }
    out
}

/// Attention core (QKᵀ, softmax, dropout, attention·V) on a rank's a/t heads:
/// (forward, backward) time; unfused as Megatron-LM 2022, or fused (flash).
pub(super) fn attention<T: Trace>(c: &Ctx, tr: &mut T) -> (Seconds, Seconds) {
    let (m, s) = (c.m, c.m.s);
    let batch = c.plan.micro_batch as f64 * m.heads as f64 / c.plan.tp as f64;
    let eff = c.dev.spec.efficiency.attention;
    let qk = c.attn_gemm(s, s, m.d, batch);
    let av = c.attn_gemm(s, m.d, s, batch);
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
    let bwd_gemm = (c.attn_gemm(s, m.d, s, batch) * 2.0
        + c.attn_gemm(s, s, m.d, batch)
        + c.attn_gemm(s, m.d, s, batch))
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

/// One transformer layer for one micro-batch on one TP rank, and its TP traffic per
/// dimension (forward, backward) for the DP windows that share links with it.
pub(super) fn layer<T: Trace>(c: &Ctx, tr: &mut T) -> Result<(Block, (Busy, Busy))> {
    let m = c.m;
    let lin = linears(c, tr);
    let (lin_f, lin_b) = lin.total();
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
    let tp = tp_windows(c, &lin, tr)?;
    let (ep1, ep_b1) = ep_comm(c)?;
    let fwd = Pass {
        gemm: lin_f + att_f,
        mem: mem_f,
        tp: tp.fwd.exposed,
        tp_hidden: tp.fwd.hidden,
        slow: tp.fwd.slowdown,
        tp_bytes: tp.bytes.0,
        ep: ep1,
        ep_bytes: ep_b1,
    };
    let bwd = Pass {
        gemm: lin_b + att_b,
        mem: mem_b,
        tp: tp.bwd.exposed,
        tp_hidden: tp.bwd.hidden,
        slow: tp.bwd.slowdown,
        tp_bytes: tp.bytes.1,
        ..fwd
    };
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
            "  TP/SP per layer: forward {} ({}); EP all-to-all {ep1} per pass, exposed (no schedule overlaps it: dispatch and combine sit between attention and the experts)",
            tp.fwd.exposed + tp.fwd.hidden,
            Bytes::new(tp.bytes.0)
        )
    });
    tr.line(|| {
        let t = |p: &Pass| p.compute() + p.tp + p.ep + p.slow;
        format!(
            "  layer total: forward {}, backward {}, recompute {}",
            t(&fwd),
            t(&bwd),
            t(&rec)
        )
    });
    Ok((Block { fwd, bwd, rec }, tp.busy))
}

/// Embedding on the first stage and final norm + logits + cross-entropy on the last.
pub(super) fn ends<T: Trace>(c: &Ctx, tr: &mut T) -> Result<(Block, Block)> {
    let (m, t) = (c.m, c.plan.tp as f64);
    let bytes = c.r * c.e;
    let ar_or_rs = if c.plan.sp {
        C::ReduceScatter
    } else {
        C::AllReduce
    };
    let emb_tp = coll(ar_or_rs, bytes, &c.place.tp, c.coll)?;
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
    let small = coll(C::AllReduce, c.tokens * 4.0, &c.place.tp, c.coll)? * 3.0;
    let head_tp = if c.plan.sp {
        coll(C::AllGather, bytes, &c.place.tp, c.coll)?
    } else {
        Seconds::ZERO
    };
    let back_tp = coll(ar_or_rs, bytes, &c.place.tp, c.coll)?;
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

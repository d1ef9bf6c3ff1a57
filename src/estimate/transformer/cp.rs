//! Context-parallel communication of one layer and micro-batch (see
//! `parallel::context` for the algorithms).
//!
//! Ring (Megatron-LM / Transformer Engine `p2p`): forward passes the local key/value
//! block, `b·(s/c)·kv_t·(d_qk + d_v)` elements (kv_t = KV heads per TP rank), to the next
//! rank `c − 1` times; backward passes the key/value block and its gradient (twice the
//! bytes) `c − 1` times. Each transfer runs while the attention of the block already
//! held is computed, a window of `T_attention / c` (Liu et al. 2023, Ring Attention §3):
//! a bulk window (`windows::bulk`) per step, so the point-to-point kernels in flight also
//! slow the attention they overlap by κ (NCCL send/receive kernels occupy SMs, as every
//! overlapped collective does: Lee et al. 2025).
//!
//! All-to-all (Ulysses; Jacobs et al. 2023 §3.1): forward exchanges Q, K, V (`b·(s/c)`
//! tokens × the QKV width per TP rank) and the attention output (`a·d_v/t`); backward
//! exchanges their gradients. Each all-to-all moves `(c−1)/c` of its buffer and waits
//! for the attention that depends on it: exposed.
//!
//! Mamba layers of a hybrid model always exchange all-to-all (Megatron-LM
//! `megatron/core/ssm/mamba_context_parallel.py`): the input projection's output
//! `(2·d_in + 2·g·N + H)/t` per token before the scan and `y` (`d_in/t`) after it, each
//! pass; MLP layers exchange nothing.

use super::{Ctx, Part};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::coll;
use crate::estimate::windows::{Overlap, bulk};
use crate::parallel::CpKind;
use crate::units::Seconds;

/// CP communication of one layer for one micro-batch.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct CpComm {
    /// Forward (exposed, hidden).
    pub(super) fwd: (Seconds, Seconds),
    /// Backward (exposed, hidden).
    pub(super) bwd: (Seconds, Seconds),
    /// Bytes per device (forward, backward).
    pub(super) bytes: (f64, f64),
    /// Attention slowed by the overlapped exchange (forward, backward).
    pub(super) slow: (Seconds, Seconds),
}

/// A mixer's context-parallel exchange from sequence to head shards and back (Mamba's and
/// Gated DeltaNet's): an all-to-all of `pre` bytes before the mixer and one of `post` after
/// it each pass, exposed.
fn head_exchange(c: &Ctx, pre: f64, post: f64) -> Result<CpComm> {
    let span = &c.place.cp;
    let x = coll(C::AllToAll, pre, span, c.coll)? + coll(C::AllToAll, post, span, c.coll)?;
    Ok(CpComm {
        fwd: (x, Seconds::ZERO),
        bwd: (x, Seconds::ZERO),
        bytes: (pre + post, pre + post),
        slow: (Seconds::ZERO, Seconds::ZERO),
    })
}

/// CP communication given the layer's attention-core time per pass on this rank.
pub(super) fn cp_comm(c: &Ctx, att_f: Seconds, att_b: Seconds) -> Result<CpComm> {
    let cp = c.plan.cp as f64;
    if c.plan.cp <= 1 {
        return Ok(CpComm::default());
    }
    let (m, t) = (c.m, c.plan.tp as f64);
    let tokens = c.tokens;
    let span = &c.place.cp;
    match (c.part, m.hybrid.and_then(|h| h.mamba)) {
        (Part::Mlp, _) => return Ok(CpComm::default()),
        (Part::Mamba, Some(mb)) => {
            // Megatron-LM `MambaContextParallel`: all-to-all of z, x, B, C, dt from sequence
            // to head shards before the convolution and scan, and of y back after it;
            // backward, their gradients. Exposed, as the Ulysses exchanges below.
            let pre = tokens * mb.in_proj_width(t) * c.e;
            return head_exchange(c, pre, tokens * mb.d_inner() / t * c.e);
        }
        (Part::Gdn, _) => {
            // Megatron-LM `GatedDeltaNet` with CP: all-to-all of the input projection's
            // output (`q, k, v, z, β, α`) from sequence to head shards before the
            // convolution and delta rule, and of the gated norm's output back before the
            // output projection; backward, their gradients. Exposed, as Mamba's.
            let Some(g) = m.hybrid.and_then(|h| h.gdn) else {
                return Ok(CpComm::default());
            };
            let pre = tokens * g.in_proj_width(t) * c.e;
            return head_exchange(c, pre, tokens * g.v() / t * c.e);
        }
        _ => {}
    }
    match c.plan.cp_kind {
        CpKind::Ring => {
            let kv_t = (m.attn.kv_heads / t).max(1.0);
            let block = tokens * kv_t * (m.attn.qk_d + m.attn.v_d) * c.e;
            let step = |bytes: f64, window: Seconds| -> Result<Overlap> {
                let x = coll(C::SendRecv, bytes, span, c.coll)?;
                Ok(bulk(x, window, c.kappa).times(cp - 1.0))
            };
            let (f, b) = (step(block, att_f / cp)?, step(2.0 * block, att_b / cp)?);
            Ok(CpComm {
                fwd: (f.exposed, f.hidden),
                bwd: (b.exposed, b.hidden),
                bytes: ((cp - 1.0) * block, (cp - 1.0) * 2.0 * block),
                slow: (f.slowdown, b.slowdown),
            })
        }
        CpKind::A2a => {
            let qkv = tokens * m.attn.qkv_width(t) * c.e;
            let out = tokens * m.attn.heads * m.attn.v_d / t * c.e;
            let x = coll(C::AllToAll, qkv, span, c.coll)? + coll(C::AllToAll, out, span, c.coll)?;
            Ok(CpComm {
                fwd: (x, Seconds::ZERO),
                bwd: (x, Seconds::ZERO),
                bytes: (qkv + out, qkv + out),
                slow: (Seconds::ZERO, Seconds::ZERO),
            })
        }
    }
}

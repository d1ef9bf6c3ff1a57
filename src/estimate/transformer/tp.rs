//! Tensor- and sequence-parallel communication windows of one layer and micro-batch
//! (Megatron-LM with Transformer Engine). Each collective is paired with the GEMM it can
//! overlap (`windows` module for the formulas):
//!
//! | pass | collective (SP) | window | rule |
//! |---|---|---|---|
//! | forward | all-gather before QKV and MLP-in | that GEMM | chunked with `--tp-comm-overlap`, else exposed |
//! | forward | reduce-scatter after projection and MLP-out | that GEMM | chunked, else exposed |
//! | backward | all-gather of the column-parallel input | its data-gradient GEMM | bulk (asynchronous) |
//! | backward | reduce-scatter of the column-parallel input gradient | its weight-gradient GEMM | bulk |
//! | backward | all-gather of the row-parallel output gradient | its data-gradient GEMM | chunked, else exposed |
//!
//! Without SP the forward all-reduces after the projection and MLP-out are exposed (the
//! userbuffers overlap needs sequence parallelism: Megatron-LM asserts
//! `--tp-comm-overlap` ⇒ `--sequence-parallel`), and the backward all-reduces of the
//! column-parallel input gradients run under their weight-gradient GEMMs (Megatron-LM's
//! `LinearWithGradAccumulationAndAsyncCommunication`, Korthikanti et al. 2022 §4.2.2).
//! Chunked overlap needs the TP group inside one NVLink domain (`scale_up_dims`); across
//! nodes the same collectives are exposed. Chunks `n = t` (one ring-exchange step per rank).
//!
//! The bulk backward overlap is Megatron-LM's asynchronous tensor-parallel all-reduce
//! (`--async-tensor-model-parallel-allreduce`, added in Aug.–Sept. 2021, commits cf7efd4
//! and 16c9044). Before it, the column-parallel input gradient was all-reduced by the
//! autograd function after the layer's whole backward GEMM node, on the critical path:
//! with `tp_bwd_overlap = false` (the runs of Narayanan et al. SC'21, submitted April
//! 2021) every backward collective is exposed.

use super::Ctx;
use super::layer::Linears;
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::windows::{self, Busy, Overlap, bulk, chunked};
use crate::estimate::{Trace, coll_busy};
use crate::units::Seconds;

/// TP windows of one layer: per pass, what stays exposed, and the traffic on each dimension.
#[derive(Clone, Copy)]
pub(super) struct TpWindows {
    pub(super) fwd: Overlap,
    pub(super) bwd: Overlap,
    /// Bytes per device, forward and backward.
    pub(super) bytes: (f64, f64),
    /// Busy time per topology dimension, forward and backward (for sharing with DP).
    pub(super) busy: (Busy, Busy),
    /// One collective of the residual stream `b·s·h`: the reduce-scatter with SP (the
    /// all-reduce without), and the all-gather with SP (zero without), which the embedding
    /// and the head run too.
    pub(super) reduce: Seconds,
    pub(super) gather: Seconds,
}

impl TpWindows {
    /// What the rest of the stage needs of a layer's TP windows once the layer's own times
    /// and bytes are in its `Block`: the links' busy profile and the residual-stream
    /// collectives.
    pub(super) fn links(&self) -> TpLinks {
        TpLinks {
            busy: self.busy,
            reduce: self.reduce,
            gather: self.gather,
        }
    }
}

/// A layer's TP traffic as the stage sees it: the busy time per topology dimension,
/// forward and backward (the DP buckets share the links with it), and the residual-stream
/// collectives the embedding and the head run ([`TpWindows::reduce`], [`TpWindows::gather`]).
#[derive(Clone, Copy)]
pub(super) struct TpLinks {
    pub(super) busy: (Busy, Busy),
    pub(super) reduce: Seconds,
    pub(super) gather: Seconds,
}

impl TpLinks {
    /// `k` layers' share (a hybrid model's weight of one kind): the busy time scales by
    /// `k`; the residual-stream collectives are the same for every block and kept.
    pub(super) fn scaled(&self, k: f64) -> TpLinks {
        TpLinks {
            busy: (
                windows::scaled(&self.busy.0, k),
                windows::scaled(&self.busy.1, k),
            ),
            ..*self
        }
    }

    /// Two blocks in sequence: their busy times add; the residual-stream collectives are
    /// the same for every block and kept.
    pub(super) fn plus(&self, o: &TpLinks) -> TpLinks {
        TpLinks {
            busy: (
                windows::plus(&self.busy.0, &o.busy.0),
                windows::plus(&self.busy.1, &o.busy.1),
            ),
            ..*self
        }
    }
}

/// Whether chunked TP comm–GEMM overlap runs: asked for, with SP, TP group inside the
/// NVLink domain (the first `scale_up_dims` dimensions).
pub(super) fn chunked_overlap(c: &Ctx) -> bool {
    let tp = &c.place.tp;
    c.plan.tp_overlap
        && c.plan.sp
        && tp.index[..tp.n]
            .iter()
            .all(|&d| (d as u32) < c.scale_up_dims)
}

/// The TP/SP windows of one layer for one micro-batch.
pub(super) fn tp_windows<T: Trace>(c: &Ctx, lin: &Linears, tr: &mut T) -> Result<TpWindows> {
    let bytes = c.r * c.e;
    let n = c.plan.tp as f64;
    let span = &c.place.tp;
    let pipelined = chunked_overlap(c);
    let piped = |comm: Seconds, gemm: Seconds, k: f64| {
        if pipelined {
            chunked(comm, gemm, n, k)
        } else {
            Overlap::exposed(comm)
        }
    };
    let asynchronous = c.plan.tp_bwd_overlap;
    let beside = |comm: Seconds, gemm: Seconds, k: f64| {
        if asynchronous {
            bulk(comm, gemm, k)
        } else {
            Overlap::exposed(comm)
        }
    };
    if c.plan.sp {
        let (ag, ag_b) = coll_busy(C::AllGather, bytes, span, c.coll, c.tp_dp_share)?;
        let (rs, rs_b) = coll_busy(C::ReduceScatter, bytes, span, c.coll, c.tp_dp_share)?;
        // The forward all-gathers carry the column-parallel GEMM's input already quantized
        // in 8- and 4-bit recipes: Transformer Engine quantizes the local shard and gathers
        // the quantized tensor (`module/linear.py`, `gather_along_first_dim` with the input
        // quantizer: FP8, blockwise FP8, MXFP8 and NVFP4 all-gathers in `distributed.py`),
        // as torchao's Float8 tensor-parallel layers do; `q` bytes per element as the GEMM
        // keeps it (`memory::saved_input_bytes`). Backward gathers stay 16-bit.
        let q = crate::memory::saved_input_bytes(c.plan.precision, c.plan.fp8_recipe);
        let fwd_bytes = c.r * q.min(c.e);
        let (ag_f, ag_f_b) = if fwd_bytes < bytes {
            let quantized = coll_busy(C::AllGather, fwd_bytes, span, c.coll, c.tp_dp_share)?;
            tr.line(|| {
                format!(
                    "  SP forward all-gathers of the {}-quantized GEMM input: r·q = {}·{q} = {fwd_bytes:.4e} B (16-bit {bytes:.4e} B) → {} (16-bit {ag})",
                    c.plan.precision.name(),
                    c.r,
                    quantized.0
                )
            });
            quantized
        } else {
            (ag, ag_b)
        };
        let k = c.kappa;
        // The pairs of linears the block has: [0, 1] attention (or Mamba projections),
        // [2, 3] MLP; a transformer layer has both, a hybrid model's layer one.
        let pair = |i: usize| {
            let fwd = piped(ag_f, lin.fwd[i], k) + piped(rs, lin.fwd[i + 1], k);
            let bwd = beside(ag, lin.dgrad[i], k)
                + beside(rs, lin.wgrad[i], k)
                + piped(ag, lin.dgrad[i + 1], k);
            (fwd, bwd)
        };
        let (fwd, bwd) = match (c.part.attention_pair(), c.part.mlp_pair()) {
            (true, true) => (
                piped(ag_f, lin.fwd[0], k)
                    + piped(rs, lin.fwd[1], k)
                    + piped(ag_f, lin.fwd[2], k)
                    + piped(rs, lin.fwd[3], k),
                beside(ag, lin.dgrad[0], k)
                    + beside(rs, lin.wgrad[0], k)
                    + beside(ag, lin.dgrad[2], k)
                    + beside(rs, lin.wgrad[2], k)
                    + piped(ag, lin.dgrad[1], k)
                    + piped(ag, lin.dgrad[3], k),
            ),
            (true, false) => pair(0),
            _ => pair(2),
        };
        let n = pairs(c);
        explain(c, pipelined, ag_f, rs, &fwd, &bwd, tr);
        Ok(TpWindows {
            fwd,
            bwd,
            bytes: (n * (fwd_bytes + bytes), 3.0 * n * bytes),
            busy: (
                windows::plus(&windows::scaled(&ag_f_b, n), &windows::scaled(&rs_b, n)),
                windows::plus(&windows::scaled(&ag_b, 2.0 * n), &windows::scaled(&rs_b, n)),
            ),
            reduce: rs,
            gather: ag,
        })
    } else {
        let (ar, ar_b) = coll_busy(C::AllReduce, bytes, span, c.coll, c.tp_dp_share)?;
        let n = pairs(c);
        let fwd = Overlap::exposed(ar * n);
        let k = c.kappa;
        let bwd = match (c.part.attention_pair(), c.part.mlp_pair()) {
            (true, true) => beside(ar, lin.wgrad[0], k) + beside(ar, lin.wgrad[2], k),
            (true, false) => beside(ar, lin.wgrad[0], k),
            _ => beside(ar, lin.wgrad[2], k),
        };
        explain(c, false, ar, Seconds::ZERO, &fwd, &bwd, tr);
        let two = windows::scaled(&ar_b, n);
        Ok(TpWindows {
            fwd,
            bwd,
            bytes: (n * bytes, n * bytes),
            busy: (two, two),
            reduce: ar,
            gather: Seconds::ZERO,
        })
    }
}

/// Column/row-parallel pairs of linears in the block: 2 for a transformer layer, 1 for a
/// hybrid model's layer.
fn pairs(c: &Ctx) -> f64 {
    if c.part.attention_pair() && c.part.mlp_pair() {
        2.0
    } else {
        1.0
    }
}

fn explain<T: Trace>(
    c: &Ctx,
    pipelined: bool,
    a: Seconds,
    b: Seconds,
    fwd: &Overlap,
    bwd: &Overlap,
    tr: &mut T,
) {
    if c.plan.tp <= 1 {
        return;
    }
    tr.line(|| {
        let how = if pipelined {
            format!(
                "chunked with its GEMM, n = t = {}: exposed = C/n + (n−1)/n·max(0, C − G·(1+κ·o/G)), κ = {}",
                c.plan.tp, c.kappa
            )
        } else if c.plan.tp_overlap && c.plan.sp {
            "exposed: the TP group leaves the NVLink domain, where userbuffers overlap cannot run"
                .to_string()
        } else if c.plan.tp_overlap {
            "exposed: TP comm overlap needs sequence parallelism".to_string()
        } else {
            "exposed (no TP comm overlap)".to_string()
        };
        if c.plan.sp {
            format!("  TP window, forward: all-gather {a} ×2, reduce-scatter {b} ×2, {how} → exposed {}, interference {}", fwd.exposed, fwd.slowdown)
        } else {
            format!("  TP window, forward: all-reduce {a} ×2, {how} → exposed {}", fwd.exposed)
        }
    });
    tr.line(|| {
        let how = if c.plan.tp_bwd_overlap {
            "column-parallel collectives under their data/weight-gradient GEMMs (bulk: exposed = max(0, C − G − κ·min(C,G)))"
        } else {
            "column-parallel collectives exposed (no asynchronous TP all-reduce: tp_bwd_overlap = false)"
        };
        format!(
            "  TP window, backward: {how}{} → exposed {}, hidden {}, interference {}",
            if c.plan.sp { "; row-parallel output-gradient all-gathers as in forward" } else { "" },
            bwd.exposed,
            bwd.hidden,
            bwd.slowdown
        )
    });
}

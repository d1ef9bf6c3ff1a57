//! Communication of a transformer plan per micro-batch and iteration: TP/SP collectives
//! per layer, EP all-to-alls, pipeline sends, the tied-embedding synchronisation and the
//! data-parallel gradient reduction (all through `collective::time`).

use super::{Block, Ctx};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::{Comm, Trace, coll, overlap};
use crate::parallel::Recompute;
use crate::units::{Bytes, Seconds};

/// TP communication of one layer and micro-batch.
pub(super) struct TpComm {
    /// Forward: exposed.
    pub(super) fwd: Seconds,
    /// Backward, always exposed.
    pub(super) bwd_exposed: Seconds,
    /// Backward, overlappable with the column-parallel weight-gradient GEMMs.
    pub(super) bwd_under_wgrad: Seconds,
    /// Backward, overlappable with the column-parallel data-gradient GEMMs.
    pub(super) bwd_under_dgrad: Seconds,
    /// Bytes per device, forward.
    pub(super) bytes: f64,
    /// Bytes per device, backward.
    pub(super) bytes_bwd: f64,
}

/// Megatron-LM TP: two all-reduces of b·s·h elements per layer in forward (after the
/// row-parallel layers) and two in backward (before the column-parallel ones) (Shoeybi
/// et al. 2019 §3); with SP each becomes an all-gather / reduce-scatter pair, and backward
/// re-gathers the column-parallel inputs once more (Korthikanti §4.2.2).
pub(super) fn tp_comm(c: &Ctx) -> Result<TpComm> {
    let bytes = c.r * c.e;
    if c.plan.sp {
        let ag = coll(C::AllGather, bytes, &c.place.tp, c.coll)?;
        let rs = coll(C::ReduceScatter, bytes, &c.place.tp, c.coll)?;
        Ok(TpComm {
            fwd: (ag + rs) * 2.0,
            bwd_exposed: ag * 2.0,
            bwd_under_wgrad: rs * 2.0,
            bwd_under_dgrad: ag * 2.0,
            bytes: 4.0 * bytes,
            bytes_bwd: 6.0 * bytes,
        })
    } else {
        let ar = coll(C::AllReduce, bytes, &c.place.tp, c.coll)?;
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
pub(super) fn ep_comm(c: &Ctx) -> Result<(Seconds, f64)> {
    if c.m.experts <= 1 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let bytes = c.tokens * c.m.top_k as f64 * c.m.h * c.e;
    Ok((
        coll(C::AllToAll, bytes, &c.place.ep, c.coll)? * 2.0,
        2.0 * bytes,
    ))
}

/// Pipeline send/recv per micro-batch and stage: `2·v` transfers of `b·s·h` elements,
/// split over the TP ranks (scatter/gather optimisation, Narayanan et al. SC'21 §4.1) and
/// gathered back over TP when SP does not already keep them split.
pub(super) fn pp_comm(c: &Ctx) -> Result<(Seconds, f64)> {
    if c.plan.pp <= 1 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let t = c.plan.tp as f64;
    let bytes = c.r * c.e / t;
    let mut one = coll(C::SendRecv, bytes, &c.place.pp, c.coll)?;
    if !c.plan.sp {
        one += coll(C::AllGather, c.r * c.e, &c.place.tp, c.coll)?;
    }
    let n = 2.0 * c.plan.v as f64;
    Ok((one * n, bytes * n))
}

/// Tied embeddings with p > 1: the first and last stage all-reduce the embedding
/// gradient (V·h/t) once per iteration (Megatron-LM).
pub(super) fn embedding_sync(c: &Ctx) -> Result<(Seconds, f64)> {
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
    Ok((coll(C::AllReduce, bytes, &pair, c.coll)?, bytes))
}

/// Data-parallel gradient reduction. ZeRO-0: all-reduce; ZeRO-1/2: reduce-scatter +
/// all-gather of the weights; ZeRO-3/FSDP: all-gather of the weights in every forward and
/// backward and a reduce-scatter per micro-batch, hidden behind that pass's compute. With
/// bucketed overlap the reduction hides behind the last micro-batch's backward except
/// the last bucket.
pub(super) fn dp_comm<T: Trace>(c: &Ctx, params: f64, worst: &Block, tr: &mut T) -> Result<Comm> {
    let plan = c.plan;
    let g = plan.optimizer.bytes_per_param().1;
    let (grad, weights) = (params * g, params * c.e);
    let dp = c.grad_span;
    if plan.zero == 3 {
        // HSDP: shard within the inner group, all-reduce across replicas (hsdp.rs).
        let groups = if plan.hsdp > 1 {
            Some(super::hsdp::groups(c)?)
        } else {
            None
        };
        let dp = groups.as_ref().map_or(dp, |g| &g.0);
        let (re, rh, rb) = match &groups {
            Some((_, replica)) => super::hsdp::replica_reduce(c, replica, grad, worst)?,
            None => (Seconds::ZERO, Seconds::ZERO, 0.0),
        };
        let ag = coll(C::AllGather, weights, dp, c.dp_coll)?;
        let rs = coll(C::ReduceScatter, grad, dp, c.dp_coll)?;
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
            exposed: (ef + eb + er) * mb + re,
            hidden: (hf + hb + hr) * mb + rh,
            bytes: Bytes::new(mb * (passes * weights + grad) + rb),
        });
    }
    let (reduce, gather) = if plan.zero == 0 {
        (coll(C::AllReduce, grad, dp, c.dp_coll)?, Seconds::ZERO)
    } else {
        (
            coll(C::ReduceScatter, grad, dp, c.dp_coll)?,
            coll(C::AllGather, weights, dp, c.dp_coll)?,
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

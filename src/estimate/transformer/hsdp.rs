//! Hybrid sharded data parallelism (HSDP; PyTorch FSDP `HYBRID_SHARD`, FSDP2 with a 2-D
//! device mesh; Zhao et al. 2023, "PyTorch FSDP" §3.2.2): the model states are sharded
//! ZeRO-3 style within a shard group of `g` ranks (parameters all-gathered before each
//! pass, gradients reduce-scattered after each micro-batch, on the group's dimensions), and
//! replicated across the `dp/g` groups, which all-reduce their gradient shard
//! (`grad / g` bytes) once per iteration. The replica all-reduce runs behind the last
//! micro-batch's backward except its last bucket, as the DP reduction does.

use super::{Block, Ctx};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::coll;
use crate::estimate::windows::{Overlap, bulk};
use crate::parallel::Span;

/// The shard and replica groups: the inner `hsdp` ranks of DP and the rest.
pub(super) fn groups(c: &Ctx) -> Result<(Span, Span)> {
    c.place.dp.split(c.plan.hsdp)
}

/// The replica groups' all-reduce of the gradient shard as a window (the last bucket
/// exposed, the rest a bulk window under the last micro-batch's backward), and its bytes.
pub(super) fn replica_reduce(
    c: &Ctx,
    replica: &Span,
    grad: f64,
    worst: &Block,
) -> Result<(Overlap, f64)> {
    let plan = c.plan;
    if plan.hsdp <= 1 || plan.hsdp >= plan.dp {
        return Ok((Overlap::default(), 0.0));
    }
    let shard = grad / plan.hsdp as f64;
    let ar = coll(C::AllReduce, shard, replica, c.dp_coll)?;
    let last = ar * (plan.dp_bucket_bytes().get() / shard).min(1.0);
    let w = if plan.dp_overlap {
        bulk(
            ar - last,
            super::comm::dp_window(c, &worst.bwd) + super::comm::dp_window(c, &worst.rec),
            c.kappa,
        )
    } else {
        Overlap::exposed(ar - last)
    };
    Ok((
        Overlap {
            exposed: w.exposed + last,
            ..w
        },
        shard,
    ))
}

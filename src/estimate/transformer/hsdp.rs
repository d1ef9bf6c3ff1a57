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
use crate::units::Seconds;

/// The shard and replica groups: the inner `hsdp` ranks of DP and the rest.
pub(super) fn groups(c: &Ctx) -> Result<(Span, Span)> {
    c.place.dp.split(c.plan.hsdp)
}

/// The replica groups' all-reduce of the gradient shard: its window, its bytes and the
/// parts `--explain` shows.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct ReplicaReduce {
    /// Exposed, hidden and slowdown of the all-reduce.
    pub w: Overlap,
    /// Bytes per device: the gradient shard `grad / hsdp`.
    pub bytes: f64,
    /// The whole all-reduce `AR`.
    pub ar: Seconds,
    /// Its last bucket, `AR · min(bucket / shard, 1)`: always exposed.
    pub last: Seconds,
    /// The compute beside the rest: the last micro-batch's backward and recompute (zero
    /// without DP overlap).
    pub window: Seconds,
}

/// The replica groups' all-reduce of the gradient shard as a window (the last bucket
/// exposed, the rest a bulk window under the last micro-batch's backward and recompute),
/// and its bytes.
pub(super) fn replica_reduce(
    c: &Ctx,
    replica: &Span,
    grad: f64,
    worst: &Block,
) -> Result<ReplicaReduce> {
    let plan = c.plan;
    if plan.hsdp <= 1 || plan.hsdp >= plan.dp {
        return Ok(ReplicaReduce::default());
    }
    let shard = grad / plan.hsdp as f64;
    let ar = coll(C::AllReduce, shard, replica, c.dp_coll)?;
    let last = ar * (plan.dp_bucket_bytes().get() / shard).min(1.0);
    let (w, window) = if plan.dp_overlap {
        let window = super::comm::dp_window(c, &worst.bwd) + super::comm::dp_window(c, &worst.rec);
        (bulk(ar - last, window, c.kappa), window)
    } else {
        (Overlap::exposed(ar - last), Seconds::ZERO)
    };
    Ok(ReplicaReduce {
        w: Overlap {
            exposed: w.exposed + last,
            ..w
        },
        bytes: shard,
        ar,
        last,
        window,
    })
}

//! Data-parallel models without a transformer's structure: DLRM (embedding tables sharded
//! over all devices with all-to-all, MLPs data-parallel; Naumov et al. 2019 §4) and
//! generic layered models (every layer replicated, gradients all-reduced).

use super::{Comm, CommClass, Estimate, GroupDims, Times, Trace, coll, finish, overlap};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::memory::{self, Memory};
use crate::model::{Dlrm, Layered};
use crate::parallel::{Placement, Plan};
use crate::system::System;
use crate::units::{Bytes, Flop, Seconds};

fn groups(place: &Placement) -> [GroupDims; 4] {
    [
        GroupDims::from(&place.tp),
        GroupDims::from(&place.ep),
        GroupDims::from(&place.dp),
        GroupDims::from(&place.pp),
    ]
}

/// The DP bucket of these data-parallel models: the one given, or PyTorch DDP's
/// `bucket_cap_mb` default of 25 MB (torch.nn.parallel.DistributedDataParallel).
fn dp_bucket(plan: &Plan) -> Bytes {
    plan.dp_bucket.unwrap_or(Bytes::new(25e6))
}

/// Gradient all-reduce of `bytes`, bucketed and hidden behind `window` when enabled.
fn grad_sync(
    sys: &System,
    plan: &Plan,
    place: &Placement,
    bytes: f64,
    window: Seconds,
) -> Result<Comm> {
    let t = coll(C::AllReduce, bytes, &place.dp, &sys.dp_collective)?;
    let last = t * (dp_bucket(plan).get() / bytes.max(1.0)).min(1.0);
    let (mut exposed, hidden) = overlap(t - last, window, plan.dp_overlap);
    exposed += last;
    Ok(Comm {
        exposed,
        hidden,
        bytes: Bytes::new(if place.dp.size > 1 { bytes } else { 0.0 }),
    })
}

/// DLRM: per device and micro-batch of b samples, MLP GEMMs (M = b, N = K = typical
/// width), embedding lookups from HBM (`b · tables · pooling · dim · bytes`; backward 2×),
/// and an all-to-all of the pooled vectors `b · tables · dim · bytes` forward and backward
/// over all devices. MLP gradients are all-reduced.
pub(super) fn dlrm<T: Trace>(
    d: &Dlrm,
    sys: &System,
    plan: &Plan,
    place: &Placement,
    tr: &mut T,
) -> Result<Estimate> {
    let dev = &sys.device;
    let peak = dev.gemm_peak(plan.precision)?;
    let b = plan.micro_batch as f64;
    let eff = dev.gemm_efficiency(b, d.mlp_width, d.mlp_width, 1.0);
    let fwd_mlp = Flop::new(d.forward_flops * b) / (peak * eff);
    let lookup = dev.memory_time(Bytes::new(d.lookup_bytes * b), 1.0);
    let a2a_bytes = b * d.tables * d.dim * d.element_bytes;
    let a2a = coll(C::AllToAll, a2a_bytes, &place.dp, &sys.collective)?;
    tr.line(|| format!("MLP: {:.3e} FLOP/sample × {b} at {:.1}% of peak = {fwd_mlp}; lookups {lookup}; all-to-all {a2a} each way", d.forward_flops, 100.0 * eff));
    let mb = plan.micro_batches as f64;
    let mut t = Times {
        forward: (fwd_mlp + lookup) * mb,
        backward: (fwd_mlp * 2.0 + lookup * 2.0) * mb,
        ..Times::default()
    };
    t.comm[CommClass::Ep as usize] = Comm {
        exposed: a2a * 2.0 * mb,
        hidden: Seconds::ZERO,
        bytes: Bytes::new(2.0 * a2a_bytes * mb),
    };
    t.comm[CommClass::Dp as usize] =
        grad_sync(sys, plan, place, d.mlp_params * 4.0, fwd_mlp * 2.0)?;
    // MLPs: Adam over fp32 states (16 B/param); embeddings: a sparse update of the rows
    // this device's tables saw this iteration (read gradient, read and write the row).
    let emb_local = d.embedding_params / plan.gpus as f64;
    let rows_touched =
        d.lookup_bytes / d.element_bytes * plan.global_batch as f64 / plan.gpus as f64;
    t.optimizer = dev.memory_time(
        Bytes::new(d.mlp_params * 16.0 + rows_touched * 3.0 * d.element_bytes),
        4.0,
    );
    let flops = 3.0 * d.forward_flops * plan.global_batch as f64;
    let (t, metrics) = finish(
        t,
        (flops, flops),
        (dev.peak16(peak).get(), peak.get()),
        plan,
        1.0,
    );
    let s = memory::model_states(d.mlp_params, plan.optimizer, plan.zero, plan.dp);
    let emb = emb_local * d.element_bytes;
    let memory = Memory::new(
        [s[0] + emb, s[1], s[2] + emb],
        d.activations * b * 4.0,
        2.0 * a2a_bytes,
        dev.memory(),
        memory::reserve(dev, plan),
    );
    Ok(Estimate {
        plan: *plan,
        time: t,
        memory,
        metrics,
        groups: groups(place),
        tokens_per_sample: 1.0,
    })
}

/// Layered model: forward = Σ FLOPs / (peak · efficiency) + Σ bytes / bandwidth per
/// sample; backward = 2 × forward (data and weight gradients); gradients of the layers
/// marked `all-reduce` are all-reduced in bf16, overlapped with backward.
pub(super) fn layered<T: Trace>(
    l: &Layered,
    sys: &System,
    plan: &Plan,
    place: &Placement,
    tr: &mut T,
) -> Result<Estimate> {
    let dev = &sys.device;
    let peak = dev.gemm_peak(plan.precision)?;
    let b = plan.micro_batch as f64;
    let fwd = Flop::new(l.forward_flops * b) / (peak * l.efficiency)
        + dev.memory_time(Bytes::new(l.bytes * b), l.n_layers as f64);
    tr.line(|| {
        format!(
            "forward: {:.3e} FLOP/sample × {b} at {:.0}% of peak + {} moved = {fwd}",
            l.forward_flops,
            100.0 * l.efficiency,
            Bytes::new(l.bytes * b)
        )
    });
    let mb = plan.micro_batches as f64;
    let mut t = Times {
        forward: fwd * mb,
        backward: fwd * 2.0 * mb,
        ..Times::default()
    };
    t.comm[CommClass::Dp as usize] = grad_sync(sys, plan, place, l.synced_params * 2.0, fwd * 2.0)?;
    t.optimizer = dev.memory_time(Bytes::new(l.params * 32.0), 4.0);
    let flops = 3.0 * l.forward_flops * plan.global_batch as f64;
    let (t, metrics) = finish(
        t,
        (flops, flops),
        (dev.peak16(peak).get(), peak.get()),
        plan,
        1.0,
    );
    let s = memory::model_states(l.params, plan.optimizer, plan.zero, plan.dp);
    let memory = Memory::new(
        s,
        l.activation * b,
        2.0 * dp_bucket(plan).get(),
        dev.memory(),
        memory::reserve(dev, plan),
    );
    Ok(Estimate {
        plan: *plan,
        time: t,
        memory,
        metrics,
        groups: groups(place),
        tokens_per_sample: 1.0,
    })
}

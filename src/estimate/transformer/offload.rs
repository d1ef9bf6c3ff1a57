//! Where an offload plan (`crate::offload`) joins a transformer estimate: its inputs from
//! the slowest stage (compute per micro-batch, parameters, activations), its exposed
//! transfers into the iteration, the CPU step in place of the GPU's, and the HBM it frees.

use super::{Block, Ctx};
use crate::error::Result;
use crate::estimate::{Times, Trace};
use crate::memory::{self, Memory};
use crate::offload::{self, Cost, Inputs, Tiers};
use crate::parallel::{Recompute, Zero3Impl};

/// The cost's inputs for the device of the slowest stage `worst` holding `params`
/// parameters (`trainable` of them training).
fn inputs(c: &Ctx, worst: &Block, params: f64, trainable: f64) -> Inputs {
    let p = c.plan;
    let dp_cp = (p.dp * p.cp) as f64;

    let param_shard = if p.hsdp > 1 { p.hsdp as f64 } else { dp_cp };
    let (_, layers, lmb) = memory::peak_stage(p);
    let per_layer = memory::layer_activation_bytes(c.m, p, c.m.bias) / p.cp as f64;
    let regather = p.zero3_impl == Zero3Impl::Deepspeed2021 && p.recompute == Recompute::Full;
    Inputs {
        opt_params: if p.zero >= 1 {
            super::state::sharded(c, trainable)
        } else {
            trainable
        },
        param_shard: if p.zero == 3 {
            params / param_shard
        } else {
            params
        },
        bytes: p.optimizer.bytes_per_param(),
        act_per_mb: per_layer * layers as f64,
        act_total: per_layer * lmb,
        layers: p.stages.max_layers() as f64,
        micro_batches: p.micro_batches as f64,
        fwd: worst.fwd.compute(),
        bwd: worst.bwd.compute() + worst.rec.compute(),
        bwd_fetches: if regather { 2.0 } else { 1.0 },
    }
}

/// Applies the plan's offload to `times` (before `finish`): the cost, its exposed
/// transfers, and the CPU step replacing the GPU optimizer step. Returns the inputs for
/// [`memory`].
pub(super) fn time<T: Trace>(
    c: &Ctx,
    tiers: &Tiers,
    worst: &Block,
    (params, trainable): (f64, f64),
    times: &mut Times,
    tr: &mut T,
) -> Result<Inputs> {
    let x = inputs(c, worst, params, trainable);
    let cost = offload::cost::evaluate(c.plan.offload, tiers, &x)?;
    if c.plan.offload.optimizer.off() {
        times.optimizer = cost.cpu_step;
    }
    times.offload = cost;
    explain(&x, &cost, tr);
    Ok(x)
}

/// The offload hook on memory: HBM states and activations as [`offload::cost::hbm`] leaves
/// them, the host and NVMe bytes checked against the tiers.
pub(super) fn memory(c: &Ctx, tiers: &Tiers, x: &Inputs, cost: &Cost, m: Memory) -> Memory {
    let (states, acts) = offload::cost::hbm(
        &c.plan.offload,
        x,
        [m.weights.get(), m.gradients.get(), m.optimizer.get()],
        m.activations.get(),
    );
    let caps = [
        tiers.host.map(|t| t.capacity),
        tiers.nvme.map(|t| t.capacity),
    ];
    Memory::new(states, acts, m.buffers.get(), m.capacity, m.reserve).with_tiers(
        cost.host_bytes,
        cost.nvme_bytes,
        caps,
    )
}

fn explain<T: Trace>(x: &Inputs, k: &Cost, tr: &mut T) {
    use crate::units::Bytes;
    let b = |v: f64| Bytes::new(v);
    tr.line(|| {
        format!(
            "offload {}: optimizer shard {:.4e} params, parameter shard {:.4e}, {} layers, {} micro-batches; per micro-batch forward {} and backward {} of compute hide the transfers one layer ahead (chunked window, κ = 0: copy engines)",
            k.plan.name(),
            x.opt_params,
            x.param_shard,
            x.layers,
            x.micro_batches,
            x.fwd,
            x.bwd
        )
    });
    for (name, t) in [
        ("parameter fetches (up, every pass)", k.params_fetch),
        (
            "activations (down in forward, up in backward, each)",
            k.activations,
        ),
        ("gradients streamed down in backward", k.grads_stream),
        ("gradients down at the step", k.grads_step),
        ("updated parameters after the step", k.params_step),
    ] {
        if t.bytes > 0.0 {
            tr.line(|| format!("  {name}: {} per iteration → {}", b(t.bytes), t.time));
        }
    }
    if k.cpu_step.get() > 0.0 {
        tr.line(|| {
            format!(
                "  CPU Adam step: {:.4e} params / host rate → {} (replaces the GPU step)",
                x.opt_params, k.cpu_step
            )
        });
    }
    tr.line(|| {
        format!(
            "  exposed: forward {} + backward {} + step {} = {}; hidden {}; on the host {}, on NVMe {}",
            k.exposed_fwd,
            k.exposed_bwd,
            k.exposed_step,
            k.exposed(),
            k.hidden(),
            b(k.host_bytes),
            b(k.nvme_bytes)
        )
    });
}

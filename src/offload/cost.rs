//! What an offload plan moves, when, and what it costs per iteration; what it frees in HBM
//! and holds on the slower tiers. Closed forms over one device of the slowest pipeline
//! stage, in the windows of `estimate::windows`:
//!
//! - **Per pass, one layer ahead.** Parameter fetches (ZeRO-Infinity prefetches the next
//!   layer's shard while the current one computes; `parameter_offload.py`,
//!   `partitioned_param_coordinator.py`), activation copies (down as forward produces them,
//!   up one layer ahead of backward) and streamed gradients (down as backward produces them,
//!   DeepSpeed `stage_1_and_2.py`, `copy_grads_in_partition`) run on the copy engines beside
//!   the pass's compute: `exposed = windows::chunked(C, G, L, κ = 0)` with `C` the pass's
//!   transfer time (the busier direction of the full-duplex link: up and down move at once,
//!   one direction's transfers queue), `G` its compute and `L` its layers. κ = 0: DMA copies
//!   hold no SMs.
//! - **At the step, in series.** The gradients that stayed on the GPU go down
//!   (Megatron-core `HybridDeviceOptimizer` copies them in `step`), the CPU runs Adam over
//!   its shard, the updated 16-bit parameters come back up (DeepSpeed copies the fp16
//!   partition back after `optimizer.step()`; Megatron-core without
//!   `--overlap-cpu-optimizer-d2h-h2d`): `T = t_down + t_cpu + t_up`, all exposed.
//!
//! The CPU step: `t_cpu = P_opt / r`, with `r` the host's Adam rate per GPU
//! ([`super::Tier::adam_rate`]); with the optimizer on NVMe the states and gradients are
//! swapped in and the states out around it, pipelined (DeepSpeed
//! `pipelined_optimizer_swapper.py`): `t = max(P_opt / r, (o + 4 + o)·P_opt / B_nvme)`.

use super::{Offload, Place, Tier, TierKind, Tiers};
use crate::error::{Error, Result};
use crate::estimate::windows::chunked;
use crate::units::Seconds;

/// Bytes per parameter of the fp32 gradient the CPU optimizer reads (DeepSpeed's
/// `single_partition_of_fp32_groups[i].grad`; Megatron-core's CPU parameter `.grad`).
pub const FP32_GRAD: f64 = 4.0;

/// Gradient elements in DeepSpeed's reduce bucket (`reduce_bucket_size`, default 5·10⁸,
/// `deepspeed/runtime/zero/config.py`): what HBM keeps of the gradients while they stream
/// to the host.
pub const REDUCE_BUCKET: f64 = 5e8;

/// What the cost depends on, for one device of the slowest stage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Inputs {
    /// Parameters whose optimizer state this device holds (trainable / ZeRO shard).
    pub opt_params: f64,
    /// Parameters of this device's ZeRO-3 shard (what `params` offload moves per pass).
    pub param_shard: f64,
    /// (weight, gradient, optimizer-state) bytes per parameter.
    pub bytes: (f64, f64, f64),
    /// Activation bytes one micro-batch keeps on this stage.
    pub act_per_mb: f64,
    /// Activation bytes in flight at the peak (what HBM holds without offload).
    pub act_total: f64,
    /// Layers of the stage (one transfer each per pass).
    pub layers: f64,
    /// Micro-batches per iteration.
    pub micro_batches: f64,
    /// Forward compute of one micro-batch.
    pub fwd: Seconds,
    /// Backward (and recomputation) compute of one micro-batch.
    pub bwd: Seconds,
    /// Parameter fetches in backward per micro-batch (2 when DeepSpeed 2021 re-gathers for
    /// the recomputed forward, else 1).
    pub bwd_fetches: f64,
}

/// One kind of traffic per iteration.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Transfer {
    /// Bytes per device per iteration.
    pub bytes: f64,
    /// Time on its link, alone.
    pub time: Seconds,
}

impl Transfer {
    fn on(t: Option<&Tier>, bytes: f64, n: f64) -> Transfer {
        match t {
            Some(t) if bytes > 0.0 => Transfer {
                bytes,
                time: t.time(bytes, n),
            },
            _ => Transfer::default(),
        }
    }
    fn times(self, k: f64) -> Transfer {
        Transfer {
            bytes: self.bytes * k,
            time: self.time * k,
        }
    }
}

/// The cost of an offload plan per iteration, and where the state lives.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Cost {
    /// The plan.
    pub plan: Offload,
    /// Parameter fetches (up, every pass).
    pub params_fetch: Transfer,
    /// Activations down in forward (the same bytes come up in backward).
    pub activations: Transfer,
    /// Gradients streamed down during backward.
    pub grads_stream: Transfer,
    /// Gradients down once, at the step.
    pub grads_step: Transfer,
    /// Updated parameters up (or to the parameter tier) after the step.
    pub params_step: Transfer,
    /// The CPU optimizer step (replaces the GPU's).
    pub cpu_step: Seconds,
    /// Transfers exposed beside the forward passes, the backward passes, and at the step.
    pub exposed_fwd: Seconds,
    /// See `exposed_fwd`.
    pub exposed_bwd: Seconds,
    /// See `exposed_fwd`.
    pub exposed_step: Seconds,
    /// Per device, on the host and on NVMe.
    pub host_bytes: f64,
    /// See `host_bytes`.
    pub nvme_bytes: f64,
}

impl Cost {
    /// Transfer time on the critical path: forward + backward + step.
    pub fn exposed(&self) -> Seconds {
        self.exposed_fwd + self.exposed_bwd + self.exposed_step
    }

    /// Transfer time hidden under compute.
    pub fn hidden(&self) -> Seconds {
        let all = self.params_fetch.time
            + self.activations.time * 2.0
            + self.grads_stream.time
            + self.grads_step.time
            + self.params_step.time;
        (all - self.exposed()).max(Seconds::ZERO)
    }
}

fn need<'a>(tiers: &'a Tiers, kind: TierKind, what: &str) -> Result<&'a Tier> {
    tiers.get(kind).ok_or_else(|| {
        Error::input(
            "offload",
            format!(
                "{what} offload needs a '{}' tier in the system's [[memory_tiers]] (see docs/offload.md)",
                kind.name()
            ),
        )
    })
}

/// The tiers a plan uses: (optimizer's, parameters', host with a CPU).
fn tiers_of<'a>(
    o: &Offload,
    tiers: &'a Tiers,
) -> Result<(Option<&'a Tier>, Option<&'a Tier>, Option<&'a Tier>)> {
    let get = |p: Place, what| p.tier().map(|k| need(tiers, k, what)).transpose();
    let opt = get(o.optimizer, "optimizer")?;
    let params = get(o.params, "parameter")?;
    let host = if o.optimizer.off() || o.activations.off() {
        let h = need(tiers, TierKind::Host, "optimizer or activation")?;
        if o.optimizer.off() && h.adam_rate <= 0.0 {
            return Err(Error::input(
                "offload",
                "optimizer offload needs the host tier's adam_params_per_s (the CPU Adam rate)",
            ));
        }
        Some(h)
    } else {
        None
    };
    Ok((opt, params, host))
}

/// The cost of `o` with these tiers and inputs (module documentation for the formulas).
pub fn evaluate(o: Offload, tiers: &Tiers, x: &Inputs) -> Result<Cost> {
    let (opt, par, host) = tiers_of(&o, tiers)?;
    let (w, g, os) = x.bytes;
    let (l, m) = (x.layers.max(1.0), x.micro_batches.max(1.0));
    let fetch = Transfer::on(par, x.param_shard * w, l);
    let f = activation_share(&o, x)?;
    let acts = if o.activations.off() {
        Transfer::on(host, x.act_per_mb * f, (l * f).max(1.0))
    } else {
        Transfer::default()
    };
    let (grad_mb, grad_last) = if o.gradients.off() {
        // 16-bit gradients per micro-batch, fp32 at the accumulation boundary
        // (`async_inplace_copy_grad_to_fp32_buffer_from_gpu` casts before the copy).
        (
            Transfer::on(opt, x.opt_params * g, l),
            Transfer::on(opt, x.opt_params * FP32_GRAD, l),
        )
    } else {
        (Transfer::default(), Transfer::default())
    };
    let fwd_c = fetch.time.max(acts.time);
    let bwd_up = fetch.time * x.bwd_fetches + acts.time;
    let window = |c: Seconds, g: Seconds| chunked(c, g, l, 0.0).exposed;
    let exposed_fwd = window(fwd_c, x.fwd) * m;
    let exposed_bwd = window(bwd_up.max(grad_mb.time), x.bwd) * (m - 1.0)
        + window(bwd_up.max(grad_last.time), x.bwd);
    let mut c = Cost {
        plan: o,
        params_fetch: fetch.times(m * (1.0 + x.bwd_fetches)),
        activations: acts.times(m),
        grads_stream: Transfer {
            bytes: grad_mb.bytes * (m - 1.0) + grad_last.bytes,
            time: grad_mb.time * (m - 1.0) + grad_last.time,
        },
        exposed_fwd,
        exposed_bwd,
        ..Cost::default()
    };
    step(&o, (opt, par, host), x, &mut c);
    c.exposed_step = c.grads_step.time + c.params_step.time;
    // Where the state lives, per device.
    let mut put = |p: Place, b: f64| match p {
        Place::Host => c.host_bytes += b,
        Place::Nvme => c.nvme_bytes += b,
        Place::Hbm => {}
    };
    put(o.optimizer, x.opt_params * (os + FP32_GRAD));
    put(o.params, x.param_shard * w);
    put(o.activations, x.act_total * f);
    Ok(c)
}

/// The share of a stage's activations that leaves HBM: `N/L` for `activations=N` on a
/// stage of `L` layers, else 1. Megatron-core offloads fewer layers than it runs
/// (`TransformerConfig`: `cpu_offloading_num_layers < num_layers`), so `N ≥ L` is refused.
pub fn activation_share(o: &Offload, x: &Inputs) -> Result<f64> {
    let n = f64::from(o.activation_layers);
    if n == 0.0 {
        return Ok(1.0);
    }
    if n >= x.layers {
        return Err(Error::input(
            "offload",
            format!(
                "activations={}: a stage has {} layers; offload fewer (Megatron-core's cpu_offloading_num_layers < the layers), or write 'activations' for all but two",
                o.activation_layers, x.layers
            ),
        ));
    }
    Ok(n / x.layers)
}

/// The step's transfers and the CPU step into `c`.
fn step(o: &Offload, t: (Option<&Tier>, Option<&Tier>, Option<&Tier>), x: &Inputs, c: &mut Cost) {
    let (opt, par, host) = t;
    let (w, g, os) = x.bytes;
    let l = x.layers.max(1.0);
    if o.optimizer.off() {
        if !o.gradients.off() {
            c.grads_step = Transfer::on(opt, x.opt_params * g, l);
        }
        let rate = host.map_or(0.0, |h| h.adam_rate);
        let cpu = Seconds::new(x.opt_params / rate);
        let swap = if o.optimizer == Place::Nvme {
            opt.map_or(Seconds::ZERO, |n| {
                n.time(x.opt_params * (2.0 * os + FP32_GRAD), 1.0)
            })
        } else {
            Seconds::ZERO
        };
        c.cpu_step = cpu.max(swap);
        // Updated 16-bit parameters: up to the GPU, or into the parameter tier.
        c.params_step = match o.params {
            Place::Hbm => Transfer::on(opt, x.opt_params * w, l),
            Place::Nvme => Transfer::on(par, x.param_shard * w, l),
            Place::Host => Transfer::default(),
        };
    } else if o.params.off() {
        // A GPU step over a shard that lives on the parameter tier writes it back.
        c.params_step = Transfer::on(par, x.param_shard * w, l);
    }
}

/// HBM model states `[w, g, o]` and activations with `o` applied: the optimizer states
/// leave (`o → 0`), streamed gradients leave but for one reduce bucket
/// (`g → min(g, 5·10⁸·g_B)`), the parameter shard leaves (`w − P_shard·w_B`), offloaded
/// activations keep two layers of one micro-batch (the one computing, the one in flight);
/// with `activations=N` of `L` layers, `(L − N)/L` of them stay (Transformer Engine's
/// `get_cpu_offload_context`: activation memory `(layers − offloaded layers) · T`).
pub fn hbm(o: &Offload, x: &Inputs, states: [f64; 3], acts: f64) -> ([f64; 3], f64) {
    let [mut w, mut g, mut os] = states;
    if o.optimizer.off() {
        os = 0.0;
    }
    if o.gradients.off() {
        g = g.min(REDUCE_BUCKET * x.bytes.1);
    }
    if o.params.off() {
        w = (w - x.param_shard * x.bytes.0).max(0.0);
    }
    let acts = match (o.activations.off(), o.activation_layers) {
        (false, _) => acts,
        (true, 0) => acts.min(2.0 * x.act_per_mb / x.layers.max(1.0)),
        (true, n) => acts * (1.0 - (f64::from(n) / x.layers.max(1.0)).min(1.0)),
    };
    ([w, g, os], acts)
}

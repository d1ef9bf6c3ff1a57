//! Low-rank adaptation (LoRA; Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
//! Models" §4.1): every linear layer `W` (k → n) is frozen and gains a trainable pair
//! `A` (k → r) and `B` (r → n). Per linear layer and micro-batch of `M` tokens:
//! - forward: the frozen GEMM plus the adapter GEMMs `M×r×k` and `M×n×r`;
//! - backward: the frozen layer's data gradient only (no weight gradient: `W` is frozen),
//!   plus the adapters' data and weight gradients (two GEMMs each);
//! - trainable parameters `r·(n + k)`: only these have gradients, optimizer states and a
//!   data-parallel reduction; the frozen weights stay 16-bit.

use super::Ctx;
use crate::parallel::LoraTargets;
use crate::units::Seconds;

/// Whether linear layer `i` of `linears` (0 = the first attention projection: QKV, or
/// MLA's query down-projection) has an adapter.
pub(super) fn adapted(c: &Ctx, i: usize) -> bool {
    (c.plan.lora_targets == LoraTargets::All && i < 10) || i == 0
}

/// (forward, backward) time of the adapters of a linear layer of shape M×N×K (`batch`
/// copies, as grouped expert GEMMs), in 16-bit. With one side of size r the adapter
/// GEMMs are skinny and memory-bound: each takes the roofline
/// `max(2·M·N·K / (peak · e_gemm), 2·(M·K + K·N + M·N) / (bw · e_mem))` plus a launch
/// (Williams et al. 2009; DESIGN.md §3), not the tiled-GEMM model of large GEMMs.
pub(super) fn adapter_time(c: &Ctx, mm: f64, n: f64, k: f64, batch: f64) -> (Seconds, Seconds) {
    let r = c.plan.lora_rank as f64;
    let down = (mm, r, k);
    let up = (mm, n, r);
    let rate = c.attn_peak * c.dev.spec.efficiency.gemm;
    let g = |(m, n, k): (f64, f64, f64)| {
        let flop = crate::units::Flop::new(2.0 * m * n * k * batch);
        let bytes = 2.0 * (m * k + k * n + m * n) * batch;
        (flop / rate).max(c.mem(bytes, 0.0)) + c.dev.spec.efficiency.kernel_overhead
    };
    let fwd = g(down) + g(up);
    // Data gradients M×k×r and M×r×n; weight gradients k×r×M and r×n×M.
    let bwd = g((mm, k, r)) + g((mm, r, n)) + g((k, r, mm)) + g((r, n, mm));
    (fwd, bwd)
}

/// Trainable (adapter) parameters of one transformer layer on one TP rank: `r·(n + k)`
/// summed over its linear layers (attention projections, each routed and shared expert's
/// MLP), with the TP-split side divided by `t`.
pub(super) fn layer_adapter_params(c: &Ctx) -> f64 {
    let (m, t) = (c.m, c.plan.tp as f64);
    let r = c.plan.lora_rank as f64;
    let g = if m.gated { 2.0 } else { 1.0 };
    let proj = m.attn.projections(m.h, t);
    if c.plan.lora_targets == LoraTargets::Qkv {
        return r * (proj[0].0 + proj[0].1);
    }
    let attn: f64 = proj
        .iter()
        .filter(|p| p.0 > 0.0)
        .map(|&(n, k, _)| r * (n + k))
        .sum();
    let mlp = |f: f64| r * (g * f / t + m.h) + r * (m.h + f / t);
    let experts = if m.experts > 1 {
        m.experts as f64 / c.plan.ep as f64
    } else {
        1.0
    };
    let shared = if m.shared_f > 0.0 {
        mlp(m.shared_f)
    } else {
        0.0
    };
    attn + experts * mlp(m.f) + shared
}

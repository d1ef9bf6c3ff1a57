//! Overlap windows (DESIGN.md §6): a communication hides only behind the compute that runs
//! while it is in flight and does not depend on it. Each rule below takes one window — a
//! communication time `C` and the compute `G` that can run beside it — and returns what the
//! critical path sees. The transformer estimate applies them per layer and pass
//! (`transformer/layer.rs`: TP/SP), per bucket or per layer (`transformer/comm.rs`: DP,
//! ZeRO-3) and per pipeline phase (PP); identical layers are computed once and multiplied.
//!
//! Three effects, each a closed form:
//! - **Window** ([`bulk`], [`chunked`]): what part of `C` fits under `G`.
//! - **Interference**: while a collective overlaps compute, its kernels occupy SMs and HBM
//!   bandwidth and the compute runs slower. The overlapped compute `o` is stretched by a
//!   factor `1 + κ`, κ = the device's `overlap_slowdown` (default 0.189: Lee et al. 2025,
//!   "Characterizing Compute-Communication Overlap in GPU-Accelerated Distributed Deep
//!   Learning", arXiv 2507.03114 — GEMMs overlapped with NCCL collectives ran 18.9% slower
//!   on average, up to 40%, on A100, H100, MI250 and MI210).
//! - **Contention** ([`shared`]): collectives in flight at the same time on the same network
//!   dimension share its bandwidth. Under fair sharing two transfers of `τ_a` and `τ_b` alone
//!   on one link finish at `τ_a + min(τ_a, τ_b)` and `τ_b + min(τ_a, τ_b)`: each is delayed
//!   by the smaller one's busy time on that link.

use crate::collective::MAX_DIMS;
use crate::units::Seconds;
use std::ops::Add;

/// What one window leaves on the critical path.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Overlap {
    /// Communication the compute could not hide.
    pub exposed: Seconds,
    /// Communication that ran under compute.
    pub hidden: Seconds,
    /// Extra compute time from interference (κ · overlapped compute).
    pub slowdown: Seconds,
}

impl Overlap {
    /// Nothing overlaps: all of `comm` is on the critical path.
    pub fn exposed(comm: Seconds) -> Overlap {
        Overlap {
            exposed: comm,
            ..Overlap::default()
        }
    }

    /// `k` identical windows.
    pub fn times(self, k: f64) -> Overlap {
        Overlap {
            exposed: self.exposed * k,
            hidden: self.hidden * k,
            slowdown: self.slowdown * k,
        }
    }

    /// Critical-path time the window adds beyond its compute: exposed + slowdown.
    pub fn cost(&self) -> Seconds {
        self.exposed + self.slowdown
    }
}

impl Add for Overlap {
    type Output = Overlap;
    /// Sum of two windows.
    fn add(self, o: Overlap) -> Overlap {
        Overlap {
            exposed: self.exposed + o.exposed,
            hidden: self.hidden + o.hidden,
            slowdown: self.slowdown + o.slowdown,
        }
    }
}

/// Bulk overlap: a communication `C` and independent compute `G` start together (Megatron's
/// asynchronous backward all-reduce under the weight-gradient GEMM; a DP bucket under the
/// backward of the layers not yet reached; a ZeRO-3 prefetch under the current layer).
///
/// `o = min(C, G)`; the compute stretches to `G' = G + κ·o`;
/// `exposed = max(0, C − G')`, `hidden = C − exposed`, slowdown `κ·o`.
pub fn bulk(comm: Seconds, compute: Seconds, kappa: f64) -> Overlap {
    let o = comm.min(compute);
    let slowdown = o * kappa;
    let exposed = (comm - compute - slowdown).max(Seconds::ZERO);
    Overlap {
        exposed,
        hidden: comm - exposed,
        slowdown,
    }
}

/// [`bulk`] for an EP all-to-all of `a` alone beside independent compute `G` (the shared
/// experts under `moe_shared_expert_overlap`), slowed by σ while the compute runs
/// ([`beside`]): the compute stretches by `κ·o`, `o = min((1 + σ)·a, G)`, to `G'`, and
/// `exposed = min(a, max(0, f(a, G') − G'))`, `hidden = a − exposed`.
pub fn ep_bulk(a: Seconds, compute: Seconds, kappa: f64, sigma: f64) -> Overlap {
    let slowdown = (a * (1.0 + sigma)).min(compute) * kappa;
    let g = compute + slowdown;
    let exposed = (beside(a, g, sigma) - g).max(Seconds::ZERO).min(a);
    Overlap {
        exposed,
        hidden: a - exposed,
        slowdown,
    }
}

/// Pipelined (chunked) overlap of a collective with the GEMM that consumes or produces it
/// (Transformer Engine userbuffers, Megatron `--tp-comm-overlap`: the all-gather becomes
/// `n` ring-exchange steps, each feeding one GEMM chunk; the reduce-scatter follows the
/// GEMM's output chunks; NeMo "Communication overlap" docs, TE PR #146). In a two-stage
/// pipeline of `n` chunks the first communication chunk (all-gather) or the last one
/// (reduce-scatter) has no compute beside it:
///
/// `o = min(C, G)·(n−1)/n`, `G' = G + κ·o`,
/// `exposed = C/n + (n−1)/n · max(0, C − G')`; `n = 1` is no overlap at all.
pub fn chunked(comm: Seconds, compute: Seconds, n: f64, kappa: f64) -> Overlap {
    let n = n.max(1.0);
    let rest = (n - 1.0) / n;
    let o = comm.min(compute) * rest;
    let slowdown = o * kappa;
    let exposed = comm / n + (comm - compute - slowdown).max(Seconds::ZERO) * rest;
    let exposed = exposed.min(comm);
    Overlap {
        exposed,
        hidden: comm - exposed,
        slowdown,
    }
}

/// One MoE layer's compute on each side of its all-to-alls, for [`ep_pair`]: the part
/// before the dispatch (`attn`: norm, attention, router, permute), the experts (`mlp`:
/// their GEMMs, the activation, unpermute); backward the same parts, the experts'
/// data-gradient (`mlp_dgrad`) and weight-gradient (`mlp_wgrad`) GEMMs apart.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MoeParts {
    pub attn_fwd: Seconds,
    pub mlp_fwd: Seconds,
    pub attn_bwd: Seconds,
    pub mlp_dgrad: Seconds,
    pub mlp_wgrad: Seconds,
}

impl MoeParts {
    /// All of it, `G`.
    pub fn total(&self) -> Seconds {
        self.attn_fwd + self.mlp_fwd + self.attn_bwd + self.mlp_dgrad + self.mlp_wgrad
    }
}

/// When a communication of `c` (its time alone) runs beside compute that keeps the GPU
/// busy for `g`, it progresses at `1/(1 + σ)` of its rate while the compute runs and at
/// its full rate after: it ends at
///
/// `f(c, g) = c + σ/(1 + σ) · min(g, (1 + σ)·c)`,
///
/// `(1 + σ)·c` when the compute outlasts it, `g + (c − g/(1 + σ))` when it does not.
pub fn beside(c: Seconds, g: Seconds, sigma: f64) -> Seconds {
    c + g.min(c * (1.0 + sigma)) * (sigma / (1.0 + sigma))
}

/// One layer of two micro-batches, the forward of one beside the backward of the other,
/// as Megatron-core's 1F1B all-to-all overlap schedules it
/// (`TransformerLayerSchedulePlan.run`, megatron/core/models/common/
/// model_chunk_schedule_plan.py; the pairing of DeepSeek-V3's DualPipe, DeepSeek-AI 2024
/// §3.2.1, Figure 4). Each all-to-all takes `a` alone (dispatch or combine, one
/// direction); the communication stream and the compute stream run in three phases:
///
/// 1. combine (backward) ‖ attention forward: `T₁ = max(A_f', f(a, A_f'))`;
/// 2. dispatch (forward) ‖ the experts' data and weight gradients, ending at
///    `d₁ = f(a, M_d' + M_w')`; the experts' forward once it is done, ending at
///    `E = max(M_d' + M_w', d₁) + M_f'`; the backward dispatch once the data gradient and
///    the forward dispatch are done, from `s₂ = max(d₁, M_d')`, beside the compute still
///    running then: `D = s₂ + f(a, max(0, E − s₂))`;
/// 3. combine (forward, after the experts) ‖ attention backward (after the backward
///    dispatch), both from `max(D, E)`: `T₃ = max(D, E) + max(A_b', f(a, A_b'))`.
///
/// Both sides of the overlap slow each other. An all-to-all beside compute runs at
/// `1/(1 + σ)` of its rate ([`beside`]; σ the device's `ep_comm_slowdown`: the
/// communication kernels of Megatron-Bridge's 16×H100 EP-overlap profile ran 31 % longer
/// with the overlap than without). Compute overlapped by a communication is slowed by κ
/// (Lee et al. 2025): in each phase its parts stretch by `κ·min(C_p', G_p)/G_p` (`C_p' =
/// (1 + σ)·C_p` the phase's communication beside compute, `G_p` its compute). The pair
/// takes `T₁ + T₃`; `exposed = min(4a, T₁ + T₃ − G − slowdown)` of the four all-to-alls
/// (`4a`, their time alone), `hidden = 4a − exposed`. With every part longer than the
/// (slowed) all-to-all beside it nothing is exposed and the slowdown is `κ·4(1 + σ)a`; a
/// pooled window would hide the all-to-alls whenever `4a < G`, which the phases do not.
pub fn ep_pair(a: Seconds, g: MoeParts, kappa: f64, sigma: f64) -> Overlap {
    ep_pair_phases(a, g, kappa, sigma).0
}

/// [`ep_pair`] with its phases for `--explain`: `[T₁, D, E, T₃, d₁]`.
pub fn ep_pair_phases(a: Seconds, g: MoeParts, kappa: f64, sigma: f64) -> (Overlap, [Seconds; 5]) {
    let zero = Seconds::ZERO;
    let slowed = a * (1.0 + sigma);
    let stretch = |comm: Seconds, parts: Seconds| {
        if parts > zero {
            1.0 + kappa * comm.min(parts).get() / parts.get()
        } else {
            1.0
        }
    };
    let f = |g: Seconds| beside(a, g, sigma);
    let s1 = stretch(slowed, g.attn_fwd);
    let af = g.attn_fwd * s1;
    let t1 = af.max(f(af));
    let s2 = stretch(slowed * 2.0, g.mlp_dgrad + g.mlp_wgrad + g.mlp_fwd);
    let (md, mw, mf) = (g.mlp_dgrad * s2, g.mlp_wgrad * s2, g.mlp_fwd * s2);
    let d1 = f(md + mw);
    let experts = (md + mw).max(d1) + mf;
    let start = d1.max(md);
    let dispatch = start + f((experts - start).max(zero));
    let s3 = stretch(slowed, g.attn_bwd);
    let ab = g.attn_bwd * s3;
    let t3 = dispatch.max(experts) + ab.max(f(ab));
    let slowdown = g.attn_fwd * (s1 - 1.0)
        + (g.mlp_dgrad + g.mlp_wgrad + g.mlp_fwd) * (s2 - 1.0)
        + g.attn_bwd * (s3 - 1.0);
    let comm = a * 4.0;
    let exposed = (t1 + t3 - g.total() - slowdown).max(zero).min(comm);
    // The phases' sums round: a remainder below 10⁻⁹ of the pair is nothing exposed.
    let exposed = if exposed.get() <= 1e-9 * (g.total() + comm).get() {
        zero
    } else {
        exposed
    };
    let o = Overlap {
        exposed,
        hidden: comm - exposed,
        slowdown,
    };
    (o, [t1, dispatch, experts, t3, d1])
}

/// Interference of a collective whose kernels run only part of its time `T`: `κ_a = κ ·
/// min(1, T_k / T)`, `T_k` = the time its kernels are busy. Interference comes from the
/// collective's kernels holding SMs and HBM bandwidth while they run (Lee et al. 2025);
/// NCCL's kernels run for the whole collective, so `T_k = T` and κ holds, but DeepSpeed
/// 2021's ZeRO-3 moved parameters at most at its per-GPU rate
/// ([`crate::parallel::DEEPSPEED_2021_RATE`]), issued from Python hooks one bucket at a
/// time: its kernels run for the NCCL time of the bytes, `T_k = T_nccl`, and wait the rest.
pub fn kappa_active(kappa: f64, busy: Seconds, time: Seconds) -> f64 {
    if time.get() <= 0.0 {
        return kappa;
    }
    kappa * (busy.get() / time.get()).clamp(0.0, 1.0)
}

/// Busy time of a collective on each topology dimension (its transfer time there, indexed
/// by the dimension's index in the topology), for [`shared`].
pub type Busy = [f64; MAX_DIMS];

/// Delay from bandwidth sharing: `Σ_d min(own_d, other_d)` over the dimensions both use
/// (fair sharing, see the module doc). Zero when the two use disjoint dimensions.
pub fn shared(own: &Busy, other: &Busy) -> Seconds {
    Seconds::new(own.iter().zip(other).map(|(a, b)| a.min(*b)).sum::<f64>())
}

/// `k · busy` (the traffic of `k` identical collectives).
pub fn scaled(b: &Busy, k: f64) -> Busy {
    std::array::from_fn(|i| b[i] * k)
}

/// Element-wise sum of two busy vectors.
pub fn plus(a: &Busy, b: &Busy) -> Busy {
    std::array::from_fn(|i| a[i] + b[i])
}

#[cfg(test)]
mod tests {
    fn parts(af: f64, mf: f64, ab: f64, md: f64, mw: f64) -> MoeParts {
        let t = Seconds::new;
        MoeParts {
            attn_fwd: t(af),
            mlp_fwd: t(mf),
            attn_bwd: t(ab),
            mlp_dgrad: t(md),
            mlp_wgrad: t(mw),
        }
    }

    /// Every part longer than the all-to-all beside it: nothing exposed, each part slowed
    /// by κ·a (phase 2 by κ·2a): the pooled window's κ·4a.
    #[test]
    fn ep_pair_hides_short_all_to_alls() {
        let o = ep_pair(Seconds::new(1.0), parts(2.0, 3.0, 4.0, 1.5, 1.5), 0.2, 0.0);
        assert_eq!(o.exposed, Seconds::ZERO);
        assert!((o.hidden.get() - 4.0).abs() < 1e-12);
        assert!((o.slowdown.get() - 0.2 * 4.0).abs() < 1e-12);
    }

    /// Attention forward longer than the combine beside it, the rest short: κ = 0.5,
    /// a = 1, attention 2 forward and 0.2 backward, the experts 0.2, 0.2, 0.2. Phase 1
    /// stretches attention by 0.5·1/2 to 2.5 = T₁; phase 2 the experts by 0.5·0.6/0.6 to
    /// 0.3 each: D = max(1, 0.3) + 1 = 2, E = max(0.6, 1) + 0.3 = 1.3; phase 3 T₃ = 2 +
    /// max(1, 0.3) = 3. Slowdown 0.5 + 0.3 + 0.1 = 0.9; exposed 5.5 − 2.8 − 0.9 = 1.8.
    #[test]
    fn ep_pair_long_attention_forward() {
        let o = ep_pair(Seconds::new(1.0), parts(2.0, 0.2, 0.2, 0.2, 0.2), 0.5, 0.0);
        assert!((o.slowdown.get() - 0.9).abs() < 1e-12, "{o:?}");
        assert!((o.exposed.get() - 1.8).abs() < 1e-12, "{o:?}");
    }

    /// Long experts' backward and attention backward: κ = 0.5, a = 1, attention 0.2
    /// forward and 2 backward, the experts 0.2 forward, 1.5 + 1.5 backward. T₁ = 1 (0.3
    /// beside it); phase 2 stretches the experts by 0.5·2/3.2 = 0.3125: 1.96875 each
    /// backward, 0.2625 forward, so D = 1.96875 + 1 = 2.96875 and E = 3.9375 + 0.2625 = 4.2;
    /// phase 3 stretches attention by 0.5·1/2 to 2.5: T₃ = 4.2 + 2.5 = 6.7. Slowdown 0.1 +
    /// 1 + 0.5 = 1.6; exposed 1 + 6.7 − 5.4 − 1.6 = 0.7.
    #[test]
    fn ep_pair_long_backward() {
        let o = ep_pair(Seconds::new(1.0), parts(0.2, 0.2, 2.0, 1.5, 1.5), 0.5, 0.0);
        assert!((o.slowdown.get() - 1.6).abs() < 1e-12, "{o:?}");
        assert!((o.exposed.get() - 0.7).abs() < 1e-12, "{o:?}");
        let (_, ph) = ep_pair_phases(Seconds::new(1.0), parts(0.2, 0.2, 2.0, 1.5, 1.5), 0.5, 0.0);
        let want = [1.0, 2.96875, 4.2, 6.7];
        for (got, want) in ph.iter().zip(want) {
            assert!((got.get() - want).abs() < 1e-12, "{ph:?}");
        }
    }

    /// A layer with nothing before its dispatch (an attention-less block) stretches no
    /// empty part: κ = 0.5, a = 1, experts 3 forward and 0.2 + 0.2 backward. T₁ = a = 1;
    /// phase 2 stretches the experts by 0.5·2/3.4 (slowdown 1): E = 1 + 3·(1 + 1/3.4),
    /// T₃ = E + max(1, 0); exposed = 1 + E + 1 − 3.4 − 1.
    #[test]
    fn ep_pair_without_attention_parts() {
        let o = ep_pair(Seconds::new(1.0), parts(0.0, 3.0, 0.0, 0.2, 0.2), 0.5, 0.0);
        let e = 1.0 + 3.0 * (1.0 + 1.0 / 3.4);
        assert!((o.slowdown.get() - 1.0).abs() < 1e-12, "{o:?}");
        assert!((o.exposed.get() - (2.0 + e - 4.4)).abs() < 1e-12, "{o:?}");
    }

    /// By hand, κ = 0, a = 1: attention 0.2 forward and backward, the experts 3 forward,
    /// 0.2 + 0.2 backward (G = 3.8 < 4a). Phase 1: max(1, 0.2) = 1. Phase 2: the
    /// backward dispatch ends at max(1, 0.2) + 1 = 2, the experts' forward waits for the
    /// forward dispatch and ends at max(0.4, 1) + 3 = 4. Phase 3: 4 + max(1, 0.2) = 5.
    /// The pair takes 6: 2.2 exposed, where a pooled window of 4 against 3.8 leaves 0.2.
    #[test]
    fn ep_pair_by_hand() {
        let o = ep_pair(Seconds::new(1.0), parts(0.2, 3.0, 0.2, 0.2, 0.2), 0.0, 0.0);
        assert!((o.exposed.get() - 2.2).abs() < 1e-12, "{o:?}");
        assert!((o.hidden.get() - 1.8).abs() < 1e-12);
        assert_eq!(o.slowdown, Seconds::ZERO);
        let pooled = bulk(Seconds::new(4.0), Seconds::new(3.8), 0.0);
        assert!((pooled.exposed.get() - 0.2).abs() < 1e-12);
        // With κ = 0.5 phase 1 stretches attention to 0.3, phase 2 the experts by
        // 0.5·2/3.4: 0.2588…, 3.882…; the forward experts end at 1 + 3.882 = 4.882,
        // phase 3 at 4.882 + max(1, 0.3) = 5.882; slowdown 0.1 + 0.5·2 + 0.1 = 1.2;
        // exposed 1 + 5.882 − 3.8 − 1.2 = 1.882.
        let o = ep_pair(Seconds::new(1.0), parts(0.2, 3.0, 0.2, 0.2, 0.2), 0.5, 0.0);
        let mf = 3.0 * (1.0 + 0.5 * 2.0 / 3.4);
        assert!((o.slowdown.get() - 1.2).abs() < 1e-12, "{o:?}");
        assert!((o.exposed.get() - (1.0 + 1.0 + mf + 1.0 - 3.8 - 1.2)).abs() < 1e-12);
    }

    use super::*;
    use approx::assert_relative_eq;

    /// `f(c, g)` by hand, σ = 0.5: compute of 2 outlasts a communication of 1 slowed to
    /// 1.5, which then ends at 1.5; beside compute of 0.6 it moves 0.6/1.5 = 0.4 of itself
    /// and the remaining 0.6 runs alone: it ends at 1.2 = 1 + 0.5/1.5·0.6. σ = 0 is the
    /// communication alone.
    #[test]
    fn beside_by_hand() {
        let t = Seconds::new;
        assert!((beside(t(1.0), t(2.0), 0.5).get() - 1.5).abs() < 1e-12);
        assert!((beside(t(1.0), t(0.6), 0.5).get() - 1.2).abs() < 1e-12);
        assert!((beside(t(1.0), t(1.5), 0.5).get() - 1.5).abs() < 1e-12);
        assert!((beside(t(1.0), t(0.0), 0.5).get() - 1.0).abs() < 1e-12);
        assert_eq!(beside(t(1.0), t(2.0), 0.0), t(1.0));
    }

    /// [`ep_pair_by_hand`]'s layer with σ = 0.5 (κ = 0): attention 0.2 forward and
    /// backward, the experts 3 forward, 0.2 + 0.2 backward, a = 1. Phase 1: the combine
    /// ends at f(1, 0.2) = 1 + 0.2/3 = 1.0667. Phase 2: the forward dispatch beside the
    /// 0.4 of gradients ends at d₁ = 1 + 0.4/3 = 1.1333; the experts' forward runs from
    /// there to E = 4.1333; the backward dispatch starts at max(d₁, 0.2) = d₁ beside 3 of
    /// compute, which outlasts its slowed 1.5: D = d₁ + 1.5 = 2.6333. Phase 3:
    /// 4.1333 + f(1, 0.2) = 5.2. Exposed 1.0667 + 5.2 − 3.8 = 2.4667 (2.2 at σ = 0).
    #[test]
    fn ep_pair_slowed_all_to_alls_by_hand() {
        let (o, ph) = ep_pair_phases(Seconds::new(1.0), parts(0.2, 3.0, 0.2, 0.2, 0.2), 0.0, 0.5);
        let t1 = 1.0 + 0.2 / 3.0;
        let d1 = 1.0 + 0.4 / 3.0;
        let want = [t1, d1 + 1.5, d1 + 3.0, d1 + 3.0 + t1, d1];
        for (got, want) in ph.iter().zip(want) {
            assert!((got.get() - want).abs() < 1e-12, "{ph:?} against {want}");
        }
        assert!(
            (o.exposed.get() - (t1 + want[3] - 3.8)).abs() < 1e-12,
            "{o:?}"
        );
        assert!((o.hidden.get() - (4.0 - o.exposed.get())).abs() < 1e-12);
        assert_eq!(o.slowdown, Seconds::ZERO);
        // With κ = 0.2 every part is stretched over the slowed all-to-all beside it
        // (1.5 against 0.2: by κ; phase 2: 3 against 3.4, by 0.2·3/3.4).
        let o = ep_pair(Seconds::new(1.0), parts(0.2, 3.0, 0.2, 0.2, 0.2), 0.2, 0.5);
        let want = 0.2 * 0.2 * 2.0 + 3.4 * 0.2 * 3.0 / 3.4;
        assert!((o.slowdown.get() - want).abs() < 1e-12, "{o:?}");
        // Short experts' forward (0.5): the backward dispatch, from s₂ = d₁ = 1.1333, has
        // only E − s₂ = 0.5 of compute beside it and ends at d₁ + 1 + 0.5/3 = 2.3, after
        // the experts (E = 1.6333); T₃ = 2.3 + f(1, 0.2) = 3.3667, exposed
        // 1.0667 + 3.3667 − 1.3 = 3.1333.
        let (o, ph) = ep_pair_phases(Seconds::new(1.0), parts(0.2, 0.5, 0.2, 0.2, 0.2), 0.0, 0.5);
        let want = [
            t1,
            d1 + 1.0 + 0.5 / 3.0,
            d1 + 0.5,
            d1 + 1.0 + 0.5 / 3.0 + t1,
            d1,
        ];
        for (got, want) in ph.iter().zip(want) {
            assert!((got.get() - want).abs() < 1e-12, "{ph:?} against {want}");
        }
        assert!(
            (o.exposed.get() - (t1 + want[3] - 1.3)).abs() < 1e-12,
            "{o:?}"
        );
    }

    /// Every part longer than the slowed all-to-all: nothing exposed, each part slowed by
    /// κ over (1 + σ)·a: slowdown κ·4(1 + σ)a.
    #[test]
    fn ep_pair_hides_slowed_all_to_alls() {
        let o = ep_pair(Seconds::new(1.0), parts(2.0, 3.0, 4.0, 1.5, 1.5), 0.2, 0.31);
        assert_eq!(o.exposed, Seconds::ZERO);
        assert!((o.hidden.get() - 4.0).abs() < 1e-12);
        assert!((o.slowdown.get() - 0.2 * 4.0 * 1.31).abs() < 1e-12, "{o:?}");
    }

    /// [`ep_bulk`] by hand, κ = 0.2, σ = 0.5, a = 1: beside compute of 0.6 the compute
    /// stretches by 0.2·0.6 to 0.72, the all-to-all moves 0.72/1.5 = 0.48 of itself by then
    /// and 0.52 stays exposed; beside 2 it stretches by 0.2·1.5 to 2.3 and nothing shows.
    /// σ = 0 is [`bulk`].
    #[test]
    fn ep_bulk_by_hand() {
        let t = Seconds::new;
        let o = ep_bulk(t(1.0), t(0.6), 0.2, 0.5);
        assert!((o.exposed.get() - 0.52).abs() < 1e-12, "{o:?}");
        assert!((o.hidden.get() - 0.48).abs() < 1e-12, "{o:?}");
        assert!((o.slowdown.get() - 0.12).abs() < 1e-12, "{o:?}");
        let o = ep_bulk(t(1.0), t(2.0), 0.2, 0.5);
        assert_eq!(o.exposed, Seconds::ZERO);
        assert!((o.slowdown.get() - 0.3).abs() < 1e-12, "{o:?}");
        assert_eq!(ep_bulk(t(1.0), t(0.6), 0.2, 0.0), bulk(t(1.0), t(0.6), 0.2));
    }

    #[test]
    fn kernels_idle_under_a_rate_floor_interfere_less() {
        // A 405 MB DeepSpeed-2021 gather over 16 ranks: 380 MB sent at 24 GB/s take
        // 15.8 ms, NCCL would need 3.0 ms: κ·3.0/15.8 = 0.189 · 0.19 = 0.0359. At NCCL's
        // own rate (busy the whole time) κ is unchanged; the busy time never exceeds T.
        let t = Seconds::new(405e6 * 15.0 / 16.0 / 24e9);
        let k = kappa_active(0.189, Seconds::new(3.0e-3), t);
        assert_relative_eq!(k, 0.189 * 3.0e-3 / 0.015_820_312_5, max_relative = 1e-12);
        assert_relative_eq!(k, 0.0358, max_relative = 2e-3);
        assert_eq!(kappa_active(0.189, t, t), 0.189);
        assert_eq!(kappa_active(0.189, t * 2.0, t), 0.189);
    }

    fn s(x: f64) -> Seconds {
        Seconds::new(x)
    }

    #[test]
    fn bulk_hides_what_fits_and_stretches_the_compute() {
        // C = 3, G = 10, κ = 0.2: o = 3, slowdown 0.6, all hidden.
        let w = bulk(s(3.0), s(10.0), 0.2);
        assert_relative_eq!(w.exposed.get(), 0.0);
        assert_relative_eq!(w.hidden.get(), 3.0);
        assert_relative_eq!(w.slowdown.get(), 0.6);
        // C = 10, G = 4, κ = 0.25: o = 4, G' = 5, exposed 5, hidden 5; window 10 = G' + 5.
        let w = bulk(s(10.0), s(4.0), 0.25);
        assert_relative_eq!(w.exposed.get(), 5.0);
        assert_relative_eq!(w.hidden.get(), 5.0);
        assert_relative_eq!(w.slowdown.get(), 1.0);
        assert_relative_eq!(4.0 + w.cost().get(), 10.0);
    }

    #[test]
    fn chunked_exposes_one_chunk_when_compute_covers_the_rest() {
        // C = 8, G = 16, n = 8, κ = 0: exposed = 8/8 = 1.
        let w = chunked(s(8.0), s(16.0), 8.0, 0.0);
        assert_relative_eq!(w.exposed.get(), 1.0);
        assert_relative_eq!(w.hidden.get(), 7.0);
        // C = 16, G = 8, n = 4, κ = 0.1: o = 8·3/4 = 6, slowdown 0.6, G' = 8.6;
        // exposed = 16/4 + 3/4·(16 − 8.6) = 4 + 5.55 = 9.55.
        let w = chunked(s(16.0), s(8.0), 4.0, 0.1);
        assert_relative_eq!(w.slowdown.get(), 0.6, epsilon = 1e-12);
        assert_relative_eq!(w.exposed.get(), 9.55, epsilon = 1e-12);
        // One chunk: nothing overlaps.
        let w = chunked(s(5.0), s(50.0), 1.0, 0.2);
        assert_relative_eq!(w.exposed.get(), 5.0);
        assert_relative_eq!(w.slowdown.get(), 0.0);
    }

    #[test]
    fn sharing_delays_by_the_smaller_busy_time_per_dimension() {
        let mut a: Busy = [0.0; MAX_DIMS];
        let mut b: Busy = [0.0; MAX_DIMS];
        a[..2].copy_from_slice(&[2.0, 5.0]);
        b[..3].copy_from_slice(&[3.0, 1.0, 4.0]);
        // min(2,3) + min(5,1) + min(0,4) = 3.
        assert_relative_eq!(shared(&a, &b).get(), 3.0);
        assert_relative_eq!(shared(&a, &scaled(&b, 0.0)).get(), 0.0);
        assert_relative_eq!(plus(&a, &b)[1], 6.0);
    }
}

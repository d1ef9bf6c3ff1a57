//! Host launch time: the CPU time a framework spends issuing one layer's operations, and
//! the GPU time it leaves idle when it is longer than the GPU's work.
//!
//! Eager PyTorch issues every operation from one CPU thread: Python, PyTorch's dispatcher
//! and autograd, then the CUDA launch. While the CPU runs ahead of the GPU this costs
//! nothing; when a layer's host time exceeds its GPU time the GPU waits ("CPU overhead"
//! or "host boundedness", NVIDIA, *Optimizing DeepSeek-V3 Training Performance on NVIDIA
//! GB200 NVL72*, Megatron-LM docs/discussions/deepseek-v3-gb200-optimization at
//! eb0783b6d3, §2). A dropless MoE layer cannot run ahead at all: the number of tokens
//! each expert receives is copied to the host before the experts run (a device-host
//! synchronisation per layer, same document §3.1), so every MoE layer pays at least
//! `max(T_GPU, T_host)`, and its forward more where the experts' launches, which follow the
//! copy, outlast the GPU work they can hide behind ([`moe_forward_idle`]); dense layers pay
//! `max(T_GPU, T_host)`, since with identical layers the host runs ahead by at most what it
//! saves per layer.
//!
//! `T_host = t_op · n`, with `t_op` the device's `host_op` (one eager PyTorch operation with
//! its launch in a training process: 20 µs on the presets, fitted on Megatron-Bridge's MoE
//! rows, docs/modern-training.md; an isolated `torch.nn.Linear` forward takes 13.5 µs on a
//! DGX H100's Xeon 8480C, NVIDIA/TransformerEngine issue #2053) and `n` the layer's
//! operations per pass counted below ([`ops`]), each Transformer Engine GEMM module call
//! weighing [`TE_CALL_OPS`]. Parts captured as CUDA graphs (`plan.cuda_graphs`) cost one
//! graph launch instead; a full iteration graph costs nothing per layer.

use super::{Ctx, Part, Pass};
use crate::parallel::CudaGraphs;
use crate::units::Seconds;

/// Host time of one Transformer Engine GEMM module call, in plain PyTorch operations: TE
/// issue #2053 measured `te.Linear` forward at 99.66 µs of CPU time against
/// `torch.nn.Linear`'s 37.08 µs on GB200 (90.53 against 33.17 µs on GH200): 2.69 and 2.73.
pub(crate) const TE_CALL_OPS: f64 = 2.7;

/// Operations per pass (forward, backward) of one scope of a layer, in plain PyTorch
/// operations.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Ops {
    pub fwd: f64,
    pub bwd: f64,
}

impl Ops {
    fn plus(self, o: Ops) -> Ops {
        Ops {
            fwd: self.fwd + o.fwd,
            bwd: self.bwd + o.bwd,
        }
    }
}

/// Host operations of `n` Transformer Engine linear layers per pass: forward one GEMM call
/// each, backward two (data and weight gradient); with 8- or 4-bit GEMMs each call's input
/// is quantized first by one more call of the same kind (forward: the input; backward: the
/// output gradient, which both gradient GEMMs share).
fn linears(n: f64, low: bool) -> Ops {
    let q = if low { 1.0 } else { 0.0 };
    Ops {
        fwd: n * (1.0 + q) * TE_CALL_OPS,
        bwd: n * (2.0 + q) * TE_CALL_OPS,
    }
}

/// Operations of each scope of one layer per pass, uncaptured:
///
/// - `attn`: the attention's linear layers (2; MLA 5) by [`linears`], the fused attention
///   call (one TE call each pass), rotary on queries and keys and the bias-dropout-add
///   (3 operations each pass), and with QK-norm its two norms (one operation each per
///   pass, as rotary: a norm module wraps one fused kernel and has no GEMM set-up; TE's
///   measured 2.7 is for its GEMM modules);
/// - `mlp` (dense): 2 linear layers, the activation and the bias-dropout-add (2);
/// - `moe_router`: the router GEMM (1 forward, 2 backward) and 11 fused router kernels
///   each pass, plus a shared expert's 2 linear layers and activation (Megatron-LM's
///   GB200 report §2.1.4 and §2.3: 31 router kernels after fusion, router and preprocess
///   17 with the DeepEP/HybridEP dispatcher, shared experts captured with them; with the
///   shared-expert overlap they move to `moe`);
/// - `moe_preprocess`: 5 forward kernels (token counts, their exchange, the host copy,
///   the permutation map), none backward, and a LatentMoE's `h → ℓ` linear layer
///   (Megatron-core `MoELayer.preprocess`);
/// - `moe`: dispatch, permute, unpermute and combine (4 each pass), the activation (1),
///   each local expert's 2 linear layers by [`linears`] (one GEMM per expert:
///   Transformer Engine's `GroupedLinear`), and a LatentMoE's `ℓ → h` linear layer;
/// - `mamba`: the mixer's 2 projections and its memory-bound kernels;
/// - `attn` on a Gated DeltaNet layer: its 2 projections, its memory-bound kernels and
///   the delta rule's ([`super::layer::gdn_kernels`]).
pub(crate) fn ops(c: &Ctx, scope: CudaGraphs) -> Ops {
    let m = c.m;
    let low = c.plan.precision.is_low();
    let z = Ops::default();
    let both = |k: f64| Ops { fwd: k, bwd: k };
    let attn_on = matches!(c.part, Part::Layer | Part::Attention);
    let mlp_on = c.part.mlp_pair();
    let moe = mlp_on && m.experts > 1;
    // With the shared-expert overlap the dispatcher launches the shared experts beside its
    // all-to-alls, after the token-count copy; Megatron-core then leaves them out of the
    // router's graph (`TransformerLayer._get_submodules_under_cudagraphs`), so they count
    // with the experts' scope.
    let overlapped_shared = c.plan.shared_expert_overlap;
    // A LatentMoE's `h → ℓ` projection runs in `MoELayer.preprocess` and its `ℓ → h` one
    // in `postprocess`, after the combine.
    let latent = if m.latent_params > 0.0 {
        linears(1.0, low)
    } else {
        z
    };
    match scope {
        CudaGraphs::ATTN if attn_on => {
            let n = if m.attn.mla.is_some() { 5.0 } else { 2.0 };
            let qk_norm = if m.qk_norm && m.attn.mla.is_none() {
                2.0
            } else {
                0.0
            };
            linears(n, low)
                .plus(both(TE_CALL_OPS + qk_norm))
                .plus(both(3.0))
        }
        CudaGraphs::MLP if mlp_on && !moe => linears(2.0, low).plus(both(2.0)),
        CudaGraphs::MOE_ROUTER if moe => {
            let shared = if m.shared_f > 0.0 && !overlapped_shared {
                linears(2.0, low).plus(both(1.0))
            } else {
                z
            };
            Ops {
                fwd: 1.0 + 11.0,
                bwd: 2.0 + 11.0,
            }
            .plus(shared)
        }
        CudaGraphs::MOE_PREPROCESS if moe => Ops { fwd: 5.0, bwd: 0.0 }.plus(latent),
        CudaGraphs::MOE if moe => {
            let local = m.experts as f64 / c.plan.ep as f64;
            let shared = if m.shared_f > 0.0 && overlapped_shared {
                linears(2.0, low).plus(both(1.0))
            } else {
                z
            };
            linears(2.0 * local, low)
                .plus(both(5.0))
                .plus(latent)
                .plus(shared)
        }
        CudaGraphs::MAMBA if c.part == Part::Mamba => {
            let k = super::layer::mamba_kernels(c);
            linears(2.0, low).plus(Ops { fwd: k.0, bwd: k.1 })
        }
        // A Gated DeltaNet mixer takes the self-attention's place in its layer (Megatron-LM
        // builds it as the layer's `self_attention`), so the `attn` scope captures it.
        CudaGraphs::ATTN if c.part == Part::Gdn => {
            let k = super::layer::gdn_kernels(c);
            linears(2.0, low).plus(Ops { fwd: k.0, bwd: k.1 })
        }
        _ => z,
    }
}

/// Host operations of one layer per pass: the uncaptured scopes' operations, one graph
/// launch per captured scope that the layer has; none under a full-iteration graph. At
/// `host_op` each they are the layer's host time `T_host`.
pub(crate) fn layer_ops(c: &Ctx) -> Ops {
    let g = c.plan.cuda_graphs;
    if g == CudaGraphs::FULL {
        return Ops::default();
    }
    let mut n = Ops::default();
    for (_, s) in CudaGraphs::SCOPES {
        let o = ops(c, s);
        if o == Ops::default() {
            continue;
        }
        n = n.plus(if g.has(s) {
            Ops { fwd: 1.0, bwd: 1.0 }
        } else {
            o
        });
    }
    n
}

/// GPU time a pass leaves idle waiting for its host: `max(0, P, T_host − T_GPU)`, `T_host`
/// the pass's `host_time`, `P` its `host_post` ([`moe_forward_idle`]; zero but in a
/// dropless MoE forward), `T_GPU` the pass's compute, exposed TP/SP, EP and CP and
/// interference ([`gpu`]). Over several blocks (a hybrid pattern) the three add first.
pub(crate) fn pass_idle(p: &Pass) -> Seconds {
    p.host_post.max(p.host_time - gpu(p)).max(Seconds::ZERO)
}

/// A pass's GPU time: compute, exposed TP/SP, EP and CP, and interference.
pub(crate) fn gpu(p: &Pass) -> Seconds {
    p.compute() + p.tp + p.ep + p.cp + p.slow
}

/// Host operations of one layer's routed experts in the forward (`moe` scope): its
/// uncaptured operations, one graph launch when captured, none under a full-iteration graph
/// or in a layer without routed experts.
pub(crate) fn expert_ops_fwd(c: &Ctx) -> f64 {
    let g = c.plan.cuda_graphs;
    let o = ops(c, CudaGraphs::MOE).fwd;
    if g == CudaGraphs::FULL || o == 0.0 {
        0.0
    } else if g.has(CudaGraphs::MOE) {
        1.0
    } else {
        o
    }
}

/// GPU time the forward of a dropless MoE layer leaves idle waiting for the host.
///
/// Before its experts run, the layer copies the tokens each expert receives to the host
/// (Transformer Engine's `GroupedLinear` takes the split sizes as a host list; Megatron-LM's
/// GB200 report §3.1): the host waits there until the GPU has run everything issued, so the
/// GPU's queue is empty when the host goes on. It then issues the dispatch, the experts'
/// GEMMs (`T_exp`, one call per local expert: the host-heavy part) and the combine, then the
/// next layer's attention and router up to its own copy. Launch-queue order gives, with the
/// GPU's dispatch `D` and experts `E` run as soon as they are issued, and `R` the rest of
/// the layer's GPU work after them:
///
/// `T = max(D + E + R, T_exp + R, T_host)`, so the idle time is
/// `max(0, T_exp − (D + E), T_host − T_GPU)`:
///
/// the experts' launches hide only behind the dispatch and the experts' own GPU time, not
/// behind the attention that follows them, which cannot start before it is issued. This
/// returns the first term, `max(0, T_exp − (D + E))` (the pass's `host_post`);
/// [`pass_idle`] takes the maximum with the second. With one segment (`T_exp` = 0) it is 0.
pub(crate) fn moe_forward_idle(host_experts: Seconds, before: Seconds) -> Seconds {
    (host_experts - before).max(Seconds::ZERO)
}

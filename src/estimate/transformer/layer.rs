//! Compute of one transformer layer (and of the embedding and output head) for one
//! micro-batch on one tensor-parallel rank: shape-timed GEMMs, the attention core, and
//! memory-bound kernels from the bytes they move.

use super::comm::ep_comm;
use super::cp::cp_comm;
use super::tp::{TpLinks, tp_windows};
use super::{Block, Ctx, Part, Pass};
use super::{lora, lowp};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::windows::{MoeParts, Overlap, ep_bulk, ep_pair, ep_pair_phases};
use crate::estimate::{Trace, coll};
use crate::model::Split;
use crate::parallel::{CrossEntropy, Recompute};
use crate::units::{Bytes, Seconds};

/// Linear layers of one transformer layer, grouped by the TP collective they pair with:
/// `[0]` the column-parallel attention projections (QKV, or MLA's down/up projections),
/// `[1]` the row-parallel attention projection, `[2]` the column-parallel MLP input (with
/// shared experts), `[3]` the row-parallel MLP output; forward, data-gradient and
/// weight-gradient time of each, plus the MoE router and the low-precision casts
/// (forward, backward). The attention projections come from the model
/// (`Attention::projections`: GQA or MLA); MoE layers add their routed experts (grouped
/// GEMMs of `b·s·k·ep/E` tokens each), shared experts and router.
pub(super) struct Linears {
    pub(super) fwd: [Seconds; 4],
    pub(super) dgrad: [Seconds; 4],
    pub(super) wgrad: [Seconds; 4],
    pub(super) router: (Seconds, Seconds),
    pub(super) cast: (Seconds, Seconds),
    /// The shared experts' forward GEMMs (in `fwd[2..4]` too).
    pub(super) shared_fwd: Seconds,
    /// The shared experts' FC1 and FC2 GEMMs, each (forward, data + weight gradient), in
    /// the totals above too.
    pub(super) shared: [(Seconds, Seconds); 2],
    /// Input elements the MLP's forward GEMMs quantize (experts, shared, latent):
    /// (all, shared experts').
    pub(super) mlp_cast_in: (f64, f64),
}

impl Linears {
    fn total(&self) -> (Seconds, Seconds) {
        let sum = |a: &[Seconds; 4]| a.iter().copied().sum::<Seconds>();
        (
            sum(&self.fwd) + self.router.0,
            sum(&self.dgrad) + sum(&self.wgrad) + self.router.1,
        )
    }
}

/// The GEMMs of one transformer layer, each timed from its shape. A hybrid model's layer
/// has one pair: attention, the MLP, or a Mamba mixer's input projection `h → (2·d_in +
/// 2·g·N + H)/t` (column-parallel) and output projection `d_in/t → h` (row-parallel) in
/// the attention's slots (Megatron-LM `MambaMixer`: `in_proj`, `out_proj`), or a Gated
/// DeltaNet mixer's `h → (2·qk + 2·v + 2·H_v)/t` and `v/t → h` (`GatedDeltaNet`).
pub(super) fn linears<T: Trace>(c: &Ctx, tr: &mut T) -> Linears {
    let (m, t) = (c.m, c.plan.tp as f64);
    let g = if m.gated { 2.0 } else { 1.0 };
    // (M, N, K, batch, TP group: 0 attention col, 1 attention row, 2 MLP col, 3 MLP row,
    // 4 router)
    let mut shapes = [(0.0, 0.0, 0.0, 0.0, 0usize); 12];
    match (c.part, mamba(c)) {
        (Part::Mamba, Some(mb)) => {
            shapes[0] = (c.tokens, mb.in_proj_width(t), m.h, 1.0, 0);
            shapes[1] = (c.tokens, m.h, mb.d_inner() / t, 1.0, 1);
        }
        (Part::Gdn, _) => {
            if let Some(g) = gdn(c) {
                shapes[0] = (c.tokens, g.in_proj_width(t), m.h, 1.0, 0);
                shapes[1] = (c.tokens, m.h, g.v() / t, 1.0, 1);
            }
        }
        (Part::Layer | Part::Attention, _) => {
            for (i, &(n, k, split)) in m.attn.projections(m.h, t).iter().enumerate() {
                shapes[i] = (c.tokens, n, k, 1.0, if split == Split::Col { 0 } else { 1 });
            }
        }
        _ => {}
    }
    if !c.part.mlp_pair() {
        // No MLP in this block.
    } else if m.experts > 1 {
        let (e, ep, k) = (m.experts as f64, c.plan.ep as f64, m.top_k as f64);
        // Expert tensor parallelism (etp | t): each rank runs its E/ep experts split etp
        // ways on etp/t of the routed tokens, times the busiest expert's load.
        let etp = c.plan.etp as f64;
        let per_expert = c.tokens * k * ep / e * etp / t * c.plan.moe_imbalance;
        // LatentMoE: the experts work on eh = ℓ, between `h → ℓ` and `ℓ → h` projections
        // replicated over TP on the rank's tokens (Megatron-core `MoELayer`:
        // `fc1_latent_proj`, `fc2_latent_proj`, `parallel_mode="duplicated"`).
        shapes[5] = (per_expert, g * m.f / etp, m.eh, e / ep, 2);
        shapes[6] = (per_expert, m.eh, m.f / etp, e / ep, 3);
        shapes[7] = (c.tokens, e, m.h, 1.0, 4);
        if m.shared_f > 0.0 {
            shapes[8] = (c.tokens, g * m.shared_f / t, m.h, 1.0, 2);
            shapes[9] = (c.tokens, m.h, m.shared_f / t, 1.0, 3);
        }
        if m.latent_params > 0.0 {
            shapes[10] = (c.tokens / t, m.eh, m.h, 1.0, 2);
            shapes[11] = (c.tokens / t, m.h, m.eh, 1.0, 3);
        }
    } else {
        shapes[5] = (c.tokens, g * m.f / t, m.h, 1.0, 2);
        shapes[6] = (c.tokens, m.h, m.f / t, 1.0, 3);
    }
    let z = Seconds::ZERO;
    let mut out = Linears {
        fwd: [z; 4],
        dgrad: [z; 4],
        wgrad: [z; 4],
        router: (z, z),
        cast: (z, z),
        shared_fwd: z,
        shared: [(z, z); 2],
        mlp_cast_in: (0.0, 0.0),
    };
    if c.speedup > 1.0 {
        tr.line(|| {
            let e = &c.dev.spec.efficiency;
            let k0 = e.gemm_k_overhead as f64;
            format!(
                "  {} GEMMs: e = gemm_lowp · q · K/(K + k0·peak/peak₁₆) = {} · q · K/(K + {:.0}) (the efficiency column below is the 16-bit one)",
                c.plan.precision.name(),
                e.gemm_lowp.unwrap_or(e.gemm),
                k0 * c.speedup
            )
        });
    }
    // Elements quantized before the low-precision GEMMs: inputs (forward) and output
    // gradients (backward); the router stays 16-bit.
    let (mut cast_in, mut cast_grad) = (0.0, 0.0);
    for (i, &(mm, n, k, batch, group)) in shapes.iter().enumerate() {
        if mm <= 0.0 || n <= 0.0 {
            continue;
        }
        // The LoRA adapters of this linear layer (none without LoRA or when not targeted).
        let adapters = (group != 4 && c.plan.lora_rank > 0 && lora::adapted(c, i))
            .then(|| lora::adapter_time(c, mm, n, k, batch));
        // Forward M×N×K, data gradient M×K×N, weight gradient K×N×M.
        let (tf, dg, wg) = if group == 4 {
            (
                c.attn_gemm(mm, n, k, batch),
                c.attn_gemm(mm, k, n, batch),
                c.attn_gemm(k, n, mm, batch),
            )
        } else {
            cast_in += mm * k * batch;
            cast_grad += mm * n * batch;
            if group >= 2 {
                out.mlp_cast_in.0 += mm * k * batch;
            }
            if i == 8 || i == 9 {
                out.mlp_cast_in.1 += mm * k * batch;
            }
            let (tf, dg, wg) = if i == 5 || i == 6 {
                // Routed experts: `batch` local experts' GEMMs.
                (
                    c.experts_gemm(mm, n, k, batch),
                    c.experts_gemm(mm, k, n, batch),
                    c.experts_gemm(k, n, mm, batch),
                )
            } else {
                (
                    c.gemm(mm, n, k, batch),
                    c.gemm(mm, k, n, batch),
                    c.gemm(k, n, mm, batch),
                )
            };
            if c.plan.lora_rank > 0 {
                // Frozen weight: no weight gradient; the adapters in 16-bit beside it.
                let (af, ab) = adapters.unwrap_or((Seconds::ZERO, Seconds::ZERO));
                (tf + af, dg, ab)
            } else {
                (tf, dg, wg)
            }
        };
        let tb = dg + wg;
        if i == 8 || i == 9 {
            out.shared_fwd += tf;
            out.shared[i - 8] = (tf, tb);
        }
        if group == 4 {
            out.router = (tf, tb);
        } else {
            out.fwd[group] += tf;
            out.dgrad[group] += dg;
            out.wgrad[group] += wg;
        }
        tr.line(|| {
            let attn = if c.part == Part::Mamba {
                ["Mamba in_proj", "Mamba out_proj", "", "", ""]
            } else if c.part == Part::Gdn {
                ["GDN in_proj", "GDN out_proj", "", "", ""]
            } else if m.attn.mla.is_some() {
                ["query down", "query up", "KV down", "KV up", "attention projection"]
            } else {
                ["QKV", "attention projection", "", "", ""]
            };
            let rest = [
                "MLP in",
                "MLP out",
                "router",
                "shared MLP in",
                "shared MLP out",
                "latent down (h → ℓ)",
                "latent up (ℓ → h)",
            ];
            let name = if i < 5 { attn[i] } else { rest[i - 5] };
            let lora = match adapters {
                Some((af, ab)) => format!(
                    " (frozen W: its data gradient only; LoRA r = {} in 16-bit, A {mm}×{}×{k} and B {mm}×{n}×{}, each max(2·M·N·K/(peak₁₆·e_gemm), 2·(MK+KN+MN) B/(bw·e_mem)) + launch: fwd {af}, bwd {ab} for their data and weight gradients)",
                    c.plan.lora_rank, c.plan.lora_rank, c.plan.lora_rank
                ),
                None if c.plan.lora_rank > 0 && group != 4 => {
                    " (frozen W, no adapter: its data gradient only)".to_string()
                }
                None => String::new(),
            };
            let streams = (i == 5 || i == 6)
                && c.plan.grouped_gemm == crate::parallel::GroupedGemm::Streams
                && batch > super::TE_STREAMS;
            if streams {
                let s = super::TE_STREAMS;
                return format!(
                    "  GEMM {name}: M={mm} N={n} K={k} ×{batch} experts, {s} at a time on {s} streams ({:.0} rounds + {}): efficiency {:.1}% of peak per round → fwd {tf}, bwd {tb}{lora}",
                    (batch / s).floor(),
                    batch % s,
                    100.0 * c.dev.gemm_efficiency(mm, n, k, s)
                );
            }
            format!(
                "  GEMM {name}: M={mm} N={n} K={k} ×{batch}: efficiency {:.1}% of peak → fwd {tf}, bwd {tb}{lora}",
                100.0 * c.dev.gemm_efficiency(mm, n, k, batch)
            )
        });
    }
    // Bytes per element and kernels per tensor of the quantization (none, zero time, for
    // 16- and 32-bit GEMMs); every block has GEMMs, so an 8- or 4-bit pass always casts.
    let (per_element, kernels) =
        lowp::cast(c.plan.precision, c.plan.fp8_recipe, c.any_layout(), 1.0);
    let cast = |el: f64| c.mem(per_element * el, kernels * 4.0);
    out.cast = (cast(cast_in), cast(cast_grad));
    if per_element > 0.0 {
        tr.line(|| {
            format!(
                "  {} casts (memory-bound, {kernels} kernel(s) per tensor, 4 tensors a pass): forward {cast_in:.4e} input elements, backward {cast_grad:.4e} output-gradient elements, {per_element} B each → fwd {}, bwd {}",
                c.plan.precision.name(),
                out.cast.0,
                out.cast.1
            )
        });
    }
    out
}

/// Attention core (QKᵀ, softmax, dropout, attention·V) on a rank's a/t heads:
/// (forward, backward) time; unfused as Megatron-LM 2022, or fused (flash).
///
/// With sliding windows on a fraction `φ` of the layers (gpt-oss: every other layer, a
/// window of 128) the fused time of a layer is the mean over the layers,
/// `φ·T_window + (1 − φ)·T_full`, each from [`fused_attention`]; a window at least as long as
/// the keys a query sees is full attention. Unfused attention builds the whole s×s score
/// matrix and masks it (Megatron-LM's `FusedScaleMaskSoftmax`), so a window saves nothing
/// there.
pub(super) fn attention<T: Trace>(c: &Ctx, tr: &mut T) -> (Seconds, Seconds) {
    match c.part {
        Part::Mlp => return (Seconds::ZERO, Seconds::ZERO),
        Part::Mamba => return ssd_scan(c, tr),
        Part::Gdn => return delta_rule(c, tr),
        Part::Layer | Part::Attention => {}
    }
    // With CP each rank holds s/c queries against all s keys (load-balanced causal
    // chunks: the same work on every rank).
    let (m, s) = (c.m, c.m.s);
    let sq = s / c.plan.cp as f64;
    let batch = c.plan.micro_batch as f64 * m.heads as f64 / c.plan.tp as f64;
    if c.plan.flash_attention {
        // Keys each query sees: the sequence, or its packed sample.
        let span = s.min(c.plan.sample_len as f64);
        let full = fused_attention(c, sq, batch, span, None, tr);
        let Some(w) = m.window.filter(|w| w.tokens < span) else {
            return full;
        };
        let win = fused_attention(c, sq, batch, span, Some(w.tokens), tr);
        let phi = w.fraction;
        let mix = |a: Seconds, b: Seconds| a * phi + b * (1.0 - phi);
        let (f, b) = (mix(win.0, full.0), mix(win.1, full.1));
        tr.line(|| {
            format!(
                "  attention per layer ({phi:.4} of the layers windowed): fwd = {phi:.4}·{} + {:.4}·{} = {f}, bwd = {phi:.4}·{} + {:.4}·{} = {b}",
                win.0, 1.0 - phi, full.0, win.1, 1.0 - phi, full.1
            )
        });
        return (f, b);
    }
    let eff = c.dev.spec.efficiency.attention;
    let (dqk, dv) = (m.attn.qk_d, m.attn.v_d);
    let qk = c.attn_gemm(sq, s, dqk, batch);
    let av = c.attn_gemm(sq, dv, s, batch);
    let scores = batch * sq * s;
    let drop = if m.bias { 5.0 } else { 0.0 };
    let f = (qk + av) / eff + c.mem(scores * (4.0 + drop), 2.0);
    let bwd_gemm = (c.attn_gemm(sq, dqk, s, batch)
        + c.attn_gemm(s, dqk, sq, batch)
        + c.attn_gemm(sq, s, dv, batch)
        + c.attn_gemm(s, dv, sq, batch))
        / eff;
    let b = bwd_gemm + c.mem(scores * (6.0 + drop), 2.0);
    tr.line(|| {
        format!(
            "  attention core: {batch} × (s×s) scores; QKᵀ {qk}, attention·V {av}; softmax+dropout move {} → fwd {f}, bwd {b}",
            Bytes::new(scores * (4.0 + drop))
        )
    });
    (f, b)
}

/// The Mamba mixer of a hybrid model's `M` layer (`None` for other models).
fn mamba(c: &Ctx) -> Option<crate::model::Mamba> {
    c.m.hybrid.and_then(|h| h.mamba)
}

/// The Gated DeltaNet mixer of a hybrid model's `G` layer (`None` for other models).
fn gdn(c: &Ctx) -> Option<crate::model::Gdn> {
    c.m.hybrid.and_then(|h| h.gdn)
}

/// The chunked gated delta rule of one Gated DeltaNet layer on one TP rank: (forward,
/// backward) time. Its kernels (flash-linear-attention's `chunk_gated_delta_rule`, which
/// Megatron-LM calls) run far below the matrix peak: the state recurrence runs along each
/// sequence chunk after chunk, and the heads in parallel beside it. The published kernel
/// times (QwenLM FlashQLA's benchmark of FLA's kernels on H200 and GB200, 2 048–32 768
/// tokens, 4–64 value heads) follow `T = n·(α + β·H)` for `n` tokens and `H` value heads
/// within 2–3 % at the median, and H200 and GB200 differ by less than 10 % where their
/// BF16 peaks differ 2.5×: neither FLOPs nor bytes set the time. So each pass takes the
/// device's fitted `[α, β]` (`efficiency.gdn_fwd`, `gdn_bwd`: [`Device::gdn_rates`]) on
/// the `b·s` tokens of the rank's sequences and its `H_v/(t·c)` value heads: with context
/// parallelism each rank holds the whole sequence for `H_v/(t·c)` heads after its
/// all-to-all, so the recurrence is as long as without it. Scaled by the layer's work per
/// head against the measured shape ([`Gdn::core_scale`]: 1 at `d_k = d_v = 128`,
/// `C = 64`): `T = b·s·(α + β·H_v/(t·c))·r`. The backward's `[α, β]` include the
/// recomputation of the chunk states.
///
/// [`Device::gdn_rates`]: crate::compute::Device::gdn_rates
/// [`Gdn::core_scale`]: crate::model::Gdn::core_scale
fn delta_rule<T: Trace>(c: &Ctx, tr: &mut T) -> (Seconds, Seconds) {
    let Some(g) = gdn(c) else {
        return (Seconds::ZERO, Seconds::ZERO);
    };
    let cp = c.plan.cp as f64;
    let n = c.tokens * cp;
    let heads = g.value_heads / (c.plan.tp as f64 * cp);
    let r = g.core_scale();
    let ([af, bf], [ab, bb]) = c.gdn_rates;
    let f = (af + bf * heads) * (n * r);
    let b = (ab + bb * heads) * (n * r);
    tr.line(|| {
        format!(
            "  gated delta rule (chunk C = {}): b·s = {n} tokens × (α + β·{heads} value heads) × r = {r:.4} (work per head against d_k = d_v = 128, C = 64): fwd ({af} + {bf}·{heads}) → {f}, bwd ({ab} + {bb}·{heads}) → {b}",
            g.chunk
        )
    });
    (f, b)
}

/// The SSD scan's matrix products of one Mamba layer on one TP rank: (forward, backward)
/// time. Each of the four per-chunk products of [`Mamba::scan_gemms`] runs as a batched
/// GEMM of `b·s/Q` chunks × the rank's groups or heads at the 16-bit peak (mamba_ssm's
/// Triton kernels; Transformer Engine's FP8 does not reach them); backward runs two GEMMs
/// per product (the gradients of both operands, as a linear layer's data and weight
/// gradients) and recomputes `C·Bᵀ` and the chunk states first (mamba_ssm
/// `_mamba_chunk_scan_combined_bwd`). With Mamba context parallelism each rank holds the
/// whole sequence for `H/(t·c)` heads after its all-to-all: the same chunks × heads.
///
/// [`Mamba::scan_gemms`]: crate::model::Mamba::scan_gemms
fn ssd_scan<T: Trace>(c: &Ctx, tr: &mut T) -> (Seconds, Seconds) {
    let Some(mb) = mamba(c) else {
        return (Seconds::ZERO, Seconds::ZERO);
    };
    let chunks = c.tokens / mb.chunk;
    let mut f = Seconds::ZERO;
    let mut b = Seconds::ZERO;
    for (i, &(mm, n, k, per)) in mb.scan_gemms(c.plan.tp as f64).iter().enumerate() {
        let batch = chunks * per;
        let fwd = c.attn_gemm(mm, n, k, batch);
        f += fwd;
        b += c.attn_gemm(mm, k, n, batch) + c.attn_gemm(k, n, mm, batch);
        if i < 2 {
            b += fwd;
        }
    }
    tr.line(|| {
        let t = c.plan.tp as f64;
        format!(
            "  SSD scan (chunk Q = {}): {chunks} chunks × (C·Bᵀ {q}×{q}×{n} on {g} groups; states {p}×{n}×{q}, C·state {q}×{p}×{n}, diagonal {q}×{p}×{q} on {h} heads); {:.4e} FLOP per token on this rank → fwd {f}, bwd (two gradients each, C·Bᵀ and states recomputed) {b}",
            mb.chunk,
            mb.scan_flops_per_token() / t,
            q = mb.chunk,
            n = mb.state,
            p = mb.head_dim,
            g = mb.groups / t,
            h = mb.heads / t,
        )
    });
    (f, b)
}

/// Fused (flash) attention on `batch` = b·a/t heads of `sq` queries against `s` keys:
/// (forward, backward). A fused kernel is not two GEMMs: it streams key/value tiles
/// through on-chip softmax, so its throughput is the kernel's own, measured per pass:
///
/// `F = 2·batch·sq·s_k·(d_qk + d_v)·(½ if causal)` (QKᵀ and attention·V; causal tiles
/// above the diagonal are skipped), where `s_k` is the keys a query sees: the sequence `s`,
/// or the sample length `L` when samples are packed into one sequence and attention spans
/// each sample (Transformer Engine's THD format with per-sample `cu_seqlens`), backward FLOPs `2.5·F` (five GEMMs: QKᵀ recomputed, dV, dP,
/// dQ, dK; the FLOP convention of Dao 2023 and Shah et al. 2024),
/// `T_fwd = F / (peak₁₆ · e_fwd · n/(n + n0)) + k·t_launch`,
/// `T_bwd = 2.5·F / (peak₁₆ · e_bwd · n/(n + n0)) + k·t_launch`,
///
/// with `e_fwd`, `e_bwd`, `n0` the device's `flash_fwd`, `flash_bwd`, `flash_n0` (the
/// kernel Transformer Engine picks), or its `fa2_fwd`, `fa2_bwd`, `fa2_n0` with
/// `--attention-kernel fa2` (FlashAttention-2, PyTorch SDPA's default; on H100 0.35 and 0.34
/// of the 16-bit peak with n0 = 330, from the FlashAttention-3 paper's FlashAttention-2
/// curves, against cuDNN's 0.71 and 0.60: 1.8–2× the attention time), peak₁₆
/// the 16-bit peak (Transformer Engine keeps attention in BF16 under FP8 recipes), and
/// `n` the sequence length one kernel sees: `s_k`, or `s_k/c` for ring context parallelism,
/// which runs `k = c` kernels per pass on blocks of the sequence (Transformer Engine's
/// `AttnFuncWithCP`; `k = 1` otherwise). The saturation `n/(n + n0)` is the rise of the
/// measured kernel throughput with sequence length (FlashAttention-3 paper, Fig. 5–6).
///
/// A causal sliding window of `w < s_k` keys (`window`; FlashAttention's `window_size =
/// (w − 1, 0)`) runs the same kernel on its band only. A span of `s_k` tokens holds
/// `w·s_k − w(w − 1)/2` score pairs ([`causal_window_pairs`]), so
/// `F = 2·batch·sq·(w − w(w − 1)/(2·s_k))·(d_qk + d_v)` at the same FLOPs per pair, and the
/// kernel's loop over keys is `w` long, so `n = min(w, n_full)`. For gpt-oss (`w` = 128,
/// `s` = 4096) F is 516 160 / 8 388 608 = 6.15% of a full layer's, at saturation 0.143
/// instead of 0.842 (H100, n0 = 768): 36% of its time. The short loop's saturation stands
/// in for the kernel's bandwidth bound: per query and head (d = 64) the band reads ~256
/// keys and values per 128 queries, ~770 B with Q and O, for 4·64·126 ≈ 32 kFLOP: 0.33 ns
/// at H100's 3.35 TB/s × 0.7, and 0.32 ns from the saturation model (`n = s` would give
/// 0.05 ns, under the bound). For long windows the time follows the pairs: Mistral 7B's 4096 over
/// 16 384 tokens runs 2.1× faster than full attention (Jiang et al. 2023, §2: 2×).
///
/// Heads narrower than 128 (gpt-oss, BERT: 64) run below the measured rate: each time
/// carries the factor `r` of [`Device::head_size_factors`] (the exponential per score does
/// not shrink with the head), 1 at 128 and above or without the device's `exp_rate`.
///
/// With 8-bit attention (`--fp8-attention`: Transformer Engine's FP8 dot-product attention,
/// cuDNN's FP8/MXFP8 SDPA) each time is the 16-bit one less its launches, over the device's
/// measured speed-up `σ` (`fp8_attention` or `mxfp8_attention`, [`Device::fp8_attention_speedup`]):
/// `T₈ = k·t_launch + (T₁₆ − k·t_launch)/σ`. On GB200: σ = 1.29 / 1.06 (FP8 forward /
/// backward), 1.20 / 0.94 (MXFP8); GB300 1.52 / 1.18 and 1.36 / 0.95; H100 FP8 1.47 / 0.89
/// (cudnn-frontend's SDPA training benchmark, Llama 3.1 shapes, causal, head size 128, the
/// mean of the 4096- and 8192-token ratios: the 8-bit backward is no faster, or slower).
/// Where the device's 8-bit backward computes every causal tile under a sliding window
/// (`fp8_attention_bwd_full`: GB200 and GB300) a windowed layer's backward is full causal
/// attention's 8-bit backward.
///
/// [`causal_window_pairs`]: crate::model::attention::causal_window_pairs
/// [`Device::head_size_factors`]: crate::compute::Device::head_size_factors
/// [`Device::fp8_attention_speedup`]: crate::compute::Device::fp8_attention_speedup
fn fused_attention<T: Trace>(
    c: &Ctx,
    sq: f64,
    batch: f64,
    span: f64,
    window: Option<f64>,
    tr: &mut T,
) -> (Seconds, Seconds) {
    use crate::model::attention::causal_window_pairs;
    let (m, e) = (c.m, &c.dev.spec.efficiency);
    let half = if m.causal { 0.5 } else { 1.0 };
    // Mean keys per query (½ of the span when causal) and keys one kernel's loop covers.
    let (keys, loop_keys) = match window {
        Some(w) => (causal_window_pairs(span, w) / span, w),
        None => (span * half, span),
    };
    let flop = 2.0 * batch * sq * keys * (m.attn.qk_d + m.attn.v_d);
    let ring = c.plan.cp > 1 && c.plan.cp_kind == crate::parallel::CpKind::Ring;
    let (n, k) = if ring {
        (loop_keys.min(span / c.plan.cp as f64), c.plan.cp as f64)
    } else {
        (loop_keys, 1.0)
    };
    let (e_fwd, e_bwd, n0) = c.attn_rates;
    let sat = n / (n + n0 as f64);
    let peak = c.attn_peak.get();
    let launch = e.kernel_overhead * k;
    let d_mean = (m.attn.qk_d + m.attn.v_d) / 2.0;
    let (rf, rb) = c.dev.head_size_factors((e_fwd, e_bwd), c.attn_peak, d_mean);
    let f16 = Seconds::new(flop / (peak * e_fwd * sat) * rf) + launch;
    let b16 = Seconds::new(2.5 * flop / (peak * e_bwd * sat) * rb) + launch;
    let (f, b) = match c.fp8_attn {
        None => (f16, b16),
        Some((sf, sb, bwd_full)) => {
            let f = launch + (f16 - launch) / sf;
            if window.is_some() && bwd_full {
                // The 8-bit backward computes every causal tile: full attention's backward.
                let full = fused_attention(c, sq, batch, span, None, &mut crate::estimate::NoTrace);
                (f, full.1)
            } else {
                (f, launch + (b16 - launch) / sb)
            }
        }
    };
    tr.line(|| {
        let head = match window {
            None => format!(
                "attention (fused): F = 2·{batch}·{sq}·{span}·({}+{})·{half}",
                m.attn.qk_d, m.attn.v_d
            ),
            Some(w) => format!(
                "attention (fused, window of {w}): F = 2·{batch}·{sq}·({w}·{span} − {w}·{}/2)/{span}·({}+{})",
                w - 1.0, m.attn.qk_d, m.attn.v_d
            ),
        };
        // Heads narrower than 128: the exponentials' share (Device::head_size_factors).
        let narrow = if rf != 1.0 || rb != 1.0 {
            let x = e.exp_rate.map_or(0.0, |x| x.get());
            format!(
                "; head size {d_mean} < 128, one exponential per score at {x:.3e}/s: r = {rf:.4} forward and {rb:.4} backward"
            )
        } else {
            String::new()
        };
        let (xf, xb) = if narrow.is_empty() {
            (String::new(), String::new())
        } else {
            (format!(" · {rf:.4}"), format!(" · {rb:.4}"))
        };
        let low = match c.fp8_attn {
            None => String::new(),
            Some((sf, sb, bwd_full)) => {
                let bwd = if window.is_some() && bwd_full {
                    format!("bwd = full causal attention's 8-bit backward (the kernel computes every causal tile under a window) = {b}")
                } else {
                    format!("bwd = {k}·{} + ({b16} − {k}·{})/{sb} = {b}", e.kernel_overhead, e.kernel_overhead)
                };
                format!(
                    "; 8-bit attention (--fp8-attention, {} inputs): fwd = {k}·{} + ({f16} − {k}·{})/{sf} = {f}, {bwd}",
                    c.plan.precision.name(),
                    e.kernel_overhead,
                    e.kernel_overhead
                )
            }
        };
        format!(
            "  {head} = {flop:.4e} FLOP; n/(n+n0) = {n}/({n}+{}) = {sat:.3}{narrow}; fwd = F/({} · {} · {sat:.3}){xf} + {k}·{} = {f16}, bwd = 2.5·F/({} · {} · {sat:.3}){xb} + {k}·{} = {b16}{low}",
            n0, c.attn_peak, e_fwd, e.kernel_overhead, c.attn_peak, e_bwd, e.kernel_overhead
        )
    });
    (f, b)
}

/// Bytes the MoE token permutation moves per pass and its kernel count. A rank holds
/// `T = tokens·etp/t` tokens (the share it dispatches); before the dispatch, permute gathers
/// each token once per chosen expert into expert order (read and write `k·T·h` 16-bit
/// elements, 4 B each); after the combine, unpermute reads the `k` copies and writes
/// their probability-weighted sum (`2·k·T·h + 2·T·h` bytes): `6·k·T·h + 2·T·h` in two
/// kernels (Megatron-core `moe_utils.permute` / `unpermute`, fused into one kernel each by
/// Transformer Engine's `moe_permute`). The backward runs the mirror images: the same bytes.
/// A LatentMoE permutes its ℓ-wide latent tokens: `ℓ` in place of `h`.
fn permute_bytes(c: &Ctx) -> (f64, f64) {
    let m = c.m;
    if m.experts <= 1 {
        return (0.0, 0.0);
    }
    let th = c.tokens * c.plan.etp as f64 / c.plan.tp as f64 * m.eh;
    (6.0 * m.top_k as f64 * th + 2.0 * th, 2.0)
}

/// The MoE all-to-alls of one layer's forward and backward (`2·a`, one pass each `a`:
/// dispatch and combine of `a/2` each). Without `ep_overlap` they sit between attention
/// and the experts: exposed. With it, Megatron-core's 1F1B all-to-all overlap
/// (`overlap_moe_expert_parallel_comm`; the scheme of DeepSeek-V3's DualPipe, DeepSeek-AI
/// 2024 §3.2.1) runs one micro-batch's forward beside another's backward, each all-to-all
/// beside the part of the other pass its schedule pairs it with (`windows::ep_pair`),
/// split evenly over the two passes.
///
/// With the shared-expert overlap (Megatron-core `moe_shared_expert_overlap`,
/// `SharedExpertMLP` and `MoEAlltoAllTokenDispatcher` / `MoEFlexTokenDispatcher`) the shared
/// experts run on a side stream beside their own micro-batch's all-to-alls: FC1 and its
/// activation beside the dispatch, FC2 beside the combine; backward, the all-to-alls are
/// launched first and FC2's and FC1's gradients run beside them (`side`, [`shared_side`]).
/// Each all-to-all `a/2` is then a bulk window over its side's work `S`, beside which it
/// runs at `1/(1 + σ)` of its rate ([`ep_bulk`]). Returns (forward, backward).
fn ep_window(
    c: &Ctx,
    a: Seconds,
    parts: MoeParts,
    side: Option<[Seconds; 4]>,
) -> (Overlap, Overlap) {
    if c.plan.ep_overlap || c.plan.schedule == crate::parallel::Schedule::DualPipe {
        let o = ep_pair(a * 0.5, parts, c.kappa, c.sigma);
        (o.times(0.5), o.times(0.5))
    } else if let Some([df, cf, cb, db]) = side {
        let w = |s: Seconds| ep_bulk(a * 0.5, s, c.kappa, c.sigma);
        (w(df) + w(cf), w(cb) + w(db))
    } else {
        (Overlap::exposed(a), Overlap::exposed(a))
    }
}

/// The shared experts' work beside each all-to-all under `moe_shared_expert_overlap`, as
/// the dispatcher launches it: `[dispatch, combine]` forward, then `[combine, dispatch]`
/// backward (their backward all-to-alls):
///
/// - beside the forward dispatch, FC1 (`linear_fc1_forward_and_act`): its GEMM, the
///   quantization of its input (`T·h` elements in 8 or 4 bits) and the activation
///   (`act_f` B per output element on `T·f_s/t`);
/// - beside the forward combine, FC2 (`linear_fc2_forward`): its GEMM and input
///   quantization (`T·f_s/t` elements);
/// - backward, beside the combine's gradient FC2's data and weight gradients and its
///   output gradient's quantization (`T·h`); beside the dispatch's FC1's, the
///   activation's gradient (`act_b` B per element) and FC1's output gradient's quantization
///   (`g·T·f_s/t`, `g` 2 for a gated MLP).
///
/// `None` without the overlap or shared experts in this block.
fn shared_side(c: &Ctx, lin: &Linears, act: (f64, f64)) -> Option<[Seconds; 4]> {
    let m = c.m;
    let on = c.plan.shared_expert_overlap && c.part.mlp_pair() && m.experts > 1;
    if !on || m.shared_f <= 0.0 {
        return None;
    }
    let t = c.plan.tp as f64;
    let g = if m.gated { 2.0 } else { 1.0 };
    let (per_element, per_tensor) =
        lowp::cast(c.plan.precision, c.plan.fp8_recipe, c.any_layout(), 1.0);
    let quantized = |el: f64| {
        if per_element > 0.0 {
            (per_element * el, per_tensor)
        } else {
            (0.0, 0.0)
        }
    };
    let width = c.tokens * m.shared_f / t;
    let side = |gemm: Seconds, act_bytes: f64, cast_el: f64| {
        let (b, k) = quantized(cast_el);
        let kernels = k + if act_bytes > 0.0 { 1.0 } else { 0.0 };
        gemm + c.mem(act_bytes + b, kernels)
    };
    let [(fc1_f, fc1_b), (fc2_f, fc2_b)] = lin.shared;
    Some([
        side(fc1_f, act.0 * width, c.tokens * m.h),
        side(fc2_f, 0.0, width),
        side(fc2_b, 0.0, c.tokens * m.h),
        side(fc1_b, act.1 * width, g * width),
    ])
}

/// torchtitan's per-op selective checkpointing (`Recompute::Op`): what the backward runs
/// again of one layer's forward. The block keeps the outputs of its matmuls, attention and
/// reduce-scatters, except every second matmul in call order (`wq, wk, wv, wo, w1, w3,
/// w2`: `wk`, `wo` and `w3`; ungated `wk`, `wo`, `w2`), and recomputes every other
/// operation (torchtitan/distributed/activation_checkpoint.py, `SelectiveAC`):
/// - GEMMs: the key projection's share `kv·d_qk/(a·d_qk + kv·(d_qk + d_v))` of the QKV
///   GEMM's forward, the output projection's forward, and half the gated MLP input's
///   (`w3` of `w1, w3`) or the MLP output's forward;
/// - memory-bound: the whole forward's (norms, rotary, activation, residual adds, casts);
/// - TP: the forward's all-gathers, half its TP time (the reduce-scatters are kept).
///
/// Modelled for dense attention-and-MLP layers (torchtitan's Llama blocks).
fn op_recompute<T: Trace>(c: &Ctx, lin: &Linears, fwd: &Pass, tr: &mut T) -> Result<Pass> {
    let m = c.m;
    if m.experts > 1 || m.hybrid.is_some() || m.attn.mla.is_some() {
        return Err(crate::error::Error::input(
            "--recompute",
            "op (torchtitan's per-op checkpointing) is modelled for dense attention and MLP layers; use none, selective or full for MoE, MLA and hybrid models",
        ));
    }
    let at = &m.attn;
    let k_share = at.kv_heads * at.qk_d / (at.heads * at.qk_d + at.kv_heads * (at.qk_d + at.v_d));
    let mlp = if m.gated {
        lin.fwd[2] * 0.5
    } else {
        lin.fwd[3]
    };
    let gemm = lin.fwd[0] * k_share + lin.fwd[1] + mlp;
    tr.line(|| {
        format!(
            "  recompute (per-op checkpointing): GEMMs wk = {k_share:.4}·{} + wo {} + {} {mlp} = {gemm}; memory-bound forward {}; TP all-gathers ½·{} = {}",
            lin.fwd[0],
            lin.fwd[1],
            if m.gated { "w3 = ½·MLP in =" } else { "w2 =" },
            fwd.mem,
            fwd.tp,
            fwd.tp * 0.5
        )
    });
    Ok(Pass {
        gemm,
        mem: fwd.mem,
        tp: fwd.tp * 0.5,
        tp_hidden: fwd.tp_hidden * 0.5,
        tp_bytes: fwd.tp_bytes * 0.5,
        ..Pass::default()
    })
}

/// What a layer's forward spent, for the submodules `plan.recompute_modules` runs again.
struct Redo<'a> {
    lin: &'a Linears,
    /// The attention core's forward.
    att_f: Seconds,
    /// The activation's forward bytes per output element (SwiGLU 6, plain 4).
    act_per: f64,
    /// The permute and unpermute: bytes and kernels per pass.
    perm: (f64, f64),
    /// The dispatch and combine all-to-alls of one pass, and their bytes.
    ep: (Seconds, f64),
}

/// The forwards that `plan.recompute_modules` runs again in the backward (Megatron-core
/// checkpoints, `parallel::RecomputeModules`) per micro-batch: GEMMs, memory-bound time
/// and, for `moe`, the all-to-alls, as a recompute pass.
/// - `layernorm`: the block's pre-norms, read the input and write the output (2 + 2 B per
///   element of the replicated stream), one kernel each;
/// - `mla_up_proj`: MLA's up-projection GEMMs (`Attention::up_projections`) and the
///   rotary embedding on the query and key (read + write 2 B per element, two kernels);
/// - `moe_act`: the routed experts' activation (SwiGLU reads `2f` and writes `f` 16-bit
///   elements per copy, 6 B per output element; a plain activation 4), one kernel;
/// - `core_attn`: the attention core's forward, whatever the kernel;
/// - `mlp` (dense layers): FC1 and FC2 forward, the activation (one kernel) and, in 8 or
///   4 bits, the quantization of their two inputs;
/// - `moe` (MoE layers): the router GEMM, the experts' (and shared experts' and latent
///   projections') forward GEMMs and input quantization, the activation, the permute and
///   unpermute, and the dispatch and combine all-to-alls again, exposed (Megatron-core
///   refuses `moe` beside the EP overlap);
/// - `shared_experts`: the shared experts' two GEMMs, their activation and input
///   quantization.
///
/// The TP/SP collectives inside a recomputed MLP or MoE layer are not counted again.
fn module_recompute<T: Trace>(
    c: &Ctx,
    (attn_on, mlp_on): (bool, bool),
    halves: f64,
    redo: &Redo,
    tr: &mut T,
) -> Pass {
    use crate::parallel::RecomputeModules as R;
    let (m, r) = (c.m, c.plan.recompute_modules);
    if r == R::NONE {
        return Pass::default();
    }
    let t = c.plan.tp as f64;
    let moe = m.experts > 1;
    let mut gemm = Seconds::ZERO;
    let (mut bytes, mut kernels) = (0.0, 0.0);
    let (mut ep, mut ep_bytes) = (Seconds::ZERO, 0.0);
    // Quantizing `el` input elements of `tensors` GEMM inputs again.
    let (per_element, per_tensor) =
        lowp::cast(c.plan.precision, c.plan.fp8_recipe, c.any_layout(), 1.0);
    let recast = |el: f64, tensors: f64, bytes: &mut f64, kernels: &mut f64| {
        if per_element > 0.0 && el > 0.0 {
            *bytes += per_element * el;
            *kernels += per_tensor * tensors;
        }
    };
    if r.has(R::LAYERNORM) {
        bytes += 4.0 * c.rep * halves;
        kernels += halves;
    }
    if r.has(R::MLA_UP_PROJ) && attn_on {
        for (n, k) in m.attn.up_projections(m.h, t) {
            gemm += c.gemm(c.tokens, n, k, 1.0);
        }
        bytes += 4.0 * c.tokens * m.attn.rope_width(t);
        kernels += 2.0;
    }
    if r.has(R::MOE_ACT) && mlp_on && moe {
        let per = if m.gated { 6.0 } else { 4.0 };
        // A rank runs `etp/t` of the tokens' copies on `f/etp` of each expert's width.
        bytes += per * c.tokens * m.f * m.top_k as f64 / t;
        kernels += 1.0;
    }
    if r.has(R::CORE_ATTN) && attn_on {
        gemm += redo.att_f;
    }
    let lin = redo.lin;
    let whole_mlp = mlp_on && r.has(if moe { R::MOE } else { R::MLP });
    if whole_mlp {
        gemm += lin.fwd[2] + lin.fwd[3];
        let width = m.f * m.top_k as f64 + m.shared_f;
        bytes += redo.act_per * c.tokens * width / t;
        kernels += 1.0;
        let inputs = if moe {
            2.0 * (1.0 + f64::from(m.shared_f > 0.0) + f64::from(m.latent_params > 0.0))
        } else {
            2.0
        };
        recast(lin.mlp_cast_in.0, inputs, &mut bytes, &mut kernels);
        if moe {
            gemm += lin.router.0;
            bytes += redo.perm.0;
            kernels += redo.perm.1;
            (ep, ep_bytes) = redo.ep;
        }
    }
    if r.has(R::SHARED_EXPERTS) && mlp_on && moe && m.shared_f > 0.0 {
        gemm += lin.shared_fwd;
        bytes += redo.act_per * c.tokens * m.shared_f / t;
        kernels += 1.0;
        recast(lin.mlp_cast_in.1, 2.0, &mut bytes, &mut kernels);
    }
    let mem = c.mem(bytes, kernels);
    tr.line(|| {
        let a2a = if ep > Seconds::ZERO {
            format!("; the dispatch and combine again {ep}")
        } else {
            String::new()
        };
        format!(
            "  recompute-modules {r}: GEMMs {gemm}, memory-bound {bytes:.4e} B in {kernels} kernels → {mem}{a2a}"
        )
    });
    Pass {
        gemm,
        mem,
        ep,
        ep_bytes,
        ..Pass::default()
    }
}

/// The memory-bound kernels of a Mamba mixer per pass (forward, backward); none for
/// other blocks.
pub(super) fn mamba_kernels(c: &Ctx) -> (f64, f64) {
    match (c.part, mamba(c)) {
        (Part::Mamba, Some(mb)) => {
            let x = mb.bytes(c.plan.tp as f64);
            (x.fwd_kernels, x.bwd_kernels)
        }
        _ => (0.0, 0.0),
    }
}

/// The kernels a Gated DeltaNet mixer launches besides its two projections, per pass
/// (forward, backward): its memory-bound kernels ([`crate::model::Gdn::bytes`]) and the
/// delta rule's (flash-linear-attention `chunk_gated_delta_rule_fwd`: the gates' chunk
/// cumulative sum, `chunk_gated_delta_rule_fwd_intra`, `_fwd_h`, `chunk_fwd_o`, 4;
/// `_bwd`: `recompute_w_u_fwd`, `_fwd_h`, `chunk_bwd_dv_local`, `_bwd_dhu`,
/// `chunk_bwd_dqkwg`, `prepare_wy_repr_bwd`, the reverse cumulative sum, 7); none for
/// other blocks.
pub(super) fn gdn_kernels(c: &Ctx) -> (f64, f64) {
    match (c.part, gdn(c)) {
        (Part::Gdn, Some(g)) => {
            let x = g.bytes(c.plan.tp as f64);
            (x.fwd_kernels + 4.0, x.bwd_kernels + 7.0)
        }
        _ => (0.0, 0.0),
    }
}

/// One transformer layer for one micro-batch on one TP rank, and its TP traffic per
/// dimension (forward, backward) for the DP windows that share links with it.
pub(super) fn layer<T: Trace>(c: &Ctx, tr: &mut T) -> Result<(Block, TpLinks)> {
    let m = c.m;
    let lin = linears(c, tr);
    let (lin_f, lin_b) = lin.total();
    let (att_f, att_b) = attention(c, tr);
    let cpc = cp_comm(c, att_f, att_b)?;
    let (attn_on, mlp_on) = (
        matches!(c.part, Part::Layer | Part::Attention),
        c.part.mlp_pair(),
    );
    // A hybrid model's layer has one pre-norm and one residual add, not two.
    let halves = if c.part == Part::Layer { 2.0 } else { 1.0 };
    let act = if mlp_on {
        c.tokens * (m.f * m.top_k as f64 + m.shared_f) / c.plan.tp as f64
    } else {
        0.0
    };
    let (act_f, act_b) = if m.gated { (6.0, 10.0) } else { (4.0, 6.0) };
    let (bda_f, bda_b) = if m.bias { (7.0, 5.0) } else { (6.0, 2.0) };
    // Forward: LayerNorm ×2 (read + write, 4 B/elem) and bias-dropout-add ×2 (7 B/elem)
    // on the replicated stream. Backward: LayerNorm ×2 (read x, dy, write dx: 6 B/elem),
    // dropout ×2 (5 B/elem), autograd's sum of the two gradients reaching each residual
    // input ×2 (6 B/elem), and bias gradients (column sums: read the output gradient of
    // QKV and of the two row-parallel layers, 2 B/elem).
    let qkv_out = if attn_on {
        c.tokens * m.attn.qkv_width(c.plan.tp as f64)
    } else {
        0.0
    };
    let bias_grads = if m.bias {
        2.0 * qkv_out + 2.0 * halves * c.rep
    } else {
        0.0
    };
    // Rotary embedding: Megatron-core's `apply_rotary_pos_emb` runs one fused kernel on the
    // queries and one on the keys (apex `fused_apply_rotary_pos_emb`), read + write 2 B/elem,
    // and the same on their gradients backward.
    let (rope, rope_k) = if m.rotary && attn_on {
        (c.tokens * m.attn.rope_width(c.plan.tp as f64), 2.0)
    } else {
        (0.0, 0.0)
    };
    // QK-norm (Megatron-core `qk_layernorm`: `q_layernorm`/`k_layernorm`, TE norms over each
    // head's d_qk, in `SelfAttention.get_query_key_value_tensors`): one kernel on the
    // queries and one on the keys, as LayerNorm read + write 2 B/elem forward, and read
    // the input and the gradient, write the gradient (6 B/elem) backward.
    // Without MLA the rotary width is the queries' and keys' whole width.
    let qkn = if m.qk_norm && attn_on && m.attn.mla.is_none() {
        c.tokens * m.attn.rope_width(c.plan.tp as f64)
    } else {
        0.0
    };
    let qkn_k = if qkn > 0.0 { 2.0 } else { 0.0 };
    let (perm, perm_k) = if mlp_on { permute_bytes(c) } else { (0.0, 0.0) };
    // Kernels besides rotary, permute and Mamba's: LayerNorm and bias-dropout-add per
    // block, the MLP's activation; backward also the gradient sums.
    let (k_f, k_b) = match c.part {
        Part::Layer => (5.0, 10.0),
        Part::Mlp => (3.0, 5.0),
        Part::Attention | Part::Mamba | Part::Gdn => (2.0, 5.0),
    };
    let (mam_f, mam_b, mam_kf, mam_kb) = match (c.part, mamba(c), gdn(c)) {
        (Part::Mamba, Some(mb), _) => {
            let x = mb.bytes(c.plan.tp as f64);
            (
                x.fwd * c.tokens,
                x.bwd * c.tokens,
                x.fwd_kernels,
                x.bwd_kernels,
            )
        }
        (Part::Gdn, _, Some(g)) => {
            let x = g.bytes(c.plan.tp as f64);
            (
                x.fwd * c.tokens,
                x.bwd * c.tokens,
                x.fwd_kernels,
                x.bwd_kernels,
            )
        }
        _ => (0.0, 0.0, 0.0, 0.0),
    };
    // Memory-bound bytes per pass besides Mamba's (the EP phases split them below).
    let bytes_f = c.rep * halves * (4.0 + bda_f) + act * act_f + 4.0 * rope + 4.0 * qkn + perm;
    let bytes_b = c.rep * halves * (6.0 + bda_b + 6.0)
        + act * act_b
        + bias_grads
        + 4.0 * rope
        + 6.0 * qkn
        + perm;
    let mem_f = c.mem(bytes_f + mam_f, k_f + rope_k + qkn_k + perm_k + mam_kf);
    let mem_b = c.mem(bytes_b + mam_b, k_b + rope_k + qkn_k + perm_k + mam_kb);
    if mam_f > 0.0 {
        tr.line(|| {
            let what = if c.part == Part::Gdn {
                "Gated DeltaNet memory-bound (convolution + SiLU, q/k L2 norms, repetition to the value heads, gates, gated RMSNorm)"
            } else {
                "Mamba memory-bound (convolution, dt, chunk states, state passing, C·Bᵀ, chunk scan, gated RMSNorm)"
            };
            format!(
                "  {what}: fwd {mam_f:.4e} B in {mam_kf} kernels → {}, bwd {mam_b:.4e} B in {mam_kb} kernels → {}",
                c.mem(mam_f, mam_kf),
                c.mem(mam_b, mam_kb)
            )
        });
    }
    if perm > 0.0 {
        tr.line(|| {
            let t = c.mem(perm, perm_k);
            format!(
                "  MoE permute + unpermute: {perm:.4e} B in {perm_k} kernels per pass → fwd {t}, bwd {t}"
            )
        });
    }
    tr.line(|| {
        let qk = if qkn > 0.0 {
            format!(", QK-norm on {qkn} (4 B/elem fwd, 6 bwd)")
        } else {
            String::new()
        };
        format!("  memory-bound: LayerNorm ×{halves}, bias-dropout-add ×{halves} on {} elements, activation on {act}, rotary embedding on {rope}{qk}: fwd {mem_f}, bwd {mem_b}", c.rep)
    });
    let tp = tp_windows(c, &lin, tr)?;
    let (ep1, ep_b1) = if mlp_on {
        ep_comm(c)?
    } else {
        (Seconds::ZERO, 0.0)
    };
    // The memory-bound passes on each side of the all-to-alls: before the dispatch the
    // first norm and residual add, rotary, QK-norm and the permutation; after it the
    // second norm and residual add, the activation and the un-permutation. A hybrid's
    // MLP block is the transformer layer's second half: its norm and residual add fall
    // after the dispatch, as they do in the layer.
    let attn_halves = match c.part {
        Part::Layer => 1.0,
        Part::Mlp => 0.0,
        Part::Attention | Part::Mamba | Part::Gdn => halves,
    };
    let attn_side = |norm: f64, rope_b: f64, qkn_b: f64| {
        c.rep * attn_halves * norm + rope_b * rope + qkn_b * qkn + perm / 2.0
    };
    let share = |side: f64, all: f64| if all > 0.0 { side / all } else { 0.0 };
    let (side_f, side_b) = (
        attn_side(4.0 + bda_f, 4.0, 4.0),
        attn_side(6.0 + bda_b + 6.0, 4.0, 6.0) + bias_grads * attn_halves / halves,
    );
    let (s_f, s_b) = (share(side_f, bytes_f), share(side_b, bytes_b));
    let sum2 = |a: &[Seconds; 4], i: usize| a[i] + a[i + 1];
    let parts = MoeParts {
        attn_fwd: sum2(&lin.fwd, 0) + lin.router.0 + att_f + mem_f * s_f,
        mlp_fwd: sum2(&lin.fwd, 2) + mem_f * (1.0 - s_f),
        attn_bwd: sum2(&lin.dgrad, 0) + sum2(&lin.wgrad, 0) + lin.router.1 + att_b + mem_b * s_b,
        mlp_dgrad: sum2(&lin.dgrad, 2) + mem_b * (1.0 - s_b),
        mlp_wgrad: sum2(&lin.wgrad, 2),
    };
    let side = shared_side(c, &lin, (act_f, act_b));
    let (ep, ep_bk) = ep_window(c, ep1, parts, side);
    let fwd = Pass {
        gemm: lin_f + att_f,
        mem: mem_f + lin.cast.0,
        tp: tp.fwd.exposed,
        tp_hidden: tp.fwd.hidden,
        slow: tp.fwd.slowdown + cpc.slow.0 + ep.slowdown,
        tp_bytes: tp.bytes.0,
        ep: ep.exposed,
        ep_hidden: ep.hidden,
        ep_slow: ep.slowdown,
        ep_bytes: ep_b1,
        cp: cpc.fwd.0,
        cp_hidden: cpc.fwd.1,
        cp_bytes: cpc.bytes.0,
        host: Seconds::ZERO,
        host_time: Seconds::ZERO,
        host_post: Seconds::ZERO,
    };
    let bwd = Pass {
        gemm: lin_b + att_b,
        mem: mem_b + lin.cast.1,
        tp: tp.bwd.exposed,
        tp_hidden: tp.bwd.hidden,
        slow: tp.bwd.slowdown + cpc.slow.1 + ep_bk.slowdown,
        tp_bytes: tp.bytes.1,
        ep: ep_bk.exposed,
        ep_hidden: ep_bk.hidden,
        ep_slow: ep_bk.slowdown,
        cp: cpc.bwd.0,
        cp_hidden: cpc.bwd.1,
        cp_bytes: cpc.bytes.1,
        ..fwd
    };
    let ops = super::host::layer_ops(c);
    let t_op = c.dev.spec.efficiency.host_op;
    let (host_f, host_b) = (t_op * ops.fwd, t_op * ops.bwd);
    // A dropless MoE layer's forward syncs with the host before its experts
    // (`host::moe_forward_idle`); the EP overlap and DualPipe interleave two micro-batches'
    // passes, so there the pass's host time stands as a whole.
    let paired = c.plan.ep_overlap || c.plan.schedule == crate::parallel::Schedule::DualPipe;
    let host_e = t_op * super::host::expert_ops_fwd(c);
    // The forward dispatch's exposed part (`D`): half the pass's, or with the shared
    // experts beside it its own window's.
    let dispatch = match side {
        Some([df, ..]) if !paired => ep_bulk(ep1 * 0.5, df, c.kappa, c.sigma).exposed,
        _ => fwd.ep * 0.5,
    };
    let before = dispatch + parts.mlp_fwd;
    let segmented = host_e > Seconds::ZERO && !paired;
    let fwd = Pass {
        host_time: host_f,
        host_post: if segmented {
            super::host::moe_forward_idle(host_e, before)
        } else {
            Seconds::ZERO
        },
        ..fwd
    };
    let fwd = Pass {
        host: super::host::pass_idle(&fwd),
        ..fwd
    };
    // The backward has no token-count copy: its `host_post` stays zero.
    let bwd = Pass {
        host_time: host_b,
        ..bwd
    };
    let bwd = Pass {
        host: super::host::pass_idle(&bwd),
        ..bwd
    };
    tr.line(|| {
        let rule = if segmented {
            " (forward: below)"
        } else {
            " (T_host − T_GPU where positive)"
        };
        format!(
            "  host (CUDA graphs: {}): forward {:.1} ops × {t_op} = {host_f}, backward {:.1} ops × {t_op} = {host_b}, GPU idle{rule}: forward {}, backward {}",
            c.plan.cuda_graphs, ops.fwd, ops.bwd, fwd.host, bwd.host
        )
    });
    if segmented {
        tr.line(|| {
            let g = sum2(&lin.fwd, 2);
            format!(
                "  host, MoE forward after the token-count copy (the GPU's queue is empty): experts' launches T_exp = {:.1} ops × {t_op} = {host_e}, dispatch D = {}, experts' GEMMs {g}, memory-bound after the dispatch {}, D + E = {before}; GPU idle = max(0, T_exp − (D + E), T_host − T_GPU) = {}",
                super::host::expert_ops_fwd(c),
                dispatch,
                parts.mlp_fwd - g,
                fwd.host
            )
        });
    }
    let rec = match c.plan.recompute {
        Recompute::None => Pass::default(),
        Recompute::Full => fwd,
        Recompute::Op => op_recompute(c, &lin, &fwd, tr)?,
        Recompute::Selective if c.plan.flash_attention => Pass::default(),
        Recompute::Selective if !attn_on => Pass::default(),
        Recompute::Selective => Pass {
            gemm: att_f,
            ..Pass::default()
        },
    };
    let redo = Redo {
        lin: &lin,
        att_f,
        act_per: act_f,
        perm: (perm, perm_k),
        ep: (ep1, ep_b1),
    };
    let modules = module_recompute(c, (attn_on, mlp_on), halves, &redo, tr);
    let rec = Pass {
        gemm: rec.gemm + modules.gemm,
        mem: rec.mem + modules.mem,
        ep: rec.ep + modules.ep,
        ep_bytes: rec.ep_bytes + modules.ep_bytes,
        ..rec
    };
    tr.line(|| {
        format!(
            "  TP/SP per layer: forward {} ({}); EP all-to-all {ep1} per pass{}, {}",
            tp.fwd.exposed + tp.fwd.hidden,
            Bytes::new(tp.bytes.0),
            super::comm::ep_dispatch_note(c),
            if c.plan.ep_overlap || c.plan.schedule == crate::parallel::Schedule::DualPipe {
                let a = ep1 * 0.5;
                let (_, ph) = ep_pair_phases(a, parts, c.kappa, c.sigma);
                format!(
                    "beside another micro-batch's layer (ep_overlap or dualpipe), four all-to-alls of a = {a} each alone, beside compute at 1/(1 + σ) of their rate, σ = {} (one beside compute busy for g ends at f(a, g) = a + σ/(1 + σ)·min(g, (1 + σ)·a)), in three phases (A_f = {}, M_d = {}, M_w = {}, M_f = {}, A_b = {}, memory-bound bytes on the attention side {side_f:.4e} of {bytes_f:.4e} forward, {side_b:.4e} of {bytes_b:.4e} backward; compute ' = stretched by κ = {} where overlapped): T₁ = max(A_f', f(a, A_f')) = {}; the forward dispatch ends at d₁ = f(a, M_d' + M_w') = {}, the experts at E = max(M_d' + M_w', d₁) + M_f' = {}, the backward dispatch at D = s₂ + f(a, E − s₂), s₂ = max(d₁, M_d'): {}; T₃ = max(D, E) + max(A_b', f(a, A_b')) = {} → exposed min(4a, T₁ + T₃ − G − slowdown) = {}, hidden {}, slowdown {}",
                    c.sigma, parts.attn_fwd, parts.mlp_dgrad, parts.mlp_wgrad, parts.mlp_fwd, parts.attn_bwd, c.kappa, ph[0], ph[4], ph[2], ph[1], ph[3], ep.exposed + ep_bk.exposed, ep.hidden + ep_bk.hidden, ep.slowdown + ep_bk.slowdown
                )
            } else if let Some([df, cf, cb, db]) = side {
                let a = ep1 * 0.5;
                format!(
                    "the shared experts beside their own all-to-alls of a = {a} each alone (moe_shared_expert_overlap; bulk windows, κ = {}, the all-to-all at 1/(1 + σ) of its rate beside them, σ = {}): S' = S + κ·min((1 + σ)·a, S), exposed = min(a, max(0, a + σ/(1 + σ)·min(S', (1 + σ)·a) − S')) with S = FC1 + activation {df} beside the dispatch, FC2 {cf} beside the combine forward; FC2's gradients {cb} beside the combine's, FC1's {db} beside the dispatch's backward → exposed forward {}, backward {}, hidden {}, slowdown {}",
                    c.kappa,
                    c.sigma,
                    ep.exposed,
                    ep_bk.exposed,
                    ep.hidden + ep_bk.hidden,
                    ep.slowdown + ep_bk.slowdown
                )
            } else {
                "exposed (no schedule overlaps it: dispatch and combine sit between attention and the experts)".to_string()
            }
        )
    });
    tr.line(|| {
        let t = |p: &Pass| p.compute() + p.tp + p.ep + p.cp + p.slow;
        format!(
            "  layer total: forward {}, backward {}, recompute {}",
            t(&fwd),
            t(&bwd),
            t(&rec)
        )
    });
    Ok((Block { fwd, bwd, rec }, tp.links()))
}

/// Embedding on the first stage and final norm + logits + cross-entropy on the last. Their
/// TP collectives on the residual stream are the layer's (`tp`), exposed.
///
/// The embedding (Megatron-core `LanguageModelEmbedding.forward`) is memory-bound over the
/// `s·b·h` elements it writes: forward `15` B per element in 3 kernels, the lookup (read a
/// 16-bit row, write it: 4), the `[b, s, h] → [s, b, h]` copy (4) and dropout (read, write,
/// a 1-byte mask: 5), with 2 B allowed for what TP adds (`VocabParallelEmbedding` zeroing
/// the rows outside the rank's vocabulary shard; the clone after the sequence-parallel
/// scatter); backward `8` B in 2 kernels, dropout's backward (read the gradient and the
/// mask, write: 5) and the scatter-add into the table's gradient (read the output gradient:
/// 2; its row updates, at most `s·b` rows, 1). A count of the kernels, not a fit: the
/// embedding is well under 1 % of any step this crate validates.
///
/// The cross-entropy is Megatron-core's `VocabParallelCrossEntropy`
/// (megatron/core/tensor_parallel/cross_entropy.py), memory-bound over the `b·s·V/t`
/// logits, bytes per logit: forward `.float()` (read 2, write 4), max (read 4), subtract
/// the max (read 4, write 4), exp in place (4 + 4), sum (4), divide into the softmax kept
/// for backward (4 + 4): `38` in 6 kernels; backward, the softmax times the loss gradient
/// (4 + 4) and its cast back to the 16-bit logits' gradient (4 + 2): `14` in 2 kernels.
///
/// With `--cross-entropy te` it is Transformer Engine's fused kernel pair
/// (transformer_engine/pytorch/triton/cross_entropy.py, as Megatron-core calls it with
/// `cross_entropy_fusion_impl = "te"`): an online-softmax pass reads the logits (2 B) and
/// keeps each row's max, sum and target logit; after an all-gather of those 3 floats per
/// token over TP, a second pass reads the logits again and writes the FP32 gradient
/// (2 + 4): `8` bytes in 2 kernels forward, the backward as above.
const CE_FWD_BYTES: f64 = 38.0;
/// See [`CE_FWD_BYTES`].
const CE_BWD_BYTES: f64 = 14.0;
/// See [`CE_FWD_BYTES`].
const CE_TE_FWD_BYTES: f64 = 8.0;
pub(super) fn ends<T: Trace>(c: &Ctx, tp: &TpLinks, tr: &mut T) -> Result<(Block, Block)> {
    let (m, t) = (c.m, c.plan.tp as f64);
    let bytes = c.r * c.e;
    let emb_tp = tp.reduce;
    let first = Block {
        fwd: Pass {
            mem: c.mem(15.0 * c.r, 3.0),
            tp: emb_tp,
            tp_bytes: bytes,
            ..Pass::default()
        },
        bwd: Pass {
            mem: c.mem(8.0 * c.r, 2.0),
            ..Pass::default()
        },
        rec: Pass::default(),
    };
    tr.line(|| {
        format!(
            "  embedding (first stage): 15 B per element of s·b·h = {:.4e} B in 3 kernels forward → {}, 8 B in 2 kernels backward → {}; TP reduce of the output {}",
            15.0 * c.r,
            first.fwd.mem,
            first.bwd.mem,
            first.fwd.tp
        )
    });
    let vt = m.v / t;
    // The output layer is Megatron-core's own `tensor_parallel.ColumnParallelLinear`, not a
    // Transformer Engine module (megatron/core/models/gpt/gpt_model.py), so it runs in
    // 16-bit under FP8-family recipes: forward M×N×K, data and weight gradients at the
    // 16-bit peak.
    let (lg_f, lg_b) = c.linear16(c.tokens, vt, m.h, 1.0);
    // The loss's own TP collectives: three all-reduces of a float per token (max, sum of
    // exponentials, target logit) unfused; one all-gather of those 3 floats per token fused.
    let (ce_bytes, ce_kernels, small, small_bytes) = match c.plan.cross_entropy {
        CrossEntropy::Unfused => (
            CE_FWD_BYTES,
            6.0,
            coll(C::AllReduce, c.tokens * 4.0, &c.place.tp, c.coll)? * 3.0,
            12.0 * c.tokens,
        ),
        CrossEntropy::Te => (
            CE_TE_FWD_BYTES,
            2.0,
            coll(C::AllGather, c.tokens * 12.0 * t, &c.place.tp, c.coll)?,
            12.0 * c.tokens * t,
        ),
    };
    let head_tp = tp.gather;
    let back_tp = tp.reduce;
    let last = Block {
        fwd: Pass {
            gemm: lg_f,
            mem: c.mem(4.0 * c.rep + ce_bytes * c.tokens * vt, 1.0 + ce_kernels),
            tp: small + head_tp,
            tp_bytes: if c.plan.sp { bytes } else { 0.0 } + small_bytes,
            ..Pass::default()
        },
        bwd: Pass {
            gemm: lg_b,
            mem: c.mem(6.0 * c.rep + CE_BWD_BYTES * c.tokens * vt, 3.0),
            tp: back_tp,
            tp_bytes: bytes,
            ..Pass::default()
        },
        rec: Pass::default(),
    };
    tr.line(|| {
        format!(
            "  logits GEMM (16-bit) M={} N={vt} K={}: fwd {lg_f}, bwd {lg_b}; final norm + cross-entropy ({}: {ce_bytes} B per logit forward in {ce_kernels} kernels, {CE_BWD_BYTES} backward): fwd {}, bwd {}",
            c.tokens, m.h, match c.plan.cross_entropy { CrossEntropy::Unfused => "unfused", CrossEntropy::Te => "Transformer Engine's fused kernels" }, last.fwd.mem, last.bwd.mem
        )
    });
    Ok((first, last))
}

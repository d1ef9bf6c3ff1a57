//! Communication of a transformer plan per micro-batch and iteration, as overlap windows
//! (`estimate::windows`): EP all-to-alls, pipeline sends, the tied-embedding
//! synchronisation, the data-parallel gradient reduction and ZeRO-3 gathers. TP/SP windows
//! are in `tp.rs`.

use super::{Block, Ctx, Pass};
use crate::collective::Collective as C;
use crate::error::Result;
use crate::estimate::windows::{self, Busy, Overlap, bulk, shared};
use crate::estimate::{Comm, Trace, coll, memo};
use crate::model::moe::nodes_per_token;
use crate::parallel::{DEEPSPEED_2021_RATE, EpDispatch, Schedule, Span, Zero3Impl};
use crate::units::{Bytes, Seconds};

/// MoE dispatch and combine: two all-to-alls per layer and pass, each of the rank's
/// tokens times top-k hidden vectors, `(b·s/c)·(etp/t)·k·h` elements. Each rank dispatches
/// the tokens it holds: with sequence parallelism its `1/t` share of the micro-batch,
/// gathered over the expert-TP ranks first (each needs them for its weight shard), so
/// `etp/t` of the tokens (Megatron-core `MoEAlltoAllTokenDispatcher`: all-gather over
/// ETP, all-to-all over EP; with ETP = TP every rank sends all `b·s/c`). A LatentMoE
/// dispatches its ℓ-wide latent tokens, `ℓ` in place of `h` here and below (Megatron-core
/// `MoELayer.preprocess`: `fc1_latent_proj` before `dispatch_preprocess`).
///
/// Hierarchical dispatch (`EpDispatch::Hierarchical`: DeepSeek-V3 report §3.2.2, DeepEP)
/// sends each token across the scale-out network once per destination node, `d` copies
/// ([`nodes_per_token`]: the expected distinct nodes of its `k` experts, capped by
/// node-limited routing), an all-to-all of `tokens·d·h` over the EP group's `n` nodes at
/// `η_x(n)` of NCCL's rate ([`hybridep_scaleout_efficiency`], measured), and forwards the
/// `k` expert copies inside the NVLink domain, an all-to-all of `tokens·k·h` over the
/// in-domain ranks; the two are pipelined chunk by chunk (DeepEP's normal kernels forward
/// over NVLink while RDMA is in flight): `max` of the two.
///
/// Inside the NVLink domain the hierarchical dispatcher (Megatron-core's `flex`
/// dispatcher with HybridEP, which the NVIDIA recipes run) moves tokens with its own
/// TMA kernels, not NCCL's all-to-all, and reaches a fraction `η(p)` of the rate the
/// domain's bandwidth gives NCCL ([`hybridep_nvlink_efficiency`]): its all-to-alls over
/// the `p` in-domain ranks take `α + (p−1)/p·n/(η(p)·B)`, written here as the all-to-all
/// of `n/η(p)` bytes.
///
/// Load imbalance `ι` (`--moe-imbalance`, the busiest expert's tokens over the mean):
/// every rank sends its own share, but the rank holding the busiest experts receives
/// `ι` times the mean, and the all-to-all ends when it does, so the bytes (not the
/// per-message latency α) scale by `ι`: `α + ι·(p−1)/p·n/B` on one dimension.
pub(super) fn ep_comm(c: &Ctx) -> Result<(Seconds, f64)> {
    if c.m.experts <= 1 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let (tokens, bytes) = ep_tokens_bytes(c);
    if c.plan.ep_dispatch == EpDispatch::Hierarchical {
        let h = hierarchical_phases(c, tokens, bytes)?;
        return Ok((h.across.max(h.inside) * 2.0, 2.0 * (h.across_bytes + bytes)));
    }
    Ok((
        coll(C::AllToAll, bytes, &c.place.ep, c.coll)? * 2.0,
        2.0 * bytes,
    ))
}

/// The tokens a rank dispatches per all-to-all, `(b·s/c)·(etp/t)·ι`, and their bytes
/// `tokens·k·h·e` ([`ep_comm`]).
fn ep_tokens_bytes(c: &Ctx) -> (f64, f64) {
    let share = c.plan.etp as f64 / c.plan.tp as f64;
    let tokens = c.tokens * share * c.plan.moe_imbalance;
    (tokens, tokens * c.m.top_k as f64 * c.m.eh * c.e)
}

/// One all-to-all of the hierarchical dispatcher in its two pipelined phases
/// ([`ep_comm`]): across the nodes (zero when the EP group sits in one NVLink domain)
/// and inside the domain, and the bytes sent across.
struct Phases {
    across: Seconds,
    inside: Seconds,
    across_bytes: f64,
}

fn hierarchical_phases(c: &Ctx, tokens: f64, bytes: f64) -> Result<Phases> {
    let (inner, outer) = c.place.ep.split_at_dim(c.scale_up_dims);
    let eta = hybridep_nvlink_efficiency(in_domain_ranks(c));
    if outer.size <= 1 {
        return Ok(Phases {
            across: Seconds::ZERO,
            inside: coll(C::AllToAll, bytes / eta, &c.place.ep, c.coll)?,
            across_bytes: 0.0,
        });
    }
    let d = nodes_per_token(
        c.m.experts as f64,
        outer.size as f64,
        c.m.top_k as f64,
        c.m.max_nodes,
    );
    let across_bytes = tokens * d * c.m.eh * c.e;
    let eta_x = hybridep_scaleout_efficiency(outer.size);
    Ok(Phases {
        across: coll(C::AllToAll, across_bytes / eta_x, &outer, c.coll)?,
        inside: coll(C::AllToAll, bytes / eta, &inner, c.coll)?,
        across_bytes,
    })
}

/// HybridEP's rate inside an NVLink domain of `p` ranks as a fraction `η(p)` of NCCL's
/// all-to-all on the same links. DeepEP's hybrid-ep branch (`docs/README_Hybrid-EP.md`,
/// GB200, 4096 tokens of hidden 7168, top-8, 8 local experts, 16 SMs, kernel time only)
/// measures an algorithm bandwidth `A` (bytes each rank receives, its own included, over
/// the time) of 750.15 / 684.27 GB/s (BF16 dispatch / combine) at 8 ranks, 661.93 / 600.75
/// at 16, 637.80 / 565.53 at 24, 629.79 / 547.25 at 32 and 612.85 / 543.27 at 36. An
/// all-to-all at NCCL's measured NVLink5 bandwidth `B` = 740 GB/s (the GB200, GB300 and
/// B200 presets) gives `B·p/(p−1)` by the same measure, so
/// `η(p) = mean(A_dispatch, A_combine)·(p−1)/(p·740 GB/s)`: 0.848, 0.800, 0.779, 0.770 and
/// 0.759. Between measured sizes `η` is interpolated linearly in log₂ p; below 8 ranks it
/// keeps the 8-rank value and beyond 36 the 36-rank one (not measured: held, not
/// extrapolated).
pub(crate) fn hybridep_nvlink_efficiency(p: u32) -> f64 {
    const MEASURED: [(f64, f64, f64); 5] = [
        (8.0, 750.15, 684.27),
        (16.0, 661.93, 600.75),
        (24.0, 637.80, 565.53),
        (32.0, 629.79, 547.25),
        (36.0, 612.85, 543.27),
    ];
    measured_efficiency(&MEASURED, 740.0, p)
}

/// HybridEP's scale-out phase across `n` nodes as a fraction `η_x(n)` of NCCL's rate on
/// the same NICs. The hybrid-ep branch's H100 table (`docs/README_Hybrid-EP.md`, "H100
/// Platform": 4096 tokens of hidden 7168, top-8, 8 local experts per rank, uniform random
/// routing, 16 SMs, kernel time only) measures an "IB bandwidth" `L`: the bytes a rank
/// sends to the nodes its tokens go to, its own node included (`tests/test_hybrid_ep.py`,
/// `count_rdma_send_from_routing_map`, as DeepEP counts), over the time; 71.71 / 62.95
/// GB/s (BF16 dispatch / combine) on 16 ranks (2 nodes of 8), 57.69 / 57.46 on 32 (4) and
/// 49.97 / 49.77 on 64 (8). The scale-out all-to-all of those bytes over `n` nodes at
/// NCCL's per-NIC rate `B` = 47 GB/s (the dgx-h100 preset's NDR rate) moves `(n−1)/n` of
/// them, `L = B·n/(n−1)` by the same measure, so `η_x(n) = mean(L_d, L_c)·(n−1)/(n·B)`:
/// 0.716, 0.919 and 0.928. Two nodes fall furthest short (their half-remote traffic is
/// where the NVLink forwarding and the RDMA pipeline overlap least). DeepEP's own normal
/// kernels (V1, `docs/legacy.md`: 58 and 51 GB/s on 32 and 64 H800) give 0.93 and 0.95
/// by the same measure. Interpolated in log₂ n between; 2 nodes and fewer keep the
/// 2-node value, beyond 8 the 8-node one (held, not extrapolated).
pub(crate) fn hybridep_scaleout_efficiency(n: u32) -> f64 {
    const MEASURED: [(f64, f64, f64); 3] = [
        (2.0, 71.71, 62.95),
        (4.0, 57.69, 57.46),
        (8.0, 49.97, 49.77),
    ];
    measured_efficiency(&MEASURED, 47.0, n)
}

/// `η(p) = mean(A_dispatch, A_combine)·(p−1)/(p·B)` at the measured sizes `p` of
/// `(p, A_dispatch, A_combine)` (ascending), interpolated linearly in log₂ p between
/// them and held beyond the first and the last.
fn measured_efficiency(measured: &[(f64, f64, f64)], b: f64, p: u32) -> f64 {
    let eta = |(p, d, c): (f64, f64, f64)| 0.5 * (d + c) * (p - 1.0) / (p * b);
    let x = f64::from(p.max(1));
    let first = measured[0];
    if x <= first.0 {
        return eta(first);
    }
    for w in measured.windows(2) {
        let (lo, hi) = (w[0], w[1]);
        if x <= hi.0 {
            let f = (x / lo.0).log2() / (hi.0 / lo.0).log2();
            return eta(lo) + f * (eta(hi) - eta(lo));
        }
    }
    eta(measured[measured.len() - 1])
}

/// The explain note of the hierarchical dispatcher's rates: ` (HybridEP inside the NVLink
/// domain at η(p) = … of NCCL's rate; across its n nodes at η_x(n) = …)`, empty for other
/// dispatchers and plans without routed experts.
pub(super) fn ep_dispatch_note(c: &Ctx) -> String {
    if c.m.experts <= 1 || !c.part.mlp_pair() || c.plan.ep_dispatch != EpDispatch::Hierarchical {
        return String::new();
    }
    let p = in_domain_ranks(c);
    let inside = format!(
        "HybridEP inside the NVLink domain: its {p} ranks at η({p}) = {:.3} of NCCL's all-to-all rate",
        hybridep_nvlink_efficiency(p)
    );
    let (_, outer) = c.place.ep.split_at_dim(c.scale_up_dims);
    if outer.size <= 1 {
        return format!(" ({inside})");
    }
    let n = outer.size;
    let (tokens, bytes) = ep_tokens_bytes(c);
    let phases = match hierarchical_phases(c, tokens, bytes) {
        Ok(h) => format!(
            "; each all-to-all the slower of the pipelined phases, max(across {}, inside {})",
            h.across, h.inside
        ),
        Err(_) => String::new(),
    };
    format!(
        " ({inside}; across its {n} nodes {:.3} copies per token at η_x({n}) = {:.3}{phases})",
        nodes_per_token(
            c.m.experts as f64,
            n as f64,
            c.m.top_k as f64,
            c.m.max_nodes
        ),
        hybridep_scaleout_efficiency(n)
    )
}

/// The EP group's ranks inside one NVLink domain: the in-domain part of a group that spans
/// nodes, or the whole group.
fn in_domain_ranks(c: &Ctx) -> u32 {
    let (inner, outer) = c.place.ep.split_at_dim(c.scale_up_dims);
    if outer.size > 1 {
        inner.size
    } else {
        c.place.ep.size
    }
}

/// One pipeline transfer (a stage boundary, one direction, one micro-batch): `b·s·h`
/// elements split over the TP ranks (scatter/gather optimisation, Narayanan et al. SC'21
/// §4.1) and gathered back over TP when SP does not already keep them split. Returns the
/// time and bytes of one hop; a stage makes `2·v` of them per micro-batch.
pub(super) fn pp_hop(c: &Ctx) -> Result<(Seconds, f64)> {
    if c.plan.pp <= 1 {
        return Ok((Seconds::ZERO, 0.0));
    }
    let bytes = c.r * c.e / c.plan.tp as f64;
    let mut one = memo::coll(c.colls, C::SendRecv, bytes, &c.place.pp, c.coll)?;
    if !c.plan.sp {
        one += memo::coll(c.colls, C::AllGather, c.r * c.e, &c.place.tp, c.coll)?;
    }
    Ok((one, bytes))
}

/// Pipeline transfers per iteration as windows. In warm-up and cool-down the `p − 1`
/// forward hops that fill the pipeline and the `p − 1` backward hops that drain it are on
/// the critical path. In the steady state a stage makes `2·v` transfers per micro-batch:
/// - interleaved schedule: they run asynchronously beside the next chunk's compute
///   (Megatron-LM `overlap_p2p_comm`, on by default and only for the interleaved
///   schedule): bulk windows against the stage's compute per micro-batch, `m` of them;
/// - 1F1B and GPipe: Megatron-LM's `send_forward_recv_backward` /
///   `send_backward_recv_forward` block between compute steps: exposed.
pub(super) fn pp_windows(c: &Ctx, hop: Seconds, stage: Seconds) -> Overlap {
    if c.plan.pp <= 1 {
        return Overlap::default();
    }
    let fill_drain = hop * (2.0 * (c.plan.pp - 1) as f64);
    let per_mb = hop * (2.0 * c.plan.v as f64);
    let steady = if matches!(c.plan.schedule, Schedule::Interleaved | Schedule::DualPipe) {
        bulk(per_mb, stage, c.kappa)
    } else {
        Overlap::exposed(per_mb)
    }
    .times(c.plan.micro_batches as f64);
    Overlap {
        exposed: fill_drain + steady.exposed,
        ..steady
    }
}

/// Tied embeddings or MTP modules with p > 1: the first and last stage all-reduce the word
/// embedding's gradient (V·h/t) once per iteration (Megatron-core `finalize_model_grads.py`,
/// `_allreduce_word_embedding_grads`: the embedding group holds the first stage and the one
/// that keeps a copy, the output layer of a tied model or the MTP modules' own embedding).
pub(super) fn embedding_sync(c: &Ctx) -> Result<(Seconds, f64)> {
    let n = c.place.pp.n;
    if c.plan.pp <= 1 || !(c.m.tied || c.m.mtp_layers > 0) || n == 0 {
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
    Ok((
        memo::coll(c.colls, C::AllReduce, bytes, &pair, c.coll)?,
        bytes,
    ))
}

/// The span of one pass a DP (or ZeRO-3) collective can be in flight during. When TP and DP
/// travel on different network dimensions (NVLink and the scale-out NICs are separate
/// links) a DP bucket flows during the whole critical path of the pass, TP's part of it
/// included: compute, the TP communication left exposed and the interference it caused
/// (`T = G + E_TP + κ·o_TP`), less the compute hiding CP. The pass then lasts about
/// `max(T, C_DP)`, which never grows when compute gets faster. When TP and DP share a
/// dimension, only compute not already hiding TP is free for DP (`Pass::free`), and
/// `windows::shared` adds their contention.
pub(super) fn dp_window(c: &Ctx, p: &Pass) -> Seconds {
    if c.tp_dp_share {
        p.free()
    } else {
        (p.compute() + p.tp + p.slow - p.cp_hidden).max(Seconds::ZERO)
    }
}

/// What DP traffic shares with: the TP traffic of one layer per pass (busy time per
/// topology dimension) and the number of layers on the stage.
pub(super) struct Neighbours {
    pub(super) tp_fwd: Busy,
    pub(super) tp_bwd: Busy,
    pub(super) layers: f64,
}

/// Data-parallel communication as windows (ZeRO-0/1/2; ZeRO-3 in [`zero3`]):
/// - gradient reduction (all-reduce, or reduce-scatter with ZeRO ≥ 1), bucketed, starts in
///   the last micro-batch's backward (accumulation defers it) and hides behind the
///   backward of the layers not yet reached: a bulk window of `R − R_last` against that
///   backward; the last bucket `R_last = R · min(1, bucket/gradient)` is exposed;
/// - with ZeRO ≥ 1, the parameter all-gather of the distributed optimizer hides behind the
///   first micro-batch's forward (Megatron `--overlap-param-gather`);
/// - both share the dimensions they span with the TP traffic of the same window
///   (`windows::shared`); with DP overlap off, everything is exposed;
/// - with ZeRO-2 the gradients are sharded, so accumulation cannot defer the reduction: the
///   reduce-scatter runs after every micro-batch's backward (DeepSpeed
///   `stage_1_and_2.py`; its maintainers in DeepSpeed issue #2252: "gradient reduction is
///   required after every backward because of gradient partitioning"), `m` times the
///   window above, each with its last bucket exposed: `m·(R_exposed + R_last)`.
///
/// Returns the DP class and the interference it causes.
pub(super) fn dp_comm<T: Trace>(
    c: &Ctx,
    params: f64,
    worst: &Block,
    nb: &Neighbours,
    tr: &mut T,
) -> Result<(Comm, Seconds)> {
    let plan = c.plan;
    let g = plan.optimizer.bytes_per_param().1;
    let dp = c.grad_span;
    // Routed experts' gradients sit in buffers of their own, reduced over the expert-DP
    // group (none when one rank holds each expert: EP spans the stage's ranks).
    let edp = &c.place.edp;
    let routed_all = super::state::routed_trainable(c).min(params);
    let dense = if dp.size > 1 {
        params - routed_all
    } else {
        0.0
    };
    let routed_moved = if edp.size > 1 { routed_all } else { 0.0 };
    if dense + routed_moved <= 0.0 {
        return Ok((Comm::default(), Seconds::ZERO));
    }
    let (grad, weights) = ((dense + routed_moved) * g, (dense + routed_moved) * c.e);
    let reduce_op = if plan.zero == 0 {
        C::AllReduce
    } else {
        C::ReduceScatter
    };
    // k buckets per buffer, each its own collective (without overlap, one).
    let buckets = |b: f64| {
        if b <= 0.0 {
            0.0
        } else if plan.dp_overlap {
            (b / plan.dp_bucket_bytes().get()).ceil().max(1.0)
        } else {
            1.0
        }
    };
    let (kd, ke) = (buckets(dense * g), buckets(routed_moved * g));
    let k = kd + ke;
    let both = |op: C, per_param: f64| -> Result<(Seconds, Busy)> {
        let mut out = (Seconds::ZERO, [0.0; crate::collective::MAX_DIMS]);
        for (n, kk, span) in [(dense, kd, dp), (routed_moved, ke, edp)] {
            if kk > 0.0 {
                let (t, busy) = bucketed(op, n * per_param, kk, span, c)?;
                out = (out.0 + t, windows::plus(&out.1, &busy));
            }
        }
        Ok(out)
    };
    let (reduce, r_busy) = both(reduce_op, g)?;
    let (gather, g_busy) = if plan.zero > 0 {
        both(C::AllGather, c.gathered_param_bytes())?
    } else {
        (Seconds::ZERO, [0.0; crate::collective::MAX_DIMS])
    };
    let last = reduce / k;
    let (wb, wf) = if plan.dp_overlap {
        let rest = 1.0 - last / reduce.max(Seconds::new(1e-300));
        let delay_b = shared(
            &windows::scaled(&r_busy, rest),
            &windows::scaled(&nb.tp_bwd, nb.layers),
        );
        let delay_f = shared(&g_busy, &windows::scaled(&nb.tp_fwd, nb.layers));
        let wb = bulk(
            reduce - last + delay_b,
            dp_window(c, &worst.bwd) + dp_window(c, &worst.rec),
            c.kappa,
        );
        (
            wb,
            bulk(gather + delay_f, dp_window(c, &worst.fwd), c.kappa),
        )
    } else {
        (Overlap::exposed(reduce - last), Overlap::exposed(gather))
    };
    // Gradient reductions per iteration: one, or one per micro-batch with ZeRO-2.
    let reps = if plan.zero == 2 {
        plan.micro_batches as f64
    } else {
        1.0
    };
    let exposed = (wb.exposed + last) * reps + wf.exposed;
    let slowdown = wb.slowdown * reps + wf.slowdown;
    tr.line(|| {
        format!(
            "DP window (ZeRO-{}): gradient {} ({}) → reduction R = {k} buckets × {last} = {reduce} (bucket {}: each pays the collective's latency), last bucket exposed; R − R_last (+ sharing with TP) under the last micro-batch's backward {} → exposed {}{}; parameter all-gather {gather} under the first forward {} → exposed {}; interference {slowdown}",
            plan.zero,
            Bytes::new(grad),
            if routed_all > 0.0 {
                format!(
                    "dense {} over DP {}; routed experts' {} over expert-DP {}",
                    Bytes::new(dense * g),
                    dp.size,
                    Bytes::new(routed_all * g),
                    edp.size
                )
            } else {
                format!("over DP {}", dp.size)
            },
            plan.dp_bucket_bytes(),
            dp_window(c, &worst.bwd) + dp_window(c, &worst.rec),
            wb.exposed,
            if reps > 1.0 {
                format!("; ZeRO-2 reduces after every micro-batch: {reps} × ({} + {last})", wb.exposed)
            } else {
                String::new()
            },
            dp_window(c, &worst.fwd),
            wf.exposed
        )
    });
    let bytes = grad * reps + if plan.zero > 0 { weights } else { 0.0 };
    Ok((
        Comm {
            exposed,
            hidden: (reduce * reps + gather - exposed).max(Seconds::ZERO),
            bytes: Bytes::new(bytes),
        },
        slowdown,
    ))
}

/// ZeRO-3 / FSDP, per layer and micro-batch (Rajbhandari et al. SC'20 §5; Zhao et al.
/// VLDB'23, PyTorch FSDP §3.3 "backward prefetch"): each layer's parameters `P_l` are
/// all-gathered before its forward and again before its backward, and its gradients
/// reduce-scattered after its backward, in every micro-batch (the gradients are sharded, so
/// accumulation cannot defer them). How many gathers and collectives, and how fast, depends
/// on the implementation ([`Zero3Impl`]):
/// - `fsdp`: one flat all-gather / reduce-scatter per layer (`k = 1`), `g = 2` gathers (the
///   one before backward also serves the recomputed forward);
/// - `deepspeed-2021`: prefetch buckets of at most 5·10⁷ parameters, a weight matrix larger
///   than that gathered whole (`k = min(weight matrices, ⌈P_l / 5·10⁷⌉)`, each a collective
///   paying its latency; the embedding and the head one each); module hooks release the
///   weights after the recomputed forward too, so `g = 3` gathers with full
///   recomputation, and as DeepSpeed prefetches from a trace of the forward's module
///   order, which the recomputing backward does not follow, the backward's `g − 1`
///   gathers are then fetched on demand, exposed (DeepSpeed PR #1916 reworked this trace
///   handling in 2022; its maintainers on prefetching and the trace: DeepSpeed issue
///   #4808); every collective takes at least `bytes·(n−1)/n / R` with `R` =
///   [`DEEPSPEED_2021_RATE`] per GPU.
///
/// Each gather is prefetched one layer ahead:
/// - forward: `AG_l` hides behind layer l−1's forward (bulk window), `L − 1` windows;
/// - backward: `(g − 1)·AG_l` and `RS_{l+1}` run together (sharing the DP dimensions:
///   their times add) behind layer l's recompute + backward, `L − 1` windows;
/// - exposed outright: the first layer's gather in each pass, the last reduce-scatter, and
///   the gather / reduce-scatter of the parameters outside the layers (embedding, head).
///
/// The TP traffic of the same layer shares dimensions with these (`windows::shared`).
pub(super) fn zero3<T: Trace>(
    c: &Ctx,
    params: f64,
    layer: &Block,
    worst: &Block,
    nb: &Neighbours,
    tr: &mut T,
) -> Result<(Comm, Seconds)> {
    let plan = c.plan;
    let g = plan.optimizer.bytes_per_param().1;
    if c.grad_span.size <= 1 {
        return Ok((Comm::default(), Seconds::ZERO));
    }
    // HSDP: shard within the inner group, all-reduce across replicas (hsdp.rs).
    let groups = if plan.hsdp > 1 {
        Some(super::hsdp::groups(c)?)
    } else {
        None
    };
    let dp = groups.as_ref().map_or(c.grad_span, |g| &g.0);
    let rr = match &groups {
        Some((_, r)) => super::hsdp::replica_reduce(c, r, params * g, worst)?,
        None => super::hsdp::ReplicaReduce::default(),
    };
    if let Some((_, r)) = &groups
        && r.size > 1
    {
        tr.line(|| {
            format!(
                "HSDP replicas: all-reduce of the gradient shard {} over {} replicas AR = {}; last bucket AR·min(bucket/shard, 1) = {} exposed; AR − last beside the last micro-batch's backward + recompute {} (bulk, κ = {}) → exposed {} in all, hidden {}",
                Bytes::new(rr.bytes),
                r.size,
                rr.ar,
                rr.last,
                rr.window,
                c.kappa,
                rr.w.exposed,
                rr.w.hidden
            )
        });
    }
    let (replica, replica_bytes) = (rr.w, rr.bytes);
    let pl = c.layer_params;
    let outside = (params - nb.layers * pl).max(0.0);
    // Collectives per layer: ⌈P_l·g / bucket⌉ with the bucket given, else one per layer
    // (FSDP's wrapped block) or DeepSpeed's `stage3_prefetch_bucket_size` of 5·10⁷
    // parameters (DeepSpeed `zero/config.py`): each prefetch one coalesced all-gather.
    let ds = plan.zero3_impl == Zero3Impl::Deepspeed2021;
    let (k, k_out) = match (plan.dp_bucket, ds) {
        (Some(b), _) => (
            (pl * g / b.get()).ceil().max(1.0),
            (outside * g / b.get()).ceil().max(1.0),
        ),
        (None, true) => {
            // Weights above the persistence threshold (10⁵) are gathered whole, small
            // ones coalesced up to the bucket: min(weight matrices, ⌈P_l / 5·10⁷⌉).
            let m = c.m;
            let experts = (m.experts as f64 / plan.ep as f64).max(1.0);
            let shared = if m.shared_f > 0.0 { 2.0 } else { 0.0 };
            let weights = 2.0 + 2.0 * experts + shared;
            (
                weights.min((pl / 5e7).ceil()).max(1.0),
                (outside / 5e7).ceil().clamp(1.0, 2.0),
            )
        }
        (None, false) => (1.0, 1.0),
    };
    // DeepSpeed 2021 moves the bytes a rank receives (all-gather) or sends
    // (reduce-scatter), `bytes·(n−1)/n`, at most at its per-GPU rate.
    let floor = |bytes: f64| {
        if ds {
            Seconds::new(bytes * (dp.size as f64 - 1.0) / dp.size as f64 / DEEPSPEED_2021_RATE)
        } else {
            Seconds::ZERO
        }
    };
    let once = unsharded_across_micro_batches(plan);
    let we = c.gathered_param_bytes();
    let (ag_nccl, ag_b) = bucketed(C::AllGather, pl * we, k, dp, c)?;
    let (rs_nccl, rs_b) = bucketed(C::ReduceScatter, pl * g, k, dp, c)?;
    let (ag, rs) = (ag_nccl.max(floor(pl * we)), rs_nccl.max(floor(pl * g)));
    let ends = bucketed(C::AllGather, outside * c.e, k_out, dp, c)?
        .0
        .max(floor(outside * c.e))
        * if once { 1.0 } else { 2.0 }
        + bucketed(C::ReduceScatter, outside * g, k_out, dp, c)?
            .0
            .max(floor(outside * g));
    // FSDP under pipeline parallelism keeps each stage's units unsharded across its
    // micro-batches: PyTorch's pipeline schedules turn gradient sync and resharding after
    // backward off for all but the last backward (`backward_maybe_with_nosync`), and
    // torchtitan builds its blocks with `reshard_after_forward = not pp_enabled`. So a layer
    // is gathered once per step (the first forward) and reduce-scattered once (the last
    // backward), and its gathered weights and full gradients stay resident (`state.rs`).
    let gathers = if once {
        1.0
    } else if ds && plan.recompute == crate::parallel::Recompute::Full {
        3.0
    } else {
        2.0
    };
    let fixed = ag * gathers + rs + ends;
    let windows_n = (nb.layers - 1.0).max(0.0);
    let per_mb = if plan.dp_overlap {
        let comm_f = ag + shared(&ag_b, &nb.tp_fwd);
        // DeepSpeed 2021 prefetches from a trace of the forward's module order; with full
        // recomputation the backward runs the modules in another order, so its gathers
        // are fetched when needed (exposed) and only the reduce-scatter overlaps.
        let on_demand = ds && plan.recompute == crate::parallel::Recompute::Full;
        let ag_bwd = if on_demand { 0.0 } else { gathers - 1.0 };
        let demand = if on_demand {
            ag * (gathers - 1.0)
        } else {
            Seconds::ZERO
        };
        let comm_b = ag * ag_bwd
            + rs
            + shared(
                &windows::plus(&windows::scaled(&ag_b, ag_bwd), &rs_b),
                &nb.tp_bwd,
            );
        // Interference while the collectives' kernels run: all the time at NCCL rates,
        // `T_nccl / T` of it under DeepSpeed 2021's rate floor (`windows::kappa_active`).
        let kf = windows::kappa_active(c.kappa, ag_nccl, ag);
        let kb = windows::kappa_active(c.kappa, ag_nccl * ag_bwd + rs_nccl, ag * ag_bwd + rs);
        if ds {
            tr.line(|| {
                format!(
                    "ZeRO-3 interference while its kernels run: κ_a = κ·T_nccl/T = {}·{ag_nccl}/{ag} = {kf:.4} for the gathers, {kb:.4} in backward (the rest of T waits on DeepSpeed's per-GPU rate)",
                    c.kappa
                )
            });
        }
        let wf = bulk(comm_f, dp_window(c, &layer.fwd), kf);
        let wb = bulk(
            comm_b,
            dp_window(c, &layer.bwd) + dp_window(c, &layer.rec),
            kb,
        );
        tr.line(|| {
            format!(
                "ZeRO-3 ({}) windows per layer and micro-batch ({k} collective{} per layer, each paying its latency{}): all-gather {ag} of {} under the previous layer's forward {} → exposed {}; {} under the layer's recompute + backward {} → exposed {}{}; ×{windows_n} windows; exposed outright {fixed} (first gathers, last reduce-scatter, embedding and head)",
                plan.zero3_impl.name(),
                if k == 1.0 { "" } else { "s" },
                if ds {
                    format!(
                        "; at most {} per GPU: max(NCCL time, bytes·(n−1)/n / rate)",
                        crate::units::Bandwidth::new(DEEPSPEED_2021_RATE)
                    )
                } else {
                    String::new()
                },
                Bytes::new(pl * c.e),
                dp_window(c, &layer.fwd),
                wf.exposed,
                if on_demand {
                    format!("reduce-scatter {rs}")
                } else {
                    format!("{}−1 all-gathers + reduce-scatter {}", gathers, ag * (gathers - 1.0) + rs)
                },
                dp_window(c, &layer.bwd) + dp_window(c, &layer.rec),
                wb.exposed,
                if on_demand {
                    format!(" + {}−1 all-gathers fetched on demand {demand} (the prefetch trace follows the forward's module order)", gathers)
                } else {
                    String::new()
                }
            )
        });
        (wf + wb + Overlap::exposed(demand)).times(windows_n) + Overlap::exposed(fixed)
    } else {
        Overlap::exposed((ag * gathers + rs) * windows_n + fixed)
    };
    let mb = if once { 1.0 } else { plan.micro_batches as f64 };
    let total = ((ag * gathers + rs) * windows_n + fixed) * mb;
    let w = per_mb.times(mb) + replica;
    let total = total + replica.exposed + replica.hidden;
    let bytes = mb * (params * (gathers * c.e + g)) + replica_bytes;
    Ok((
        Comm {
            exposed: w.exposed,
            hidden: (total - w.exposed).max(Seconds::ZERO),
            bytes: Bytes::new(bytes),
        },
        w.slowdown,
    ))
}

/// FSDP with pipeline parallelism: each stage's units stay unsharded from the first
/// micro-batch's forward to the last one's backward (PyTorch pipelining, torchtitan), so
/// ZeRO-3 gathers and reduce-scatters once per step. DeepSpeed runs no ZeRO-3 with PP.
pub(super) fn unsharded_across_micro_batches(plan: &crate::parallel::Plan) -> bool {
    plan.pp > 1 && plan.zero == 3 && plan.zero3_impl == Zero3Impl::Fsdp
}

/// `bytes` moved as `k` equal buckets, each a collective of its own: `k · T(bytes/k)` (so
/// `k` latencies and the same transfer), and the busy time per dimension.
fn bucketed(op: C, bytes: f64, k: f64, span: &Span, c: &Ctx) -> Result<(Seconds, Busy)> {
    let (one, busy) = memo::coll_busy(c.colls, op, bytes / k, span, c.dp_coll, c.tp_dp_share)?;
    Ok((one * k, windows::scaled(&busy, k)))
}

#[cfg(test)]
mod tests {
    use super::hybridep_nvlink_efficiency as eta;
    use approx::assert_relative_eq;

    #[test]
    fn hybridep_in_domain_rate_from_its_published_kernel_bandwidths() {
        // η(p) = ½(dispatch + combine)·(p − 1)/(p·740 GB/s), by hand from the README's
        // GB200 kernel-time figures at 16 SMs.
        assert_relative_eq!(eta(8), 717.21 * 7.0 / 5920.0, max_relative = 1e-12);
        assert_relative_eq!(eta(8), 0.848052, epsilon = 1e-6);
        assert_relative_eq!(eta(16), 0.799840, epsilon = 1e-6);
        assert_relative_eq!(eta(24), 0.779183, epsilon = 1e-6);
        assert_relative_eq!(eta(32), 0.770444, epsilon = 1e-6);
        assert_relative_eq!(eta(36), 0.759463, epsilon = 1e-6);
        // 12 ranks: log₂(12/8) = 0.585 of the way from 8 to 16.
        assert_relative_eq!(eta(12), 0.819850, epsilon = 1e-6);
        // 34 ranks: log₂(34/32)/log₂(36/32) = 0.515 of the way from 32 to 36.
        let f = (34.0f64 / 32.0).log2() / (36.0f64 / 32.0).log2();
        assert_relative_eq!(
            eta(34),
            0.770444 + f * (0.759463 - 0.770444),
            epsilon = 1e-6
        );
        // Held outside the measured range.
        assert_eq!(eta(2), eta(8));
        assert_eq!(eta(1), eta(8));
        assert_eq!(eta(64), eta(36));
        assert_eq!(eta(72), eta(36));
    }

    #[test]
    fn hybridep_scaleout_rate_from_its_published_h100_bandwidths() {
        use super::hybridep_scaleout_efficiency as eta_x;
        // η_x(n) = ½(dispatch + combine)·(n − 1)/(n·47 GB/s), by hand from the README's H100
        // kernel-time figures at 16 SMs: 2 nodes 67.33 GB/s, 4 nodes 57.575, 8 nodes 49.87.
        assert_relative_eq!(eta_x(2), 67.33 / 94.0, max_relative = 1e-12);
        assert_relative_eq!(eta_x(2), 0.716277, epsilon = 1e-6);
        assert_relative_eq!(eta_x(4), 57.575 * 3.0 / 188.0, max_relative = 1e-12);
        assert_relative_eq!(eta_x(8), 49.87 * 7.0 / 376.0, max_relative = 1e-12);
        // 3 nodes: log₂(3/2) = 0.585 of the way from 2 to 4.
        assert_relative_eq!(
            eta_x(3),
            0.716277 + 0.584963 * (0.918750 - 0.716277),
            epsilon = 1e-6
        );
        // Held outside the measured range: one node (no scale-out phase) and beyond 8.
        assert_eq!(eta_x(1), eta_x(2));
        assert_eq!(eta_x(16), eta_x(8));
        assert_eq!(eta_x(64), eta_x(8));
    }
}

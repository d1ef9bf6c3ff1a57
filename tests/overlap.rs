//! The overlap windows of the estimate (DESIGN.md §6, `estimate::windows`), each rule
//! checked against a value worked out by hand in the test from the textbook α-β costs.
//! The networks have zero latency and round bandwidths, and the collectives run as plain
//! hierarchical phases (`schedule = baseline`), so that every collective is a one-line
//! formula: on a switch a ring reduce-scatter or all-gather of n bytes over p NPUs moves
//! (p−1)/p · n at B; a hierarchical one over 8 × p₂ does the inner phase on n and the outer
//! one on n/8 (Thakur et al. 2005; Chan et al. 2007).

use crate::common;

use approx::assert_relative_eq;
use astrolabe::catalog;
use astrolabe::collective::Schedule;
use astrolabe::estimate::{self, CommClass, Estimate};
use astrolabe::network::Topology;
use astrolabe::parallel::{PlanSpec, Recompute, Schedule as Pipeline, Zero3Impl};
use astrolabe::system::System;

/// Interference κ of the presets (Lee et al. 2025 mean GEMM slowdown under overlap).
const KAPPA: f64 = 0.189;

fn system(topology: &str) -> System {
    let mut s = catalog::system("dgx-a100").unwrap();
    s.topology = Topology::parse(topology).unwrap();
    s.collective.schedule = Schedule::Baseline;
    s.dp_collective.schedule = Schedule::Baseline;
    s
}

#[track_caller]
fn run(model: &str, sys: &System, spec: PlanSpec) -> Estimate {
    let m = catalog::model(model).unwrap();
    let plan = estimate::plan(&m, sys, &spec).unwrap();
    estimate::evaluate(&m, sys, &plan).unwrap()
}

/// GPT 22B (Korthikanti et al. 2022): 48 layers, h = 6144, s = 2048.
const L: f64 = 48.0;
const H: f64 = 6144.0;
const S: f64 = 2048.0;

fn sp_plan(tp: u32, gpus: u32, overlap: bool) -> PlanSpec {
    PlanSpec {
        gpus: Some(gpus),
        tp,
        micro_batch: 1,
        global_batch: Some(2 * gpus / tp),
        sequence_parallel: true,
        tp_overlap: overlap,
        flash_attention: true,
        recompute: Recompute::None,
        ..PlanSpec::default()
    }
}

#[test]
fn tp_across_nodes_is_exposed_even_with_tp_overlap() {
    // TP 16 = 8 GPUs of a node × 2 nodes. Per layer and micro-batch, SP exposes in forward
    // 2 all-gathers + 2 reduce-scatters (userbuffers overlap needs the TP group inside the
    // NVLink domain) and in backward the 2 all-gathers of the row-parallel output gradients;
    // the other 4 backward collectives hide under their GEMMs (bandwidths chosen so they
    // are far shorter). The first/last stage adds the embedding reduce-scatter, the head's
    // all-gather and backward reduce-scatter, and 3 all-reduces of b·s fp32 values.
    let (b0, b1) = (2000e9, 200e9);
    let sys = system("switch(8, 2000GB/s, 0us) x switch(2, 200GB/s, 0us)");
    let n = S * H * 2.0; // b·s·h bf16 elements
    let ag = 7.0 / 8.0 * n / b0 + 1.0 / 2.0 * (n / 8.0) / b1;
    let small = 4.0 * S;
    let ar_small = 2.0 * 7.0 / 8.0 * small / b0 + 2.0 * 1.0 / 2.0 * (small / 8.0) / b1;
    let m = 2.0; // global batch 2, dp = 1
    let per_mb = (6.0 * L + 3.0) * ag + 3.0 * ar_small;
    for overlap in [true, false] {
        let e = run("megatron-gpt-22b", &sys, sp_plan(16, 16, overlap));
        let sp = e.time.class(CommClass::Sp);
        assert_relative_eq!(sp.exposed.get(), m * per_mb, max_relative = 1e-9);
    }
}

#[test]
fn tp_inside_a_node_exposes_one_chunk_per_collective() {
    // TP 8 inside the node with TP overlap: each chunked collective (4 in forward, 2
    // row-parallel all-gathers in backward) exposes C/n with n = t = 8 chunks, as the GEMM
    // covers the rest; the ends' collectives are not chunked. Without overlap all 6 are
    // exposed.
    let b0 = 2000e9;
    let sys = system("switch(8, 2000GB/s, 0us) x switch(2, 200GB/s, 0us)");
    let n = S * H * 2.0;
    let ag = 7.0 / 8.0 * n / b0;
    let ar_small = 2.0 * 7.0 / 8.0 * (4.0 * S) / b0;
    let m = 2.0;
    let ends = 3.0 * ag + 3.0 * ar_small;
    for (overlap, layer) in [(true, 6.0 * ag / 8.0), (false, 6.0 * ag)] {
        let e = run("megatron-gpt-22b", &sys, sp_plan(8, 8, overlap));
        let sp = e.time.class(CommClass::Sp);
        assert_relative_eq!(
            sp.exposed.get(),
            m * (L * layer + ends),
            max_relative = 1e-9
        );
    }
}

#[test]
fn blocking_backward_tp_all_reduce_is_exposed() {
    // TP 8 inside the node without SP: each layer all-reduces b·s·h bf16 values twice in
    // forward (exposed) and twice in backward (the column-parallel input gradients). With
    // Megatron-LM's asynchronous all-reduce they run beside the weight-gradient GEMMs,
    // far longer at 2000 GB/s, so all of them hide and slow the GEMMs by κ each (an
    // all-reduce on NVLink runs at the link's rate: κ_r = κ); blocking, as before Sept.
    // 2021, they are exposed instead: 2·L all-reduces more per micro-batch.
    let b0 = 2000e9;
    let sys = system("switch(8, 2000GB/s, 0us) x switch(2, 200GB/s, 0us)");
    let ar = 2.0 * 7.0 / 8.0 * (S * H * 2.0) / b0;
    let m = 2.0;
    let spec = |bwd: bool| PlanSpec {
        tp_bwd_overlap: bwd,
        ..sp_plan(8, 8, false)
    };
    let plan = |bwd: bool| PlanSpec {
        sequence_parallel: false,
        ..spec(bwd)
    };
    let on = run("megatron-gpt-22b", &sys, plan(true));
    let off = run("megatron-gpt-22b", &sys, plan(false));
    let tp = |e: &Estimate| e.time.class(CommClass::Tp).exposed.get();
    assert_relative_eq!(tp(&off) - tp(&on), m * 2.0 * L * ar, max_relative = 1e-9);
    assert_relative_eq!(
        on.time.interference.get() - off.time.interference.get(),
        m * 2.0 * L * KAPPA * ar,
        max_relative = 1e-9
    );
}

/// `(exposed, interference)` of the DP bucket rule, by hand: `k` buckets, the last exposed,
/// the rest a bulk window against the last micro-batch's backward `w`.
fn dp_rule(reduce: f64, k: f64, w: f64) -> (f64, f64) {
    let last = reduce / k;
    let rest = reduce - last;
    let o = rest.min(w);
    let exposed = last + (rest - w - KAPPA * o).max(0.0);
    (exposed, KAPPA * o)
}

#[test]
fn dp_buckets_hide_behind_the_last_backward_except_the_last() {
    // Llama 2 7B, TP = PP = 1, DP 16 = 8 × 2, ZeRO-0: a hierarchical all-reduce of the bf16
    // gradient G = 2·P bytes: reduce-scatter in the node (7/8·G at B0), all-reduce across
    // the 2 nodes on G/8 (2·1/2·G/8 at B1), all-gather in the node. Megatron's buckets are
    // max(4·10⁷, 10⁶·dp) parameters: k = ⌈P / 4·10⁷⌉ collectives; with zero latency they
    // cost the same as one. The window is one micro-batch's backward (and recompute).
    let model = catalog::model("llama2-7b").unwrap();
    let p = model.params();
    for (b1_gbs, topo) in [
        (200.0, "switch(8, 2000GB/s, 0us) x switch(2, 200GB/s, 0us)"),
        (1.0, "switch(8, 2000GB/s, 0us) x switch(2, 1GB/s, 0us)"),
    ] {
        let (b0, b1) = (2000e9, b1_gbs * 1e9);
        let sys = system(topo);
        // With full recomputation the last micro-batch's recompute precedes its backward
        // and is part of the window too.
        for recompute in [Recompute::None, Recompute::Full] {
            let spec = PlanSpec {
                gpus: Some(16),
                micro_batch: 1,
                global_batch: Some(64),
                flash_attention: true,
                recompute,
                ..PlanSpec::default()
            };
            let e = run("llama2-7b", &sys, spec);
            let g = 2.0 * p;
            let reduce = 2.0 * 7.0 / 8.0 * g / b0 + g / 8.0 / b1;
            let k = (p / 4e7).ceil();
            let w = (e.time.backward.get() + e.time.recompute.get()) / e.plan.micro_batches as f64;
            let (exposed, slow) = dp_rule(reduce, k, w);
            let dp = e.time.class(CommClass::Dp);
            assert_relative_eq!(dp.exposed.get(), exposed, max_relative = 1e-6);
            assert_relative_eq!(e.time.interference.get(), slow, max_relative = 1e-6);
        }
    }
}

#[test]
fn zero2_reduces_the_gradient_after_every_micro_batch() {
    // Llama 2 7B, DP 16 = 8 × 2, global batch 64, micro-batch 1: m = 4 micro-batches per
    // replica. With ZeRO ≥ 1 the gradient G = 2·P bytes is reduce-scattered: in the node
    // 7/8·G at B0, then across the 2 nodes on G/8, 1/2·G/8 at B1. ZeRO-1 reduces once, in
    // the last micro-batch's backward; ZeRO-2 (sharded gradients) after each of the m
    // backwards, each time the same bucket rule: (m − 1) more exposed tails and
    // interference, and (m − 1)·G more bytes.
    let model = catalog::model("llama2-7b").unwrap();
    let p = model.params();
    let sys = system("switch(8, 2000GB/s, 0us) x switch(2, 20GB/s, 0us)");
    let (b0, b1) = (2000e9, 20e9);
    let spec = |zero: u8| PlanSpec {
        gpus: Some(16),
        micro_batch: 1,
        global_batch: Some(64),
        flash_attention: true,
        zero,
        ..PlanSpec::default()
    };
    let z1 = run("llama2-7b", &sys, spec(1));
    let z2 = run("llama2-7b", &sys, spec(2));
    let m = z2.plan.micro_batches as f64;
    assert_eq!(m, 4.0);
    let g = 2.0 * p;
    let reduce = 7.0 / 8.0 * g / b0 + 0.5 * g / 8.0 / b1;
    let k = (p / 4e7).ceil();
    let w = z2.time.backward.get() / m;
    let (exposed, slow) = dp_rule(reduce, k, w);
    let (d1, d2) = (z1.time.class(CommClass::Dp), z2.time.class(CommClass::Dp));
    assert_relative_eq!(
        d2.exposed.get() - d1.exposed.get(),
        (m - 1.0) * exposed,
        max_relative = 1e-6
    );
    assert_relative_eq!(
        z2.time.interference.get() - z1.time.interference.get(),
        (m - 1.0) * slow,
        max_relative = 1e-6
    );
    assert_relative_eq!(
        d2.bytes.get() - d1.bytes.get(),
        (m - 1.0) * g,
        max_relative = 1e-9
    );
    // Absolute: the m reductions and the distributed optimizer's parameter all-gather of
    // the bf16 weights (2·P = G bytes, the same volume and cost as one reduction with zero
    // latency) hidden under the first forward, which it slows by κ·gather.
    assert_relative_eq!(d2.bytes.get(), m * g + g, max_relative = 1e-9);
    assert_relative_eq!(d2.exposed.get(), m * exposed, max_relative = 1e-6);
    // What is not exposed is hidden: m reductions and one gather in all.
    assert_relative_eq!(
        d2.hidden.get(),
        m * reduce + reduce - m * exposed,
        max_relative = 1e-6
    );
    assert_relative_eq!(
        z2.time.interference.get(),
        m * slow + KAPPA * reduce,
        max_relative = 1e-6
    );
    // Without DP overlap all of it is exposed: m reductions and the gather.
    let off = run(
        "llama2-7b",
        &sys,
        PlanSpec {
            dp_overlap: false,
            ..spec(2)
        },
    );
    let d = off.time.class(CommClass::Dp);
    assert_relative_eq!(d.exposed.get(), m * reduce + reduce, max_relative = 1e-6);
}

#[test]
fn dp_without_overlap_is_one_exposed_collective() {
    let sys = system("switch(8, 2000GB/s, 0us) x switch(2, 200GB/s, 0us)");
    let p = catalog::model("llama2-7b").unwrap().params();
    let spec = PlanSpec {
        gpus: Some(16),
        global_batch: Some(64),
        dp_overlap: false,
        flash_attention: true,
        ..PlanSpec::default()
    };
    let e = run("llama2-7b", &sys, spec);
    let g = 2.0 * p;
    let reduce = 2.0 * 7.0 / 8.0 * g / 2000e9 + g / 8.0 / 200e9;
    assert_relative_eq!(
        e.time.class(CommClass::Dp).exposed.get(),
        reduce,
        max_relative = 1e-9
    );
    assert_relative_eq!(e.time.interference.get(), 0.0);
}

#[test]
fn pipeline_transfers_fill_and_drain_on_the_critical_path() {
    // Llama 2 7B (untied embeddings), TP 1, PP 4 across 4 nodes, micro-batch 1, m = 8.
    // One transfer moves b·s·h bf16 = 4096·4096·2 B (Llama 2: s = 4096) over the 100 GB/s
    // link.
    // 1F1B: the 2·(p−1) fill/drain hops and the 2 hops per micro-batch are all exposed.
    // Interleaved (v = 2): fill and drain exposed, the 4 hops per micro-batch hide under
    // the stage's compute (overlap_p2p_comm).
    let sys = system("switch(1, 100GB/s, 0us) x switch(4, 100GB/s, 0us)");
    let hop = 4096.0 * 4096.0 * 2.0 / 100e9;
    for (schedule, v, exposed) in [
        (Pipeline::OneFOneB, 1, (2.0 * 3.0 + 2.0 * 8.0) * hop),
        (Pipeline::Interleaved, 2, 2.0 * 3.0 * hop),
    ] {
        let spec = PlanSpec {
            gpus: Some(4),
            pp: 4,
            global_batch: Some(8),
            schedule,
            virtual_stages: v,
            flash_attention: true,
            ..PlanSpec::default()
        };
        let e = run("llama2-7b", &sys, spec);
        let pp = e.time.class(CommClass::Pp);
        assert_relative_eq!(pp.exposed.get(), exposed, max_relative = 1e-9);
        // Every transfer is either exposed or hidden: fill/drain + m·2v.
        let all = (2.0 * 3.0 + 8.0 * 2.0 * v as f64) * hop;
        assert_relative_eq!(pp.exposed.get() + pp.hidden.get(), all, max_relative = 1e-9);
    }
}

#[test]
fn zero3_prefetch_buffers_and_zero2_buckets_count_in_memory() {
    // ZeRO-3: two layers' gathered bf16 weights and unsharded bf16 gradients
    // (2·P_l·(2 + 2) bytes); ZeRO-2: two gradient buckets of max(4·10⁷, 10⁶·dp) bf16
    // parameters. Compared with ZeRO-1 (whose buckets are views into the gradient buffer).
    let sys = catalog::system("dgx-a100").unwrap().with_gpus(16).unwrap();
    let spec = |zero| PlanSpec {
        gpus: Some(16),
        zero,
        global_batch: Some(16),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let buffers = |zero| run("llama2-7b", &sys, spec(zero)).memory.buffers.get();
    // Llama 2 7B layer: attention 4h² (h = 4096, MHA), SwiGLU MLP 3·h·11008, 2 RMSNorms h.
    let h = 4096.0;
    let layer = 4.0 * h * h + 3.0 * h * 11008.0 + 2.0 * h;
    assert_relative_eq!(
        buffers(3) - buffers(1),
        2.0 * layer * 4.0,
        max_relative = 1e-9
    );
    assert_relative_eq!(
        buffers(2) - buffers(1),
        2.0 * 4e7 * 2.0,
        max_relative = 1e-9
    );
}

#[test]
fn deepspeed_2021_moves_zero3_traffic_at_its_per_gpu_rate() {
    // DeepSpeed ZeRO-3 (2021) moves each rank's share of a gather or reduce-scatter,
    // bytes·(n−1)/n, at 24 GB/s at most (DeepSpeed issue #1174). On 2 DGX A100 nodes NCCL
    // would gather a Llama 2 7B layer (405 MB) in ~3 ms, so the rate binds everywhere:
    // per micro-batch, 2 gathers of the bf16 weights (no recomputation) and 1 reduce-
    // scatter of the bf16 gradients for every parameter (layers, embedding, head):
    // 6 B × P × (n−1)/n / R, hidden or exposed.
    let sys = catalog::system("dgx-a100").unwrap().with_gpus(16).unwrap();
    let spec = |imp| PlanSpec {
        gpus: Some(16),
        zero: 3,
        zero3_impl: Some(imp),
        global_batch: Some(16),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let e = run("llama2-7b", &sys, spec(Zero3Impl::Deepspeed2021));
    let dp = e.time.comm[CommClass::Dp as usize];
    // Llama 2 7B: 32 layers of 4h² + 3·h·11008 + 2h, untied embedding and head V·h each,
    // final RMSNorm h (h = 4096, V = 32000).
    let h = 4096.0;
    let params = 32.0 * (4.0 * h * h + 3.0 * h * 11008.0 + 2.0 * h) + 2.0 * 32000.0 * h + h;
    let expect = 6.0 * params * 15.0 / 16.0 / 24e9;
    assert_relative_eq!(
        dp.exposed.get() + dp.hidden.get(),
        expect,
        max_relative = 1e-9
    );
    // FSDP at NCCL's rate moves the same bytes several times faster.
    let f = run("llama2-7b", &sys, spec(Zero3Impl::Fsdp)).time.comm[CommClass::Dp as usize];
    assert!(f.exposed.get() + f.hidden.get() < expect / 3.0);
}

#[test]
fn dp_buckets_flow_under_the_tp_time_of_the_backward_too() {
    // When TP (the node's switch) and DP (across nodes) travel on different links, a DP
    // bucket is in flight during the whole critical path of the last backward: its compute,
    // the TP communication left exposed and the slowdown TP's overlapped collectives cause
    // (`comm::dp_window`). Llama 2 7B (32 layers, s = h = 4096), TP 8 with SP, DP 2 across a
    // 1 GB/s link so that the gradient reduction outlasts the window: DP exposed =
    // last + rest − (1 + κ)·W. Making the four column-parallel backward collectives of each
    // layer blocking (tp_bwd_overlap off) turns their slowdown κ·C into exposed time C, so
    // the window grows by ΔW = 32·4·C·(1 − κ), C = 7/8·s·h·2 B / 2000 GB/s (a ring
    // all-gather or reduce-scatter on the switch), and DP's exposed time drops by
    // (1 + κ)·ΔW.
    let sys = system("switch(8, 2000GB/s, 0us) x switch(2, 1GB/s, 0us)");
    let dp_exposed = |bwd_overlap: bool| {
        let spec = PlanSpec {
            tp_bwd_overlap: bwd_overlap,
            global_batch: Some(4),
            ..sp_plan(8, 16, false)
        };
        run("llama2-7b", &sys, spec)
            .time
            .class(CommClass::Dp)
            .exposed
            .get()
    };
    let c = 7.0 / 8.0 * 4096.0 * 4096.0 * 2.0 / 2000e9;
    let dw = 32.0 * 4.0 * c * (1.0 - KAPPA);
    assert_relative_eq!(
        dp_exposed(true) - dp_exposed(false),
        (1.0 + KAPPA) * dw,
        max_relative = 1e-6
    );
}

#[test]
fn dp_buckets_wait_for_the_tp_traffic_they_share_a_link_with() {
    // TP and DP on one switch (Llama 2 7B, TP 2 without SP and without overlap, DP 4,
    // ZeRO-0, 10 GB/s, no latency): the buckets share the link with the backward's TP all-reduces
    // (`windows::shared`), which delays them by Σ min(rest, L·TP busy) on the link: here the
    // 32 layers' two all-reduces of s·h·2 B over 2 ranks, 2·n/B each layer. The gradient
    // all-reduce R = 2·3/4·G/B (G = 2·P/2 B) outlasts the backward W, so DP exposed =
    // last + (R − last + delay) − W − κ·W, last = R/k, k = ⌈(P/2)/4·10⁷⌉.
    let model = catalog::model("llama2-7b").unwrap();
    let p = model.params() / 2.0;
    let b = 10e9;
    let sys = system("switch(8, 10GB/s, 0us)");
    let spec = PlanSpec {
        gpus: Some(8),
        tp: 2,
        zero: 0,
        micro_batch: 1,
        global_batch: Some(8),
        tp_overlap: false,
        tp_bwd_overlap: false,
        flash_attention: true,
        recompute: Recompute::None,
        ..PlanSpec::default()
    };
    let e = run("llama2-7b", &sys, spec);
    let reduce = 2.0 * 3.0 / 4.0 * 2.0 * p / b;
    let k = (p / 4e7).ceil();
    let last = reduce / k;
    let n = 4096.0 * 4096.0 * 2.0;
    let delay = (reduce - last).min(32.0 * 2.0 * n / b);
    let w = e.time.backward.get() / e.plan.micro_batches as f64;
    let c = reduce - last + delay;
    assert!(c > w, "the reduction outlasts the backward: {c} > {w}");
    let exposed = last + c - w - KAPPA * w;
    assert_relative_eq!(
        e.time.class(CommClass::Dp).exposed.get(),
        exposed,
        max_relative = 1e-6
    );
}

#[test]
fn zero3_gathers_and_reduce_scatters_in_windows_per_layer() {
    // Llama 2 7B over 4 GPUs on a switch with no latency, ZeRO-3, 2 micro-batches of one
    // 4096-token sequence. Per layer (P_l = 4h² + 3·h·11008 + 2h) the bf16 all-gather and
    // reduce-scatter each move 3/4 · 2·P_l bytes, at the link's B (NCCL) or, for DeepSpeed
    // 2021, at most at its 24 GB/s per GPU: AG = RS = 3/4 · 2·P_l / min(B, R); the embedding
    // and head (P_o = 2·32000·h + h) 2 gathers and a reduce-scatter, E = 3 · 3/4 · 2·P_o /
    // min(B, R). Each of the L − 1 later layers hides its gather behind the previous layer's
    // forward W_f and its backward traffic behind its own recompute + backward W_b (bulk
    // windows: exposed max(0, C − W − κ_a·min(C, W)), interference κ_a·min(C, W), with κ_a =
    // κ·T_nccl/T when DeepSpeed's rate binds: 0.24·κ at 100 GB/s); the first layer's gathers,
    // the last reduce-scatter and E are exposed outright. Per micro-batch:
    // (L−1)·[x(AG, W_f) + x(C_b, W_b) + D] + g·AG + RS + E, with
    // - FSDP: g = 2 gathers, C_b = AG + RS, D = 0, with or without recomputation;
    // - DeepSpeed 2021 without recomputation: the same;
    // - DeepSpeed 2021 with full recomputation: g = 3, and the backward's two gathers are
    //   fetched on demand (its prefetch follows the forward's module order): C_b = RS,
    //   D = 2·AG exposed;
    // - without DP overlap: (L−1)·(g·AG + RS) + g·AG + RS + E, all exposed.
    let m = catalog::model("llama2-7b").unwrap();
    let h = 4096.0;
    let pl = 4.0 * h * h + 3.0 * h * 11008.0 + 2.0 * h;
    let po = 2.0 * 32000.0 * h + h;
    for (imp, recompute, b, overlap) in [
        (Zero3Impl::Fsdp, Recompute::None, 10e9_f64, true),
        (Zero3Impl::Fsdp, Recompute::Full, 10e9, true),
        (Zero3Impl::Deepspeed2021, Recompute::None, 10e9, true),
        (Zero3Impl::Deepspeed2021, Recompute::Full, 10e9, true),
        (Zero3Impl::Deepspeed2021, Recompute::None, 100e9, true),
        (Zero3Impl::Deepspeed2021, Recompute::Full, 100e9, true),
        (Zero3Impl::Fsdp, Recompute::None, 10e9, false),
    ] {
        let sys = system(&format!("switch(4, {}GB/s, 0us)", b / 1e9));
        let spec = PlanSpec {
            gpus: Some(4),
            zero: 3,
            zero3_impl: Some(imp),
            dp_overlap: overlap,
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            recompute,
            ..PlanSpec::default()
        };
        let plan = estimate::plan(&m, &sys, &spec).unwrap();
        let (e, lines) = estimate::explain(&m, &sys, &plan).unwrap();
        let layer = lines
            .iter()
            .find(|l| l.contains("layer total:"))
            .expect("a layer line");
        let us = |key: &str| 1e-6 * common::micros(layer, key);
        let (wf, wb) = (us("forward"), us("backward") + us("recompute"));
        let ds = imp == Zero3Impl::Deepspeed2021;
        let rate = if ds { b.min(24e9) } else { b };
        let x = |n: f64| 0.75 * n / rate;
        let (ag, rs, ends) = (x(2.0 * pl), x(2.0 * pl), 3.0 * x(2.0 * po));
        let kappa = KAPPA * rate / b;
        let on_demand = ds && recompute == Recompute::Full;
        let (g, cb, d) = if on_demand {
            (3.0, rs, 2.0 * ag)
        } else {
            (2.0, ag + rs, 0.0)
        };
        let bulk = |c: f64, w: f64| (c - w - kappa * c.min(w)).max(0.0);
        let (per_mb, slow) = if overlap {
            (
                31.0 * (bulk(ag, wf) + bulk(cb, wb) + d) + g * ag + rs + ends,
                31.0 * kappa * (ag.min(wf) + cb.min(wb)),
            )
        } else {
            (32.0 * (g * ag + rs) + ends, 0.0)
        };
        let what = format!(
            "{imp:?}, {recompute:?}, {} GB/s, overlap {overlap}",
            b / 1e9
        );
        let dp = e.time.class(CommClass::Dp);
        assert!(
            // (the windows come from the explain's four significant digits)
            (dp.exposed.get() / (2.0 * per_mb) - 1.0).abs() < 1e-3,
            "{what}: exposed {} against {}",
            dp.exposed.get(),
            2.0 * per_mb
        );
        assert_relative_eq!(
            e.time.interference.get(),
            2.0 * slow,
            // the windows are read from the explain's four significant digits, and the
            // interference is proportional to them where the traffic outlasts them
            max_relative = 1e-3,
            epsilon = 1e-9
        );
        assert!(dp.exposed.get() > 0.0, "{what}");
        // Bytes per device: every parameter gathered g times in bf16 and its gradient
        // reduce-scattered in bf16, per micro-batch: m·P·(2·g + 2), P = 32·P_l + P_o.
        let p = 32.0 * pl + po;
        assert_relative_eq!(
            dp.bytes.get(),
            2.0 * p * (2.0 * g + 2.0),
            max_relative = 1e-12
        );
    }
}

#[test]
fn zero3_traffic_waits_for_the_tp_traffic_on_its_link() {
    // TP 2 and ZeRO-3 (FSDP over DP 2) on one 100 GB/s switch (no latency), Llama 2 7B,
    // tensor parallelism without overlap (its collectives blocking, so they cause no
    // interference). A layer's gathers and reduce-scatter share the link with its TP
    // traffic, each delayed by Σ min(own busy, TP busy) (`windows::shared`): forward by
    // min(AG, 2·n/B), backward by min(AG + RS, 2·n/B), with the layer's shard P_l/2 (P_l =
    // 4h² + 3·h·11008 + 2h) gathered in bf16 over 2 ranks, AG = RS = 1/2 · P_l / B, and two
    // all-reduces of n = s·h·2 B per pass (a ring over 2 moves n each). All of it hides
    // under the layers' compute, so the DP interference is κ times every hidden second:
    // m·(L−1)·κ·(AG + delay_f + AG + RS + delay_b).
    let sys = system("switch(4, 100GB/s, 0us)");
    let (h, b): (f64, f64) = (4096.0, 100e9);
    let pl = 4.0 * h * h + 3.0 * h * 11008.0 + 2.0 * h;
    let (ag, rs) = (0.5 * pl / b, 0.5 * pl / b);
    let tp = 2.0 * 4096.0 * h * 2.0 / b;
    let (delay_f, delay_b) = (ag.min(tp), (ag + rs).min(tp));
    let spec = PlanSpec {
        gpus: Some(4),
        tp: 2,
        zero: 3,
        zero3_impl: Some(Zero3Impl::Fsdp),
        micro_batch: 1,
        global_batch: Some(4),
        flash_attention: true,
        tp_overlap: false,
        tp_bwd_overlap: false,
        sequence_parallel: false,
        recompute: Recompute::None,
        ..PlanSpec::default()
    };
    let e = run("llama2-7b", &sys, spec);
    let want = e.plan.micro_batches as f64 * 31.0 * KAPPA * (ag + delay_f + ag + rs + delay_b);
    assert!(
        delay_f < ag && delay_b < ag + rs,
        "TP traffic is the smaller"
    );
    assert_relative_eq!(e.time.interference.get(), want, max_relative = 1e-6);
}

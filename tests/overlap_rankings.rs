//! Sweep rankings against published experience (the overlap issue's acceptance): with
//! communication hidden only inside its dependency windows, tensor parallelism across
//! nodes and pure ZeRO-3 at scale no longer come first.
//!
//! Sources: Narayanan et al. SC'21 ("Efficient Large-Scale Language Model Training on GPU
//! Clusters Using Megatron-LM") Fig. 13 (162.2B GPT on 64 A100: TP 8 is best, "tensor
//! model parallelism up to the degree of the server") and Table 2 (PTD-P vs ZeRO-3 at
//! batch 1536 / 2240; all 2021 runs with full activation recomputation and without
//! sequence parallelism, flash attention or TP overlap, which did not exist yet); Smith
//! et al. 2022 §2.4 (MT-NLG 530B trained with TP 8 × PP 35 on 2240 A100).

use astrolabe::catalog;
use astrolabe::estimate::Estimate;
use astrolabe::parallel::{Recompute, Schedule, Zero3Impl};
use astrolabe::sweep::driver::RunOptions;
use astrolabe::sweep::grid::{Axes, Grid};
use astrolabe::sweep::objective::Objective;
use astrolabe::sweep::search::{SearchOptions, search};

fn opts() -> SearchOptions {
    SearchOptions {
        sort: Objective::Time,
        pareto: (Objective::Time, Objective::Memory),
        run: RunOptions {
            top_k: 1,
            pareto_cap: 8,
            parallel: true,
            progress: false,
        },
    }
}

/// The best plan of a sweep, or None when nothing fits.
fn best(model: &str, gpus: u32, batch: u32, axes: impl FnOnce(&mut Axes)) -> Option<Estimate> {
    best_on("dgx-a100", model, gpus, batch, axes)
}

/// As [`best`], on `system`.
fn best_on(
    system: &str,
    model: &str,
    gpus: u32,
    batch: u32,
    axes: impl FnOnce(&mut Axes),
) -> Option<Estimate> {
    let m = catalog::model(model).unwrap();
    let sys = catalog::system(system).unwrap();
    let mut a = Axes::default_for(gpus);
    axes(&mut a);
    let grid = Grid::build(&m, &sys, batch, a).unwrap();
    let r = search(&m, &grid, &opts(), None);
    r.run.top.first().map(|h| h.item.est)
}

/// 2021 Megatron-LM: full recomputation, no SP / flash attention / TP overlap, and the
/// backward's TP all-reduce blocking (the asynchronous one came in Sept. 2021); ZeRO-3 as
/// DeepSpeed ran it then (the default of `zero = 3`, said here for clarity).
fn megatron_2021(a: &mut Axes) {
    a.zero3_impl = Zero3Impl::Deepspeed2021;
    a.tp_bwd_overlap = false;
    a.recompute = vec![Recompute::Full];
    a.sp = vec![false];
    a.flash = vec![false];
    a.tp_overlap = vec![false];
}

#[test]
fn sc21_figure13_tensor_parallelism_up_to_the_node() {
    // 162.2B GPT, 64 A100, TP × PP = 64 (DP 1), batch 32 and 128: TP 8 first.
    for batch in [32, 128] {
        let time = |tp: u32| {
            best("megatron-2021-162b", 64, batch, |a| {
                a.tp = vec![tp];
                a.pp = vec![64 / tp];
                a.sp = vec![false];
                a.flash = vec![false];
                a.tp_overlap = vec![false];
            })
            .map(|e| e.time.total.get())
            .unwrap_or(f64::INFINITY)
        };
        let t8 = time(8);
        assert!(t8.is_finite(), "TP 8 fits at batch {batch}");
        for tp in [2, 4, 16, 32] {
            let t = time(tp);
            assert!(t > t8, "batch {batch}: TP {tp} ({t} s) vs TP 8 ({t8} s)");
        }
    }
}

/// SC'21 Table 2's PTD-P runs: micro-batch 1, the 1F1B schedule, no distributed optimizer
/// (the per-GPU throughput falls from 153 to 141 TFLOP/s as the 12-stage pipeline's
/// micro-batches per iteration fall from 384 to 96: the non-interleaved bubble), and the
/// gradient all-reduce after the last backward (Megatron-LM's local DDP of April 2021,
/// `megatron/training.py`: `allreduce_gradients()` after `forward_backward_func`).
fn table2_ptdp(a: &mut Axes) {
    a.zero = vec![0];
    a.dp_overlap = vec![false];
    a.micro_batch = vec![1];
    a.schedules = vec![(Schedule::OneFOneB, 1)];
}

/// SC'21 Table 2's ZeRO-3 runs: no model parallelism, the paper's micro-batch `mbs`.
fn table2_zero3(a: &mut Axes, mbs: u32) {
    a.tp = vec![1];
    a.pp = vec![1];
    a.zero = vec![3];
    a.micro_batch = vec![mbs];
}

/// Per-GPU throughput of PTD-P over that of ZeRO-3, each with Table 2's settings: PTD-P
/// with the paper's model-parallel size and micro-batch 1 on `gpus` at `batch`; ZeRO-3
/// without model parallelism with the paper's micro-batch `z_mbs` on `z_gpus` at `z_batch`.
fn ptdp_over_zero3(
    model: &str,
    (gpus, batch, tp, pp): (u32, u32, u32, u32),
    (z_gpus, z_batch, z_mbs): (u32, u32, u32),
) -> f64 {
    let ptdp = best(model, gpus, batch, |a| {
        megatron_2021(a);
        a.tp = vec![tp];
        a.pp = vec![pp];
        table2_ptdp(a);
    })
    .expect("PTD-P fits");
    let zero3 = best(model, z_gpus, z_batch, |a| {
        megatron_2021(a);
        table2_zero3(a, z_mbs);
    })
    .expect("ZeRO-3 fits");
    let per_gpu = |e: &Estimate, g: u32, b: u32| b as f64 / e.time.total.get() / g as f64;
    let ratio = per_gpu(&ptdp, gpus, batch) / per_gpu(&zero3, z_gpus, z_batch);
    eprintln!("{model} on {gpus} GPUs: PTD-P / ZeRO-3 per-GPU throughput {ratio:.3}");
    ratio
}

#[test]
fn sc21_table2_175b_ptdp_pulls_away_from_zero3_as_gpus_grow() {
    // 175B, batch 1536, PTD-P with TP 8 × PP 12 (model-parallel size 96). Measured per GPU
    // (TFLOP/s): 384 GPUs 153 vs 144 (ZeRO-3), i.e. 1.06; 1536 GPUs 141 vs 44, i.e. 3.20.
    let small = ptdp_over_zero3("gpt3-175b", (384, 1536, 8, 12), (384, 1536, 4));
    let large = ptdp_over_zero3("gpt3-175b", (1536, 1536, 8, 12), (1536, 1536, 1));
    // The overlap issue: within 15% of each other at the smallest scale (same GPU count,
    // so per GPU is per cluster), PTD-P ≥ 1.5× at the largest, PTD-P ahead as measured.
    assert!(
        small > 1.0 && small <= 1.15,
        "384 GPUs: PTD-P/ZeRO-3 {small}"
    );
    assert!(large >= 1.5, "1536 GPUs: PTD-P/ZeRO-3 {large}");
    assert!(
        (large / 3.20 - 1.0).abs() <= 0.15,
        "1536 GPUs: PTD-P/ZeRO-3 {large}"
    );
}

#[test]
fn sc21_table2_530b_ptdp_pulls_away_from_zero3_as_gpus_grow() {
    // 530B, batch 2240, PTD-P with TP 8 × PP 35 (280). Measured per GPU (TFLOP/s): 171 on
    // 560 GPUs (ZeRO-3: 138 on 640 at batch 2560), i.e. 1.24; 159 vs 48 on 2240 GPUs, 3.31.
    let small = ptdp_over_zero3("megatron-2021-530b", (560, 2240, 8, 35), (640, 2560, 4));
    let large = ptdp_over_zero3("megatron-2021-530b", (2240, 2240, 8, 35), (2240, 2240, 1));
    // At the smallest scale the two ran on different GPU counts (560 and 640), so "within
    // 15% of each other" compares the clusters: time to train the same tokens, Table 2's
    // last column (156 vs 169 days measured, PTD-P 8% ahead) — per GPU times 560/640.
    let cluster = small * 560.0 / 640.0;
    eprintln!(
        "530B smallest scale: PTD-P / ZeRO-3 cluster throughput {cluster:.3} (measured 1.08)"
    );
    assert!(cluster > 1.0 && cluster <= 1.15, "560/640 GPUs: {cluster}");
    assert!(small > 1.0, "560 GPUs: PTD-P/ZeRO-3 {small}");
    assert!(large >= 1.5, "2240 GPUs: PTD-P/ZeRO-3 {large}");
    assert!(
        (large / 3.31 - 1.0).abs() <= 0.15,
        "2240 GPUs: PTD-P/ZeRO-3 {large}"
    );
}

/// Hardware FLOPs per GPU and second of a plan (SC'21 counts the recomputed forward:
/// `F = 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`, Narayanan et al. SC'21 Eq. 3).
fn sc21_tflops(e: &Estimate, layers: f64, h: f64, batch: f64, gpus: f64) -> f64 {
    let (s, v) = (2048.0, 51200.0);
    let f = 96.0 * batch * s * layers * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * layers * h));
    f / e.time.total.get() / gpus / 1e12
}

#[test]
fn sc21_table2_zero3_per_gpu_throughput() {
    // ZeRO-3 without model parallelism, 2021 DeepSpeed (SC'21 Table 2), measured TFLOP/s
    // per GPU: 175B 144 (384 GPUs, micro-batch 4), 88 (768, 2), 44 (1536, 1); 530B 138
    // (640 GPUs, batch 2560, 4), 98 (1120, 2), 48 (2240, 1). Nothing is fitted to these
    // rows: the gathers move at DeepSpeed's 24 GB/s per GPU (DeepSpeed issue #1174) and
    // those of the backward are fetched on demand under full recomputation; within 15%.
    for (model, layers, h, gpus, batch, mbs, measured) in [
        ("gpt3-175b", 96.0, 12288.0, 384, 1536, 4, 144.0),
        ("gpt3-175b", 96.0, 12288.0, 768, 1536, 2, 88.0),
        ("gpt3-175b", 96.0, 12288.0, 1536, 1536, 1, 44.0),
        ("megatron-2021-530b", 105.0, 20480.0, 640, 2560, 4, 138.0),
        ("megatron-2021-530b", 105.0, 20480.0, 1120, 2240, 2, 98.0),
        ("megatron-2021-530b", 105.0, 20480.0, 2240, 2240, 1, 48.0),
    ] {
        let row = (model, layers, h, gpus, batch, measured);
        table2_row_within_15_percent("ZeRO-3", row, |a| table2_zero3(a, mbs));
    }
}

/// Checks one Table 2 row, `(model, layers, h, gpus, batch, measured TFLOP/s per GPU)`,
/// with the 2021 settings and `axes`: the best plan's TFLOP/s within 15% of the measured.
fn table2_row_within_15_percent(
    scheme: &str,
    (model, layers, h, gpus, batch, measured): (&str, f64, f64, u32, u32, f64),
    axes: impl FnOnce(&mut Axes),
) {
    let e = best(model, gpus, batch, |a| {
        megatron_2021(a);
        axes(a);
    })
    .expect("the plan fits");
    let got = sc21_tflops(&e, layers, h, batch as f64, gpus as f64);
    eprintln!("{model} {scheme} on {gpus} GPUs: {got:.0} TFLOP/s per GPU, measured {measured}");
    assert!(
        (got / measured - 1.0).abs() <= 0.15,
        "{model} {scheme} on {gpus}: {got} vs {measured}"
    );
}

/// Whether the plan's TP group stays inside one DGX node (8 GPUs on NVSwitch).
fn tp_in_node(e: &Estimate) -> bool {
    e.plan.tp <= 8
}

#[test]
fn mt_nlg_530b_on_2240_gpus_keeps_tp_in_the_node() {
    // The first command: TP 32 × PP 7 used to rank first at 65.7% MFU.
    tp_in_node_and_published_within_10_percent(
        "dgx-a100",
        "megatron-gpt-530b",
        2240,
        1920,
        (8, 35),
    );
}

#[test]
fn gpt3_175b_on_1024_gpus_keeps_tp_in_the_node() {
    // SC'21 trained GPT-3 175B on 1024 A100 with TP 8 × PP 16 (batch 1536).
    tp_in_node_and_published_within_10_percent("dgx-a100", "gpt3-175b", 1024, 1536, (8, 16));
}

#[test]
fn pure_zero3_is_not_first_on_2520_gpus() {
    // The third command (2021 settings, recompute none or full).
    let top = best("megatron-2021-530b", 2520, 2520, |a| {
        a.sp = vec![false];
        a.flash = vec![false];
        a.tp_overlap = vec![false];
        a.recompute = vec![Recompute::None, Recompute::Full];
    })
    .expect("a plan fits");
    let pure_zero3 = top.plan.zero == 3 && top.plan.tp == 1 && top.plan.pp == 1;
    assert!(!pure_zero3, "pure ZeRO-3 ranks first");
    assert!(tp_in_node(&top), "best plan TP {}", top.plan.tp);
}

#[test]
fn llama3_405b_on_8192_h100_keeps_tp_in_the_node() {
    // Dubey et al. 2024 Table 4: 8192 H100, TP 8 × PP 16 (126 layers: 7, 8 × 14, 7),
    // batch 2048 sequences of 8192 tokens.
    tp_in_node_and_published_within_10_percent("dgx-h100", "llama3-405b", 8192, 2048, (8, 16));
}

#[test]
fn megatron_1t_on_3072_a100_published_shape_within_10_percent() {
    // Narayanan et al. SC'21 Table 1: the 1T model on 3,072 A100 with TP 8 × PP 64 at batch
    // 3,072; the default grid's best is TP 8 × PP 16 × VP 8, and the published shape (its
    // best schedule and knobs) must stay within 10 % of it.
    tp_in_node_and_published_within_10_percent("dgx-a100", "megatron-2021-1t", 3072, 3072, (8, 64));
}

/// The default sweep's best plan keeps TP inside one node, and the published plan
/// `(tp, pp)` is within 10% of its time.
fn tp_in_node_and_published_within_10_percent(
    system: &str,
    model: &str,
    gpus: u32,
    batch: u32,
    (tp, pp): (u32, u32),
) {
    let top = best_on(system, model, gpus, batch, |_| {}).expect("a plan fits");
    assert!(tp_in_node(&top), "best plan TP {}", top.plan.tp);
    let published = best_on(system, model, gpus, batch, |a| {
        a.tp = vec![tp];
        a.pp = vec![pp];
    })
    .expect("the published plan fits");
    let gap = published.time.total.get() / top.time.total.get();
    assert!(gap <= 1.10, "TP {tp} × PP {pp} is {gap}× the best time");
}

#[test]
fn sc21_table2_ptdp_per_gpu_throughput() {
    // PTD-P (SC'21 Table 2), micro-batch 1, measured TFLOP/s per GPU: 175B with TP 8 ×
    // PP 12 at batch 1536: 153 (384 GPUs), 149 (768), 141 (1536); 530B with TP 8 × PP 35 at
    // batch 2240: 171 (560), 167 (1120), 159 (2240). Within 15%.
    for (model, layers, h, tp, pp, gpus, batch, measured) in [
        ("gpt3-175b", 96.0, 12288.0, 8, 12, 384, 1536, 153.0),
        ("gpt3-175b", 96.0, 12288.0, 8, 12, 768, 1536, 149.0),
        ("gpt3-175b", 96.0, 12288.0, 8, 12, 1536, 1536, 141.0),
        (
            "megatron-2021-530b",
            105.0,
            20480.0,
            8,
            35,
            560,
            2240,
            171.0,
        ),
        (
            "megatron-2021-530b",
            105.0,
            20480.0,
            8,
            35,
            1120,
            2240,
            167.0,
        ),
        (
            "megatron-2021-530b",
            105.0,
            20480.0,
            8,
            35,
            2240,
            2240,
            159.0,
        ),
    ] {
        let row = (model, layers, h, gpus, batch, measured);
        table2_row_within_15_percent("PTD-P", row, |a| {
            a.tp = vec![tp];
            a.pp = vec![pp];
            table2_ptdp(a);
        });
    }
}

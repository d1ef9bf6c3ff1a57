//! Hand-checked estimate figures: FLOPs and MFU (Korthikanti et al. 2022 §6 / Megatron-LM),
//! activation memory (Korthikanti Fig. 1 and Eq. 1-6), bubble fraction (Narayanan et al.
//! SC'21), communication volume per class, and the limiting cases.

use approx::assert_relative_eq;
use astrolabe::catalog;
use astrolabe::compute::Precision;
use astrolabe::estimate::{self, CommClass, Estimate};
use astrolabe::parallel::{Optimizer, PlanSpec, Recompute, Schedule};

const GIB: f64 = 1073741824.0;

#[track_caller]
fn run(model: &str, system: &str, spec: PlanSpec) -> Estimate {
    let m = catalog::model(model).unwrap();
    let mut sys = catalog::system(system).unwrap();
    if let Some(g) = spec.gpus {
        sys = sys.with_gpus(g).unwrap();
    }
    let plan = estimate::plan(&m, &sys, &spec).unwrap();
    estimate::evaluate(&m, &sys, &plan).unwrap()
}

fn korthikanti(gpus: u32, pp: u32, b: u32, gb: u32, v: u32, rc: Recompute, sp: bool) -> PlanSpec {
    PlanSpec {
        gpus: Some(gpus),
        tp: 8,
        pp,
        micro_batch: b,
        global_batch: Some(gb),
        schedule: if v > 1 {
            Schedule::Interleaved
        } else {
            Schedule::OneFOneB
        },
        virtual_stages: v,
        recompute: rc,
        sequence_parallel: sp,
        precision: Precision::Fp16,
        optimizer: Optimizer::AdamFp32Grads,
        ..PlanSpec::default()
    }
}

#[test]
fn model_flops_and_mfu_definition() {
    // 22B, B = 4, s = 2048: 72·B·s·L·h²·(1 + s/(6h) + V/(12hL)); at 1.1 s on 8 × 312
    // TFLOP/s this is the README's 41.5% MFU.
    let (b, s, l, h, v) = (4.0, 2048.0, 48.0, 6144.0, 51200.0);
    let flops = 72.0 * b * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * l));
    assert_relative_eq!(flops / (1.1 * 312e12 * 8.0), 0.415, max_relative = 0.005);
    let e = run(
        "megatron-gpt-22b",
        "dgx-a100",
        korthikanti(8, 1, 4, 4, 1, Recompute::Selective, true),
    );
    assert_relative_eq!(e.metrics.model_flops, flops, max_relative = 1e-3);
    let mfu = flops / (e.time.total.get() * 312e12 * 8.0);
    assert_relative_eq!(e.metrics.mfu, mfu, max_relative = 1e-3);
    assert!(e.metrics.hfu > e.metrics.mfu);
}

#[track_caller]
fn check_activations(model: &str, spec: PlanSpec, gib: f64) {
    let e = run(model, "dgx-a100", spec);
    assert_relative_eq!(e.memory.activations.get() / GIB, gib, max_relative = 1e-9);
}

#[test]
fn korthikanti_figure1_activation_memory() {
    // First-stage activation memory per GPU (Korthikanti Fig. 1): TP only, and SP + selective.
    use Recompute::{None as No, Selective as Sel};
    check_activations(
        "megatron-gpt-22b",
        korthikanti(8, 1, 4, 4, 1, No, false),
        59.25,
    );
    check_activations(
        "megatron-gpt-22b",
        korthikanti(8, 1, 4, 4, 1, Sel, true),
        9.5625,
    );
    check_activations(
        "gpt3-175b",
        korthikanti(64, 8, 1, 64, 3, No, false),
        66.84375,
    );
    check_activations(
        "gpt3-175b",
        korthikanti(64, 8, 1, 64, 3, Sel, true),
        12.3515625,
    );
    check_activations(
        "megatron-gpt-530b",
        korthikanti(280, 35, 1, 280, 3, No, false),
        114.0234375,
    );
    check_activations(
        "megatron-gpt-530b",
        korthikanti(280, 35, 1, 280, 3, Sel, true),
        23.076171875,
    );
    check_activations(
        "megatron-gpt-1t",
        korthikanti(512, 64, 1, 512, 1, No, false),
        131.25,
    );
    check_activations(
        "megatron-gpt-1t",
        korthikanti(512, 64, 1, 512, 1, Sel, true),
        26.5625,
    );
}

#[test]
fn korthikanti_figure1_model_states_with_18_bytes_per_param() {
    // Fig. 1 counts the transformer layers' weights at 18 B/param (fp16 weight, fp32 main
    // gradient, fp32 master + Adam m, v); the first stage also holds the embedding (V·h/t
    // and s·h positions), which the figure leaves out.
    for (model, gpus, pp, v, l, h, fig) in [
        ("megatron-gpt-22b", 8, 1, 1, 48.0, 6144.0, 45.5625),
        ("gpt3-175b", 64, 8, 3, 96.0, 12288.0, 45.5625),
        ("megatron-gpt-530b", 280, 35, 3, 105.0, 20480.0, 31.640625),
        ("megatron-gpt-1t", 512, 64, 1, 128.0, 25600.0, 32.958984375),
    ] {
        let e = run(
            model,
            "dgx-a100",
            korthikanti(gpus, pp, 1, gpus / 8, v, Recompute::Full, false),
        );
        let m = &e.memory;
        let states = m.weights.get() + m.gradients.get() + m.optimizer.get();
        let embedding = (51200.0 * h + 2048.0 * h) / 8.0 * 18.0;
        let layers_only = states - embedding;
        let hand = 12.0 * (l / pp as f64) * h * h / 8.0 * 18.0 / GIB;
        assert_relative_eq!(hand, fig, max_relative = 1e-9);
        assert_relative_eq!(layers_only / GIB, fig, max_relative = 2e-3);
    }
}

#[test]
fn bubble_fraction_by_schedule() {
    let m = catalog::model("gpt3-175b").unwrap();
    let sys = catalog::system("dgx-a100").unwrap().with_gpus(64).unwrap();
    let mk = |schedule, v, gb| {
        let spec = PlanSpec {
            tp: 8,
            pp: 8,
            schedule,
            virtual_stages: v,
            global_batch: Some(gb),
            ..PlanSpec::default()
        };
        estimate::plan(&m, &sys, &spec).unwrap()
    };
    assert_relative_eq!(mk(Schedule::OneFOneB, 1, 64).bubble_fraction(), 7.0 / 64.0);
    assert_relative_eq!(mk(Schedule::Gpipe, 1, 64).bubble_fraction(), 7.0 / 64.0);
    assert_relative_eq!(
        mk(Schedule::Interleaved, 3, 64).bubble_fraction(),
        7.0 / 192.0
    );
    assert_relative_eq!(mk(Schedule::OneFOneB, 1, 8).bubble_fraction(), 7.0 / 8.0);
}

#[test]
fn communication_volumes_by_hand() {
    // GPT-3 175B, TP 8 (no SP), PP 2, DP 4, b = 1, B = 8 → m = 2 micro-batches per pipeline.
    let e = run(
        "gpt3-175b",
        "dgx-a100",
        PlanSpec {
            gpus: Some(64),
            tp: 8,
            pp: 2,
            global_batch: Some(8),
            ..PlanSpec::default()
        },
    );
    let (s, h, e2, m) = (2048.0, 12288.0, 2.0, 2.0);
    let r = s * h * e2; // one b·s·h activation in bf16
    // TP: per layer 2 all-reduces forward + 2 backward; last stage (48 layers) adds the
    // final backward all-reduce of the logits input and 3 small fp32 loss all-reduces.
    let tp = m * (48.0 * 4.0 * r + r + 12.0 * s);
    assert_relative_eq!(
        e.time.class(CommClass::Tp).bytes.get(),
        tp,
        max_relative = 1e-9
    );
    // PP: 2·v transfers of b·s·h/t per micro-batch, plus the tied-embedding gradient
    // all-reduce (V·h/t, 2-byte gradients).
    let pp = m * 2.0 * r / 8.0 + 51200.0 * h / 8.0 * 2.0;
    assert_relative_eq!(
        e.time.class(CommClass::Pp).bytes.get(),
        pp,
        max_relative = 1e-9
    );
    // DP: gradient all-reduce of the device's parameters (2 B each).
    let dp = e.time.class(CommClass::Dp).bytes.get();
    assert_relative_eq!(dp, e.memory.gradients.get(), max_relative = 1e-9);
    // With SP each all-reduce becomes a reduce-scatter + all-gather, plus the backward
    // re-gather: 4 + 6 per layer.
    let e = run(
        "gpt3-175b",
        "dgx-a100",
        PlanSpec {
            gpus: Some(64),
            tp: 8,
            pp: 2,
            global_batch: Some(8),
            sequence_parallel: true,
            ..PlanSpec::default()
        },
    );
    let sp = m * (48.0 * 10.0 * r + r + r + 12.0 * s);
    assert_relative_eq!(
        e.time.class(CommClass::Sp).bytes.get(),
        sp,
        max_relative = 1e-9
    );
}

#[test]
fn one_device_has_no_communication() {
    let e = run(
        "llama2-7b",
        "dgx-a100",
        PlanSpec {
            gpus: Some(1),
            ..PlanSpec::default()
        },
    );
    for c in CommClass::ALL {
        let x = e.time.class(c);
        assert_eq!(
            (x.exposed.get(), x.hidden.get(), x.bytes.get()),
            (0.0, 0.0, 0.0),
            "{c:?}"
        );
    }
    assert_eq!(e.time.bubble.get(), 0.0);
}

#[test]
fn full_recompute_adds_about_one_forward() {
    let base = korthikanti(8, 1, 4, 4, 1, Recompute::None, false);
    let full = PlanSpec {
        recompute: Recompute::Full,
        ..base.clone()
    };
    let a = run("megatron-gpt-22b", "dgx-a100", base);
    let b = run("megatron-gpt-22b", "dgx-a100", full);
    assert_eq!(a.time.recompute.get(), 0.0);
    assert!(
        b.time.recompute.get() > 0.9 * b.time.forward.get() && b.time.recompute <= b.time.forward
    );
    assert!(
        !a.memory.fits && b.memory.fits,
        "22B without recompute needs > 80 GiB (Fig. 1)"
    );
}

#[test]
fn invalid_plans_are_clear_errors() {
    let m = catalog::model("gpt3-175b").unwrap();
    let sys = catalog::system("dgx-a100").unwrap().with_gpus(64).unwrap();
    let err = |spec: PlanSpec| match estimate::plan(&m, &sys, &spec) {
        Ok(p) => panic!("accepted {spec:?} as {p:?}"),
        Err(e) => e.to_string(),
    };
    assert!(
        err(PlanSpec {
            tp: 7,
            gpus: Some(63),
            ..PlanSpec::default()
        })
        .contains("does not divide the 96 attention heads")
    );
    assert!(
        err(PlanSpec {
            pp: 128,
            gpus: Some(128),
            ..PlanSpec::default()
        })
        .contains("leave a stage empty")
    );
    assert!(
        err(PlanSpec {
            tp: 8,
            pp: 4,
            global_batch: Some(3),
            ..PlanSpec::default()
        })
        .contains("not a multiple of dp·micro_batch")
    );
    assert!(
        err(PlanSpec {
            tp: 8,
            pp: 8,
            dp: Some(2),
            ..PlanSpec::default()
        })
        .contains("≠ gpus")
    );
    assert!(
        err(PlanSpec {
            tp: 8,
            zero: 4,
            ..PlanSpec::default()
        })
        .contains("expected 0–3")
    );
    let plan = estimate::plan(
        &m,
        &sys,
        &PlanSpec {
            tp: 8,
            pp: 8,
            gpus: Some(128),
            ..PlanSpec::default()
        },
    )
    .unwrap();
    let e = estimate::evaluate(&m, &sys, &plan).unwrap_err().to_string();
    assert!(e.contains("exceeds the 64 devices"), "{e}");
}

#[test]
fn korthikanti_figure7_activation_ratios() {
    // Activation memory relative to the TP-only baseline (Korthikanti et al. 2022 Fig. 7,
    // as transcribed by Calculon): SP only, selective only, SP + selective, full.
    use Recompute::{Full, None as No, Selective as Sel};
    for (model, gpus, pp, v, pct) in [
        ("megatron-gpt-22b", 8, 1, 1, [66.84, 49.42, 16.18, f64::NAN]),
        ("megatron-gpt-530b", 280, 35, 3, [58.31, 62.04, 20.27, 9.42]),
    ] {
        let b = if gpus == 8 { 4 } else { 1 };
        let act = |rc, sp| {
            let e = run(
                model,
                "dgx-a100",
                korthikanti(gpus, pp, b, gpus / 8 * b, v, rc, sp),
            );
            e.memory.activations.get()
        };
        let base = act(No, false);
        let ours = [
            act(No, true),
            act(Sel, false),
            act(Sel, true),
            act(Full, false),
        ];
        for (o, p) in ours.iter().zip(pct) {
            if p.is_finite() {
                assert_relative_eq!(100.0 * o / base, p, max_relative = 0.015);
            }
        }
    }
}

#[test]
fn expert_parallel_all_to_all_volume() {
    // Mixtral 8x7B, EP 8 on one node, b = 1, s = 4096, top-2: per MoE layer two
    // all-to-alls (dispatch, combine) of b·s·k·h bf16 elements forward and two backward;
    // full recomputation repeats the forward pair.
    let spec = PlanSpec {
        gpus: Some(8),
        ep: 8,
        global_batch: Some(8),
        ..PlanSpec::default()
    };
    let e = run("mixtral-8x7b", "dgx-h100", spec.clone());
    let per = 4096.0 * 2.0 * 4096.0 * 2.0;
    assert_relative_eq!(
        e.time.class(CommClass::Ep).bytes.get(),
        32.0 * 4.0 * per,
        max_relative = 1e-12
    );
    let e = run(
        "mixtral-8x7b",
        "dgx-h100",
        PlanSpec {
            recompute: Recompute::Full,
            ..spec
        },
    );
    assert_relative_eq!(
        e.time.class(CommClass::Ep).bytes.get(),
        32.0 * 6.0 * per,
        max_relative = 1e-12
    );
    assert!(e.time.class(CommClass::Ep).exposed.get() > 0.0);
}

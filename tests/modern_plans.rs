//! Plans of 2024–2026 runs, checked by hand: uneven pipeline stages (Llama 3 405B's 126
//! layers on 16 stages, BLOOM's 70 on 12), context parallelism (ring and all-to-all
//! volumes, activation memory), LoRA (trainable parameters and their reduction), HSDP
//! (state sharding), FP8-family precisions (weight copies, device support) and `--seq-len`.

use crate::common;

use approx::assert_relative_eq;
use astrolabe::catalog;
use astrolabe::compute::Precision;
use astrolabe::estimate::{self, CommClass, Estimate};
use astrolabe::parallel::{CpKind, PlanSpec, Schedule};
use astrolabe::sweep::grid::{Axes, Grid};

#[track_caller]
fn run(model: &str, system: &str, spec: PlanSpec) -> Estimate {
    let m = catalog::model(model).unwrap();
    let sys = catalog::system(system)
        .unwrap()
        .with_gpus(spec.gpus.unwrap())
        .unwrap();
    let plan = estimate::plan(&m, &sys, &spec).unwrap_or_else(|e| panic!("{e}"));
    estimate::evaluate(&m, &sys, &plan).unwrap_or_else(|e| panic!("{e}"))
}

/// Llama 3 405B, Dubey et al. 2024 Table 4: (GPUs, CP, sequence, global batch in
/// sequences = 16M tokens / sequence, published BF16 MFU).
const LLAMA3_TABLE4: [(u32, u32, u32, u32, f64); 3] = [
    (8192, 1, 8192, 2048, 0.43),
    (16384, 1, 8192, 2048, 0.41),
    (16384, 16, 131072, 128, 0.38),
];

fn llama3_spec(gpus: u32, cp: u32, seq: u32, gb: u32) -> PlanSpec {
    PlanSpec {
        gpus: Some(gpus),
        tp: 8,
        pp: 16,
        cp,
        seq_len: Some(seq),
        global_batch: Some(gb),
        sequence_parallel: true,
        flash_attention: true,
        tp_overlap: true,
        zero: 1,
        ..PlanSpec::default()
    }
}

#[test]
fn llama3_405b_table4_configurations_estimate_and_sweep() {
    for (gpus, cp, seq, gb, mfu) in LLAMA3_TABLE4 {
        let e = run("llama3-405b", "dgx-h100", llama3_spec(gpus, cp, seq, gb));
        let st = e.plan.stages;
        // 126 = 7 + 14 × 8 + 7 (Dubey et al. §3.3.2: one layer fewer on each end stage).
        assert_eq!((st.first, st.mid_max, st.mid_sum, st.last), (7, 8, 112, 7));
        assert_eq!(e.plan.dp, gpus / (8 * 16 * cp));
        println!(
            "Llama 3 405B, {gpus} GPUs, CP {cp}, s {seq}: MFU {:.1}% (published {:.0}%), memory {:.1} GiB",
            100.0 * e.metrics.mfu,
            100.0 * mfu,
            e.memory.total.get() / 1073741824.0
        );
        assert!(e.metrics.mfu > 0.0 && e.metrics.mfu < 1.0);
    }
    // The same three as a sweep over CP and sequence length (and interleaving depth).
    let m = catalog::model("llama3.1-405b").unwrap();
    let sys = catalog::system("dgx-h100")
        .unwrap()
        .with_gpus(16384)
        .unwrap();
    let mut ax = Axes::default_for(16384);
    (ax.tp, ax.pp, ax.micro_batch) = (vec![8], vec![16], vec![1]);
    ax.cp = vec![(1, CpKind::Ring), (16, CpKind::Ring)];
    ax.seq_len = vec![8192, 131072];
    ax.schedules = vec![(Schedule::OneFOneB, 1), (Schedule::Interleaved, 2)];
    let g = Grid::build(&m, &sys, 128, ax).unwrap();
    let cps: Vec<(u32, u32)> = g
        .structural
        .iter()
        .map(|s| (s.plan.cp, s.plan.seq_len))
        .collect();
    assert!(
        cps.contains(&(16, 131072)) && cps.contains(&(1, 8192)),
        "{cps:?}"
    );
}

#[test]
fn bloom_70_layers_on_12_stages() {
    let spec = PlanSpec {
        gpus: Some(384),
        tp: 4,
        pp: 12,
        global_batch: Some(2048),
        ..PlanSpec::default()
    };
    let e = run("bloom-176b", "dgx-a100", spec.clone());
    let st = e.plan.stages;
    assert_eq!((st.first, st.mid_max, st.mid_sum, st.last), (5, 6, 60, 5));
    // The same split written out explicitly is the same estimate.
    let mut list = vec![6; 12];
    (list[0], list[11]) = (5, 5);
    let x = run(
        "bloom-176b",
        "dgx-a100",
        PlanSpec {
            layers_per_stage: Some(list),
            ..spec.clone()
        },
    );
    assert_eq!(x.time.total, e.time.total);
    // One layer moved from a middle stage onto the first makes the first the slowest by a
    // layer's time on every micro-batch: the iteration grows.
    let mut list = vec![6; 12];
    (list[0], list[1], list[11]) = (6, 5, 5);
    let y = run(
        "bloom-176b",
        "dgx-a100",
        PlanSpec {
            layers_per_stage: Some(list),
            ..spec
        },
    );
    assert!(y.time.total > e.time.total);
}

fn llama3_8b_cp(kind: CpKind, cp: u32) -> Estimate {
    run(
        "llama3-8b",
        "dgx-h100",
        PlanSpec {
            gpus: Some(cp),
            cp,
            cp_kind: kind,
            global_batch: Some(2),
            flash_attention: true,
            ..PlanSpec::default()
        },
    )
}

#[test]
fn context_parallel_volumes_by_hand() {
    // Llama 3 8B (32 layers, h 4096, 32 heads, 8 KV heads of 128), s 8192, b 1, CP 2,
    // 2 micro-batches. Ring: per layer forward (c−1) KV blocks of b·(s/c)·kv·(d_k + d_v)
    // bf16 = 1 · 4096 · 8 · 256 · 2 B; backward twice that (KV and dKV).
    let e = llama3_8b_cp(CpKind::Ring, 2);
    let block = 4096.0 * 8.0 * 256.0 * 2.0;
    assert_relative_eq!(
        e.time.class(CommClass::Cp).bytes.get(),
        2.0 * 32.0 * 3.0 * block,
        max_relative = 1e-12
    );
    // Ulysses: Q, K, V (4096 + 2·1024 wide) and the output (4096) of s/c tokens, forward
    // and backward.
    let e = llama3_8b_cp(CpKind::A2a, 2);
    let per = 4096.0 * (6144.0 + 4096.0) * 2.0;
    assert_relative_eq!(
        e.time.class(CommClass::Cp).bytes.get(),
        2.0 * 32.0 * 2.0 * per,
        max_relative = 1e-12
    );
    // CP halves each device's activations (every token-sized tensor is split).
    let one = llama3_8b_cp(CpKind::Ring, 1);
    let two = llama3_8b_cp(CpKind::Ring, 2);
    assert_relative_eq!(
        two.memory.activations.get() * 2.0,
        one.memory.activations.get()
    );
}

#[test]
fn lora_trains_only_the_adapters() {
    // Llama 2 7B, rank 32, ZeRO-0 on 8 GPUs: adapters r·(n + k) per linear layer:
    // QKV 32·(12288 + 4096) + projection 32·(4096 + 4096) + gated MLP in
    // 32·(22016 + 4096) + MLP out 32·(4096 + 11008) = 2 105 344 per layer, × 32 layers;
    // their bf16 gradients are all-reduced.
    let spec = PlanSpec {
        gpus: Some(8),
        global_batch: Some(8),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let full = run("llama2-7b", "dgx-h100", spec.clone());
    let lora = run(
        "llama2-7b",
        "dgx-h100",
        PlanSpec {
            lora_rank: 32,
            ..spec
        },
    );
    let trainable = 2_105_344.0 * 32.0;
    assert_relative_eq!(
        lora.time.class(CommClass::Dp).bytes.get(),
        trainable * 2.0,
        max_relative = 1e-12
    );
    assert!(lora.time.backward < full.time.backward);
    assert!(lora.memory.optimizer.get() < 1e-2 * full.memory.optimizer.get());
    // Weights: the frozen base stays in 16 bits (2 B each, as in the full run) and the
    // adapters add their own 16-bit copy: 2·trainable bytes more.
    assert_relative_eq!(
        lora.memory.weights.get() - full.memory.weights.get(),
        2.0 * trainable,
        max_relative = 1e-9
    );
}

/// The adapters one device trains, read from its 16-bit gradients (2 B per trainable
/// parameter under ZeRO-0). Each linear layer of `n` outputs and `k` inputs carries
/// `r·(n + k)` on one TP rank, its split side divided by TP (Megatron-Bridge's LoRA wraps
/// the parallel linear: the adapter's A of a row-parallel layer and its B of a
/// column-parallel one are split as the base weight is).
/// - Llama 2 7B, rank 32, TP 2: QKV 32·(12288/2 + 4096), projection 32·(4096 + 4096/2),
///   gated MLP in 32·(2·11008/2 + 4096), MLP out 32·(4096 + 11008/2): 32·41 088 per
///   layer × 32 layers.
/// - Llama 4 Scout (16 routed experts of FFN 8192 and one shared, h 5120, 40 query and 8
///   KV heads of 128), rank 8, no TP: QKV 8·(7168 + 5120), projection 8·(5120 + 5120),
///   each expert's pair 8·(2·8192 + 5120) + 8·(5120 + 8192) = 8·34 816, for the 16/EP
///   local experts and the shared one, × 48 layers.
#[test]
fn lora_adapters_split_over_tp_and_ep() {
    let grads = |flags: &str| {
        let mut a = vec!["estimate", "--zero", "0", "--global-batch", "8"];
        a.extend(flags.split_whitespace());
        common::computed_json(&a)["memory_breakdown"]["gradients_bytes"]
            .as_f64()
            .unwrap()
    };
    let llama = grads("--model llama2-7b --system dgx-h100 --gpus 8 --tp 2 --lora-rank 32");
    assert_relative_eq!(
        llama,
        2.0 * 32.0 * 32.0 * (10_240.0 + 6_144.0 + 15_104.0 + 9_600.0),
        max_relative = 1e-12
    );
    for (ep, local) in [(4, 4.0), (8, 2.0)] {
        let scout = grads(&format!(
            "--model llama4-scout --system dgx-h100 --gpus 8 --seq-len 4096 --ep {ep} --lora-rank 8"
        ));
        let per_layer = 8.0 * (12_288.0 + 10_240.0 + (local + 1.0) * 34_816.0);
        assert_relative_eq!(scout, 2.0 * 48.0 * per_layer, max_relative = 1e-12);
    }
}

/// The forward and backward of an `--explain` GEMM line ("GEMM QKV: … → fwd 685.4 us,
/// bwd 738.5 us"), in µs.
fn gemm_times(text: &str, gemm: &str) -> (f64, f64) {
    let line = text
        .lines()
        .find(|l| l.contains(&format!("GEMM {gemm}:")))
        .unwrap_or_else(|| panic!("{gemm}: {text}"));
    let after = line.split("→ fwd ").nth(1).unwrap();
    let us = |w: &[&str]| -> f64 {
        let x: f64 = w[0].trim_end_matches(',').parse().unwrap();
        match w[1].trim_end_matches(',') {
            "us" => x,
            "ms" => x * 1e3,
            u => panic!("unit {u}"),
        }
    };
    let w: Vec<&str> = after.split_whitespace().collect();
    (us(&w[0..2]), us(&w[3..5]))
}

/// The `--explain` text of `estimate` with these flags (exit 0 or 3).
fn explain(flags: &str) -> String {
    let mut a = vec!["estimate", "--explain"];
    a.extend(flags.split_whitespace());
    common::computed(&a)
}

/// LoRA's adapter GEMMs are skinny (one side r) and memory-bound: each takes
/// `max(2·M·N·K/(peak·e), 2·(M·K + K·N + M·N) B/(bw·e_mem)) + 4 µs`. Llama 2 7B, rank 16,
/// one H100 (989 TFLOP/s · 0.72; 3.35 TB/s · 0.7 = 2.345 TB/s), QKV (M = 4096, N = 12288,
/// K = 4096):
/// - A (4096×16×4096): 2·(4096·4096 + 2·4096·16) = 33 816 576 B → 14.421 + 4 = 18.421 µs
///   (its 0.537 GFLOP take 0.75 µs); B (4096×12288×16): 2·(4096·16 + 16·12288 +
///   4096·12288) = 101 187 584 B → 43.150 + 4 = 47.150 µs; forward 65.571 µs;
/// - backward: each one's data and weight gradient move the same bytes: 131.142 µs;
/// - the frozen QKV keeps its forward and loses its weight gradient: its data gradient
///   4096×4096×12288 at e = 0.72 · (512 tiles in 4 waves of 132: 0.969697) ·
///   12288/(12288 + 128) = 0.690977 takes 412 316 860 416 / (989 T · 0.690977) + 4 µs
///   = 607.35 µs.
///
/// With `--lora-targets qkv` the attention projection has no adapter: its forward is the
/// full run's and its backward its data gradient alone (4096³ at e = 0.72 · 0.969697 ·
/// 4096/4224, 2·4096³/(989 T · 0.677019) + 4 µs = 209.26 µs).
#[test]
fn lora_adapter_gemms_by_hand() {
    let base = "--model llama2-7b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1";
    let full = explain(base);
    let lora = explain(&format!("{base} --lora-rank 16"));
    let (f0, _) = gemm_times(&full, "QKV");
    let (f, b) = gemm_times(&lora, "QKV");
    assert!(
        (f - (f0 + 65.571)).abs() < 0.1,
        "forward {f} µs, full {f0} µs"
    );
    assert!((b - (607.35 + 131.142)).abs() < 0.1, "backward {b} µs");
    let qkv_only = explain(&format!("{base} --lora-rank 16 --lora-targets qkv"));
    let (p0, _) = gemm_times(&full, "attention projection");
    let (p, pb) = gemm_times(&qkv_only, "attention projection");
    assert!(
        (p - p0).abs() < 0.05,
        "projection forward {p} µs, full {p0} µs"
    );
    assert!((pb - 209.26).abs() < 0.1, "projection backward {pb} µs");
    assert_eq!(gemm_times(&qkv_only, "QKV"), (f, b));
}

/// At a large rank the adapters' GEMMs are compute-bound: rank 1024 on Llama 2 7B, one H100
/// (989 TFLOP/s · 0.72 = 712.08 TFLOP/s; 2.345 TB/s):
/// - QKV's A 4096×1024×4096: 34 359 738 368 FLOP → 48.253 µs (its 50 331 648 B take
///   21.463 µs) + 4 = 52.253 µs; B 4096×12288×1024: 103 079 215 104 FLOP → 144.758 µs
///   (134 217 728 B: 57.236 µs) + 4 = 148.758 µs; forward 201.011 µs, backward twice that;
/// - the attention projection (every linear adapted by default): A and B 4096×1024×4096
///   and 4096×4096×1024, 52.253 µs each, 104.506 µs forward.
#[test]
fn lora_adapters_turn_compute_bound_at_large_rank() {
    let base = "--model llama2-7b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1";
    let full = explain(base);
    let lora = explain(&format!("{base} --lora-rank 1024"));
    for (gemm, adapter) in [("QKV", 201.011), ("attention projection", 104.506)] {
        let (f0, _) = gemm_times(&full, gemm);
        let (f, _) = gemm_times(&lora, gemm);
        assert!(
            (f - f0 - adapter).abs() < 0.15,
            "{gemm}: {f} − {f0} µs, adapter {adapter} µs"
        );
    }
}

/// LoRA on routed experts: each local expert's frozen GEMMs run as without LoRA (4 CUDA
/// streams), and its adapters beside them. Qwen3-30B-A3B on 8 H100, EP 8: 16 local experts
/// of 2048 tokens each; MLP in (N = 2·768, K = 2048), rank 16, all 16 experts' adapters as
/// one memory-bound roofline: A 2·(2048·2048 + 2·2048·16)·16 = 136 314 880 B → 58.130 µs
/// plus 4, B 2·(2048·16 + 16·1536 + 2048·1536)·16 = 102 498 304 B → 43.709 µs plus 4:
/// 109.839 µs forward. LatentMoE's projections (`fc1_latent_proj`, `fc2_latent_proj`) carry no
/// adapter: Megatron-Bridge's LoRA targets `linear_qkv`, `linear_proj`, `linear_fc1` and
/// `linear_fc2` (`peft/lora.py`, `target_modules`).
#[test]
fn lora_on_routed_experts_and_not_on_latent_projections() {
    let base = "--model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 \
        --seq-len 4096 --global-batch 8 --precision bf16";
    let (f0, _) = gemm_times(&explain(base), "MLP in");
    let (f, _) = gemm_times(&explain(&format!("{base} --lora-rank 16")), "MLP in");
    assert!((f - f0 - 109.839).abs() < 0.15, "{f} − {f0} µs");
    // At rank 1024 the experts' adapters are compute-bound: A 2·2048·1024·2048·16 =
    // 137 438 953 472 FLOP → 193.011 µs + 4, B 2·2048·1536·1024·16 = 103 079 215 104 FLOP
    // → 144.758 µs + 4 (their 268 435 456 and 218 103 808 B take 114.5 and 93.0 µs):
    // 345.769 µs forward.
    let (f, _) = gemm_times(&explain(&format!("{base} --lora-rank 1024")), "MLP in");
    assert!((f - f0 - 345.769).abs() < 0.15, "{f} − {f0} µs");
    // A LatentMoE variant (ℓ = 1024) of the same model, written out.
    let shown = common::text(&["show", "model", "qwen3-30b-a3b"]);
    let edited = shown.replacen(
        "expert_ffn_hidden = 768",
        "expert_ffn_hidden = 768\nlatent = 1024",
        1,
    );
    assert!(edited.contains("latent = 1024"), "{shown}");
    let path = common::tmp("lora_latent").join("qwen3-latent.toml");
    std::fs::write(&path, edited).unwrap();
    let latent = format!(
        "{} --model {}",
        base.replace("--model qwen3-30b-a3b", ""),
        path.display()
    );
    let plain = explain(&latent);
    let lora = explain(&format!("{latent} --lora-rank 16"));
    for gemm in ["latent down (h → ℓ)", "latent up (ℓ → h)"] {
        let (pf, pb) = gemm_times(&plain, gemm);
        let (lf, lb) = gemm_times(&lora, gemm);
        assert_eq!(pf, lf, "{gemm}: the frozen forward alone");
        assert!(
            lb < pb,
            "{gemm}: no weight gradient, no adapter ({lb} < {pb} µs)"
        );
        let line = lora
            .lines()
            .find(|l| l.contains(&format!("GEMM {gemm}:")))
            .unwrap();
        assert!(line.contains("no adapter"), "{line}");
    }
}

#[test]
fn hsdp_shards_within_the_group() {
    // FSDP over 64 vs HSDP groups of 8: optimizer states per device 8× larger.
    let spec = PlanSpec {
        gpus: Some(64),
        zero: 3,
        global_batch: Some(64),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let fsdp = run("llama3-8b", "dgx-h100", spec.clone());
    let hsdp = run(
        "llama3-8b",
        "dgx-h100",
        PlanSpec {
            hsdp: Some(8),
            ..spec
        },
    );
    assert_relative_eq!(
        hsdp.memory.optimizer.get(),
        8.0 * fsdp.memory.optimizer.get(),
        max_relative = 1e-12
    );
    assert!(hsdp.time.class(CommClass::Dp).bytes.get() > 0.0);
}

#[test]
fn fp8_family_precisions() {
    let spec = PlanSpec {
        gpus: Some(8),
        global_batch: Some(8),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let bf16 = run("llama3-8b", "dgx-h100", spec.clone());
    let fp8 = run(
        "llama3-8b",
        "dgx-h100",
        PlanSpec {
            precision: Precision::Fp8,
            ..spec.clone()
        },
    );
    // Hopper FP8 keeps a row-wise and a transposed 1-byte copy of every weight: +2 B/param.
    let params = catalog::model("llama3-8b")
        .unwrap()
        .transformer()
        .unwrap()
        .params();
    assert_relative_eq!(
        fp8.memory.weights.get() - bf16.memory.weights.get(),
        2.0 * params,
        max_relative = 1e-9
    );
    // Faster than BF16, but not twice (attention, casts and memory-bound kernels).
    assert!(fp8.time.total < bf16.time.total && fp8.time.total.get() > 0.5 * bf16.time.total.get());
    // MXFP8 and NVFP4 run on Blackwell; Hopper has no NVFP4 peak.
    let mx = run(
        "llama3-8b",
        "dgx-b200",
        PlanSpec {
            precision: Precision::Mxfp8,
            ..spec.clone()
        },
    );
    let fp4 = run(
        "llama3-8b",
        "dgx-b200",
        PlanSpec {
            precision: Precision::Nvfp4,
            ..spec.clone()
        },
    );
    assert!(fp4.time.forward < mx.time.forward);
    let m = catalog::model("llama3-8b").unwrap();
    let sys = catalog::system("dgx-h100").unwrap().with_gpus(8).unwrap();
    let p = estimate::plan(
        &m,
        &sys,
        &PlanSpec {
            precision: Precision::Nvfp4,
            ..spec
        },
    )
    .unwrap();
    let err = estimate::evaluate(&m, &sys, &p).unwrap_err().to_string();
    assert!(err.contains("no nvfp4 matrix peak"), "{err}");
}

#[test]
fn seq_len_override_equals_the_model_at_that_length() {
    // --seq-len 4096 on Llama 3 8B is the same run as a Llama 3 8B file with seq_len 4096.
    let spec = PlanSpec {
        gpus: Some(8),
        global_batch: Some(8),
        ..PlanSpec::default()
    };
    let a = run(
        "llama3-8b",
        "dgx-h100",
        PlanSpec {
            seq_len: Some(4096),
            ..spec.clone()
        },
    );
    let text = catalog::source(catalog::Kind::Model, "llama3-8b").unwrap();
    let text = text.replace("seq_len = 8192", "seq_len = 4096");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-seq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("llama3-8b-4k.toml");
    std::fs::write(&path, text).unwrap();
    let b = run(path.to_str().unwrap(), "dgx-h100", spec);
    assert_eq!(a.time.total, b.time.total);
    assert_eq!(a.memory.total, b.memory.total);
}

#[test]
fn sweep_precision_axis_counts_unsupported_formats() {
    // FP8 and NVFP4 on 8 H100s: NVFP4 has no Hopper peak, so its plans are counted
    // invalid with that reason; FP8 plans are evaluated with their precision.
    let m = catalog::model("llama3-8b").unwrap();
    let sys = catalog::system("dgx-h100").unwrap().with_gpus(8).unwrap();
    let mut ax = Axes::default_for(8);
    ax.precision = vec![
        (Precision::Fp8, astrolabe::compute::Fp8Recipe::Current),
        (Precision::Nvfp4, astrolabe::compute::Fp8Recipe::Delayed),
    ];
    let g = Grid::build(&m, &sys, 64, ax).unwrap();
    assert!(
        g.structural
            .iter()
            .all(|s| s.plan.precision == Precision::Fp8)
    );
    assert!(!g.structural.is_empty());
    assert!(
        g.invalid
            .iter()
            .any(|d| d.reason.contains("precision not supported") && d.count > 0)
    );
}

#[test]
fn expert_tensor_parallelism_holds_whole_experts() {
    // Mixtral 8x7B on 16 H100s, TP 2, EP 8: with ETP 1 each device keeps its expert whole
    // instead of half of it: weights grow by 32 layers × 1 expert × P_mlp / 2 × 2 B, and
    // the sweep's ETP axis lists both.
    let spec = PlanSpec {
        gpus: Some(16),
        tp: 2,
        ep: 8,
        global_batch: Some(8),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let two = run("mixtral-8x7b", "dgx-h100", spec.clone());
    let one = run(
        "mixtral-8x7b",
        "dgx-h100",
        PlanSpec {
            etp: Some(1),
            ..spec
        },
    );
    let mlp = catalog::model("mixtral-8x7b")
        .unwrap()
        .transformer()
        .unwrap()
        .mlp_params;
    assert_relative_eq!(
        one.memory.weights.get() - two.memory.weights.get(),
        32.0 * mlp / 2.0 * 2.0,
        max_relative = 1e-9
    );
    let m = catalog::model("mixtral-8x7b").unwrap();
    let sys = catalog::system("dgx-h100").unwrap().with_gpus(16).unwrap();
    let mut ax = Axes::default_for(16);
    (ax.tp, ax.ep, ax.etp) = (vec![2], vec![8], vec![1, 2]);
    let g = Grid::build(&m, &sys, 8, ax).unwrap();
    let etps: std::collections::BTreeSet<u32> = g.structural.iter().map(|s| s.plan.etp).collect();
    assert_eq!(etps.into_iter().collect::<Vec<_>>(), vec![1, 2]);
}

/// The routed experts' GEMM shapes on one rank, Qwen3-30B-A3B (128 experts of FFN 768,
/// top-8, h 2048) on 8 H100s, TP 2 (sequence parallel), EP 4, 4096 tokens per sequence:
/// each rank dispatches its `s/t` = 2048 tokens' 8 copies, and its 32 local experts
/// receive `s·k·ep/E·etp/t` tokens each: 4096·8·4/128·1/2 = 512 with ETP 1 (whole experts),
/// 1024 with ETP 2 (the experts' FFN split in two, N = 2·768/2 = 768 in, K = 768/2 out);
/// with a load imbalance of 1.5 the busiest expert's 1.5·512 = 768.
#[test]
fn expert_gemm_shapes_under_tp_and_etp() {
    for (etp, imbalance, fc1, fc2) in [
        (
            1,
            1.0,
            "M=512 N=1536 K=2048 ×32 experts",
            "M=512 N=2048 K=768 ×32 experts",
        ),
        (
            2,
            1.0,
            "M=1024 N=768 K=2048 ×32 experts",
            "M=1024 N=2048 K=384 ×32 experts",
        ),
        (
            1,
            1.5,
            "M=768 N=1536 K=2048 ×32 experts",
            "M=768 N=2048 K=768 ×32 experts",
        ),
    ] {
        let text = explain(&format!(
            "--model qwen3-30b-a3b --system dgx-h100 --gpus 8 --tp 2 --ep 4 --etp {etp} \
             --seq-len 4096 --global-batch 8 --moe-imbalance {imbalance}"
        ));
        for (gemm, shape) in [("MLP in", fc1), ("MLP out", fc2)] {
            let line = text
                .lines()
                .find(|l| l.contains(&format!("GEMM {gemm}:")))
                .unwrap_or_else(|| panic!("{gemm}: {text}"));
            assert!(line.contains(shape), "ETP {etp}: {line}");
        }
    }
}

/// A shared expert is a dense MLP split over TP like any other: Llama 4 Scout (shared
/// FFN 8192, h 5120, gated) on TP 2 runs `M = s` = 4096 rows against `2·8192/2` = 8192
/// columns in and `K = 8192/2` = 4096 out. Mixtral, without one, has no such GEMM.
#[test]
fn shared_expert_gemms_split_over_tp() {
    let plan = "--system dgx-h100 --gpus 8 --tp 2 --ep 4 --seq-len 4096 --global-batch 8";
    let scout = explain(&format!("--model llama4-scout {plan}"));
    for (gemm, shape) in [
        ("shared MLP in", "M=4096 N=8192 K=5120 ×1"),
        ("shared MLP out", "M=4096 N=5120 K=4096 ×1"),
    ] {
        let line = scout
            .lines()
            .find(|l| l.contains(&format!("GEMM {gemm}:")))
            .unwrap_or_else(|| panic!("{gemm}: {scout}"));
        assert!(line.contains(shape), "{line}");
    }
    let mixtral = explain(&format!("--model mixtral-8x7b {plan}"));
    assert!(!mixtral.contains("shared MLP"), "{mixtral}");
}

/// Transformer Engine runs a rank's expert GEMMs four at a time on its four streams
/// (`T = ⌊g/4⌋·T(×4) + T(×(g mod 4))`), both the experts' first and second GEMM: Qwen3-30B-A3B
/// with 16 local experts of 8192 tokens (EP 8, micro-batch 4) takes four times what 4 local
/// experts of the same 8192 tokens (EP 32, micro-batch 1) take in one round.
#[test]
fn sixteen_experts_run_in_four_rounds_of_four() {
    let times = |plan: &str| {
        let text = explain(&format!(
            "--model qwen3-30b-a3b --system dgx-h100 {plan} --seq-len 4096 --global-batch 128"
        ));
        [gemm_times(&text, "MLP in"), gemm_times(&text, "MLP out")]
    };
    let four = times("--gpus 32 --ep 32 --micro-batch 1");
    // Four experts fill one round: the explain names no streams for them.
    let text = explain(
        "--model qwen3-30b-a3b --system dgx-h100 --gpus 32 --ep 32 --micro-batch 1 \
         --seq-len 4096 --global-batch 128",
    );
    assert!(
        text.contains("GEMM MLP in: M=8192 N=1536 K=2048 ×4: efficiency"),
        "{text}"
    );
    let sixteen = times("--gpus 8 --ep 8 --micro-batch 4");
    for ((f4, b4), (f16, b16)) in four.into_iter().zip(sixteen) {
        assert!((f16 - 4.0 * f4).abs() < 2e-3 * f16, "{f16} vs 4 × {f4}");
        assert!((b16 - 4.0 * b4).abs() < 2e-3 * b16, "{b16} vs 4 × {b4}");
    }
}

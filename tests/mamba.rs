//! Hybrid Mamba–Transformer models (`[transformer] hybrid_pattern`, `[transformer.mamba]`):
//! each cost term of a Mamba-2 layer checked against arithmetic done by hand from its
//! formula (docs/modern-training.md, "Hybrid Mamba models"), on Nemotron-H 56B: 118 layers
//! (54 Mamba, 10 attention, 54 MLP), h 8192, Mamba 256 heads of 64, state 256, 8 groups,
//! chunk 128. Every tolerance is far below 5%: a term that moves by 5% fails its test.

use crate::common;
use approx::assert_relative_eq;
use common::{bin, json, micros};
use serde_json::Value;

/// Nemotron-H 56B on 16 H100s: TP 8 with SP, CP 2, one sequence of 8192 (4096 tokens per
/// rank), BF16, fused attention.
const CP2: &str = "estimate --model nemotron-h-56b --system dgx-h100 --gpus 16 --tp 8 --cp 2 \
    --sequence-parallel --global-batch 1 --micro-batch 1 --precision bf16 --flash-attention \
    --explain";

/// A command line's words.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The `--explain` output of Nemotron-H 56B on 64 H100s (TP 8 with SP, DP 8), one
/// sequence of 4096 per micro-batch, BF16, fused attention.
fn explain() -> String {
    common::text(&words(
        "estimate --model nemotron-h-56b --system dgx-h100 --gpus 64 --tp 8 --sequence-parallel \
         --seq-len 4096 --micro-batch 1 --global-batch 8 --precision bf16 --flash-attention \
         --explain",
    ))
}

/// The first `--explain` line containing `needle`.
fn explain_line(needle: &str) -> String {
    explain()
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("explain shows '{needle}'"))
        .to_string()
}

fn cp2() -> Value {
    json(&words(CP2))
}

fn comm_bytes(v: &Value, class: &str) -> f64 {
    v["time_breakdown"]["communication"][class]["bytes_per_device"]
        .as_f64()
        .unwrap()
}

#[test]
fn parameters_by_hand() {
    // Mamba layer 438 432 512 (in_proj 8192·37120, conv 20480·5, 3·256, norm 16384,
    // out_proj 16384·8192, pre-norm 8192); attention 8192·(8192 + 2·1024) + 8192² + 8192 =
    // 151 003 136; MLP 2·8192·32768 + 8192 = 536 879 104; embeddings 2·131072·8192; final
    // norm 8192: 54·438 432 512 + 10·151 003 136 + 54·536 879 104 + 2 147 483 648 + 8192 =
    // 56 324 350 464. TP 8 holds an eighth, 2 bytes each.
    let v = cp2();
    let w = v["memory_breakdown"]["weights_bytes"].as_f64().unwrap();
    assert_relative_eq!(w * 8.0 / 2.0, 56_324_350_464.0, max_relative = 1e-12);
}

#[test]
fn model_flops_by_hand() {
    // Forward per token: attention 10·(2·(8192·10240 + 8192²) + 4·8192·64·128) = 10·
    // (301 989 888 + 268 435 456); MLP 54·2·2·8192·32768; Mamba 54·(2·438 304 768 +
    // 21 495 808) (projections and the SSD scan); head 2·131072·8192: 114 331 484 160.
    // Times 3 (forward and backward) × 8192 tokens.
    let h = 8192.0_f64;
    let fwd = 10.0 * (2.0 * (h * 10240.0 + h * h) + 4.0 * 8192.0 * 64.0 * 128.0)
        + 54.0 * 2.0 * 2.0 * h * 32768.0
        + 54.0 * (2.0 * 438_304_768.0 + 21_495_808.0)
        + 2.0 * 131072.0 * h;
    assert_relative_eq!(fwd, 114_331_484_160.0);
    let v = cp2();
    let got = v["model_flops_per_iteration"].as_f64().unwrap();
    assert_relative_eq!(got, 3.0 * fwd * 8192.0, max_relative = 1e-12);
}

#[test]
fn activations_by_hand() {
    // Per layer, per s·b·h (67 108 864 at s = h = 8192, b = 1), SP on, fused attention:
    // the pre-norm's input and output 4/t = 0.5, then the blocks' split terms averaged over
    // the 118 layers, over t = 8: attention 10·(4 + 4·8/64) = 45, MLP 54·4·32768/8192 = 864,
    // Mamba 54·(2·37120 + 6·16384)/8192 = 1137.375 → 2046.375/8/118 = 2.167770. CP 2 halves
    // it; 118 layers: 67 108 864 · 2.667770 · 118/2 = 10 562 830 336 B.
    let v = cp2();
    let a = v["memory_breakdown"]["activations_bytes"].as_f64().unwrap();
    let per = 0.5 + (45.0 + 864.0 + 54.0 * 172_544.0 / 8192.0) / 8.0 / 118.0;
    assert_relative_eq!(a, 67_108_864.0 * per * 59.0, max_relative = 1e-12);
    assert_relative_eq!(a, 10_562_830_336.0, max_relative = 1e-9);
}

#[test]
fn sequence_parallel_bytes_are_one_pair_per_layer() {
    // Each hybrid layer has one column/row-parallel pair: forward an all-gather and a
    // reduce-scatter of B = b·(s/c)·h·2 = 4096·8192·2 = 67 108 864 bytes, backward three
    // (half a transformer layer's 4 and 6). With the embedding (B), the head's all-gather
    // (B) and its loss all-reduces (12 bytes per token), and its backward (B):
    // 118·5·B + 3·B + 12·4096 = 39 795 605 504 bytes.
    let v = cp2();
    let b = 67_108_864.0;
    assert_relative_eq!(comm_bytes(&v, "sp"), 593.0 * b + 12.0 * 4096.0);
    assert_relative_eq!(comm_bytes(&v, "sp"), 39_795_605_504.0);
}

#[test]
fn mamba_context_parallel_all_to_all_bytes() {
    // Megatron-LM MambaContextParallel: each pass exchanges z, x, B, C, dt (4096 tokens ·
    // 37120/8 columns · 2 B = 38 010 880) and y (4096 · 16384/8 · 2 = 16 777 216): 54 Mamba
    // layers · 2 passes · 54 788 096 = 5 917 114 368. The 10 attention layers pass their
    // KV block around the ring (1 KV head per rank, 4096 · 256 · 2 = 2 097 152) once forward
    // and twice backward: 10 · 3 · 2 097 152 = 62 914 560. MLP layers exchange nothing.
    let v = cp2();
    let mamba = 54.0 * 2.0 * (4096.0 * 4640.0 * 2.0 + 4096.0 * 2048.0 * 2.0);
    let attn = 10.0 * 3.0 * 4096.0 * 256.0 * 2.0;
    assert_relative_eq!(mamba, 5_917_114_368.0);
    assert_relative_eq!(comm_bytes(&v, "cp"), mamba + attn);
}

/// The Mamba layers' CP all-to-alls are exposed: CP 2 spans the two nodes (TP 8 fills each),
/// so each is one direct exchange on the InfiniBand dimension (47 GB/s, 14 µs): α + n/2 / B.
/// Per pass, z, x, B, C, dt (38 010 880 B): 14 µs + 404.37 µs; y (16 777 216 B): 14 µs +
/// 178.48 µs; 610.85 µs per layer and pass, × 54 layers × 2 passes = 65.97 ms. The attention
/// layers' ring transfers hide under their blocks' attention (1.6 ms hidden), so the class's
/// exposed time is the Mamba exchanges alone.
#[test]
fn mamba_context_parallel_all_to_alls_are_exposed() {
    let v = cp2();
    let a2a = |bytes: f64| 14e-6 + bytes / 2.0 / 47e9;
    let per_layer_pass = a2a(38_010_880.0) + a2a(16_777_216.0);
    assert_relative_eq!(per_layer_pass, 610.85e-6, max_relative = 1e-4);
    let cp = &v["time_breakdown"]["communication"]["cp"];
    assert_relative_eq!(
        cp["exposed_s"].as_f64().unwrap(),
        54.0 * 2.0 * per_layer_pass,
        max_relative = 1e-4
    );
}

#[test]
fn memory_bound_passes_by_hand() {
    // TP 8, 4096 tokens: 91 968 B per token forward (model::mamba::Mamba::bytes) →
    // 376 700 928 B at 3350 GB/s · 0.7, plus 7 kernels · 4 us = 160.64 + 28 = 188.64 us;
    // backward 259 136 B per token → 1 061 421 056 B → 452.63 + 18 · 4 = 524.63 us.
    let line = explain_line("Mamba memory-bound");
    assert!(line.contains("fwd 3.7670e8 B in 7 kernels"), "{line}");
    assert!(line.contains("bwd 1.0614e9 B in 18 kernels"), "{line}");
    let bw = 3350e9 * 0.7;
    let f = 376_700_928.0 / bw * 1e6 + 28.0;
    let b = 1_061_421_056.0 / bw * 1e6 + 72.0;
    assert_relative_eq!(f, 188.64, max_relative = 1e-4);
    assert_relative_eq!(micros(&line, "kernels →"), f, max_relative = 1e-3);
    let bwd = line.rsplit("kernels → ").next().unwrap();
    assert_relative_eq!(micros(&format!("x {bwd}"), "x"), b, max_relative = 1e-3);
}

#[test]
fn ssd_scan_gemms_by_hand() {
    // 4096 tokens / Q 128 = 32 chunks; per rank one group and 32 heads; FLOPs per token
    // on the rank 21 495 808 / 8 = 2 686 976.
    let line = explain_line("SSD scan");
    assert!(line.contains("32 chunks"), "{line}");
    assert!(line.contains("C·Bᵀ 128×128×256 on 1 groups"), "{line}");
    assert!(line.contains("on 32 heads"), "{line}");
    assert!(line.contains("2.6870e6 FLOP per token"), "{line}");
}

#[test]
fn mamba_projections_are_one_column_and_one_row_parallel_gemm() {
    // in_proj h → (2·16384 + 2·8·256 + 256)/8 = 4640 columns per rank; out_proj
    // 16384/8 = 2048 → 8192.
    let line = explain_line("GEMM Mamba in_proj");
    assert!(line.contains("M=4096 N=4640 K=8192"), "{line}");
    let line = explain_line("GEMM Mamba out_proj");
    assert!(line.contains("M=4096 N=8192 K=2048"), "{line}");
}

#[test]
fn the_mean_layer_weighs_each_kind_by_its_count() {
    // Stage time per layer = (54·T_M + 10·T_* + 54·T_-)/118, from the printed layer totals
    // (4 significant digits).
    let text = explain();
    let totals: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| l.contains("layer total:"))
        .map(|l| (micros(l, "forward"), micros(l, "backward")))
        .collect();
    assert_eq!(totals.len(), 3, "Mamba, attention and MLP layers");
    let mean = text
        .lines()
        .find(|l| l.contains("mean layer = (54·T_M + 0·T_G + 10·T_* + 54·T_- + 0·T_E)/118"))
        .expect("the mean-layer line");
    let w = [54.0, 10.0, 54.0];
    let f: f64 = totals.iter().zip(w).map(|(t, k)| k * t.0).sum::<f64>() / 118.0;
    let b: f64 = totals.iter().zip(w).map(|(t, k)| k * t.1).sum::<f64>() / 118.0;
    assert_relative_eq!(micros(mean, "forward"), f, max_relative = 2e-3);
    assert_relative_eq!(micros(mean, "backward"), b, max_relative = 2e-3);
}

/// Nemotron-H 8B's model file with each `(from, to)` of `edits` replaced, written as `file`
/// in the test directory `dir`.
fn edited_8b(dir: &str, file: &str, edits: &[(&str, &str)]) -> std::path::PathBuf {
    let mut text = astrolabe::catalog::MODELS
        .iter()
        .find(|e| e.name == "nemotron-h-8b")
        .unwrap()
        .text
        .to_string();
    for (from, to) in edits {
        text = text.replace(from, to);
    }
    let path = common::tmp(dir).join(file);
    std::fs::write(&path, text).unwrap();
    path
}

/// The stderr of estimating Nemotron-H 8B with `from` replaced by `to` in its model file,
/// asserting exit status 2 and that the message names the file.
fn edited_8b_error(from: &str, to: &str) -> String {
    let path = edited_8b("hybrid", "bad-hybrid.toml", &[(from, to)]);
    let out = bin()
        .args(["estimate", "--model", path.to_str().unwrap()])
        .args(["--system", "dgx-h100", "--gpus", "8"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(err.contains("bad-hybrid.toml"), "{err}");
    err
}

#[test]
fn a_bad_pattern_names_the_file_and_the_character() {
    let err = edited_8b_error("M-M-M-M*-M-M-M-M-M*", "M-X-M-M*-M-M-M-M-M*");
    assert!(
        err.contains("transformer.hybrid_pattern") && err.contains("character 3 ('X')"),
        "{err}"
    );
    // One character short of the 52 layers.
    let err = edited_8b_error("M-M-M-M-M-\"", "M-M-M-M-M\"");
    assert!(
        err.contains("has 51 layers but transformer.layers is 52"),
        "{err}"
    );
    // An MoE layer in a model without [transformer.moe].
    let err = edited_8b_error("M-M-M-M*-M-M-M-M-M*", "M-E-M-M*-M-M-M-M-M*");
    assert!(
        err.contains("has E layers: needs a [transformer.moe] table"),
        "{err}"
    );
}

#[test]
fn plans_megatron_refuses_are_refused() {
    // 8 groups cannot split over TP 16; 256/8 = 32 heads per TP rank cannot split over
    // CP 64; LoRA adapters are not modelled on Mamba layers.
    let refused = [
        ("--gpus 16 --tp 16", "--tp"),
        ("--gpus 512 --tp 8 --cp 64", "--cp"),
        (
            "--gpus 16 --tp 8 --lora-rank 16",
            "--lora-rank: LoRA is not modelled for hybrid Mamba models",
        ),
    ];
    for (plan, flag) in refused {
        let line = format!("estimate --model nemotron-h-56b --system dgx-h100 {plan}");
        common::usage_error(&words(&line), flag);
    }
}

/// The CP check counts the groups per TP rank: Nemotron-H 8B edited to 96 Mamba heads in
/// 6 groups. TP 2 leaves 48 heads and 3 groups per rank; CP 2 divides the 48 heads but
/// neither divides nor is a multiple of 3 groups, so Megatron-LM refuses it. Without TP the
/// 6 groups split over CP 2, and the same CP runs.
#[test]
fn mamba_cp_divides_the_groups_per_tp_rank() {
    let path = edited_8b(
        "hybrid_groups",
        "six-groups.toml",
        &[
            ("heads = 128\nhead_dim = 64", "heads = 96\nhead_dim = 64"),
            ("groups = 8", "groups = 6"),
        ],
    );
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("heads = 96") && text.contains("groups = 6"));
    let line = |tp: u32| {
        format!(
            "estimate --model {} --system dgx-h100 --gpus 4 --tp {tp} --cp 2",
            path.display()
        )
    };
    common::usage_error(&words(&line(2)), "groups per TP rank (3)");
    bin().args(words(&line(1))).assert().code(0);
}

/// One published hybrid run (tests/data/modern/hybrid-runs.csv).
#[derive(Debug, serde::Deserialize)]
struct Run {
    gpu: String,
    num_gpus: u32,
    model: String,
    seq_len: u32,
    tp: u32,
    pp: u32,
    cp: u32,
    ep: u32,
    micro_batch: u32,
    global_batch: u32,
    precision: String,
    step_time_s: f64,
    notes: String,
}

/// A row's estimate command by the rule of tests/validation_2025.rs (the row's model, GPU
/// type, GPUs, TP, PP, CP, EP, micro-batch, global batch, sequence and precision; FP8 rows
/// with current scaling; fused attention, TP overlap, SP with TP > 1; expert TP 1), plus
/// the distributed optimizer (ZeRO-1) both recipes set and the table omits
/// (Megatron-Bridge src/megatron/bridge/recipes/nemotronh/nemotronh.py and
/// nemotron_3_nano.py at d8348845d4: `cfg.ddp.use_distributed_optimizer = True`, no
/// recomputation).
fn command(r: &Run) -> Vec<String> {
    let model = match r.model.as_str() {
        "Nemotron5-H_56B" => "nemotron-h-56b",
        "Nemotron_3_Nano" => "nemotron-3-nano-30b-a3b",
        "Nemotron_3_5_Lightning" => "nemotron-3.5-lightning-30b-a3b",
        m => panic!("no preset for {m}"),
    };
    let system = match r.gpu.as_str() {
        "H100" => "dgx-h100",
        "B200" => "dgx-b200",
        "B300" => "dgx-b300",
        "GB200" => "gb200-nvl72",
        "GB300" => "gb300-nvl72",
        g => panic!("no system for {g}"),
    };
    let mut a: Vec<String> = ["--model", model, "--system", system]
        .map(String::from)
        .to_vec();
    for (k, v) in [
        ("gpus", r.num_gpus),
        ("tp", r.tp),
        ("pp", r.pp),
        ("cp", r.cp),
        ("seq-len", r.seq_len),
        ("micro-batch", r.micro_batch),
        ("global-batch", r.global_batch),
    ] {
        a.push(format!("--{k}"));
        a.push(v.to_string());
    }
    match r.precision.as_str() {
        "FP8" | "FP8-CS" => {
            a.extend(["--precision", "fp8", "--fp8-recipe", "current"].map(String::from))
        }
        "MXFP8" => a.extend(["--precision", "mxfp8"].map(String::from)),
        p => panic!("precision {p}"),
    }
    if r.ep > 1 {
        a.extend(["--ep".into(), r.ep.to_string(), "--etp".into(), "1".into()]);
        // Nano's recipes (and Lightning's, built on them) dispatch with HybridEP
        // (perf_recipes/nemotronh/{gpu}/nemotronh.py at 067f987df0:
        // `moe_flex_dispatcher_backend = "hybridep"`, the `flex` dispatcher of the base
        // recipes).
        a.extend(["--ep-dispatch", "hierarchical"].map(String::from));
    }
    a.extend(["--flash-attention", "--tp-overlap", "--zero", "1"].map(String::from));
    // perf_recipes/nemotronh/{gpu}/nemotronh.py at 067f987df0: Transformer Engine partial
    // CUDA graphs, `["mamba", "attn"]` for Nemotron-H 56B, `attn`, `mamba`, `moe_router`,
    // `moe_preprocess` for Nemotron 3 Nano.
    let graphs = if r.ep > 1 {
        "attn,mamba,moe_router,moe_preprocess"
    } else {
        "mamba,attn"
    };
    a.extend(["--cuda-graphs".into(), graphs.into()]);
    // The GB200/GB300 MXFP8 recipes of August 2026 (d0debd0bd, a57566616: the 26.08 rows)
    // run attention in 8 bits (`fp8_dot_product_attention = True`).
    if r.gpu.starts_with("GB") && r.precision == "MXFP8" && r.notes.contains("container 26.08;") {
        a.push("--fp8-attention".into());
    }
    if r.tp > 1 {
        a.push("--sequence-parallel".into());
    }
    a
}

/// Nemotron-H 56B, Nemotron 3 Nano and Nemotron 3.5 Lightning (Nano's architecture with two
/// MTP depths; its 26.08 recipe is Nano's plus MTP) pre-training as Megatron-Bridge
/// publishes it (24 rows, containers 26.02 to 26.08): every row is expressible, and each estimate is within 25% of
/// the published step. Nothing is fitted to these rows. Measured (docs/validation-modern.md,
/// "Hybrid Mamba models"): 56B +7.2% (GB200), +6.3% (GB300), +13.3% (H100); Nano −3% to
/// −19%, the same sign and size as Qwen3-30B-A3B's rows of the same containers (MoE compute
/// optimistic), so 25% is what the MoE rows support, not a Mamba term; Lightning +0.7%.
#[test]
fn published_hybrid_runs() {
    let runs: Vec<Run> = common::csv_rows("tests/data/modern/hybrid-runs.csv");
    assert_eq!(runs.len(), 24);
    let mut errors = Vec::new();
    for r in &runs {
        let args = command(r);
        let t = common::estimate_cli(&args).0.time.total.get();
        let err = t / r.step_time_s - 1.0;
        println!(
            "| {} {}×{} {} | {:.3} s | {:.3} s | {:+.1}% |",
            r.model,
            r.num_gpus,
            r.gpu,
            r.precision,
            r.step_time_s,
            t,
            100.0 * err
        );
        assert!(err.abs() <= 0.25, "{args:?}: {:+.1}%", 100.0 * err);
        errors.push(err);
    }
    // The three dense-hybrid rows (no MoE): within the H100/Blackwell dense groups' spread.
    let dense: Vec<f64> = errors[..3].iter().map(|e| e.abs()).collect();
    assert!(dense.iter().all(|&e| e <= 0.17), "{dense:?}");
}

#[test]
fn ssd_scan_time_is_its_four_gemms_and_their_gradients() {
    // 32 chunks of Q = 128 on TP 8 (1 group, 32 heads per rank), batched GEMMs (M, N, K,
    // batch) at the 16-bit peak: C·Bᵀ (128, 128, 256, 32), states (64, 256, 128, 1024),
    // C·state (128, 64, 256, 1024), diagonal (128, 64, 128, 1024). Forward: their sum.
    // Backward: for each, the gradients of both operands (M×K×N and K×N×M), plus C·Bᵀ and the
    // states recomputed (mamba_ssm `_mamba_chunk_scan_combined_bwd`).
    let dev = astrolabe::catalog::device("h100-sxm").unwrap();
    let peak = dev.peak(astrolabe::compute::Precision::Bf16).unwrap();
    let g = |m: f64, n: f64, k: f64, b: f64| dev.gemm_time(peak, m, n, k, b).get() * 1e6;
    let shapes = [
        (128.0, 128.0, 256.0, 32.0),
        (64.0, 256.0, 128.0, 1024.0),
        (128.0, 64.0, 256.0, 1024.0),
        (128.0, 64.0, 128.0, 1024.0),
    ];
    let fwd: f64 = shapes.iter().map(|&(m, n, k, b)| g(m, n, k, b)).sum();
    let grads: f64 = shapes
        .iter()
        .map(|&(m, n, k, b)| g(m, k, n, b) + g(k, n, m, b))
        .sum();
    let bwd = grads + g(128.0, 128.0, 256.0, 32.0) + g(64.0, 256.0, 128.0, 1024.0);
    let line = explain_line("SSD scan");
    assert_relative_eq!(micros(&line, "→ fwd"), fwd, max_relative = 1e-3);
    assert_relative_eq!(micros(&line, "recomputed)"), bwd, max_relative = 1e-3);
}

/// A Mamba layer's memory-bound time per pass adds the mixer's passes (the line above) to
/// the layer's own pre-norm and residual add on the SP-split stream (4096·8192/8 =
/// 4,194,304 elements; one norm and one bias-dropout-add: 10 B per element forward in 2
/// kernels, 14 backward in 5). Forward: (41,943,040 + 376,700,928) B at 3350 GB/s · 0.7
/// plus 9 kernels of 4 µs, 214.53 µs; backward: (58,720,256 + 1,061,421,056) B plus 23
/// kernels, 569.67 µs.
#[test]
fn mamba_layer_memory_bound_total_by_hand() {
    let text = explain();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.contains("Mamba memory-bound"));
    lines.next().expect("the Mamba line");
    let line = lines
        .find(|l| l.contains("memory-bound: LayerNorm ×1"))
        .expect("the Mamba layer's memory-bound line");
    assert!(line.contains("on 4194304 elements"), "{line}");
    let bw = 3350e9 * 0.7;
    let f = (41_943_040.0 + 376_700_928.0) / bw * 1e6 + 36.0;
    let b = (58_720_256.0 + 1_061_421_056.0) / bw * 1e6 + 92.0;
    assert_relative_eq!(f, 214.53, max_relative = 1e-4);
    assert_relative_eq!(b, 569.67, max_relative = 1e-4);
    assert_relative_eq!(micros(line, "fwd"), f, max_relative = 1e-3);
    assert_relative_eq!(micros(line, "bwd"), b, max_relative = 1e-3);
}

/// A hybrid model's blocks each carry one column/row-parallel pair, and each TP collective
/// is timed beside its own GEMM: with SP the all-gather beside the column-parallel GEMM
/// (Mamba `in_proj`, QKV, MLP in) and the reduce-scatter beside the row-parallel one
/// (`out_proj`, the attention projection, MLP out), chunked over n = t = 2 (TE userbuffers):
/// `exposed = C/n + (n−1)/n·max(0, C − G − κ·min(C, G)·(n−1)/n)`; backward the all-gather
/// beside the data gradient and the reduce-scatter beside the weight gradient (bulk:
/// `max(0, C − G − κ·min(C, G))`; below each GEMM's gradients exceed nothing, `C > G`, so
/// their sum is what counts) and the output-gradient all-gather chunked with the
/// row-parallel data gradient, which for the square 4096³ `out_proj` equals its forward.
/// Without SP the backward all-reduce of an attention block runs beside QKV's weight
/// gradient, a 4096 × 3072 × 4096 GEMM like its forward. Nemotron-H 8B, TP 2, on a slow
/// 20 GB/s switch so that every collective outlasts its GEMM; values from `--explain`.
#[test]
fn hybrid_tp_windows_pair_each_collective_with_its_gemm() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe-hybrid-tp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let sys = dir.join("slow.toml");
    std::fs::write(
        &sys,
        "name = \"slow\"\ndevice = \"h100-sxm\"\n[[network.dims]]\nkind = \"switch\"\nsize = 8\nbandwidth = \"20 GB/s\"\nlatency = \"3 us\"\n",
    )
    .unwrap();
    let sys = sys.to_str().unwrap();
    let explain = |extra: &[&str]| -> String {
        let base = [
            "estimate",
            "--model",
            "nemotron-h-8b",
            "--system",
            sys,
            "--gpus",
            "2",
            "--tp",
            "2",
            "--global-batch",
            "1",
            "--seq-len",
            "4096",
            "--explain",
        ];
        common::text(&[&base[..], extra].concat())
    };
    let after = |text: &str, from: &str, needle: &str| common::line_after(text, from, needle);
    // "all-gather 841.9 us ×2": the number and unit after `key`, in µs.
    let first = |line: &str, key: &str| -> f64 {
        let mut w = line.split(key).nth(1).expect(key).split_whitespace();
        let x: f64 = w.next().unwrap().parse().unwrap();
        match w.next().unwrap() {
            "us" => x,
            "ms" => x * 1e3,
            u => panic!("unit {u}"),
        }
    };
    let k = 0.189;
    let chunked = |c: f64, g: f64| c / 2.0 + 0.5 * (c - g - k * c.min(g) * 0.5).max(0.0);
    let bulk_sum = |c: f64, g: f64| 2.0 * c - g - k * g;
    let sp = explain(&[]);
    for (col, row) in [
        ("GEMM Mamba in_proj", "GEMM Mamba out_proj"),
        ("GEMM QKV", "GEMM attention projection"),
        ("GEMM MLP in", "GEMM MLP out"),
    ] {
        let window = after(&sp, col, "TP window, forward");
        let ag = first(&window, "all-gather");
        let rs = first(&window, "reduce-scatter");
        let g_col = micros(&after(&sp, col, col), "→ fwd");
        let g_row = micros(&after(&sp, col, row), "→ fwd");
        let fwd = chunked(ag, g_col) + chunked(rs, g_row);
        let printed = micros(&window, "→ exposed");
        assert!(
            (printed / fwd - 1.0).abs() < 2e-3,
            "{col}: forward {printed} µs, by hand {fwd} µs"
        );
        if col == "GEMM Mamba in_proj" {
            // Backward: the in_proj's data and weight gradients (their sum, `bwd`) under the
            // all-gather and reduce-scatter, then out_proj's data gradient (= its forward).
            let line = after(&sp, col, col);
            let g_bwd = micros(&line, "bwd");
            let bwd = bulk_sum(ag, g_bwd) + chunked(ag, g_row);
            let printed = micros(&after(&sp, col, "TP window, backward"), "→ exposed");
            assert!(
                (printed / bwd - 1.0).abs() < 2e-3,
                "backward {printed} µs, by hand {bwd} µs"
            );
        }
    }
    let no_sp = explain(&["--sequence-parallel", "false"]);
    let qkv = micros(&after(&no_sp, "GEMM QKV", "GEMM QKV"), "→ fwd");
    let ar = first(
        &after(&no_sp, "GEMM QKV", "TP window, forward"),
        "all-reduce",
    );
    let printed = micros(
        &after(&no_sp, "GEMM QKV", "TP window, backward"),
        "→ exposed",
    );
    let bwd = ar - qkv - k * qkv;
    assert!(
        (printed / bwd - 1.0).abs() < 2e-3,
        "attention backward {printed} µs, by hand {bwd} µs"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn hybrid_moe_layers_hold_their_local_experts_split_over_etp() {
    // Nemotron 3 Nano (23 MoE layers of 128 experts, each 2·h·f = 2·2688·1856 parameters;
    // squared ReLU, not gated) on 8 GPUs at TP 2, ZeRO-1 (whole weights on each device): a
    // device holds E/(ep·etp) of each MoE layer's experts and 1/t of the rest. Between EP 2
    // ETP 1 (64 experts' worth) and EP 4 ETP 1 or EP 2 ETP 2 (32), its 16-bit weights differ
    // by 23 · 32 · 2·2688·1856 parameters, 2 B each.
    let weights = |ep: &str, etp: &str| {
        let a: Vec<String> = [
            "--model",
            "nemotron-3-nano-30b-a3b",
            "--system",
            "dgx-b200",
            "--gpus",
            "8",
            "--tp",
            "2",
            "--ep",
            ep,
            "--etp",
            etp,
            "--global-batch",
            "8",
            "--precision",
            "bf16",
        ]
        .map(String::from)
        .to_vec();
        common::estimate_cli(&a).0.memory.weights.get()
    };
    let want = 23.0 * 32.0 * 2.0 * 2688.0 * 1856.0 * 2.0;
    let base = weights("2", "1");
    assert_relative_eq!(base - weights("4", "1"), want, max_relative = 1e-9);
    assert_relative_eq!(base - weights("2", "2"), want, max_relative = 1e-9);
}

/// A pattern's `-` layers are the dense MLP of `ffn_hidden`, not the experts: Nemotron 3
/// Nano with its second layer made a dense MLP (`M-MEM*E…`) of width 4096 (the experts keep
/// 1856), on 8 B200, EP 8, sequence 8192, micro-batch 1. The `-` block's explain shows one
/// ungated GEMM of M = 8192 tokens, N = 4096, K = 2688; the `E` block 16 local experts.
#[test]
fn dense_mlp_layers_of_a_hybrid_pattern_run_the_dense_mlp() {
    let shown = common::text(&["show", "model", "nemotron-3-nano-30b-a3b"]);
    let edited = shown
        .replacen(
            "hybrid_pattern = \"MEMEM*E",
            "hybrid_pattern = \"M-MEM*E",
            1,
        )
        .replacen("ffn_hidden = 1856", "ffn_hidden = 4096", 1);
    assert!(edited.contains("M-MEM*E") && edited.contains("ffn_hidden = 4096"));
    let path = common::tmp("hybrid_dense").join("nano-dense.toml");
    std::fs::write(&path, edited).unwrap();
    let out = bin()
        .args([
            "estimate",
            "--model",
            path.to_str().unwrap(),
            "--system",
            "dgx-b200",
        ])
        .args([
            "--gpus",
            "8",
            "--ep",
            "8",
            "--seq-len",
            "8192",
            "--global-batch",
            "8",
        ])
        .arg("--explain")
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let after = |needle: &str| {
        let mut it = text.lines().skip_while(|l| !l.contains(needle));
        it.next().unwrap_or_else(|| panic!("{needle}: {text}"));
        it.find(|l| l.contains("GEMM MLP in")).unwrap().to_string()
    };
    let dense = after("MLP (-) layers: 1 of 52");
    assert!(
        dense.contains("GEMM MLP in: M=8192 N=4096 K=2688 ×1:"),
        "{dense}"
    );
    let moe = after("MoE (E) layers: 22 of 52");
    assert!(moe.contains("N=1856 K=2688 ×16 experts"), "{moe}");
}

/// A Mamba layer's host operations without CUDA graphs (docs/modern-training.md, "Host
/// launch time"): its two projections as Transformer Engine linear calls (2.7 operations
/// each, once forward and twice backward in 16-bit) and its memory-bound kernels (7 forward,
/// 18 backward, as in `memory_bound_passes_by_hand`): 2·2.7 + 7 = 12.4 forward and
/// 2·2·2.7 + 18 = 28.8 backward, at 20 µs each 248 and 576 µs.
#[test]
fn mamba_host_operations_by_hand() {
    // The plan needs more memory than an H100 has (exit 3); its times are computed.
    let text = common::computed(&words(
        "estimate --model nemotron-h-8b --system dgx-h100 --gpus 8 --global-batch 8 \
         --precision bf16 --cuda-graphs none --explain",
    ));
    let line = common::line_after(&text, "Mamba (M) layers", "host (CUDA graphs: none)");
    let (fwd, bwd) = (2.0 * 2.7 + 7.0, 2.0 * 2.0 * 2.7 + 18.0);
    assert_relative_eq!(fwd, 12.4, max_relative = 1e-12);
    assert_relative_eq!(bwd, 28.8, max_relative = 1e-12);
    assert!(line.contains("forward 12.4 ops × 20 us = 248 us"), "{line}");
    assert!(
        line.contains("backward 28.8 ops × 20 us = 576 us"),
        "{line}"
    );
}

/// A hybrid pattern of attention and MLP blocks (`*-`, or `*E` with experts) is the
/// transformer whose layers they pair into: the same GEMMs, memory-bound passes, TP and
/// EP windows, link sharing with DP (the blocks' TP busy time weighted by their counts),
/// memory, and host: the host runs ahead across blocks until a MoE layer's token-count
/// copy, so the blocks' host and GPU times add before the idle is taken
/// (`host::pass_idle`). Only the MoE layer's split of its memory-bound kernels' launch
/// time around the dispatch (apportioned by bytes, over the block's kernels rather than
/// the layer's) leaves the MoE host idle a fraction of a percent apart.
#[test]
fn a_pattern_of_attention_and_mlp_blocks_is_the_transformer() {
    let dir = common::tmp("hybrid_as_transformer");
    let head = "name = \"x\"\ndescription = \"x\"\nsource = \"x\"\n\n[transformer]\n";
    let dense = "hidden = 4096\nheads = 32\nkv_heads = 8\nffn_hidden = 14336\n\
        activation = \"swiglu\"\nvocab = 32000\nseq_len = 4096\ntied_embeddings = false\n\
        learned_positions = false\nbias = false\n";
    let moe = "hidden = 2048\nheads = 32\nkv_heads = 4\nhead_dim = 128\nffn_hidden = 6144\n\
        activation = \"swiglu\"\nvocab = 32000\nseq_len = 4096\ntied_embeddings = false\n\
        learned_positions = false\nbias = false\n\n[transformer.moe]\nexperts = 64\n\
        top_k = 8\nexpert_ffn_hidden = 768\n";
    let file = |name: &str, layers: &str, body: &str| {
        let p = dir.join(format!("{name}.toml"));
        std::fs::write(&p, format!("{head}{layers}\n{body}")).unwrap();
        p.to_str().unwrap().to_string()
    };
    let estimate = |model: &str, plan: &str| -> Value {
        let mut a = vec!["estimate", "--model", model, "--system", "dgx-h100"];
        a.extend(plan.split_whitespace());
        common::computed_json(&a)
    };
    let leaves = |v: &Value| -> Vec<(String, f64)> {
        fn walk(v: &Value, at: String, out: &mut Vec<(String, f64)>) {
            match v {
                Value::Object(m) => m
                    .iter()
                    .for_each(|(k, x)| walk(x, format!("{at}.{k}"), out)),
                Value::Number(n) => out.push((at, n.as_f64().unwrap())),
                _ => {}
            }
        }
        let mut out = Vec::new();
        walk(&v["time_breakdown"], "time".into(), &mut out);
        walk(&v["memory_breakdown"], "memory".into(), &mut out);
        out
    };
    // Dense: TP 2 and DP 4 share one NVLink switch, so the DP buckets slow by TP's traffic.
    let plan = "--gpus 8 --tp 2 --global-batch 64";
    let t = estimate(&file("dense16", "layers = 16", dense), plan);
    let pattern = "layers = 32\nhybrid_pattern = \"*-*-*-*-*-*-*-*-*-*-*-*-*-*-*-*-\"";
    let h = estimate(&file("hybrid32", pattern, dense), plan);
    for ((k, a), (_, b)) in leaves(&t).into_iter().zip(leaves(&h)) {
        assert!(
            (a - b).abs() <= 1e-9 * a.abs().max(1e-12),
            "{k}: transformer {a}, hybrid {b}"
        );
    }
    assert!(
        t["time_breakdown"]["communication"]["dp"]["hidden_s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    // MoE: EP 4 with TP 2 on 16 GPUs, no CUDA graphs (host-bound).
    let plan = "--gpus 16 --tp 2 --ep 4 --global-batch 64 --cuda-graphs none";
    let t = estimate(&file("moe8", "layers = 8", moe), plan);
    let pattern = "layers = 16\nhybrid_pattern = \"*E*E*E*E*E*E*E*E\"";
    let h = estimate(&file("hybrid_moe16", pattern, moe), plan);
    for ((k, a), (_, b)) in leaves(&t).into_iter().zip(leaves(&h)) {
        let tol = if k == "time.host_idle_s" { 5e-3 } else { 1e-9 };
        assert!(
            (a - b).abs() <= tol * a.abs().max(1e-12),
            "{k}: transformer {a}, hybrid {b}"
        );
    }
    let idle = t["time_breakdown"]["host_idle_s"].as_f64().unwrap();
    assert!(
        idle > 0.3 * t["iteration_time_s"].as_f64().unwrap(),
        "host-bound: {idle} s"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// Selective recomputation recomputes the core attention (Megatron-core's `core_attn`:
/// softmax(QKᵀ)·V) and nothing else, so a hybrid's Mamba and MLP layers recompute nothing,
/// even without flash attention, where the attention layers recompute their unfused core
/// attention. Nemotron-H 8B (24 Mamba, 4 attention and 24 MLP layers) on one DGX H100, one
/// micro-batch of 4096: the iteration's recompute is 4 × the attention layer's.
#[test]
fn selective_recompute_skips_a_hybrids_mamba_layers() {
    let v = json(
        &"estimate --model nemotron-h-8b --system dgx-h100 --gpus 8 --seq-len 4096 --global-batch 8 --recompute selective --flash-attention false --explain"
            .split_whitespace()
            .collect::<Vec<_>>(),
    );
    let lines: Vec<&str> = v["explain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .filter(|l| l.contains("layer total:"))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    let recompute = |l: &str| micros(l, "recompute ");
    // The kinds in the order of the pattern's first appearance: Mamba, attention, MLP.
    assert_eq!(recompute(lines[0]), 0.0, "{}", lines[0]);
    assert_eq!(recompute(lines[2]), 0.0, "{}", lines[2]);
    let attention = recompute(lines[1]);
    assert!(attention > 0.0, "{}", lines[1]);
    assert_relative_eq!(
        v["time_breakdown"]["recompute_s"].as_f64().unwrap() * 1e6,
        4.0 * attention,
        max_relative = 1e-3
    );
}

//! Memory-bound terms by hand, from the device's figures (dgx-h100: 3350 GB/s HBM at
//! `memory = 0.7`, 4 µs per kernel): the loss on the last stage (`--cross-entropy`) and
//! Qwen3's QK-norm (Qwen3-30B-A3B, one H100 rank (TP 1), micro-batch 1, s = 4096:
//! tokens T = 4096, h = 2048, vocabulary V = 151936, 32 query and 4 key heads of 128), and
//! a layer's norms, bias-dropout-adds, activation and bias gradients (GPT-3 5B).

use crate::common;

use serde_json::Value;

const BW: f64 = 3350e9 * 0.7;
const KERNEL: f64 = 4e-6;
const T: f64 = 4096.0;
const H: f64 = 2048.0;
const V: f64 = 151936.0;

fn explain(model: &str, extra: &[&str]) -> String {
    // Exit 3 is fine: 83 GiB do not fit an 80 GB H100, the times are still printed.
    let mut a = "estimate --model MODEL --system dgx-h100 --gpus 8 --ep 8 --seq-len 4096 \
                 --micro-batch 1 --global-batch 8 --explain"
        .split_whitespace()
        .map(|w| if w == "MODEL" { model } else { w })
        .collect::<Vec<_>>();
    a.extend(extra);
    common::computed(&a)
}

/// The time after `key` on the first line containing `line`, in seconds ("423.2 us").
fn time_after(text: &str, line: &str, key: &str) -> f64 {
    let l = text
        .lines()
        .find(|l| l.contains(line))
        .unwrap_or_else(|| panic!("{line}"));
    let rest = &l[l.rfind(key).unwrap_or_else(|| panic!("{key} in {l}")) + key.len()..];
    let mut it = rest.split_whitespace();
    let v: f64 = it.next().unwrap().trim_end_matches(',').parse().unwrap();
    let unit = it.next().unwrap().trim_end_matches(',');
    v * match unit {
        "s" => 1.0,
        "ms" => 1e-3,
        "us" => 1e-6,
        u => panic!("unit {u}"),
    }
}

#[test]
fn cross_entropy_forward_by_hand() {
    // Final norm 4 B per element of T·h, then the loss over T·V logits in its kernels
    // (one more for the norm): unfused 38 B in 6, Transformer Engine's 8 B in 2.
    for (kind, bytes, kernels) in [("unfused", 38.0, 7.0), ("te", 8.0, 3.0)] {
        let text = explain("qwen3-30b-a3b", &["--cross-entropy", kind]);
        let got = time_after(&text, "cross-entropy (", "fwd ");
        let want = (4.0 * T * H + bytes * T * V) / BW + kernels * KERNEL;
        assert!((got / want - 1.0).abs() < 2e-3, "{kind}: {got} vs {want}");
    }
    // The default is Megatron-LM's unfused loss.
    let text = explain("qwen3-30b-a3b", &[]);
    assert!(
        text.contains("cross-entropy (unfused: 38 B per logit"),
        "{text}"
    );
}

#[test]
fn qk_norm_by_hand() {
    // Elements N = T·(32 + 4)·128; forward 4 B, backward 6 B per element, 2 kernels each.
    let with = explain("qwen3-30b-a3b", &[]);
    let n = T * 36.0 * 128.0;
    assert!(with.contains(&format!("QK-norm on {n} (")), "{with}");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("astrolabe_qkn_{}.toml", std::process::id()));
    let spec = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/models/qwen3-30b-a3b.toml"
    ))
    .unwrap()
    .replace("qk_norm = true", "qk_norm = false");
    std::fs::write(&path, spec).unwrap();
    let without = explain(path.to_str().unwrap(), &[]);
    std::fs::remove_file(&path).ok();
    assert!(!without.contains("QK-norm"), "{without}");
    for (key, bytes) in [("fwd ", 4.0), ("bwd ", 6.0)] {
        let d = time_after(&with, "memory-bound: LayerNorm", key)
            - time_after(&without, "memory-bound: LayerNorm", key);
        let want = bytes * n / BW + 2.0 * KERNEL;
        assert!((d / want - 1.0).abs() < 0.01, "{key}: {d} vs {want}");
    }
}

/// The loss's TP collectives, in bytes and time: three all-reduces of a float per token (12·T
/// bytes) unfused, one all-gather of 3 floats per token from each of the t ranks
/// (12·T·t) fused. Llama 3 8B on 8 H100 with TP 8 (SP), one micro-batch of 16 × 8192 =
/// 131,072 tokens: the SP bytes differ by 12·T·(8 − 1) = 11,010,048.
#[test]
fn cross_entropy_collective_bytes_by_hand() {
    let sp_bytes = |kind: &str| {
        let args = format!(
            "estimate --model llama3-8b --system dgx-h100 --gpus 8 --tp 8 --seq-len 8192 \
             --micro-batch 16 --global-batch 16 --recompute full --cross-entropy {kind} \
             --format json"
        );
        let a: Vec<&str> = args.split_whitespace().collect();
        let v: Value = serde_json::from_str(&common::computed(&a)).unwrap();
        assert_eq!(v["plan"]["cross_entropy"], kind);
        let sp = &v["time_breakdown"]["communication"]["sp"];
        (
            sp["bytes_per_device"].as_f64().unwrap(),
            sp["exposed_s"].as_f64().unwrap(),
        )
    };
    let ((b_te, x_te), (b_un, x_un)) = (sp_bytes("te"), sp_bytes("unfused"));
    assert_eq!(b_te - b_un, 12.0 * 131072.0 * 7.0);
    // Their time, exposed on the last stage: rings over the 8 GPUs' NVLink (dgx-h100:
    // 370 GB/s, α = 3.4 µs per step). All-reduce of S = 4·T: 2·7 steps of α + S/(8·B);
    // all-gather of S = 12·T·8: 7 steps of α + S/(8·B).
    let step = |s: f64| 3.4e-6 + s / (8.0 * 370e9);
    let ar = 14.0 * step(4.0 * 131072.0);
    let ag = 7.0 * step(12.0 * 131072.0 * 8.0);
    let want = ag - 3.0 * ar;
    assert!(
        ((x_te - x_un) / want - 1.0).abs() < 1e-6,
        "{} vs {want}",
        x_te - x_un
    );
}

/// A sweep applies `--cross-entropy` to every plan it ranks (a setting, not an axis).
#[test]
fn sweep_takes_the_loss_kernels() {
    let top = |kind: &str| {
        let v = common::llama8b_on_dgx_h100("sweep", &["--top", "3", "--cross-entropy", kind]);
        v["top"].as_array().unwrap().clone()
    };
    let (te, unfused) = (top("te"), top("unfused"));
    assert!(
        te.iter().all(|r| r["plan"]["cross_entropy"] == "te"),
        "{te:?}"
    );
    assert!(
        unfused
            .iter()
            .all(|r| r["plan"]["cross_entropy"] == "unfused")
    );
    // The fused loss moves 30 B less per logit: the best plan is faster.
    let t = |r: &Value| r["iteration_time_s"].as_f64().unwrap();
    assert!(
        t(&te[0]) < t(&unfused[0]),
        "{} vs {}",
        t(&te[0]),
        t(&unfused[0])
    );
}

/// A layer with biases: GPT-3 5B (h = 4096, FFN 16384, GeLU, biases, no rotary) on two H100
/// ranks, TP 2 with SP, s = 2048, micro-batch 1. The replicated stream is split over TP:
/// r = 2048·4096/2 = 4,194,304 elements; the activation a = 2048·16384/2 = 16,777,216.
/// - Forward: two LayerNorms (read + write, 4 B/elem) and two bias-dropout-adds (7 B/elem) on
///   r, GeLU (4 B/elem) on a: 22·r + 4·a = 159,383,552 B in 5 kernels.
/// - Backward: two LayerNorms (6), two dropouts (5), two residual gradient sums (6) on r, GeLU
///   (6) on a, and the bias gradients: column sums reading the output gradient of QKV
///   (2048·3·4096/2 = 12,582,912 elements) and of the two row-parallel layers (r each), 2 B
///   per element: 34·r + 6·a + 2·12,582,912 + 2·2·r = 285,212,672 B in 10 kernels.
#[test]
fn layer_memory_bound_kernels_with_biases_by_hand() {
    let text = common::computed(
        &"estimate --model gpt3-5b --system dgx-h100 --gpus 8 --tp 2 --seq-len 2048 \
          --micro-batch 1 --global-batch 4 --explain"
            .split_whitespace()
            .collect::<Vec<_>>(),
    );
    let (r, a) = (4_194_304.0, 16_777_216.0);
    assert!(
        text.contains(&format!("on {r} elements, activation on {a}")),
        "{text}"
    );
    let fwd = (22.0 * r + 4.0 * a) / BW + 5.0 * KERNEL;
    let bwd = (34.0 * r + 6.0 * a + 2.0 * 12_582_912.0 + 4.0 * r) / BW + 10.0 * KERNEL;
    approx::assert_relative_eq!(fwd, 87.97e-6, max_relative = 1e-3);
    approx::assert_relative_eq!(bwd, 161.63e-6, max_relative = 1e-3);
    for (key, want) in [("fwd ", fwd), ("bwd ", bwd)] {
        let got = time_after(&text, "memory-bound: LayerNorm", key);
        assert!((got / want - 1.0).abs() < 1e-3, "{key}: {got} vs {want}");
    }
}

/// The embedding on the first stage, by hand: Llama 2 7B on one H100, one micro-batch of
/// 4096 (`s·b·h` = 4096·4096 = 16,777,216 elements): forward 15 B per element in 3 kernels,
/// 251,658,240 B / 2.345 TB/s + 12 µs = 119.317 µs; backward 8 B in 2 kernels,
/// 134,217,728 B / 2.345 TB/s + 8 µs = 65.236 µs. The forward time is the 32 layers'
/// forwards, the logits GEMM, the loss and the embedding (to the explain's printed digits).
#[test]
fn embedding_by_hand() {
    let args = [
        "estimate",
        "--model",
        "llama2-7b",
        "--system",
        "dgx-h100",
        "--gpus",
        "1",
        "--seq-len",
        "4096",
        "--global-batch",
        "1",
    ];
    let r = 4096.0 * 4096.0;
    let (fwd, bwd) = (15.0 * r / BW + 3.0 * KERNEL, 8.0 * r / BW + 2.0 * KERNEL);
    approx::assert_relative_eq!(fwd, 119.317e-6, max_relative = 1e-4);
    approx::assert_relative_eq!(bwd, 65.236e-6, max_relative = 1e-4);
    // Seven billion parameters' Adam states do not fit one H100 (exit 3).
    let text = common::computed(&[&args[..], &["--explain"]].concat());
    let line = common::line_after(&text, "per layer", "embedding (first stage)");
    assert!(
        line.contains("2.5166e8 B in 3 kernels forward → 119.3 us"),
        "{line}"
    );
    assert!(
        line.contains("8 B in 2 kernels backward → 65.24 us"),
        "{line}"
    );
    let layer = common::micros(
        &common::line_after(&text, "per layer", "layer total"),
        "forward",
    );
    let logits = common::line_after(&text, "per layer", "logits GEMM");
    let (lg, ce) = (
        common::micros(&logits, "fwd"),
        common::micros(&logits, "): fwd"),
    );
    let j = common::computed_json(&args);
    let forward = j["time_breakdown"]["forward_s"].as_f64().unwrap() * 1e6;
    let sum = 32.0 * layer + lg + ce + fwd * 1e6;
    assert!(
        (forward - sum).abs() < 20.0,
        "forward {forward} µs against 32 layers, logits, loss and embedding {sum} µs"
    );
    // The backward likewise: the layers', the logits GEMM's, the loss's and the embedding's.
    let layer_b = common::micros(
        &common::line_after(&text, "per layer", "layer total"),
        "backward",
    );
    let lg_b = common::micros(logits.split(';').next().unwrap(), "bwd");
    let ce_b = common::micros(&format!("x{}", logits.rsplit("bwd").next().unwrap()), "x");
    // The loss by hand (unfused, V = 32000, t = 1): forward 4·s·h + 38·s·V = 5,047,844,864 B
    // in 7 kernels, backward 6·s·h + 14·s·V = 1,935,671,296 B in 3 kernels.
    approx::assert_relative_eq!(
        ce,
        (4.0 * r + 38.0 * 4096.0 * 32000.0) / BW * 1e6 + 28.0,
        max_relative = 1e-3
    );
    approx::assert_relative_eq!(
        ce_b,
        (6.0 * r + 14.0 * 4096.0 * 32000.0) / BW * 1e6 + 12.0,
        max_relative = 1e-3
    );
    let backward = j["time_breakdown"]["backward_s"].as_f64().unwrap() * 1e6;
    let sum_b = 32.0 * layer_b + lg_b + ce_b + bwd * 1e6;
    assert!(
        (backward - sum_b).abs() < 20.0,
        "backward {backward} µs against 32 layers, logits, loss and embedding {sum_b} µs"
    );
}

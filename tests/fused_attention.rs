//! The fused-attention kernel model (`transformer/layer.rs`, `fused_attention`) checked by
//! hand on H100: Llama 2 7B (32 heads of 128, causal), sequence 4096, TP 8 (4 heads per
//! rank), BF16.
//!
//! F = 2·b·(a/t)·s_q·s·(d_qk + d_v)·½ = 2·4·4096·4096·256·½ = 2^34 FLOP.
//! Saturation n/(n + n0) = 4096/(4096 + 384) = 0.914286.
//! Forward = F / (989 TFLOP/s · 0.34 · 0.914286) + 4 µs = 55.88 µs + 4 µs = 59.88 µs;
//! backward = 2.5·F / (989 TFLOP/s · 0.33 · 0.914286) + 4 µs = 143.94 µs + 4 µs = 147.94 µs
//! (FlashAttention-2 throughput on H100, FlashAttention-3 paper Fig. 5–6: the preset's
//! flash_fwd 0.34 and flash_bwd 0.33).
//!
//! Packed into samples of 512 tokens, each query sees 512 keys: F = 2·4·4096·512·256·½ =
//! 2^31 FLOP, saturation 512/(512 + 384) = 0.571429, forward = 11.18 µs + 4 µs = 15.18 µs,
//! backward = 28.79 µs + 4 µs = 32.79 µs.

use assert_cmd::Command;

/// The number (in µs) after the last `=` of the explain clause that starts with `key`.
fn micros(line: &str, key: &str) -> f64 {
    let part = line.split(key).nth(1).expect("clause present");
    let part = part.split(',').next().unwrap();
    let v = part.rsplit('=').next().unwrap().trim();
    let (num, unit) = v.split_once(' ').expect("value with unit");
    let x: f64 = num.parse().expect("a number");
    match unit {
        "us" => x,
        "ms" => x * 1e3,
        "s" => x * 1e6,
        u => panic!("unit {u}"),
    }
}

/// (forward, backward) µs of the fused attention in `--explain` for Llama 2 7B on 8 H100
/// (TP 8), sequence 4096, plus `extra` flags.
fn fused(extra: &[&str]) -> (f64, f64) {
    let mut args = vec![
        "estimate",
        "--model",
        "llama2-7b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--seq-len",
        "4096",
        "--micro-batch",
        "1",
        "--global-batch",
        "1",
        "--precision",
        "bf16",
        "--flash-attention",
        "--explain",
    ];
    args.extend_from_slice(extra);
    let out = Command::cargo_bin("astrolabe")
        .unwrap()
        .args(&args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("attention (fused)"))
        .expect("explain shows the fused attention");
    (micros(line, "fwd ="), micros(line, "bwd ="))
}

#[test]
fn fused_attention_times_by_hand_on_h100() {
    let (fwd, bwd) = fused(&[]);
    assert!((fwd / 59.88 - 1.0).abs() < 2e-3, "forward {fwd} µs");
    assert!((bwd / 147.94 - 1.0).abs() < 2e-3, "backward {bwd} µs");
}

#[test]
fn packed_samples_shorten_the_attention_span() {
    let (fwd, bwd) = fused(&["--packed-sample-len", "512"]);
    assert!((fwd / 15.18 - 1.0).abs() < 3e-3, "forward {fwd} µs");
    assert!((bwd / 32.79 - 1.0).abs() < 3e-3, "backward {bwd} µs");
}

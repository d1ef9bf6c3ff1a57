//! The fused-attention kernel model (`transformer/layer.rs`, `fused_attention`) checked by
//! hand on H100: Llama 2 7B (32 heads of 128, causal), sequence 4096, TP 8 (4 heads per
//! rank), BF16.
//!
//! F = 2·b·(a/t)·s_q·s·(d_qk + d_v)·½ = 2·4·4096·4096·256·½ = 2^34 FLOP.
//! Saturation n/(n + n0) = 4096/(4096 + 768) = 0.842105.
//! Forward = F / (989 TFLOP/s · 0.71 · 0.842105) + 4 µs = 29.05 µs + 4 µs = 33.05 µs;
//! backward = 2.5·F / (989 TFLOP/s · 0.60 · 0.842105) + 4 µs = 85.95 µs + 4 µs = 89.95 µs
//! (cuDNN's SDPA on Hopper as NVIDIA's cudnn-frontend benchmark measured it, cuDNN 9.19:
//! the preset's flash_fwd 0.71, flash_bwd 0.60, flash_n0 768).
//!
//! Packed into samples of 512 tokens, each query sees 512 keys: F = 2·4·4096·512·256·½ =
//! 2^31 FLOP, saturation 512/(512 + 768) = 0.4, forward = 7.65 µs + 4 µs = 11.65 µs,
//! backward = 22.62 µs + 4 µs = 26.62 µs.
//!
//! With `--attention-kernel fa2` (FlashAttention-2, PyTorch SDPA's default: the preset's
//! fa2_fwd 0.35, fa2_bwd 0.34, fa2_n0 330, from the FlashAttention-3 paper's FlashAttention-2
//! curves on H100): saturation 4096/(4096 + 330) = 0.925441, forward = 2^34 / (989 TFLOP/s ·
//! 0.35 · 0.925441) + 4 µs = 53.63 µs + 4 µs = 57.63 µs; backward = 2.5·2^34 / (989 TFLOP/s ·
//! 0.34 · 0.925441) + 4 µs = 138.02 µs + 4 µs = 142.02 µs.

mod common;
use common::{h100_tp8_explain_line, micros, usage_error};

/// (forward, backward) µs of the fused attention in `--explain` for Llama 2 7B on 8 H100
/// (TP 8), sequence 4096, plus `extra` flags.
fn fused(extra: &[&str]) -> (f64, f64) {
    let line = h100_tp8_explain_line("llama2-7b", extra, "attention (fused)");
    (micros(&line, "fwd ="), micros(&line, "bwd ="))
}

#[test]
fn fused_attention_times_by_hand_on_h100() {
    let (fwd, bwd) = fused(&[]);
    assert!((fwd / 33.05 - 1.0).abs() < 2e-3, "forward {fwd} µs");
    assert!((bwd / 89.95 - 1.0).abs() < 2e-3, "backward {bwd} µs");
}

#[test]
fn packed_samples_shorten_the_attention_span() {
    let (fwd, bwd) = fused(&["--packed-sample-len", "512"]);
    assert!((fwd / 11.65 - 1.0).abs() < 3e-3, "forward {fwd} µs");
    assert!((bwd / 26.62 - 1.0).abs() < 3e-3, "backward {bwd} µs");
}

#[test]
fn flash_attention_2_runs_at_its_own_rates() {
    let (fwd, bwd) = fused(&["--attention-kernel", "fa2"]);
    assert!((fwd / 57.63 - 1.0).abs() < 2e-3, "forward {fwd} µs");
    assert!((bwd / 142.02 - 1.0).abs() < 2e-3, "backward {bwd} µs");
}

/// A device without published FlashAttention-2 rates refuses the kernel instead of
/// guessing, and the kernel needs fused attention on.
#[test]
fn flash_attention_2_needs_rates_and_fused_attention() {
    let base = [
        "estimate",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "8",
    ];
    let b200: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--system", "dgx-b200", "--attention-kernel", "fa2"])
        .collect();
    usage_error(&b200, "device 'b200' has no FlashAttention-2 rates");
    let sweep = [
        "sweep",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "8",
        "--system",
        "dgx-b200",
        "--attention-kernel",
        "fa2",
    ];
    usage_error(&sweep, "device 'b200' has no FlashAttention-2 rates");
    let unfused: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--system", "dgx-h100", "--attention-kernel", "fa2"])
        .chain(["--flash-attention", "false"])
        .collect();
    usage_error(&unfused, "fa2 is a fused-attention kernel");
    usage_error(
        &[
            &base[..],
            &["--system", "dgx-h100", "--attention-kernel", "fa3"],
        ]
        .concat(),
        "--attention-kernel",
    );
}

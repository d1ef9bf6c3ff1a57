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

mod common;
use common::{h100_tp8_explain_line, micros};

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

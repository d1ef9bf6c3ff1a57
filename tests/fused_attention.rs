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
    assert!((fwd / 59.88 - 1.0).abs() < 2e-3, "forward {fwd} µs");
    assert!((bwd / 147.94 - 1.0).abs() < 2e-3, "backward {bwd} µs");
}

#[test]
fn packed_samples_shorten_the_attention_span() {
    let (fwd, bwd) = fused(&["--packed-sample-len", "512"]);
    assert!((fwd / 15.18 - 1.0).abs() < 3e-3, "forward {fwd} µs");
    assert!((bwd / 32.79 - 1.0).abs() < 3e-3, "backward {bwd} µs");
}

//! The rotary position embedding's kernels (`transformer/layer.rs`) checked by hand on H100:
//! Llama 2 7B (32 query and 32 key/value heads of 128), sequence 4096, micro-batch 1, TP 8
//! (4 query and 4 key heads per rank), BF16, against the same model without rotary
//! embedding (tests/data/llama2-7b-no-rope.toml).
//!
//! Megatron-core applies RoPE with one fused kernel on the queries and one on the keys
//! (`apply_rotary_pos_emb` → apex `fused_apply_rotary_pos_emb`), each reading and writing
//! its tensor; backward the same on the gradients. Elements per rank: 4096 tokens ×
//! (4 + 4) heads × 128 = 4 194 304; bytes 4 per element = 16 777 216 B; at 3.35 TB/s × 0.7
//! (the preset's memory efficiency) 7.154 µs, plus 2 kernels × 4 µs: 15.154 µs per pass.

use crate::common;
use common::{h100_tp8_explain_line, micros};

/// (forward, backward) µs of the memory-bound line of `--explain` for `model`.
fn memory_bound(model: &str) -> (f64, f64) {
    let line = h100_tp8_explain_line(model, &[], "memory-bound: LayerNorm");
    (micros(&line, "fwd "), micros(&line, "bwd "))
}

#[test]
fn rotary_kernels_by_hand_on_h100() {
    let (f, b) = memory_bound("llama2-7b");
    let (f0, b0) = memory_bound("tests/data/llama2-7b-no-rope.toml");
    let hand: f64 = 4.0 * 4096.0 * 8.0 * 128.0 / (3.35e12 * 0.7) * 1e6 + 2.0 * 4.0;
    assert!((hand - 15.154).abs() < 1e-3, "{hand}");
    // The explain line rounds to 4 significant digits (67.46 µs): 0.01 µs each side.
    assert!((f - f0 - hand).abs() < 0.02, "forward {f} − {f0}");
    assert!((b - b0 - hand).abs() < 0.2, "backward {b} − {b0}");
}

#[test]
fn alibi_and_learned_positions_have_no_rotary_kernels() {
    for m in ["bloom-176b", "gpt3-175b"] {
        let out = common::bin()
            .args([
                "estimate",
                "--model",
                m,
                "--system",
                "dgx-h100",
                "--gpus",
                "64",
                "--tp",
                "8",
                "--pp",
                "8",
                "--micro-batch",
                "1",
                "--global-batch",
                "64",
                "--explain",
            ])
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            text.contains("rotary embedding on 0:"),
            "{m}: {}",
            text.lines()
                .find(|l| l.contains("memory-bound: LayerNorm"))
                .unwrap_or("")
        );
    }
}

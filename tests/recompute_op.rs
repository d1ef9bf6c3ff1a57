//! torchtitan's per-op selective checkpointing (`--recompute op`) by hand: Llama 3 8B
//! (32 layers, h 4096, 32 heads and 8 KV heads of 128, f 14336, SwiGLU) at 8192 tokens.
//!
//! The policy keeps the outputs of `wq`, `wv`, `w1`, `w2` and the attention and recomputes
//! every second matmul of a block, `wk`, `wo` and `w3`, with every memory-bound operation
//! (torchtitan/distributed/activation_checkpoint.py).

use crate::common;
use common::{computed, json, line_after, micros, usage_error};

/// FLOPs recomputed per token: wk 2·4096·1024 + wo 2·4096·4096 + w3 2·4096·14336 =
/// 8 388 608 + 33 554 432 + 117 440 512 = 159 383 552 per layer, 5 100 273 664 over 32
/// layers: the hardware FLOPs exceed the model FLOPs by that much per token.
#[test]
fn per_op_recompute_flops_by_hand() {
    let j = json(&[
        "estimate",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "8192",
        "--recompute",
        "op",
        "--fsdp",
    ]);
    let model = j["model_flops_per_iteration"].as_f64().unwrap();
    let hardware = model * j["hfu"].as_f64().unwrap() / j["mfu"].as_f64().unwrap();
    let per_token = (hardware - model) / (16.0 * 8192.0);
    assert!(
        (per_token / 5_100_273_664.0 - 1.0).abs() < 1e-9,
        "{per_token} recomputed FLOPs per token"
    );
}

/// The recompute pass of one layer is `wk`'s share of the QKV GEMM, `kv·d/(a·d + 2·kv·d)`
/// = 1024/6144 = 1/6, the whole output projection, half the gated MLP input (`w3` of
/// `w1, w3`) and the forward's memory-bound time; on one GPU (no TP) per micro-batch and
/// layer, read from the GEMM and memory lines of `--explain`; two micro-batches.
#[test]
fn per_op_recompute_time_composes_the_forward() {
    let args = [
        "estimate",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "1",
        "--micro-batch",
        "1",
        "--global-batch",
        "2",
        "--seq-len",
        "8192",
        "--recompute",
        "op",
    ];
    // 8B parameters' Adam states do not fit one GPU (exit 3); the times are computed.
    let text = computed(&[&args[..], &["--explain"]].concat());
    let line = |needle: &str| line_after(&text, needle, needle);
    let fwd = |needle: &str| micros(&line(needle), "→ fwd");
    let (qkv, proj, mlp_in) = (
        fwd("GEMM QKV:"),
        fwd("GEMM attention projection:"),
        fwd("GEMM MLP in:"),
    );
    let mem = micros(&line("memory-bound: LayerNorm"), ": fwd");
    let per_layer = qkv / 6.0 + proj + mlp_in / 2.0 + mem;
    let j = common::computed_json(&args);
    let rec = j["time_breakdown"]["recompute_s"].as_f64().unwrap() * 1e6;
    let expect = 2.0 * 32.0 * per_layer;
    assert!(
        (rec / expect - 1.0).abs() < 2e-3,
        "recompute {rec} µs, by hand {expect} µs"
    );
}

#[test]
fn per_op_recompute_is_modelled_for_dense_layers() {
    usage_error(
        &[
            "estimate",
            "--model",
            "qwen3-30b-a3b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--ep",
            "8",
            "--global-batch",
            "8",
            "--recompute",
            "op",
        ],
        "op (torchtitan's per-op checkpointing) is modelled for dense",
    );
    // A hybrid Mamba–Transformer model without experts is refused as well.
    usage_error(
        &[
            "estimate",
            "--model",
            "nemotron-h-8b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--global-batch",
            "8",
            "--recompute",
            "op",
        ],
        "op (torchtitan's per-op checkpointing) is modelled for dense",
    );
    usage_error(
        &[
            "estimate",
            "--model",
            "llama3-8b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--global-batch",
            "8",
            "--recompute",
            "op",
            "--recompute-modules",
            "layernorm",
        ],
        "per-op recomputation (--recompute op) already recomputes",
    );
}

/// The recompute pass runs half the forward's tensor-parallel traffic (the all-gathers; the
/// reduce-scatters' outputs are kept). Llama 3 8B on 8 H100 with TP 2 and SP, one
/// micro-batch of 8192 tokens: a layer's forward runs two all-gathers and two
/// reduce-scatters of the 16-bit `s·h` tensor, `n` = 8192·4096·2 = 67,108,864 B, each on
/// two GPUs over NVLink (370 GB/s, 3.4 µs): `α + (t−1)/t · n / B` = 3.4 µs + 0.5 ·
/// 67,108,864 / 370e9 s = 94.087 µs. Per-op recomputation adds half of the forward's four,
/// 188.17 µs per layer, 6.0216 ms over 32 layers, and half the forward's SP bytes (counted
/// as `n` per collective): ½ · 32 · 4 · 67,108,864 = 4,294,967,296 B. With TP overlap the
/// same time splits between exposed and hidden as the forward's does.
#[test]
fn per_op_recompute_runs_half_the_forward_tp_traffic() {
    let sp = |recompute: &str, overlap: &str| {
        let j = json(&[
            "estimate",
            "--model",
            "llama3-8b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--tp",
            "2",
            "--micro-batch",
            "1",
            "--global-batch",
            "4",
            "--seq-len",
            "8192",
            "--recompute",
            recompute,
            "--tp-overlap",
            overlap,
        ]);
        let c = &j["time_breakdown"]["communication"]["sp"];
        let f = |k: &str| c[k].as_f64().unwrap();
        (f("exposed_s"), f("hidden_s"), f("bytes_per_device"))
    };
    let per_collective = 3.4e-6 + 0.5 * 67_108_864.0 / 370e9;
    let added = 32.0 * 4.0 * per_collective / 2.0;
    approx::assert_relative_eq!(added, 6.0216e-3, max_relative = 1e-4);

    let (e0, h0, b0) = sp("none", "false");
    let (e1, h1, b1) = sp("op", "false");
    approx::assert_relative_eq!(e1 - e0, added, max_relative = 1e-3);
    assert_eq!(h1, h0, "no overlap: nothing more hidden");
    approx::assert_relative_eq!(b1 - b0, 4_294_967_296.0, max_relative = 1e-9);

    let (e0, h0, _) = sp("none", "true");
    let (e1, h1, _) = sp("op", "true");
    approx::assert_relative_eq!((e1 - e0) + (h1 - h0), added, max_relative = 1e-3);
    assert!(
        h1 - h0 > 0.25 * added,
        "the recompute's TP hides as the forward's does"
    );
}

/// Selective recomputation without fused attention recomputes the attention core (its
/// `QKᵀ` and `attention·V` GEMMs, softmax and dropout) and nothing else (Korthikanti et al.
/// 2022 §4.2): Llama 2 7B on one H100, one micro-batch of 4096, 32 layers, recompute =
/// 32 × the attention core's forward (the explain's line); with fused attention, nothing.
#[test]
fn selective_recompute_repeats_the_attention_core() {
    let args = |flash: &'static str| {
        [
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
            "--recompute",
            "selective",
            "--flash-attention",
            flash,
        ]
    };
    let a = args("false");
    // Seven billion parameters' Adam states do not fit one H100 (exit 3).
    let text = computed(&[&a[..], &["--explain"]].concat());
    let core = micros(&line_after(&text, "per layer", "attention core"), "→ fwd");
    let j = common::computed_json(&a);
    let rec = j["time_breakdown"]["recompute_s"].as_f64().unwrap() * 1e6;
    assert!(core > 1000.0, "attention core forward {core} µs");
    approx::assert_relative_eq!(rec, 32.0 * core, max_relative = 1e-3);
    let j = common::computed_json(&args("true"));
    assert_eq!(j["time_breakdown"]["recompute_s"].as_f64().unwrap(), 0.0);
}

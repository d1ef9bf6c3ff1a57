//! torchtitan's per-op selective checkpointing (`--recompute op`) by hand: Llama 3 8B
//! (32 layers, h 4096, 32 heads and 8 KV heads of 128, f 14336, SwiGLU) at 8192 tokens.
//!
//! The policy keeps the outputs of `wq`, `wv`, `w1`, `w2` and the attention and recomputes
//! every second matmul of a block, `wk`, `wo` and `w3`, with every memory-bound operation
//! (torchtitan/distributed/activation_checkpoint.py).

mod common;
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
    let j: serde_json::Value =
        serde_json::from_str(&computed(&[&args[..], &["--format", "json"]].concat())).unwrap();
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

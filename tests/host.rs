//! Host launch time (`estimate::transformer` host module, `--cuda-graphs`): each eager
//! operation costs the device's `host_op` (25 µs on the presets: fitted on Megatron-Bridge's
//! MoE rows, docs/modern-training.md), a Transformer Engine GEMM call 2.7 of them
//! (NVIDIA/TransformerEngine issue #2053); a layer whose host time exceeds its GPU time
//! leaves the GPU idle for the difference, per pass.

mod common;

use approx::assert_relative_eq;
use serde_json::Value;

/// Qwen3-30B-A3B (48 layers, 128 experts, top 8, no shared expert) on 8 B200, EP 8
/// (16 local experts), micro-batch 1, 8 micro-batches, MXFP8.
fn args<'a>(graphs: &'a str, mb: &'a str) -> Vec<&'a str> {
    vec![
        "estimate",
        "--model",
        "qwen3-30b-a3b",
        "--system",
        "dgx-b200",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--etp",
        "1",
        "--seq-len",
        "4096",
        "--micro-batch",
        mb,
        "--global-batch",
        "64",
        "--precision",
        "mxfp8",
        "--flash-attention",
        "--cuda-graphs",
        graphs,
    ]
}

/// The explain's host line and layer-total line for `graphs`.
fn lines(graphs: &str, mb: &str) -> (String, String) {
    let mut a = args(graphs, mb);
    a.push("--explain");
    let text = common::text(&a);
    let find = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("explain shows '{needle}'"))
            .to_string()
    };
    (find("  host (CUDA graphs"), find("  layer total:"))
}

/// The number after `key` up to the next space: "forward 211.3 ops" → 211.3.
fn after(line: &str, key: &str) -> f64 {
    let part = line.split(key).nth(1).expect("clause present");
    part.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches(',')
        .parse()
        .expect("a number")
}

fn host_idle(v: &Value) -> f64 {
    v["time_breakdown"]["host_idle_s"].as_f64().unwrap()
}

/// Operations per pass with nothing captured, by hand (TE call = 2.7 operations; MXFP8
/// quantizes each GEMM call's input with one more call):
/// - attention: 2 linears, forward 2·(1 + 1)·2.7 = 10.8, backward 2·(2 + 1)·2.7 = 16.2;
///   fused attention 2.7 each pass; rotary q, k and bias-dropout-add 3 each pass:
///   forward 16.5, backward 21.9;
/// - router: forward 1 + 11 = 12, backward 2 + 11 = 13; preprocess: forward 5;
/// - experts: 16 local experts × 2 linears = 32, forward 32·2·2.7 = 172.8, backward
///   32·3·2.7 = 259.2, plus dispatch, permute, unpermute, combine and activation 5 each
///   pass: forward 177.8, backward 264.2.
///
/// Forward 16.5 + 12 + 5 + 177.8 = 211.3; backward 21.9 + 13 + 0 + 264.2 = 299.1.
/// At 25 µs: forward 5.2825 ms, backward 7.4775 ms.
#[test]
fn eager_operations_by_hand() {
    let (host, _) = lines("none", "1");
    assert_relative_eq!(after(&host, "forward "), 211.3, max_relative = 1e-9);
    assert_relative_eq!(after(&host, "backward "), 299.1, max_relative = 1e-9);
    assert_relative_eq!(
        common::micros(&host, "forward 211.3 ops × 25 us"),
        5282.5,
        max_relative = 5e-4
    );
    assert_relative_eq!(
        common::micros(&host, "backward 299.1 ops × 25 us"),
        7477.5,
        max_relative = 5e-4
    );
}

/// Megatron-Bridge's partial capture (`attn`, `moe_router`, `moe_preprocess`) leaves one
/// graph launch per captured scope: forward 1 + 1 + 1 + 177.8 = 180.8, backward
/// 1 + 1 + 1 + 264.2 = 267.2. A full-iteration graph leaves nothing.
#[test]
fn captured_scopes_cost_one_launch() {
    let (host, _) = lines("attn,moe_router,moe_preprocess", "1");
    assert_relative_eq!(after(&host, "forward "), 180.8, max_relative = 1e-9);
    assert_relative_eq!(after(&host, "backward "), 267.2, max_relative = 1e-9);
    let (full, _) = lines("full", "1");
    assert_eq!(after(&full, "forward "), 0.0);
    assert_eq!(host_idle(&common::json(&args("full", "1"))), 0.0);
}

/// The idle time is `max(0, T_host − T_GPU)` per pass, for each of the 48 layers and 8
/// micro-batches, and it is what the iteration gains from a full-iteration graph: the
/// host times by hand (above) against the GPU times the explain prints for the layer.
#[test]
fn idle_is_host_minus_gpu_per_pass() {
    let (_, total) = lines("none", "1");
    let (gf, gb) = (
        common::micros(&total, "forward") * 1e-6,
        common::micros(&total, "backward") * 1e-6,
    );
    let (cf, cb) = (211.3 * 25e-6, 299.1 * 25e-6);
    assert!(
        cb > gb,
        "micro-batch 1 is host-bound backward: {cb} vs {gb}"
    );
    let per_layer = (cf - gf).max(0.0) + (cb - gb).max(0.0);
    let eager = common::json(&args("none", "1"));
    assert_relative_eq!(
        host_idle(&eager),
        48.0 * 8.0 * per_layer,
        max_relative = 1e-3
    );
    let full = common::json(&args("full", "1"));
    let t = |v: &Value| v["iteration_time_s"].as_f64().unwrap();
    assert_relative_eq!(t(&eager) - t(&full), host_idle(&eager), max_relative = 1e-6);
}

/// Eight sequences per micro-batch give the GPU 8× the work for the same host operations:
/// no layer waits for the host.
#[test]
fn large_micro_batches_hide_the_host() {
    assert_eq!(host_idle(&common::json(&args("none", "8"))), 0.0);
}

/// `--cuda-graphs` takes none, full or Megatron-core's scope names, and names the flag
/// and the scopes otherwise.
#[test]
fn cuda_graphs_rejects_unknown_scopes() {
    common::usage_error(&args("attn,experts", "1"), "--cuda-graphs");
    common::usage_error(&args("attn,experts", "1"), "moe_preprocess");
}

//! Host launch time (`estimate::transformer` host module, `--cuda-graphs`): each eager
//! operation costs the device's `host_op` (20 µs on the presets: fitted on Megatron-Bridge's
//! MoE rows, docs/modern-training.md), a Transformer Engine GEMM call 2.7 of them
//! (NVIDIA/TransformerEngine issue #2053); a layer whose host time exceeds its GPU time
//! leaves the GPU idle for the difference, per pass; the forward of a dropless MoE layer
//! also leaves it idle while its experts' launches outlast the dispatch and the experts'
//! own GPU work (the token-count copy empties the GPU's queue before them).

use crate::common;

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
///   fused attention 2.7 each pass; rotary q, k and bias-dropout-add 3 each pass; Qwen3's
///   QK-norm on q and k 2 each pass: forward 18.5, backward 23.9;
/// - router: forward 1 + 11 = 12, backward 2 + 11 = 13; preprocess: forward 5;
/// - experts: 16 local experts × 2 linears = 32, forward 32·2·2.7 = 172.8, backward
///   32·3·2.7 = 259.2, plus dispatch, permute, unpermute, combine and activation 5 each
///   pass: forward 177.8, backward 264.2.
///
/// Forward 18.5 + 12 + 5 + 177.8 = 213.3; backward 23.9 + 13 + 0 + 264.2 = 301.1.
/// At 20 µs: forward 4.266 ms, backward 6.022 ms.
#[test]
fn eager_operations_by_hand() {
    let (host, _) = lines("none", "1");
    assert_relative_eq!(after(&host, "forward "), 213.3, max_relative = 1e-9);
    assert_relative_eq!(after(&host, "backward "), 301.1, max_relative = 1e-9);
    assert_relative_eq!(
        common::micros(&host, "forward 213.3 ops × 20 us"),
        4266.0,
        max_relative = 5e-4
    );
    assert_relative_eq!(
        common::micros(&host, "backward 301.1 ops × 20 us"),
        6022.0,
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
    // Nor does it launch the experts: no MoE forward segment (the eager run has one).
    let explain = |g: &str| {
        let mut a = args(g, "1");
        a.push("--explain");
        common::text(&a)
    };
    assert!(!explain("full").contains("host, MoE forward"));
    assert!(explain("none").contains("host, MoE forward"));
}

/// The idle time per layer is, forward, `max(0, T_exp − (D + E), T_host − T_GPU)` and,
/// backward, `max(0, T_host − T_GPU)`, for each of the 48 layers and 8 micro-batches, and it
/// is what the iteration gains from a full-iteration graph: the host times by hand (above;
/// `T_exp` the experts' operations), the GPU times from the explain (the layer total, the
/// all-to-all per pass, whose half is the dispatch `D`, and the experts' GEMMs of `E`).
#[test]
fn idle_is_host_minus_gpu_per_pass() {
    idle_matches(&args("none", "1"), (213.3, 301.1), 177.8, 8.0);
    // With TP 2 (sequence parallel, overlapped: exposed SP time and interference in the
    // GPU time) and CP 2 on the same 8 GPUs, EP 8 folded over TP × CP × DP: the same
    // 16 local experts and operations, 16/2 = 8 micro-batches.
    idle_matches(
        &tp_cp("--gpus 8 --tp 2 --ep 8 --global-batch 16"),
        (213.3, 301.1),
        177.8,
        8.0,
    );
    // CP 2 across the two nodes of 16 B200 (TP 8 fills a node): the ring's exchange is
    // partly exposed and joins the GPU time. EP 16: 8 local experts, experts
    // 16·2·2.7 + 5 = 91.4 forward and 16·3·2.7 + 5 = 134.6 backward: 126.9 and 171.5.
    idle_matches(
        &tp_cp("--gpus 16 --tp 8 --ep 16 --global-batch 8"),
        (126.9, 171.5),
        91.4,
        8.0,
    );
}

/// Qwen3-30B-A3B on B200 with CP 2, SP and TP overlap, sequence 8192, micro-batch 1,
/// MXFP8, nothing captured, plus `plan` (GPUs, TP, EP, batch).
fn tp_cp(plan: &'static str) -> Vec<&'static str> {
    let base = "estimate --model qwen3-30b-a3b --system dgx-b200 --cp 2 --etp 1 --seq-len 8192 \
                --micro-batch 1 --precision mxfp8 --flash-attention --tp-overlap \
                --sequence-parallel";
    let mut a: Vec<&str> = base
        .split_whitespace()
        .chain(plan.split_whitespace())
        .collect();
    a.extend(["--cuda-graphs", "none"]);
    a
}

/// The dispatch and the experts' GPU time `D + E` of the explain of `a`: half the EP
/// all-to-all per pass, the MLP GEMMs' forwards, and the memory-bound time after the
/// dispatch that the host line prints.
fn dispatch_and_experts(text: &str) -> f64 {
    let find = |needle: &str| {
        text.lines()
            .find(|l| l.contains(needle))
            .unwrap_or_else(|| panic!("explain shows '{needle}'"))
            .to_string()
    };
    // "EP all-to-all 324.2 us per pass": the value and unit before "per pass".
    let a2a_line = find("EP all-to-all");
    let a2a_clause = a2a_line.split("EP all-to-all").nth(1).unwrap();
    let a2a = common::micros(
        &format!(
            "x = {}",
            a2a_clause.split(" per pass").next().unwrap().trim()
        ),
        "x",
    );
    let gemm_in = common::micros(&find("GEMM MLP in:"), "→ fwd");
    let gemm_out = common::micros(&find("GEMM MLP out:"), "→ fwd");
    let mem = common::micros(
        &find("  host, MoE forward"),
        "memory-bound after the dispatch",
    );
    (a2a / 2.0 + gemm_in + gemm_out + mem) * 1e-6
}

/// `host_idle_s` = 48 layers × `m` micro-batches × per-layer idle (forward
/// `max(0, T_exp − (D + E), T_host − T_GPU)`, backward `max(0, T_host − T_GPU)`), the host
/// times by hand (`ops` operations forward and backward, `experts` of them the experts'
/// forward, at 20 µs), the GPU times from the explain; and the iteration gains exactly that
/// under a full-iteration graph. `a` ends with `--cuda-graphs none`.
fn idle_matches(a: &[&str], ops: (f64, f64), experts: f64, m: f64) {
    let layer = |a: &[&str]| {
        let mut x = a.to_vec();
        x.push("--explain");
        let text = common::text(&x);
        let total = text
            .lines()
            .find(|l| l.contains("  layer total:"))
            .unwrap()
            .to_string();
        let t = (
            common::micros(&total, "forward") * 1e-6,
            common::micros(&total, "backward") * 1e-6,
        );
        (text, t)
    };
    let mut f = a.to_vec();
    *f.last_mut().unwrap() = "full";
    // Under a full-iteration graph the layer total is the GPU's own time.
    let (_, (gf, gb)) = layer(&f);
    let (text, _) = layer(a);
    let (cf, cb) = (ops.0 * 20e-6, ops.1 * 20e-6);
    assert!(cb > gb, "host-bound backward: {cb} vs {gb}");
    let x_exp = experts * 20e-6 - dispatch_and_experts(&text);
    let per_layer = x_exp.max(cf - gf).max(0.0) + (cb - gb).max(0.0);
    let eager = common::json(a);
    assert_relative_eq!(host_idle(&eager), 48.0 * m * per_layer, max_relative = 1e-3);
    let full = common::json(&f);
    let t = |v: &Value| v["iteration_time_s"].as_f64().unwrap();
    assert_relative_eq!(t(&eager) - t(&full), host_idle(&eager), max_relative = 1e-6);
}

/// Eight sequences per micro-batch give the GPU 8× the work for the same host operations:
/// the layer's host time hides (forward 213.3 ops, backward 301.1 at 20 µs: 4.266 and
/// 6.022 ms against the GPU's 7 and 12 ms), but the experts' launches, 177.8 operations =
/// 3.556 ms, outlast the dispatch and the experts' own GPU time that they can hide behind:
/// the forward waits `T_exp − (D + E)` per layer, 48 layers, one micro-batch (64 sequences
/// on 8 GPUs). Captured experts (`--cuda-graphs moe`: one launch) or the EP overlap, which
/// pairs the pass with another micro-batch's, leave nothing idle. On a B300 (288 GB): with
/// EP = DP the experts' optimizer states are not sharded and micro-batch 8 does not fit a
/// B200, as NVIDIA's recipes run micro-batch 8 on B300 and 4 on B200.
#[test]
fn large_micro_batches_hide_all_but_the_experts_launches() {
    let mut a = args("none", "8");
    a[4] = "dgx-b300";
    let mut x = a.clone();
    x.push("--explain");
    let text = common::text(&x);
    let want = 48.0 * (177.8 * 20e-6 - dispatch_and_experts(&text));
    assert!(want > 0.0);
    assert_relative_eq!(host_idle(&common::json(&a)), want, max_relative = 1e-3);
    let mut moe = a.clone();
    *moe.last_mut().unwrap() = "moe";
    assert_eq!(host_idle(&common::json(&moe)), 0.0);
    let mut paired = a.clone();
    paired.extend(["--ep-overlap", "true"]);
    assert_eq!(host_idle(&common::json(&paired)), 0.0);
    paired.push("--explain");
    assert!(!common::text(&paired).contains("host, MoE forward"));
}

/// `--cuda-graphs` takes none, full or Megatron-core's scope names, and names the flag
/// and the scopes otherwise.
#[test]
fn cuda_graphs_rejects_unknown_scopes() {
    common::usage_error(&args("attn,experts", "1"), "--cuda-graphs");
    common::usage_error(&args("attn,experts", "1"), "moe_preprocess");
}

/// The host lines of an `--explain` run, in the order the blocks are timed (a plan that
/// does not fit still prints them, with exit code 3).
fn host_lines(extra: &[&str]) -> Vec<String> {
    let out = common::bin()
        .args(["estimate", "--flash-attention", "--explain"])
        .args(extra)
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 3)), "{extra:?}");
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.contains("  host (CUDA graphs"))
        .map(String::from)
        .collect()
}

/// A dense BF16 layer (Llama 3 8B on one H100): attention 2·2.7 + 2.7 + 3 = 11.1 forward,
/// 2·2·2.7 + 2.7 + 3 = 16.5 backward; MLP 2·2.7 + 2 = 7.4 and 2·2·2.7 + 2 = 12.8:
/// 18.5 and 29.3.
#[test]
fn dense_layer_operations_by_hand() {
    let l = host_lines(&[
        "--model",
        "llama3-8b",
        "--system",
        "dgx-h100",
        "--gpus",
        "1",
        "--global-batch",
        "1",
    ]);
    assert_relative_eq!(after(&l[0], "forward "), 18.5, max_relative = 1e-9);
    assert_relative_eq!(after(&l[0], "backward "), 29.3, max_relative = 1e-9);
}

/// A shared expert runs with the router (Llama 4 Scout, 16 experts top 1 + 1 shared, BF16,
/// EP 8: 2 local experts): attention 11.1 / 16.5; router 12 / 13 plus the shared expert's
/// 2 linears and activation 2·2.7 + 1 = 6.4 / 2·2·2.7 + 1 = 11.8; preprocess 5 / 0;
/// experts 4 linears 4·2.7 + 5 = 15.8 / 4·2·2.7 + 5 = 26.6: forward 50.3, backward 67.9.
#[test]
fn shared_expert_operations_by_hand() {
    let l = host_lines(&[
        "--model",
        "llama4-scout",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--ep",
        "8",
        "--global-batch",
        "8",
    ]);
    assert_relative_eq!(after(&l[0], "forward "), 50.3, max_relative = 1e-9);
    assert_relative_eq!(after(&l[0], "backward "), 67.9, max_relative = 1e-9);
}

/// A hybrid model times each block kind on its own (Nemotron-H 56B, FP8, TP 8): the Mamba
/// mixer's 2 projections, 2·2·2.7 = 10.8 forward and 2·3·2.7 = 16.2 backward, plus its
/// memory-bound kernels (7 and 18, the explain's Mamba line): 17.8 and 34.2; the attention
/// block 16.5 and 21.9; the dense MLP block 2·2·2.7 + 2 = 12.8 and 2·3·2.7 + 2 = 18.2.
#[test]
fn hybrid_blocks_operations_by_hand() {
    let l = host_lines(&[
        "--model",
        "nemotron-h-56b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--tp",
        "8",
        "--precision",
        "fp8",
        "--global-batch",
        "8",
    ]);
    let want = [(17.8, 34.2), (16.5, 21.9), (12.8, 18.2)];
    for (line, (f, b)) in l.iter().zip(want) {
        assert_relative_eq!(after(line, "forward "), f, max_relative = 1e-9);
        assert_relative_eq!(after(line, "backward "), b, max_relative = 1e-9);
    }
    assert_eq!(l.len(), 3, "{l:#?}");
}

/// Each pass leaves the GPU idle for its own host time beyond its own GPU time: BERT-large
/// (24 layers, h 1024) on one H100, one sequence of 64 tokens, no CUDA graphs. A layer's
/// forward launches 2·2.7 (QKV and projection) + 2.7 (fused attention) + 3 (rotary,
/// bias-dropout-add) + 2·2.7 (MLP) + 2 = 18.5 operations, 370 µs at 20 µs, its backward
/// 2·2·2.7 + 2.7 + 3 + 2·2·2.7 + 2 = 29.3, 586 µs. Both passes are shorter on the GPU, so
/// each idles for its own difference: 24 · ((370 µs − T_fwd) + (586 µs − T_bwd)).
#[test]
fn each_pass_idles_for_its_own_host_time() {
    let base = [
        "estimate",
        "--model",
        "bert-large",
        "--system",
        "dgx-h100",
        "--gpus",
        "1",
        "--seq-len",
        "64",
        "--global-batch",
        "1",
        "--cuda-graphs",
        "none",
    ];
    let (fwd_ops, bwd_ops) = (
        2.0 * 2.7 + 2.7 + 3.0 + 2.0 * 2.7 + 2.0,
        2.0 * 2.0 * 2.7 + 2.7 + 3.0 + 2.0 * 2.0 * 2.7 + 2.0,
    );
    assert_relative_eq!(fwd_ops, 18.5, max_relative = 1e-12);
    assert_relative_eq!(bwd_ops, 29.3, max_relative = 1e-12);
    let text = common::text(&[&base[..], &["--explain"]].concat());
    let host = common::line_after(&text, "per layer", "host (CUDA graphs: none)");
    assert!(host.contains("forward 18.5 ops × 20 us = 370 us"), "{host}");
    assert!(
        host.contains("backward 29.3 ops × 20 us = 586 us"),
        "{host}"
    );
    let total = common::line_after(&text, "per layer", "layer total");
    let (gpu_f, gpu_b) = (
        common::micros(&total, "forward"),
        common::micros(&total, "backward"),
    );
    assert!(gpu_f < 370.0 && gpu_b < 586.0, "{total}");
    let idle = common::json(&base)["time_breakdown"]["host_idle_s"]
        .as_f64()
        .unwrap()
        * 1e6;
    let by_hand = 24.0 * ((fwd_ops * 20.0 - gpu_f) + (bwd_ops * 20.0 - gpu_b));
    assert!(
        (idle - by_hand).abs() < 2.0,
        "host idle {idle} µs, by hand {by_hand} µs"
    );
}

/// The GPU's wait for the host is part of each pipeline stage's time, so it sits in the
/// bubble too. Qwen3-30B-A3B on 8 B200 at PP 2 (24 layers per stage, EP 4, 16
/// micro-batches of one sequence, MXFP8): 1F1B's bubble on two stages is the lighter
/// stage's micro-batch, `(T₀ + T₁ − max T)/v`; both stages run 24 layers with the same host
/// idle `h` per micro-batch, and the iteration's host idle is `m·h`. Capturing the whole
/// iteration (`--cuda-graphs full`) removes it and leaves the GPU time alone, so the bubble
/// shrinks by exactly `h`.
#[test]
fn the_host_idle_of_a_stage_is_in_the_pipeline_bubble() {
    let run = |graphs: &str| {
        // The 8-GPU plan of `args` at PP 2, where EP 4 folds over each stage's 4 ranks.
        let mut a = args(graphs, "1");
        let ep = a.iter().position(|&x| x == "--ep").unwrap();
        a[ep + 1] = "4";
        a.extend(["--pp", "2"]);
        let v = common::json(&a);
        let bubble = v["time_breakdown"]["pipeline_bubble_s"].as_f64().unwrap();
        (bubble, host_idle(&v))
    };
    let (eager, idle) = run("none");
    let (captured, none) = run("full");
    assert_eq!(none, 0.0);
    assert!(idle > 1.0, "host-bound at micro-batch 1: {idle} s");
    assert_relative_eq!(eager - captured, idle / 16.0, max_relative = 1e-9);
}

/// Full recomputation beside Transformer Engine's scoped CUDA graphs is refused, as
/// Megatron-core refuses it ("full recompute is only supported with full iteration CUDA
/// graph"), with no graphs or the full-iteration graph it runs; a sweep given the scoped
/// graphs ranks no plan with full recomputation.
#[test]
fn full_recomputation_runs_without_scoped_graphs() {
    let mut a = args("attn,moe_router,moe_preprocess", "1");
    a.extend(["--recompute", "full"]);
    common::usage_error(&a, "full iteration CUDA graph");
    common::usage_error(&a, "recompute");
    for g in ["none", "full"] {
        let mut a = args(g, "1");
        a.extend(["--recompute", "full"]);
        common::bin().args(&a).assert().code(0);
    }
    let sweep = common::json(
        &"sweep --model qwen3-30b-a3b --system dgx-b200 --gpus 8 --seq-len 4096 \
          --global-batch 64 --cuda-graphs attn,moe_router,moe_preprocess \
          --recompute none,full --top 50"
            .split_whitespace()
            .collect::<Vec<_>>(),
    );
    let rows = sweep["top"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r["plan"]["recompute"] == "none"),
        "{rows:?}"
    );
}

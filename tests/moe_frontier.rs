//! Issue 19's MoE terms checked by hand: the EP all-to-all (dispatch + combine) of a
//! folded plan, the tokens each rank dispatches with sequence parallelism, the EP overlap
//! window, and the rack-scale plans the issue names (a 256-GPU GB200 job, an 8-GPU GB300
//! MoE job with EP 8, EP larger than DP under folding).

use crate::common;
use common::{json, text};

/// A command line as its words (the tests write each command as one line).
fn cli(line: &'static str) -> Vec<&'static str> {
    line.split_whitespace().collect()
}

/// The JSON of a computed estimate, whether or not the plan fits (exit 0 or 3).
fn estimate_json(args: &[&str]) -> serde_json::Value {
    let out = common::bin()
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 3)), "{args:?}");
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `--explain` line of `args` that contains `needle`.
fn explain_line(args: &[&str], needle: &str) -> String {
    let out = common::bin().args(args).arg("--explain").output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    line_of(&text, needle).to_string()
}

/// The first line of `text` that contains `needle`.
fn line_of<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("explain shows '{needle}'"))
}

/// Qwen3-30B-A3B (48 layers, hidden 2048, top-8) on one DGX H100 node, sequence 4096,
/// micro-batch 1, one micro-batch (global batch = DP), BF16, no recomputation.
fn qwen(extra: &[&str]) -> serde_json::Value {
    let mut a = vec![
        "estimate",
        "--model",
        "qwen3-30b-a3b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--seq-len",
        "4096",
        "--etp",
        "1",
    ];
    a.extend_from_slice(extra);
    estimate_json(&a)
}

fn ep(v: &serde_json::Value, k: &str) -> f64 {
    v["time_breakdown"]["communication"]["ep"][k]
        .as_f64()
        .unwrap()
}

/// One all-to-all on the NVSwitch dimension (direct: α + (p−1)/p · n/B; dgx-h100: 370 GB/s,
/// 3.4 µs) of `n` bytes over `p` ranks, in seconds.
fn a2a(n: f64, p: f64) -> f64 {
    3.4e-6 + (p - 1.0) / p * n / 370e9
}

/// TP 1, EP 8: each rank dispatches its 4096 tokens × top-8 × 2048 × 2 B = 128 MiB, and
/// combines as much, forward and backward: 4 all-to-alls of 320.8 µs per layer, 48
/// layers → 61.59 ms, 24 GiB per device.
#[test]
fn ep_all_to_all_by_hand() {
    let v = qwen(&cli("--tp 1 --ep 8 --global-batch 8"));
    let n = 4096.0 * 8.0 * 2048.0 * 2.0;
    let want = 48.0 * 4.0 * a2a(n, 8.0);
    approx::assert_relative_eq!(want, 0.061_595, max_relative = 1e-4);
    approx::assert_relative_eq!(ep(&v, "exposed_s"), want, max_relative = 1e-3);
    approx::assert_relative_eq!(
        ep(&v, "bytes_per_device"),
        48.0 * 4.0 * n,
        max_relative = 1e-9
    );
}

/// Load imbalance ι = 1.25 (`--moe-imbalance`): the rank holding the busiest experts
/// receives 1.25 × the mean, and each all-to-all ends when it does. The bytes grow by ι,
/// the latency α does not: 48 × 4 × (3.4 µs + 7/8 · 1.25 · 128 MiB / 370 GB/s) = 76.83 ms
/// (ι·(α + …) would give 76.99 ms), 30 GiB per device.
#[test]
fn ep_all_to_all_grows_with_the_imbalance() {
    let v = qwen(&cli("--tp 1 --ep 8 --global-batch 8 --moe-imbalance 1.25"));
    let n = 4096.0 * 8.0 * 2048.0 * 2.0;
    let want = 48.0 * 4.0 * (3.4e-6 + 7.0 / 8.0 * 1.25 * n / 370e9);
    approx::assert_relative_eq!(want, 0.076_83, max_relative = 1e-3);
    approx::assert_relative_eq!(ep(&v, "exposed_s"), want, max_relative = 1e-4);
    approx::assert_relative_eq!(
        ep(&v, "bytes_per_device"),
        48.0 * 4.0 * 1.25 * n,
        max_relative = 1e-9
    );
}

/// `--explain`'s memory-bound split of the EP phases for `model` on one DGX H100 (TP 1, EP 8,
/// 4096 tokens, EP overlap) against (attention side, all) bytes per token counted by hand,
/// forward and backward.
fn split_by_hand(model: &str, fwd: (f64, f64), bwd: (f64, f64)) {
    let cmd = format!(
        "estimate --model {model} --system dgx-h100 --gpus 8 --tp 1 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --cuda-graphs full --ep-overlap"
    );
    let line = explain_line(&cmd.split_whitespace().collect::<Vec<_>>(), "EP all-to-all");
    let t = 4096.0;
    let want = format!(
        "memory-bound bytes on the attention side {:.4e} of {:.4e} forward, {:.4e} of {:.4e} backward",
        fwd.0 * t,
        fwd.1 * t,
        bwd.0 * t,
        bwd.1 * t
    );
    assert!(line.contains(&want), "{want}\n{line}");
}

/// The EP overlap's phases split a layer's memory-bound bytes between the attention side
/// (before the dispatch: the first norm and residual add, rotary, QK-norm, the
/// permutation) and the expert side (the second norm and residual add, the activation,
/// the un-permutation). Qwen3-30B-A3B, TP 1, T = 4096 tokens, h = 2048, no biases
/// (bias-dropout-add 6 B/elem forward, 2 backward), SwiGLU on 8 × 768 columns per token,
/// rotary and QK-norm on the 32 query and 4 key heads of 128 (4608 per token), permute and
/// un-permute `6·k·T·h + 2·T·h` = 50·T·h per pass. Per token, forward:
/// - attention side: 2048·(4 + 6) + 4·4608 (rotary) + 4·4608 (QK-norm) + 25·2048 = 108,544 B;
/// - all: 2·2048·10 + 6·6144 (SwiGLU) + 4·4608 + 4·4608 + 50·2048 = 217,088 B.
///
/// Backward (norm 6, dropout 2, gradient sum 6 B/elem; SwiGLU 10; QK-norm 6):
/// - attention side: 2048·14 + 4·4608 + 6·4608 + 25·2048 = 125,952 B;
/// - all: 2·2048·14 + 10·6144 + 4·4608 + 6·4608 + 50·2048 = 267,264 B.
#[test]
fn ep_phases_split_the_memory_bound_bytes_by_hand() {
    split_by_hand(
        "qwen3-30b-a3b",
        (108_544.0, 217_088.0),
        (125_952.0, 267_264.0),
    );
}

/// The memory-bound time per pass of `model`'s layer on one DGX H100 (TP 1, EP 8, 4096
/// tokens) against bytes per token and kernels per pass counted by hand, at 3350 GB/s · 0.7
/// and 4 µs per kernel; `want_us` the hand times, rounded.
fn memory_bound_by_hand(model: &str, fwd: (f64, f64), bwd: (f64, f64), want_us: (f64, f64)) {
    let cmd = format!(
        "estimate --model {model} --system dgx-h100 --gpus 8 --tp 1 --ep 8 --etp 1 --seq-len 4096 --global-batch 8"
    );
    let line = explain_line(
        &cmd.split_whitespace().collect::<Vec<_>>(),
        "memory-bound: LayerNorm ×2",
    );
    let bw = 3350e9 * 0.7;
    let t = |(bytes, kernels): (f64, f64)| 4096.0 * bytes / bw + kernels * 4e-6;
    approx::assert_relative_eq!(t(fwd), want_us.0 * 1e-6, max_relative = 1e-4);
    approx::assert_relative_eq!(t(bwd), want_us.1 * 1e-6, max_relative = 1e-4);
    approx::assert_relative_eq!(
        common::micros(&line, ": fwd") * 1e-6,
        t(fwd),
        max_relative = 1e-3
    );
    approx::assert_relative_eq!(
        common::micros(&line, "us, bwd") * 1e-6,
        t(bwd),
        max_relative = 1e-3
    );
}

/// The same layer's memory-bound time per pass: forward 217,088 B per token (above) in 11
/// kernels (two norms, two residual adds and the activation; rotary, QK-norm, permute and
/// un-permute two each), 423.19 µs; backward 267,264 B per token in 16 kernels (ten, then
/// the same six), 530.83 µs.
#[test]
fn moe_layer_memory_bound_time_by_hand() {
    memory_bound_by_hand(
        "qwen3-30b-a3b",
        (217_088.0, 11.0),
        (267_264.0, 16.0),
        (423.19, 530.83),
    );
}

/// Mixtral 8×7B (rotary, no QK-norm, top-2 of width 14336, h = 4096, 32 query and 8 KV
/// heads of 128). Per token, forward: two norms and residual adds 20·4096, SwiGLU
/// 6·2·14336, rotary 4·5120, permute and un-permute 14·4096 = 331,776 B in 9 kernels (5,
/// rotary 2, permute 2): 615.51 µs; backward 28·4096 + 10·28672 + 4·5120 + 14·4096 =
/// 479,232 B in 14 kernels: 893.07 µs.
#[test]
fn moe_layer_memory_bound_time_without_qk_norm() {
    memory_bound_by_hand(
        "mixtral-8x7b",
        (331_776.0, 9.0),
        (479_232.0, 14.0),
        (615.51, 893.07),
    );
}

/// The parts the EP overlap's phases pair (Megatron-core's 1F1B all-to-all overlap), each
/// assembled from the layer's own terms in `--explain` (each with its hand test elsewhere):
/// the attention side forward A_f = QKV + projection + router + fused attention + s_f·mem_f,
/// the experts forward M_f = both expert GEMMs + (1 − s_f)·mem_f, the attention side
/// backward A_b likewise with s_b, and the experts' dgrad + wgrad M_d + M_w = the expert GEMMs'
/// backward + (1 − s_b)·mem_b, with the memory-bound shares of the split above:
/// s_f = 108,544/217,088 = 0.5 and s_b = 125,952/267,264.
#[test]
fn ep_phases_assemble_the_layers_parts() {
    let out = common::computed(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --tp 1 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --cuda-graphs full --ep-overlap --explain",
    ));
    let line = |needle: &str| line_of(&out, needle);
    let us = common::micros;
    let (qkv, proj, router) = (
        line("GEMM QKV:"),
        line("GEMM attention projection:"),
        line("GEMM router:"),
    );
    let (mlp_in, mlp_out) = (line("GEMM MLP in:"), line("GEMM MLP out:"));
    let att = line("attention (fused):");
    let mem = line("memory-bound: LayerNorm ×2");
    let (mem_f, mem_b) = (us(mem, "): fwd"), us(mem, "us, bwd"));
    let (s_f, s_b) = (0.5, 125_952.0 / 267_264.0);
    let ep = line("EP all-to-all");
    let close = |got: f64, want: f64, what: &str| {
        assert!(
            (got / want - 1.0).abs() < 2e-3,
            "{what}: {got} vs {want} µs"
        );
    };
    let a_f = us(qkv, "fwd") + us(proj, "fwd") + us(router, "fwd") + us(att, "fwd =") + s_f * mem_f;
    close(us(ep, "A_f"), a_f, "A_f");
    close(
        us(ep, "M_f"),
        us(mlp_in, "fwd") + us(mlp_out, "fwd") + (1.0 - s_f) * mem_f,
        "M_f",
    );
    let a_b = us(qkv, "bwd") + us(proj, "bwd") + us(router, "bwd") + us(att, "bwd =") + s_b * mem_b;
    close(us(ep, "A_b"), a_b, "A_b");
    close(
        us(ep, "M_d") + us(ep, "M_w"),
        us(mlp_in, "bwd") + us(mlp_out, "bwd") + (1.0 - s_b) * mem_b,
        "M_d + M_w",
    );
}

/// The same split with biases: gpt-oss-20b (h = 2880, 64 query and 8 KV heads of 64 with
/// rotary, no QK-norm, 32 experts of 2880 top-4 with SwiGLU, biases: bias-dropout-add 7 B/elem
/// forward and 5 backward) on one DGX H100, TP 1, EP 8, T = 4096 tokens. Per token:
/// - forward, attention side 2880·(4 + 7) + 4·4608 + 13·2880 = 87,552 B of
///   2·2880·11 + 6·11520 + 4·4608 + 26·2880 = 225,792;
/// - backward, the attention side also takes half the bias gradients (column sums of QKV's
///   5120 outputs and of the two row-parallel layers' 2880, 2 B each: 21,760 B):
///   2880·17 + 4·4608 + 13·2880 + 10,880 = 115,712 B of
///   2·2880·17 + 10·11520 + 21,760 + 4·4608 + 26·2880 = 328,192.
#[test]
fn ep_phases_split_with_biases_by_hand() {
    split_by_hand("gpt-oss-20b", (87_552.0, 225_792.0), (115_712.0, 328_192.0));
}

/// A hybrid's MoE layer with biases: Nemotron 3 Nano (h = 2688, 128 experts of 1856 top-6
/// and two shared ones of 1856, squared ReLU, no attention in its `E` layers) given
/// `bias = true`, on one DGX H100, TP 1, EP 8, T = 4096 tokens, EP overlap. The `E` layer
/// is the transformer layer's second half: one norm and one bias-dropout-add (7 B/elem
/// forward, 5 backward with biases), none of them before the dispatch, so its attention
/// side holds only half the permutation, `(6·k + 2)·T·h / 2 = 19·T·h = 209,190,912 B`,
/// forward and backward; its bias gradients (the row-parallel output's column sums, 2 B per
/// element: 2·T·h = 22,020,096 B) fall on the expert side. All forward:
/// 11·T·h + 4·T·(6 + 2)·1856 + 38·T·h = 121,110,528 + 243,269,632 + 418,381,824 =
/// 782,761,984 B; backward: 17·T·h + 6·T·14,848 + 2·T·h + 38·T·h = 187,170,816 +
/// 364,904,448 + 22,020,096 + 418,381,824 = 992,477,184 B.
#[test]
fn a_hybrid_moe_layer_keeps_its_bias_gradients_on_the_expert_side() {
    let spec = std::fs::read_to_string("models/nemotron-3-nano-30b-a3b.toml")
        .unwrap()
        .replace("bias = false", "bias = true");
    assert!(spec.contains("bias = true"));
    let path = common::tmp("hybrid_bias").join("nano-bias.toml");
    std::fs::write(&path, spec).unwrap();
    let mut args = vec!["estimate", "--model", path.to_str().unwrap()];
    args.extend(
        "--system dgx-h100 --gpus 8 --tp 1 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --cuda-graphs full --ep-overlap --explain"
            .split_whitespace(),
    );
    let out = common::bin().args(args).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let want = format!(
        "memory-bound bytes on the attention side {:.4e} of {:.4e} forward, {:.4e} of {:.4e} backward",
        209_190_912.0, 782_761_984.0, 209_190_912.0, 992_477_184.0
    );
    assert!(text.contains(&want), "{want}\n{text}");
}

/// TP 2 with sequence parallelism: a rank holds 2048 of the 4096 tokens. With ETP 1 it
/// dispatches only those (64 MiB, EP 8 over the node): 31.12 ms. With ETP 2 the two TP
/// ranks gather the micro-batch first and each sends all 4096 tokens over EP 4 (the four
/// ranks after the expert-TP pair): 4 × (3.4 µs + 0.75 · 128 MiB / 370 GB/s) × 48 = 52.88 ms.
#[test]
fn ep_dispatch_is_the_ranks_share_of_tokens() {
    let n = 4096.0 * 8.0 * 2048.0 * 2.0;
    let base = ["--tp", "2", "--sequence-parallel", "--global-batch", "4"];
    let etp1 = qwen(&[&base[..], &["--ep", "8"]].concat());
    approx::assert_relative_eq!(
        ep(&etp1, "exposed_s"),
        48.0 * 4.0 * a2a(n / 2.0, 8.0),
        max_relative = 1e-3
    );
    let mut a = vec![
        "estimate",
        "--model",
        "qwen3-30b-a3b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--seq-len",
        "4096",
        "--etp",
        "2",
        "--ep",
        "4",
    ];
    a.extend_from_slice(&base);
    let etp2 = json(&a);
    let want = 48.0 * 4.0 * a2a(n, 4.0);
    approx::assert_relative_eq!(want, 0.052_88, max_relative = 1e-3);
    approx::assert_relative_eq!(ep(&etp2, "exposed_s"), want, max_relative = 1e-3);
}

/// `--ep-overlap` (Megatron-core's 1F1B all-to-all overlap): each micro-batch's 61.59 ms
/// of all-to-alls hide behind the other micro-batch's forward + backward compute (larger
/// here). Beside compute they take 1 + σ = 1.31 times as long (the device default
/// `ep_comm_slowdown`), still shorter than every part they are paired with, and the
/// compute they overlap is stretched by κ = 0.189 (Lee et al. 2025) for that long.
///
/// Without a pipeline the first forward and the last backward run alone
/// (`combined_1f1b_schedule_for_no_pipelining`): of m = 4 micro-batches one micro-batch's
/// worth, 61.59 ms, stays exposed and 3 × 61.59 = 184.77 ms hide; interference grows by
/// 0.189 × 1.31 × 184.77 ms = 45.75 ms. With one micro-batch nothing pairs and the overlap
/// changes nothing.
///
/// A full-iteration CUDA graph keeps the host out of it (at micro-batch 1 the eager layer
/// is host-bound, and the time the all-to-alls free would wait for the host instead).
#[test]
fn ep_overlap_hides_the_all_to_alls_behind_compute() {
    let run = |gb: &'static str, overlap: bool| {
        let mut a = cli("--tp 1 --ep 8 --cuda-graphs full --global-batch");
        a.push(gb);
        if overlap {
            a.push("--ep-overlap");
        }
        qwen(&a)
    };
    let (off, on) = (run("32", false), run("32", true));
    let per_mb = 0.061_59;
    approx::assert_relative_eq!(ep(&off, "exposed_s"), 4.0 * per_mb, max_relative = 1e-3);
    approx::assert_relative_eq!(ep(&on, "exposed_s"), per_mb, max_relative = 1e-3);
    approx::assert_relative_eq!(ep(&on, "hidden_s"), 3.0 * per_mb, max_relative = 1e-3);
    let slow = |v: &serde_json::Value| v["time_breakdown"]["interference_s"].as_f64().unwrap();
    let hidden = ep(&on, "hidden_s");
    let k = 0.189 * 1.31;
    approx::assert_relative_eq!(slow(&on) - slow(&off), k * hidden, max_relative = 1e-6);
    let t = |v: &serde_json::Value| v["iteration_time_s"].as_f64().unwrap();
    approx::assert_relative_eq!(t(&off) - t(&on), (1.0 - k) * hidden, max_relative = 1e-6);
    let (off1, on1) = (run("8", false), run("8", true));
    approx::assert_relative_eq!(t(&on1), t(&off1), max_relative = 1e-9);
    assert_eq!(ep(&on1, "hidden_s"), 0.0);
}

/// The issue's acceptance plans: Llama 3 70B on 256 GB200 (4 NVLink domains of 64), an
/// 8-GPU GB300 MoE run with EP 8, and EP 64 > DP 32 under folding with its groups shown.
#[test]
fn rack_scale_and_folded_plans_estimate() {
    let gb200 = text(&cli(
        "estimate --model llama3-70b --system gb200-nvl72 --gpus 256 --tp 4 --pp 4 --global-batch 256",
    ));
    assert!(gb200.contains("4 NVLink domains of 64 GPUs"), "{gb200}");
    let gb300 = json(&cli(
        "estimate --model qwen3-30b-a3b --system gb300-nvl72 --gpus 8 --ep 8 --global-batch 512 --precision mxfp8",
    ));
    assert_eq!(gb300["plan"]["ep"], 8);
    let folded = text(&cli(
        "estimate --model qwen3-235b-a22b --system gb200-nvl72 --gpus 64 --tp 2 --ep 64 --etp 1 --global-batch 1024",
    ));
    assert!(folded.contains("ETP 1 × EP 64 × expert-DP 1"), "{folded}");
    assert!(folded.contains("dim 0 (switch, 64 of 64)"), "{folded}");
}

/// DualPipe (DeepSeek-V3 report, Table 2; the DualPipe README): bubble
/// `(p/2 − 1)(F&B + B − 3W)` with `B` the full backward chunk; with `F&B = F + B` and
/// `W = B/2` it is `(p/2 − 1)·(F + B/2)` of the busiest device's chunk; parameters (and
/// their gradients) of two stages (device 0: the first and the last); activations of `p + 1` micro-batches. Llama 3 8B on 4 H100, PP 4,
/// 8 micro-batches: the bubble is `F + B/2`, the fraction `(p − 2)/(3m) = 2/24`, the
/// weights double, the activations grow by 5/4 against 1F1B's `p = 4` micro-batches.
#[test]
fn dualpipe_bubble_and_memory_by_hand() {
    let run = |s: &'static str| {
        let mut a = cli(
            "estimate --model llama3-8b --system dgx-h100 --gpus 4 --pp 4 --global-batch 8 --schedule",
        );
        a.push(s);
        estimate_json(&a)
    };
    let (dual, one) = (run("dualpipe"), run("1f1b"));
    let tb = &dual["time_breakdown"];
    let per_mb = |k: &str| tb[k].as_f64().unwrap() / 8.0;
    let (f, b) = (
        per_mb("forward_s"),
        per_mb("backward_s") + per_mb("recompute_s"),
    );
    approx::assert_relative_eq!(
        tb["pipeline_bubble_s"].as_f64().unwrap(),
        (4.0 / 2.0 - 1.0) * (f + b / 2.0),
        max_relative = 1e-9
    );
    approx::assert_relative_eq!(tb["bubble_fraction"].as_f64().unwrap(), 2.0 / 24.0);
    let notes = dual["notes"].to_string();
    assert!(
        notes.contains("bubble fraction (p-2)/(3m) = 8.33%"),
        "{notes}"
    );
    // Device 0 holds stages 0 and 3: 16 layers of 2·4096² + 2·4096·1024 (attention) +
    // 3·4096·14336 (SwiGLU) + 2·4096 (norms) = 218,112,000 parameters, the word embedding
    // and the output layer (128,256 × 4096 each) and the final norm (4096), 2 B each as
    // the bf16 weight and as the bf16 gradient; 1F1B's first stage holds half of that
    // but the final norm. One optimizer state for both copies of a stage (ZeRO-1, DP 1):
    // 12 B per parameter of half the pair.
    let pair = 16.0 * 218_112_000.0 + 2.0 * 128_256.0 * 4096.0 + 4096.0;
    let mem = |v: &serde_json::Value, k: &str| v["memory_breakdown"][k].as_f64().unwrap();
    approx::assert_relative_eq!(mem(&dual, "weights_bytes"), 2.0 * pair);
    approx::assert_relative_eq!(mem(&dual, "gradients_bytes"), 2.0 * pair);
    approx::assert_relative_eq!(mem(&dual, "optimizer_states_bytes"), 12.0 * pair / 2.0);
    approx::assert_relative_eq!(mem(&one, "weights_bytes"), 2.0 * (pair + 4096.0) / 2.0);
    approx::assert_relative_eq!(
        mem(&dual, "activations_bytes"),
        1.25 * mem(&one, "activations_bytes"),
        max_relative = 1e-9
    );
    common::usage_error(
        &cli(
            "estimate --model llama3-8b --system dgx-h100 --gpus 3 --pp 3 --global-batch 8 --schedule dualpipe",
        ),
        "dualpipe needs an even pp",
    );
}

/// DualPipe with routed experts: Qwen3-30B-A3B (48 layers, 128 experts of width 768 on
/// h = 2048, SwiGLU) on 8 H100, PP 4 (12 layers a stage), DP 2, EP 2: device 0 holds the
/// first and the last stage (24 layers, the embedding and the head outweigh no middle
/// pair), and of each layer its 64 local experts, `64·3·2048·768` routed parameters. The
/// distributed optimizer shards the dense ones over DP 2 and the routed ones over
/// expert-DP 1, and the two copies of each stage share one state: `12·½·((P − R)/2 + R) =
/// 3P + 3R` bytes against `2P` of bf16 weights, so `(optimizer − 1.5·weights)/3 = R =
/// 24·64·3·2048·768`.
#[test]
fn dualpipe_routed_experts_shard_over_expert_dp() {
    let v = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --pp 4 --ep 2 --etp 1 --zero 1 --global-batch 16 --schedule dualpipe --cuda-graphs full",
    ));
    let mem = |k: &str| v["memory_breakdown"][k].as_f64().unwrap();
    let routed = 24.0 * 64.0 * 3.0 * 2048.0 * 768.0;
    approx::assert_relative_eq!(
        (mem("optimizer_states_bytes") - 1.5 * mem("weights_bytes")) / 3.0,
        routed,
        max_relative = 1e-9
    );
}

/// DeepSeek-V3 as DeepSeek trained it (DeepSeek-AI 2024, DeepSeek-V3 technical report:
/// 2,048 H800, PP 16 with DualPipe, EP 64 over 8 nodes, ZeRO-1, FP8, sequence 4,096, batch
/// 15,360 sequences; node-limited routing to 4 nodes and hierarchical IB-then-NVLink
/// dispatch, §3.2). The report states 2.664M H800 GPU-hours for 14.8T tokens of
/// pre-training: 180K per trillion tokens.
/// Trained in 2024: the H800 with that year's fused-attention kernels
/// (tests/data/modern/h800-2024.toml; the built-in h800 has cuDNN's 2026 rates).
fn deepseek_v3_gpu_hours(extra: &[&str]) -> f64 {
    let mut a = cli(
        "estimate --model deepseek-v3 --system tests/data/modern/dgx-h800-2024.toml --gpus 2048 --tp 1 --pp 16 --ep 64 --etp 1 --zero 1 --precision fp8 --seq-len 4096 --global-batch 15360 --tokens 1e12",
    );
    a.extend_from_slice(extra);
    estimate_json(&a)["training"]["gpu_hours"].as_f64().unwrap()
}

/// With the schedule and dispatch DeepSeek ran, the estimate falls from 396K GPU-hours per
/// trillion tokens (1F1B, all-to-all exposed) to 165K, 8.4% below the report's 180K
/// (docs/validation-modern.md, "DeepSeek-V3"): the all-to-alls hide behind the paired
/// chunk, and DualPipe puts the first stage (embedding, three dense layers) and the last
/// (the output head, the loss and the MTP module) on one device.
#[test]
fn deepseek_v3_without_dualpipe_exposes_the_all_to_all() {
    let plain = deepseek_v3_gpu_hours(&[]);
    assert!(plain > 350e3, "{plain}");
}

/// The issue's bound: within 15% of the report's 180K H800 GPU-hours per trillion tokens
/// (DeepSeek-AI 2024, DeepSeek-V3 technical report, Table 1: 2.664M GPU-hours of
/// pre-training for 14.8T tokens), as trained: DualPipe, hierarchical dispatch and the
/// recomputation of §3.3.2 (RMSNorm, MLA up-projections, SwiGLU output); 165K (161.6K
/// before the all-to-alls beside compute took their measured slowdown σ).
#[test]
fn deepseek_v3_within_15_percent() {
    let t = deepseek_v3_gpu_hours(&[
        "--schedule",
        "dualpipe",
        "--ep-dispatch",
        "hierarchical",
        "--recompute-modules",
        "layernorm,mla_up_proj,moe_act",
    ]);
    assert!((t / 180e3 - 1.0).abs() <= 0.15, "{t}");
}

/// DeepSeek-V2 against the dense model it was compared with, on one cluster and framework
/// (DeepSeek-AI 2024, DeepSeek-V2 report §3.2.3: on H800, per trillion tokens, DeepSeek 67B
/// needs 300.6K GPU-hours and DeepSeek-V2 172.8K, a ratio of 0.575). V2 as §3.1.3 trained
/// it: PP 16, EP 8, ZeRO-1, no TP, the shared experts beside the all-to-all, sequence 4096,
/// batch 9216 (the ramp's end); 16-way zero-bubble pipelining is taken as 1F1B, whose bubble
/// is 10 % here. The V2 report names no recomputation; without any the plan needs 92.5 GiB
/// of an 80 GiB H800, so it takes the V3 report's (§3.3.2: RMSNorm, the MLA
/// up-projections, the SwiGLU output), which brings it to 57.6 GB. The 67B's plan is not
/// published: the default sweep's best at its batch of 4608 (`deepseek-llm-67b`). Neither
/// report gives the GPU count: 1024 for both. The estimate's ratio is 0.580; each absolute
/// figure is about 21 % below the report's, alike for the dense and the MoE model
/// (docs/validation-modern.md, "DeepSeek-V2").
#[test]
fn deepseek_v2_costs_against_its_dense_67b_as_the_v2_report_says() {
    let moe = estimate_json(&cli(
        "estimate --model deepseek-v2 --system tests/data/modern/dgx-h800-2024.toml --gpus 1024 --pp 16 --ep 8 --etp 1 --zero 1 --seq-len 4096 --global-batch 9216 --shared-expert-overlap --recompute-modules layernorm,mla_up_proj,moe_act --tokens 1e12",
    ))["training"]["gpu_hours"]
        .as_f64()
        .unwrap();
    let sweep = estimate_json(&cli(
        "sweep --model deepseek-llm-67b --system tests/data/modern/dgx-h800-2024.toml --gpus 1024 --global-batch 4608 --zero 1 --top 1",
    ));
    let step = sweep["top"][0]["iteration_time_s"].as_f64().unwrap();
    let dense = step * 1024.0 / 3600.0 / (4608.0 * 4096.0) * 1e12;
    let ratio = moe / dense;
    assert!(
        (ratio / (172.8 / 300.6) - 1.0).abs() <= 0.10,
        "V2 {moe:.0} / 67B {dense:.0} GPU-hours per trillion tokens = {ratio:.3}"
    );
}

/// Hierarchical dispatch by hand: Qwen3-30B-A3B (128 experts, top-8) with EP 16 over two
/// DGX H100 nodes (8 + 8), TP 1, 4096 tokens, BF16. Across nodes each token goes once per
/// remote node: d = 2·(1 − Π_{i<8}(64 − i)/(128 − i)) = 1.99 nodes of 2, an all-to-all
/// of 4096·d·2048·2 B over the 2 nodes (IB 47 GB/s, 14 µs); inside the node the 8 copies
/// are forwarded, 128 MiB over 8 ranks (NVLink 370 GB/s, 3.4 µs) by HybridEP's kernels at
/// η(8) of NCCL's rate (DeepEP `docs/README_Hybrid-EP.md`, GB200 at 8 ranks, 16 SMs,
/// kernel time: 750.15 GB/s dispatch and 684.27 combine against NCCL's 740·8/7): 0.848.
/// Across the 2 nodes HybridEP's RDMA phase runs at η_x(2) of NCCL's NIC rate (the same
/// README's H100 table, 16 ranks, 16 SMs, kernel time: 71.71 GB/s dispatch and 62.95
/// combine, counting the bytes to both nodes, against NCCL's 47·2/1): 0.716. The larger,
/// here the IB phase (501 against 378 µs; at NCCL's rate it would be 369, below the
/// NVLink phase), sets the time: 4 per layer, 48 layers.
#[test]
fn hierarchical_dispatch_by_hand() {
    let mut miss = 1.0;
    for i in 0..8 {
        miss *= (64.0 - i as f64) / (128.0 - i as f64);
    }
    let d = 2.0 * (1.0 - miss);
    let eta8 = 0.5 * (750.15 + 684.27) * 7.0 / (8.0 * 740.0);
    let eta_x2 = 0.5 * (71.71 + 62.95) * 1.0 / (2.0 * 47.0);
    let ib = 14e-6 + 0.5 * 4096.0 * d * 2048.0 * 2.0 / (eta_x2 * 47e9);
    let nv = 3.4e-6 + 0.875 * 4096.0 * 8.0 * 2048.0 * 2.0 / (eta8 * 370e9);
    assert!(ib > nv, "{nv} {ib}");
    let ib_nccl = 14e-6 + 0.5 * 4096.0 * d * 2048.0 * 2.0 / 47e9;
    assert!(nv > ib_nccl, "at NCCL's rate the NVLink phase would set it");
    let nv_nccl = 3.4e-6 + 0.875 * 4096.0 * 8.0 * 2048.0 * 2.0 / 370e9;
    let v = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --seq-len 4096 --ep 16 --etp 1 --global-batch 16 --ep-dispatch hierarchical",
    ));
    approx::assert_relative_eq!(ep(&v, "exposed_s"), 48.0 * 4.0 * ib, max_relative = 1e-3);
    // Bytes: both phases, dispatch and combine, forward and backward.
    let moved = 4096.0 * d * 2048.0 * 2.0 + 4096.0 * 8.0 * 2048.0 * 2.0;
    approx::assert_relative_eq!(
        ep(&v, "bytes_per_device"),
        48.0 * 4.0 * moved,
        max_relative = 1e-9
    );
    // Inside one node there is no scale-out phase: the all-to-all's bytes, at HybridEP's
    // in-domain rate (the same α, the bandwidth term over η(8)).
    let one = |kind: &'static str| {
        estimate_json(&[
            "estimate",
            "--model",
            "qwen3-30b-a3b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--seq-len",
            "4096",
            "--ep",
            "8",
            "--etp",
            "1",
            "--global-batch",
            "8",
            "--ep-dispatch",
            kind,
        ])
    };
    let (h, a) = (one("hierarchical"), one("alltoall"));
    assert_eq!(ep(&h, "bytes_per_device"), ep(&a, "bytes_per_device"));
    approx::assert_relative_eq!(
        ep(&a, "exposed_s"),
        48.0 * 4.0 * nv_nccl,
        max_relative = 1e-3
    );
    approx::assert_relative_eq!(ep(&h, "exposed_s"), 48.0 * 4.0 * nv, max_relative = 1e-3);
}

/// MoE permute + unpermute as memory-bound passes: Qwen3-30B-A3B, 4096 tokens, top-8,
/// hidden 2048 on one H100 (3.35 TB/s at 0.7, 4 µs per kernel): permute reads and writes
/// the 8 copies (4·8·4096·2048 B), unpermute reads them and writes the weighted sum
/// (2·8·4096·2048 + 2·4096·2048 B): 419,430,400 B in 2 kernels, 178.9 + 8 = 186.9 µs per
/// pass.
#[test]
fn moe_permute_unpermute_by_hand() {
    let line = explain_line(
        &cli(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --global-batch 8 --seq-len 4096",
        ),
        "MoE permute",
    );
    let line = line.as_str();
    let bytes = 6.0 * 8.0 * 4096.0 * 2048.0 + 2.0 * 4096.0 * 2048.0;
    assert_eq!(bytes, 419_430_400.0);
    let want = bytes / (3.35e12 * 0.7) * 1e6 + 2.0 * 4.0;
    approx::assert_relative_eq!(common::micros(line, "fwd"), want, max_relative = 1e-3);
    approx::assert_relative_eq!(common::micros(line, "bwd"), want, max_relative = 1e-3);
    // TP 2 with sequence parallelism and ETP 1: a rank permutes its 2048 tokens, half the
    // bytes: 209,715,200 B, 89.4 + 8 = 97.4 µs.
    let line = explain_line(
        &cli(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --tp 2 --sequence-parallel --ep 4 --etp 1 --global-batch 4 --seq-len 4096",
        ),
        "MoE permute",
    );
    let line = line.as_str();
    let half = (bytes / 2.0) / (3.35e12 * 0.7) * 1e6 + 2.0 * 4.0;
    approx::assert_relative_eq!(common::micros(line, "fwd"), half, max_relative = 1e-3);
}

/// Folding counts CP ranks too: TP 2 × CP 2 × DP 2 on 8 GPUs holds ETP 1 × EP 8
/// (etp·ep = 8 divides t·c·d = 8), and ETP 2 × EP 8 = 16 does not.
#[test]
fn folding_spans_the_context_parallel_ranks() {
    let args = |etp: &'static str| {
        [
            "estimate",
            "--model",
            "qwen3-30b-a3b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--tp",
            "2",
            "--cp",
            "2",
            "--ep",
            "8",
            "--etp",
            etp,
            "--global-batch",
            "2",
            "--seq-len",
            "8192",
        ]
    };
    let v = json(&args("1"));
    assert_eq!(v["plan"]["ep"], 8);
    common::usage_error(&args("2"), "must divide tp·cp·dp");
}

/// With the `tp-pp-dp` order EP stays inside DP: EP 4 on DP 4 runs, EP 8 on DP 4 is refused.
#[test]
fn without_folding_ep_divides_dp() {
    let args = |ep: &'static str| {
        [
            "estimate",
            "--model",
            "qwen3-30b-a3b",
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--tp",
            "2",
            "--ep",
            ep,
            "--etp",
            "1",
            "--global-batch",
            "4",
            "--order",
            "tp-pp-dp",
        ]
    };
    assert_eq!(estimate_json(&args("4"))["plan"]["ep"], 4);
    common::usage_error(&args("8"), "with order tp-pp-dp (no folding)");
}

/// DualPipe on 8 stages: the bubble is `p/2 − 1 = 3` chunk pairs `F + B/2`,
/// `(p − 2)/(3m) = 6/48` of the ideal time with 16 micro-batches.
#[test]
fn dualpipe_bubble_on_eight_stages() {
    let v = json(&cli(
        "estimate --model llama3-8b --system dgx-h100 --gpus 8 --pp 8 --global-batch 16 --schedule dualpipe",
    ));
    let tb = &v["time_breakdown"];
    // `forward_s` and `backward_s` are m passes of the busiest device's half pair.
    let per_mb = |k: &str| tb[k].as_f64().unwrap() / 16.0;
    let (f, b) = (
        per_mb("forward_s"),
        per_mb("backward_s") + per_mb("recompute_s"),
    );
    approx::assert_relative_eq!(
        tb["pipeline_bubble_s"].as_f64().unwrap(),
        3.0 * (f + b / 2.0),
        max_relative = 1e-9
    );
    approx::assert_relative_eq!(tb["bubble_fraction"].as_f64().unwrap(), 6.0 / 48.0);
    // Recomputation runs in the backward chunk: B counts it.
    let v = json(&cli(
        "estimate --model llama3-8b --system dgx-h100 --gpus 8 --pp 8 --global-batch 16 --schedule dualpipe --recompute full",
    ));
    let tb = &v["time_breakdown"];
    let per_mb = |k: &str| tb[k].as_f64().unwrap() / 16.0;
    let (f, b, r) = (
        per_mb("forward_s"),
        per_mb("backward_s"),
        per_mb("recompute_s"),
    );
    assert!(r > 0.1 * f, "{r} {f}");
    approx::assert_relative_eq!(
        tb["pipeline_bubble_s"].as_f64().unwrap(),
        3.0 * (f + (b + r) / 2.0),
        max_relative = 1e-9
    );
}

/// DualPipe pairs stage `i` with stage `p − 1 − i` on one device, `m/2` micro-batches each
/// (DeepSeek's DualPipe, `examples/example_dualpipe.py`: rank r holds chunks r and
/// p − 1 − r). With two stages each device runs the whole model for half the
/// micro-batches: the forward time is half of one device running every layer (PP 1, the
/// same 8 micro-batches) and there is no bubble (`p/2 − 1 = 0`). With layers 1, 15, 15, 1
/// the busiest pair is the two middle stages, 30 layers, so a device spends what 1F1B's
/// slowest stage (15 layers) spends per micro-batch.
#[test]
fn dualpipe_pairs_first_with_last_stage() {
    let run = |a: String| estimate_json(&a.split_whitespace().collect::<Vec<_>>());
    let fwd = |a: String| run(a)["time_breakdown"]["forward_s"].as_f64().unwrap();
    let base = "estimate --model llama3-8b --system dgx-h100 --global-batch 8";
    let whole = fwd(format!("{base} --gpus 1"));
    let two = run(format!("{base} --gpus 2 --pp 2 --schedule dualpipe"));
    approx::assert_relative_eq!(
        two["time_breakdown"]["forward_s"].as_f64().unwrap(),
        whole / 2.0,
        max_relative = 1e-9
    );
    assert_eq!(two["time_breakdown"]["pipeline_bubble_s"], 0.0);
    let split = "--gpus 4 --pp 4 --layers-per-stage 1,15,15,1 --schedule";
    approx::assert_relative_eq!(
        fwd(format!("{base} {split} dualpipe")),
        fwd(format!("{base} {split} 1f1b")),
        max_relative = 1e-9
    );
}

/// A sweep runs every plan with the EP settings it is given (framework settings, not axes):
/// with `--ep-overlap` every row has it, and the best time is no worse than without.
#[test]
fn sweep_takes_the_ep_settings() {
    let base =
        cli("sweep --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --global-batch 64 --top 5");
    let plain = json(&base);
    let over = json(
        &[
            &base[..],
            &["--ep-overlap", "--ep-dispatch", "hierarchical"],
        ]
        .concat(),
    );
    let rows = over["top"].as_array().unwrap();
    assert!(rows.iter().all(|r| r["plan"]["ep_overlap"] == true));
    assert!(
        rows.iter()
            .all(|r| r["plan"]["ep_dispatch"] == "hierarchical")
    );
    let best = |v: &serde_json::Value| v["top"][0]["iteration_time_s"].as_f64().unwrap();
    assert!(best(&over) <= best(&plain));
}

/// Megatron-core refuses the EP overlap with full recomputation, and so does the sweep's
/// knob loop (`Plan::check_ep_overlap`, `Grid::decode_plan`): asked for both, a sweep ranks
/// only plans without full recomputation, and asked for full recomputation alone it finds
/// no plan with the overlap, where without the overlap it does.
#[test]
fn sweep_drops_the_ep_overlap_with_full_recomputation() {
    let base = cli(
        "sweep --model qwen3-30b-a3b --system dgx-b200 --gpus 8 --seq-len 4096 \
         --global-batch 64 --top 50",
    );
    let run = |extra: &[&str]| json(&[&base[..], extra].concat());
    let both = run(&["--ep-overlap", "true", "--recompute", "none,full"]);
    let rows = both["top"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r["plan"]["recompute"] == "none"),
        "{rows:?}"
    );
    common::bin()
        .args([&base[..], &["--ep-overlap", "true", "--recompute", "full"]].concat())
        .assert()
        .failure()
        .stderr(predicates::str::contains("no configuration is valid"));
    let plain = run(&["--ep-overlap", "false", "--recompute", "full"]);
    assert!(plain["valid"].as_u64().unwrap() > 0);
}

/// The explain line of a grouped GEMM ("GEMM MLP in") of Qwen3-30B-A3B (128 experts,
/// top-8, hidden 2048, expert width 768) on one B200, BF16, sequence 4096, micro-batch 1,
/// with `--grouped-gemm KIND` and `extra` flags.
fn experts_line(kind: &str, extra: &[&str]) -> String {
    let mut a = cli(
        "estimate --model qwen3-30b-a3b --system dgx-b200 --seq-len 4096 --precision bf16 --grouped-gemm",
    );
    a.push(kind);
    a.extend_from_slice(extra);
    if !a.contains(&"--gpus") {
        a.extend(["--gpus", "1", "--global-batch", "1"]);
    }
    explain_line(&a, "GEMM MLP in")
}

/// Grouped GEMMs of 128 local experts of M = 4096·8/128 = 256 tokens each, FC1 N = 2·768
/// = 1536, K = 2048; B200: 148 SMs, 256×256 tiles, plateau 0.72, k0 = 128, 2.25 PFLOP/s,
/// 4 µs per launch. T(×b) = 2·M·N·K·b / (peak·e) + 4 µs, e = 0.72·q·K/(K + 128),
/// q = M·N·b / (waves·148·256²), waves = ⌈⌈M/256⌉·⌈N/256⌉·b / 148⌉.
/// - streams (Transformer Engine's 4 CUDA streams): 32 rounds of 4 GEMMs: 24 tiles, one
///   wave, q = 256·1536·4/(148·65536) = 0.162162, e = 0.109890,
///   T(×4) = 6.44245e9/(2.25e15·0.109890) + 4 µs = 30.056 µs → 32·T = 961.8 µs;
/// - fused: 768 tiles, 6 waves, q = 0.864865, e = 0.586074,
///   T(×128) = 2.06158e11/(2.25e15·0.586074) + 4 µs = 160.34 µs.
#[test]
fn grouped_gemm_streams_and_fused_by_hand() {
    let streams = experts_line("streams", &[]);
    assert!(
        streams.contains("×128 experts, 4 at a time on 4 streams (32 rounds + 0)"),
        "{streams}"
    );
    approx::assert_relative_eq!(common::micros(&streams, "fwd"), 961.81, max_relative = 5e-4);
    let fused = experts_line("fused", &[]);
    approx::assert_relative_eq!(common::micros(&fused, "fwd"), 160.34, max_relative = 5e-4);
    // Four or fewer local experts (EP 32: 4 experts of 4096·8·32/128 = 8192 tokens) run in
    // one round: the two kinds agree.
    let few = ["--gpus", "32", "--ep", "32", "--global-batch", "32"];
    assert_eq!(
        common::micros(&experts_line("streams", &few), "fwd"),
        common::micros(&experts_line("fused", &few), "fwd")
    );
}

/// Six local experts on four streams: one round of four and a round of two (Qwen3-30B-A3B
/// with 96 experts, EP 16: M = 4096·8·16/96 = 5461.33 tokens per expert, FC1 N = 1536,
/// K = 2048, BF16 on B200 as above). ⌈M/256⌉ = 22 row tiles × 6 column tiles:
/// - T(×4): 528 tiles, 4 waves, q = M·1536·4/(4·148·256²) = 0.864865, e = 0.72·q·2048/2176
///   = 0.586074, 2·M·1536·2048·4 = 1.37439e11 FLOP → 104.22 µs + 4 µs = 108.22 µs;
/// - T(×2): 264 tiles, 2 waves, the same q and e, half the FLOPs: 52.11 + 4 = 56.11 µs;
/// - streams: T(×4) + T(×2) = 164.33 µs ("1 rounds + 2"); fused: T(×6), 792 tiles, 6 waves,
///   the same q: 156.33 + 4 = 160.33 µs.
#[test]
fn a_partial_round_of_local_experts_by_hand() {
    let shown = common::text(&["show", "model", "qwen3-30b-a3b"]);
    let edited = shown.replace("experts = 128", "experts = 96");
    assert_ne!(edited, shown);
    let path = common::tmp("partial_round").join("qwen3-96e.toml");
    std::fs::write(&path, edited).unwrap();
    let line = |kind: &str| {
        let model = path.to_str().unwrap();
        let args = [
            "estimate",
            "--model",
            model,
            "--system",
            "dgx-b200",
            "--seq-len",
            "4096",
            "--precision",
            "bf16",
            "--gpus",
            "16",
            "--ep",
            "16",
            "--global-batch",
            "16",
            "--grouped-gemm",
            kind,
        ];
        explain_line(&args, "GEMM MLP in")
    };
    let streams = line("streams");
    assert!(
        streams.contains("×6 experts, 4 at a time on 4 streams (1 rounds + 2)"),
        "{streams}"
    );
    approx::assert_relative_eq!(common::micros(&streams, "fwd"), 164.33, max_relative = 5e-4);
    let fused = line("fused");
    approx::assert_relative_eq!(common::micros(&fused, "fwd"), 160.33, max_relative = 5e-4);
}

/// `--grouped-gemm` takes streams or fused and names the flag otherwise.
#[test]
fn grouped_gemm_rejects_other_kinds() {
    common::usage_error(
        &cli("estimate --model qwen3-30b-a3b --system dgx-b200 --gpus 8 --grouped-gemm cutlass"),
        "--grouped-gemm",
    );
}

/// Megatron-core's distributed optimizer shards routed-expert parameters over the
/// expert-DP group (`t·c·d/(etp·ep)` ranks; Liu et al. 2025, arXiv 2504.14960 §3), the
/// dense ones over DP × CP. Qwen3-235B-A22B on 256 GB200 with EP 64 (expert-DP 4),
/// BF16, ZeRO-1, Adam with 16-bit gradients (12 B of optimizer state per parameter):
/// - routed experts per device: 94 layers × 128/64 experts × 3·4096·1536
///   = 94 × 2 × 18,874,368 = 3,548,381,184 parameters, sharded 4 ways;
/// - dense: attention 4096·(8192 + 2·512) + 8192·4096 = 71,303,168, router 4096·128 =
///   524,288, two norms 8,192 per layer (× 94 = 6,752,556,928), embedding and untied head
///   2 × 151,936·4096 = 1,244,659,712, final norm 4,096: 7,997,220,736, sharded 256 ways;
/// - optimizer states = 12 × (7,997,220,736/256 + 3,548,381,184/4) = 11,020,013,274 B
///   (sharding the experts 256 ways as well would give 0.54 GB);
/// - the optimizer step reads and writes `30 + 3·2 = 36` B per local parameter over
///   8 TB/s HBM at 0.7 efficiency, plus 8 kernels × 4 µs:
///   918,334,552 × 36 / 5.6e12 + 32 µs = 5.936 ms.
#[test]
fn expert_states_shard_over_expert_dp() {
    let d = estimate_json(&cli(
        "estimate --model qwen3-235b-a22b --system gb200-nvl72 --gpus 256 --tp 1 --pp 1 --seq-len 4096 --micro-batch 2 --global-batch 8192 --precision bf16 --ep 64 --etp 1",
    ));
    let states = d["memory_breakdown"]["optimizer_states_bytes"]
        .as_f64()
        .unwrap();
    assert!((states / 11_020_013_274.0 - 1.0).abs() < 1e-5, "{states}");
    let step = d["time_breakdown"]["optimizer_s"].as_f64().unwrap();
    let by_hand = 918_334_552.0 * 36.0 / 5.6e12 + 32e-6;
    assert!((step / by_hand - 1.0).abs() < 1e-3, "{step} vs {by_hand}");
    // EP = DP on one node (expert-DP 1): every rank keeps its experts' whole states.
    let one = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --global-batch 8 --seq-len 4096 --precision bf16",
    ));
    let params = one["memory_breakdown"]["weights_bytes"].as_f64().unwrap() / 2.0;
    // Qwen3-30B-A3B routed per device: 48 layers × 16 experts × 3·2048·768 = 3,623,878,656.
    let routed = 3_623_878_656.0;
    let states = one["memory_breakdown"]["optimizer_states_bytes"]
        .as_f64()
        .unwrap();
    assert!(
        (states / (12.0 * ((params - routed) / 8.0 + routed)) - 1.0).abs() < 1e-9,
        "{states}"
    );
    // CP 2 × DP 8 on 16 GPUs with EP 8: expert-DP = t·c·d/(etp·ep) = 1·2·8/8 = 2, the
    // rest shards over DP × CP = 16.
    let cp = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --cp 2 --ep 8 --etp 1 --global-batch 8 --seq-len 8192 --precision bf16 --recompute full",
    ));
    let m = &cp["memory_breakdown"];
    let params = m["weights_bytes"].as_f64().unwrap() / 2.0;
    let states = m["optimizer_states_bytes"].as_f64().unwrap();
    let by_hand = 12.0 * ((params - routed) / 16.0 + routed / 2.0);
    assert!(
        (states / by_hand - 1.0).abs() < 1e-9,
        "{states} vs {by_hand}"
    );
    // LoRA on the QKV projections (rank 32): only the adapters train, none of them an
    // expert: 48 layers × 32·(2048 + 4096 + 2·512) = 11,010,048 parameters, their 12 B of
    // state over DP 8: 16,515,072 B.
    let lora = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --global-batch 8 --seq-len 4096 --precision bf16 --lora-rank 32 --lora-targets qkv",
    ));
    assert_eq!(
        lora["memory_breakdown"]["optimizer_states_bytes"].as_f64(),
        Some(16_515_072.0)
    );
    // HSDP groups of 8 on 16 GPUs (ZeRO-3 inside each group): experts and the rest both
    // shard over the group, 2 B of weights and 12 B of state per parameter, all / 8: a
    // ratio of 6 (over expert-DP 2 the experts' states would be 4× larger).
    let hsdp = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --ep 8 --etp 1 --zero 3 --hsdp 8 --global-batch 16 --precision bf16 --recompute full",
    ));
    let m = &hsdp["memory_breakdown"];
    let ratio =
        m["optimizer_states_bytes"].as_f64().unwrap() / m["weights_bytes"].as_f64().unwrap();
    assert!((ratio - 6.0).abs() < 1e-9, "{ratio}");
    // Each device steps its group's shard, P/8 (P = 4 × the weight bytes of a 1/8 shard),
    // 36 B per parameter over 3.35 TB/s at 0.7, plus 8 kernels × 4 µs (it stepped P/16,
    // as if the states sharded over all 16 ranks, before).
    let p = 4.0 * m["weights_bytes"].as_f64().unwrap();
    let step = hsdp["time_breakdown"]["optimizer_s"].as_f64().unwrap();
    let by_hand = p / 8.0 * 36.0 / (3.35e12 * 0.7) + 32e-6;
    assert!((step / by_hand - 1.0).abs() < 1e-9, "{step} vs {by_hand}");
}

/// An MoE layer keeps each token's `k` routed copies as its experts' first GEMM input
/// (Transformer Engine `GroupedLinear` saves it for the weight gradient) on top of
/// Korthikanti et al.'s terms, taken at the attention's true widths. Qwen3-30B-A3B (h 2048,
/// 32 query heads and 4 KV heads of 128, so the query is 4096 wide; experts of width 768,
/// top-8), one micro-batch of 4096 tokens, no recomputation, flash attention, 48 layers on
/// one stage; bytes per `s·b·h` per layer:
/// - BF16, TP 1: norms 2·(2 + 2) = 8; attention Q 2·4096/2048 = 4, K and V 2·512/2048
///   each = 1, output 2·4096/2048 = 4: 9; QK-norm's inputs and FP32 rsigma
///   (2·128 + 4)·36/2048 = 4.5703125; experts' SwiGLU (4 + 2)·768/2048·8 = 18; routed
///   copies 2·8 = 16: 55.5703125;
/// - MXFP8 (`q = 1 + 1/32`): norms 2·(2 + q) = 6.0625, attention 5 + (2 + q)·2 =
///   11.0625, QK-norm 4.5703125, SwiGLU (4 + q)·3 = 15.09375, routed copies 8q = 8.25:
///   45.0390625;
/// - BF16, TP 2 with SP, ETP 2: norms 8/2 = 4, then (9 + 4.5703125 + 18 + 2·8·2)/2 =
///   31.78515625: 35.78515625.
#[test]
fn moe_layers_keep_their_routed_copies() {
    let acts = |line: &'static str| {
        let d = estimate_json(&cli(line));
        d["memory_breakdown"]["activations_bytes"].as_f64().unwrap() / (48.0 * 4096.0 * 2048.0)
    };
    let close = |got: f64, want: f64| assert!((got - want).abs() < 1e-9, "{got} vs {want}");
    close(
        acts(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --global-batch 8 --seq-len 4096 --precision bf16 --flash-attention --recompute none",
        ),
        55.5703125,
    );
    close(
        acts(
            "estimate --model qwen3-30b-a3b --system dgx-b200 --gpus 8 --ep 8 --etp 1 --global-batch 8 --seq-len 4096 --precision mxfp8 --flash-attention --recompute none",
        ),
        45.0390625,
    );
    close(
        acts(
            "estimate --model qwen3-30b-a3b --system dgx-b200 --gpus 8 --tp 2 --sequence-parallel --ep 4 --etp 2 --global-batch 4 --seq-len 4096 --precision bf16 --flash-attention --recompute none",
        ),
        35.78515625,
    );
}

/// MLA's saved tensors and Megatron-core's recompute modules, by hand on DeepSeek-V3
/// (h 7168; 128 heads, query/key 128 + 64 rotary, value 128; latents 1536 and 512; 256
/// experts of 2048, top-8, one shared expert of 2048), BF16, TP 1, flash attention, one
/// sequence of 4096 on 64 GPUs with EP 64 (all 61 layers on one stage, counted as MoE
/// layers, and the MTP module's MoE layer beside them: 62); bytes per `s·b·h` per layer:
/// - no recomputation: norms 2·(2 + 2) = 8; latents (2 + 2)·(1536 + 512)/7168 and the
///   rotary key 2·64/7168; query, key and value 2·(128·192 + 128·(192 + 128))/7168; the
///   attention output 2·128·128/7168; experts' SwiGLU (4 + 2)·2048/7168·8; the shared
///   expert's (4 + 2)·2048/7168; routed copies 2·8;
/// - `layernorm,mla_up_proj,moe_act` (DeepSeek-V3 report §3.3.2): the norms keep their
///   input only (2·2), the query, key and value go, the experts keep their FC1 output
///   only (4·2048/7168·8).
///
/// The recomputed forwards: per layer and micro-batch, the up-projections' FLOPs
/// 2·4096·(1536·24576 + 512·32768) again in the hardware count.
#[test]
fn mla_activations_and_recompute_modules_by_hand() {
    let base = "estimate --model deepseek-v3 --system dgx-h100 --gpus 64 --ep 64 --etp 1 --global-batch 64 --seq-len 4096 --flash-attention";
    let run = |extra: &str| {
        let line = format!("{base} {extra}");
        estimate_json(&line.split_whitespace().collect::<Vec<_>>())
    };
    let sbh = 62.0 * 4096.0 * 7168.0;
    let h = 7168.0;
    let latents = (4.0 * (1536.0 + 512.0) + 2.0 * 64.0) / h;
    let qkv = 2.0 * (128.0 * 192.0 + 128.0 * 320.0) / h;
    let out = 2.0 * 128.0 * 128.0 / h;
    let (swiglu, shared, copies) = (6.0 * 2048.0 / h * 8.0, 6.0 * 2048.0 / h, 16.0);
    let plain = run("--precision bf16");
    let acts = |v: &serde_json::Value| v["memory_breakdown"]["activations_bytes"].as_f64().unwrap();
    let want = 8.0 + latents + qkv + out + swiglu + shared + copies;
    assert!(
        (acts(&plain) / sbh / want - 1.0).abs() < 1e-9,
        "{} vs {want}",
        acts(&plain) / sbh
    );
    let modules = run("--precision bf16 --recompute-modules layernorm,mla_up_proj,moe_act");
    let want = 4.0 + latents + out + 4.0 * 2048.0 / h * 8.0 + shared + copies;
    assert!(
        (acts(&modules) / sbh / want - 1.0).abs() < 1e-9,
        "{} vs {want}",
        acts(&modules) / sbh
    );
    // FP8 (q = 1 B per saved GEMM input): the latents' normalised copies, the projection's
    // extra quantized input (2 + q), the shared expert's FC2 input and the routed copies
    // take q.
    let fp8 = run("--precision fp8 --recompute-modules layernorm,mla_up_proj,moe_act");
    let want = 4.0
        + (3.0 * (1536.0 + 512.0) + 2.0 * 64.0) / h
        + 3.0 * 128.0 * 128.0 / h
        + 4.0 * 2048.0 / h * 8.0
        + 5.0 * 2048.0 / h
        + 8.0;
    let got = acts(&fp8) / sbh;
    assert!((got / want - 1.0).abs() < 1e-9, "{got} vs {want}");
    // Hardware FLOPs: the model's times HFU/MFU.
    let hw = |v: &serde_json::Value| {
        let f = |k: &str| v[k].as_f64().unwrap();
        f("model_flops_per_iteration") * f("hfu") / f("mfu")
    };
    let up = 2.0 * (1536.0 * 24576.0 + 512.0 * 32768.0) * 4096.0 * 64.0 * 61.0;
    assert!((hw(&modules) - hw(&plain) - up).abs() / up < 1e-9);
}

/// The same two terms on a hybrid model, where only some layers are MoE: Nemotron 3 Nano
/// (52 layers, 23 of them `E` in its pattern; 128 squared-ReLU experts of width 1856 on
/// h 2688, top-6), BF16 on 8 B200.
/// - EP 8 (expert-DP 1): routed per device 23 × 16 × 2·2688·1856 = 23 × 16 × 9,977,856 =
///   3,671,851,008 unsharded, the rest of the device's 5,874,980,288 parameters (half its
///   16-bit weight bytes) over DP 8: 12 × (2,203,129,280/8 + 3,671,851,008) =
///   47,366,906,016 B of optimizer state.
/// - TP 2 with SP, EP 4: going from ETP 1 to ETP 2 doubles each rank's routed copies, and
///   only those: `s·b·h · 23 · q·k·Δetp / t` = 8192 · 2688 · 23 · 2 · 6 · 1 / 2 =
///   3,038,773,248 B more activations.
#[test]
fn hybrid_moe_layers_shard_and_keep_their_copies() {
    let nano = |line: &'static str, key: &str| {
        let d = estimate_json(&cli(line));
        d["memory_breakdown"][key].as_f64().unwrap()
    };
    let line = "estimate --model nemotron-3-nano-30b-a3b --system dgx-b200 --gpus 8 --ep 8 --etp 1 --global-batch 8 --precision bf16";
    let weights = nano(line, "weights_bytes");
    assert_eq!(weights / 2.0, 5_874_980_288.0);
    let states = nano(line, "optimizer_states_bytes");
    assert!((states / 47_366_906_016.0 - 1.0).abs() < 1e-12, "{states}");
    let tp2 = |etp| match etp {
        1 => {
            "estimate --model nemotron-3-nano-30b-a3b --system dgx-b200 --gpus 8 --tp 2 --sequence-parallel --ep 4 --etp 1 --global-batch 4 --precision bf16 --flash-attention --recompute none"
        }
        _ => {
            "estimate --model nemotron-3-nano-30b-a3b --system dgx-b200 --gpus 8 --tp 2 --sequence-parallel --ep 4 --etp 2 --global-batch 4 --precision bf16 --flash-attention --recompute none"
        }
    };
    let delta = nano(tp2(2), "activations_bytes") - nano(tp2(1), "activations_bytes");
    assert!((delta / 3_038_773_248.0 - 1.0).abs() < 1e-9, "{delta}");
}

/// The recomputed forwards of `--recompute-modules`, by hand (memory-bound at 3.35 TB/s ×
/// 0.7 plus 4 µs per kernel on an H100, one sequence of 4096 on one GPU):
/// - `layernorm` on Llama 3 8B (h 4096, 32 layers): two norms read and write 2 B per
///   element, 4·4096·4096·2 B and 2 kernels per layer;
/// - `moe_act` on Qwen3-30B-A3B (48 layers, experts of 768, top-8): SwiGLU reads 4 B and
///   writes 2 B per output element, 6·4096·768·8 B in one kernel per layer.
#[test]
fn recompute_modules_time_by_hand() {
    let rec = |line: &'static str| {
        estimate_json(&cli(line))["time_breakdown"]["recompute_s"]
            .as_f64()
            .unwrap()
    };
    let bw = 3.35e12 * 0.7;
    let half = 48.0 * (6.0 * 2048.0 * 768.0 * 8.0 / bw + 4e-6);
    let cases: [(&'static str, f64); 5] = [
        (
            "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --recompute-modules layernorm",
            32.0 * (4.0 * 4096.0 * 4096.0 * 2.0 / bw + 2.0 * 4e-6),
        ),
        (
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --recompute-modules moe_act",
            48.0 * (6.0 * 4096.0 * 768.0 * 8.0 / bw + 4e-6),
        ),
        // TP 2 with SP and ETP 1: a rank's experts see its half of the tokens' copies.
        (
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 2 --tp 2 --sequence-parallel --ep 2 --etp 1 --seq-len 4096 --global-batch 1 --recompute-modules moe_act",
            half,
        ),
        // ETP 2: all the tokens' copies on half of each expert's width, the same elements.
        (
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 2 --tp 2 --sequence-parallel --etp 2 --seq-len 4096 --global-batch 1 --recompute-modules moe_act",
            half,
        ),
        // A plain activation (Nemotron 3 Nano's squared ReLU: 23 MoE layers of 52, experts
        // of 1856, top-6) reads and writes 2 B per element.
        (
            "estimate --model nemotron-3-nano-30b-a3b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --recompute-modules moe_act",
            23.0 * (4.0 * 4096.0 * 1856.0 * 6.0 / bw + 4e-6),
        ),
    ];
    for (line, want) in cases {
        let got = rec(line);
        assert!((got / want - 1.0).abs() < 1e-9, "{line}: {got} vs {want}");
    }
    // MLA's up-projections: the two up-projection GEMMs of the layer's forward again
    // (their times from the explain lines) and the rotary kernels.
    let args = cli(
        "estimate --model deepseek-v3 --system dgx-h100 --gpus 64 --ep 64 --etp 1 --global-batch 64 --seq-len 4096 --precision bf16",
    );
    let fwd_of = |needle: &str| common::micros(&explain_line(&args, needle), "fwd ") * 1e-6;
    let gemms = fwd_of("GEMM query up") + fwd_of("GEMM KV up");
    let rope = 4.0 * 4096.0 * (128.0 + 1.0) * 64.0 / bw + 2.0 * 4e-6;
    let mut with = args.clone();
    with.extend(["--recompute-modules", "mla_up_proj"]);
    let got = estimate_json(&with)["time_breakdown"]["recompute_s"]
        .as_f64()
        .unwrap();
    // 61 layers and the MTP module's layer on the one stage.
    let want = 62.0 * (gemms + rope);
    assert!((got / want - 1.0).abs() < 1e-3, "{got} vs {want}");
}

/// The estimate JSON of the command `line` with `--recompute-modules modules`.
fn with_modules(line: &str, modules: &str) -> serde_json::Value {
    let mut a: Vec<&str> = line.split_whitespace().collect();
    a.extend(["--recompute-modules", modules]);
    estimate_json(&a)
}

/// The hardware FLOPs beyond the model FLOPs per iteration of `line` with `modules`
/// recomputed: `model · (HFU/MFU − 1)`.
fn extra_hardware_flops(line: &str, modules: &str) -> f64 {
    let d = with_modules(line, modules);
    let model = d["model_flops_per_iteration"].as_f64().unwrap();
    model * (d["hfu"].as_f64().unwrap() / d["mfu"].as_f64().unwrap() - 1.0)
}

/// `got` within a relative `tol` of `want`.
fn assert_close(got: f64, want: f64, tol: f64, what: &str) {
    assert!((got / want - 1.0).abs() < tol, "{what}: {got} vs {want}");
}

/// The whole-submodule checkpoints of `--recompute-modules` (Megatron-core's `core_attn`,
/// `mlp`, `moe`, `shared_experts`: the submodule's forward runs again before its backward),
/// by hand on one sequence of 4096 (memory-bound at 3.35 TB/s × 0.7 plus 4 µs per kernel on
/// an H100; GEMM times read from the explain lines of the same plan without the module):
/// - `core_attn` on Llama 3 8B: the fused attention's forward again, 32 × (F/(989 TFLOP/s ·
///   0.71 · 4096/(4096 + 768)) + 4 µs), F = 2·32·4096²·256·0.5;
/// - `mlp` on Llama 3 8B: FC1 and FC2 forward plus SwiGLU (6 B per output element of
///   14,336, one kernel) per layer; in FP8 with current scaling also the two inputs'
///   quantization again (6 B per element in 2 kernels each: 4096·4096 and 4096·14,336);
/// - `moe` on Qwen3-30B-A3B over EP 8: router, FC1 and FC2 of the 16 local experts, SwiGLU
///   on 8 copies of 768 per token, the permute and unpermute (2 kernels), and the
///   dispatch and combine again, which the EP communication shows: 48 × the explain line's
///   all-to-all per pass more;
/// - `shared_experts` on Llama 4 Scout: the shared expert's two GEMMs and its SwiGLU (6 B
///   per element of 8192) in each of the 48 layers.
#[test]
fn whole_submodule_checkpoints_time_by_hand() {
    let bw = 3.35e12 * 0.7;
    let k = 4e-6;
    let rec = |args: &[&str]| {
        estimate_json(args)["time_breakdown"]["recompute_s"]
            .as_f64()
            .unwrap()
    };
    let with = |base: &[&'static str], extra: &'static str| {
        let mut a = base.to_vec();
        a.extend(["--recompute-modules", extra]);
        a
    };
    let close = |got: f64, want: f64, what: &str| assert_close(got, want, 1e-3, what);
    // core_attn: the attention core's forward, by the preset's formula.
    let llama = cli(
        "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention",
    );
    let f = 2.0 * 32.0 * 4096.0 * 4096.0 * 256.0 * 0.5;
    let attn = f / (989e12 * 0.71 * 4096.0 / (4096.0 + 768.0)) + k;
    close(rec(&with(&llama, "core_attn")), 32.0 * attn, "core_attn");
    // mlp: FC1 + FC2 forward and the activation.
    let fwd_of =
        |args: &[&str], needle: &str| common::micros(&explain_line(args, needle), "fwd ") * 1e-6;
    let gemms = fwd_of(&llama, "GEMM MLP in") + fwd_of(&llama, "GEMM MLP out");
    let act = 6.0 * 4096.0 * 14336.0 / bw + k;
    close(rec(&with(&llama, "mlp")), 32.0 * (gemms + act), "mlp");
    let fp8 = cli(
        "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision fp8 --fp8-recipe current --flash-attention",
    );
    let gemms8 = fwd_of(&fp8, "GEMM MLP in") + fwd_of(&fp8, "GEMM MLP out");
    let casts =
        (6.0 * 4096.0 * 14336.0 + 6.0 * (4096.0 * 4096.0 + 4096.0 * 14336.0)) / bw + 5.0 * k;
    close(
        rec(&with(&fp8, "mlp")),
        32.0 * (gemms8 + casts),
        "mlp in FP8",
    );
    // moe: the whole MoE layer again, its all-to-alls exposed in the EP communication.
    let qwen = cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --precision bf16 --flash-attention",
    );
    let moe_gemms =
        fwd_of(&qwen, "GEMM router") + fwd_of(&qwen, "GEMM MLP in") + fwd_of(&qwen, "GEMM MLP out");
    let perm = 6.0 * 8.0 * 4096.0 * 2048.0 + 2.0 * 4096.0 * 2048.0;
    let moe_mem = (6.0 * 4096.0 * 768.0 * 8.0 + perm) / bw + 3.0 * k;
    close(
        rec(&with(&qwen, "moe")),
        48.0 * (moe_gemms + moe_mem),
        "moe",
    );
    // "EP all-to-all 641.6 us per pass": the dispatch and combine of one pass.
    let line = explain_line(&qwen, "EP all-to-all");
    let a2a = line.split("EP all-to-all ").nth(1).unwrap();
    let a2a = a2a.split(" per pass").next().unwrap();
    let a2a = common::micros(&format!("a = {a2a}"), "a ") * 1e-6;
    let ep = |args: &[&str]| {
        estimate_json(args)["time_breakdown"]["communication"]["ep"]["exposed_s"]
            .as_f64()
            .unwrap()
    };
    close(
        ep(&with(&qwen, "moe")) - ep(&qwen),
        48.0 * a2a,
        "moe's all-to-alls",
    );
    // and their bytes: the forward's and the backward's dispatch and combine, and the
    // recomputed forward's again, 3/2 of those without `moe`.
    let ep_bytes = |args: &[&str]| {
        estimate_json(args)["time_breakdown"]["communication"]["ep"]["bytes_per_device"]
            .as_f64()
            .unwrap()
    };
    close(
        ep_bytes(&with(&qwen, "moe")) / ep_bytes(&qwen),
        1.5,
        "moe's all-to-all bytes",
    );
    // shared_experts: the shared expert alone.
    let scout = cli(
        "estimate --model llama4-scout --system dgx-h100 --gpus 8 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --precision bf16 --flash-attention",
    );
    let shared = fwd_of(&scout, "GEMM shared MLP in") + fwd_of(&scout, "GEMM shared MLP out");
    let shared_act = 6.0 * 4096.0 * 8192.0 / bw + k;
    close(
        rec(&with(&scout, "shared_experts")),
        48.0 * (shared + shared_act),
        "shared_experts",
    );
    // In FP8 with current scaling the recomputed experts quantize their two inputs again
    // (6 B per element in 2 kernels each): 8 copies of 2048 and of 768 per token.
    let qwen8 = cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --precision fp8 --fp8-recipe current --flash-attention",
    );
    let gemms8 = fwd_of(&qwen8, "GEMM router")
        + fwd_of(&qwen8, "GEMM MLP in")
        + fwd_of(&qwen8, "GEMM MLP out");
    let casts8 = 6.0 * 4096.0 * 8.0 * (2048.0 + 768.0);
    let mem8 = (6.0 * 4096.0 * 768.0 * 8.0 + perm + casts8) / bw + 7.0 * k;
    close(
        rec(&with(&qwen8, "moe")),
        48.0 * (gemms8 + mem8),
        "moe in FP8",
    );
    // Scout's shared expert in FP8: its inputs of 5120 and 8192 per token again.
    let scout8 = cli(
        "estimate --model llama4-scout --system dgx-h100 --gpus 8 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --precision fp8 --fp8-recipe current --flash-attention",
    );
    let shared8 = fwd_of(&scout8, "GEMM shared MLP in") + fwd_of(&scout8, "GEMM shared MLP out");
    let shared_mem8 = (6.0 * 4096.0 * 8192.0 + 6.0 * 4096.0 * (5120.0 + 8192.0)) / bw + 5.0 * k;
    close(
        rec(&with(&scout8, "shared_experts")),
        48.0 * (shared8 + shared_mem8),
        "shared_experts in FP8",
    );
    // mlp in a hybrid: Nemotron-H 8B's 24 `-` layers, squared ReLU (4 B per element of
    // 21,504: read and write 2 B).
    let h8 = cli(
        "estimate --model nemotron-h-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention",
    );
    let h8_gemms = fwd_of(&h8, "GEMM MLP in") + fwd_of(&h8, "GEMM MLP out");
    let h8_act = 4.0 * 4096.0 * 21504.0 / bw + k;
    close(
        rec(&with(&h8, "mlp")),
        24.0 * (h8_gemms + h8_act),
        "mlp in a hybrid",
    );
}

/// What the whole-submodule checkpoints keep, by hand (bytes per layer on one sequence of
/// 4096, micro-batch 1, one micro-batch in flight):
/// - `core_attn` without fused attention drops Llama 3 8B's scores, 2·a·s² = 2·32·4096²
///   (no dropout), as selective recomputation does;
/// - `mlp` drops the MLP's FC1 output and FC2 input, `(4 + q)·s·f` (SwiGLU): 6·4096·14,336
///   in BF16; in FP8 5·4096·14,336, while the norm's output, the checkpoint's input, is
///   kept in 16-bit instead of FP8: − 4096·4096;
/// - `moe` drops Qwen3-30B-A3B's experts' terms and routed copies, `s·k·(6·f + 2·h)` =
///   4096·8·(6·768 + 2·2048);
/// - `shared_experts` drops Llama 4 Scout's shared expert, 6·4096·8192.
#[test]
fn whole_submodule_checkpoints_memory_by_hand() {
    let act = |line: &str, modules: &str| {
        with_modules(line, modules)["memory_breakdown"]["activations_bytes"]
            .as_f64()
            .unwrap()
    };
    let drop = |line: &str, modules: &str| act(line, "none") - act(line, modules);
    let close = |got: f64, want: f64, what: &str| assert_close(got, want, 1e-9, what);
    let unfused = "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention false";
    close(
        drop(unfused, "core_attn"),
        32.0 * 2.0 * 32.0 * 4096.0 * 4096.0,
        "core_attn",
    );
    let mut sel: Vec<&str> = unfused.split_whitespace().collect();
    sel.extend(["--recompute", "selective"]);
    let selective = estimate_json(&sel)["memory_breakdown"]["activations_bytes"]
        .as_f64()
        .unwrap();
    close(
        act(unfused, "core_attn"),
        selective,
        "core_attn against selective",
    );
    let bf16 = "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention";
    close(drop(bf16, "mlp"), 32.0 * 6.0 * 4096.0 * 14336.0, "mlp");
    let fp8 = "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision fp8 --fp8-recipe current --flash-attention";
    close(
        drop(fp8, "mlp"),
        32.0 * (5.0 * 4096.0 * 14336.0 - 4096.0 * 4096.0),
        "mlp in FP8",
    );
    let qwen = "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --precision bf16 --flash-attention";
    close(
        drop(qwen, "moe"),
        48.0 * 4096.0 * 8.0 * (6.0 * 768.0 + 2.0 * 2048.0),
        "moe",
    );
    let scout = "estimate --model llama4-scout --system dgx-h100 --gpus 8 --ep 8 --etp 1 --seq-len 4096 --global-batch 8 --precision bf16 --flash-attention";
    close(
        drop(scout, "shared_experts"),
        48.0 * 6.0 * 4096.0 * 8192.0,
        "shared_experts",
    );
    // `moe` takes the shared expert with the routed one (top-1) and the routed copy.
    close(
        drop(scout, "moe"),
        48.0 * 4096.0 * (6.0 * 8192.0 + 6.0 * 8192.0 + 2.0 * 5120.0),
        "moe with a shared expert",
    );
}

/// The hardware FLOPs count the checkpointed submodules' forwards: Llama 3 8B's MLP with
/// `mlp`, `2·3·h·f` per token and layer (32·2·3·4096·14,336 per token), and its attention
/// core with `core_attn`, `2·s·a·(d_qk + d_v)` = 2·4096·32·256 per token and layer.
#[test]
fn whole_submodule_checkpoints_count_in_the_hardware_flops() {
    let extra = |modules: &str| {
        extra_hardware_flops(
            "estimate --model llama3-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention",
            modules,
        )
    };
    let tokens = 4096.0;
    let mlp = 32.0 * 2.0 * 3.0 * 4096.0 * 14336.0 * tokens;
    let core = 32.0 * 2.0 * 4096.0 * 32.0 * 256.0 * tokens;
    assert!((extra("mlp") / mlp - 1.0).abs() < 1e-9, "{}", extra("mlp"));
    assert!(
        (extra("core_attn") / core - 1.0).abs() < 1e-9,
        "{}",
        extra("core_attn")
    );
    assert!((extra("mlp,core_attn") / (mlp + core) - 1.0).abs() < 1e-9);
}

/// The whole-submodule checkpoints in hybrid models, by hand (bytes over the layers of one
/// sequence of 4096 on one GPU, BF16 unless said; squared-ReLU MLPs keep `(2 + q)·f` per
/// token, `4·f` in BF16):
/// - Nemotron-H 8B's 24 `-` layers with `mlp`: 24·4096·4·21,504; in FP8 24·4096·(3·21,504 −
///   4096) (the norm's output kept in 16-bit, 1 B more per element than its FP8 copy);
/// - its 4 attention layers without fused attention, `core_attn`: the scores, 4·2·32·4096²;
/// - Nemotron 3 Nano's 23 `E` layers with `moe`: each token's 6 copies (`4·1856` each and
///   the 2-byte routed input of 2688), and its shared expert of 3712: 23·4096·(6·(4·1856 +
///   2·2688) + 4·3712); with `shared_experts` the shared expert alone, 23·4096·4·3712.
#[test]
fn whole_submodule_checkpoints_in_hybrid_models_by_hand() {
    let act = |line: &str, modules: &str| {
        with_modules(line, modules)["memory_breakdown"]["activations_bytes"]
            .as_f64()
            .unwrap()
    };
    let drop = |line: &str, modules: &str| act(line, "none") - act(line, modules);
    let close = |got: f64, want: f64, what: &str| assert_close(got, want, 1e-9, what);
    let h8 = "estimate --model nemotron-h-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention";
    close(drop(h8, "mlp"), 24.0 * 4096.0 * 4.0 * 21504.0, "mlp");
    let h8_fp8 = "estimate --model nemotron-h-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision fp8 --fp8-recipe current --flash-attention";
    close(
        drop(h8_fp8, "mlp"),
        24.0 * 4096.0 * (3.0 * 21504.0 - 4096.0),
        "mlp in FP8",
    );
    let h8_unfused = "estimate --model nemotron-h-8b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention false";
    close(
        drop(h8_unfused, "core_attn"),
        4.0 * 2.0 * 32.0 * 4096.0 * 4096.0,
        "core_attn",
    );
    let nano = "estimate --model nemotron-3-nano-30b-a3b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention";
    close(
        drop(nano, "moe"),
        23.0 * 4096.0 * (6.0 * (4.0 * 1856.0 + 2.0 * 2688.0) + 4.0 * 3712.0),
        "moe",
    );
    close(
        drop(nano, "shared_experts"),
        23.0 * 4096.0 * 4.0 * 3712.0,
        "shared_experts",
    );
    // With `layernorm` the norm's output is not kept at all, so `mlp` drops only the MLP's
    // terms in FP8: 24·4096·3·21,504.
    let fp8_with = |modules: &str| act(h8_fp8, modules);
    close(
        fp8_with("layernorm") - fp8_with("layernorm,mlp"),
        24.0 * 4096.0 * 3.0 * 21504.0,
        "layernorm,mlp in FP8",
    );
    // Nano in FP8 (q = 1): the routed copies `3·1856 + 2688` each, the shared expert
    // `3·3712`, less the norm's output kept 1 B wider.
    let nano_fp8 = "estimate --model nemotron-3-nano-30b-a3b --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision fp8 --fp8-recipe current --flash-attention";
    close(
        drop(nano_fp8, "moe"),
        23.0 * 4096.0 * (6.0 * (3.0 * 1856.0 + 2688.0) + 3.0 * 3712.0 - 2688.0),
        "moe in FP8",
    );
    // TP 2 with SP splits every term, the replicated norm output too: half of one GPU's.
    let h8_tp2 = "estimate --model nemotron-h-8b --system dgx-h100 --gpus 2 --tp 2 --sequence-parallel --seq-len 4096 --global-batch 1 --precision fp8 --fp8-recipe current --flash-attention";
    close(
        drop(h8_tp2, "mlp"),
        24.0 * 4096.0 * (3.0 * 21504.0 - 4096.0) / 2.0,
        "mlp under TP 2",
    );
}

/// The hardware FLOPs of the MLP checkpoints per token, by hand (`2·w` for each layer's
/// block, `w = 3·h·f` gated, `2·h·f` squared ReLU):
/// - `moe`, Qwen3-30B-A3B: 48·2·(8·3·2048·768 + 2048·128) (the router's GEMM counted);
/// - `shared_experts`, Llama 4 Scout: 48·2·3·5120·8192;
/// - `mlp`, DeepSeek-V3's 3 dense layers: 3·2·3·7168·18,432;
/// - `mlp`, Nemotron-H 8B's 24 `-` layers: 24·2·2·4096·21,504;
/// - `moe`, Nemotron 3 Nano's 23 `E` layers: 23·2·(6·2·2688·1856 + 2·2688·3712 + 2688·128).
#[test]
fn mlp_checkpoints_count_in_the_hardware_flops() {
    let extra = |line: &str, modules: &str| extra_hardware_flops(line, modules) / 4096.0;
    let close = |got: f64, want: f64, what: &str| assert_close(got, want, 1e-9, what);
    let one = |m: &str| {
        format!(
            "estimate --model {m} --system dgx-h100 --gpus 1 --seq-len 4096 --global-batch 1 --precision bf16 --flash-attention"
        )
    };
    close(
        extra(&one("qwen3-30b-a3b"), "moe"),
        48.0 * 2.0 * (8.0 * 3.0 * 2048.0 * 768.0 + 2048.0 * 128.0),
        "Qwen3 moe",
    );
    close(
        extra(&one("llama4-scout"), "shared_experts"),
        48.0 * 2.0 * 3.0 * 5120.0 * 8192.0,
        "Scout shared_experts",
    );
    close(
        extra(&one("deepseek-v3"), "mlp"),
        3.0 * 2.0 * 3.0 * 7168.0 * 18432.0,
        "DeepSeek-V3 mlp",
    );
    close(
        extra(&one("nemotron-h-8b"), "mlp"),
        24.0 * 2.0 * 2.0 * 4096.0 * 21504.0,
        "Nemotron-H mlp",
    );
    // DeepSeek-V3's 58 MoE layers (61 less its 3 dense ones): top-8 of 2048, one shared
    // expert of 2048, a router over 256.
    close(
        extra(&one("deepseek-v3"), "moe"),
        58.0 * 2.0 * (8.0 * 3.0 * 7168.0 * 2048.0 + 3.0 * 7168.0 * 2048.0 + 7168.0 * 256.0),
        "DeepSeek-V3 moe",
    );
    close(
        extra(&one("nemotron-3-nano-30b-a3b"), "moe"),
        23.0 * 2.0 * (6.0 * 2.0 * 2688.0 * 1856.0 + 2.0 * 2688.0 * 3712.0 + 2688.0 * 128.0),
        "Nano moe",
    );
}

/// `--recompute-modules` takes Megatron-core's names and what Megatron-core accepts of
/// them; the plan shows them.
#[test]
fn recompute_modules_are_checked_and_shown() {
    let base = "estimate --model deepseek-v3 --system dgx-h100 --gpus 64 --ep 64 --global-batch 64";
    let with = |extra: &str| -> Vec<String> {
        format!("{base} {extra}")
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    fn args(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let ok = estimate_json(&args(&with("--recompute-modules mla_up_proj,layernorm")));
    assert_eq!(ok["plan"]["recompute_modules"], "layernorm,mla_up_proj");
    let none = estimate_json(&args(&with("")));
    assert_eq!(none["plan"]["recompute_modules"], "none");
    common::usage_error(
        &args(&with("--recompute-modules layernorm,moe_ac")),
        "unknown recompute module \"moe_ac\"",
    );
    common::usage_error(
        &args(&with("--recompute full --recompute-modules layernorm")),
        "full recomputation already recomputes every module",
    );
    common::usage_error(
        &cli("estimate --model llama3-8b --system dgx-h100 --gpus 8 --recompute-modules moe_act"),
        "moe_act needs an MoE model",
    );
    common::usage_error(
        &cli(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --recompute-modules mla_up_proj",
        ),
        "mla_up_proj needs a model with multi-latent attention",
    );
    // Where a module has nothing to recompute, or Megatron-core refuses it.
    for (line, msg) in [
        (
            "estimate --model llama3-8b --system dgx-h100 --gpus 8 --recompute-modules moe",
            "moe needs an MoE model",
        ),
        (
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --ep-overlap true --recompute-modules moe",
            "moe cannot be recomputed with the EP overlap",
        ),
        (
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --recompute-modules shared_experts",
            "shared_experts needs an MoE model with shared experts",
        ),
        (
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --recompute-modules mlp",
            "mlp recomputes dense MLP layers, and this model has none",
        ),
        (
            "estimate --model llama3-8b --system dgx-h100 --gpus 8 --recompute selective --recompute-modules core_attn",
            "--recompute selective already recomputes the core attention",
        ),
    ] {
        common::usage_error(&cli(line), msg);
    }
    // A hybrid without `-` layers has no dense MLP; one with them takes `mlp`.
    common::usage_error(
        &cli(
            "estimate --model nemotron-3-nano-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --recompute-modules mlp",
        ),
        "mlp recomputes dense MLP layers",
    );
    estimate_json(&cli(
        "estimate --model nemotron-h-8b --system dgx-h100 --gpus 8 --recompute-modules mlp,core_attn",
    ));
    // A hybrid of Mamba and MLP layers only has no attention core to recompute.
    let dir = common::tmp("no_attention");
    let file = dir.join("mamba-mlp.toml");
    let spec = std::fs::read_to_string("models/nemotron-h-8b.toml")
        .unwrap()
        .replace(
            "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
            "M-M-M-M--M-M-M-M-M--M-M-M-M-M--M-M-M-M-M--M-M-M-M-M-",
        )
        .replace("name = \"nemotron-h-8b\"", "name = \"mamba-mlp\"");
    std::fs::write(&file, spec).unwrap();
    let path = file.to_str().unwrap();
    common::usage_error(
        &[
            "estimate",
            "--model",
            path,
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--recompute-modules",
            "core_attn",
        ],
        "core_attn needs a model with attention layers",
    );
    // DeepSeek-V3's three dense layers take `mlp`, as NVIDIA's H100 recipe sets it.
    estimate_json(&cli(
        "estimate --model deepseek-v3 --system dgx-h100 --gpus 64 --ep 64 --etp 1 --global-batch 64 --recompute-modules mla_up_proj,mlp",
    ));
    let table = common::bin()
        .args(args(&with("--recompute-modules layernorm")))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("none + modules layernorm"), "{text}");
}

/// A sweep applies `--recompute-modules` to every plan but those with full recomputation,
/// which already recompute every module (and drops none for it).
#[test]
fn sweep_takes_the_recompute_modules() {
    let rows = |mode: &'static str| {
        let mut a = cli(
            "sweep --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --global-batch 64 --recompute-modules moe_act --top 3 --recompute",
        );
        a.push(mode);
        json(&a)
    };
    for (mode, want) in [("none", "moe_act"), ("full", "none")] {
        let v = rows(mode);
        let top = v["top"].as_array().unwrap();
        assert!(!top.is_empty());
        assert!(
            top.iter().all(|r| r["plan"]["recompute_modules"] == want),
            "{mode}: {top:?}"
        );
        assert!(
            !v["drops"].to_string().contains("recompute_modules"),
            "{}",
            v["drops"]
        );
    }
}

/// The dense layers sit on the first stage in place of MoE layers: Qwen3-30B-A3B with its
/// first two layers dense (`dense_layers = 2`, the model's dense FFN 6144) on one DGX H100,
/// EP 8, one stage, the full iteration captured (a dense layer also issues fewer host
/// launches, which would move the host's idle time). The stage time per micro-batch (the explain's "slowest stage") moves
/// from the all-MoE model's by `2·((F + B)_dense − (F + B)_MoE)`, the two "layer total"
/// lines of the explain (MoE first, dense second; each with its exposed communication).
#[test]
fn dense_layers_replace_moe_layers_on_the_first_stage() {
    let shown = common::text(&["show", "model", "qwen3-30b-a3b"]);
    let dense = shown.replace("experts = 128", "experts = 128\ndense_layers = 2");
    assert_ne!(dense, shown);
    let dir = common::tmp("dense_layers");
    let (p0, p2) = (dir.join("all-moe.toml"), dir.join("two-dense.toml"));
    std::fs::write(&p0, &shown).unwrap();
    std::fs::write(&p2, &dense).unwrap();
    let explain = |p: &std::path::Path| {
        let mut a = vec!["estimate", "--model", p.to_str().unwrap()];
        a.extend(["--system", "dgx-h100", "--gpus", "8", "--ep", "8"]);
        a.extend(["--seq-len", "4096", "--global-batch", "8", "--explain"]);
        a.extend(["--cuda-graphs", "full"]);
        String::from_utf8(common::bin().args(&a).output().unwrap().stdout).unwrap()
    };
    let stage = |text: &str| {
        let l = text
            .lines()
            .find(|l| l.contains("slowest stage per micro-batch"))
            .unwrap();
        common::micros(l, "slowest stage per micro-batch")
    };
    let (e0, e2) = (explain(&p0), explain(&p2));
    let totals: Vec<f64> = e2
        .lines()
        .filter(|l| l.contains("layer total:"))
        .map(|l| common::micros(l, "forward") + common::micros(l, "backward"))
        .collect();
    assert_eq!(totals.len(), 2, "{e2}");
    let hand = 2.0 * (totals[1] - totals[0]);
    let got = stage(&e2) - stage(&e0);
    assert!(
        hand < -3000.0,
        "two dense layers are faster here: {totals:?}"
    );
    // The stage times print four significant digits (±50 µs each at 350 ms).
    assert!((got - hand).abs() < 120.0, "{got} µs vs {hand} µs");
}

/// DeepSeek-V3's first three layers are dense (`first_k_dense_replace = 3`, with a gated MLP
/// of `intermediate_size` 18 432, against the experts' 2 048; its Hugging Face config), and
/// they are timed as such: the explain's second layer block multiplies M = s = 4096 tokens
/// by the dense MLP's whole width, N = 2·18 432 = 36 864 in and K = 18 432 out, one GEMM
/// each, where the MoE block runs 8 local experts of N = 2·2048 (EP 32 of 256 experts).
#[test]
fn leading_dense_layers_are_timed_as_dense() {
    // The plan does not fit an H800 (exit 3); its explain is printed all the same.
    let out = common::bin()
        .args([
            "estimate",
            "--model",
            "deepseek-v3",
            "--system",
            "dgx-h800",
            "--gpus",
            "256",
            "--pp",
            "8",
            "--ep",
            "32",
            "--global-batch",
            "256",
            "--precision",
            "fp8",
            "--flash-attention",
            "--explain",
        ])
        .output()
        .unwrap();
    assert!(matches!(out.status.code(), Some(0 | 3)));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("GEMM MLP in: M=4096 N=4096 K=7168 ×8 experts"));
    assert!(text.contains("GEMM MLP in: M=4096 N=36864 K=7168 ×1:"));
    assert!(text.contains("GEMM MLP out: M=4096 N=7168 K=18432 ×1:"));
    let totals: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("layer total:"))
        .collect();
    assert_eq!(totals.len(), 2);
    assert_ne!(totals[0], totals[1]);
}

/// `--explain` names HybridEP's in-domain rate on the layers that dispatch with it: the
/// EP group's in-domain ranks and η of them (8 ranks in one DGX H100, and 8 of EP 16 over
/// two nodes: 0.848; 72 on an NVL72 rack: held at η(36) = 0.759), across nodes the copies
/// per token, η_x and both phases' times, and nothing for NCCL's all-to-all or a dense
/// model.
#[test]
fn explain_names_hybridep_in_domain_rate() {
    let line = |a: &'static str| explain_line(&cli(a), "EP all-to-all");
    let one = line(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --global-batch 8 --ep-dispatch hierarchical",
    );
    assert!(
        one.contains("its 8 ranks at η(8) = 0.848 of NCCL's"),
        "{one}"
    );
    let two = line(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --ep 16 --etp 1 --global-batch 16 --ep-dispatch hierarchical",
    );
    assert!(two.contains("its 8 ranks at η(8) = 0.848"), "{two}");
    // Across the two nodes: 1.994 distinct nodes per token (hierarchical_dispatch_by_hand),
    // η_x(2) = 0.716, and the two phases of one all-to-all, 510.8 µs across (the IB
    // phase of that test) and 377.7 µs inside.
    assert!(
        two.contains("across its 2 nodes 1.994 copies per token at η_x(2) = 0.716")
            && two.contains("max(across 510.8 us, inside 377.7 us)"),
        "{two}"
    );
    assert!(!one.contains("η_x"), "{one}");
    let rack = line(
        "estimate --model qwen3-235b-a22b --system gb200-nvl72 --gpus 64 --ep 64 --etp 1 --global-batch 64 --ep-dispatch hierarchical",
    );
    assert!(rack.contains("its 64 ranks at η(64) = 0.759"), "{rack}");
    let nccl = line(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --etp 1 --global-batch 8 --ep-dispatch alltoall",
    );
    assert!(!nccl.contains("HybridEP"), "{nccl}");
    let dense = explain_line(
        &cli(
            "estimate --model llama3-8b --system dgx-h100 --gpus 8 --global-batch 8 --ep-dispatch hierarchical",
        ),
        "TP/SP per layer",
    );
    assert!(!dense.contains("HybridEP"), "{dense}");
}

/// The FP8 recipe's cost against the BF16 one on Hopper MoE, from two published runs of the
/// same model on the same 16 H100 (Qwen3-30B-A3B, TP 1 × PP 1 × EP 16 over two DGX nodes,
/// micro-batch 1, global batch 1024, sequence 4096, HybridEP, force-balanced routing):
///
/// - BF16: 20.147 s per step (Megatron-Bridge `docs/training/moe-optimization.md`, "Short-run
///   H100 sanity check", at 067f987df0): EP overlap on, CUDA graphs over `moe_router` and
///   `moe_preprocess` (`perf_recipes/qwen/h100/qwen3_moe.py`,
///   `qwen3_30b_a3b_pretrain_16gpu_h100_bf16_config`);
/// - FP8 with current scaling: 29.701 s (runs-2025.csv row 19, container 26.06): no EP
///   overlap, graphs over `attn`, `moe_router`, `moe_preprocess` (the `fp8cs` recipe beside
///   it).
///
/// Measured FP8 / BF16 = 29.701 / 20.147 = 1.474. Both estimates are ~25 % fast (the H100
/// MoE gap of docs/validation-modern.md), but their ratio is the 8-bit path's own cost
/// (quantize kernels, per-expert casts, the FP8 GEMM rates, the exposed all-to-all without
/// the overlap), and it holds within 10 %: the gap is not in the FP8 path.
#[test]
fn h100_moe_fp8_against_bf16_as_published() {
    let run = |extra: &str| {
        let mut a = cli(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --tp 1 --pp 1 --ep 16 \
             --etp 1 --seq-len 4096 --micro-batch 1 --global-batch 1024 --ep-dispatch \
             hierarchical --flash-attention --cross-entropy te",
        );
        a.extend(extra.split_whitespace());
        estimate_json(&a)["iteration_time_s"].as_f64().unwrap()
    };
    let bf16 = run("--precision bf16 --ep-overlap true --cuda-graphs moe_router,moe_preprocess");
    let fp8 = run(
        "--precision fp8 --fp8-recipe current --fp8-params --ep-overlap false \
         --cuda-graphs attn,moe_router,moe_preprocess",
    );
    let measured = 29.701 / 20.147;
    let ratio = fp8 / bf16;
    assert!(
        (ratio / measured - 1.0).abs() < 0.10,
        "FP8/BF16 {ratio:.3} against the measured {measured:.3} (BF16 {bf16:.2} s, FP8 {fp8:.2} s)"
    );
}

/// MoE memory as a published run measured it: the 16×H100 Qwen3-30B-A3B BF16 smoke run of
/// Megatron-Bridge `docs/training/moe-optimization.md` ("Short-run H100 sanity check", at
/// 067f987df0: TP 1 × PP 1 × EP 16, micro-batch 1, sequence 4096, the `alltoall` dispatcher,
/// CUDA graphs over `moe_router` and `moe_preprocess`) reports a peak of 61.351 GB allocated
/// (`torch.cuda.max_memory_allocated` over 1e9: `report_memory` in Megatron-Bridge's
/// `training/utils/train_utils.py`), which excludes the CUDA context, NCCL and the allocator's
/// cached free blocks, as the estimate's per-device total does (the reserve is apart). Nothing
/// of the memory model was fitted on this run. By hand, the largest terms: 3.353e9 parameters
/// on a device (8 local experts × 48 layers × 3·2048·768 = 1.812e9, the rest dense), 2 B each
/// for the weights and the gradients, 12 B of Adam state per parameter over its shard
/// (dense over DP 16, experts over expert-DP 1): 12 × (1.541e9/16 + 1.812e9) = 22.9e9 B.
#[test]
fn h100_moe_peak_memory_as_published() {
    let d = estimate_json(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 16 --tp 1 --pp 1 --ep 16 \
         --etp 1 --seq-len 4096 --micro-batch 1 --global-batch 1024 --precision bf16 \
         --flash-attention --cross-entropy te --cuda-graphs moe_router,moe_preprocess",
    ));
    let m = &d["memory_breakdown"];
    let get = |k: &str| m[k].as_f64().unwrap();
    approx::assert_relative_eq!(get("weights_bytes"), 2.0 * 3.353e9, max_relative = 1e-3);
    approx::assert_relative_eq!(get("optimizer_states_bytes"), 22.9e9, max_relative = 1e-3);
    let total = d["memory_per_device_bytes"].as_f64().unwrap();
    let measured = 61.351e9;
    assert!(
        (total / measured - 1.0).abs() < 0.05,
        "{total:.4e} B against the measured peak {measured:.4e} B"
    );
}

/// An MoE layer's compute is the sum of its parts: on one device with every part captured
/// (no communication, no host time) the explain's layer total is its GEMMs (QKV, the
/// projection, both expert GEMMs over 128 local experts, the router), the fused attention
/// and the memory-bound kernels (with the permutation), forward and backward, to the
/// printed digits. Qwen3-30B-A3B, sequence 4096, BF16.
#[test]
fn an_moe_layer_is_the_sum_of_its_parts() {
    let out = common::computed(&cli(
        "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 1 --tp 1 --ep 1 --seq-len 4096 --global-batch 1 --cuda-graphs full --explain",
    ));
    let line = |needle: &str| line_of(&out, needle);
    let us = common::micros;
    let gemms = [
        "GEMM QKV:",
        "GEMM attention projection:",
        "GEMM MLP in:",
        "GEMM MLP out:",
        "GEMM router:",
    ];
    let att = line("attention (fused):");
    let mem = line("memory-bound: LayerNorm ×2");
    let fwd: f64 = gemms.iter().map(|g| us(line(g), "fwd")).sum::<f64>()
        + us(att, "fwd =")
        + us(mem, "): fwd");
    let bwd: f64 = gemms.iter().map(|g| us(line(g), "bwd")).sum::<f64>()
        + us(att, "bwd =")
        + us(mem, "us, bwd");
    let total = line("layer total:");
    for (got, want, what) in [
        (us(total, "forward"), fwd, "forward"),
        (us(total, "backward"), bwd, "backward"),
    ] {
        assert!(
            (got / want - 1.0).abs() < 1e-3,
            "{what}: {got} µs against the parts' {want} µs"
        );
    }
}

/// The permutation's bytes follow the tokens a rank dispatches, `T = b·s·etp/t`:
/// `6·k·T·h + 2·T·h`. Qwen3-30B-A3B (k = 8, h = 2048), sequence 4096, TP 2: with expert TP 2
/// each rank permutes the whole sequence, T = 4096: 6·8·4096·2048 + 2·4096·2048 =
/// 4.1943e8 B; with expert TP 1 its half, 2.0972e8 B.
#[test]
fn permute_bytes_follow_the_expert_tp_share() {
    for (etp, want) in [("2", "4.1943e8 B"), ("1", "2.0972e8 B")] {
        let mut a = cli(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 2 --tp 2 --ep 1 --seq-len 4096 --global-batch 1 --cuda-graphs full --explain --etp",
        );
        a.push(etp);
        let out = common::computed(&a);
        let l = line_of(&out, "MoE permute + unpermute:");
        assert!(
            l.contains(&format!(": {want} in 2 kernels")),
            "ETP {etp}: {l}"
        );
    }
}

/// Llama 4 Scout over EP 16 on 32 B200 (two nodes), one sequence of 4096 per micro-batch,
/// global batch 64, with `rest` (TP, precision, CUDA graphs, …): without and with
/// `--shared-expert-overlap`.
fn scout_with_shared_overlap(rest: &str) -> (Vec<String>, Vec<String>) {
    let base: Vec<String> = format!(
        "estimate --model llama4-scout --system dgx-b200 --gpus 32 --pp 1 --ep 16 --seq-len 4096 --micro-batch 1 --global-batch 64 {rest}"
    )
    .split_whitespace()
    .map(String::from)
    .collect();
    let mut on = base.clone();
    on.push("--shared-expert-overlap".into());
    (base, on)
}

/// The shared-expert overlap (`--shared-expert-overlap`, Megatron-core
/// `moe_shared_expert_overlap`) by hand, on Llama 4 Scout over EP 16 (two B200 nodes), one
/// micro-batch of 4096, full-iteration graphs (no host time). Each all-to-all `a/2` runs
/// beside its side of the shared expert, a bulk window with κ = 0.189 in which it runs at
/// 1/(1 + σ) of its rate while the side's work runs (σ = 0.31, the device default): the
/// side stretches to `S' = S + κ·min(1.31·a/2, S)` and, when `S' < 1.31·a/2`,
/// `exposed = a/2 − S'/1.31` (none otherwise), slowdown `κ·min(1.31·a/2, S)`; forward
/// FC1 and SwiGLU (6 B per element of 8192 at 8 TB/s × 0.7, plus 4 µs) beside the dispatch
/// and FC2 beside the combine, backward FC2's gradients beside the combine's and FC1's and
/// SwiGLU's (10 B per element) beside the dispatch's. In FP8 with current scaling each
/// side also quantizes its GEMM's input (forward: FC1's 4096 × 5120, FC2's 4096 × 8192) or
/// output gradient (backward: FC2's 4096 × 5120, FC1's 4096 × 2·8192): an amax pass
/// reading 2 B and a cast reading 2 B and writing 1 B, no transposed copy on Blackwell,
/// whose FP8 GEMMs take every layout: 5 B per element in 2 kernels. GEMM times from the explain lines; 48 MoE layers × 2 micro-batches; the DP
/// reduction after the backward (`--dp-overlap false`), so the interference is the
/// all-to-alls' alone.
#[test]
fn shared_expert_overlap_by_hand() {
    shared_overlap_case("--tp 1 --precision bf16", 0.0, 1.0);
    shared_overlap_case("--tp 1 --precision fp8 --fp8-recipe current", 5.0, 1.0);
    shared_overlap_case("--tp 2 --precision bf16", 0.0, 2.0);
    shared_overlap_case("--tp 2 --precision fp8 --fp8-recipe current", 5.0, 2.0);
}

/// One case of [`shared_expert_overlap_by_hand`]: `cast` bytes per quantized element (0 in
/// 16 bits), TP `t` (with SP each rank runs `8192/t` of the shared expert's width on the
/// sequence's 4096 tokens; DP = 32/t, so 2·t micro-batches).
fn shared_overlap_case(precision: &str, cast: f64, t: f64) {
    let (base, on) = scout_with_shared_overlap(&format!(
        "{precision} --cuda-graphs full --dp-overlap false"
    ));
    let base: Vec<&str> = base.iter().map(String::as_str).collect();
    let on: Vec<&str> = on.iter().map(String::as_str).collect();
    let (off_v, on_v) = (estimate_json(&base), estimate_json(&on));
    let of = |line: &str, key: &str| common::micros(line, key) * 1e-6;
    let fc1 = explain_line(&on, "GEMM shared MLP in");
    let fc2 = explain_line(&on, "GEMM shared MLP out");
    let line = explain_line(&on, "EP all-to-all");
    let a = line.split("EP all-to-all ").nth(1).unwrap();
    let a = of(
        &format!("a = {}", a.split(" per pass").next().unwrap()),
        "a ",
    );
    let (tokens, h, f) = (4096.0, 5120.0, 8192.0);
    let width = tokens * f / t;
    let cast_k = if cast > 0.0 { 2.0 } else { 0.0 };
    let mem = |bytes: f64, kernels: f64| bytes / (8e12 * 0.7) + kernels * 4e-6;
    let sides = [
        of(&fc1, "fwd ") + mem(6.0 * width + cast * tokens * h, 1.0 + cast_k),
        of(&fc2, "fwd ") + mem(cast * width, cast_k),
        of(&fc2, "bwd ") + mem(cast * tokens * h, cast_k),
        of(&fc1, "bwd ") + mem(10.0 * width + cast * 2.0 * width, 1.0 + cast_k),
    ];
    let (kappa, sigma) = (0.189, 0.31);
    let half = a / 2.0;
    let slowed = half * (1.0 + sigma);
    let stretched = |s: f64| s + kappa * slowed.min(s);
    let exposed: f64 = sides
        .iter()
        .map(|&s| (half - stretched(s) / (1.0 + sigma)).max(0.0))
        .sum();
    let slowdown: f64 = sides.iter().map(|&s| kappa * slowed.min(s)).sum();
    let n = 48.0 * 2.0 * t;
    assert_close(
        ep(&off_v, "exposed_s"),
        n * 2.0 * a,
        2e-3,
        "without: 2a exposed",
    );
    assert_close(ep(&on_v, "exposed_s"), n * exposed, 2e-3, "exposed");
    assert_close(
        ep(&on_v, "hidden_s"),
        n * (2.0 * a - exposed),
        2e-3,
        "hidden",
    );
    let interference =
        |v: &serde_json::Value| v["time_breakdown"]["interference_s"].as_f64().unwrap();
    assert_close(
        interference(&on_v) - interference(&off_v),
        n * slowdown,
        2e-3,
        "slowdown",
    );
    // Some sides are shorter than their all-to-all (FC2 forward at TP 1; more at TP 2):
    // part shows, the rest hides.
    assert!(exposed > 0.0 && exposed < 2.0 * a, "{exposed} of {a}");
    let time = |v: &serde_json::Value| v["iteration_time_s"].as_f64().unwrap();
    assert_close(
        time(&off_v) - time(&on_v),
        n * (2.0 * a - exposed - slowdown),
        2e-3,
        "iteration",
    );
}

/// Under the shared-expert overlap the dispatcher launches the shared experts after the
/// token-count copy, and Megatron-core leaves them out of the router's CUDA graph: with
/// `moe_router` captured, the forward's host operations grow by the shared expert's two
/// Transformer Engine GEMM calls and its activation (2 × 2.7 + 1 = 6.4), the backward's
/// by their four gradient calls and the activation's (4 × 2.7 + 1 = 11.8), and the
/// forward's launches after the copy (`T_exp`) by the same 6.4. The GPU work between the
/// copy and the experts (`D`) is the forward dispatch's exposed part: `a/2` without the
/// overlap; with it the dispatch runs at 1/1.31 of its rate (σ = 0.31) beside FC1 and
/// SwiGLU (`S` = 443.9 µs + 6·4096·8192 B / (8 TB/s × 0.7) + 4 µs = 483.8 µs, stretched by
/// κ = 0.189 to `S'` = 575.3 µs, shorter than the slowed dispatch's 607.3 µs), so by the
/// end of `S'` it has moved `S'/1.31` = 439.2 µs of its `a/2` = 463.6 µs and
/// `D = a/2 − S'/1.31` = 24.4 µs.
#[test]
fn shared_expert_overlap_takes_the_shared_experts_out_of_the_router_graph() {
    let (base, on) = scout_with_shared_overlap("--tp 1 --precision bf16 --cuda-graphs moe_router");
    let base: Vec<&str> = base.iter().map(String::as_str).collect();
    let on: Vec<&str> = on.iter().map(String::as_str).collect();
    let ops = |args: &[&str], key: &str| -> f64 {
        let line = explain_line(args, "host (CUDA graphs");
        let part = line.split(key).nth(1).unwrap();
        part.split(" ops").next().unwrap().trim().parse().unwrap()
    };
    let df = ops(&on, "forward ") - ops(&base, "forward ");
    let db = ops(&on, "backward ") - ops(&base, "backward ");
    assert!((df - 6.4).abs() < 0.05, "forward {df}");
    assert!((db - 11.8).abs() < 0.05, "backward {db}");
    let copy = |args: &[&str]| explain_line(args, "after the token-count copy");
    let t_exp = |args: &[&str]| -> f64 {
        let line = copy(args);
        let part = line.split("T_exp = ").nth(1).unwrap();
        part.split(" ops").next().unwrap().trim().parse().unwrap()
    };
    let de = t_exp(&on) - t_exp(&base);
    assert!((de - 6.4).abs() < 0.05, "experts' launches {de}");
    let a = explain_line(&base, "EP all-to-all");
    let a = a.split("EP all-to-all ").nth(1).unwrap();
    let a = common::micros(
        &format!("a = {}", a.split(" per pass").next().unwrap()),
        "a ",
    );
    assert_close(
        common::micros(&copy(&base), "dispatch D "),
        a / 2.0,
        2e-3,
        "D",
    );
    let fc1 = common::micros(&explain_line(&on, "GEMM shared MLP in"), "fwd ");
    let s = fc1 + 6.0 * 4096.0 * 8192.0 / (8e12 * 0.7) * 1e6 + 4.0;
    assert_close(s, 483.8, 1e-3, "S");
    let want = a / 2.0 - 1.189 * s / 1.31;
    assert_close(common::micros(&copy(&on), "dispatch D "), want, 2e-3, "D");
    assert!((want - 24.4).abs() < 0.5, "{want}");
}

/// The shared-expert overlap where Megatron-core runs it, and refused elsewhere.
#[test]
fn shared_expert_overlap_is_checked() {
    let scout = "estimate --model llama4-scout --system dgx-b200 --gpus 32 --ep 16 --seq-len 4096 --global-batch 64 --shared-expert-overlap";
    let refused = |extra: &str, what: &str| {
        let mut a = cli(scout);
        a.extend(extra.split_whitespace());
        common::usage_error(&a, what);
    };
    refused("--ep-overlap", "cannot run beside the EP overlap");
    refused("--pp 2 --schedule dualpipe", "cannot run with DualPipe");
    refused(
        "--recompute-modules shared_experts",
        "cannot run with shared_experts recomputed",
    );
    common::usage_error(
        &cli(
            "estimate --model qwen3-30b-a3b --system dgx-h100 --gpus 8 --ep 8 --global-batch 8 --shared-expert-overlap",
        ),
        "needs an MoE model with shared experts",
    );
    common::usage_error(
        &cli(
            "estimate --model nemotron3-super --system gb300-nvl72 --gpus 64 --ep 64 --global-batch 64 --seq-len 4096 --shared-expert-overlap",
        ),
        "MoE latent projections",
    );
    // A model file may give a shared expert beside a single routed one: that is a dense
    // model to the estimate (the shared width is unused), and has nothing to overlap.
    let dir = common::tmp("shared_overlap_dense");
    let model = dir.join("dense-with-shared.toml");
    let dense = text(&cli("show model llama3-8b"));
    std::fs::write(
        &model,
        format!("{dense}\n[transformer.moe]\nexperts = 1\ntop_k = 1\nshared_experts = 1\n"),
    )
    .unwrap();
    let path = model.to_str().unwrap();
    common::usage_error(
        &[
            "estimate",
            "--model",
            path,
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--global-batch",
            "8",
            "--shared-expert-overlap",
        ],
        "needs an MoE model with shared experts",
    );
    let v = estimate_json(&cli(scout));
    assert_eq!(v["plan"]["shared_expert_overlap"], true);
}

/// `sweep --shared-expert-overlap` reaches every plan it ranks, and hides time.
#[test]
fn sweep_takes_the_shared_expert_overlap() {
    let base = cli(
        "sweep --model llama4-scout --system dgx-b200 --gpus 32 --seq-len 4096 --global-batch 64 --top 5",
    );
    let plain = json(&base);
    let over = json(&[&base[..], &["--shared-expert-overlap"]].concat());
    let rows = over["top"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter()
            .all(|r| r["plan"]["shared_expert_overlap"] == true)
    );
    let best = |v: &serde_json::Value| v["top"][0]["iteration_time_s"].as_f64().unwrap();
    assert!(best(&over) <= best(&plain));
}

/// With a pipeline the EP overlap pairs passes only after the interleaved schedule's
/// warm-up: Megatron-core's `get_pp_rank_microbatches` gives pipeline rank 0
/// `2·(p − 1) + (v − 1)·p` warm-up forwards (its micro-batch group of `p`) plus the one the
/// overlap adds, each one model chunk, and as many cool-down backwards, all alone. On
/// PP 2 × VP 2 that is W = 2 + 2 + 1 = 5 chunks, 5/2 micro-batches' worth of each
/// direction: of m micro-batches `m − 5/2` hide their all-to-alls (H per micro-batch),
/// so hidden(8) / (hidden(16) − hidden(8)) = 5.5/8. With m = 2 there are only
/// m·v = 4 chunks, all in the warm-up: nothing hides. On PP 4 × VP 2 (32 GPUs),
/// W = 2·3 + 1·4 + 1 = 11 chunks, 5.5 micro-batches' worth: hidden(16) / (hidden(32) −
/// hidden(16)) = 10.5/16.
#[test]
fn ep_overlap_leaves_the_pipeline_warm_up_alone() {
    let hidden = |gpus: &'static str, pp: &'static str, gb: &'static str| {
        let mut a = cli(
            "estimate --model qwen3-30b-a3b --system dgx-b200 --virtual-stages 2 --ep 8 \
             --etp 1 --seq-len 4096 --cuda-graphs full --ep-overlap",
        );
        a.extend(["--gpus", gpus, "--pp", pp, "--global-batch", gb]);
        let v = estimate_json(&a);
        v["time_breakdown"]["communication"]["ep"]["hidden_s"]
            .as_f64()
            .unwrap()
    };
    let (h8, h16) = (hidden("16", "2", "64"), hidden("16", "2", "128"));
    assert!(h8 > 0.0);
    approx::assert_relative_eq!(h8 / (h16 - h8), 5.5 / 8.0, max_relative = 1e-9);
    assert_eq!(hidden("16", "2", "16"), 0.0);
    let (h16, h32) = (hidden("32", "4", "128"), hidden("32", "4", "256"));
    approx::assert_relative_eq!(h16 / (h32 - h16), 10.5 / 16.0, max_relative = 1e-9);
}

/// The EP overlap where Megatron-core refuses it (`TransformerConfig.__post_init__`):
/// without expert parallelism, with a pipeline but no virtual stages, with more than one
/// MTP layer (Nemotron 3 Super runs two), with the `moe` or `mlp` graph scope; each a usage
/// error naming the flag and the reason. With virtual stages, or DualPipe, it runs.
#[test]
fn ep_overlap_is_checked() {
    let q = "estimate --model qwen3-30b-a3b --system dgx-b200 --seq-len 4096 --etp 1 --ep-overlap";
    let case = |extra: &str, what: &str| {
        let line = format!("{q} {extra}");
        let args: Vec<&str> = line.split_whitespace().collect();
        common::usage_error(&args, what);
        common::usage_error(&args, "ep_overlap");
    };
    case("--gpus 8 --ep 1 --global-batch 32", "ep > 1");
    case(
        "--gpus 16 --pp 2 --ep 8 --global-batch 64",
        "needs virtual stages",
    );
    case(
        "--gpus 8 --ep 8 --global-batch 32 --cuda-graphs moe",
        "moe or mlp CUDA-graph scope",
    );
    let super3 = "estimate --model nemotron3-super --system gb300-nvl72 --gpus 64 --ep 64 \
                  --etp 1 --global-batch 64 --ep-overlap";
    common::usage_error(
        &super3.split_whitespace().collect::<Vec<_>>(),
        "at most one MTP layer",
    );
    // Virtual stages with a pipeline, any schedule without one.
    for ok in [
        "--gpus 16 --pp 2 --virtual-stages 2 --ep 8 --global-batch 64",
        "--gpus 8 --ep 8 --global-batch 32 --schedule 1f1b",
    ] {
        let line = format!("{q} {ok}");
        common::bin().args(line.split_whitespace()).assert().code(0);
    }
    // One MTP layer is allowed (Qwen3-Next-80B-A3B has one).
    let next = "estimate --model qwen3-next-80b-a3b --system gb200-nvl72 --gpus 64 --pp 2 \
                --virtual-stages 4 --ep 32 --etp 1 --seq-len 4096 --micro-batch 2 \
                --global-batch 256 --ep-overlap";
    common::bin().args(next.split_whitespace()).assert().code(0);
}

//! The MoE and context-parallel communication terms against the textbook α-β costs worked
//! out by hand: expert-parallel dispatch and combine (flat and hierarchical), their
//! overlap with another micro-batch, and the context-parallel exchanges (ring: key/value
//! blocks point to point; Ulysses: all-to-alls). Each class's exposed + hidden time is the
//! sum of its collectives, whatever the windows hide, so these tests pin the terms
//! themselves (`tests/overlap.rs` checks the windows); each fails if its term changes by
//! 5%. (Flat dispatch on the DGX H100 preset is also in `tests/moe_frontier.rs`.)

use crate::common;
use crate::terms_support;

use astrolabe::catalog;
use astrolabe::estimate::{CommClass, Estimate};
use astrolabe::parallel::{CpKind, EpDispatch, PlanSpec};
use terms_support::{H, KAPPA, L, S, SIGMA, all_to_all, close, model, run, send, system};

fn class_total(e: &Estimate, c: CommClass) -> f64 {
    let x = e.time.class(c);
    x.exposed.get() + x.hidden.get()
}

/// Mixtral 8x7B (Jiang et al. 2024): 32 layers, h 4096, s 4096, 8 experts, top-2, on 8
/// GPUs = 2 nodes of 4 (400 GB/s, 2 µs inside, 50 GB/s, 5 µs across), TP 1, EP 8,
/// m = 2 micro-batches of one sequence.
fn mixtral(dispatch: EpDispatch) -> Estimate {
    mixtral_on(
        "switch(4, 400GB/s, 2us) x switch(2, 50GB/s, 5us)",
        dispatch,
        false,
    )
}

/// [`mixtral`] on another network, DP overlap off.
fn mixtral_on(net: &str, dispatch: EpDispatch, ep_overlap: bool) -> Estimate {
    let sys = system(net);
    let m = catalog::model("mixtral-8x7b").unwrap();
    let plan = PlanSpec {
        gpus: Some(8),
        ep: 8,
        micro_batch: 1,
        global_batch: Some(16),
        ep_dispatch: dispatch,
        ep_overlap,
        dp_overlap: false,
        flash_attention: true,
        ..PlanSpec::default()
    };
    run(&m, &sys, plan)
}

#[test]
fn ep_dispatch_and_combine_flat() {
    // Per layer and micro-batch: dispatch and combine forward, and both again backward:
    // 4 all-to-alls of b·s·k·h bf16 = 4096·2·4096·2 B over the EP group. The group spans
    // both dimensions; NCCL runs an all-to-all as one flat exchange whose inter-node share
    // (1/2 of each rank's buffer leaves the node) bounds it, and the latency of the path is
    // paid once per dimension: α₀ + α₁ + (p₁−1)/p₁ · n / B₁ with the NIC (50 GB/s) the
    // bottleneck (the NVSwitch carries 3/8 of n at 400 GB/s: 8× less time).
    let e = mixtral(EpDispatch::Alltoall);
    let n = S * 2.0 * 2.0 * H * 2.0; // s = 4096 = 2·S
    let a2a = 2e-6 + 5e-6 + 0.5 * n / 50e9;
    let mb = e.plan.micro_batches as f64; // global batch 16 over DP 8
    assert_eq!(mb, 2.0);
    let want = mb * 32.0 * 4.0 * a2a;
    close(
        e.time.class(CommClass::Ep).exposed.get(),
        want,
        1e-9,
        "EP exposed",
    );
    close(
        e.time.class(CommClass::Ep).bytes.get(),
        mb * 32.0 * 4.0 * n,
        1e-12,
        "EP bytes",
    );
}

#[test]
fn ep_hierarchical_dispatch_crosses_the_network_once_per_node() {
    // DeepSeek-V3 §3.2.2 (DeepEP): each token crosses the scale-out network once per
    // destination node, d = N·(1 − C(E − E/N, k)/C(E, k)) copies: 8 experts on N = 2
    // nodes, k = 2: d = 2·(1 − C(4,2)/C(8,2)) = 2·(1 − 6/28) = 11/7; then it is forwarded
    // to its k experts inside the node. The two all-to-alls are pipelined: max of
    //   across: α₁ + (2−1)/2 · 4096·d·4096·2 B / (η_x(2)·50 GB/s)
    //   inside: α₀ + (4−1)/4 · 4096·2·4096·2 B / (η(4)·400 GB/s)
    // with HybridEP's measured rates (DeepEP hybrid-ep `docs/README_Hybrid-EP.md`, 16 SMs,
    // kernel time): across 2 H100 nodes 71.71 / 62.95 GB/s (dispatch / combine, counting
    // the bytes to both nodes) against NCCL's 47·2/1, η_x(2) = 0.716; inside a domain of
    // 8 or fewer the GB200 8-rank 750.15 / 684.27 against 740·8/7, η = 0.848 (across ≈
    // 740 µs, inside ≈ 150 µs), 4 per layer and micro-batch.
    let e = mixtral(EpDispatch::Hierarchical);
    let d = 2.0 * (1.0 - 6.0 / 28.0);
    let tokens = 2.0 * S;
    let eta_x2 = 0.5 * (71.71 + 62.95) / (2.0 * 47.0);
    let eta8 = 0.5 * (750.15 + 684.27) * 7.0 / (8.0 * 740.0);
    let across = all_to_all(tokens * d * H * 2.0 / eta_x2, 2.0, 5e-6, 50e9);
    let inside = all_to_all(tokens * 2.0 * H * 2.0 / eta8, 4.0, 2e-6, 400e9);
    assert!(across > 4.0 * inside);
    let mb = e.plan.micro_batches as f64;
    close(
        e.time.class(CommClass::Ep).exposed.get(),
        mb * 32.0 * 4.0 * across.max(inside),
        1e-9,
        "hierarchical EP exposed",
    );
}

#[test]
fn ep_overlap_hides_the_same_all_to_alls() {
    // With Megatron-core's 1F1B all-to-all overlap the same 4 all-to-alls per layer run
    // beside another micro-batch's compute G (forward + backward of a layer, ≈ 41 ms):
    // exposed + hidden is still their sum. The 0.5 GB/s network makes them far longer
    // (C = 2 × 134 ms > G·(1 + κ)): every part of G is stretched by κ (interference κ·G),
    // and each all-to-all runs at 1/(1 + σ) of its rate while that compute runs beside it
    // (`windows::beside`), so the four take 4a + σ/(1 + σ)·G(1 + κ) and hide
    // G(1 + κ)/(1 + σ): hidden = (1 + κ)/(κ·(1 + σ)) · interference (DP overlap off: the
    // EP windows are the only interference).
    let e = mixtral_on(
        "switch(4, 400GB/s, 2us) x switch(2, 0.5GB/s, 5us)",
        EpDispatch::Alltoall,
        true,
    );
    let n = S * 2.0 * 2.0 * H * 2.0;
    let a2a = 2e-6 + 5e-6 + 0.5 * n / 0.5e9;
    let want = 2.0 * 32.0 * 4.0 * a2a;
    close(
        class_total(&e, CommClass::Ep),
        want,
        1e-9,
        "EP exposed + hidden",
    );
    let x = e.time.class(CommClass::Ep);
    close(
        x.hidden.get(),
        (1.0 + KAPPA) / (KAPPA * (1.0 + SIGMA)) * e.time.interference.get(),
        1e-9,
        "EP hidden",
    );
    assert!(x.exposed.get() > 0.3 * want, "{x:?}");
}

/// The term-test model with context parallelism `cp` of `kind` on a 2-port switch
/// (100 GB/s, 1 µs), m = 2 micro-batches.
fn cp2(kind: CpKind) -> Estimate {
    run(
        &model(),
        &system("switch(2, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(2),
            cp: 2,
            cp_kind: kind,
            micro_batch: 1,
            global_batch: Some(2),
            flash_attention: true,
            ..PlanSpec::default()
        },
    )
}

#[test]
fn cp_ring_passes_key_value_blocks_c_minus_1_times() {
    // Ring attention (Liu et al. 2023; Megatron-LM p2p CP): each rank holds s/c = 1024
    // tokens; forward sends its K and V block, b·(s/c)·kv·(d_k + d_v) bf16 = 1024·32·256·2
    // B, c − 1 = 1 time; backward sends K, V and their gradients, twice the bytes. One
    // send: α + n/B. Per micro-batch, 16 layers.
    let e = cp2(CpKind::Ring);
    let block = S / 2.0 * 32.0 * 256.0 * 2.0;
    let per_layer = send(block, 1e-6, 100e9) + send(2.0 * block, 1e-6, 100e9);
    close(
        class_total(&e, CommClass::Cp),
        2.0 * L * per_layer,
        1e-9,
        "CP ring exposed + hidden",
    );
    close(
        e.time.class(CommClass::Cp).bytes.get(),
        2.0 * L * 3.0 * block,
        1e-12,
        "CP ring bytes",
    );
}

#[test]
fn cp_all_to_all_exchanges_qkv_and_the_output() {
    // Ulysses (Jacobs et al. 2023 §3.1): per pass, an all-to-all of Q, K, V (3h wide, MHA)
    // and one of the attention output (h wide) for the rank's s/c = 1024 tokens, bf16:
    // α + (c−1)/c · n/B each, exposed; forward and backward, 16 layers, 2 micro-batches.
    let e = cp2(CpKind::A2a);
    let tokens = S / 2.0;
    let pass = all_to_all(tokens * 3.0 * H * 2.0, 2.0, 1e-6, 100e9)
        + all_to_all(tokens * H * 2.0, 2.0, 1e-6, 100e9);
    let cp = e.time.class(CommClass::Cp);
    close(
        cp.exposed.get(),
        2.0 * L * 2.0 * pass,
        1e-9,
        "CP a2a exposed",
    );
    assert_eq!(cp.hidden.get(), 0.0);
}

/// The ring's windows: each key/value transfer runs beside the attention of the block
/// already held, `T_attention / c` (a bulk window: `o = min(C, W)`, slowdown `κ·o`,
/// exposed `max(0, C − W − κ·o)`). Llama 3 8B on 16 H100s, TP 8, CP 2 across the two nodes
/// (InfiniBand 47 GB/s, 14 µs), one sequence of 1024: each rank holds 512 tokens and one
/// KV head, so a forward block is 512·1·256·2 = 262 144 B (backward twice that). The
/// fused attention on this rank (4 heads, 512 queries over 1024 keys, causal):
/// F = 2·4·512·1024·256·0.5 FLOP at cuDNN's rates 0.71 / 0.60 of 989 TFLOP/s times
/// 512/(512 + 768) (the h100-sxm preset), backward 2.5·F, two kernels of 4 µs each. Short blocks make the
/// transfers longer than their windows, so the split depends on the window.
#[test]
fn cp_ring_transfers_run_beside_one_blocks_attention() {
    let v = cp2_across_two_dgx(&[]);
    let f = 2.0 * 4.0 * 512.0 * 1024.0 * 256.0 * 0.5;
    let ramp = 512.0 / (512.0 + 768.0);
    let att_f = f / (989e12 * 0.71 * ramp) + 8e-6;
    let att_b = 2.5 * f / (989e12 * 0.60 * ramp) + 8e-6;
    let block = 512.0 * 256.0 * 2.0;
    let window = |bytes: f64, w: f64| {
        let c = 14e-6 + bytes / 47e9;
        let o = c.min(w);
        let exposed = (c - w - KAPPA * o).max(0.0);
        (exposed, c - exposed)
    };
    let (ef, hf) = window(block, att_f / 2.0);
    let (eb, hb) = window(2.0 * block, att_b / 2.0);
    assert!(ef > 0.0 && eb > 0.0 && hf > 0.0);
    let cp = &v["time_breakdown"]["communication"]["cp"];
    close(
        cp["exposed_s"].as_f64().unwrap(),
        32.0 * (ef + eb),
        1e-6,
        "CP exposed",
    );
    close(
        cp["hidden_s"].as_f64().unwrap(),
        32.0 * (hf + hb),
        1e-6,
        "CP hidden",
    );
    // Each window slows the attention beside it by κ·o, o = min(C, W): forward
    // 0.189·min(19.58, 4.95) µs, backward 0.189·min(25.18, 6.83) µs, 71.2 µs over 32
    // layers. With the DP reduction after the backward (`--dp-overlap false`) the
    // interference is that and the TP windows' (the explain's per-layer figures).
    let o = |bytes: f64, w: f64| (14e-6 + bytes / 47e9).min(w);
    let cp_slow = 32.0 * KAPPA * (o(block, att_f / 2.0) + o(2.0 * block, att_b / 2.0));
    approx::assert_relative_eq!(cp_slow, 71.2e-6, max_relative = 2e-3);
    let plan = [&CP2_ACROSS_TWO_DGX[..], &["--dp-overlap", "false"]].concat();
    let explained = common::text(&common::llama8b_args(
        "estimate",
        &[&plan[..], &["--explain"]].concat(),
    ));
    let tp_slow: f64 = explained
        .lines()
        .filter(|l| l.contains("TP window, "))
        .map(|l| common::micros(l, "interference ") * 1e-6)
        .sum();
    let serial = common::json(&common::llama8b_args("estimate", &plan));
    close(
        serial["time_breakdown"]["interference_s"].as_f64().unwrap(),
        32.0 * tp_slow + cp_slow,
        1e-3,
        "TP and CP interference",
    );
    // Full recomputation runs each layer's forward again, its ring transfers beside the
    // same blocks: one more forward's exposed and hidden share per layer.
    let full = cp2_across_two_dgx(&["--recompute", "full"]);
    let cp = &full["time_breakdown"]["communication"]["cp"];
    close(
        cp["exposed_s"].as_f64().unwrap(),
        32.0 * (2.0 * ef + eb),
        1e-6,
        "CP exposed, full recomputation",
    );
    close(
        cp["hidden_s"].as_f64().unwrap(),
        32.0 * (2.0 * hf + hb),
        1e-6,
        "CP hidden, full recomputation",
    );
    // Bytes: each layer sends its block once forward and its key/value gradients (twice
    // the block) backward, 3 blocks; the forward run again adds a fourth.
    for (v, blocks) in [(&v, 3.0), (&full, 4.0)] {
        close(
            v["time_breakdown"]["communication"]["cp"]["bytes_per_device"]
                .as_f64()
                .unwrap(),
            32.0 * blocks * block,
            1e-9,
            "CP bytes",
        );
    }
}

/// Ulysses with TP: each all-to-all moves the rank's tokens at its TP share of the widths.
/// Llama 3 8B (32 query heads, 8 KV heads of 128) on 16 H100s, TP 8, CP 2 across the two
/// nodes (47 GB/s, 14 µs), one sequence of 1024 (512 tokens per rank): Q, K, V are
/// (32 + 2·8)/8·128 = 768 wide per rank, 512·768·2 = 786 432 B; the output 32·128/8 = 512
/// wide, 524 288 B. Each all-to-all over 2 ranks: α + n/2 / B; both, each pass, 32 layers,
/// all exposed.
#[test]
fn cp_all_to_all_with_tp_moves_the_tp_share() {
    let v = cp2_across_two_dgx(&["--cp-kind", "a2a"]);
    let a2a = |bytes: f64| 14e-6 + bytes / 2.0 / 47e9;
    let pass = a2a(512.0 * 768.0 * 2.0) + a2a(512.0 * 512.0 * 2.0);
    let cp = &v["time_breakdown"]["communication"]["cp"];
    close(
        cp["exposed_s"].as_f64().unwrap(),
        32.0 * 2.0 * pass,
        1e-6,
        "Ulysses exposed",
    );
    close(
        cp["bytes_per_device"].as_f64().unwrap(),
        32.0 * 2.0 * (786_432.0 + 524_288.0),
        1e-9,
        "Ulysses bytes",
    );
}

/// The plan of [`cp2_across_two_dgx`].
const CP2_ACROSS_TWO_DGX: [&str; 10] = [
    "--gpus",
    "16",
    "--tp",
    "8",
    "--cp",
    "2",
    "--seq-len",
    "1024",
    "--global-batch",
    "1",
];

/// Llama 3 8B on 16 H100s (two DGX nodes), TP 8 and CP 2, one sequence of 1024, with
/// `extra`: the estimate's JSON.
fn cp2_across_two_dgx(extra: &[&str]) -> serde_json::Value {
    let a = [&CP2_ACROSS_TWO_DGX[..], extra].concat();
    common::json(&common::llama8b_args("estimate", &a))
}

/// CP's plan checks (`parallel::context::check`), each with its numbers: the sequence must
/// split into `2·cp` equal chunks (causal load balancing), and all-to-all CP needs the heads
/// per TP rank to divide by `cp`. Llama 3 8B has 32 heads: at TP 2 a rank holds 16, which
/// CP 4 divides and CP 32 does not; a 4096-token sequence splits into 2·4 = 8 chunks but not
/// into 2·3 = 6.
#[test]
fn context_parallel_plan_checks() {
    let args = |extra: &[&'static str]| common::llama8b_args("estimate", extra);
    let ok = common::json(&args(&[
        "--gpus",
        "8",
        "--tp",
        "2",
        "--cp",
        "4",
        "--cp-kind",
        "a2a",
        "--global-batch",
        "8",
    ]));
    assert_eq!(ok["plan"]["cp_kind"], "a2a");
    common::usage_error(
        &args(&[
            "--gpus",
            "64",
            "--tp",
            "2",
            "--cp",
            "32",
            "--cp-kind",
            "a2a",
            "--global-batch",
            "8",
        ]),
        "a2a needs the 16 heads per TP rank to divide by cp = 32",
    );
    common::usage_error(
        &args(&[
            "--gpus",
            "6",
            "--cp",
            "3",
            "--global-batch",
            "6",
            "--seq-len",
            "4096",
        ]),
        "sequence length 4096 does not split into 2·cp = 6 chunks",
    );
}

/// The forward sequence-parallel all-gathers carry the column-parallel GEMM's input as its
/// recipe quantizes it (Transformer Engine gathers the quantized shard); backward gathers
/// and the reduce-scatters stay 16-bit. Llama 3 8B (32 layers, 8192 tokens, h 4096) on 8
/// GPUs with TP 8, 8 micro-batches: two forward all-gathers per layer of `r = 8192·4096`
/// elements, so the SP bytes drop by `32·8·2·(2 − q)·r`: FP8 (q = 1) 17 179 869 184 B,
/// NVFP4 (q = 0.5 + 1/16) 24 696 061 952 B.
#[test]
fn low_precision_plans_gather_the_quantized_input() {
    let sp_bytes = |system: &str, precision: &str| {
        common::json(&[
            "estimate",
            "--model",
            "llama3-8b",
            "--system",
            system,
            "--gpus",
            "8",
            "--tp",
            "8",
            "--global-batch",
            "8",
            "--precision",
            precision,
        ])["time_breakdown"]["communication"]["sp"]["bytes_per_device"]
            .as_f64()
            .unwrap()
    };
    let fp8 = sp_bytes("dgx-h100", "bf16") - sp_bytes("dgx-h100", "fp8");
    assert_eq!(fp8, 17_179_869_184.0);
    let nvfp4 = sp_bytes("dgx-b200", "bf16") - sp_bytes("dgx-b200", "nvfp4");
    assert_eq!(nvfp4, 24_696_061_952.0);
}

/// The communication class `class` of the JSON estimate of `args` (a line of flags).
fn comm_of(args: &str, class: &str) -> serde_json::Value {
    let mut a = vec!["estimate"];
    a.extend(args.split_whitespace());
    common::json(&a)["time_breakdown"]["communication"][class].clone()
}

/// Llama 2 7B (32 layers, h 4096) on 2 H100, TP 2 with SP and TP overlap, sequence 4096.
const LLAMA_TP2: &str = "--model llama2-7b --system dgx-h100 --gpus 2 --tp 2 --seq-len 4096";

/// Full recomputation runs each layer's forward again, collectives included, and selective
/// recomputation (attention scores only) none: Llama 2 7B on 2 H100 (`LLAMA_TP2`), one
/// micro-batch. The forward's two all-gathers and two reduce-scatters per layer count
/// `s·b·h·2` = 32 MiB each (the explain's "forward … (128 MiB)" per layer), so full
/// recomputation adds 32 · 4 · 33 554 432 = 4 294 967 296 B.
#[test]
fn full_recomputation_repeats_the_forward_collectives() {
    let sp_bytes = |recompute: &str| {
        comm_of(
            &format!("{LLAMA_TP2} --global-batch 1 --recompute {recompute}"),
            "sp",
        )["bytes_per_device"]
            .as_f64()
            .unwrap()
    };
    let none = sp_bytes("none");
    assert_eq!(sp_bytes("full") - none, 4_294_967_296.0);
    assert_eq!(sp_bytes("selective"), none);
}

/// Every micro-batch runs the same layers, so the TP/SP time hidden under the GEMMs and
/// the time left exposed are per-micro-batch times the micro-batches: `LLAMA_TP2`, one
/// pipeline stage, global batch 1 against 3 (DP 1).
#[test]
fn tp_windows_scale_with_the_micro_batches() {
    let sp = |gb: u32| comm_of(&format!("{LLAMA_TP2} --global-batch {gb}"), "sp");
    let (one, three) = (sp(1), sp(3));
    for k in ["hidden_s", "exposed_s", "bytes_per_device"] {
        let (a, b) = (one[k].as_f64().unwrap(), three[k].as_f64().unwrap());
        assert!(a > 0.0 || k == "exposed_s", "{k}: {a}");
        assert!(
            (b - 3.0 * a).abs() <= 1e-12 * b.abs().max(1.0),
            "{k}: {b} vs 3·{a}"
        );
    }
}

/// The backward's TP/SP windows by hand (`LLAMA_TP2`, one micro-batch, no TP comm overlap,
/// DP 1). Each all-gather or reduce-scatter of `s·h·2` = 33,554,432 B on two GPUs over
/// NVLink takes `c = α + (t−1)/t · n / B` = 3.4 µs + 0.5 · 33,554,432 / 370e9 s =
/// 48.743 µs. A layer's forward runs four (two gathers, two reduce-scatters), its backward
/// six: the output-gradient all-gathers of the two row-parallel linears, and for the two
/// column-parallel ones the input all-gather (recomputed for the weight gradient) beside the
/// data-gradient GEMM and the input-gradient reduce-scatter beside the weight-gradient GEMM
/// (Megatron-core's asynchronous TP communication, `tp_bwd_overlap`). The ends add the
/// embedding's reduce-scatter, the output layer's all-gather and its backward
/// reduce-scatter, and the loss's three all-reduces of 4 B per token (small: under 30 µs).
/// - Without the backward overlap all of it is exposed: `32 · 10 · c + 3 · c` = 15.744 ms.
/// - With it the four collectives beside GEMMs hide whole (each GEMM is longer): hidden
///   `32 · 4 · c` = 6.2392 ms, the same total, and the GEMMs beside them stretch by
///   κ = 0.189 of it (interference).
#[test]
fn tp_backward_windows_by_hand() {
    let sp = |bwd_overlap: bool| {
        let mut a = vec!["estimate"];
        let flags = format!(
            "{LLAMA_TP2} --global-batch 1 --tp-overlap false --tp-bwd-overlap {bwd_overlap}"
        );
        a.extend(flags.split_whitespace());
        let j = common::json(&a);
        let t = &j["time_breakdown"];
        let f = |k: &str| t["communication"]["sp"][k].as_f64().unwrap();
        (
            f("exposed_s"),
            f("hidden_s"),
            t["interference_s"].as_f64().unwrap(),
        )
    };
    let c = 3.4e-6 + 0.5 * 33_554_432.0 / 370e9;
    approx::assert_relative_eq!(c, 48.743e-6, max_relative = 1e-4);
    let (exposed, hidden, slow) = sp(false);
    let layers_and_ends = (32.0 * 10.0 + 3.0) * c;
    assert!(
        exposed > layers_and_ends && exposed < layers_and_ends + 30e-6,
        "exposed {exposed} s, by hand {layers_and_ends} s and the loss's all-reduces"
    );
    assert_eq!((hidden, slow), (0.0, 0.0));
    let (e, h, k) = sp(true);
    approx::assert_relative_eq!(h, 32.0 * 4.0 * c, max_relative = 1e-6);
    approx::assert_relative_eq!(e + h, exposed, max_relative = 1e-9);
    approx::assert_relative_eq!(k, KAPPA * h, max_relative = 1e-6);
}

/// Full recomputation runs each layer's forward again, all-to-alls included: EP bytes and
/// exposed time are 3/2 of the plan without it (Qwen3-30B-A3B on one DGX B200, EP 8,
/// sequence 4096, one micro-batch per rank). Megatron-core refuses it beside the EP overlap
/// ("disable full recomputation when enabling overlap_moe_expert_parallel_comm"), and so does
/// the plan check.
#[test]
fn full_recomputation_repeats_the_forward_all_to_alls() {
    let plan = |recompute: &str, overlap: &str| {
        format!(
            "--model qwen3-30b-a3b --system dgx-b200 --gpus 8 --ep 8 --seq-len 4096 \
             --global-batch 8 --ep-overlap {overlap} --recompute {recompute}"
        )
    };
    let (none, full) = (
        comm_of(&plan("none", "false"), "ep"),
        comm_of(&plan("full", "false"), "ep"),
    );
    for k in ["exposed_s", "bytes_per_device"] {
        let (a, b) = (none[k].as_f64().unwrap(), full[k].as_f64().unwrap());
        assert!(a > 0.0, "{k}");
        assert!((b / a - 1.5).abs() < 1e-12, "{k}: {b} vs 1.5·{a}");
    }
    let args: Vec<String> = std::iter::once("estimate".to_string())
        .chain(plan("full", "true").split_whitespace().map(String::from))
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    common::usage_error(&args, "full recomputation");
}

/// Each micro-batch's activation crosses every chunk boundary forward and its gradient
/// comes back: a device sends `2·v·m` transfers of `s·b·h·2` B. Llama 2 7B (untied, no
/// embedding sync) on 8 H100, PP 4 × DP 2, sequence 4096, 4 micro-batches per pipeline:
/// hop 4096·4096·2 = 33 554 432 B, so 268 435 456 B at v = 1 and twice that interleaved
/// over v = 2. The explain prints the pipeline's windows for pipelines only.
#[test]
fn pipeline_sends_two_transfers_per_chunk_and_micro_batch() {
    let base = "--model llama2-7b --system dgx-h100 --gpus 8 --seq-len 4096 --global-batch 8";
    let pp_bytes = |v: u32| {
        comm_of(&format!("{base} --pp 4 --virtual-stages {v}"), "pp")["bytes_per_device"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(pp_bytes(1), 268_435_456.0);
    assert_eq!(pp_bytes(2), 536_870_912.0);
    let explain = |pp: &str| {
        let mut a = vec!["estimate", "--explain", "--pp", pp];
        a.extend(base.split_whitespace());
        common::text(&a)
    };
    assert!(explain("4").contains("PP windows: one transfer"));
    assert!(!explain("1").contains("PP windows"));
}

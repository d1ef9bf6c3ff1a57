//! Sliding-window attention (`[transformer] sliding_window`, `attention_pattern`) checked by
//! hand: the score pairs of a causal band, gpt-oss-120b's windowed and full layers on one
//! DGX H100 (TP 8, sequence 4096, BF16, fused attention), its model FLOPs, and models
//! without windows, which must not move.
//!
//! gpt-oss-120b: 64 query heads of 64 (8 per rank at TP 8), every other layer a causal
//! window of w = 128, starting with a windowed one (18 of 36 layers).
//!
//! - Head size 64 < 128: the exponential per score does not shrink with the head
//!   (`Device::head_size_factors`; H100's 3.9e12 exponentials/s, τ_x = 0.256410 ns). At
//!   head size 128 a score takes τ = 512/(989e12 · 0.71) = 0.729150 ns forward, of which
//!   the GEMMs 0.472740; at 64 they take half: r_f = (0.236370 + 0.256410)/0.364575 =
//!   1.351658. Backward τ = 1280/(989e12 · 0.60) = 2.157061 ns: r_b = (0.950325 +
//!   0.256410)/1.078530 = 1.118870.
//! - Full layer (as tests/fused_attention.rs, times r): F = 2·8·4096·4096·128·½ = 2^34
//!   FLOP, n/(n + n0) = 4096/4864 = 0.842105; forward 2^34/(989e12 · 0.71 · 0.842105) =
//!   29.0535 µs, × r_f = 39.2704 µs, plus 4 µs of launch: 43.2704 µs; backward
//!   2.5·2^34/(989e12 · 0.60 · 0.842105) = 85.9500 µs, × r_b = 96.1669 µs, plus 4 µs:
//!   100.1669 µs.
//! - Windowed layer: pairs 128·4096 − 128·127/2 = 516 160 per head, against 4096²/2 =
//!   8 388 608 for the full layer: ratio r = 0.0615311; F = r·2^34 = 1 057 095 680 FLOP;
//!   the kernel's loop is 128 keys long, n/(n + n0) = 128/896 = 0.142857; forward
//!   F/(989e12 · 0.71 · 0.142857) = 10.5380 µs (= 29.0535 · r · 0.842105/0.142857), × r_f
//!   + 4 µs = 18.2438 µs; backward 2.5·F/(989e12 · 0.60 · 0.142857) = 31.1749 µs, × r_b
//!   + 4 µs = 38.8807 µs.
//! - Per layer, half and half: forward (18.2438 + 43.2704)/2 = 30.7571 µs, backward
//!   (38.8807 + 100.1669)/2 = 69.5238 µs.
//! - Model FLOPs: a windowed layer's core counts its band of 128 keys per query instead of
//!   4096: 18 layers · 2·(4096 − 128)·64·(64 + 64) = 1 170 210 816 FLOP per token fewer
//!   forward.

use crate::common;
use astrolabe::catalog;
use astrolabe::model::Transformer;
use astrolabe::model::attention::causal_window_pairs;
use common::{json, micros, tmp};

fn transformer(name: &str) -> Transformer {
    let m = catalog::model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    *m.transformer().expect("a transformer")
}

/// Standard output of `astrolabe args` ([`common::computed`]: exit 0, or 3 when the plan does
/// not fit; one DGX H100 cannot hold gpt-oss-120b's states).
fn run(args: &[&str]) -> String {
    common::computed(args)
}

/// One sequence of 4096 tokens of `model` on one DGX H100, TP 8, micro-batch 1, BF16, fused
/// attention (the configuration of tests/fused_attention.rs), plus `extra` flags.
fn h100_tp8(model: &str, extra: &[&str]) -> String {
    let mut args = vec!["estimate", "--model", model, "--system", "dgx-h100"];
    args.extend(["--gpus", "8", "--tp", "8", "--seq-len", "4096"]);
    args.extend(["--micro-batch", "1", "--global-batch", "1"]);
    args.extend(["--precision", "bf16", "--flash-attention"]);
    args.extend(extra);
    run(&args)
}

fn explain(model: &str) -> String {
    h100_tp8(model, &["--explain"])
}

fn json_of(text: &str) -> serde_json::Value {
    serde_json::from_str(text).expect("json")
}

fn line<'a>(text: &'a str, needle: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("explain shows '{needle}'"))
}

/// (forward, backward) µs of the explain line containing `needle`, against the hand values.
#[track_caller]
fn times(text: &str, needle: &str, hand: (f64, f64)) {
    let l = line(text, needle);
    let (f, b) = (micros(l, "fwd ="), micros(l, "bwd ="));
    // The explain line prints four significant digits.
    assert!(
        (f / hand.0 - 1.0).abs() < 1e-3,
        "{needle}: forward {f} µs, hand {}",
        hand.0
    );
    assert!(
        (b / hand.1 - 1.0).abs() < 1e-3,
        "{needle}: backward {b} µs, hand {}",
        hand.1
    );
}

#[test]
fn causal_window_pairs_by_hand() {
    // 128·4096 − 128·127/2 = 524 288 − 8 128; full causal 4096·4097/2.
    assert_eq!(causal_window_pairs(4096.0, 128.0), 516_160.0);
    assert_eq!(causal_window_pairs(4096.0, 4096.0), 8_390_656.0);
}

#[test]
fn gpt_oss_windowed_layers_by_hand_on_h100() {
    let text = explain("gpt-oss-120b");
    times(&text, "attention (fused):", (43.2704, 100.1669));
    times(
        &text,
        "attention (fused, window of 128)",
        (18.2438, 38.8807),
    );
    times(&text, "attention per layer", (30.7571, 69.5238));
    // The explain names the head-size factor and puts it in the formula.
    let full = line(&text, "attention (fused):");
    assert!(
        full.contains("head size 64 < 128, one exponential per score at 3.900e12/s: r = 1.3517 forward and 1.1189 backward")
            && full.contains("· 0.842) · 1.3517 + 1·4 us"),
        "{full}"
    );
    // The windowed time is the full one scaled by the pair ratio and the saturations.
    let full = micros(line(&text, "attention (fused):"), "fwd =") - 4.0;
    let win = micros(line(&text, "window of 128"), "fwd =") - 4.0;
    let r = 516_160.0 / 8_388_608.0;
    let scaled = full * r * (4096.0 / 4864.0) / (128.0 / 896.0);
    assert!((win / scaled - 1.0).abs() < 2e-3, "{win} µs vs {scaled} µs");
}

#[test]
fn gpt_oss_model_flops_count_the_band() {
    let t = transformer("gpt-oss-120b");
    let w = t.window.expect("gpt-oss-120b has sliding windows");
    assert_eq!((w.tokens, w.fraction), (128.0, 0.5));
    let full = Transformer { window: None, ..t };
    let fewer = full.forward_flops_per_token() - t.forward_flops_per_token();
    assert_eq!(fewer, 18.0 * 2.0 * (4096.0 - 128.0) * 64.0 * (64.0 + 64.0));
    assert_eq!(fewer, 1_170_210_816.0);
    // One sequence of 4096 tokens: main (7ab3797, before windows) printed
    // 155 462 582 403 072 model FLOPs; 3 passes × 4096 tokens × the band's saving fewer now.
    let v = json_of(&h100_tp8("gpt-oss-120b", &["--format", "json"]));
    let got = v["model_flops_per_iteration"].as_f64().unwrap();
    assert_eq!(got, 155_462_582_403_072.0 - 3.0 * 4096.0 * 1_170_210_816.0);
}

#[test]
fn models_without_windows_are_unchanged() {
    // Printed by main (7ab3797) before sliding windows existed.
    let mut args = vec!["estimate", "--model", "llama3-70b", "--system", "dgx-h100"];
    args.extend([
        "--gpus",
        "64",
        "--tp",
        "8",
        "--pp",
        "2",
        "--global-batch",
        "128",
    ]);
    let v = json(&args);
    let flops = v["model_flops_per_iteration"].as_f64().unwrap();
    assert!(
        (flops / 5.048209726840504e17 - 1.0).abs() < 1e-12,
        "{flops}"
    );
    // Llama 3 8B: 4 heads of 128 per rank, F = 2^34 as above: 33.05 µs and 89.95 µs.
    let text = explain("llama3-8b");
    times(&text, "attention (fused):", (33.0535, 89.9500));
    assert!(
        !text.contains("window of"),
        "no windowed layer in llama3-8b"
    );
    assert!(!text.contains("attention per layer"), "no mix in llama3-8b");
    assert!(transformer("llama3-8b").window.is_none());
}

/// gpt-oss-20b's file with `edit` applied, written to a scratch folder.
fn edited(name: &str, edit: impl Fn(&str) -> String) -> String {
    let root = env!("CARGO_MANIFEST_DIR");
    let text = std::fs::read_to_string(format!("{root}/models/gpt-oss-20b.toml")).unwrap();
    let path = tmp("sliding_window").join(format!("{name}.toml"));
    std::fs::write(&path, edit(&text)).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn a_window_as_long_as_the_sequence_is_full_attention() {
    let long = edited("window4096", |t| {
        t.replace("sliding_window = 128", "sliding_window = 4096")
    });
    let none = edited("none", |t| {
        t.replace("sliding_window = 128\n", "")
            .replace("attention_pattern = [\"sliding\", \"full\"]\n", "")
    });
    let est = |m: &str| {
        let args = [
            "estimate", "--model", m, "--system", "dgx-h100", "--gpus", "8",
        ];
        json_of(&run(&[
            &args[..],
            &["--seq-len", "4096", "--format", "json"],
        ]
        .concat()))
    };
    let (a, b) = (est(&long), est(&none));
    for k in [
        "iteration_time_s",
        "model_flops_per_iteration",
        "memory_per_device_bytes",
    ] {
        assert_eq!(a[k], b[k], "{k}");
    }
}

/// Packed samples no longer than the window: every query already sees its whole sample,
/// so the windowed layers are the sample's full causal attention and the estimate is the
/// window-free model's at the same packing (128-token samples, gpt-oss-20b's 128-token
/// window; one CUDA graph, so that no host wait hides the attention's time).
#[test]
fn a_window_as_long_as_the_packed_sample_is_full_attention() {
    let none = edited("none_packed", |t| {
        t.replace("sliding_window = 128\n", "")
            .replace("attention_pattern = [\"sliding\", \"full\"]\n", "")
    });
    let est = |m: &str| {
        json_of(&run(&[
            "estimate",
            "--model",
            m,
            "--system",
            "dgx-h100",
            "--gpus",
            "8",
            "--seq-len",
            "4096",
            "--packed-sample-len",
            "128",
            "--cuda-graphs",
            "full",
            "--format",
            "json",
        ]))
    };
    let (a, b) = (est("gpt-oss-20b"), est(&none));
    for k in ["iteration_time_s", "memory_per_device_bytes"] {
        assert_eq!(a[k], b[k], "{k}");
    }
}

#[test]
fn bad_window_inputs_are_refused() {
    let pair = "[\"sliding\", \"full\"]";
    // 25 entries for 24 layers.
    let long = format!("[{}\"full\"]", "\"sliding\", \"full\", ".repeat(12));
    let cases = [
        (
            "zero",
            "sliding_window = 128",
            "sliding_window = 0",
            "transformer.sliding_window: must be ≥ 1",
        ),
        (
            "typo",
            pair,
            "[\"slidng\", \"full\"]",
            "unknown variant `slidng`",
        ),
        (
            "nowindow",
            "sliding_window = 128\n",
            "",
            "attention_pattern: needs sliding_window",
        ),
        (
            "toolong",
            pair,
            &long,
            "has 25 entries but the model has 24 layers",
        ),
        ("nosliding", pair, "[\"full\"]", "has no \"sliding\" layer"),
    ];
    for (name, from, to, what) in cases {
        let m = edited(name, |t| t.replace(from, to));
        common::usage_error(
            &[
                "estimate", "--model", &m, "--system", "dgx-h100", "--gpus", "8",
            ],
            what,
        );
    }
}

//! 8-bit fused attention (`--fp8-attention`; Transformer Engine's FP8 dot-product attention,
//! Megatron-core `fp8_dot_product_attention`): each fused-attention time is the 16-bit one
//! less its launch over the speed-up NVIDIA's cuDNN benchmark measured, and on Blackwell a
//! windowed layer's backward is full causal attention's (the 8-bit backward kernel computes
//! every causal tile).
//!
//! The speed-ups are recomputed here from the benchmark's raw times (cudnn-frontend
//! `benchmark/sdpa_benchmark_training/results/`, Llama 3.1 shapes, causal, at 4096 and 8192
//! tokens), not read from the presets.

use crate::common;

/// Mean of time₁₆/time₈ at the two lengths: `[(t16, t8) at 8192, (t16, t8) at 4096]`.
fn speedup(pairs: [(f64, f64); 2]) -> f64 {
    pairs.iter().map(|(a, b)| a / b).sum::<f64>() / 2.0
}

/// The fused-attention explain lines of a plan: for each (full, then windowed when the
/// model has windows) the 16-bit (forward, backward) and, with `--fp8-attention`, the
/// 8-bit ones, in µs.
/// (forward, backward) in µs.
type Times = (f64, f64);

fn attention_lines(args: &[&str]) -> Vec<(Times, Option<Times>)> {
    let mut a = vec!["estimate"];
    a.extend_from_slice(args);
    a.push("--explain");
    let text = common::computed(&a);
    text.lines()
        .filter(|l| l.trim_start().starts_with("attention (fused"))
        .map(|l| {
            let (bf16, low) = match l.split_once("8-bit attention") {
                Some((x, y)) => (x.trim_end().trim_end_matches(';'), Some(y)),
                None => (l, None),
            };
            let (_, times) = bf16.split_once("FLOP;").expect("the times after F");
            (
                (common::micros(times, "fwd"), common::micros(times, "bwd")),
                low.map(|y| (common::micros(y, "fwd"), common::micros(y, "bwd"))),
            )
        })
        .collect()
}

fn close(a: f64, b: f64) {
    // Explain prints four significant digits.
    assert!((a - b).abs() <= 1e-3 * b.abs().max(1.0), "{a} vs {b}");
}

const LAUNCH_US: f64 = 4.0;

#[test]
fn mxfp8_attention_on_gb300_runs_at_the_measured_speedup() {
    // GB300, MXFP8: llama3.1_20260424_100757.csv (cuDNN 9.22), top_left, bf16 vs mxfp8:
    // forward 1.185/0.856 ms at 8192 and 0.323/0.242 at 4096; backward 3.832/3.917 and
    // 1.101/1.203.
    let sf = speedup([(1.185, 0.856), (0.323, 0.242)]);
    let sb = speedup([(3.832, 3.917), (1.101, 1.203)]);
    let plan = [
        "--model",
        "llama3-8b",
        "--system",
        "gb300-nvl72",
        "--gpus",
        "8",
        "--precision",
        "mxfp8",
    ];
    let base = attention_lines(&plan);
    let mut with = plan.to_vec();
    with.push("--fp8-attention");
    let low = attention_lines(&with);
    assert_eq!(base.len(), 1);
    let ((f16, b16), none) = base[0];
    assert!(none.is_none());
    let ((f16b, b16b), Some((f8, b8))) = low[0] else {
        panic!("no 8-bit line: {low:?}")
    };
    assert_eq!((f16, b16), (f16b, b16b), "the 16-bit times are the same");
    close(f8, LAUNCH_US + (f16 - LAUNCH_US) / sf);
    close(b8, LAUNCH_US + (b16 - LAUNCH_US) / sb);
    assert!(
        f8 < 0.76 * f16 && b8 > b16,
        "faster forward, slower backward"
    );
}

#[test]
fn fp8_and_nvfp4_plans_take_the_per_tensor_fp8_rate() {
    // H100, FP8 (the H200 run of cuDNN 9.19, h200_919_only_cudnn): forward 1.708/1.141 and
    // 0.465/0.322, backward 5.083/6.392 and 1.450/1.459.
    let h = (
        speedup([(1.708, 1.141), (0.465, 0.322)]),
        speedup([(5.083, 6.392), (1.450, 1.459)]),
    );
    // GB300 FP8: forward 1.185/0.759 and 0.323/0.217, backward 3.832/3.087 and 1.101/0.985;
    // an NVFP4 recipe runs its attention in FP8 with current scaling.
    let g = (
        speedup([(1.185, 0.759), (0.323, 0.217)]),
        speedup([(3.832, 3.087), (1.101, 0.985)]),
    );
    for (system, precision, (sf, sb)) in [
        ("dgx-h100", "fp8", h),
        ("gb300-nvl72", "nvfp4", g),
        ("gb300-nvl72", "fp8", g),
    ] {
        let plan = [
            "--model",
            "llama3-8b",
            "--system",
            system,
            "--gpus",
            "8",
            "--micro-batch",
            "1",
            "--precision",
            precision,
            "--fp8-attention",
        ];
        let ((f16, b16), Some((f8, b8))) = attention_lines(&plan)[0] else {
            panic!("no 8-bit line")
        };
        close(f8, LAUNCH_US + (f16 - LAUNCH_US) / sf);
        close(b8, LAUNCH_US + (b16 - LAUNCH_US) / sb);
    }
}

#[test]
fn a_windowed_layers_8bit_backward_is_full_causal_on_blackwell() {
    // gpt-oss-120b (every other layer a window of 128) on GB300: in 16 bits the windowed
    // backward is a fraction of the full one; in 8 bits it equals the full layer's 8-bit
    // backward (cudnn-frontend results/gpt_oss/gb300: MXFP8 backward 1.871 ms at 4096 tokens
    // and 6.648 at 8192, ×3.55 for ×2 tokens, where BF16's 0.442 → 0.862 doubles).
    let plan = [
        "--model",
        "gpt-oss-120b",
        "--system",
        "gb300-nvl72",
        "--gpus",
        "64",
        "--ep",
        "16",
        "--micro-batch",
        "4",
        "--global-batch",
        "1280",
        "--seq-len",
        "4096",
        "--precision",
        "mxfp8",
        "--fp8-attention",
    ];
    let lines = attention_lines(&plan);
    assert_eq!(lines.len(), 2, "full and windowed");
    let ((ff16, fb16), Some((ff8, fb8))) = lines[0] else {
        panic!()
    };
    let ((wf16, wb16), Some((wf8, wb8))) = lines[1] else {
        panic!()
    };
    assert!(
        wb16 < 0.3 * fb16,
        "the 16-bit backward skips the band's outside"
    );
    assert_eq!(wb8, fb8, "the 8-bit backward does not");
    let sf = speedup([(1.185, 0.856), (0.323, 0.242)]);
    close(wf8, LAUNCH_US + (wf16 - LAUNCH_US) / sf);
    close(ff8, LAUNCH_US + (ff16 - LAUNCH_US) / sf);
    // On Hopper no window measurement exists: the windowed backward keeps its band.
    let mut h = plan.to_vec();
    h[3] = "dgx-h100";
    h[15] = "fp8";
    let lines = attention_lines(&h);
    let ((_, wb16), Some((_, wb8))) = lines[1] else {
        panic!()
    };
    let sb = speedup([(5.083, 6.392), (1.450, 1.459)]);
    close(wb8, LAUNCH_US + (wb16 - LAUNCH_US) / sb);
}

#[test]
fn eight_bit_attention_is_refused_where_it_cannot_run() {
    let base = [
        "estimate",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--fp8-attention",
    ];
    for (extra, needle) in [
        (
            &["--system", "dgx-h100", "--precision", "bf16"][..],
            "fp8_attention: 8-bit attention needs an fp8, mxfp8 or nvfp4 precision",
        ),
        (
            &[
                "--system",
                "dgx-h100",
                "--precision",
                "fp8",
                "--attention-kernel",
                "fa2",
            ][..],
            "use --attention-kernel te",
        ),
        (
            &[
                "--system",
                "dgx-h100",
                "--precision",
                "fp8",
                "--flash-attention",
                "false",
            ][..],
            "flash attention off",
        ),
        (
            &["--system", "mi300x-cluster", "--precision", "fp8"][..],
            "efficiency.fp8_attention in its device file",
        ),
    ] {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        let out = common::bin().args(&a).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{a:?}: {err}");
    }
}

#[test]
fn the_flag_the_scenario_key_and_json_agree() {
    let flags = [
        "estimate",
        "--model",
        "llama3-8b",
        "--system",
        "gb200-nvl72",
        "--gpus",
        "8",
        "--precision",
        "mxfp8",
        "--fp8-attention",
    ];
    let v = common::json(&flags);
    assert_eq!(v["plan"]["fp8_attention"], true);
    let off = common::json(&flags[..flags.len() - 1]);
    assert_eq!(off["plan"]["fp8_attention"], false);
    assert_ne!(v["iteration_time_s"], off["iteration_time_s"]);
    let path = common::tmp("fp8_attention").join("plan.toml");
    std::fs::write(
        &path,
        "model = \"llama3-8b\"\nsystem = \"gb200-nvl72\"\n[plan]\ngpus = 8\nprecision = \"mxfp8\"\nfp8_attention = true\n",
    )
    .unwrap();
    let s = common::json(&["estimate", "--scenario", &path.to_string_lossy()]);
    assert_eq!(s["iteration_time_s"], v["iteration_time_s"]);
}

#[test]
fn a_bf16_layer_runs_its_attention_in_16_bits() {
    // MXFP8 with 8-bit attention and the last 2 layers in BF16 (`--bf16-last-layers`): one
    // stage, m = 4 micro-batches; the iteration's forward grows by 2·m·(f₁₆ − f), f the
    // 8-bit-attention layer's forward and f₁₆ a BF16 plan's layer (16-bit attention).
    let base = [
        "estimate",
        "--model",
        "llama3-8b",
        "--system",
        "dgx-b200",
        "--gpus",
        "8",
        "--global-batch",
        "64",
        "--micro-batch",
        "2",
        "--seq-len",
        "4096",
    ];
    let layer = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        a.push("--explain");
        let text = common::text(&a);
        let l = text
            .lines()
            .find(|l| l.contains("layer total:"))
            .expect("a layer total line")
            .to_string();
        (
            common::micros(&l, "forward"),
            common::micros(&l, "backward"),
        )
    };
    let fwd = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend_from_slice(extra);
        common::json(&a)["time_breakdown"]["forward_s"]
            .as_f64()
            .unwrap()
    };
    let low = ["--precision", "mxfp8", "--fp8-attention"];
    let (f, _) = layer(&low);
    let (f16, _) = layer(&["--precision", "bf16"]);
    let mut with = low.to_vec();
    with.extend_from_slice(&["--bf16-last-layers", "2"]);
    let grow = fwd(&with) - fwd(&low);
    let expect = 2.0 * 4.0 * (f16 - f) * 1e-6;
    assert!((grow / expect - 1.0).abs() < 2e-3, "{grow} vs {expect}");
}

#[test]
fn a_full_layer_names_its_8bit_backward_by_the_speedup_not_the_window_rule() {
    let text = common::text(&[
        "estimate",
        "--model",
        "llama3-8b",
        "--system",
        "gb300-nvl72",
        "--gpus",
        "8",
        "--precision",
        "mxfp8",
        "--fp8-attention",
        "--explain",
    ]);
    let line = text
        .lines()
        .find(|l| l.contains("8-bit attention"))
        .expect("the 8-bit line");
    assert!(!line.contains("computes every causal tile"), "{line}");
    assert!(line.contains("/0.947 = "), "{line}");
}

#[test]
fn a_sweep_takes_8bit_attention_as_a_setting_of_its_low_precision_plans() {
    let run = |precision: &str, extra: &[&str]| {
        let mut a = vec![
            "sweep",
            "--model",
            "llama3-8b",
            "--system",
            "gb300-nvl72",
            "--gpus",
            "8",
            "--global-batch",
            "64",
            "--precision",
            precision,
            "--top",
            "1",
        ];
        a.extend_from_slice(extra);
        common::json(&a)["top"][0].clone()
    };
    let on = run("mxfp8", &["--fp8-attention"]);
    assert_eq!(on["plan"]["fp8_attention"], true);
    let off = run("mxfp8", &[]);
    assert_eq!(off["plan"]["fp8_attention"], false);
    // A BF16 plan keeps 16-bit attention whatever the setting.
    assert_eq!(
        run("bf16", &["--fp8-attention"])["plan"]["fp8_attention"],
        false
    );
}

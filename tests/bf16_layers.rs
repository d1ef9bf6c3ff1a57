//! BF16 first and last layers in a low-precision plan (`--bf16-first-layers`,
//! `--bf16-last-layers`; Megatron-core `first_last_layers_bf16`): each such layer costs what
//! the same layer costs in a BF16 plan, and nothing else changes.

use crate::common;

const PLAN: [&str; 14] = [
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
    "--explain",
];

/// (forward, backward) of one layer per micro-batch in µs, from `--explain`'s
/// `layer total` line, and the iteration's forward and backward in s.
fn run(extra: &[&str]) -> ((f64, f64), (f64, f64)) {
    let mut args: Vec<&str> = PLAN.to_vec();
    args.extend_from_slice(extra);
    let text = common::text(&args);
    let line = text
        .lines()
        .find(|l| l.contains("layer total:"))
        .expect("a layer total line");
    let layer = (
        common::micros(line, "forward"),
        common::micros(line, "backward"),
    );
    args.retain(|a| *a != "--explain");
    let v = common::json(&args);
    let t = &v["time_breakdown"];
    let s = |k: &str| t[k].as_f64().expect(k);
    (layer, (s("forward_s"), s("backward_s")))
}

#[test]
fn a_bf16_layer_costs_the_bf16_plans_layer() {
    // Llama 3 8B on 8 B200, DP 8, micro-batch 2 of a batch of 64: m = 4 micro-batches, one
    // stage. With a = 2 first and z = 3 last layers in BF16 the iteration's forward grows
    // by (a + z)·m·(f₁₆ − f) and its backward by (a + z)·m·(b₁₆ − b), f and b the MXFP8
    // layer's times, f₁₆ and b₁₆ those of the same layer in a BF16 plan (each printed to
    // four digits, hence the tolerance).
    let ((f, b), (tf, tb)) = run(&["--precision", "mxfp8"]);
    let ((f16, b16), _) = run(&["--precision", "bf16"]);
    assert!(f16 > 1.2 * f && b16 > 1.2 * b, "BF16 layers are slower");
    let (_, (tf2, tb2)) = run(&[
        "--precision",
        "mxfp8",
        "--bf16-first-layers",
        "2",
        "--bf16-last-layers",
        "3",
    ]);
    let k = 5.0 * 4.0 * 1e-6;
    approx::assert_relative_eq!(tf2 - tf, k * (f16 - f), max_relative = 2e-3);
    approx::assert_relative_eq!(tb2 - tb, k * (b16 - b), max_relative = 2e-3);
}

#[test]
fn bf16_layers_sit_on_the_end_stages() {
    // PP 2 (DP 4, m = 64/(4·2) = 8 micro-batches), 16 layers a stage; the last stage, with
    // the output layer and the loss, is the slower. Four BF16 layers at the end grow it:
    // the iteration's forward (m × the slowest stage's) by 4·m·(f₁₆ − f), the bubble
    // ((Σ T_i − max T_i)/v) not at all. Four at the start grow the first stage, which stays
    // the faster: the forward is unchanged and the bubble grows by one micro-batch of the
    // four layers' difference, 4·((f₁₆ − f) + (b₁₆ − b)).
    let pp2 = |extra: &[&str]| {
        let mut a = vec!["--pp", "2"];
        a.extend_from_slice(extra);
        let mut args: Vec<&str> = PLAN[..PLAN.len() - 1].to_vec();
        args.extend_from_slice(&a);
        let v = common::json(&args);
        let t = &v["time_breakdown"];
        let s = |k: &str| t[k].as_f64().expect(k);
        (s("forward_s"), s("pipeline_bubble_s"))
    };
    let ((f, b), _) = run(&["--precision", "mxfp8", "--pp", "2"]);
    let ((f16, b16), _) = run(&["--precision", "bf16", "--pp", "2"]);
    let (tf, bubble) = pp2(&["--precision", "mxfp8"]);
    let (tf_last, bubble_last) = pp2(&["--precision", "mxfp8", "--bf16-last-layers", "4"]);
    approx::assert_relative_eq!(
        tf_last - tf,
        4.0 * 8.0 * 1e-6 * (f16 - f),
        max_relative = 2e-3
    );
    approx::assert_relative_eq!(bubble_last, bubble, max_relative = 1e-12);
    let (tf_first, bubble_first) = pp2(&["--precision", "mxfp8", "--bf16-first-layers", "4"]);
    approx::assert_relative_eq!(tf_first, tf, max_relative = 1e-12);
    approx::assert_relative_eq!(
        bubble_first - bubble,
        4.0 * 1e-6 * ((f16 - f) + (b16 - b)),
        max_relative = 2e-3
    );
}

#[test]
fn bf16_layers_megatron_refuses_are_refused() {
    for (extra, what) in [
        (
            &["--precision", "bf16", "--bf16-last-layers", "2"][..],
            "bf16_last_layers: keeps layers in BF16 out of an 8- or 4-bit precision",
        ),
        (
            &["--precision", "fp8", "--bf16-first-layers", "1"][..],
            "bf16_first_layers: FP8 delayed scaling cannot keep layers in BF16",
        ),
        (
            &[
                "--precision",
                "mxfp8",
                "--bf16-first-layers",
                "20",
                "--bf16-last-layers",
                "13",
            ][..],
            "20 first and 13 last BF16 layers overlap in a model of 32",
        ),
        (
            &[
                "--precision",
                "nvfp4",
                "--pp",
                "2",
                "--bf16-last-layers",
                "17",
            ][..],
            "17 is more than the 16 layers of the last stage",
        ),
    ] {
        let mut args: Vec<&str> = PLAN[..PLAN.len() - 1].to_vec();
        args.extend_from_slice(extra);
        common::usage_error(&args, what);
    }
}

#[test]
fn bf16_first_layers_of_an_moe_model_are_its_dense_layers_first() {
    // DeepSeek-V3 begins with 3 dense-MLP layers. Four BF16 first layers are those three
    // and one MoE layer: the forward (m = 64/64 = 1 micro-batch, one stage) grows by
    // 3·(d₁₆ − d) + (e₁₆ − e), d the dense layer's forward and e the MoE layer's (explain
    // prints the MoE layer's `layer total` first, then the dense layer's).
    let args = |p: &str, extra: &[&'static str]| {
        let mut a: Vec<String> = [
            "estimate",
            "--model",
            "deepseek-v3",
            "--system",
            "gb200-nvl72",
            "--gpus",
            "64",
            "--ep",
            "64",
            "--global-batch",
            "64",
            "--precision",
            p,
        ]
        .map(String::from)
        .to_vec();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let layers = |p: &str| {
        let a = args(p, &["--explain"]);
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        // Computed, fitting or not (the BF16 plan does not fit 64 GB200s).
        let text = common::computed(&refs);
        let totals: Vec<f64> = text
            .lines()
            .filter(|l| l.contains("layer total:"))
            .map(|l| common::micros(l, "forward"))
            .collect();
        assert_eq!(totals.len(), 2);
        (totals[0], totals[1])
    };
    let forward = |p: &str, extra: &[&'static str]| {
        let a = args(p, extra);
        common::estimate_cli(&a[1..]).0.time.forward.get()
    };
    let (e, d) = layers("mxfp8");
    let (e16, d16) = layers("bf16");
    let grow = forward("mxfp8", &["--bf16-first-layers", "4"]) - forward("mxfp8", &[]);
    approx::assert_relative_eq!(
        grow,
        1e-6 * (3.0 * (d16 - d) + (e16 - e)),
        max_relative = 3e-3
    );
}

#[test]
fn bf16_layers_up_to_a_stage_or_the_whole_model_are_accepted() {
    // The limits are inclusive (Megatron-core: at most the layers per pipeline stage): 16
    // BF16 first layers on a 16-layer first stage, and 16 + 16 = 32 on one stage of a
    // 32-layer model, where every layer then runs in BF16.
    for extra in [
        &[
            "--precision",
            "mxfp8",
            "--pp",
            "2",
            "--bf16-first-layers",
            "16",
        ][..],
        &[
            "--precision",
            "mxfp8",
            "--pp",
            "2",
            "--bf16-last-layers",
            "16",
        ][..],
        &[
            "--precision",
            "nvfp4",
            "--bf16-first-layers",
            "16",
            "--bf16-last-layers",
            "16",
        ][..],
    ] {
        let mut args: Vec<&str> = PLAN[..PLAN.len() - 1].to_vec();
        args.extend_from_slice(extra);
        common::text(&args);
    }
}

#[test]
fn a_scenario_file_takes_the_same_keys() {
    // `bf16_first_layers` and `bf16_last_layers` in a scenario's [plan] give the estimate
    // the flags give.
    let mut args: Vec<&str> = PLAN[..PLAN.len() - 1].to_vec();
    args.extend_from_slice(&[
        "--precision",
        "nvfp4",
        "--bf16-first-layers",
        "1",
        "--bf16-last-layers",
        "4",
    ]);
    let flags = common::json(&args)["iteration_time_s"].as_f64().unwrap();
    let path = common::tmp("bf16_layers").join("plan.toml");
    std::fs::write(
        &path,
        "model = \"llama3-8b\"\nsystem = \"dgx-b200\"\n[plan]\ngpus = 8\nglobal_batch = 64\n\
         micro_batch = 2\nseq_len = 4096\nprecision = \"nvfp4\"\nbf16_first_layers = 1\n\
         bf16_last_layers = 4\n",
    )
    .unwrap();
    let file =
        common::json(&["estimate", "--scenario", &path.to_string_lossy()])["iteration_time_s"]
            .as_f64()
            .unwrap();
    assert_eq!(flags, file);
}

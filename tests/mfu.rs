//! MFU that means one thing (issue 20, item 5): `mfu` is taken against the dense BF16 peak
//! whatever the plan's precision, so `--sort mfu` ranks a faster FP8 plan above a slower
//! BF16 one; `mfu_at_precision_peak` is NVIDIA's convention (an FP8 run against the FP8
//! peak), labelled as such.

use crate::common;

/// Llama 3 8B on 8 H100 in FP8 (NVIDIA H100 SXM datasheet: BF16 989 TFLOP/s, FP8 1979
/// dense): MFU = model FLOPs / (time · 989e12 · 8), and the NVIDIA-convention figure is
/// that times 989/1979.
#[test]
fn mfu_is_against_the_bf16_peak() {
    let v = common::llama8b_on_dgx_h100("estimate", &["--precision", "fp8", "--tp", "2"]);
    let f = v["model_flops_per_iteration"].as_f64().unwrap();
    let t = v["iteration_time_s"].as_f64().unwrap();
    let mfu = v["mfu"].as_f64().unwrap();
    approx::assert_relative_eq!(mfu, f / (t * 989e12 * 8.0), max_relative = 1e-9);
    approx::assert_relative_eq!(
        v["mfu_at_precision_peak"].as_f64().unwrap(),
        mfu * 989.0 / 1979.0,
        max_relative = 1e-9
    );
    let bf16 = common::llama8b_on_dgx_h100("estimate", &["--tp", "2"]);
    assert_eq!(bf16["mfu"], bf16["mfu_at_precision_peak"]);
}

/// Ranked by MFU, the faster precision comes first: with the BF16 yardstick MFU is
/// proportional to throughput for a given model and batch.
#[test]
fn sort_mfu_ranks_the_faster_fp8_plan_first() {
    let v = common::llama8b_on_dgx_h100(
        "sweep",
        &["--precision", "bf16,fp8", "--sort", "mfu", "--top", "40"],
    );
    let rows = v["top"].as_array().unwrap();
    let t = |r: &serde_json::Value| r["iteration_time_s"].as_f64().unwrap();
    let m = |r: &serde_json::Value| r["mfu"].as_f64().unwrap();
    assert_eq!(rows[0]["plan"]["precision"], "fp8");
    for w in rows.windows(2) {
        assert!(m(&w[0]) >= m(&w[1]));
        assert!(
            t(&w[0]) <= t(&w[1]) * (1.0 + 1e-9),
            "MFU order is time order"
        );
    }
}

/// Hardware FLOPs add what the backward recomputes, model FLOPs do not: full recomputation
/// runs the forward again without the output layer, `F − 2·V·h` more per token; selective
/// recomputation the attention core, `L·2·s·a·(d_qk + d_v)` per token (Korthikanti et al.
/// 2022 §5); LoRA's model FLOPs are two passes of `F`, not three (frozen weights have no
/// weight gradient). Llama 3 8B (32 layers, 32 heads of 128, h 4096, V 128 256) at sequence
/// 8192 on 8 H100, TP 2: `F` = model FLOPs / (3 · tokens).
#[test]
fn hardware_flops_add_the_recomputed_forward() {
    let run = |extra: &[&str]| common::llama8b_on_dgx_h100("estimate", extra);
    let base = ["--tp", "2", "--seq-len", "8192"];
    let ratio = |rc: &str| {
        let v = run(&[&base[..], &["--recompute", rc]].concat());
        let model = v["model_flops_per_iteration"].as_f64().unwrap();
        let tokens = v["plan"]["global_batch"].as_f64().unwrap() * 8192.0;
        let hfu_over_mfu = v["hfu"].as_f64().unwrap() / v["mfu"].as_f64().unwrap();
        (hfu_over_mfu, model / (3.0 * tokens))
    };
    let (none, f) = ratio("none");
    assert_eq!(none, 1.0);
    let (full, _) = ratio("full");
    approx::assert_relative_eq!(
        full,
        1.0 + (f - 2.0 * 128_256.0 * 4096.0) / (3.0 * f),
        max_relative = 1e-12
    );
    let (selective, _) = ratio("selective");
    let core = 32.0 * 2.0 * 8192.0 * 32.0 * 256.0;
    approx::assert_relative_eq!(selective, 1.0 + core / (3.0 * f), max_relative = 1e-12);
    let flops = |extra: &[&str]| {
        run(&[&base[..], extra].concat())["model_flops_per_iteration"]
            .as_f64()
            .unwrap()
    };
    approx::assert_relative_eq!(
        flops(&["--lora-rank", "16"]) / flops(&[]),
        2.0 / 3.0,
        max_relative = 1e-12
    );
}

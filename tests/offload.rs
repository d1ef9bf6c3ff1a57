//! Offload plans end to end: the published anchors (ZeRO-Offload, ZeRO-Infinity), a Llama 3
//! 70B fine-tune that fits only with optimizer offload, the GB200 tier against a PCIe host,
//! `--explain`, the sweep axis, and bad input.

use crate::common;

use approx::assert_relative_eq;
use common::{bin, json};
use serde_json::Value;

/// Hardware TFLOP/s per GPU as the papers count them (recomputation included):
/// HFU × the fp16 peak of a V100 (125 TFLOP/s).
fn v100_tflops(r: &Value) -> f64 {
    r["hfu"].as_f64().unwrap() * 125.0
}

/// `estimate --format json`; a plan that does not fit prints its JSON and exits 3.
#[track_caller]
fn estimate(args: &[&str]) -> Value {
    let out = bin()
        .arg("estimate")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    let code = out.status.code();
    assert!(
        code == Some(0) || code == Some(3),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(code == Some(0), v["fits"].as_bool().unwrap(), "{args:?}");
    v
}

fn fits(r: &Value) -> bool {
    r["fits"].as_bool().unwrap()
}

const TEN_B: [&str; 12] = [
    "--model",
    "zero-offload-10b",
    "--system",
    "v100-single",
    "--precision",
    "fp16",
    "--recompute",
    "full",
    "--zero",
    "2",
    "--micro-batch",
    "8",
];

/// Ren et al., "ZeRO-Offload: Democratizing Billion-Scale Model Training", USENIX ATC'21:
/// a 10B-parameter model trains on one V100 at about 40 TFLOP/s. The model and launch are
/// DeepSpeed's ZeRO-Offload tutorial (50 layers, h 4096, activation checkpointing, ZeRO-2
/// with `offload_optimizer`); micro-batch 8 as DeepSpeedExamples' Megatron-LM-v1.1.5-ZeRO3
/// 10B runs it (DeepSpeed issue #2159). Within 15%.
#[test]
fn zero_offload_10b_on_one_v100_at_40_tflops() {
    let mut a = TEN_B.to_vec();
    a.extend_from_slice(&["--offload", "zero-offload"]);
    let r = estimate(&a);
    assert!(fits(&r));
    let tf = v100_tflops(&r);
    assert!((tf / 40.0 - 1.0).abs() <= 0.15, "{tf} TFLOP/s vs ~40");
    // The CPU Adam step is the host's measured rate: 10.27e9 params / 1.59e9 per s.
    let opt = r["time_breakdown"]["optimizer_s"].as_f64().unwrap();
    assert_relative_eq!(opt, 10.2788e9 / 1.59e9, max_relative = 0.01);
    // Without offload the same run does not fit in 32 GB (16 B/param = 164 GB).
    let mut out = bin().args(["estimate"]).args(TEN_B).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    out.stdout.clear();
}

/// Ren et al., USENIX ATC'21: ZeRO-Offload fits a 13B-parameter model on one 32 GB V100.
#[test]
fn zero_offload_fits_13b_on_one_v100() {
    let mut a = TEN_B.to_vec();
    a[1] = "zero-offload-13b";
    a[11] = "1";
    let base = estimate(&a);
    assert!(!fits(&base));
    a.extend_from_slice(&["--offload", "zero-offload"]);
    assert!(fits(&estimate(&a)));
}

const ONE_T: [&str; 10] = [
    "--model",
    "zero-infinity-1t",
    "--system",
    "dgx-2",
    "--precision",
    "fp16",
    "--recompute",
    "full",
    "--zero",
    "3",
];

/// Rajbhandari et al., "ZeRO-Infinity", SC'21: a trillion-parameter model fine-tunes on one
/// DGX-2 node (16 V100-32GB) with its states on NVMe; host memory alone (1.5 TB) does not
/// hold its 18 B/param (16 B optimizer and fp32 gradient, 2 B parameters).
#[test]
fn zero_infinity_1t_fits_one_dgx2_on_nvme_only() {
    let on = |off: &str| {
        let mut a = ONE_T.to_vec();
        a.extend_from_slice(&["--gpus", "16", "--offload", off]);
        fits(&estimate(&a))
    };
    assert!(on("zero-infinity"));
    assert!(!on("zero-infinity:host"));
    assert!(!on("none"));
}

/// DeepSpeed's ZeRO-3 Offload announcement (microsoft/DeepSpeed
/// docs/_posts/2021-03-08-zero3-offload.md) and ZeRO-Infinity (SC'21): the 1T model
/// sustains 25 PFLOP/s on 512 V100 (32 DGX-2), 48.9 TFLOP/s per GPU (~40% of peak), with
/// parameters and optimizer on the host. The batch is not stated ("taking advantage of a
/// larger batch size"): the largest micro-batch that fits in HBM, 3. Within 15%.
#[test]
fn zero_infinity_1t_on_512_v100_at_25_pflops() {
    let run = |mb: &str| {
        let mut a = ONE_T.to_vec();
        a.extend_from_slice(&["--gpus", "512", "--offload", "zero-infinity:host"]);
        a.extend_from_slice(&["--micro-batch", mb]);
        estimate(&a)
    };
    assert!(!fits(&run("4")));
    let r = run("3");
    assert!(fits(&r));
    let tf = v100_tflops(&r);
    assert!(
        (tf / 48.9 - 1.0).abs() <= 0.15,
        "{tf} TFLOP/s per GPU vs 48.9"
    );
    let pflops = tf * 512.0 / 1e3;
    assert!(pflops >= 25.0 * 0.85, "{pflops} PFLOP/s");
}

const LLAMA: [&str; 12] = [
    "--model",
    "llama3-70b",
    "--system",
    "dgx-h100",
    "--gpus",
    "8",
    "--tp",
    "8",
    "--recompute",
    "full",
    "--global-batch",
    "16",
];

/// A Llama 3 70B full fine-tune on one 8×H100 node needs 16 B/param of model states, 140
/// GB per GPU at TP 8: it does not fit (exit 3). With the optimizer on the host it fits,
/// and the estimate shows what it pays: the CPU step (8.82e9 params / (3.8e9/8) per s =
/// 18.6 s) and the gradients down and parameters up (17.6 GB each way at 50 GB/s).
#[test]
fn llama3_70b_fits_on_one_h100_node_with_optimizer_offload() {
    let out = bin().arg("estimate").args(LLAMA).output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    let mut a = LLAMA.to_vec();
    a.extend_from_slice(&["--offload", "optimizer"]);
    let r = estimate(&a);
    assert!(fits(&r));
    let t = &r["time_breakdown"];
    let shard = 8.8192e9;
    assert_relative_eq!(
        t["optimizer_s"].as_f64().unwrap(),
        shard / (3.8e9 / 8.0),
        max_relative = 0.01
    );
    let off = &t["offload"];
    assert_relative_eq!(
        off["exposed_s"].as_f64().unwrap(),
        2.0 * shard * 2.0 / 50e9,
        max_relative = 0.01
    );
    assert_relative_eq!(
        off["host_bytes"].as_f64().unwrap(),
        shard * 16.0,
        max_relative = 0.01
    );
    // The table names the offload row.
    let mut t = vec!["estimate"];
    t.extend_from_slice(&LLAMA);
    t.extend_from_slice(&["--offload", "optimizer"]);
    let text = common::text(&t);
    assert!(
        text.contains("offload transfers (exposed; optimizer)"),
        "{text}"
    );
}

/// On GB200 NVL72 the same optimizer offload rides NVLink-C2C: its transfers cost less
/// than on the PCIe host by the bandwidth ratio of the tiers (225 / 50 GB/s = 4.5, latency
/// aside), its CPU step by the ratio of the CPU rate per GPU ((3.2e9/2) / (3.8e9/8) = 3.37).
#[test]
fn gb200_offload_costs_less_by_the_tier_ratio() {
    let run = |sys: &str| {
        let mut a = LLAMA.to_vec();
        a[3] = sys;
        a.extend_from_slice(&["--offload", "optimizer"]);
        estimate(&a)["time_breakdown"].clone()
    };
    let (h, g) = (run("dgx-h100"), run("gb200-nvl72"));
    let x = |t: &Value, k: &str| t["offload"][k].as_f64().unwrap();
    assert_relative_eq!(
        x(&h, "exposed_s") / x(&g, "exposed_s"),
        225.0 / 50.0,
        max_relative = 0.02
    );
    let opt = |t: &Value| t["optimizer_s"].as_f64().unwrap();
    assert_relative_eq!(
        opt(&h) / opt(&g),
        (3.2e9 / 2.0) / (3.8e9 / 8.0),
        max_relative = 0.01
    );
}

#[test]
fn explain_shows_each_transfer_with_numbers() {
    let mut a = vec!["estimate"];
    a.extend_from_slice(&LLAMA);
    a.extend_from_slice(&["--offload", "optimizer", "--explain"]);
    let text = common::text(&a);
    for needle in [
        "offload optimizer:",
        "gradients down at the step: 16.43 GiB",
        "updated parameters after the step: 16.43 GiB",
        "CPU Adam step",
        "+ exposed offload",
    ] {
        assert!(text.contains(needle), "{needle}\n{text}");
    }
}

/// The sweep's offload axis: none fits on one H100 node without it; with it, plans appear.
#[test]
fn sweep_axis_finds_plans_that_fit_only_with_offload() {
    let base = [
        "sweep",
        "--model",
        "llama3-70b",
        "--system",
        "dgx-h100",
        "--gpus",
        "8",
        "--global-batch",
        "16",
        "--tp",
        "8",
        "--pp",
        "1",
    ];
    let out = bin().args(base).output().unwrap();
    assert_ne!(out.status.code(), Some(0));
    let mut a = base.to_vec();
    a.extend_from_slice(&["--offload", "none,optimizer"]);
    let r = json(&a);
    let rows = r["top"].as_array().unwrap();
    assert!(!rows.is_empty());
    assert!(rows.iter().all(|row| row["plan"]["offload"] == "optimizer"));
}

#[test]
fn bad_offload_input_is_a_usage_error() {
    for (sys, off, what) in [
        ("dgx-h100", "optimiser", "did you mean 'optimizer'"),
        ("dgx-h100", "params", "params offload needs zero = 3"),
        ("dgx-h800", "optimizer", "'host' tier"),
    ] {
        let a = [
            "estimate",
            "--model",
            "llama3-8b",
            "--system",
            sys,
            "--gpus",
            "8",
            "--offload",
            off,
        ];
        let out = bin().args(a).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert_eq!(out.status.code(), Some(2), "{a:?}: {err}");
        assert!(err.contains(what), "{a:?}: {err}");
    }
}

#[test]
fn some_layers_offloaded_as_megatron_allows() {
    // Megatron-core's TransformerConfig: CPU offloading of N layers needs PP 1, no
    // recomputation and N below the layers (Llama 3 8B: 32).
    let run = |extra: &str| {
        let mut args: Vec<String> = "estimate --model llama3-8b --system gb200-nvl72 --gpus 8 \
             --global-batch 16 --offload activations=8"
            .split_whitespace()
            .map(String::from)
            .collect();
        args.extend(extra.split_whitespace().map(String::from));
        common::bin().args(&args).output().unwrap()
    };
    let ok = run("");
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for (extra, why) in [
        ("--pp 2", "needs pp = 1"),
        ("--recompute selective", "needs recompute = none"),
    ] {
        let out = run(extra);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {err}");
        assert!(
            err.contains(why) && err.contains("activations=8"),
            "{extra}: {err}"
        );
    }
    let out = common::bin()
        .args(
            "estimate --model llama3-8b --system gb200-nvl72 --gpus 8 --global-batch 16 \
             --offload activations=32"
                .split_whitespace(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("must offload fewer layers than the model's 32"),
        "{err}"
    );
}

/// Llama 3 8B on two DGX H100 nodes at sequence 8192, global batch 16 (the parameter count
/// 8.0303e9 is Meta's 8.03 B: embedding and output 2 × 128256 × 4096, 32 layers of
/// attention 4096 × 6144 + 4096 × 4096 and SwiGLU 3 × 4096 × 14336, norms).
const L8: &str = "--model llama3-8b --system dgx-h100 --gpus 16 --global-batch 16 --seq-len 8192";

/// The offload part of `L8` + `extra`'s explain (its `offload …:` line and the transfer
/// lines under it) and the estimate's JSON.
fn offload_of(extra: &[&str]) -> (String, Value) {
    let mut a: Vec<&str> = L8.split_whitespace().collect();
    a.extend_from_slice(extra);
    let v = estimate(&a);
    let mut e = vec!["estimate"];
    e.extend_from_slice(&a);
    e.push("--explain");
    let text = common::text(&e);
    let from = text.find("\n  offload ").expect("an offload line");
    let part: Vec<&str> = text[from + 1..]
        .lines()
        .take_while(|l| l.starts_with("  offload ") || l.starts_with("    "))
        .collect();
    (part.join("\n"), v)
}

/// ZeRO-3 fetches a parameter shard over DP × CP (8 × 2 here: 8.0303e9 / 16 = 5.0189e8), or
/// over the HSDP group when there is one (8 of DP 16: 1.0038e9); without ZeRO-3 every
/// parameter is on the device.
#[test]
fn the_fetched_parameter_shard_spans_dp_and_cp_or_the_hsdp_group() {
    let (t, _) = offload_of(&["--zero", "3", "--cp", "2", "--offload", "params"]);
    assert!(
        t.contains("optimizer shard 5.0189e8 params, parameter shard 5.0189e8,"),
        "{t}"
    );
    let (t, _) = offload_of(&["--zero", "3", "--hsdp", "8", "--offload", "params"]);
    assert!(t.contains("parameter shard 1.0038e9,"), "{t}");
    let (t, _) = offload_of(&["--offload", "activations"]);
    assert!(t.contains("parameter shard 8.0303e9,"), "{t}");
}

/// With full recomputation a layer keeps only its input, s·b·h·2 B = 8192 · 4096 · 2 =
/// 64 MiB, split over CP 2 (32 MiB); 32 layers for each of the 2 micro-batches (16 / DP 8):
/// 2 GiB offloaded per iteration, 1 GiB of it on the host at once. Its backward window holds the recomputation: the explain's
/// backward per micro-batch is the backward plus the recompute time (one stage, one
/// micro-batch per DP 16 rank).
#[test]
fn offloaded_activations_and_the_backward_window_by_hand() {
    let (_, v) = offload_of(&[
        "--cp",
        "2",
        "--recompute",
        "full",
        "--offload",
        "activations",
    ]);
    let o = &v["time_breakdown"]["offload"];
    assert_eq!(
        o["activations_bytes"].as_f64().unwrap(),
        2.0 * 1024f64.powi(3)
    );
    // The host holds what is in flight: one stage under 1F1B keeps one micro-batch's 32
    // layers, 1 GiB.
    assert_eq!(o["host_bytes"].as_f64().unwrap(), 1024f64.powi(3));
    let (t, v) = offload_of(&["--recompute", "full", "--offload", "activations"]);
    let tb = &v["time_breakdown"];
    let bwd = tb["backward_s"].as_f64().unwrap() + tb["recompute_s"].as_f64().unwrap();
    assert!(tb["recompute_s"].as_f64().unwrap() > 0.1);
    let shown = format!(
        "backward {} of compute",
        astrolabe::units::Seconds::new(bwd)
    );
    assert!(t.contains(&shown), "{shown}\n{t}");
}

/// Only the transfers a plan makes are listed: a parameter offload has no activation or
/// gradient lines and no CPU step.
#[test]
fn explain_lists_only_the_transfers_that_happen() {
    let (t, _) = offload_of(&["--zero", "3", "--offload", "params"]);
    assert!(t.contains("parameter fetches (up, every pass):"), "{t}");
    for absent in [
        "activations (down",
        "gradients streamed",
        "gradients down",
        "CPU Adam step",
    ] {
        assert!(!t.contains(absent), "{absent}\n{t}");
    }
}

//! Round trips of `calibrate gemm` and `calibrate step` (issue 21): measurements made from
//! known parameters are fitted, the fitted device or system is written, read back by the
//! product, and reproduces every measurement within what the fit reports.

use crate::common;
use astrolabe::catalog;
use astrolabe::compute::Precision;
use astrolabe::estimate;
use astrolabe::parallel::{AttentionKernel, PlanSpec};
use astrolabe::system::CalibrationSpec;
use common::{json, tmp};
use serde_json::Value;
use std::path::Path;

/// A100 80 GB (tile 256×128, 108 SMs, BF16 peak 312 TFLOP/s).
const PEAK: f64 = 312e12;

/// GEMM shapes (M, N, K) and their tile/wave quantisation q on the A100, by hand: 2304 ×
/// 1536 is 9·12 = 108 tiles of 256×128 (one full wave: q = 1), 4608 × 1536 two full
/// waves, 27648 × 128 one wave of 108 (its transpose, 216 tiles of 128×256 half empty,
/// is the worse); 1000 × 1000 is 4·8 = 32 tiles in one wave of 108:
/// q = 10⁶/(108·256·128) = 0.282570.
fn shapes() -> Vec<(f64, f64, f64, f64)> {
    let mut v = vec![];
    for k in [64.0, 256.0, 1024.0, 4096.0] {
        v.push((2304.0, 1536.0, k, 1.0));
        v.push((4608.0, 1536.0, k, 1.0));
        v.push((27648.0, 128.0, k, 1.0));
        v.push((1000.0, 1000.0, k, 1e6 / (108.0 * 256.0 * 128.0)));
    }
    v
}

/// t = 2MNK / (P·e·q·K/(K + K₀)) + o (Device::gemm_time, compute.rs).
fn gemm_time(m: f64, n: f64, k: f64, q: f64, e: f64, k0: f64, o: f64) -> f64 {
    2.0 * m * n * k / (PEAK * e * q * k / (k + k0)) + o
}

/// Writes the CSV of `calibrate gemm` with times from (e, K₀, o); returns the rows.
fn gemm_csv(path: &Path, e: f64, k0: f64, o: f64) -> Vec<(f64, f64, f64, f64)> {
    let mut csv = String::from("m,n,k,dtype,time\n");
    let mut rows = vec![];
    for (m, n, k, q) in shapes() {
        let t = gemm_time(m, n, k, q, e, k0, o);
        csv += &format!("{m},{n},{k},bf16,{} us\n", t * 1e6);
        rows.push((m, n, k, t));
    }
    std::fs::write(path, csv).unwrap();
    rows
}

/// Fits, writes and reads back; returns the largest relative error of the written device
/// over the rows, and the fit's report.
fn gemm_roundtrip(name: &str, e: f64, k0: f64, o: f64) -> (f64, Value) {
    let dir = tmp(name);
    let (csv, out) = (dir.join("gemms.csv"), dir.join("fitted.toml"));
    let rows = gemm_csv(&csv, e, k0, o);
    let report = json(&[
        "calibrate",
        "gemm",
        csv.to_str().unwrap(),
        "--device",
        "a100-80gb",
        "--write",
        out.to_str().unwrap(),
    ]);
    let dev = catalog::device(out.to_str().unwrap()).unwrap();
    let peak = dev.peak(Precision::Bf16).unwrap();
    let worst = rows
        .iter()
        .map(|&(m, n, k, t)| (dev.gemm_time(peak, m, n, k, 1.0).get() - t).abs() / t)
        .fold(0.0, f64::max);
    std::fs::remove_dir_all(&dir).ok();
    (worst, report)
}

#[test]
fn calibrate_gemm_written_device_reproduces_its_measurements() {
    // e = 0.72, K₀ = 160, o = 5 µs: the written device gives back every time.
    let (worst, _) = gemm_roundtrip("gemm_rt_exact", 0.72, 160.0, 5e-6);
    assert!(worst < 1e-6, "worst relative error {worst:e}");
}

#[test]
fn calibrate_gemm_reports_what_the_written_device_reproduces() {
    // K₀ = 160.4 is written as a whole number of K (the device file's gemm_k_overhead):
    // 160, which makes a K = 64 GEMM (64 + 160)/(64 + 160.4) = 0.18% faster. The report
    // says how close the written device comes, and it does come that close.
    let (worst, report) = gemm_roundtrip("gemm_rt_round", 0.72, 160.4, 5e-6);
    assert!(worst > 1e-4 && worst < 0.005, "{worst:e}");
    let notes = report["notes"].to_string();
    let claim = notes
        .split("reproduces the measurements within ")
        .nth(1)
        .and_then(|s| s.split('%').next())
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no claim in the notes: {notes}"));
    assert!(worst * 100.0 <= claim + 1e-9, "{worst:e} vs {claim}%");
    assert!(claim < 0.5, "{claim}");
}

/// Plans of GPT-3 5B on DGX A100 that weigh compute and communication differently:
/// (gpus, tp, pp, global batch).
const PLANS: [(u32, u32, u32, u32); 4] =
    [(8, 1, 1, 64), (8, 8, 1, 16), (16, 2, 2, 32), (16, 4, 4, 64)];

fn spec(gpus: u32, tp: u32, pp: u32, gb: u32) -> PlanSpec {
    PlanSpec {
        gpus: Some(gpus),
        tp,
        pp,
        global_batch: Some(gb),
        ..PlanSpec::practice()
    }
}

#[test]
fn calibrate_step_written_system_reproduces_its_measurements() {
    // Iteration times made with compute ×1.2 and communication ×1.5: the fit finds the
    // factors, and `estimate` with the written system gives back every measured time.
    let (a, b) = (1.2, 1.5);
    let model = catalog::model("gpt3-5b").unwrap();
    let dir = tmp("step_rt");
    let (csv, out) = (dir.join("steps.csv"), dir.join("fitted.toml"));
    let mut text = String::from("model,system,time,gpus,tp,pp,global_batch\n");
    let mut measured = vec![];
    for (g, tp, pp, gb) in PLANS {
        let sys = catalog::system("dgx-a100")
            .unwrap()
            .with_gpus(g)
            .unwrap()
            .calibrated(CalibrationSpec {
                compute: a,
                communication: b,
            })
            .unwrap();
        let plan = estimate::plan(&model, &sys, &spec(g, tp, pp, gb)).unwrap();
        let t = estimate::evaluate(&model, &sys, &plan)
            .unwrap()
            .time
            .total
            .get();
        text += &format!("gpt3-5b,dgx-a100,{} s,{g},{tp},{pp},{gb}\n", t);
        measured.push(t);
    }
    std::fs::write(&csv, text).unwrap();
    let report = json(&[
        "calibrate",
        "step",
        csv.to_str().unwrap(),
        "--write",
        out.to_str().unwrap(),
    ]);
    let f = &report["tables"]["fitted factors"];
    let factor = |i: usize| f[i]["value"].as_f64().unwrap();
    assert!(
        (factor(0) - a).abs() < 1e-6 && (factor(1) - b).abs() < 1e-6,
        "{f}"
    );
    // The fit reports residuals of ~1e-11: the written system must do as well.
    let rows = report["tables"]["measurements"].as_array().unwrap();
    assert!(
        rows.iter()
            .all(|r| r["residual"].as_f64().unwrap().abs() < 1e-6),
        "{report}"
    );
    for ((g, tp, pp, gb), t) in PLANS.iter().zip(&measured) {
        let v = json(&[
            "estimate",
            "--model",
            "gpt3-5b",
            "--system",
            out.to_str().unwrap(),
            "--gpus",
            &g.to_string(),
            "--tp",
            &tp.to_string(),
            "--pp",
            &pp.to_string(),
            "--global-batch",
            &gb.to_string(),
        ]);
        let got = v["iteration_time_s"].as_f64().unwrap();
        assert!(
            (got - t).abs() / t < 1e-6,
            "{g} GPUs tp {tp} pp {pp}: {got} vs {t}"
        );
    }
    let sys = catalog::system(out.to_str().unwrap()).unwrap();
    let c = sys.spec.calibration;
    assert!(
        (c.compute - a).abs() < 1e-6 && (c.communication - b).abs() < 1e-6,
        "{c:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn calibration_compute_factor_scales_every_compute_term() {
    // [calibration] compute = a multiplies every kernel's time (system.rs): on one GPU
    // (no communication) forward, backward and the optimizer step scale by exactly a, with
    // fused attention (Transformer Engine's kernel and FlashAttention-2) and in FP8 as in
    // BF16.
    let model = catalog::model("gpt3-5b").unwrap();
    let base = catalog::system("dgx-h100").unwrap().with_gpus(1).unwrap();
    let a = 1.25;
    let cal = base
        .calibrated(CalibrationSpec {
            compute: a,
            communication: 1.0,
        })
        .unwrap();
    let kernels = [AttentionKernel::Te, AttentionKernel::Fa2];
    for (precision, attention_kernel) in [Precision::Bf16, Precision::Fp8]
        .into_iter()
        .flat_map(|p| kernels.map(|k| (p, k)))
    {
        let s = PlanSpec {
            gpus: Some(1),
            global_batch: Some(2),
            precision,
            attention_kernel,
            ..PlanSpec::practice()
        };
        let plan = estimate::plan(&model, &base, &s).unwrap();
        let e0 = estimate::evaluate(&model, &base, &plan).unwrap().time;
        let e1 = estimate::evaluate(&model, &cal, &plan).unwrap().time;
        for (what, x0, x1) in [
            ("forward", e0.forward, e1.forward),
            ("backward", e0.backward, e1.backward),
            ("optimizer", e0.optimizer, e1.optimizer),
            ("total", e0.total, e1.total),
        ] {
            let r = x1.get() / x0.get();
            assert!(
                (r - a).abs() < 1e-9,
                "{precision:?} {attention_kernel:?} {what}: ×{r}"
            );
        }
    }
}

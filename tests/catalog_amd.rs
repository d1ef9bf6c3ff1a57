//! The AMD presets (issue 19 item 6): the `mi355x` device and the `mi300x-cluster` and
//! `mi355x-cluster` systems, checked against numbers worked out here by hand from AMD's
//! figures (the arithmetic is in the comments, not taken from running this crate): the
//! device's peaks as loaded, the Infinity Fabric bandwidth per GPU each system presents,
//! one estimate per system end to end, and one collective against the closed form of
//! `src/collective/ring.rs` and `direct.rs` on a fully connected dimension.

use approx::assert_relative_eq;
use assert_cmd::Command;
use astrolabe::catalog;
use astrolabe::network::DimKind;
use serde_json::Value;

/// Runs `astrolabe ARGS --format json`, asserts exit 0, and returns the JSON.
#[track_caller]
fn json(args: &[&str]) -> Value {
    let out = Command::cargo_bin("astrolabe")
        .expect("binary built")
        .args(args)
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// A peak as the device presents it, in FLOP/s; `None` when the preset has none.
type Peak = Option<astrolabe::units::FlopRate>;

#[track_caller]
fn peak(what: &str, got: Peak, expected: f64) {
    let got = got
        .unwrap_or_else(|| panic!("mi355x has no {what} peak"))
        .get();
    assert_relative_eq!(got, expected, max_relative = 1e-12);
}

#[test]
fn mi355x_peaks_are_amds_dense_figures() {
    let d = catalog::device("mi355x").expect("mi355x loads");
    let m = &d.spec.matrix;
    // 256 CUs × 2.4 GHz × FLOP per clock per CU (FP8 8192, FP16/BF16 4096, FP32 256):
    //   2.4e9 × 256 × 4096 = 2 516 582 400 000 000 → 2516.6 TFLOP/s (AMD: 2.5 PFLOP/s)
    //   2.4e9 × 256 × 8192 = 5 033 164 800 000 000 → 5033.2 TFLOP/s (AMD: 5.0 PFLOP/s)
    //   2.4e9 × 256 ×  256 =   157 286 400 000 000 →  157.3 TFLOP/s (AMD: 157.3)
    let per_cu = |flop_per_clock: f64| 2.4e9 * 256.0 * flop_per_clock;
    for (what, got, rate) in [
        ("fp16", m.fp16, 4096.0),
        ("bf16", m.bf16, 4096.0),
        ("fp8", m.fp8, 8192.0),
        ("fp32", m.fp32, 256.0),
    ] {
        // The file rounds to 0.1 TFLOP/s: within 0.05e12 of the product.
        let exact = per_cu(rate);
        let g = got
            .unwrap_or_else(|| panic!("mi355x has no {what} peak"))
            .get();
        assert!((g - exact).abs() <= 0.05e12, "{what}: {g} vs {exact}");
    }
    peak("bf16", m.bf16, 2516.6e12);
    peak("fp16", m.fp16, 2516.6e12);
    peak("fp8", m.fp8, 5033.2e12);
    peak("fp32", m.fp32, 157.3e12);
    // CDNA 4 has no TF32 GEMM; MXFP8 has no datasheet figure; NVFP4 is NVIDIA's format.
    assert_eq!((m.tf32, m.mxfp8, m.nvfp4), (None, None, None));
    assert_relative_eq!(d.spec.vector.get(), 157.3e12, max_relative = 1e-12);
    // HBM3E 288 GB (decimal) at 8 TB/s; 256 CUs (32 per XCD × 8 XCDs).
    assert_relative_eq!(d.spec.memory.get(), 288e9, max_relative = 1e-12);
    assert_relative_eq!(d.spec.memory_bandwidth.get(), 8e12, max_relative = 1e-12);
    assert_eq!(d.spec.compute_units, 256);
    // Efficiencies are mi300x's (an assumption stated in the file).
    let mi300x = catalog::device("mi300x").expect("mi300x loads");
    assert_eq!(d.spec.efficiency, mi300x.spec.efficiency);
}

/// (kind, size, bandwidth in bytes/s) of each network dimension of a system preset.
fn dims(system: &str) -> Vec<(DimKind, u32, f64)> {
    let s = catalog::system(system).unwrap_or_else(|e| panic!("{system}: {e}"));
    s.topology
        .dims()
        .iter()
        .map(|d| (d.kind, d.size, d.bandwidth.get()))
        .collect()
}

#[test]
fn infinity_fabric_bandwidth_per_gpu() {
    // A fully connected dimension's B is the GPU's injection bandwidth summed over its
    // p − 1 links, one direction (src/network.rs). Both nodes: 8 GPUs, 7 links each.
    // MI300X: 64 GB/s per link per direction raw, 48 GB/s after protocol and ECC
    // (ROCm/rccl#1210): B = 7 × 48e9 = 336e9 B/s (896 GB/s aggregate bidirectional raw =
    // 7 × 2 × 64).
    let d = dims("mi300x-cluster");
    assert_eq!((d[0].0, d[0].1), (DimKind::FullyConnected, 8));
    assert_relative_eq!(d[0].2, 7.0 * 48e9, max_relative = 1e-12);
    assert_relative_eq!(d[0].2, 336e9, max_relative = 1e-12);
    // MI355X: 153.6 GB/s per link bidirectional = 76.8 per direction (1075.2 GB/s
    // aggregate = 7 × 153.6), at the same 48/64 = 0.75: B = 7 × 76.8e9 × 0.75 = 403.2e9 B/s.
    let d355 = dims("mi355x-cluster");
    assert_eq!((d355[0].0, d355[0].1), (DimKind::FullyConnected, 8));
    assert_relative_eq!(d355[0].2, 7.0 * 76.8e9 * 0.75, max_relative = 1e-12);
    assert_relative_eq!(d355[0].2, 403.2e9, max_relative = 1e-12);
    // One link, B/(p − 1): 48 GB/s and 57.6 GB/s per direction.
    assert_relative_eq!(d[0].2 / 7.0, 48e9, max_relative = 1e-12);
    assert_relative_eq!(d355[0].2 / 7.0, 57.6e9, max_relative = 1e-12);
    // Scale-out on both: one 400 Gb/s NIC per GPU at the 47 GB/s measured on DGX H100, up
    // to 128 nodes of 8 (1024 GPUs).
    for (name, d) in [("mi300x-cluster", &d), ("mi355x-cluster", &d355)] {
        assert_eq!(d.len(), 2, "{name}");
        assert_eq!((d[1].0, d[1].1), (DimKind::Switch, 128), "{name}");
        assert_relative_eq!(d[1].2, 47e9, max_relative = 1e-12);
        let s = catalog::system(name).expect("loads");
        assert_eq!(s.gpus(), 1024, "{name}");
    }
    assert_eq!(
        catalog::system("mi300x-cluster").unwrap().device.spec.name,
        "mi300x"
    );
    assert_eq!(
        catalog::system("mi355x-cluster").unwrap().device.spec.name,
        "mi355x"
    );
}

#[test]
fn llama3_8b_estimates_on_both_amd_clusters() {
    for system in ["mi300x-cluster", "mi355x-cluster"] {
        let j = json(&[
            "estimate",
            "--model",
            "llama3-8b",
            "--system",
            system,
            "--gpus",
            "16",
            "--tp",
            "1",
            "--global-batch",
            "64",
        ]);
        let t = j["iteration_time_s"].as_f64().expect("iteration_time_s");
        assert!(t.is_finite() && t > 0.0, "{system}: {t}");
        let mfu = j["mfu"].as_f64().expect("mfu");
        assert!(
            mfu.is_finite() && mfu > 0.0 && mfu < 1.0,
            "{system}: MFU {mfu}"
        );
        assert_eq!(j["fits"].as_bool(), Some(true), "{system}");
    }
}

/// `collective all-gather --size 1GiB --system mi300x-cluster --nodes 1 [extra]`: the
/// total time and the per-dimension algorithm of the one row.
fn all_gather_1gib(extra: &[&str]) -> (f64, String) {
    let mut args = vec![
        "collective",
        "all-gather",
        "--size",
        "1GiB",
        "--system",
        "mi300x-cluster",
        "--nodes",
        "1",
    ];
    args.extend_from_slice(extra);
    let j = json(&args);
    let row = &j["rows"][0];
    assert_eq!(row["nranks"], 8);
    (
        row["time_s"].as_f64().expect("time_s"),
        row["algorithm"].as_str().expect("algorithm").to_string(),
    )
}

#[test]
fn all_gather_on_one_mi300x_node_matches_the_closed_forms() {
    // One node: fully_connected(8, 336 GB/s, 3.4 us); the 1-node switch is skipped.
    // n = 1 GiB = 1 073 741 824 B (all-gather output per GPU), p = 8, α = 3.4 us.
    let (n, p, alpha, b) = (1_073_741_824.0_f64, 8.0_f64, 3.4e-6, 336e9);
    // `auto` under the default NCCL schedule chooses among NCCL's algorithms only (ring,
    // tree, in-network; src/collective/nccl.rs); for an all-gather on a fully connected
    // block that is the ring (ring.rs): (p−1)α + (p−1)/p · n/B_r, with B_r the
    // ⌊(p−1)/2⌋ = 3 edge-disjoint bidirectional rings on 6 of the 7 links
    // (cost::ring_bandwidth): B_r = 336e9 × 6/7 = 288e9 B/s.
    //   7 × 3.4 us = 23.8 us; 7/8 × 1 073 741 824 / 288e9 = 3 262.236 us; T = 3 286.036 us.
    let ring = (p - 1.0) * alpha + (p - 1.0) / p * n / (b * 6.0 / 7.0);
    assert_relative_eq!(ring, 23.8e-6 + 3262.2364444e-6, max_relative = 1e-9);
    let (t, alg) = all_gather_1gib(&[]);
    assert_eq!(alg, "d0 ring");
    assert_relative_eq!(t, ring, max_relative = 1e-9);
    // The direct algorithm (direct.rs), every piece on its own link at once, one step:
    // α + (p−1)/p · n/B = 3.4 us + 7/8 × 1 073 741 824 / 336e9 = 3.4 + 2 796.202 us
    // = 2 799.603 us; `auto` with the baseline schedule, which tries every algorithm,
    // keeps it: 14.8% below the ring, whose three rings leave one link of seven idle.
    let direct = alpha + (p - 1.0) / p * n / b;
    assert_relative_eq!(direct, 3.4e-6 + 2796.2026667e-6, max_relative = 1e-9);
    for extra in [
        &["--algorithm", "direct"][..],
        &["--schedule", "baseline"][..],
    ] {
        let (t, alg) = all_gather_1gib(extra);
        assert_eq!(alg, "d0 direct", "{extra:?}");
        assert_relative_eq!(t, direct, max_relative = 1e-9);
    }
    assert!(direct < ring);
}

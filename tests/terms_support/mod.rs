//! What the `terms_*` tests share: a small GPT-style model and systems with round numbers,
//! and the textbook α-β costs of one collective on one switch dimension, written out
//! independently of the crate (Thakur, Rabenseifner & Gropp 2005; Chan et al. 2007;
//! nccl-tests' size convention: n is the buffer per NPU, the whole output for all-gather
//! and the whole input for reduce-scatter and all-to-all).
#![allow(dead_code)] // each test binary uses its own subset

use astrolabe::catalog;
use astrolabe::estimate::{self, Estimate};
use astrolabe::model::{Model, ModelSpec};
use astrolabe::network::Topology;
use astrolabe::parallel::PlanSpec;
use astrolabe::system::System;
use std::path::Path;

/// GPT-style model: 16 layers, h = 4096, 32 heads, FFN 16384, s = 2048 (GeLU, biases,
/// learned positions, tied embeddings) with a vocabulary of 128, so that the embedding and
/// the head weigh < 0.2% of a stage and the pipeline's stages are equal to that precision.
pub const MODEL: &str = r#"
name = "terms-gpt"
description = "term tests: 16 layers, h 4096, vocabulary 128"
[transformer]
layers = 16
hidden = 4096
heads = 32
ffn_hidden = 16384
vocab = 128
seq_len = 2048
"#;

pub const L: f64 = 16.0;
pub const H: f64 = 4096.0;
pub const S: f64 = 2048.0;
pub const V: f64 = 128.0;

/// Parameters of one layer of [`MODEL`]: QKV 3h² + 3h, projection h² + h, MLP 4h² + 4h and
/// 4h² + h, two LayerNorms 2·2h: 12h² + 13h.
pub fn layer_params() -> f64 {
    12.0 * H * H + 13.0 * H
}

/// [`MODEL`], read as a model file is (`catalog::parse_toml`, then validated).
pub fn model() -> Model {
    let spec: ModelSpec = catalog::parse_toml(MODEL, Path::new("terms-gpt.toml")).unwrap();
    Model::from_spec(spec).unwrap()
}

/// The DGX A100 device (A100 80 GB) on the given network.
pub fn system(topology: &str) -> System {
    let mut s = catalog::system("dgx-a100").unwrap();
    s.topology = Topology::parse(topology).unwrap();
    s
}

#[track_caller]
pub fn run(m: &Model, sys: &System, spec: PlanSpec) -> Estimate {
    let plan = estimate::plan(m, sys, &spec).unwrap();
    estimate::evaluate(m, sys, &plan).unwrap()
}

/// Interference κ of the A100 preset (Lee et al. 2025: compute slowed by an overlapped
/// collective).
pub const KAPPA: f64 = 0.189;

/// Slowdown σ of an EP all-to-all beside compute on the A100 preset (the device default,
/// read off Megatron-Bridge's 16×H100 EP-overlap profile).
pub const SIGMA: f64 = 0.31;

/// A100 80 GB: memory-bound time of `bytes` in `kernels` launches,
/// bytes / (2039 GB/s · 0.7) + kernels · 4 µs.
pub fn mem(bytes: f64, kernels: f64) -> f64 {
    bytes / (2039e9 * 0.7) + kernels * 4e-6
}

/// A100 80 GB: a 16-bit GEMM M×N×K whose tile/wave quantisation is `q` (worked out at the
/// call), 2MNK / (312 TFLOP/s · 0.8 · q · K/(K + 128)) + 4 µs.
pub fn gemm(m: f64, n: f64, k: f64, q: f64) -> f64 {
    2.0 * m * n * k / (312e12 * 0.8 * q * k / (k + 128.0)) + 4e-6
}

/// Ring all-reduce on one switch of p ports: 2(p−1)·α + 2(p−1)/p · n/B.
pub fn all_reduce(n: f64, p: f64, alpha: f64, b: f64) -> f64 {
    2.0 * (p - 1.0) * alpha + 2.0 * (p - 1.0) / p * n / b
}

/// Ring reduce-scatter or all-gather on one switch: (p−1)·α + (p−1)/p · n/B.
pub fn ring_half(n: f64, p: f64, alpha: f64, b: f64) -> f64 {
    (p - 1.0) * alpha + (p - 1.0) / p * n / b
}

/// Direct all-to-all through one switch port: α + (p−1)/p · n/B.
pub fn all_to_all(n: f64, p: f64, alpha: f64, b: f64) -> f64 {
    alpha + (p - 1.0) / p * n / b
}

/// One message to one peer: α + n/B.
pub fn send(n: f64, alpha: f64, b: f64) -> f64 {
    alpha + n / b
}

/// |got − want| ≤ tol·|want|, with the numbers in the message.
#[track_caller]
pub fn close(got: f64, want: f64, tol: f64, what: &str) {
    assert!(
        (got - want).abs() <= tol * want.abs(),
        "{what}: got {got:.6e}, want {want:.6e} (relative error {:.3e}, tolerance {tol:.0e})",
        (got - want) / want
    );
}

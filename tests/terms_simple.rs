//! The terms of the two models without a transformer's structure (`src/estimate/simple.rs`),
//! each against its formula worked out by hand on an A100 (312 TFLOP/s BF16, 2039 GB/s at
//! 0.7, 4 µs per kernel, 108 SMs, 256×128 tiles, GEMM plateau 0.8, k0 = 128) and one switch
//! of 4 ports at 100 GB/s and 1 µs: a DLRM (Naumov et al. 2019; the estimate's doc comment)
//! and a generic layered model. Each assertion fails if its term changes by 5%.

use crate::terms_support;

use astrolabe::estimate::{CommClass, Estimate};
use astrolabe::model::{Model, ModelSpec};
use astrolabe::parallel::PlanSpec;
use terms_support::{all_reduce, all_to_all, close, mem, run, system};

const BW: f64 = 100e9;
const ALPHA: f64 = 1e-6;

fn model(text: &str) -> Model {
    let spec: ModelSpec =
        astrolabe::catalog::parse_toml(text, std::path::Path::new("simple.toml")).unwrap();
    Model::from_spec(spec).unwrap()
}

/// DP 4 on the 4-port switch, `global` samples in micro-batches of `b`.
fn four_gpus(m: &Model, b: u32, global: u32) -> Estimate {
    run(
        m,
        &system("switch(4, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(4),
            micro_batch: b,
            global_batch: Some(global),
            ..PlanSpec::default()
        },
    )
}

/// A small DLRM: 8 tables of 1000 rows × 64 (fp32), 2 lookups per table, bottom MLP
/// 64 → 64, top MLP 100 → 10 (its input: the 64-wide dense vector and the 36 pairwise dot
/// products of the 9 vectors). Per sample:
/// - MLP parameters 64·64 + 64 + 100·10 + 10 = 5170 over 2 layers, a typical width
///   w = √(5170/2) = 50.84; forward FLOPs 2·36·64 (interaction) + 2·64·64 + 2·100·10 = 14,800;
/// - lookups 8·2·64·4 = 4096 B; the pooled vectors exchanged 8·64·4 = 2048 B;
/// - activations 36 + 64 + 10 = 110 values of 4 B.
///
/// Micro-batch b = 256 on 4 GPUs, global batch 2048: m = 2048/(4·256) = 2 micro-batches.
/// - MLP GEMM M = 256, N = K = w: one 256×128 tile (or two 128×256) in one wave of 108
///   SMs, q = 256·w/(108·256·128) = w/13,824, e = 0.8·q·w/(w + 128);
///   forward 14,800·256 FLOP / (312 TFLOP/s · e); backward twice that;
/// - lookups 4096·256 B in one kernel; backward twice;
/// - all-to-all of 256·2048 B each way per micro-batch: α + ¾·n/B;
/// - the MLP gradients in fp32 (5170·4 B, one bucket under PyTorch DDP's 25 MB) all-reduced,
///   the last bucket exposed: all of it;
/// - optimizer: Adam on the MLPs (16 B per parameter) and the sparse rows this device's
///   tables saw (1024 elements per sample × 2048 / 4 GPUs, each read as a gradient and read
///   and written: 12 B), in 4 kernels;
/// - memory: activations 110·256·4 B, buffers both all-to-all directions 2·256·2048 B.
///
/// Then the model FLOPs and MFU, the model states, the groups, one GPU (nothing exchanged)
/// and buckets small enough for the DP overlap to matter.
#[test]
fn dlrm_terms_by_hand() {
    let m = model(
        r#"
name = "dlrm-small"
description = "term test"
[dlrm]
tables = 8
rows = 1000
dim = 64
pooling = 2
bottom_mlp = [64, 64]
top_mlp = [10]
"#,
    );
    let e = four_gpus(&m, 256, 2048);
    let (b, mb) = (256.0, 2.0);
    let w = (5170.0_f64 / 2.0).sqrt();
    let eff = 0.8 * (w / 13_824.0) * w / (w + 128.0);
    let mlp = 14_800.0 * b / (312e12 * eff);
    let lookup = mem(4096.0 * b, 1.0);
    close(e.time.forward.get(), (mlp + lookup) * mb, 1e-9, "forward");
    close(
        e.time.backward.get(),
        2.0 * (mlp + lookup) * mb,
        1e-9,
        "backward",
    );
    let a2a = all_to_all(b * 2048.0, 4.0, ALPHA, BW);
    let ep = e.time.class(CommClass::Ep);
    close(ep.exposed.get(), 2.0 * a2a * mb, 1e-9, "all-to-all");
    close(
        ep.bytes.get(),
        2.0 * b * 2048.0 * mb,
        1e-12,
        "all-to-all bytes",
    );
    let dp = e.time.class(CommClass::Dp);
    close(
        dp.exposed.get(),
        all_reduce(5170.0 * 4.0, 4.0, ALPHA, BW),
        1e-9,
        "gradient all-reduce",
    );
    assert_eq!(dp.hidden.get(), 0.0);
    let rows = 1024.0 * 2048.0 / 4.0;
    close(
        e.time.optimizer.get(),
        mem(5170.0 * 16.0 + rows * 12.0, 4.0),
        1e-9,
        "optimizer",
    );
    let total = 3.0 * (mlp + lookup) * mb
        + 2.0 * a2a * mb
        + all_reduce(5170.0 * 4.0, 4.0, ALPHA, BW)
        + mem(5170.0 * 16.0 + rows * 12.0, 4.0);
    close(e.time.total.get(), total, 1e-9, "iteration");
    close(
        e.memory.activations.get(),
        110.0 * b * 4.0,
        1e-12,
        "activations",
    );
    close(e.memory.buffers.get(), 2.0 * b * 2048.0, 1e-12, "buffers");
    // Model FLOPs: forward + backward (3×) of every sample of the global batch; MFU against
    // 4 A100s' BF16 peak over the iteration.
    let flops = 3.0 * 14_800.0 * 2048.0;
    close(e.metrics.model_flops, flops, 1e-12, "model FLOPs");
    close(e.metrics.mfu, flops / (total * 312e12 * 4.0), 1e-9, "MFU");
    close(e.metrics.samples_per_s, 2048.0 / total, 1e-9, "samples/s");
    // Model states: the MLPs replicated under mixed-precision Adam (2, 2, 12 B per
    // parameter); each device's quarter of the tables (8·1000·64/4 = 128,000 fp32 values)
    // counts once as weights and once as the sparse optimizer's state.
    let emb = 8.0 * 1000.0 * 64.0 / 4.0 * 4.0;
    close(e.memory.weights.get(), 5170.0 * 2.0 + emb, 1e-12, "weights");
    close(e.memory.gradients.get(), 5170.0 * 2.0, 1e-12, "gradients");
    close(
        e.memory.optimizer.get(),
        5170.0 * 12.0 + emb,
        1e-12,
        "optimizer",
    );
    // The groups: DP spans the 4 ports; TP and PP are single devices.
    let sizes: Vec<u32> = e.groups.iter().map(|g| g.size).collect();
    assert_eq!((sizes[0], sizes[2], sizes[3]), (1, 4, 1), "{sizes:?}");
    // On one GPU nothing is exchanged: no gradient bytes, no all-reduce.
    let one = run(
        &m,
        &system("switch(4, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(1),
            micro_batch: 256,
            global_batch: Some(512),
            ..PlanSpec::default()
        },
    );
    let dp1 = one.time.class(CommClass::Dp);
    assert_eq!((dp1.bytes.get(), dp1.exposed.get()), (0.0, 0.0));
    // Buckets of a quarter of the MLP gradients (5170 B) on a 1 GB/s switch: the all-reduce
    // t = 6 µs + 1.5·20,680 B / 1 GB/s = 37.02 µs; the three buckets before the last
    // (¾·t = 27.77 µs) hide under the MLP backward of a micro-batch (2·14.52 µs =
    // 29.04 µs); the last, t/4, is exposed.
    let slow = run(
        &m,
        &system("switch(4, 1GB/s, 1us)"),
        PlanSpec {
            gpus: Some(4),
            micro_batch: 256,
            global_batch: Some(2048),
            dp_bucket: Some(astrolabe::units::Bytes::new(5170.0)),
            ..PlanSpec::default()
        },
    );
    let t = all_reduce(5170.0 * 4.0, 4.0, ALPHA, 1e9);
    assert!(0.75 * t < 2.0 * mlp && 0.75 * t > mlp / 2.0, "{t} {mlp}");
    let dps = slow.time.class(CommClass::Dp);
    close(dps.hidden.get(), 0.75 * t, 1e-9, "hidden buckets");
    close(dps.exposed.get(), 0.25 * t, 1e-9, "last bucket");
}

/// A layered model of two layers at half the BF16 peak: one of 3·10¹⁰ FLOP, 5·10⁷
/// parameters (all-reduced), 10 MB of activations and 20 MB moved per sample; one of
/// 10¹⁰ FLOP, 10⁷ parameters (not synchronised), 5 MB of activations. Micro-batch 8 on 4
/// GPUs, global batch 64: m = 2.
/// - forward per micro-batch 4·10¹⁰·8 / 156 TFLOP/s + 20 MB·8 / (2039 GB/s · 0.7) + 2 kernels
///   of 4 µs; backward twice that;
/// - gradients of the first layer in bf16 (10⁸ B) all-reduced in PyTorch DDP's 25 MB
///   buckets: the three before the last hide under the backward (2 × forward = 4.3 ms, more
///   than their ¾ of 1.5 ms), the last is exposed: ¼ of the all-reduce;
/// - optimizer: 32 B per parameter (6·10⁷) in 4 kernels;
/// - memory: activations 15 MB·8, buffers two buckets of 25 MB.
#[test]
fn layered_terms_by_hand() {
    let m = model(
        r#"
name = "layered-small"
description = "term test"
[layered]
compute_efficiency = 0.5
[[layered.layers]]
name = "a"
forward_flops = 3e10
params = 5e7
activation = "10 MB"
bytes = "20 MB"
[[layered.layers]]
name = "b"
forward_flops = 1e10
params = 1e7
activation = "5 MB"
bytes = "0 B"
collective = "none"
"#,
    );
    let e = four_gpus(&m, 8, 64);
    let (b, mb) = (8.0, 2.0);
    let fwd = 4e10 * b / 156e12 + 20e6 * b / (2039e9 * 0.7) + 2.0 * 4e-6;
    close(e.time.forward.get(), fwd * mb, 1e-9, "forward");
    close(e.time.backward.get(), 2.0 * fwd * mb, 1e-9, "backward");
    let ar = all_reduce(1e8, 4.0, ALPHA, BW);
    let dp = e.time.class(CommClass::Dp);
    close(dp.exposed.get(), ar / 4.0, 1e-9, "last bucket");
    close(dp.hidden.get(), 0.75 * ar, 1e-9, "hidden buckets");
    close(dp.bytes.get(), 1e8, 1e-12, "gradient bytes");
    close(
        e.time.optimizer.get(),
        mem(6e7 * 32.0, 4.0),
        1e-9,
        "optimizer",
    );
    close(
        e.time.total.get(),
        3.0 * fwd * mb + ar / 4.0 + mem(6e7 * 32.0, 4.0),
        1e-9,
        "iteration",
    );
    close(e.memory.activations.get(), 15e6 * b, 1e-12, "activations");
    close(e.memory.buffers.get(), 2.0 * 25e6, 1e-12, "buffers");
    // Model FLOPs 3·4·10¹⁰ per sample of the global batch; the model states of all 6·10⁷
    // parameters under mixed-precision Adam (2, 2, 12 B), replicated.
    close(
        e.metrics.model_flops,
        3.0 * 4e10 * 64.0,
        1e-12,
        "model FLOPs",
    );
    close(e.memory.weights.get(), 6e7 * 2.0, 1e-12, "weights");
    close(e.memory.gradients.get(), 6e7 * 2.0, 1e-12, "gradients");
    close(
        e.memory.optimizer.get(),
        6e7 * 12.0,
        1e-12,
        "optimizer states",
    );
}

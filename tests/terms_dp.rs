//! The data-parallel and optimizer terms against the textbook costs worked out by hand:
//! the gradient reduction (all-reduce, or reduce-scatter plus the distributed optimizer's
//! parameter all-gather) in buckets that each pay the collective's latency, ZeRO-3 / FSDP's
//! per-layer gathers and reduce-scatters, HSDP's replica all-reduce, and the optimizer
//! step's memory-bound pass. The DP class's exposed + hidden time is the sum of its
//! collectives whatever the windows hide (`tests/overlap.rs` checks the windows), so these
//! pin the terms; each fails if its term changes by 5%.

use crate::common;
use crate::terms_support;

use astrolabe::estimate::{CommClass, Estimate};
use astrolabe::parallel::{PlanSpec, Zero3Impl};
use terms_support::{
    H, KAPPA, L, S, V, all_reduce, close, layer_params, model, ring_half, run, system,
};

/// All parameters of the term-test model: 16 layers, the word and position embeddings
/// (tied with the head) V·h + s·h and the final LayerNorm 2h.
fn params() -> f64 {
    L * layer_params() + V * H + S * H + 2.0 * H
}

fn dp_total(e: &Estimate) -> f64 {
    let x = e.time.class(CommClass::Dp);
    x.exposed.get() + x.hidden.get()
}

/// The term-test model with `from` replaced by `to` in its file and `extra` appended.
fn variant(from: &str, to: &str, extra: &str) -> astrolabe::model::Model {
    let text = terms_support::MODEL.replace(from, to) + extra;
    let spec: astrolabe::model::ModelSpec =
        astrolabe::catalog::parse_toml(&text, std::path::Path::new("variant.toml")).unwrap();
    astrolabe::model::Model::from_spec(spec).unwrap()
}

/// Megatron's Adam step over `p` parameters on an A100 (bf16 gradients, fp32 states):
/// 36 B each at 2039 GB/s × 0.7, 8 kernels of 4 µs
/// (`optimizer_step_is_a_memory_bound_pass_over_the_shard`).
fn adam36(p: f64) -> f64 {
    p * 36.0 / (2039e9 * 0.7) + 8.0 * 4e-6
}

/// DP 4 on a 4-port switch (100 GB/s, 1 µs), m = 2 micro-batches of one sequence.
fn dp4(zero: u8, overlap: bool) -> Estimate {
    run(
        &model(),
        &system("switch(4, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(4),
            zero,
            dp_overlap: overlap,
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            ..PlanSpec::default()
        },
    )
}

/// The term-test model on 4 devices of `sys`, ZeRO-1 with DP overlap, 2 micro-batches, in
/// `precision` with the optimizer layout `optimizer`.
fn zero1_on(
    sys: &astrolabe::system::System,
    precision: astrolabe::compute::Precision,
    optimizer: astrolabe::parallel::Optimizer,
) -> Estimate {
    run(
        &model(),
        sys,
        PlanSpec {
            gpus: Some(4),
            zero: 1,
            dp_overlap: true,
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            precision,
            optimizer,
            ..PlanSpec::default()
        },
    )
}

#[test]
fn dp_gradient_all_reduce_in_buckets() {
    // ZeRO-0: all-reduce of the bf16 gradient G = 2P bytes. Without overlap one
    // collective, exposed; with overlap k = ⌈G / (4·10⁷·2 B)⌉ buckets, each a ring
    // all-reduce paying 2(p−1)·α: k·[2·3·α + 2·3/4 · (G/k)/B].
    let g = 2.0 * params();
    let one = all_reduce(g, 4.0, 1e-6, 100e9);
    let e = dp4(0, false);
    close(
        e.time.class(CommClass::Dp).exposed.get(),
        one,
        1e-9,
        "DP all-reduce",
    );
    // Bytes: the gradient only (no parameter all-gather without ZeRO).
    close(
        e.time.class(CommClass::Dp).bytes.get(),
        g,
        1e-12,
        "DP bytes, ZeRO-0",
    );
    let k = (g / 8e7).ceil();
    assert_eq!(k, 81.0); // P = 3 230 998 528: G = 6.46 GB in 81 buckets of 80 MB
    close(
        dp_total(&dp4(0, true)),
        k * all_reduce(g / k, 4.0, 1e-6, 100e9),
        1e-9,
        "DP all-reduce in buckets",
    );
}

#[test]
fn distributed_optimizer_reduce_scatters_and_gathers() {
    // ZeRO-1 (Megatron's distributed optimizer): reduce-scatter of the bf16 gradient and
    // all-gather of the updated bf16 parameters, 2P bytes each, in the same k buckets:
    // k·[(p−1)·α + (p−1)/p · (2P/k)/B] twice.
    let w = 2.0 * params();
    close(
        dp_total(&dp4(1, false)),
        2.0 * ring_half(w, 4.0, 1e-6, 100e9),
        1e-9,
        "ZeRO-1 without overlap",
    );
    let k = (w / 8e7).ceil();
    close(
        dp_total(&dp4(1, true)),
        2.0 * k * ring_half(w / k, 4.0, 1e-6, 100e9),
        1e-9,
        "ZeRO-1 in buckets",
    );
}

#[test]
fn fsdp_gathers_each_layer_twice_per_micro_batch() {
    // ZeRO-3 as FSDP (Zhao et al. VLDB'23): per micro-batch, every layer's bf16 weights
    // P_l·2 B are all-gathered before its forward and before its backward, and its bf16
    // gradients reduce-scattered after the backward, one collective each; the parameters
    // outside the layers (embedding, final norm) likewise:
    // m·[L·(2·AG(2P_l) + RS(2P_l)) + 2·AG(2P_o) + RS(2P_o)].
    // With a bucket given each layer's 2·P_l = 403 MB goes in k = ⌈2·P_l / bucket⌉
    // collectives of 2·P_l/k, each paying its latency, and the 17.8 MB outside the layers
    // in k_o = ⌈2·P_o / bucket⌉: 5 and 1 at 100 MB, 41 and 2 at 10 MB.
    let x = |n: f64| ring_half(n, 4.0, 1e-6, 100e9);
    let (pl, po) = (layer_params(), V * H + S * H + 2.0 * H);
    for (bucket, k, k_o) in [
        (None, 1.0, 1.0),
        (Some(1e8), 5.0, 1.0),
        (Some(1e7), 41.0, 2.0),
    ] {
        let e = run(
            &model(),
            &system("switch(4, 100GB/s, 1us)"),
            PlanSpec {
                gpus: Some(4),
                zero: 3,
                zero3_impl: Some(Zero3Impl::Fsdp),
                dp_overlap: true,
                dp_bucket: bucket.map(astrolabe::units::Bytes::new),
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                ..PlanSpec::default()
            },
        );
        if let Some(b) = bucket {
            assert_eq!((2.0 * pl / b).ceil(), k);
            assert_eq!((2.0 * po / b).ceil(), k_o);
        }
        let per_mb = L * 3.0 * k * x(2.0 * pl / k) + 3.0 * k_o * x(2.0 * po / k_o);
        close(
            dp_total(&e),
            2.0 * per_mb,
            1e-9,
            &format!("FSDP gathers, bucket {bucket:?} B"),
        );
    }
}

#[test]
fn hsdp_shards_in_the_group_and_all_reduces_across_replicas() {
    // HSDP: DP 8 = shard groups of 4 (inner switch: 100 GB/s, 1 µs) × 2 replicas (outer:
    // 50 GB/s, 2 µs). FSDP's gathers and reduce-scatters run in the shard group as above;
    // once per iteration the replicas all-reduce their gradient shard, 2P/4 bytes:
    // 2·(2−1)·α₁ + 2·(2−1)/2 · (2P/4)/B₁.
    let e = run(
        &model(),
        &system("switch(4, 100GB/s, 1us) x switch(2, 50GB/s, 2us)"),
        PlanSpec {
            gpus: Some(8),
            zero: 3,
            hsdp: Some(4),
            dp_overlap: true,
            micro_batch: 1,
            global_batch: Some(16),
            flash_attention: true,
            ..PlanSpec::default()
        },
    );
    assert_eq!(e.plan.micro_batches, 2);
    let x = |n: f64| ring_half(n, 4.0, 1e-6, 100e9);
    let (pl, po) = (layer_params(), V * H + S * H + 2.0 * H);
    let shard = 2.0 * (L * 3.0 * x(2.0 * pl) + 3.0 * x(2.0 * po));
    let replica = all_reduce(2.0 * params() / 4.0, 2.0, 2e-6, 50e9);
    close(dp_total(&e), shard + replica, 1e-9, "HSDP");
    // Bytes per device: per micro-batch every parameter gathered twice and its gradient
    // reduce-scattered, 2 B each (2·P·6), and the replica all-reduce's shard 2P/4 once.
    close(
        e.time.class(CommClass::Dp).bytes.get(),
        2.0 * params() * 6.0 + 2.0 * params() / 4.0,
        1e-12,
        "HSDP bytes",
    );
}

#[test]
fn optimizer_step_is_a_memory_bound_pass_over_the_shard() {
    // Megatron's mixed-precision Adam, bytes per parameter of the local shard: clip reads
    // the bf16 gradient (2), Adam reads it and reads/writes the fp32 master, m and v
    // (2 + 24), the master is copied to the bf16 weight (4 + 2), the gradient is zeroed
    // (2): 36 B. A100: 2039 GB/s at 70% for memory-bound kernels, 8 kernels of 4 µs.
    // ZeRO-0 updates all P parameters, ZeRO-1 its 1/dp = 1/4 of them.
    let t = |p: f64| p * 36.0 / (2039e9 * 0.7) + 8.0 * 4e-6;
    close(
        dp4(0, true).time.optimizer.get(),
        t(params()),
        1e-9,
        "Adam, ZeRO-0",
    );
    close(
        dp4(1, true).time.optimizer.get(),
        t(params() / 4.0),
        1e-9,
        "Adam, ZeRO-1",
    );
}

/// Megatron-core's precision-aware optimizer with BF16 moments (`adam-bf16-moments`): fp32
/// main gradients (4 B), fp32 master and BF16 m and v (4 + 2 + 2 = 8 B of state). The step
/// over the ZeRO-1 shard moves: clip reads the gradient (4), Adam reads it and reads/writes
/// master, m and v (4 + 2·8), the master is copied to the bf16 weight (4 + 2), the gradient
/// is zeroed (4): 34 B, against 36 B with bf16 gradients and fp32 moments. Memory: 2 B of
/// weight and 4 B of gradient per parameter, 8 B of state over DP 4.
#[test]
fn bf16_moments_step_and_states_by_hand() {
    let e = zero1_on(
        &system("switch(4, 100GB/s, 1us)"),
        astrolabe::compute::Precision::Bf16,
        astrolabe::parallel::Optimizer::AdamBf16Moments,
    );
    let t = (params() / 4.0) * 34.0 / (2039e9 * 0.7) + 8.0 * 4e-6;
    close(
        e.time.optimizer.get(),
        t,
        1e-9,
        "Adam, BF16 moments, ZeRO-1",
    );
    close(e.memory.weights.get(), 2.0 * params(), 1e-9, "weights");
    close(
        e.memory.gradients.get(),
        4.0 * params(),
        1e-9,
        "fp32 gradients",
    );
    close(
        e.memory.optimizer.get(),
        8.0 * params() / 4.0,
        1e-9,
        "states over DP 4",
    );
}

/// Apex's DistributedFusedAdam with `dtype = bf16` (`adam-bf16-state`, NeMo 1.x's
/// Nemotron-4 340B recipe): BF16 gradients (2 B) and the whole state in BF16, master copy,
/// m and v (2 + 2 + 2 = 6 B). The step over the ZeRO-1 shard moves: clip reads the
/// gradient (2), Adam reads it and reads/writes master, m and v (2 + 2·6), the master is
/// copied to the weight (2 + 2), the gradient is zeroed (2): 6 + 2·6 + 3·2 = 24 B.
/// Memory: 2 B of weight and 2 B of gradient per parameter, 6 B of state over DP 4.
#[test]
fn bf16_state_step_and_states_by_hand() {
    let e = zero1_on(
        &system("switch(4, 100GB/s, 1us)"),
        astrolabe::compute::Precision::Bf16,
        astrolabe::parallel::Optimizer::AdamBf16State,
    );
    let t = (params() / 4.0) * 24.0 / (2039e9 * 0.7) + 8.0 * 4e-6;
    close(e.time.optimizer.get(), t, 1e-9, "Adam, BF16 state, ZeRO-1");
    close(e.memory.weights.get(), 2.0 * params(), 1e-9, "weights");
    close(
        e.memory.gradients.get(),
        2.0 * params(),
        1e-9,
        "bf16 gradients",
    );
    close(
        e.memory.optimizer.get(),
        6.0 * params() / 4.0,
        1e-9,
        "states over DP 4",
    );
}

/// fp16 with dynamic loss scaling: the step also unscales and checks the gradients in
/// place (read and write, 2g): 36 + 2·2 = 40 B per parameter of the ZeRO-1 shard (A100:
/// 2039 GB/s at 0.7, 8 kernels of 4 µs).
#[test]
fn fp16_step_unscales_the_gradients() {
    let e = zero1_on(
        &system("switch(4, 100GB/s, 1us)"),
        astrolabe::compute::Precision::Fp16,
        astrolabe::parallel::Optimizer::Adam,
    );
    let t = (params() / 4.0) * 40.0 / (2039e9 * 0.7) + 8.0 * 4e-6;
    close(e.time.optimizer.get(), t, 1e-9, "fp16 Adam, ZeRO-1");
    // With fp32 main gradients (Megatron-LM's 2021 fp16 runs, g = 4): 6 + 2·12 + 3·4 = 42,
    // and the unscale 2·4 = 8: 50 B.
    let e = zero1_on(
        &system("switch(4, 100GB/s, 1us)"),
        astrolabe::compute::Precision::Fp16,
        astrolabe::parallel::Optimizer::AdamFp32Grads,
    );
    let t = (params() / 4.0) * 50.0 / (2039e9 * 0.7) + 8.0 * 4e-6;
    close(
        e.time.optimizer.get(),
        t,
        1e-9,
        "fp16 Adam, fp32 gradients, ZeRO-1",
    );
}

/// FP8 on H100 (3350 GB/s at 0.7): after the step Transformer Engine re-quantizes each
/// weight with a copy (read its 2 B, write the row-wise and transposed bytes, 1 + 1), once
/// per iteration. The copies are the weights' memory beyond the 16-bit ones, 2 B each, so
/// the step is `(P/4·36 + N·(2 + 2)) / B + 8·4 µs` with N = (W_fp8 − 2P)/2.
#[test]
fn fp8_step_requantizes_the_weight_copies() {
    let mut sys = astrolabe::catalog::system("dgx-h100").unwrap();
    sys.topology = system("switch(4, 100GB/s, 1us)").topology;
    let e = zero1_on(
        &sys,
        astrolabe::compute::Precision::Fp8,
        astrolabe::parallel::Optimizer::Adam,
    );
    let copies = (e.memory.weights.get() - 2.0 * params()) / 2.0;
    assert!(copies > 0.5 * params(), "{copies}");
    let t = ((params() / 4.0) * 36.0 + copies * 4.0) / (3350e9 * 0.7) + 8.0 * 4e-6;
    close(
        e.time.optimizer.get(),
        t,
        1e-9,
        "FP8 Adam with re-quantized copies",
    );
}

/// Routed experts' gradients are reduced over the expert-DP group, not DP (Megatron-core's
/// distributed optimizer keeps them in buffers of their own, `expert_data_parallel_group`).
/// Qwen3-30B-A3B (48 layers of 128 experts of 3·2048·768 parameters) on 8 ports of one
/// switch (100 GB/s, 1 µs), DP 8, ZeRO-1, no DP overlap (one collective per buffer):
/// - EP 4: each rank holds 32 experts per layer, R = 48·32·4,718,592 = 7,247,757,312
///   parameters, the same on the 2 ranks of its expert-DP group; the dense rest D over all 8.
///   DP time: reduce-scatter and all-gather, 2 B per parameter each, of D over 8 and of R
///   over 2: `2·[RS₈(2D) + RS₂(2R)]`;
/// - EP 8: expert-DP 1, nothing to reduce for the experts: `2·RS₈(2D)`, 4D bytes.
#[test]
fn expert_gradients_reduce_over_expert_dp() {
    let m = astrolabe::catalog::model("qwen3-30b-a3b").unwrap();
    let sys = system("switch(8, 100GB/s, 1us)");
    let at = |ep: u32| {
        run(
            &m,
            &sys,
            PlanSpec {
                gpus: Some(8),
                ep,
                etp: Some(1),
                zero: 1,
                dp_overlap: false,
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                ..PlanSpec::default()
            },
        )
    };
    let per_expert = 3.0 * 2048.0 * 768.0;
    for (ep, edp) in [(4u32, 2.0), (8, 1.0)] {
        let e = at(ep);
        let total = e.memory.weights.get() / 2.0;
        let routed = 48.0 * (128 / ep) as f64 * per_expert;
        let dense = total - routed;
        let half = |n: f64, p: f64| {
            if p > 1.0 {
                ring_half(n, p, 1e-6, 100e9)
            } else {
                0.0
            }
        };
        let want = 2.0 * (half(2.0 * dense, 8.0) + half(2.0 * routed, edp));
        close(dp_total(&e), want, 1e-9, &format!("DP time, EP {ep}"));
        let bytes = 4.0 * dense + if edp > 1.0 { 4.0 * routed } else { 0.0 };
        close(
            e.time.class(CommClass::Dp).bytes.get(),
            bytes,
            1e-9,
            &format!("DP bytes, EP {ep}"),
        );
    }
    // With DP overlap each buffer goes in buckets of 8·10⁷ B (4·10⁷ parameters), each a
    // collective paying its latency: ⌈2D/8·10⁷⌉ over 8 and ⌈2R/8·10⁷⌉ over the 2.
    let ep4_overlapped = |sys: &astrolabe::system::System| {
        run(
            &m,
            sys,
            PlanSpec {
                gpus: Some(8),
                ep: 4,
                etp: Some(1),
                zero: 1,
                dp_overlap: true,
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                ..PlanSpec::default()
            },
        )
    };
    let e = ep4_overlapped(&sys);
    let routed = 48.0 * 32.0 * per_expert;
    let dense = e.memory.weights.get() / 2.0 - routed;
    let (kd, ke) = ((2.0 * dense / 8e7).ceil(), (2.0 * routed / 8e7).ceil());
    assert_eq!(ke, 182.0); // 2R = 14.5 GB
    let want = 2.0
        * (kd * ring_half(2.0 * dense / kd, 8.0, 1e-6, 100e9)
            + ke * ring_half(2.0 * routed / ke, 2.0, 1e-6, 100e9));
    close(dp_total(&e), want, 1e-9, "DP time in buckets, EP 4");
    // On a switch 100× faster every bucket but the last hides under the last backward and
    // the gathers under the first forward: exposed is the last bucket of the kd + ke the
    // two buffers send, R/(kd + ke) with R both buffers' reduce-scatters.
    let e = ep4_overlapped(&system("switch(8, 10TB/s, 1us)"));
    let reduce = kd * ring_half(2.0 * dense / kd, 8.0, 1e-6, 10e12)
        + ke * ring_half(2.0 * routed / ke, 2.0, 1e-6, 10e12);
    close(
        e.time.class(CommClass::Dp).exposed.get(),
        reduce / (kd + ke),
        1e-9,
        "DP exposed: the last of kd + ke buckets, EP 4",
    );
    // TP 4 on 4 ports, ETP 1, EP 2: DP 1, so the dense weights need no reduction, but each
    // expert sits on the expert-DP 2 ranks (t·d/(etp·ep) = 2): only R = 48·64·4,718,592
    // parameters move, 2·RS₂(2R) and 4R bytes.
    let e = run(
        &m,
        &system("switch(4, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(4),
            tp: 4,
            ep: 2,
            etp: Some(1),
            zero: 1,
            dp_overlap: false,
            micro_batch: 1,
            global_batch: Some(1),
            flash_attention: true,
            sequence_parallel: true,
            ..PlanSpec::default()
        },
    );
    let routed = 48.0 * 64.0 * per_expert;
    close(
        dp_total(&e),
        2.0 * ring_half(2.0 * routed, 2.0, 1e-6, 100e9),
        1e-9,
        "DP time, DP 1 and expert-DP 2",
    );
    close(
        e.time.class(CommClass::Dp).bytes.get(),
        4.0 * routed,
        1e-9,
        "DP bytes, DP 1 and expert-DP 2",
    );
}

/// Llama 3 8B on 16 H100s (two DGX nodes), FSDP with shard groups of 8 (`--hsdp 8`) and fp32
/// gradients: the two replicas all-reduce their gradient shard across InfiniBand once per
/// iteration (`--explain` line "HSDP replicas"). The shard is 4 B · 8 030 261 248 / 8 =
/// 4 015 130 624 B; a ring all-reduce over 2 ranks is 2α + n/B = 28 µs + n / 47 GB/s. Its
/// last bucket, AR · bucket/shard (bucket 4·10⁷ · 4 B), is exposed; the rest runs beside the last micro-batch's
/// backward and recompute W (the JSON's backward + recompute over the micro-batches), a
/// bulk window: exposed `max(0, C − W − κ·min(C, W))` with C = AR − last.
/// - At sequence 8192 W is far longer than C: exposed = last.
/// - At sequence 128 with full recomputation W is shorter: exposed = last + C − W − κ·W.
/// - Without DP overlap all of AR is exposed.
/// - With one replica (`--hsdp 16`, FSDP over all 16) there is no replica all-reduce: the
///   DP bytes are FSDP's.
#[test]
fn hsdp_replica_all_reduce_by_hand() {
    let shard = 4.0 * 8_030_261_248.0 / 8.0;
    let ar = 28e-6 + shard / 47e9;
    let last = ar * 1.6e8 / shard;
    let replica = |extra: &[&str]| {
        let mut a = common::llama8b_args(
            "estimate",
            &[
                "--gpus",
                "16",
                "--zero",
                "3",
                "--fsdp",
                "--global-batch",
                "32",
                "--optimizer",
                "adam-fp32-grads",
            ],
        );
        a.extend_from_slice(extra);
        let v = common::json(&a);
        let t = &v["time_breakdown"];
        let m = v["plan"]["micro_batches"].as_f64().unwrap();
        let w = (t["backward_s"].as_f64().unwrap() + t["recompute_s"].as_f64().unwrap()) / m;
        let text = common::text(&[&a[..], &["--explain"]].concat());
        let line = text
            .lines()
            .find(|l| l.contains("HSDP replicas"))
            .map(str::to_string);
        (v, w, line)
    };
    let exposed = |line: &Option<String>| {
        let l = line.as_ref().expect("an HSDP replicas line");
        common::micros(&l.replace(" in all", ""), "→ exposed") * 1e-6
    };
    let (_, w, line) = replica(&["--hsdp", "8"]);
    assert!(w > ar, "{w}");
    close(exposed(&line), last, 2e-3, "long window: the last bucket");
    let (_, w, line) = replica(&["--hsdp", "8", "--seq-len", "128", "--recompute", "full"]);
    let c = ar - last;
    assert!(w < c, "{w}");
    close(
        exposed(&line),
        last + c - w - KAPPA * w,
        2e-3,
        "short window",
    );
    let (_, _, line) = replica(&["--hsdp", "8", "--dp-overlap", "false"]);
    close(exposed(&line), ar, 2e-3, "no overlap");
    let (one, _, line) = replica(&["--hsdp", "16"]);
    assert!(line.is_none());
    let (fsdp, _, _) = replica(&[]);
    let bytes = |v: &serde_json::Value| {
        v["time_breakdown"]["communication"]["dp"]["bytes_per_device"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(bytes(&one), bytes(&fsdp));
}

/// Each end of a pipeline holds one `V·h` matrix: the first stage the word embedding (with
/// the learned positions and, as the crate counts it, the final norm), the last the output
/// layer, whether the head is tied to the embedding or not (Megatron-core's
/// `setup_embeddings_and_output_layer`: a tied model keeps a copy on the last stage). The
/// term-test model with a 32,768 vocabulary (the `V·h` matrix is 8 % of a stage) on PP 2,
/// 8 layers a stage, no data parallelism: the device with the most holds
/// `8·(12h² + 13h) + V·h + s·h + 2h` parameters, 2 B each as the bf16 weight and the Adam
/// step moves 36 B of each (`optimizer_step_is_a_memory_bound_pass_over_the_shard`).
#[test]
fn one_embedding_matrix_on_each_end_of_the_pipeline() {
    let vocab = 32768.0;
    let stage = 8.0 * layer_params() + vocab * H + S * H + 2.0 * H;
    for tied in [true, false] {
        let m = variant(
            "vocab = 128",
            "vocab = 32768",
            &format!("tied_embeddings = {tied}\n"),
        );
        let e = run(
            &m,
            &system("switch(2, 100GB/s, 1us)"),
            PlanSpec {
                gpus: Some(2),
                pp: 2,
                micro_batch: 1,
                global_batch: Some(4),
                flash_attention: true,
                ..PlanSpec::default()
            },
        );
        let what = format!("tied = {tied}");
        close(e.memory.weights.get(), 2.0 * stage, 1e-9, &what);
        close(e.time.optimizer.get(), adam36(stage), 1e-9, &what);
    }
}

/// DualPipe's busiest device can hold two middle stages: the term-test model with 14
/// layers on PP 4 splits 3, 4, 4, 3 (the extra layers go to the middle stages first), so
/// device 1 holds stages 1 and 2, 8 layers of `12h² + 13h`, against the ends' 6 layers and
/// the 128-token vocabulary. 2 B each as weight and gradient; ZeRO-1 on one replica: the
/// two copies of each stage share one optimizer state, 12 B for half of them.
#[test]
fn dualpipe_device_can_hold_two_middle_stages() {
    let m = variant("layers = 16", "layers = 14", "");
    // PP 4 on 4 devices, ZeRO-1, 8 micro-batches of one sequence, on `schedule`.
    let pp4 = |schedule| {
        run(
            &m,
            &system("switch(4, 100GB/s, 1us)"),
            PlanSpec {
                gpus: Some(4),
                pp: 4,
                zero: 1,
                schedule,
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                ..PlanSpec::default()
            },
        )
    };
    let e = pp4(astrolabe::parallel::Schedule::DualPipe);
    let pair = 8.0 * layer_params();
    close(e.memory.weights.get(), 2.0 * pair, 1e-9, "weights");
    close(e.memory.gradients.get(), 2.0 * pair, 1e-9, "gradients");
    close(
        e.memory.optimizer.get(),
        12.0 * pair / 2.0,
        1e-9,
        "optimizer",
    );
    // Its Adam step covers its half of the shared state: 36 B per parameter of pair/2
    // (`optimizer_step_is_a_memory_bound_pass_over_the_shard`).
    close(
        e.time.optimizer.get(),
        adam36(pair / 2.0),
        1e-9,
        "optimizer step",
    );
    // 1F1B on the same split: the busiest device is a middle one, 4 layers.
    let one = pp4(astrolabe::parallel::Schedule::OneFOneB);
    close(
        one.memory.weights.get(),
        2.0 * 4.0 * layer_params(),
        1e-9,
        "1F1B weights",
    );
    // With TP 2 on 8 devices each of the pair's 8 layers is split two ways.
    let tp2 = run(
        &m,
        &system("switch(8, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(8),
            tp: 2,
            pp: 4,
            zero: 1,
            schedule: astrolabe::parallel::Schedule::DualPipe,
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            ..PlanSpec::default()
        },
    );
    close(
        tp2.memory.weights.get(),
        2.0 * pair / 2.0,
        1e-9,
        "TP 2 weights",
    );
}

#[test]
fn fsdp_under_pipeline_parallelism_gathers_once_per_step() {
    // With PP, PyTorch's pipeline schedules keep each stage's FSDP units unsharded from the
    // first micro-batch's forward to the last one's backward (gradient sync and resharding
    // off for the others; torchtitan's `reshard_after_forward = not pp_enabled`): per
    // step, each of the stage's L/2 = 8 layers is all-gathered once and reduce-scattered
    // once, and so are the parameters outside the layers (the word and position
    // embeddings and the final norm, V·h + s·h + 2h, as the stage's outside parameters
    // are counted), whatever the number of micro-batches:
    // 8·(AG(2P_l) + RS(2P_l)) + AG(2P_o) + RS(2P_o), DP 4 on the inner switch. Memory: the
    // stage's weights gathered (2 B) and its gradients unsharded (2 B) beside the shards.
    let spec = |gb: u32| PlanSpec {
        gpus: Some(8),
        pp: 2,
        zero: 3,
        zero3_impl: Some(Zero3Impl::Fsdp),
        dp_overlap: true,
        micro_batch: 1,
        global_batch: Some(gb),
        flash_attention: true,
        ..PlanSpec::default()
    };
    let sys = system("switch(4, 100GB/s, 1us) x switch(2, 100GB/s, 1us)");
    let x = |n: f64| ring_half(n, 4.0, 1e-6, 100e9);
    let (pl, po) = (layer_params(), V * H + S * H + 2.0 * H);
    let per_step = 8.0 * 2.0 * x(2.0 * pl) + 2.0 * x(2.0 * po);
    for gb in [8, 32] {
        let e = run(&model(), &sys, spec(gb));
        close(dp_total(&e), per_step, 1e-9, "FSDP under PP, once per step");
        // Buffers: the stage's gathered weights and full gradients, (8·P_l + P_o)·(2 + 2),
        // beside the two activation buffers of b·s·h 16-bit values.
        let buffers = (8.0 * pl + po) * 4.0 + 2.0 * S * H * 2.0;
        close(e.memory.buffers.get(), buffers, 1e-12, "resident stage");
    }
    // With FP32 main gradients (4 B) the resident stage takes 2 + 4 B per parameter.
    let e = run(
        &model(),
        &sys,
        PlanSpec {
            optimizer: astrolabe::parallel::Optimizer::AdamFp32Grads,
            ..spec(8)
        },
    );
    let buffers = (8.0 * pl + po) * 6.0 + 2.0 * S * H * 2.0;
    close(
        e.memory.buffers.get(),
        buffers,
        1e-12,
        "resident stage, FP32 gradients",
    );
}

/// DeepSpeed ZeRO-3 (2021) gathers a weight above the persistence threshold whole and
/// coalesces the rest up to its 5·10⁷-parameter bucket, so a layer takes `k = min(W, ⌈P_l /
/// 5·10⁷⌉)` collectives with `W = 2 + 2·E/ep + 2·[shared expert]` weight matrices
/// (attention's two fused projections, each local expert's two (a dense MLP's: E = 1), a
/// shared expert's two), each paying its latency; the parameters outside the layers take
/// `clamp(⌈P_o / 5·10⁷⌉, 1, 2)`. On a 4-port switch at 10 GB/s (slower than DeepSpeed's
/// 24 GB/s floor, so NCCL's time counts) the DP time grows with the latency α by
/// `m·(L·3·k + 3·k_o)·(p − 1)·α` (2 gathers and 1 reduce-scatter of each, p − 1 ring steps):
/// - Mixtral 8×7B, EP 2: 4 local experts, W = 10 < 15 buckets: k = 10; P_o = 2.6·10⁸: 2;
/// - Llama 4 Scout, EP 2: 8 local experts and a shared one, W = 20 < 24 buckets: k = 20;
/// - GPT 1.7B (Megatron 2021): dense, W = 4, P_l = 12·2304² + 13·2304 = 6.4·10⁷: k = 2;
///   P_o = 51200·2304 + 2048·2304 + 2·2304 = 1.2·10⁸: 2;
/// - the term-test model: W = 4 < 5 buckets: k = 4; P_o = 8.9·10⁶: 1.
#[test]
fn deepspeed_2021_gathers_weights_whole() {
    let at = |m: &astrolabe::model::Model, ep: u32, alpha: &str| {
        let e = run(
            m,
            &system(&format!("switch(4, 10GB/s, {alpha})")),
            PlanSpec {
                gpus: Some(4),
                ep,
                etp: Some(1),
                zero: 3,
                zero3_impl: Some(Zero3Impl::Deepspeed2021),
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                ..PlanSpec::default()
            },
        );
        (dp_total(&e), e.plan.micro_batches as f64)
    };
    let cases = [
        ("mixtral-8x7b", 2, 32.0, 10.0, 2.0),
        ("llama4-scout", 2, 48.0, 20.0, 2.0),
        ("megatron-2021-1.7b", 1, 24.0, 2.0, 2.0),
        ("terms", 1, L, 4.0, 1.0),
    ];
    for (name, ep, layers, k, k_o) in cases {
        let m = if name == "terms" {
            model()
        } else {
            astrolabe::catalog::model(name).unwrap()
        };
        let ((t0, mb), (t1, _)) = (at(&m, ep, "0us"), at(&m, ep, "1ms"));
        let want = mb * (layers * 3.0 * k + 3.0 * k_o) * 3.0 * 1e-3;
        close(
            t1 - t0,
            want,
            1e-6,
            &format!("{name}: latency of the collectives"),
        );
    }
}

/// The memory's buffers of the term-test model on 4 GPUs of a switch with `spec` (GPUs,
/// batch and flash attention set here).
fn buffers_on_4(spec: PlanSpec) -> f64 {
    run(
        &model(),
        &system("switch(4, 100GB/s, 1us)"),
        PlanSpec {
            gpus: Some(4),
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            ..spec
        },
    )
    .memory
    .buffers
    .get()
}

/// ZeRO-3 keeps two layers gathered beside the shards (the layer computed and the one
/// prefetched) and two layers' unsharded gradients: 2·P_l·(2 + 2) bytes in the buffers for
/// bf16 weights and gradients, when it shards at all (DP × CP > 1). Term-test model on 4
/// GPUs: DP 4 adds 8·P_l (the gathered layers are far under DeepSpeed's 10⁹-parameter and
/// 5·10⁸ reduce-bucket limits, and FSDP's rule is the same); TP 4 (DP 1) adds nothing.
#[test]
fn zero3_keeps_two_layers_gathered() {
    for imp in [Zero3Impl::Fsdp, Zero3Impl::Deepspeed2021] {
        let buffers = |zero: u8, tp: u32| {
            buffers_on_4(PlanSpec {
                tp,
                zero,
                zero3_impl: Some(imp),
                ..PlanSpec::default()
            })
        };
        close(
            buffers(3, 1) - buffers(1, 1),
            8.0 * layer_params(),
            1e-9,
            "ZeRO-3 over DP 4",
        );
        close(buffers(3, 4) - buffers(1, 4), 0.0, 1e-9, "ZeRO-3 at DP 1");
    }
    // DP 1 with CP 2 × TP 2: ZeRO-3 shards over the CP group, and the gathered layers are
    // TP-sharded, 8·P_l/2.
    let cp2 = |zero: u8| {
        buffers_on_4(PlanSpec {
            tp: 2,
            cp: 2,
            zero,
            zero3_impl: Some(Zero3Impl::Fsdp),
            ..PlanSpec::default()
        })
    };
    close(
        cp2(3) - cp2(1),
        4.0 * layer_params(),
        1e-9,
        "ZeRO-3 over CP 2",
    );
}

/// ZeRO-2 shards the gradients, so the bucket being filled and the one being
/// reduce-scattered are unsharded buffers of their own: 2 × the bucket in the memory's
/// buffers beside ZeRO-1's (whose buckets are views into the whole gradient buffer), when
/// the gradients are sharded at all, over DP × CP > 1. Term-test model on 4 GPUs, 100 MB
/// buckets: DP 4, and DP 1 with CP 2 × TP 2 (the gradients shard over the CP group), add
/// 200 MB; TP 4 (DP × CP = 1) adds nothing.
#[test]
fn zero2_keeps_two_unsharded_buckets() {
    let buffers = |zero: u8, tp: u32, cp: u32| {
        buffers_on_4(PlanSpec {
            tp,
            cp,
            zero,
            dp_bucket: Some(astrolabe::units::Bytes::new(1e8)),
            ..PlanSpec::default()
        })
    };
    for (tp, cp, extra) in [(1, 1, 2e8), (2, 2, 2e8), (4, 1, 0.0)] {
        close(
            buffers(2, tp, cp) - buffers(1, tp, cp),
            extra,
            1e-9,
            &format!("ZeRO-2 buckets at TP {tp}, CP {cp}"),
        );
    }
}

/// DeepSpeed ZeRO-3 (2021) keeps at most `stage3_max_live_parameters` = 10⁹ parameters
/// gathered, or the largest weight matrix when it is larger (a parameter is gathered
/// whole), plus one 5·10⁷ prefetch bucket, and one `reduce_bucket_size` = 5·10⁸ gradient
/// bucket: `(max(10⁹, W_max) + 5·10⁷)·2 + 5·10⁸·2` bytes in the buffers when two layers
/// hold more (DeepSpeed `zero/config.py`). Two term-test variants whose layers are far
/// above that, ZeRO-3 against ZeRO-1 on 8 GPUs:
/// - h = 32 768, 256 heads, FFN 4096, TP 2: the QKV matrix is the largest, h·3h/2 =
///   1.61·10⁹ per device, so it sets the cap: (1 610 612 736 + 5·10⁷)·2 + 10⁹;
/// - h = 16 384, 128 heads, FFN 65 536, TP 1: the MLP's input matrix, h·f = 1.07·10⁹:
///   (1 073 741 824 + 5·10⁷)·2 + 10⁹.
#[test]
fn deepspeed_2021_keeps_a_billion_parameters_gathered() {
    let block = "hidden = 4096\nheads = 32\nffn_hidden = 16384";
    for (shape, tp, w_max) in [
        (
            "hidden = 32768\nheads = 256\nffn_hidden = 4096",
            2,
            32768.0 * 3.0 * 32768.0 / 2.0,
        ),
        (
            "hidden = 16384\nheads = 128\nffn_hidden = 65536",
            1,
            16384.0 * 65536.0,
        ),
    ] {
        let m = variant(block, shape, "");
        let buffers = |zero: u8| {
            run(
                &m,
                &system("switch(8, 100GB/s, 1us)"),
                PlanSpec {
                    gpus: Some(8),
                    tp,
                    zero,
                    zero3_impl: Some(Zero3Impl::Deepspeed2021),
                    micro_batch: 1,
                    global_batch: Some(8),
                    flash_attention: true,
                    ..PlanSpec::default()
                },
            )
            .memory
            .buffers
            .get()
        };
        close(
            buffers(3) - buffers(1),
            (w_max + 5e7) * 2.0 + 5e8 * 2.0,
            1e-12,
            &format!("DeepSpeed ZeRO-3 resident at TP {tp}"),
        );
    }
}

//! Offload cost terms worked by hand (`src/offload/cost.rs`): each transfer, its window,
//! the CPU optimizer step and the HBM it frees, on a made-up tier with round numbers. Each
//! assertion fails if its term changes by 5%.

use approx::assert_relative_eq;
use astrolabe::offload::cost::{self, Inputs};
use astrolabe::offload::{Offload, Tier, TierKind, Tiers};
use astrolabe::units::{Bandwidth, Bytes, Seconds};

/// Host: 10 GB/s each way, no latency, Adam 1e9 params/s for this GPU; NVMe 2 GB/s.
fn tiers() -> Tiers {
    let t = |kind, bw: f64, rate| Tier {
        kind,
        capacity: Bytes::new(1e12),
        bandwidth: Bandwidth::new(bw),
        latency: Seconds::ZERO,
        adam_rate: rate,
    };
    Tiers {
        host: Some(t(TierKind::Host, 10e9, 1e9)),
        nvme: Some(t(TierKind::Nvme, 2e9, 0.0)),
        remote: None,
    }
}

/// 1e9 optimizer-shard parameters, 5e8 parameter-shard, Adam (2, 2, 12) bytes, 10 layers,
/// 4 micro-batches; 1 GB of activations per micro-batch, 4 GB in flight; forward 1 s,
/// backward 2 s per micro-batch.
fn inputs() -> Inputs {
    Inputs {
        opt_params: 1e9,
        param_shard: 5e8,
        bytes: (2.0, 2.0, 12.0),
        act_per_mb: 1e9,
        act_total: 4e9,
        layers: 10.0,
        micro_batches: 4.0,
        fwd: Seconds::new(1.0),
        bwd: Seconds::new(2.0),
        bwd_fetches: 1.0,
    }
}

fn run(plan: &str, x: &Inputs) -> cost::Cost {
    cost::evaluate(Offload::parse(plan, "test").unwrap(), &tiers(), x).unwrap()
}

const R: f64 = 0.01;

#[test]
fn optimizer_offload_pays_grads_down_cpu_step_and_params_up_in_series() {
    // Megatron-core HybridDeviceOptimizer: gradients down once, 1e9·2 B / 10 GB/s = 0.2 s;
    // CPU Adam 1e9 / 1e9 per s = 1 s; updated params up 1e9·2 B / 10 GB/s = 0.2 s.
    let c = run("optimizer", &inputs());
    assert_relative_eq!(c.grads_step.bytes, 2e9, max_relative = R);
    assert_relative_eq!(c.grads_step.time.get(), 0.2, max_relative = R);
    assert_relative_eq!(c.cpu_step.get(), 1.0, max_relative = R);
    assert_relative_eq!(c.params_step.time.get(), 0.2, max_relative = R);
    assert_relative_eq!(c.exposed().get(), 0.4, max_relative = R);
    // Host holds 1e9·(12 + 4 fp32 gradient) = 16 GB.
    assert_relative_eq!(c.host_bytes, 16e9, max_relative = R);
}

#[test]
fn streamed_gradients_hide_behind_backward_one_layer_ahead() {
    // ZeRO-Offload (DeepSpeed stage_1_and_2.py): 3 micro-batches stream 1e9·2 B = 0.2 s
    // each, the last one fp32 1e9·4 B = 0.4 s; no step-time gradient copy. Window per
    // backward: chunked(C, 2 s, 10 layers, κ 0) = C/10 (the first layer's copy has no
    // compute beside it): 3·0.02 + 0.04 = 0.1 s exposed.
    let c = run("zero-offload", &inputs());
    assert_relative_eq!(c.grads_stream.bytes, 3.0 * 2e9 + 4e9, max_relative = R);
    assert_relative_eq!(c.grads_stream.time.get(), 1.0, max_relative = R);
    assert_relative_eq!(c.exposed_bwd.get(), 0.1, max_relative = R);
    assert_eq!(c.grads_step.bytes, 0.0);
    // With backward shorter than the copy: 0.05 s of backward per micro-batch, C = 0.2 s:
    // C/10 + 9/10·(0.2 − 0.05) = 0.155 s; last 0.04 + 0.9·0.35 = 0.355 s; 3·0.155 + 0.355.
    let mut x = inputs();
    x.bwd = Seconds::new(0.05);
    let c = run("zero-offload", &x);
    assert_relative_eq!(c.exposed_bwd.get(), 3.0 * 0.155 + 0.355, max_relative = R);
}

#[test]
fn parameter_fetches_every_pass_and_activations_both_ways() {
    // ZeRO-3 params on the host: 5e8·2 B = 1 GB per pass, 0.1 s at 10 GB/s; forward and
    // backward per micro-batch: 4·2·1 GB = 8 GB. Activations 1 GB per micro-batch each
    // way, 0.1 s. Forward: max(up 0.1, down 0.1) = 0.1 s under 1 s → 0.01 s exposed per
    // micro-batch; backward: up 0.1 + 0.1 = 0.2 s under 2 s → 0.02 s.
    let c = run("params,activations", &inputs());
    assert_relative_eq!(c.params_fetch.bytes, 8e9, max_relative = R);
    assert_relative_eq!(c.activations.bytes, 4e9, max_relative = R);
    assert_relative_eq!(c.exposed_fwd.get(), 0.04, max_relative = R);
    assert_relative_eq!(c.exposed_bwd.get(), 0.08, max_relative = R);
    // A GPU step over a host-resident shard writes it back: 1 GB, 0.1 s.
    assert_relative_eq!(c.params_step.time.get(), 0.1, max_relative = R);
    // DeepSpeed 2021 re-gathers for the recomputed forward: backward up 0.3 s → 0.03 s.
    let mut x = inputs();
    x.bwd_fetches = 2.0;
    let c = run("params,activations", &x);
    assert_relative_eq!(c.exposed_bwd.get(), 0.12, max_relative = R);
    assert_relative_eq!(c.params_fetch.bytes, 12e9, max_relative = R);
}

#[test]
fn nvme_optimizer_step_is_the_slower_of_cpu_and_swap() {
    // ZeRO-Infinity on NVMe: swap (12 read + 4 gradient + 12 write)·1e9 = 28 GB at 2 GB/s
    // = 14 s > CPU 1 s. Updated params go to the NVMe parameter store: 5e8·2 B / 2 GB/s =
    // 0.5 s. States and gradients (16 GB) and params (1 GB) on NVMe.
    let c = run("zero-infinity", &inputs());
    assert_relative_eq!(c.cpu_step.get(), 14.0, max_relative = R);
    assert_relative_eq!(c.params_step.time.get(), 0.5, max_relative = R);
    assert_relative_eq!(c.nvme_bytes, 17e9, max_relative = R);
    // Fetches from NVMe: 1 GB per pass at 2 GB/s = 0.5 s under a 1 s forward: 0.05 s.
    assert_relative_eq!(c.exposed_fwd.get(), 4.0 * 0.05, max_relative = R);
}

#[test]
fn hbm_freed_by_each_item() {
    // States [w 2 GB, g 2 GB, o 12 GB], activations 4 GB. Optimizer: o → 0. Gradients: one
    // DeepSpeed reduce bucket, 5e8·2 B = 1 GB. Params: w − 5e8·2 B = 1 GB. Activations: two
    // layers of one micro-batch, 2·1 GB/10 = 0.2 GB.
    let x = inputs();
    let s = [2e9, 2e9, 12e9];
    let o = |p| Offload::parse(p, "t").unwrap();
    assert_eq!(
        cost::hbm(&o("optimizer"), &x, s, 4e9),
        ([2e9, 2e9, 0.0], 4e9)
    );
    assert_eq!(cost::hbm(&o("zero-offload"), &x, s, 4e9).0, [2e9, 1e9, 0.0]);
    assert_eq!(cost::hbm(&o("params"), &x, s, 4e9).0, [1e9, 2e9, 12e9]);
    let (_, a) = cost::hbm(&o("activations"), &x, s, 4e9);
    assert_relative_eq!(a, 0.2e9, max_relative = R);
}

#[test]
fn some_layers_of_activations_offloaded() {
    // `activations=4` of 10 layers (Megatron-core cpu_offloading_num_layers = 4): 0.4 GB per
    // micro-batch each way, 0.04 s at 10 GB/s in 4 transfers; 4 micro-batches: 1.6 GB down.
    // Forward: 0.04 s beside 1 s in 10 layer windows, the first layer's copy exposed:
    // chunked(0.04, 1, 10) = 0.004 s per micro-batch; backward up 0.04 s beside 2 s:
    // 0.004 s. HBM keeps (10 − 4)/10 of the 4 GB in flight, 2.4 GB; the host holds 1.6 GB.
    let c = run("activations=4", &inputs());
    assert_relative_eq!(c.activations.bytes, 1.6e9, max_relative = R);
    assert_relative_eq!(c.activations.time.get(), 0.16, max_relative = R);
    assert_relative_eq!(c.exposed_fwd.get(), 4.0 * 0.004, max_relative = R);
    assert_relative_eq!(c.exposed_bwd.get(), 4.0 * 0.004, max_relative = R);
    assert_relative_eq!(c.host_bytes, 1.6e9, max_relative = R);
    let x = inputs();
    let o = Offload::parse("activations=4", "t").unwrap();
    let (_, a) = cost::hbm(&o, &x, [2e9, 2e9, 12e9], 4e9);
    assert_relative_eq!(a, 2.4e9, max_relative = R);
    // With a 1 ms latency per copy the 4 layers pay 4 ms each way per micro-batch:
    // 4·(4·0.001 + 0.04) = 0.176 s down in all.
    let mut t = tiers();
    t.host.as_mut().unwrap().latency = Seconds::new(1e-3);
    let c = cost::evaluate(o, &t, &x).unwrap();
    assert_relative_eq!(c.activations.time.get(), 0.176, max_relative = R);
    // Megatron-core offloads fewer layers than it runs: 10 of 10 is refused.
    let e = cost::evaluate(Offload::parse("activations=10", "t").unwrap(), &tiers(), &x);
    let msg = e.unwrap_err().to_string();
    assert!(
        msg.contains("activations=10") && msg.contains("10 layers"),
        "{msg}"
    );
}

#[test]
fn missing_tier_or_cpu_rate_is_an_input_error() {
    let none = Tiers::default();
    let e = cost::evaluate(Offload::parse("optimizer", "t").unwrap(), &none, &inputs());
    assert!(e.unwrap_err().to_string().contains("'host' tier"));
    let mut t = tiers();
    t.host.as_mut().unwrap().adam_rate = 0.0;
    let e = cost::evaluate(Offload::parse("optimizer", "t").unwrap(), &t, &inputs());
    assert!(e.unwrap_err().to_string().contains("adam_params_per_s"));
}

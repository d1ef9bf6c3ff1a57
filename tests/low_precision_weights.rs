//! Low-precision weights by hand: the quantized copies a device holds per parameter (with
//! and without a transposed copy), the 16-bit weights that `--fp8-params` removes, and the
//! distributed optimizer's parameter all-gather in the low-precision format.
//!
//! - Transformer Engine keeps a row-wise and a column-wise copy of each quantized weight:
//!   per-tensor FP8 on Hopper 1 + 1 B (the transpose: Hopper's FP8 GEMMs take only TN);
//!   on Blackwell 1 B (`is_non_tn_fp8_gemm_supported`, compute capability 10.x); MXFP8
//!   2·(1 + 1/32) B; NVFP4 2·(0.5 + 1/16) B.
//! - Megatron-core `fp8_param_gather` (Megatron-Bridge's FP8, MXFP8 and NVFP4 recipes):
//!   those copies are the weights; the 2 B of 16-bit weight per parameter go. The
//!   parameter all-gather of the distributed optimizer moves 1 B per parameter for
//!   per-tensor FP8, `0.5 + 1/16` for NVFP4, and 2 B for MXFP8 (gathered into the 16-bit
//!   gradient buffer, then quantized: `reuse_grad_buf_for_mxfp8_param_ag`).
//!
//! Each assertion fails if its term changes by 5%.

use crate::common;
use crate::terms_support;

use astrolabe::catalog;
use astrolabe::compute::{Fp8Recipe, Precision};
use astrolabe::estimate::{CommClass, Estimate};
use astrolabe::network::Topology;
use astrolabe::parallel::PlanSpec;
use astrolabe::system::System;
use terms_support::{H, L, S, V, close, layer_params, model, ring_half, run};

/// Every parameter of the term-test model (`terms_support::MODEL`).
fn params() -> f64 {
    L * layer_params() + V * H + S * H + 2.0 * H
}

/// A preset's device on a 4-port switch (100 GB/s, 1 µs).
fn system(preset: &str) -> System {
    let mut s = catalog::system(preset).unwrap();
    s.topology = Topology::parse("switch(4, 100GB/s, 1us)").unwrap();
    s
}

/// DP 4, ZeRO-1, one collective per reduction (no bucketing), m = 2.
fn dp4(preset: &str, precision: Precision, recipe: Fp8Recipe, fp8_params: bool) -> Estimate {
    run(
        &model(),
        &system(preset),
        PlanSpec {
            gpus: Some(4),
            zero: 1,
            dp_overlap: false,
            micro_batch: 1,
            global_batch: Some(8),
            flash_attention: true,
            precision,
            fp8_recipe: recipe,
            fp8_params,
            ..PlanSpec::default()
        },
    )
}

/// Weight bytes per parameter of a plan.
fn weight_bytes_per_param(e: &Estimate) -> f64 {
    e.memory.weights.get() / params()
}

#[test]
fn quantized_copies_and_16_bit_weights_per_parameter() {
    use Fp8Recipe::{Current, Delayed};
    use Precision::{Bf16, Fp8, Mxfp8, Nvfp4};
    let cases = [
        // (system, precision, recipe, fp8 params, bytes per parameter)
        ("dgx-h100", Bf16, Delayed, false, 2.0),
        // Hopper FP8: 2 B of 16-bit weight + 1 B row-wise + 1 B transpose.
        ("dgx-h100", Fp8, Current, false, 4.0),
        ("dgx-h100", Fp8, Current, true, 2.0),
        // Blackwell FP8: no transpose.
        ("dgx-b200", Fp8, Current, false, 3.0),
        ("dgx-b200", Fp8, Delayed, true, 1.0),
        // MXFP8 keeps both orientations on any device: 2·(1 + 1/32) = 2.0625.
        ("dgx-b200", Mxfp8, Delayed, false, 4.0625),
        ("dgx-b200", Mxfp8, Delayed, true, 2.0625),
        // NVFP4: 2·(0.5 + 1/16) = 1.125.
        ("dgx-b200", Nvfp4, Delayed, false, 3.125),
        ("dgx-b200", Nvfp4, Delayed, true, 1.125),
    ];
    for (sys, p, r, fp8_params, want) in cases {
        let e = dp4(sys, p, r, fp8_params);
        close(
            weight_bytes_per_param(&e),
            want,
            1e-9,
            &format!("{sys} {p:?} {r:?} fp8_params={fp8_params}"),
        );
    }
}

#[test]
fn parameter_all_gather_in_the_weights_format() {
    // ZeRO-1 without bucketing: one ring reduce-scatter of the bf16 gradient (2P B) and one
    // ring all-gather of the parameters (w·P B): (p−1)·α + (p−1)/p · n/B each, p = 4.
    let x = |n: f64| ring_half(n, 4.0, 1e-6, 100e9);
    let p = params();
    let dp = |e: &Estimate| {
        let c = e.time.class(CommClass::Dp);
        c.exposed.get() + c.hidden.get()
    };
    use Fp8Recipe::{Current, Delayed};
    use Precision::{Fp8, Mxfp8, Nvfp4};
    for (sys, prec, r, params_lowp, w) in [
        ("dgx-h100", Fp8, Current, false, 2.0),
        ("dgx-h100", Fp8, Current, true, 1.0),
        ("dgx-b200", Fp8, Delayed, true, 1.0),
        ("dgx-b200", Mxfp8, Delayed, true, 2.0),
        ("dgx-b200", Nvfp4, Delayed, true, 0.5625),
    ] {
        let e = dp4(sys, prec, r, params_lowp);
        close(
            dp(&e),
            x(2.0 * p) + x(w * p),
            1e-9,
            &format!("{sys} {prec:?} fp8_params={params_lowp}"),
        );
    }
}

#[test]
fn fp8_params_need_a_low_precision() {
    let sys = system("dgx-h100");
    let spec = PlanSpec {
        gpus: Some(4),
        global_batch: Some(8),
        precision: Precision::Bf16,
        fp8_params: true,
        ..PlanSpec::default()
    };
    let e = astrolabe::estimate::plan(&model(), &sys, &spec).unwrap_err();
    assert!(e.to_string().contains("8- or 4-bit precision"), "{e}");
    // Megatron-LM keeps the fp32 master in the distributed optimizer (or FSDP): ZeRO-0 is
    // refused.
    let spec = PlanSpec {
        precision: Precision::Fp8,
        zero: 0,
        ..spec
    };
    let e = astrolabe::estimate::plan(&model(), &sys, &spec).unwrap_err();
    assert!(e.to_string().contains("zero ≥ 1"), "{e}");
}

#[test]
fn sweep_takes_low_precision_parameters() {
    // `sweep --fp8-params` sets them in every FP8 plan with ZeRO ≥ 1 and leaves the ZeRO-0
    // ones their 16-bit weights; the JSON rows say which.
    let rows = |extra: &[&str]| {
        let mut args = vec!["--precision", "fp8", "--zero", "0,1", "--top", "40"];
        args.extend_from_slice(extra);
        common::llama8b_on_dgx_h100("sweep", &args)["top"]
            .as_array()
            .unwrap()
            .clone()
    };
    let on = rows(&["--fp8-params"]);
    let zero = |r: &serde_json::Value| r["plan"]["zero"].as_u64().unwrap();
    let params = |r: &serde_json::Value| r["plan"]["fp8_params"].as_bool().unwrap();
    assert!(on.iter().any(|r| zero(r) == 1) && on.iter().any(|r| zero(r) == 0));
    assert!(on.iter().all(|r| params(r) == (zero(r) >= 1)), "{on:?}");
    assert!(rows(&[]).iter().all(|r| !params(r)));
}

#[test]
fn fsdp_prefetch_buffers_hold_gathered_weights_in_their_format() {
    // Megatron-FSDP keeps two layers gathered (the one computing and the one prefetched)
    // with their unsharded gradients, 2·P_l·(w + g): with FP8 parameters w = 1 B instead
    // of 2, so the buffers shrink by 2·P_l·(2 − 1).
    let run_fsdp = |fp8_params: bool| {
        run(
            &model(),
            &system("dgx-h100"),
            PlanSpec {
                gpus: Some(4),
                zero: 3,
                zero3_impl: Some(astrolabe::parallel::Zero3Impl::Fsdp),
                micro_batch: 1,
                global_batch: Some(8),
                flash_attention: true,
                precision: Precision::Fp8,
                fp8_recipe: Fp8Recipe::Current,
                fp8_params,
                ..PlanSpec::default()
            },
        )
    };
    let (off, on) = (run_fsdp(false), run_fsdp(true));
    close(
        off.memory.buffers.get() - on.memory.buffers.get(),
        2.0 * layer_params(),
        1e-9,
        "FSDP prefetch: gathered FP8 weights",
    );
    // Absolutely: two 16-bit residual-stream buffers 2·(s·h)·2 B, the FP32 logits s·V·4 B
    // (one stage), and the prefetch 2·P_l·(1 + 2) with bf16 gradients.
    close(
        on.memory.buffers.get(),
        2.0 * S * H * 2.0 + S * V * 4.0 + 2.0 * layer_params() * 3.0,
        1e-9,
        "FSDP buffers with FP8 parameters",
    );
}

/// The `weights =` line of `--explain` for Llama 3 8B on 8 GPUs of `system`, FP8 with
/// current scaling, global batch 64, and `extra`.
fn weights_line(system: &str, extra: &[&str]) -> String {
    let line = format!(
        "estimate --model llama3-8b --system {system} --gpus 8 --precision fp8 \
         --fp8-recipe current --global-batch 64 --explain"
    );
    let args: Vec<&str> = line
        .split_whitespace()
        .chain(extra.iter().copied())
        .collect();
    let out = common::computed(&args);
    out.lines()
        .find(|l| l.trim_start().starts_with("weights ="))
        .unwrap_or_else(|| panic!("{out}"))
        .to_string()
}

#[test]
fn explain_shows_the_weights_terms() {
    // Llama 3 8B (8.0303e9 parameters) on 8 B200, FP8 with low-precision parameters:
    // 16-bit 2·P = 14.96 GiB, one 1-byte copy per parameter on Blackwell, the 16-bit
    // weights replaced: 8.0303e9 B = 7.479 GiB.
    let line = weights_line("dgx-b200", &["--fp8-params"]);
    for part in [
        "16-bit 14.96 GiB",
        "8.0303e9 params × 1 B",
        "FP8 GEMMs take every layout",
        "× 2 B (14.96 GiB; --fp8-params",
        "= 7.479 GiB",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
    // On 8 H100 without `--fp8-params` the 16-bit weights stay beside a row-wise and a
    // transposed copy, 2 B per parameter: 14.96 + 14.96 = 29.92 GiB.
    let line = weights_line("dgx-h100", &[]);
    for part in [
        "16-bit 14.96 GiB",
        "8.0303e9 params × 2 B (row-wise and transposed) = 29.92 GiB",
    ] {
        assert!(line.contains(part), "{part}: {line}");
    }
}

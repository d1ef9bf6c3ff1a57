//! The fused-attention kernel model (`transformer/layer.rs`, `fused_attention`) checked by
//! hand on H100: Llama 2 7B (32 heads of 128, causal), sequence 4096, TP 8 (4 heads per
//! rank), BF16.
//!
//! F = 2·b·(a/t)·s_q·s·(d_qk + d_v)·½ = 2·4·4096·4096·256·½ = 2^34 FLOP.
//! Saturation n/(n + n0) = 4096/(4096 + 768) = 0.842105.
//! Forward = F / (989 TFLOP/s · 0.71 · 0.842105) + 4 µs = 29.05 µs + 4 µs = 33.05 µs;
//! backward = 2.5·F / (989 TFLOP/s · 0.60 · 0.842105) + 4 µs = 85.95 µs + 4 µs = 89.95 µs
//! (cuDNN's SDPA on Hopper as NVIDIA's cudnn-frontend benchmark measured it, cuDNN 9.19:
//! the preset's flash_fwd 0.71, flash_bwd 0.60, flash_n0 768).
//!
//! Packed into samples of 512 tokens, each query sees 512 keys: F = 2·4·4096·512·256·½ =
//! 2^31 FLOP, saturation 512/(512 + 768) = 0.4, forward = 7.65 µs + 4 µs = 11.65 µs,
//! backward = 22.62 µs + 4 µs = 26.62 µs.
//!
//! With `--attention-kernel fa2` (FlashAttention-2, PyTorch SDPA's default: the preset's
//! fa2_fwd 0.35, fa2_bwd 0.34, fa2_n0 330, from the FlashAttention-3 paper's FlashAttention-2
//! curves on H100): saturation 4096/(4096 + 330) = 0.925441, forward = 2^34 / (989 TFLOP/s ·
//! 0.35 · 0.925441) + 4 µs = 53.63 µs + 4 µs = 57.63 µs; backward = 2.5·2^34 / (989 TFLOP/s ·
//! 0.34 · 0.925441) + 4 µs = 138.02 µs + 4 µs = 142.02 µs.

use crate::common;
use common::{h100_tp8_explain_line, micros, usage_error};

/// (forward, backward) µs of the fused attention in `--explain` for Llama 2 7B on 8 H100
/// (TP 8), sequence 4096, plus `extra` flags.
fn fused(extra: &[&str]) -> (f64, f64) {
    let line = h100_tp8_explain_line("llama2-7b", extra, "attention (fused)");
    (micros(&line, "fwd ="), micros(&line, "bwd ="))
}

#[test]
fn fused_attention_times_by_hand_on_h100() {
    let (fwd, bwd) = fused(&[]);
    // Head size 128: no head-size factor, none printed.
    let line = h100_tp8_explain_line("llama2-7b", &[], "attention (fused)");
    assert!(!line.contains("head size"), "{line}");
    assert!((fwd / 33.05 - 1.0).abs() < 2e-3, "forward {fwd} µs");
    assert!((bwd / 89.95 - 1.0).abs() < 2e-3, "backward {bwd} µs");
}

#[test]
fn packed_samples_shorten_the_attention_span() {
    let (fwd, bwd) = fused(&["--packed-sample-len", "512"]);
    assert!((fwd / 11.65 - 1.0).abs() < 3e-3, "forward {fwd} µs");
    assert!((bwd / 26.62 - 1.0).abs() < 3e-3, "backward {bwd} µs");
}

#[test]
fn flash_attention_2_runs_at_its_own_rates() {
    let (fwd, bwd) = fused(&["--attention-kernel", "fa2"]);
    assert!((fwd / 57.63 - 1.0).abs() < 2e-3, "forward {fwd} µs");
    assert!((bwd / 142.02 - 1.0).abs() < 2e-3, "backward {bwd} µs");
}

/// A device without published FlashAttention-2 rates refuses the kernel instead of
/// guessing, and the kernel needs fused attention on.
#[test]
fn flash_attention_2_needs_rates_and_fused_attention() {
    let base = [
        "estimate",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "8",
    ];
    let b200: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--system", "dgx-b200", "--attention-kernel", "fa2"])
        .collect();
    usage_error(&b200, "device 'b200' has no FlashAttention-2 rates");
    let sweep = [
        "sweep",
        "--model",
        "llama3-8b",
        "--gpus",
        "8",
        "--global-batch",
        "8",
        "--system",
        "dgx-b200",
        "--attention-kernel",
        "fa2",
    ];
    usage_error(&sweep, "device 'b200' has no FlashAttention-2 rates");
    let unfused: Vec<&str> = base
        .iter()
        .copied()
        .chain(["--system", "dgx-h100", "--attention-kernel", "fa2"])
        .chain(["--flash-attention", "false"])
        .collect();
    usage_error(&unfused, "fa2 is a fused-attention kernel");
    usage_error(
        &[
            &base[..],
            &["--system", "dgx-h100", "--attention-kernel", "fa3"],
        ]
        .concat(),
        "--attention-kernel",
    );
}

/// Heads narrower than 128 pay for their exponentials (`Device::head_size_factors`), by
/// hand on H100 (3.9e12 exponentials/s: τ_x = 0.256410 ns per score) for the
/// FlashAttention-3 paper's three kernels at 16K tokens, head size 128 (Shah et al. 2024,
/// Fig. 5, forward, non-causal): cuDNN 595, FlashAttention-2 370 and FlashAttention-3 648
/// TFLOP/s, i.e. τ = 512/rate per score = 0.860504, 1.383784 and 0.790123 ns. At head size
/// 64 the GEMMs take half of `τ − τ_x`: r = ((τ − τ_x)/2 + τ_x)/(τ/2) = 1.297977,
/// 1.185296 and 1.324519, so 1/r = 0.7704, 0.8437 and 0.7550 of the 128 rate, where the
/// same figure measured 413/595 = 0.694, 324/370 = 0.876 and 497/648 = 0.767 (within 0.08).
#[test]
fn narrow_heads_pay_for_their_exponentials() {
    let dev = astrolabe::catalog::device("h100-sxm").unwrap();
    let peak = astrolabe::units::FlopRate::new(989e12);
    for (rate, hand, measured) in [
        (595e12, 1.297977, 413.0 / 595.0),
        (370e12, 1.185296, 324.0 / 370.0),
        (648e12, 1.324519, 497.0 / 648.0),
    ] {
        let e = rate / 989e12;
        let (rf, rb) = dev.head_size_factors((e, e), peak, 64.0);
        assert!(
            (rf / hand - 1.0).abs() < 1e-6,
            "{rate}: r = {rf}, hand {hand}"
        );
        assert!(
            (1.0 / rf - measured).abs() < 0.08,
            "{rate}: {} vs {measured}",
            1.0 / rf
        );
        // Backward: 2.5× the FLOPs per score at the same rate, one exponential per score.
        let tau = 1280.0 / rate;
        let tx = 1.0 / 3.9e12;
        let hand_b = ((tau - tx) / 2.0 + tx) / (tau / 2.0);
        assert!((rb / hand_b - 1.0).abs() < 1e-12, "{rb} vs {hand_b}");
    }
}

/// Head size 128 and wider keep the measured rate (cuDNN's head size 256 runs at 0.97 of
/// 128 in the same figure), and a device without `exp_rate` has no correction.
#[test]
fn head_size_128_and_wider_and_devices_without_exp_rate_keep_the_rate() {
    let peak = astrolabe::units::FlopRate::new(989e12);
    let h100 = astrolabe::catalog::device("h100-sxm").unwrap();
    assert_eq!(h100.head_size_factors((0.71, 0.6), peak, 128.0), (1.0, 1.0));
    assert_eq!(h100.head_size_factors((0.71, 0.6), peak, 192.0), (1.0, 1.0));
    assert!(h100.head_size_factors((0.71, 0.6), peak, 127.0).0 > 1.0);
    let mi300x = astrolabe::catalog::device("mi300x").unwrap();
    assert_eq!(mi300x.spec.efficiency.exp_rate, None);
    assert_eq!(
        mi300x.head_size_factors((0.35, 0.33), peak, 64.0),
        (1.0, 1.0)
    );
}

/// A device file with a non-positive `exp_rate` is refused with the key named.
#[test]
fn exp_rate_must_be_positive() {
    let mut spec = astrolabe::catalog::device("h100-sxm").unwrap().spec;
    spec.efficiency.exp_rate = Some(astrolabe::units::FlopRate::new(0.0));
    let err = astrolabe::compute::Device::from_spec(spec)
        .unwrap_err()
        .to_string();
    assert!(err.contains("efficiency.exp_rate"), "{err}");
}

/// Unfused attention (`--flash-attention false`): the scores are materialised, so the
/// forward is its two batched GEMMs at the device's `attention` factor plus the softmax's
/// pass over the scores, `(QKᵀ + attention·V)/e + 4 B·scores/(bw·e_mem) + 2·4 µs`. Llama 2
/// 7B on one H100 (32 heads, sequence 4096: 32·4096² = 536 870 912 scores, 2 GiB moved at
/// 3.35 TB/s · 0.7 = 915.75 µs + 8 µs), on a copy of the H100 whose `attention` factor is
/// 0.5 instead of 1: the GEMMs count twice. The backward's four GEMMs are one of QKᵀ's
/// shape (the scores' gradient, 4096×4096×128 per head) and three of attention·V's
/// (4096×128×4096: the query, key and value gradients), and its softmax pass moves 6 B
/// per score: `(QKᵀ + 3·attention·V)/e + 3 GiB/(bw·e_mem) + 8 µs`. A model with dropout
/// moves 5 B per score more each way (its mask and output).
#[test]
fn unfused_attention_forward_by_hand() {
    let root = env!("CARGO_MANIFEST_DIR");
    let dir = common::tmp("unfused_attention");
    let dev = std::fs::read_to_string(format!("{root}/presets/devices/h100-sxm.toml"))
        .unwrap()
        .replacen("[efficiency]\n", "[efficiency]\nattention = 0.5\n", 1);
    let dev_path = dir.join("h100-half-attention.toml");
    std::fs::write(&dev_path, dev).unwrap();
    let sys = std::fs::read_to_string(format!("{root}/presets/systems/dgx-h100.toml"))
        .unwrap()
        .replacen(
            "device = \"h100-sxm\"",
            &format!("device = \"{}\"", dev_path.display()),
            1,
        );
    let sys_path = dir.join("dgx-h100-half-attention.toml");
    std::fs::write(&sys_path, sys).unwrap();
    // (model, bytes the softmax moves forward and backward): Llama 2 7B has no dropout, 4
    // and 6 B per score; the 1.7B GPT of Narayanan et al. (24 heads of 96, sequence 2048:
    // 100 663 296 scores) has biases and so dropout, 9 and 11 B.
    for (model, fwd_bytes, bwd_bytes) in [
        ("llama2-7b", 4.0 * 536_870_912.0, 6.0 * 536_870_912.0),
        (
            "megatron-2021-1.7b",
            9.0 * 100_663_296.0,
            11.0 * 100_663_296.0,
        ),
    ] {
        let text = common::computed(&[
            "estimate",
            "--model",
            model,
            "--system",
            sys_path.to_str().unwrap(),
            "--gpus",
            "1",
            "--global-batch",
            "1",
            "--flash-attention",
            "false",
            "--explain",
        ]);
        let line = text
            .lines()
            .find(|l| l.contains("attention core"))
            .unwrap_or_else(|| panic!("no attention core line in\n{text}"));
        let clauses = line.replace(';', ",");
        let (qk, av, fwd, bwd) = (
            micros(&clauses, "QKᵀ"),
            micros(&clauses, "attention·V"),
            micros(&clauses, "→ fwd"),
            micros(&clauses, "bwd"),
        );
        let pass = |bytes: f64| bytes / (3.35e12 * 0.7) * 1e6 + 8.0;
        let hand = (qk + av) / 0.5 + pass(fwd_bytes);
        assert!(
            (fwd - hand).abs() < 2e-3 * hand,
            "{model}: {fwd} µs, by hand {hand} µs: {line}"
        );
        let hand = (qk + 3.0 * av) / 0.5 + pass(bwd_bytes);
        assert!(
            (bwd - hand).abs() < 2e-3 * hand,
            "{model}: {bwd} µs, by hand {hand} µs: {line}"
        );
    }
}

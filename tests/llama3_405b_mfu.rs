//! Issue 20's first acceptance point: Llama 3 405B as Meta trained it (Dubey et al. 2024,
//! "The Llama 3 Herd of Models", Table 4: BF16 on H100, micro-batch 1, 16M tokens per
//! batch). A sweep with TP, CP, PP and the micro-batch fixed as published and everything
//! else tuned (schedule and virtual stages, recomputation, ZeRO stage, group order) gives
//! an MFU within 10 % (relative) of the published one. Meta trained in 2024: the H100 with
//! that year's fused-attention kernels (FlashAttention-2's measured rates,
//! tests/data/modern/h100-2024.toml).

use crate::common;

/// The best plan's MFU of the default sweep with the published (tp, cp, pp), micro-batch 1.
fn best_mfu(gpus: u32, cp: u32, seq: u32) -> f64 {
    // 16M tokens per batch: 2,048 sequences of 8,192 tokens, 128 of 131,072.
    let batch = (16 * 1024 * 1024 / seq).to_string();
    let (gpus, cp, seq) = (gpus.to_string(), cp.to_string(), seq.to_string());
    let v = common::json(&[
        "sweep",
        "--model",
        "llama3-405b",
        "--system",
        "tests/data/modern/dgx-h100-2024.toml",
        "--gpus",
        &gpus,
        "--global-batch",
        &batch,
        "--seq-len",
        &seq,
        "--tp",
        "8",
        "--pp",
        "16",
        "--cp",
        &cp,
        "--micro-batch",
        "1",
        "--top",
        "1",
    ]);
    v["top"][0]["mfu"].as_f64().expect("a plan fits")
}

#[test]
fn table4_mfu_within_ten_percent() {
    // (GPUs, CP, sequence, published MFU): 8,192 GPUs 43 %, 16,384 GPUs 41 %, and
    // 16,384 GPUs with CP 16 at 131,072 tokens 38 %.
    for (gpus, cp, seq, published) in [
        (8192, 1, 8192, 0.43),
        (16384, 1, 8192, 0.41),
        (16384, 16, 131072, 0.38),
    ] {
        let mfu = best_mfu(gpus, cp, seq);
        let rel = mfu / published - 1.0;
        println!(
            "{gpus} GPUs, CP {cp}, {seq} tokens: {:.1}% vs {:.0}% ({:+.1}%)",
            100.0 * mfu,
            100.0 * published,
            100.0 * rel
        );
        assert!(
            rel.abs() <= 0.10,
            "{gpus} GPUs CP {cp}: MFU {mfu} vs {published}"
        );
    }
}

//! The 2024–2025 catalog entries (Qwen2.5, gpt-oss-20b, Kimi K2, Llama 4, DGX H800) against
//! the figures their publishers state: parameter counts from model cards and reports, and
//! the H800's NVLink bandwidth from DeepSeek's papers. Each case names its source and says
//! why its tolerance is what it is.

use assert_cmd::Command;
use astrolabe::catalog;
use astrolabe::model::Transformer;

fn transformer(name: &str) -> Transformer {
    let m = catalog::model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    *m.transformer().expect("a transformer")
}

/// Parameters a token passes through: attention, top-k routed and shared experts on MoE
/// layers, dense layers and the embeddings (input lookup included, as the Qwen, Kimi and
/// Llama cards count it; `input_emb = false` leaves it out, as the gpt-oss card does).
fn active(t: &Transformer, input_emb: bool) -> f64 {
    let moe = (t.layers - t.dense_layers) as f64;
    let per_moe =
        t.attn_params + t.top_k as f64 * t.mlp_params + t.shared_params + t.other_layer_params;
    moe * per_moe + t.dense_layers as f64 * t.dense_layer().layer_params() + t.embedding_params
        - if input_emb { 0.0 } else { t.v * t.h }
}

#[track_caller]
fn close(what: &str, got: f64, published: f64, tol: f64, source: &str) {
    let err = got / published - 1.0;
    assert!(
        err.abs() <= tol,
        "{what}: {got:.4e} vs {published:.4e} published ({source}): {:+.2}% (tolerance {:.1}%)",
        100.0 * err,
        100.0 * tol
    );
}

#[test]
fn qwen2_5_matches_its_model_cards() {
    // Qwen2.5-7B model card: 7.61B parameters, 6.53B without embeddings. Three significant
    // figures: the rounding alone allows 0.07%; 0.5% leaves room for the QKV biases the
    // file leaves out.
    let src = "Qwen2.5-7B model card";
    let t = transformer("qwen2.5-7b");
    close("qwen2.5-7b total", t.params(), 7.61e9, 0.005, src);
    close(
        "qwen2.5-7b non-embedding",
        t.params() - t.embedding_params,
        6.53e9,
        0.005,
        src,
    );
    // Qwen2.5-32B model card: 32.5B, 31.0B without embeddings. The config's shapes give
    // 32.76B and 31.21B, 0.8% and 0.7% above the card's figures: 1%.
    let src = "Qwen2.5-32B model card";
    let t = transformer("qwen2.5-32b");
    close("qwen2.5-32b total", t.params(), 32.5e9, 0.01, src);
    close(
        "qwen2.5-32b non-embedding",
        t.params() - t.embedding_params,
        31.0e9,
        0.01,
        src,
    );
}

#[test]
fn gpt_oss_20b_matches_the_model_card() {
    // gpt-oss model card, Table 1: 20.91B total, 3.61B active (the card counts the
    // unembedding but not the input lookup as active). Four significant figures; 0.5%.
    let src = "gpt-oss model card, Table 1";
    let t = transformer("gpt-oss-20b");
    close("gpt-oss-20b total", t.params(), 20.91e9, 0.005, src);
    close("gpt-oss-20b active", active(&t, false), 3.61e9, 0.005, src);
}

#[test]
fn kimi_k2_matches_the_model_card() {
    // Kimi K2 model card (and the report's abstract): 1T total, 32B activated. The card
    // rounds to one and two significant figures; the shapes give 1.026T and 32.9B, so the
    // tolerance is the rounding's, 5%.
    let src = "Kimi K2 model card";
    let t = transformer("kimi-k2");
    close("kimi-k2 total", t.params(), 1.0e12, 0.05, src);
    close("kimi-k2 active", active(&t, true), 32e9, 0.05, src);
}

#[test]
fn llama4_matches_the_model_cards() {
    // Llama 4 model card: Scout 109B total, Maverick 400B, both 17B active. The totals
    // include the vision encoder, which the files leave out (Scout's shapes give 107.8B,
    // −1.1%): 2%. 17B has two significant figures: 3%.
    let src = "Llama 4 model card";
    let t = transformer("llama4-scout");
    close("llama4-scout total", t.params(), 109e9, 0.02, src);
    close("llama4-scout active", active(&t, true), 17e9, 0.03, src);
    let t = transformer("llama4-maverick");
    close("llama4-maverick total", t.params(), 400e9, 0.02, src);
    close("llama4-maverick active", active(&t, true), 17e9, 0.03, src);
    // MoE on alternate layers: half of Maverick's 48 layers are dense.
    assert_eq!((t.layers, t.dense_layers, t.experts), (48, 24, 128));
}

/// Bandwidth of the innermost (NVLink) dimension of a system preset, in bytes/s.
fn nvlink(system: &str) -> f64 {
    let s = catalog::system(system).unwrap_or_else(|e| panic!("{system}: {e}"));
    s.topology.dims()[0].bandwidth.get()
}

#[test]
fn dgx_h800_nvlink_is_the_h100_link_scaled_to_400_gb_s() {
    // DeepSeek-AI 2025 ("Insights into DeepSeek-V3", §4.1): H800 SXM NVLink is 400 GB/s
    // bidirectional against the H100's 900, so the achieved bandwidth scales by 400/900.
    let (h800, h100) = (nvlink("dgx-h800"), nvlink("dgx-h100"));
    close(
        "dgx-h800 / dgx-h100 NVLink",
        h800 / h100,
        400.0 / 900.0,
        0.005,
        "DeepSeek ISCA 2025 §4.1",
    );
    // DeepSeek-V3 Technical Report §3.2.2 measures 160 GB/s on its H800 cluster; the scaled
    // H100 efficiency gives 164.4 GB/s: within 5% of the measurement.
    close(
        "dgx-h800 NVLink",
        h800,
        160e9,
        0.05,
        "DeepSeek-V3 Technical Report §3.2.2",
    );
    // Same compute, same InfiniBand (8 × 400 Gb/s per node) as DGX H100.
    let (a, b) = (
        catalog::system("dgx-h800").expect("dgx-h800"),
        catalog::system("dgx-h100").expect("dgx-h100"),
    );
    assert_eq!(a.device.spec.matrix, b.device.spec.matrix);
    assert_eq!(
        a.topology.dims()[1].bandwidth.get(),
        b.topology.dims()[1].bandwidth.get()
    );
}

fn iteration_time(system: &str) -> f64 {
    let out = Command::cargo_bin("astrolabe")
        .expect("binary built")
        .args(["estimate", "--model", "llama3-70b", "--system", system])
        .args(["--gpus", "64", "--tp", "8", "--pp", "2"])
        .args(["--global-batch", "64"])
        .args(["--format", "json"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{system}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    j["iteration_time_s"].as_f64().expect("iteration_time_s")
}

#[test]
fn llama3_70b_on_dgx_h800_runs_and_pays_for_the_slower_nvlink() {
    // TP 8 inside a node: dgx-h800 differs from dgx-h100 only in its NVLink dimension (4/9 of
    // the bandwidth, no NVLink SHARP), so the same plan can only be slower on it, and by less
    // than the 9/4 bandwidth ratio over the whole step, most of which is compute.
    let (h800, h100) = (iteration_time("dgx-h800"), iteration_time("dgx-h100"));
    assert!(h800 > h100, "H800 {h800} s vs H100 {h100} s");
    assert!(h800 < 2.25 * h100, "H800 {h800} s vs H100 {h100} s");
}

#[test]
fn nemotron_h_matches_its_paper() {
    // NVIDIA 2025, "Nemotron-H" (arXiv 2504.03624): 8B, 47B and 56B. The hand counts are in
    // each model file (56B: 54 Mamba layers of 438 432 512, 10 attention layers of
    // 151 003 136, 54 MLP layers of 536 879 104, untied embeddings 2·131072·8192, final norm:
    // 56.324e9). The paper rounds to whole billions (±0.9% at 56B); 2% bounds both.
    let src = "Nemotron-H, arXiv 2504.03624";
    let t = transformer("nemotron-h-56b");
    let hand = 54.0 * 438_432_512.0
        + 10.0 * 151_003_136.0
        + 54.0 * 536_879_104.0
        + 2.0 * 131072.0 * 8192.0
        + 8192.0;
    assert!((t.params() - hand).abs() < 1.0, "{} vs {hand}", t.params());
    close("nemotron-h-56b total", t.params(), 56e9, 0.02, src);
    close(
        "nemotron-h-47b total",
        transformer("nemotron-h-47b").params(),
        47e9,
        0.02,
        src,
    );
    close(
        "nemotron-h-8b total",
        transformer("nemotron-h-8b").params(),
        8e9,
        0.02,
        src,
    );
}

#[test]
fn nemotron_3_nano_matches_its_model_card() {
    // NVIDIA Nemotron 3 Nano 30B-A3B model card and report: 31.6B parameters, 3.6B active
    // with the embeddings. By hand: 23 Mamba layers of 38 744 896, 6 attention layers of
    // 23 399 040, 23 MoE layers of 128·2·2688·1856 + 2·2688·3712 + 2688·128 + 2688 =
    // 1 297 468 032, embeddings 2·131072·2688, final norm: 31.578e9; active: the MoE layers
    // with 6 of their 128 experts, 3.580e9. Three significant figures: 1% and 2%.
    let src = "Nemotron 3 Nano 30B-A3B model card";
    let t = transformer("nemotron-3-nano-30b-a3b");
    let hy = t.hybrid.expect("a hybrid model");
    let hand = 23.0 * 38_744_896.0
        + 6.0 * 23_399_040.0
        + 23.0 * 1_297_468_032.0
        + 2.0 * 131072.0 * 2688.0
        + 2688.0;
    assert!((t.params() - hand).abs() < 1.0, "{} vs {hand}", t.params());
    close("nemotron-3-nano total", t.params(), 31.6e9, 0.01, src);
    let idle = hy.counts.moe as f64 * (t.experts - t.top_k) as f64 * t.mlp_params;
    close(
        "nemotron-3-nano active",
        t.params() - idle,
        3.6e9,
        0.02,
        src,
    );
}

#[test]
fn nemotron_3_ultra_matches_its_report() {
    // Nemotron 3 Ultra technical report (arXiv 2606.15007) and model card: 550B parameters,
    // 55B active. By hand, as Super's (models/nemotron3-ultra.toml): 48 Mamba layers of
    // 8192·(2·16384 + 2·8·128 + 256) + (16384 + 2048)·5 + 3·256 + 16384 + 16384·8192 +
    // 8192 = 421 645 056; 12 attention layers of 8192·(8192 + 2·256) + 8192·8192 + 8192 =
    // 138 420 224; 48 LatentMoE layers of 512·2·2048·5120 + 2·8192·10240 + 2·8192·2048 +
    // 8192·512 + 8192 = 10 942 947 328; embeddings 2·131072·8192 and the final norm; the
    // shared MTP module once: 138 420 224 + 10 942 947 328 + 2·8192² + 2·8192.
    let src = "Nemotron 3 Ultra report, Table 1";
    let t = transformer("nemotron3-ultra");
    let hy = t.hybrid.expect("a hybrid model");
    assert_eq!(
        (hy.counts.mamba, hy.counts.attention, hy.counts.moe),
        (48, 12, 48)
    );
    let body = 48.0 * 421_645_056.0
        + 12.0 * 138_420_224.0
        + 48.0 * 10_942_947_328.0
        + 2.0 * 131072.0 * 8192.0
        + 8192.0;
    let mtp = 138_420_224.0 + 10_942_947_328.0 + 2.0 * 8192.0 * 8192.0 + 2.0 * 8192.0;
    assert!(
        (t.params() - body - mtp).abs() < 1.0,
        "{} vs {}",
        t.params(),
        body + mtp
    );
    close("nemotron3-ultra total", body, 550e9, 0.01, src);
    // Active: the routed experts' idle 490 of 512, each 2·2048·5120 on the latent space.
    let idle = 48.0 * 490.0 * 2.0 * 2048.0 * 5120.0;
    close("nemotron3-ultra active", body - idle, 55e9, 0.02, src);
}

#[test]
fn nemotron_3_5_lightning_is_nano_with_its_mtp_module() {
    // Megatron-Bridge's model verification card for Nemotron 3.5 Lightning counts
    // 32 913 266 240 parameters. By hand: Nano's 31 577 937 344
    // (nemotron_3_nano_matches_its_model_card) and one shared MTP module of one attention
    // layer (23 399 040), one MoE layer (1 297 468 032), the 2h × h projection (2·2688²) and
    // two norms. The card also holds what the model does not count, 5 760: each MoE layer's
    // expert-bias vector (24 of 128, the MTP module's included) and the module's final
    // norm (2688).
    let nano = transformer("nemotron-3-nano-30b-a3b").params();
    let t = transformer("nemotron-3.5-lightning-30b-a3b");
    let mtp = 23_399_040.0 + 1_297_468_032.0 + 2.0 * 2688.0 * 2688.0 + 2.0 * 2688.0;
    assert!((nano - 31_577_937_344.0).abs() < 1.0, "{nano}");
    assert!((t.params() - nano - mtp).abs() < 1.0, "{}", t.params());
    let uncounted = 24.0 * 128.0 + 2688.0;
    assert!((32_913_266_240.0 - t.params() - uncounted).abs() < 1.0);
}

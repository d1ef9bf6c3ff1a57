//! The 2024–2025 catalog entries (Qwen2.5, gpt-oss-20b, Kimi K2, Llama 4, DGX H800) against
//! the figures their publishers state: parameter counts from model cards and reports, and
//! the H800's NVLink bandwidth from DeepSeek's papers. Each case names its source and says
//! why its tolerance is what it is.

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

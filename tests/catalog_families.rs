//! The widely benchmarked families added to the catalog (Mistral 7B, Qwen2.5 14B and 72B,
//! Qwen3's dense models, Llama 3.2, OLMo 2, Gemma 2, DBRX) against the parameter counts
//! their publishers state. Every figure below is copied from the paper, model card or
//! release named beside it, never from running this crate; the tolerance is 1.5%
//! throughout, wider than the rounding of any figure used except where a case says
//! otherwise.

use astrolabe::catalog;
use astrolabe::model::Transformer;

/// Relative tolerance on a published parameter count.
const TOL: f64 = 0.015;

/// The built-in model `name`, which must be a transformer.
fn built_in(name: &str) -> Transformer {
    let model = catalog::model(name).unwrap_or_else(|e| panic!("{name} does not load: {e}"));
    *model
        .transformer()
        .unwrap_or_else(|| panic!("{name} is not a transformer"))
}

/// Parameters one token passes through: attention, norms and router of every layer, its
/// `top_k` routed experts, and the embeddings (input lookup and output head), as the
/// Kimi K2 and Llama 4 cases of tests/catalog_frontier.rs count them.
fn active_params(t: &Transformer) -> f64 {
    let per_layer = t.attn_params + t.top_k as f64 * t.mlp_params + t.other_layer_params;
    t.layers as f64 * per_layer + t.embedding_params
}

/// Parameters outside the embeddings (token lookup, untied head, final norm).
fn non_embedding(t: &Transformer) -> f64 {
    t.params() - t.embedding_params
}

#[track_caller]
fn within(what: &str, computed: f64, published: f64, source: &str) {
    let rel = computed / published - 1.0;
    assert!(
        rel.abs() <= TOL,
        "{what}: these shapes give {computed:.5e}, {source} states {published:.5e}: \
         {:+.2}% (tolerance {:.1}%)",
        100.0 * rel,
        100.0 * TOL
    );
}

#[test]
fn mistral_7b_matches_its_announcement() {
    let t = built_in("mistral-7b");
    // Mistral AI, "Announcing Mistral 7B" (September 2023): "a 7.3B parameter model".
    within(
        "mistral-7b total",
        t.params(),
        7.3e9,
        "Mistral AI's Mistral 7B announcement",
    );
    // The released weights (Hugging Face Hub, mistralai/Mistral-7B-v0.1): 7.24B.
    within(
        "mistral-7b total",
        t.params(),
        7.24e9,
        "the Hub count of mistralai/Mistral-7B-v0.1",
    );
    // Table 1 of Jiang et al. 2023: window 4096 on every layer.
    let w = t.window.expect("mistral-7b has a sliding window");
    assert_eq!((w.tokens, w.fraction), (4096.0, 1.0), "mistral-7b window");
}

#[test]
fn qwen2_5_14b_and_72b_match_their_model_cards() {
    // Qwen2.5-14B model card: 14.7B parameters, 13.1B without embeddings.
    let src = "the Qwen2.5-14B model card";
    let t = built_in("qwen2.5-14b");
    within("qwen2.5-14b total", t.params(), 14.7e9, src);
    within("qwen2.5-14b non-embedding", non_embedding(&t), 13.1e9, src);
    // Qwen2.5-72B model card: 72.7B parameters, 70.0B without embeddings.
    let src = "the Qwen2.5-72B model card";
    let t = built_in("qwen2.5-72b");
    within("qwen2.5-72b total", t.params(), 72.7e9, src);
    within("qwen2.5-72b non-embedding", non_embedding(&t), 70.0e9, src);
}

#[test]
fn olmo2_matches_its_released_weights() {
    // OLMo 2 7B: the model card names it 7B; the Hugging Face Hub counts 7.3B parameters
    // in allenai/OLMo-2-1124-7B's weights.
    let t = built_in("olmo2-7b");
    within(
        "olmo2-7b total",
        t.params(),
        7.3e9,
        "the Hub count of allenai/OLMo-2-1124-7B",
    );
    // OLMo 2 13B: allenai/OLMo-2-1124-13B's model.safetensors.index.json gives a total
    // size of 54 864 793 600 bytes of float32, 13 716 198 400 parameters.
    let t = built_in("olmo2-13b");
    within(
        "olmo2-13b total",
        t.params(),
        54_864_793_600.0 / 4.0,
        "allenai/OLMo-2-1124-13B model.safetensors.index.json",
    );
    // OLMo 2 32B: Ai2 states only "32B" (model card, release blog); two significant
    // figures, so the rounding alone allows 1.6%.
    let t = built_in("olmo2-32b");
    within(
        "olmo2-32b total",
        t.params(),
        32e9,
        "the OLMo 2 32B model card",
    );
    for name in ["olmo2-7b", "olmo2-13b", "olmo2-32b"] {
        assert!(built_in(name).qk_norm, "{name} has QK-norm (OLMo 2)");
    }
}

#[test]
fn gemma2_matches_table_2_of_its_report() {
    // Gemma Team 2024 (Gemma 2), Table 2: embedding and non-embedding parameters.
    let src = "Gemma 2 report, Table 2";
    for (name, embedding, others) in [
        ("gemma2-9b", 917_962_752.0, 8_324_201_984.0),
        ("gemma2-27b", 1_180_237_824.0, 26_047_480_320.0),
    ] {
        let t = built_in(name);
        within(
            &format!("{name} total"),
            t.params(),
            embedding + others,
            src,
        );
        within(
            &format!("{name} non-embedding"),
            non_embedding(&t),
            others,
            src,
        );
        // Tied: the embedding is the vocabulary (256128, Table 1) times d_model, once.
        assert_eq!(t.v * t.h, embedding, "{name} embedding ({src})");
        // Every other layer a 4096-token window (§2).
        let w = t.window.expect("Gemma 2 has sliding windows");
        assert_eq!((w.tokens, w.fraction), (4096.0, 0.5), "{name} window");
    }
}

#[test]
fn dbrx_matches_its_model_card() {
    // databricks/dbrx-base model card: 132B total parameters, 36B active on any input.
    // Both have two or three significant figures; 36B allows ±1.4% by its rounding.
    let src = "the DBRX model card";
    let t = built_in("dbrx");
    within("dbrx total", t.params(), 132e9, src);
    within("dbrx active", active_params(&t), 36e9, src);
    assert_eq!((t.experts, t.top_k), (16, 4), "dbrx routing ({src})");
}

#[test]
fn qwen3_dense_models_match_their_model_cards() {
    // The Qwen/Qwen3-* model cards: parameters, and parameters without embeddings. The
    // small three tie their input and output embeddings (Qwen3 Technical Report, Table 1).
    let cards = [
        ("qwen3-0.6b", 0.6e9, 0.44e9, true),
        ("qwen3-1.7b", 1.7e9, 1.4e9, true),
        ("qwen3-4b", 4.0e9, 3.6e9, true),
        ("qwen3-8b", 8.2e9, 6.95e9, false),
        ("qwen3-14b", 14.8e9, 13.2e9, false),
        ("qwen3-32b", 32.8e9, 31.2e9, false),
    ];
    for (name, total, others, tied) in cards {
        let src = format!("the {name} model card");
        let t = built_in(name);
        within(&format!("{name} total"), t.params(), total, &src);
        within(
            &format!("{name} non-embedding"),
            non_embedding(&t),
            others,
            &src,
        );
        // Tied: one vocabulary × hidden matrix (151936 tokens); untied: two.
        let copies = if tied { 1.0 } else { 2.0 };
        assert_eq!(
            (t.embedding_params / (151_936.0 * t.h)).round(),
            copies,
            "{name} embeddings ({src})"
        );
    }
}

#[test]
fn llama3_2_matches_its_model_card() {
    // Meta's Llama 3.2 model card: 1.23B and 3.21B parameters, tied embeddings.
    for (name, total) in [("llama3.2-1b", 1.23e9), ("llama3.2-3b", 3.21e9)] {
        let t = built_in(name);
        within(
            &format!("{name} total"),
            t.params(),
            total,
            "Meta's Llama 3.2 model card",
        );
        assert_eq!(
            (t.embedding_params / (128_256.0 * t.h)).round(),
            1.0,
            "{name} ties its embeddings"
        );
    }
}

//! The 2024–2026 model presets against the parameter counts their authors publish: total
//! and active (per token) parameters, from each model's source (named per case).

use astrolabe::catalog;

/// (model, published total parameters, published active parameters or 0, source, whether
/// the publisher counts the input embedding as active).
const CASES: &[(&str, f64, f64, &str, bool)] = &[
    // DeepSeek-V3 report, abstract and §4.2: 671B total, 37B activated (main model; the
    // MTP module adds 14B, config/README: 685B with it).
    (
        "deepseek-v3",
        685e9,
        37e9,
        "DeepSeek-V3 Technical Report; HF README 685B with MTP",
        true,
    ),
    // DeepSeek-V2 report, abstract and Appendix B: 236B total, 21B activated; V2-Lite
    // 15.7B and 2.4B. Both counts take the output head but not the input lookup (V2-Lite's
    // 2.4B leaves no room for both: 2.45B with the head, 2.66B with both).
    (
        "deepseek-v2",
        236e9,
        21e9,
        "DeepSeek-V2 report, abstract",
        false,
    ),
    (
        "deepseek-v2-lite",
        15.7e9,
        2.4e9,
        "DeepSeek-V2 report, Appendix B",
        false,
    ),
    // DeepSeek LLM report, Table 2: 67B.
    (
        "deepseek-llm-67b",
        67e9,
        0.0,
        "DeepSeek LLM report, Table 2",
        true,
    ),
    // Qwen3 Technical Report, Table 2 / model cards: 30.5B total, 3.3B activated.
    (
        "qwen3-30b-a3b",
        30.5e9,
        3.3e9,
        "Qwen3-30B-A3B model card",
        true,
    ),
    // 235B total, 22B activated.
    (
        "qwen3-235b-a22b",
        235e9,
        22e9,
        "Qwen3-235B-A22B model card",
        true,
    ),
    // gpt-oss model card Table 1: 116.83B total, 5.13B active.
    (
        "gpt-oss-120b",
        116.83e9,
        5.13e9,
        "gpt-oss model card, Table 1",
        false,
    ),
    // Mixtral 8x22B: 141B total, 39B active (Mistral AI announcement).
    (
        "mixtral-8x22b",
        141e9,
        39e9,
        "Mistral AI, Mixtral 8x22B announcement",
        true,
    ),
    // Grok-1: 314B parameters (xAI open release).
    ("grok-1", 314e9, 0.0, "xAI grok-1 release", true),
    // Nemotron-4 340B report: 340B; Nemotron-4 15B report: 15B (3.2B embedding).
    (
        "nemotron4-340b",
        341e9,
        0.0,
        "Nemotron-4 340B Technical Report",
        true,
    ),
    (
        "nemotron4-15b",
        15.6e9,
        0.0,
        "Nemotron-4 15B Technical Report",
        true,
    ),
    // BLOOM: 176,247,271,424 parameters (BLOOM paper, Table 3 / model card).
    ("bloom-176b", 176.25e9, 0.0, "BLOOM model card", true),
    // Llama 3.1 405B (alias of llama3-405b): 405B.
    (
        "llama3.1-405b",
        405.8e9,
        0.0,
        "Llama 3 Herd of Models, Table 3",
        true,
    ),
];

#[test]
fn published_parameter_counts() {
    for &(name, total, active, src, input_emb) in CASES {
        let m = catalog::model(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let t = m.transformer().expect("a transformer");
        let p = t.params();
        let err = p / total - 1.0;
        assert!(
            err.abs() < 0.02,
            "{name}: {p:.4e} vs {total:.4e} ({src}): {:.2}%",
            100.0 * err
        );
        if active > 0.0 {
            // Active: attention + top-k routed + shared experts per MoE layer, dense layers
            // and the embeddings (the gpt-oss card leaves out the input lookup).
            let moe_layers = (t.layers - t.dense_layers) as f64;
            let dense = t.dense_layer();
            let per_moe = t.attn_params
                + t.top_k as f64 * t.mlp_params
                + t.shared_params
                + t.other_layer_params;
            let a = moe_layers * per_moe
                + t.dense_layers as f64 * dense.layer_params()
                + t.embedding_params
                - if input_emb { 0.0 } else { t.v * t.h };
            let err = a / active - 1.0;
            assert!(
                err.abs() < 0.06,
                "{name} active: {a:.4e} vs {active:.4e}: {:.2}%",
                100.0 * err
            );
        }
    }
}

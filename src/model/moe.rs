//! Mixture-of-experts layers as run today: fine-grained routed experts with their own FFN
//! width, always-active shared experts, and dense first layers (DeepSeek-AI 2024,
//! DeepSeek-V3 §2.1.2 and Table 1 of its config; Qwen3 Technical Report §2; Mixtral).
//! [`MoeSpec`] is the `[transformer.moe]` table.

use serde::{Deserialize, Serialize};

/// `[transformer.moe]`: every MoE layer has `experts` routed experts of width
/// `expert_ffn_hidden`, each token uses `top_k` of them, plus `shared_experts` always-active
/// experts; the first `dense_layers` layers have a dense MLP of width `ffn_hidden` instead.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Routed experts per MoE layer.
    pub experts: u32,
    /// Routed experts each token is sent to.
    pub top_k: u32,
    /// FFN width of one routed expert (default: the model's `ffn_hidden`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expert_ffn_hidden: Option<u32>,
    /// Shared experts every token passes through (DeepSeek: 1; Mixtral, Qwen3: 0).
    #[serde(default)]
    pub shared_experts: u32,
    /// Leading layers with a dense MLP of width `ffn_hidden` (DeepSeek-V3: 3).
    #[serde(default)]
    pub dense_layers: u32,
    /// Node-limited routing: each token's experts lie on at most this many expert groups
    /// (nodes when EP spans whole nodes; DeepSeek-V3 §2.1.2: 4 of 8, `topk_group` in its
    /// config.json). Unset: no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_nodes: Option<u32>,
    /// LatentMoE (Nemotron 3 Super; Megatron-core `moe_latent_size`, `MoELayer`): the
    /// routed experts work in a latent space of this width ℓ < h. A linear `h → ℓ`
    /// (`fc1_latent_proj`) runs before the dispatch and `ℓ → h` (`fc2_latent_proj`) after
    /// the combine, both replicated over TP; the router and the shared experts stay on `h`.
    /// The experts' GEMMs, the dispatch and combine, and the permutation move ℓ-wide
    /// tokens. Unset: the experts work on `h`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latent: Option<u32>,
}

impl MoeSpec {
    /// The default spec of a dense model (one expert, no sharing).
    pub const DENSE: MoeSpec = MoeSpec {
        experts: 1,
        top_k: 1,
        expert_ffn_hidden: None,
        shared_experts: 0,
        dense_layers: 0,
        max_nodes: None,
        latent: None,
    };
}

/// FLOPs-relevant parameters of one MLP of width `f` on hidden `h`: `3·h·f` gated
/// (SwiGLU: gate, up, down; Shazeer 2020), `2·h·f` otherwise, plus biases `f (·2 gated) + h`.
pub fn mlp_params(h: f64, f: f64, gated: bool, bias: bool) -> f64 {
    let b = if bias { 1.0 } else { 0.0 };
    if gated {
        3.0 * h * f + b * (2.0 * f + h)
    } else {
        2.0 * h * f + b * (f + h)
    }
}

/// Expected number of distinct nodes a token's `k` experts fall on, with `e` experts
/// spread evenly over `n` nodes and uniform routing (k distinct experts drawn without
/// replacement): `n·(1 − C(e − e/n, k)/C(e, k))`, capped at `limit` nodes under
/// node-limited routing (DeepSeek-V3 §2.1.2).
pub fn nodes_per_token(e: f64, n: f64, k: f64, limit: Option<u32>) -> f64 {
    let per = e / n;
    // C(e − per, k)/C(e, k) = Π_{i<k} (e − per − i)/(e − i).
    let mut miss = 1.0;
    for i in 0..k as u32 {
        let i = i as f64;
        miss *= ((e - per - i) / (e - i)).max(0.0);
    }
    let d = n * (1.0 - miss);
    limit.map_or(d, |m| d.min(m as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn nodes_per_token_by_hand() {
        // 2 experts on 2 nodes, top-1: one node. 4 experts on 2 nodes, top-2: the second
        // expert misses the first's node with probability 2/3 → 1 + 2/3 = 5/3 nodes
        // (2·(1 − C(2,2)/C(4,2)) = 2·(1 − 1/6)).
        assert_relative_eq!(nodes_per_token(2.0, 2.0, 1.0, None), 1.0);
        assert_relative_eq!(nodes_per_token(4.0, 2.0, 2.0, None), 5.0 / 3.0);
        // DeepSeek-V3 on 8 nodes: 256 experts, top-8 → 8·(1 − Π_{i<8} (224 − i)/(256 − i)) =
        // 5.2947 nodes uniformly, capped at 4.
        let d = nodes_per_token(256.0, 8.0, 8.0, None);
        assert_relative_eq!(d, 5.2947, max_relative = 1e-4);
        assert_relative_eq!(nodes_per_token(256.0, 8.0, 8.0, Some(4)), 4.0);
    }

    #[test]
    fn deepseek_v3_expert_by_hand() {
        // One routed expert: 3 · 7168 · 2048 = 44 040 192 (SwiGLU, no bias).
        assert_relative_eq!(mlp_params(7168.0, 2048.0, true, false), 44_040_192.0);
        // GeLU with biases: 2·h·f + f + h.
        assert_relative_eq!(mlp_params(4.0, 16.0, false, true), 128.0 + 20.0);
    }
}

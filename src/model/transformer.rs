//! Decoder/encoder transformers: dense GPT (Megatron), grouped-query attention and SwiGLU
//! (LLaMA), mixture of experts (Mixtral). [`TransformerSpec`] is the `[transformer]` table
//! of a model file; [`Transformer`] the validated form with plan-independent counts
//! (parameters, FLOPs per token) precomputed.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The MLP's nonlinearity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Activation {
    /// GeLU: two matrices h×f and f×h (GPT, BERT).
    #[default]
    Gelu,
    /// SwiGLU: three matrices (gate, up, down) (Shazeer 2020; LLaMA).
    Swiglu,
}

/// Mixture-of-experts MLP: every layer's MLP has `experts` copies, each token uses `top_k`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MoeSpec {
    /// Number of experts per layer.
    pub experts: u32,
    /// Experts each token is routed to.
    pub top_k: u32,
}

/// `[transformer]` table of a model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransformerSpec {
    /// Number of transformer layers L.
    pub layers: u32,
    /// Hidden size h.
    pub hidden: u32,
    /// Attention (query) heads a.
    pub heads: u32,
    /// Key/value heads for grouped-query attention (default = heads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_heads: Option<u32>,
    /// MLP inner size f (default 4h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ffn_hidden: Option<u32>,
    /// MLP nonlinearity.
    #[serde(default)]
    pub activation: Activation,
    /// Vocabulary size V.
    pub vocab: u32,
    /// Training sequence length s.
    pub seq_len: u32,
    /// Input embedding and output projection share weights.
    #[serde(default = "yes")]
    pub tied_embeddings: bool,
    /// Learned absolute position embeddings (s·h parameters); false for rotary.
    #[serde(default = "yes")]
    pub learned_positions: bool,
    /// Linear layers have biases (GPT) or not (LLaMA).
    #[serde(default = "yes")]
    pub bias: bool,
    /// Causal (decoder) attention: fused attention skips the masked half (BERT: false).
    #[serde(default = "yes")]
    pub causal: bool,
    /// Mixture of experts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeSpec>,
}

fn yes() -> bool {
    true
}

/// A validated transformer with derived counts. All sizes as f64 for the hot path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Transformer {
    /// Layers L.
    pub layers: u32,
    /// Hidden h.
    pub h: f64,
    /// Query heads a.
    pub heads: u32,
    /// Key/value heads.
    pub kv_heads: u32,
    /// Head dimension d = h/a.
    pub d: f64,
    /// MLP inner size f.
    pub f: f64,
    /// Vocabulary V.
    pub v: f64,
    /// Sequence length s.
    pub s: f64,
    /// SwiGLU (three MLP matrices) instead of GeLU (two).
    pub gated: bool,
    /// Experts per layer (1 = dense).
    pub experts: u32,
    /// Experts per token.
    pub top_k: u32,
    /// Shared input/output embedding.
    pub tied: bool,
    /// Linear layers have biases; also taken to mean dropout is on (GPT, BERT).
    pub bias: bool,
    /// Causal attention.
    pub causal: bool,
    /// Parameters of one layer's attention block (QKV + projection + biases).
    pub attn_params: f64,
    /// Parameters of one expert's MLP (one dense MLP when not MoE).
    pub mlp_params: f64,
    /// Parameters of one layer's norms and router.
    pub other_layer_params: f64,
    /// Embedding parameters (token, position, untied output).
    pub embedding_params: f64,
}

impl Transformer {
    /// Validates: every size ≥ 1, a divisible by kv_heads, h divisible by a, top_k ≤ experts.
    pub fn from_spec(spec: &TransformerSpec) -> Result<Transformer> {
        let w = "transformer";
        let kv = spec.kv_heads.unwrap_or(spec.heads);
        let f = spec.ffn_hidden.unwrap_or(4 * spec.hidden);
        for (k, v) in [
            ("layers", spec.layers),
            ("hidden", spec.hidden),
            ("heads", spec.heads),
            ("kv_heads", kv),
            ("ffn_hidden", f),
            ("vocab", spec.vocab),
            ("seq_len", spec.seq_len),
        ] {
            if v == 0 {
                return Err(Error::input(format!("{w}.{k}"), "must be ≥ 1"));
            }
        }
        if !spec.hidden.is_multiple_of(spec.heads) {
            return Err(Error::input(format!("{w}.heads"), "must divide hidden"));
        }
        if !spec.heads.is_multiple_of(kv) {
            return Err(Error::input(format!("{w}.kv_heads"), "must divide heads"));
        }
        let (experts, top_k) = match spec.moe {
            Some(m) if m.experts == 0 || m.top_k == 0 || m.top_k > m.experts => {
                return Err(Error::input(format!("{w}.moe"), "need 1 ≤ top_k ≤ experts"));
            }
            Some(m) => (m.experts, m.top_k),
            None => (1, 1),
        };
        let h = spec.hidden as f64;
        let d = h / spec.heads as f64;
        let kvd = kv as f64 * d;
        let fh = f as f64;
        let bias = if spec.bias { 1.0 } else { 0.0 };
        let gated = spec.activation == Activation::Swiglu;
        let attn_params = h * (h + 2.0 * kvd) + h * h + bias * (h + 2.0 * kvd + h);
        let mlp_params = if gated {
            3.0 * h * fh + bias * (2.0 * fh + h)
        } else {
            2.0 * h * fh + bias * (fh + h)
        };
        let norm = if spec.bias { 4.0 * h } else { 2.0 * h };
        let router = if experts > 1 { h * experts as f64 } else { 0.0 };
        let (v, s) = (spec.vocab as f64, spec.seq_len as f64);
        let pos = if spec.learned_positions { s * h } else { 0.0 };
        let untied = if spec.tied_embeddings { 0.0 } else { v * h };
        Ok(Transformer {
            layers: spec.layers,
            h,
            heads: spec.heads,
            kv_heads: kv,
            d,
            f: fh,
            v,
            s,
            gated,
            experts,
            top_k,
            tied: spec.tied_embeddings,
            bias: spec.bias,
            causal: spec.causal,
            attn_params,
            mlp_params,
            other_layer_params: norm + router,
            embedding_params: v * h + pos + untied + norm / 2.0,
        })
    }

    /// Parameters of one layer: attention + experts × MLP + norms/router.
    pub fn layer_params(&self) -> f64 {
        self.attn_params + self.experts as f64 * self.mlp_params + self.other_layer_params
    }

    /// Total parameters: `L · layer + embeddings`; for dense GPT ≈ 12·L·h² + V·h
    /// (Narayanan et al. SC'21 §5.1) plus biases, norms and positions.
    pub fn params(&self) -> f64 {
        self.layers as f64 * self.layer_params() + self.embedding_params
    }

    /// Matrix parameters a token passes through in one layer (top_k experts).
    pub fn active_matmul_params_per_layer(&self) -> f64 {
        let h = self.h;
        let kvd = self.kv_heads as f64 * self.d;
        let mlp = if self.gated { 3.0 } else { 2.0 } * h * self.f;
        h * (h + 2.0 * kvd) + h * h + self.top_k as f64 * mlp
    }

    /// Model FLOPs of one forward pass per token (no recomputation):
    /// `L·(2·P_matmul + 4·s·h) + 2·V·h`. For dense GPT this is `24·L·h² + 4·L·s·h + 2·V·h`,
    /// i.e. one third of Korthikanti et al. 2022's `72·B·s·L·h²·(1 + s/(6h) + V/(12hL))` per
    /// token (§6.2; the Megatron-LM MFU definition), which counts QKᵀ and attention·V on
    /// the full (unmasked) s×s matrix.
    pub fn forward_flops_per_token(&self) -> f64 {
        let attn_core = 4.0 * self.s * self.heads as f64 * self.d;
        self.layers as f64 * (2.0 * self.active_matmul_params_per_layer() + attn_core)
            + 2.0 * self.v * self.h
    }

    /// FLOPs of the attention core (QKᵀ and attention·V) per token and layer: `4·s·a·d`.
    pub fn attention_core_flops_per_token(&self) -> f64 {
        4.0 * self.s * self.heads as f64 * self.d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn gpt3() -> Transformer {
        Transformer::from_spec(&TransformerSpec {
            layers: 96,
            hidden: 12288,
            heads: 96,
            kv_heads: None,
            ffn_hidden: None,
            activation: Activation::Gelu,
            vocab: 51200,
            seq_len: 2048,
            tied_embeddings: true,
            learned_positions: true,
            bias: true,
            causal: true,
            moe: None,
        })
        .unwrap()
    }

    #[test]
    fn gpt3_175b_parameters() {
        // 12·L·h² + V·h = 12·96·12288² + 51200·12288 = 174.58e9 (SC'21 §5.1); biases,
        // norms (13h per layer) and positions (s·h) add 0.04e9.
        let t = gpt3();
        let hand = 12.0 * 96.0 * 12288f64.powi(2) + 51200.0 * 12288.0;
        assert_relative_eq!(hand, 174.58e9, max_relative = 1e-4);
        assert_relative_eq!(t.params(), 174.6e9, max_relative = 5e-4);
    }

    #[test]
    fn gpt3_flops_match_korthikanti() {
        // 72·s·L·h²·(1 + s/(6h) + V/(12hL)) per sequence = 3 × forward.
        let t = gpt3();
        let (s, l, h, v) = (2048.0, 96.0, 12288.0, 51200.0);
        let hand = 72.0 * s * l * h * h * (1.0 + s / (6.0 * h) + v / (12.0 * h * l));
        assert_relative_eq!(
            3.0 * t.forward_flops_per_token() * s,
            hand,
            max_relative = 1e-3
        );
    }

    #[test]
    fn gqa_swiglu_llama2_70b() {
        // LLaMA-2 70B: 80 layers, h 8192, 64 heads, 8 KV heads, f 28672, V 32000,
        // untied, no biases: 68.98e9 published (Touvron et al. 2023) ≈ 69e9.
        let t = Transformer::from_spec(&TransformerSpec {
            layers: 80,
            hidden: 8192,
            heads: 64,
            kv_heads: Some(8),
            ffn_hidden: Some(28672),
            activation: Activation::Swiglu,
            vocab: 32000,
            seq_len: 4096,
            tied_embeddings: false,
            learned_positions: false,
            bias: false,
            causal: true,
            moe: None,
        })
        .unwrap();
        assert_relative_eq!(t.params(), 68.98e9, max_relative = 2e-3);
    }
}

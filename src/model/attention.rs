//! Attention projections of a transformer layer: multi-head and grouped-query attention
//! with any head size (LLaMA, Qwen3, gpt-oss), and multi-head latent attention (MLA,
//! DeepSeek-V2/V3), whose queries and keys/values pass through low-rank latents. This file
//! owns the parameter count and the GEMM shapes of the projections per tensor-parallel rank,
//! and which layers attend through a sliding window ([`Window`]) and how many score pairs
//! such a layer computes.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The attention of one layer in `[transformer] attention_pattern`: a causal sliding window
/// of `sliding_window` keys, or full causal attention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerAttention {
    /// Each query sees the `sliding_window` latest keys, itself included.
    Sliding,
    /// Each query sees every earlier key.
    Full,
}

/// Sliding-window (banded) attention on some of the layers, validated; `Copy` for the hot
/// path. The layers' order does not matter to the estimate, only how many are windowed.
///
/// Attention sinks (gpt-oss: one learned logit per head joins every softmax denominator,
/// OpenAI 2025, gpt-oss model card §2; `sinks` in its `model.py`) are counted as free: they
/// add one exponential and one addition per query row (and one gradient term per row
/// backward) beside at least `w` score pairs of `2·(d_qk + d_v)` FLOP each, 2 in 32 768
/// FLOP for gpt-oss's window of 128 and heads of 64, and `a` parameters per layer (64 beside
/// 26.5 million attention weights), well below what the estimate resolves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Keys `w` each query of a windowed layer sees, itself included.
    pub tokens: f64,
    /// Fraction of the layers that are windowed, in (0, 1].
    pub fraction: f64,
}

/// Score pairs (query, key) of one head over a causal sequence of `s` tokens when each
/// query sees at most the `w` latest keys, itself included: query `i` (from 0) sees
/// `min(i + 1, w)` keys, so
///
/// `Σ_{i<s} min(i + 1, w) = w·s − w(w − 1)/2` for `s ≥ w`, and `s(s + 1)/2` (full causal)
/// for `s ≤ w`.
///
/// This is the band of Beltagy et al. 2020 (Longformer, §3.1: `O(n·w)` for a window `w`)
/// restricted to its causal half, as gpt-oss runs it: its reference implementation masks key
/// `j` for query `i` when `i − j ≥ 128` (`sliding_window`, OpenAI gpt-oss
/// `gpt_oss/torch/model.py`), i.e. FlashAttention's `window_size = (w − 1, 0)`.
pub fn causal_window_pairs(s: f64, w: f64) -> f64 {
    if s <= w {
        s * (s + 1.0) / 2.0
    } else {
        w * s - w * (w - 1.0) / 2.0
    }
}

impl Window {
    /// Validates `[transformer] sliding_window` and `attention_pattern` for a model of
    /// `layers` layers: the window is ≥ 1 token and attention causal; the pattern (repeated
    /// from the first layer, as config.json's `layer_types` lists the layers) is not empty,
    /// not longer than the layers, has a `"sliding"` layer, and needs a window. Without a
    /// pattern every layer is windowed (Mistral 7B). `None`: every layer full.
    pub fn from_spec(
        window: Option<u32>,
        pattern: Option<&[LayerAttention]>,
        layers: u32,
        causal: bool,
    ) -> Result<Option<Window>> {
        let key = |k: &str| format!("transformer.{k}");
        let Some(w) = window else {
            return match pattern {
                Some(_) => Err(Error::input(
                    key("attention_pattern"),
                    "needs sliding_window (the keys each \"sliding\" layer's queries see)",
                )),
                None => Ok(None),
            };
        };
        if w == 0 {
            return Err(Error::input(
                key("sliding_window"),
                "must be ≥ 1 (keys each query of a windowed layer sees, itself included), e.g. 128",
            ));
        }
        if !causal {
            return Err(Error::input(
                key("sliding_window"),
                "needs causal attention (a bidirectional band is not modelled)",
            ));
        }
        let windowed = match pattern {
            None => layers,
            Some(p) => windowed_layers(p, layers)?,
        };
        Ok(Some(Window {
            tokens: w as f64,
            fraction: windowed as f64 / layers as f64,
        }))
    }

    /// Keys a query's row holds before the causal mask, averaged over the layers, for model
    /// FLOPs (the MFU numerator): `s` for a full layer, as Korthikanti et al. 2022 count the
    /// unmasked s×s matrix, and `min(w, s)` for a windowed layer, whose band is its whole
    /// row; with a fraction `φ` of the layers windowed, `s − φ·(s − min(w, s))` (gpt-oss at
    /// s = 4096: 4096 − ½·3968 = 2112).
    ///
    /// Counting `s` for a windowed layer would credit FLOPs its kernel never runs (32× its
    /// band at s = 4096, 1024× at gpt-oss's 131 072-token context). The band ignores the
    /// first `w − 1` queries' shorter rows, `w(w − 1)/2` pairs per sequence (1.5% of the band
    /// at s = 4096), as the full count ignores the causal triangle. Megatron-Bridge
    /// (`src/megatron/bridge/training/utils/flop_utils.py`) counts the causal pairs of both
    /// kinds instead, `s/2` and `w − w(w − 1)/(2s)` keys per query; models without windows
    /// keep the unmasked convention here, so their figures do not change.
    pub fn row_keys(&self, s: f64) -> f64 {
        s - self.fraction * (s - self.tokens.min(s))
    }

    /// Mean keys a query of a windowed layer sees over a causal span of `s` tokens,
    /// [`causal_window_pairs`]`(s, w) / s` (126.02 for gpt-oss's 128 at `s` = 4096).
    pub fn mean_keys(&self, s: f64) -> f64 {
        causal_window_pairs(s, self.tokens) / s
    }
}

/// Windowed layers among `layers` when `pattern` repeats from the first layer:
/// `⌊L/p⌋·(sliding entries) + (sliding entries among the first L mod p)`.
fn windowed_layers(pattern: &[LayerAttention], layers: u32) -> Result<u32> {
    let what = "transformer.attention_pattern";
    let p = pattern.len();
    if p == 0 {
        return Err(Error::input(
            what,
            "must list at least one layer, e.g. [\"sliding\", \"full\"]",
        ));
    }
    if p > layers as usize {
        return Err(Error::input(
            what,
            format!("has {p} entries but the model has {layers} layers"),
        ));
    }
    let sliding =
        |q: &[LayerAttention]| q.iter().filter(|&&k| k == LayerAttention::Sliding).count() as u32;
    let n = (layers / p as u32) * sliding(pattern) + sliding(&pattern[..layers as usize % p]);
    if n == 0 {
        return Err(Error::input(
            what,
            "has no \"sliding\" layer (for full attention on every layer drop sliding_window and attention_pattern)",
        ));
    }
    Ok(n)
}

/// `[transformer.mla]`: multi-head latent attention (DeepSeek-AI 2024, DeepSeek-V2 §2.1;
/// DeepSeek-V3 §2.1.1). Queries: `h → q_lora_rank → a·(nope + rope)`; keys and values:
/// `h → kv_lora_rank + rope`, then `kv_lora_rank → a·(nope + v)`; output `a·v → h`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlaSpec {
    /// Rank of the query latent (0: full-rank query projection h → a·(nope + rope)).
    #[serde(default)]
    pub q_lora_rank: u32,
    /// Rank of the key/value latent.
    pub kv_lora_rank: u32,
    /// Per-head query/key size without rotary position.
    pub qk_nope_head_dim: u32,
    /// Per-head rotary query/key size (the rotary key is shared by all heads).
    pub qk_rope_head_dim: u32,
    /// Per-head value size.
    pub v_head_dim: u32,
}

/// The validated attention projections, `Copy` for the hot path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Attention {
    /// Query heads a.
    pub heads: f64,
    /// Key/value heads (GQA; `heads` for MLA, whose heads all have their own keys).
    pub kv_heads: f64,
    /// Per-head query/key size (QKᵀ inner dimension).
    pub qk_d: f64,
    /// Per-head value size (attention·V output columns).
    pub v_d: f64,
    /// MLA latents (q rank, kv rank, rope size); `None` for MHA/GQA.
    pub mla: Option<[f64; 3]>,
}

/// One forward projection per token: output columns `n`, inner size `k`, and whether
/// it is split over the TP ranks as a column-parallel (`Col`), row-parallel (`Row`) or
/// replicated (`Rep`, MLA's down-projections in Megatron-LM) linear layer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Split {
    /// Output columns split over TP.
    Col,
    /// Inner dimension split over TP.
    Row,
    /// Replicated on every TP rank.
    Rep,
}

impl Attention {
    /// MHA/GQA with head size `d`.
    pub fn gqa(heads: u32, kv_heads: u32, d: f64) -> Attention {
        Attention {
            heads: heads as f64,
            kv_heads: kv_heads as f64,
            qk_d: d,
            v_d: d,
            mla: None,
        }
    }

    /// MLA from its table.
    pub fn mla(heads: u32, m: &MlaSpec) -> Attention {
        Attention {
            heads: heads as f64,
            kv_heads: heads as f64,
            qk_d: (m.qk_nope_head_dim + m.qk_rope_head_dim) as f64,
            v_d: m.v_head_dim as f64,
            mla: Some([
                m.q_lora_rank as f64,
                m.kv_lora_rank as f64,
                m.qk_rope_head_dim as f64,
            ]),
        }
    }

    /// Forward projections per token as (n, k, split), up to five (unused: n = 0).
    ///
    /// GQA: QKV `h → a·d + 2·kv·d` (column-parallel; KV heads replicated when
    /// kv < t), output `a·d → h` (row-parallel). MLA: query down `h → q_rank`
    /// (replicated), query up `q_rank → a·(nope+rope)`, KV down `h → kv_rank + rope`
    /// (replicated), KV up `kv_rank → a·(nope + v)`, output `a·v → h`.
    pub fn projections(&self, h: f64, t: f64) -> [(f64, f64, Split); 5] {
        let z = (0.0, 0.0, Split::Rep);
        let (a, qk, v) = (self.heads, self.qk_d, self.v_d);
        match self.mla {
            None => {
                let kv_rank = (self.kv_heads / t).max(1.0);
                let n = a * qk / t + 2.0 * kv_rank * qk;
                [(n, h, Split::Col), (h, a * v / t, Split::Row), z, z, z]
            }
            Some([qr, kvr, rope]) => {
                let nope = qk - rope;
                let q = if qr > 0.0 {
                    [(qr, h, Split::Rep), (a * qk / t, qr, Split::Col)]
                } else {
                    [(a * qk / t, h, Split::Col), z]
                };
                [
                    q[0],
                    q[1],
                    (kvr + rope, h, Split::Rep),
                    (a * (nope + v) / t, kvr, Split::Col),
                    (h, a * v / t, Split::Row),
                ]
            }
        }
    }

    /// MLA's up-projections (output columns, inner size) on one of `t` TP ranks: the
    /// projections that rebuild the query, key and value from the latents (the query's
    /// from the hidden state when it has no latent), which `mla_up_proj` recomputation
    /// runs again in the backward; none for MHA/GQA.
    pub fn up_projections(&self, h: f64, t: f64) -> impl Iterator<Item = (f64, f64)> {
        let up = self.mla.is_some();
        self.projections(h, t)
            .into_iter()
            .take(4)
            .filter(move |&(_, _, split)| up && split == Split::Col)
            .map(|(n, k, _)| (n, k))
    }

    /// Query and key columns per token on one of `t` TP ranks that a rotary position
    /// embedding rotates: GQA `(a/t + max(kv/t, 1))·d` (KV heads replicated when kv < t);
    /// MLA only its rotary parts, `(a/t + 1)·rope` (one rotary key shared by all heads,
    /// DeepSeek-V2 §2.1.3).
    pub fn rope_width(&self, t: f64) -> f64 {
        match self.mla {
            None => (self.heads / t + (self.kv_heads / t).max(1.0)) * self.qk_d,
            Some([_, _, rope]) => (self.heads / t + 1.0) * rope,
        }
    }

    /// Parameters (weights, plus biases when `bias`): the sum of `n·k` over the
    /// projections at t = 1, and `n` per projection for biases.
    pub fn params(&self, h: f64, bias: bool) -> f64 {
        let b = if bias { 1.0 } else { 0.0 };
        self.projections(h, 1.0)
            .iter()
            .map(|&(n, k, _)| n * k + b * n)
            .sum()
    }

    /// Output width of the query/key/value projections per token on one rank
    /// (what the layer writes before the attention core), for memory-bound terms.
    pub fn qkv_width(&self, t: f64) -> f64 {
        let kv_rank = (self.kv_heads / t).max(1.0);
        self.heads * self.qk_d / t + kv_rank * (self.qk_d + self.v_d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    #[test]
    fn deepseek_v3_mla_parameters_by_hand() {
        // DeepSeek-V3 (config.json): h 7168, 128 heads, q rank 1536, kv rank 512,
        // nope 128, rope 64, v 128. Weights:
        // 7168·1536 + 1536·128·192 + 7168·576 + 512·128·256 + 128·128·7168
        // = 11 010 048 + 37 748 736 + 4 128 768 + 16 777 216 + 117 440 512 = 187 105 280.
        let m = MlaSpec {
            q_lora_rank: 1536,
            kv_lora_rank: 512,
            qk_nope_head_dim: 128,
            qk_rope_head_dim: 64,
            v_head_dim: 128,
        };
        let a = Attention::mla(128, &m);
        assert_relative_eq!(a.params(7168.0, false), 187_105_280.0);
    }

    #[test]
    fn gqa_with_its_own_head_size() {
        // Qwen3-30B-A3B: h 2048, 32 heads of 128, 4 KV heads: q 2048·4096,
        // kv 2·2048·512, o 4096·2048 → 8 388 608 + 2 097 152 + 8 388 608 = 18 874 368.
        let a = Attention::gqa(32, 4, 128.0);
        assert_relative_eq!(a.params(2048.0, false), 18_874_368.0);
        // TP 8 > 4 KV heads: each rank keeps one KV head: n = 4096/8 + 2·128.
        assert_relative_eq!(a.projections(2048.0, 8.0)[0].0, 512.0 + 256.0);
    }

    #[test]
    fn window_pairs_by_hand() {
        // s = 4096, w = 128: 128·4096 − 128·127/2 = 524 288 − 8 128 = 516 160; full causal
        // 4096·4097/2 = 8 390 656.
        assert_relative_eq!(causal_window_pairs(4096.0, 128.0), 516_160.0);
        assert_relative_eq!(causal_window_pairs(4096.0, 4096.0), 8_390_656.0);
        assert_relative_eq!(causal_window_pairs(4096.0, 1e9), 8_390_656.0);
        // Count them one query at a time: s = 7, w = 3 → 1 + 2 + 3·5 = 18 = 21 − 3.
        let by_query: f64 = (0..7).map(|i| (i as f64 + 1.0).min(3.0)).sum();
        assert_relative_eq!(causal_window_pairs(7.0, 3.0), by_query);
        assert_relative_eq!(by_query, 18.0);
        // A window of one: each query sees itself only.
        assert_relative_eq!(causal_window_pairs(4096.0, 1.0), 4096.0);
    }

    #[test]
    fn window_fraction_follows_the_pattern() {
        use LayerAttention::{Full, Sliding};
        let frac = |p: &[LayerAttention], l: u32| {
            Window::from_spec(Some(128), Some(p), l, true)
                .unwrap()
                .unwrap()
                .fraction
        };
        // gpt-oss: sliding, full, sliding, … over 36 layers: 18 windowed.
        assert_relative_eq!(frac(&[Sliding, Full], 36), 0.5);
        // Gemma 3 27B: five sliding then one full over 62 layers: 10·5 + 2 = 52.
        let gemma = [Sliding, Sliding, Sliding, Sliding, Sliding, Full];
        assert_relative_eq!(frac(&gemma, 62), 52.0 / 62.0);
        // An odd count starting with a sliding layer: 3 of 5.
        assert_relative_eq!(frac(&[Sliding, Full], 5), 0.6);
        // No pattern: every layer.
        let all = Window::from_spec(Some(4096), None, 32, true)
            .unwrap()
            .unwrap();
        assert_relative_eq!(all.fraction, 1.0);
        assert_eq!(Window::from_spec(None, None, 32, true).unwrap(), None);
    }

    #[test]
    fn window_inputs_that_make_no_sense_are_refused() {
        use LayerAttention::{Full, Sliding};
        let err = |w: Option<u32>, p: Option<&[LayerAttention]>, causal: bool| {
            Window::from_spec(w, p, 4, causal).unwrap_err().to_string()
        };
        assert!(err(Some(0), None, true).contains("sliding_window: must be ≥ 1"));
        assert!(err(Some(128), None, false).contains("needs causal"));
        assert!(err(None, Some(&[Sliding]), true).contains("needs sliding_window"));
        assert!(err(Some(128), Some(&[]), true).contains("at least one layer"));
        assert!(err(Some(128), Some(&[Full]), true).contains("no \"sliding\" layer"));
        let long = [Sliding, Full, Sliding, Full, Sliding];
        assert!(err(Some(128), Some(&long), true).contains("has 5 entries but the model has 4"));
    }
}

//! Attention projections of a transformer layer: multi-head and grouped-query attention
//! with any head size (LLaMA, Qwen3, gpt-oss), and multi-head latent attention (MLA,
//! DeepSeek-V2/V3), whose queries and keys/values pass through low-rank latents. This file
//! owns the parameter count and the GEMM shapes of the projections per tensor-parallel rank.

use serde::{Deserialize, Serialize};

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
}

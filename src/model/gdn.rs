//! Gated DeltaNet layers (Yang, Kautz & Hatamizadeh 2024, "Gated Delta Networks", arXiv
//! 2412.06464), the linear-attention mixer of Qwen3-Next and Qwen3.5: the `G` layers of a
//! hybrid pattern (Megatron-LM `megatron/core/models/hybrid/hybrid_layer_allocation.py`,
//! `Symbols.GDN`). This file owns the layer's parameters, FLOPs, HBM bytes and stored
//! activations per token on one tensor-parallel rank; the estimate times them.
//!
//! Shapes (Megatron-LM `megatron/core/ssm/gated_delta_net/common.py` and `gdn.py`): with
//! `H_k` key heads of size `d_k` (`qk = H_k·d_k`) and `H_v` value heads of size `d_v`
//! (`v = H_v·d_v`), the input projection (fused with the layer's RMSNorm) writes `q, k, v`,
//! the output gate `z` and the per-head `β` and `α` (`2·qk + 2·v + 2·H_v` columns); a
//! depthwise causal convolution of width `K` with SiLU runs on `q, k, v` (`2·qk + v`
//! channels); `q` and `k` are L2-normalised and repeated to `H_v` heads; the chunked gated
//! delta rule (flash-linear-attention's `chunk_gated_delta_rule`, chunks of `C` = 64
//! tokens) produces `o` (`v`); a per-head RMSNorm gated by `silu(z)` normalises it and the
//! output projection maps `v → h`. Heads are split over TP (`H_k` and `H_v` divisible by
//! TP·CP): the input projection is column-parallel, the output projection row-parallel,
//! so the layer runs the TP collectives of one MLP block.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// `[transformer.gdn]`: the Gated DeltaNet mixer of the `G` layers (Hugging Face
/// config.json `linear_num_key_heads`, `linear_num_value_heads`, `linear_key_head_dim`,
/// `linear_value_head_dim`, `linear_conv_kernel_dim`; Megatron-LM the same names).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GdnSpec {
    /// Key (and query) heads `H_k`.
    pub key_heads: u32,
    /// Value heads `H_v` (a multiple of `H_k`).
    pub value_heads: u32,
    /// Size of one key head `d_k`.
    pub key_head_dim: u32,
    /// Size of one value head `d_v`.
    pub value_head_dim: u32,
    /// Width `K` of the causal depthwise convolution (Megatron-LM
    /// `linear_conv_kernel_dim`, default 4).
    #[serde(default = "conv_kernel")]
    pub conv_kernel: u32,
    /// Chunk size `C` of the chunked delta rule (Megatron-LM `GatedDeltaNet.chunk_size`
    /// and flash-linear-attention's default, 64).
    #[serde(default = "chunk")]
    pub chunk: u32,
}

fn conv_kernel() -> u32 {
    4
}

fn chunk() -> u32 {
    64
}

/// A validated Gated DeltaNet mixer, sizes as f64 for the hot path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gdn {
    /// Key heads `H_k`.
    pub key_heads: f64,
    /// Value heads `H_v`.
    pub value_heads: f64,
    /// Key head size `d_k`.
    pub dk: f64,
    /// Value head size `d_v`.
    pub dv: f64,
    /// Convolution width `K`.
    pub conv: f64,
    /// Chunk size `C`.
    pub chunk: f64,
}

/// Bytes per token one Gated DeltaNet layer's memory-bound kernels move on one TP rank,
/// and their kernel count, per pass (the chunked delta rule's own kernels apart).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GdnBytes {
    /// Forward bytes per token.
    pub fwd: f64,
    /// Backward bytes per token.
    pub bwd: f64,
    /// Forward kernels.
    pub fwd_kernels: f64,
    /// Backward kernels.
    pub bwd_kernels: f64,
}

/// Head sizes and chunk at which the devices' measured delta-rule times hold
/// ([`Gdn::core_scale`]): `d_k = d_v = 128`, `C = 64`.
const MEASURED_SHAPE: (f64, f64, f64) = (128.0, 128.0, 64.0);

impl Gdn {
    /// Validates the table: every size ≥ 1 and the value heads a multiple of the key heads
    /// (Megatron-LM `TransformerConfig.__post_init__` asserts `linear_num_value_heads %
    /// linear_num_key_heads == 0`).
    pub fn from_spec(s: &GdnSpec) -> Result<Gdn> {
        for (k, v) in [
            ("key_heads", s.key_heads),
            ("value_heads", s.value_heads),
            ("key_head_dim", s.key_head_dim),
            ("value_head_dim", s.value_head_dim),
            ("conv_kernel", s.conv_kernel),
            ("chunk", s.chunk),
        ] {
            if v == 0 {
                return Err(Error::input(format!("transformer.gdn.{k}"), "must be ≥ 1"));
            }
        }
        if !s.value_heads.is_multiple_of(s.key_heads) {
            return Err(Error::input(
                "transformer.gdn.value_heads",
                format!(
                    "must be a multiple of key_heads ({}): the queries and keys are repeated over the value heads",
                    s.key_heads
                ),
            ));
        }
        Ok(Gdn {
            key_heads: s.key_heads as f64,
            value_heads: s.value_heads as f64,
            dk: s.key_head_dim as f64,
            dv: s.value_head_dim as f64,
            conv: s.conv_kernel as f64,
            chunk: s.chunk as f64,
        })
    }

    /// Query (and key) width `qk = H_k·d_k`.
    pub fn qk(&self) -> f64 {
        self.key_heads * self.dk
    }

    /// Value width `v = H_v·d_v`.
    pub fn v(&self) -> f64 {
        self.value_heads * self.dv
    }

    /// Output columns of the input projection on one of `t` TP ranks:
    /// `(2·qk + 2·v + 2·H_v)/t` (`q, k, v, z, β, α`).
    pub fn in_proj_width(&self, t: f64) -> f64 {
        (2.0 * self.qk() + 2.0 * self.v() + 2.0 * self.value_heads) / t
    }

    /// Channels of the causal convolution on one of `t` ranks: `(2·qk + v)/t`.
    pub fn conv_dim(&self, t: f64) -> f64 {
        (2.0 * self.qk() + self.v()) / t
    }

    /// Parameters of one Gated DeltaNet layer on hidden size `h` (Megatron-LM
    /// `GatedDeltaNet`, no biases): input projection `h·(2·qk + 2·v + 2·H_v)`, convolution
    /// weights `(2·qk + v)·K` (`conv_bias = False`), `A_log` and `dt_bias` (`2·H_v`), the
    /// output norm's weight `d_v` (one per-head RMSNorm), output projection `v·h`, and the
    /// RMSNorm fused into the input projection `h`. Qwen3-Next-80B-A3B (`h` 2048, 16 key
    /// and 32 value heads of 128): 25 296 896 + 32 768 + 64 + 128 + 8 388 608 + 2048 =
    /// 33 720 512.
    pub fn params(&self, h: f64) -> f64 {
        h * self.in_proj_width(1.0)
            + self.conv_dim(1.0) * self.conv
            + 2.0 * self.value_heads
            + self.dv
            + self.v() * h
            + h
    }

    /// Weights of the two projections, `h·(2·qk + 2·v + 2·H_v) + v·h`: what a token
    /// multiplies in GEMMs (2 FLOPs each forward).
    pub fn matmul_params(&self, h: f64) -> f64 {
        h * self.in_proj_width(1.0) + self.v() * h
    }

    /// FLOPs of the chunked gated delta rule per token, forward, summed over the heads
    /// (the WY form of Yang et al. 2024, §3.3, as flash-linear-attention's
    /// `chunk_gated_delta_rule_fwd` runs it; queries and keys repeated to the `H_v` heads).
    /// Per head and chunk of `C` tokens, with state `S` of `d_k × d_v`:
    ///
    /// - `K·Kᵀ` (`C × C × d_k`) and the triangular solve `(I + tril(β·K·Kᵀ))⁻¹`
    ///   (`C³/3` multiply-adds);
    /// - `W = A·(β·K)` (`C × d_k × C`) and `U = A·(β·V)` (`C × d_v × C`);
    /// - the state update `Kᵀ·(U − W·S)`: `W·S` (`C × d_v × d_k`) and `Kᵀ·(…)`
    ///   (`d_k × d_v × C`);
    /// - the output `Q·S + (Q·Kᵀ ∘ M)·(U − W·S)`: `Q·S` (`C × d_v × d_k`), `Q·Kᵀ`
    ///   (`C × C × d_k`) and the product with `U − W·S` (`C × d_v × C`).
    ///
    /// Divided by the chunk's `C` tokens, two FLOPs per multiply-add:
    /// `H_v·2·(3·C·d_k + 2·C·d_v + 3·d_k·d_v + C²/3)`. Qwen3-Next (`H_v` 32, 128, 128, 64):
    /// 32·2·(24 576 + 16 384 + 49 152 + 1365.3) = 5 854 549. (Megatron-LM's
    /// `gdn_layer_flops` counts `8·H_v·d_v²` for the core, 4 194 304 here; its comment names
    /// `K·Kᵀ`, `V·Kᵀ`, the state update and `S·Q` and leaves out the chunk terms.)
    pub fn core_flops_per_token(&self) -> f64 {
        self.value_heads * Self::core_per_head(self.dk, self.dv, self.chunk)
    }

    fn core_per_head(dk: f64, dv: f64, c: f64) -> f64 {
        2.0 * (3.0 * c * dk + 2.0 * c * dv + 3.0 * dk * dv + c * c / 3.0)
    }

    /// The delta rule's work per token and head relative to the shape the devices' kernel
    /// times were measured at (`d_k = d_v = 128`, `C = 64`): 1 there. Other head sizes are
    /// taken to scale the measured time by their FLOPs (an assumption: no other shape's
    /// time is published on the same devices).
    pub fn core_scale(&self) -> f64 {
        let (dk, dv, c) = MEASURED_SHAPE;
        Self::core_per_head(self.dk, self.dv, self.chunk) / Self::core_per_head(dk, dv, c)
    }

    /// Forward FLOPs of one Gated DeltaNet layer per token: `2·(projection weights) +
    /// 2·K·(2·qk + v)` (the convolution) `+` the delta rule.
    pub fn forward_flops_per_token(&self, h: f64) -> f64 {
        2.0 * self.matmul_params(h)
            + 2.0 * self.conv * self.conv_dim(1.0)
            + self.core_flops_per_token()
    }

    /// HBM bytes per token of the memory-bound kernels around the delta rule on one of `t`
    /// ranks, 2-byte activations, fp32 gates (Megatron-LM `GatedDeltaNet.forward`). With
    /// `x = (2·qk + v)/t` (the convolution's channels), `q = qk/t`, `r = H_v·d_k/t` (one of
    /// `q, k` repeated to the value heads), `o = v/t` and `η = H_v/t`, a tally of each
    /// kernel's reads and writes:
    ///
    /// forward `4·x + 12·q + 4·r + 12·η + 6·o` in 6 kernels: convolution + SiLU on `q, k, v`
    /// (read and write `x`: `4·x`), the L2 norms of `q` and `k` (read and write both: `8·q`),
    /// their repetition to `H_v` heads (read `2·q`, write `2·r`: `4·q + 4·r`), the gates
    /// `g = −exp(A)·softplus(α + b)` and `β = σ(β)` (read 2 per head, write 2 in fp32:
    /// `12·η`), and the gated RMSNorm (read `o` and `z`, write `o`: `6·o`);
    ///
    /// backward twice the forward's bytes in twice its kernels (each kernel's gradient reads
    /// what its forward read plus the incoming gradient and writes the input gradients).
    /// Qwen3-Next at `t` = 1 (`x` 8192, `q` 2048, `r` 4096, `η` 32, `o` 4096): forward
    /// 32 768 + 24 576 + 16 384 + 384 + 24 576 = 98 688 B.
    pub fn bytes(&self, t: f64) -> GdnBytes {
        let x = self.conv_dim(t);
        let q = self.qk() / t;
        let r = self.value_heads * self.dk / t;
        let o = self.v() / t;
        let eta = self.value_heads / t;
        let fwd = 4.0 * x + 12.0 * q + 4.0 * r + 12.0 * eta + 6.0 * o;
        GdnBytes {
            fwd,
            bwd: 2.0 * fwd,
            fwd_kernels: 6.0,
            bwd_kernels: 12.0,
        }
    }

    /// Activation bytes per token one Gated DeltaNet layer keeps for backward on one of
    /// `t` ranks, beyond its pre-norm's input, 2 bytes per element but `g` in fp32:
    /// - the input projection's output `2·(2·qk + 2·v + 2·H_v)` (the convolution keeps its
    ///   `q, k, v` part; the gates and the norm read `z, β, α`);
    /// - the L2 norms' outputs `2·2·qk`;
    /// - what flash-linear-attention's `ChunkGatedDeltaRuleFunction.forward` saves: `q, k`
    ///   repeated to the value heads `2·2·H_v·d_k`, `v` `2·v`, `A` (`C` per token and
    ///   head) `2·C·H_v`, `g` `4·H_v` and `β` before and after the sigmoid `4·H_v` (the
    ///   chunk states are recomputed in the backward);
    /// - the gated norm's input `2·v` and the output projection's input `2·v`;
    ///
    /// over `t`: `(2·(2·qk + 2·v + 2·H_v) + 4·qk + 4·H_v·d_k + 6·v + 2·C·H_v + 8·H_v)/t`.
    /// Qwen3-Next at `t` = 1: 24 704 + 8192 + 16 384 + 24 576 + 4096 + 256 = 78 208 B.
    pub fn activation_bytes(&self, t: f64) -> f64 {
        let hv = self.value_heads;
        (2.0 * self.in_proj_width(1.0)
            + 4.0 * self.qk()
            + 4.0 * hv * self.dk
            + 6.0 * self.v()
            + 2.0 * self.chunk * hv
            + 8.0 * hv)
            / t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn qwen3_next() -> Gdn {
        Gdn::from_spec(&GdnSpec {
            key_heads: 16,
            value_heads: 32,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4,
            chunk: 64,
        })
        .unwrap()
    }

    #[test]
    fn qwen3_next_gdn_layer_by_hand() {
        // in_proj 2048·(2·2048 + 2·4096 + 64) = 2048·12352 = 25 296 896; conv (4096 +
        // 4096)·4 = 32 768; A_log and dt_bias 64; norm 128; out_proj 4096·2048 =
        // 8 388 608; pre-norm 2048.
        let g = qwen3_next();
        assert_relative_eq!(g.params(2048.0), 33_720_512.0);
        assert_relative_eq!(g.in_proj_width(2.0), 12352.0 / 2.0);
        assert_relative_eq!(g.conv_dim(4.0), 8192.0 / 4.0);
        assert_relative_eq!(g.matmul_params(2048.0), 25_296_896.0 + 8_388_608.0);
    }

    #[test]
    fn delta_rule_flops_by_hand() {
        // 32·2·(3·64·128 + 2·64·128 + 3·128·128 + 64²/3) = 64·(24576 + 16384 + 49152 +
        // 1365.33) = 5 854 549.33.
        let g = qwen3_next();
        assert_relative_eq!(
            g.core_flops_per_token(),
            64.0 * (24576.0 + 16384.0 + 49152.0 + 4096.0 / 3.0),
            max_relative = 1e-12
        );
        assert_relative_eq!(g.core_scale(), 1.0);
        // One head of size 1, chunk 1: 2·(3 + 2 + 3 + 1/3).
        let one = Gdn {
            key_heads: 1.0,
            value_heads: 1.0,
            dk: 1.0,
            dv: 1.0,
            conv: 4.0,
            chunk: 1.0,
        };
        assert_relative_eq!(one.core_flops_per_token(), 2.0 * (8.0 + 1.0 / 3.0));
        // Head sizes 256 × 128 against 128 × 128 at C = 64: (3·64·256 + 2·64·128 +
        // 3·256·128 + 4096/3)/(91 477.33).
        let wide = Gdn { dk: 256.0, ..g };
        assert_relative_eq!(
            wide.core_scale(),
            (49152.0 + 16384.0 + 98304.0 + 4096.0 / 3.0) / (90112.0 + 4096.0 / 3.0),
            max_relative = 1e-12
        );
        // Forward: 2·33 685 504 + 2·4·8192 + the delta rule.
        assert_relative_eq!(
            g.forward_flops_per_token(2048.0),
            2.0 * 33_685_504.0 + 65_536.0 + g.core_flops_per_token(),
            max_relative = 1e-12
        );
    }

    #[test]
    fn bytes_and_activations_by_hand() {
        let g = qwen3_next();
        // t = 1: x 8192, q 2048, r 4096, η 32, o 4096: 4·8192 + 12·2048 + 4·4096 + 12·32 +
        // 6·4096 = 98 688.
        let b = g.bytes(1.0);
        assert_relative_eq!(b.fwd, 98_688.0);
        assert_relative_eq!(b.bwd, 197_376.0);
        assert_relative_eq!(g.bytes(2.0).fwd, 49_344.0);
        assert_relative_eq!(b.fwd_kernels, 6.0);
        assert_relative_eq!(b.bwd_kernels, 12.0);
        // 2·12352 + 4·2048 + 4·32·128 + 6·4096 + 2·64·32 + 8·32 = 78 208.
        assert_relative_eq!(g.activation_bytes(1.0), 78_208.0);
        assert_relative_eq!(g.activation_bytes(2.0), 39_104.0);
    }

    #[test]
    fn table_defaults_and_unknown_keys() {
        // Megatron-LM's defaults: a convolution of 4, chunks of 64.
        let s: GdnSpec = toml::from_str(
            "key_heads = 16\nvalue_heads = 32\nkey_head_dim = 128\nvalue_head_dim = 128",
        )
        .unwrap();
        assert_eq!((s.conv_kernel, s.chunk), (4, 64));
        let e = toml::from_str::<GdnSpec>(
            "key_heads = 16\nvalue_heads = 32\nkey_head_dim = 128\nvalue_head_dim = 128\nconv = 4",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("unknown field `conv`"), "{e}");
    }

    #[test]
    fn value_heads_must_be_a_multiple_of_key_heads() {
        let e = Gdn::from_spec(&GdnSpec {
            key_heads: 16,
            value_heads: 40,
            key_head_dim: 128,
            value_head_dim: 128,
            conv_kernel: 4,
            chunk: 64,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("transformer.gdn.value_heads"), "{e}");
    }
}

//! Hybrid Mamba–Transformer models: the Mamba-2 mixer (SSD, Dao & Gu 2024, arXiv
//! 2405.21060) and the per-layer pattern that mixes it with attention, MLP and MoE layers
//! (Nemotron-H, NVIDIA 2025, arXiv 2504.03624; Nemotron 3).
//!
//! [`MambaSpec`] is the `[transformer.mamba]` table and [`LayerCounts`] the validated
//! `[transformer] hybrid_pattern`, written as Megatron-LM's `hybrid_override_pattern`
//! (megatron/core/models/hybrid/hybrid_layer_allocation.py, `Symbols`): one character per
//! layer, `M` a Mamba layer, `*` an attention layer, `-` a dense MLP layer, `E` an MoE
//! layer. In such a model every layer is one residual block with its own pre-norm (a Mamba
//! mixer, an attention block *or* an MLP), not the attention-plus-MLP pair of a transformer
//! layer. This file owns the Mamba layer's parameters, FLOPs, HBM bytes and stored
//! activations per token on one tensor-parallel rank; the estimate times them.
//!
//! Shapes (Megatron-LM `megatron/core/ssm/mamba_mixer.py`, `MambaMixer.__init__`): with
//! `H` heads of size `P` (`d_in = H·P`), `g` groups, state size `N`, a causal convolution of
//! width `K` and chunk size `Q`, the input projection writes `z, x, B, C, dt`
//! (`2·d_in + 2·g·N + H` columns), the convolution runs on `x, B, C` (`d_in + 2·g·N`
//! channels), the SSD scan produces `y` (`d_in`), a grouped RMSNorm gated by `z` normalises
//! it, and the output projection maps `d_in → h`. Heads and groups are split over TP
//! (`nheads % tp == 0`, `ngroups % tp == 0`): the input projection is column-parallel, the
//! output projection row-parallel, so the layer runs the TP collectives of one MLP block.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// `[transformer.mamba]`: the Mamba-2 mixer of the `M` layers (Hugging Face config.json
/// `mamba_num_heads`, `mamba_head_dim`, `ssm_state_size`, `n_groups`, `conv_kernel`,
/// `chunk_size`; Megatron-LM `mamba_num_heads`, `mamba_head_dim`, `mamba_state_dim`,
/// `mamba_num_groups`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MambaSpec {
    /// SSM heads `H`.
    pub heads: u32,
    /// Size of one head `P` (`d_in = H·P`).
    pub head_dim: u32,
    /// State size `N` per head.
    pub state: u32,
    /// Groups `g` sharing one `B` and `C` (heads per group `H/g`).
    pub groups: u32,
    /// Width `K` of the causal depthwise convolution (Megatron-LM `d_conv`, default 4).
    #[serde(default = "conv_kernel")]
    pub conv_kernel: u32,
    /// SSD chunk size `Q` (Megatron-LM `MambaMixer` default 128).
    #[serde(default = "chunk")]
    pub chunk: u32,
}

fn conv_kernel() -> u32 {
    4
}

fn chunk() -> u32 {
    128
}

/// A validated Mamba-2 mixer, sizes as f64 for the hot path.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mamba {
    /// Heads `H`.
    pub heads: f64,
    /// Head size `P`.
    pub head_dim: f64,
    /// State size `N`.
    pub state: f64,
    /// Groups `g`.
    pub groups: f64,
    /// Convolution width `K`.
    pub conv: f64,
    /// Chunk size `Q`.
    pub chunk: f64,
}

/// Bytes per token one Mamba layer's memory-bound kernels move on one TP rank, and their
/// kernel count, per pass.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MambaBytes {
    /// Forward bytes per token.
    pub fwd: f64,
    /// Backward bytes per token.
    pub bwd: f64,
    /// Forward kernels.
    pub fwd_kernels: f64,
    /// Backward kernels.
    pub bwd_kernels: f64,
}

impl Mamba {
    /// Validates the table: every size ≥ 1 and the heads a multiple of the groups
    /// (Megatron-LM asserts `nheads % ngroups == 0`).
    pub fn from_spec(s: &MambaSpec) -> Result<Mamba> {
        for (k, v) in [
            ("heads", s.heads),
            ("head_dim", s.head_dim),
            ("state", s.state),
            ("groups", s.groups),
            ("conv_kernel", s.conv_kernel),
            ("chunk", s.chunk),
        ] {
            if v == 0 {
                return Err(Error::input(
                    format!("transformer.mamba.{k}"),
                    "must be ≥ 1",
                ));
            }
        }
        if !s.heads.is_multiple_of(s.groups) {
            return Err(Error::input(
                "transformer.mamba.groups",
                format!(
                    "must divide heads ({}): each group serves heads/groups heads",
                    s.heads
                ),
            ));
        }
        Ok(Mamba {
            heads: s.heads as f64,
            head_dim: s.head_dim as f64,
            state: s.state as f64,
            groups: s.groups as f64,
            conv: s.conv_kernel as f64,
            chunk: s.chunk as f64,
        })
    }

    /// Inner width `d_in = H·P`.
    pub fn d_inner(&self) -> f64 {
        self.heads * self.head_dim
    }

    /// Output columns of the input projection on one of `t` TP ranks:
    /// `(2·d_in + 2·g·N + H)/t` (`z, x, B, C, dt`).
    pub fn in_proj_width(&self, t: f64) -> f64 {
        (2.0 * self.d_inner() + 2.0 * self.groups * self.state + self.heads) / t
    }

    /// Channels of the causal convolution on one of `t` ranks: `(d_in + 2·g·N)/t`.
    pub fn conv_dim(&self, t: f64) -> f64 {
        (self.d_inner() + 2.0 * self.groups * self.state) / t
    }

    /// Parameters of one Mamba layer on hidden size `h` (Megatron-LM `MambaMixer` and
    /// `MambaLayer`, no linear biases): input projection `h·(2·d_in + 2·g·N + H)`,
    /// convolution weights and biases `(d_in + 2·g·N)·(K + 1)`, `dt_bias`, `A_log` and `D`
    /// (`3·H`), the gated RMSNorm `d_in`, output projection `d_in·h`, and the layer's
    /// pre-norm `h`. Nemotron-H 56B (`h` 8192, 256 heads of 64, 8 groups, `N` 256):
    /// 304 087 040 + 102 400 + 768 + 16 384 + 134 217 728 + 8 192 = 438 432 512.
    pub fn params(&self, h: f64) -> f64 {
        let d = self.d_inner();
        h * self.in_proj_width(1.0)
            + self.conv_dim(1.0) * (self.conv + 1.0)
            + 3.0 * self.heads
            + d
            + d * h
            + h
    }

    /// Weights of the two projections, `h·(2·d_in + 2·g·N + H) + d_in·h`: what a token
    /// multiplies in GEMMs (2 FLOPs each forward).
    pub fn matmul_params(&self, h: f64) -> f64 {
        h * self.in_proj_width(1.0) + self.d_inner() * h
    }

    /// The SSD scan's matrix products per chunk on one of `t` ranks, as batched GEMMs
    /// `(M, N, K, batch per chunk)` (Dao & Gu 2024, §6, the four steps of the chunked
    /// algorithm; mamba_ssm `ssd_combined._mamba_chunk_scan_combined_fwd`):
    ///
    /// 1. `C·Bᵀ` within the chunk, per group: `Q × Q × N` (`_bmm_chunk_fwd`);
    /// 2. chunk states `Xᵀ·B`, per head: `P × N × Q` (`_chunk_state_fwd`);
    /// 3. states to outputs `C·state`, per head: `Q × P × N` (`_chunk_scan_fwd`);
    /// 4. the diagonal block `(L ∘ C·Bᵀ)·X`, per head: `Q × P × Q` (`_chunk_scan_fwd`).
    ///
    /// The state passing between chunks (`_state_passing_fwd`, `P·N` per head and chunk)
    /// is a scan, counted in [`Self::bytes`].
    pub fn scan_gemms(&self, t: f64) -> [(f64, f64, f64, f64); 4] {
        let (q, p, n) = (self.chunk, self.head_dim, self.state);
        let (g, h) = (self.groups / t, self.heads / t);
        [(q, q, n, g), (p, n, q, h), (q, p, n, h), (q, p, q, h)]
    }

    /// FLOPs of the SSD scan per token, forward, summed over the ranks:
    /// `2·g·Q·N + H·(4·P·N + 2·Q·P)` ([`Self::scan_gemms`] per chunk divided by the `Q`
    /// tokens of a chunk; the causal diagonal blocks counted whole, as the attention core
    /// counts its unmasked s×s matrix). Dao & Gu 2024 §6 give the total as `O(T·N²)` for
    /// `P = N = Q`, i.e. linear in the sequence. Nemotron-H 56B (`Q` 128):
    /// 2·8·128·256 + 256·(4·64·256 + 2·128·64) = 524 288 + 20 971 520 = 21 495 808.
    /// (Megatron-Bridge's `flop_utils.mamba_layer_flops` counts `7·d_in·N` per token,
    /// 29 360 128 here: 1.5% of the layer's FLOPs apart.)
    pub fn scan_flops_per_token(&self) -> f64 {
        self.scan_gemms(1.0)
            .iter()
            .map(|&(m, n, k, b)| 2.0 * m * n * k * b / self.chunk)
            .sum()
    }

    /// Forward FLOPs of one Mamba layer per token: `2·(projection weights) + scan`.
    pub fn forward_flops_per_token(&self, h: f64) -> f64 {
        2.0 * self.matmul_params(h) + self.scan_flops_per_token()
    }

    /// HBM bytes per token of the memory-bound kernels of one Mamba layer on one of `t`
    /// ranks, with 2-byte activations and fp32 states, `CB` and `dt` (mamba_ssm
    /// `ssd_combined.py`, `MambaSplitConv1dScanCombinedFn`, as Megatron-LM's
    /// `MambaMixer._ssm_training` calls it, then its grouped RMSNorm). With
    /// `x = d_in/t`, `b = g·N/t` (B or C), `η = H/t`, `S = η·P·N/Q` (chunk-state elements
    /// per token) and `c = g·Q/t` (`CB` elements per token), a tally of each kernel's reads
    /// and writes gives:
    ///
    /// forward `18·x + 16·b + 26·η + 12·S + 8·c` in 7 kernels: convolution + SiLU on
    /// `x, B, C` (read and write), `dt` cumulative sum, chunk states (written fp32), state
    /// passing (read fp32, written 16-bit), `C·Bᵀ`, chunk scan (reads `CB`, `x`, `z`, `C`,
    /// states; writes the gated and ungated output) and the gated RMSNorm;
    ///
    /// backward `50·x + 46·b + 82·η + 34·S + 24·c` in 18 kernels: the convolution, `dt`
    /// sum, `C·Bᵀ` and chunk states recomputed, then the RMSNorm, `dz`, `dstates`, state
    /// passing, `dx`, `dB`, `dC`, `dCB`, two `C·Bᵀ` gradients, `ddA`, `ddt` and the
    /// convolution's backward. Chunk states dominate for large `N`: Nemotron-H 56B at
    /// `t` = 8 moves 91 968 B per token forward, 49 152 of them states.
    pub fn bytes(&self, t: f64) -> MambaBytes {
        let x = self.d_inner() / t;
        let b = self.groups * self.state / t;
        let eta = self.heads / t;
        let s = eta * self.head_dim * self.state / self.chunk;
        let c = self.groups * self.chunk / t;
        MambaBytes {
            fwd: 18.0 * x + 16.0 * b + 26.0 * eta + 12.0 * s + 8.0 * c,
            bwd: 50.0 * x + 46.0 * b + 82.0 * eta + 34.0 * s + 24.0 * c,
            fwd_kernels: 7.0,
            bwd_kernels: 18.0,
        }
    }

    /// Activation bytes per token one Mamba layer keeps for backward on one of `t` ranks,
    /// beyond its pre-norm's input and output: the input projection's output `z, x, B, C,
    /// dt` (saved by `mamba_split_conv1d_scan_combined`), the ungated scan output `out_x`,
    /// the RMSNorm's input and the output projection's input, 2 bytes each:
    /// `(2·(2·d_in + 2·g·N + H) + 6·d_in)/t`.
    pub fn activation_bytes(&self, t: f64) -> f64 {
        2.0 * self.in_proj_width(t) + 6.0 * self.d_inner() / t
    }
}

/// One layer of a hybrid pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LayerKind {
    /// `M`: a Mamba-2 mixer.
    Mamba,
    /// `G`: a Gated DeltaNet mixer (`model::gdn`).
    Gdn,
    /// `*`: self-attention.
    Attention,
    /// `-`: a dense MLP of width `ffn_hidden`.
    Mlp,
    /// `E`: a mixture-of-experts MLP.
    Moe,
}

/// How many layers of each kind a hybrid pattern has. The estimate averages a stage's
/// layers over the pattern (each stage holds the mix of the whole model), as layer order
/// does not change a stage's sum when the pattern is periodic over a stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LayerCounts {
    /// `M` layers.
    pub mamba: u32,
    /// `G` layers.
    pub gdn: u32,
    /// `*` layers.
    pub attention: u32,
    /// `-` layers.
    pub mlp: u32,
    /// `E` layers.
    pub moe: u32,
}

impl LayerCounts {
    /// Parses `[transformer] hybrid_pattern` for a model of `layers` layers: one of
    /// `M G * - E` per layer (Megatron-LM `Symbols`). Other Megatron-LM symbols are refused
    /// by name: `D` (DeepSeek sparse attention), `+` (MLA) and `|`
    /// (pipeline boundaries) are not modelled; `/` (Megatron-LM's MTP suffix) is written as
    /// [`Self::parse_mtp`]'s `mtp_pattern`.
    pub fn parse(pattern: &str, layers: u32) -> Result<LayerCounts> {
        Self::parse_as("transformer.hybrid_pattern", pattern, Some(layers))
    }

    /// Parses `[transformer] mtp_pattern`, the layers of one multi-token-prediction module
    /// of a hybrid model (Megatron-LM `mtp_hybrid_override_pattern`, e.g. `"*E"`): the same
    /// symbols, any number ≥ 1 of them.
    pub fn parse_mtp(pattern: &str) -> Result<LayerCounts> {
        let n = Self::parse_as("transformer.mtp_pattern", pattern, None)?;
        if n.total() == 0 {
            return Err(Error::input(
                "transformer.mtp_pattern",
                "is empty: one MTP module has at least one layer, e.g. \"*E\"",
            ));
        }
        Ok(n)
    }

    /// Layers of every kind.
    pub fn total(&self) -> u32 {
        self.mamba + self.gdn + self.attention + self.mlp + self.moe
    }

    fn parse_as(what: &str, pattern: &str, layers: Option<u32>) -> Result<LayerCounts> {
        let mut n = LayerCounts::default();
        let mut len = 0u32;
        for (i, ch) in pattern.chars().enumerate() {
            len += 1;
            let kind = match ch {
                'M' => LayerKind::Mamba,
                'G' => LayerKind::Gdn,
                '*' => LayerKind::Attention,
                '-' => LayerKind::Mlp,
                'E' => LayerKind::Moe,
                other => {
                    let why = match other {
                        'D' => " (DeepSeek sparse-attention layers are not modelled)",
                        '+' => " (MLA layers in a hybrid pattern are not modelled)",
                        '|' => " (pipeline stage boundaries: use the plan's layers_per_stage)",
                        '/' => " (write the MTP module's layers as mtp_pattern)",
                        _ => "",
                    };
                    return Err(Error::input(
                        what,
                        format!(
                            "character {} ('{other}') is not a layer: expected M (Mamba), G (Gated DeltaNet), * (attention), - (MLP) or E (MoE){why}",
                            i + 1
                        ),
                    ));
                }
            };
            match kind {
                LayerKind::Mamba => n.mamba += 1,
                LayerKind::Gdn => n.gdn += 1,
                LayerKind::Attention => n.attention += 1,
                LayerKind::Mlp => n.mlp += 1,
                LayerKind::Moe => n.moe += 1,
            }
        }
        if let Some(layers) = layers
            && len != layers
        {
            return Err(Error::input(
                what,
                format!(
                    "has {len} layers but transformer.layers is {layers}: one character per layer"
                ),
            ));
        }
        Ok(n)
    }

    /// The counts as (kind, layers), in a fixed order.
    pub fn kinds(&self) -> [(LayerKind, u32); 5] {
        [
            (LayerKind::Mamba, self.mamba),
            (LayerKind::Gdn, self.gdn),
            (LayerKind::Attention, self.attention),
            (LayerKind::Mlp, self.mlp),
            (LayerKind::Moe, self.moe),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use approx::assert_relative_eq;

    fn nemotron_h_56b() -> Mamba {
        Mamba::from_spec(&MambaSpec {
            heads: 256,
            head_dim: 64,
            state: 256,
            groups: 8,
            conv_kernel: 4,
            chunk: 128,
        })
        .unwrap()
    }

    #[test]
    fn nemotron_h_56b_mamba_layer_by_hand() {
        // in_proj 8192·(2·16384 + 2·8·256 + 256) = 8192·37120 = 304 087 040; conv
        // (16384 + 4096)·5 = 102 400; 3·256 = 768; norm 16384; out_proj 16384·8192 =
        // 134 217 728; pre-norm 8192.
        let m = nemotron_h_56b();
        assert_relative_eq!(m.params(8192.0), 438_432_512.0);
        assert_relative_eq!(m.in_proj_width(8.0), 37120.0 / 8.0);
        assert_relative_eq!(m.conv_dim(8.0), 20480.0 / 8.0);
    }

    #[test]
    fn ssd_scan_flops_by_hand() {
        // 2·g·Q·N + H·(4·P·N + 2·Q·P) = 2·8·128·256 + 256·(65536 + 16384) = 21 495 808.
        let m = nemotron_h_56b();
        assert_relative_eq!(m.scan_flops_per_token(), 21_495_808.0);
        // A chunk of one token, one head, P = N = 1: 2 + 4 + 2 = 8.
        let one = Mamba {
            heads: 1.0,
            head_dim: 1.0,
            state: 1.0,
            groups: 1.0,
            conv: 4.0,
            chunk: 1.0,
        };
        assert_relative_eq!(one.scan_flops_per_token(), 8.0);
        // Forward per token: twice the projections' weights, 8192·37120 + 16384·8192 =
        // 438 304 768, plus the scan.
        assert_relative_eq!(
            m.forward_flops_per_token(8192.0),
            2.0 * 438_304_768.0 + 21_495_808.0
        );
    }

    #[test]
    fn bytes_per_token_by_hand() {
        // t = 8: x 2048, b 256, η 32, S = 32·64·256/128 = 4096, c = 8·128/8 = 128.
        // fwd 18·2048 + 16·256 + 26·32 + 12·4096 + 8·128 = 36864 + 4096 + 832 + 49152 +
        // 1024 = 91 968; bwd 50·2048 + 46·256 + 82·32 + 34·4096 + 24·128 = 102400 + 11776
        // + 2624 + 139264 + 3072 = 259 136.
        let b = nemotron_h_56b().bytes(8.0);
        assert_relative_eq!(b.fwd, 91_968.0);
        assert_relative_eq!(b.bwd, 259_136.0);
        assert_relative_eq!(b.fwd_kernels, 7.0);
        assert_relative_eq!(b.bwd_kernels, 18.0);
        // Stored activations: 2·4640 + 6·2048 = 21 568 B per token at t = 8.
        assert_relative_eq!(nemotron_h_56b().activation_bytes(8.0), 21_568.0);
    }

    #[test]
    fn pattern_counts_and_errors() {
        let n = LayerCounts::parse("M-M*-E", 6).unwrap();
        assert_eq!(
            n,
            LayerCounts {
                mamba: 2,
                gdn: 0,
                attention: 1,
                mlp: 2,
                moe: 1
            }
        );
        let q = LayerCounts::parse("GEGEGE*E", 8).unwrap();
        assert_eq!((q.gdn, q.attention, q.moe, q.total()), (3, 1, 4, 8));
        let e = LayerCounts::parse("M-M*", 5).unwrap_err().to_string();
        assert!(
            e.contains("has 4 layers but transformer.layers is 5"),
            "{e}"
        );
        let e = LayerCounts::parse("M-D*", 4).unwrap_err().to_string();
        assert!(
            e.contains("character 3 ('D')") && e.contains("sparse-attention"),
            "{e}"
        );
        let e = LayerCounts::parse("M-M*/MM", 7).unwrap_err().to_string();
        assert!(e.contains("character 5 ('/')") && e.contains("MTP"), "{e}");
    }

    #[test]
    fn heads_must_split_into_groups() {
        let e = Mamba::from_spec(&MambaSpec {
            heads: 100,
            head_dim: 64,
            state: 128,
            groups: 8,
            conv_kernel: 4,
            chunk: 128,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("transformer.mamba.groups"), "{e}");
    }
}

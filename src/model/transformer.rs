//! Decoder/encoder transformers: dense GPT (Megatron), grouped-query attention and SwiGLU
//! (LLaMA), mixture of experts (Mixtral). [`TransformerSpec`] is the `[transformer]` table
//! of a model file; [`Transformer`] the validated form with plan-independent counts
//! (parameters, FLOPs per token) precomputed.

use super::attention::{Attention, LayerAttention, MlaSpec, Window};
use super::gdn::{Gdn, GdnSpec};
use super::mamba::{LayerCounts, Mamba, MambaSpec};
use super::moe::{MoeSpec, mlp_params};
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
    /// Squared ReLU, `relu(x)²`: two matrices like GeLU, one elementwise pass (So et al.
    /// 2021, Primer; Nemotron-H, Megatron-LM `squared_relu`).
    SquaredRelu,
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
    /// Size of one attention head (default hidden / heads; Qwen3 and gpt-oss set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head_dim: Option<u32>,
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
    /// Rotary position embedding on queries and keys (default: when there is no learned
    /// position table, as in LLaMA; BLOOM's ALiBi sets `rotary = false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotary: Option<bool>,
    /// A norm on each head's queries and keys before attention (Qwen3's RMSNorm, OLMo 2,
    /// Gemma 3; Megatron-core `qk_layernorm`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub qk_norm: bool,
    /// Linear layers have biases (GPT) or not (LLaMA).
    #[serde(default = "yes")]
    pub bias: bool,
    /// Causal (decoder) attention: fused attention skips the masked half (BERT: false).
    #[serde(default = "yes")]
    pub causal: bool,
    /// Mixture of experts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moe: Option<MoeSpec>,
    /// Multi-head latent attention (DeepSeek-V2/V3) instead of MHA/GQA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mla: Option<MlaSpec>,
    /// Multi-token-prediction modules (DeepSeek-V3 §2.2: one extra layer, a 2h×h
    /// projection and the shared output head each).
    #[serde(default)]
    pub mtp_layers: u32,
    /// Sliding-window attention: keys each query of a windowed layer sees, itself included
    /// (config.json `sliding_window`: gpt-oss 128). Unset: every layer attends in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sliding_window: Option<u32>,
    /// Which layers are windowed: `"sliding"` and `"full"` entries repeated from the first
    /// layer (config.json `layer_types`; gpt-oss `["sliding", "full"]`). Default with
    /// `sliding_window`: every layer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention_pattern: Option<Vec<LayerAttention>>,
    /// Hybrid model: one character per layer, Megatron-LM's `hybrid_override_pattern`
    /// (`M` Mamba, `*` attention, `-` dense MLP of `ffn_hidden`, `E` MoE of `[moe]`).
    /// Unset: every layer is attention + MLP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hybrid_pattern: Option<String>,
    /// The Mamba-2 mixer of the pattern's `M` layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mamba: Option<MambaSpec>,
    /// The Gated DeltaNet mixer of the pattern's `G` layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gdn: Option<GdnSpec>,
    /// The layers of one MTP module of a hybrid model, in `hybrid_pattern`'s symbols
    /// (Megatron-LM `mtp_hybrid_override_pattern`; Nemotron 3 Super `"*E"`): each of the
    /// `mtp_layers` modules runs these layers, a `2h × h` projection and the output head.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtp_pattern: Option<String>,
    /// The `mtp_layers` modules share one set of weights, run once per depth (Megatron-LM
    /// `mtp_use_repeated_layer`; Nemotron 3 Super runs its one module twice): parameters once,
    /// FLOPs per depth.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub mtp_repeated: bool,
}

/// The layers of a hybrid model ([`TransformerSpec::hybrid_pattern`]), validated.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hybrid {
    /// Layers of each kind.
    pub counts: LayerCounts,
    /// The Mamba mixer (`None` when the pattern has no `M`).
    pub mamba: Option<Mamba>,
    /// The Gated DeltaNet mixer (`None` when the pattern has no `G`).
    pub gdn: Option<Gdn>,
    /// Layers of one MTP module (`mtp_pattern`; zero without MTP).
    pub mtp: LayerCounts,
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
    /// Head dimension d (query/key size per head).
    pub d: f64,
    /// The attention projections (GQA or MLA).
    pub attn: Attention,
    /// MLP inner size f of one routed expert (of the dense MLP when not MoE).
    pub f: f64,
    /// MLP inner size of the dense layers (`ffn_hidden`).
    pub dense_f: f64,
    /// Total inner size of the shared experts (0 without).
    pub shared_f: f64,
    /// Width the routed experts work in: the latent width ℓ of a LatentMoE, else `h`
    /// (also `h` for dense models).
    pub eh: f64,
    /// Parameters of a LatentMoE layer's two projections, `2·h·ℓ` (+ `ℓ + h` biases); 0
    /// without.
    pub latent_params: f64,
    /// Leading layers with a dense MLP (MoE models).
    pub dense_layers: u32,
    /// Multi-token-prediction modules.
    pub mtp_layers: u32,
    /// The MTP modules share one set of weights (`mtp_repeated`).
    pub mtp_shared: bool,
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
    /// Node-limited routing: at most this many nodes per token (None: unlimited).
    pub max_nodes: Option<u32>,
    /// Shared input/output embedding.
    pub tied: bool,
    /// Linear layers have biases; also taken to mean dropout is on (GPT, BERT).
    pub bias: bool,
    /// Causal attention.
    pub causal: bool,
    /// Learned absolute positions (`s·h` parameters, so they follow `--seq-len`).
    pub learned_positions: bool,
    /// Rotary position embedding applied to queries and keys in every layer.
    pub rotary: bool,
    /// A norm on each head's queries and keys.
    pub qk_norm: bool,
    /// Sliding-window attention on some layers (`None`: every layer full).
    pub window: Option<Window>,
    /// Parameters of one layer's attention block (projections + biases).
    pub attn_params: f64,
    /// Parameters of one routed expert's MLP (one dense MLP when not MoE).
    pub mlp_params: f64,
    /// Parameters of the shared experts of one MoE layer.
    pub shared_params: f64,
    /// Parameters of the dense MLP of a dense layer.
    pub dense_mlp_params: f64,
    /// Parameters of one layer's norms and router.
    pub other_layer_params: f64,
    /// Embedding parameters (token, position, untied output).
    pub embedding_params: f64,
    /// A hybrid layer pattern (`None`: every layer is attention + MLP).
    pub hybrid: Option<Hybrid>,
}

impl Transformer {
    /// Validates: every size ≥ 1, a divisible by kv_heads, h divisible by a (unless the
    /// head size is given), top_k ≤ experts, dense layers fewer than the layers.
    pub fn from_spec(spec: &TransformerSpec) -> Result<Transformer> {
        let w = "transformer";
        let kv = spec.kv_heads.unwrap_or(spec.heads);
        let f = spec.ffn_hidden.unwrap_or(4 * spec.hidden);
        let moe = spec.moe.unwrap_or(MoeSpec::DENSE);
        for (k, v) in [
            ("layers", spec.layers),
            ("hidden", spec.hidden),
            ("heads", spec.heads),
            ("kv_heads", kv),
            ("ffn_hidden", f),
            ("head_dim", spec.head_dim.unwrap_or(1)),
            ("vocab", spec.vocab),
            ("seq_len", spec.seq_len),
            ("moe.expert_ffn_hidden", moe.expert_ffn_hidden.unwrap_or(1)),
        ] {
            if v == 0 {
                return Err(Error::input(format!("{w}.{k}"), "must be ≥ 1"));
            }
        }
        if spec.head_dim.is_none() && spec.mla.is_none() && !spec.hidden.is_multiple_of(spec.heads)
        {
            return Err(Error::input(
                format!("{w}.heads"),
                "must divide hidden (or set head_dim)",
            ));
        }
        if !spec.heads.is_multiple_of(kv) {
            return Err(Error::input(format!("{w}.kv_heads"), "must divide heads"));
        }
        if moe.experts == 0 || moe.top_k == 0 || moe.top_k > moe.experts {
            return Err(Error::input(format!("{w}.moe"), "need 1 ≤ top_k ≤ experts"));
        }
        if moe.dense_layers >= spec.layers {
            return Err(Error::input(
                format!("{w}.moe.dense_layers"),
                format!("must be fewer than the {} layers", spec.layers),
            ));
        }
        if let Some(m) = &spec.mla
            && (m.kv_lora_rank == 0
                || m.qk_nope_head_dim + m.qk_rope_head_dim == 0
                || m.v_head_dim == 0)
        {
            return Err(Error::input(
                format!("{w}.mla"),
                "kv_lora_rank, qk_nope_head_dim + qk_rope_head_dim and v_head_dim must be ≥ 1",
            ));
        }
        let window = Window::from_spec(
            spec.sliding_window,
            spec.attention_pattern.as_deref(),
            spec.layers,
            spec.causal,
        )?;
        let hybrid = Self::hybrid(spec)?;
        Ok(Transformer {
            window,
            hybrid,
            ..Self::derive(spec, kv, f, moe)
        })
    }

    /// Validates `hybrid_pattern` and `[transformer.mamba]`: the pattern has one layer per
    /// `layers`; `M` layers need the mamba table and `E` layers the moe table, and neither
    /// table is left unused; features whose per-layer placement the pattern would have to
    /// say (dense first layers, MTP modules, sliding windows, MLA) are refused.
    fn hybrid(spec: &TransformerSpec) -> Result<Option<Hybrid>> {
        let w = "transformer";
        let Some(p) = &spec.hybrid_pattern else {
            if spec.mtp_pattern.is_some() {
                return Err(Error::input(
                    format!("{w}.mtp_pattern"),
                    "is for hybrid models (set hybrid_pattern); a transformer's MTP module is one of its layers",
                ));
            }
            if spec.mamba.is_some() {
                return Err(Error::input(
                    format!("{w}.mamba"),
                    "needs hybrid_pattern (which layers are Mamba layers), e.g. \"M-M*-\"",
                ));
            }
            if spec.gdn.is_some() {
                return Err(Error::input(
                    format!("{w}.gdn"),
                    "needs hybrid_pattern (which layers are Gated DeltaNet layers), e.g. \"GEGEGE*E\"",
                ));
            }
            return Ok(None);
        };
        let counts = LayerCounts::parse(p, spec.layers)?;
        let mamba = match (&spec.mamba, counts.mamba) {
            (Some(m), 1..) => Some(Mamba::from_spec(m)?),
            (None, 1..) => {
                return Err(Error::input(
                    format!("{w}.hybrid_pattern"),
                    "has M layers: needs a [transformer.mamba] table (heads, head_dim, state, groups)",
                ));
            }
            (Some(_), 0) => {
                return Err(Error::input(
                    format!("{w}.mamba"),
                    "is unused: hybrid_pattern has no M layer",
                ));
            }
            (None, 0) => None,
        };
        let gdn = match (&spec.gdn, counts.gdn) {
            (Some(g), 1..) => Some(Gdn::from_spec(g)?),
            (None, 1..) => {
                return Err(Error::input(
                    format!("{w}.hybrid_pattern"),
                    "has G layers: needs a [transformer.gdn] table (key_heads, value_heads, key_head_dim, value_head_dim)",
                ));
            }
            (Some(_), 0) => {
                return Err(Error::input(
                    format!("{w}.gdn"),
                    "is unused: hybrid_pattern has no G layer",
                ));
            }
            (None, 0) => None,
        };
        let routed = spec.moe.is_some_and(|m| m.experts > 1);
        if counts.moe > 0 && !routed {
            return Err(Error::input(
                format!("{w}.hybrid_pattern"),
                "has E layers: needs a [transformer.moe] table with experts > 1",
            ));
        }
        if counts.moe == 0 && spec.moe.is_some() {
            return Err(Error::input(
                format!("{w}.moe"),
                "is unused: hybrid_pattern has no E layer",
            ));
        }
        for (key, set) in [
            (
                "moe.dense_layers",
                spec.moe.is_some_and(|m| m.dense_layers > 0),
            ),
            ("sliding_window", spec.sliding_window.is_some()),
            ("mla", spec.mla.is_some()),
        ] {
            if set {
                return Err(Error::input(
                    format!("{w}.{key}"),
                    "is not modelled with hybrid_pattern (the pattern says what each layer is)",
                ));
            }
        }
        let mtp = match (&spec.mtp_pattern, spec.mtp_layers) {
            (None, 0) => LayerCounts::default(),
            (None, _) => {
                return Err(Error::input(
                    format!("{w}.mtp_layers"),
                    "needs mtp_pattern with hybrid_pattern (the layers of one MTP module, e.g. \"*E\")",
                ));
            }
            (Some(_), 0) => {
                return Err(Error::input(
                    format!("{w}.mtp_pattern"),
                    "is unused: mtp_layers is 0",
                ));
            }
            (Some(mp), _) => {
                let n = LayerCounts::parse_mtp(mp)?;
                for (kind, k) in n.kinds() {
                    let main = counts
                        .kinds()
                        .iter()
                        .find(|x| x.0 == kind)
                        .map_or(0, |x| x.1);
                    if k > 0 && main == 0 {
                        return Err(Error::input(
                            format!("{w}.mtp_pattern"),
                            format!(
                                "has {kind:?} layers, which hybrid_pattern does not: an MTP module repeats the model's layer kinds"
                            ),
                        ));
                    }
                }
                n
            }
        };
        Ok(Some(Hybrid {
            counts,
            mamba,
            gdn,
            mtp,
        }))
    }

    fn derive(spec: &TransformerSpec, kv: u32, f: u32, moe: MoeSpec) -> Transformer {
        let h = spec.hidden as f64;
        let d = spec.head_dim.map_or(h / spec.heads as f64, f64::from);
        let attn = match &spec.mla {
            Some(m) => Attention::mla(spec.heads, m),
            None => Attention::gqa(spec.heads, kv, d),
        };
        let bias = spec.bias;
        let gated = spec.activation == Activation::Swiglu;
        let expert_f = moe.expert_ffn_hidden.unwrap_or(f) as f64;
        let latent = moe.latent.map_or(0.0, f64::from);
        let eh = if latent > 0.0 { latent } else { h };
        let shared_f = expert_f * moe.shared_experts as f64;
        let norm = if bias { 4.0 * h } else { 2.0 * h };
        let experts = moe.experts;
        let router = if experts > 1 { h * experts as f64 } else { 0.0 };
        let untied = if spec.tied_embeddings {
            0.0
        } else {
            spec.vocab as f64 * h
        };
        let mut t = Transformer {
            layers: spec.layers,
            h,
            heads: spec.heads,
            kv_heads: kv,
            d: attn.qk_d,
            attn,
            f: expert_f,
            dense_f: f as f64,
            shared_f,
            eh,
            latent_params: if latent > 0.0 {
                2.0 * h * latent + if bias { latent + h } else { 0.0 }
            } else {
                0.0
            },
            dense_layers: if experts > 1 { moe.dense_layers } else { 0 },
            mtp_layers: spec.mtp_layers,
            mtp_shared: spec.mtp_repeated,
            v: spec.vocab as f64,
            // Set by `with_seq_len` below, which also adds the position table.
            s: 0.0,
            gated,
            experts,
            top_k: moe.top_k,
            max_nodes: moe.max_nodes,
            tied: spec.tied_embeddings,
            bias,
            causal: spec.causal,
            learned_positions: spec.learned_positions,
            rotary: spec.rotary.unwrap_or(!spec.learned_positions),
            qk_norm: spec.qk_norm,
            window: None,
            attn_params: attn.params(h, bias),
            mlp_params: mlp_params(eh, expert_f, gated, bias),
            shared_params: if shared_f > 0.0 {
                mlp_params(h, shared_f, gated, bias)
            } else {
                0.0
            },
            dense_mlp_params: mlp_params(h, f as f64, gated, bias),
            other_layer_params: norm + router,
            embedding_params: 0.0,
            hybrid: None,
        };
        t.embedding_params = spec.vocab as f64 * h + untied + norm / 2.0;
        t.with_seq_len(spec.seq_len)
    }

    /// The same model trained at sequence length `s` (`--seq-len`): only `s` and the
    /// learned position table (`s·h`) change. `Copy`, so a sweep axis costs nothing.
    pub fn with_seq_len(mut self, s: u32) -> Transformer {
        let pos = |s: f64| {
            if self.learned_positions {
                s * self.h
            } else {
                0.0
            }
        };
        self.embedding_params += pos(s as f64) - pos(self.s);
        self.s = s as f64;
        self
    }

    /// The dense layer of an MoE model (its first `dense_layers`), as a dense model.
    pub fn dense_layer(&self) -> Transformer {
        Transformer {
            experts: 1,
            top_k: 1,
            f: self.dense_f,
            shared_f: 0.0,
            eh: self.h,
            latent_params: 0.0,
            mlp_params: self.dense_mlp_params,
            shared_params: 0.0,
            other_layer_params: if self.experts > 1 {
                self.other_layer_params - self.h * self.experts as f64
            } else {
                self.other_layer_params
            },
            dense_layers: 0,
            hybrid: None,
            ..*self
        }
    }

    /// Parameters of one MoE (or dense) layer: attention + experts × MLP + shared + norms/router;
    /// for a hybrid model the mean over its layers ([`Self::hybrid_layer_params`]).
    pub fn layer_params(&self) -> f64 {
        if let Some(hy) = &self.hybrid {
            return self.hybrid_layer_params(hy, self.experts as f64);
        }
        self.attn_params
            + self.experts as f64 * self.mlp_params
            + self.shared_params
            + self.latent_params
            + self.other_layer_params
    }

    /// Total parameters: `(L − D) · layer + D · dense layer + embeddings + MTP`; for dense
    /// GPT ≈ 12·L·h² + V·h (Narayanan et al. SC'21 §5.1) plus biases, norms and positions.
    pub fn params(&self) -> f64 {
        let dense = self.dense_layers as f64;
        (self.layers as f64 - dense) * self.layer_params()
            + dense * self.dense_layer().layer_params()
            + self.embedding_params
            + self.mtp_params(self.experts as f64)
    }

    /// Parameters of the MTP modules with `routed` routed experts per MoE layer:
    /// `n_w·(P_module + 2·h² + 2·h)`, a module being one layer (a hybrid model's: its
    /// `mtp_pattern`), a `2h × h` projection and two norms (DeepSeek-V3 §2.2); `n_w` the
    /// weight copies, `mtp_layers`, or 1 when they share weights (`mtp_repeated`).
    pub fn mtp_params(&self, routed: f64) -> f64 {
        if self.mtp_layers == 0 {
            return 0.0;
        }
        let copies = self.mtp_copies();
        let module = match &self.hybrid {
            Some(hy) => self.hybrid_sum_params(&hy.mtp, hy, routed),
            None => {
                self.attn_params
                    + routed * self.mlp_params
                    + self.shared_params
                    + self.latent_params
                    + self.other_layer_params
            }
        };
        copies * (module + 2.0 * self.h * self.h + 2.0 * self.h)
    }

    /// Weight copies of the MTP modules: none without MTP, one when the depths share
    /// weights (`mtp_repeated`), else one per depth.
    pub fn mtp_copies(&self) -> f64 {
        match (self.mtp_layers, self.mtp_shared) {
            (0, _) => 0.0,
            (_, true) => 1.0,
            (n, false) => n as f64,
        }
    }

    /// Parameters of a hybrid model's layers, averaged over them, counting `routed` routed
    /// experts per MoE layer (`E` for the model, fewer for one device's share): each layer
    /// has one pre-norm (`n₁`, half a transformer layer's two) and its block,
    /// `Σ_k L_k·P_k / L` with `P_M` the Mamba layer ([`Mamba::params`], its norm
    /// included), `P_G` the Gated DeltaNet layer ([`Gdn::params`], likewise),
    /// `P_* = attention + n₁`, `P_- = dense MLP + n₁`,
    /// `P_E = routed·expert + shared + router + n₁`.
    pub fn hybrid_layer_params(&self, hy: &Hybrid, routed: f64) -> f64 {
        self.hybrid_sum_params(&hy.counts, hy, routed) / self.layers as f64
    }

    /// `Σ_k c_k·P_k` over the layer kinds of `c` ([`Self::hybrid_layer_params`]; a LatentMoE
    /// layer adds its two projections to `P_E`).
    fn hybrid_sum_params(&self, c: &LayerCounts, hy: &Hybrid, routed: f64) -> f64 {
        let router = if self.experts > 1 {
            self.h * self.experts as f64
        } else {
            0.0
        };
        let n1 = (self.other_layer_params - router) / 2.0;
        let mamba = hy.mamba.map_or(0.0, |m| m.params(self.h));
        let gdn = hy.gdn.map_or(0.0, |g| g.params(self.h));
        c.mamba as f64 * mamba
            + c.gdn as f64 * gdn
            + c.attention as f64 * (self.attn_params + n1)
            + c.mlp as f64 * (self.dense_mlp_params + n1)
            + c.moe as f64
                * (routed * self.mlp_params + self.shared_params + self.latent_params + router + n1)
    }

    /// Matrix parameters a token passes through in one layer (top_k routed experts and
    /// the shared ones).
    /// A LatentMoE layer's experts work on ℓ (`k·w(ℓ, f)`) and add the two projections
    /// `2·h·ℓ`.
    pub fn active_matmul_params_per_layer(&self) -> f64 {
        self.attn.params(self.h, false) + self.moe_matmul_params()
    }

    /// Matrix parameters a token passes through in one MLP or MoE block: `k·w(eh, f) +
    /// w(h, f_shared) + 2·h·ℓ` with `w(x, f) = 3·x·f` gated, `2·x·f` otherwise (a dense
    /// block: `w(h, f)`).
    fn moe_matmul_params(&self) -> f64 {
        let g = if self.gated { 3.0 } else { 2.0 };
        let latent = if self.latent_params > 0.0 {
            2.0 * self.h * self.eh
        } else {
            0.0
        };
        self.top_k as f64 * g * self.eh * self.f + g * self.h * self.shared_f + latent
    }

    /// Forward FLOPs per token, summed over the layers, of the blocks a whole-MLP checkpoint
    /// runs again: (the dense layers' MLPs `L_d·2·w(h, f_d)`, the MoE layers' blocks with
    /// their router `L_E·2·(k·w(eh, f) + w(h, f_shared) + 2·h·ℓ + h·E)`, their shared
    /// experts `L_E·2·w(h, f_shared)`), with `w` as in `moe_matmul_params`; `L_d` is
    /// every layer of a dense model, the first `dense_layers` of an MoE one, a hybrid's `-`
    /// layers, and `L_E` the rest or a hybrid's `E` layers. MTP modules are not counted.
    pub fn mlp_block_flops(&self) -> [f64; 3] {
        let g = if self.gated { 3.0 } else { 2.0 };
        let (dense, moe) = match &self.hybrid {
            Some(hy) => (hy.counts.mlp, hy.counts.moe),
            None if self.experts <= 1 => (self.layers, 0),
            None => (self.dense_layers, self.layers - self.dense_layers),
        };
        let dense_f = if self.experts <= 1 && self.hybrid.is_none() {
            self.f
        } else {
            self.dense_f
        };
        let router = self.h * self.experts as f64;
        [
            dense as f64 * 2.0 * g * self.h * dense_f,
            moe as f64 * 2.0 * (self.moe_matmul_params() + router),
            moe as f64 * 2.0 * g * self.h * self.shared_f,
        ]
    }

    /// Model FLOPs of one forward pass per token (no recomputation):
    /// `Σ_layers (2·P_matmul + core) + 2·V·h`, core = `2·s·a·(d_qk + d_v)` (QKᵀ and
    /// attention·V). For dense GPT this is `24·L·h² + 4·L·s·h + 2·V·h`, i.e. one third of
    /// Korthikanti et al. 2022's `72·B·s·L·h²·(1 + s/(6h) + V/(12hL))` per token (§6.2;
    /// the Megatron-LM MFU definition), which counts QKᵀ and attention·V on the full
    /// (unmasked) s×s matrix; layers with a sliding window count their band instead
    /// ([`Self::attention_core_flops_per_token`]). MTP modules add a layer, their
    /// projection and a head each.
    ///
    /// A hybrid model sums its layers by kind: `L_*·(2·P_attn + core) + L_-·2·P_mlp +
    /// L_E·2·(k·P_expert + P_shared) + L_M·F_mamba + L_G·F_gdn`
    /// ([`Mamba::forward_flops_per_token`], [`Gdn::forward_flops_per_token`]) plus the head, the sum Megatron-Bridge's `flop_utils.hybrid_flops` takes (with its
    /// own scan term).
    pub fn forward_flops_per_token(&self) -> f64 {
        let head = 2.0 * self.v * self.h;
        let mtp = |module: f64| self.mtp_layers as f64 * (module + 4.0 * self.h * self.h + head);
        if let Some(hy) = &self.hybrid {
            return self.hybrid_sum_flops(&hy.counts, hy)
                + head
                + mtp(self.hybrid_sum_flops(&hy.mtp, hy));
        }
        let core = self.attention_core_flops_per_token();
        let layer = 2.0 * self.active_matmul_params_per_layer() + core;
        let d = self.dense_layers as f64;
        let dense = if d > 0.0 {
            2.0 * self.dense_layer().active_matmul_params_per_layer() + core
        } else {
            0.0
        };
        (self.layers as f64 - d) * layer + d * dense + head + mtp(layer)
    }

    /// Forward FLOPs per token of the hybrid layers `c`: `c_*·(2·P_attn + core) +
    /// c_-·2·w(h, f) + c_E·2·(k·w(eh, f) + w(h, f_shared) + 2·h·ℓ) + c_M·F_mamba +
    /// c_G·F_gdn`.
    fn hybrid_sum_flops(&self, c: &LayerCounts, hy: &Hybrid) -> f64 {
        let g = if self.gated { 3.0 } else { 2.0 };
        let core = 2.0 * self.s * self.heads as f64 * (self.attn.qk_d + self.attn.v_d);
        let mamba = hy.mamba.map_or(0.0, |m| m.forward_flops_per_token(self.h));
        c.attention as f64 * (2.0 * self.attn.params(self.h, false) + core)
            + c.mlp as f64 * 2.0 * g * self.h * self.dense_f
            + c.moe as f64 * 2.0 * self.moe_matmul_params()
            + c.mamba as f64 * mamba
            + c.gdn as f64 * hy.gdn.map_or(0.0, |g| g.forward_flops_per_token(self.h))
    }

    /// FLOPs of the attention core (QKᵀ and attention·V) per token and layer, averaged over
    /// the layers: `2·k·a·(d_qk + d_v)` (`4·k·a·d` for MHA/GQA) with `k` the keys a query's
    /// row holds before the causal mask: `s` (Korthikanti et al. 2022's unmasked s×s,
    /// above), or fewer with sliding windows ([`Window::row_keys`]).
    /// A hybrid model's mean counts its attention layers only (`L_*/L` of the layers).
    pub fn attention_core_flops_per_token(&self) -> f64 {
        let keys = self.window.map_or(self.s, |w| w.row_keys(self.s));
        let core = 2.0 * keys * self.heads as f64 * (self.attn.qk_d + self.attn.v_d);
        match &self.hybrid {
            Some(hy) => core * hy.counts.attention as f64 / self.layers as f64,
            None => core,
        }
    }

    /// FLOPs per token of one layer's matmuls that torchtitan's per-op checkpointing
    /// runs again in backward (`Recompute::Op`), (attention, MLP): every second matmul
    /// of a block in call order, `wq, wk, wv, wo, w1, (w3,) w2`, i.e. the key projection
    /// `2·h·kv·d_qk`, the output projection `2·a·d_v·h` and `w3` (gated) or `w2`
    /// (ungated), `2·h·f` either way.
    pub fn op_recompute_flops_per_token(&self) -> (f64, f64) {
        let at = &self.attn;
        (
            2.0 * self.h * at.kv_heads * at.qk_d + 2.0 * at.heads * at.v_d * self.h,
            2.0 * self.eh * self.f,
        )
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
            rotary: None,
            qk_norm: false,
            bias: true,
            causal: true,
            moe: None,
            head_dim: None,
            mla: None,
            mtp_layers: 0,
            mtp_pattern: None,
            mtp_repeated: false,
            sliding_window: None,
            attention_pattern: None,
            hybrid_pattern: None,
            mamba: None,
            gdn: None,
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
            rotary: None,
            qk_norm: false,
            bias: false,
            causal: true,
            moe: None,
            head_dim: None,
            mla: None,
            mtp_layers: 0,
            mtp_pattern: None,
            mtp_repeated: false,
            sliding_window: None,
            attention_pattern: None,
            hybrid_pattern: None,
            mamba: None,
            gdn: None,
        })
        .unwrap();
        assert_relative_eq!(t.params(), 68.98e9, max_relative = 2e-3);
    }
}

//! DLRM (Naumov et al. 2019): sparse features looked up in embedding tables that are
//! sharded model-parallel across all devices (an all-to-all exchanges the pooled
//! vectors), dense features through a bottom MLP, a pairwise dot-product interaction,
//! and a top MLP; the MLPs are data-parallel.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// `[dlrm]` table of a model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DlrmSpec {
    /// Number of embedding tables (sparse features).
    pub tables: u32,
    /// Rows per table.
    pub rows: u64,
    /// Embedding dimension.
    pub dim: u32,
    /// Lookups per table per sample (pooling factor).
    #[serde(default = "one")]
    pub pooling: u32,
    /// Bottom MLP widths, input first (the dense features).
    pub bottom_mlp: Vec<u32>,
    /// Top MLP widths after the interaction, output last (input width is derived).
    pub top_mlp: Vec<u32>,
    /// Bytes per embedding element (4 = fp32 tables).
    #[serde(default = "four")]
    pub embedding_bytes: u32,
}

fn one() -> u32 {
    1
}
fn four() -> u32 {
    4
}

/// A validated DLRM with derived per-sample counts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dlrm {
    /// Tables.
    pub tables: f64,
    /// Embedding dimension.
    pub dim: f64,
    /// Embedding parameters: tables · rows · dim.
    pub embedding_params: f64,
    /// MLP parameters (weights and biases).
    pub mlp_params: f64,
    /// Forward FLOPs per sample: `2·Σ in·out` over both MLPs + `2·n_pairs·dim` interaction
    /// with `n_pairs = (tables+1)·tables/2`.
    pub forward_flops: f64,
    /// Embedding bytes read per sample: `tables · pooling · dim · bytes`.
    pub lookup_bytes: f64,
    /// Bytes per embedding element.
    pub element_bytes: f64,
    /// Activation elements kept per sample (MLP outputs + interaction).
    pub activations: f64,
    /// Typical MLP width, √(MLP parameters / MLP layers), for the GEMM shape.
    pub mlp_width: f64,
}

impl Dlrm {
    /// Validates: non-empty MLPs, sizes ≥ 1; the bottom MLP must end at the embedding dim.
    pub fn from_spec(s: &DlrmSpec) -> Result<Dlrm> {
        if s.tables == 0 || s.rows == 0 || s.dim == 0 || s.pooling == 0 {
            return Err(Error::input(
                "dlrm",
                "tables, rows, dim and pooling must be ≥ 1",
            ));
        }
        if s.bottom_mlp.len() < 2 || s.top_mlp.is_empty() || s.bottom_mlp.contains(&0) {
            return Err(Error::input(
                "dlrm",
                "bottom_mlp needs ≥ 2 widths and top_mlp ≥ 1",
            ));
        }
        if s.bottom_mlp.last() != Some(&s.dim) {
            return Err(Error::input(
                "dlrm.bottom_mlp",
                "must end at the embedding dim",
            ));
        }
        let (t, dim) = (s.tables as f64, s.dim as f64);
        let pairs = (t + 1.0) * t / 2.0;
        let mut top = vec![(dim + pairs) as u32];
        top.extend_from_slice(&s.top_mlp);
        let (mut params, mut flops, mut acts) = (0.0, 2.0 * pairs * dim, pairs);
        let n_layers = (s.bottom_mlp.len() - 1 + top.len() - 1) as f64;
        for w in s.bottom_mlp.windows(2).chain(top.windows(2)) {
            let (i, o) = (w[0] as f64, w[1] as f64);
            params += i * o + o;
            flops += 2.0 * i * o;
            acts += o;
        }
        Ok(Dlrm {
            tables: t,
            dim,
            embedding_params: t * s.rows as f64 * dim,
            mlp_params: params,
            forward_flops: flops,
            lookup_bytes: t * s.pooling as f64 * dim * s.embedding_bytes as f64,
            element_bytes: s.embedding_bytes as f64,
            activations: acts,
            mlp_width: (params / n_layers).sqrt(),
        })
    }

    /// Total parameters.
    pub fn params(&self) -> f64 {
        self.embedding_params + self.mlp_params
    }
}

//! A generic model given as a list of layers, each with its forward FLOPs, bytes moved,
//! parameters and stored activation per sample, and the collective its gradient needs
//! under data parallelism. Covers CNNs such as ResNet-50. Sums are precomputed.

use crate::error::{Error, Result};
use crate::units::{Bytes, serde_units};
use serde::{Deserialize, Serialize};

/// How a layer's gradient is synchronised across data-parallel replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum GradSync {
    /// All-reduce of the gradient (data parallel).
    #[default]
    AllReduce,
    /// No synchronisation (frozen or replicated-by-construction layer).
    None,
}

/// One layer as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayerSpec {
    /// Name, for reports.
    pub name: String,
    /// Forward FLOPs per sample (a count: 2 per multiply-add).
    pub forward_flops: f64,
    /// Parameters.
    #[serde(default)]
    pub params: f64,
    /// Activation bytes kept for backward, per sample, e.g. "1.6 MB".
    #[serde(with = "serde_units::bytes")]
    pub activation: Bytes,
    /// HBM bytes moved in the forward pass per sample (0 = compute-bound).
    #[serde(with = "serde_units::bytes", default)]
    pub bytes: Bytes,
    /// Gradient synchronisation under data parallelism.
    #[serde(default)]
    pub collective: GradSync,
}

/// `[layered]` table of a model file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LayeredSpec {
    /// Fraction of matrix peak the layers reach (convolutions are not GEMMs of one shape).
    #[serde(default = "default_eff")]
    pub compute_efficiency: f64,
    /// The layers, in order.
    pub layers: Vec<LayerSpec>,
}

fn default_eff() -> f64 {
    0.6
}

/// A validated layered model: the sums the estimate needs.
#[derive(Clone, Debug, PartialEq)]
pub struct Layered {
    /// Number of layers.
    pub n_layers: usize,
    /// Σ forward FLOPs per sample.
    pub forward_flops: f64,
    /// Σ bytes moved per sample (forward).
    pub bytes: f64,
    /// Σ parameters.
    pub params: f64,
    /// Σ parameters whose gradients are all-reduced.
    pub synced_params: f64,
    /// Σ activation bytes per sample.
    pub activation: f64,
    /// Fraction of matrix peak.
    pub efficiency: f64,
}

impl Layered {
    /// Validates: at least one layer, finite non-negative numbers, efficiency in (0, 1].
    pub fn from_spec(s: &LayeredSpec) -> Result<Layered> {
        if s.layers.is_empty() {
            return Err(Error::input("layered.layers", "needs at least one layer"));
        }
        if !(s.compute_efficiency > 0.0 && s.compute_efficiency <= 1.0) {
            return Err(Error::input(
                "layered.compute_efficiency",
                "must be in (0, 1]",
            ));
        }
        let mut l = Layered {
            n_layers: s.layers.len(),
            forward_flops: 0.0,
            bytes: 0.0,
            params: 0.0,
            synced_params: 0.0,
            activation: 0.0,
            efficiency: s.compute_efficiency,
        };
        for (i, x) in s.layers.iter().enumerate() {
            if !(x.forward_flops >= 0.0 && x.forward_flops.is_finite() && x.params >= 0.0) {
                return Err(Error::input(
                    format!("layered.layers[{i}]"),
                    "counts must be ≥ 0",
                ));
            }
            l.forward_flops += x.forward_flops;
            l.bytes += x.bytes.get();
            l.params += x.params;
            if x.collective == GradSync::AllReduce {
                l.synced_params += x.params;
            }
            l.activation += x.activation.get();
        }
        Ok(l)
    }
}

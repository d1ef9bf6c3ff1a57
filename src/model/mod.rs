//! Workloads. A model file (`models/*.toml`) has a name, a description, its source, and
//! exactly one of the tables `[transformer]`, `[dlrm]` or `[layered]`. [`ModelSpec`] is the
//! serde mirror of the file; [`Model`] the validated form whose plan-independent counts
//! (parameters, FLOPs per token or sample) are computed once, so that evaluating a plan
//! never allocates.

pub mod attention;
pub mod dlrm;
pub mod gdn;
pub mod layered;
pub mod mamba;
pub mod moe;
pub mod transformer;

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

pub use attention::{Attention, MlaSpec, Split};
pub use dlrm::{Dlrm, DlrmSpec};
pub use gdn::{Gdn, GdnSpec};
pub use layered::{Layered, LayeredSpec};
pub use mamba::{LayerCounts, LayerKind, Mamba, MambaSpec};
pub use moe::MoeSpec;
pub use transformer::{Activation, Hybrid, Transformer, TransformerSpec};

/// A model file as written.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    /// Short name used on the command line (`gpt3-175b`).
    pub name: String,
    /// Human description.
    #[serde(default)]
    pub description: String,
    /// Where the architecture comes from (paper, table).
    #[serde(default)]
    pub source: String,
    /// A transformer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transformer: Option<TransformerSpec>,
    /// A DLRM recommendation model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dlrm: Option<DlrmSpec>,
    /// A generic list of layers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layered: Option<LayeredSpec>,
}

/// The validated architecture.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelKind {
    /// Transformer (dense, GQA, SwiGLU, MoE, hybrid Mamba); boxed, as it is much larger
    /// than the other kinds (evaluation reads it by reference).
    Transformer(Box<Transformer>),
    /// DLRM: embedding tables + MLPs.
    Dlrm(Dlrm),
    /// A generic list of layers (CNNs such as ResNet-50).
    Layered(Layered),
}

/// A validated model.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// The spec it was built from.
    pub spec: ModelSpec,
    /// The architecture with derived counts.
    pub kind: ModelKind,
}

impl Model {
    /// Validates a spec: exactly one architecture table, each of whose invariants hold.
    pub fn from_spec(spec: ModelSpec) -> Result<Model> {
        let what = format!("model '{}'", spec.name);
        let kind = match (&spec.transformer, &spec.dlrm, &spec.layered) {
            (Some(t), None, None) => ModelKind::Transformer(Box::new(Transformer::from_spec(t)?)),
            (None, Some(d), None) => ModelKind::Dlrm(Dlrm::from_spec(d)?),
            (None, None, Some(l)) => ModelKind::Layered(Layered::from_spec(l)?),
            _ => {
                return Err(Error::input(
                    what,
                    "needs exactly one of the tables [transformer], [dlrm], [layered]",
                ));
            }
        };
        Ok(Model { spec, kind })
    }

    /// The short name.
    pub fn name(&self) -> &str {
        &self.spec.name
    }

    /// Total parameters.
    pub fn params(&self) -> f64 {
        match &self.kind {
            ModelKind::Transformer(t) => t.params(),
            ModelKind::Dlrm(d) => d.params(),
            ModelKind::Layered(l) => l.params,
        }
    }

    /// The transformer, if it is one.
    pub fn transformer(&self) -> Option<&Transformer> {
        match &self.kind {
            ModelKind::Transformer(t) => Some(t),
            _ => None,
        }
    }
}

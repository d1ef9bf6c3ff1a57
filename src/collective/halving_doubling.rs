//! placeholder
use super::Collective;
use super::cost::Cost;
use crate::error::{Error, Result};
use crate::network::Dim;

/// placeholder
pub fn cost(op: Collective, dim: &Dim) -> Result<Cost> {
    let _ = dim;
    Err(Error::Unsupported(format!(
        "halving_doubling {} not built yet",
        op.name()
    )))
}

//! Context parallelism (CP): the sequence of every micro-batch is split over `c` devices
//! for the whole layer; attention needs every key, which two algorithms provide:
//! - ring (Megatron-LM / Transformer Engine `p2p`; Liu et al. 2023, Ring Attention): the
//!   key/value blocks circulate point to point in `c − 1` steps, each overlapped with the
//!   attention of the block already held; causal load balancing gives every rank two of
//!   `2c` chunks so each does the same work;
//! - all-to-all (DeepSpeed-Ulysses, Jacobs et al. 2023; Megatron-LM `a2a`): Q, K and V are
//!   exchanged so that each rank holds all tokens of `a/c` heads, and the output is
//!   exchanged back; needs the heads per TP rank to divide by `c`.
//!
//! Megatron-LM orders the groups `tp-cp-ep-dp-pp` (innermost first) and reduces gradients
//! over the DP × CP ranks, which hold the same weights.

use super::{Plan, bad};
use crate::error::Result;
use crate::model::Transformer;
use serde::{Deserialize, Serialize};

/// The context-parallel algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CpKind {
    /// Ring attention: KV blocks passed point to point, overlapped with attention.
    #[default]
    Ring,
    /// All-to-all (Ulysses): sequence-sharded ↔ head-sharded around attention.
    A2a,
}

impl CpKind {
    /// The name in files and flags.
    pub fn name(self) -> &'static str {
        match self {
            CpKind::Ring => "ring",
            CpKind::A2a => "a2a",
        }
    }
}

/// Checks CP against the model: the sequence splits into `2c` equal chunks (causal load
/// balancing, Megatron-LM asserts it) and, for a2a, the heads per TP rank divide by `c`.
pub(super) fn check(plan: &Plan, t: &Transformer) -> Result<()> {
    let c = plan.cp;
    if c == 1 {
        return Ok(());
    }
    if !plan.seq_len.is_multiple_of(2 * c) {
        return Err(bad(
            "cp",
            format!(
                "sequence length {} does not split into 2·cp = {} chunks",
                plan.seq_len,
                2 * c
            ),
        ));
    }
    if plan.cp_kind == CpKind::A2a && !(t.heads / plan.tp).is_multiple_of(c) {
        return Err(bad(
            "cp",
            format!(
                "a2a needs the {} heads per TP rank to divide by cp = {c}",
                t.heads / plan.tp
            ),
        ));
    }
    Ok(())
}

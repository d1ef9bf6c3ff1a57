//! Parallelism plans. [`PlanSpec`] mirrors what the user wrote (flags or a `[plan]` table);
//! [`Plan`] is the validated, `Copy` form: the degrees multiply to the device count, tensor
//! parallelism divides the heads, pipeline stages divide the layers, the global batch is a
//! multiple of dp × micro-batch. [`Placement`] maps each group onto network dimensions,
//! innermost first (TP on the fastest), as DESIGN.md §4.

mod placement;

pub use placement::{Placement, Span};

use crate::compute::Precision;
use crate::error::{Error, Result};
use crate::model::{Model, ModelKind};
use crate::units::{Bytes, serde_units};
use serde::{Deserialize, Serialize};

/// Pipeline schedule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Schedule {
    /// All forwards, then all backwards (Huang et al. 2019); holds m micro-batches.
    Gpipe,
    /// One-forward-one-backward (PipeDream-Flush; Narayanan et al. 2021).
    #[default]
    #[serde(rename = "1f1b")]
    OneFOneB,
    /// Interleaved 1F1B with v model chunks per stage (Narayanan et al. SC'21 §2.2).
    Interleaved,
}

/// Activation recomputation (Korthikanti et al. 2022).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Recompute {
    /// Keep every activation.
    #[default]
    None,
    /// Recompute the attention core (QKᵀ, softmax, dropout, attention·V) only (§5).
    Selective,
    /// Keep each layer's input; recompute the whole forward in backward.
    Full,
}

/// Optimizer state layout, bytes per parameter for weights + gradients + states.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Optimizer {
    /// Mixed-precision Adam, 16 B/param: 2 weight + 2 gradient + 12 (fp32 master, m, v)
    /// (Rajbhandari et al., ZeRO, SC'20 §3.1).
    #[default]
    Adam,
    /// Megatron-LM Adam with fp32 main gradients, 18 B/param: 2 weight + 4 gradient + 12.
    /// Reproduces Korthikanti et al. 2022 Figure 1 (45.5625 GiB for 22B on 8 GPUs).
    AdamFp32Grads,
}

impl Optimizer {
    /// (weight, gradient, optimizer-state) bytes per parameter.
    pub fn bytes_per_param(self) -> (f64, f64, f64) {
        match self {
            Optimizer::Adam => (2.0, 2.0, 12.0),
            Optimizer::AdamFp32Grads => (2.0, 4.0, 12.0),
        }
    }
}

/// Order in which groups take network dimensions, innermost first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Order {
    /// TP innermost, then DP (with EP inside it), then PP (Megatron-LM's default).
    #[default]
    TpDpPp,
    /// TP innermost, then PP, then DP.
    TpPpDp,
}

/// A plan as written (flags or a scenario's `[plan]` table). Unset fields of a `[plan]`
/// table (and unset flags) take [`PlanSpec::practice`], today's Megatron-LM/NeMo settings;
/// `PlanSpec::default()` is the bare textbook plan (every optimisation off) that formula
/// tests start from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default = "PlanSpec::practice")]
pub struct PlanSpec {
    /// Total devices (default: the whole system).
    pub gpus: Option<u32>,
    /// Data-parallel degree (default: gpus / (tp·pp)).
    pub dp: Option<u32>,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree.
    pub pp: u32,
    /// Expert-parallel degree (MoE; carved out of DP).
    pub ep: u32,
    /// Sequence parallelism (Korthikanti et al. 2022 §4.2.2) on the TP group.
    pub sequence_parallel: bool,
    /// Micro-batch size b (sequences).
    pub micro_batch: u32,
    /// Global batch B (sequences; default dp × micro_batch).
    pub global_batch: Option<u32>,
    /// Pipeline schedule.
    pub schedule: Schedule,
    /// Model chunks per stage for the interleaved schedule.
    pub virtual_stages: u32,
    /// Activation recomputation.
    pub recompute: Recompute,
    /// ZeRO stage 0–3 (3 = FSDP).
    pub zero: u8,
    /// Overlap the DP gradient reduction with backward, in buckets.
    pub dp_overlap: bool,
    /// DP bucket size.
    #[serde(with = "serde_units::bytes")]
    pub dp_bucket: Bytes,
    /// Overlap TP communication with compute.
    pub tp_overlap: bool,
    /// Matrix precision.
    pub precision: Precision,
    /// Optimizer state layout.
    pub optimizer: Optimizer,
    /// Fused (flash) attention: no s×s activations, attention recomputed in backward.
    pub flash_attention: bool,
    /// Group order on the network.
    pub order: Order,
}

impl Default for PlanSpec {
    fn default() -> Self {
        PlanSpec {
            gpus: None,
            dp: None,
            tp: 1,
            pp: 1,
            ep: 1,
            sequence_parallel: false,
            micro_batch: 1,
            global_batch: None,
            schedule: Schedule::OneFOneB,
            virtual_stages: 1,
            recompute: Recompute::None,
            zero: 0,
            dp_overlap: true,
            dp_bucket: Bytes::new(25e6),
            tp_overlap: false,
            precision: Precision::Bf16,
            optimizer: Optimizer::Adam,
            flash_attention: false,
            order: Order::TpDpPp,
        }
    }
}

impl PlanSpec {
    /// What current Megatron-LM and NeMo pre-training recipes turn on, the defaults of every
    /// command: fused (flash) attention (Dao et al. 2022; Transformer Engine's default),
    /// sequence parallelism with tensor parallelism (Korthikanti et al. 2022; NeMo sets
    /// `sequence_parallel` whenever TP > 1), TP communication overlapped with GEMMs
    /// (NeMo's `tp_comm_overlap`) and the distributed optimizer (Megatron-LM
    /// `--use-distributed-optimizer`: optimizer states sharded over DP, i.e. ZeRO-1).
    pub fn practice() -> PlanSpec {
        PlanSpec {
            sequence_parallel: true,
            tp_overlap: true,
            flash_attention: true,
            zero: 1,
            ..PlanSpec::default()
        }
    }

    /// The settings of `practice()` that differ from `PlanSpec::default()`, as
    /// (key, value) for "defaults used" notes.
    pub const PRACTICE: [(&'static str, &'static str); 4] = [
        ("flash_attention", "true"),
        ("sequence_parallel", "true (when tp > 1)"),
        ("tp_overlap", "true"),
        ("zero", "1 (distributed optimizer)"),
    ];
}

/// A validated plan. `Copy`, so sweeps can build millions of them.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Plan {
    /// Devices = dp · tp · pp.
    pub gpus: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Tensor-parallel degree t.
    pub tp: u32,
    /// Pipeline stages p.
    pub pp: u32,
    /// Expert-parallel degree (divides dp).
    pub ep: u32,
    /// Sequence parallel.
    pub sp: bool,
    /// Micro-batch b.
    pub micro_batch: u32,
    /// Global batch B.
    pub global_batch: u32,
    /// Micro-batches per iteration per pipeline, m = B / (dp · b).
    pub micro_batches: u32,
    /// Schedule.
    pub schedule: Schedule,
    /// Chunks per stage v (1 unless interleaved).
    pub v: u32,
    /// Recomputation.
    pub recompute: Recompute,
    /// ZeRO stage.
    pub zero: u8,
    /// DP overlap.
    pub dp_overlap: bool,
    /// DP bucket.
    pub dp_bucket: Bytes,
    /// TP overlap.
    pub tp_overlap: bool,
    /// Precision.
    pub precision: Precision,
    /// Optimizer.
    pub optimizer: Optimizer,
    /// Flash attention.
    pub flash_attention: bool,
    /// Group order.
    pub order: Order,
}

pub(crate) fn bad(key: &str, msg: String) -> Error {
    Error::Unsupported(format!("invalid plan: {key}: {msg}"))
}

impl Plan {
    /// Validates `spec` for `model` on `system_gpus` devices (used when `gpus` is unset).
    pub fn new(spec: &PlanSpec, model: &Model, system_gpus: u32) -> Result<Plan> {
        let s = spec;
        for (k, v) in [
            ("tp", s.tp),
            ("pp", s.pp),
            ("ep", s.ep),
            ("micro_batch", s.micro_batch),
        ] {
            if v == 0 {
                return Err(bad(k, "must be ≥ 1".into()));
            }
        }
        let gpus = s.gpus.unwrap_or(system_gpus);
        let tp_pp = s.tp * s.pp;
        let dp = match s.dp {
            Some(d) => d,
            None if gpus.is_multiple_of(tp_pp) => gpus / tp_pp,
            None => {
                return Err(bad(
                    "gpus",
                    format!("{gpus} is not a multiple of tp·pp = {tp_pp}"),
                ));
            }
        };
        if dp == 0 || dp * tp_pp != gpus {
            return Err(bad(
                "dp",
                format!("dp·tp·pp = {}·{}·{} ≠ gpus = {gpus}", dp, s.tp, s.pp),
            ));
        }
        let gb = s.global_batch.unwrap_or(dp * s.micro_batch);
        if gb == 0 || !gb.is_multiple_of(dp * s.micro_batch) {
            return Err(bad(
                "global_batch",
                format!(
                    "{gb} is not a multiple of dp·micro_batch = {}",
                    dp * s.micro_batch
                ),
            ));
        }
        let m = gb / (dp * s.micro_batch);
        let v = match s.schedule {
            Schedule::Interleaved => s.virtual_stages,
            _ if s.virtual_stages != 1 => {
                return Err(bad(
                    "virtual_stages",
                    "needs schedule = \"interleaved\"".into(),
                ));
            }
            _ => 1,
        };
        if v == 0 {
            return Err(bad("virtual_stages", "must be ≥ 1".into()));
        }
        if s.schedule == Schedule::Interleaved && s.pp > 1 && !m.is_multiple_of(s.pp) {
            return Err(bad(
                "global_batch",
                format!(
                    "interleaving needs micro-batches ({m}) divisible by pp ({})",
                    s.pp
                ),
            ));
        }
        if s.zero > 3 {
            return Err(bad(
                "zero",
                format!("stage {} does not exist; expected 0–3", s.zero),
            ));
        }
        if !dp.is_multiple_of(s.ep) {
            return Err(bad("ep", format!("{} must divide dp = {dp}", s.ep)));
        }
        let plan = Plan {
            gpus,
            dp,
            tp: s.tp,
            pp: s.pp,
            ep: s.ep,
            sp: s.sequence_parallel && s.tp > 1,
            micro_batch: s.micro_batch,
            global_batch: gb,
            micro_batches: m,
            schedule: s.schedule,
            v,
            recompute: s.recompute,
            zero: s.zero,
            dp_overlap: s.dp_overlap,
            dp_bucket: s.dp_bucket,
            tp_overlap: s.tp_overlap,
            precision: s.precision,
            optimizer: s.optimizer,
            flash_attention: s.flash_attention,
            order: s.order,
        };
        plan.check_model(model)?;
        Ok(plan)
    }

    fn check_model(&self, model: &Model) -> Result<()> {
        match &model.kind {
            ModelKind::Transformer(t) => {
                if !t.heads.is_multiple_of(self.tp) {
                    return Err(bad(
                        "tp",
                        format!(
                            "{} does not divide the {} attention heads",
                            self.tp, t.heads
                        ),
                    ));
                }
                if !t.kv_heads.is_multiple_of(self.tp) && !self.tp.is_multiple_of(t.kv_heads) {
                    return Err(bad(
                        "tp",
                        format!("{} and the {} KV heads do not divide", self.tp, t.kv_heads),
                    ));
                }
                if !t.layers.is_multiple_of(self.pp * self.v) {
                    return Err(bad(
                        "pp",
                        format!(
                            "pp·v = {}·{} does not divide the {} layers",
                            self.pp, self.v, t.layers
                        ),
                    ));
                }
                if !t.experts.is_multiple_of(self.ep) {
                    return Err(bad(
                        "ep",
                        format!("{} does not divide the {} experts", self.ep, t.experts),
                    ));
                }
            }
            ModelKind::Dlrm(_) | ModelKind::Layered(_) => {
                if self.tp > 1 || self.pp > 1 || self.ep > 1 {
                    return Err(bad(
                        "tp/pp/ep",
                        format!("'{}' supports data parallelism only", model.name()),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Layers per pipeline stage: L / p.
    pub fn layers_per_stage(&self, layers: u32) -> u32 {
        layers / self.pp
    }

    /// Pipeline bubble as a fraction of the ideal (bubble-free) time:
    /// `(p − 1) / (v · m)`; GPipe and 1F1B have v = 1 (Narayanan et al. SC'21 §2.2).
    pub fn bubble_fraction(&self) -> f64 {
        (self.pp - 1) as f64 / (self.v as f64 * self.micro_batches as f64)
    }
}

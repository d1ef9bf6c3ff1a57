//! The typed result of `astrolabe estimate` ([`EstimateResult`]): top-level SI scalars
//! (`iteration_time_s`, `tokens_per_s`, `mfu` as a fraction, `memory_per_device_bytes`,
//! `fits`), the plan as an object, and the time and memory breakdowns as objects keyed by
//! component. The human tables (`crate::estimate::report`) are rendered from this value.
//! New components (e.g. overlap-window records) are added as new fields.

use super::values::{PlanValue, Records, SCHEMA_VERSION, record};
use crate::error::Result;
use crate::estimate::{Comm, CommClass, Estimate, GroupDims};
use crate::model::Model;
use crate::system::System;
use schemars::JsonSchema;
use serde::Serialize;

/// One training-iteration estimate.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct EstimateResult {
    /// Schema version (see docs/schema.md).
    pub schema_version: u32,
    /// Model name.
    pub model: String,
    /// System name.
    pub system: String,
    /// Device name.
    pub device: String,
    /// Time of one training iteration, seconds.
    pub iteration_time_s: f64,
    /// 80 % prediction band of `iteration_time_s` from the residuals of comparable
    /// published runs (`crate::band`).
    pub band: crate::band::Band,
    /// Tokens per second (samples per second for non-sequence models).
    pub tokens_per_s: f64,
    /// Samples (sequences) per second.
    pub samples_per_s: f64,
    /// Model FLOPs utilisation, a fraction: model FLOPs / (time · dense BF16 peak · devices),
    /// whatever the plan's precision (comparable across precisions).
    pub mfu: f64,
    /// Hardware FLOPs utilisation (with recomputation), a fraction, against the same peak.
    pub hfu: f64,
    /// MFU against the peak of the plan's own precision (NVIDIA's convention for FP8/FP4).
    pub mfu_at_precision_peak: f64,
    /// Model FLOPs per iteration (no recomputation).
    pub model_flops_per_iteration: f64,
    /// Memory per device, bytes (the first pipeline stage).
    pub memory_per_device_bytes: f64,
    /// Device memory capacity, bytes.
    pub memory_capacity_bytes: f64,
    /// Capacity set aside for the CUDA context, NCCL buffers, workspaces and allocator
    /// fragmentation, bytes (`--memory-reserve`; default 1.5 GiB + 3 % of HBM).
    pub memory_reserve_bytes: f64,
    /// `memory_capacity_bytes − memory_reserve_bytes − memory_per_device_bytes`, bytes
    /// (negative: does not fit).
    pub memory_headroom_bytes: f64,
    /// Whether `memory_per_device_bytes + memory_reserve_bytes ≤ memory_capacity_bytes`.
    pub fits: bool,
    /// The plan evaluated.
    pub plan: PlanValue,
    /// Where the iteration time goes, seconds per component.
    pub time_breakdown: TimeBreakdown,
    /// Memory per device by component, bytes.
    pub memory_breakdown: MemoryBreakdown,
    /// Network dimensions each parallel group spans.
    pub placement: Placement,
    /// Time and device-hours to train a token budget (with `--tokens`).
    pub training: Option<Training>,
    /// Plan settings that took their default (today's Megatron-LM/NeMo practice).
    pub defaults_used: Vec<String>,
    /// Remarks: does not fit, pipeline bubble, which stage the memory is for.
    pub notes: Vec<String>,
    /// `--explain` derivations, formulas with the numbers put in (empty without it).
    pub explain: Vec<String>,
}

/// Iteration time by component, seconds. `iteration_time_s` is the sum of the compute
/// parts, the bubble, the interference and every class's exposed communication.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct TimeBreakdown {
    /// Forward compute, all micro-batches.
    pub forward_s: f64,
    /// Backward compute.
    pub backward_s: f64,
    /// Recomputation in backward.
    pub recompute_s: f64,
    /// Optimizer step.
    pub optimizer_s: f64,
    /// Pipeline bubble (idle).
    pub pipeline_bubble_s: f64,
    /// Interference: compute slowed by the collectives it overlaps (docs/overlap.md).
    pub interference_s: f64,
    /// GPU time idle while the host issues operations (layers whose eager host time
    /// exceeds their GPU time; docs/modern-training.md, host launch).
    pub host_idle_s: f64,
    /// Bubble as a fraction of the ideal time, (p − 1)/(v · m).
    pub bubble_fraction: f64,
    /// Communication per parallelism class.
    pub communication: Communication,
    /// Offload transfers and where the state lives (only with an offload plan).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offload: Option<OffloadValue>,
}

/// An offload plan's cost per iteration and the bytes it keeps off HBM (docs/offload.md).
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct OffloadValue {
    /// The plan: "optimizer,gradients", "optimizer:nvme,gradients,params:nvme", ….
    pub plan: String,
    /// Transfers on the critical path, seconds (part of the iteration time).
    pub exposed_s: f64,
    /// Transfers hidden under compute, seconds.
    pub hidden_s: f64,
    /// The CPU optimizer step, seconds (the `optimizer_s` of an offloaded optimizer).
    pub cpu_optimizer_s: f64,
    /// Bytes moved per device per iteration: parameter fetches, activations (each way),
    /// streamed gradients, gradients at the step, parameters after the step.
    pub params_fetch_bytes: f64,
    /// See `params_fetch_bytes`.
    pub activations_bytes: f64,
    /// See `params_fetch_bytes`.
    pub grads_stream_bytes: f64,
    /// See `params_fetch_bytes`.
    pub grads_step_bytes: f64,
    /// See `params_fetch_bytes`.
    pub params_step_bytes: f64,
    /// Bytes per device held in host memory.
    pub host_bytes: f64,
    /// Bytes per device held on NVMe.
    pub nvme_bytes: f64,
}

impl OffloadValue {
    /// The value of an estimate's offload cost (`None` without an offload plan).
    pub fn of(c: &crate::offload::Cost) -> Option<OffloadValue> {
        c.plan.any().then(|| OffloadValue {
            plan: c.plan.name(),
            exposed_s: c.exposed().get(),
            hidden_s: c.hidden().get(),
            cpu_optimizer_s: c.cpu_step.get(),
            params_fetch_bytes: c.params_fetch.bytes,
            activations_bytes: c.activations.bytes,
            grads_stream_bytes: c.grads_stream.bytes,
            grads_step_bytes: c.grads_step.bytes,
            params_step_bytes: c.params_step.bytes,
            host_bytes: c.host_bytes,
            nvme_bytes: c.nvme_bytes,
        })
    }
}

/// Communication per class.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Communication {
    /// Tensor-parallel all-reduces.
    pub tp: CommValue,
    /// Sequence-parallel reduce-scatters and all-gathers.
    pub sp: CommValue,
    /// Expert-parallel all-to-alls.
    pub ep: CommValue,
    /// Pipeline send/recv.
    pub pp: CommValue,
    /// Data-parallel gradient reduction and ZeRO gathers.
    pub dp: CommValue,
    /// Context-parallel key/value exchange (ring) or all-to-alls (Ulysses).
    pub cp: CommValue,
}

/// One class of communication per iteration.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct CommValue {
    /// On the critical path, seconds.
    pub exposed_s: f64,
    /// Overlapped with compute, seconds (not in the iteration time).
    pub hidden_s: f64,
    /// Bytes sent per device per iteration (nccl-tests size convention).
    pub bytes_per_device: f64,
}

impl From<&Comm> for CommValue {
    fn from(c: &Comm) -> CommValue {
        CommValue {
            exposed_s: c.exposed.get(),
            hidden_s: c.hidden.get(),
            bytes_per_device: c.bytes.get(),
        }
    }
}

/// Memory per device by component, bytes.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct MemoryBreakdown {
    /// Parameters (16-bit copy).
    pub weights_bytes: f64,
    /// Gradients.
    pub gradients_bytes: f64,
    /// Optimizer states (fp32 master weights, Adam moments).
    pub optimizer_states_bytes: f64,
    /// Activations kept for backward.
    pub activations_bytes: f64,
    /// Communication buffers and staging.
    pub buffers_bytes: f64,
}

/// The network dimensions each group spans.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Placement {
    /// Tensor-parallel group.
    pub tp: Vec<DimUse>,
    /// Expert-parallel group.
    pub ep: Vec<DimUse>,
    /// Data-parallel group.
    pub dp: Vec<DimUse>,
    /// Pipeline group.
    pub pp: Vec<DimUse>,
}

/// A group's use of one network dimension.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct DimUse {
    /// Dimension index, innermost = 0.
    pub dim: u8,
    /// Building block: ring, fully-connected, switch.
    pub kind: String,
    /// How many of the dimension's NPUs the group spans.
    pub extent: u32,
    /// The dimension's size.
    pub size: u32,
}

/// Time to train a token budget.
#[derive(Clone, Debug, Serialize, JsonSchema)]
pub struct Training {
    /// The budget, tokens.
    pub tokens: f64,
    /// Wall time to train it, seconds.
    pub time_s: f64,
    /// Device-hours to train it.
    pub gpu_hours: f64,
}

fn dims(g: &GroupDims, system: &System) -> Vec<DimUse> {
    if g.size <= 1 {
        return Vec::new();
    }
    let all = system.topology.dims();
    g.dims()
        .iter()
        .zip(g.extent)
        .map(|(&i, extent)| DimUse {
            dim: i,
            kind: all
                .get(i as usize)
                .map_or_else(String::new, |d| d.kind.name().to_string()),
            extent,
            size: all.get(i as usize).map_or(0, |d| d.size),
        })
        .collect()
}

impl EstimateResult {
    /// The typed value of an estimate. `tokens` is the optional training budget;
    /// `defaults_used` names the plan settings that took their default.
    pub fn new(
        model: &Model,
        system: &System,
        e: &Estimate,
        tokens: Option<f64>,
        defaults_used: Vec<String>,
    ) -> EstimateResult {
        let t = &e.time;
        let m = &e.memory;
        let c = |k: CommClass| CommValue::from(t.class(k));
        let [tp, ep, dp, pp] = &e.groups;
        EstimateResult {
            schema_version: SCHEMA_VERSION,
            model: model.name().to_string(),
            system: system.name().to_string(),
            device: system.device.name().to_string(),
            iteration_time_s: t.total.get(),
            band: crate::band::of(model, system, e),
            tokens_per_s: e.metrics.tokens_per_s,
            samples_per_s: e.metrics.samples_per_s,
            mfu: e.metrics.mfu,
            hfu: e.metrics.hfu,
            mfu_at_precision_peak: e.metrics.mfu_at_precision_peak,
            model_flops_per_iteration: e.metrics.model_flops,
            memory_per_device_bytes: m.total.get(),
            memory_capacity_bytes: m.capacity.get(),
            memory_reserve_bytes: m.reserve.get(),
            memory_headroom_bytes: m.headroom(),
            fits: m.fits,
            plan: PlanValue::from(&e.plan),
            time_breakdown: TimeBreakdown {
                forward_s: t.forward.get(),
                backward_s: t.backward.get(),
                recompute_s: t.recompute.get(),
                optimizer_s: t.optimizer.get(),
                pipeline_bubble_s: t.bubble.get(),
                interference_s: t.interference.get(),
                host_idle_s: t.host.get(),
                bubble_fraction: e.plan.bubble_fraction(),
                communication: Communication {
                    tp: c(CommClass::Tp),
                    sp: c(CommClass::Sp),
                    ep: c(CommClass::Ep),
                    pp: c(CommClass::Pp),
                    dp: c(CommClass::Dp),
                    cp: c(CommClass::Cp),
                },
                offload: OffloadValue::of(&t.offload),
            },
            memory_breakdown: MemoryBreakdown {
                weights_bytes: m.weights.get(),
                gradients_bytes: m.gradients.get(),
                optimizer_states_bytes: m.optimizer.get(),
                activations_bytes: m.activations.get(),
                buffers_bytes: m.buffers.get(),
            },
            placement: Placement {
                tp: dims(tp, system),
                ep: dims(ep, system),
                dp: dims(dp, system),
                pp: dims(pp, system),
            },
            training: tokens.map(|n| Training {
                tokens: n,
                time_s: e.train_time(n).get(),
                gpu_hours: e.gpu_hours(n),
            }),
            defaults_used,
            notes: Vec::new(),
            explain: Vec::new(),
        }
    }

    /// The communication classes in report order, with their names.
    pub fn comm_classes(&self) -> [(&'static str, &CommValue); 6] {
        let c = &self.time_breakdown.communication;
        [
            ("TP", &c.tp),
            ("SP", &c.sp),
            ("EP", &c.ep),
            ("PP", &c.pp),
            ("DP", &c.dp),
            ("CP", &c.cp),
        ]
    }

    /// CSV tables: `summary` (one flat row), `time` (one row per component), `memory`.
    pub fn tables(&self) -> Result<Vec<Records>> {
        #[derive(Serialize)]
        struct TimeRow<'a> {
            component: &'a str,
            time_s: f64,
            hidden_s: Option<f64>,
            bytes_per_device: Option<f64>,
        }
        #[derive(Serialize)]
        struct MemRow<'a> {
            component: &'a str,
            bytes: f64,
        }
        let tb = &self.time_breakdown;
        let mut time = Vec::new();
        for (k, v) in [
            ("forward", tb.forward_s),
            ("backward", tb.backward_s),
            ("recompute", tb.recompute_s),
            ("optimizer", tb.optimizer_s),
            ("pipeline_bubble", tb.pipeline_bubble_s),
            ("interference", tb.interference_s),
            ("host_idle", tb.host_idle_s),
        ] {
            time.push(record(&TimeRow {
                component: k,
                time_s: v,
                hidden_s: None,
                bytes_per_device: None,
            })?);
        }
        for (k, c) in [
            ("tp_communication", &tb.communication.tp),
            ("sp_communication", &tb.communication.sp),
            ("ep_communication", &tb.communication.ep),
            ("pp_communication", &tb.communication.pp),
            ("dp_communication", &tb.communication.dp),
            ("cp_communication", &tb.communication.cp),
        ] {
            time.push(record(&TimeRow {
                component: k,
                time_s: c.exposed_s,
                hidden_s: Some(c.hidden_s),
                bytes_per_device: Some(c.bytes_per_device),
            })?);
        }
        if let Some(o) = &tb.offload {
            time.push(record(&TimeRow {
                component: "offload_transfers",
                time_s: o.exposed_s,
                hidden_s: Some(o.hidden_s),
                bytes_per_device: None,
            })?);
        }
        let mb = &self.memory_breakdown;
        let mut memory = Vec::new();
        for (k, v) in [
            ("weights", mb.weights_bytes),
            ("gradients", mb.gradients_bytes),
            ("optimizer_states", mb.optimizer_states_bytes),
            ("activations", mb.activations_bytes),
            ("buffers", mb.buffers_bytes),
        ] {
            memory.push(record(&MemRow {
                component: k,
                bytes: v,
            })?);
        }
        let mut summary = record(self)?;
        if let Some(o) = summary.as_object_mut() {
            o.remove("placement");
        }
        Ok(vec![
            ("summary", vec![summary]),
            ("time", time),
            ("memory", memory),
        ])
    }
}

//! Composes compute, collectives, the plan and memory into one training-iteration
//! [`Estimate`]: time breakdown, memory per device, communication per class, MFU/HFU.
//!
//! # API (for `compare`, `sweep` and library users)
//!
//! ```no_run
//! use astrolabe::{catalog, estimate, parallel::PlanSpec};
//! let model = catalog::model("gpt3-175b")?;                 // validated, plan-independent
//! let system = catalog::system("dgx-a100")?.with_gpus(64)?;  // device + topology
//! let spec = PlanSpec { tp: 8, pp: 8, global_batch: Some(64), ..PlanSpec::default() };
//! let plan = estimate::plan(&model, &system, &spec)?;        // validated, `Copy`
//! let e = estimate::evaluate(&model, &system, &plan)?;       // `Copy`, no allocation
//! println!("{} per iteration, MFU {:.1}%", e.time.total, 100.0 * e.metrics.mfu);
//! # Ok::<(), astrolabe::Error>(())
//! ```
//!
//! - [`plan`] validates a [`PlanSpec`] against the model and system (`Plan::new`).
//! - [`evaluate`] is the hot path: it allocates nothing and returns a fixed-size `Copy`
//!   [`Estimate`] (a few µs; a sweep can build `Plan`s directly and call it in parallel).
//! - [`explain`] runs the same computation and also returns the `--explain` lines (the
//!   formulas with the numbers put in); [`report::build`] turns an estimate into a
//!   [`crate::report::Report`].
//! - [`scenario`] reads a scenario file (model, system, plan and token budget in one TOML).
//!
//! Everything here is generic over a [`Trace`]: the hot path uses [`NoTrace`], whose
//! closures are never called, so the explanation costs nothing when it is not asked for.

pub mod bound;
mod memo;
pub mod report;
pub mod scenario;
mod simple;
mod transformer;
pub mod windows;

use crate::collective::{self, Collective, MAX_DIMS};
use crate::error::Result;
use crate::memory::Memory;
use crate::model::{Model, ModelKind};
use crate::parallel::{Placement, Plan, PlanSpec, Span};
use crate::system::System;
use crate::units::{Bytes, Seconds};

/// Communication classes, in report order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommClass {
    /// Tensor-parallel all-reduces (Megatron).
    Tp = 0,
    /// Sequence-parallel reduce-scatters and all-gathers.
    Sp = 1,
    /// Expert-parallel all-to-alls.
    Ep = 2,
    /// Pipeline send/recv (and embedding synchronisation).
    Pp = 3,
    /// Data-parallel gradient reduction and ZeRO gathers.
    Dp = 4,
    /// Context-parallel key/value exchange (ring) or all-to-alls (Ulysses).
    Cp = 5,
}

impl CommClass {
    /// All classes, in order.
    pub const ALL: [CommClass; 6] = [Self::Tp, Self::Sp, Self::Ep, Self::Pp, Self::Dp, Self::Cp];

    /// Short name ("TP").
    pub fn name(self) -> &'static str {
        ["TP", "SP", "EP", "PP", "DP", "CP"][self as usize]
    }
}

/// Time of one communication class per iteration, split into what the critical path
/// sees (exposed) and what overlaps with compute (hidden), and bytes sent per device.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Comm {
    /// On the critical path.
    pub exposed: Seconds,
    /// Overlapped with compute.
    pub hidden: Seconds,
    /// Bytes per device per iteration (nccl-tests size convention, summed over ops).
    pub bytes: Bytes,
}

/// Where an iteration's time goes, for the slowest pipeline stage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Times {
    /// Forward compute (all micro-batches).
    pub forward: Seconds,
    /// Backward compute.
    pub backward: Seconds,
    /// Recomputation in backward.
    pub recompute: Seconds,
    /// Optimizer step.
    pub optimizer: Seconds,
    /// Pipeline bubble (idle).
    pub bubble: Seconds,
    /// Interference: compute slowed while collectives overlap it (`windows` module).
    pub interference: Seconds,
    /// GPU time idle while the host issues operations (host-bound layers: the
    /// `transformer::host` module).
    pub host: Seconds,
    /// Communication per [`CommClass`].
    pub comm: [Comm; 6],
    /// Offload transfers and the CPU optimizer step (`crate::offload`); zero without an
    /// offload plan. Its exposed transfers join the total.
    pub offload: crate::offload::Cost,
    /// Iteration time: the sum of compute, interference, exposed communication, bubble,
    /// optimizer and exposed offload transfers.
    pub total: Seconds,
}

impl Times {
    /// One class.
    pub fn class(&self, c: CommClass) -> &Comm {
        &self.comm[c as usize]
    }
}

/// Throughput and utilisation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Tokens (or samples for non-sequence models) per second.
    pub tokens_per_s: f64,
    /// Samples (sequences) per second.
    pub samples_per_s: f64,
    /// Model FLOPs per iteration (no recomputation).
    pub model_flops: f64,
    /// Hardware FLOPs per iteration (with recomputation).
    pub hardware_flops: f64,
    /// Model FLOPs utilisation against the dense 16-bit (BF16) peak, whatever the plan's
    /// precision: model FLOPs / (time · peak_bf16 · devices). Comparable across precisions;
    /// what `--sort mfu` ranks by.
    pub mfu: f64,
    /// Hardware FLOPs utilisation, against the same BF16 peak.
    pub hfu: f64,
    /// MFU against the peak of the plan's own precision (NVIDIA's convention for FP8 and
    /// FP4 runs: an FP8 run's MFU is quoted against the FP8 peak). Equals `mfu` in BF16.
    pub mfu_at_precision_peak: f64,
}

/// Which network dimensions a group spans.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GroupDims {
    /// Group size.
    pub size: u32,
    /// Number of valid entries in `index`.
    pub n: u8,
    /// Topology dimension indices (innermost first).
    pub index: [u8; MAX_DIMS],
    /// The group's extent along each of those dimensions.
    pub extent: [u32; MAX_DIMS],
}

impl From<&Span> for GroupDims {
    fn from(s: &Span) -> GroupDims {
        GroupDims {
            size: s.size,
            n: s.n as u8,
            index: s.index,
            extent: std::array::from_fn(|i| s.dims[i].size),
        }
    }
}

impl GroupDims {
    /// The spanned dimension indices.
    pub fn dims(&self) -> &[u8] {
        &self.index[..self.n as usize]
    }
}

/// One training-iteration estimate. Fixed-size and `Copy`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// The plan evaluated.
    pub plan: Plan,
    /// Time breakdown.
    pub time: Times,
    /// Memory per device (the first pipeline stage, which holds the most activations).
    pub memory: Memory,
    /// Throughput and utilisation.
    pub metrics: Metrics,
    /// Group placement: [TP, EP, DP, PP].
    pub groups: [GroupDims; 4],
    /// Tokens per sample (sequence length; 1 for non-sequence models).
    pub tokens_per_sample: f64,
}

impl Estimate {
    /// Time to train on `tokens` tokens: `tokens / (tokens/s)`.
    pub fn train_time(&self, tokens: f64) -> Seconds {
        Seconds::new(tokens / self.metrics.tokens_per_s)
    }

    /// Device-hours to train on `tokens` tokens.
    pub fn gpu_hours(&self, tokens: f64) -> f64 {
        self.train_time(tokens).get() * self.plan.gpus as f64 / 3600.0
    }
}

/// Receives `--explain` lines. The closure is only called when the trace records.
pub trait Trace {
    /// Records one line.
    fn line(&mut self, f: impl FnOnce() -> String);
}

/// A trace that records nothing (the hot path).
pub struct NoTrace;

impl Trace for NoTrace {
    #[inline(always)]
    fn line(&mut self, _f: impl FnOnce() -> String) {}
}

impl Trace for Vec<String> {
    fn line(&mut self, f: impl FnOnce() -> String) {
        self.push(f());
    }
}

/// Validates a plan spec for this model and system (`gpus` defaults to the system's).
pub fn plan(model: &Model, system: &System, spec: &PlanSpec) -> Result<Plan> {
    Plan::new(spec, model, system.gpus().min(u32::MAX as u64) as u32)
}

/// Evaluates one plan. Allocates nothing.
pub fn evaluate(model: &Model, system: &System, plan: &Plan) -> Result<Estimate> {
    run(model, system, plan, &mut NoTrace, None)
}

/// [`evaluate`] reusing what `memo` holds from earlier plans (the sweep's hot loop). A memo
/// belongs to one model and one list of systems; `system_index` is `system`'s index in that
/// list. The result is identical to [`evaluate`]'s.
pub fn evaluate_memo(
    model: &Model,
    system: &System,
    system_index: usize,
    plan: &Plan,
    memo: &mut Memo,
) -> Result<Estimate> {
    run(
        model,
        system,
        plan,
        &mut NoTrace,
        Some((memo, system_index)),
    )
}

/// Per-thread reuse for one model over one list of systems: the most recent placements,
/// per-layer blocks and collectives of a sweep's hot loop (`estimate::memo`).
pub struct Memo {
    pub(crate) place: memo::PlaceMemo,
    pub(crate) layer: transformer::LayerMemo,
    pub(crate) coll: std::cell::RefCell<memo::CollCache>,
}

impl Memo {
    /// An empty memo.
    pub fn new() -> Memo {
        Memo {
            place: memo::Recent::new(),
            layer: memo::Recent::new(),
            coll: std::cell::RefCell::new(memo::Recent::new()),
        }
    }
}

impl Default for Memo {
    fn default() -> Self {
        Memo::new()
    }
}

/// Evaluates one plan and returns the `--explain` derivation lines with it.
pub fn explain(model: &Model, system: &System, plan: &Plan) -> Result<(Estimate, Vec<String>)> {
    let mut lines = Vec::new();
    let e = run(model, system, plan, &mut lines, None)?;
    Ok((e, lines))
}

fn run<T: Trace>(
    model: &Model,
    system: &System,
    plan: &Plan,
    tr: &mut T,
    memo: Option<(&mut Memo, usize)>,
) -> Result<Estimate> {
    if system.custom_collectives() {
        tr.line(|| system.describe_collectives());
    }
    let make = || Placement::new(plan, system.topology.dims());
    let (owned, place, layer);
    match memo {
        Some((memo, si)) => {
            let Memo {
                place: pc,
                layer: lc,
                coll,
            } = memo;
            place = memo::placement(pc, si, plan, make)?;
            layer = Some((lc, memo::Colls::new(coll, si)));
        }
        None => {
            owned = make()?;
            place = &owned;
            layer = None;
        }
    }
    match &model.kind {
        ModelKind::Transformer(t) => transformer::evaluate(t, system, plan, place, tr, layer),
        ModelKind::Dlrm(d) => simple::dlrm(d, system, plan, place, tr),
        ModelKind::Layered(l) => simple::layered(l, system, plan, place, tr),
    }
}

/// Time of `op` on `bytes` per device over a group's dimensions; zero for a group of one.
///
/// `opts` comes from the system's `[collective]` table (`System::collective`, or
/// `System::dp_collective` for the data-parallel reduction). With `algorithm = auto` the
/// estimate follows NCCL: rings for all-reduce, reduce-scatter and all-gather on NVSwitch
/// and IB (NVLS/SHARP aside), the fastest applicable algorithm for the other collectives.
/// A named algorithm that does not implement `op` on every spanned dimension
/// (parameter-server all-to-all or send/recv, in-network on a ring) falls back to that
/// choice for this `op`. Chunks and schedule pass through to `collective::total`.
pub(crate) fn coll(
    op: Collective,
    bytes: f64,
    span: &Span,
    opts: &collective::Options,
) -> Result<Seconds> {
    if span.size <= 1 || bytes <= 0.0 {
        return Ok(Seconds::ZERO);
    }
    let (dims, opts) = coll_options(op, span, opts);
    collective::total(op, Bytes::new(bytes), dims, &opts)
}

/// As [`coll`], and, when `want` (the collective shares a dimension with another in the
/// same window), its busy time on each topology dimension (its transfer time there), for
/// bandwidth sharing (`windows::shared`); otherwise the busy vector is zero and the fast
/// path computes the time.
pub(crate) fn coll_busy(
    op: Collective,
    bytes: f64,
    span: &Span,
    opts: &collective::Options,
    want: bool,
) -> Result<(Seconds, windows::Busy)> {
    let mut busy = [0.0; MAX_DIMS];
    if span.size <= 1 || bytes <= 0.0 {
        return Ok((Seconds::ZERO, busy));
    }
    if !want {
        return Ok((coll(op, bytes, span, opts)?, busy));
    }
    let (dims, opts) = coll_options(op, span, opts);
    let t = collective::time(op, Bytes::new(bytes), dims, &opts)?;
    for ph in t.phases() {
        busy[span.index[ph.dim] as usize] += ph.transfer.get();
    }
    Ok((t.total, busy))
}

fn coll_options<'a>(
    op: Collective,
    span: &'a Span,
    opts: &collective::Options,
) -> (&'a [crate::network::Dim], collective::Options) {
    let dims = span.slice();
    let algorithm = if opts.algorithm != collective::Algorithm::Auto
        && dims
            .iter()
            .all(|d| d.size <= 1 || collective::applies(op, opts.algorithm, d))
    {
        opts.algorithm
    } else {
        match op {
            Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather => {
                collective::Algorithm::Ring
            }
            _ => collective::Algorithm::Auto,
        }
    };
    (dims, collective::Options { algorithm, ..*opts })
}

/// Splits a communication time into (exposed, hidden) given the compute it may overlap.
pub(crate) fn overlap(comm: Seconds, window: Seconds, enabled: bool) -> (Seconds, Seconds) {
    if !enabled {
        return (comm, Seconds::ZERO);
    }
    let hidden = comm.min(window);
    (comm - hidden, hidden)
}

/// Sums the parts into `total` and derives throughput and utilisation; `peaks` are the
/// dense BF16 peak and the plan precision's peak (FLOP/s).
pub(crate) fn finish(
    mut t: Times,
    flops: (f64, f64),
    peaks: (f64, f64),
    plan: &Plan,
    tokens: f64,
) -> (Times, Metrics) {
    let (peak, peak_plan) = peaks;
    let exposed: Seconds = t.comm.iter().map(|c| c.exposed).sum();
    t.total = t.forward
        + t.backward
        + t.recompute
        + t.optimizer
        + t.bubble
        + t.interference
        + t.host
        + exposed
        + t.offload.exposed();
    let secs = t.total.get();
    let denom = secs * peak * plan.gpus as f64;
    let m = Metrics {
        tokens_per_s: tokens * plan.global_batch as f64 / secs,
        samples_per_s: plan.global_batch as f64 / secs,
        model_flops: flops.0,
        hardware_flops: flops.1,
        mfu: flops.0 / denom,
        hfu: flops.1 / denom,
        mfu_at_precision_peak: flops.0 / (secs * peak_plan * plan.gpus as f64),
    };
    (t, m)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A group of `size` devices on the first dimension of a DGX A100 (its 8-port NVSwitch,
    /// 300 GB/s per direction).
    fn span(size: u32) -> (Span, System) {
        let sys = crate::catalog::system("dgx-a100").unwrap();
        let mut d = sys.topology.dims()[0];
        d.size = size;
        let s = Span {
            size,
            n: usize::from(size > 1),
            index: [0; MAX_DIMS],
            dims: [d; MAX_DIMS],
        };
        (s, sys)
    }

    /// No bytes, or a group of one, sends nothing: no latency is paid either. Eight devices
    /// with 1 MiB to reduce do pay (a ring's 14 steps of at least the link latency).
    #[test]
    fn a_collective_of_nothing_costs_nothing() {
        let (eight, sys) = span(8);
        let (one, _) = span(1);
        let o = &sys.collective;
        let c = Collective::AllReduce;
        assert_eq!(coll(c, 0.0, &eight, o).unwrap(), Seconds::ZERO);
        assert_eq!(coll(c, 1.0e6, &one, o).unwrap(), Seconds::ZERO);
        for want in [false, true] {
            assert_eq!(coll_busy(c, 0.0, &eight, o, want).unwrap().0, Seconds::ZERO);
            assert_eq!(coll_busy(c, 1.0e6, &one, o, want).unwrap().0, Seconds::ZERO);
        }
        let lat = eight.dims[0].latency.get();
        assert!(coll(c, 1.048_576e6, &eight, o).unwrap().get() > 14.0 * lat);
    }
}

//! The search space. A grid is the Cartesian product of its [`Axes`]; it is laid out in
//! two levels so that the hot loop allocates nothing and rarely fails:
//!
//! - *structural* axes (device count, network, tp, pp, ep, context parallelism and its
//!   kind, sequence length, precision, micro-batch, schedule and interleaving depth) decide whether a plan is valid at all. Their product is small
//!   (thousands), so each combination is validated once up front with `Plan::new`; the
//!   invalid ones are counted per reason and never reach the hot loop;
//! - *knob* axes (ZeRO stage, recomputation, sequence parallel, DP/TP overlap, group
//!   order, flash attention) rarely make a valid plan invalid; the hot loop decodes a knob
//!   index (mixed radix) and sets the fields of a copy of the validated plan, and drops the
//!   few combinations no framework runs (ZeRO-2 with a pipeline; full recomputation beside
//!   the EP overlap or scoped CUDA graphs), which `Plan::new` refuses for an estimate.
//!
//! A knob that has no effect on a plan (sequence parallel with tp = 1, ZeRO with dp = 1,
//! TP overlap with tp = 1, DP overlap with dp = 1, group order with fewer than two
//! multi-device groups, flash attention on a non-transformer, selective recomputation with
//! flash attention, a pipeline schedule with pp = 1) would only repeat another
//! configuration: only its first listed value is evaluated, the others are counted as
//! *redundant* drops, so every distinct configuration is evaluated once.

use crate::compute::{Fp8Recipe, Precision};
use crate::error::{Error, Result};
use crate::estimate;
use crate::model::Model;
use crate::network::Topology;
use crate::parallel::{CpKind, Order, Plan, PlanSpec, Recompute, Schedule, Zero3Impl};
use crate::system::System;

/// The lists of values each axis takes.
#[derive(Clone, Debug, PartialEq)]
pub struct Axes {
    /// Device counts.
    pub gpus: Vec<u32>,
    /// Networks to compare (name, topology); empty means the system's own network.
    pub networks: Vec<(String, Topology)>,
    /// Tensor-parallel degrees; empty means every divisor of the device count.
    pub tp: Vec<u32>,
    /// Pipeline degrees; empty means every divisor of the device count.
    pub pp: Vec<u32>,
    /// Expert-parallel degrees; empty means 1 for dense models, every divisor otherwise.
    pub ep: Vec<u32>,
    /// (context-parallel degree, kind).
    pub cp: Vec<(u32, CpKind)>,
    /// Sequence lengths; empty means the model's.
    pub seq_len: Vec<u32>,
    /// (precision, FP8 recipe); a precision the device lacks is counted as invalid.
    pub precision: Vec<(Precision, Fp8Recipe)>,
    /// Whether the embedding and the loss count as one layer each of the pipeline split
    /// (Megatron-LM `account_for_{embedding,loss}_in_pipeline_split`): uneven first and
    /// last stages that carry the ends. Only plans with pp > 1 take `true`.
    pub ends: Vec<bool>,
    /// Expert tensor-parallel degrees; empty means etp = tp, and for MoE models also
    /// etp = 1 (see [`default_etp`]).
    pub etp: Vec<u32>,
    /// Micro-batch sizes.
    pub micro_batch: Vec<u32>,
    /// (schedule, chunks per stage v); v is 1 except for the interleaved schedule, where
    /// v = 0 stands for every v that splits the stages into equal chunks (`interleaved:all`).
    pub schedules: Vec<(Schedule, u32)>,
    /// ZeRO stages.
    pub zero: Vec<u8>,
    /// Recomputation modes.
    pub recompute: Vec<Recompute>,
    /// Sequence parallel off/on.
    pub sp: Vec<bool>,
    /// DP overlap off/on.
    pub dp_overlap: Vec<bool>,
    /// TP overlap off/on.
    pub tp_overlap: Vec<bool>,
    /// Group orders on the network.
    pub order: Vec<Order>,
    /// Flash attention off/on.
    pub flash: Vec<bool>,
    /// Offload plans (`crate::offload`); default: none only (the axis is off).
    pub offload: Vec<crate::offload::Offload>,
    /// Hardware axes (system parameters) beside the plan axes; empty: the system as is.
    pub hardware: super::hardware::HardwareAxes,
    /// How ZeRO-3 runs in every plan with `zero = 3` (a setting, not an axis).
    pub zero3_impl: Zero3Impl,
    /// Backward TP collectives beside the other GEMM in every plan (a setting, not an
    /// axis: it is the framework's version, not a choice; `PlanSpec::tp_bwd_overlap`).
    pub tp_bwd_overlap: bool,
    /// MoE all-to-alls overlapped with another micro-batch's compute in every plan (a
    /// setting: the framework's `overlap_moe_expert_parallel_comm`).
    pub ep_overlap: bool,
    /// Shared experts beside their micro-batch's all-to-alls in every plan (a setting: the
    /// framework's `moe_shared_expert_overlap`).
    pub shared_expert_overlap: bool,
    /// MoE token dispatch in every plan (a setting).
    pub ep_dispatch: crate::parallel::EpDispatch,
    /// How local experts' GEMMs run in every plan (a setting).
    pub grouped_gemm: crate::parallel::GroupedGemm,
    /// Loss kernels in every plan (a setting).
    pub cross_entropy: crate::parallel::CrossEntropy,
    /// Fused-attention kernel in every plan (a setting).
    pub attention_kernel: crate::parallel::AttentionKernel,
    /// Optimizer layout in every plan (a setting).
    pub optimizer: crate::parallel::Optimizer,
    /// Low-precision parameters in every 8- or 4-bit plan with ZeRO ≥ 1 (a setting; 16-bit
    /// and ZeRO-0 plans keep 16-bit weights).
    pub fp8_params: bool,
    /// 8-bit fused attention in every 8- or 4-bit plan with flash attention and the `te`
    /// kernel (a setting; other plans keep 16-bit attention).
    pub fp8_attention: bool,
    /// CUDA-graph-captured parts in every plan (a setting).
    pub cuda_graphs: crate::parallel::CudaGraphs,
    /// Submodules recomputed in every plan without full recomputation (a setting).
    pub recompute_modules: crate::parallel::RecomputeModules,
    /// Memory reserve per device in every plan (a setting; None: each device's).
    pub memory_reserve: Option<crate::units::Bytes>,
}

impl Axes {
    /// The default grid for `gpus` devices: every factorisation, micro-batches 1–16,
    /// GPipe, 1F1B and interleaved with every v that divides each stage's layers (and the
    /// middle stages equal: Megatron-core's rule, `equal_chunks`; NVIDIA's tuned runs use
    /// v = 5, 7, 10, 12 and 24 as well as 2–8), ZeRO
    /// 0–3 (not ZeRO-2 with a pipeline: no framework runs it), every recomputation mode,
    /// both group orders, context parallelism for long sequences ([`default_cp`]), and the
    /// practice switches (SP, TP and DP overlap, flash attention) on: Megatron-LM/NeMo
    /// practice, which the user sweeps by listing both values.
    pub fn default_for(gpus: u32) -> Axes {
        Axes {
            gpus: vec![gpus],
            networks: Vec::new(),
            tp: Vec::new(),
            pp: Vec::new(),
            ep: Vec::new(),
            cp: Vec::new(),
            seq_len: Vec::new(),
            precision: vec![(Precision::Bf16, Fp8Recipe::Delayed)],
            etp: Vec::new(),
            ends: vec![false, true],
            micro_batch: vec![1, 2, 4, 8, 16],
            schedules: vec![
                (Schedule::Gpipe, 1),
                (Schedule::OneFOneB, 1),
                (Schedule::Interleaved, 2),
                (Schedule::Interleaved, 3),
                (Schedule::Interleaved, 4),
                (Schedule::Interleaved, 5),
                (Schedule::Interleaved, 6),
                (Schedule::Interleaved, 8),
                (Schedule::Interleaved, 10),
                (Schedule::Interleaved, 12),
            ],
            zero: vec![0, 1, 2, 3],
            recompute: vec![Recompute::None, Recompute::Selective, Recompute::Full],
            sp: vec![true],
            dp_overlap: vec![true],
            tp_overlap: vec![true],
            order: vec![Order::TpDpPp, Order::TpPpDp],
            flash: vec![true],
            offload: vec![crate::offload::Offload::NONE],
            hardware: super::hardware::HardwareAxes::default(),
            zero3_impl: Zero3Impl::default(),
            tp_bwd_overlap: true,
            ep_overlap: false,
            shared_expert_overlap: false,
            ep_dispatch: crate::parallel::EpDispatch::Alltoall,
            grouped_gemm: crate::parallel::GroupedGemm::Streams,
            cross_entropy: crate::parallel::CrossEntropy::Unfused,
            attention_kernel: crate::parallel::AttentionKernel::Te,
            fp8_attention: false,
            optimizer: crate::parallel::Optimizer::Adam,
            fp8_params: false,
            cuda_graphs: crate::parallel::CudaGraphs::NONE,
            recompute_modules: crate::parallel::RecomputeModules::NONE,
            memory_reserve: None,
        }
    }

    /// Number of knob combinations per structural plan.
    pub fn knob_count(&self) -> u64 {
        [
            self.zero.len(),
            self.recompute.len(),
            self.sp.len(),
            self.dp_overlap.len(),
            self.tp_overlap.len(),
            self.order.len(),
            self.flash.len(),
            self.offload.len(),
        ]
        .iter()
        .map(|&n| n as u64)
        .product()
    }
}

/// Every divisor of `n`, ascending (trial division up to √n).
pub fn divisors(n: u32) -> Vec<u32> {
    let mut small = Vec::new();
    let mut large = Vec::new();
    let mut d = 1u32;
    while u64::from(d) * u64::from(d) <= u64::from(n) {
        if n.is_multiple_of(d) {
            small.push(d);
            if d != n / d {
                large.push(n / d);
            }
        }
        d += 1;
    }
    small.extend(large.into_iter().rev());
    small
}

/// The tp, pp and ep lists for `g` devices (empty axes take their defaults: every divisor,
/// or 1 for models without transformer layers; ep: every divisor for MoE models) and
/// whether tp or pp was given explicitly.
fn degree_lists(model: &Model, axes: &Axes, g: u32) -> (Vec<u32>, Vec<u32>, Vec<u32>, bool) {
    let all = divisors(g);
    // Models without transformer layers (DLRM, layered CNNs) run data parallel
    // only: their default tp and pp lists are [1].
    let dp_only = model.transformer().is_none();
    let pick = |v: &Vec<u32>| match (v.is_empty(), dp_only) {
        (false, _) => v.clone(),
        (true, true) => vec![1],
        (true, false) => all.clone(),
    };
    let eps = if !axes.ep.is_empty() {
        axes.ep.clone()
    } else if model.transformer().is_some_and(|t| t.experts > 1) {
        all.clone()
    } else {
        vec![1]
    };
    let explicit = !axes.tp.is_empty() || !axes.pp.is_empty();
    (pick(&axes.tp), pick(&axes.pp), eps, explicit)
}

/// Number of configurations [`Grid::build`] would lay out, counted without building
/// anything (no plan is validated), so a size limit can be checked before the work.
pub fn count_configs(model: &Model, axes: &Axes) -> u64 {
    // The CP × sequence × precision × ETP combinations, as the grid lays them out.
    let extra = extras(axes, model.transformer().map(|t| t.s as u32), is_moe(model)).len();
    let per_plan = u128::from(axes.knob_count()) * axes.micro_batch.len() as u128 * extra as u128;
    // Schedules per pipeline depth: `interleaved:all` stands for every depth that splits
    // that many stages into equal chunks.
    let schedules = |pp: u32| -> u128 {
        let ends: &[bool] = if axes.ends.is_empty() {
            &[false]
        } else {
            &axes.ends
        };
        (ends.iter())
            .map(|&e| expand_schedules(&axes.schedules, model, pp, e).len() as u128)
            .sum()
    };
    let systems = axes.networks.len().max(1) as u128 * axes.hardware.count().max(1) as u128;
    let mut total: u128 = 0;
    for &g in &axes.gpus {
        let (tps, pps, eps, explicit) = degree_lists(model, axes, g);
        let pairs: u128 = tps
            .iter()
            .flat_map(|&tp| pps.iter().map(move |&pp| (tp, pp)))
            .filter(|&(tp, pp)| explicit || g.is_multiple_of(tp.saturating_mul(pp)))
            .map(|(_, pp)| schedules(pp))
            .sum();
        total = total.saturating_add(systems * pairs * eps.len() as u128 * per_plan);
    }
    u64::try_from(total).unwrap_or(u64::MAX)
}

/// One valid structural plan and the index of the system it runs on.
#[derive(Clone, Copy, Debug)]
pub struct Structural {
    /// The validated plan (knob fields at their first values).
    pub plan: Plan,
    /// Index of its base system (device count × network); its hardware points are
    /// `system · H .. system · H + H` in [`Grid::systems`].
    pub system: usize,
}

/// A drop reason and how many configurations it removed.
#[derive(Clone, Debug, PartialEq)]
pub struct DropCount {
    /// What was wrong.
    pub reason: String,
    /// How many configurations.
    pub count: u64,
}

/// The expanded grid: the systems (one per device count × network × hardware point), the
/// valid structural plans, and the counts of invalid structural combinations per reason.
#[derive(Clone, Debug)]
pub struct Grid {
    /// The axes it was built from.
    pub axes: Axes,
    /// (label, system) per device count × network × hardware point (hardware fastest).
    pub systems: Vec<(String, System)>,
    /// Valid structural plans.
    pub structural: Vec<Structural>,
    /// Invalid structural combinations × knobs, per reason.
    pub invalid: Vec<DropCount>,
    /// Total configurations in the grid (valid or not).
    pub total: u64,
    /// Whether the model is a transformer (flash attention matters).
    pub transformer: bool,
    /// Hardware points per base system and knob combinations per structural plan, counted
    /// once from `axes` (the hot loop decodes every index with them).
    counts: (u64, u64),
}

impl Grid {
    /// Expands `axes` for `model` on `base` with this global batch.
    pub fn build(model: &Model, base: &System, global_batch: u32, axes: Axes) -> Result<Grid> {
        // A kernel the device has no rates for fails every plan alike: say so once.
        base.device.attention_rates(axes.attention_kernel)?;
        let mut systems = Vec::new();
        for &g in &axes.gpus {
            if axes.networks.is_empty() {
                let s = base.with_gpus(g)?;
                systems.push((format!("{} x{g}", base.name()), s));
            }
            for (name, topo) in &axes.networks {
                if topo.npus() != g as u64 {
                    return Err(Error::input(
                        "network",
                        format!("'{name}' has {} NPUs, not {g}", topo.npus()),
                    ));
                }
                let mut s = base.clone();
                s.topology = topo.clone();
                systems.push((name.clone(), s));
            }
        }
        // Plans are validated on the base systems (device count × network): a hardware
        // variant has the same devices, so the same plans are valid on it. The hardware
        // points of one plan are consecutive in the hot loop (index `plan · H + h`), so
        // a pruned search can share work between them (`prune`).
        let hw = axes.hardware.count() as u64;
        let knobs = axes.knob_count() * hw;
        // A single stage runs forward and backward per micro-batch (gradient accumulation):
        // 1F1B's memory, not GPipe's. Prefer 1F1B to stand for the schedules of pp = 1.
        let single_stage = (axes.schedules.iter())
            .position(|s| s.0 == Schedule::OneFOneB)
            .or_else(|| axes.schedules.iter().position(|s| s.1 == 1))
            .unwrap_or(0);
        let mut structural = Vec::new();
        let mut invalid = Drops::default();
        let mut total = 0u64;
        for (si, (_, sys)) in systems.iter().enumerate() {
            let g = sys.gpus() as u32;
            let (tps, pps, eps, explicit) = degree_lists(model, &axes, g);
            let extras = extras(
                &axes,
                model.transformer().map(|t| t.s as u32),
                is_moe(model),
            );
            for &tp in &tps {
                for &pp in &pps {
                    // Only factorisations dp·tp·pp = gpus belong to the default grid;
                    // explicit lists that do not factorise are counted as invalid.
                    if !explicit && !g.is_multiple_of(tp.saturating_mul(pp)) {
                        continue;
                    }
                    for (&ep, x) in eps.iter().flat_map(|e| extras.iter().map(move |x| (e, x))) {
                        let ((cp, cp_kind), seq, (precision, fp8_recipe), etp) = *x;
                        let ends_axis = axes
                            .micro_batch
                            .iter()
                            .flat_map(|&mb| axes.ends.iter().map(move |&ends| (mb, ends)));
                        for (mb, ends) in ends_axis {
                            let schedules = expand_schedules(&axes.schedules, model, pp, ends);
                            for &(k, (schedule, v)) in &schedules {
                                total += knobs;
                                // One stage has no pipeline: every schedule is the same run.
                                if pp == 1 && k != single_stage {
                                    invalid.add(REDUNDANT_SCHEDULE, knobs);
                                    continue;
                                }
                                // A single stage has no split to make uneven.
                                if pp == 1 && ends {
                                    invalid.add(REDUNDANT_ENDS, knobs);
                                    continue;
                                }
                                // The default ETP 1 of a MoE model is etp = tp when tp = 1.
                                if tp == 1 && etp == Some(1) && axes.etp.is_empty() {
                                    invalid.add(REDUNDANT_ETP, knobs);
                                    continue;
                                }
                                if sys.device.peak(precision).is_err() {
                                    invalid.add(
                                        &format!(
                                            "precision not supported by the device: {} on {}",
                                            precision.name(),
                                            sys.device.name()
                                        ),
                                        knobs,
                                    );
                                    continue;
                                }
                                let spec = PlanSpec {
                                    gpus: Some(g),
                                    tp,
                                    pp,
                                    ep,
                                    cp,
                                    cp_kind,
                                    seq_len: seq,
                                    precision,
                                    fp8_recipe,
                                    etp,
                                    micro_batch: mb,
                                    global_batch: Some(global_batch),
                                    schedule,
                                    virtual_stages: v,
                                    zero3_impl: Some(axes.zero3_impl),
                                    tp_bwd_overlap: axes.tp_bwd_overlap,
                                    ep_overlap: axes.ep_overlap,
                                    shared_expert_overlap: axes.shared_expert_overlap,
                                    ep_dispatch: axes.ep_dispatch,
                                    grouped_gemm: axes.grouped_gemm,
                                    cross_entropy: axes.cross_entropy,
                                    optimizer: axes.optimizer,
                                    cuda_graphs: axes.cuda_graphs,
                                    recompute_modules: axes.recompute_modules,
                                    memory_reserve: axes.memory_reserve,
                                    account_for_embedding: ends,
                                    account_for_loss: ends,
                                    ..PlanSpec::default()
                                };
                                match estimate::plan(model, sys, &spec) {
                                    // The ends as layers may split the layers as the plain
                                    // split does (Llama 3 405B on 8 stages: 15, 16 × 6, 15
                                    // either way): the same plan twice.
                                    Ok(plan)
                                        if ends
                                            && same_split_without_ends(
                                                model, sys, &spec, &plan,
                                            ) =>
                                    {
                                        invalid.add(REDUNDANT_ENDS, knobs)
                                    }
                                    Ok(plan) if !equal_chunks(&plan, ends) => {
                                        invalid.add(UNEQUAL_CHUNKS, knobs)
                                    }
                                    // The kernel of fused attention, which the knobs
                                    // switch on after this check (with flash attention
                                    // off it has nothing to run).
                                    Ok(plan) => structural.push(Structural {
                                        plan: crate::parallel::Plan {
                                            attention_kernel: axes.attention_kernel,
                                            ..plan
                                        },
                                        system: si,
                                    }),
                                    Err(e) => invalid.add(&reason(&e), knobs),
                                }
                            }
                        }
                    }
                }
            }
        }
        if !axes.hardware.is_empty() {
            let mut all = Vec::with_capacity(systems.len() * axes.hardware.count());
            for (name, s) in &systems {
                all.extend(axes.hardware.expand(s, name)?);
            }
            systems = all;
        }
        Ok(Grid {
            systems,
            structural,
            invalid: invalid.rows(),
            total,
            transformer: model.transformer().is_some(),
            counts: (hw, axes.knob_count()),
            axes,
        })
    }

    /// Number of hardware points per base system (1 without hardware axes).
    #[inline]
    pub fn hw_count(&self) -> u64 {
        self.counts.0
    }

    /// Number of knob combinations per structural plan ([`Axes::knob_count`]).
    #[inline]
    pub fn knob_count(&self) -> u64 {
        self.counts.1
    }

    /// Number of plan configurations (structural plans × knob combinations); each runs on
    /// [`Grid::hw_count`] hardware points.
    pub fn plan_len(&self) -> u64 {
        self.structural.len() as u64 * self.knob_count()
    }

    /// Number of configurations the hot loop visits: plans × hardware points.
    pub fn hot_len(&self) -> u64 {
        self.plan_len() * self.hw_count()
    }

    /// The configuration at hot-loop index `i = plan · H + h`: the plan with its knobs set,
    /// and its system index; `None` when the knob combination is redundant for this plan.
    #[inline]
    pub fn decode(&self, i: u64) -> Option<(Plan, usize)> {
        let hw = self.hw_count();
        let (p, b) = self.decode_plan(i / hw)?;
        Some((p, b * hw as usize + (i % hw) as usize))
    }

    /// Plan configuration `i` (< [`Grid::plan_len`]): the plan with its knobs set and its
    /// base system (hardware point 0 is `base · H`); `None` when the knob combination is
    /// redundant for this plan.
    #[inline]
    pub fn decode_plan(&self, i: u64) -> Option<(Plan, usize)> {
        let a = &self.axes;
        let k = self.knob_count();
        let s = self.structural[(i / k) as usize];
        let mut r = i % k;
        let mut next = |n: usize| {
            let v = (r % n as u64) as usize;
            r /= n as u64;
            v
        };
        let mut p = s.plan;
        p.zero = a.zero[next(a.zero.len())];
        // Low-precision parameters need an 8- or 4-bit precision and the distributed
        // optimizer or FSDP (`Plan::new`).
        p.fp8_params = a.fp8_params && p.precision.is_low() && p.zero >= 1;
        p.recompute = a.recompute[next(a.recompute.len())];
        if matches!(p.recompute, Recompute::Full | Recompute::Op) {
            // Full and per-op recomputation already recompute every module.
            p.recompute_modules = crate::parallel::RecomputeModules::NONE;
        }
        let sp = a.sp[next(a.sp.len())];
        p.dp_overlap = a.dp_overlap[next(a.dp_overlap.len())];
        p.tp_overlap = a.tp_overlap[next(a.tp_overlap.len())];
        p.order = a.order[next(a.order.len())];
        p.flash_attention = a.flash[next(a.flash.len())];
        // 8-bit attention runs inside an 8- or 4-bit recipe's fused TE kernel (`Plan::new`).
        p.fp8_attention = a.fp8_attention
            && crate::parallel::fp8_attention_runs(
                p.precision,
                p.flash_attention,
                p.attention_kernel,
            );
        p.offload = a.offload[next(a.offload.len())];
        p.sp = sp && p.tp > 1;
        // A knob with no effect on this plan keeps only its first listed value; a knob
        // combination no framework runs is dropped (both counted under `HOT_REASONS[0]`).
        let groups = (p.dp > 1) as u32 + (p.pp > 1) as u32;
        let redundant = (p.tp == 1 && (sp != a.sp[0] || p.tp_overlap != a.tp_overlap[0]))
            || (p.dp == 1 && (p.zero != a.zero[0] || p.dp_overlap != a.dp_overlap[0]))
            || (groups < 2 && p.order != a.order[0])
            || (!self.transformer && p.flash_attention != a.flash[0])
            || (p.flash_attention
                && p.recompute != canonical_light_recompute(&a.recompute, p.recompute))
            // ZeRO-2 with a pipeline runs in no framework (`Plan::new` refuses it).
            || (p.zero == 2 && p.pp > 1)
            // Megatron-core's EP overlap refuses full recomputation (`Plan::check_ep_overlap`),
            // and so do its scoped CUDA graphs (`Plan::new`).
            || (p.recompute == Recompute::Full
                && (p.ep_overlap || !crate::parallel::full_recompute_graphs(p.cuda_graphs)))
            // Parameter offload is a ZeRO-3 feature (`offload::check_plan`).
            || (p.offload.params.off() && p.zero != 3);
        (!redundant).then_some((p, s.system))
    }
}

/// A structural combination beyond tp/pp/ep: (CP degree and kind), sequence length
/// (None = the model's), (precision, recipe), expert tensor parallelism (None = tp).
type Extra = (
    (u32, CpKind),
    Option<u32>,
    (Precision, Fp8Recipe),
    Option<u32>,
);

/// Context-parallel degrees of the default grid at sequence length `seq`: powers of two
/// keeping at least 4,096 tokens per rank, from 8,192 tokens up (1 below). Published long
/// runs sit there: Megatron-Bridge's Llama 3.1 405B recipes run CP 2 at 8,192 tokens
/// (`perf_recipes/llama/h100/llama31.py`), Llama 3 405B ran CP 16 at 131,072 (Dubey et
/// al. 2024, Table 4: 8,192 tokens per rank).
pub fn default_cp(seq: u32) -> Vec<u32> {
    let mut out = vec![1];
    while seq >= 8192 && seq / (2 * out[out.len() - 1]) >= 4096 {
        out.push(2 * out[out.len() - 1]);
    }
    out
}

/// Whether `model` has routed experts.
fn is_moe(model: &Model) -> bool {
    model.transformer().is_some_and(|t| t.experts > 1)
}

/// The default expert tensor-parallel choices of a MoE model: Megatron-core's default
/// `etp = tp` (`None`) and `etp = 1`, the experts unsplit while attention keeps its TP
/// (MoE parallel folding, arXiv 2504.14960 §3; NVIDIA's Qwen3, DeepSeek-V3 and gpt-oss
/// recipes set `expert_tensor_parallel_size = 1`). A dense model has no experts: `None`.
pub fn default_etp(moe: bool) -> Vec<Option<u32>> {
    if moe { vec![None, Some(1)] } else { vec![None] }
}

/// The product of the CP, sequence-length, precision and ETP axes; an empty CP axis is
/// [`default_cp`] of each sequence length (`model_seq` when the axis has none), an empty
/// ETP axis [`default_etp`].
fn extras(a: &Axes, model_seq: Option<u32>, moe: bool) -> Vec<Extra> {
    let opt = |v: &[u32]| -> Vec<Option<u32>> {
        if v.is_empty() {
            vec![None]
        } else {
            v.iter().map(|&s| Some(s)).collect()
        }
    };
    let seqs = opt(&a.seq_len);
    let etps = if a.etp.is_empty() {
        default_etp(moe)
    } else {
        opt(&a.etp)
    };
    let mut out = Vec::new();
    for &s in &seqs {
        let cps = if a.cp.is_empty() {
            let seq = s.or(model_seq).unwrap_or(0);
            default_cp(seq)
                .into_iter()
                .map(|c| (c, CpKind::Ring))
                .collect()
        } else {
            a.cp.clone()
        };
        for &cp in &cps {
            for &p in &a.precision {
                out.extend(etps.iter().map(|&e| (cp, s, p, e)));
            }
        }
    }
    out
}

/// Reason counted for the embedding and loss as pipeline layers when they change nothing.
const REDUNDANT_ENDS: &str = "redundant: the embedding and loss as pipeline layers split the layers as the plain split does (or pp = 1)";

/// Whether `plan` (built from `spec` with the ends as layers) splits its layers over the
/// stages exactly as the plain split of the same plan does.
fn same_split_without_ends(model: &Model, sys: &System, spec: &PlanSpec, plan: &Plan) -> bool {
    let plain = PlanSpec {
        account_for_embedding: false,
        account_for_loss: false,
        ..spec.clone()
    };
    estimate::plan(model, sys, &plain).is_ok_and(|p| p.stages == plan.stages)
}

/// The schedules of one pipeline depth, each with its index in `list`: the marker
/// `(Interleaved, 0)` (`interleaved:all`) becomes every `v ≥ 2` that splits the `pp`
/// stages of the model's default split (the embedding and loss as layers when `ends`)
/// into equal chunks ([`equal_chunks`]), in increasing order; a single stage keeps the
/// marker, which the grid drops as a redundant schedule. Other entries stay as they are.
fn expand_schedules(
    list: &[(Schedule, u32)],
    model: &Model,
    pp: u32,
    ends: bool,
) -> Vec<(usize, (Schedule, u32))> {
    let mut out = Vec::with_capacity(list.len());
    for (k, &s) in list.iter().enumerate() {
        if s != (Schedule::Interleaved, 0) || pp <= 1 {
            out.push((k, s));
            continue;
        }
        let split = crate::parallel::SplitSpec {
            embedding_as_layer: ends,
            loss_as_layer: ends,
            ..Default::default()
        };
        let Some(st) = model
            .transformer()
            .and_then(|t| crate::parallel::Stages::new(t.layers, pp, &split).ok())
        else {
            continue;
        };
        let e = u32::from(ends);
        let most = st.first.max(st.last).max(st.mid_max) + e;
        out.extend(
            (2..=most)
                .filter(|&v| stages_split_into(&st, v, ends))
                .map(|v| (k, (Schedule::Interleaved, v))),
        );
    }
    out
}

/// Whether every stage of `st` splits into `v` equal chunks and the middle stages are
/// equal (Megatron-core's rule, [`equal_chunks`]).
fn stages_split_into(st: &crate::parallel::Stages, v: u32, ends: bool) -> bool {
    let e = u32::from(ends);
    let mids = st.pp.saturating_sub(2);
    let mid_ok = mids == 0 || (st.mid_max * mids == st.mid_sum && st.mid_max.is_multiple_of(v));
    (st.first + e).is_multiple_of(v) && (st.last + e).is_multiple_of(v) && mid_ok
}

/// Reason counted for interleaved plans whose stages do not split into equal chunks.
const UNEQUAL_CHUNKS: &str = "not run by Megatron-core: the interleaved schedule needs every stage's layers (with the embedding and loss when counted) divisible by v, the middle stages equal";

/// Whether Megatron-core runs an interleaved split as it stands (no custom
/// `pipeline_model_parallel_layout`): every stage's layers divisible by the chunks per stage
/// `v`, the middle stages holding the same number (`TransformerConfig.__post_init__` for
/// `num_layers_in_{first,last}_pipeline_stage` and `account_for_*_in_pipeline_split`;
/// `TransformerBlock`'s even split: `num_layers / pp` divisible by `v`). The embedding and
/// the loss count as layers of the end stages when `ends`. Chunks then hold equal layer
/// counts, which the estimate assumes: its bubble and windows divide a stage's time by
/// `v`. Any split with `v` = 1 passes.
fn equal_chunks(plan: &Plan, ends: bool) -> bool {
    let v = plan.v;
    if v <= 1 {
        return true;
    }
    stages_split_into(&plan.stages, v, ends)
}

/// Reason counted for the default ETP 1 of a plan with TP 1 (the same plan as etp = tp).
const REDUNDANT_ETP: &str =
    "redundant: expert TP 1 with TP 1 (the default etp = tp is the same plan)";

/// Reason counted for pipeline schedules of a single-stage plan.
const REDUNDANT_SCHEDULE: &str =
    "redundant: a pipeline schedule of a single-stage plan (pp = 1 has no pipeline)";

/// With flash attention, selective recomputation (of the attention core) is what flash
/// attention already does in backward, so `selective` and `none` are the same run: the one
/// listed first stands for both. Other modes map to themselves.
fn canonical_light_recompute(list: &[Recompute], r: Recompute) -> Recompute {
    let light = |m: Recompute| matches!(m, Recompute::None | Recompute::Selective);
    if !light(r) {
        return r;
    }
    list.iter().copied().find(|&m| light(m)).unwrap_or(r)
}

/// Device counts [`nearest_valid_gpus`] tries at most, so the hint stays instant.
const NEAREST_TRIES: usize = 64;

/// The largest device count below `gpus` (down to half of it, at most 64 counts tried)
/// for which at least one structural plan is valid, to suggest when none is valid at
/// `gpus` itself.
pub fn nearest_valid_gpus(
    model: &Model,
    base: &System,
    global_batch: u32,
    axes: &Axes,
    gpus: u32,
) -> Option<u32> {
    let mut a = axes.clone();
    a.networks.clear();
    (gpus / 2..gpus).rev().take(NEAREST_TRIES).find(|&g| {
        a.gpus = vec![g];
        base.with_gpus(g).is_ok()
            && Grid::build(model, base, global_batch, a.clone())
                .is_ok_and(|gr| !gr.structural.is_empty())
    })
}

/// The reason text of a plan error.
fn reason(e: &Error) -> String {
    let msg = e.to_string();
    msg.trim_start_matches("invalid plan: ").to_string()
}

/// A reason's template: its numbers replaced by N, so equal causes with different numbers
/// group ("N is not a multiple of dp·micro_batch = N").
fn template(reason: &str) -> String {
    let mut out = String::with_capacity(reason.len());
    for c in reason.chars() {
        if c.is_ascii_digit() {
            if !out.ends_with('N') {
                out.push('N');
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Drop reasons grouped by template: the first message seen (with its numbers), the
/// distinct messages and the configurations counted.
#[derive(Default)]
struct Drops(Vec<(String, String, std::collections::HashSet<String>, u64)>);

impl Drops {
    fn add(&mut self, reason: &str, n: u64) {
        let t = template(reason);
        match self.0.iter_mut().find(|d| d.0 == t) {
            Some(d) => {
                d.3 += n;
                if !d.2.contains(reason) {
                    d.2.insert(reason.to_string());
                }
            }
            None => {
                let seen = std::iter::once(reason.to_string()).collect();
                self.0.push((t, reason.to_string(), seen, n));
            }
        }
    }

    /// One row per template: the first message with its numbers, and how many other
    /// messages of the same kind there were.
    fn rows(self) -> Vec<DropCount> {
        (self.0.into_iter())
            .map(|(_, first, seen, count)| DropCount {
                reason: match seen.len() {
                    1 => first,
                    n => format!("{first} (and {} more like it with other numbers)", n - 1),
                },
                count,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn divisors_of_512_and_96() {
        assert_eq!(divisors(512), vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 512]);
        assert_eq!(divisors(96).len(), 12); // 96 = 2^5·3 → (5+1)(1+1)
        assert_eq!(divisors(36), vec![1, 2, 3, 4, 6, 9, 12, 18, 36]);
        assert_eq!(divisors(1), vec![1]);
        assert_eq!(divisors(4_294_967_291).len(), 2); // the largest 32-bit prime
    }

    #[test]
    fn interleaved_all_lists_the_depths_megatron_core_runs() {
        let gpt3 = crate::catalog::model("gpt3-175b").unwrap(); // 96 layers
        let llama = crate::catalog::model("llama3-405b").unwrap(); // 126 layers
        let all = [(Schedule::Interleaved, 0)];
        let depths = |m: &Model, pp: u32, ends: bool| -> Vec<u32> {
            (expand_schedules(&all, m, pp, ends).iter())
                .map(|(_, (_, v))| *v)
                .collect()
        };
        // 96 on 8 stages: 12 layers each; v ∈ divisors of 12 above 1.
        assert_eq!(depths(&gpt3, 8, false), vec![2, 3, 4, 6, 12]);
        // 96 on 9 stages: 10 + 11·6 + 10·1 + 10, middle stages unequal → none.
        assert_eq!(depths(&gpt3, 9, false), Vec::<u32>::new());
        // 96 + 2 on 8 stages does not divide: Megatron-LM refuses the split.
        assert_eq!(depths(&gpt3, 8, true), Vec::<u32>::new());
        // Llama 3 405B: 126 + 2 on 16 stages = 8 units each (NVIDIA's VP 4 and 8).
        assert_eq!(depths(&llama, 16, true), vec![2, 4, 8]);
        // 126 on 16 without the ends: 7 + 8·14 + 7; 7 and 8 share no divisor above 1.
        assert_eq!(depths(&llama, 16, false), Vec::<u32>::new());
        // 126 on 9: 14 each (NVIDIA's VP 7 with CP 2 on 576 GPUs).
        assert_eq!(depths(&llama, 9, false), vec![2, 7, 14]);
        // A single stage keeps the marker (the grid drops it as a redundant schedule);
        // other schedules pass through with their index.
        let mixed = [(Schedule::OneFOneB, 1), (Schedule::Interleaved, 0)];
        assert_eq!(
            expand_schedules(&mixed, &gpt3, 1, false),
            vec![
                (0, (Schedule::OneFOneB, 1)),
                (1, (Schedule::Interleaved, 0))
            ]
        );
        assert_eq!(expand_schedules(&mixed, &gpt3, 16, false).len(), 1 + 3); // 6 each: 2, 3, 6
    }

    /// `count_configs` (the limit check, before anything is built) counts what
    /// `Grid::build` lays out, with extra axes (sequence lengths, precisions, CP for long
    /// sequences, ETP for MoE) and `interleaved:all` expanded per pipeline depth.
    #[test]
    fn counted_configurations_are_the_built_ones() {
        let sys = crate::catalog::system("dgx-h100").unwrap();
        for (name, gpus, long) in [("llama3-8b", 16, true), ("mixtral-8x7b", 16, false)] {
            let model = crate::catalog::model(name).unwrap();
            let mut axes = Axes::default_for(gpus);
            axes.seq_len = if long { vec![4096, 16384] } else { vec![4096] };
            axes.precision = vec![
                (Precision::Bf16, Fp8Recipe::Delayed),
                (Precision::Fp8, Fp8Recipe::Delayed),
            ];
            axes.schedules.push((Schedule::Interleaved, 0));
            let counted = count_configs(&model, &axes);
            let built = Grid::build(&model, &sys, 64, axes).unwrap().total;
            assert_eq!(counted, built, "{name}");
        }
    }

    #[test]
    fn knob_count_is_the_product() {
        // ZeRO 0–3, three recomputation modes, two group orders; SP, TP and DP overlap and
        // flash attention fixed at today's practice.
        let a = Axes::default_for(8);
        assert_eq!(a.knob_count(), 4 * 3 * 2);
    }
}

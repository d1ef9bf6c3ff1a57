//! One training iteration of a transformer scenario as per-NPU Chakra traces, with the
//! communicator groups ASTRA-sim reads through `--comm-group-configuration`.
//!
//! Ranks are numbered TP-fastest, rank = t + tp·(d + dp·p), as the symbolic-tensor-graph
//! traces in `tests/data/astra`. Each NPU's trace holds, for every micro-batch in its
//! stage's pipeline order (1F1B: `min(pp−1−p, m)` warm-up forwards, then one forward and
//! one backward alternately, then the remaining backwards; GPipe: all forwards first):
//!
//! - forward, per layer of the stage, two blocks (attention, MLP), each
//!   `[AG] COMP [RS]` with sequence parallelism or `COMP AR` without (Megatron-LM TP:
//!   Shoeybi et al. 2019 §3; SP: Korthikanti et al. 2022 §4.2.2);
//! - backward, layers and blocks reversed, each `AG(grad) AG(input) COMP RS` with SP
//!   (6 all-gathers and 4 reduce-scatters per layer and micro-batch, as the reference
//!   traces) or `COMP AR` without;
//! - the logits on the last stage; a receive before and a send after every pass that
//!   crosses a stage boundary, of b·s·h/t activation elements (scatter/gather, Narayanan
//!   et al. SC'21 §4.1);
//! - after the last backward, a DP all-reduce per layer of its gradients (ZeRO ≥ 1:
//!   reduce-scatter + all-gather), and one for the embedding on the first stage.
//!
//! FLOPs come from the model's own counts: a layer's forward per token is
//! `(F_fwd/token − 2·V·h)/L` ([`Transformer::forward_flops_per_token`]); the MLP block
//! takes `2·top_k·P_mlp` of it and attention the rest; the logits take `2·V·h`. Backward is
//! twice the forward, plus the forward again with full recomputation or the attention
//! core ([`Transformer::attention_core_flops_per_token`]) with selective. Everything is
//! divided by t. `num_ops` is written in FLOPs and `tensor_size`/`comm_size` in bytes,
//! which is how ASTRA-sim reads them. A node's ctrl dep on the previous pass's last node
//! keeps the schedule's order; data deps chain the nodes within a pass.
//!
//! An offloaded plan ([`Generator::offloaded`]) adds MEM_LOAD_NODE / MEM_STORE_NODE nodes
//! (`tensor_size` in bytes, `is_cpu_op` false), one per transfer per layer as the
//! estimate counts them ([`OffloadNodes`]), and the CPU optimizer step as a COMP_NODE
//! with `is_cpu_op` true and its `duration_micros` (ASTRA-sim replays CPU nodes):
//!
//! - parameters: a load of the layer's shard before each forward and backward of the
//!   layer (two in backward when DeepSpeed 2021 re-gathers for the recomputed forward),
//!   issued one layer ahead (each load waits for the previous layer's load and for the
//!   start of the layer before; the layer's first node waits for its load);
//! - activations: a store after each layer's forward, a load (after that store) one
//!   layer ahead of the layer's backward;
//! - streamed gradients: a store after each layer's backward (fp32 on the last
//!   micro-batch);
//! - the step: with the optimizer offloaded, a gradient store per layer after its DP
//!   reduction (unless streamed), the CPU step after all of them, then a load of each
//!   layer's updated parameters (a store when they live on the parameter tier); with
//!   parameters alone offloaded, a store per layer of the updated shard after its DP
//!   reduction.

use super::chakra::TraceFile;
use super::system_json::RemoteMemory;
use crate::error::{Error, Result};
use crate::model::Model;
use crate::model::transformer::Transformer;
use crate::parallel::{Plan, Recompute, Schedule};

mod passes;
use passes::npu_trace;

/// One iteration: a trace per NPU (rank order) and the communicator groups (id, ranks).
#[derive(Clone, Debug)]
pub struct Iteration {
    /// One trace per rank.
    pub traces: Vec<TraceFile>,
    /// Communicator groups in id order: DP groups first, then TP groups.
    pub groups: Vec<(u32, Vec<u32>)>,
}

impl Iteration {
    /// The `--comm-group-configuration` JSON: `{"1": [0, 4], ...}`.
    pub fn groups_json(&self) -> String {
        groups_json(&self.groups)
    }
}

/// The `--comm-group-configuration` JSON of `groups`: `{"1": [0, 4], ...}`.
pub fn groups_json(groups: &[(u32, Vec<u32>)]) -> String {
    {
        let items: Vec<String> = groups
            .iter()
            .map(|(id, m)| {
                let r: Vec<String> = m.iter().map(|x| x.to_string()).collect();
                format!("\"{id}\": [{}]", r.join(", "))
            })
            .collect();
        format!("{{{}}}\n", items.join(", "))
    }
}

/// Sizes of one rank's work, derived once.
pub(super) struct Sizes {
    /// Forward FLOPs of (attention, MLP) per micro-batch on one rank.
    pub(super) fwd: [f64; 2],
    /// Extra backward FLOPs from recomputation per block.
    pub(super) recompute: [f64; 2],
    /// Weight bytes per block on one rank.
    pub(super) weights: [f64; 2],
    /// Logits forward FLOPs per micro-batch on one rank.
    pub(super) head: f64,
    /// b·s·h activation bytes.
    pub(super) act: f64,
    /// Gradient bytes of one layer on one rank.
    pub(super) layer_grad: f64,
    /// Gradient bytes of the embedding on one rank.
    pub(super) emb_grad: f64,
}

fn sizes(m: &Transformer, plan: &Plan) -> Sizes {
    let t = plan.tp as f64;
    let tokens = plan.micro_batch as f64 * m.s;
    let layer = (m.forward_flops_per_token() - 2.0 * m.v * m.h) / m.layers as f64;
    let mlp = 2.0 * m.top_k as f64 * m.mlp_params;
    let fwd = [(layer - mlp) * tokens / t, mlp * tokens / t];
    let recompute = match plan.recompute {
        Recompute::None => [0.0, 0.0],
        Recompute::Selective => [m.attention_core_flops_per_token() * tokens / t, 0.0],
        Recompute::Full => fwd,
        Recompute::Op => {
            let (a, f) = m.op_recompute_flops_per_token();
            [a * tokens / t, f * tokens / t]
        }
    };
    let wb = plan.precision.activation_bytes();
    let gb = plan.optimizer.bytes_per_param().1;
    Sizes {
        fwd,
        recompute,
        weights: [m.attn_params * wb / t, m.mlp_params * wb / t],
        head: 2.0 * m.v * m.h * tokens / t,
        act: tokens * m.h * wb,
        layer_grad: m.layer_params() * gb / t,
        emb_grad: m.v * m.h * gb / t,
    }
}

/// The offload transfers of one rank as nodes: bytes of one node of each kind (0: no
/// such node), derived from the estimate's [`crate::offload::Cost`] of one device of the
/// slowest stage (every rank carries those sizes, as the estimate counts them), with `L`
/// layers per stage and `m` micro-batches:
///
/// - `fetch` = params_fetch / (m·(1 + f)·L), `f` backward loads per layer;
/// - `act` = activations / (m·L) (stored in forward, loaded in backward);
/// - `grad_stream` = P·(g, 4)/L with P = grads_stream / ((m − 1)·g + 4): `g`-byte
///   gradients every micro-batch but the last, fp32 (4 B) on the last;
/// - `grad_step` = grads_step / L, `params_step` = params_step / L.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OffloadNodes {
    /// One layer's parameter shard, loaded before each pass of the layer.
    pub fetch: f64,
    /// Parameter loads per layer in backward (`f`: 2 when DeepSpeed 2021 re-gathers for
    /// the recomputed forward, else 1).
    pub bwd_fetches: u32,
    /// One layer's activations of one micro-batch.
    pub act: f64,
    /// One layer's streamed gradients: (every micro-batch but the last, the last).
    pub grad_stream: (f64, f64),
    /// One layer's gradients stored at the step (optimizer offload without streaming).
    pub grad_step: f64,
    /// One layer's updated parameters after the step.
    pub params_step: f64,
    /// Whether `params_step` is a store (to the parameter tier) rather than a load.
    pub params_store: bool,
    /// The CPU optimizer step, µs (rounded); None when the optimizer stays on the GPU.
    pub cpu_step_us: Option<u64>,
}

impl OffloadNodes {
    /// The nodes of `cost` for `plan` with `layers` layers per stage (formulas above).
    pub fn new(plan: &Plan, layers: u32, cost: &crate::offload::Cost) -> OffloadNodes {
        use crate::offload::cost::FP32_GRAD;
        let o = &plan.offload;
        let l = f64::from(layers.max(1));
        let m = f64::from(plan.micro_batches.max(1));
        let regather = plan.zero3_impl == crate::parallel::Zero3Impl::Deepspeed2021
            && plan.recompute == Recompute::Full;
        let f = if regather { 2 } else { 1 };
        let g = plan.optimizer.bytes_per_param().1;
        let p_opt = cost.grads_stream.bytes / ((m - 1.0) * g + FP32_GRAD);
        OffloadNodes {
            fetch: cost.params_fetch.bytes / (m * f64::from(1 + f) * l),
            bwd_fetches: f,
            act: cost.activations.bytes / (m * l),
            grad_stream: (p_opt * g / l, p_opt * FP32_GRAD / l),
            grad_step: cost.grads_step.bytes / l,
            params_step: cost.params_step.bytes / l,
            params_store: o.params.off(),
            cpu_step_us: o
                .optimizer
                .off()
                .then(|| (cost.cpu_step.get() * 1e6).round() as u64),
        }
    }

    /// Extra nodes of one rank: per micro-batch `L·([fetch] + [act])` in forward and
    /// `L·(f·[fetch] + [act] + [grad_stream])` in backward, then
    /// `L·[grad_step] + [cpu step] + L·[params_step]` at the step (`[x]` = 1 when that
    /// node kind exists).
    pub fn nodes(&self, layers: u32, micro_batches: u32) -> u64 {
        let has = |b: f64| u64::from(b > 0.0);
        let l = u64::from(layers);
        let fwd = l * (has(self.fetch) + has(self.act));
        let bwd = l
            * (u64::from(self.bwd_fetches) * has(self.fetch)
                + has(self.act)
                + has(self.grad_stream.0 + self.grad_stream.1));
        let step = l * (has(self.grad_step) + has(self.params_step))
            + u64::from(self.cpu_step_us.is_some());
        u64::from(micro_batches) * (fwd + bwd) + step
    }
}

/// The tier an offloaded plan moves data to, as ASTRA-sim's one remote memory: the
/// parameter tier, the host for activations, the optimizer's tier for gradients and the
/// step. None without offload; an error when the plan uses two tiers (ASTRA-sim has one
/// remote memory per run) or the system lacks the tier.
pub fn offload_tier(
    plan: &Plan,
    tiers: &crate::offload::Tiers,
) -> Result<Option<crate::offload::Tier>> {
    use crate::offload::TierKind;
    let o = &plan.offload;
    if o.activation_layers > 0 {
        return Err(Error::input(
            "offload",
            format!(
                "export astra: activations={} (some layers offloaded) is not exported: the \
                 traces store every layer's activations; write 'activations' to offload all",
                o.activation_layers
            ),
        ));
    }
    let mut kinds: Vec<TierKind> = Vec::new();
    for k in [
        o.params.tier(),
        o.activations.off().then_some(TierKind::Host),
        o.optimizer.tier(),
    ]
    .into_iter()
    .flatten()
    {
        if !kinds.contains(&k) {
            kinds.push(k);
        }
    }
    match kinds.as_slice() {
        [] => Ok(None),
        [k] => tiers.get(*k).copied().map(Some).ok_or_else(|| {
            Error::input(
                "offload",
                format!(
                    "export astra: the plan offloads to a '{}' tier the system does not have",
                    k.name()
                ),
            )
        }),
        _ => {
            let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            Err(Error::Unsupported(format!(
                "export astra: the plan offloads to {} tiers ({}); ASTRA-sim has one remote \
                 memory per run (offload to one tier, e.g. zero-infinity:host)",
                names.len(),
                names.join(" and ")
            )))
        }
    }
}

/// Where a rank sits.
#[derive(Clone, Copy)]
pub(super) struct Pos {
    pub(super) t: u32,
    pub(super) d: u32,
    pub(super) p: u32,
}

pub(super) fn rank(plan: &Plan, t: u32, d: u32, p: u32) -> u32 {
    t + plan.tp * (d + plan.dp * p)
}

/// Group ids: DP group of (t, p) is `1 + t + tp·p`; TP group of (d, p) follows them.
pub(super) fn dp_group(plan: &Plan, pos: Pos) -> u32 {
    1 + pos.t + plan.tp * pos.p
}
pub(super) fn tp_group(plan: &Plan, pos: Pos) -> u32 {
    1 + plan.tp * plan.pp + pos.d + plan.dp * pos.p
}

/// The passes of stage `p` in schedule order: (micro-batch, is_forward).
pub fn pass_order(plan: &Plan, p: u32) -> Vec<(u32, bool)> {
    let m = plan.micro_batches;
    let warm = match plan.schedule {
        Schedule::Gpipe => m,
        _ => (plan.pp - 1 - p).min(m),
    };
    let mut out: Vec<(u32, bool)> = (0..warm).map(|i| (i, true)).collect();
    for i in 0..m - warm {
        out.push((warm + i, true));
        out.push((i, false));
    }
    out.extend((m - warm..m).map(|i| (i, false)));
    out
}

/// Generates the traces of one iteration rank by rank (so a large export never holds
/// every NPU's nodes at once).
pub struct Generator<'a> {
    m: &'a Transformer,
    plan: &'a Plan,
    sz: Sizes,
    off: Option<OffloadNodes>,
    remote: RemoteMemory,
}

impl<'a> Generator<'a> {
    /// Checks that the model and plan (without offload) can be exported.
    pub fn new(model: &'a Model, plan: &'a Plan) -> Result<Generator<'a>> {
        if plan.offload.any() {
            return Err(Error::Unsupported(
                "export astra: an offloaded plan is exported with its estimate's transfers \
                 (Generator::offloaded)"
                    .into(),
            ));
        }
        Self::check(model, plan)
    }

    /// An offloaded plan: its transfers as MEM nodes sized from the estimate's offload
    /// `cost` ([`OffloadNodes`]), and the tier they use as a per-NPU remote memory
    /// ([`RemoteMemory::per_npu`]; [`offload_tier`]).
    pub fn offloaded(
        model: &'a Model,
        plan: &'a Plan,
        cost: &crate::offload::Cost,
        tiers: &crate::offload::Tiers,
    ) -> Result<Generator<'a>> {
        let mut g = Self::check(model, plan)?;
        if cost.plan != plan.offload {
            return Err(Error::input(
                "offload",
                format!(
                    "export astra: the cost is of offload '{}' but the plan's is '{}'",
                    cost.plan.name(),
                    plan.offload.name()
                ),
            ));
        }
        if let Some(tier) = offload_tier(plan, tiers)? {
            let layers = plan.layers_per_stage(g.m.layers);
            g.off = Some(OffloadNodes::new(plan, layers, cost));
            g.remote = RemoteMemory::per_npu(&tier);
        }
        Ok(g)
    }

    /// The remote memory the traces' MEM nodes use (`remote_memory.json`).
    pub fn remote_memory(&self) -> &RemoteMemory {
        &self.remote
    }

    /// The offload nodes' sizes, when the plan offloads.
    pub fn offload_nodes(&self) -> Option<&OffloadNodes> {
        self.off.as_ref()
    }

    fn check(model: &'a Model, plan: &'a Plan) -> Result<Generator<'a>> {
        let m = model.transformer().ok_or_else(|| {
            Error::Unsupported("export astra --scenario needs a transformer model".into())
        })?;
        if plan.schedule == Schedule::Interleaved || plan.v > 1 {
            return Err(Error::Unsupported(
                "export astra: the interleaved schedule is not exported (use 1f1b or gpipe)".into(),
            ));
        }
        if plan.schedule == Schedule::DualPipe {
            return Err(Error::Unsupported(
                "export astra: the dualpipe schedule is not exported (use 1f1b or gpipe)".into(),
            ));
        }
        if plan.order != crate::parallel::Order::TpDpPp {
            return Err(Error::Unsupported(
                "export astra: ranks are numbered TP-fastest, then DP, then PP; \
                 order = \"tp-pp-dp\" is not exported"
                    .into(),
            ));
        }
        if m.experts > 1 {
            return Err(Error::Unsupported(
                "export astra: MoE layers (expert all-to-all) are not exported".into(),
            ));
        }
        if !m.layers.is_multiple_of(plan.pp) {
            return Err(Error::input("plan.pp", "must divide the number of layers"));
        }
        let st = plan.stages;
        let even = st.first == st.last && st.max_layers() == st.first;
        if plan.cp > 1
            || plan.lora_rank > 0
            || plan.hsdp > 1
            || !even
            || plan.seq_len != m.s as u32
            || plan.sample_len < plan.seq_len
        {
            return Err(Error::Unsupported(
                "export astra: context parallelism, LoRA, HSDP, uneven pipeline stages, packed                  samples and --seq-len overrides are not exported (give a model file with that seq_len)"
                    .into(),
            ));
        }
        Ok(Generator {
            m,
            plan,
            sz: sizes(m, plan),
            off: None,
            remote: RemoteMemory::NONE,
        })
    }

    /// NPUs (ranks).
    pub fn npus(&self) -> u32 {
        self.plan.tp * self.plan.dp * self.plan.pp
    }

    /// Nodes in the trace of a rank of stage `p`, counted from the schedule without
    /// building it (see the module doc; `b` = 1 on the last stage for the logits, `q` =
    /// pipeline neighbours of the stage, `L` = layers per stage):
    ///
    /// `N(p) = m·(2L·(1 + sp + tp) + b  +  2L·(1 + 2·sp + tp) + b  +  2q)
    ///        + [dp > 1]·(L + [p = 0])·(1 + [zero ≥ 1])`
    ///
    /// where `tp` and `sp` are 1 when the layer has that collective (TP > 1, SP on):
    /// forward `[AG] COMP [RS|AR]` per block, backward `[AG AG] COMP [RS|AR]` per block,
    /// a send and a receive per pass that crosses each stage boundary, and the DP
    /// reduction per layer (and embedding on stage 0); plus, for an offloaded plan, the
    /// nodes of [`OffloadNodes::nodes`].
    pub fn stage_nodes(&self, p: u32) -> u64 {
        let plan = self.plan;
        let m = u64::from(plan.micro_batches);
        let l = u64::from(plan.layers_per_stage(self.m.layers));
        let tp = u64::from(plan.tp > 1);
        let sp = tp * u64::from(plan.sp);
        let last = u64::from(p == plan.pp - 1);
        let q = u64::from(p > 0) + u64::from(p + 1 < plan.pp);
        let fwd = 2 * l * (1 + sp + tp) + last;
        let bwd = 2 * l * (1 + 2 * sp + tp) + last;
        let grad = if plan.dp < 2 {
            0
        } else {
            (l + u64::from(p == 0)) * (1 + u64::from(plan.zero >= 1))
        };
        let off = self
            .off
            .map_or(0, |o| o.nodes(l as u32, plan.micro_batches));
        m * (fwd + bwd + 2 * q) + grad + off
    }

    /// Nodes in the whole iteration, summed over every rank: `tp·dp·Σ_p N(p)`.
    pub fn total_nodes(&self) -> u128 {
        let per_stage: u128 = (0..self.plan.pp)
            .map(|p| u128::from(self.stage_nodes(p)))
            .sum();
        u128::from(self.plan.tp) * u128::from(self.plan.dp) * per_stage
    }

    /// The trace of `rank` (rank = t + tp·(d + dp·p)).
    pub fn trace(&self, rank: u32) -> TraceFile {
        let (tp, dp) = (self.plan.tp, self.plan.dp);
        let pos = Pos {
            t: rank % tp,
            d: rank / tp % dp,
            p: rank / tp / dp,
        };
        npu_trace(self.m, self.plan, &self.sz, self.off.as_ref(), pos)
    }

    /// Communicator groups in id order: DP groups first, then TP groups.
    pub fn groups(&self) -> Vec<(u32, Vec<u32>)> {
        let plan = self.plan;
        let mut groups = Vec::new();
        for p in 0..plan.pp {
            for t in 0..plan.tp {
                let ranks = (0..plan.dp).map(|d| rank(plan, t, d, p)).collect();
                groups.push((dp_group(plan, Pos { t, d: 0, p }), ranks));
            }
        }
        for p in 0..plan.pp {
            for d in 0..plan.dp {
                let ranks = (0..plan.tp).map(|t| rank(plan, t, d, p)).collect();
                groups.push((tp_group(plan, Pos { t: 0, d, p }), ranks));
            }
        }
        groups
    }
}

/// Builds the whole iteration of a transformer `model` under `plan` in memory.
pub fn build(model: &Model, plan: &Plan) -> Result<Iteration> {
    let g = Generator::new(model, plan)?;
    Ok(Iteration {
        traces: (0..g.npus()).map(|r| g.trace(r)).collect(),
        groups: g.groups(),
    })
}

/// The ASTRA-faithful critical path of an exported iteration on `net` and `sys`, read
/// back through the same conversion as files on disk.
pub fn estimate(
    it: &Iteration,
    net: &super::network_yaml::AstraNetwork,
    sys: &super::system_json::AstraSystem,
) -> Result<super::critical::Estimate> {
    let groups: std::collections::HashMap<String, Vec<u32>> = it
        .groups
        .iter()
        .map(|(id, m)| (id.to_string(), m.clone()))
        .collect();
    let knobs = super::model::Knobs::default();
    let ctx = super::trace::Ctx {
        net,
        sys,
        knobs: &knobs,
        groups: Some(&groups),
    };
    let w = super::trace::convert(&it.traces, &ctx)?;
    super::critical::critical_path(&w)
}

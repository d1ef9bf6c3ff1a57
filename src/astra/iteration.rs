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

use super::chakra::TraceFile;
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
}

impl<'a> Generator<'a> {
    /// Checks that the model and plan can be exported.
    pub fn new(model: &'a Model, plan: &'a Plan) -> Result<Generator<'a>> {
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
    /// reduction per layer (and embedding on stage 0).
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
        m * (fwd + bwd + 2 * q) + grad
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
        npu_trace(self.m, self.plan, &self.sz, pos)
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

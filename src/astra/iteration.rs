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

use super::chakra::{AttributeProto, GlobalMetadata, Node, TraceFile, comm_type, node_type};
use crate::error::{Error, Result};
use crate::model::Model;
use crate::model::transformer::Transformer;
use crate::parallel::{Plan, Recompute, Schedule};

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
struct Sizes {
    /// Forward FLOPs of (attention, MLP) per micro-batch on one rank.
    fwd: [f64; 2],
    /// Extra backward FLOPs from recomputation per block.
    recompute: [f64; 2],
    /// Weight bytes per block on one rank.
    weights: [f64; 2],
    /// Logits forward FLOPs per micro-batch on one rank.
    head: f64,
    /// b·s·h activation bytes.
    act: f64,
    /// Gradient bytes of one layer on one rank.
    layer_grad: f64,
    /// Gradient bytes of the embedding on one rank.
    emb_grad: f64,
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
struct Pos {
    t: u32,
    d: u32,
    p: u32,
}

fn rank(plan: &Plan, t: u32, d: u32, p: u32) -> u32 {
    t + plan.tp * (d + plan.dp * p)
}

/// Group ids: DP group of (t, p) is `1 + t + tp·p`; TP group of (d, p) follows them.
fn dp_group(plan: &Plan, pos: Pos) -> u32 {
    1 + pos.t + plan.tp * pos.p
}
fn tp_group(plan: &Plan, pos: Pos) -> u32 {
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
        if m.experts > 1 {
            return Err(Error::Unsupported(
                "export astra: MoE layers (expert all-to-all) are not exported".into(),
            ));
        }
        if !m.layers.is_multiple_of(plan.pp) {
            return Err(Error::input("plan.pp", "must divide the number of layers"));
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

/// Appends nodes with consecutive ids, each data-dependent on the one before.
struct Builder {
    nodes: Vec<Node>,
    /// Last node of the current chain.
    last: Option<u64>,
    /// A ctrl dep the next node takes (the previous pass's last node).
    ctrl: Option<u64>,
}

impl Builder {
    fn push(&mut self, name: String, ty: i32, attr: Vec<AttributeProto>, extra: &[u64]) -> u64 {
        let id = self.nodes.len() as u64;
        let mut data: Vec<u64> = self.last.into_iter().collect();
        data.extend_from_slice(extra);
        self.nodes.push(Node {
            id,
            name,
            r#type: ty,
            data_deps: data,
            ctrl_deps: self.ctrl.take().into_iter().collect(),
            attr,
            ..Default::default()
        });
        self.last = Some(id);
        id
    }
    fn comp(&mut self, name: String, flops: f64, bytes: f64) -> u64 {
        let attr = vec![
            AttributeProto::uint64("num_ops", flops.round() as u64),
            AttributeProto::uint64("tensor_size", bytes.round() as u64),
        ];
        self.push(name, node_type::COMP, attr, &[])
    }
    fn coll(&mut self, name: String, ct: i64, bytes: f64, group: u32) -> u64 {
        let attr = vec![
            AttributeProto::int32("is_cpu_op", 0),
            AttributeProto::int64("comm_type", ct),
            AttributeProto::int64("comm_size", bytes.round() as i64),
            AttributeProto::string("pg_name", &group.to_string()),
        ];
        self.push(name, node_type::COMM_COLL, attr, &[])
    }
    /// A point-to-point node outside the chain (`ty` send or recv) with data deps `deps`.
    fn p2p(&mut self, name: String, ty: i32, peer: u32, tag: u32, bytes: f64) -> u64 {
        let key = if ty == node_type::COMM_SEND {
            "comm_dst"
        } else {
            "comm_src"
        };
        let attr = vec![
            AttributeProto::int32("is_cpu_op", 0),
            AttributeProto::int64("comm_size", bytes.round() as i64),
            AttributeProto::int32(key, peer as i32),
            AttributeProto::int32("comm_tag", tag as i32),
        ];
        let id = self.nodes.len() as u64;
        let deps = if ty == node_type::COMM_SEND {
            self.last.into_iter().collect()
        } else {
            Vec::new()
        };
        self.nodes.push(Node {
            id,
            name,
            r#type: ty,
            data_deps: deps,
            attr,
            ..Default::default()
        });
        id
    }
}

/// Message tag of the pass boundary between stages `p` and `p+1` (forward activations or
/// backward gradients) of micro-batch `mb`; unique per pair of ranks.
fn tag(plan: &Plan, mb: u32, fwd: bool, p: u32) -> u32 {
    1 + (mb * 2 + u32::from(!fwd)) * plan.pp + p
}

fn npu_trace(m: &Transformer, plan: &Plan, sz: &Sizes, pos: Pos) -> TraceFile {
    let mut b = Builder {
        nodes: Vec::new(),
        last: None,
        ctrl: None,
    };
    let per = plan.layers_per_stage(m.layers);
    let first_layer = pos.p * per;
    let mut last_bwd = vec![0u64; per as usize];
    for (mb, fwd) in pass_order(plan, pos.p) {
        let ctrl = b.last;
        b.last = None;
        b.ctrl = ctrl;
        let (recv_from, send_to) = if fwd {
            (
                pos.p.checked_sub(1),
                Some(pos.p + 1).filter(|&q| q < plan.pp),
            )
        } else {
            (
                Some(pos.p + 1).filter(|&q| q < plan.pp),
                pos.p.checked_sub(1),
            )
        };
        if let Some(q) = recv_from {
            let from = rank(plan, pos.t, pos.d, q);
            let tg = tag(plan, mb, fwd, pos.p.min(q));
            let dir = if fwd { "y" } else { "dx" };
            let r = b.p2p(
                format!("mb{mb}.stage{q}.{dir}_RECV"),
                node_type::COMM_RECV,
                from,
                tg,
                sz.act / plan.tp as f64,
            );
            b.last = Some(r);
        }
        if fwd {
            forward(&mut b, plan, sz, pos, mb, (first_layer, per));
        } else {
            backward(&mut b, plan, sz, pos, mb, (first_layer, per), &mut last_bwd);
        }
        if let Some(q) = send_to {
            let to = rank(plan, pos.t, pos.d, q);
            let tg = tag(plan, mb, fwd, pos.p.min(q));
            let dir = if fwd { "y" } else { "dx" };
            b.p2p(
                format!("mb{mb}.stage{}.{dir}_SEND", pos.p),
                node_type::COMM_SEND,
                to,
                tg,
                sz.act / plan.tp as f64,
            );
        }
    }
    gradients(&mut b, plan, sz, pos, first_layer, &last_bwd);
    TraceFile {
        metadata: GlobalMetadata {
            version: "0.0.4".into(),
            attr: vec![AttributeProto::string("schema", "astrolabe")],
        },
        nodes: b.nodes,
    }
}

const BLOCKS: [&str; 2] = ["mha", "ffn"];

fn forward(b: &mut Builder, plan: &Plan, sz: &Sizes, pos: Pos, mb: u32, (first, per): (u32, u32)) {
    let tp = plan.tp > 1;
    let g = tp_group(plan, pos);
    for l in first..first + per {
        for (k, blk) in BLOCKS.iter().enumerate() {
            let at = format!("mb{mb}.transformer.{l}.{blk}");
            if tp && plan.sp {
                let ag = sz.act / plan.tp as f64;
                b.coll(format!("{at}.x@0_AG_COMM"), comm_type::ALL_GATHER, ag, g);
            }
            let bytes = sz.weights[k] + 2.0 * sz.act;
            b.comp(format!("{at}.y@0_COMP"), sz.fwd[k], bytes);
            if tp {
                let ct = if plan.sp {
                    comm_type::REDUCE_SCATTER
                } else {
                    comm_type::ALL_REDUCE
                };
                b.coll(format!("{at}.y@0_X1COMM"), ct, sz.act, g);
            }
        }
    }
    if pos.p == plan.pp - 1 {
        b.comp(format!("mb{mb}.head.y@0_COMP"), sz.head, 2.0 * sz.act);
    }
}

fn backward(
    b: &mut Builder,
    plan: &Plan,
    sz: &Sizes,
    pos: Pos,
    mb: u32,
    (first, per): (u32, u32),
    last_bwd: &mut [u64],
) {
    let tp = plan.tp > 1;
    let g = tp_group(plan, pos);
    if pos.p == plan.pp - 1 {
        b.comp(
            format!("mb{mb}.head.dx@0_COMP"),
            2.0 * sz.head,
            2.0 * sz.act,
        );
    }
    for l in (first..first + per).rev() {
        for k in [1usize, 0] {
            let at = format!("mb{mb}.transformer.{l}.{}", BLOCKS[k]);
            if tp && plan.sp {
                let ag = sz.act / plan.tp as f64;
                b.coll(format!("{at}.dy@0_AG_COMM"), comm_type::ALL_GATHER, ag, g);
                b.coll(format!("{at}.x@0_X2_COMM"), comm_type::ALL_GATHER, ag, g);
            }
            let bytes = sz.weights[k] * 2.0 + 2.0 * sz.act;
            let flops = 2.0 * sz.fwd[k] + sz.recompute[k];
            let c = b.comp(format!("{at}.dx@0_COMP"), flops, bytes);
            last_bwd[(l - first) as usize] = c;
            if tp {
                let ct = if plan.sp {
                    comm_type::REDUCE_SCATTER
                } else {
                    comm_type::ALL_REDUCE
                };
                b.coll(format!("{at}.dx@0_X1COMM"), ct, sz.act, g);
            }
        }
    }
}

/// DP gradient reduction after the last backward: one per layer, data-dependent on that
/// layer's last backward compute, plus the embedding on the first stage.
fn gradients(b: &mut Builder, plan: &Plan, sz: &Sizes, pos: Pos, first: u32, last: &[u64]) {
    if plan.dp < 2 {
        return;
    }
    let g = dp_group(plan, pos);
    let ctrl = b.last;
    let mut items: Vec<(String, f64, Option<u64>)> = last
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &c)| {
            let name = format!("transformer.{}._sharded_grad@0", first + i as u32);
            (name, sz.layer_grad, Some(c))
        })
        .collect();
    if pos.p == 0 {
        items.push(("in_emb._sharded_grad@0".into(), sz.emb_grad, ctrl));
    }
    for (name, bytes, dep) in items {
        b.last = dep;
        if plan.zero >= 1 {
            b.coll(
                format!("{name}_RS_COMM"),
                comm_type::REDUCE_SCATTER,
                bytes,
                g,
            );
            b.coll(
                format!("{name}_AG_COMM"),
                comm_type::ALL_GATHER,
                bytes / plan.dp as f64,
                g,
            );
        } else {
            b.coll(format!("{name}_X1COMM"), comm_type::ALL_REDUCE, bytes, g);
        }
    }
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

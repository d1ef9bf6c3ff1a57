//! The nodes of one NPU's iteration trace: forward and backward passes in schedule
//! order, pipeline messages and the DP gradient reduction (formulas in the parent
//! module's doc).

use super::{Pos, Sizes, dp_group, pass_order, rank, tp_group};
use crate::astra::chakra::{AttributeProto, GlobalMetadata, Node, TraceFile, comm_type, node_type};
use crate::model::transformer::Transformer;
use crate::parallel::Plan;

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

pub(super) fn npu_trace(m: &Transformer, plan: &Plan, sz: &Sizes, pos: Pos) -> TraceFile {
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

//! The nodes of one NPU's iteration trace: forward and backward passes in schedule
//! order, pipeline messages, the DP gradient reduction and an offloaded plan's memory
//! nodes (formulas and placement in the parent module's doc).

use super::{OffloadNodes, Pos, Sizes, dp_group, pass_order, rank, tp_group};
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
    /// A data dep the next chain node takes (its layer's last memory load).
    pending: Option<u64>,
}

impl Builder {
    fn push(&mut self, name: String, ty: i32, attr: Vec<AttributeProto>, extra: &[u64]) -> u64 {
        let id = self.nodes.len() as u64;
        let mut data: Vec<u64> = self.last.into_iter().collect();
        data.extend_from_slice(extra);
        data.extend(self.pending.take());
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
    /// A memory node outside the chain (`ty` MEM_LOAD or MEM_STORE) of `bytes`
    /// (`tensor_size`, which ASTRA-sim's feeder reads as `uint64_val`) after `deps`.
    fn mem(&mut self, name: String, ty: i32, bytes: f64, deps: Vec<u64>) -> u64 {
        let attr = vec![
            AttributeProto::boolean("is_cpu_op", false),
            AttributeProto::uint64("tensor_size", bytes.round() as u64),
        ];
        self.side(name, ty, attr, deps, 0)
    }
    /// A node outside the chain after `deps`, of recorded duration `micros`.
    fn side(
        &mut self,
        name: String,
        ty: i32,
        attr: Vec<AttributeProto>,
        deps: Vec<u64>,
        micros: u64,
    ) -> u64 {
        let id = self.nodes.len() as u64;
        self.nodes.push(Node {
            id,
            name,
            r#type: ty,
            data_deps: deps,
            duration_micros: micros,
            attr,
            ..Default::default()
        });
        id
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

/// An offloaded plan's memory nodes across the passes of one rank.
struct Off<'a> {
    n: &'a OffloadNodes,
    /// The activation store of (micro-batch, layer of the stage): `mb·L + i`.
    act_store: Vec<u64>,
    /// The streamed gradient stores of the last backward.
    stream_last: Vec<u64>,
    /// Loads issued one layer ahead: the previous layer's last load, and the chain node
    /// the previous layer started after.
    prev_load: Option<u64>,
    prev_start: Option<u64>,
}

impl Off<'_> {
    /// The loads before layer `l`'s pass (`items`: name, bytes, an extra dep), one layer
    /// ahead: the first waits for the previous layer's last load and start, each further
    /// one for the one before; the layer's first chain node waits for the last.
    fn loads(&mut self, b: &mut Builder, start: Option<u64>, items: &[(String, f64, Option<u64>)]) {
        let mut deps: Vec<u64> = self.prev_load.into_iter().chain(self.prev_start).collect();
        let mut last = None;
        for (name, bytes, extra) in items {
            deps.extend(*extra);
            let id = b.mem(
                name.clone(),
                node_type::MEM_LOAD,
                *bytes,
                std::mem::take(&mut deps),
            );
            deps.push(id);
            last = Some(id);
        }
        if last.is_some() {
            self.prev_load = last;
        }
        self.prev_start = start;
        b.pending = last;
    }
}

pub(super) fn npu_trace(
    m: &Transformer,
    plan: &Plan,
    sz: &Sizes,
    off: Option<&OffloadNodes>,
    pos: Pos,
) -> TraceFile {
    let mut b = Builder {
        nodes: Vec::new(),
        last: None,
        ctrl: None,
        pending: None,
    };
    let per = plan.layers_per_stage(m.layers);
    let first_layer = pos.p * per;
    let mut last_bwd = vec![0u64; per as usize];
    let mut off = off.map(|n| Off {
        n,
        act_store: vec![0; (plan.micro_batches * per) as usize],
        stream_last: Vec::new(),
        prev_load: None,
        prev_start: None,
    });
    for (mb, fwd) in pass_order(plan, pos.p) {
        let ctrl = b.last;
        b.last = None;
        b.ctrl = ctrl;
        if let Some(o) = off.as_mut() {
            (o.prev_load, o.prev_start) = (None, ctrl);
        }
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
        let layers = (first_layer, per);
        if fwd {
            forward(&mut b, plan, sz, pos, mb, layers, off.as_mut());
        } else {
            backward(
                &mut b,
                (plan, sz, pos),
                mb,
                layers,
                &mut last_bwd,
                off.as_mut(),
            );
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
    let done = gradients(&mut b, plan, sz, pos, first_layer, &last_bwd);
    if let Some(o) = &off {
        step(&mut b, o, first_layer, &done);
    }
    TraceFile {
        metadata: GlobalMetadata {
            version: "0.0.4".into(),
            attr: vec![AttributeProto::string("schema", "astrolabe")],
        },
        nodes: b.nodes,
    }
}

const BLOCKS: [&str; 2] = ["mha", "ffn"];

fn forward(
    b: &mut Builder,
    plan: &Plan,
    sz: &Sizes,
    pos: Pos,
    mb: u32,
    (first, per): (u32, u32),
    mut off: Option<&mut Off>,
) {
    let tp = plan.tp > 1;
    let g = tp_group(plan, pos);
    for l in first..first + per {
        if let Some(o) = off.as_deref_mut() {
            let start = b.last.or(o.prev_start);
            let items: Vec<_> = (o.n.fetch > 0.0)
                .then(|| (format!("mb{mb}.transformer.{l}.w@0_LOAD"), o.n.fetch, None))
                .into_iter()
                .collect();
            o.loads(b, start, &items);
        }
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
        if let Some(o) = off.as_deref_mut()
            && o.n.act > 0.0
        {
            let name = format!("mb{mb}.transformer.{l}.act@0_STORE");
            let id = b.mem(
                name,
                node_type::MEM_STORE,
                o.n.act,
                b.last.into_iter().collect(),
            );
            o.act_store[(mb * per + l - first) as usize] = id;
        }
    }
    if pos.p == plan.pp - 1 {
        b.comp(format!("mb{mb}.head.y@0_COMP"), sz.head, 2.0 * sz.act);
    }
}

fn backward(
    b: &mut Builder,
    (plan, sz, pos): (&Plan, &Sizes, Pos),
    mb: u32,
    (first, per): (u32, u32),
    last_bwd: &mut [u64],
    mut off: Option<&mut Off>,
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
        let i = (mb * per + l - first) as usize;
        if let Some(o) = off.as_deref_mut() {
            let start = b.last.or(o.prev_start);
            let mut items = Vec::new();
            if o.n.fetch > 0.0 {
                for f in 0..o.n.bwd_fetches {
                    items.push((
                        format!("mb{mb}.transformer.{l}.w@{f}_LOAD"),
                        o.n.fetch,
                        None,
                    ));
                }
            }
            if o.n.act > 0.0 {
                let name = format!("mb{mb}.transformer.{l}.act@0_LOAD");
                items.push((name, o.n.act, Some(o.act_store[i])));
            }
            o.loads(b, start, &items);
        }
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
        if let Some(o) = off.as_deref_mut() {
            let (every, last) = o.n.grad_stream;
            let is_last = mb + 1 == plan.micro_batches;
            let bytes = if is_last { last } else { every };
            if bytes > 0.0 {
                let name = format!("mb{mb}.transformer.{l}.grad@0_STORE");
                let c = last_bwd[(l - first) as usize];
                let id = b.mem(name, node_type::MEM_STORE, bytes, vec![c]);
                if is_last {
                    o.stream_last.push(id);
                }
            }
        }
    }
}

/// DP gradient reduction after the last backward: one per layer, data-dependent on that
/// layer's last backward compute, plus the embedding on the first stage. Returns, per
/// layer of the stage (None: the embedding), the node its gradients are final after.
fn gradients(
    b: &mut Builder,
    plan: &Plan,
    sz: &Sizes,
    pos: Pos,
    first: u32,
    last: &[u64],
) -> Vec<(Option<usize>, u64)> {
    if plan.dp < 2 {
        return last
            .iter()
            .copied()
            .enumerate()
            .map(|(i, c)| (Some(i), c))
            .collect();
    }
    let g = dp_group(plan, pos);
    let ctrl = b.last;
    let mut items: Vec<(String, f64, Option<u64>, Option<usize>)> = last
        .iter()
        .enumerate()
        .rev()
        .map(|(i, &c)| {
            let name = format!("transformer.{}._sharded_grad@0", first + i as u32);
            (name, sz.layer_grad, Some(c), Some(i))
        })
        .collect();
    if pos.p == 0 {
        items.push(("in_emb._sharded_grad@0".into(), sz.emb_grad, ctrl, None));
    }
    let mut done = Vec::with_capacity(items.len());
    for (name, bytes, dep, layer) in items {
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
        done.extend(b.last.map(|id| (layer, id)));
    }
    done
}

/// The offloaded optimizer step after the DP reduction (`done`: per layer, the node its
/// gradients are final after): gradient stores, the CPU step, then the updated
/// parameters; or, with the optimizer on the GPU, a store of each layer's updated
/// parameter shard.
fn step(b: &mut Builder, o: &Off, first: u32, done: &[(Option<usize>, u64)]) {
    let n = o.n;
    let mut cpu_deps = o.stream_last.clone();
    for &(layer, id) in done {
        match layer {
            Some(i) if n.grad_step > 0.0 => {
                let name = format!("transformer.{}.grad@0_STORE", first + i as u32);
                cpu_deps.push(b.mem(name, node_type::MEM_STORE, n.grad_step, vec![id]));
            }
            _ => cpu_deps.push(id),
        }
    }
    let after: Vec<(usize, u64)> = match n.cpu_step_us {
        Some(us) => {
            let attr = vec![AttributeProto::boolean("is_cpu_op", true)];
            let c = b.side(
                "optimizer.step@0_CPU".into(),
                node_type::COMP,
                attr,
                cpu_deps,
                us,
            );
            done.iter().filter_map(|&(l, _)| Some((l?, c))).collect()
        }
        None => done.iter().filter_map(|&(l, id)| Some((l?, id))).collect(),
    };
    if n.params_step > 0.0 {
        let ty = if n.params_store {
            node_type::MEM_STORE
        } else {
            node_type::MEM_LOAD
        };
        for (i, dep) in after {
            let name = format!(
                "transformer.{}.w@step_{}",
                first + i as u32,
                if n.params_store { "STORE" } else { "LOAD" }
            );
            b.mem(name, ty, n.params_step, vec![dep]);
        }
    }
}

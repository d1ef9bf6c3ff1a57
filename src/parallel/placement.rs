//! Group placement: each parallel group takes network dimensions innermost first (TP on
//! the fastest), a divisor of a dimension's remaining size or whole remainders followed
//! by a divisor of the next (DESIGN.md §4). MoE layers see the same GPUs through a second
//! mapping (MoE parallel folding): ETP, then EP, then expert-DP over each stage's
//! TP × CP × DP ranks, so EP may exceed DP.

use super::{Order, Plan, bad};
use crate::collective::MAX_DIMS;
use crate::error::Result;
use crate::network::{Dim, DimKind};
use crate::units::{Bandwidth, Seconds};

/// The network dimensions one group spans (sizes cut to the group's share).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Span {
    /// Group size.
    pub size: u32,
    /// Number of valid entries in `dims`.
    pub n: usize,
    /// Index in the topology of each spanned dimension.
    pub index: [u8; MAX_DIMS],
    /// The spanned dimensions (first `n`), each with `size` = the group's extent along it.
    pub dims: [Dim; MAX_DIMS],
}

/// Where each group lands on the topology.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Placement {
    /// Tensor (and sequence) parallel group.
    pub tp: Span,
    /// Context-parallel group (next to TP, as Megatron-LM's `tp-cp-ep-dp-pp`).
    pub cp: Span,
    /// Expert-parallel group: after the expert-TP ranks within each stage's TP × CP × DP
    /// ranks (folded), or the inner part of DP with [`Order::TpPpDp`].
    pub ep: Span,
    /// Data-parallel group.
    pub dp: Span,
    /// Expert-data-parallel group: the ranks holding the same experts, over which their
    /// gradients are reduced (after ETP and EP within each stage's ranks under folding;
    /// the rest of DP after EP with [`Order::TpPpDp`]).
    pub edp: Span,
    /// Pipeline group (adjacent stages communicate along these dims).
    pub pp: Span,
}

impl Span {
    const PAD: Dim = Dim {
        kind: DimKind::Switch,
        size: 1,
        bandwidth: Bandwidth::new(1.0),
        latency: Seconds::ZERO,
        in_network: false,
        in_network_efficiency: 1.0,
        oversubscription: 1.0,
    };
    const EMPTY: Span = Span {
        size: 1,
        n: 0,
        index: [0; MAX_DIMS],
        dims: [Span::PAD; MAX_DIMS],
    };

    /// The spanned dimensions, innermost first (for `collective::time`).
    pub fn slice(&self) -> &[Dim] {
        &self.dims[..self.n]
    }

    /// The part of the group on topology dimensions below `k` (inside the scale-up
    /// domain when `k` = the system's `scale_up_dims`) and the part on the others.
    pub fn split_at_dim(&self, k: u32) -> (Span, Span) {
        let (mut lo, mut hi) = (Span::EMPTY, Span::EMPTY);
        for i in 0..self.n {
            let s = if u32::from(self.index[i]) < k {
                &mut lo
            } else {
                &mut hi
            };
            s.index[s.n] = self.index[i];
            s.dims[s.n] = self.dims[i];
            s.size *= self.dims[i].size;
            s.n += 1;
        }
        (lo, hi)
    }
}

/// Cursor over the topology's capacity, innermost first.
struct Cursor<'a> {
    dims: &'a [Dim],
    at: usize,
    left: u32,
}

impl Cursor<'_> {
    /// Takes a group of `size` from the remaining capacity: a divisor of the current
    /// dimension's remainder, or whole remainders followed by a divisor of the next.
    fn take(&mut self, size: u32, what: &str) -> Result<Span> {
        let mut span = Span::EMPTY;
        span.size = size;
        let mut need = size;
        while need > 1 {
            let Some(dim) = self.dims.get(self.at) else {
                return Err(bad(
                    what,
                    format!("group of {size} does not fit in the topology"),
                ));
            };
            let take = if need >= self.left && need.is_multiple_of(self.left) {
                self.left
            } else if self.left.is_multiple_of(need) {
                need
            } else {
                return Err(bad(
                    what,
                    format!(
                        "group of {size} does not align with dimension {} of size {}",
                        self.at, dim.size
                    ),
                ));
            };
            if span.n == MAX_DIMS {
                return Err(bad(what, "spans too many dimensions".into()));
            }
            if take > 1 {
                span.index[span.n] = self.at as u8;
                span.dims[span.n] = Dim { size: take, ..*dim };
                span.n += 1;
            }
            need /= take;
            self.left /= take;
            if self.left == 1 {
                self.at += 1;
                self.left = self.dims.get(self.at).map_or(1, |d| d.size);
            }
        }
        Ok(span)
    }
}

impl Placement {
    /// Maps the plan's groups onto `dims` (innermost first): TP, CP, then DP (EP first within
    /// it), then PP, or TP, PP, DP with [`Order::TpPpDp`]. Errors when a group does not
    /// align with the dimension sizes or the plan needs more devices than the topology has.
    pub fn new(plan: &Plan, dims: &[Dim]) -> Result<Placement> {
        let total: u64 = dims.iter().map(|d| d.size as u64).product();
        if plan.gpus as u64 > total {
            return Err(bad(
                "gpus",
                format!("{} exceeds the {total} devices of the system", plan.gpus),
            ));
        }
        let mut c = Cursor {
            dims,
            at: 0,
            left: dims.first().map_or(1, |d| d.size),
        };
        let tp = c.take(plan.tp, "tp")?;
        let cp = c.take(plan.cp, "cp")?;
        let (ep, edp, dp, pp);
        match plan.order {
            Order::TpDpPp => {
                dp = c.take(plan.dp, "dp")?;
                pp = c.take(plan.pp, "pp")?;
                (ep, edp) = folded_ep(plan, dims)?;
            }
            Order::TpPpDp => {
                pp = c.take(plan.pp, "pp")?;
                ep = c.take(plan.ep, "ep")?;
                let rest = c.take(plan.dp / plan.ep, "dp")?;
                dp = merge(&ep, &rest, plan.dp);
                edp = rest;
            }
        }
        Ok(Placement {
            tp,
            cp,
            ep,
            dp,
            edp,
            pp,
        })
    }
}

/// The EP group under MoE parallel folding (Liu et al. 2025, "MoE Parallel Folding",
/// arXiv 2504.14960; Megatron-core `ProcessGroupCollection` builds the expert groups with
/// `RankGenerator(tp = etp, ep, dp = edp, pp, cp = 1)` in the same order string): within a
/// pipeline stage's `t·c·d` ranks, innermost first, ETP ranks, then EP, then expert-DP
/// `t·c·d / (etp·ep)`. With ETP = TP and EP dividing DP this is the classic layout (EP
/// right after TP, inside DP) when CP = 1. Returns the EP and the expert-DP group.
fn folded_ep(plan: &Plan, dims: &[Dim]) -> Result<(Span, Span)> {
    let mut c = Cursor {
        dims,
        at: 0,
        left: dims.first().map_or(1, |d| d.size),
    };
    c.take(plan.etp, "etp")?;
    let ep = c.take(plan.ep, "ep")?;
    Ok((ep, c.take(plan.expert_dp(), "expert-dp")?))
}

impl Placement {
    /// The ranks that hold the same weights, CP × DP: gradients are reduced and ZeRO
    /// states sharded over them (Megatron-LM's data-parallel group with context parallel).
    pub fn dp_with_cp(&self) -> Span {
        merge(&self.cp, &self.dp, self.cp.size * self.dp.size)
    }
}

impl Span {
    /// Splits the group into its inner `inner` ranks and the outer rest (HSDP's shard and
    /// replica groups), innermost dimensions first: `inner` must divide a prefix of the
    /// spanned extents.
    pub fn split(&self, inner: u32) -> Result<(Span, Span)> {
        let dims = self.slice();
        let mut c = Cursor {
            dims,
            at: 0,
            left: dims.first().map_or(1, |d| d.size),
        };
        let mut a = c.take(inner, "hsdp")?;
        let mut b = c.take(self.size / inner.max(1), "hsdp")?;
        // The cursor numbers this span's dimensions; map them back to the topology's.
        for s in [&mut a, &mut b] {
            for i in 0..s.n {
                s.index[i] = self.index[s.index[i] as usize];
            }
        }
        Ok((a, b))
    }
}

/// The union of two consecutive spans (EP then the rest of DP).
fn merge(a: &Span, b: &Span, size: u32) -> Span {
    let mut out = *a;
    out.size = size;
    for i in 0..b.n {
        if out.n > 0 && out.index[out.n - 1] == b.index[i] {
            out.dims[out.n - 1].size *= b.dims[i].size;
        } else if out.n < MAX_DIMS {
            out.index[out.n] = b.index[i];
            out.dims[out.n] = b.dims[i];
            out.n += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::parallel::PlanSpec;

    /// `spec` for `model` placed on `system` cut to `gpus` devices.
    fn try_place(model: &str, system: &str, gpus: u32, spec: PlanSpec) -> Result<Placement> {
        let m = catalog::model(model)?;
        let s = catalog::system(system)?.with_gpus(gpus)?;
        let plan = Plan::new(&spec, &m, gpus)?;
        Placement::new(&plan, s.topology.dims())
    }

    fn place_spec(model: &str, system: &str, gpus: u32, spec: PlanSpec) -> Placement {
        try_place(model, system, gpus, spec).unwrap()
    }

    fn place(tp: u32, pp: u32, gpus: u32) -> Result<Placement> {
        let spec = PlanSpec {
            tp,
            pp,
            ..PlanSpec::default()
        };
        try_place("gpt3-175b", "dgx-a100", gpus, spec)
    }

    #[test]
    fn groups_take_dimensions_innermost_first() {
        // 2 nodes × 8: TP 8 fills NVSwitch (dim 0); DP 2 spans InfiniBand (dim 1).
        let p = place(8, 1, 16).unwrap();
        assert_eq!((p.tp.n, p.tp.index[0], p.tp.dims[0].size), (1, 0, 8));
        assert_eq!((p.dp.n, p.dp.index[0], p.dp.dims[0].size), (1, 1, 2));
        assert_eq!(p.pp.n, 0);
        // TP 2 then DP 32 = rest of the node (4) × all 8 nodes; PP 2 has no room left…
        let p = place(2, 1, 64).unwrap();
        assert_eq!(p.dp.size, 32);
        assert_eq!((p.dp.n, p.dp.dims[0].size, p.dp.dims[1].size), (2, 4, 8));
        // …TP 8, PP 8 on 64: PP on dim 1.
        let p = place(8, 8, 64).unwrap();
        assert_eq!((p.pp.n, p.pp.index[0], p.pp.dims[0].size), (1, 1, 8));
    }

    #[test]
    fn hsdp_split_takes_the_inner_ranks() {
        // TP 2 on 8 nodes × 8: DP 32 = 4 on NVSwitch (dim 0) × 8 nodes (dim 1). Shard
        // groups of 8 take the 4 in-node ranks and 2 nodes; the 4 replicas span dim 1.
        let p = place(2, 1, 64).unwrap();
        let (shard, replica) = p.dp.split(8).unwrap();
        assert_eq!((shard.size, shard.n), (8, 2));
        assert_eq!((shard.dims[0].size, shard.dims[1].size), (4, 2));
        assert_eq!(
            (
                replica.size,
                replica.n,
                replica.index[0],
                replica.dims[0].size
            ),
            (4, 1, 1, 4)
        );
        assert!(p.dp.split(3).is_err());
        // Without CP, DP × CP is DP itself.
        assert_eq!(p.dp_with_cp(), p.dp);
    }

    fn place_moe(gpus: u32, tp: u32, ep: u32, etp: u32) -> Result<Placement> {
        let spec = PlanSpec {
            tp,
            ep,
            etp: Some(etp),
            ..PlanSpec::default()
        };
        try_place("qwen3-235b-a22b", "dgx-h100", gpus, spec)
    }

    #[test]
    fn folded_ep_follows_the_expert_tp_ranks() {
        // 4 nodes × 8, TP 2, DP 16. ETP 1: EP 16 takes all 8 ranks of a node (dim 0), then
        // 2 nodes (dim 1), while the attention DP 16 takes 4 in-node ranks after TP × 4 nodes.
        let p = place_moe(32, 2, 16, 1).unwrap();
        let ep: Vec<(u8, u32)> = (0..p.ep.n)
            .map(|i| (p.ep.index[i], p.ep.dims[i].size))
            .collect();
        assert_eq!(ep, vec![(0, 8), (1, 2)]);
        assert_eq!((p.dp.dims[0].size, p.dp.dims[1].size), (4, 4));
        // ETP = TP = 2: EP 16 sits after TP, as the unfolded layout put it inside DP.
        let p = place_moe(32, 2, 16, 2).unwrap();
        assert_eq!((p.ep.dims[0].size, p.ep.dims[1].size), (4, 4));
        // EP 32 > DP 16 with ETP 1: every rank of the 32 (8 per node × 4 nodes).
        let p = place_moe(32, 2, 32, 1).unwrap();
        assert_eq!(
            (p.ep.size, p.ep.dims[0].size, p.ep.dims[1].size),
            (32, 8, 4)
        );
        // ETP 2 × EP 32 = 64 does not divide TP × DP = 32.
        let e = place_moe(32, 2, 32, 2).unwrap_err().to_string();
        assert!(e.contains("must divide tp·cp·dp"), "{e}");
    }

    /// (topology index, extent) of each spanned dimension.
    fn extents(s: &Span) -> Vec<(u8, u32)> {
        (0..s.n).map(|i| (s.index[i], s.dims[i].size)).collect()
    }

    fn place_cp(tp: u32, cp: u32, gpus: u32) -> Result<Placement> {
        let spec = PlanSpec {
            tp,
            cp,
            ..PlanSpec::default()
        };
        try_place("gpt3-175b", "dgx-a100", gpus, spec)
    }

    #[test]
    fn dp_with_cp_joins_the_cp_and_dp_extents() {
        // 2 nodes × 8, TP 1, CP 2, DP 16/2 = 8. CP takes 2 of the node (4 left); DP 8 takes
        // those 4 and the 2 nodes. CP × DP = 16 ranks: 2·4 = 8 on the node, 2 nodes.
        let p = place_cp(1, 2, 16).unwrap();
        assert_eq!(extents(&p.cp), vec![(0, 2)]);
        assert_eq!(extents(&p.dp), vec![(0, 4), (1, 2)]);
        let g = p.dp_with_cp();
        assert_eq!((g.size, extents(&g)), (16, vec![(0, 8), (1, 2)]));
        // 4 nodes × 8, TP 8 fills the node; CP 2 and then DP 32/16 = 2 share the 4 nodes:
        // one dimension of 2·2 = 4 nodes, not two entries for the same dimension.
        let p = place_cp(8, 2, 32).unwrap();
        assert_eq!(
            (extents(&p.cp), extents(&p.dp)),
            (vec![(1, 2)], vec![(1, 2)])
        );
        let g = p.dp_with_cp();
        assert_eq!((g.size, extents(&g)), (4, vec![(1, 4)]));
    }

    #[test]
    fn tp_pp_dp_order_places_dp_after_the_stages() {
        // 4 nodes × 8, order tp-pp-dp, TP 8, PP 2, dense (EP 1, an empty span): PP takes
        // 2 of the 4 nodes and DP 32/16 = 2 the other 2; DP is the rest of DP alone.
        let spec = PlanSpec {
            tp: 8,
            pp: 2,
            order: Order::TpPpDp,
            ..PlanSpec::default()
        };
        let p = place_spec("gpt3-175b", "dgx-a100", 32, spec);
        assert_eq!((extents(&p.pp), p.ep.n), (vec![(1, 2)], 0));
        assert_eq!((p.dp.size, extents(&p.dp)), (2, vec![(1, 2)]));
        assert_eq!(p.edp, p.dp);
    }

    #[test]
    fn default_order_places_dp_inside_the_stages() {
        // 2 nodes × 8, order tp-dp-pp (the default), TP 2, DP 4, PP 2: TP takes 2 of the
        // node, DP the other 4, so PP spans the 2 nodes. DP before PP: the stages are the
        // outer dimension.
        let spec = PlanSpec {
            tp: 2,
            pp: 2,
            ..PlanSpec::default()
        };
        let p = place_spec("gpt3-175b", "dgx-a100", 16, spec);
        assert_eq!(extents(&p.tp), vec![(0, 2)]);
        assert_eq!((p.dp.size, extents(&p.dp)), (4, vec![(0, 4)]));
        assert_eq!(extents(&p.pp), vec![(1, 2)]);
    }

    #[test]
    fn tp_pp_dp_order_puts_ep_after_the_stages_then_the_rest_of_dp() {
        // 4 nodes × 8, order tp-pp-dp, an MoE model with TP 2, PP 2, EP 4, DP 8: TP takes 2
        // of the node, PP 2 more, EP 4 the node's last 2 and 2 nodes, and the rest of DP,
        // 8/4 = 2, the other 2 nodes. DP is EP then that rest: 2 in the node × 4 nodes; the
        // expert-DP group is the rest alone.
        let spec = PlanSpec {
            tp: 2,
            pp: 2,
            ep: 4,
            order: Order::TpPpDp,
            ..PlanSpec::default()
        };
        let p = place_spec("qwen3-235b-a22b", "dgx-h100", 32, spec);
        assert_eq!(extents(&p.pp), vec![(0, 2)]);
        assert_eq!((p.ep.size, extents(&p.ep)), (4, vec![(0, 2), (1, 2)]));
        assert_eq!((p.edp.size, extents(&p.edp)), (2, vec![(1, 2)]));
        assert_eq!((p.dp.size, extents(&p.dp)), (8, vec![(0, 2), (1, 4)]));
    }

    #[test]
    fn a_plan_may_use_every_device_and_no_more() {
        // A system of 2 × 8 = 16 devices holds a plan of 16 and refuses one of 32.
        let m = catalog::model("gpt3-175b").unwrap();
        let s = catalog::system("dgx-a100").unwrap().with_gpus(16).unwrap();
        let dims = s.topology.dims();
        assert_eq!(dims.iter().map(|d| d.size).collect::<Vec<_>>(), vec![8, 2]);
        let spec = PlanSpec {
            tp: 8,
            ..PlanSpec::default()
        };
        let plan = |gpus| Plan::new(&spec, &m, gpus).unwrap();
        Placement::new(&plan(16), dims).unwrap();
        let e = Placement::new(&plan(32), dims).unwrap_err().to_string();
        assert!(e.contains("32 exceeds the 16 devices"), "{e}");
    }

    #[test]
    fn a_group_across_dimensions_takes_whole_remainders() {
        // A group of 12 on 8 × 4: 12 is not a multiple of the 8, nor does it divide 8.
        let dims = [8, 4].map(|size| Dim { size, ..Span::PAD });
        let mut c = Cursor {
            dims: &dims,
            at: 0,
            left: 8,
        };
        let e = c.take(12, "dp").unwrap_err().to_string();
        assert!(
            e.contains("does not align with dimension 0 of size 8"),
            "{e}"
        );
        // A group of 16 is the 8 and 2 of the 4.
        let mut c = Cursor {
            dims: &dims,
            at: 0,
            left: 8,
        };
        assert_eq!(extents(&c.take(16, "dp").unwrap()), vec![(0, 8), (1, 2)]);
        // A dimension of size 1 in between is crossed, not spanned: 8 = 2 × 4 on 2 × 1 × 4.
        let dims = [2, 1, 4].map(|size| Dim { size, ..Span::PAD });
        let mut c = Cursor {
            dims: &dims,
            at: 0,
            left: 2,
        };
        assert_eq!(extents(&c.take(8, "dp").unwrap()), vec![(0, 2), (2, 4)]);
    }

    #[test]
    fn misaligned_group_is_an_error() {
        // TP 3 does not divide the 8-GPU NVSwitch dimension (96 heads are divisible by 3).
        let e = place(3, 1, 24).unwrap_err().to_string();
        assert!(e.contains("does not align"), "{e}");
    }
}

//! Reuse across a sweep's hot loop. Consecutive plans of a sweep grid differ mostly in
//! knobs that leave the placement and the per-layer blocks unchanged (ZeRO stage,
//! DP overlap, group order, pipeline depth): a [`super::Memo`] keeps the few most recent
//! placements and per-layer results and hands them back when a plan needs the same ones.
//!
//! Keys are conservative: a cached result is reused only when every input it was
//! computed from is equal. For the per-layer blocks the key is the whole plan with only
//! the fields that the layer, embedding and head do not read reset (pipeline and data
//! parallelism, ZeRO, batch count, schedule, optimizer, group order), plus the shape of
//! the TP, CP and EP groups on the network and whether TP shares a dimension with the DP
//! reduction; a field added to [`Plan`] later is part of the key until it is listed as
//! irrelevant. `tests/memo.rs` checks, over whole sweep grids, that estimates with and
//! without a memo are identical.
//!
//! A memo belongs to one model and one list of systems: `system` in the calls is the
//! system's index in that list. Nothing is allocated: each cache is a fixed array
//! replaced round-robin.

use crate::parallel::{Placement, Plan, Span};

/// A fixed-size cache of the `N` most recently inserted entries (round-robin).
pub(crate) struct Recent<K, V, const N: usize> {
    slots: [Option<(K, V)>; N],
    next: usize,
}

impl<K: PartialEq, V, const N: usize> Recent<K, V, N> {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Recent {
            slots: std::array::from_fn(|_| None),
            next: 0,
        }
    }

    /// The value stored under `key`, if it is still held.
    pub(crate) fn get(&self, key: &K) -> Option<&V> {
        self.slots
            .iter()
            .flatten()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Stores `value` under `key`, replacing the oldest entry when full.
    pub(crate) fn put(&mut self, key: K, value: V) {
        self.slots[self.next] = Some((key, value));
        self.next = (self.next + 1) % N;
    }
}

/// Placements by (system, the plan's group sizes and order).
type PlaceKey = (usize, [u32; 7], crate::parallel::Order);

/// The placement cache of a [`super::Memo`].
pub(crate) type PlaceMemo = Recent<PlaceKey, Placement, 4>;

/// The shape of a group on the network: its size, and the index and extent of every
/// dimension it spans (the dimensions' figures follow from the system).
#[derive(Clone, Copy, PartialEq)]
struct Shape {
    size: u32,
    n: usize,
    index: [u8; crate::collective::MAX_DIMS],
    extent: [u32; crate::collective::MAX_DIMS],
}

impl Shape {
    fn of(s: &Span) -> Shape {
        let mut extent = [0; crate::collective::MAX_DIMS];
        for (e, d) in extent.iter_mut().zip(s.slice()) {
            *e = d.size;
        }
        Shape {
            size: s.size,
            n: s.n,
            index: s.index,
            extent,
        }
    }
}

/// What the per-layer blocks (layer, dense layer, embedding, head) are computed from.
/// Field order puts the knobs that change most often in a sweep first, so that a
/// mismatch is found after a few comparisons.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct LayerKey {
    quick: (crate::parallel::Recompute, bool, bool, bool, bool),
    system: usize,
    plan: Plan,
    groups: [Shape; 3],
}

impl LayerKey {
    /// The key of `plan` on system number `system` with placement `place`; `tp_dp_share`:
    /// whether the TP group shares a dimension with the gradient reduction.
    pub(crate) fn new(system: usize, plan: &Plan, place: &Placement, tp_dp_share: bool) -> Self {
        let mut p = *plan;
        // Fields the layer, the embedding and the head never read.
        p.gpus = 0;
        p.dp = 0;
        p.pp = 0;
        p.hsdp = 0;
        p.global_batch = 0;
        p.micro_batches = 0;
        p.v = 0;
        p.zero = 0;
        p.dp_overlap = false;
        p.dp_bucket = None;
        p.schedule = Default::default();
        p.optimizer = Default::default();
        p.order = Default::default();
        p.stages = crate::parallel::Stages {
            pp: 0,
            first: 0,
            last: 0,
            mid_max: 0,
            mid_sum: 0,
        };
        LayerKey {
            quick: (
                plan.recompute,
                plan.sp,
                plan.tp_overlap,
                plan.flash_attention,
                tp_dp_share,
            ),
            system,
            plan: p,
            groups: [
                Shape::of(&place.tp),
                Shape::of(&place.cp),
                Shape::of(&place.ep),
            ],
        }
    }
}

/// The placement of `plan` on system number `system`, computed by `make` when not held.
pub(crate) fn placement<'a>(
    cache: &'a mut PlaceMemo,
    system: usize,
    plan: &Plan,
    make: impl FnOnce() -> crate::error::Result<Placement>,
) -> crate::error::Result<&'a Placement> {
    let key = (
        system,
        [
            plan.gpus, plan.dp, plan.tp, plan.pp, plan.ep, plan.cp, plan.etp,
        ],
        plan.order,
    );
    if cache.get(&key).is_none() {
        cache.put(key, make()?);
    }
    Ok(cache.get(&key).expect("just stored"))
}

//! Reuse across a sweep's hot loop. Consecutive plans of a sweep grid differ mostly in
//! knobs that leave the placement and the per-layer blocks unchanged (ZeRO stage,
//! DP overlap, group order, pipeline depth): a [`super::Memo`] keeps the few most recent
//! placements and per-layer results and hands them back when a plan needs the same ones.
//!
//! The same holds one level down for the collectives outside the layer: the DP and
//! ZeRO-3 buckets (HSDP's shard groups among them), the pipeline hop and the embedding
//! synchronisation, about a third of an estimate's time when computed. They do not
//! depend on recomputation or TP overlap, and ZeRO only picks which of a few run, so
//! consecutive plans repeat them and a [`Colls`] cache hands back their times too. Its
//! key is the collective's every input: operation, bytes, group shape, system, options
//! and whether the busy vector is wanted.
//!
//! Keys are conservative: a cached result is reused only when every input it was
//! computed from is equal. For the per-layer blocks the key is the whole plan with only
//! the fields that the layer, embedding and head do not read reset (pipeline and data
//! parallelism, ZeRO, batch count, schedule, optimizer, group order), plus the shape of
//! the TP, CP and EP groups on the network and whether TP shares a dimension with the DP
//! reduction; a field added to [`Plan`] later is part of the key until it is listed as
//! irrelevant. `tests/memo.rs` checks, over whole sweep grids, that estimates with and
//! without a memo are identical; the tests below check each field of the collective key.
//!
//! A memo belongs to one model and one list of systems: `system` in the calls is the
//! system's index in that list. Nothing is allocated: each cache is a fixed array
//! replaced round-robin.

use crate::collective::{self, Collective};
use crate::error::Result;
use crate::estimate::windows::Busy;
use crate::parallel::{Placement, Plan, Span};
use crate::units::Seconds;
use std::cell::RefCell;

/// A cache key with a cheap summary: equal keys have equal tags, so a lookup compares
/// whole keys only where the tags match (a tag is a filter, never the identity).
pub(crate) trait Key: PartialEq {
    /// A summary of the key's fields.
    fn tag(&self) -> u64;
}

/// Folds `x` into the running tag `h` (a multiply–rotate mix: nearby values spread).
fn mix(h: u64, x: u64) -> u64 {
    (h ^ x).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29)
}

/// A fixed-size cache of the `N` most recently inserted entries (round-robin). The tags
/// sit apart from the entries, so a miss scans `N` integers and no entry.
pub(crate) struct Recent<K, V, const N: usize> {
    tags: [u64; N],
    slots: [Option<(K, V)>; N],
    next: usize,
}

impl<K: Key, V, const N: usize> Recent<K, V, N> {
    /// An empty cache.
    pub(crate) fn new() -> Self {
        Recent {
            tags: [0; N],
            slots: std::array::from_fn(|_| None),
            next: 0,
        }
    }

    /// The slot holding `key`, if it is still held.
    fn find(&self, key: &K) -> Option<usize> {
        let tag = key.tag();
        (0..N).find(|&i| self.tags[i] == tag && matches!(&self.slots[i], Some((k, _)) if k == key))
    }

    /// Stores `value` under `key`, replacing the oldest entry when full.
    pub(crate) fn put(&mut self, key: K, value: V) -> &V {
        let i = self.next;
        self.next = (i + 1) % N;
        self.tags[i] = key.tag();
        &self.slots[i].insert((key, value)).1
    }

    /// The value stored under `key`, computed by `make` and stored when not held.
    pub(crate) fn get_or_insert<E>(
        &mut self,
        key: K,
        make: impl FnOnce() -> std::result::Result<V, E>,
    ) -> std::result::Result<&V, E> {
        match self.find(&key) {
            Some(i) => Ok(&self.slots[i].as_ref().expect("a found slot is full").1),
            None => Ok(self.put(key, make()?)),
        }
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
            mtp_apart: None,
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

impl Key for PlaceKey {
    fn tag(&self) -> u64 {
        let (system, degrees, order) = self;
        let h = degrees
            .iter()
            .fold(*system as u64, |h, &d| mix(h, d.into()));
        mix(h, *order as u64)
    }
}

impl Key for LayerKey {
    /// The knobs that change most often and the degrees and sizes that set a structural
    /// plan apart.
    fn tag(&self) -> u64 {
        let (recompute, sp, tp_overlap, flash, share) = self.quick;
        let bits = (recompute as u64) << 4
            | (sp as u64) << 3
            | (tp_overlap as u64) << 2
            | (flash as u64) << 1
            | share as u64;
        let p = &self.plan;
        let fields = [p.tp, p.cp, p.ep, p.etp, p.micro_batch, p.seq_len];
        let h = fields
            .iter()
            .fold(mix(bits, self.system as u64), |h, &x| mix(h, x.into()));
        self.groups
            .iter()
            .fold(h, |h, g| mix(h, u64::from(g.size) << 8 | g.n as u64))
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
    cache.get_or_insert(key, make)
}

/// What a collective's time and busy vector are computed from (`estimate::coll_busy`): the
/// operation, the bytes per device (their bits: `-0.0` and `0.0` are two keys), the group's
/// shape on system number `system`, the collective options and whether the busy vector is
/// wanted. The bytes come first: they differ between most entries.
#[derive(Clone, Copy, PartialEq)]
pub(crate) struct CollKey {
    bytes: u64,
    op: Collective,
    want: bool,
    opts: collective::Options,
    system: usize,
    shape: Shape,
}

/// The collective cache of a [`super::Memo`]: the 16 most recent collectives. One
/// structural plan's knob settings need about ten (gradient reduction and gathers for each
/// bucket count, ZeRO-3's four, the pipeline hop and the embedding synchronisation).
pub(crate) type CollCache = Recent<CollKey, (Seconds, Busy), 16>;

/// A worker's collective cache and the index of the system being evaluated, as a
/// transformer's context carries them; `None` in its place computes every collective.
#[derive(Clone, Copy)]
pub(crate) struct Colls<'a> {
    cache: &'a RefCell<CollCache>,
    system: usize,
}

impl<'a> Colls<'a> {
    /// The cache `cache` for system number `system`.
    pub(crate) fn new(cache: &'a RefCell<CollCache>, system: usize) -> Self {
        Colls { cache, system }
    }

    /// The index of the system being evaluated.
    pub(crate) fn system(&self) -> usize {
        self.system
    }
}

/// [`super::coll_busy`] through the cache `colls`, when there is one. Errors are not
/// cached (the collective is computed again and fails again).
pub(crate) fn coll_busy(
    colls: Option<Colls>,
    op: Collective,
    bytes: f64,
    span: &Span,
    opts: &collective::Options,
    want: bool,
) -> Result<(Seconds, Busy)> {
    let Some(c) = colls else {
        return super::coll_busy(op, bytes, span, opts, want);
    };
    let key = CollKey {
        bytes: bytes.to_bits(),
        op,
        want,
        opts: *opts,
        system: c.system,
        shape: Shape::of(span),
    };
    let mut cache = c.cache.borrow_mut();
    let v = cache.get_or_insert(key, || super::coll_busy(op, bytes, span, opts, want))?;
    Ok(*v)
}

impl Key for CollKey {
    fn tag(&self) -> u64 {
        let h = mix(self.bytes, (self.op as u64) << 1 | self.want as u64);
        let h = mix(h, self.system as u64);
        mix(h, u64::from(self.shape.size) << 8 | self.shape.n as u64)
    }
}

/// [`super::coll`] through the cache `colls`: the time of [`coll_busy`] without the busy
/// vector (identical: `coll_busy` computes it with `coll` when the vector is not wanted).
pub(crate) fn coll(
    colls: Option<Colls>,
    op: Collective,
    bytes: f64,
    span: &Span,
    opts: &collective::Options,
) -> Result<Seconds> {
    Ok(coll_busy(colls, op, bytes, span, opts, false)?.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog;
    use crate::collective::{Collective as C, Options, Schedule};
    use crate::parallel::PlanSpec;

    /// The DP and TP groups of TP 2 on 64 devices of `system` (8 per node): DP 32 spans
    /// 4 ranks of each node and the 8 nodes; and the system's DP collective options.
    fn groups(system: &str) -> (Span, Span, Options) {
        let m = catalog::model("gpt3-175b").unwrap();
        let s = catalog::system(system).unwrap().with_gpus(64).unwrap();
        let spec = PlanSpec {
            tp: 2,
            ..PlanSpec::default()
        };
        let plan = Plan::new(&spec, &m, 64).unwrap();
        let p = Placement::new(&plan, s.topology.dims()).unwrap();
        (p.dp, p.tp, s.dp_collective)
    }

    /// A collective's time and busy vector as bits (bit-identity, not closeness).
    fn bits((t, busy): (Seconds, Busy)) -> Vec<u64> {
        std::iter::once(t.get())
            .chain(busy)
            .map(f64::to_bits)
            .collect()
    }

    /// The tag filters: a mix that folds different values into the same tag would make
    /// every lookup compare whole keys (results stay right, the cache slows). One value
    /// apart, in either argument, gives another tag.
    #[test]
    fn mix_tells_nearby_values_apart() {
        assert_ne!(mix(0, 1), mix(0, 2));
        assert_ne!(mix(1, 1), mix(0, 1));
        assert_ne!(mix(1, 0), mix(0, 0));
    }

    /// Each of the knobs a sweep varies most gives the layer key another tag, so that a
    /// lookup skips the entries of the other settings without comparing whole keys: the
    /// recomputation mode (its bits above the four flags), SP, TP overlap, flash attention
    /// and the TP/DP link sharing.
    #[test]
    fn layer_tags_tell_each_quick_knob_apart() {
        let m = catalog::model("gpt3-175b").unwrap();
        let s = catalog::system("dgx-a100").unwrap().with_gpus(64).unwrap();
        let spec = PlanSpec {
            tp: 2,
            ..PlanSpec::default()
        };
        let plan = Plan::new(&spec, &m, 64).unwrap();
        let place = Placement::new(&plan, s.topology.dims()).unwrap();
        let base = LayerKey::new(0, &plan, &place, false);
        let (r, sp, tpo, flash, share) = base.quick;
        let other = match r {
            crate::parallel::Recompute::Full => crate::parallel::Recompute::Selective,
            _ => crate::parallel::Recompute::Full,
        };
        let variants = [
            (other, sp, tpo, flash, share),
            (r, !sp, tpo, flash, share),
            (r, sp, !tpo, flash, share),
            (r, sp, tpo, !flash, share),
            (r, sp, tpo, flash, !share),
        ];
        let mut tags = vec![base.tag()];
        for quick in variants {
            let key = LayerKey { quick, ..base };
            tags.push(key.tag());
        }
        // The groups' shapes: a TP group twice the size, a CP group over one more
        // dimension.
        let mut groups = base.groups;
        groups[0].size *= 2;
        tags.push(LayerKey { groups, ..base }.tag());
        let mut groups = base.groups;
        groups[1].n += 1;
        tags.push(LayerKey { groups, ..base }.tag());
        assert_distinct(&tags);
    }

    /// Fails unless every tag differs from every other.
    fn assert_distinct(tags: &[u64]) {
        let mut distinct = tags.to_vec();
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), tags.len(), "{tags:?}");
    }

    /// A collective's key: another operation, the busy vector wanted or not, a group twice
    /// the size or over one more dimension each give another tag.
    #[test]
    fn coll_tags_tell_op_want_and_shape_apart() {
        let (dp, _, opts) = groups("dgx-a100");
        let base = CollKey {
            bytes: 1e8f64.to_bits(),
            op: C::AllGather,
            want: false,
            opts,
            system: 0,
            shape: Shape::of(&dp),
        };
        let mut wide = base.shape;
        wide.size *= 2;
        let mut deep = base.shape;
        deep.n += 1;
        let tags = [
            base.tag(),
            CollKey {
                op: C::ReduceScatter,
                ..base
            }
            .tag(),
            CollKey { want: true, ..base }.tag(),
            CollKey {
                shape: wide,
                ..base
            }
            .tag(),
            CollKey {
                shape: deep,
                ..base
            }
            .tag(),
        ];
        assert_distinct(&tags);
    }

    #[test]
    fn a_cached_collective_equals_the_computed_one_whatever_field_differs() {
        let (dp, tp, opts) = groups("dgx-a100");
        let (dp_h100, _, opts_h100) = groups("dgx-h100");
        // The two systems' DP groups have one shape: only the system index tells apart
        // their dimensions' bandwidths.
        assert!(Shape::of(&dp) == Shape::of(&dp_h100));
        // ASTRA-sim's fixed phase order instead of NCCL's pipelined phases.
        let baseline = Options {
            schedule: Schedule::Baseline,
            ..opts
        };
        // (what differs from the first case, system, op, bytes, group, options, want)
        let cases = [
            ("nothing", 0, C::AllGather, 1e8, &dp, &opts, false),
            ("bytes", 0, C::AllGather, 3e8, &dp, &opts, false),
            ("op", 0, C::AllReduce, 1e8, &dp, &opts, false),
            ("want", 0, C::AllGather, 1e8, &dp, &opts, true),
            ("options", 0, C::AllGather, 1e8, &dp, &baseline, false),
            ("group", 0, C::AllGather, 1e8, &tp, &opts, false),
            ("system", 1, C::AllGather, 1e8, &dp_h100, &opts_h100, false),
        ];
        let cache = RefCell::new(CollCache::new());
        let first = bits(super::super::coll_busy(C::AllGather, 1e8, &dp, &opts, false).unwrap());
        // Each case after the first is looked up with the first in the cache: a key
        // without the field that differs would hand back the first case's result.
        for (name, system, op, bytes, span, o, want) in cases.into_iter().chain([cases[0]]) {
            let computed = bits(super::super::coll_busy(op, bytes, span, o, want).unwrap());
            let colls = Some(Colls::new(&cache, system));
            let cached = bits(coll_busy(colls, op, bytes, span, o, want).unwrap());
            assert_eq!(cached, computed, "{name}");
            if name != "nothing" {
                assert_ne!(computed, first, "{name} does not change the collective");
            }
        }
    }

    /// A key whose tag is its value modulo 2: keys 1 and 3 share a tag.
    impl Key for u32 {
        fn tag(&self) -> u64 {
            u64::from(*self % 2)
        }
    }

    #[test]
    fn recent_keeps_the_last_n_entries_and_tells_keys_of_one_tag_apart() {
        let mut r: Recent<u32, u32, 2> = Recent::new();
        let made = std::cell::Cell::new(0);
        let mut get = |k: u32| {
            *r.get_or_insert(k, || {
                made.set(made.get() + 1);
                Ok::<_, ()>(10 * k)
            })
            .unwrap()
        };
        // 1 and 3 share a tag but are two entries.
        assert_eq!((get(1), get(3), get(1), get(3)), (10, 30, 10, 30));
        // 2 replaces the oldest (1); 3 is still held; 1 is computed again (replacing 3).
        assert_eq!((get(2), get(3), get(1)), (20, 30, 10));
        assert_eq!(made.get(), 4);
    }
}

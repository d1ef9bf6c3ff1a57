//! The pruned hardware × plan search: the same top-k as evaluating every (plan, hardware)
//! point, with most points decided without a full estimate.
//!
//! The hot loop runs plan by plan; a plan's hardware points are visited most promising
//! first (highest peak, most devices per node, highest bandwidths from the outermost
//! dimension in, lowest latencies, largest HBM), grouped into *twins* that differ only in
//! HBM capacity. For each point:
//!
//! 1. **Shared estimate.** Memory per device does not depend on the hardware and the HBM
//!    capacity only decides the fit (`fits = total ≤ capacity`), so one estimate serves
//!    all twins; once a plan's memory is known, a point whose capacity it exceeds is
//!    dropped without an estimate.
//! 2. **Bound.** The first estimate of a plan gives its compute floor
//!    `F = T_fwd + T_bwd + T_recompute + T_optimizer` (`estimate::bound::compute_floor`),
//!    a lower bound of its iteration time on every network and every peak no higher
//!    (proof there). Each objective's key is monotone in T, so the key at `T = F`
//!    (less a relative 10⁻⁹ for rounding) bounds the point's key from below. A point is
//!    *pruned* when that bound is worse than the k-th best key found so far, by this
//!    thread or any other (a shared atomic), and its (bound, memory) pair is dominated
//!    in the thread's Pareto set: such a point could change neither result.
//! 3. A threshold is found early: before the loop, an even sample of 4,096 plans is
//!    estimated on the most promising point, and its k-th best key seeds the threshold
//!    (those are real points of the grid, so the true k-th best is no worse).
//!
//! Counts: `estimates` are full estimates computed, `shared` points took a twin's
//! estimate, `pruned` points were skipped by the bound (they are neither estimated nor
//! checked for placement on their network).

use super::driver::{self, Acc, Outcome, RunResult};
use super::grid::Grid;
use super::objective::Objective;
use super::search::{Hit, SearchOptions};
use crate::estimate::{self, Estimate, bound::compute_floor};
use crate::model::Model;
use crate::parallel::Plan;
use rayon::prelude::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Plans estimated before the loop to seed the threshold.
const SEED_PLANS: u64 = 4096;
/// Relative slack on bounds derived from the time floor (rounding of the divisions).
const SLACK: f64 = 1e-9;

/// Counts of a pruned search.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counts {
    /// Full estimates computed (including the seed sample).
    pub estimates: u64,
    /// Points that took their twin's estimate (HBM capacity only changes the fit).
    pub shared: u64,
    /// Points skipped by the bound.
    pub pruned: u64,
}

/// The visiting order of one base system's hardware points and their twin groups.
struct Layout {
    hw: u64,
    /// Hardware offsets in visiting order; twins are consecutive.
    order: Vec<usize>,
    /// Ranges of `order` holding one twin group (at most 64 points).
    groups: Vec<(usize, usize)>,
    /// HBM capacity and bf16 peak per system of the grid.
    cap: Vec<f64>,
    peak: Vec<f64>,
}

impl Layout {
    fn new(grid: &Grid) -> Layout {
        let hw = grid.hw_count();
        let sys = &grid.systems;
        let peak: Vec<f64> = (sys.iter())
            .map(|s| {
                s.1.device
                    .peak(crate::compute::Precision::Bf16)
                    .map_or(0.0, |p| p.get())
            })
            .collect();
        // Usable capacity: HBM less the reserve every plan of the grid runs with.
        let reserve = |d: &crate::compute::Device| {
            grid.axes
                .memory_reserve
                .unwrap_or_else(|| d.memory_reserve())
                .get()
        };
        let cap: Vec<f64> = (sys.iter())
            .map(|s| s.1.device.memory().get() - reserve(&s.1.device))
            .collect();
        let hwa = &grid.axes.hardware;
        let promise = |h: usize| {
            let t = &sys[h].1.topology;
            let mut k = vec![-peak[h], -f64::from(t.dims()[0].size)];
            k.extend(t.dims().iter().rev().map(|d| -d.bandwidth.get()));
            k.push(t.dims().iter().map(|d| d.latency.get()).sum());
            k.push(hwa.twin(h) as f64);
            k.push(-cap[h]);
            k
        };
        let mut order: Vec<usize> = (0..hw as usize).collect();
        let keys: Vec<Vec<f64>> = order.iter().map(|&h| promise(h)).collect();
        order.sort_by(|&a, &b| {
            let o = keys[a].iter().zip(&keys[b]).map(|(x, y)| x.total_cmp(y));
            o.fold(std::cmp::Ordering::Equal, |acc, c| acc.then(c))
        });
        let mut groups = vec![];
        let mut lo = 0;
        for i in 1..=order.len() {
            let split =
                i == order.len() || hwa.twin(order[i]) != hwa.twin(order[lo]) || i - lo == 64;
            if split {
                groups.push((lo, i));
                lo = i;
            }
        }
        Layout {
            hw,
            order,
            groups,
            cap,
            peak,
        }
    }
}

/// A monotone map of f64 onto u64 (total order), for an atomic minimum.
fn ordered(x: f64) -> u64 {
    let b = x.to_bits();
    if b >> 63 == 1 { !b } else { b | 1 << 63 }
}

fn unordered(u: u64) -> f64 {
    f64::from_bits(if u >> 63 == 1 { u & !(1 << 63) } else { !u })
}

/// Lower bound of `obj`'s key at a point with capacity `cap` and plan-precision peak
/// `peak`, from the plan's estimate `e` and time floor `floor` (seconds). Each key is
/// the estimate's (`Objective::key`) with `T` replaced by `floor`: time `F`, tokens
/// `−tokens·B/F`, MFU `−F_model/(F·P·N)`, cost `N·10⁶·F/(tokens·B)/3600`, less `SLACK`;
/// memory and headroom do not depend on `T` and are exact.
fn key_floor(obj: Objective, e: &Estimate, floor: f64, cap: f64, peak: f64) -> f64 {
    let tokens = e.tokens_per_sample * e.plan.global_batch as f64;
    let n = e.plan.gpus as f64;
    let k = match obj {
        Objective::Memory => return e.memory.total.get(),
        Objective::Headroom => return -(cap - e.memory.total.get()),
        // (`cap` is the usable capacity: HBM less the reserve.)
        Objective::Time => floor,
        Objective::Tokens => -(tokens / floor),
        Objective::Mfu => -(e.metrics.model_flops / (floor * peak * n)),
        Objective::Cost => n * 1e6 * floor / tokens / 3600.0,
    };
    k - SLACK * k.abs()
}

/// What one plan's search needs beside the accumulator.
struct Ctx<'a> {
    model: &'a Model,
    grid: &'a Grid,
    opts: &'a SearchOptions,
    lay: &'a Layout,
    threshold: &'a AtomicU64,
    prune: bool,
}

struct Local {
    acc: Acc<Hit>,
    n: Counts,
}

/// The plan's floor so far: (time floor, the peak it holds for, the estimate it came from).
type Floor = (f64, f64, Estimate);

impl Ctx<'_> {
    /// Whether point `i` (system `si`, capacity `cap`) can be skipped: its key bound is
    /// worse than the k-th best and its bound pair is dominated.
    fn skip(&self, l: &Local, f: &Floor, plan: &Plan, si: usize, i: u64) -> bool {
        let (floor, fpeak, e) = f;
        if !self.prune || self.lay.peak[si] > *fpeak {
            return false;
        }
        let cap = self.lay.cap[si];
        let sys = &self.grid.systems[si].1;
        let peak = sys.device.peak(plan.precision).map_or(0.0, |p| p.get());
        let kb = |o: Objective| key_floor(o, e, *floor, cap, peak);
        let key = kb(self.opts.sort);
        let global = unordered(self.threshold.load(Ordering::Relaxed));
        if l.acc.top.would_keep(key, i) && key <= global {
            return false;
        }
        let (x, y) = (kb(self.opts.pareto.0), kb(self.opts.pareto.1));
        l.acc.pareto.is_dominated(x, y, i)
    }

    /// Searches every hardware point of plan configuration `p`.
    fn plan(&self, l: &mut Local, p: u64) {
        let hw = self.lay.hw;
        let Some((plan, b)) = self.grid.decode_plan(p) else {
            l.acc.dropped[0] += hw;
            return;
        };
        let first = b * hw as usize;
        let mut mem: Option<f64> = None;
        let mut floor: Option<Floor> = None;
        for &(lo, hi) in &self.lay.groups {
            // Members still to be estimated, as a bit set over the group.
            let mut need = 0u64;
            for (j, &h) in self.lay.order[lo..hi].iter().enumerate() {
                let (si, i) = (first + h, p * hw + h as u64);
                if mem.is_some_and(|m| m > self.lay.cap[si]) {
                    l.acc.add(i, Outcome::Dropped(1));
                } else if floor
                    .as_ref()
                    .is_some_and(|f| self.skip(l, f, &plan, si, i))
                {
                    l.n.pruned += 1;
                } else {
                    need |= 1 << j;
                }
            }
            if need == 0 {
                continue;
            }
            let j0 = need.trailing_zeros() as usize;
            let si0 = first + self.lay.order[lo + j0];
            let sys = &self.grid.systems[si0].1;
            let res = estimate::evaluate(self.model, sys, &plan);
            l.n.estimates += 1;
            l.n.shared += u64::from(need.count_ones()) - 1;
            if let Ok(e) = &res {
                mem = Some(e.memory.total.get());
                let (f, pk) = (compute_floor(e).get(), self.lay.peak[si0]);
                floor = Some(match floor {
                    Some((g, gp, ge)) if pk <= gp && g >= f => (g, pk, ge),
                    _ => (f, pk, *e),
                });
            }
            for (j, &h) in self.lay.order[lo..hi].iter().enumerate() {
                if need & (1 << j) != 0 {
                    let (si, i) = (first + h, p * hw + h as u64);
                    l.acc.add(i, self.outcome(&res, si, p));
                }
            }
            self.publish(l);
        }
    }

    /// The outcome at system `si` from its twin's estimate.
    fn outcome(&self, res: &crate::error::Result<Estimate>, si: usize, p: u64) -> Outcome<Hit> {
        let Ok(e) = res else {
            return Outcome::Dropped(2);
        };
        let mut e = *e;
        let dev = &self.grid.systems[si].1.device;
        e.memory = (e.memory).on_capacity(dev.memory(), crate::memory::reserve(dev, &e.plan));
        if !e.memory.fits {
            return Outcome::Dropped(1);
        }
        Outcome::Kept {
            item: Hit {
                est: e,
                system: si,
                block: p / self.grid.knob_count(),
            },
            key: self.opts.sort.key(&e),
            x: self.opts.pareto.0.key(&e),
            y: self.opts.pareto.1.key(&e),
        }
    }

    /// Shares this thread's k-th best key with the others.
    fn publish(&self, l: &Local) {
        if let Some(t) = l.acc.top.threshold() {
            self.threshold.fetch_min(ordered(t), Ordering::Relaxed);
        }
    }

    /// Estimates an even sample of plans on the most promising point; the k-th best key
    /// among those that fit is an upper bound of the grid's k-th best.
    fn seed(&self) -> u64 {
        let (n, k) = (self.grid.plan_len(), self.opts.run.top_k);
        let step = n.div_ceil(SEED_PLANS).max(1);
        let h = self.lay.order[0];
        let key = |p: u64| -> Option<f64> {
            let (plan, b) = self.grid.decode_plan(p)?;
            let sys = &self.grid.systems[b * self.lay.hw as usize + h].1;
            let e = estimate::evaluate(self.model, sys, &plan).ok()?;
            e.memory.fits.then(|| self.opts.sort.key(&e))
        };
        let ps: Vec<u64> = (0..n).step_by(step as usize).collect();
        let mut keys: Vec<f64> = if self.opts.run.parallel {
            ps.par_iter().filter_map(|&p| key(p)).collect()
        } else {
            ps.iter().filter_map(|&p| key(p)).collect()
        };
        keys.sort_by(f64::total_cmp);
        if k > 0 && keys.len() >= k {
            self.threshold
                .fetch_min(ordered(keys[k - 1]), Ordering::Relaxed);
        }
        ps.len() as u64
    }
}

/// Searches `grid` (with hardware axes) plan by plan with shared estimates and, when
/// `prune`, bound pruning; returns the run and its counts.
pub fn search(
    model: &Model,
    grid: &Grid,
    opts: &SearchOptions,
    prune: bool,
) -> (RunResult<Hit>, Counts) {
    let start = Instant::now();
    let lay = Layout::new(grid);
    let threshold = AtomicU64::new(ordered(f64::INFINITY));
    let cx = Ctx {
        model,
        grid,
        opts,
        lay: &lay,
        threshold: &threshold,
        prune,
    };
    let seeded = if prune && opts.run.top_k > 0 {
        cx.seed()
    } else {
        0
    };
    let r = &opts.run;
    let threads = if r.parallel {
        rayon::current_num_threads()
    } else {
        1
    };
    let locals: Vec<Mutex<Local>> = (0..threads)
        .map(|_| {
            Mutex::new(Local {
                acc: Acc::new(r.top_k, r.pareto_cap),
                n: Counts::default(),
            })
        })
        .collect();
    let run_range = |lo: u64, hi: u64| {
        let t = rayon::current_thread_index().unwrap_or(0) % threads;
        if let Ok(mut l) = locals[t].lock() {
            (lo..hi).for_each(|p| cx.plan(&mut l, p));
        }
    };
    let (n, hw) = (grid.plan_len(), lay.hw);
    let bar = r.progress.then(|| driver::progress_bar(n * hw));
    let block = (driver::BLOCK / hw).max(1);
    let mut lo = 0;
    while lo < n {
        let hi = (lo + block * 16).min(n);
        if r.parallel {
            let pieces = (hi - lo).div_ceil(8);
            (0..pieces).into_par_iter().for_each(|q| {
                run_range(lo + q * 8, (lo + q * 8 + 8).min(hi));
            });
        } else {
            run_range(lo, hi);
        }
        if let Some(b) = &bar {
            b.set_position(hi * hw);
        }
        lo = hi;
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let mut counts = Counts {
        estimates: seeded,
        ..Counts::default()
    };
    let mut acc = Acc::new(r.top_k, r.pareto_cap);
    for l in locals {
        let l = l.into_inner().unwrap_or_else(|e| e.into_inner());
        counts.estimates += l.n.estimates;
        counts.shared += l.n.shared;
        counts.pruned += l.n.pruned;
        acc = acc.merge(l.acc);
    }
    (driver::finish(acc, n * hw, start), counts)
}

//! Runs a [`Grid`] through the estimate: decodes each hot-loop index into a plan, evaluates
//! it, drops what is redundant or does not fit, and streams the rest into the ranking.

use super::driver::{self, Outcome, RunOptions, RunResult, Sink};
use super::grid::{DropCount, Grid};
use super::objective::Objective;
use super::prune;
use crate::estimate::{self, Estimate, Memo};
use crate::model::Model;
use crate::parallel::Plan;

/// One kept configuration: its estimate, the index of its system in the grid and of its
/// structural plan.
#[derive(Clone, Copy, Debug)]
pub struct Hit {
    /// The estimate (it holds the plan).
    pub est: Estimate,
    /// Index into [`Grid::systems`].
    pub system: usize,
    /// Index into [`Grid::structural`]: the plan before its knobs are set.
    pub block: u64,
}

/// Relative width of the bins of [`Hit`]'s tie class: 10⁻³.
pub const TIE: f64 = 1e-3;

/// The bin of a positive quantity on a log scale, bins a relative [`TIE`] wide:
/// `⌊ln x / ln(1 + TIE)⌋`.
pub fn tie_bin(x: f64) -> i64 {
    (x.ln() / TIE.ln_1p()).floor() as i64
}

/// Two configurations *tie* (one row of the ranked list, with the number of variants)
/// when they are the same structural plan (devices, network, degrees, CP, sequence,
/// precision, micro-batch, schedule) on the same system and hardware point, differ only in
/// knobs (ZeRO, recomputation, SP, overlap, group order, flash attention), and their
/// iteration times and memories per device fall in the same bins 0.1% wide
/// ([`tie_bin`]): a reader cannot tell them apart by any number the row prints.
impl super::rank::Distinct for Hit {
    type Class = (u64, usize, i64, i64);
    fn class(&self, _: u64) -> Self::Class {
        (
            self.block,
            self.system,
            tie_bin(self.est.time.total.get()),
            tie_bin(self.est.memory.total.get()),
        )
    }
}

/// Reasons the hot loop drops a configuration, by index.
pub const HOT_REASONS: [&str; 3] = [
    "redundant or refused: a knob with no effect that repeats another configuration (e.g. ZeRO with dp = 1), or a knob combination no framework runs (ZeRO-2 with a pipeline, full recomputation beside the EP overlap or scoped CUDA graphs)",
    "does not fit in device memory",
    "cannot be placed on the network",
];

/// Search settings.
#[derive(Clone, Copy, Debug)]
pub struct SearchOptions {
    /// Ranking objective.
    pub sort: Objective,
    /// The two Pareto objectives.
    pub pareto: (Objective, Objective),
    /// Driver settings (top-k size, parallelism, progress).
    pub run: RunOptions,
}

/// What a search found.
#[derive(Clone, Debug)]
pub struct SearchResult {
    /// Ranked entries and Pareto front.
    pub run: RunResult<Hit>,
    /// Every drop reason with its count (structural and hot-loop).
    pub drops: Vec<DropCount>,
    /// Full estimates computed (hot-loop configurations that were not redundant).
    pub estimates: u64,
    /// Total configurations in the grid.
    pub total: u64,
    /// With hardware axes: points that took a twin's estimate (they differ only in HBM
    /// capacity) and points skipped by the bound (`prune`); `None` otherwise.
    pub pruning: Option<prune::Counts>,
}

impl SearchResult {
    /// Full estimates per second of wall time.
    pub fn rate(&self) -> f64 {
        self.estimates as f64 / self.run.elapsed_s.max(1e-9)
    }
}

/// Evaluates hot-loop index `i` of `grid` from scratch.
#[inline]
pub fn evaluate_index(model: &Model, grid: &Grid, opts: &SearchOptions, i: u64) -> Outcome<Hit> {
    outcome(grid, opts, i, |plan, si| {
        estimate::evaluate(model, &grid.systems[si].1, plan)
    })
}

/// [`evaluate_index`] reusing a worker's [`Memo`] (one per model and grid).
#[inline]
pub fn evaluate_index_memo(
    model: &Model,
    grid: &Grid,
    opts: &SearchOptions,
    i: u64,
    memo: &mut Memo,
) -> Outcome<Hit> {
    outcome(grid, opts, i, |plan, si| {
        estimate::evaluate_memo(model, &grid.systems[si].1, si, plan, memo)
    })
}

/// Decodes index `i` and ranks the estimate `eval` gives for its plan and system index.
#[inline]
fn outcome(
    grid: &Grid,
    opts: &SearchOptions,
    i: u64,
    eval: impl FnOnce(&Plan, usize) -> crate::error::Result<Estimate>,
) -> Outcome<Hit> {
    let Some((plan, si)) = grid.decode(i) else {
        return Outcome::Dropped(0);
    };
    match eval(&plan, si) {
        Err(_) => Outcome::Dropped(2),
        Ok(e) if !e.memory.fits => Outcome::Dropped(1),
        Ok(e) => Outcome::Kept {
            item: Hit {
                est: e,
                system: si,
                block: i / grid.hw_count() / grid.knob_count(),
            },
            key: opts.sort.key(&e),
            x: opts.pareto.0.key(&e),
            y: opts.pareto.1.key(&e),
        },
    }
}

/// Searches the whole grid. `sink` receives every hot-loop outcome in index order. A grid
/// with hardware axes and no sink runs the pruned search (`prune`), which finds the same
/// top-k and Pareto set with far fewer estimates.
pub fn search(
    model: &Model,
    grid: &Grid,
    opts: &SearchOptions,
    sink: Option<Sink<'_, Hit>>,
) -> SearchResult {
    let n = grid.hot_len();
    let (run, pruning) = if grid.hw_count() > 1 && sink.is_none() {
        let (run, c) = prune::search(model, grid, opts, true);
        (run, Some(c))
    } else {
        let run = driver::run(
            n,
            opts.run,
            Memo::new,
            |memo, i| evaluate_index_memo(model, grid, opts, i, memo),
            sink,
        );
        (run, None)
    };
    finish(grid, run, pruning)
}

/// The result of a run: drops per reason (structural and hot-loop) and the counts.
pub fn finish(grid: &Grid, run: RunResult<Hit>, pruning: Option<prune::Counts>) -> SearchResult {
    let n = grid.hot_len();
    let mut drops = grid.invalid.clone();
    for (r, name) in HOT_REASONS.iter().enumerate() {
        if run.dropped[r] > 0 {
            drops.push(DropCount {
                reason: name.to_string(),
                count: run.dropped[r],
            });
        }
    }
    let estimates = pruning.map_or(n - run.dropped[0], |c| c.estimates);
    SearchResult {
        run,
        drops,
        estimates,
        total: grid.total,
        pruning,
    }
}

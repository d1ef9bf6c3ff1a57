//! The variants a ranked row stands for. The ranking keeps one row per tie class
//! ([`Hit`]'s [`Distinct`] class: same structural plan and system, time and memory in the
//! same 0.1% bins); once the rows are known, each row's class is counted exactly by
//! evaluating the knob variants of its structural plan on its system again (at most the
//! grid's knob count per distinct row, a few milliseconds for a top 10), and the knobs
//! in which the tied variants differ are named.

use super::grid::Grid;
use super::rank::Distinct;
use super::search::Hit;
use crate::estimate;
use crate::model::Model;
use crate::parallel::Plan;
use crate::report::sweep::SweepRow;
use rayon::prelude::*;
use std::collections::HashMap;

/// The knobs of the grid ([`Grid::decode_plan`]) by the name of their plan field, and
/// whether two plans differ in it.
/// Whether two plans differ in one knob.
type Differs = fn(&Plan, &Plan) -> bool;

const KNOBS: [(&str, Differs); 8] = [
    ("zero", |a, b| a.zero != b.zero),
    ("recompute", |a, b| a.recompute != b.recompute),
    ("sequence_parallel", |a, b| a.sp != b.sp),
    ("dp_overlap", |a, b| a.dp_overlap != b.dp_overlap),
    ("tp_overlap", |a, b| a.tp_overlap != b.tp_overlap),
    ("order", |a, b| a.order != b.order),
    ("flash_attention", |a, b| {
        a.flash_attention != b.flash_attention
    }),
    ("offload", |a, b| a.offload != b.offload),
];

type Class = <Hit as Distinct>::Class;

/// Every valid, fitting knob variant of structural plan `block` on system `system`:
/// (tie class, plan).
fn variants_of(model: &Model, grid: &Grid, block: u64, system: usize) -> Vec<(Class, Plan)> {
    let k = grid.knob_count();
    let sys = &grid.systems[system].1;
    // The variants share placements, layers and collectives (`estimate::Memo`).
    let mut memo = estimate::Memo::new();
    (0..k)
        .filter_map(|knob| {
            let (plan, _) = grid.decode_plan(block * k + knob)?;
            let est = estimate::evaluate_memo(model, sys, system, &plan, &mut memo).ok()?;
            let hit = Hit { est, system, block };
            est.memory.fits.then(|| (hit.class(0), plan))
        })
        .collect()
}

/// Fills `variants` and `variant_axes` of each row from its hit (`rows[i]` is `hits[i]`).
pub fn annotate(model: &Model, grid: &Grid, hits: &[&Hit], rows: &mut [SweepRow]) {
    let mut keys: Vec<(u64, usize)> = hits.iter().map(|h| (h.block, h.system)).collect();
    keys.sort_unstable();
    keys.dedup();
    let all: HashMap<(u64, usize), Vec<(Class, Plan)>> = keys
        .par_iter()
        .map(|&(b, s)| ((b, s), variants_of(model, grid, b, s)))
        .collect();
    for (h, row) in hits.iter().zip(rows.iter_mut()) {
        let class = h.class(0);
        let mut count = 0u32;
        let mut differs = [false; KNOBS.len()];
        for (c, p) in &all[&(h.block, h.system)] {
            if *c != class {
                continue;
            }
            count += 1;
            for (d, (_, f)) in differs.iter_mut().zip(KNOBS) {
                *d |= f(p, &h.est.plan);
            }
        }
        row.variants = count.max(1);
        let names: Vec<&str> = (KNOBS.iter().zip(differs))
            .filter(|(_, d)| *d)
            .map(|((n, _), _)| *n)
            .collect();
        row.variant_axes = names.join(",");
    }
}

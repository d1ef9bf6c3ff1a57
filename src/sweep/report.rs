//! Turns a [`SearchResult`] into a [`Report`]: the summary (grid size, drops per reason,
//! estimates per second), the ranked top-k, the Pareto front, and the bandwidth split;
//! and into the Pareto plot.

use super::all::{order_name, recompute_name, schedule_name};
use super::bandwidth;
use super::grid::Grid;
use super::search::{Hit, SearchOptions, SearchResult};
use crate::error::Result;
use crate::estimate;
use crate::model::Model;
use crate::report::{Cell, Report, Table};
use crate::units::{Bandwidth, Bytes, Seconds};

/// The whole sweep report; `timing` false leaves out the wall time and the rate (the only
/// parts that differ between identical runs).
pub fn build(
    model: &Model,
    grid: &Grid,
    opts: &SearchOptions,
    r: &SearchResult,
    budget: Option<Bandwidth>,
    timing: bool,
) -> Result<Report> {
    let mut rep = Report::default();
    rep.tables.push(summary(r, timing)?);
    rep.tables
        .push(plans("top", grid, r.run.top.iter().map(|e| &e.item))?);
    rep.tables
        .push(plans("pareto", grid, r.run.pareto.iter().map(|p| &p.item))?);
    rep.tables.push(drops(r)?);
    let speed = if timing {
        format!(
            " in {:.3} s: {:.0} estimates/s ({})",
            r.run.elapsed_s,
            r.rate(),
            if opts.run.parallel {
                format!("{} threads", rayon::current_num_threads())
            } else {
                "1 thread".into()
            }
        )
    } else {
        String::new()
    };
    rep.notes.push(format!(
        "{} configurations in the grid, {} full estimates{speed}; ranked by {}, Pareto front of {} vs {}",
        r.total,
        r.estimates,
        opts.sort.name(),
        opts.pareto.0.name(),
        opts.pareto.1.name(),
    ));
    if r.run.top.is_empty() {
        rep.notes
            .push("no configuration is valid and fits in memory: see the drops table".into());
    }
    if let (Some(b), Some(best)) = (budget, r.run.top.first()) {
        rep.tables
            .push(split_table(model, grid, &best.item, b, &mut rep.notes)?);
    }
    Ok(rep)
}

fn summary(r: &SearchResult, timing: bool) -> Result<Table> {
    let mut t = Table::new("summary", &[("metric", "metric"), ("value", "value")]);
    let dropped: u64 = r.drops.iter().map(|d| d.count).sum();
    t.push(vec![
        Cell::text("configurations in the grid"),
        Cell::int(r.total),
    ])?;
    t.push(vec![Cell::text("dropped (see drops)"), Cell::int(dropped)])?;
    t.push(vec![Cell::text("valid and fitting"), Cell::int(r.run.kept)])?;
    t.push(vec![
        Cell::text("full estimates computed"),
        Cell::int(r.estimates),
    ])?;
    if !timing {
        return Ok(t);
    }
    t.push(vec![
        Cell::text("wall time"),
        Cell::q(Seconds::new(r.run.elapsed_s), r.run.elapsed_s),
    ])?;
    t.push(vec![
        Cell::text("estimates per second"),
        Cell::num(r.rate().round()),
    ])?;
    Ok(t)
}

fn drops(r: &SearchResult) -> Result<Table> {
    let mut t = Table::new(
        "drops",
        &[("reason", "dropped because"), ("count", "configurations")],
    );
    for d in &r.drops {
        t.push(vec![Cell::text(d.reason.clone()), Cell::int(d.count)])?;
    }
    Ok(t)
}

const PLAN_COLS: [(&str, &str); 18] = [
    ("rank", "#"),
    ("network", "network"),
    ("gpus", "gpus"),
    ("dp", "dp"),
    ("tp", "tp"),
    ("pp", "pp"),
    ("ep", "ep"),
    ("micro_batch", "mb"),
    ("schedule", "schedule"),
    ("zero", "zero"),
    ("recompute", "recompute"),
    ("sequence_parallel", "sp"),
    ("overlap", "overlap dp/tp"),
    ("order", "order"),
    ("iteration_time_s", "iteration"),
    ("tokens_per_s", "tokens/s"),
    ("mfu", "MFU"),
    ("memory_B", "memory/device"),
];

fn plans<'a>(title: &str, grid: &Grid, hits: impl Iterator<Item = &'a Hit>) -> Result<Table> {
    let mut cols = PLAN_COLS.to_vec();
    cols.push(("flash_attention", "flash"));
    cols.extend([("cp", "cp"), ("seq_len", "seq"), ("precision", "precision")]);
    let mut t = Table::new(title, &cols);
    for (i, h) in hits.enumerate() {
        let p = &h.est.plan;
        let e = &h.est;
        let sched = match p.v {
            1 => schedule_name(p).to_string(),
            v => format!("{}:{v}", schedule_name(p)),
        };
        t.push(vec![
            Cell::int(i as u64 + 1),
            Cell::text(grid.systems[h.system].0.clone()),
            Cell::int(p.gpus as u64),
            Cell::int(p.dp as u64),
            Cell::int(p.tp as u64),
            Cell::int(p.pp as u64),
            Cell::int(p.ep as u64),
            Cell::int(p.micro_batch as u64),
            Cell::text(sched),
            Cell::int(p.zero as u64),
            Cell::text(recompute_name(p)),
            Cell::text(if p.sp { "on" } else { "off" }),
            Cell::text(format!("{}/{}", onoff(p.dp_overlap), onoff(p.tp_overlap))),
            Cell::text(order_name(p)),
            Cell::q(e.time.total, e.time.total.get()),
            Cell::q(
                format!("{:.0}", e.metrics.tokens_per_s),
                e.metrics.tokens_per_s,
            ),
            Cell::q(format!("{:.1}%", 100.0 * e.metrics.mfu), e.metrics.mfu),
            Cell::q(e.memory.total, e.memory.total.get()),
            Cell::text(onoff(p.flash_attention)),
            Cell::text(match p.cp {
                1 => "1".to_string(),
                c => format!("{c} {}", p.cp_kind.name()),
            }),
            Cell::int(p.seq_len as u64),
            Cell::text(crate::sweep::all::precision_name(p)),
        ])?;
    }
    Ok(t)
}

fn onoff(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// The bandwidth-allocation table for the best plan: traffic per dimension, the given
/// and the optimal split, and the iteration time with each.
fn split_table(
    model: &Model,
    grid: &Grid,
    best: &Hit,
    budget: Bandwidth,
    notes: &mut Vec<String>,
) -> Result<Table> {
    let sys = &grid.systems[best.system].1;
    let plan = &best.est.plan;
    let dims = sys.topology.dims();
    let v = bandwidth::traffic(model, sys, plan)?;
    let v = &v[..dims.len()];
    let split = bandwidth::optimal_split(v, budget)?;
    let given: Vec<Bandwidth> = dims.iter().map(|d| d.bandwidth).collect();
    let scaled_total: f64 = given.iter().map(|b| b.get()).sum();
    let scaled: Vec<Bandwidth> = given
        .iter()
        .map(|b| *b * (budget.get() / scaled_total))
        .collect();
    let mut t = Table::new(
        "bandwidth",
        &[
            ("dim", "dim"),
            ("kind", "block"),
            ("traffic_B", "traffic/iteration"),
            ("given_Bps", "given (scaled to budget)"),
            ("optimal_Bps", "optimal B_d ∝ √traffic"),
        ],
    );
    for (d, dim) in dims.iter().enumerate() {
        t.push(vec![
            Cell::int(d as u64),
            Cell::text(dim.kind.name()),
            Cell::q(Bytes::new(v[d]), v[d]),
            Cell::q(scaled[d], scaled[d].get()),
            Cell::q(split[d], split[d].get()),
        ])?;
    }
    let before = estimate::evaluate(model, &bandwidth::with_split(sys, &scaled), plan)?;
    let after = estimate::evaluate(model, &bandwidth::with_split(sys, &split), plan)?;
    notes.push(format!(
        "bandwidth budget {budget} per NPU for the best plan: bandwidth-bound communication {} → {} (closed form (Σ√V_d)²/B); iteration {} → {}",
        Seconds::new(bandwidth::bound_time(v, &scaled)),
        Seconds::new(bandwidth::bound_time(v, &split)),
        before.time.total,
        after.time.total,
    ));
    Ok(t)
}

/// The Pareto plot: a sample of kept points is not kept (memory stays flat), so the cloud
/// is the top-k; the front is drawn joined.
pub fn plot(grid: &Grid, opts: &SearchOptions, r: &SearchResult) -> Result<String> {
    let (a, b) = opts.pareto;
    let xy = |e: &estimate::Estimate| (a.value(e) * a.scale(), b.value(e) * b.scale());
    let cloud: Vec<(f64, f64)> = r.run.top.iter().map(|h| xy(&h.item.est)).collect();
    let front: Vec<(f64, f64)> = r.run.pareto.iter().map(|p| xy(&p.item.est)).collect();
    // Label the best plan of each of the first five distinct (network, dp, tp, pp).
    let mut seen = Vec::new();
    let top: Vec<(String, f64, f64)> = r
        .run
        .top
        .iter()
        .enumerate()
        .filter(|(_, h)| {
            let p = &h.item.est.plan;
            let k = (h.item.system, p.dp, p.tp, p.pp);
            let new = !seen.contains(&k);
            seen.push(k);
            new
        })
        .take(5)
        .map(|(i, h)| {
            let p = &h.item.est.plan;
            let net = if grid.systems.len() > 1 {
                format!(" {}", grid.systems[h.item.system].0)
            } else {
                String::new()
            };
            let (x, y) = xy(&h.item.est);
            (
                format!("#{} dp{} tp{} pp{}{net}", i + 1, p.dp, p.tp, p.pp),
                x,
                y,
            )
        })
        .collect();
    crate::plot::pareto(
        &format!(
            "Pareto front: {} vs {} (top plans marked)",
            a.name(),
            b.name()
        ),
        a.label(),
        b.label(),
        &cloud,
        &front,
        &top,
    )
}

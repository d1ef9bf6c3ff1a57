//! Turns a [`SearchResult`] into a [`Report`]: the typed [`SweepResult`] (summary, drops
//! per reason, the ranked top-k, the Pareto front, the bandwidth split) and the tables
//! rendered from it; and into the Pareto plot.

use super::bandwidth;
use super::grid::Grid;
use super::search::{Hit, SearchOptions, SearchResult};
use crate::error::Result;
use crate::estimate;
use crate::model::Model;
use crate::report::sweep::{BandwidthRow, DropRow, SweepResult, SweepRow};
use crate::report::{Cell, Data, Report, SCHEMA_VERSION, Table};
use crate::units::{Bandwidth, Bytes, Seconds};

/// The whole sweep report; `timing` false leaves out the wall time and the rate (the only
/// parts that differ between identical runs).
pub fn build(
    model: &Model,
    grid: &Grid,
    global_batch: u32,
    opts: &SearchOptions,
    r: &SearchResult,
    budget: Option<Bandwidth>,
    timing: bool,
) -> Result<Report> {
    let rows = |hits: &mut dyn Iterator<Item = &Hit>| -> Vec<SweepRow> {
        let hits: Vec<&Hit> = hits.collect();
        let mut rows: Vec<SweepRow> = (hits.iter().enumerate())
            .map(|(i, h)| {
                let (name, sys) = &grid.systems[h.system];
                let band = crate::band::of(model, sys, &h.est);
                SweepRow::new(i as u32 + 1, name, &h.est, band)
            })
            .collect();
        super::ties::annotate(model, grid, &hits, &mut rows);
        rows
    };
    let mut v = SweepResult {
        schema_version: SCHEMA_VERSION,
        model: model.name().to_string(),
        system: grid
            .systems
            .first()
            .map_or_else(String::new, |s| s.1.name().to_string()),
        global_batch,
        sort: opts.sort.name().into(),
        pareto_objectives: [opts.pareto.0.name().into(), opts.pareto.1.name().into()],
        configurations: r.total,
        evaluated: r.run.evaluated,
        estimates: r.estimates,
        shared: r.pruning.map(|c| c.shared),
        pruned: r.pruning.map(|c| c.pruned),
        dropped: r.drops.iter().map(|d| d.count).sum(),
        valid: r.run.kept,
        elapsed_s: timing.then_some(r.run.elapsed_s),
        estimates_per_s: timing.then(|| r.rate().round()),
        top: rows(&mut r.run.top.iter().map(|e| &e.item)),
        pareto: rows(&mut r.run.pareto.iter().map(|p| &p.item)),
        drops: r
            .drops
            .iter()
            .map(|d| DropRow {
                reason: d.reason.clone(),
                count: d.count,
            })
            .collect(),
        bandwidth: Vec::new(),
        notes: Vec::new(),
    };
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
    v.notes.push(format!(
        "{} configurations in the grid, {} full estimates{speed}; ranked by {}, Pareto front of {} vs {}",
        v.configurations,
        v.estimates,
        v.sort,
        v.pareto_objectives[0],
        v.pareto_objectives[1],
    ));
    if let Some(c) = r.pruning {
        v.notes.push(format!(
            "hardware × plan: of {} points, {} estimated, {} shared an estimate (HBM capacity changes only the fit), {} pruned by bound (T ≥ F = T_fwd + T_bwd + T_recompute + T_optimizer, the compute floor no network or lower peak undercuts, worse than the k-th best and dominated on the Pareto front), the rest redundant or not fitting{}",
            r.run.evaluated,
            c.estimates,
            c.shared,
            c.pruned,
            if timing {
                format!("; {:.1} M points/s", r.run.evaluated as f64 / r.run.elapsed_s.max(1e-9) / 1e6)
            } else {
                String::new()
            }
        ));
    }
    if let (Some(b), Some(best)) = (budget, r.run.top.first()) {
        v.bandwidth = split(model, grid, &best.item, b, &mut v.notes)?;
    }
    Ok(Report {
        data: Some(Data::Sweep(Box::new(v))),
        ..Report::default()
    })
}

/// Fills the report's tables and notes from its typed value (after the caller's notes).
pub fn views(rep: &mut Report) -> Result<()> {
    let Some(Data::Sweep(v)) = &rep.data else {
        return Ok(());
    };
    let mut tables = vec![
        summary(v)?,
        plans("top", &v.top)?,
        plans("pareto", &v.pareto)?,
    ];
    tables.push(drops(&v.drops)?);
    if !v.bandwidth.is_empty() {
        tables.push(split_table(&v.bandwidth)?);
    }
    rep.notes = v.notes.clone();
    rep.tables = tables;
    Ok(())
}

fn summary(v: &SweepResult) -> Result<Table> {
    let mut t = Table::new("summary", &[("metric", "metric"), ("value", "value")]);
    for (k, c) in [
        ("configurations in the grid", Cell::int(v.configurations)),
        ("evaluated (progress bar count)", Cell::int(v.evaluated)),
        ("dropped (see drops)", Cell::int(v.dropped)),
        ("valid and fitting", Cell::int(v.valid)),
        ("full estimates computed", Cell::int(v.estimates)),
    ] {
        t.push(vec![Cell::text(k), c])?;
    }
    for (k, n) in [
        ("shared an estimate (HBM only)", v.shared),
        ("pruned by bound", v.pruned),
    ] {
        if let Some(n) = n {
            t.push(vec![Cell::text(k), Cell::int(n)])?;
        }
    }
    if let (Some(s), Some(rate)) = (v.elapsed_s, v.estimates_per_s) {
        t.push(vec![Cell::text("wall time"), Cell::q(Seconds::new(s), s)])?;
        t.push(vec![Cell::text("estimates per second"), Cell::num(rate)])?;
    }
    Ok(t)
}

fn drops(d: &[DropRow]) -> Result<Table> {
    let mut t = Table::new(
        "drops",
        &[("reason", "dropped because"), ("count", "configurations")],
    );
    for d in d {
        t.push(vec![Cell::text(d.reason.clone()), Cell::int(d.count)])?;
    }
    Ok(t)
}

/// One column of the ranked tables: its key (the CSV/JSON name), heading, cell, and when
/// the terminal shows it by default.
struct Col {
    key: &'static str,
    header: &'static str,
    cell: fn(&SweepRow) -> Cell,
    show: Show,
}

/// When a column is shown by default.
enum Show {
    /// Always.
    Always,
    /// When its value differs between the listed rows.
    Varies,
    /// When it varies, or some row is not at this neutral value (CP 1, EP 1, BF16, …, so
    /// that dp·tp·pp·cp always multiplies out to the devices shown).
    Unless(&'static str),
    /// When some row has this predicate true.
    Any(fn(&SweepRow) -> bool),
}

fn onoff(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

fn int(v: u32) -> Cell {
    Cell::int(v.into())
}

/// The ranked tables' columns, in order. Every plan field a sweep can vary has one, so a
/// table shows whatever separates its rows.
const COLS: [Col; 30] = [
    Col {
        key: "rank",
        header: "#",
        cell: |r| int(r.rank),
        show: Show::Always,
    },
    Col {
        key: "network",
        header: "network",
        cell: |r| Cell::text(r.network.clone()),
        show: Show::Varies,
    },
    Col {
        key: "plan.gpus",
        header: "gpus",
        cell: |r| int(r.plan.gpus),
        show: Show::Varies,
    },
    Col {
        key: "plan.dp",
        header: "dp",
        cell: |r| int(r.plan.dp),
        show: Show::Always,
    },
    Col {
        key: "plan.tp",
        header: "tp",
        cell: |r| int(r.plan.tp),
        show: Show::Always,
    },
    Col {
        key: "plan.pp",
        header: "pp",
        cell: |r| int(r.plan.pp),
        show: Show::Always,
    },
    Col {
        key: "plan.cp",
        header: "cp",
        cell: |r| int(r.plan.cp),
        show: Show::Unless("1"),
    },
    Col {
        key: "plan.cp_kind",
        header: "cp kind",
        cell: |r| Cell::text(r.plan.cp_kind.clone()),
        show: Show::Varies,
    },
    Col {
        key: "plan.ep",
        header: "ep",
        cell: |r| int(r.plan.ep),
        show: Show::Unless("1"),
    },
    Col {
        key: "plan.etp",
        header: "etp",
        cell: |r| int(r.plan.etp),
        show: Show::Any(|r| r.plan.etp != r.plan.tp),
    },
    Col {
        key: "plan.seq_len",
        header: "seq",
        cell: |r| int(r.plan.seq_len),
        show: Show::Varies,
    },
    Col {
        key: "plan.precision",
        header: "precision",
        cell: |r| Cell::text(r.plan.precision.clone()),
        show: Show::Unless("bf16"),
    },
    Col {
        key: "plan.fp8_recipe",
        header: "fp8 recipe",
        cell: |r| Cell::text(r.plan.fp8_recipe.clone()),
        show: Show::Varies,
    },
    Col {
        key: "plan.account_for_loss",
        header: "ends as layers",
        cell: |r| Cell::text(if r.plan.account_for_loss { "yes" } else { "no" }.to_string()),
        show: Show::Varies,
    },
    Col {
        key: "plan.micro_batch",
        header: "mb",
        cell: |r| int(r.plan.micro_batch),
        show: Show::Always,
    },
    Col {
        key: "plan.schedule",
        header: "schedule",
        cell: |r| match r.plan.virtual_stages {
            1 => Cell::text(r.plan.schedule.clone()),
            v => Cell::text(format!("{}:{v}", r.plan.schedule)),
        },
        show: Show::Always,
    },
    Col {
        key: "plan.zero",
        header: "zero",
        cell: |r| Cell::int(r.plan.zero.into()),
        show: Show::Always,
    },
    Col {
        key: "plan.recompute",
        header: "recompute",
        cell: |r| Cell::text(r.plan.recompute.clone()),
        show: Show::Always,
    },
    Col {
        key: "plan.sequence_parallel",
        header: "sp",
        cell: |r| Cell::text(onoff(r.plan.sequence_parallel)),
        show: Show::Always,
    },
    Col {
        key: "plan.dp_overlap",
        header: "dp overlap",
        cell: |r| Cell::text(onoff(r.plan.dp_overlap)),
        show: Show::Varies,
    },
    Col {
        key: "plan.tp_overlap",
        header: "tp overlap",
        cell: |r| Cell::text(onoff(r.plan.tp_overlap)),
        show: Show::Varies,
    },
    Col {
        key: "plan.order",
        header: "order",
        cell: |r| Cell::text(r.plan.order.clone()),
        show: Show::Varies,
    },
    Col {
        key: "plan.offload",
        header: "offload",
        cell: |r| Cell::text(r.plan.offload.clone()),
        show: Show::Varies,
    },
    Col {
        key: "plan.flash_attention",
        header: "flash",
        cell: |r| Cell::text(onoff(r.plan.flash_attention)),
        show: Show::Always,
    },
    Col {
        key: "variants",
        header: "ties",
        cell: |r| match r.variants {
            1 => Cell::int(1),
            n => Cell::q(
                format!("{n} ({})", r.variant_axes.replace(',', ", ")),
                n.into(),
            ),
        },
        show: Show::Any(|r| r.variants > 1),
    },
    Col {
        key: "iteration_time_s",
        header: "iteration",
        cell: |r| Cell::q(Seconds::new(r.iteration_time_s), r.iteration_time_s),
        show: Show::Always,
    },
    Col {
        key: "band",
        header: "80% band",
        cell: |r| {
            Cell::q(
                format!(
                    "{} – {}",
                    Seconds::new(r.band.low_s),
                    Seconds::new(r.band.high_s)
                ),
                r.band.high_s - r.band.low_s,
            )
        },
        show: Show::Always,
    },
    Col {
        key: "tokens_per_s",
        header: "tokens/s",
        cell: |r| Cell::q(format!("{:.0}", r.tokens_per_s), r.tokens_per_s),
        show: Show::Always,
    },
    Col {
        key: "mfu",
        header: "MFU (BF16 peak)",
        cell: |r| Cell::q(format!("{:.1}%", 100.0 * r.mfu), r.mfu),
        show: Show::Always,
    },
    Col {
        key: "memory_per_device_bytes",
        header: "memory/device",
        cell: |r| {
            Cell::q(
                Bytes::new(r.memory_per_device_bytes),
                r.memory_per_device_bytes,
            )
        },
        show: Show::Always,
    },
];

/// A ranked table (`top` or `pareto`): every column of [`COLS`], the terminal showing by
/// default those [`Show`] selects for these rows.
fn plans(title: &str, rows: &[SweepRow]) -> Result<Table> {
    let heads: Vec<(&str, &str)> = COLS.iter().map(|c| (c.key, c.header)).collect();
    let mut t = Table::new(title, &heads);
    for r in rows {
        t.push(COLS.iter().map(|c| (c.cell)(r)).collect())?;
    }
    for (i, c) in COLS.iter().enumerate() {
        let first = t.rows.first().map_or("", |r| r[i].human());
        let varies = t.rows.iter().any(|r| r[i].human() != first);
        let shown = match c.show {
            Show::Always => true,
            Show::Varies => varies,
            Show::Unless(v) => varies || t.rows.iter().any(|r| r[i].human() != v),
            Show::Any(f) => rows.iter().any(f),
        };
        if shown {
            t.default_columns.push(c.key.to_string());
        }
    }
    Ok(t)
}

/// The bandwidth allocation for the best plan: traffic per dimension, the given and the
/// optimal split; the note gives the iteration time with each.
fn split(
    model: &Model,
    grid: &Grid,
    best: &Hit,
    budget: Bandwidth,
    notes: &mut Vec<String>,
) -> Result<Vec<BandwidthRow>> {
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
    let rows = dims
        .iter()
        .enumerate()
        .map(|(d, dim)| BandwidthRow {
            dim: d as u32,
            kind: dim.kind.name().to_string(),
            traffic_bytes: v[d],
            given_bytes_per_s: scaled[d].get(),
            optimal_bytes_per_s: split[d].get(),
        })
        .collect();
    let before = estimate::evaluate(model, &bandwidth::with_split(sys, &scaled), plan)?;
    let after = estimate::evaluate(model, &bandwidth::with_split(sys, &split), plan)?;
    notes.push(format!(
        "bandwidth budget {budget} per NPU for the best plan: bandwidth-bound communication {} → {} (closed form (Σ√V_d)²/B); iteration {} → {}",
        Seconds::new(bandwidth::bound_time(v, &scaled)),
        Seconds::new(bandwidth::bound_time(v, &split)),
        before.time.total,
        after.time.total,
    ));
    Ok(rows)
}

fn split_table(rows: &[BandwidthRow]) -> Result<Table> {
    let mut t = Table::new(
        "bandwidth",
        &[
            ("dim", "dim"),
            ("kind", "block"),
            ("traffic_bytes", "traffic/iteration"),
            ("given_bytes_per_s", "given (scaled to budget)"),
            ("optimal_bytes_per_s", "optimal B_d ∝ √traffic"),
        ],
    );
    for r in rows {
        t.push(vec![
            Cell::int(r.dim.into()),
            Cell::text(r.kind.clone()),
            Cell::q(Bytes::new(r.traffic_bytes), r.traffic_bytes),
            Cell::q(Bandwidth::new(r.given_bytes_per_s), r.given_bytes_per_s),
            Cell::q(Bandwidth::new(r.optimal_bytes_per_s), r.optimal_bytes_per_s),
        ])?;
    }
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

//! Turns an [`Estimate`] into a [`Report`]: the plan (with the network dimensions each
//! group spans), the time breakdown, throughput and the memory per device. Used by
//! `astrolabe estimate`; `compare` can reuse [`build`] or the individual tables.

use super::{CommClass, Estimate, GroupDims};
use crate::error::Result;
use crate::model::Model;
use crate::parallel::{Recompute, Schedule};
use crate::report::{Cell, Report, Table};
use crate::system::System;
use crate::units::{Bytes, Seconds};

/// Renders the dimensions a group spans: "dims 0 (switch ×8)".
pub fn span_text(g: &GroupDims, system: &System) -> String {
    if g.size <= 1 {
        return "—".into();
    }
    let dims = system.topology.dims();
    let parts: Vec<String> = g
        .dims()
        .iter()
        .zip(g.extent)
        .map(|(&i, k)| match dims.get(i as usize) {
            Some(d) => format!("dim {i} ({}, {k} of {})", d.kind.name(), d.size),
            None => format!("dim {i}"),
        })
        .collect();
    parts.join(" + ")
}

fn kv(t: &mut Table, k: &str, v: Cell) -> Result<()> {
    t.push(vec![Cell::text(k), v])
}

/// The plan table.
pub fn plan_table(model: &Model, system: &System, e: &Estimate) -> Result<Table> {
    let p = &e.plan;
    let mut t = Table::new(
        "plan",
        &[
            ("item", "item"),
            ("value", "value"),
            ("network", "network dims"),
        ],
    );
    let row = |t: &mut Table, k: &str, v: Cell, net: String| {
        t.push(vec![Cell::text(k), v, Cell::text(net)])
    };
    row(&mut t, "model", Cell::text(model.name()), String::new())?;
    row(
        &mut t,
        "system",
        Cell::text(format!("{} ({})", system.name(), system.device.name())),
        system.topology.to_string(),
    )?;
    row(&mut t, "devices", Cell::int(p.gpus as u64), String::new())?;
    let [tp, ep, dp, pp] = &e.groups;
    row(&mut t, "TP", Cell::int(p.tp as u64), span_text(tp, system))?;
    row(
        &mut t,
        "SP",
        Cell::text(if p.sp { "on" } else { "off" }),
        String::new(),
    )?;
    row(&mut t, "PP", Cell::int(p.pp as u64), span_text(pp, system))?;
    row(
        &mut t,
        "DP (derived)",
        Cell::int(p.dp as u64),
        span_text(dp, system),
    )?;
    row(&mut t, "EP", Cell::int(p.ep as u64), span_text(ep, system))?;
    for (k, v) in super::plan_extras(model, p) {
        row(&mut t, k, Cell::text(v), String::new())?;
    }
    row(
        &mut t,
        "micro-batch",
        Cell::int(p.micro_batch as u64),
        String::new(),
    )?;
    row(
        &mut t,
        "global batch",
        Cell::int(p.global_batch as u64),
        String::new(),
    )?;
    row(
        &mut t,
        "micro-batches per pipeline",
        Cell::int(p.micro_batches as u64),
        String::new(),
    )?;
    let sched = match p.schedule {
        Schedule::Gpipe => "GPipe".to_string(),
        Schedule::OneFOneB => "1F1B".to_string(),
        Schedule::Interleaved => format!("interleaved 1F1B, v = {}", p.v),
    };
    row(&mut t, "schedule", Cell::text(sched), String::new())?;
    let rc = match p.recompute {
        Recompute::None => "none",
        Recompute::Selective => "selective",
        Recompute::Full => "full",
    };
    row(&mut t, "recompute", Cell::text(rc), String::new())?;
    row(&mut t, "ZeRO", Cell::int(p.zero as u64), String::new())?;
    row(
        &mut t,
        "precision",
        Cell::text(match (p.precision, p.fp8_recipe) {
            (crate::compute::Precision::Fp8, r) if r != crate::compute::Fp8Recipe::Delayed => {
                format!("fp8 ({} scaling)", r.name())
            }
            (x, _) => x.name().to_string(),
        }),
        String::new(),
    )?;
    Ok(t)
}

/// The time breakdown table.
pub fn time_table(e: &Estimate) -> Result<Table> {
    let cols = [
        ("component", "component"),
        ("time_s", "time"),
        ("hidden_s", "hidden (overlapped)"),
        ("bytes_B", "bytes/device"),
        ("share_pct", "share"),
    ];
    let mut t = Table::new("time", &cols);
    let total = e.time.total.get();
    let secs = |s: Seconds| Cell::q(s, s.get());
    let share = |s: Seconds| {
        Cell::q(
            format!("{:.1}%", 100.0 * s.get() / total),
            100.0 * s.get() / total,
        )
    };
    let tm = &e.time;
    for (k, v) in [
        ("forward", tm.forward),
        ("backward", tm.backward),
        ("recompute", tm.recompute),
        ("optimizer", tm.optimizer),
        ("pipeline bubble", tm.bubble),
        ("interference (compute slowed by overlap)", tm.interference),
    ] {
        t.push(vec![
            Cell::text(k),
            secs(v),
            Cell::Empty,
            Cell::Empty,
            share(v),
        ])?;
    }
    for c in CommClass::ALL {
        let x = tm.class(c);
        if x.exposed.get() == 0.0 && x.hidden.get() == 0.0 && x.bytes.get() == 0.0 {
            continue;
        }
        t.push(vec![
            Cell::text(format!("{} communication (exposed)", c.name())),
            secs(x.exposed),
            secs(x.hidden),
            Cell::q(x.bytes, x.bytes.get()),
            share(x.exposed),
        ])?;
    }
    t.push(vec![
        Cell::text("total per iteration"),
        secs(tm.total),
        Cell::Empty,
        Cell::Empty,
        share(tm.total),
    ])?;
    Ok(t)
}

/// Throughput, utilisation and (with a token budget) time to train.
pub fn throughput_table(e: &Estimate, tokens: Option<f64>) -> Result<Table> {
    let mut t = Table::new("throughput", &[("metric", "metric"), ("value", "value")]);
    let m = &e.metrics;
    kv(&mut t, "tokens/s", Cell::num(m.tokens_per_s))?;
    kv(&mut t, "samples/s", Cell::num(m.samples_per_s))?;
    kv(
        &mut t,
        "MFU (%)",
        Cell::q(format!("{:.1}%", 100.0 * m.mfu), 100.0 * m.mfu),
    )?;
    kv(
        &mut t,
        "HFU (%)",
        Cell::q(format!("{:.1}%", 100.0 * m.hfu), 100.0 * m.hfu),
    )?;
    kv(
        &mut t,
        "model FLOPs per iteration",
        Cell::q(format!("{:.4e} FLOP", m.model_flops), m.model_flops),
    )?;
    if let Some(n) = tokens {
        let s = e.train_time(n);
        kv(&mut t, "token budget", Cell::q(format!("{n:.4e}"), n))?;
        kv(&mut t, "time to train (s)", Cell::q(s, s.get()))?;
        kv(&mut t, "GPU-hours", Cell::num(e.gpu_hours(n)))?;
    }
    Ok(t)
}

/// Memory per device.
pub fn memory_table(e: &Estimate) -> Result<Table> {
    let mut t = Table::new(
        "memory",
        &[("component", "component"), ("memory_B", "per device")],
    );
    let m = &e.memory;
    for (k, v) in [
        ("weights", m.weights),
        ("gradients", m.gradients),
        ("optimizer states", m.optimizer),
        ("activations", m.activations),
        ("buffers", m.buffers),
        ("total", m.total),
        ("capacity", m.capacity),
    ] {
        t.push(vec![Cell::text(k), Cell::q(gib(v), v.get())])?;
    }
    Ok(t)
}

fn gib(b: Bytes) -> String {
    format!("{:.2} GiB", b.get() / 1073741824.0)
}

/// The whole report; `explain` lines (from [`super::explain`]) go in the explain section.
pub fn build(
    model: &Model,
    system: &System,
    e: &Estimate,
    tokens: Option<f64>,
    explain: Vec<String>,
) -> Result<Report> {
    let mut notes = Vec::new();
    if !e.memory.fits {
        notes.push(format!(
            "does not fit: {} needed per device, {} available",
            gib(e.memory.total),
            gib(e.memory.capacity)
        ));
    }
    if e.plan.pp > 1 {
        notes.push(format!(
            "bubble fraction (p−1)/(v·m) = {:.2}%",
            100.0 * e.plan.bubble_fraction()
        ));
        if e.plan.micro_batches < e.plan.pp {
            notes.push(format!(
                "only {} micro-batch(es) per pipeline for {} stages: the bubble (p−1)/m dominates; raise --global-batch (each {} more sequences, dp·micro-batch, add one micro-batch)",
                e.plan.micro_batches,
                e.plan.pp,
                e.plan.dp * e.plan.micro_batch
            ));
        }
    }
    notes.push("memory is for the first pipeline stage (the most activations in flight)".into());
    Ok(Report {
        tables: vec![
            plan_table(model, system, e)?,
            time_table(e)?,
            throughput_table(e, tokens)?,
            memory_table(e)?,
        ],
        notes,
        explain,
    })
}

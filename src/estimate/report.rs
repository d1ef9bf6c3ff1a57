//! Turns an [`Estimate`] into a [`Report`]: the typed [`EstimateResult`] (what JSON and CSV
//! serialize) and, rendered from that same value, the human tables: the plan (with the
//! network dimensions each group spans), the time breakdown, throughput and the memory per
//! device. A plan that does not fit sets exit status 3.

use super::Estimate;
use crate::error::Result;
use crate::model::Model;
use crate::report::estimate::{DimUse, EstimateResult};
use crate::report::{Cell, Data, Report, Table};
use crate::system::System;
use crate::units::{Bytes, Seconds};

/// Exit status of a computed plan that does not fit in device memory.
pub const EXIT_DOES_NOT_FIT: u8 = 3;

/// Renders the dimensions a group spans: "dim 0 (switch, 8 of 8)".
pub fn span_text(g: &[DimUse]) -> String {
    if g.is_empty() {
        return "-".into();
    }
    let parts: Vec<String> = g
        .iter()
        .map(|d| format!("dim {} ({}, {} of {})", d.dim, d.kind, d.extent, d.size))
        .collect();
    parts.join(" + ")
}

fn onoff(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// How a job sits in rack-scale NVLink domains: "4 NVLink domains of 64 GPUs".
pub fn domains_text(system: &System) -> String {
    match system.nvlink_domains() {
        Some((1, g)) => format!("1 NVLink domain of {g} GPUs"),
        Some((n, g)) => format!("{n} NVLink domains of {g} GPUs (Slurm segments)"),
        None => String::new(),
    }
}

/// The plan table; `domains` is the devices row's placement note ([`domains_text`]).
pub fn plan_table(r: &EstimateResult, topology: &str, domains: &str) -> Result<Table> {
    let p = &r.plan;
    let mut t = Table::new(
        "plan",
        &[
            ("item", "item"),
            ("value", "value"),
            ("network", "network dims"),
        ],
    );
    let int = |v: u32| Cell::int(v.into());
    let pl = &r.placement;
    let sched = match p.schedule.as_str() {
        "interleaved" => format!("interleaved 1F1B, v = {}", p.virtual_stages),
        "1f1b" => "1F1B".into(),
        "dualpipe" => "DualPipe".into(),
        _ => "GPipe".into(),
    };
    let rows: Vec<(&str, Cell, String)> = vec![
        ("model", Cell::text(&r.model), String::new()),
        (
            "system",
            Cell::text(format!("{} ({})", r.system, r.device)),
            topology.to_string(),
        ),
        ("devices", int(p.gpus), domains.to_string()),
        ("TP", int(p.tp), span_text(&pl.tp)),
        ("SP", Cell::text(onoff(p.sequence_parallel)), String::new()),
        ("PP", int(p.pp), span_text(&pl.pp)),
        ("DP (derived)", int(p.dp), span_text(&pl.dp)),
        (
            "HSDP",
            Cell::text(format!(
                "shard groups of {}, {} replicas",
                p.hsdp,
                p.dp / p.hsdp.max(1)
            )),
            String::new(),
        ),
        (
            "CP",
            Cell::text(match p.cp {
                1 => "1".to_string(),
                n => format!("{n} ({})", p.cp_kind),
            }),
            String::new(),
        ),
        ("EP", int(p.ep), span_text(&pl.ep)),
        (
            "MoE groups (folded)",
            Cell::text(format!(
                "ETP {} × EP {} × expert-DP {}",
                p.etp,
                p.ep,
                (p.tp * p.cp * p.dp) / (p.etp * p.ep).max(1)
            )),
            "per stage: the TP × CP × DP ranks".into(),
        ),
        ("sequence length", int(p.seq_len), String::new()),
        ("micro-batch", int(p.micro_batch), String::new()),
        ("global batch", int(p.global_batch), String::new()),
        (
            "micro-batches per pipeline",
            int(p.micro_batches),
            String::new(),
        ),
        ("schedule", Cell::text(sched), String::new()),
        (
            "recompute",
            if p.recompute_modules == "none" {
                Cell::text(&p.recompute)
            } else {
                Cell::text(format!("{} + modules {}", p.recompute, p.recompute_modules))
            },
            String::new(),
        ),
        ("ZeRO", Cell::int(p.zero.into()), String::new()),
        (
            "flash attention",
            Cell::text(if p.fp8_attention {
                "on (8-bit inputs)"
            } else {
                onoff(p.flash_attention)
            }),
            String::new(),
        ),
        (
            "overlap DP / TP",
            Cell::text(format!(
                "{} / {}{}",
                onoff(p.dp_overlap),
                onoff(p.tp_overlap),
                if p.tp_bwd_overlap {
                    ""
                } else {
                    " (backward TP blocking)"
                }
            )),
            String::new(),
        ),
        (
            "precision",
            if p.bf16_first_layers + p.bf16_last_layers > 0 {
                Cell::text(format!(
                    "{} (BF16: first {}, last {} layers)",
                    p.precision, p.bf16_first_layers, p.bf16_last_layers
                ))
            } else {
                Cell::text(&p.precision)
            },
            String::new(),
        ),
        (
            "LoRA rank",
            Cell::text(format!("{} (base weights frozen)", p.lora_rank)),
            String::new(),
        ),
    ];
    let folded = p.ep > 1 || p.etp != p.tp;
    for (k, v, net) in rows {
        // Rows of features the plan does not use stay out.
        let unused = match k {
            "HSDP" => p.hsdp <= 1,
            "LoRA rank" => p.lora_rank == 0,
            _ => k.starts_with("MoE groups") && !folded,
        };
        if unused {
            continue;
        }
        t.push(vec![Cell::text(k), v, Cell::text(net)])?;
    }
    Ok(t)
}

/// The time breakdown table.
pub fn time_table(r: &EstimateResult) -> Result<Table> {
    let cols = [
        ("component", "component"),
        ("time_s", "time"),
        ("hidden_s", "hidden (overlapped)"),
        ("bytes_per_device", "bytes/device"),
        ("share", "share"),
    ];
    let mut t = Table::new("time", &cols);
    let total = r.iteration_time_s;
    let secs = |s: f64| Cell::q(Seconds::new(s), s);
    let share = |s: f64| Cell::q(format!("{:.1}%", 100.0 * s / total), s / total);
    let tb = &r.time_breakdown;
    for (k, v) in [
        ("forward", tb.forward_s),
        ("backward", tb.backward_s),
        ("recompute", tb.recompute_s),
        ("optimizer", tb.optimizer_s),
        ("pipeline bubble", tb.pipeline_bubble_s),
        (
            "interference (compute slowed by overlap)",
            tb.interference_s,
        ),
        ("host-bound (GPU waits for the CPU)", tb.host_idle_s),
    ] {
        if k.starts_with("host-bound") && v == 0.0 {
            // Shown only when some layer waits for the host.
            continue;
        }
        t.push(vec![
            Cell::text(k),
            secs(v),
            Cell::Empty,
            Cell::Empty,
            share(v),
        ])?;
    }
    for (name, x) in r.comm_classes() {
        if x.exposed_s == 0.0 && x.hidden_s == 0.0 && x.bytes_per_device == 0.0 {
            continue;
        }
        t.push(vec![
            Cell::text(format!("{name} communication (exposed)")),
            secs(x.exposed_s),
            secs(x.hidden_s),
            Cell::q(Bytes::new(x.bytes_per_device), x.bytes_per_device),
            share(x.exposed_s),
        ])?;
    }
    if let Some(o) = &r.time_breakdown.offload {
        let moved = o.params_fetch_bytes
            + 2.0 * o.activations_bytes
            + o.grads_stream_bytes
            + o.grads_step_bytes
            + o.params_step_bytes;
        t.push(vec![
            Cell::text(format!("offload transfers (exposed; {})", o.plan)),
            secs(o.exposed_s),
            secs(o.hidden_s),
            Cell::q(Bytes::new(moved), moved),
            share(o.exposed_s),
        ])?;
    }
    t.push(vec![
        Cell::text("total per iteration"),
        secs(total),
        Cell::Empty,
        Cell::Empty,
        share(total),
    ])?;
    Ok(t)
}

/// Throughput, utilisation and (with a token budget) time to train.
pub fn throughput_table(r: &EstimateResult) -> Result<Table> {
    let mut t = Table::new("throughput", &[("metric", "metric"), ("value", "value")]);
    let pct = |x: f64| Cell::q(format!("{:.1}%", 100.0 * x), x);
    let mut rows = vec![
        ("tokens/s", Cell::num(r.tokens_per_s)),
        ("samples/s", Cell::num(r.samples_per_s)),
        ("MFU (of the dense BF16 peak)", pct(r.mfu)),
        ("HFU (of the dense BF16 peak)", pct(r.hfu)),
        (
            "model FLOPs per iteration",
            Cell::q(
                format!("{:.4e} FLOP", r.model_flops_per_iteration),
                r.model_flops_per_iteration,
            ),
        ),
    ];
    let b = &r.band;
    rows.push((
        "iteration time, 80% band: low",
        Cell::q(Seconds::new(b.low_s), b.low_s),
    ));
    rows.push((
        "iteration time, 80% band: high",
        Cell::q(Seconds::new(b.high_s), b.high_s),
    ));
    if r.mfu_at_precision_peak != r.mfu {
        rows.push((
            "MFU (of the plan precision's peak: NVIDIA's convention)",
            pct(r.mfu_at_precision_peak),
        ));
    }
    if let Some(tr) = &r.training {
        rows.push((
            "token budget",
            Cell::q(format!("{:.4e}", tr.tokens), tr.tokens),
        ));
        rows.push(("time to train", Cell::q(Seconds::new(tr.time_s), tr.time_s)));
        rows.push(("GPU-hours", Cell::num(tr.gpu_hours)));
    }
    for (k, v) in rows {
        t.push(vec![Cell::text(k), v])?;
    }
    Ok(t)
}

/// Memory per device.
pub fn memory_table(r: &EstimateResult) -> Result<Table> {
    let mut t = Table::new(
        "memory",
        &[("component", "component"), ("bytes", "per device")],
    );
    let m = &r.memory_breakdown;
    for (k, v) in [
        ("weights", m.weights_bytes),
        ("gradients", m.gradients_bytes),
        ("optimizer states", m.optimizer_states_bytes),
        ("activations", m.activations_bytes),
        ("buffers", m.buffers_bytes),
        ("total", r.memory_per_device_bytes),
        (
            "reserve (context, NCCL, workspaces, fragmentation)",
            r.memory_reserve_bytes,
        ),
        ("capacity", r.memory_capacity_bytes),
        ("headroom", r.memory_headroom_bytes),
    ] {
        t.push(vec![Cell::text(k), Cell::q(gib(v), v)])?;
    }
    Ok(t)
}

/// The band's note: its bounds, the runs and the group they come from.
pub fn band_note(b: &crate::band::Band) -> String {
    format!(
        "80% band {} – {}: {} published runs ({}) fell this far from their estimates (docs/validation.md, \"Prediction bands\")",
        Seconds::new(b.low_s),
        Seconds::new(b.high_s),
        b.runs,
        b.group
    )
}

fn gib(b: f64) -> String {
    format!("{:.2} GiB", b / 1073741824.0)
}

fn notes(e: &Estimate) -> Vec<String> {
    let mut notes = Vec::new();
    if !e.memory.fits {
        notes.push(format!(
            "does not fit: {} needed per device, {} available ({} capacity less a {} reserve; --memory-reserve sets it) (exit status 3)",
            gib(e.memory.total.get()),
            gib(e.memory.capacity.get() - e.memory.reserve.get()),
            gib(e.memory.capacity.get()),
            gib(e.memory.reserve.get())
        ));
    }
    if e.plan.pp > 1 {
        let formula = if e.plan.schedule == crate::parallel::Schedule::DualPipe {
            "(p-2)/(3m)"
        } else {
            "(p-1)/(v·m)"
        };
        notes.push(format!(
            "bubble fraction {formula} = {:.2}%",
            100.0 * e.plan.bubble_fraction()
        ));
        if e.plan.micro_batches < e.plan.pp {
            notes.push(format!(
                "only {} micro-batch(es) per pipeline for {} stages: the bubble (p-1)/m dominates; raise --global-batch (each {} more sequences, dp·micro-batch, add one micro-batch)",
                e.plan.micro_batches,
                e.plan.pp,
                e.plan.dp * e.plan.micro_batch
            ));
        }
    }
    let rank = crate::memory::peak_stage(&e.plan).0;
    notes.push(if rank == 0 {
        "memory is for the first pipeline stage (the most activations in flight)".into()
    } else {
        format!("memory is for pipeline rank {rank} (the most activations in flight: the first stage holds fewer layers)")
    });
    notes
}

/// The whole report: the typed value and its tables. `explain` lines (from
/// [`super::explain`]) go in the explain section; `defaults_used` names the plan settings
/// that took their default.
pub fn build(
    model: &Model,
    system: &System,
    e: &Estimate,
    tokens: Option<f64>,
    explain: Vec<String>,
    defaults_used: Vec<String>,
) -> Result<Report> {
    let mut r = EstimateResult::new(model, system, e, tokens, defaults_used);
    r.notes = notes(e);
    r.notes.push(band_note(&r.band));
    if !r.defaults_used.is_empty() {
        r.notes.push(format!(
            "defaults used (Megatron-LM/NeMo practice; set any with its flag): {}",
            r.defaults_used.join(", ")
        ));
    }
    r.explain = explain;
    if !r.explain.is_empty() {
        let (b, t) = (&r.band, r.iteration_time_s);
        let n = b.runs as f64;
        r.explain.push(format!(
            "80% band: residuals ln(measured/estimated) of the {} published runs in group \"{}\" (presets/bands/), sorted; ranks ⌊(n+1)·0.1⌋ = {} and ⌈(n+1)·0.9⌉ = {} give {:+.4} and {:+.4}; band = T·e^r = {} · [{:.4}, {:.4}] = {} – {}",
            b.runs,
            b.group,
            ((n + 1.0) * 0.1).floor().clamp(1.0, n),
            ((n + 1.0) * 0.9).ceil().clamp(1.0, n),
            (b.low_s / t).ln(),
            (b.high_s / t).ln(),
            Seconds::new(t),
            b.low_s / t,
            b.high_s / t,
            Seconds::new(b.low_s),
            Seconds::new(b.high_s)
        ));
    }
    let tables = vec![
        plan_table(&r, &system.topology.to_string(), &domains_text(system))?,
        time_table(&r)?,
        throughput_table(&r)?,
        memory_table(&r)?,
    ];
    Ok(Report {
        tables,
        notes: r.notes.clone(),
        explain: r.explain.clone(),
        exit_code: if r.fits { 0 } else { EXIT_DOES_NOT_FIT },
        failure: (!r.fits).then(|| {
            format!(
                "the plan does not fit: {} needed per device, {} available after the reserve",
                gib(r.memory_per_device_bytes),
                gib(r.memory_capacity_bytes - r.memory_reserve_bytes)
            )
        }),
        data: Some(Data::Estimate(Box::new(r))),
        text: None,
    })
}

//! `--explain`: every term of a collective's time written as its formula, then with the
//! numbers put in, so the result can be checked by hand. Allocates freely; not used on hot
//! paths.

use super::{Algorithm, Collective, CollectiveTime, Options, Schedule, busbw_factor, dim_cost};
use crate::error::Result;
use crate::network::Dim;
use crate::units::{Bytes, Seconds, sig};

/// A size in readable units: binary (KiB, MiB, …) when exact, else decimal (kB, MB, …).
pub fn fmt_bytes(b: Bytes) -> String {
    let v = b.get();
    let s = b.to_string();
    if v < 1024.0 || !s.contains('.') {
        return s;
    }
    for (f, u) in [
        (1e15, "PB"),
        (1e12, "TB"),
        (1e9, "GB"),
        (1e6, "MB"),
        (1e3, "kB"),
    ] {
        if v >= f {
            return format!("{} {u}", sig(v / f));
        }
    }
    s
}

/// The explanation lines of `t`, the result of `time(op, size, dims, opts)`.
pub fn explain(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    opts: &Options,
    t: &CollectiveTime,
) -> Result<Vec<String>> {
    let npus: u64 = dims.iter().map(|d| d.size as u64).product();
    if t.flat_ring {
        return Ok(flat_ring(op, size, dims, t, npus));
    }
    let nccl = Options { chunks: 1, ..*opts };
    let opts = if opts.schedule == Schedule::Nccl {
        &nccl
    } else {
        opts
    };
    let c = opts.chunks as f64;
    let mut out = vec![format!(
        "{} of {} per NPU on {npus} NPUs{}:",
        op.name(),
        fmt_bytes(size),
        if opts.chunks > 1 {
            format!(", {} chunks of n/C = {}", opts.chunks, fmt_bytes(size / c))
        } else {
            String::new()
        }
    )];
    for (i, ph) in t.phases().iter().enumerate() {
        let d = &dims[ph.dim];
        let cost = dim_cost(ph.op, ph.algorithm, d)?;
        if t.schedule == Schedule::Themis {
            out.extend(themis_phase(i, ph, d, &cost, opts.chunks));
            continue;
        }
        let n = ph.size / c;
        out.push(format!(
            "phase {}: {} on dimension {} {d} (p = {}), {} with n = {}",
            i + 1,
            ph.op.name(),
            ph.dim,
            d.size,
            ph.algorithm.name(),
            fmt_bytes(n)
        ));
        out.push(format!(
            "  latency  = {}·α = {} × {} = {}",
            paren(cost.steps_expr),
            sig(cost.steps),
            d.latency,
            cost.latency(d)
        ));
        out.push(format!(
            "  transfer = {} · n / {} = {} × {} / {} = {}",
            paren(cost.factor_expr),
            cost.bandwidth_expr,
            sig(cost.factor),
            fmt_bytes(n),
            cost.bandwidth,
            cost.transfer(n)
        ));
        if opts.chunks > 1 {
            out.push(format!("  × {} chunks = {}", opts.chunks, ph.time()));
        }
        if opts.algorithm == Algorithm::Auto {
            out.push(format!("  auto: {}", alternatives(ph.op, d, n)));
        }
    }
    out.push(total_line(t, opts));
    if t.total.get() > 0.0 {
        let alg = size / t.total;
        let f = busbw_factor(op, npus);
        out.push(format!(
            "algbw = n / T = {} / {} = {alg}",
            fmt_bytes(size),
            t.total
        ));
        out.push(format!(
            "busbw = algbw × {} = {alg} × {} = {} (nccl-tests factor)",
            factor_expr(op),
            sig(f),
            alg * f
        ));
    }
    Ok(out)
}

/// A Themis phase: its chunks carry different shares, so write the sum over chunks,
/// C·steps·α + factor·Σ shares / b (exact when every chunk ran the same algorithm).
fn themis_phase(i: usize, ph: &super::Phase, d: &Dim, cost: &super::Cost, c: u32) -> Vec<String> {
    vec![
        format!(
            "phase {}: {} on dimension {} {d} (p = {}), {} (chunk 1), {} over all chunks",
            i + 1,
            ph.op.name(),
            ph.dim,
            d.size,
            ph.algorithm.name(),
            fmt_bytes(ph.size)
        ),
        format!(
            "  latency  = C·{}·α = {c} × {} × {} = {}",
            paren(cost.steps_expr),
            sig(cost.steps),
            d.latency,
            ph.latency
        ),
        format!(
            "  transfer = {} · Σ shares / {} = {} × {} / {} = {}",
            paren(cost.factor_expr),
            cost.bandwidth_expr,
            sig(cost.factor),
            fmt_bytes(ph.size),
            cost.bandwidth,
            ph.transfer
        ),
    ]
}

/// The ring across all ranks (NCCL schedule): one line per dimension it crosses.
fn flat_ring(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    t: &CollectiveTime,
    npus: u64,
) -> Vec<String> {
    let w = if op == Collective::AllReduce { 2 } else { 1 };
    let mut out = vec![format!(
        "{} of {} per NPU as one ring across all P = {npus} ranks (NCCL ring; w = {w} passes, \
         each edge carries w(P−1)/P·n; E_d of the P edges cross dimension d, shared by every NPU's port there):",
        op.name(),
        fmt_bytes(size)
    )];
    for ph in t.phases() {
        let d = &dims[ph.dim];
        out.push(format!(
            "  dimension {} {d}: latency = {} steps × {} = {}; transfer = (E_d/P)·w(P−1)/P·n / b = {}",
            ph.dim,
            sig(ph.latency.get() / d.latency.get().max(f64::MIN_POSITIVE)),
            d.latency,
            ph.latency,
            ph.transfer
        ));
    }
    out.push(format!(
        "T = Σ_d latency_d + max_d transfer_d = {}",
        precise(t.total)
    ));
    out
}

/// How the phases add up.
fn total_line(t: &CollectiveTime, opts: &Options) -> String {
    if t.schedule == Schedule::Nccl && t.n_phases > 1 {
        return format!(
            "T = Σ_s latency_s + max_d Σ_(s on d) transfer_s (phases pipelined, NCCL) = {}",
            precise(t.total)
        );
    }
    if opts.chunks <= 1 {
        let terms: Vec<String> = t.phases().iter().map(|p| p.time().to_string()).collect();
        let sum = if terms.is_empty() {
            "0 (a group of one)".to_string()
        } else {
            terms.join(" + ")
        };
        return match t.n_phases {
            0 | 1 => format!("T = {}", precise(t.total)),
            _ => format!("T = Σ phases = {sum} = {}", precise(t.total)),
        };
    }
    if t.schedule == Schedule::Themis {
        return format!(
            "T = Σ_s t_s(chunk 1) + max_d Σ_(c≥2) t_(c,d) (Themis: each chunk orders the dimensions greedily by resulting load) = {}",
            precise(t.total)
        );
    }
    let c = opts.chunks as f64;
    let sum: Seconds = t.phases().iter().map(|p| p.time() / c).sum();
    let mut busy = [Seconds::ZERO; super::MAX_DIMS];
    for p in t.phases() {
        busy[p.dim] += p.time() / c;
    }
    let max = busy.iter().fold(Seconds::ZERO, |a, &b| a.max(b));
    format!(
        "T = Σ_s t_s(n/C) + (C−1)·max_d Σ_(s on d) t_s(n/C) = {sum} + {} × {max} = {}",
        opts.chunks - 1,
        precise(t.total)
    )
}

/// "ring 1.2 ms < direct 3.4 ms < …" for one phase.
fn alternatives(op: Collective, d: &Dim, n: Bytes) -> String {
    let mut v: Vec<(Algorithm, Seconds)> = Algorithm::ALL[1..]
        .iter()
        .filter_map(|&a| dim_cost(op, a, d).ok().map(|c| (a, c.time(d, n))))
        .collect();
    v.sort_by(|a, b| a.1.get().total_cmp(&b.1.get()));
    v.iter()
        .map(|(a, t)| format!("{} {t}", a.name()))
        .collect::<Vec<_>>()
        .join(" < ")
}

/// The nccl-tests bus-bandwidth factor written out.
pub fn factor_expr(op: Collective) -> &'static str {
    match op {
        Collective::AllReduce => "2(p−1)/p",
        Collective::Broadcast | Collective::Reduce | Collective::SendRecv => "1",
        _ => "(p−1)/p",
    }
}

/// Wraps an expression in parentheses when it has a top-level sum or difference.
fn paren(e: &str) -> String {
    let mut depth = 0i32;
    let top_level = e.chars().any(|c| {
        match c {
            '(' | '⌊' | '⌈' => depth += 1,
            ')' | '⌋' | '⌉' => depth -= 1,
            _ => {}
        }
        depth == 0 && matches!(c, '+' | '−' | ' ')
    });
    if top_level {
        format!("({e})")
    } else {
        e.to_string()
    }
}

/// A time with six significant digits (17.507 ms), for totals a user checks by hand.
pub fn precise(t: Seconds) -> String {
    let v = t.get();
    let (x, u) = match v.abs() {
        0.0 => (0.0, "s"),
        a if a < 1e-6 => (v * 1e9, "ns"),
        a if a < 1e-3 => (v * 1e6, "us"),
        a if a < 1.0 => (v * 1e3, "ms"),
        _ => (v, "s"),
    };
    let digits = (5 - x.abs().max(1e-300).log10().floor() as i32).clamp(0, 9) as usize;
    let s = format!("{x:.digits$}");
    let s = if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    };
    format!("{s} {u}")
}

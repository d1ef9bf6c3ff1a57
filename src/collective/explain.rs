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
    // Exact binary sizes print without a decimal point (and so do sizes below 1,000 B
    // and those between 1,000 and 1,024 B, four significant digits being whole there).
    if !s.contains('.') {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::time;
    use crate::network::DimKind;
    use crate::units::Bandwidth;

    /// A switch dimension of `p` NPUs at `gbps` GB/s and `us` µs per step.
    fn sw(p: u32, gbps: f64, us: f64) -> Dim {
        let b = Bandwidth::new(gbps * 1e9);
        Dim::new(DimKind::Switch, p, b, Seconds::new(us * 1e-6)).unwrap()
    }

    fn opts(schedule: Schedule, chunks: u32, algorithm: Algorithm) -> Options {
        Options {
            schedule,
            chunks,
            algorithm,
        }
    }

    fn lines(op: Collective, n: f64, dims: &[Dim], o: &Options) -> Vec<String> {
        let t = time(op, Bytes::new(n), dims, o).unwrap();
        explain(op, Bytes::new(n), dims, o, &t).unwrap()
    }

    /// A slow 8-NPU switch (10 GB/s) under a fast one (100 GB/s), 1 µs per step each.
    fn two_level() -> [Dim; 2] {
        [sw(8, 10.0, 1.0), sw(8, 100.0, 1.0)]
    }

    #[test]
    fn sizes_print_binary_when_exact_else_decimal() {
        assert_eq!(fmt_bytes(Bytes::new(64.0 * 1024.0)), "64 KiB");
        assert_eq!(fmt_bytes(Bytes::new(1e9)), "1 GB");
        assert_eq!(fmt_bytes(Bytes::new(31.25e6)), "31.25 MB");
        assert_eq!(fmt_bytes(Bytes::new(500.5)), "500.5 B");
        assert_eq!(fmt_bytes(Bytes::new(1000.0)), "1000 B");
    }

    #[test]
    fn a_chunked_baseline_times_each_phase_per_chunk() {
        // All-reduce of n = 1 GB in C = 4 chunks of 250 MB, ring on both levels:
        // reduce-scatter over the slow 8 (7 steps; 7/8 of 250 MB at 10 GB/s: 7 us +
        // 21.875 ms = 21.882 ms per chunk, 87.53 ms for four), all-reduce over the fast 8
        // on 250/8 = 31.25 MB (14 us + 1.75·31.25 MB/100 GB/s = 560.9 us), all-gather as
        // the reduce-scatter. T = Σ t(n/C) + (C−1)·max_d Σ t(n/C) = 44.3249 ms + 3 ×
        // 43.764 ms = 175.617 ms.
        let o = opts(Schedule::Baseline, 4, Algorithm::Ring);
        let l = lines(Collective::AllReduce, 1e9, &two_level(), &o);
        assert_eq!(
            l[0],
            "all-reduce of 1 GB per NPU on 64 NPUs, 4 chunks of n/C = 250 MB:"
        );
        assert!(l[1].ends_with("ring with n = 250 MB"), "{}", l[1]);
        assert_eq!(l[2], "  latency  = (p−1)·α = 7 × 1 us = 7 us");
        assert_eq!(
            l[3],
            "  transfer = (p−1)/p · n / B = 0.875 × 250 MB / 10 GB/s = 21.88 ms"
        );
        assert_eq!(l[4], "  × 4 chunks = 87.53 ms");
        assert!(l[5].ends_with("ring with n = 31.25 MB"), "{}", l[5]);
        assert!(l.iter().all(|x| !x.contains("auto:")), "a forced ring");
        assert_eq!(
            l[13],
            "T = Σ_s t_s(n/C) + (C−1)·max_d Σ_(s on d) t_s(n/C) = 44.32 ms + 3 × 43.76 ms = 175.617 ms"
        );
        // algbw = 1 GB / 175.617 ms = 5.694 GB/s; busbw × 2·63/64 = 1.969.
        assert_eq!(l[14], "algbw = n / T = 1 GB / 175.6 ms = 5.694 GB/s");
        assert_eq!(
            l[15],
            "busbw = algbw × 2(p−1)/p = 5.694 GB/s × 1.969 = 11.21 GB/s (nccl-tests factor)"
        );
        assert_eq!(l.len(), 16);
    }

    #[test]
    fn one_chunk_adds_its_phases() {
        // 7 us + 87.5 ms, 14 us + 2.1875 ms, 7 us + 87.5 ms: 177.215 ms, no chunk line.
        let o = opts(Schedule::Baseline, 1, Algorithm::Ring);
        let l = lines(Collective::AllReduce, 1e9, &two_level(), &o);
        assert_eq!(l[0], "all-reduce of 1 GB per NPU on 64 NPUs:");
        assert!(l.iter().all(|x| !x.contains("chunks")), "{l:#?}");
        assert_eq!(
            l[10],
            "T = Σ phases = 87.51 ms + 2.202 ms + 87.51 ms = 177.215 ms"
        );
    }

    #[test]
    fn the_nccl_schedule_has_no_chunks_and_pipelines_its_phases() {
        // NCCL's schedule ignores the chunk setting: n stays 1 GB. Direct: 1 + 2 + 1 steps of
        // 1 us, and the slow level's two transfers (87.5 ms each) are the busiest:
        // T = 4 us + 175 ms.
        let o = opts(Schedule::Nccl, 4, Algorithm::Direct);
        let l = lines(Collective::AllReduce, 1e9, &two_level(), &o);
        assert_eq!(l[0], "all-reduce of 1 GB per NPU on 64 NPUs:");
        assert!(l[1].ends_with("direct with n = 1 GB"), "{}", l[1]);
        assert_eq!(
            l[10],
            "T = Σ_s latency_s + max_d Σ_(s on d) transfer_s (phases pipelined, NCCL) = 175.004 ms"
        );
    }

    #[test]
    fn one_phase_is_its_own_total() {
        // Ring all-reduce of 1 GB on one switch of 8 at 100 GB/s: 2·7 steps of 1 us and
        // 2·7/8 · 1 GB / 100 GB/s = 17.5 ms; NCCL's schedule has nothing to pipeline.
        let o = opts(Schedule::Nccl, 1, Algorithm::Ring);
        let l = lines(Collective::AllReduce, 1e9, &[sw(8, 100.0, 1.0)], &o);
        assert_eq!(l[4], "T = 17.514 ms");
    }

    #[test]
    fn auto_lists_each_phases_alternatives_fastest_first() {
        // Reduce-scatter of 1 GB over the slow 8: direct 1 step (87.501 ms),
        // halving-doubling log₂8 = 3 (87.503 ms), ring 7 (87.507 ms), the parameter server
        // 900 ms.
        let o = opts(Schedule::Baseline, 1, Algorithm::Auto);
        let l = lines(Collective::AllReduce, 1e9, &two_level(), &o);
        assert_eq!(
            l[4],
            "  auto: direct 87.5 ms < halving-doubling 87.5 ms < ring 87.51 ms < parameter-server 900 ms"
        );
        assert_eq!(l.iter().filter(|x| x.starts_with("  auto: ")).count(), 3);
    }

    #[test]
    fn themis_writes_each_phase_as_a_sum_over_chunks() {
        // Two chunks of 500 MB; Themis sends each through the fast level first (8× smaller
        // after it), so the slow level reduce-scatters 2 × 62.5 MB = 125 MB in all, in
        // C·7 = 14 steps: 0.875 × 125 MB / 10 GB/s = 10.94 ms.
        let o = opts(Schedule::Themis, 2, Algorithm::Ring);
        let l = lines(Collective::AllReduce, 1e9, &two_level(), &o);
        assert_eq!(
            l[0],
            "all-reduce of 1 GB per NPU on 64 NPUs, 2 chunks of n/C = 500 MB:"
        );
        assert_eq!(
            l[1],
            "phase 1: reduce-scatter on dimension 0 switch(8, 10 GB/s, 1 us) (p = 8), ring (chunk 1), 125 MB over all chunks"
        );
        assert_eq!(l[2], "  latency  = C·(p−1)·α = 2 × 7 × 1 us = 14 us");
        assert_eq!(
            l[3],
            "  transfer = (p−1)/p · Σ shares / B = 0.875 × 125 MB / 10 GB/s = 10.94 ms"
        );
        assert!(
            l[13].starts_with("T = Σ_s t_s(chunk 1) + max_d"),
            "{}",
            l[13]
        );
    }

    #[test]
    fn the_flat_ring_writes_one_line_per_dimension_it_crosses() {
        // switch(2, 10 GB/s) × switch(8, 100 GB/s), 1 GiB: one ring over P = 16. All-reduce
        // (w = 2): half its edges cross the slow level, 16 steps, (8/16)·2·15/16·n/10 GB/s =
        // 100.66 ms; the fast level 14 steps; T = 30 us + 100.66 ms. All-gather (w = 1): 8
        // and 7 steps, half the transfer.
        let dims = [sw(2, 10.0, 1.0), sw(8, 100.0, 1.0)];
        let gib = 1024f64.powi(3);
        let l = lines(Collective::AllReduce, gib, &dims, &Options::default());
        assert!(
            l[0].starts_with("all-reduce of 1 GiB per NPU as one ring across all P = 16 ranks (NCCL ring; w = 2 passes"),
            "{}",
            l[0]
        );
        assert_eq!(
            l[1],
            "  dimension 0 switch(2, 10 GB/s, 1 us): latency = 16 steps × 1 us = 16 us; transfer = (E_d/P)·w(P−1)/P·n / b = 100.7 ms"
        );
        assert_eq!(l[3], "T = Σ_d latency_d + max_d transfer_d = 100.693 ms");
        let ring = opts(Schedule::Nccl, 1, Algorithm::Ring);
        let g = lines(Collective::AllGather, gib, &dims, &ring);
        assert!(g[0].contains("(NCCL ring; w = 1 passes"), "{}", g[0]);
        assert!(g[1].contains("latency = 8 steps × 1 us = 8 us"), "{}", g[1]);
        assert_eq!(g[3], "T = Σ_d latency_d + max_d transfer_d = 50.3466 ms");
    }

    #[test]
    fn a_group_of_one_takes_no_time_and_has_no_bandwidth() {
        let l = lines(
            Collective::AllReduce,
            1e6,
            &[sw(1, 10.0, 1.0)],
            &Options::default(),
        );
        assert_eq!(l, ["all-reduce of 1 MB per NPU on 1 NPUs:", "T = 0 s"]);
    }

    #[test]
    fn bus_bandwidth_factors_by_collective() {
        // nccl-tests' busbw factors (PERFORMANCE.md): all-reduce 2(p−1)/p; all-gather,
        // reduce-scatter and all-to-all (p−1)/p; broadcast, reduce and send/recv 1.
        assert_eq!(factor_expr(Collective::AllReduce), "2(p−1)/p");
        for op in [
            Collective::AllGather,
            Collective::ReduceScatter,
            Collective::AllToAll,
        ] {
            assert_eq!(factor_expr(op), "(p−1)/p");
        }
        for op in [
            Collective::Broadcast,
            Collective::Reduce,
            Collective::SendRecv,
        ] {
            assert_eq!(factor_expr(op), "1");
        }
    }

    #[test]
    fn expressions_with_a_top_level_sum_or_space_take_parentheses() {
        assert_eq!(paren("p−1"), "(p−1)");
        assert_eq!(paren("log₂ p"), "(log₂ p)");
        assert_eq!(paren("2(p−1)"), "2(p−1)");
        assert_eq!(paren("⌈log₂ p⌉"), "⌈log₂ p⌉");
        // Inside brackets nothing counts; after they close, a sum does.
        assert_eq!(paren("(p−1) + 1"), "((p−1) + 1)");
        assert_eq!(paren("⌊p/2⌋ + 1"), "(⌊p/2⌋ + 1)");
        assert_eq!(paren("2⌈p/2⌉"), "2⌈p/2⌉");
    }

    #[test]
    fn precise_times_keep_six_digits_in_the_unit_that_fits() {
        let p = |s: f64| precise(Seconds::new(s));
        assert_eq!(p(0.0), "0 s");
        assert_eq!(p(1.5e-7), "150 ns");
        assert_eq!(p(1e-6), "1 us");
        assert_eq!(p(17.507e-6), "17.507 us");
        assert_eq!(p(1e-3), "1 ms");
        assert_eq!(p(175.6171234e-3), "175.617 ms");
        assert_eq!(p(1.0), "1 s");
        assert_eq!(p(1234.5678), "1234.57 s");
        assert_eq!(p(-2.5e-3), "-2.5 ms");
    }
}

//! Size ranges of an nccl-tests log and the regime (algorithm, protocol, α, B) of each:
//! the second stage of `calibrate nccl`, whose result `collective` honours
//! (`collective::calibrated`).
//!
//! **Ranges.** NCCL's tuner switches protocol and algorithm at sizes where its modelled
//! lines cross (NVIDIA/nccl `src/graph/tuning.cc`), so a log is piecewise linear in the
//! size n. The rows (by size) are split into K ≤ 4 contiguous ranges of at least two rows,
//! each fitted by a line T = a + b·n (weights 1/T²). For each K the split of least
//! weighted squared relative error SSR_K is found by dynamic programming over the split
//! points; K is chosen by the Bayesian information criterion with three parameters per
//! range (intercept, slope, split point), m rows:
//!
//! BIC_K = m·ln(max(SSR_K/m, 10⁻⁶)) + 3K·ln m
//!
//! (Schwarz 1978; the floor, 0.1% rms, stands for the log's resolution: 0.01 µs in a few µs,
//! and run-to-run noise; ranges that only fit noise below it are not worth their parameters).
//!
//! **Labels.** The log does not say what ran; each range is named as NCCL's tuner orders
//! its choices: protocols by increasing size LL, LL128, Simple (one range: Simple; two:
//! LL, Simple; three: LL, LL128, Simple; four: LL, LL128, LL128, Simple); the algorithm
//! is the ring for all-reduce, reduce-scatter and all-gather, except that an all-reduce
//! across nodes runs a double binary tree in every range but the last (NCCL's trees
//! have the lower latency, its rings the higher bandwidth across nodes), and one inside
//! an in-network (NVLS) switch ends in-network; all-to-all and send/recv run direct
//! (NCCL's point-to-point), broadcast the ring. The label decides how a regime scales to
//! other group sizes, not how well it reproduces its own log.
//!
//! **Regimes.** For a range and its algorithm, the forward model is linear in the
//! regime's α and θ = 1/B (the outer dimension bounding the transfer): T = S·α + C·n·θ,
//! S and C read off the forward model itself (`collective::calibrated::run` at α = 1 µs,
//! B = 1 GB/s), fitted by weighted least squares; a negative α is refitted at 0, a
//! non-positive θ (a range of latency only) takes the next range's bandwidth. Range k + 1
//! starts where its line crosses range k's, if that lies between their rows, else at its
//! first row.

use super::fit::wls;
use super::nccl_log::NcclLog;
use crate::collective::calibrated::{self, Protocol, Regime};
use crate::collective::{self, Algorithm, Collective, Options};
use crate::error::{Error, Result};
use crate::network::Dim;
use crate::units::{Bandwidth, Bytes, Seconds};

/// Largest number of ranges a log is split into.
pub const MAX_RANGES: usize = 4;

/// Weighted (1/T²) line fit of rows[i..=j]: (a, b, SSR of relative residuals).
fn line(rows: &[(f64, f64)]) -> (f64, f64, f64) {
    let (mut sw, mut sx, mut sy, mut sxx, mut sxy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for &(n, t) in rows {
        let w = 1.0 / (t * t);
        sw += w;
        sx += w * n;
        sy += w * t;
        sxx += w * n * n;
        sxy += w * n * t;
    }
    let det = sw * sxx - sx * sx;
    let (a, b) = if det.abs() > 1e-300 * sw * sxx {
        ((sxx * sy - sx * sxy) / det, (sw * sxy - sx * sy) / det)
    } else {
        (sy / sw, 0.0)
    };
    let ssr = rows
        .iter()
        .map(|&(n, t)| ((a + b * n - t) / t).powi(2))
        .sum();
    (a, b, ssr)
}

/// The split of `rows` (sorted by size) into ranges, as index ranges (see the module
/// documentation).
pub fn split(rows: &[(f64, f64)]) -> Vec<std::ops::Range<usize>> {
    let m = rows.len();
    let kmax = MAX_RANGES.min(m / 2).max(1);
    // cost[i][j]: SSR of one line over rows i..j (exclusive end), ≥ 2 rows.
    let mut cost = vec![vec![f64::INFINITY; m + 1]; m + 1];
    for i in 0..m {
        for j in i + 2..=m {
            cost[i][j] = line(&rows[i..j]).2;
        }
    }
    // best[k][j]: least SSR of rows 0..j in k ranges; from[k][j] the last range's start.
    let mut best = vec![vec![f64::INFINITY; m + 1]; kmax + 1];
    let mut from = vec![vec![0usize; m + 1]; kmax + 1];
    best[0][0] = 0.0;
    for k in 1..=kmax {
        for j in 2..=m {
            for i in 0..j.saturating_sub(1) {
                let c = best[k - 1][i] + cost[i][j];
                if c < best[k][j] {
                    best[k][j] = c;
                    from[k][j] = i;
                }
            }
        }
    }
    let mf = m as f64;
    let bic = |k: usize| mf * (best[k][m] / mf).max(1e-6).ln() + 3.0 * k as f64 * mf.ln();
    let k = (1..=kmax)
        .filter(|&k| best[k][m].is_finite())
        .min_by(|&a, &b| bic(a).total_cmp(&bic(b)))
        .unwrap_or(1);
    let mut out = vec![];
    let mut j = m;
    for kk in (1..=k).rev() {
        let i = from[kk][j];
        out.push(i..j);
        j = i;
    }
    out.reverse();
    out
}

/// The (algorithm, protocol) of each of `k` ranges of `op` (see the module documentation);
/// `across` is whether the log spans nodes, `outer` its outermost dimension.
pub fn labels(op: Collective, across: bool, outer: &Dim, k: usize) -> Vec<(Algorithm, Protocol)> {
    use Protocol::*;
    let protocols: &[Protocol] = match k {
        0 | 1 => &[Simple],
        2 => &[Ll, Simple],
        3 => &[Ll, Ll128, Simple],
        _ => &[Ll, Ll128, Ll128, Simple],
    };
    (0..k)
        .map(|i| {
            let last = i + 1 == k;
            let alg = match op {
                Collective::AllReduce
                    if across
                        && !last
                        && collective::applies(op, Algorithm::DoubleBinaryTree, outer) =>
                {
                    Algorithm::DoubleBinaryTree
                }
                Collective::AllReduce if !across && last && outer.in_network => {
                    Algorithm::InNetwork
                }
                Collective::AllToAll | Collective::SendRecv => Algorithm::Direct,
                _ => Algorithm::Ring,
            };
            (alg, protocols[i.min(protocols.len() - 1)])
        })
        .collect()
}

/// The dimensions a log spans: dimension 0 with its GPUs per node, and dimension 1 with
/// its nodes when there are several (`dims` as fitted).
pub fn span(log: &NcclLog, dims: &[Dim]) -> Vec<Dim> {
    let mut v = vec![Dim {
        size: log.ranks / log.nodes,
        ..dims[0]
    }];
    if log.nodes > 1 {
        v.push(Dim {
            size: log.nodes,
            ..dims[dims.len() - 1]
        });
    }
    v
}

/// One log's regimes (`dim` indices into [`span`]) and, per row (by size), the fitted
/// time and the regime that gives it.
#[derive(Clone, Debug)]
pub struct LogRegimes {
    /// The regimes, by increasing `from`.
    pub regimes: Vec<Regime>,
    /// (size, measured s, forward-model s, index into `regimes`), by size.
    pub rows: Vec<(f64, f64, f64, usize)>,
}

/// (S, C·n) of `op` at `n` under algorithm `alg` on `span` (see the module documentation).
fn design(op: Collective, alg: Algorithm, span: &[Dim], n: f64) -> Result<(f64, f64)> {
    let (a, b) = (1e-6, 1e9);
    let r = probe(op, alg, span, a, b);
    let t = calibrated::run(&r, op, Bytes::new(n), span, &Options::default())?.time;
    let d = span.len() - 1;
    let lat: f64 = t.phases().iter().map(|p| p.latency.get()).sum();
    let x: f64 = t
        .phases()
        .iter()
        .filter(|p| p.dim == d)
        .map(|p| p.transfer.get())
        .sum();
    Ok((lat / a, x * b))
}

fn probe(op: Collective, alg: Algorithm, span: &[Dim], a: f64, b: f64) -> Regime {
    let d = span.len() - 1;
    Regime {
        dim: d,
        group: span[d].size,
        op,
        from: Bytes::ZERO,
        algorithm: alg,
        protocol: Protocol::Simple,
        latency: Seconds::new(a),
        bandwidth: Bandwidth::new(b),
    }
}

/// Fits the regimes of `log` on the fitted dimensions `dims`.
pub fn fit(log: &NcclLog, dims: &[Dim]) -> Result<LogRegimes> {
    let span = span(log, dims);
    let d = span.len() - 1;
    let mut rows = log.rows.clone();
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ranges = split(&rows);
    let names = labels(log.op, log.nodes > 1, &span[d], ranges.len());
    type Range = (
        Algorithm,
        Protocol,
        f64,
        Option<f64>,
        Vec<Vec<f64>>,
        Vec<f64>,
        Vec<f64>,
    );
    let mut fitted: Vec<Range> = vec![];
    for (r, &(alg, proto)) in ranges.iter().zip(&names) {
        let part = &rows[r.clone()];
        let x = part
            .iter()
            .map(|&(n, _)| design(log.op, alg, &span, n).map(|(s, c)| vec![s, c]))
            .collect::<Result<Vec<_>>>()?;
        let y: Vec<f64> = part.iter().map(|r| r.1).collect();
        let w: Vec<f64> = y.iter().map(|t| 1.0 / (t * t)).collect();
        let f = wls(&x, &y, &w)?;
        let (mut alpha, mut theta) = (f.coef[0], Some(f.coef[1]));
        if alpha < 0.0 {
            let x1: Vec<Vec<f64>> = x.iter().map(|r| vec![r[1]]).collect();
            alpha = 0.0;
            theta = Some(wls(&x1, &y, &w)?.coef[0]);
        }
        // Latency only: the transfer is under 0.1% of the time at the range's largest size.
        let (xl, yl) = (&x[x.len() - 1], y[y.len() - 1]);
        if theta.is_none_or(|t| t.is_nan() || t * xl[1] <= 1e-3 * yl) {
            theta = None;
        }
        fitted.push((alg, proto, alpha, theta, x, y, w));
    }
    // A range of latency only takes the next range's bandwidth (else the previous one's).
    let thetas: Vec<Option<f64>> = fitted.iter().map(|f| f.3).collect();
    let mut regimes: Vec<Regime> = vec![];
    for (i, (alg, proto, alpha, own, x, y, w)) in fitted.iter().enumerate() {
        let theta = own
            .or_else(|| thetas[i..].iter().flatten().next().copied())
            .or_else(|| thetas[..i].iter().flatten().last().copied())
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "{}: the time does not grow with size anywhere; are the sizes varied?",
                    log.source
                ))
            })?;
        // A borrowed bandwidth: α refitted to what the transfer leaves, T − C·n·θ = S·α.
        let alpha = if own.is_some() {
            *alpha
        } else {
            let x0: Vec<Vec<f64>> = x.iter().map(|r| vec![r[0]]).collect();
            let y0: Vec<f64> = y.iter().zip(x).map(|(t, r)| t - r[1] * theta).collect();
            wls(&x0, &y0, w)?.coef[0].max(0.0)
        };
        let mut r = probe(log.op, *alg, &span, alpha, 1.0 / theta);
        r.protocol = *proto;
        if i > 0 {
            let first = rows[ranges[i].start].0;
            let last_prev = rows[ranges[i - 1].end - 1].0;
            r.from = Bytes::new(crossing(
                log.op,
                &regimes[i - 1],
                &r,
                &span,
                last_prev,
                first,
            )?);
        }
        regimes.push(r);
    }
    let mut out = vec![];
    for &(n, t) in &rows {
        let k = regimes.iter().rposition(|r| r.from.get() <= n).unwrap_or(0);
        let c = calibrated::run(
            &regimes[k],
            log.op,
            Bytes::new(n),
            &span,
            &Options::default(),
        )?;
        out.push((n, t, c.time.total.get(), k));
    }
    Ok(LogRegimes { regimes, rows: out })
}

/// Where regime `b` becomes faster than `a` between sizes `lo` (last row of a) and `hi`
/// (first row of b), rounded up to a whole byte; `hi` if they do not cross there.
fn crossing(op: Collective, a: &Regime, b: &Regime, span: &[Dim], lo: f64, hi: f64) -> Result<f64> {
    let t = |r: &Regime, n: f64| -> Result<f64> {
        Ok(
            calibrated::run(r, op, Bytes::new(n), span, &Options::default())?
                .time
                .total
                .get(),
        )
    };
    let gap = |n: f64| -> Result<f64> { Ok(t(a, n)? - t(b, n)?) };
    let (mut l, mut h) = (lo, hi);
    if !(gap(l)? <= 0.0 && gap(h)? >= 0.0) {
        return Ok(hi);
    }
    for _ in 0..100 {
        let mid = 0.5 * (l + h);
        if gap(mid)? >= 0.0 {
            h = mid;
        } else {
            l = mid;
        }
    }
    Ok(h.ceil().clamp(lo + 1.0, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_a_lower_envelope_at_its_kink() {
        // T = min(10 µs + n/1 GB/s, 30 µs + n/10 GB/s): the lines cross where
        // 20 µs = n(1 − 0.1)/1 GB/s, n = 22.2 kB; sizes 1 KiB … 1 MiB, 11 rows,
        // 5 below the kink (1..16 KiB), 6 above.
        let rows: Vec<(f64, f64)> = (0..11)
            .map(|i| {
                let n = 1024.0 * f64::powi(2.0, i);
                (n, (10e-6 + n / 1e9).min(30e-6 + n / 10e9))
            })
            .collect();
        let s = split(&rows);
        assert_eq!(s, vec![0..5, 5..11]);
        let (a, b, _) = line(&rows[5..]);
        assert!((a / 30e-6 - 1.0).abs() < 1e-9 && (b * 10e9 - 1.0).abs() < 1e-9);
    }

    #[test]
    fn one_line_is_one_range() {
        let rows: Vec<(f64, f64)> = (0..20)
            .map(|i| {
                let n = 8.0 * f64::powi(2.0, i);
                (n, 30e-6 + 1.75 * n / 200e9)
            })
            .collect();
        assert_eq!(split(&rows), vec![0..20]);
    }
}

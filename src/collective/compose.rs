//! Composition of per-dimension costs into a multi-dimensional collective, without
//! allocating (fixed arrays of [`MAX_DIMS`]).
//!
//! **Phases** (hierarchical, as ASTRA-sim's baseline and Themis, ISCA'22 §2). With the
//! dimensions of size > 1 in order d₁..d_k (innermost first), P = Π p, and n the
//! nccl-tests size:
//! - all-reduce: reduce-scatter on d₁ with n, on d₂ with n/p₁, …, on d_{k−1}; all-reduce
//!   on d_k with n/(p₁⋯p_{k−1}); all-gather back on d_{k−1} … d₁ (output n/(p₁⋯p_{k−2}), …,
//!   n). The middle all-reduce costs the same as reduce-scatter + all-gather for ring,
//!   direct and halving-doubling, and lets a tree or in-network reduction run on the
//!   outermost dimension (as NCCL does across nodes).
//! - reduce-scatter: on d₁ … d_k with inputs n, n/p₁, n/(p₁p₂), …; all-gather the reverse.
//! - all-to-all, send/recv: the whole n on every dimension in turn (d₁ … d_k).
//! - broadcast: n on d_k first, then inwards; reduce: n on d₁ first, then outwards.
//! - gather: on d₁ … d_k with outputs n·p₁/P, n·p₁p₂/P, …, n; scatter the reverse.
//!
//! **Chunks** (C = `Options::chunks`, m = n/C): a chunk flows through the phases; the
//! pipeline's bottleneck is the busiest dimension (a dimension's reduce-scatter and
//! all-gather phases share its links):
//! T = Σ_s t_s(m) + (C−1) · max_d Σ_{s on d} t_s(m). This is DESIGN.md's
//! Σ_phases t(n/C) + (C−1)·max_phase t(n/C) with "phase" read as a dimension's share; the
//! two agree whenever each dimension carries one phase. C = 1 gives Σ_s t_s(n).
//!
//! **NCCL** (`Schedule::Nccl`, the default): pipelined phases and one ring across all
//! ranks, in `nccl.rs`; chunks do not apply there.
//!
//! **Themis** (`Schedule::Themis`, Rashidi et al. ISCA'22): for all-reduce, reduce-scatter
//! and all-gather each chunk picks its own dimension order, greedily: the first position
//! of the reduce-scatter order (the largest share, c bytes; the next gets c/p of the first
//! dimension, …) goes to the dimension d minimising L_d + t_d(share), L_d being the busy
//! time accumulated by earlier chunks, and so on for the next positions (ties by index);
//! all-reduce runs reduce-scatter over all dimensions then all-gather in reverse. With
//! t_{c,d} the time chunk c spends on dimension d:
//! T = Σ_s t_s(chunk 1) + max_d Σ_{c=2}^{C} t_{c,d}; with identical orders this is the
//! baseline formula, and as C grows T tends to max_d (bytes through d / B_d) plus latency,
//! the bandwidth bound. The greedy is a heuristic: when it is slower than the baseline
//! order, the baseline is kept (and reported).
//! Other collectives move the same bytes through every dimension in any order, so Themis
//! equals the baseline for them.

use super::{Algorithm, Collective, CollectiveTime, MAX_DIMS, Options, Phase, Schedule};
use crate::error::{Error, Result};
use crate::network::Dim;
use crate::units::{Bytes, Seconds};

/// Largest chunk count accepted (the Themis schedule loops over chunks).
pub const MAX_CHUNKS: u32 = 1 << 16;

/// One phase of the plan: collective `op` on dimension `dim` with `frac · n` bytes.
#[derive(Clone, Copy, Debug)]
pub(super) struct Slot {
    pub dim: usize,
    pub op: Collective,
    pub frac: f64,
}

pub(super) const EMPTY_SLOT: Slot = Slot {
    dim: 0,
    op: Collective::SendRecv,
    frac: 0.0,
};

/// The phases of `op` over the dimensions `order` (indices into `dims`, all of size > 1).
/// `split_all_reduce` makes all-reduce reduce-scatter everywhere then all-gather (Themis).
pub(super) fn plan(
    op: Collective,
    dims: &[Dim],
    order: &[usize],
    split_all_reduce: bool,
    out: &mut [Slot; 2 * MAX_DIMS],
) -> usize {
    let k = order.len();
    let total: f64 = order.iter().map(|&d| dims[d].size as f64).product();
    // prefix[i] = Π_{j<i} p_{order[j]}
    let mut prefix = [1.0f64; MAX_DIMS + 1];
    for (i, &d) in order.iter().enumerate() {
        prefix[i + 1] = prefix[i] * dims[d].size as f64;
    }
    let mut n = 0;
    let mut push = |dim: usize, op: Collective, frac: f64| {
        out[n] = Slot { dim, op, frac };
        n += 1;
    };
    use Collective::*;
    match op {
        AllReduce | ReduceScatter => {
            let rs = if op == AllReduce && !split_all_reduce {
                k - 1
            } else {
                k
            };
            for i in 0..rs {
                push(order[i], ReduceScatter, 1.0 / prefix[i]);
            }
            if op == AllReduce {
                if rs < k {
                    push(order[k - 1], AllReduce, 1.0 / prefix[k - 1]);
                }
                for i in (0..rs).rev() {
                    push(order[i], AllGather, 1.0 / prefix[i]);
                }
            }
        }
        AllGather => (0..k)
            .rev()
            .for_each(|i| push(order[i], AllGather, 1.0 / prefix[i])),
        AllToAll | SendRecv | Reduce => order.iter().for_each(|&d| push(d, op, 1.0)),
        Broadcast => order.iter().rev().for_each(|&d| push(d, op, 1.0)),
        Gather => (0..k).for_each(|i| push(order[i], op, prefix[i + 1] / total)),
        Scatter => (0..k)
            .rev()
            .for_each(|i| push(order[i], op, prefix[i + 1] / total)),
    }
    n
}

/// Checks the arguments and collects the dimensions of size > 1, innermost first.
fn active_dims(size: Bytes, dims: &[Dim], opts: &Options) -> Result<([usize; MAX_DIMS], usize)> {
    if dims.len() > MAX_DIMS {
        return Err(Error::input(
            "topology",
            format!(
                "{} dimensions; at most {MAX_DIMS} are supported",
                dims.len()
            ),
        ));
    }
    if opts.chunks == 0 || opts.chunks > MAX_CHUNKS {
        return Err(Error::input(
            "--chunks",
            format!("must be between 1 and {MAX_CHUNKS}, got {}", opts.chunks),
        ));
    }
    if !(size.get() >= 0.0 && size.get().is_finite()) {
        return Err(Error::input("--size", "must be a finite size ≥ 0"));
    }
    let mut order = [0usize; MAX_DIMS];
    let mut k = 0;
    for (i, d) in dims.iter().enumerate() {
        if d.size > 1 {
            order[k] = i;
            k += 1;
        }
    }
    Ok((order, k))
}

pub(super) const EMPTY_PHASE: Phase = Phase {
    dim: 0,
    op: Collective::SendRecv,
    algorithm: Algorithm::Auto,
    size: Bytes::ZERO,
    latency: Seconds::ZERO,
    transfer: Seconds::ZERO,
};

/// Evaluates one slot on a chunk of `m` bytes; names the dimension in errors.
pub(super) fn eval(s: &Slot, dims: &[Dim], alg: Algorithm, m: Bytes) -> Result<Phase> {
    let d = &dims[s.dim];
    let size = m * s.frac;
    let (algorithm, c) = super::select(s.op, alg, d, size).map_err(|e| match e {
        Error::Unsupported(msg) => Error::Unsupported(format!("dimension {} ({d}): {msg}", s.dim)),
        other => other,
    })?;
    Ok(Phase {
        dim: s.dim,
        op: s.op,
        algorithm,
        size,
        latency: c.latency(d),
        transfer: c.transfer(size),
    })
}

/// See the module documentation.
pub(super) fn time(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    opts: &Options,
) -> Result<CollectiveTime> {
    let (order, k) = active_dims(size, dims, opts)?;
    let mut out = CollectiveTime {
        total: Seconds::ZERO,
        n_phases: 0,
        phases: [EMPTY_PHASE; 2 * MAX_DIMS],
        schedule: if opts.schedule == Schedule::Nccl {
            Schedule::Nccl
        } else {
            Schedule::Baseline
        },
        flat_ring: false,
    };
    if k == 0 {
        return Ok(out);
    }
    if opts.schedule == Schedule::Nccl {
        super::nccl::time(op, size, dims, &order[..k], opts, &mut out)?;
        return Ok(out);
    }
    baseline(op, size, dims, &order[..k], opts, &mut out)?;
    let themis = opts.schedule == Schedule::Themis
        && opts.chunks > 1
        && k > 1
        && matches!(
            op,
            Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather
        );
    if themis {
        let mut alt = out;
        super::themis::time(op, size, dims, &order[..k], opts, &mut alt)?;
        if alt.total < out.total {
            alt.schedule = Schedule::Themis;
            return Ok(alt);
        }
    }
    Ok(out)
}

/// [`time`] under the NCCL schedule with `opts.algorithm` preferred: phases it does not
/// implement fall back to `auto` (calibrated regimes, `calibrated.rs`).
pub(super) fn time_lenient(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    opts: &Options,
) -> Result<CollectiveTime> {
    let opts = Options {
        schedule: Schedule::Nccl,
        chunks: 1,
        ..*opts
    };
    let (order, k) = active_dims(size, dims, &opts)?;
    let mut out = CollectiveTime {
        total: Seconds::ZERO,
        n_phases: 0,
        phases: [EMPTY_PHASE; 2 * MAX_DIMS],
        schedule: Schedule::Nccl,
        flat_ring: false,
    };
    if k > 0 {
        super::nccl::time_with(op, size, dims, &order[..k], &opts, true, &mut out)?;
    }
    Ok(out)
}

/// The end-to-end time only, as [`time`] computes it, without building the phases: the
/// hot path of estimates and sweeps. Themis schedules fall back to [`time`].
pub(super) fn total(op: Collective, size: Bytes, dims: &[Dim], opts: &Options) -> Result<Seconds> {
    if opts.schedule == Schedule::Themis {
        return time(op, size, dims, opts).map(|t| t.total);
    }
    let (order, k) = active_dims(size, dims, opts)?;
    if k == 0 {
        return Ok(Seconds::ZERO);
    }
    if opts.schedule == Schedule::Nccl {
        return super::nccl::total(op, size, dims, &order[..k], opts.algorithm);
    }
    let mut slots = [EMPTY_SLOT; 2 * MAX_DIMS];
    let ns = plan(op, dims, &order[..k], false, &mut slots);
    let c = opts.chunks as f64;
    let m = size / c;
    let mut busy = [Seconds::ZERO; MAX_DIMS];
    let mut sum = Seconds::ZERO;
    for s in &slots[..ns] {
        let d = &dims[s.dim];
        let n = m * s.frac;
        let t = super::select(s.op, opts.algorithm, d, n)?.1.time(d, n);
        sum += t;
        busy[s.dim] += t;
    }
    let bottleneck = busy.iter().fold(Seconds::ZERO, |a, &b| a.max(b));
    Ok(sum + bottleneck * (c - 1.0))
}

/// The baseline schedule: fixed phase order, chunks pipelined behind the busiest dimension.
fn baseline(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    order: &[usize],
    opts: &Options,
    out: &mut CollectiveTime,
) -> Result<()> {
    let mut slots = [EMPTY_SLOT; 2 * MAX_DIMS];
    let ns = plan(op, dims, order, false, &mut slots);
    let c = opts.chunks as f64;
    let m = size / c;
    let mut busy = [Seconds::ZERO; MAX_DIMS];
    let mut sum = Seconds::ZERO;
    for (i, s) in slots[..ns].iter().enumerate() {
        let ph = eval(s, dims, opts.algorithm, m)?;
        sum += ph.time();
        busy[s.dim] += ph.time();
        out.phases[i] = Phase {
            size: ph.size * c,
            latency: ph.latency * c,
            transfer: ph.transfer * c,
            ..ph
        };
    }
    let bottleneck = busy.iter().fold(Seconds::ZERO, |a, &b| a.max(b));
    out.n_phases = ns;
    out.total = sum + bottleneck * (c - 1.0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{Algorithm, Options, Schedule};
    use crate::network::DimKind;
    use crate::units::Bandwidth;

    fn pairs() -> [Dim; MAX_DIMS] {
        [Dim::new(DimKind::Switch, 2, Bandwidth::new(1e11), Seconds::new(1e-6)).unwrap(); MAX_DIMS]
    }

    #[test]
    fn plans_span_the_most_dimensions_a_network_has() {
        // Eight dimensions of 2 (P = 256), innermost first. Gather: outputs n·p₁/P,
        // n·p₁p₂/P, …, n, i.e. 2^(i+1)/256 on dimension i.
        let dims = pairs();
        let order: [usize; MAX_DIMS] = std::array::from_fn(|i| i);
        let mut out = [EMPTY_SLOT; 2 * MAX_DIMS];
        let n = plan(Collective::Gather, &dims, &order, false, &mut out);
        assert_eq!(n, MAX_DIMS);
        for (i, s) in out[..n].iter().enumerate() {
            assert_eq!(s.dim, i);
            assert_eq!(s.frac, 2f64.powi(i as i32 + 1) / 256.0);
        }
        // All-reduce: reduce-scatter on the first seven with n, n/2, …, n/64, the
        // all-reduce on the eighth with n/128, all-gathers back: 15 phases.
        let n = plan(Collective::AllReduce, &dims, &order, false, &mut out);
        assert_eq!(n, 2 * MAX_DIMS - 1);
        assert_eq!(out[7].op, Collective::AllReduce);
        assert_eq!(out[7].frac, 1.0 / 128.0);
        assert_eq!(out[14].frac, 1.0);
        assert_eq!(out[6].frac, 1.0 / 64.0);
    }

    #[test]
    fn limits_hold_at_their_edges() {
        // Eight dimensions are accepted, nine refused; 2^16 chunks accepted, one more
        // refused. Eight pairs all-reduce 1 MB in 15 baseline phases of ring steps.
        let o = |chunks| Options {
            chunks,
            schedule: Schedule::Baseline,
            algorithm: Algorithm::Ring,
        };
        let n = Bytes::new(1e6);
        let dims = pairs();
        let t = crate::collective::time(Collective::AllReduce, n, &dims, &o(1)).unwrap();
        assert_eq!(t.n_phases, 15);
        let nine = [dims[0]; MAX_DIMS + 1];
        let err = crate::collective::time(Collective::AllReduce, n, &nine, &o(1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("at most 8"), "{err}");
        assert!(crate::collective::time(Collective::AllReduce, n, &dims, &o(MAX_CHUNKS)).is_ok());
        let err = crate::collective::time(Collective::AllReduce, n, &dims, &o(MAX_CHUNKS + 1))
            .unwrap_err()
            .to_string();
        assert!(err.contains("--chunks"), "{err}");
        // Sizes: finite and not negative.
        for bad in [-1.0, f64::INFINITY, f64::NAN] {
            let err = crate::collective::time(Collective::AllReduce, Bytes::new(bad), &dims, &o(1))
                .unwrap_err()
                .to_string();
            assert!(err.contains("--size"), "{bad}: {err}");
        }
    }

    #[test]
    fn themis_needs_more_than_one_chunk() {
        // Innermost a slow switch, outside a fast one: Themis's greedy order would put the
        // large first share on the fast dimension, but with one chunk there is nothing to
        // reorder between (Rashidi et al. ISCA'22: the order is per chunk), so the baseline
        // order runs and is reported.
        let dims = [
            Dim::new(DimKind::Switch, 8, Bandwidth::new(10e9), Seconds::new(1e-6)).unwrap(),
            Dim::new(
                DimKind::Switch,
                8,
                Bandwidth::new(100e9),
                Seconds::new(1e-6),
            )
            .unwrap(),
        ];
        let n = Bytes::new(1e9);
        let o = |schedule, chunks| Options {
            schedule,
            chunks,
            algorithm: Algorithm::Ring,
        };
        let base =
            crate::collective::time(Collective::AllReduce, n, &dims, &o(Schedule::Baseline, 1))
                .unwrap();
        let one = crate::collective::time(Collective::AllReduce, n, &dims, &o(Schedule::Themis, 1))
            .unwrap();
        assert_eq!(one.schedule, Schedule::Baseline);
        assert_eq!(one.total, base.total);
        // Two chunks: the greedy order wins and is reported.
        let two = crate::collective::time(Collective::AllReduce, n, &dims, &o(Schedule::Themis, 2))
            .unwrap();
        assert_eq!(two.schedule, Schedule::Themis);
        assert!(two.total < base.total);
    }

    #[test]
    fn the_lenient_nccl_time_ignores_the_chunk_setting() {
        // `time_lenient` runs NCCL's schedule, which has no chunks: a chunk count the
        // baseline would refuse (0) is not read.
        let dims = [Dim::new(
            DimKind::Switch,
            8,
            Bandwidth::new(100e9),
            Seconds::new(2e-6),
        )
        .unwrap()];
        let n = Bytes::new(1e8);
        let o = Options {
            schedule: Schedule::Baseline,
            chunks: 0,
            ..Options::default()
        };
        let t = time_lenient(Collective::AllReduce, n, &dims, &o).unwrap();
        let nccl =
            crate::collective::time(Collective::AllReduce, n, &dims, &Options::default()).unwrap();
        assert_eq!(t.total, nccl.total);
        assert_eq!(t.schedule, Schedule::Nccl);
    }

    #[test]
    fn baseline_phases_report_the_whole_collective_across_its_chunks() {
        // Ring all-reduce of n = 10⁸ B on a switch of 8 (100 GB/s, α = 1 µs) in C = 4
        // chunks: each chunk pays 2·7 = 14 steps of α and 2·7/8·(n/4)/B; the phase
        // reports the whole: n in, 4·14 µs of latency, 2·7/8·n/B of transfer.
        let d = Dim::new(
            DimKind::Switch,
            8,
            Bandwidth::new(100e9),
            Seconds::new(1e-6),
        )
        .unwrap();
        let o = Options {
            schedule: Schedule::Baseline,
            chunks: 4,
            algorithm: Algorithm::Ring,
        };
        let t = crate::collective::time(Collective::AllReduce, Bytes::new(1e8), &[d], &o).unwrap();
        let ph = t.phases()[0];
        assert_eq!(ph.size.get(), 1e8);
        approx::assert_relative_eq!(ph.latency.get(), 56e-6, max_relative = 1e-12);
        approx::assert_relative_eq!(ph.transfer.get(), 1.75e-3, max_relative = 1e-12);
        // One dimension: T = Σ t(m) + (C − 1)·t(m) = C·t(m), the phase's whole time.
        approx::assert_relative_eq!(t.total.get(), 56e-6 + 1.75e-3, max_relative = 1e-12);
    }

    #[test]
    fn a_group_of_one_costs_nothing_under_the_schedule_asked_for() {
        let one = [Dim::new(DimKind::Switch, 1, Bandwidth::new(1e11), Seconds::new(1e-6)).unwrap()];
        let n = Bytes::new(1e6);
        for s in [Schedule::Nccl, Schedule::Baseline] {
            let o = Options {
                schedule: s,
                ..Options::default()
            };
            let t = crate::collective::time(Collective::AllReduce, n, &one, &o).unwrap();
            assert_eq!(t.total, Seconds::ZERO);
            assert_eq!(t.n_phases, 0);
            assert_eq!(t.schedule, s);
        }
    }
}

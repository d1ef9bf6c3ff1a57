//! Themis-style greedy scheduling across dimensions (Rashidi et al., "Themis: a network
//! bandwidth-aware collective scheduling policy for distributed training of DL models",
//! ISCA 2022): every chunk orders its dimensions greedily to balance their load, the
//! largest share going to the dimension that would still be least busy after taking it. The closed form is stated in
//! `compose.rs`: T = Σ_s t_s(chunk 1) + max_d Σ_{c=2}^{C} t_{c,d}.
//!
//! The phases reported are one per (dimension, collective) pair, in chunk 1's order, each
//! summing what all chunks did there.

use super::compose::{EMPTY_PHASE, EMPTY_SLOT, eval, plan};
use super::{Collective, CollectiveTime, MAX_DIMS, Options, Phase};
use crate::error::{Error, Result};
use crate::network::Dim;
use crate::units::{Bytes, Seconds};

/// Fills `out` with the Themis schedule of `op` over `order` (dimensions of size > 1).
pub(super) fn time(
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    order: &[usize],
    opts: &Options,
    out: &mut CollectiveTime,
) -> Result<()> {
    let k = order.len();
    let m = size / opts.chunks as f64;
    let mut slots = [EMPTY_SLOT; 2 * MAX_DIMS];
    let ns = plan(op, dims, order, true, &mut slots);
    for (ph, s) in out.phases.iter_mut().zip(&slots[..ns]) {
        *ph = Phase {
            dim: s.dim,
            op: s.op,
            ..EMPTY_PHASE
        };
    }
    out.n_phases = ns;
    let mut load = [Seconds::ZERO; MAX_DIMS];
    let mut rest = [Seconds::ZERO; MAX_DIMS];
    let mut first = Seconds::ZERO;
    let mut ord = [0usize; MAX_DIMS];
    for chunk in 0..opts.chunks {
        choose_order(op, dims, order, &load, opts, m, &mut ord)?;
        let n = plan(op, dims, &ord[..k], true, &mut slots);
        for s in &slots[..n] {
            let ph = eval(s, dims, opts.algorithm, m)?;
            load[s.dim] += ph.time();
            if chunk == 0 {
                first += ph.time();
            } else {
                rest[s.dim] += ph.time();
            }
            let e = out.phases[..ns]
                .iter_mut()
                .find(|e| e.dim == s.dim && e.op == s.op)
                .ok_or_else(|| Error::Internal("Themis phase without a slot".into()))?;
            if chunk == 0 {
                e.algorithm = ph.algorithm;
            }
            e.size += ph.size;
            e.latency += ph.latency;
            e.transfer += ph.transfer;
        }
    }
    out.total = first + rest.iter().fold(Seconds::ZERO, |a, &b| a.max(b));
    Ok(())
}

/// Greedy, bandwidth-aware ordering of one chunk: position i of the reduce-scatter order
/// carries the chunk's bytes divided by the sizes of the dimensions before it; fill the
/// positions from the first (largest share) on, each time with the remaining dimension whose
/// accumulated busy time plus its time for that share (its reduce-scatter and/or
/// all-gather phase) is least. Ties go to the lower index.
fn choose_order(
    op: Collective,
    dims: &[Dim],
    order: &[usize],
    load: &[Seconds; MAX_DIMS],
    opts: &Options,
    m: Bytes,
    out: &mut [usize; MAX_DIMS],
) -> Result<()> {
    let mut used = [false; MAX_DIMS];
    let mut frac = 1.0;
    for slot in out.iter_mut().take(order.len()) {
        let mut best: Option<(Seconds, usize)> = None;
        for (j, &d) in order.iter().enumerate() {
            if used[j] {
                continue;
            }
            let r = load[d] + share_time(op, &dims[d], opts, m * frac)?;
            if best.is_none_or(|(b, _)| r < b) {
                best = Some((r, j));
            }
        }
        let (_, j) = best.ok_or_else(|| Error::Internal("Themis: no dimension left".into()))?;
        used[j] = true;
        *slot = order[j];
        frac /= dims[order[j]].size as f64;
    }
    Ok(())
}

/// What a dimension spends on a share of `size` bytes: reduce-scatter and all-gather for
/// all-reduce, else the one phase.
fn share_time(op: Collective, dim: &Dim, opts: &Options, size: Bytes) -> Result<Seconds> {
    let t =
        |o: Collective| super::select(o, opts.algorithm, dim, size).map(|(_, c)| c.time(dim, size));
    Ok(match op {
        Collective::AllReduce => t(Collective::ReduceScatter)? + t(Collective::AllGather)?,
        other => t(other)?,
    })
}

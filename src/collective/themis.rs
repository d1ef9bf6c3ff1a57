//! Themis-style greedy scheduling across dimensions (Rashidi et al., "Themis: a network
//! bandwidth-aware collective scheduling policy for distributed training of DL models",
//! ISCA 2022): every chunk orders the dimensions least-loaded first, so the dimension that
//! has been busy the least takes the chunk's largest transfer. The closed form is stated in
//! `compose.rs`: T = Σ_s t_s(chunk 1) + max_d Σ_{c=2}^{C} t_{c,d}.
//!
//! The phases reported are one per (dimension, collective) pair, in chunk 1's order, each
//! summing what all chunks did there.

use super::compose::{EMPTY_SLOT, eval, plan};
use super::{Collective, CollectiveTime, MAX_DIMS, Options};
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
        ph.dim = s.dim;
        ph.op = s.op;
    }
    out.n_phases = ns;
    let mut load = [Seconds::ZERO; MAX_DIMS];
    let mut rest = [Seconds::ZERO; MAX_DIMS];
    let mut first = Seconds::ZERO;
    let mut ord = [0usize; MAX_DIMS];
    for chunk in 0..opts.chunks {
        ord[..k].copy_from_slice(order);
        ord[..k].sort_unstable_by(|&a, &b| load[a].get().total_cmp(&load[b].get()).then(a.cmp(&b)));
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

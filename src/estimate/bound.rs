//! A provable lower bound on the iteration time of a plan on other hardware, from one
//! estimate of it: what no network can make faster. A hardware × plan sweep (`sweep::prune`)
//! uses it to skip the points that cannot enter its top-k.

use super::Estimate;
use crate::units::Seconds;

/// The compute floor of an estimate `e = evaluate(model, r, plan)`:
///
/// `F(e) = T_forward + T_backward + T_recompute + T_optimizer`
///
/// (the slowest stage's compute over all micro-batches, plus the optimizer step).
///
/// **Claim.** For every system `h` whose device equals `r`'s except for its HBM capacity
/// and for matrix peaks no higher than `r`'s (every precision scaled alike, as
/// `--hw-peak` does), and whose network is any (other bandwidths, latencies, devices per
/// node), `evaluate(model, h, plan).time.total ≥ F(e)`.
///
/// **Proof** (from the composition in `estimate::finish` and the transformer's
/// `pipeline`): the iteration time is
/// `T = m·C(s*) + bubble + optimizer + interference + exposed communication`, and
/// `m·(C(s*) + tp(s*) + ep(s*) + cp(s*) + slow(s*))` of it is `m` times the slowest stage's
/// time per micro-batch `S(s*)`, where `s*` maximises `S` over the first, last and middle
/// stages and `C` is a stage's compute (GEMMs and memory-bound kernels). Every other term
/// (bubble `(Σ S_i − S(s*))/v`, optimizer, exposed PP/DP communication, interference
/// `κ·overlapped`) is ≥ 0. So `T_h ≥ m·S_h(s*_h) ≥ m·S_h(s*_r) ≥ m·C_h(s*_r)` plus the
/// optimizer, for the stage `s*_r` that `e` reports. Compute does not read the network:
/// GEMM time is `2MNK/(P·e(M,N,K)) + o` (`Device::gemm_time_at`), memory-bound time
/// `bytes/(B_HBM·e_mem) + kernels·o` (`Device::memory_time`), neither depends on the
/// topology nor on the HBM capacity, and a GEMM's time only grows when its peak `P`
/// falls (the ratio of FP8 to BF16 peak is unchanged by scaling every precision alike).
/// The optimizer is memory-bound over the same shard. Hence
/// `C_h(s*_r)·m + T_optimizer,h ≥ C_r(s*_r)·m + T_optimizer,r = F(e)`. The data-parallel
/// models (DLRM, layered) have no pipeline: `T = F + exposed communication`, and the same
/// argument holds. `tests/estimate_bound.rs` checks the claim on random plans and
/// hardware variants.
///
/// Every ranking objective is monotone in `T` for a fixed plan and device (tokens/s
/// `= tokens·B/T`, MFU `= F_model/(T·P·N)`, cost `∝ T`), so `F` bounds each of them.
#[inline]
pub fn compute_floor(e: &Estimate) -> Seconds {
    let t = &e.time;
    t.forward + t.backward + t.recompute + t.optimizer
}

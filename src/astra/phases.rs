//! Closed forms of one phase (one chunk of c bytes on one logical dimension of p NPUs),
//! derived from ASTRA-sim's `Ring.cc`, `AllToAll.cc` (direct), `HalvingDoubling.cc`,
//! `DoubleBinaryTreeAllReduce.cc`, `PacketBundle.cc`/`MemBus.cc` (endpoint delay E per
//! packet inserted, reduction R(m) = 3·⌊m/LMBW⌋ for packets marked `processed`) and
//! `BasicTopology.cpp` (message time T_h(m) = ⌊h·L + m/β⌋, β = GB/s·2^30/1e9 B/ns).
//!
//! | algo | AR | RS | AG (c = input) | A2A |
//! |---|---|---|---|---|
//! | ring | 2(p−1)T(c/p) + (2p−1)E + (p−1)R(c/p) | (p−1)T(c/p) + pE + (p−1)R(c/p) | (p−1)T(c) + pE | nT(c/p) + (n+1)E, n = p(p−1)/2 |
//! | direct, r = ⌈(p−1)/window⌉ | r = 1: max_j(s_j + T_j) + E (`direct_all_reduce`; 2T(c/p) + 3E + R(c/p) with equal hops); r > 1: 2rT(c/p) + (2r+1)E + rR(c/p) | rT(c/p) + (r+1)E + rR(c/p) | rT(c) + (r+1)E | rT(c/p) + (r+1)E |
//! | halvingDoubling, k = log2 p | Σ_{j=1..k} 2T_{h(2^{j−1})}(c/2^j) + (2k+1)E + Σ_{j=2..k} R(c/2^j) | Σ_{j=1..k} T_{h(2^{j−1})}(c/2^j) + (k+1)E + Σ_{j=2..k} R(c/2^j) | Σ_{j=0..k−1} T_{h(p/2^{j+1})}(2^j c) + (k+1)E | exits |
//! | doubleBinaryTree, H = ⌊log2 p⌋ | 2H·T(c) + (2H+1)E + (2H−1)R(c) (every collective) | same | same | same |
//!
//! Ring, direct (full window) and halving-doubling are the forms of ASTRA_NOTES.md, which
//! reproduce every single-dimension reference run exactly. The congestion-aware backend
//! (`congestion_aware/network/Link.cpp`: store-and-forward FIFO links) changes only T:
//! h·L + k·⌊m/β⌋ with k = 2 links on a Switch, and on a Switch a direct round's w messages
//! queue on the NPU's uplink, k = w + 1; this reproduces all 80 congestion-aware
//! reference runs (1-D) exactly. Direct and halving-doubling on a Ring share multi-hop
//! links and are refused under that backend. Direct with a smaller window
//! and the double binary tree are derived from the same per-packet rules (no reference
//! run covers them): the tree climbs H levels (each a message, a receive E and a
//! reduction) and descends H levels.

use super::network_yaml::{AstraDim, AstraNetwork};
use crate::error::{Error, Result};
use crate::network::DimKind;

/// A system-JSON collective implementation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Impl {
    /// `ring`
    #[default]
    Ring,
    /// `direct` / `directN` (window N; None = p−1)
    Direct(Option<u32>),
    /// `halvingDoubling`
    HalvingDoubling,
    /// `doubleBinaryTree`
    DoubleBinaryTree,
    /// `oneRing`: one ring over all NPUs
    OneRing,
    /// `oneDirect` / `oneDirectN`
    OneDirect(Option<u32>),
    /// `oneHalvingDoubling`
    OneHalvingDoubling,
}

const NAMES: [&str; 7] = [
    "ring",
    "direct",
    "halvingDoubling",
    "doubleBinaryTree",
    "oneRing",
    "oneDirect",
    "oneHalvingDoubling",
];

impl Impl {
    /// Parses ASTRA-sim's spelling (`CollectiveImplLookup.cc`).
    pub fn parse(s: &str) -> Result<Impl> {
        let window = |rest: &str| -> Result<Option<u32>> {
            if rest.is_empty() {
                return Ok(None);
            }
            match rest.parse::<u32>() {
                Ok(w) if w > 0 => Ok(Some(w)),
                _ => Err(Error::input(
                    s,
                    "the direct window must be a positive integer",
                )),
            }
        };
        Ok(match s {
            "ring" => Impl::Ring,
            "halvingDoubling" => Impl::HalvingDoubling,
            "doubleBinaryTree" => Impl::DoubleBinaryTree,
            "oneRing" => Impl::OneRing,
            "oneHalvingDoubling" => Impl::OneHalvingDoubling,
            _ if s.starts_with("oneDirect") => Impl::OneDirect(window(&s[9..])?),
            _ if s.starts_with("direct") => Impl::Direct(window(&s[6..])?),
            _ => return Err(Error::unknown("collective implementation", s, &NAMES)),
        })
    }
    /// ASTRA-sim's spelling.
    pub fn astra_name(self) -> String {
        match self {
            Impl::Ring => "ring".into(),
            Impl::Direct(None) => "direct".into(),
            Impl::Direct(Some(w)) => format!("direct{w}"),
            Impl::HalvingDoubling => "halvingDoubling".into(),
            Impl::DoubleBinaryTree => "doubleBinaryTree".into(),
            Impl::OneRing => "oneRing".into(),
            Impl::OneDirect(None) => "oneDirect".into(),
            Impl::OneDirect(Some(w)) => format!("oneDirect{w}"),
            Impl::OneHalvingDoubling => "oneHalvingDoubling".into(),
        }
    }
    /// Whether this is a `one*` variant (one logical dimension over all NPUs).
    pub fn is_one(self) -> bool {
        matches!(
            self,
            Impl::OneRing | Impl::OneDirect(_) | Impl::OneHalvingDoubling
        )
    }
}

/// What one phase does.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PhaseOp {
    /// All-reduce
    #[default]
    AllReduce,
    /// Reduce-scatter
    ReduceScatter,
    /// All-gather
    AllGather,
    /// All-to-all
    AllToAll,
}

/// A logical dimension a phase runs on: p NPUs, link latency and bandwidth, hop rule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LogicalDim {
    /// NPUs in the dimension.
    pub npus: u64,
    /// Latency per hop, ns.
    pub latency_ns: f64,
    /// Link bandwidth, B/ns.
    pub beta: f64,
    /// Ring of `npus` (hops min(d, p−d)) or a fixed hop count.
    pub ring: bool,
    /// Hop count when not a ring.
    pub fixed_hops: u64,
    /// Queue index (physical dimension).
    pub queue: usize,
    /// Congestion-aware backend: messages are stored and forwarded over every link.
    pub aware: bool,
    /// Serialisations of a message beyond the first (aware backend: 1 on a Switch, whose
    /// NPU → switch → NPU path is two links).
    pub extra_serial: f64,
}

impl LogicalDim {
    /// A physical network dimension.
    pub fn physical(d: &AstraDim, queue: usize) -> LogicalDim {
        LogicalDim {
            npus: d.npus as u64,
            latency_ns: d.latency_ns,
            beta: d.beta_bytes_per_ns(),
            ring: d.kind == DimKind::Ring,
            fixed_hops: if d.kind == DimKind::Switch { 2 } else { 1 },
            queue,
            aware: false,
            extra_serial: 0.0,
        }
    }
    /// One logical dimension over the first `k` dimensions (`one*` implementations and
    /// communicator groups): its links are taken as those of the slowest dimension
    /// spanned, one hop of it per step (an upper bound on the mixed path).
    pub fn flattened(net: &AstraNetwork, k: usize) -> LogicalDim {
        let npus = net.dims[..k].iter().map(|d| d.npus as u64).product();
        let slow = net.dims[..k]
            .iter()
            .filter(|d| d.npus > 1)
            .max_by(|a, b| link_ns(a).total_cmp(&link_ns(b)))
            .unwrap_or(&net.dims[0]);
        LogicalDim::spanning(slow, npus)
    }
    /// A logical dimension of `npus` members whose neighbours talk over `d`'s links.
    pub fn spanning(d: &AstraDim, npus: u64) -> LogicalDim {
        LogicalDim {
            npus,
            latency_ns: d.latency_ns,
            beta: d.beta_bytes_per_ns(),
            ring: false,
            fixed_hops: d.hops(1),
            queue: 0,
            aware: false,
            extra_serial: 0.0,
        }
    }
    /// Hops between members at index distance `dist`.
    pub fn hops(&self, dist: u64) -> u64 {
        if self.ring {
            let d = dist % self.npus.max(1);
            d.min(self.npus - d)
        } else {
            self.fixed_hops
        }
    }
    /// T_h(m) = ⌊h·L + m/β⌋ ns (`BasicTopology.cpp`, congestion-unaware). With the
    /// congestion-aware backend each link serialises the message in whole ns:
    /// h·L + k·⌊m/β⌋ with k = 2 on a Switch (NPU → switch → NPU, store and forward,
    /// `congestion_aware/network/Link.cpp`) and k = 1 elsewhere.
    pub fn msg_ns(&self, hops: u64, m: u64) -> u64 {
        if self.aware {
            // Every link serialises the message in whole ns: h·L + links·⌊m/β⌋.
            let per_link = (m as f64 / self.beta).floor();
            return (hops as f64 * self.latency_ns + (1.0 + self.extra_serial) * per_link) as u64;
        }
        (hops as f64 * self.latency_ns + m as f64 / self.beta).floor() as u64
    }
    /// Switches this dimension to the congestion-aware backend (see [`LogicalDim::msg_ns`]).
    pub fn congestion_aware(mut self) -> LogicalDim {
        self.aware = true;
        if !self.ring && self.fixed_hops == 2 {
            self.extra_serial = 1.0;
        }
        self
    }
}

fn link_ns(d: &AstraDim) -> f64 {
    d.hops(1) as f64 * d.latency_ns + 1e6 / d.beta_bytes_per_ns()
}

/// R(m) = 3·⌊m / LMBW⌋ ns, LMBW in GB/s decimal = B/ns (`MemBus.cc`: three memory passes).
fn reduce_ns(m: u64, lmbw: f64) -> u64 {
    ((m as f64 / lmbw).floor() as u64).saturating_mul(3)
}

fn nonzero(m: u64, what: &str) -> Result<u64> {
    if m == 0 {
        return Err(Error::input(
            what,
            "a message of the collective rounds down to 0 bytes, which aborts ASTRA-sim \
             (assert chunk_size > 0); use a larger size or fewer preferred-dataset-splits",
        ));
    }
    Ok(m)
}

/// Largest time, ns, any ASTRA-sim-compatible result may reach: 2^62 ns (about 146
/// years), well inside ASTRA-sim's 64-bit tick counter. A phase, collective or workload
/// beyond it is an input error, never a wrapped or saturated (and so wrongly short) time.
pub const MAX_NS: u64 = 1 << 62;

/// `x` as u64 ns if it is within [`MAX_NS`], else an error naming `what`.
pub fn fit_ns(x: u128, what: &str) -> Result<u64> {
    if x > u128::from(MAX_NS) {
        return Err(Error::input(
            what,
            format!(
                "takes more than 2^62 ns (about 146 years), beyond ASTRA-sim's clock; use \
                 smaller sizes, latencies or delays, or larger bandwidths ({x} ns)"
            ),
        ));
    }
    Ok(x as u64)
}

/// The duration of one phase for one chunk of `c` bytes, ns (table in the module doc).
/// Evaluated in 128-bit integers, so it cannot wrap; results beyond [`MAX_NS`] are errors.
pub fn phase_ns(imp: Impl, op: PhaseOp, c: u64, d: &LogicalDim, e: u64, lmbw: f64) -> Result<u64> {
    let p = d.npus;
    if d.aware && d.ring && !matches!(imp, Impl::Ring | Impl::OneRing) {
        return Err(Error::Unsupported(format!(
            "congestion-aware {} on a Ring: messages share multi-hop links; only ring is modelled",
            imp.astra_name()
        )));
    }
    let r = |m: u64| u128::from(reduce_ns(m, lmbw));
    let w = u128::from;
    let (pp, e) = (w(p), w(e));
    let ns = match imp {
        Impl::Ring | Impl::OneRing => {
            let t = w(d.msg_ns(d.hops(1), nonzero(c / p, "ring message")?));
            match op {
                PhaseOp::AllReduce => 2 * (pp - 1) * t + (2 * pp - 1) * e + (pp - 1) * r(c / p),
                PhaseOp::ReduceScatter => (pp - 1) * t + pp * e + (pp - 1) * r(c / p),
                PhaseOp::AllGather => (pp - 1) * w(d.msg_ns(d.hops(1), c)) + pp * e,
                PhaseOp::AllToAll => {
                    let n = pp * (pp - 1) / 2;
                    n * t + (n + 1) * e
                }
            }
        }
        Impl::Direct(win) | Impl::OneDirect(win) => {
            let win = win.map_or(p - 1, |x| (x as u64).min(p - 1)).max(1);
            let rounds = w((p - 1).div_ceil(win));
            let h = (1..p).map(|k| d.hops(k)).max().unwrap_or(1);
            let m = nonzero(c / p, "direct message")?;
            // Aware backend on a Switch: the w messages of a round queue on the NPU's
            // uplink, the last one then crosses the downlink: 2L + (w+1)·m/β.
            let mut dd = *d;
            if d.aware && d.extra_serial > 0.0 {
                dd.extra_serial = win as f64;
            }
            let t = |m: u64| w(dd.msg_ns(h, m));
            match op {
                PhaseOp::AllReduce if rounds == 1 => {
                    direct_all_reduce(p, |k| d.hops(k), d.ring, |hh| w(dd.msg_ns(hh, m)), e, r(m))
                }
                PhaseOp::AllReduce => 2 * rounds * t(m) + (2 * rounds + 1) * e + rounds * r(m),
                PhaseOp::ReduceScatter => rounds * (t(m) + r(m)) + (rounds + 1) * e,
                PhaseOp::AllGather => rounds * t(c) + (rounds + 1) * e,
                PhaseOp::AllToAll => rounds * t(m) + (rounds + 1) * e,
            }
        }
        Impl::HalvingDoubling | Impl::OneHalvingDoubling => halving_doubling(op, c, d, e, lmbw)?,
        Impl::DoubleBinaryTree => {
            let h = w(63 - u64::from(p.leading_zeros())); // ⌊log2 p⌋, p ≥ 2
            let t = w(d.msg_ns(d.hops(1), nonzero(c, "tree message")?));
            2 * h * t + (2 * h + 1) * e + (2 * h).saturating_sub(1) * r(c)
        }
    };
    fit_ns(ns, "collective phase")
}

/// Direct all-reduce with the full window (`AllToAll.cc`, one round), exact for any hop
/// rule. Every NPU is alike, so one NPU's timeline is the collective's. With `T_j` the
/// time of a message to (and from) the NPU `j` steps away (`T_h(m)`, h = min(j, p−j) on a
/// Ring, fixed elsewhere):
///
/// - the `p−1` first-half messages leave together after the stream's first packet
///   bundle (E); the one from distance j arrives at `E + T_j` and is reduced, its bundle
///   firing a `General` event at `g_j = 2E + R + T_j`; sorted, `g_(1) ≤ … ≤ g_(p−1)`;
/// - a `General` sends a second-half message only once all `p−1` have arrived (at
///   `E + max_j T_j`) and only as many as the events so far have freed: the first
///   `General` at or after the last arrival, `g_(k*)`, sends `k*` of them, each later one
///   one more, so message `j` leaves at `s_j = max(g_(j), g_(k*))`;
/// - the second-half packets were queued in arrival order with destinations cycling
///   `id+1, id+2, …`, so message `j` goes to distance j and arrives at `s_j + T_j`; its
///   bundle (no reduction) ends the stream E later:
///
/// `T = max_j (s_j + T_j) + E`.
///
/// On a FullyConnected or Switch dimension (equal T) this is `2T + 3E + R`, the form the
/// reference runs fix; on a Ring of 8 at 64 MB (chunks of 16 MB, 500 ns, 100 GB/s) it is
/// 46,022 ns where the slowest hop taken twice gives 47,022 ns (2.2% apart).
fn direct_all_reduce(
    p: u64,
    hops: impl Fn(u64) -> u64,
    ring: bool,
    t: impl Fn(u64) -> u128,
    e: u128,
    r: u128,
) -> u128 {
    // The k-th smallest hop count over distances 1..p−1: ⌈k/2⌉ on a Ring (two NPUs at
    // each distance, one at p/2), the fixed count elsewhere.
    let sorted = |k: u64| if ring { t(k.div_ceil(2)) } else { t(hops(k)) };
    let g = |k: u64| 2 * e + r + sorted(k);
    let last = e + (1..p).map(|j| t(hops(j))).max().unwrap_or(0);
    let first = (1..p)
        .map(g)
        .find(|&x| x >= last)
        .unwrap_or_else(|| g(p - 1));
    let end = (1..p)
        .map(|j| g(j).max(first) + t(hops(j)))
        .max()
        .unwrap_or(0);
    end + e
}

fn halving_doubling(op: PhaseOp, c: u64, d: &LogicalDim, e: u128, lmbw: f64) -> Result<u128> {
    let p = d.npus;
    if !p.is_power_of_two() {
        return Err(Error::Unsupported(format!(
            "halvingDoubling needs a power-of-two dimension, got {p} NPUs"
        )));
    }
    let k = p.trailing_zeros() as u64;
    let r = |m: u64| u128::from(reduce_ns(m, lmbw));
    let t = |h: u64, m: u64| u128::from(d.msg_ns(h, m));
    let steps = |mult: u128| -> Result<u128> {
        nonzero(c >> k, "halving-doubling message")?;
        Ok((1..=k)
            .map(|j| mult * t(d.hops(1 << (j - 1)), c >> j))
            .sum::<u128>()
            + (2..=k).map(|j| r(c >> j)).sum::<u128>())
    };
    let k = u128::from(k);
    Ok(match op {
        PhaseOp::AllReduce => steps(2)? + (2 * k + 1) * e,
        PhaseOp::ReduceScatter => steps(1)? + (k + 1) * e,
        PhaseOp::AllGather => {
            (0..k as u32)
                .map(|j| t(d.hops(p >> (j + 1)), c.saturating_mul(1 << j)))
                .sum::<u128>()
                + (k + 1) * e
        }
        PhaseOp::AllToAll => {
            return Err(Error::Unsupported(
                "halvingDoubling all-to-all does not exist in ASTRA-sim (it exits); use ring or direct"
                    .into(),
            ));
        }
    })
}

/// Bytes leaving a phase (its `final_data_size`): RS c/p, AG c·p, otherwise c.
pub fn output_bytes(imp: Impl, op: PhaseOp, c: u64, p: u64) -> u64 {
    match (imp, op) {
        (Impl::DoubleBinaryTree, _) => c,
        (_, PhaseOp::ReduceScatter) => c / p,
        (_, PhaseOp::AllGather) => c.saturating_mul(p),
        _ => c,
    }
}

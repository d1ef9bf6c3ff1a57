//! Calibrated regimes: what `astrolabe calibrate nccl` measured, honoured by `auto`.
//!
//! An nccl-tests log does not say which algorithm and protocol NCCL ran at each size; its
//! tuner (NVIDIA/nccl `src/graph/tuning.cc`, `ncclTopoTuneModel`) picks, per size, the
//! (algorithm, protocol) pair of least modelled time `baseLat + nsteps·hwLat + n/busBw`,
//! so a log is a lower envelope of lines: LL (low latency, a fraction of the bandwidth)
//! for small messages, LL128 in between, Simple for large ones, and across nodes a tree
//! below a ring. `calibrate nccl` splits each log into such size ranges and fits, for each,
//! a regime: the forward model's algorithm with its own per-step latency α and bandwidth B.
//! The regimes are written to the system file (`[[network.dims.calibrated]]`, on the
//! outermost dimension the log spans) so that `auto` runs what was measured instead of
//! re-deciding with parameters fitted under another algorithm.
//!
//! A regime for collective `op` on dimension d applies when d is the outermost dimension
//! of size > 1 of the collective, the algorithm is `auto` and the schedule `nccl`. Of the
//! regimes fitted on groups of several sizes of d, those of the size nearest (in ratio)
//! to d's are used; of those, the one with the largest `from` ≤ n (the first below its
//! `from`). The collective then runs the forward model (`nccl.rs`) with:
//! - the regime's algorithm (`ring` across several dimensions is the ring across all
//!   ranks; an algorithm that does not implement an inner phase, such as a tree's
//!   reduce-scatter inside the node, leaves that phase to `auto`);
//! - α = the regime's latency on every dimension the collective spans (the fit sees one
//!   latency per step of the whole path: NCCL's launch and base latency included);
//! - B = the regime's bandwidth on dimension d; the inner dimensions keep their own.
//!
//! On the group it was fitted on, a regime reproduces its size range of the log; on
//! other group sizes it scales as its algorithm does (ring latency with the number of
//! ranks, tree latency with its depth), which overstates the latency of a larger group
//! when a fixed launch cost dominates.

use super::compose;
use super::{Algorithm, Collective, CollectiveTime, MAX_DIMS, Options, Schedule};
use crate::error::{Error, Result};
use crate::network::{Dim, Topology};
use crate::units::{Bandwidth, Bytes, Seconds};

/// NCCL's protocols (`NCCL_PROTO`): the label of a calibrated regime. The forward model
/// does not distinguish them: a regime's fitted α and B are the protocol's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// LL: 8-byte stores with a flag, lowest latency, a fraction of the bandwidth.
    Ll,
    /// LL128: 128-byte lines with a flag, most of the bandwidth at low latency.
    Ll128,
    /// Simple: bulk copies behind fences, full bandwidth, highest latency.
    Simple,
}

impl Protocol {
    /// Every protocol, by increasing latency and bandwidth.
    pub const ALL: [Protocol; 3] = [Protocol::Ll, Protocol::Ll128, Protocol::Simple];

    /// The TOML and table name.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Ll => "ll",
            Protocol::Ll128 => "ll128",
            Protocol::Simple => "simple",
        }
    }

    /// Parses a name (case ignored) with did-you-mean.
    pub fn parse(s: &str) -> Result<Protocol> {
        let n = s.trim().to_ascii_lowercase();
        Protocol::ALL
            .into_iter()
            .find(|p| p.name() == n)
            .ok_or_else(|| Error::unknown("protocol", s, &["ll", "ll128", "simple"]))
    }
}

/// One calibrated regime (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Regime {
    /// The dimension it is recorded on: the outermost one its log spans.
    pub dim: usize,
    /// That dimension's size in the log (GPUs per node, or nodes).
    pub group: u32,
    /// The collective.
    pub op: Collective,
    /// Smallest size (buffer per rank) it applies to.
    pub from: Bytes,
    /// The forward model's algorithm.
    pub algorithm: Algorithm,
    /// NCCL's protocol (a label).
    pub protocol: Protocol,
    /// α on every dimension the collective spans.
    pub latency: Seconds,
    /// B on dimension `dim`.
    pub bandwidth: Bandwidth,
}

/// The outermost dimension of size > 1, if any.
fn outermost(dims: &[Dim]) -> Option<usize> {
    dims.iter().rposition(|d| d.size > 1)
}

/// The regime `op` of `size` bytes on `dims` runs under `opts`, if any applies.
pub fn regime<'a>(
    regimes: &'a [Regime],
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    opts: &Options,
) -> Option<&'a Regime> {
    if opts.algorithm != Algorithm::Auto || opts.schedule != Schedule::Nccl {
        return None;
    }
    let d = outermost(dims)?;
    let p = dims[d].size as f64;
    let distance = |r: &Regime| (r.group as f64 / p).ln().abs();
    let group = regimes
        .iter()
        .filter(|r| r.dim == d && r.op == op)
        .min_by(|a, b| distance(a).total_cmp(&distance(b)))?
        .group;
    let set = regimes
        .iter()
        .filter(|r| r.dim == d && r.op == op && r.group == group);
    let first = set
        .clone()
        .min_by(|a, b| a.from.get().total_cmp(&b.from.get()));
    set.filter(|r| r.from <= size)
        .max_by(|a, b| a.from.get().total_cmp(&b.from.get()))
        .or(first)
}

/// `dims` as regime `r` runs them: α = r's latency on every dimension of size > 1, B =
/// r's bandwidth on r's dimension.
pub fn effective(r: &Regime, dims: &[Dim]) -> Result<([Dim; MAX_DIMS], usize)> {
    if dims.len() > MAX_DIMS || r.dim >= dims.len() {
        return Err(Error::Internal(format!(
            "calibrated regime on dimension {} of a {}-dimension network",
            r.dim,
            dims.len()
        )));
    }
    let mut out = [dims[0]; MAX_DIMS];
    for (o, d) in out.iter_mut().zip(dims) {
        *o = *d;
        if d.size > 1 {
            o.latency = r.latency;
        }
    }
    out[r.dim].bandwidth = r.bandwidth;
    Ok((out, dims.len()))
}

/// A collective's time on a topology, honouring its calibrated regimes.
#[derive(Clone, Copy, Debug)]
pub struct Calibrated {
    /// The time and phases.
    pub time: CollectiveTime,
    /// The regime that ran, if any.
    pub regime: Option<Regime>,
    /// The dimensions the phases ran on (the regime's α and B put in).
    pub dims: [Dim; MAX_DIMS],
    /// Options to explain the phases with (the regime's algorithm).
    pub options: Options,
}

/// [`super::time`] on `topo`, with `topo`'s calibrated regime for `op` at `size` when one
/// applies (see the module documentation).
pub fn time(op: Collective, size: Bytes, topo: &Topology, opts: &Options) -> Result<Calibrated> {
    let dims = topo.dims();
    let Some(r) = regime(topo.calibrated(), op, size, dims, opts) else {
        let mut all = [dims[0]; MAX_DIMS];
        all[..dims.len().min(MAX_DIMS)].copy_from_slice(&dims[..dims.len().min(MAX_DIMS)]);
        return Ok(Calibrated {
            time: super::time(op, size, dims, opts)?,
            regime: None,
            dims: all,
            options: *opts,
        });
    };
    run(r, op, size, dims, opts)
}

/// `op` of `size` bytes on `dims` as regime `r` runs it.
pub fn run(
    r: &Regime,
    op: Collective,
    size: Bytes,
    dims: &[Dim],
    opts: &Options,
) -> Result<Calibrated> {
    let (eff, n) = effective(r, dims)?;
    let options = Options {
        algorithm: r.algorithm,
        ..*opts
    };
    Ok(Calibrated {
        time: compose::time_lenient(op, size, &eff[..n], &options)?,
        regime: Some(*r),
        dims: eff,
        options,
    })
}

/// Notes for a table of `runs` on a network of `ndims` dimensions: which calibrated
/// regime ran at which sizes (none when no regime applied).
pub fn notes(runs: &[(Bytes, Calibrated)], ndims: usize) -> Vec<String> {
    let mut used: Vec<(Regime, Vec<Bytes>)> = vec![];
    for (s, c) in runs {
        if let Some(r) = c.regime {
            match used.iter_mut().find(|(u, _)| *u == r) {
                Some((_, v)) => v.push(*s),
                None => used.push((r, vec![*s])),
            }
        }
    }
    used.iter()
        .map(|(r, sizes)| {
            let range = match (sizes.first(), sizes.last()) {
                (Some(a), Some(b)) if sizes.len() > 1 => format!("{a} to {b}"),
                (Some(a), _) => a.to_string(),
                _ => String::new(),
            };
            let outer = format!("dimension {} of {ndims} (group {})", r.dim, r.group);
            format!(
                "calibrated regime ({}, from {}): {} {} with α = {} per step, B = {} on {} at {}",
                r.op.name(),
                r.from,
                r.algorithm.name(),
                r.protocol.name(),
                r.latency,
                r.bandwidth,
                outer,
                range
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::DimKind;

    fn reg(group: u32, op: Collective, from: f64) -> Regime {
        Regime {
            dim: 0,
            group,
            op,
            from: Bytes::new(from),
            algorithm: Algorithm::Ring,
            protocol: Protocol::Simple,
            latency: Seconds::new(1e-6),
            bandwidth: Bandwidth::new(1e11),
        }
    }

    fn eight() -> [Dim; 1] {
        [Dim::new(DimKind::Switch, 8, Bandwidth::new(1e11), Seconds::new(1e-6)).unwrap()]
    }

    #[test]
    fn a_regime_sets_the_latency_of_the_spanned_dimensions_and_its_own_bandwidth() {
        // Dimension 0 of size 1 (not spanned) keeps its 5 µs; dimension 1 (8 ranks) takes
        // the regime's 2 µs and dimension 2 (4 ranks) too; only dimension 1, the regime's,
        // takes its 30 GB/s.
        let d = |size, bw, lat| {
            Dim::new(DimKind::Switch, size, Bandwidth::new(bw), Seconds::new(lat)).unwrap()
        };
        let dims = [d(1, 4e11, 5e-6), d(8, 1e11, 1e-6), d(4, 5e10, 9e-6)];
        let r = Regime {
            dim: 1,
            latency: Seconds::new(2e-6),
            bandwidth: Bandwidth::new(3e10),
            ..reg(8, Collective::AllReduce, 0.0)
        };
        let (out, n) = effective(&r, &dims).unwrap();
        assert_eq!(n, 3);
        let lat: Vec<f64> = out[..n].iter().map(|d| d.latency.get()).collect();
        let bw: Vec<f64> = out[..n].iter().map(|d| d.bandwidth.get()).collect();
        assert_eq!(lat, [5e-6, 2e-6, 2e-6]);
        assert_eq!(bw, [4e11, 3e10, 5e10]);
        // A regime on a dimension the network lacks, or a network over the limit, is an
        // internal error; eight dimensions are within it.
        let r3 = Regime { dim: 3, ..r };
        assert!(effective(&r3, &dims).is_err());
        let many = [d(2, 1e11, 1e-6); MAX_DIMS + 1];
        assert!(effective(&r, &many[..MAX_DIMS]).is_ok());
        assert!(effective(&r, &many).is_err());
    }

    #[test]
    fn the_fit_notes_name_each_regime_and_the_sizes_it_ran() {
        let a = reg(8, Collective::AllReduce, 0.0);
        let b = Regime {
            from: Bytes::new(1048576.0),
            algorithm: Algorithm::DoubleBinaryTree,
            protocol: Protocol::Ll128,
            latency: Seconds::new(3e-6),
            bandwidth: Bandwidth::new(2e11),
            ..a
        };
        let ran = |r: &Regime, s: f64| {
            let c = run(
                r,
                Collective::AllReduce,
                Bytes::new(s),
                &eight(),
                &Options::default(),
            );
            (Bytes::new(s), c.unwrap())
        };
        let mut none = ran(&a, 5e9);
        none.1.regime = None;
        let runs = [ran(&a, 1024.0), ran(&a, 65536.0), ran(&b, 1048576.0), none];
        assert_eq!(
            notes(&runs, 2),
            [
                "calibrated regime (all-reduce, from 0 B): ring simple with α = 1 us per step, \
                 B = 100 GB/s on dimension 0 of 2 (group 8) at 1 KiB to 64 KiB",
                "calibrated regime (all-reduce, from 1 MiB): double-binary-tree ll128 with α = 3 us per step, \
                 B = 200 GB/s on dimension 0 of 2 (group 8) at 1 MiB",
            ]
        );
        assert!(notes(&runs[3..], 2).is_empty());
    }

    #[test]
    fn protocols_parse_to_themselves() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::parse(&p.name().to_uppercase()).unwrap(), p);
        }
        assert!(Protocol::parse("ll64").is_err());
    }

    #[test]
    fn the_nearest_logged_group_by_ratio_and_the_largest_threshold_below() {
        // Logs at 2 and 16 ranks; a group of 8 is 2× from 16 and 4× from 2: 16's regimes.
        let rs = [
            reg(2, Collective::AllReduce, 0.0),
            reg(16, Collective::AllReduce, 0.0),
            reg(16, Collective::AllReduce, 1e6),
        ];
        let o = Options::default();
        let r = regime(&rs, Collective::AllReduce, Bytes::new(2e6), &eight(), &o).unwrap();
        assert_eq!((r.group, r.from.get()), (16, 1e6));
        let r = regime(&rs, Collective::AllReduce, Bytes::new(1e3), &eight(), &o).unwrap();
        assert_eq!((r.group, r.from.get()), (16, 0.0));
        // Another collective's logs do not choose the group.
        let rs = [
            reg(8, Collective::AllGather, 0.0),
            reg(2, Collective::AllReduce, 0.0),
        ];
        let r = regime(&rs, Collective::AllReduce, Bytes::new(1e3), &eight(), &o).unwrap();
        assert_eq!((r.group, r.op), (2, Collective::AllReduce));
        // Only NCCL's schedule with `auto` runs the calibrated regimes.
        for o in [
            Options {
                algorithm: Algorithm::Ring,
                ..Options::default()
            },
            Options {
                schedule: Schedule::Baseline,
                ..Options::default()
            },
        ] {
            assert!(regime(&rs, Collective::AllReduce, Bytes::new(1e3), &eight(), &o).is_none());
        }
    }
}

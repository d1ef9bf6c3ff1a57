//! The network: a [`Topology`] is a list of [`Dim`]s, innermost (fastest) first, as in
//! ASTRA-sim's `Ring_FullyConnected_Switch` with `npus_count [2, 4, 8]`. NPU ids are
//! mixed-radix with dimension 0 varying fastest.
//!
//! Each dimension has a building block ([`DimKind`]), a size `p`, the NPU's injection
//! bandwidth into that dimension `B` (bytes/s, one direction, summed over the NPU's links
//! in that dimension) and a per-step latency `α`. A Switch may reduce in the network
//! (SHARP / NVLS) and may be oversubscribed (its uplinks carry 1/k of the injection rate
//! when every NPU sends across it at once).
//!
//! Two ways to write a topology:
//! - on the command line: `ring(8, 100GB/s, 500ns) x switch(16, 50GB/s, 1us, in-network, oversub=2)`;
//! - in TOML, as `[[network.dims]]` tables (see [`DimSpec`]).

use crate::collective::calibrated::{Protocol, Regime};
use crate::collective::{Algorithm, Collective};
use crate::error::{Error, Result};
use crate::units::{
    BANDWIDTH_RANGE, Bandwidth, Bytes, SECONDS_RANGE, Seconds, parse_bandwidth, parse_seconds,
    plain, serde_units,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The building block of one network dimension.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DimKind {
    /// A bidirectional ring: each NPU has one neighbour each way; B is split over the two
    /// directions' links (B/2 each way on a ring of more than 2).
    Ring,
    /// Every NPU has a direct link to every other: B is spread over p−1 links.
    FullyConnected,
    /// Every NPU has one link of bandwidth B into a (non-blocking unless oversubscribed) switch.
    Switch,
}

impl DimKind {
    /// All kinds, for error messages.
    pub const NAMES: [&'static str; 3] = ["ring", "fully_connected", "switch"];

    /// Parses a kind name; accepts ASTRA-sim's spelling too (`FullyConnected`).
    pub fn parse(s: &str) -> Result<DimKind> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "ring" => Ok(DimKind::Ring),
            "fullyconnected" | "fc" | "direct" => Ok(DimKind::FullyConnected),
            "switch" | "sw" => Ok(DimKind::Switch),
            _ => Err(Error::unknown("building block", s, &Self::NAMES)),
        }
    }

    /// The name used in topology strings.
    pub fn name(self) -> &'static str {
        match self {
            DimKind::Ring => "ring",
            DimKind::FullyConnected => "fully_connected",
            DimKind::Switch => "switch",
        }
    }

    /// ASTRA-sim's spelling (`Ring`, `FullyConnected`, `Switch`).
    pub fn astra_name(self) -> &'static str {
        match self {
            DimKind::Ring => "Ring",
            DimKind::FullyConnected => "FullyConnected",
            DimKind::Switch => "Switch",
        }
    }
}

/// Largest oversubscription ratio accepted (fat trees are built 1:1 to about 1:8; beyond
/// 1:1024 a "switch" no longer carries traffic in any meaningful sense).
pub const MAX_OVERSUBSCRIPTION: f64 = 1024.0;

/// One validated network dimension.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dim {
    /// Building block.
    pub kind: DimKind,
    /// Number of NPUs along this dimension (≥ 1).
    pub size: u32,
    /// Per-NPU injection bandwidth into this dimension, one direction.
    pub bandwidth: Bandwidth,
    /// Latency of one algorithm step (link + switch + software), α.
    pub latency: Seconds,
    /// The switch reduces in the network (SHARP, NVLS). Only valid on a Switch.
    pub in_network: bool,
    /// Fraction of the port bandwidth in-network reduction sustains (0 < η ≤ 1; 1 unless
    /// declared). NCCL's tuning model uses 0.85 for NVLS on Hopper and 0.74 on Blackwell
    /// (`nvlsEfficiency`, NVIDIA/nccl `src/graph/tuning.cc`).
    pub in_network_efficiency: f64,
    /// Oversubscription ratio k ≥ 1 of a Switch: under all-to-all load each NPU gets B/k.
    pub oversubscription: f64,
}

impl Dim {
    /// A dimension with no in-network reduction and no oversubscription.
    pub fn new(kind: DimKind, size: u32, bandwidth: Bandwidth, latency: Seconds) -> Result<Dim> {
        Dim {
            kind,
            size,
            bandwidth,
            latency,
            in_network: false,
            in_network_efficiency: 1.0,
            oversubscription: 1.0,
        }
        .validated("dimension")
    }

    /// Checks the invariants: size ≥ 1, bandwidth > 0 and finite, latency ≥ 0 and finite,
    /// in-network only on a Switch, oversubscription ≥ 1. `what` names the source in errors.
    pub fn validated(self, what: &str) -> Result<Dim> {
        if self.size == 0 {
            return Err(Error::input(what, "size must be at least 1"));
        }
        let b = self.bandwidth.get();
        if b.is_nan() || b <= 0.0 {
            return Err(Error::input(
                what,
                format!("bandwidth must be > 0, got {}", self.bandwidth),
            ));
        }
        let bw = plain(b, "B/s");
        BANDWIDTH_RANGE.check(&format!("{what}: bandwidth"), &bw, b)?;
        let l = self.latency.get();
        if !(l >= 0.0 && l.is_finite()) || l.is_sign_negative() {
            return Err(Error::input(what, "latency must be ≥ 0 and finite"));
        }
        let lat = plain(l, "s");
        SECONDS_RANGE.check(&format!("{what}: latency"), &lat, l)?;
        if self.in_network && self.kind != DimKind::Switch {
            return Err(Error::input(
                what,
                format!(
                    "in-network reduction needs a switch, not a {}",
                    self.kind.name()
                ),
            ));
        }
        let eta = self.in_network_efficiency;
        if !(eta > 0.0 && eta <= 1.0) {
            return Err(Error::input(
                what,
                format!("in-network efficiency must be in (0, 1], got {eta}"),
            ));
        }
        if !(self.oversubscription >= 1.0 && self.oversubscription <= MAX_OVERSUBSCRIPTION) {
            return Err(Error::input(
                what,
                format!(
                    "oversubscription must be between 1 and {MAX_OVERSUBSCRIPTION}, got {:?}",
                    self.oversubscription
                ),
            ));
        }
        if self.oversubscription > 1.0 && self.kind != DimKind::Switch {
            return Err(Error::input(
                what,
                "oversubscription applies to a switch only",
            ));
        }
        Ok(self)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}({}, {}, {}",
            self.kind.name(),
            self.size,
            exact(self.bandwidth.get(), "B/s"),
            exact(self.latency.get(), "s")
        )?;
        if self.in_network && self.in_network_efficiency < 1.0 {
            write!(f, ", in-network={}", self.in_network_efficiency)?;
        } else if self.in_network {
            f.write_str(", in-network")?;
        }
        if self.oversubscription > 1.0 {
            write!(f, ", oversub={}", self.oversubscription)?;
        }
        f.write_str(")")
    }
}

/// `v` in the unit prefix of its magnitude (as the tables print it: "199.9 GB/s",
/// "2.143 us") but with every digit needed to read back the same number (12 significant
/// digits), so a topology line is both for people and a valid `--topology`.
fn exact(v: f64, unit: &str) -> String {
    let a = v.abs();
    let (f, u) = if unit == "s" {
        match a {
            0.0 => (1.0, "s"),
            a if a < 1e-6 => (1e-9, "ns"),
            a if a < 1e-3 => (1e-6, "us"),
            a if a < 1.0 => (1e-3, "ms"),
            _ => (1.0, "s"),
        }
    } else {
        [
            (1e15, "P"),
            (1e12, "T"),
            (1e9, "G"),
            (1e6, "M"),
            (1e3, "k"),
            (1.0, ""),
        ]
        .into_iter()
        .find(|&(f, _)| a >= f)
        .unwrap_or((1.0, ""))
    };
    let x = v / f;
    let r: f64 = format!("{x:.12e}").parse().unwrap_or(x);
    let unit = if unit == "s" { "" } else { unit };
    format!("{r} {u}{unit}")
}

/// A validated multi-dimensional topology, innermost dimension first, with the
/// calibrated regimes of its dimensions (`collective::calibrated`).
#[derive(Clone, Debug, PartialEq)]
pub struct Topology {
    dims: Vec<Dim>,
    calibrated: Vec<Regime>,
}

impl Topology {
    /// Builds a topology from validated dimensions; at least one is required.
    pub fn new(dims: Vec<Dim>) -> Result<Topology> {
        if dims.is_empty() {
            return Err(Error::input("topology", "needs at least one dimension"));
        }
        // Π p_d in u128 (saturating) cannot wrap, so the limit sees the true count.
        let npus = dims
            .iter()
            .fold(1u128, |n, d| n.saturating_mul(u128::from(d.size)));
        crate::limits::NPUS.check(npus, "topology: NPU count")?;
        Ok(Topology {
            dims,
            calibrated: Vec::new(),
        })
    }

    /// The same calibrated regimes on other dimensions of the same count (`--nodes`).
    pub fn with_dims(&self, dims: Vec<Dim>) -> Result<Topology> {
        if dims.len() != self.dims.len() {
            return Err(Error::Internal("with_dims: dimension count changed".into()));
        }
        Ok(Topology {
            calibrated: self.calibrated.clone(),
            ..Topology::new(dims)?
        })
    }

    /// The calibrated regimes (`[[network.dims.calibrated]]`), in file order.
    pub fn calibrated(&self) -> &[Regime] {
        &self.calibrated
    }

    /// The dimensions, innermost first.
    pub fn dims(&self) -> &[Dim] {
        &self.dims
    }

    /// Mutable access (for sweeps that vary bandwidths).
    pub fn dims_mut(&mut self) -> &mut [Dim] {
        &mut self.dims
    }

    /// Total number of NPUs: Π p_d.
    pub fn npus(&self) -> u64 {
        self.dims.iter().map(|d| d.size as u64).product()
    }

    /// Parses the command-line syntax:
    /// `kind(size, bandwidth, latency[, in-network][, oversub=K]) x kind(...) x ...`.
    /// Errors point at the 1-based column of the offending text.
    pub fn parse(s: &str) -> Result<Topology> {
        let mut dims = Vec::new();
        let mut pos = 0usize;
        for part in s.split(['x', '×']) {
            let start = pos;
            pos += part.len()
                + if s[pos + part.len()..].starts_with('×') {
                    '×'.len_utf8()
                } else {
                    1
                };
            if part.trim().is_empty() && s.trim().is_empty() {
                return Err(Error::input(
                    "topology",
                    "empty; expected e.g. 'ring(8, 100GB/s, 500ns)'",
                ));
            }
            dims.push(parse_dim(s, part, start)?);
        }
        Topology::new(dims)
    }

    /// Builds a topology from TOML-mirror specs, naming `network.dims[i]` in errors.
    pub fn from_specs(specs: &[DimSpec]) -> Result<Topology> {
        let dims = specs
            .iter()
            .enumerate()
            .map(|(i, d)| d.to_dim(&format!("network.dims[{i}]")))
            .collect::<Result<Vec<_>>>()?;
        let mut calibrated = Vec::new();
        for (i, (spec, dim)) in specs.iter().zip(&dims).enumerate() {
            for (j, c) in spec.calibrated.iter().enumerate() {
                let what = format!("network.dims[{i}].calibrated[{j}]");
                let r = c.to_regime(i, dim, &what)?;
                let earlier = calibrated
                    .iter()
                    .rev()
                    .find(|e: &&Regime| e.dim == i && e.op == r.op && e.group == r.group);
                if let Some(e) = earlier
                    && e.from >= r.from
                {
                    return Err(Error::input(
                        &what,
                        format!(
                            "from = {} is not above the previous {} regime's {}; list a collective's regimes by increasing size",
                            r.from,
                            r.op.name(),
                            e.from
                        ),
                    ));
                }
                calibrated.push(r);
            }
        }
        Ok(Topology {
            calibrated,
            ..Topology::new(dims)?
        })
    }

    /// The TOML-mirror specs of this topology (for `show` and round trips).
    pub fn to_specs(&self) -> Vec<DimSpec> {
        let mut specs: Vec<DimSpec> = self.dims.iter().map(DimSpec::from).collect();
        for r in &self.calibrated {
            specs[r.dim].calibrated.push(CalibratedSpec::from(r));
        }
        specs
    }
}

impl fmt::Display for Topology {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(" x ")?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

fn col_err(full: &str, col: usize, msg: impl fmt::Display) -> Error {
    Error::input(
        "topology",
        format!(
            "{msg} at column {}: '{full}'; expected e.g. 'ring(8, 100GB/s, 500ns) x switch(4, 50GB/s, 1us)'",
            full[..col.min(full.len())].chars().count() + 1
        ),
    )
}

/// Parses one `kind(size, bw, lat, opts…)` starting at byte `off` of `full`.
fn parse_dim(full: &str, part: &str, off: usize) -> Result<Dim> {
    let lead = part.len() - part.trim_start().len();
    let p = part.trim();
    let open = p.find('(').ok_or_else(|| {
        col_err(
            full,
            off + lead,
            "expected 'kind(size, bandwidth, latency)'",
        )
    })?;
    let kind = DimKind::parse(p[..open].trim()).map_err(|e| col_err(full, off + lead, e))?;
    let close = p
        .find(')')
        .ok_or_else(|| col_err(full, off + lead + p.len(), "missing ')'"))?;
    if close + 1 != p.len() {
        return Err(col_err(
            full,
            off + lead + close + 1,
            format!(
                "unexpected '{}' after ')'; dimensions are joined with ' x '",
                p[close + 1..].trim()
            ),
        ));
    }
    let inner = &p[open + 1..close];
    let mut args = Vec::new();
    let mut at = off + lead + open + 1;
    for a in inner.split(',') {
        args.push((a.trim(), at + (a.len() - a.trim_start().len())));
        at += a.len() + 1;
    }
    if args.len() < 3 {
        return Err(col_err(
            full,
            off + lead + p.len() - 1,
            format!("{}() needs size, bandwidth and latency", kind.name()),
        ));
    }
    let size: u64 = args[0].0.parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
        col_err(
            full,
            args[0].1,
            format!("size '{}' is not a whole number ≥ 1", args[0].0),
        )
    })?;
    crate::limits::NPUS
        .check(size, "size")
        .map_err(|e| col_err(full, args[0].1, e))?;
    let size = u32::try_from(size).map_err(|_| {
        col_err(
            full,
            args[0].1,
            format!("size {size} does not fit in 32 bits"),
        )
    })?;
    let bandwidth =
        parse_bandwidth("bandwidth", args[1].0).map_err(|e| col_err(full, args[1].1, e))?;
    let latency = parse_seconds("latency", args[2].0).map_err(|e| col_err(full, args[2].1, e))?;
    let mut dim = Dim {
        kind,
        size,
        bandwidth,
        latency,
        in_network: false,
        in_network_efficiency: 1.0,
        oversubscription: 1.0,
    };
    for &(opt, c) in &args[3..] {
        match opt.split_once('=').map(|(k, v)| (k.trim(), v.trim())) {
            None if matches!(opt, "in-network" | "in_network" | "innetwork" | "sharp") => {
                dim.in_network = true
            }
            Some(("in-network" | "in_network" | "nvls", v)) => {
                dim.in_network = true;
                dim.in_network_efficiency = v.parse().map_err(|_| {
                    col_err(
                        full,
                        c,
                        format!("in-network efficiency '{v}' is not a number"),
                    )
                })?
            }
            Some(("oversub" | "oversubscription", v)) => {
                dim.oversubscription =
                    v.parse()
                        .ok()
                        .filter(|k: &f64| k.is_finite())
                        .ok_or_else(|| {
                            col_err(full, c, format!("oversubscription '{v}' is not a number"))
                        })?
            }
            _ => {
                return Err(col_err(
                    full,
                    c,
                    format!(
                        "unknown option '{opt}' (expected 'in-network', 'in-network=η' or 'oversub=K')"
                    ),
                ));
            }
        }
    }
    dim.validated(kind.name())
        .map_err(|e| col_err(full, off + lead, e))
}

/// The TOML form of one dimension (`[[network.dims]]`), before validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DimSpec {
    /// `ring`, `fully_connected` or `switch`.
    pub kind: DimKind,
    /// NPUs along this dimension.
    pub size: u32,
    /// Per-NPU injection bandwidth, one direction, e.g. "450 GB/s".
    #[serde(with = "serde_units::bandwidth")]
    pub bandwidth: Bandwidth,
    /// Per-step latency, e.g. "500 ns".
    #[serde(with = "serde_units::seconds")]
    pub latency: Seconds,
    /// In-network reduction on a switch (SHARP / NVLS).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub in_network: bool,
    /// Fraction of the port bandwidth the in-network reduction sustains (0 < η ≤ 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub in_network_efficiency: f64,
    /// Oversubscription ratio of a switch (≥ 1).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub oversubscription: f64,
    /// `[[network.dims.calibrated]]`: regimes fitted by `calibrate nccl` on logs whose
    /// outermost dimension is this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calibrated: Vec<CalibratedSpec>,
}

/// The TOML form of one calibrated regime (`collective::calibrated::Regime`): collective
/// `collective` on a group whose outermost dimension (this one) has `group` NPUs, from
/// `from` bytes per rank up to the next regime's `from`, runs `algorithm` with α =
/// `latency` on every dimension it spans and B = `bandwidth` on this one.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalibratedSpec {
    /// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all`, `send-recv`, `broadcast`.
    pub collective: String,
    /// This dimension's size in the fitted log.
    pub group: u32,
    /// Smallest buffer per rank the regime applies to, e.g. "0 B" or "256 KiB".
    #[serde(with = "serde_units::bytes")]
    pub from: Bytes,
    /// The forward model's algorithm (`ring`, `double-binary-tree`, `direct`, `in-network`).
    pub algorithm: String,
    /// NCCL's protocol, a label: `ll`, `ll128` or `simple`.
    pub protocol: String,
    /// Per-step latency α on every dimension the collective spans.
    #[serde(with = "serde_units::seconds")]
    pub latency: Seconds,
    /// Bandwidth B of this dimension.
    #[serde(with = "serde_units::bandwidth")]
    pub bandwidth: Bandwidth,
}

impl CalibratedSpec {
    /// Validates into a regime on dimension `index` (`dim`), naming `what` in errors.
    fn to_regime(&self, index: usize, dim: &Dim, what: &str) -> Result<Regime> {
        let op = Collective::parse(&self.collective).map_err(|e| e.context(what))?;
        let algorithm = Algorithm::parse(&self.algorithm).map_err(|e| e.context(what))?;
        let protocol = Protocol::parse(&self.protocol).map_err(|e| e.context(what))?;
        let probe = Dim {
            bandwidth: self.bandwidth,
            latency: self.latency,
            ..*dim
        }
        .validated(what)?;
        if algorithm == Algorithm::Auto || !crate::collective::applies(op, algorithm, &probe) {
            return Err(Error::input(
                what,
                format!(
                    "algorithm '{}' does not run {} on a {}; a calibrated regime names the algorithm that ran",
                    self.algorithm,
                    op.name(),
                    dim.kind.name()
                ),
            ));
        }
        if self.group < 2 {
            return Err(Error::input(what, "group must be at least 2"));
        }
        Ok(Regime {
            dim: index,
            group: self.group,
            op,
            from: self.from,
            algorithm,
            protocol,
            latency: self.latency,
            bandwidth: self.bandwidth,
        })
    }
}

impl From<&Regime> for CalibratedSpec {
    fn from(r: &Regime) -> CalibratedSpec {
        CalibratedSpec {
            collective: r.op.name().into(),
            group: r.group,
            from: r.from,
            algorithm: r.algorithm.name().into(),
            protocol: r.protocol.name().into(),
            latency: r.latency,
            bandwidth: r.bandwidth,
        }
    }
}

fn one() -> f64 {
    1.0
}
fn is_one(v: &f64) -> bool {
    *v == 1.0
}

impl DimSpec {
    /// Validates into a [`Dim`], naming `what` in errors.
    pub fn to_dim(&self, what: &str) -> Result<Dim> {
        Dim {
            kind: self.kind,
            size: self.size,
            bandwidth: self.bandwidth,
            latency: self.latency,
            in_network: self.in_network,
            in_network_efficiency: self.in_network_efficiency,
            oversubscription: self.oversubscription,
        }
        .validated(what)
    }
}

impl From<&Dim> for DimSpec {
    fn from(d: &Dim) -> DimSpec {
        DimSpec {
            kind: d.kind,
            size: d.size,
            bandwidth: d.bandwidth,
            latency: d.latency,
            in_network: d.in_network,
            in_network_efficiency: d.in_network_efficiency,
            oversubscription: d.oversubscription,
            calibrated: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_two_dims() {
        let t = Topology::parse("ring(4, 200GB/s, 0.5us) x switch(8, 50GB/s, 1us)").unwrap();
        assert_eq!(t.dims().len(), 2);
        assert_eq!(t.npus(), 32);
        assert_eq!(t.dims()[0].kind, DimKind::Ring);
        assert_eq!(t.dims()[1].bandwidth.get(), 50e9);
        assert!((t.dims()[0].latency.get() - 5e-7).abs() < 1e-18);
    }

    #[test]
    fn parses_options_and_round_trips() {
        let s = "switch(8, 450GB/s, 1us, in-network, oversub=2)";
        let t = Topology::parse(s).unwrap();
        assert!(t.dims()[0].in_network);
        assert_eq!(t.dims()[0].oversubscription, 2.0);
        let again = Topology::parse(&t.to_string()).unwrap();
        assert_eq!(t, again);
    }

    #[test]
    fn errors_point_at_column() {
        let e = Topology::parse("ring(8, 100GB/s, 500ns) x swich(8, 1GB/s, 1us)").unwrap_err();
        let m = e.to_string();
        assert!(m.contains("column 27"), "{m}");
        assert!(m.contains("did you mean 'switch'"), "{m}");
        let e = Topology::parse("ring(8, 0GB/s, 500ns)")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'0GB/s' is zero; it must be > 0"), "{e}");
        assert!(Topology::parse("ring(8, 100GB/s)").is_err());
        assert!(Topology::parse("ring(8, 100GB/s, 5)").is_err());
        assert!(Topology::parse("").is_err());
        assert!(Topology::parse("ring(8, 1GB/s, 1ns, in-network)").is_err());
    }

    #[test]
    fn topology_lines_use_the_prefix_of_the_magnitude() {
        // Issue 21: 199898428.0906 kB/s is 199.8984280906 GB/s; 2142.85 ns is 2.14285 us.
        let d = Dim::new(
            DimKind::Switch,
            8,
            Bandwidth::new(199898428.0906e3),
            Seconds::new(2142.85e-9),
        )
        .unwrap();
        assert_eq!(d.to_string(), "switch(8, 199.8984280906 GB/s, 2.14285 us)");
        let back = Topology::parse(&d.to_string()).unwrap();
        assert_eq!(back.dims()[0].bandwidth.get(), d.bandwidth.get());
        assert_eq!(back.dims()[0].latency.get(), d.latency.get());
    }

    #[test]
    fn toml_form_denies_unknown_keys() {
        #[derive(Deserialize)]
        struct N {
            #[allow(dead_code)]
            dims: Vec<DimSpec>,
        }
        let ok =
            "[[dims]]\nkind = \"ring\"\nsize = 8\nbandwidth = \"100 GB/s\"\nlatency = \"500 ns\"\n";
        assert!(toml::from_str::<N>(ok).is_ok());
        let bad = ok.replace("latency", "latncy");
        let e = toml::from_str::<N>(&bad).err().unwrap().to_string();
        assert!(e.contains("latncy"), "{e}");
        let bare = ok.replace("\"100 GB/s\"", "100");
        assert!(toml::from_str::<N>(&bare).is_err());
    }
}

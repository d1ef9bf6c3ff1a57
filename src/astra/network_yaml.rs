//! ASTRA-sim's network YAML (`astra-network-analytical`, `NetworkParser.cpp`): exactly four
//! keys, each a list with one entry per dimension, innermost first:
//!
//! ```yaml
//! topology: [ Ring, Switch ]    # Ring | FullyConnected | Switch
//! npus_count: [ 4, 8 ]          # integers > 1
//! bandwidth: [ 200.0, 50.0 ]    # GB/s per link, 1 GB = 2^30 B (NetworkFunction.cpp)
//! latency: [ 500.0, 500.0 ]     # ns per hop
//! ```
//!
//! Any other key is an error that names the file and line (serde_yaml_ng's location).
//! [`AstraNetwork::to_yaml`] writes the same format back.

use crate::error::{Error, Result};
use crate::network::DimKind;
use serde::Deserialize;
use std::path::Path;

/// One ASTRA-sim network dimension, in ASTRA-sim's own units.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AstraDim {
    /// Building block.
    pub kind: DimKind,
    /// NPUs along the dimension (> 1 in files ASTRA-sim accepts; 1 is allowed here).
    pub npus: u32,
    /// Bandwidth of one link, GB/s with GB = 2^30 B.
    pub bandwidth_gbps: f64,
    /// Latency of one hop, ns.
    pub latency_ns: f64,
}

impl AstraDim {
    /// Link bandwidth in bytes per ns: β = bw · 2^30 / 1e9 (`NetworkFunction.cpp`).
    pub fn beta_bytes_per_ns(&self) -> f64 {
        self.bandwidth_gbps * (1u64 << 30) as f64 / 1e9
    }

    /// Hops between two NPUs whose coordinates in this dimension differ by `d` (d ≠ 0):
    /// Ring min(d, p−d) (bidirectional, shorter way round, `Ring.h`), FullyConnected 1,
    /// Switch 2 (NPU → switch → NPU), as `congestion_unaware/basic-topology`.
    pub fn hops(&self, d: u64) -> u64 {
        match self.kind {
            DimKind::Ring => {
                let p = self.npus as u64;
                let d = d % p.max(1);
                d.min(p - d)
            }
            DimKind::FullyConnected => 1,
            DimKind::Switch => 2,
        }
    }
}

/// A parsed ASTRA-sim network.
#[derive(Clone, Debug, PartialEq)]
pub struct AstraNetwork {
    /// Dimensions, innermost first.
    pub dims: Vec<AstraDim>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    topology: Vec<String>,
    npus_count: Vec<u32>,
    bandwidth: Vec<f64>,
    latency: Vec<f64>,
}

/// serde_yaml_ng's message made complete: the line of a duplicated key (the parser gives
/// none), and the expected shape instead of the internal type name.
fn yaml_message(text: &str, e: &serde_yaml_ng::Error) -> String {
    let msg = e.to_string();
    let msg = msg.replace(
        "struct Raw",
        "a mapping with the keys topology, npus_count, bandwidth and latency",
    );
    if msg.contains(" at line ") {
        return msg;
    }
    let dup = msg
        .strip_prefix("duplicate field `")
        .and_then(|r| r.split('`').next());
    let line = dup.and_then(|key| {
        let mut lines = text.lines().enumerate().filter(|(_, l)| {
            l.strip_prefix(key)
                .is_some_and(|r| r.trim_start().starts_with(':'))
        });
        lines.nth(1).map(|(i, _)| i + 1)
    });
    match (line, text.trim().is_empty()) {
        (Some(n), _) => format!("{msg} at line {n} (each key may appear once)"),
        (None, true) => format!("{msg}: the file is empty"),
        (None, false) => msg,
    }
}

impl AstraNetwork {
    /// Parses YAML text; `what` names the source in errors.
    pub fn parse(text: &str, what: &str) -> Result<AstraNetwork> {
        let file_err = |message: String| Error::File {
            path: what.into(),
            message,
        };
        let raw: Raw =
            serde_yaml_ng::from_str(text).map_err(|e| file_err(yaml_message(text, &e)))?;
        let n = raw.topology.len();
        if n == 0 {
            return Err(file_err("'topology' lists no dimension".into()));
        }
        for (key, len) in [
            ("npus_count", raw.npus_count.len()),
            ("bandwidth", raw.bandwidth.len()),
            ("latency", raw.latency.len()),
        ] {
            if len != n {
                return Err(file_err(format!(
                    "'{key}' has {len} entries but 'topology' has {n}; every list needs one entry per dimension"
                )));
            }
        }
        let mut dims = Vec::with_capacity(n);
        for i in 0..n {
            let kind = DimKind::parse(&raw.topology[i])
                .map_err(|e| file_err(format!("topology[{i}]: {e}")))?;
            let (npus, bw, lat) = (raw.npus_count[i], raw.bandwidth[i], raw.latency[i]);
            if npus == 0 {
                return Err(file_err(format!("npus_count[{i}] must be at least 1")));
            }
            if !(bw > 0.0 && bw.is_finite()) {
                return Err(file_err(format!(
                    "bandwidth[{i}] must be > 0 GB/s, got {bw}"
                )));
            }
            if !(lat >= 0.0 && lat.is_finite()) || lat.is_sign_negative() {
                return Err(file_err(format!("latency[{i}] must be ≥ 0 ns, got {lat}")));
            }
            let range = |r: crate::units::Range, key: String, text: String, si: f64| {
                r.check(&key, &text, si)
                    .map_err(|e| file_err(e.to_string()))
            };
            use crate::units::{BANDWIDTH_RANGE, SECONDS_RANGE};
            let gib = (1u64 << 30) as f64;
            range(
                BANDWIDTH_RANGE,
                format!("bandwidth[{i}]"),
                format!("{bw:?} GB/s"),
                bw * gib,
            )?;
            range(
                SECONDS_RANGE,
                format!("latency[{i}]"),
                format!("{lat:?} ns"),
                lat * 1e-9,
            )?;
            dims.push(AstraDim {
                kind,
                npus,
                bandwidth_gbps: bw,
                latency_ns: lat,
            });
        }
        let npus = dims
            .iter()
            .fold(1u128, |n, d| n.saturating_mul(u128::from(d.npus)));
        crate::limits::NPUS
            .check(npus, "npus_count")
            .map_err(|e| file_err(e.to_string()))?;
        Ok(AstraNetwork { dims })
    }

    /// Reads and parses a file.
    pub fn read(path: &Path) -> Result<AstraNetwork> {
        let text = crate::limits::read_text(path)?;
        Self::parse(&text, &path.display().to_string())
    }

    /// Total NPUs: Π npus_count.
    pub fn npus(&self) -> u64 {
        self.dims.iter().map(|d| d.npus as u64).product()
    }

    /// Coordinates of `rank` (mixed radix, dimension 0 fastest: `translate_address`).
    pub fn coords(&self, mut rank: u64, out: &mut [u64]) {
        for (i, d) in self.dims.iter().enumerate() {
            let p = d.npus as u64;
            if i < out.len() {
                out[i] = rank % p;
            }
            rank /= p;
        }
    }

    /// The dimension a message from `a` to `b` travels in (the first one where their
    /// coordinates differ) and its hop count; `None` when a == b.
    pub fn route(&self, a: u64, b: u64) -> Option<(usize, u64)> {
        let (mut a, mut b) = (a, b);
        for (i, d) in self.dims.iter().enumerate() {
            let p = d.npus as u64;
            let (ca, cb) = (a % p, b % p);
            if ca != cb {
                return Some((i, d.hops(ca.abs_diff(cb))));
            }
            a /= p;
            b /= p;
        }
        None
    }

    /// The YAML text of this network, in ASTRA-sim's format.
    pub fn to_yaml(&self) -> String {
        let list = |f: &dyn Fn(&AstraDim) -> String| {
            self.dims.iter().map(f).collect::<Vec<_>>().join(", ")
        };
        format!(
            "topology: [ {} ]\nnpus_count: [ {} ]\nbandwidth: [ {} ]  # GB/s (1 GB = 2^30 B)\nlatency: [ {} ]  # ns\n",
            list(&|d| d.kind.astra_name().to_string()),
            list(&|d| d.npus.to_string()),
            list(&|d| format!("{:?}", d.bandwidth_gbps)),
            list(&|d| format!("{:?}", d.latency_ns)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RS: &str = "topology: [ Ring, Switch ]\nnpus_count: [ 4, 8 ]\nbandwidth: [ 200.0, 50.0 ]\nlatency: [ 500.0, 500.0 ]\n";

    #[test]
    fn parses_and_round_trips() {
        let n = AstraNetwork::parse(RS, "n.yml").unwrap();
        assert_eq!(n.npus(), 32);
        assert_eq!(n.dims[1].kind, DimKind::Switch);
        assert_eq!(AstraNetwork::parse(&n.to_yaml(), "x").unwrap(), n);
        // 2^30 / 1e9 B/ns per GB/s.
        approx::assert_relative_eq!(n.dims[1].beta_bytes_per_ns(), 53.687091200);
    }

    #[test]
    fn routes_in_first_differing_dimension() {
        let n = AstraNetwork::parse(RS, "n.yml").unwrap();
        assert_eq!(n.route(0, 3), Some((0, 1))); // ring of 4: distance 3 = 1 hop back
        assert_eq!(n.route(0, 2), Some((0, 2)));
        assert_eq!(n.route(1, 5), Some((1, 2))); // switch: 2 hops
        assert_eq!(n.route(7, 7), None);
    }

    #[test]
    fn unknown_key_names_file_and_line() {
        let e = AstraNetwork::parse(&format!("{RS}links: [1]\n"), "net.yml")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("net.yml") && e.contains("links") && e.contains("line 5"),
            "{e}"
        );
    }

    #[test]
    fn mismatched_lengths_are_errors() {
        let bad = RS.replace("[ 4, 8 ]", "[ 4 ]");
        let e = AstraNetwork::parse(&bad, "n").unwrap_err().to_string();
        assert!(e.contains("npus_count"), "{e}");
    }
}
